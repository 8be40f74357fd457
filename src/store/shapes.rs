//! The logminer's reads for the shape rules (docs/alerts.md, "Shape alerts"), from
//! `shape_minutes`: the stories' shapes per minute of start, endpoint and fingerprint,
//! summed at insert by a view on `stories` (migration 11). Truncated stories (a partial
//! path) and stories with no root are left out by the view: neither is an endpoint's shape.
//!
//! Counts within a minute are `uniqExact(trace_id)`, so a story stored twice (a re-read of
//! `signals` by the assembler, a late span's newer version) counts once; a trace starts in
//! one minute, so the sum of a fingerprint's minutes counts each trace once too. Every read
//! is bounded by minutes: the table is ordered by minute, so a pass reads the minutes it
//! asks for, never a day of stories (`stories` is ordered by trace id).

use super::statements::Statement;
use super::{Store, StoreError};

/// One endpoint's fingerprint in one minute.
#[derive(Debug, Clone, PartialEq, clickhouse::Row, serde::Deserialize)]
pub struct ShapeMinuteRow {
    pub root_service: String,
    pub root_operation: String,
    pub fingerprint: u64,
    pub minute_ns: u64,
    pub traces: u64,
    /// The start, and the trace id, of its first trace in that minute.
    pub first_ns: u64,
    pub first_trace_id: String,
}

/// A fingerprint's edges (the set its hash names, so any of its stories has them).
#[derive(Debug, Clone, PartialEq, clickhouse::Row, serde::Deserialize)]
pub struct ShapeEdgesRow {
    pub fingerprint: u64,
    pub edges: Vec<String>,
}

/// One fingerprint's traces and p95 duration in the slowdown window and in its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeTimingRow {
    pub root_service: String,
    pub root_operation: String,
    pub fingerprint: u64,
    pub window_traces: u64,
    pub window_p95_ns: u64,
    pub baseline_traces: u64,
    pub baseline_p95_ns: u64,
}

/// One side (window or baseline) of a fingerprint's timing, as read.
#[derive(Debug, Clone, PartialEq, clickhouse::Row, serde::Deserialize)]
struct TimingSideRow {
    root_service: String,
    root_operation: String,
    fingerprint: u64,
    in_window: u8,
    traces: u64,
    p95_ns: u64,
}

/// Binds: from (ns), until (ns).
const SHAPE_MINUTES_SQL: &str = "SELECT root_service, root_operation, fingerprint, minute_ns, \
     uniqExactMerge(traces) AS traces, minMerge(first_ns) AS first_ns, argMinMerge(first_trace_id) AS first_trace_id \
     FROM shape_minutes WHERE minute_ns >= ? AND minute_ns < ? \
     GROUP BY root_service, root_operation, fingerprint, minute_ns";

/// Binds: fingerprints, since (ns).
const SHAPE_EDGES_SQL: &str = "SELECT fingerprint, anyMerge(edges) AS edges FROM shape_minutes \
     WHERE has(?, fingerprint) AND minute_ns >= ? GROUP BY fingerprint";

/// Binds: window start, root services, baseline start, window end.
const SHAPE_TIMINGS_SQL: &str = "SELECT root_service, root_operation, fingerprint, \
     toUInt8(minute_ns >= ?) AS in_window, uniqExactMerge(traces) AS traces, \
     toUInt64(quantileExactMerge(0.95)(durations)) AS p95_ns \
     FROM shape_minutes WHERE has(?, root_service) AND minute_ns >= ? AND minute_ns <= ? \
     GROUP BY root_service, root_operation, fingerprint, in_window";

/// Every endpoint's fingerprints per minute, for the minutes in `[from_ns, until_ns)`.
pub async fn shape_minutes(store: &Store, from_ns: u64, until_ns: u64) -> Result<Vec<ShapeMinuteRow>, StoreError> {
    if from_ns >= until_ns {
        return Ok(Vec::new());
    }
    store
        .client()
        .query(SHAPE_MINUTES_SQL)
        .bind(from_ns)
        .bind(until_ns)
        .fetch_all::<ShapeMinuteRow>()
        .await
        .map_err(|e| store.query_error("reading the shapes of stored stories per minute", e))
}

