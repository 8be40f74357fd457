//! The shape rules (docs/alerts.md, "Shape alerts"), pure: what the stored stories say about
//! each endpoint (a root service and root operation) in, alerts out. The thresholds are the
//! `[logminer.shapes]` keys; `shape_pass.rs` feeds the rules from ClickHouse.
//!
//! A story's fingerprint hashes the *set* of its call edges, so a fan-out of any width is
//! one shape, while an optional call (a cache miss, a retry, a feature flag) is another.
//! The rules must therefore tell a genuinely new path from the branches an endpoint always
//! had and from rare paths:
//!
//! - **new_shape**: a path first seen after `watermark − evidence_window` (so a shape
//!   still gathering evidence when the watermark moved is judged again, and one seen just
//!   before a stop is judged by the next owner), when
//!   - its endpoint was *warm* at that first sighting: seen for `warmup_min` minutes and
//!     `warmup_traces` traces before it (a fresh install or a new endpoint learns its
//!     branches instead of announcing them);
//!   - it has *evidence*: within `evidence_window_min` minutes of its first sighting it took
//!     at least `min_count` traces and `min_share` of the endpoint's traces (a rare branch,
//!     a one-off partial trace, never qualifies);
//!   - the endpoint's *rate limit* allows: at most `max_new_per_hour` new shapes per endpoint
//!     within an hour; the rest wait (counted), and are dropped once out of the window.
//!
//!   Its alert names the edges it adds and removes against the endpoint's usual shape (its
//!   most frequent one over the history). The id names only the fingerprint, which names
//!   its endpoint (the root edge is part of the set): a shape is new once, whoever judges.
//! - **shape_slowdown**: a fingerprint's p95 duration over the last `slowdown_window_min`
//!   minutes reaches `slowdown_factor` × its p95 over the `slowdown_baseline_min` minutes
//!   before, and exceeds it by at least `slowdown_min_delta_ms`, with at least
//!   `slowdown_min_count` traces in the window and in the baseline. An ongoing slowdown
//!   (stored, still active) keeps its id and start, and is judged against the threshold it
//!   was raised with: the baseline right behind the window soon holds the slowdown's own
//!   slow traces (5 % of them lift its p95), and judged against it a slowdown that goes on
//!   ended within minutes, as if the shape had recovered. It ends when the window's p95 is
//!   back under that threshold (or the window has too few traces to tell). A new one is
//!   named by the minute its window began.
//!
//! Time: a story's first sighting is its start (data time); the slowdown window ends at the
//! pass's wall clock, as stories are stored within `assembler.idle_close_secs` of their
//! trace's last span, far inside any window worth judging.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::identity::{alert_id, new_path_subject};
use crate::store::AlertRow;
use crate::wire::alert::{AlertKind, ShapeChange};

use crate::time::HOUR_NS;
pub use crate::time::MINUTE_NS;
const MS_NS: f64 = 1_000_000.0;

/// The thresholds, from `[logminer.shapes]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapeRules {
    pub history_hours: u64,
    pub warmup_min: u64,
    pub warmup_traces: u64,
    pub evidence_window_min: u64,
    pub min_count: u64,
    pub min_share: f64,
    pub max_new_per_hour: u64,
    pub slowdown_factor: f64,
    pub slowdown_min_delta_ms: u64,
    pub slowdown_window_min: u64,
    pub slowdown_baseline_min: u64,
    pub slowdown_min_count: u64,
}

impl ShapeRules {
    pub fn from_config(c: &crate::config::ShapesConfig) -> ShapeRules {
        ShapeRules {
            history_hours: c.history_hours.max(1),
            warmup_min: c.warmup_min,
            warmup_traces: c.warmup_traces,
            evidence_window_min: c.evidence_window_min.max(1),
            min_count: c.min_count.max(1),
            min_share: c.min_share,
            max_new_per_hour: c.max_new_per_hour,
            slowdown_factor: c.slowdown_factor,
            slowdown_min_delta_ms: c.slowdown_min_delta_ms,
            slowdown_window_min: c.slowdown_window_min.max(1),
            slowdown_baseline_min: c.slowdown_baseline_min.max(1),
            slowdown_min_count: c.slowdown_min_count.max(1),
        }
    }

    pub fn evidence_window_ns(&self) -> u64 {
        self.evidence_window_min.saturating_mul(MINUTE_NS)
    }

