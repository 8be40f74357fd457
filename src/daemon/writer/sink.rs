//! Storing a batch in ClickHouse, in one of two modes chosen at start-up (docs/design.md#writer):
//!
//! - [`InsertMode::Batched`] (ClickHouse 18.16, or any server without
//!   `insert_deduplication_token`): one INSERT per table per batch. A record read twice is
//!   inserted twice, and the `ReplacingMergeTree` identities ((trace_id, span_id); (service,
//!   log_id)) collapse the copies; reads deduplicate with `FINAL`/`uniqExact`
//!   (`store::read`).
//! - [`InsertMode::Tokens`] (current ClickHouse): one INSERT per record, with
//!   `insert_deduplication_token = <topic>-<partition>-<offset>`, and the tables'
//!   `non_replicated_deduplication_window` set to [`DEDUP_WINDOW`]: a replayed record is
//!   discarded by the server, so even raw counts stay exact. The token must name a
//!   record, never a fetched batch (fetch boundaries differ on replay), and without the
//!   window the token is accepted and silently ignored. The identities still apply.
//! - [`InsertMode::PerRecord`] (a cluster, `[clickhouse] cluster`, of servers without tokens:
//!   18.16): one INSERT per record, without a token. Replicated tables discard a block
//!   identical to one of the last `replicated_deduplication_window` they stored, and a
//!   record's rows are the same block every time it is read (docs/scaling.md; proven in
//!   `tests/it/cluster.rs`), so raw counts stay exact there too.
//!
//! The window is a table setting (`store::schema::token_window_statements`), applied at
//! writer start; every insert goes through `store::insert`, which also splits rows that
//! cover too many day partitions.

use std::time::Instant;

use tokio::task::JoinSet;

use super::batch::{Batch, RecordRows, Rows};
use super::metrics::{Table, WriterMetrics};
use crate::store::{insert, Store, StoreError};

/// Per-record inserts running at once in token mode.
const TOKEN_INSERT_CONCURRENCY: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertMode {
    Batched,
    Tokens,
    PerRecord,
}

impl InsertMode {
    pub fn as_str(self) -> &'static str {
        match self {
            InsertMode::Batched => "batched",
            InsertMode::Tokens => "per-record-token",
            InsertMode::PerRecord => "per-record-block",
        }
    }
}

/// Chooses the mode for this server: tokens where supported and the window could be set,
/// otherwise per-record blocks on a cluster and batched on one server (which the identities
/// alone make safe).
pub async fn choose_mode(store: &Store) -> Result<InsertMode, StoreError> {
    if !insert::supports_tokens(store).await? {
        return Ok(if store.cluster().is_some() { InsertMode::PerRecord } else { InsertMode::Batched });
    }
    match insert::enable_token_window(store).await {
        Ok(()) => Ok(InsertMode::Tokens),
        Err(e) if e.is_unreachable() => Err(e),
        Err(e) => {
            tracing::warn!(error = %e, "the server knows insert_deduplication_token but the window could not be set; using batched inserts (deduplicated by identity)");
            Ok(InsertMode::Batched)
        }
    }
}

/// The deduplication token of a record: reproducible, so a replay hashes to the same token.
pub fn token(topic: &str, partition: i32, offset: i64) -> String {
    format!("{topic}-{partition}-{offset}")
}

#[derive(Clone)]
pub struct Sink {
    pub store: Store,
    pub mode: InsertMode,
    pub topic: String,
    pub metrics: WriterMetrics,
}

impl Sink {
    /// Inserts what of `batch` is not stored yet, marking what succeeds. Ok once every row
    /// of the batch is stored.
    pub async fn write(&self, batch: &mut Batch) -> Result<(), StoreError> {
        let started = Instant::now();
        match self.mode {
            InsertMode::Batched => self.write_batched(batch).await?,
            InsertMode::Tokens | InsertMode::PerRecord => self.write_tokens(batch).await?,
        }
        self.metrics.insert_seconds.observe(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Re-creates the schema (and the token window) if it is missing; errors are only logged,
    /// the insert that follows says whether it worked.
    pub async fn repair(&self) {
        if let Err(e) = crate::store::migrate::migrate(&self.store).await {
            tracing::debug!(error = %e, "migrating while inserts fail did not succeed");
            return;
        }
        if self.mode == InsertMode::Tokens {
            let _ = insert::enable_token_window(&self.store).await;
        }
    }

    async fn write_batched(&self, batch: &mut Batch) -> Result<(), StoreError> {
        let spans = async {
            if batch.spans_stored || batch.span_count() == 0 {
                return Ok(false);
            }
            insert::insert_encoded(&self.store, &batch.spans(), None).await.map(|_| true)
        };
        let logs = async {
            if batch.logs_stored || batch.log_count() == 0 {
                return Ok(false);
            }
            insert::insert_encoded(&self.store, &batch.logs(), None).await.map(|_| true)
        };
        let (spans, logs) = tokio::join!(spans, logs);
        let mut first_error = None;
        match spans {
            Ok(wrote) => {
                if wrote {
                    self.metrics.rows_written(Table::spans, batch.span_count());
                }
                batch.spans_stored = true;
            }
            Err(e) => first_error = Some(e),
        }
        match logs {
            Ok(wrote) => {
                if wrote {
                    self.metrics.rows_written(Table::logs, batch.log_count());
                }
                batch.logs_stored = true;
            }
            Err(e) => first_error = first_error.or(Some(e)),
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn write_tokens(&self, batch: &mut Batch) -> Result<(), StoreError> {
        let mut tasks = JoinSet::new();
        let mut first_error = None;
        let todo: Vec<usize> = (0..batch.records.len()).filter(|&i| !batch.records[i].stored).collect();
        let mut todo = todo.into_iter();
        loop {
            while tasks.len() < TOKEN_INSERT_CONCURRENCY {
                let Some(i) = todo.next() else { break };
                let record: RecordRows = batch.records[i].clone();
                let store = self.store.clone();
                let token =
                    (self.mode == InsertMode::Tokens).then(|| token(&self.topic, record.partition, record.offset));
                tasks.spawn(async move {
                    let token = token.as_deref();
                    let result = match &record.rows {
                        Rows::Spans(rows) => insert::insert_encoded(&store, &[&**rows], token).await,
                        Rows::Logs(rows) => insert::insert_encoded(&store, &[&**rows], token).await,
                    };
                    (i, result)
                });
            }
            let Some(joined) = tasks.join_next().await else {
                break;
            };
            let (i, result) = joined.expect("an insert task panicked");
            match result {
                Ok(()) => {
                    let record = &mut batch.records[i];
                    record.stored = true;
                    match &record.rows {
                        Rows::Spans(r) => self.metrics.rows_written(Table::spans, r.len()),
                        Rows::Logs(r) => self.metrics.rows_written(Table::logs, r.len()),
                    }
                }
                Err(e) => {
                    // Let the running inserts finish (they may succeed), start no new ones.
                    first_error.get_or_insert(e);
                    todo = Vec::new().into_iter();
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_a_record() {
        assert_eq!(token("tayga.signals", 3, 17), "tayga.signals-3-17");
    }
}
