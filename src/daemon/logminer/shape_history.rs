//! What the shape pass keeps between passes (docs/alerts.md, "What a pass reads"), pure:
//! the per-minute shapes of `shape_minutes` older than the pass's fresh minutes, so a pass
//! reads the day of history once and then only the minutes after it, and every
//! fingerprint's edges, read once.
//!
//! The fresh minutes (from [`super::shapes::ShapeRules::minutes_since`] the watermark on:
//! the evidence window and the warm-up before it) are read again by every pass, so a story
//! stored late within them still counts; a minute older than them is read once, when it
//! leaves them, and kept while within `history_hours`. A story stored more than that long
//! after its trace started (the warm-up and the evidence window, 40 minutes by default) is
//! left out of the kept history: it changes only an old shape's count.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::shapes::{Endpoint, EndpointShapes, ShapeMinute, ShapeSeen, MINUTE_NS};
use crate::store::shapes::{ShapeEdgesRow, ShapeMinuteRow};

/// One fingerprint's traces in one kept minute.
#[derive(Debug, Clone, PartialEq)]
struct Cell {
    fingerprint: u64,
    traces: u64,
    first_ns: u64,
    first_trace_id: Box<str>,
}

#[derive(Debug, Default)]
pub struct ShapeHistory {
    /// The kept minutes end here: `[.., settled_ns)`.
    settled_ns: u64,
    minutes: BTreeMap<Endpoint, BTreeMap<u64, Vec<Cell>>>,
    edges: HashMap<u64, Vec<String>>,
}

/// A fingerprint as the minutes read so far say.
struct Seen<'a> {
    endpoint: Endpoint,
    first_ns: u64,
    traces: u64,
    trace_id: &'a str,
}

/// One fingerprint's minute, kept or fresh.
struct Read<'a> {
    fingerprint: u64,
    traces: u64,
    first_ns: u64,
    trace_id: &'a str,
}

impl ShapeHistory {
    /// Drops the minutes before `since_ns` (out of the history) and from `fresh_ns` on (a
    /// watermark taken over can be older than this replica's); then the minutes a pass must
    /// read to keep everything before `fresh_ns`, if any.
    pub fn to_settle(&mut self, since_ns: u64, fresh_ns: u64) -> Option<(u64, u64)> {
        for minutes in self.minutes.values_mut() {
            *minutes = minutes.split_off(&since_ns);
            minutes.split_off(&fresh_ns);
        }
        self.minutes.retain(|_, m| !m.is_empty());
        self.settled_ns = self.settled_ns.min(fresh_ns);
        let from = self.settled_ns.max(since_ns);
        (from < fresh_ns).then_some((from, fresh_ns))
    }

    /// Keeps `rows`, the minutes of `[.., until_ns)` [`Self::to_settle`] asked for.
    pub fn settle(&mut self, rows: Vec<ShapeMinuteRow>, until_ns: u64) {
        for row in rows {
            let endpoint = Endpoint { service: row.root_service, operation: row.root_operation };
            self.minutes.entry(endpoint).or_default().entry(row.minute_ns).or_default().push(Cell {
                fingerprint: row.fingerprint,
                traces: row.traces,
                first_ns: row.first_ns,
                first_trace_id: row.first_trace_id.into_boxed_str(),
            });
        }
        self.settled_ns = until_ns;
    }

    /// The fingerprints, kept or in `fresh`, whose edges were never read.
    pub fn missing_edges(&self, fresh: &[ShapeMinuteRow]) -> Vec<u64> {
        let kept = self.minutes.values().flat_map(|m| m.values().flatten().map(|c| c.fingerprint));
        let all: HashSet<u64> = kept.chain(fresh.iter().map(|r| r.fingerprint)).collect();
        let mut missing: Vec<u64> = all.into_iter().filter(|f| !self.edges.contains_key(f)).collect();
        missing.sort_unstable();
        missing
    }

