//! Synthetic rows generated on the server (`INSERT … SELECT … FROM numbers(n)`), for the
//! read-cost tests and the API benchmark (`examples/api_bench.rs`): millions of rows in
//! seconds, without shipping them over HTTP. Shaped like real traffic where the API's costs
//! depend on it: 5 spans per trace over several services, logs that belong to traces and
//! match a few templates per service, one story per trace, alerts of every kind; and a day of
//! stories of many shapes for the shape pass's benchmark (`examples/shape_pass_bench.rs`).

use crate::store::{Store, StoreError};

#[derive(Debug, Clone)]
pub struct SyntheticData {
    pub spans: u64,
    /// Logs; log `i` belongs to the trace of span `i × spans / logs`.
    pub logs: u64,
    pub services: u64,
    pub templates_per_service: u64,
    pub alerts: u64,
    /// Every row's time lies in `[end_ns - span_ns, end_ns)`.
    pub end_ns: u64,
    pub span_ns: u64,
}

/// The trace id of trace number `n` (an SQL expression over `n`): 32 hex digits.
fn trace_of(n: &str) -> String {
    format!("lower(hex(MD5(toString({n}))))")
}

/// The trace id of the `i`-th trace, as [`fill`] wrote it.
pub fn trace_id_sql(i: u64) -> String {
    format!("SELECT {}", trace_of(&i.to_string()))
}

/// The statements [`fill`] runs, in order, and what each fills.
pub fn statements(s: &SyntheticData) -> Vec<(&'static str, String)> {
    let SyntheticData { spans, logs, services, templates_per_service: t, alerts, end_ns, span_ns } = s.clone();
    let start = end_ns - span_ns;
    let span_step = (span_ns / spans.max(1)).max(1);
    let log_step = (span_ns / logs.max(1)).max(1);
    let ratio = (spans / logs.max(1)).max(1);
    let traces = (spans / 5).max(1);
    let trace_step = (span_ns / traces).max(1);
    vec![
        (
            "spans",
            format!(
                "INSERT INTO spans (trace_id, span_id, parent_span_id, service, name, kind, start_ns, end_ns, duration_ns, \
                 status_code, status_message, attr_keys, attr_values, resource_keys, resource_values, scope_name, event_count, \
                 link_count, ingest_ns) \
                 SELECT {trace}, substring(lower(hex(MD5(toString(number)))), 1, 16), \
                 if(number % 5 = 0, '', substring(lower(hex(MD5(toString(number - number % 5)))), 1, 16)), \
                 concat('svc-', toString((intDiv(number, 5) + number % 5) % {services})), concat('op-', toString(number % 5)), \
                 toUInt8(2), {start} + number * {span_step}, {start} + number * {span_step} + (number * 7919) % 1000000000, \
                 (number * 7919) % 1000000000, toUInt8(if(number % 97 = 0, 2, 0)), '', ['http.method'], ['GET'], \
                 ['service.name'], [concat('svc-', toString((intDiv(number, 5) + number % 5) % {services}))], 'seed', \
                 toUInt32(0), toUInt32(0), toUInt64(1) FROM numbers({spans})",
                trace = trace_of("intDiv(number, 5)"),
            ),
        ),
        (
            "logs",
            format!(
                "INSERT INTO logs (log_id, service, time_ns, observed_ns, severity_number, severity_text, body, trace_id, \
                 span_id, attr_keys, attr_values, resource_keys, resource_values, scope_name, ingest_ns) \
                 SELECT number + 1, concat('svc-', toString(number % {services})), {start} + number * {log_step}, \
                 {start} + number * {log_step}, toUInt8(if(number % 50 = 0, 17, 9)), if(number % 50 = 0, 'ERROR', 'INFO'), \
                 concat('request ', toString(number % {t}), ' took ', toString(number % 300), ' ms'), {trace}, '', \
                 emptyArrayString(), emptyArrayString(), emptyArrayString(), emptyArrayString(), 'seed', toUInt64(1) \
                 FROM numbers({logs})",
                trace = trace_of(&format!("intDiv(number * {ratio}, 5)")),
            ),
        ),
        (
            "log_hits",
            format!(
                "INSERT INTO log_hits SELECT concat('svc-', toString(number % {services})), number + 1, number % {t} + 1, \
                 {start} + number * {log_step} FROM numbers({logs})"
            ),
        ),
        (
            "log_templates",
            format!(
                "INSERT INTO log_templates SELECT concat('svc-', toString(intDiv(number, {t}))), number % {t} + 1, \
                 concat('request ', toString(number % {t}), ' took <NUM> ms'), intDiv({logs}, {services} * {t}), {start}, \
                 {end_ns}, 'seed', toUInt64(1) FROM numbers({services} * {t})"
            ),
        ),
        (
            "stories",
            format!(
                "INSERT INTO stories SELECT {trace}, number % 40 + 1, concat('svc-', toString(number % {services})), 'op-0', \
                 {start} + number * {trace_step}, (number * 7919) % 1000000000, toUInt32(5), \
                 [concat('svc-', toString(number % {services}))], [concat('op-0 -> op-', toString(number % 40))], \
                 toUInt8(number % 97 = 0), toUInt32(number % 97 = 0), toUInt32(1), toUInt8(0), toUInt64(1), \
                 if(number % 97 = 0, 'TimeoutError', ''), if(number % 97 = 0, 'query timed out', '') FROM numbers({traces})",
                trace = trace_of("number"),
            ),
        ),
        (
            "log_alerts",
            format!(
                "INSERT INTO log_alerts (alert_id, kind, service, template_id, template, first_at, last_at, count, \
                 baseline, threshold, stored_ns, updated_ns) SELECT number + 1, ['new_template', 'spike', 'silence'][number % 3 + 1], \
                 concat('svc-', toString(number % {services})), number % {t} + 1, 'request <NUM> took <NUM> ms', \
                 {start} + number * {step}, {start} + number * {step} + 60000000000, toUInt64(5), 1., 5., toUInt64(1), \
                 {start} + number * {step} + 60000000000 FROM numbers({alerts})",
                step = (span_ns / alerts.max(1)).max(1),
            ),
        ),
        (
            "log_alert_publications",
            "INSERT INTO log_alert_publications SELECT alert_id, updated_ns, updated_ns + 1 FROM log_alerts \
             WHERE alert_id % 2 = 0"
                .to_string(),
        ),
        (
            "notifier_deliveries",
            "INSERT INTO notifier_deliveries SELECT alert_id, arrayJoin(['ops', 'pager']), 'delivered', toUInt32(1), '', \
             updated_ns, updated_ns + 1, toUInt32(0), toUInt64(0), '', toUInt64(0) FROM log_alerts"
                .to_string(),
        ),
        (
            "pipeline_metrics",
            format!(
                "INSERT INTO pipeline_metrics SELECT {start} + intDiv(number, 8) * 15000000000, \
                 ['ingest', 'writer', 'assembler', 'notifier', 'logminer', 'logminer', 'logminer', 'logminer'][number % 8 + 1], \
                 concat('127.0.0.', toString(number % 8 + 1), ':9403'), \
                 ['tayga_ingest_requests_total', 'up', 'tayga_logminer_templates', 'tayga_logminer_logs_mined_total'][number % 4 + 1], \
                 emptyArrayString(), emptyArrayString(), toFloat64(intDiv(number, 8) * (number % 8 + 1)) \
                 FROM numbers(intDiv({span_ns}, 15000000000) * 8)"
            ),
        ),
    ]
}

