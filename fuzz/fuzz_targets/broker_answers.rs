//! `tayga::fuzz_checks::broker_answers`: what it checks is said there, where the suite's replay
//! (tests/it/fuzz_replay.rs) runs the same check.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tayga::fuzz_checks::broker_answers(data));
