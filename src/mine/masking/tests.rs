use super::*;
use crate::mine::CustomRule;

fn m(line: &str) -> String {
    Masker::default().mask(line)
}

#[test]
fn numbers_are_masked_run_by_run() {
    assert_eq!(m("took 12 ms, progress 0.25"), "took <NUM> ms, progress <NUM>.<NUM>");
    assert_eq!(m("at 12:16:49 on 2013-10-17"), "at <HH>:<MM>:<SS> on <DATE>");
    assert_eq!(m("ratio 12:16 and 1-2-3"), "ratio <NUM>:<NUM> and <NUM>-<NUM>-<NUM>");
    assert_eq!(m("vCores:-27 boot = -107"), "vCores:<NUM> boot = <NUM>");
    assert_eq!(m("core.4900 (TID 1340)."), "core.<NUM> (TID <NUM>).");
}

#[test]
fn digits_inside_words_stay() {
    assert_eq!(m("v2 tty2 x86_64 subdir24 log4j"), "v2 tty2 x86_64 subdir24 log4j");
    assert_eq!(m("mapreduce.v2.api.MRClientProtocolPB"), "mapreduce.v2.api.MRClientProtocolPB");
}

#[test]
fn addresses_keep_their_shape() {
    assert_eq!(m("from /10.250.19.102:54106"), "from /<IP>:<NUM>");
    assert_eq!(m("10.251.30.85:50010:Got exception"), "<IP>:<NUM>:Got exception");
    assert_eq!(m("rhost=218.22.3.51 user=root"), "rhost=<IP> user=root");
    assert_eq!(m("proxy.cse.cuhk.edu.hk:5070 open"), "<HOST>:<NUM> open");
    assert_eq!(
        m("Old: msra-sa-41/10.190.173.170:9000 New: msra-sa-41:9000"),
        "Old: <HOST>/<IP>:<NUM> New: <HOST>:<NUM>"
    );
    assert_eq!(m("(lns-45-tou.adsl.proxad.net)"), "(<HOST>)");
    assert_eq!(m("at Client.call(Client.java:1475)"), "at Client.call(Client.java:<NUM>)");
    assert_eq!(m("PendingReds:0 org.apache.hadoop.Foo"), "PendingReds:<NUM> org.apache.hadoop.Foo");
    assert_eq!(m("peer fe80::1ff:fe23:4567:890a and ::1"), "peer <IP> and <IP>");
    assert_eq!(m("at 12:16:49"), "at <HH>:<MM>:<SS>");
    assert_eq!(m("hw 00:1a:2b:3c:4d:5e"), "hw <MAC>");
    assert_eq!(m("mail bob.smith@example.com now"), "mail <EMAIL> now");
}

#[test]
fn ids_keep_their_prefix() {
    assert_eq!(m("blk_-1781953582842324563 terminating"), "blk_<ID> terminating");
    assert_eq!(m("attempt_1445144423722_0020_m_000009_0"), "attempt_<ID>");
    assert_eq!(m("[DFSClient_NONMAPREDUCE_1537864556_1]"), "[DFSClient_NONMAPREDUCE_<ID>]");
    assert_eq!(m("part-00590. rdd_21_0"), "part-<ID>. rdd_<ID>");
    assert_eq!(m("instance b9000564-fe1a-409b-b8cc-1e88b294cd1d"), "instance <UUID>");
    assert_eq!(m("iar 00106570 dear 0247a8b8 mask 0x05"), "iar <NUM> dear <HEX> mask <HEX>");
    assert_eq!(m("deadbeef cafe12 cafe1234"), "deadbeef cafe12 <HEX>");
}

#[test]
fn paths_and_urls() {
    assert_eq!(m("file /mnt/hadoop/dfs/blk_1"), "file <PATH>");
    assert_eq!(m("at (/var/lib/nova/_base/a4): checking"), "at (<PATH>): checking");
    assert_eq!(m("Resolved host to /default-rack"), "Resolved host to /default-rack");
    assert_eq!(m("Input split: hdfs://host:9000/pjhe/test/1/file.txt:0+1"), "Input split: hdfs://<URL>");
    assert_eq!(m("see ./conf/app.toml and ~/x and C:\\Windows\\sys"), "see <PATH> and <PATH> and <PATH>");
    assert_eq!(m("\"GET /v2/54fadb/servers/detail HTTP/1.1\""), "\"GET <PATH> HTTP/<NUM>.<NUM>\"");
    assert_eq!(m("src/a.c:12"), "src/a.c:<NUM>");
}

#[test]
fn learned_wildcards_in_input_are_escaped() {
    assert_eq!(m("match <*> and <...> or a<*>b"), "match <\\*> and <\\...> or a<\\*>b");
    assert_eq!(Masker::new(&MaskingConfig { enabled: false, ..Default::default() }).unwrap().mask("<*>"), "<\\*>");
}

#[test]
fn dates() {
    assert_eq!(m("at Sat Jul  9 12:16:49 2005"), "at <HH>:<MM>:<SS>");
    assert_eq!(m("on 9 May, then"), "on <NUM> <DATE>, then");
    assert_eq!(m("May I help, Sun Microsystems"), "May I help, Sun Microsystems");
    assert_eq!(m("Sat Jul 9 and Mon"), "<DATE> <DATE> <NUM> and Mon");
}

