//! Property tests of the template miner: it never panics, it is deterministic, it keeps
//! to max_clusters, and a restored miner mines like the original.

use proptest::prelude::*;
use tayga::mine::{Masker, Miner, MiningConfig};

/// Lines built from log-like pieces (words, numbers, addresses, ids, punctuation,
/// non-ASCII), so the generated lines reach the masking rules and share templates.
fn log_line() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            "user",
            "login",
            "failed",
            "from",
            "port",
            "block",
            "blk_-42",
            "size",
            "=",
            "(",
            ")",
            "[",
            "]",
            ":",
            "/var/log/x",
            "http://a.b/c",
            "10.0.0.1:80",
            "::1",
            "0x1f",
            "<*>",
            "<...>",
            "<NUM>",
            "user=root",
            "a=b=c",
            "5.2",
            "KB",
            "Sat",
            "Jul",
            "µs",
            "日本",
            "-",
            "--",
            "\t",
            "'",
            "\"",
        ])
        .prop_map(str::to_string),
        "[0-9]{1,12}",
        "[a-z]{1,8}[0-9]{0,3}",
        "[ -~]{0,12}",
        any::<String>(),
    ];
    prop::collection::vec(piece, 0..14).prop_map(|v| v.join(" "))
}

fn config(max_clusters: usize, sim_th: f64) -> MiningConfig {
    let mut c = MiningConfig::default();
    c.drain.max_clusters = max_clusters;
    c.drain.sim_th = sim_th;
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_line_is_mined_without_panic(line in any::<String>(), other in log_line()) {
        let masker = Masker::default();
        let masked = masker.mask(&line);
        prop_assert!(!masked.contains("  "));
        let mut miner = Miner::new(MiningConfig::default()).unwrap();
        let r = miner.add("svc", &line);
        prop_assert!(r.count >= 1);
        miner.add("svc", &other);
        let again = miner.add("svc", &line);
        prop_assert!(again.count >= 1);
    }

    #[test]
    fn the_same_lines_give_the_same_ids(lines in prop::collection::vec(log_line(), 1..60), th in 0.3f64..1.0) {
        let run = |lines: &[String]| {
            let mut miner = Miner::new(config(1000, th)).unwrap();
            let ids: Vec<(u64, String)> = lines.iter().map(|l| {
                let r = miner.add("svc", l);
                (r.template_id, r.template.to_string())
            }).collect();
            let templates: Vec<_> = miner.templates("svc").map(|t| t.to_stored()).collect();
            (ids, templates)
        };
        prop_assert_eq!(run(&lines), run(&lines));
    }

    #[test]
    fn max_clusters_is_honoured(lines in prop::collection::vec(log_line(), 1..120), max in 1usize..8) {
        let mut miner = Miner::new(config(max, 0.85)).unwrap();
        for l in &lines {
            let r = miner.add("svc", l);
            let id = r.template_id;
            prop_assert!(miner.template_count("svc") <= max);
            prop_assert!(miner.templates("svc").any(|t| t.id == id));
        }
    }

    #[test]
    fn a_restored_miner_mines_like_the_original(
        learn in prop::collection::vec(log_line(), 0..60),
        check in prop::collection::vec(log_line(), 1..40),
        max in 2usize..50,
    ) {
        let mut original = Miner::new(config(max, 0.85)).unwrap();
        for l in &learn {
            original.add("svc", l);
        }
        let mut restored = Miner::new(config(max, 0.85)).unwrap();
        for t in original.templates("svc") {
            restored.restore("svc", t.to_stored());
        }
        for l in &check {
            let a = original.add("svc", l);
            let a = (a.template_id, a.template.to_string(), a.change.clone(), a.count, a.evicted);
            let b = restored.add("svc", l);
            let b = (b.template_id, b.template.to_string(), b.change.clone(), b.count, b.evicted);
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn masking_then_mining_equals_mining(lines in prop::collection::vec(log_line(), 1..30)) {
        let mut direct = Miner::new(MiningConfig::default()).unwrap();
        let mut split = Miner::new(MiningConfig::default()).unwrap();
        let masker = split.masker().clone();
        let mut buf = String::new();
        for l in &lines {
            let a = direct.add("svc", l);
            let a = (a.template_id, a.template.to_string());
            masker.mask_into(l, &mut buf);
            let b = split.add_masked("svc", &buf);
            prop_assert_eq!(a, (b.template_id, b.template.to_string()));
        }
    }
}
