//! Prompt passes (docs/logminer.md, "Prompt passes"), pure: when a mined line can raise an
//! alert, the detection pass runs now rather than at the next tick.
//!
//! Two things a line can do make a pass worth running at once: it gives birth to a
//! template (a `new_template` alert), or it brings its template's count in its minute to
//! the spike threshold the last pass computed for it (a `spike`). Everything else (a spike
//! going on, a silence, republication) waits for the tick, as a line cannot make it happen
//! sooner. The pass that runs is the whole detection pass, so every rule of the periodic
//! one holds: ownership, watermarks, deterministic ids, stored before published.
//!
//! A burst (a deployment logging twenty new shapes in the same second) must cost one pass,
//! not twenty, and a flood must not turn into back-to-back passes: a request waits
//! [`DEBOUNCE`] for its companions, and passes start at least `min_gap` apart.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::detect::MINUTE_NS;

/// How long a request waits for the lines that usually come with it (the rest of the
/// batch, the other instances of a deployment) before its pass starts.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// When the next prompt pass is due.
#[derive(Debug)]
pub struct PromptPasses {
    min_gap: Duration,
    due: Option<Instant>,
    last_started: Option<Instant>,
}

impl PromptPasses {
    pub fn new(min_gap: Duration) -> PromptPasses {
        PromptPasses { min_gap, due: None, last_started: None }
    }

    /// A line asked for a pass at `now`: due after the debounce, and not before `min_gap`
    /// after the last pass started. A pass already due keeps its (earlier) time.
    pub fn request(&mut self, now: Instant) {
        let earliest = self.last_started.map_or(now, |last| last + self.min_gap);
        let at = (now + DEBOUNCE).max(earliest);
        self.due = Some(self.due.map_or(at, |due| due.min(at)));
    }

    /// When the pass asked for is due, if one was asked for.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    pub fn is_due(&self, now: Instant) -> bool {
        self.due.is_some_and(|due| due <= now)
    }

    /// A detection pass (prompt or periodic) started at `at`: it covers every line mined
    /// before, so any request is answered.
    pub fn started(&mut self, at: Instant) {
        self.due = None;
        self.last_started = Some(at);
    }
}

/// Which templates a spike could be raised for as their lines come in: per service, the
/// threshold of each template that has a baseline, from the last pass, and each watched
/// template's count in its current data minute. Kept per service so that a mined line is
/// looked up by its service name as it is, with no key built per line.
#[derive(Debug, Default)]
pub struct SpikeWatch {
    services: HashMap<String, ServiceWatch>,
}

#[derive(Debug, Default)]
struct ServiceWatch {
    thresholds: HashMap<u64, f64>,
    minutes: HashMap<u64, MinuteTally>,
}

#[derive(Debug, Clone, Copy)]
struct MinuteTally {
    minute: u64,
    count: u64,
    /// The threshold was reached in this minute already: asked once, not per line.
    asked: bool,
}

impl SpikeWatch {
    /// The thresholds the last pass computed for `service`'s templates (a template with no
    /// baseline cannot spike and is absent). They replace the service's previous ones.
    pub fn set_thresholds(&mut self, service: &str, thresholds: impl IntoIterator<Item = (u64, f64)>) {
        let watch = self.services.entry(service.to_string()).or_default();
        watch.thresholds = thresholds.into_iter().collect();
        let ServiceWatch { thresholds, minutes } = watch;
        minutes.retain(|template, _| thresholds.contains_key(template));
    }

    /// A line of `template_id` at `time_ns` was mined. True when this line brings its
    /// minute's count to the template's threshold (once per template and minute).
    pub fn hit(&mut self, service: &str, template_id: u64, time_ns: u64) -> bool {
        let Some(watch) = self.services.get_mut(service) else {
            return false;
        };
        let Some(&threshold) = watch.thresholds.get(&template_id) else {
            return false;
        };
        let minute = time_ns / MINUTE_NS;
        let tally = watch.minutes.entry(template_id).or_insert(MinuteTally { minute, count: 0, asked: false });
        if minute > tally.minute {
            *tally = MinuteTally { minute, count: 0, asked: false };
        } else if minute < tally.minute {
            // A late line of an earlier minute: the pass reads stored counts anyway.
            return false;
        }
        tally.count += 1;
        if tally.asked || (tally.count as f64) < threshold {
            return false;
        }
        tally.asked = true;
        true
    }

    /// Forgets `service` (it is no longer owned).
    pub fn forget(&mut self, service: &str) {
        self.services.remove(service);
    }

    /// Forgets everything (a new assignment).
    pub fn clear(&mut self) {
        self.services.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAP: Duration = Duration::from_millis(500);

    #[test]
    fn a_request_is_due_after_the_debounce() {
        let t0 = Instant::now();
        let mut p = PromptPasses::new(GAP);
        assert_eq!(p.due(), None);
        p.request(t0);
        assert_eq!(p.due(), Some(t0 + DEBOUNCE));
        assert!(!p.is_due(t0));
        assert!(p.is_due(t0 + DEBOUNCE));
    }

    #[test]
    fn a_burst_of_requests_costs_one_pass_at_the_first_ones_time() {
        let t0 = Instant::now();
        let mut p = PromptPasses::new(GAP);
        for ms in [0, 10, 50, 90] {
            p.request(t0 + Duration::from_millis(ms));
        }
        assert_eq!(p.due(), Some(t0 + DEBOUNCE), "later requests do not push the pass back");
    }

    #[test]
    fn passes_start_at_least_the_gap_apart() {
        let t0 = Instant::now();
        let mut p = PromptPasses::new(GAP);
        p.started(t0);
        assert_eq!(p.due(), None, "a pass answers every request before it");
        p.request(t0 + Duration::from_millis(20));
        assert_eq!(p.due(), Some(t0 + GAP));
        p.started(t0 + GAP);
        p.request(t0 + GAP + Duration::from_secs(3));
        assert_eq!(p.due(), Some(t0 + GAP + Duration::from_secs(3) + DEBOUNCE), "a quiet gap adds nothing");
    }

    #[test]
    fn a_spike_is_asked_for_once_when_the_minute_reaches_the_threshold() {
        let mut w = SpikeWatch::default();
        w.set_thresholds("web", [(7, 3.0)]);
        let minute = 100 * MINUTE_NS;
        assert!(!w.hit("web", 7, minute + 1));
        assert!(!w.hit("web", 7, minute + 2));
        assert!(w.hit("web", 7, minute + 3), "the third line reaches 3");
        assert!(!w.hit("web", 7, minute + 4), "asked once per minute");
        assert!(!w.hit("web", 7, minute - MINUTE_NS), "a late line of an earlier minute asks nothing");
        let next = minute + MINUTE_NS;
        assert!(!w.hit("web", 7, next));
        assert!(!w.hit("web", 7, next + 1));
        assert!(w.hit("web", 7, next + 2), "a new minute counts afresh");
    }

    #[test]
    fn a_template_without_a_threshold_never_asks() {
        let mut w = SpikeWatch::default();
        w.set_thresholds("web", [(7, 1.0)]);
        assert!(!w.hit("web", 8, 0), "no baseline, no spike");
        assert!(!w.hit("db", 7, 0), "thresholds are per service");
        w.set_thresholds("web", []);
        assert!(!w.hit("web", 7, 0), "a new pass replaces the service's thresholds");
        w.set_thresholds("web", [(7, 1.0)]);
        w.forget("web");
        assert!(!w.hit("web", 7, 0));
    }
}