#[test]
fn times_are_one_variable_whatever_their_format() {
    for t in [
        "2024-05-01T10:00:00Z",
        "2024-05-01T10:59:59.123Z",
        "2024-05-01T10:00:00.123456789+02:00",
        "2024-05-01T10:00:00-0700",
        "2024-05-01t10:00:00",
        "2024-05-01",
        "2024/05/01",
        "08:14:03",
        "8:14:03",
        "10:00:00,123",
        "10:00:00.5",
        "10/Oct/2000:13:55:36",
        "Dec  1 08:14:03",
        "Dec 1 08:14:03",
        "Sat Jul  9 12:16:49 2005",
        "Tue, 01 May 2024 10:00:00 GMT",
        "Tue May 1 10:00:00 UTC 2024",
        "2024-05-01 10:00:00,123",
        "2024-05-01 10:00:00 +0000",
    ] {
        let t = t.to_string();
        let p = if t.contains(':') { "<HH>:<MM>:<SS>" } else { "<DATE>" };
        assert_eq!(m(&format!("job started at {t} ok")), format!("job started at {p} ok"), "{t}");
        assert_eq!(m(&format!("[{t}] ok")), format!("[{p}] ok"), "{t}");
        assert_eq!(m(&format!("(at {t}).")), format!("(at {p})."), "{t}");
    }
    // Epoch seconds and milliseconds are numbers already: one variable.
    assert_eq!(m("ts 1714557600 ms 1714557600123 s 1714557600.123"), "ts <NUM> ms <NUM> s <NUM>.<NUM>");
    assert_eq!(m("ts=2024-05-01T10:00:00Z"), "ts=<HH>:<MM>:<SS>");
    // Not times: too few parts, out of range, or part of a word.
    assert_eq!(m("lifetime 00:05 at 25:61:00"), "lifetime <NUM>:<NUM> at <NUM>:<NUM>:<NUM>");
    assert_eq!(m("on 2024-13-01"), "on <NUM>-<NUM>-<NUM>");
    assert_eq!(m("Dec 1 was"), "<DATE> <NUM> was");
}

#[test]
fn an_hour_of_rfc3339_times_is_one_template() {
    let masker = Masker::default();
    let mut seen = std::collections::BTreeSet::new();
    for sec in (0..3600).step_by(7) {
        let (mm, ss) = (sec / 60, sec % 60);
        for line in [
            format!("heartbeat at 2024-05-01T10:{mm:02}:{ss:02}Z from worker"),
            format!("heartbeat at 2024-05-01T10:{mm:02}:{ss:02}.{:03}Z from worker", sec % 1000),
            format!("heartbeat at 2024-05-01T10:{mm:02}:{ss:02}.{:03}+02:00 from worker", sec % 1000),
        ] {
            seen.insert(masker.mask(&line));
        }
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["heartbeat at <HH>:<MM>:<SS> from worker"]);
}

#[test]
fn quantities_and_key_values() {
    assert_eq!(m("took 250ms, after 1h30m, 1.5s"), "took <DURATION>, after <DURATION>, <DURATION>");
    assert_eq!(m("phys_ram=64172MB disk 15GB"), "phys_ram=<SIZE> disk <SIZE>");
    assert_eq!(m("3rd 64bit"), "3rd 64bit");
    assert_eq!(m("(estimated size 5.2 KB, free 14 MB)"), "(estimated size <SIZE>, free <SIZE>)");
    assert_eq!(m("read 1396 bytes, 12 B"), "read <NUM> bytes, <SIZE>");
    assert_eq!(m("session=7f3a-b2 mode=strict tty=NODEVssh"), "session=<VALUE> mode=strict tty=NODEVssh");
    assert_eq!(m("type=40002,7163.0,old=6983.0"), "type=<NUM>,<NUM>.<NUM>,old=<NUM>.<NUM>");
}

#[test]
fn whitespace_is_normalised_and_non_ascii_survives() {
    assert_eq!(m("  a\t b  "), "a b");
    assert_eq!(m("größe 12 µ3 ü7"), "größe <NUM> µ3 ü7");
    assert_eq!(m(""), "");
}

#[test]
fn rules_can_be_disabled() {
    let cfg = MaskingConfig { disable: vec!["ip".into(), "num".into()], ..Default::default() };
    let masker = Masker::new(&cfg).unwrap();
    assert_eq!(masker.mask("from 10.0.0.1 took 12"), "from 10.0.0.1 took 12");
    assert_ne!(masker.version(), MASKING_VERSION);
    let unknown = MaskingConfig { disable: vec!["ipv9".into()], ..Default::default() };
    assert_eq!(Masker::new(&unknown).unwrap_err(), MaskingError::UnknownRule("ipv9".into()));
    let off = MaskingConfig { enabled: false, ..Default::default() };
    assert_eq!(Masker::new(&off).unwrap().mask("a  1"), "a 1");
}

#[test]
fn custom_rules_run_first() {
    let cfg = MaskingConfig {
        custom: vec![CustomRule { name: "ticket".into(), pattern: "TCK-#".into(), placeholder: "<TICKET>".into() }],
        ..Default::default()
    };
    let masker = Masker::new(&cfg).unwrap();
    assert_eq!(masker.mask("closed (TCK-1234), job 5"), "closed (<TICKET>), job <NUM>");
    let bad = |ph: &str, pat: &str| {
        let rule = CustomRule { name: "x".into(), pattern: pat.into(), placeholder: ph.into() };
        Masker::new(&MaskingConfig { custom: vec![rule], ..Default::default() }).is_err()
    };
    assert!(bad("<*>", "a*"));
    assert!(bad("TICKET", "a*"));
    assert!(bad("<T>", "a b"));
    assert!(bad("<T>", ""));
}

#[test]
fn version_is_stable_and_order_insensitive() {
    assert_eq!(Masker::default().version(), "tayga-mask-2");
    let a = MaskingConfig { disable: vec!["ip".into(), "num".into()], ..Default::default() };
    let b = MaskingConfig { disable: vec!["num".into(), "ip".into()], ..Default::default() };
    assert_eq!(Masker::new(&a).unwrap().version(), Masker::new(&b).unwrap().version());
}
