//! Traces: one by id (its spans through `store::read::fetch_trace`, the spans table's primary
//! key; its logs from `trace_logs`, ordered by trace id), and a search over the spans of a
//! window.

use clickhouse::Row;
use serde::Deserialize;

use super::{and_all, Window, MAX_LIMIT};
use crate::store::statements::Statement;
use crate::store::{LogRow, Store, StoreError};

/// The logs of one trace from `trace_logs` (a copy of `logs` ordered by trace id, filled by
/// a materialized view), each once, in time order. Binds: trace id.
pub const TRACE_LOGS_SQL: &str = "SELECT ?fields FROM trace_logs FINAL WHERE trace_id = ? ORDER BY time_ns, log_id";

/// The logs of one trace, each once, in time order.
pub async fn trace_logs(store: &Store, trace_id: &str) -> Result<Vec<LogRow>, StoreError> {
    store
        .client()
        .query(TRACE_LOGS_SQL)
        .bind(trace_id)
        .fetch_all::<LogRow>()
        .await
        .map_err(|e| store.query_error("reading the logs of a trace", e))
}

/// The most trace ids [`stored_traces`] asks about in one statement.
const STORED_TRACES_PER_QUERY: usize = 100;

/// Which of `n` trace ids have a span stored (by the spans table's primary key). Binds: the
/// `n` trace ids.
pub fn stored_traces_sql(n: usize) -> String {
    let placeholders = vec!["?"; n.max(1)].join(", ");
    format!("SELECT DISTINCT trace_id FROM spans WHERE trace_id IN ({placeholders})")
}

/// The trace ids among `trace_ids` of which Tayga holds a span (a span link's target may
/// never have been sent to it).
pub async fn stored_traces(store: &Store, trace_ids: &[String]) -> Result<Vec<String>, StoreError> {
    let mut stored = Vec::new();
    for chunk in trace_ids.chunks(STORED_TRACES_PER_QUERY) {
        let mut query = store.client().query(&stored_traces_sql(chunk.len()));
        for id in chunk {
            query = query.bind(id.as_str());
        }
        let found: Vec<String> =
            query.fetch_all().await.map_err(|e| store.query_error("looking up linked traces", e))?;
        stored.extend(found);
    }
    Ok(stored)
}

/// What a trace search matches on; every field set narrows it.
#[derive(Debug, Clone, Default)]
pub struct TraceSearch {
    pub service: Option<String>,
    /// A span name (the operation).
    pub operation: Option<String>,
    pub min_duration_ns: Option<u64>,
    /// `Some(true)`: traces with an error span; `Some(false)`: traces without one.
    pub error: Option<bool>,
    /// Keyset cursor: the (latest matching start, trace id) of the previous page's last row.
    pub after: Option<(u64, String)>,
}

/// One trace of a search: what its matching spans say.
#[derive(Debug, Clone, PartialEq, Row, Deserialize)]
pub struct TraceHit {
    pub trace_id: String,
    /// The latest start among the matching spans (the page order).
    pub last_start_ns: u64,
    pub first_start_ns: u64,
    pub max_duration_ns: u64,
    pub matching_spans: u64,
    pub error: u8,
    pub services: Vec<String>,
    pub operations: Vec<String>,
}

/// Binds, in order: from, to, then each set filter (service, operation, min duration), then
/// the cursor (start, start, trace id), then the limit.
pub fn search_sql(q: &TraceSearch) -> String {
    let mut conditions = vec!["start_ns >= ?", "start_ns < ?"];
    if q.service.is_some() {
        conditions.push("service = ?");
    }
    if q.operation.is_some() {
        conditions.push("name = ?");
    }
    if q.min_duration_ns.is_some() {
        conditions.push("duration_ns >= ?");
    }
    if q.error == Some(true) {
        conditions.push("status_code = 2");
    }
    let mut having = Vec::new();
    if q.error == Some(false) {
        having.push("max(status_code = 2) = 0");
    }
    if q.after.is_some() {
        having.push("(max(start_ns) < ? OR (max(start_ns) = ? AND trace_id > ?))");
    }
    let having = if having.is_empty() { String::new() } else { format!(" HAVING {}", having.join(" AND ")) };
    format!(
        "SELECT trace_id, max(start_ns), min(start_ns), max(duration_ns), uniqExact(span_id), max(status_code = 2), \
         groupUniqArray(service), groupUniqArray(name) \
         FROM spans WHERE {} GROUP BY trace_id{having} ORDER BY max(start_ns) DESC, trace_id LIMIT ?",
        and_all(&conditions)
    )
}

/// Traces with a span matching `q` in `window`, the most recent first.
pub async fn search(store: &Store, window: Window, q: &TraceSearch, limit: u64) -> Result<Vec<TraceHit>, StoreError> {
    let mut query = store.client().query(&search_sql(q)).bind(window.from_ns).bind(window.to_ns);
    if let Some(service) = &q.service {
        query = query.bind(service.as_str());
    }
    if let Some(operation) = &q.operation {
        query = query.bind(operation.as_str());
    }
    if let Some(min) = q.min_duration_ns {
        query = query.bind(min);
    }
    if let Some((start, trace_id)) = &q.after {
        query = query.bind(*start).bind(*start).bind(trace_id.as_str());
    }
    query.bind(limit.min(MAX_LIMIT)).fetch_all().await.map_err(|e| store.query_error("searching traces", e))
}

pub fn statements() -> Vec<Statement> {
    let widest = TraceSearch {
        service: Some(String::new()),
        operation: Some(String::new()),
        min_duration_ns: Some(0),
        error: Some(false),
        after: Some((0, String::new())),
    };
    let with_errors = TraceSearch { error: Some(true), ..widest.clone() };
    let search_binds = ["0", "1", "'s'", "'op'", "0", "0", "0", "'t'", "10"];
    vec![
        Statement { fields: LogRow::COLUMN_NAMES, ..Statement::new("query.trace_logs", TRACE_LOGS_SQL).binds(["'t'"]) },
        Statement::new("query.stored_traces", stored_traces_sql(2)).binds(["'t'", "'u'"]),
        Statement::new("query.trace_search", search_sql(&widest)).binds(search_binds),
        Statement::new("query.trace_search_errors", search_sql(&with_errors)).binds(search_binds),
    ]
}
