//! Reads that see each row once. Spans and logs are ReplacingMergeTree tables keyed by
//! identity (docs/design.md#identity): a record read twice by the writer (at-least-once) is stored
//! twice until a background merge collapses the copies, so every read here deduplicates,
//! with `uniqExact` over the identity or `FINAL`. The raw counts are for checks and tests.
//!
//! Every statement runs on ClickHouse 18.16 and current ClickHouse (the registry test in
//! `tests/it/store.rs`, and `tests/it/writer_chdb.rs` for the answers in chdb-core); `?`
//! placeholders are filled with `.bind()`.

use super::statements::Statement;
use super::{LogRow, SpanRow, Store, StoreError};

/// Rows in `spans`, copies included.
pub const COUNT_SPANS_RAW_SQL: &str = "SELECT count() FROM spans";
/// Distinct spans: one per (trace_id, span_id).
pub const COUNT_SPANS_DEDUP_SQL: &str = "SELECT uniqExact(trace_id, span_id) FROM spans";
/// Rows in `logs`, copies included.
pub const COUNT_LOGS_RAW_SQL: &str = "SELECT count() FROM logs";
/// Distinct logs: one per (service, log_id), the table's key.
pub const COUNT_LOGS_DEDUP_SQL: &str = "SELECT uniqExact(service, log_id) FROM logs";
/// After `FROM spans`: the spans of one trace, each once (the newest copy), in time order.
/// Binds: trace id (lowercase hex).
pub const TRACE_SPANS_REST: &str = "FINAL WHERE trace_id = ? ORDER BY start_ns, span_id";
/// After `FROM logs`: the logs of one trace, each once, in time order. Binds: trace id.
pub const TRACE_LOGS_REST: &str = "FINAL WHERE trace_id = ? ORDER BY time_ns, log_id";

/// This module's statements with sample binds, for the registry (and, in this order, for
/// `tests/it/writer_chdb.rs`).
pub fn statements() -> Vec<Statement> {
    let trace = "'0af7651916cd43dd8448eb211c80319c'";
    vec![
        Statement::new("read.count_spans_raw", COUNT_SPANS_RAW_SQL),
        Statement::new("read.count_spans_dedup", COUNT_SPANS_DEDUP_SQL),
        Statement::new("read.count_logs_raw", COUNT_LOGS_RAW_SQL),
        Statement::new("read.count_logs_dedup", COUNT_LOGS_DEDUP_SQL),
        Statement::select::<SpanRow>("read.trace_spans", TRACE_SPANS_REST).binds([trace]),
        Statement::select::<LogRow>("read.trace_logs", TRACE_LOGS_REST).binds([trace]),
    ]
}

async fn count(store: &Store, what: &str, sql: &str) -> Result<u64, StoreError> {
    store.client().query(sql).fetch_one::<u64>().await.map_err(|source| store.query_error(what, source))
}

pub async fn count_spans_raw(store: &Store) -> Result<u64, StoreError> {
    count(store, "counting spans", COUNT_SPANS_RAW_SQL).await
}

pub async fn count_spans_dedup(store: &Store) -> Result<u64, StoreError> {
    count(store, "counting distinct spans", COUNT_SPANS_DEDUP_SQL).await
}

pub async fn count_logs_raw(store: &Store) -> Result<u64, StoreError> {
    count(store, "counting logs", COUNT_LOGS_RAW_SQL).await
}

pub async fn count_logs_dedup(store: &Store) -> Result<u64, StoreError> {
    count(store, "counting distinct logs", COUNT_LOGS_DEDUP_SQL).await
}

/// The spans of a trace, each once, ordered by start time.
pub async fn fetch_trace(store: &Store, trace_id: &str) -> Result<Vec<SpanRow>, StoreError> {
    store
        .select::<SpanRow>(TRACE_SPANS_REST)
        .bind(trace_id)
        .fetch_all()
        .await
        .map_err(|source| store.query_error(&format!("reading trace {trace_id}"), source))
}

/// The logs of a trace, each once, ordered by time.
pub async fn fetch_trace_logs(store: &Store, trace_id: &str) -> Result<Vec<LogRow>, StoreError> {
    store
        .select::<LogRow>(TRACE_LOGS_REST)
        .bind(trace_id)
        .fetch_all()
        .await
        .map_err(|source| store.query_error(&format!("reading the logs of trace {trace_id}"), source))
}
