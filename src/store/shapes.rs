//! The logminer's reads of stored stories for the shape rules (docs/alerts.md, "Shape
//! alerts"), and the API's reads for a shape diff. Truncated stories (a partial path) and
//! stories with no root are left out: neither is an endpoint's shape.
//!
//! Counts within a window are `uniqExact(trace_id)`, so a story stored twice (a re-read of
//! `signals` by the assembler, a late span's newer version) counts once.

use super::statements::Statement;
use super::{Store, StoreError};

/// One endpoint's fingerprint over the history window.
#[derive(Debug, Clone, PartialEq, clickhouse::Row, serde::Deserialize)]
pub struct ShapeSeenRow {
    pub root_service: String,
    pub root_operation: String,
    pub fingerprint: u64,
    pub first_seen_ns: u64,
    pub traces: u64,
    /// The edges, and the trace id, of its first trace.
    pub first_edges: Vec<String>,
    pub first_trace_id: String,
}

/// One fingerprint's traces in one minute.
#[derive(Debug, Clone, PartialEq, clickhouse::Row, serde::Deserialize)]
pub struct ShapeMinuteRow {
    pub root_service: String,
    pub root_operation: String,
    pub fingerprint: u64,
    pub minute: u64,
    pub traces: u64,
}

/// One fingerprint's traces and p95 duration in the slowdown window and in its baseline.
#[derive(Debug, Clone, PartialEq, clickhouse::Row, serde::Deserialize)]
pub struct ShapeTimingRow {
    pub root_service: String,
    pub root_operation: String,
    pub fingerprint: u64,
    pub window_traces: u64,
    pub window_p95_ns: u64,
    pub baseline_traces: u64,
    pub baseline_p95_ns: u64,
}

/// Binds: since (ns).
const SHAPES_SEEN_SQL: &str = "SELECT root_service, root_operation, fingerprint, min(start_ns) AS first_seen_ns, \
     uniqExact(trace_id) AS traces, argMin(edges, start_ns) AS first_edges, argMin(trace_id, start_ns) AS first_trace_id \
     FROM stories WHERE start_ns >= ? AND truncated = 0 AND root_service != '' \
     GROUP BY root_service, root_operation, fingerprint";

/// Binds: root services, since (ns).
const SHAPE_MINUTES_SQL: &str = "SELECT root_service, root_operation, fingerprint, \
     intDiv(start_ns, 60000000000) AS minute, uniqExact(trace_id) AS traces \
     FROM stories WHERE has(?, root_service) AND start_ns >= ? AND truncated = 0 \
     GROUP BY root_service, root_operation, fingerprint, minute";

/// Binds: window start ×3, root services, baseline start, window end.
const SHAPE_TIMINGS_SQL: &str = "SELECT root_service, root_operation, fingerprint, \
     uniqExactIf(trace_id, start_ns >= ?) AS window_traces, \
     toUInt64(quantileExactIf(0.95)(duration_ns, start_ns >= ?)) AS window_p95_ns, \
     uniqExactIf(trace_id, start_ns < ?) AS baseline_traces, \
     toUInt64(quantileExactIf(0.95)(duration_ns, start_ns < ?)) AS baseline_p95_ns \
     FROM stories WHERE has(?, root_service) AND start_ns >= ? AND start_ns <= ? AND truncated = 0 \
     GROUP BY root_service, root_operation, fingerprint";

/// Every endpoint's fingerprints with a story starting at or after `since_ns`.
pub async fn shapes_seen(store: &Store, since_ns: u64) -> Result<Vec<ShapeSeenRow>, StoreError> {
    store
        .client()
        .query(SHAPES_SEEN_SQL)
        .bind(since_ns)
        .fetch_all::<ShapeSeenRow>()
        .await
        .map_err(|e| store.query_error("reading the shapes of stored stories", e))
}

/// Per fingerprint and minute, the traces of `services`' endpoints from `since_ns` on.
pub async fn shape_minutes(
    store: &Store,
    services: &[String],
    since_ns: u64,
) -> Result<Vec<ShapeMinuteRow>, StoreError> {
    if services.is_empty() {
        return Ok(Vec::new());
    }
    store
        .client()
        .query(SHAPE_MINUTES_SQL)
        .bind(services)
        .bind(since_ns)
        .fetch_all::<ShapeMinuteRow>()
        .await
        .map_err(|e| store.query_error("reading shape minute counts from stories", e))
}

/// Per fingerprint of `services`' endpoints, traces and p95 duration in
/// `[window_ns, up_to_ns]` and in `[baseline_ns, window_ns)`.
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
    store
        .client()
        .query(SHAPE_TIMINGS_SQL)
        .bind(window_ns)
        .bind(window_ns)
        .bind(window_ns)
        .bind(window_ns)
        .bind(services)
        .bind(baseline_ns)
        .bind(up_to_ns)
        .fetch_all::<ShapeTimingRow>()
        .await
        .map_err(|e| store.query_error("reading shape durations from stories", e))
}

/// This module's statements with sample binds, for the registry.
pub fn statements() -> Vec<Statement> {
    vec![
        Statement::new("shapes.seen", SHAPES_SEEN_SQL).binds(["0"]),
        Statement::new("shapes.minutes", SHAPE_MINUTES_SQL).binds(["['web']", "0"]),
        Statement::new("shapes.timings", SHAPE_TIMINGS_SQL).binds(["5", "5", "5", "5", "['web']", "0", "9"]),
    ]
}