    /// Where a pass's minute counts must start for the candidates after `watermark_ns`:
    /// one evidence window before the watermark, and the warm-up before that, on a minute.
    pub fn minutes_since(&self, watermark_ns: u64) -> u64 {
        let back = self.evidence_window_min.saturating_add(self.warmup_min).saturating_mul(MINUTE_NS);
        watermark_ns.saturating_sub(back) / MINUTE_NS * MINUTE_NS
    }

    pub fn history_since(&self, clock_ns: u64) -> u64 {
        clock_ns.saturating_sub(self.history_hours.saturating_mul(HOUR_NS))
    }
}

/// An endpoint: the root service and root operation of its traces.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub service: String,
    pub operation: String,
}

/// One fingerprint of an endpoint over the history window.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeSeen {
    pub fingerprint: u64,
    pub first_seen_ns: u64,
    /// Traces over the history window.
    pub traces: u64,
    pub edges: Vec<String>,
    /// A trace of this shape, for people to open.
    pub trace_id: String,
}

/// One fingerprint's traces in one minute (`minute` = nanoseconds / 60 s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapeMinute {
    pub fingerprint: u64,
    pub minute: u64,
    pub traces: u64,
}

/// One endpoint as a pass reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointShapes {
    pub shapes: Vec<ShapeSeen>,
    /// Per fingerprint and minute, from a minute before every candidate's first sighting
    /// ([`ShapeRules::minutes_since`]) on.
    pub minutes: Vec<ShapeMinute>,
}

/// A new path the rules announce.
#[derive(Debug, Clone, PartialEq)]
pub struct NewShape {
    pub alert_id: u64,
    /// The path's most frequent shape: what the alert shows and diffs.
    pub fingerprint: u64,
    pub first_seen_ns: u64,
    /// The path's traces within the evidence window (every shape with its new edges), and
    /// the endpoint's.
    pub traces: u64,
    pub endpoint_traces: u64,
    pub change: ShapeChange,
}

/// What the new-shape rule decided for one endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewShapes {
    pub raised: Vec<NewShape>,
    /// Paths with evidence held back by the rate limit.
    pub held_back: usize,
    /// Paths first seen while the endpoint was warming up (learnt, not announced).
    pub warming: usize,
    /// Candidate shapes made only of edges the endpoint took before: a new combination of
    /// its branches, or a call left out (not announced).
    pub recombined: usize,
}

/// A change of path: the edges a candidate shape took that no shape of the endpoint took
/// before it, and every shape that takes them all (however it combines them with the
/// endpoint's other branches).
#[derive(Debug, Clone, PartialEq)]
struct Novelty<'a> {
    alert_id: u64,
    new_edges: Vec<String>,
    shapes: Vec<&'a ShapeSeen>,
    first_seen_ns: u64,
}

/// The candidates' novelties, oldest first, and how many candidates brought no new edge.
/// A shape's new edges are judged against the shapes first seen before it, never against
/// the watermark, so every pass and every replica names the same change alike.
fn novelties<'a>(
    rules: &ShapeRules,
    endpoint: &Endpoint,
    shapes: &'a [ShapeSeen],
    watermark_ns: u64,
) -> (Vec<Novelty<'a>>, usize) {
    let since = watermark_ns.saturating_sub(rules.evidence_window_ns());
    let mut by_time: Vec<&ShapeSeen> = shapes.iter().collect();
    by_time.sort_by_key(|s| (s.first_seen_ns, s.fingerprint));
    let mut known: BTreeSet<&str> = BTreeSet::new();
    let mut found: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    let mut recombined = 0;
    let mut i = 0;
    while i < by_time.len() {
        // Shapes first seen at the same instant do not know each other.
        let same: Vec<&ShapeSeen> =
            by_time[i..].iter().take_while(|s| s.first_seen_ns == by_time[i].first_seen_ns).copied().collect();
        for shape in same.iter().filter(|s| s.first_seen_ns > since) {
            let new_edges: BTreeSet<String> =
                shape.edges.iter().filter(|e| !known.contains(e.as_str())).cloned().collect();
            if new_edges.is_empty() {
                recombined += 1;
            } else {
                found.entry(new_edges.into_iter().collect()).or_insert(shape.first_seen_ns);
            }
        }
        known.extend(same.iter().flat_map(|s| s.edges.iter().map(String::as_str)));
        i += same.len();
    }
    let mut out: Vec<Novelty<'a>> = found
        .into_iter()
        .map(|(new_edges, first_seen_ns)| Novelty {
            alert_id: new_shape_id(endpoint, &new_edges),
            shapes: shapes.iter().filter(|s| new_edges.iter().all(|e| s.edges.contains(e))).collect(),
            first_seen_ns,
            new_edges,
        })
        .collect();
    out.sort_by_key(|n| (n.first_seen_ns, n.alert_id));
    (out, recombined)
}

