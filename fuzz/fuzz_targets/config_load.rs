//! The config loader (`tayga::config::Loaded::from_parts`): any `tayga.toml` text and any
//! environment must end in a configuration or in problems, each reported on a line of its
//! own; never a panic. Input: the file text, then after a NUL byte `NAME=value` lines of
//! environment.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use tayga::config::Loaded;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (file, env_text) = text.split_once('\0').unwrap_or((&text, ""));
    let env: BTreeMap<String, String> =
        env_text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    match Loaded::from_parts(Some(file), &env) {
        Ok(loaded) => {
            // A configuration that loaded passed its semantic checks; showing it works.
            let _ = loaded.problems();
        }
        Err(e) => assert!(!e.problems.is_empty(), "a refusal with no problem named"),
    }
});
