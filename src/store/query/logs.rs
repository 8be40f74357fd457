//! Logs by search (`crate::search`): the lines of a window that match a query, each with
//! the template it matched, newest first in keyset pages; their count over time by
//! severity; and a line's context (the lines around it from the same service and instance).
//!
//! Every statement reads `logs_by_time` and `log_hits_by_time` (ordered by bucket, service,
//! time), bounded by the window's buckets, so it reads the rows of its window (and of its
//! services), not the day's (docs/api.md, "Reading by time"). A count over time of a query
//! of services and severities only reads the per-minute rollup, `service_minutes`.

use clickhouse::Row;
use serde::Deserialize;

use super::{any_of, attribute_conditions, bind_all, literals, window_conditions, Bind, Window, MAX_LIMIT};
use crate::search::{Query, Range};
use crate::store::statements::Statement;
use crate::store::{LogRow, Store, StoreError};
use crate::time::MINUTE_NS;

/// A line of a search: the stored log, whole (the API's and the app's lines are made from a
/// `LogRow` wherever it was read), and the template it matched.
#[derive(Debug, Clone, PartialEq, Row, Deserialize)]
pub struct LogWithTemplate {
    /// The columns of `logs_by_time` in `LogRow`'s order, then the hit's.
    pub log: LogRow,
    /// 0 when the log has no hit (not mined yet).
    pub template_id: u64,
}

/// A logs search: the query (its services, severities, templates, traces, attributes and
/// words), and where the previous page ended.
#[derive(Debug, Clone, Default)]
pub struct LogSearch {
    pub query: Query,
    /// Keyset cursor: the previous page's last (time, log id).
    pub before: Option<(u64, u64)>,
}

/// The conditions of `query` on a row of `logs_by_time` (joined with its hit when the query
/// names templates), after the window's.
fn query_conditions(query: &Query, conditions: &mut Vec<String>, binds: &mut Vec<Bind>) {
    any_of("service", query.services.iter().cloned().map(Bind::Str), conditions, binds);
    if let Some(Range { min, max }) = query.severity {
        conditions.push("severity_number >= ? AND severity_number <= ?".into());
        binds.extend([Bind::U64(min.into()), Bind::U64(max.into())]);
    }
    any_of("template_id", query.templates.iter().copied().map(Bind::U64), conditions, binds);
    any_of("trace_id", query.traces.iter().cloned().map(Bind::Str), conditions, binds);
    attribute_conditions(&query.attributes, conditions, binds);
    for text in &query.text {
        conditions.push("positionCaseInsensitiveUTF8(body, ?) > 0".into());
        binds.push(Bind::Str(text.clone()));
    }
}

/// The hits of the window (of the query's services), joined by (service, log id). Binds:
/// the window's, then the services.
fn hits_join(window: Window, query: &Query, binds: &mut Vec<Bind>) -> String {
    let mut conditions = window_conditions("time_ns", window, binds);
    any_of("service", query.services.iter().cloned().map(Bind::Str), &mut conditions, binds);
    format!(
        "ANY LEFT JOIN (SELECT service, log_id, template_id FROM log_hits_by_time WHERE {}) AS hits USING (service, log_id)",
        conditions.join(" AND ")
    )
}

/// The page of `search` in `window`, and its binds in order.
pub fn logs_statement(window: Window, search: &LogSearch, limit: u64) -> (String, Vec<Bind>) {
    // A page after the first reads only the window's part before its cursor.
    let window = match search.before {
        Some((time, _)) => Window { from_ns: window.from_ns, to_ns: window.to_ns.min(time.saturating_add(1)) },
        None => window,
    };
    let mut binds = Vec::new();
    let join = hits_join(window, &search.query, &mut binds);
    let mut conditions = window_conditions("time_ns", window, &mut binds);
    query_conditions(&search.query, &mut conditions, &mut binds);
    if let Some((time, id)) = search.before {
        conditions.push("(time_ns < ? OR (time_ns = ? AND log_id < ?))".into());
        binds.extend([Bind::U64(time), Bind::U64(time), Bind::U64(id)]);
    }
    binds.push(Bind::U64(limit.min(MAX_LIMIT)));
    let sql = format!(
        "SELECT {}, template_id FROM logs_by_time FINAL {join} WHERE {} ORDER BY time_ns DESC, log_id DESC LIMIT ?",
        <LogRow as Row>::COLUMN_NAMES.join(", "),
        conditions.join(" AND ")
    );
    (sql, binds)
}

/// The first slice [`logs`] reads, at the newest end of the window; each next one is four
/// times longer.
pub const FIRST_SLICE_NS: u64 = 15 * MINUTE_NS;

