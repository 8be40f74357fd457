//! What the writer reports: one method per event, each logging and counting together
//! (docs/metrics.md lists the metrics).

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::bus::consume::{ConsumerMetrics, Group};
use crate::store::retention::DroppedPartition;

/// The `table` label of `tayga_writer_written_rows_total`.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Table {
    spans,
    logs,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabel {
    pub table: Table,
}

/// What follows a failed insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The batch inserted beside the next one failed: it is stored again with it.
    Merged,
    /// Consumption is paused and the insert retried after `wait`.
    Retry { attempt: u32, wait: Duration },
}

#[derive(Clone)]
pub struct WriterMetrics {
    pub consumer: ConsumerMetrics,
    pub rows: Family<TableLabel, Counter>,
    pub insert_seconds: Histogram,
    pub batches: Counter,
    pub retries: Counter,
    pub insert_errors: Counter,
    pub retention_errors: Counter,
    pub pending_records: Gauge,
    pub paused: Gauge,
    pub clickhouse_up: Gauge,
    pub partitions_dropped: Counter,
    /// For `/health`: whether the last insert failed.
    pub clickhouse_down: Arc<AtomicBool>,
}

impl WriterMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn new(registry: &mut Registry) -> WriterMetrics {
        let m = WriterMetrics {
            consumer: ConsumerMetrics::register(registry, Group::Writer),
            rows: Family::default(),
            // 1 ms to about 30 s.
            insert_seconds: Histogram::new(exponential_buckets(0.001, 2.5, 12)),
            batches: Counter::default(),
            retries: Counter::default(),
            insert_errors: Counter::default(),
            retention_errors: Counter::default(),
            pending_records: Gauge::default(),
            paused: Gauge::default(),
            clickhouse_up: Gauge::default(),
            partitions_dropped: Counter::default(),
            clickhouse_down: Arc::default(),
        };
        let r = registry.sub_registry_with_prefix("tayga_writer");
        r.register("written_rows", "Rows inserted into ClickHouse, by table", m.rows.clone());
        r.register(
            "insert_duration_seconds",
            "Duration of one successful flush (every insert of a batch)",
            m.insert_seconds.clone(),
        );
        r.register("stored_batches", "Batches stored and committed", m.batches.clone());
        r.register(
            "insert_retries",
            "Flush attempts repeated after a failed insert (ClickHouse down or refusing)",
            m.retries.clone(),
        );
        r.register("insert_errors", "Failed inserts (the batch is retried)", m.insert_errors.clone());
        r.register(
            "retention_errors",
            "Failed retention sweeps (it runs again at the next interval)",
            m.retention_errors.clone(),
        );
        r.register("pending_records", "Records consumed and buffered, not yet stored", m.pending_records.clone());
        r.register(
            "paused",
            "1 while consumption is paused because ClickHouse does not accept inserts",
            m.paused.clone(),
        );
        r.register("clickhouse_up", "1 when the last insert succeeded", m.clickhouse_up.clone());
        r.register(
            "retention_dropped_partitions",
            "Day partitions dropped by the retention sweep",
            m.partitions_dropped.clone(),
        );
        m.clickhouse_up.set(1);
        m
    }

    pub fn rows_written(&self, table: Table, n: usize) {
        self.rows.get_or_create(&TableLabel { table }).inc_by(n as u64);
    }

    pub fn pending(&self, records: usize) {
        self.pending_records.set(records as i64);
    }

    /// An insert succeeded after `attempts` tries (1: at once).
    pub fn insert_succeeded(&self, attempts: u32) {
        if attempts > 1 {
            tracing::info!(attempts, "ClickHouse accepts inserts again; resuming");
        }
        self.set_clickhouse_up(true);
    }

    pub fn insert_failed(&self, error: &dyn Display, next: AfterFailure) {
        self.insert_errors.inc();
        self.set_clickhouse_up(false);
        match next {
            AfterFailure::Merged => {
                tracing::warn!(error = %error, "storing a batch failed; retrying it with what was read since")
            }
            AfterFailure::Retry { attempt, wait } => {
                self.retries.inc();
                // The first failure and every tenth: an outage is visible, not a flood.
                if attempt == 1 || attempt.is_multiple_of(10) {
                    tracing::warn!(error = %error, attempt, retry_in_ms = wait.as_millis() as u64,
                        "storing a batch failed; consumption paused, retrying");
                }
            }
        }
    }

    /// A stop or a revoke gave up waiting for ClickHouse after `attempts` failed attempts.
    pub fn gave_up(&self, attempts: u32) {
        tracing::warn!(attempts, "giving up storing the batch for now; its offsets are not committed");
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.set(i64::from(paused));
    }

    /// A batch was stored and its offsets committed.
    pub fn batch_stored(&self, records: usize, rows: usize, filled: Duration, insert: Duration, commit: Duration) {
        self.batches.inc();
        tracing::debug!(
            records,
            rows,
            filled_ms = filled.as_millis() as u64,
            insert_ms = insert.as_millis() as u64,
            commit_ms = commit.as_millis() as u64,
            "batch stored and committed"
        );
    }

    pub fn partitions_dropped(&self, dropped: &[DroppedPartition]) {
        for d in dropped {
            tracing::info!(table = %d.table, partition = %d.partition, "retention: dropped an expired day partition");
        }
        self.partitions_dropped.inc_by(dropped.len() as u64);
    }

    pub fn retention_failed(&self, error: &dyn Display) {
        self.retention_errors.inc();
        tracing::warn!(error = %error, "retention sweep failed; it runs again at the next interval");
    }

    fn set_clickhouse_up(&self, up: bool) {
        self.clickhouse_up.set(i64::from(up));
        self.clickhouse_down.store(!up, Ordering::Relaxed);
    }

    pub fn is_clickhouse_down(&self) -> bool {
        self.clickhouse_down.load(Ordering::Relaxed)
    }
}
