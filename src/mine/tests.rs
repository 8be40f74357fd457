//! Tree behaviour, generalisation, restore and eviction, through the public API.

use super::*;

fn miner() -> Miner {
    Miner::new(MiningConfig::default()).unwrap()
}

/// The default, with the sibling merge on (`merge_siblings = 5`, what the evaluation
/// chose); the merge's tests say so, whatever the default becomes.
fn merging_config() -> MiningConfig {
    let mut cfg = MiningConfig::default();
    cfg.drain.merge_siblings = 5;
    cfg
}

fn merging_miner() -> Miner {
    Miner::new(merging_config()).unwrap()
}

fn with_drain(f: impl FnOnce(&mut DrainConfig)) -> Miner {
    let mut cfg = MiningConfig::default();
    f(&mut cfg.drain);
    Miner::new(cfg).unwrap()
}

#[test]
fn same_shape_joins_one_template() {
    let mut m = miner();
    let a = m.add("svc", "Received block blk_1 of size 67108864 from /10.0.0.1").template_id;
    let r = m.add("svc", "Received block blk_-2 of size 1024 from /10.0.0.9");
    assert_eq!(r.template_id, a);
    assert_eq!(r.template, "Received block blk_<ID> of size <NUM> from /<IP>");
    assert_eq!(r.change, Change::Unchanged);
    assert_eq!(r.count, 2);
}

#[test]
fn a_generalisation_keeps_the_birth_id() {
    let mut m = miner();
    let first = m.add("svc", "login of user alice from the web console succeeded");
    assert!(first.is_new());
    let born = first.template_id;
    assert_eq!(born, crate::identity::template_id("svc", "login of user alice from the web console succeeded"));
    let r = m.add("svc", "login of user bob from the web console succeeded");
    assert_eq!(r.template_id, born);
    assert_eq!(r.template, "login of user <*> from the web console succeeded");
    assert_eq!(r.change, Change::Generalised { previous: "login of user alice from the web console succeeded".into() });
    let r = m.add("svc", "login of user carol from the web console succeeded");
    assert_eq!((r.template_id, r.change), (born, Change::Unchanged));
}

#[test]
fn partial_wildcards_keep_punctuation() {
    let mut m = miner();
    m.add("svc", "connection from (alpha) closed by the remote peer after timeout");
    let r = m.add("svc", "connection from (beta) closed by the remote peer after timeout");
    assert_eq!(r.template, "connection from (<*>) closed by the remote peer after timeout");
    // A token that does not fit the partial wildcard widens it.
    let r = m.add("svc", "connection from gamma closed by the remote peer after timeout");
    assert_eq!(r.template, "connection from <*> closed by the remote peer after timeout");
}

#[test]
fn different_events_stay_apart() {
    let mut m = miner();
    let a = m.add("svc", "Deleting block blk_1 file /data/current/blk_1").template_id;
    let b = m.add("svc", "Verification succeeded for blk_2").template_id;
    let c = m.add("svc", "PacketResponder 1 for block blk_3 terminating").template_id;
    let d = m.add("svc", "PacketResponder 2 for block blk_4 terminating").template_id;
    assert_ne!(a, b);
    assert_ne!(b, c);
    assert_eq!(c, d);
    assert_eq!(m.template_count("svc"), 3);
}

#[test]
fn below_threshold_makes_a_new_template() {
    let mut m = miner();
    let a = m.add("svc", "disk sda is full now").template_id;
    let b = m.add("svc", "cpu core is hot today").template_id;
    assert_ne!(a, b);
}

#[test]
fn services_have_separate_trees_and_ids() {
    let mut m = miner();
    let a = m.add("a", "cache warmed up").template_id;
    let b = m.add("b", "cache warmed up").template_id;
    assert_ne!(a, b);
    assert_eq!(m.services().collect::<Vec<_>>(), ["a", "b"]);
    m.remove_service("a");
    assert_eq!(m.template_count("a"), 0);
}