/// A path is new once, whoever judges it and whenever: its id names the endpoint and the
/// edges it took for the first time.
pub fn new_shape_id(endpoint: &Endpoint, new_edges: &[String]) -> u64 {
    alert_id(AlertKind::NewShape, new_path_subject(&endpoint.service, &endpoint.operation, new_edges), 0)
}

/// The ids the new-shape rule may raise for one endpoint at `watermark_ns`: what a pass
/// looks up as announced before.
pub fn candidate_ids(rules: &ShapeRules, endpoint: &Endpoint, shapes: &EndpointShapes, watermark_ns: u64) -> Vec<u64> {
    novelties(rules, endpoint, &shapes.shapes, watermark_ns).0.iter().map(|n| n.alert_id).collect()
}

/// The new-shape rule for one endpoint. `announced` holds the ids already stored (any
/// replica, any time); `raised_last_hour` how many new paths of this endpoint were
/// announced within the last hour.
pub fn new_shapes(
    rules: &ShapeRules,
    endpoint: &Endpoint,
    shapes: &EndpointShapes,
    watermark_ns: u64,
    announced: &HashSet<u64>,
    raised_last_hour: u64,
) -> NewShapes {
    let (novel, recombined) = novelties(rules, endpoint, &shapes.shapes, watermark_ns);
    let mut out = NewShapes { recombined, ..Default::default() };
    let Some(endpoint_first) = shapes.shapes.iter().map(|s| s.first_seen_ns).min() else { return out };
    let by_minute = per_minute(&shapes.minutes);
    let total: u64 = shapes.shapes.iter().map(|s| s.traces).sum();
    let mut budget = rules.max_new_per_hour.saturating_sub(raised_last_hour);
    for path in novel.iter().filter(|n| !announced.contains(&n.alert_id)) {
        let first_minute = path.first_seen_ns / MINUTE_NS;
        let since_first: u64 = by_minute.range(first_minute..).map(|(_, m)| m.values().sum::<u64>()).sum();
        let before = total.saturating_sub(since_first);
        let members: HashSet<u64> = path.shapes.iter().map(|s| s.fingerprint).collect();
        let others: Vec<ShapeSeen> =
            shapes.shapes.iter().filter(|s| !members.contains(&s.fingerprint)).cloned().collect();
        let usual = usual_shape(&others);
        let warm = path.first_seen_ns >= endpoint_first.saturating_add(rules.warmup_min.saturating_mul(MINUTE_NS))
            && before >= rules.warmup_traces;
        let Some(usual) = usual.filter(|_| warm) else {
            out.warming += 1;
            continue;
        };
        let window = first_minute..first_minute + rules.evidence_window_min;
        let (traces, endpoint_traces) = by_minute.range(window).fold((0, 0), |(f, e), (_, m)| {
            let of_path: u64 = m.iter().filter(|(fp, _)| members.contains(fp)).map(|(_, c)| c).sum();
            (f + of_path, e + m.values().sum::<u64>())
        });
        let share = if endpoint_traces == 0 { 0.0 } else { traces as f64 / endpoint_traces as f64 };
        if traces < rules.min_count || share < rules.min_share {
            continue;
        }
        if budget == 0 {
            out.held_back += 1;
            continue;
        }
        budget -= 1;
        let shown = usual_shape(&path.shapes.iter().map(|s| (*s).clone()).collect::<Vec<_>>())
            .cloned()
            .expect("a path has a shape");
        let mut change = change(&shown, usual, share, None);
        change.new_edges = path.new_edges.clone();
        out.raised.push(NewShape {
            alert_id: path.alert_id,
            fingerprint: shown.fingerprint,
            first_seen_ns: path.first_seen_ns,
            traces,
            endpoint_traces,
            change,
        });
    }
    out
}

/// The endpoint's most frequent shape over the history (ties: the older, then the lower
/// fingerprint), what a new one is compared with.
pub fn usual_shape(shapes: &[ShapeSeen]) -> Option<&ShapeSeen> {
    shapes.iter().max_by(|a, b| {
        a.traces.cmp(&b.traces).then(b.first_seen_ns.cmp(&a.first_seen_ns)).then(b.fingerprint.cmp(&a.fingerprint))
    })
}

