//! Every service seen in a window, with its span, log and error counts and when it was last
//! seen. Both sides count identities (`uniqExact`), so copies not merged yet count once; a
//! span's identity is counted as a 64-bit hash of (trace id, span id), which halves the cost
//! of the count; the odds that two of a million spans collide (an undercount of one) are
//! about 3 in 100 million.

use clickhouse::Row;
use serde::Deserialize;

use super::{Window, MAX_LIMIT};
use crate::store::statements::Statement;
use crate::store::{Store, StoreError};

#[derive(Debug, Clone, PartialEq, Row, Deserialize)]
pub struct ServiceSummary {
    pub service: String,
    pub spans: u64,
    pub error_spans: u64,
    pub logs: u64,
    /// Logs at severity ERROR (17) or above.
    pub error_logs: u64,
    pub last_seen_ns: u64,
}

/// Binds: from, to, after (service name), from, to, after, limit. The first page passes an
/// empty `after`, which only a nameless service would fail; such rows have no service to
/// show anyway.
pub const SERVICES_SQL: &str = "SELECT service, sum(spans), sum(error_spans), sum(logs), sum(error_logs), max(last_seen)
FROM (
    SELECT service, uniqExact(cityHash64(trace_id, span_id)) AS spans, uniqExactIf(cityHash64(trace_id, span_id), status_code = 2) AS error_spans,
        toUInt64(0) AS logs, toUInt64(0) AS error_logs, max(start_ns) AS last_seen
    FROM spans WHERE start_ns >= ? AND start_ns < ? AND service > ? GROUP BY service
    UNION ALL
    SELECT service, toUInt64(0), toUInt64(0), uniqExact(log_id), uniqExactIf(log_id, severity_number >= 17), max(time_ns)
    FROM logs WHERE time_ns >= ? AND time_ns < ? AND service > ? GROUP BY service
)
GROUP BY service ORDER BY service LIMIT ?";

pub fn statements() -> Vec<Statement> {
    vec![Statement::new("query.services", SERVICES_SQL).binds(["0", "1", "''", "0", "1", "''", "10"])]
}

/// The services seen in `window` whose name sorts after `after`, by name.
pub async fn services(
    store: &Store,
    window: Window,
    after: &str,
    limit: u64,
) -> Result<Vec<ServiceSummary>, StoreError> {
    store
        .client()
        .query(SERVICES_SQL)
        .bind(window.from_ns)
        .bind(window.to_ns)
        .bind(after)
        .bind(window.from_ns)
        .bind(window.to_ns)
        .bind(after)
        .bind(limit.min(MAX_LIMIT))
        .fetch_all()
        .await
        .map_err(|e| store.query_error("reading services", e))
}