#[test]
fn numeric_first_tokens_do_not_split_templates() {
    let mut m = miner();
    let a = m.add("svc", "node17 rebooted after a kernel crash, state restored").template_id;
    let b = m.add("svc", "node18 rebooted after a kernel crash, state restored");
    assert_eq!(b.template_id, a);
    assert_eq!(b.template, "<*> rebooted after a kernel crash, state restored");
}

#[test]
fn full_nodes_route_to_wildcards() {
    let mut m = with_drain(|d| d.max_children = 3);
    m.add("svc", "alpha starts the job now");
    m.add("svc", "beta starts the job now");
    // max_children 3 leaves room for two literal children and the `<*>` child: gamma
    // becomes a wildcard in its own template and is routed through `<*>`.
    let r = m.add("svc", "gamma starts the job now");
    assert_eq!(r.template, "<*> starts the job now");
    let gamma = r.template_id;
    let again = m.add("svc", "delta starts the job now");
    assert_eq!(again.template_id, gamma);
    // Lines with a branch of their own still find their template.
    let alpha = m.add("svc", "alpha starts the job now");
    assert_eq!(alpha.template, "alpha starts the job now");
}

#[test]
fn lru_eviction_honours_max_clusters() {
    let mut m = with_drain(|d| d.max_clusters = 2);
    let a = m.add("svc", "alpha one").template_id;
    let b = m.add("svc", "beta two three").template_id;
    m.add("svc", "alpha one"); // alpha is now the most recent
    let c = m.add("svc", "gamma four five six");
    assert_eq!(c.evicted, Some(b));
    let c = c.template_id;
    assert_eq!(m.template_count("svc"), 2);
    let ids: Vec<u64> = m.templates("svc").map(|t| t.id).collect();
    assert_eq!(ids, [a, c]);
    // The evicted template comes back with its old id.
    let back = m.add("svc", "beta two three");
    assert_eq!(back.template_id, b);
    assert!(back.is_new());
    assert_eq!(back.evicted, Some(a));
}

#[test]
fn the_service_mined_least_recently_is_forgotten_at_max_services() {
    let mut m = with_drain(|d| d.max_services = 2);
    let a = m.add("a", "alpha one").template_id;
    m.add("b", "beta two");
    m.add("a", "alpha one"); // a is now the more recent
    let c = m.add("c", "gamma three");
    let evicted = c.evicted_service.clone().expect("b is forgotten");
    assert_eq!(evicted.service, "b");
    assert_eq!(evicted.templates.iter().map(|t| (t.template.as_str(), t.count)).collect::<Vec<_>>(), [("beta two", 1)]);
    assert_eq!((m.service_count(), m.holds("a"), m.holds("b"), m.holds("c")), (2, true, false, true));
    // b comes back: a tree afresh, the same template id, and a (now least recent) goes.
    let back = m.add("b", "beta two");
    assert!(back.is_new());
    assert_eq!(back.template_id, evicted.templates[0].id);
    assert_eq!(back.evicted_service.map(|e| e.service), Some("a".to_string()));
    assert_eq!(m.service_count(), 2);
    // A line of a held service evicts nothing.
    assert_eq!(m.add("c", "gamma three").evicted_service, None);
    // Restoring more services than the bound keeps the most recently restored.
    let mut r = with_drain(|d| d.max_services = 2);
    for s in ["x", "y", "z"] {
        r.restore(s, StoredTemplate { id: a, template: "alpha one".into(), count: 1 });
    }
    assert_eq!(r.services().collect::<Vec<_>>(), ["y", "z"]);
}

#[test]
fn eviction_frees_tree_nodes() {
    let mut m = with_drain(|d| d.max_clusters = 4);
    for i in 0..500 {
        m.add("svc", &format!("word{} w{} x", char::from(b'a' + (i % 26) as u8), i));
        m.add("svc", &format!("unique{}z event {} of kind k{}", "q".repeat(i % 7 + 1), i, i % 3));
    }
    assert!(m.template_count("svc") <= 4);
    let nodes = m.services["svc"].tree.node_count();
    assert!(nodes <= 4 * 3, "{nodes} nodes for 4 templates");
}

