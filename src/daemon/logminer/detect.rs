//! The spike and silence rules (docs/logminer.md, "The alert rules"), pure: minute counts in, alerts out.
//! docs/logminer.md states the rules for operators; the thresholds are `[logminer]` keys.
//!
//! Time here is the service's data time: the clock of its partition (the newest log time
//! read from it), not the wall clock, so a replica catching up on a backlog judges each
//! minute by the logs of that minute and an idle consumer sees no false silence.
//!
//! - **Spike**: a template's distinct-log count in the current or the previous minute
//!   reaches `spike_factor` × its baseline and at least `spike_min_count`; the baseline is
//!   the mean count over the `spike_baseline_min` minutes before that minute (absent
//!   minutes count 0). A template not seen in that window has no baseline and does not
//!   spike: its first burst is announced as a new template. A spike starts at its first hot minute and lasts while a minute is
//!   hot; its id is [`alert_id`]`(spike, template, start)`. An ongoing spike is carried in
//!   [`Spikes`] (restored from `log_alerts` when a replica takes a service over), so it
//!   keeps its id across passes, restarts and hand-overs.
//! - **Silence**: a template seen in at least `silence_min_active_minutes` of the
//!   `silence_baseline_min` minutes up to its last log, with no log for
//!   `silence_after_min` minutes, while its service logged after that gap began. It starts
//!   the minute after the template's last log, which names it: the same silence gets the
//!   same id on any replica without any state.

use std::collections::{BTreeMap, HashMap};

use crate::config::LogminerConfig;
use crate::identity::alert_id;
use crate::store::logminer::MinuteCount;
use crate::store::AlertRow;
use crate::wire::alert::AlertKind;

pub use crate::time::MINUTE_NS;

/// The rule thresholds, from `[logminer]`.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub spike_factor: f64,
    pub spike_min_count: u64,
    pub spike_baseline_min: u64,
    pub silence_baseline_min: u64,
    pub silence_min_active_minutes: u64,
    pub silence_after_min: u64,
}

impl Rules {
    pub fn from_config(c: &LogminerConfig) -> Rules {
        Rules {
            spike_factor: c.spike_factor,
            spike_min_count: c.spike_min_count,
            spike_baseline_min: c.spike_baseline_min.max(1),
            silence_baseline_min: c.silence_baseline_min.max(1),
            silence_min_active_minutes: c.silence_min_active_minutes.max(1),
            silence_after_min: c.silence_after_min.max(1),
        }
    }

    /// How far back a pass must read minute counts, in minutes, for a silence that may be
    /// refreshed up to `ownership_window_min` after its template's last log.
    pub fn lookback_min(&self, ownership_window_min: u64) -> u64 {
        (self.spike_baseline_min + 2).max(ownership_window_min + self.silence_baseline_min + 1)
    }
}

/// One ongoing spike.
#[derive(Debug, Clone, PartialEq)]
pub struct Spike {
    pub alert_id: u64,
    pub first_at: u64,
    pub count: u64,
    pub baseline: f64,
    pub threshold: f64,
}

/// Ongoing spikes by template id.
pub type Spikes = HashMap<u64, Spike>;

/// What a pass decided for one service: alert versions to store (new or refreshed).
#[derive(Debug, Clone, PartialEq)]
pub struct Raised {
    pub kind: AlertKind,
    pub template_id: u64,
    pub alert_id: u64,
    pub first_at: u64,
    pub last_at: u64,
    pub count: u64,
    pub baseline: f64,
    pub threshold: f64,
}

impl Raised {
    pub fn to_row(&self, service: &str, template: &str, now_ns: u64) -> AlertRow {
        AlertRow {
            alert_id: self.alert_id,
            kind: self.kind.as_str().to_string(),
            service: service.to_string(),
            template_id: self.template_id,
            template: template.to_string(),
            first_at: self.first_at,
            last_at: self.last_at,
            count: self.count,
            baseline: self.baseline,
            threshold: self.threshold,
            stored_ns: now_ns,
            updated_ns: now_ns,
            resolved_at: 0,
            shape: String::new(),
        }
    }
}

/// Turns a stored spike alert back into an ongoing spike (a takeover).
pub fn spike_from_row(row: &AlertRow) -> Spike {
    Spike {
        alert_id: row.alert_id,
        first_at: row.first_at,
        count: row.count,
        baseline: row.baseline,
        threshold: row.threshold,
    }
}