/// Edges of `shape` not in `usual` (added) and of `usual` not in `shape` (removed), sorted.
pub fn edge_diff(shape: &[String], usual: &[String]) -> (Vec<String>, Vec<String>) {
    let a: BTreeSet<&String> = shape.iter().collect();
    let b: BTreeSet<&String> = usual.iter().collect();
    (a.difference(&b).map(|e| e.to_string()).collect(), b.difference(&a).map(|e| e.to_string()).collect())
}

fn change(shape: &ShapeSeen, usual: &ShapeSeen, share: f64, p95_ms: Option<f64>) -> ShapeChange {
    let (added, removed) = edge_diff(&shape.edges, &usual.edges);
    ShapeChange {
        usual_fingerprint: usual.fingerprint,
        edges_added: added,
        edges_removed: removed,
        share,
        trace_id: shape.trace_id.clone(),
        p95_ms,
        new_edges: Vec::new(),
    }
}

fn per_minute(minutes: &[ShapeMinute]) -> BTreeMap<u64, BTreeMap<u64, u64>> {
    let mut out: BTreeMap<u64, BTreeMap<u64, u64>> = BTreeMap::new();
    for m in minutes {
        *out.entry(m.minute).or_default().entry(m.fingerprint).or_default() += m.traces;
    }
    out
}

/// One fingerprint's durations in the slowdown window and in the baseline before it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ShapeTiming {
    pub fingerprint: u64,
    pub window_traces: u64,
    pub window_p95_ns: u64,
    pub baseline_traces: u64,
    pub baseline_p95_ns: u64,
}

/// An ongoing slowdown, as stored: its id, its start, and the baseline and threshold it was
/// raised with (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ongoing {
    pub alert_id: u64,
    pub first_at: u64,
    pub baseline_ms: f64,
    pub threshold_ms: f64,
}

/// A slowdown the rules raise or refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct Slowdown {
    pub alert_id: u64,
    pub fingerprint: u64,
    pub first_at: u64,
    pub last_at: u64,
    pub traces: u64,
    /// Milliseconds: the baseline p95, the threshold it was compared with, the window's.
    pub baseline_ms: f64,
    pub threshold_ms: f64,
    pub p95_ms: f64,
}

/// Where the slowdown window starts at data time `clock_ns`, and where its baseline does:
/// on whole minutes (the durations are kept per minute, `shape_minutes`), so the window is
/// the minute `slowdown_window_min` minutes ago and every minute after it.
pub fn slowdown_bounds(rules: &ShapeRules, clock_ns: u64) -> (u64, u64) {
    let window = clock_ns.saturating_sub(rules.slowdown_window_min.saturating_mul(MINUTE_NS)) / MINUTE_NS * MINUTE_NS;
    (window, window.saturating_sub(rules.slowdown_baseline_min.saturating_mul(MINUTE_NS)))
}

/// The slowdown rule for one fingerprint at data time `clock_ns`: a new slowdown against
/// the baseline before the window, an `ongoing` one against the threshold it was raised with.
pub fn slowdown(rules: &ShapeRules, t: &ShapeTiming, clock_ns: u64, ongoing: Option<Ongoing>) -> Option<Slowdown> {
    if t.window_traces < rules.slowdown_min_count {
        return None;
    }
    let p95_ms = t.window_p95_ns as f64 / MS_NS;
    let (window_start, _) = slowdown_bounds(rules, clock_ns);
    let ongoing = match ongoing {
        Some(o) => o,
        None if t.baseline_traces < rules.slowdown_min_count => return None,
        None => {
            let baseline_ms = t.baseline_p95_ns as f64 / MS_NS;
            let start = window_start / MINUTE_NS * MINUTE_NS;
            Ongoing {
                alert_id: alert_id(AlertKind::ShapeSlowdown, t.fingerprint, start),
                first_at: start,
                baseline_ms,
                threshold_ms: (baseline_ms * rules.slowdown_factor)
                    .max(baseline_ms + rules.slowdown_min_delta_ms as f64),
            }
        }
    };
    if p95_ms < ongoing.threshold_ms {
        return None;
    }
    Some(Slowdown {
        alert_id: ongoing.alert_id,
        fingerprint: t.fingerprint,
        first_at: ongoing.first_at,
        last_at: clock_ns.max(ongoing.first_at),
        traces: t.window_traces,
        baseline_ms: ongoing.baseline_ms,
        threshold_ms: ongoing.threshold_ms,
        p95_ms,
    })
}