fn replay(lines: &[&str], cfg: MiningConfig) {
    let mut original = Miner::new(cfg.clone()).unwrap();
    let (learn, check) = lines.split_at(lines.len() / 2);
    for l in learn {
        original.add("svc", l);
    }
    let mut restored = Miner::new(cfg).unwrap();
    for t in original.templates("svc") {
        restored.restore("svc", t.to_stored());
    }
    assert_eq!(
        restored.templates("svc").map(|t| t.to_stored()).collect::<Vec<_>>(),
        original.templates("svc").map(|t| t.to_stored()).collect::<Vec<_>>()
    );
    for l in check {
        let a = original.add("svc", l);
        let a = (a.template_id, a.template.to_string(), a.change, a.count, a.evicted);
        let b = restored.add("svc", l);
        let b = (b.template_id, b.template.to_string(), b.change, b.count, b.evicted);
        assert_eq!(a, b, "line {l:?}");
    }
}

const SAMPLE: &[&str] = &[
    "user alice logged in from web",
    "user bob logged in from web",
    "connection from 10.0.0.1 (alpha) closed",
    "connection from 10.0.0.2 (beta) closed",
    "disk sda is full now",
    "alpha starts the job now",
    "beta starts the job now",
    "gamma starts the job now",
    "delta starts the job now",
    "epsilon ends the job now",
    "user carol logged in from app",
    "connection from 10.0.0.3 () closed",
    "disk sdb is full now",
    "zeta starts the job now",
    "alpha starts the job now",
    "cpu core is hot today",
    "user dave logged out from web",
    "eta ends the job later",
];

#[test]
fn restore_matches_like_the_original() {
    replay(SAMPLE, MiningConfig::default());
    replay(SAMPLE, {
        let mut c = MiningConfig::default();
        c.drain.max_children = 3;
        c
    });
    replay(SAMPLE, {
        let mut c = MiningConfig::default();
        c.drain.max_clusters = 3;
        c
    });
    replay(SAMPLE, {
        let mut c = MiningConfig::default();
        c.drain.depth = 6;
        c.drain.sim_th = 0.3;
        c
    });
}

#[test]
fn restore_is_idempotent_and_keeps_counts() {
    let mut m = miner();
    let t = StoredTemplate { id: 7, template: "user <*> logged in".into(), count: 41 };
    m.restore("svc", t.clone());
    m.restore("svc", t);
    assert_eq!(m.template_count("svc"), 1);
    let r = m.add("svc", "user zoe logged in");
    assert_eq!((r.template_id, r.count, r.change), (7, 42, Change::Unchanged));
}

#[test]
fn a_line_equal_to_a_live_birth_template_joins_it() {
    let mut m = with_drain(|d| d.sim_th = 0.9);
    let born = m.add("svc", "a b c d e f g h i j").template_id;
    // Generalise most of the template away so the birth text itself falls below 0.9.
    m.restore("svc", StoredTemplate { id: born, template: "a <*> <*> <*> <*> <*> <*> <*> x y".into(), count: 1 });
    let r = m.add("svc", "a b c d e f g h i j");
    assert_eq!(r.template_id, born);
    assert_eq!(m.template_count("svc"), 1);
}

#[test]
fn empty_lines_have_a_template() {
    let mut m = miner();
    let a = m.add("svc", "").template_id;
    let b = m.add("svc", "   \t ").template_id;
    assert_eq!(a, b);
}

