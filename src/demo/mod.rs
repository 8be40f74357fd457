//! `tayga up --demo`: the built-in scenario (`scenario.rs`, pure), the loop that sends it to
//! ingest (`send.rs`) and the webhook sink the notifier delivers to (`sink.rs`). The demo
//! changes no daemon: it shortens detection settings in the configuration (`shorten`) and
//! adds the sink as a notifier target, and the daemons run as `serve all` runs them.

pub mod scenario;
pub mod send;
pub mod sink;

use crate::config::{Config, LogminerConfig};

/// A setting the demo shortened, for the output to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortcut {
    pub key: &'static str,
    pub was: u64,
    pub now: u64,
}

/// The demo's values: minute-long windows shortened so that every alert kind shows within
/// two minutes of the start (the shapes' warm-up within the backdated history, so the row
/// lock's new path is announced) (scenario.rs's timeline is tuned to them), and faster ticks so
/// the pages fill while one watches.
const SHORTCUTS: &[(&str, u64)] = &[
    ("logminer.tick_secs", 2),
    ("logminer.spike_baseline_min", 3),
    ("logminer.silence_baseline_min", 3),
    ("logminer.silence_min_active_minutes", 2),
    ("logminer.silence_after_min", 1),
    ("logminer.shapes.warmup_min", 3),
    ("assembler.idle_close_secs", 5),
    ("api.scrape_interval_secs", 5),
];

fn slot<'a>(config: &'a mut Config, key: &str) -> &'a mut u64 {
    match key {
        "logminer.tick_secs" => &mut config.logminer.tick_secs,
        "logminer.spike_baseline_min" => &mut config.logminer.spike_baseline_min,
        "logminer.silence_baseline_min" => &mut config.logminer.silence_baseline_min,
        "logminer.silence_min_active_minutes" => &mut config.logminer.silence_min_active_minutes,
        "logminer.silence_after_min" => &mut config.logminer.silence_after_min,
        "logminer.shapes.warmup_min" => &mut config.logminer.shapes.warmup_min,
        "assembler.idle_close_secs" => &mut config.assembler.idle_close_secs,
        "api.scrape_interval_secs" => &mut config.api.scrape_interval_secs,
        other => unreachable!("{other} is not a demo shortcut"),
    }
}

/// Applies the demo's shortcuts to `config`, except to keys the operator set (`is_set`:
/// from the file or the environment); returns what changed.
pub fn shorten(config: &mut Config, is_set: impl Fn(&str) -> bool) -> Vec<Shortcut> {
    let mut changed = Vec::new();
    for &(key, now) in SHORTCUTS {
        if is_set(key) {
            continue;
        }
        let value = slot(config, key);
        if *value != now {
            changed.push(Shortcut { key, was: *value, now });
            *value = now;
        }
    }
    changed
}

/// The logminer settings the demo runs with (by default), for the scenario's tests.
pub fn rules() -> LogminerConfig {
    let mut config = Config::default();
    shorten(&mut config, |_| false);
    config.logminer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortcuts_leave_what_the_operator_set() {
        let mut config = Config::default();
        config.logminer.tick_secs = 7;
        let changed = shorten(&mut config, |key| key == "logminer.tick_secs");
        assert_eq!(config.logminer.tick_secs, 7);
        assert_eq!(config.logminer.silence_after_min, 1);
        assert!(changed.iter().all(|s| s.key != "logminer.tick_secs"));
        assert_eq!(changed.len(), SHORTCUTS.len() - 1);
        assert!(changed.contains(&Shortcut { key: "logminer.silence_after_min", was: 5, now: 1 }));
    }
}
