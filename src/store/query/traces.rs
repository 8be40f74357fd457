//! Traces: one by id (its spans through `store::read::fetch_trace`, the spans table's primary
//! key; its logs from `trace_logs`, ordered by trace id), and a search and a scatter over the
//! spans of a window, read from `spans_by_time` (ordered by bucket, service, start): every
//! span of the window's buckets, whatever the filters, since a trace's summary (its root,
//! its span count, its duration) needs its spans of every service (docs/api.md, "Reading by
//! time").

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::{any_of, attribute_conditions, bind_all, literals, window_conditions, Bind, Window, MAX_LIMIT};
use crate::search::{Query, Range};
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

/// What a trace search matches on: the query's services, operations, duration, statuses,
/// attributes and traces, each a condition on one span (a trace matches when one of its spans
/// meets them all), and whether the trace has an error at all.
#[derive(Debug, Clone, Default)]
pub struct TraceSearch {
    pub query: Query,
    /// `Some(true)`: traces with an error span; `Some(false)`: traces without one.
    pub error: Option<bool>,
    /// Keyset cursor: the (latest matching start, trace id) of the previous page's last row.
    pub after: Option<(u64, String)>,
}

/// One trace of a search: what its matching spans say, and what the trace is. The API
/// and `tayga traces --json` show it as it is read.
#[derive(Debug, Clone, PartialEq, Row, Deserialize, Serialize, utoipa::ToSchema)]
pub struct TraceHit {
    pub trace_id: String,
    /// The latest start among the matching spans (the list's order, newest first).
    pub last_start_ns: u64,
    pub first_start_ns: u64,
    pub max_duration_ns: u64,
    pub matching_spans: u64,
    /// Whether any span of the trace failed.
    #[serde(deserialize_with = "bool_from_u8")]
    pub error: bool,
    /// The services of the trace's spans in the window.
    pub services: Vec<String>,
    /// The names of the matching spans.
    pub operations: Vec<String>,
    /// The root span's service and name ('' when the root span started outside the window).
    pub root_service: String,
    pub root_operation: String,
    /// The trace's spans that started in the window.
    pub span_count: u64,
    /// The trace's first start, and from it to its last end (of its spans in the window).
    pub start_ns: u64,
    pub duration_ns: u64,
}

/// ClickHouse 18.16 has no Bool: a flag is read as the UInt8 it is stored as.
fn bool_from_u8<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(<u8 as Deserialize>::deserialize(d)? != 0)
}

/// The conditions of `search` on one span (none: every span matches), and their binds.
fn span_conditions(search: &TraceSearch) -> (Vec<String>, Vec<Bind>) {
    let q = &search.query;
    let (mut conditions, mut binds) = (Vec::new(), Vec::new());
    any_of("service", q.services.iter().cloned().map(Bind::Str), &mut conditions, &mut binds);
    any_of("name", q.operations.iter().cloned().map(Bind::Str), &mut conditions, &mut binds);
    if let Some(Range { min, max }) = q.duration {
        conditions.push("duration_ns >= ? AND duration_ns <= ?".into());
        binds.extend([Bind::U64(min), Bind::U64(max)]);
    }
    let mut statuses: Vec<u8> = q.statuses.clone();
    if search.error == Some(true) {
        statuses = if statuses.is_empty() || statuses.contains(&2) { vec![2] } else { vec![] };
        if statuses.is_empty() {
            conditions.push("0".into());
        }
    }
    any_of("status_code", statuses.into_iter().map(|s| Bind::U64(s.into())), &mut conditions, &mut binds);
    any_of("trace_id", q.traces.iter().cloned().map(Bind::Str), &mut conditions, &mut binds);
    attribute_conditions(&q.attributes, &mut conditions, &mut binds);
    (conditions, binds)
}

/// The spans of `window` (of the traces `ids` only, when given) with `m`: whether each meets
/// every span condition of `search`. Binds: the conditions', then the window's, then the ids.
fn matched_spans(window: Window, search: &TraceSearch, ids: Option<&[String]>, binds: &mut Vec<Bind>) -> String {
    let (conditions, condition_binds) = span_conditions(search);
    binds.extend(condition_binds);
    let m = if conditions.is_empty() { "1".to_string() } else { conditions.join(" AND ") };
    let mut where_ = window_conditions("start_ns", window, binds);
    if let Some(ids) = ids {
        any_of("trace_id", ids.iter().cloned().map(Bind::Str), &mut where_, binds);
    }
    format!(
        "(SELECT trace_id, span_id, parent_span_id, service, name, start_ns, end_ns, duration_ns, status_code, \
         toUInt8({m}) AS m FROM spans_by_time WHERE {})",
        where_.join(" AND ")
    )
}