/// The slices of `window` a page reads one after another, newest first: 15 minutes, then
/// an hour before it, then four, … until the window's start.
pub fn slices(window: Window) -> Vec<Window> {
    let mut out = Vec::new();
    let (mut to, mut length) = (window.to_ns, FIRST_SLICE_NS);
    while to > window.from_ns {
        let from = to.saturating_sub(length).max(window.from_ns);
        out.push(Window { from_ns: from, to_ns: to });
        to = from;
        length = length.saturating_mul(4);
    }
    out
}

/// The lines of `window` that match `search`, newest first, at most `limit`.
///
/// 18.16 reads a whole window before it sorts and cuts it (no reading in key order), so a
/// page of the newest lines of a week would read the week. The page is read in slices from
/// the newest end instead ([`slices`]), stopping once it is full: a search with many
/// matches reads its newest quarter hour or so; a rare one reads the window, in a few more
/// statements than one.
pub async fn logs(
    store: &Store,
    window: Window,
    search: &LogSearch,
    limit: u64,
) -> Result<Vec<LogWithTemplate>, StoreError> {
    let limit = limit.min(MAX_LIMIT);
    let window = match search.before {
        Some((time, _)) => Window { from_ns: window.from_ns, to_ns: window.to_ns.min(time.saturating_add(1)) },
        None => window,
    };
    let mut rows: Vec<LogWithTemplate> = Vec::new();
    for slice in slices(window) {
        let (sql, binds) = logs_statement(slice, search, limit - rows.len() as u64);
        let page: Vec<LogWithTemplate> = bind_all(store.client().query(&sql), &binds)
            .fetch_all()
            .await
            .map_err(|e| store.query_error("searching logs", e))?;
        rows.extend(page);
        if rows.len() as u64 >= limit {
            break;
        }
    }
    Ok(rows)
}

/// How many lines of one severity number matched in one step of a count over time.
#[derive(Debug, Clone, PartialEq, Row, Deserialize)]
pub struct SeverityCount {
    /// The step's start (a multiple of the step).
    pub start_ns: u64,
    pub severity_number: u8,
    pub count: u64,
}

/// Whether the rollup answers a count of `query`: it knows only services and severities.
pub fn counted_by_rollup(query: &Query) -> bool {
    query.text.is_empty() && query.attributes.is_empty() && query.templates.is_empty() && query.traces.is_empty()
}

/// The count over time of `query` in `window` by steps of `step_ns`, and its binds. From
/// the rollup when [`counted_by_rollup`] and the step and the window are whole minutes;
/// else from the lines (each counted once: `uniqExact` of its id).
pub fn counts_statement(window: Window, query: &Query, step_ns: u64) -> (String, Vec<Bind>) {
    let step_ns = step_ns.max(1);
    let mut binds = vec![Bind::U64(step_ns), Bind::U64(step_ns)];
    if counted_by_rollup(query) && step_ns.is_multiple_of(MINUTE_NS) && window.from_ns.is_multiple_of(MINUTE_NS) {
        binds.extend([Bind::U64(window.from_ns), Bind::U64(window.to_ns)]);
        let mut conditions = vec!["minute_ns >= ?".to_string(), "minute_ns < ?".to_string()];
        any_of("service", query.services.iter().cloned().map(Bind::Str), &mut conditions, &mut binds);
        if let Some(Range { min, max }) = query.severity {
            conditions.push("severity_number >= ? AND severity_number <= ?".into());
            binds.extend([Bind::U64(min.into()), Bind::U64(max.into())]);
        }
        let sql = format!(
            "SELECT intDiv(minute_ns, ?) * ? AS start, severity_number, sumMerge(logs) AS lines FROM service_minutes \
             WHERE {} GROUP BY start, severity_number HAVING lines > 0 ORDER BY start, severity_number",
            conditions.join(" AND ")
        );
        return (sql, binds);
    }
    let join = if query.templates.is_empty() { String::new() } else { hits_join(window, query, &mut binds) };
    let mut conditions = window_conditions("time_ns", window, &mut binds);
    query_conditions(query, &mut conditions, &mut binds);
    let sql = format!(
        "SELECT intDiv(time_ns, ?) * ? AS start, severity_number, uniqExact(log_id) FROM logs_by_time {join} \
         WHERE {} GROUP BY start, severity_number ORDER BY start, severity_number",
        conditions.join(" AND ")
    );
    (sql, binds)
}