/// The edges of `fingerprints`, of those seen in a minute from `since_ns` on.
pub async fn shape_edges(store: &Store, fingerprints: &[u64], since_ns: u64) -> Result<Vec<ShapeEdgesRow>, StoreError> {
    if fingerprints.is_empty() {
        return Ok(Vec::new());
    }
    store
        .client()
        .query(SHAPE_EDGES_SQL)
        .bind(fingerprints)
        .bind(since_ns)
        .fetch_all::<ShapeEdgesRow>()
        .await
        .map_err(|e| store.query_error("reading the edges of shapes", e))
}

/// Per fingerprint of `services`' endpoints, traces and p95 duration in the minutes of
/// `[window_ns, up_to_ns]` and in those of `[baseline_ns, window_ns)` (minute bounds).
pub async fn shape_timings(
    store: &Store,
    services: &[String],
    baseline_ns: u64,
    window_ns: u64,
    up_to_ns: u64,
) -> Result<Vec<ShapeTimingRow>, StoreError> {
    if services.is_empty() {
        return Ok(Vec::new());
    }
    let sides = store
        .client()
        .query(SHAPE_TIMINGS_SQL)
        .bind(window_ns)
        .bind(services)
        .bind(baseline_ns)
        .bind(up_to_ns)
        .fetch_all::<TimingSideRow>()
        .await
        .map_err(|e| store.query_error("reading shape durations", e))?;
    Ok(timings_of(sides))
}

/// The window and baseline sides of each fingerprint as one row.
fn timings_of(sides: Vec<TimingSideRow>) -> Vec<ShapeTimingRow> {
    let mut out: std::collections::BTreeMap<(String, String, u64), ShapeTimingRow> = Default::default();
    for s in sides {
        let row = out.entry((s.root_service.clone(), s.root_operation.clone(), s.fingerprint)).or_insert_with(|| {
            ShapeTimingRow {
                root_service: s.root_service,
                root_operation: s.root_operation,
                fingerprint: s.fingerprint,
                window_traces: 0,
                window_p95_ns: 0,
                baseline_traces: 0,
                baseline_p95_ns: 0,
            }
        });
        if s.in_window == 1 {
            (row.window_traces, row.window_p95_ns) = (s.traces, s.p95_ns);
        } else {
            (row.baseline_traces, row.baseline_p95_ns) = (s.traces, s.p95_ns);
        }
    }
    out.into_values().collect()
}

/// This module's statements with sample binds, for the registry.
pub fn statements() -> Vec<Statement> {
    vec![
        Statement::new("shapes.minutes", SHAPE_MINUTES_SQL).binds(["0", "9"]),
        Statement::new("shapes.edges", SHAPE_EDGES_SQL).binds(["[1, 2]", "0"]),
        Statement::new("shapes.timings", SHAPE_TIMINGS_SQL).binds(["5", "['web']", "0", "9"]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(fingerprint: u64, in_window: u8, traces: u64) -> TimingSideRow {
        TimingSideRow {
            root_service: "web".into(),
            root_operation: "GET /".into(),
            fingerprint,
            in_window,
            traces,
            p95_ns: traces * 10,
        }
    }

    #[test]
    fn the_window_and_the_baseline_of_a_fingerprint_are_one_row() {
        let rows = timings_of(vec![side(1, 1, 4), side(2, 0, 7), side(1, 0, 30)]);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].window_traces, rows[0].window_p95_ns, rows[0].baseline_traces, rows[0].baseline_p95_ns),
            (4, 40, 30, 300)
        );
        assert_eq!((rows[1].fingerprint, rows[1].window_traces, rows[1].baseline_traces), (2, 0, 7));
    }
}