/// The traces with a span that matches: `HAVING` conditions. Binds: none.
fn trace_having(search: &TraceSearch) -> Vec<&'static str> {
    let mut having = vec!["max(m) = 1"];
    if search.error == Some(false) {
        having.push("max(status_code = 2) = 0");
    }
    having
}

/// A page after a cursor reads only the window before it.
fn before_cursor(window: Window, search: &TraceSearch) -> Window {
    match &search.after {
        Some((start, _)) => Window { from_ns: window.from_ns, to_ns: window.to_ns.min(start.saturating_add(1)) },
        None => window,
    }
}

/// The trace ids of a page, from the matching spans alone (a service's rows of the window,
/// when the search names one), and its binds. Not for `error: Some(false)`, which needs every
/// span of a trace to know.
pub fn page_ids_statement(window: Window, search: &TraceSearch, limit: u64) -> (String, Vec<Bind>) {
    let window = before_cursor(window, search);
    let mut binds = Vec::new();
    let mut conditions = window_conditions("start_ns", window, &mut binds);
    let (span, span_binds) = span_conditions(search);
    conditions.extend(span);
    binds.extend(span_binds);
    let having = match &search.after {
        Some((start, trace_id)) => {
            binds.extend([Bind::U64(*start), Bind::U64(*start), Bind::Str(trace_id.clone())]);
            " HAVING (max(start_ns) < ? OR (max(start_ns) = ? AND trace_id > ?))"
        }
        None => "",
    };
    binds.push(Bind::U64(limit.min(MAX_LIMIT)));
    let sql = format!(
        "SELECT trace_id FROM spans_by_time WHERE {} GROUP BY trace_id{having} ORDER BY max(start_ns) DESC, trace_id LIMIT ?",
        conditions.join(" AND ")
    );
    (sql, binds)
}

/// A page of a trace search with each trace's summary, and its binds in order: of the
/// traces `ids` when given (the page [`page_ids_statement`] found), else of every matching
/// trace.
pub fn search_statement(
    window: Window,
    search: &TraceSearch,
    ids: Option<&[String]>,
    limit: u64,
) -> (String, Vec<Bind>) {
    let window = before_cursor(window, search);
    let mut binds = Vec::new();
    let spans = matched_spans(window, search, ids, &mut binds);
    let mut having: Vec<String> = trace_having(search).into_iter().map(String::from).collect();
    if let Some((start, trace_id)) = &search.after {
        having.push("(maxIf(start_ns, m) < ? OR (maxIf(start_ns, m) = ? AND trace_id > ?))".into());
        binds.extend([Bind::U64(*start), Bind::U64(*start), Bind::Str(trace_id.clone())]);
    }
    binds.push(Bind::U64(limit.min(MAX_LIMIT)));
    let sql = format!(
        "SELECT trace_id, maxIf(start_ns, m), minIf(start_ns, m), maxIf(duration_ns, m), uniqExactIf(span_id, m), \
         max(status_code = 2), groupUniqArray(service), groupUniqArrayIf(name, m), anyIf(service, parent_span_id = ''), \
         anyIf(name, parent_span_id = ''), uniqExact(span_id), min(start_ns), max(end_ns) - min(start_ns) \
         FROM {spans} GROUP BY trace_id HAVING {} ORDER BY maxIf(start_ns, m) DESC, trace_id LIMIT ?",
        having.join(" AND ")
    );
    (sql, binds)
}

/// Traces with a span matching `search` in `window`, the most recent first.
///
/// In two steps: the page's trace ids from the matching spans alone, then the summary of
/// those traces from all their spans of the window. Summarising every trace of the window
/// and then keeping a page cost twice as much on an hour of 800,000 spans (docs/api.md,
/// "Benchmark"). `error: Some(false)` (no error span at all) is one step, since no span
/// alone can say it.
pub async fn search(
    store: &Store,
    window: Window,
    search: &TraceSearch,
    limit: u64,
) -> Result<Vec<TraceHit>, StoreError> {
    let ids = if search.error == Some(false) {
        None
    } else {
        let (sql, binds) = page_ids_statement(window, search, limit);
        let ids: Vec<String> = bind_all(store.client().query(&sql), &binds)
            .fetch_all()
            .await
            .map_err(|e| store.query_error("searching traces", e))?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        Some(ids)
    };
    let (sql, binds) = search_statement(window, search, ids.as_deref(), limit);
    bind_all(store.client().query(&sql), &binds).fetch_all().await.map_err(|e| store.query_error("searching traces", e))
}