/// The count of `query`'s lines in `window` per step and severity number, in time order.
pub async fn counts(
    store: &Store,
    window: Window,
    query: &Query,
    step_ns: u64,
) -> Result<Vec<SeverityCount>, StoreError> {
    let (sql, binds) = counts_statement(window, query, step_ns);
    bind_all(store.client().query(&sql), &binds)
        .fetch_all()
        .await
        .map_err(|e| store.query_error("counting logs over time", e))
}

/// One line, by the key of `logs_by_time`: (its bucket,) service, time, id. Binds: bucket,
/// service, time, log id.
pub const LINE_SQL: &str =
    "SELECT ?fields FROM logs_by_time FINAL WHERE bucket = ? AND service = ? AND time_ns = ? AND log_id = ? LIMIT 1";

/// How far from a line its context is looked for, each way: the lines of a busy instance
/// are seconds apart; a quiet one's may be minutes.
pub const CONTEXT_SPAN_NS: u64 = 15 * MINUTE_NS;

/// The resource attributes that name an instance, in the order they are tried: the
/// OpenTelemetry instance id, then the host.
pub const INSTANCE_KEYS: [&str; 2] = ["service.instance.id", "host.name"];

/// The lines before (`earlier`) or after a line of `service` at (time, log id), nearest
/// first, from the same instance when `instance` (a resource key and value) is given.
/// Binds: the window's, service, [key, value], time, time, log id, limit.
pub fn neighbours_statement(
    earlier: bool,
    service: &str,
    at: (u64, u64),
    instance: Option<(&str, &str)>,
    n: u64,
) -> (String, Vec<Bind>) {
    let (time, id) = at;
    let window = if earlier {
        Window { from_ns: time.saturating_sub(CONTEXT_SPAN_NS), to_ns: time.saturating_add(1) }
    } else {
        Window { from_ns: time, to_ns: time.saturating_add(CONTEXT_SPAN_NS) }
    };
    let mut binds = Vec::new();
    let mut conditions = window_conditions("time_ns", window, &mut binds);
    conditions.push("service = ?".into());
    binds.push(Bind::Str(service.to_string()));
    if let Some((key, value)) = instance {
        conditions.push("arrayExists((k, v) -> k = ? AND v = ?, resource_keys, resource_values)".into());
        binds.extend([Bind::Str(key.to_string()), Bind::Str(value.to_string())]);
    }
    let (side, order) = if earlier {
        ("(time_ns < ? OR (time_ns = ? AND log_id < ?))", "time_ns DESC, log_id DESC")
    } else {
        ("(time_ns > ? OR (time_ns = ? AND log_id > ?))", "time_ns, log_id")
    };
    conditions.push(side.into());
    binds.extend([Bind::U64(time), Bind::U64(time), Bind::U64(id), Bind::U64(n.min(MAX_LIMIT))]);
    let sql =
        format!("SELECT ?fields FROM logs_by_time FINAL WHERE {} ORDER BY {order} LIMIT ?", conditions.join(" AND "));
    (sql, binds)
}

/// A line and the lines around it.
#[derive(Debug, Clone, PartialEq)]
pub struct LogContext {
    pub line: LogRow,
    /// The resource attribute the neighbours share with the line (`INSTANCE_KEYS`), if it
    /// has one; else they are the service's.
    pub instance: Option<(String, String)>,
    /// Up to `n` lines before it, oldest first.
    pub before: Vec<LogRow>,
    /// Up to `n` lines after it, oldest first.
    pub after: Vec<LogRow>,
}

/// The line of `service` at `time_ns` with id `log_id` and up to `n` lines each side from
/// the same service and instance; `None` when no such line is stored.
pub async fn context(
    store: &Store,
    service: &str,
    time_ns: u64,
    log_id: u64,
    n: u64,
) -> Result<Option<LogContext>, StoreError> {
    let bucket = time_ns / crate::store::schema::BUCKET_NS;
    let line: Option<LogRow> = store
        .client()
        .query(LINE_SQL)
        .bind(bucket)
        .bind(service)
        .bind(time_ns)
        .bind(log_id)
        .fetch_optional()
        .await
        .map_err(|e| store.query_error("reading a log line", e))?;
    let Some(line) = line else { return Ok(None) };
    let instance = INSTANCE_KEYS.iter().find_map(|key| {
        let at = line.resource_keys.iter().position(|k| k == key)?;
        Some((key.to_string(), line.resource_values.get(at)?.clone()))
    });
    let mut sides = Vec::new();
    for earlier in [true, false] {
        let (sql, binds) = neighbours_statement(
            earlier,
            service,
            (time_ns, log_id),
            instance.as_ref().map(|(k, v)| (k.as_str(), v.as_str())),
            n,
        );
        let rows: Vec<LogRow> = bind_all(store.client().query(&sql), &binds)
            .fetch_all()
            .await
            .map_err(|e| store.query_error("reading a log line's context", e))?;
        sides.push(rows);
    }
    let after = sides.pop().unwrap_or_default();
    let mut before = sides.pop().unwrap_or_default();
    before.reverse();
    Ok(Some(LogContext { line, instance, before, after }))
}