/// Applies both rules to one service's minute counts at data time `clock_ns`. `spikes`
/// holds the service's ongoing spikes and is updated: a spike that is no longer hot ends
/// (its alert stays stored, no longer refreshed, so it turns inactive).
pub fn detect(rules: &Rules, counts: &[MinuteCount], clock_ns: u64, spikes: &mut Spikes) -> Vec<Raised> {
    let now_min = clock_ns / MINUTE_NS;
    let per_template = per_template(counts, now_min);
    let service_last_min = per_template.values().filter_map(|minutes| minutes.keys().next_back().copied()).max();
    let mut raised = Vec::new();
    let mut hot_templates = Vec::new();
    for (&template_id, minutes) in &per_template {
        if let Some(r) = spike(rules, template_id, minutes, now_min, clock_ns, spikes) {
            hot_templates.push(template_id);
            raised.push(r);
        }
        if let Some(r) = silence(rules, template_id, minutes, now_min, clock_ns, service_last_min) {
            raised.push(r);
        }
    }
    spikes.retain(|id, _| hot_templates.contains(id));
    raised
}

/// The spike threshold of the minute at data time `clock_ns`, per template that has a
/// baseline: what a prompt pass watches the incoming lines for (`prompt.rs`).
pub fn spike_thresholds(rules: &Rules, counts: &[MinuteCount], clock_ns: u64) -> Vec<(u64, f64)> {
    let now_min = clock_ns / MINUTE_NS;
    per_template(counts, now_min)
        .iter()
        .filter_map(|(&template_id, minutes)| Some((template_id, threshold_at(rules, minutes, now_min)?.1)))
        .collect()
}

/// Each template's counts by minute, up to minute `now_min`.
fn per_template(counts: &[MinuteCount], now_min: u64) -> BTreeMap<u64, BTreeMap<u64, u64>> {
    let mut per_template: BTreeMap<u64, BTreeMap<u64, u64>> = BTreeMap::new();
    for c in counts.iter().filter(|c| c.minute <= now_min && c.count > 0) {
        per_template.entry(c.template_id).or_default().insert(c.minute, c.count);
    }
    per_template
}

/// The baseline and threshold of minute `m`, set by the minutes before it; none without
/// history: a template's first burst is news (new_template), not a spike, otherwise every
/// template of a new service would spike at once.
fn threshold_at(rules: &Rules, minutes: &BTreeMap<u64, u64>, m: u64) -> Option<(f64, f64)> {
    let first = m.saturating_sub(rules.spike_baseline_min);
    let sum: u64 = minutes.range(first..m).map(|(_, c)| c).sum();
    if sum == 0 {
        return None;
    }
    let baseline = sum as f64 / rules.spike_baseline_min as f64;
    Some((baseline, (rules.spike_factor * baseline).max(rules.spike_min_count as f64)))
}

fn spike(
    rules: &Rules,
    template_id: u64,
    minutes: &BTreeMap<u64, u64>,
    now_min: u64,
    clock_ns: u64,
    spikes: &mut Spikes,
) -> Option<Raised> {
    let count_at = |m: u64| minutes.get(&m).copied().unwrap_or(0);
    // A minute is hot when its count reaches the threshold set by the minutes before it.
    let judge = |m: u64| {
        let (baseline, threshold) = threshold_at(rules, minutes, m)?;
        (count_at(m) as f64 >= threshold && count_at(m) > 0).then_some((m, count_at(m), baseline, threshold))
    };
    let hot: Vec<_> = [now_min.checked_sub(1), Some(now_min)].into_iter().flatten().filter_map(judge).collect();
    let (first_hot, _, baseline, threshold) = *hot.first()?;
    let peak = hot.iter().map(|h| h.1).max().unwrap_or(0);
    let spike = spikes.entry(template_id).or_insert_with(|| {
        let first_at = first_hot * MINUTE_NS;
        Spike { alert_id: alert_id(AlertKind::Spike, template_id, first_at), first_at, count: 0, baseline, threshold }
    });
    spike.count = spike.count.max(peak);
    Some(Raised {
        kind: AlertKind::Spike,
        template_id,
        alert_id: spike.alert_id,
        first_at: spike.first_at,
        last_at: clock_ns.max(spike.first_at),
        count: spike.count,
        baseline: spike.baseline,
        threshold: spike.threshold,
    })
}