/// One trace as a point of a duration-over-time scatter.
#[derive(Debug, Clone, PartialEq, Row, Deserialize)]
pub struct TracePoint {
    pub trace_id: String,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub error: u8,
}

/// The most points a scatter holds.
pub const MAX_POINTS: u64 = 5000;

/// Up to `limit` of the traces that match `search` in `window`, an even sample of them
/// (by a hash of the trace id), and its binds.
pub fn scatter_statement(window: Window, search: &TraceSearch, limit: u64) -> (String, Vec<Bind>) {
    let mut binds = Vec::new();
    let spans = matched_spans(window, search, None, &mut binds);
    binds.push(Bind::U64(limit.min(MAX_POINTS)));
    let sql = format!(
        "SELECT trace_id, min(start_ns), max(end_ns) - min(start_ns), max(status_code = 2) FROM {spans} \
         GROUP BY trace_id HAVING {} ORDER BY cityHash64(trace_id) LIMIT ?",
        trace_having(search).join(" AND ")
    );
    (sql, binds)
}

/// The scatter of `search` in `window`, at most `limit` points, in start order.
pub async fn scatter(
    store: &Store,
    window: Window,
    search: &TraceSearch,
    limit: u64,
) -> Result<Vec<TracePoint>, StoreError> {
    let (sql, binds) = scatter_statement(window, search, limit);
    let mut points: Vec<TracePoint> = bind_all(store.client().query(&sql), &binds)
        .fetch_all()
        .await
        .map_err(|e| store.query_error("reading a trace scatter", e))?;
    points.sort_by(|a, b| (a.start_ns, &a.trace_id).cmp(&(b.start_ns, &b.trace_id)));
    Ok(points)
}

pub fn statements() -> Vec<Statement> {
    let window = Window { from_ns: 1_764_547_200_000_000_000, to_ns: 1_764_548_100_000_000_000 };
    let widest = TraceSearch {
        query: Query {
            services: vec!["checkout".into()],
            operations: vec!["GET /".into(), "POST /".into()],
            duration: Some(Range { min: 1_000_000, max: u64::MAX }),
            statuses: vec![0, 1],
            traces: vec!["0123456789abcdef0123456789abcdef".into()],
            attributes: vec![("http.route".into(), "/cart".into())],
            ..Query::default()
        },
        error: Some(false),
        after: Some((1_764_547_800_000_000_000, "t".into())),
    };
    let with_errors = TraceSearch { error: Some(true), ..widest.clone() };
    let ids = ["0123456789abcdef0123456789abcdef".to_string(), "fedcba9876543210fedcba9876543210".to_string()];
    let mut all = vec![
        Statement { fields: LogRow::COLUMN_NAMES, ..Statement::new("query.trace_logs", TRACE_LOGS_SQL).binds(["'t'"]) },
        Statement::new("query.stored_traces", stored_traces_sql(2)).binds(["'t'", "'u'"]),
    ];
    for (name, (sql, binds)) in [
        ("query.trace_search", search_statement(window, &widest, None, 10)),
        ("query.trace_search_errors", search_statement(window, &with_errors, None, 10)),
        ("query.trace_search_unfiltered", search_statement(window, &TraceSearch::default(), None, 10)),
        ("query.trace_page_ids", page_ids_statement(window, &with_errors, 10)),
        ("query.trace_page_ids_unfiltered", page_ids_statement(window, &TraceSearch::default(), 10)),
        ("query.trace_search_of_ids", search_statement(window, &with_errors, Some(&ids), 10)),
        ("query.trace_scatter", scatter_statement(window, &widest, 10)),
        ("query.trace_scatter_errors", scatter_statement(window, &with_errors, 10)),
    ] {
        all.push(Statement::new(name, sql).binds(literals(&binds)));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_asked_of_a_query_of_other_statuses_match_nothing() {
        let search =
            TraceSearch { query: Query { statuses: vec![1], ..Query::default() }, error: Some(true), after: None };
        let window = Window { from_ns: 0, to_ns: 1 };
        assert!(search_statement(window, &search, None, 1).0.contains("toUInt8(0)"));
    }
}