/// A query of every kind of term, for the registry.
fn widest_query() -> Query {
    Query {
        text: vec!["timeout".into(), "connection reset".into()],
        attributes: vec![("http.status_code".into(), "503".into())],
        services: vec!["checkout".into(), "cart".into()],
        severity: Some(Range { min: 13, max: 24 }),
        templates: vec![1, 2],
        traces: vec!["0123456789abcdef0123456789abcdef".into()],
        ..Query::default()
    }
}

pub fn statements() -> Vec<Statement> {
    let window = Window { from_ns: 1_764_547_200_000_000_000, to_ns: 1_764_548_100_000_000_000 };
    let widest = LogSearch { query: widest_query(), before: Some((1_764_547_800_000_000_000, 7)) };
    let mut all = Vec::new();
    let mut add = |name: &str, (sql, binds): (String, Vec<Bind>)| {
        all.push(Statement::new(name, sql).binds(literals(&binds)));
    };
    add("query.logs", logs_statement(window, &widest, 10));
    add("query.logs_unfiltered", logs_statement(window, &LogSearch::default(), 10));
    add("query.log_counts", counts_statement(window, &widest.query, 60_000_000_000));
    let rollup = Query { services: vec!["a".into()], severity: Some(Range { min: 17, max: 24 }), ..Query::default() };
    add("query.log_counts_rollup", counts_statement(window, &rollup, 300_000_000_000));
    add("query.log_counts_all_rollup", counts_statement(window, &Query::default(), 60_000_000_000));
    let instance = Some(("service.instance.id", "i-1"));
    add("query.log_context_before", neighbours_statement(true, "s", (window.from_ns, 1), instance, 20));
    add("query.log_context_after", neighbours_statement(false, "s", (window.from_ns, 1), None, 20));
    all.push(
        Statement { fields: LogRow::COLUMN_NAMES, ..Statement::new("query.log_line", LINE_SQL) }
            .binds(["1", "'s'", "0", "0"]),
    );
    for s in all.iter_mut().filter(|s| s.name.starts_with("query.log_context")) {
        s.fields = LogRow::COLUMN_NAMES;
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_services_and_severities_reads_the_rollup_and_any_other_the_lines() {
        let window = Window { from_ns: 60_000_000_000 * 100, to_ns: 60_000_000_000 * 160 };
        let severity = Query { severity: Some(Range { min: 17, max: 20 }), ..Query::default() };
        assert!(counts_statement(window, &severity, MINUTE_NS).0.contains("FROM service_minutes"));
        let words = Query { text: vec!["x".into()], ..Query::default() };
        assert!(counts_statement(window, &words, MINUTE_NS).0.contains("FROM logs_by_time"));
        // A step of seconds cannot be counted from minutes.
        assert!(counts_statement(window, &severity, 1_000_000_000).0.contains("FROM logs_by_time"));
    }

    #[test]
    fn a_window_is_read_in_slices_from_its_newest_end_each_four_times_longer() {
        let m = MINUTE_NS;
        let window = Window { from_ns: 0, to_ns: 400 * m };
        let lengths: Vec<u64> = slices(window).iter().map(|w| (w.to_ns - w.from_ns) / m).collect();
        assert_eq!(lengths, [15, 60, 240, 85]);
        let s = slices(window);
        assert!(s.windows(2).all(|w| w[0].from_ns == w[1].to_ns));
        assert_eq!((s[0].to_ns, s[3].from_ns), (400 * m, 0));
        assert_eq!(slices(Window { from_ns: 0, to_ns: 10 * m }), [Window { from_ns: 0, to_ns: 10 * m }]);
    }

    #[test]
    fn a_later_page_reads_only_the_window_before_its_cursor() {
        let bucket = crate::store::schema::BUCKET_NS;
        let window = Window { from_ns: 0, to_ns: 10 * bucket };
        let (_, binds) = logs_statement(window, &LogSearch { before: Some((bucket + 5, 3)), ..Default::default() }, 10);
        // The hits' window, then the logs': first and last bucket, from, to.
        assert_eq!(binds[..4], [Bind::U64(0), Bind::U64(1), Bind::U64(0), Bind::U64(bucket + 6)]);
    }
}
