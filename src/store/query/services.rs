//! Every service seen in a window, with its span, log and error counts and when it was last
//! seen, from the per-minute rollup `service_minutes` (filled at insert by two views): a
//! window reads a few rows per minute and service, not the spans and logs of the window.
//! Counts are of whole minutes: the window's first and last minutes count whole. A row
//! stored twice (a re-read record not yet deduplicated by the raw tables) counts twice
//! (docs/api.md, "Reading by time").

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::{Window, MAX_LIMIT};
use crate::store::statements::Statement;
use crate::store::{Store, StoreError};
use crate::time::MINUTE_NS;

// A service of the window, as the API and the app show it: one type from ClickHouse to the
// API. No doc comment: it would become the `Service` schema's description.
#[derive(Debug, Clone, PartialEq, Row, Deserialize, Serialize, utoipa::ToSchema)]
#[schema(as = Service)]
pub struct ServiceSummary {
    pub service: String,
    pub spans: u64,
    pub error_spans: u64,
    pub logs: u64,
    // Severity ERROR is 17.
    /// Logs at severity ERROR or above.
    pub error_logs: u64,
    pub last_seen_ns: u64,
}

/// Binds: from (a minute's start), to, after (service name), limit. The first page passes an
/// empty `after`, which only a nameless service would fail; such rows have no service to
/// show anyway.
pub const SERVICES_SQL: &str = "SELECT service, sum(spans), sum(error_spans), sum(lines), sumIf(lines, severity_number >= 17), max(last_seen)
FROM (
    SELECT service, severity_number, sumMerge(spans) AS spans, sumMerge(error_spans) AS error_spans, sumMerge(logs) AS lines,
        maxMerge(last_seen_ns) AS last_seen
    FROM service_minutes WHERE minute_ns >= ? AND minute_ns < ? AND service > ? GROUP BY service, severity_number
)
GROUP BY service ORDER BY service LIMIT ?";

pub fn statements() -> Vec<Statement> {
    vec![Statement::new("query.services", SERVICES_SQL).binds(["0", "1", "''", "10"])]
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
        .bind(window.from_ns - window.from_ns % MINUTE_NS)
        .bind(window.to_ns)
        .bind(after)
        .bind(limit.min(MAX_LIMIT))
        .fetch_all()
        .await
        .map_err(|e| store.query_error("reading services", e))
}