#[test]
fn config_round_trips_through_toml_defaults() {
    let cfg: MiningConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(cfg, MiningConfig::default());
    let cfg: MiningConfig = serde_json::from_str(r#"{"drain": {"sim_th": 0.7}}"#).unwrap();
    assert_eq!(cfg.drain.sim_th, 0.7);
    assert_eq!(cfg.drain.depth, DrainConfig::default().depth);
    assert!(serde_json::from_str::<MiningConfig>(r#"{"drain": {"simth": 0.7}}"#).is_err());
    let toml_text = "[drain]\nmax_clusters = 10\n[masking]\ndisable = [\"path\"]\n";
    let cfg: MiningConfig = toml::from_str(toml_text).unwrap();
    assert_eq!(cfg.drain.max_clusters, 10);
    assert_eq!(cfg.masking.disable, ["path"]);
}

#[test]
fn settings_split_templates() {
    let mut m = miner();
    let a = m.add("svc", "auth failure rhost=10.0.0.1 tty=ssh user=root").template_id;
    let b = m.add("svc", "auth failure rhost=10.0.0.2 tty=ssh user=guest").template_id;
    let c = m.add("svc", "auth failure rhost=somehost.example.com tty=ssh user=root");
    assert_ne!(a, b);
    assert_eq!(c.template_id, a);
    assert_eq!(c.template, "auth failure rhost=<*> tty=ssh user=root");
}

/// Mines `lines` and returns every line's *final* template id (a line of a template that
/// was later absorbed counts for the survivor, as `tayga mine` prints it), and the number
/// of templates born.
fn final_ids(m: &mut Miner, lines: &[String]) -> (Vec<u64>, usize) {
    let mut ids = Vec::with_capacity(lines.len());
    let mut alias: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut born = 0;
    for l in lines {
        let r = m.add("svc", l);
        born += usize::from(r.is_new());
        if r.is_new() {
            // Born again after being absorbed: a template of its own from now on.
            alias.remove(&r.template_id);
        }
        for a in r.absorbed() {
            alias.insert(*a, r.template_id);
        }
        ids.push(r.template_id);
    }
    let resolve = |mut id: u64| {
        let mut hops = 0;
        while let Some(&next) = alias.get(&id) {
            id = next;
            hops += 1;
            assert!(hops < 1000, "an alias cycle");
        }
        id
    };
    (ids.into_iter().map(resolve).collect(), born)
}

#[test]
fn a_template_that_generalised_absorbs_the_templates_it_now_covers() {
    // Values that came first were born as templates of their own; one that generalised
    // later (`jo77h` and `jo65h` differ only in digits) covers them.
    let lines = ["job di59lo finished", "job di59lo finished", "job ca25bu finished", "job jo77h finished"];
    let mut m = merging_miner();
    let ids: Vec<u64> = lines.iter().map(|l| m.add("svc", l).template_id).collect();
    let r = m.add("svc", "job jo65h finished");
    assert_eq!(r.template, "job <*> finished");
    assert_eq!(r.template_id, ids[3], "the template that generalised survives");
    let mut absorbed = vec![ids[0], ids[2]];
    absorbed.sort_unstable();
    assert_eq!(r.absorbed(), absorbed.as_slice());
    assert_eq!(r.count, 5, "no line is lost");
    assert_eq!(m.add("svc", "job di59lo finished").template_id, ids[3]);
    assert_eq!(m.templates("svc").count(), 1);

    // Off with the merge: plain Drain leaves them where they are.
    let mut plain = with_drain(|d| d.merge_siblings = 0);
    for l in lines {
        plain.add("svc", l);
    }
    let r = plain.add("svc", "job jo65h finished");
    assert!(matches!(r.change, Change::Generalised { .. }), "{:?}", r.change);
    assert_eq!(plain.templates("svc").count(), 3);
}

#[test]
fn siblings_that_differ_in_one_value_merge_without_an_announcement() {
    let mut m = merging_miner();
    let mut ids = Vec::new();
    let users = ["alice", "bob", "carol", "dave"];
    for user in users {
        let r = m.add("svc", &format!("Invalid user {user} from 10.0.0.1"));
        assert!(r.is_new(), "the threshold cannot see a variable in a 4-word line");
        ids.push(r.template_id);
    }
    let r = m.add("svc", "Invalid user erin from 10.0.0.9");
    assert!(!r.is_new(), "a merge never announces");
    assert_eq!(r.template, "Invalid user <*> from <IP>");
    assert_eq!(r.count, 5, "the survivor takes every count");
    let Change::Merged { absorbed, previous } = r.change.clone() else { panic!("{:?}", r.change) };
    // Equal counts: the smaller id survives.
    let survivor = *ids.iter().min().unwrap();
    assert_eq!(r.template_id, survivor);
    let survivor_user = users[ids.iter().position(|&i| i == survivor).unwrap()];
    assert_eq!(previous, format!("Invalid user {survivor_user} from <IP>"));
    let mut others: Vec<u64> = ids.iter().copied().filter(|&i| i != survivor).collect();
    others.sort_unstable();
    assert_eq!(absorbed, others);
    assert_eq!(m.template_count("svc"), 1);
    // Later values join without a birth; so do the absorbed templates' own lines.
    for user in ["frank", "bob"] {
        let r = m.add("svc", &format!("Invalid user {user} from 10.0.0.2"));
        assert_eq!((r.template_id, r.change.clone()), (survivor, Change::Unchanged));
    }
}

#[test]
fn events_that_differ_in_one_repeated_word_stay_apart() {
    // States that repeat before the next one first shows (a life cycle: started and
    // stopped, now and then paused and resumed between).
    let mut m = merging_miner();
    let mut ids = std::collections::BTreeSet::new();
    for round in 0..12 {
        let states: &[&str] =
            if round % 3 == 2 { &["Started", "Paused", "Resumed", "Stopped"] } else { &["Started", "Stopped"] };
        for state in states {
            ids.insert(m.add("svc", &format!("[instance: {round}] VM {state} (Lifecycle Event)")).template_id);
        }
    }
    assert_eq!(ids.len(), 4, "{:?}", m.templates("svc").collect::<Vec<_>>());
    // The limit of an online method: five states that first show one after another, each
    // once, look like five values of a variable, and merge.
    let mut m = merging_miner();
    for state in ["Started", "Paused", "Resumed", "Stopped", "Deleted"] {
        m.add("svc", &format!("[instance: 1] VM {state} (Lifecycle Event)"));
    }
    assert_eq!(m.template_count("svc"), 1);
    // A common value among rare ones does not hide them, nor do rare ones merge a
    // common one with a second common one.
    let mut m = merging_miner();
    for _ in 0..20 {
        m.add("svc", "auth failure tty=ssh user=root");
        m.add("svc", "auth failure tty=ssh user=guest");
    }
    assert_eq!(m.add("svc", "auth failure tty=ssh user=test").change, Change::New);
}

#[test]
fn the_first_token_is_never_merged_away() {
    let mut m = merging_miner();
    for daemon in ["cupsd", "syslogd", "klogd", "portmap", "hcid", "sdpd"] {
        assert!(m.add("svc", &format!("{daemon} startup succeeded")).is_new());
    }
}

/// Package names and versions, as a package manager logs them: versions of every
/// spelling (an epoch, a Debian revision, letters after the digits).
const PACKAGES: [(&str, &str); 10] = [
    ("libfoo", "1:2.39.5-0+deb12u3"),
    ("git-man", "2.5.0-1"),
    ("zlib1g", "3.0.16-1~deb12u1"),
    ("python3-setuptools", "1.2.13.dfsg-1"),
    ("libssl3", "252.38-1~deb12u1"),
    ("tzdata-legacy", "68.1.2-2"),
    ("libc-bin", "2.36-9+deb12u10"),
    ("openssl", "7.88.1-10+deb12u14"),
    ("curl", "20230311"),
    ("ca-certificates", "0.9.11"),
];

#[test]
fn words_that_hold_a_value_after_the_same_prefix_are_one_variable() {
    // `<NUM>:<NUM>.<NUM>.<NUM>-<NUM>+deb12u3` is a word (letters outside its
    // placeholders) and `<NUM>.<NUM>.<NUM>-<NUM>` a value: the masker found a value at the
    // same place in both, so they are one variable spelt two ways, not two events.
    let mut m = merging_miner();
    for (i, (name, version)) in PACKAGES.iter().enumerate() {
        let older = PACKAGES[(i + 3) % PACKAGES.len()].1;
        m.add("svc", &format!("Unpacking {name} ({version}) over ({older}) ..."));
    }
    let templates: Vec<String> = m.templates("svc").map(|t| t.template.to_string()).collect();
    assert_eq!(templates, ["Unpacking <*> (<*>) over (<*>) ..."]);
}

#[test]
fn the_first_word_after_a_time_is_the_subject_and_never_merged_away() {
    // Each line starts with a time, a value: the event is named by the first word after
    // it, which the sibling merge must not take for a variable however many packages
    // repeat the same four events.
    let mut m = merging_miner();
    let mut lines = Vec::new();
    for (i, (name, version)) in PACKAGES.iter().enumerate() {
        for event in [
            format!("install {name}:amd64 <none> {version}"),
            format!("status unpacked {name}:amd64 {version}"),
            format!("configure {name}:amd64 {version} <none>"),
            format!("status installed {name}:amd64 {version}"),
            format!("trigproc {name}:amd64 {version} <none>"),
        ] {
            lines.push(format!("2025-06-24 14:36:{i:02} {event}"));
        }
    }
    let (ids, _) = final_ids(&mut m, &lines);
    let mut by_subject: std::collections::BTreeMap<&str, std::collections::BTreeSet<u64>> = Default::default();
    for (line, id) in lines.iter().zip(&ids) {
        by_subject.entry(line.split(' ').nth(2).unwrap()).or_default().insert(*id);
    }
    // One template per subject (the two states of `status` may merge: they repeat
    // package after package), and no template shared by two subjects.
    for (subject, ids) in &by_subject {
        assert_eq!(ids.len(), 1, "{subject}: {:?}", m.templates("svc").collect::<Vec<_>>());
    }
    let distinct: std::collections::BTreeSet<u64> = by_subject.values().flatten().copied().collect();
    assert_eq!(distinct.len(), by_subject.len(), "{:?}", m.templates("svc").collect::<Vec<_>>());
}

#[test]
fn synthetic_corpus_groups_like_its_events() {
    let (lines, truth) = synthetic::corpus(42, 6000);
    let events = truth.iter().collect::<std::collections::BTreeSet<_>>().len();
    let (ids, born) = final_ids(&mut merging_miner(), &lines);
    let ga = synthetic::grouping_accuracy(&ids, &truth);
    let groups = ids.iter().collect::<std::collections::BTreeSet<_>>().len();
    let (off, off_born) = final_ids(&mut with_drain(|d| d.merge_siblings = 0), &lines);
    let ga_off = synthetic::grouping_accuracy(&off, &truth);
    let groups_off = off.iter().collect::<std::collections::BTreeSet<_>>().len();
    eprintln!("synthetic: GA {ga:.4} groups {groups}/{events} born {born}; without merging GA {ga_off:.4} groups {groups_off} born {off_born}");
    assert!(ga >= 0.99, "GA {ga:.4}, {groups} groups for {events} events");
    assert!(ga_off < 0.9, "the corpus must exercise the merge (GA {ga_off:.4} without it)");
}

#[test]
fn merging_never_loses_a_count_and_restores_exactly() {
    let (lines, _) = synthetic::corpus(7, 3000);
    let mut m = merging_miner();
    for l in &lines {
        m.add("svc", l);
    }
    assert_eq!(m.templates("svc").map(|t| t.count).sum::<u64>(), lines.len() as u64);
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    replay(&refs, merging_config());
    replay(&refs, {
        let mut c = merging_config();
        c.drain.max_clusters = 20;
        c
    });
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, ..Default::default() })]

    /// Shuffled, the same lines group almost the same way. Not exactly: an online miner
    /// decides on each line with what it has seen so far, so the order changes which
    /// value a template is born with, when the merge evidence is complete, and which
    /// lines a template had generalised over when a borderline line arrives.
    #[test]
    fn shuffled_lines_group_almost_the_same(seed in 0u64..1_000_000) {
        let (lines, truth) = synthetic::corpus(11, 3000);
        let (ordered, _) = final_ids(&mut merging_miner(), &lines);
        let mut order: Vec<usize> = (0..lines.len()).collect();
        let mut r = synthetic::Lcg(seed);
        for i in (1..order.len()).rev() {
            order.swap(i, r.below(i + 1));
        }
        let shuffled_lines: Vec<String> = order.iter().map(|&i| lines[i].clone()).collect();
        let (shuffled, _) = final_ids(&mut merging_miner(), &shuffled_lines);
        let mut back = vec![0u64; lines.len()];
        for (k, &i) in order.iter().enumerate() {
            back[i] = shuffled[k];
        }
        // Agreement of the two groupings, scored like GA with one as the truth.
        let as_truth: Vec<usize> = ordered.iter().map(|&id| id as usize).collect();
        let agree = synthetic::grouping_accuracy(&back, &as_truth);
        let ga = synthetic::grouping_accuracy(&back, &truth);
        proptest::prop_assert!(agree >= 0.98, "agreement {agree:.4}");
        proptest::prop_assert!(ga >= 0.98, "GA {ga:.4} shuffled");
    }
}

