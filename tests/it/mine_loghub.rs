//! The mining accuracy goal of issue 5, as a regression guard: the default configuration of
//! `tayga mine` on the 8 Loghub-2k datasets shipped in ../shared, scored by the shared
//! scorer. Accuracy, not speed: speed lives in benches/drain.rs and docs/mining.md.

use std::path::{Path, PathBuf};
use std::process::Command;

fn shared() -> PathBuf {
    // CI puts shared/ beside the clone; a developer's checkout has it beside the repo too.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

fn python(args: &[&Path]) -> String {
    let output = Command::new("python3").args(args).output().expect("python3 runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn default_configuration_meets_the_loghub_goal() {
    let data = shared().join("data/loghub2k");
    let scorer = shared().join("tools/loghub_score.py");
    assert!(data.is_dir(), "the Loghub-2k data is missing at {}", data.display());
    let dir = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    let mut datasets: Vec<PathBuf> = std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().path()).collect();
    datasets.sort();
    for dataset in datasets {
        let name = dataset.file_name().unwrap().to_string_lossy().into_owned();
        let structured = dataset.join(format!("{name}_2k.log_structured.csv"));
        let messages = dir.path().join(format!("{name}.txt"));
        std::fs::write(&messages, python(&[&scorer, Path::new("extract"), &structured])).unwrap();
        let mined = Command::new(env!("CARGO_BIN_EXE_tayga")).arg("mine").arg(&messages).output().unwrap();
        assert!(mined.status.success(), "{}", String::from_utf8_lossy(&mined.stderr));
        let predictions = dir.path().join(format!("{name}.csv"));
        std::fs::write(&predictions, &mined.stdout).unwrap();
        let score = python(&[&scorer, Path::new("score"), &structured, &predictions]);
        // "GA 0.9975 PA 0.6120 lines 2000 groups 14/14"
        let words: Vec<&str> = score.split_whitespace().collect();
        let ga: f64 = words[1].parse().unwrap();
        let pa: f64 = words[3].parse().unwrap();
        results.push((name, ga, pa));
    }
    assert_eq!(results.len(), 8, "{results:?}");
    let n = results.len() as f64;
    let ga = results.iter().map(|r| r.1).sum::<f64>() / n;
    let pa = results.iter().map(|r| r.2).sum::<f64>() / n;
    eprintln!("{results:?}\naverage GA {ga:.4} PA {pa:.4}");
    assert!(ga >= 0.93, "average GA {ga:.4} < 0.93: {results:?}");
    assert!(pa >= 0.65, "average PA {pa:.4} < 0.65: {results:?}");
    for (name, ga, _) in &results {
        assert!(*ga >= 0.80, "{name}: GA {ga:.4} < 0.80");
    }
}
