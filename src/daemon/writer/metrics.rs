//! The writer's Prometheus metrics (docs/writer.md lists them).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The `table` label of `tayga_writer_rows_written_total`.
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

/// The `kind` label of `tayga_writer_errors_total`.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ErrorKind {
    /// An insert failed (ClickHouse down or refusing); the batch is retried.
    insert,
    /// An offset commit failed; the offsets are carried into the next commit.
    commit,
    /// The consumer reported an error (broker unreachable, …).
    consume,
    /// The retention sweep failed; it runs again at the next interval.
    retention,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    pub kind: ErrorKind,
}

#[derive(Clone)]
pub struct WriterMetrics {
    pub records: Counter,
    pub undecodable: Counter,
    pub rows: Family<TableLabel, Counter>,
    pub insert_seconds: Histogram,
    pub batches: Counter,
    pub retries: Counter,
    pub errors: Family<ErrorLabel, Counter>,
    pub commits: Counter,
    pub lag: Gauge,
    pub pending_records: Gauge,
    pub paused: Gauge,
    pub clickhouse_up: Gauge,
    pub partitions_dropped: Counter,
    /// For `/health`: whether the last insert succeeded, the assigned partition count.
    pub state: Arc<HealthState>,
}

#[derive(Debug, Default)]
pub struct HealthState {
    pub clickhouse_down: AtomicBool,
    pub assigned: AtomicI64,
}

impl HealthState {
    pub fn set_clickhouse_down(&self, down: bool) {
        self.clickhouse_down.store(down, Ordering::Relaxed);
    }
}

impl WriterMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn new(registry: &mut Registry) -> WriterMetrics {
        let m = WriterMetrics {
            records: Counter::default(),
            undecodable: Counter::default(),
            rows: Family::default(),
            // 1 ms to about 30 s.
            insert_seconds: Histogram::new(exponential_buckets(0.001, 2.5, 12)),
            batches: Counter::default(),
            retries: Counter::default(),
            errors: Family::default(),
            commits: Counter::default(),
            lag: Gauge::default(),
            pending_records: Gauge::default(),
            paused: Gauge::default(),
            clickhouse_up: Gauge::default(),
            partitions_dropped: Counter::default(),
            state: Arc::new(HealthState::default()),
        };
        registry.register("tayga_writer_records_consumed", "Records read from the signals topic", m.records.clone());
        registry.register(
            "tayga_writer_undecodable_records",
            "Records that are not a valid signals record (headers or OTLP protobuf); logged, skipped and committed past",
            m.undecodable.clone(),
        );
        registry.register("tayga_writer_rows_written", "Rows inserted into ClickHouse, by table", m.rows.clone());
        registry.register(
            "tayga_writer_insert_seconds",
            "Duration of one successful flush (every insert of a batch)",
            m.insert_seconds.clone(),
        );
        registry.register("tayga_writer_batches", "Batches stored and committed", m.batches.clone());
        registry.register(
            "tayga_writer_insert_retries",
            "Flush attempts repeated after a failed insert (ClickHouse down or refusing)",
            m.retries.clone(),
        );
        registry.register(
            "tayga_writer_errors",
            "Errors by kind: insert, commit, consume, retention",
            m.errors.clone(),
        );
        registry.register("tayga_writer_commits", "Successful offset commits", m.commits.clone());
        registry.register(
            "tayga_writer_lag_records",
            "Records of the assigned partitions not yet stored and committed (high watermark − committed offset)",
            m.lag.clone(),
        );
        registry.register(
            "tayga_writer_pending_records",
            "Records consumed and buffered, not yet stored",
            m.pending_records.clone(),
        );
        registry.register(
            "tayga_writer_paused",
            "1 while consumption is paused because ClickHouse does not accept inserts",
            m.paused.clone(),
        );
        registry.register("tayga_writer_clickhouse_up", "1 when the last insert succeeded", m.clickhouse_up.clone());
        registry.register(
            "tayga_writer_retention_partitions_dropped",
            "Day partitions dropped by the retention sweep",
            m.partitions_dropped.clone(),
        );
        m.clickhouse_up.set(1);
        m
    }

    pub fn rows_written(&self, table: Table, n: usize) {
        self.rows.get_or_create(&TableLabel { table }).inc_by(n as u64);
    }

    pub fn error(&self, kind: ErrorKind) {
        self.errors.get_or_create(&ErrorLabel { kind }).inc();
    }

    pub fn set_clickhouse_up(&self, up: bool) {
        self.clickhouse_up.set(i64::from(up));
        self.state.set_clickhouse_down(!up);
    }
}