impl NewShape {
    pub fn to_row(&self, endpoint: &Endpoint, now_ns: u64) -> AlertRow {
        AlertRow {
            alert_id: self.alert_id,
            kind: AlertKind::NewShape.as_str().into(),
            service: endpoint.service.clone(),
            template_id: self.fingerprint,
            template: endpoint.operation.clone(),
            first_at: self.first_seen_ns,
            last_at: self.first_seen_ns,
            count: self.traces,
            baseline: 0.0,
            threshold: 0.0,
            stored_ns: now_ns,
            updated_ns: now_ns,
            resolved_at: 0,
            shape: self.change.to_column(),
        }
    }
}

impl Slowdown {
    /// The alert row; `shape` is the fingerprint's own (edges, a trace) for the record.
    pub fn to_row(&self, endpoint: &Endpoint, shape: Option<&ShapeSeen>, now_ns: u64) -> AlertRow {
        let change = ShapeChange {
            usual_fingerprint: self.fingerprint,
            edges_added: Vec::new(),
            edges_removed: Vec::new(),
            share: 0.0,
            trace_id: shape.map(|s| s.trace_id.clone()).unwrap_or_default(),
            p95_ms: Some(self.p95_ms),
            new_edges: Vec::new(),
        };
        AlertRow {
            alert_id: self.alert_id,
            kind: AlertKind::ShapeSlowdown.as_str().into(),
            service: endpoint.service.clone(),
            template_id: self.fingerprint,
            template: endpoint.operation.clone(),
            first_at: self.first_at,
            last_at: self.last_at,
            count: self.traces,
            baseline: self.baseline_ms,
            threshold: self.threshold_ms,
            stored_ns: now_ns,
            updated_ns: now_ns,
            resolved_at: 0,
            shape: change.to_column(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> ShapeRules {
        ShapeRules {
            history_hours: 24,
            warmup_min: 10,
            warmup_traces: 50,
            evidence_window_min: 5,
            min_count: 5,
            min_share: 0.02,
            max_new_per_hour: 2,
            slowdown_factor: 2.0,
            slowdown_min_delta_ms: 50,
            slowdown_window_min: 5,
            slowdown_baseline_min: 30,
            slowdown_min_count: 10,
        }
    }

    const BASE: &[&str] = &["ROOT -> web/GET /", "web/GET / -> db/query"];

    fn edges(extra: &[&str]) -> Vec<String> {
        BASE.iter().chain(extra).map(|e| e.to_string()).collect()
    }

    /// An endpoint with a steady shape 1 (10 traces a minute from minute 0) and more shapes
    /// `(fingerprint, first minute, traces a minute, extra edges)`, up to minute `until`.
    fn endpoint(others: &[(u64, u64, u64, &[&str])], until: u64) -> EndpointShapes {
        let mut e = EndpointShapes::default();
        let mut add = |fingerprint: u64, from: u64, per_min: u64, extra: &[&str]| {
            if per_min == 0 || from >= until {
                return;
            }
            e.shapes.push(ShapeSeen {
                fingerprint,
                first_seen_ns: from * MINUTE_NS + 1,
                traces: per_min * (until - from),
                edges: edges(extra),
                trace_id: format!("trace{fingerprint}"),
            });
            e.minutes.extend((from..until).map(|minute| ShapeMinute { fingerprint, minute, traces: per_min }));
        };
        add(1, 0, 10, &[]);
        for &(f, from, per_min, extra) in others {
            add(f, from, per_min, extra);
        }
        e
    }

    const LOCK: &[&str] = &["web/GET / -> db/lock row"];

    fn ep() -> Endpoint {
        Endpoint { service: "web".into(), operation: "GET /".into() }
    }

    fn lock_id() -> u64 {
        new_shape_id(&ep(), &["web/GET / -> db/lock row".to_string()])
    }

    #[test]
    fn a_new_frequent_path_of_a_warm_endpoint_is_announced_with_its_edges() {
        let e = endpoint(&[(2, 30, 5, LOCK)], 40);
        let got = new_shapes(&rules(), &ep(), &e, 29 * MINUTE_NS, &HashSet::new(), 0);
        assert_eq!(got.raised.len(), 1, "{got:?}");
        let n = &got.raised[0];
        assert_eq!((n.fingerprint, n.alert_id), (2, lock_id()));
        assert_eq!(n.change.new_edges, vec!["web/GET / -> db/lock row"]);
        assert_eq!(n.first_seen_ns, 30 * MINUTE_NS + 1);
        assert_eq!((n.traces, n.endpoint_traces), (25, 75));
        assert_eq!(n.change.edges_added, vec!["web/GET / -> db/lock row"]);
        assert!(n.change.edges_removed.is_empty());
        assert_eq!((n.change.usual_fingerprint, n.change.trace_id.as_str()), (1, "trace2"));
    }

    #[test]
    fn a_shape_announced_before_is_not_announced_again() {
        let e = endpoint(&[(2, 30, 5, LOCK)], 40);
        let got = new_shapes(&rules(), &ep(), &e, 29 * MINUTE_NS, &HashSet::from([lock_id()]), 0);
        assert!(got.raised.is_empty());
    }

    #[test]
    fn a_call_left_out_or_a_new_mix_of_known_branches_is_not_a_new_path() {
        let cache = &["web/GET / -> cache/get"];
        // The cache branch is old; from minute 30 a shape without the db call, and one with
        // both the cache and the fraud branches (each known, never together before).
        let mut e = endpoint(&[(2, 0, 5, cache), (3, 0, 2, &["web/GET / -> fraud/score"])], 40);
        e.shapes.push(ShapeSeen {
            fingerprint: 4,
            first_seen_ns: 30 * MINUTE_NS,
            traces: 50,
            edges: vec!["ROOT -> web/GET /".into()],
            trace_id: "t".into(),
        });
        e.minutes.extend((30..40).map(|minute| ShapeMinute { fingerprint: 4, minute, traces: 5 }));
        let mix = edges(&["web/GET / -> cache/get", "web/GET / -> fraud/score"]);
        e.shapes.push(ShapeSeen {
            fingerprint: 5,
            first_seen_ns: 31 * MINUTE_NS,
            traces: 45,
            edges: mix,
            trace_id: "m".into(),
        });
        e.minutes.extend((31..40).map(|minute| ShapeMinute { fingerprint: 5, minute, traces: 5 }));
        let got = new_shapes(&rules(), &ep(), &e, 30 * MINUTE_NS, &HashSet::new(), 0);
        assert!(got.raised.is_empty(), "{got:?}");
        assert_eq!(got.recombined, 2);
    }

    #[test]
    fn a_new_path_combined_with_known_branches_is_one_alert_with_every_combination_counted() {
        let cache = &["web/GET / -> cache/get"];
        let with_cache = &["web/GET / -> cache/get", "web/GET / -> db/lock row"];
        let e = endpoint(&[(2, 0, 10, cache), (3, 30, 4, LOCK), (4, 30, 3, with_cache)], 40);
        let got = new_shapes(&rules(), &ep(), &e, 29 * MINUTE_NS, &HashSet::new(), 0);
        assert_eq!(got.raised.len(), 1, "{got:?}");
        let n = &got.raised[0];
        assert_eq!(n.alert_id, lock_id());
        assert_eq!((n.fingerprint, n.traces), (3, 35), "the most frequent combination shown; both counted");
        assert_eq!(n.change.edges_added, vec!["web/GET / -> db/lock row"]);
        assert_eq!(n.change.new_edges, vec!["web/GET / -> db/lock row"]);
        // The combination first seen a minute later is no new change, and still evidence.
        let later = endpoint(&[(2, 0, 10, cache), (3, 30, 1, LOCK), (4, 31, 4, with_cache)], 40);
        let got = new_shapes(&rules(), &ep(), &later, 29 * MINUTE_NS, &HashSet::new(), 0);
        assert_eq!((got.raised.len(), got.recombined), (1, 1), "{got:?}");
        assert_eq!((got.raised[0].alert_id, got.raised[0].traces), (lock_id(), 21));
    }

    #[test]
    fn a_path_that_adds_a_call_and_drops_another_says_both() {
        let mut e = endpoint(&[], 40);
        let swapped = vec!["ROOT -> web/GET /".to_string(), "web/GET / -> db/replica query".to_string()];
        e.shapes.push(ShapeSeen {
            fingerprint: 3,
            first_seen_ns: 30 * MINUTE_NS,
            traces: 50,
            edges: swapped,
            trace_id: "t".into(),
        });
        e.minutes.extend((30..40).map(|minute| ShapeMinute { fingerprint: 3, minute, traces: 5 }));
        let got = new_shapes(&rules(), &ep(), &e, 30 * MINUTE_NS, &HashSet::new(), 0);
        let change = &got.raised[0].change;
        assert_eq!(change.edges_added, vec!["web/GET / -> db/replica query"]);
        assert_eq!(change.edges_removed, vec!["web/GET / -> db/query"]);
    }

    #[test]
    fn shapes_of_a_fresh_or_new_endpoint_are_learnt_not_announced() {
        // A branch from minute 3: the endpoint is 3 minutes old, under the 10 of warm-up.
        let e = endpoint(&[(2, 3, 5, &["web/GET / -> cache/get"])], 40);
        let got = new_shapes(&rules(), &ep(), &e, 0, &HashSet::new(), 0);
        assert!(got.raised.is_empty(), "{got:?}");
        assert_eq!(got.warming, 2, "on a fresh install every shape is new, and learnt");
        // Old enough but too few traces before: 1 a minute for 20 minutes is 20 < 50.
        let mut quiet = endpoint(&[], 0);
        quiet.shapes.push(ShapeSeen {
            fingerprint: 1,
            first_seen_ns: 0,
            traces: 20,
            edges: edges(&[]),
            trace_id: "a".into(),
        });
        quiet.minutes.extend((0..20).map(|minute| ShapeMinute { fingerprint: 1, minute, traces: 1 }));
        quiet.shapes.push(ShapeSeen {
            fingerprint: 2,
            first_seen_ns: 20 * MINUTE_NS,
            traces: 10,
            edges: edges(LOCK),
            trace_id: "b".into(),
        });
        quiet.minutes.push(ShapeMinute { fingerprint: 2, minute: 20, traces: 10 });
        assert!(new_shapes(&rules(), &ep(), &quiet, 0, &HashSet::new(), 0).raised.is_empty());
    }

    #[test]
    fn a_rare_branch_never_has_the_evidence() {
        // 1 trace in 5 minutes against 50: 4 traces (under min_count) and a 2% share.
        let mut e = endpoint(&[], 40);
        e.shapes.push(ShapeSeen {
            fingerprint: 9,
            first_seen_ns: 31 * MINUTE_NS,
            traces: 4,
            edges: edges(&["web/GET / -> audit/write"]),
            trace_id: "r".into(),
        });
        e.minutes.extend([31, 32, 33, 34].map(|minute| ShapeMinute { fingerprint: 9, minute, traces: 1 }));
        assert!(new_shapes(&rules(), &ep(), &e, 30 * MINUTE_NS, &HashSet::new(), 0).raised.is_empty());
        // Enough traces but a tiny share of a busy endpoint.
        let busy = endpoint(&[(9, 31, 1, &["web/GET / -> audit/write"]), (4, 0, 500, &[])], 40);
        let got = new_shapes(&rules(), &ep(), &busy, 30 * MINUTE_NS, &HashSet::new(), 0);
        assert!(got.raised.is_empty(), "5 of 2,555 is 0.2%: {got:?}");
    }

    #[test]
    fn a_shape_is_judged_until_one_evidence_window_after_the_watermark_passed_it() {
        let e = endpoint(&[(2, 30, 5, LOCK)], 40);
        let at = |watermark_min: u64| new_shapes(&rules(), &ep(), &e, watermark_min * MINUTE_NS, &HashSet::new(), 0);
        assert_eq!(at(35).raised.len(), 1, "seen at 30, the window reaches back to 30");
        assert!(at(36).raised.is_empty(), "out of reach: judged by earlier passes");
    }

    #[test]
    fn the_rate_limit_holds_back_shapes_past_the_hourly_budget() {
        let e = endpoint(&[(2, 30, 5, LOCK), (3, 31, 5, &["web/GET / -> a/b"]), (4, 32, 5, &["web/GET / -> c/d"])], 40);
        let got = new_shapes(&rules(), &ep(), &e, 29 * MINUTE_NS, &HashSet::new(), 0);
        assert_eq!(got.raised.iter().map(|n| n.fingerprint).collect::<Vec<_>>(), vec![2, 3], "oldest first");
        assert_eq!(got.held_back, 1);
        let got = new_shapes(&rules(), &ep(), &e, 29 * MINUTE_NS, &HashSet::new(), 2);
        assert!(got.raised.is_empty());
        assert_eq!(got.held_back, 3);
    }

    #[test]
    fn the_usual_shape_is_the_most_frequent() {
        let e = endpoint(&[(2, 0, 20, LOCK)], 10);
        assert_eq!(usual_shape(&e.shapes).map(|s| s.fingerprint), Some(2));
        assert_eq!(usual_shape(&[]), None);
    }

    fn timing(window_p95_ms: u64, baseline_p95_ms: u64) -> ShapeTiming {
        ShapeTiming {
            fingerprint: 7,
            window_traces: 40,
            window_p95_ns: window_p95_ms * 1_000_000,
            baseline_traces: 300,
            baseline_p95_ns: baseline_p95_ms * 1_000_000,
        }
    }

    #[test]
    fn a_shape_twice_as_slow_as_its_baseline_slows_down() {
        let clock = 100 * MINUTE_NS + 5;
        let s = slowdown(&rules(), &timing(250, 100), clock, None).expect("250 ms against 100 ms");
        assert_eq!(s.first_at, 95 * MINUTE_NS);
        assert_eq!(s.alert_id, alert_id(AlertKind::ShapeSlowdown, 7, 95 * MINUTE_NS));
        assert_eq!((s.baseline_ms, s.threshold_ms, s.p95_ms, s.traces), (100.0, 200.0, 250.0, 40));
        assert_eq!(s.last_at, clock);
        assert!(slowdown(&rules(), &timing(190, 100), clock, None).is_none());
    }

    #[test]
    fn a_fast_shape_needs_the_minimum_delta_and_evidence_to_slow_down() {
        let clock = 100 * MINUTE_NS;
        assert!(slowdown(&rules(), &timing(30, 10), clock, None).is_none(), "3x, but only 20 ms more");
        assert!(slowdown(&rules(), &timing(70, 10), clock, None).is_some());
        let few = ShapeTiming { window_traces: 9, ..timing(500, 100) };
        assert!(slowdown(&rules(), &few, clock, None).is_none());
        let new = ShapeTiming { baseline_traces: 0, baseline_p95_ns: 0, ..timing(500, 0) };
        assert!(slowdown(&rules(), &new, clock, None).is_none(), "no baseline: not a slowdown");
    }

    #[test]
    fn an_ongoing_slowdown_keeps_its_id_and_start() {
        let ongoing = Ongoing { alert_id: 42, first_at: 90 * MINUTE_NS, baseline_ms: 100.0, threshold_ms: 200.0 };
        let s = slowdown(&rules(), &timing(400, 100), 103 * MINUTE_NS, Some(ongoing)).unwrap();
        assert_eq!((s.alert_id, s.first_at, s.last_at), (42, 90 * MINUTE_NS, 103 * MINUTE_NS));
    }

    #[test]
    fn an_ongoing_slowdown_is_judged_against_the_baseline_it_was_raised_on_until_it_recovers() {
        let ongoing = Ongoing { alert_id: 42, first_at: 90 * MINUTE_NS, baseline_ms: 100.0, threshold_ms: 200.0 };
        // Its own slow traces now lift the baseline behind the window to 380 ms: still slow.
        let s = slowdown(&rules(), &timing(400, 380), 103 * MINUTE_NS, Some(ongoing)).expect("still slow");
        assert_eq!((s.baseline_ms, s.threshold_ms, s.p95_ms), (100.0, 200.0, 400.0));
        assert!(slowdown(&rules(), &timing(400, 380), 103 * MINUTE_NS, None).is_none(), "a new one would not be");
        // Back under its threshold: it ends, whatever the baseline behind the window says.
        assert!(slowdown(&rules(), &timing(150, 380), 110 * MINUTE_NS, Some(ongoing)).is_none());
        let no_baseline = ShapeTiming { baseline_traces: 0, ..timing(400, 0) };
        assert!(slowdown(&rules(), &no_baseline, 103 * MINUTE_NS, Some(ongoing)).is_some(), "needs no baseline");
        let few = ShapeTiming { window_traces: 9, ..timing(400, 100) };
        assert!(slowdown(&rules(), &few, 103 * MINUTE_NS, Some(ongoing)).is_none(), "too few to tell");
    }

    #[test]
    fn minute_counts_reach_back_over_the_evidence_window_and_the_warm_up() {
        assert_eq!(rules().minutes_since(100 * MINUTE_NS + 7), 85 * MINUTE_NS);
        assert_eq!(rules().minutes_since(3), 0);
    }

    #[test]
    fn rows_carry_the_endpoint_and_the_change() {
        let e = endpoint(&[(2, 30, 5, LOCK)], 40);
        let n = &new_shapes(&rules(), &ep(), &e, 29 * MINUTE_NS, &HashSet::new(), 0).raised[0];
        let row = n.to_row(&ep(), 999);
        assert_eq!((row.kind.as_str(), row.service.as_str(), row.template.as_str()), ("new_shape", "web", "GET /"));
        assert_eq!((row.template_id, row.count, row.stored_ns), (2, 25, 999));
        assert_eq!(ShapeChange::from_column(&row.shape).unwrap(), n.change);
    }
}
