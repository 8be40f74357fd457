//! The fuzz targets' short run in the suite, on the stable toolchain: every committed seed
//! (`fuzz/seeds/<target>/`) and every kept crash (`fuzz/regressions/<target>/`) through the
//! target's own check (`tayga::fuzz_checks`), then a fixed number of seeded mutations of
//! them (bit flips, byte edits, cuts, repeats, splices). Coverage-guided fuzzing needs
//! nightly and runs in scripts/fuzz.sh; this keeps its findings fixed and gives every
//! change a quick, repeatable pass over the same inputs (docs/reliability.md, *Fuzzing*).

use std::path::{Path, PathBuf};

use tayga::fuzz_checks::{Check, TARGETS};

/// Mutated inputs per target: a few seconds for all eight in a debug build.
const MUTATIONS: usize = 4000;

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut out = Vec::new();
    for dir in [root.join("seeds").join(target), root.join("regressions").join(target)] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            out.push((path, bytes));
        }
    }
    out.sort();
    out
}

/// xorshift64*: the same mutations on every run, so a finding reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        let byte = at.min(out.len().saturating_sub(1));
        match rng.below(7) {
            0 if !out.is_empty() => out[byte] ^= 1 << rng.below(8),
            1 if !out.is_empty() => out[byte] = rng.next() as u8,
            2 => out.insert(at, [0, 0xff, 0x7f, 0x80, b'\n', b'=', b'"'][rng.below(7)]),
            3 => {
                let end = (at + rng.below(16)).min(out.len());
                out.drain(at..end);
            }
            4 => out.truncate(at),
            5 => {
                let end = (at + rng.below(32)).min(out.len());
                let copy = out[at..end].to_vec();
                out.splice(at..at, copy);
            }
            _ => {
                let from = rng.below(other.len() + 1);
                out.splice(at.., other[from..].iter().copied());
            }
        }
    }
    out
}

/// Runs the check; a panic fails the test naming the input, and keeps a mutated input
/// under target/fuzz-findings/ to be copied into fuzz/regressions/.
fn run(target: &str, check: Check, input: &[u8], named: &str) {
    if std::panic::catch_unwind(|| check(input)).is_err() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-findings").join(target);
        std::fs::create_dir_all(&dir).unwrap();
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(input, &mut hasher);
        let file = dir.join(format!("{:016x}", std::hash::Hasher::finish(&hasher)));
        std::fs::write(&file, input).unwrap();
        panic!("{target}: {named} fails its check; the input is in {}", file.display());
    }
}

#[test]
fn every_seed_and_kept_crash_passes_and_so_do_their_mutations() {
    for &(target, check) in TARGETS {
        let inputs = inputs(target);
        assert!(inputs.len() >= 5, "{target}: {} seeds, the corpus is missing (fuzz/make_seeds.py)", inputs.len());
        for (path, bytes) in &inputs {
            run(target, check, bytes, &path.display().to_string());
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
        for i in 0..MUTATIONS {
            let input = &inputs[rng.below(inputs.len())].1;
            let other = &inputs[rng.below(inputs.len())].1;
            let mutated = mutate(&mut rng, input, other);
            run(target, check, &mutated, &format!("mutation {i}"));
        }
    }
}