/// Remembering masked lines changes nothing: every result, with and without it, through
/// both entry points, with merges and evictions (a small `max_clusters`, a tiny memo that
/// is forgotten often) in play.
#[test]
fn remembered_lines_mine_exactly_as_without() {
    let (mut lines, _) = synthetic::corpus(3, 4000);
    // Part of the corpus three times more, in other orders: masked texts seen before.
    let again: Vec<String> =
        (1..4).flat_map(|k| (0..1500).map(move |i| (i * 7919 * k) % 1500)).map(|i| lines[i].clone()).collect();
    lines.extend(again);
    lines.extend(SAMPLE.iter().map(|l| l.to_string()));
    lines.extend(SAMPLE.iter().rev().map(|l| l.to_string()));
    // The last one evicts templates all the time, so it remembers little.
    for (cfg, evicting) in [(MiningConfig::default(), false), (merging_config(), false), {
        let mut c = merging_config();
        c.drain.max_clusters = 20;
        (c, true)
    }] {
        for memo in [1, 7, 1 << 14] {
            let mut plain = Miner::new(cfg.clone()).unwrap();
            let mut remembering = Miner::new(cfg.clone()).unwrap();
            remembering.remember_lines(memo);
            let masker = remembering.masker().clone();
            for (n, l) in lines.iter().enumerate() {
                let a = plain.add("svc", l);
                let a = (a.template_id, a.template.to_string(), a.change, a.count, a.evicted);
                let b =
                    if n % 3 == 0 { remembering.add("svc", l) } else { remembering.add_masked("svc", &masker.mask(l)) };
                let b = (b.template_id, b.template.to_string(), b.change, b.count, b.evicted);
                assert_eq!(a, b, "line {n} {l:?}, memo {memo}");
            }
            assert_eq!(
                plain.templates("svc").map(|t| t.to_stored()).collect::<Vec<_>>(),
                remembering.templates("svc").map(|t| t.to_stored()).collect::<Vec<_>>()
            );
            // The shortcut was taken, and often with room to remember.
            let hits = remembering.services["svc"].tree.memo_hits as usize;
            let expected = if memo > 100 && !evicting { lines.len() / 2 } else { 1 };
            assert!(hits >= expected, "{hits} lines remembered of {}, memo {memo}", lines.len());
        }
    }
}