fn silence(
    rules: &Rules,
    template_id: u64,
    minutes: &BTreeMap<u64, u64>,
    now_min: u64,
    clock_ns: u64,
    service_last_min: Option<u64>,
) -> Option<Raised> {
    let (&last_min, _) = minutes.iter().next_back()?;
    let gap_start = last_min + 1;
    // Quiet for the whole of `silence_after_min` complete minutes …
    if now_min < gap_start + rules.silence_after_min {
        return None;
    }
    // … while the service kept logging after the template should have.
    if service_last_min? < gap_start + rules.silence_after_min - 1 {
        return None;
    }
    let first = gap_start.saturating_sub(rules.silence_baseline_min);
    let active: Vec<u64> = minutes.range(first..gap_start).map(|(_, c)| *c).collect();
    if (active.len() as u64) < rules.silence_min_active_minutes {
        return None;
    }
    let first_at = gap_start * MINUTE_NS;
    Some(Raised {
        kind: AlertKind::Silence,
        template_id,
        alert_id: alert_id(AlertKind::Silence, template_id, first_at),
        first_at,
        last_at: clock_ns.max(first_at),
        count: 0,
        baseline: active.iter().sum::<u64>() as f64 / rules.silence_baseline_min as f64,
        threshold: rules.silence_after_min as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules() -> Rules {
        Rules::from_config(&LogminerConfig::default())
    }

    fn counts(template_id: u64, minutes: impl IntoIterator<Item = (u64, u64)>) -> Vec<MinuteCount> {
        minutes
            .into_iter()
            .map(|(minute, count)| MinuteCount { service: "s".into(), template_id, minute, count })
            .collect()
    }

    const NOW: u64 = 1000;

    fn at(minute: u64, second: u64) -> u64 {
        minute * MINUTE_NS + second * 1_000_000_000
    }

    #[test]
    fn a_burst_over_five_times_the_baseline_is_a_spike_that_keeps_its_id() {
        let mut c = counts(7, (NOW - 30..NOW).map(|m| (m, 4)));
        c.extend(counts(7, [(NOW, 20)]));
        let mut spikes = Spikes::new();
        let r = detect(&rules(), &c, at(NOW, 10), &mut spikes);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, AlertKind::Spike);
        assert_eq!(r[0].first_at, NOW * MINUTE_NS);
        assert_eq!(r[0].alert_id, alert_id(AlertKind::Spike, 7, NOW * MINUTE_NS));
        assert_eq!((r[0].baseline, r[0].threshold, r[0].count), (4.0, 20.0, 20));

        // Next minute: still hot through the previous minute; same id, later last_at.
        let r2 = detect(&rules(), &c, at(NOW + 1, 5), &mut spikes);
        assert_eq!(r2[0].alert_id, r[0].alert_id);
        assert_eq!(r2[0].last_at, at(NOW + 1, 5));
        // Two minutes on with nothing new: over, and forgotten.
        assert!(detect(&rules(), &c, at(NOW + 2, 0), &mut spikes).iter().all(|r| r.kind != AlertKind::Spike));
        assert!(spikes.is_empty());
    }

    #[test]
    fn below_the_factor_or_the_minimum_count_is_no_spike() {
        let mut c = counts(7, (NOW - 30..NOW).map(|m| (m, 4)));
        c.extend(counts(7, [(NOW, 19)]));
        assert!(detect(&rules(), &c, at(NOW, 10), &mut Spikes::new()).is_empty());
        // A template with no history has no baseline: no spike however many lines.
        assert!(detect(&rules(), &counts(8, [(NOW, 500)]), at(NOW, 10), &mut Spikes::new()).is_empty());
        // A quiet template (1 line in 30 minutes) needs spike_min_count (20) lines in a minute.
        assert!(detect(&rules(), &counts(8, [(NOW - 20, 1), (NOW, 19)]), at(NOW, 10), &mut Spikes::new()).is_empty());
        assert_eq!(detect(&rules(), &counts(8, [(NOW - 20, 1), (NOW, 20)]), at(NOW, 10), &mut Spikes::new()).len(), 1);
    }

    #[test]
    fn the_watched_threshold_is_the_count_at_which_detect_raises_the_spike() {
        let history = counts(7, (NOW - 30..NOW).map(|m| (m, 4)));
        assert_eq!(spike_thresholds(&rules(), &history, at(NOW, 10)), vec![(7, 20.0)]);
        let with_now = |n| {
            let mut c = history.clone();
            c.extend(counts(7, [(NOW, n)]));
            detect(&rules(), &c, at(NOW, 10), &mut Spikes::new()).len()
        };
        assert_eq!((with_now(19), with_now(20)), (0, 1));
        assert!(spike_thresholds(&rules(), &counts(8, [(NOW, 500)]), at(NOW, 10)).is_empty(), "no history");
    }

    #[test]
    fn a_restored_spike_keeps_its_id_even_when_the_minutes_say_otherwise() {
        let mut spikes = Spikes::new();
        let restored =
            Spike { alert_id: 42, first_at: (NOW - 5) * MINUTE_NS, count: 90, baseline: 1.0, threshold: 20.0 };
        spikes.insert(7, restored.clone());
        let r = detect(&rules(), &counts(7, [(NOW - 3, 1), (NOW, 30)]), at(NOW, 1), &mut spikes);
        assert_eq!((r[0].alert_id, r[0].first_at, r[0].count), (42, restored.first_at, 90));
    }

    #[test]
    fn a_steady_template_that_stops_while_its_service_logs_is_a_silence() {
        // Template 1 logged every minute for 30 minutes up to NOW-10; template 2 goes on.
        let mut c = counts(1, (NOW - 40..NOW - 10).map(|m| (m, 3)));
        c.extend(counts(2, (NOW - 40..=NOW).map(|m| (m, 1))));
        let r = detect(&rules(), &c, at(NOW, 30), &mut Spikes::new());
        assert_eq!(r.len(), 1, "{r:?}");
        let s = &r[0];
        assert_eq!((s.kind, s.template_id, s.first_at), (AlertKind::Silence, 1, (NOW - 10) * MINUTE_NS));
        assert_eq!(s.alert_id, alert_id(AlertKind::Silence, 1, (NOW - 10) * MINUTE_NS));
        assert_eq!(s.baseline, 3.0);
        // Refreshed later with the same id while the service logs.
        let later = detect(&rules(), &c, at(NOW + 3, 0), &mut Spikes::new());
        assert_eq!(later[0].alert_id, s.alert_id);
    }

    #[test]
    fn no_silence_when_the_service_is_quiet_too_or_the_template_was_not_steady_or_not_long_gone() {
        let only = counts(1, (NOW - 40..NOW - 10).map(|m| (m, 3)));
        assert!(detect(&rules(), &only, at(NOW, 0), &mut Spikes::new()).is_empty(), "the whole service is quiet");
        let mut sparse = counts(1, (NOW - 40..NOW - 10).step_by(3).map(|m| (m, 3)));
        sparse.extend(counts(2, [(NOW, 1)]));
        assert!(detect(&rules(), &sparse, at(NOW, 0), &mut Spikes::new()).is_empty(), "not steady");
        let mut recent = counts(1, (NOW - 33..NOW - 3).map(|m| (m, 3)));
        recent.extend(counts(2, [(NOW, 1)]));
        assert!(detect(&rules(), &recent, at(NOW, 0), &mut Spikes::new()).is_empty(), "quiet for only 3 minutes");
    }

    proptest! {
        /// Whatever the counts, ids are a function of kind, template and start, the same
        /// counts give the same alerts, and a spike never outlives its heat.
        #[test]
        fn detection_is_deterministic(
            cells in proptest::collection::vec((0u64..3, 900u64..1001, 0u64..60), 0..200),
            second in 0u64..60,
        ) {
            let c: Vec<MinuteCount> = cells.iter()
                .map(|(t, m, n)| MinuteCount { service: "s".into(), template_id: *t, minute: *m, count: *n })
                .collect();
            let mut a = Spikes::new();
            let mut b = Spikes::new();
            let ra = detect(&rules(), &c, at(NOW, second), &mut a);
            let rb = detect(&rules(), &c, at(NOW, second), &mut b);
            prop_assert_eq!(&ra, &rb);
            for r in &ra {
                prop_assert_eq!(r.alert_id, alert_id(r.kind, r.template_id, r.first_at));
                prop_assert!(r.first_at <= r.last_at);
            }
            prop_assert_eq!(a.len(), ra.iter().filter(|r| r.kind == AlertKind::Spike).count());
        }
    }
}