    pub fn add_edges(&mut self, rows: Vec<ShapeEdgesRow>) {
        self.edges.extend(rows.into_iter().map(|r| (r.fingerprint, r.edges)));
    }

    /// The endpoints `holds` says the pass judges, as the rules read them: every shape of the
    /// kept and the `fresh` minutes, and the minute counts from `minutes_from_ns` on; and
    /// every fingerprint kept or fresh, of any endpoint.
    pub fn endpoints<'a>(
        &'a self,
        fresh: &'a [ShapeMinuteRow],
        holds: impl Fn(&str) -> bool,
        minutes_from_ns: u64,
    ) -> (BTreeMap<Endpoint, EndpointShapes>, HashSet<u64>) {
        let mut seen: HashMap<u64, Seen<'a>> = HashMap::new();
        let mut minutes: BTreeMap<Endpoint, Vec<ShapeMinute>> = BTreeMap::new();
        let mut add = |endpoint: &Endpoint, minute_ns: u64, c: Read<'a>| {
            let s = seen.entry(c.fingerprint).or_insert_with(|| Seen {
                endpoint: endpoint.clone(),
                first_ns: c.first_ns,
                traces: 0,
                trace_id: c.trace_id,
            });
            s.traces += c.traces;
            if (c.first_ns, c.trace_id) < (s.first_ns, s.trace_id) {
                (s.first_ns, s.trace_id) = (c.first_ns, c.trace_id);
            }
            if minute_ns >= minutes_from_ns {
                let minute =
                    ShapeMinute { fingerprint: c.fingerprint, minute: minute_ns / MINUTE_NS, traces: c.traces };
                minutes.entry(endpoint.clone()).or_default().push(minute);
            }
        };
        let mut present: HashSet<u64> = HashSet::new();
        for (endpoint, by_minute) in &self.minutes {
            present.extend(by_minute.values().flatten().map(|c| c.fingerprint));
            if !holds(&endpoint.service) {
                continue;
            }
            for (minute_ns, cells) in by_minute {
                for c in cells {
                    let read = Read {
                        fingerprint: c.fingerprint,
                        traces: c.traces,
                        first_ns: c.first_ns,
                        trace_id: &c.first_trace_id,
                    };
                    add(endpoint, *minute_ns, read);
                }
            }
        }
        for r in fresh {
            present.insert(r.fingerprint);
            if holds(&r.root_service) {
                let endpoint = Endpoint { service: r.root_service.clone(), operation: r.root_operation.clone() };
                let read = Read {
                    fingerprint: r.fingerprint,
                    traces: r.traces,
                    first_ns: r.first_ns,
                    trace_id: &r.first_trace_id,
                };
                add(&endpoint, r.minute_ns, read);
            }
        }
        let mut out: BTreeMap<Endpoint, EndpointShapes> = BTreeMap::new();
        for (fingerprint, s) in seen {
            out.entry(s.endpoint).or_default().shapes.push(ShapeSeen {
                fingerprint,
                first_seen_ns: s.first_ns,
                traces: s.traces,
                edges: self.edges.get(&fingerprint).cloned().unwrap_or_default(),
                trace_id: s.trace_id.to_string(),
            });
        }
        for (endpoint, m) in minutes {
            out.entry(endpoint).or_default().minutes = m;
        }
        for e in out.values_mut() {
            e.shapes.sort_by_key(|s| s.fingerprint);
        }
        (out, present)
    }

    /// Forgets the edges of fingerprints no longer in the history (`present`: what
    /// [`Self::endpoints`] found kept or fresh).
    pub fn forget_edges_except(&mut self, present: &HashSet<u64>) {
        self.edges.retain(|f, _| present.contains(f));
    }

    /// Kept cells, for the metrics and the tests.
    pub fn kept(&self) -> usize {
        self.minutes.values().flat_map(|m| m.values()).map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = MINUTE_NS;

    fn row(service: &str, fingerprint: u64, minute: u64, traces: u64) -> ShapeMinuteRow {
        ShapeMinuteRow {
            root_service: service.into(),
            root_operation: "GET /".into(),
            fingerprint,
            minute_ns: minute * MIN,
            traces,
            first_ns: minute * MIN + fingerprint,
            first_trace_id: format!("t{fingerprint}-{minute}"),
        }
    }

    fn edges(fingerprint: u64) -> ShapeEdgesRow {
        ShapeEdgesRow { fingerprint, edges: vec![format!("e{fingerprint}")] }
    }

    #[test]
    fn the_history_is_read_once_then_only_the_minutes_that_leave_the_fresh_ones() {
        let mut h = ShapeHistory::default();
        assert_eq!(h.to_settle(0, 100 * MIN), Some((0, 100 * MIN)), "the first pass reads the day");
        h.settle(vec![row("web", 1, 10, 5), row("web", 1, 99, 2)], 100 * MIN);
        assert_eq!(h.to_settle(0, 100 * MIN), None, "nothing new to keep");
        assert_eq!(h.to_settle(0, 103 * MIN), Some((100 * MIN, 103 * MIN)), "three minutes left the fresh ones");
        h.settle(vec![row("web", 1, 101, 1)], 103 * MIN);
        assert_eq!(h.kept(), 3);
        // The history slides past minute 10; a watermark taken over moves the fresh minutes
        // back, and what the history kept of them is read again with them.
        assert_eq!(h.to_settle(11 * MIN, 100 * MIN), None);
        assert_eq!(h.kept(), 1, "minute 99 only");
        assert_eq!(h.to_settle(11 * MIN, 104 * MIN), Some((100 * MIN, 104 * MIN)));
    }

    #[test]
    fn a_shape_sums_its_kept_and_fresh_minutes_and_keeps_its_first_trace() {
        let mut h = ShapeHistory::default();
        h.to_settle(0, 50 * MIN);
        h.settle(vec![row("web", 1, 10, 5), row("web", 2, 20, 3), row("db", 3, 12, 4)], 50 * MIN);
        let fresh = vec![row("web", 1, 50, 7), row("web", 4, 51, 6)];
        assert_eq!(h.missing_edges(&fresh), vec![1, 2, 3, 4]);
        h.add_edges(vec![edges(1), edges(2), edges(3), edges(4)]);
        assert!(h.missing_edges(&fresh).is_empty());
        let (got, present) = h.endpoints(&fresh, |s| s == "web", 45 * MIN);
        assert_eq!(present.len(), 4);
        assert_eq!(got.len(), 1, "db is not held");
        let web = &got[&Endpoint { service: "web".into(), operation: "GET /".into() }];
        let by_fp: Vec<(u64, u64, u64, &str)> =
            web.shapes.iter().map(|s| (s.fingerprint, s.first_seen_ns, s.traces, s.trace_id.as_str())).collect();
        assert_eq!(
            by_fp,
            vec![(1, 10 * MIN + 1, 12, "t1-10"), (2, 20 * MIN + 2, 3, "t2-20"), (4, 51 * MIN + 4, 6, "t4-51")]
        );
        assert_eq!(web.shapes[0].edges, vec!["e1"]);
        let minutes: Vec<(u64, u64)> = web.minutes.iter().map(|m| (m.fingerprint, m.minute)).collect();
        assert_eq!(minutes, vec![(1, 50), (4, 51)], "minute counts from the fresh minutes on");
        // Fingerprint 3 is still kept (another replica's endpoint today, maybe this one's
        // tomorrow); once gone from the history its edges go too.
        h.to_settle(60 * MIN, 60 * MIN);
        let (_, present) = h.endpoints(&[], |_| true, 0);
        h.forget_edges_except(&present);
        assert_eq!(h.missing_edges(&[row("web", 1, 61, 1)]), vec![1], "forgotten with its minutes");
    }
}