/// A day of an install's stories for the shape pass's benchmark (`examples/shape_pass_bench.rs`):
/// `stories` traces evenly over `[end_ns - span_ns, end_ns)`, round-robin over `endpoints`
/// endpoints (root operations of 8 root services), each taking up to 17 shapes with
/// geometrically falling frequency (about half its traces the usual one, one in 65,536
/// the rarest), a shape's edges growing with its rank (4 to 20: the root's, then calls
/// from a handler), durations of 20 to 220 ms.
/// Like real stories, each fingerprint has one set of edges; the view fills `shape_minutes`.
pub fn shape_stories_sql(stories: u64, endpoints: u64, end_ns: u64, span_ns: u64) -> String {
    let start = end_ns - span_ns;
    let step = (span_ns / stories.max(1)).max(1);
    let e = format!("number % {endpoints}");
    let root = format!("concat('svc-', toString({e} % 8))");
    let op = format!("concat('GET /r', toString({e}))");
    let rank = "toUInt64(16 - floor(log2(1 + intHash64(number) % 65536)))";
    let calls: Vec<String> = (0..19).map(|i| format!("'handler/run -> dep{i}/call {i}'")).collect();
    let calls = calls.join(", ");
    format!(
        "INSERT INTO stories (trace_id, fingerprint, root_service, root_operation, start_ns, duration_ns, span_count, \
         services, edges, error, error_spans, log_count, truncated, version_ns) \
         SELECT {trace}, cityHash64({e}, {rank}), {root}, {op}, {start} + number * {step}, \
         20000000 + intHash64(number * 3) % 200000000, toUInt32(4 + {rank}), [{root}], \
         arrayConcat([concat('ROOT -> ', {root}, '/', {op})], arraySlice([{calls}], 1, 3 + {rank})), toUInt8(0), \
         toUInt32(0), toUInt32(1), toUInt8(0), toUInt64(1) FROM numbers({stories})",
        trace = trace_of("number"),
    )
}

/// Fills `stories` (and so `shape_minutes`) with [`shape_stories_sql`]'s day, then merges
/// both into one part per partition.
pub async fn fill_shape_stories(
    store: &Store,
    stories: u64,
    endpoints: u64,
    end_ns: u64,
    span_ns: u64,
) -> Result<(), StoreError> {
    store.execute("filling stories", &shape_stories_sql(stories, endpoints, end_ns, span_ns)).await?;
    for table in ["stories", "shape_minutes"] {
        store.execute(&format!("merging {table}"), &optimize_sql(table)).await?;
    }
    Ok(())
}

/// Fills every table of `store`, then merges each into one part per day partition, as a
/// settled table is.
pub async fn fill(store: &Store, s: &SyntheticData) -> Result<(), StoreError> {
    for (table, sql) in statements(s) {
        store.execute(&format!("filling {table}"), &sql).await?;
    }
    for table in MERGED_TABLES {
        store.execute(&format!("merging {table}"), &optimize_sql(table)).await?;
    }
    Ok(())
}

/// The tables [`fill`] fills, and those their views fill, merged afterwards.
const MERGED_TABLES: [&str; 14] = [
    "spans",
    "logs",
    "trace_logs",
    "log_hits",
    "log_templates",
    "stories",
    "log_alerts",
    "log_alert_publications",
    "notifier_deliveries",
    "spans_by_time",
    "logs_by_time",
    "log_hits_by_time",
    "service_minutes",
    "shape_minutes",
];

/// Merges `table` into one part per partition, as a settled table is (on one server: the
/// synthetic data is never written to a cluster).
pub fn optimize_sql(table: &str) -> String {
    format!("OPTIMIZE TABLE {table} FINAL")
}
