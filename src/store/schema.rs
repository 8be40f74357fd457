//! Every ClickHouse DDL statement Tayga runs lives in this file (an architecture invariant).
//!
//! The same statements must run on Debian's ClickHouse 18.16 (our tests' server) and on
//! current releases (production), so they use only what both have: UInt64 nanosecond
//! timestamps, parallel arrays for attributes, ReplacingMergeTree keyed by each row's
//! deterministic identity (DESIGN.md §3), and partitions by day so retention can drop whole
//! partitions. A test executes every statement in chdb-core (current ClickHouse) as well.
//!
//! Migrations are append-only: a released migration is never edited, a change is a new one.

/// One step of the schema, applied once and recorded in `schema_migrations`.
pub struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub statements: &'static [&'static str],
}

/// The table that records applied migrations. Created before any migration runs.
pub const MIGRATIONS_TABLE_DDL: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version UInt32,
    name String,
    applied_ns UInt64
) ENGINE = MergeTree() ORDER BY version";

/// The day partition of a nanosecond timestamp column, as `YYYYMMDD` (a UInt32), so
/// retention can compare partition ids with a cut-off date.
macro_rules! day_of {
    ($col:literal) => {
        concat!("toYYYYMMDD(toDateTime(intDiv(", $col, ", 1000000000)))")
    };
}

// One layout for every migration, kept by hand: rustfmt would re-indent the whole list
// whenever it grows past one element, and migrations are appended by several changes.
#[rustfmt::skip]
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "initial schema",
    statements: &[
        // A span's identity is (trace_id, span_id); ids are lowercase hex as in OTLP/JSON.
        concat!(
            "CREATE TABLE IF NOT EXISTS spans (
    trace_id String,
    span_id String,
    parent_span_id String,
    service String,
    name String,
    kind UInt8,
    start_ns UInt64,
    end_ns UInt64,
    duration_ns UInt64,
    status_code UInt8,
    status_message String,
    attr_keys Array(String),
    attr_values Array(String),
    resource_keys Array(String),
    resource_values Array(String),
    scope_name String,
    event_count UInt32,
    link_count UInt32,
    ingest_ns UInt64
) ENGINE = ReplacingMergeTree(ingest_ns)
PARTITION BY ",
            day_of!("start_ns"),
            "
ORDER BY (trace_id, span_id)"
        ),
        // A log's identity is log_id, a hash of its service and canonical content.
        concat!(
            "CREATE TABLE IF NOT EXISTS logs (
    log_id UInt64,
    service String,
    time_ns UInt64,
    observed_ns UInt64,
    severity_number UInt8,
    severity_text String,
    body String,
    trace_id String,
    span_id String,
    attr_keys Array(String),
    attr_values Array(String),
    resource_keys Array(String),
    resource_values Array(String),
    scope_name String,
    ingest_ns UInt64
) ENGINE = ReplacingMergeTree(ingest_ns)
PARTITION BY ",
            day_of!("time_ns"),
            "
ORDER BY (service, log_id)"
        ),
        // One row per (service, template); the newest update wins.
        "CREATE TABLE IF NOT EXISTS log_templates (
    service String,
    template_id UInt64,
    template String,
    count UInt64,
    first_seen_ns UInt64,
    last_seen_ns UInt64,
    masking_version String,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
ORDER BY (service, template_id)",
        // Which template each log matched; deduplicated by log_id, counted with uniqExact.
        concat!(
            "CREATE TABLE IF NOT EXISTS log_hits (
    service String,
    log_id UInt64,
    template_id UInt64,
    time_ns UInt64
) ENGINE = ReplacingMergeTree()
PARTITION BY ",
            day_of!("time_ns"),
            "
ORDER BY (service, log_id)"
        ),
        // One story per trace; a late span replaces it with a newer version.
        concat!(
            "CREATE TABLE IF NOT EXISTS stories (
    trace_id String,
    fingerprint UInt64,
    root_service String,
    root_operation String,
    start_ns UInt64,
    duration_ns UInt64,
    span_count UInt32,
    services Array(String),
    edges Array(String),
    error UInt8,
    error_spans UInt32,
    log_count UInt32,
    truncated UInt8,
    version_ns UInt64
) ENGINE = ReplacingMergeTree(version_ns)
PARTITION BY ",
            day_of!("start_ns"),
            "
ORDER BY trace_id"
        ),
        // Seed 000: a ReplacingMergeTree by alert_id; every update is a newer version.
        concat!(
            "CREATE TABLE IF NOT EXISTS log_alerts (
    alert_id UInt64,
    kind String,
    service String,
    template_id UInt64,
    template String,
    first_at UInt64,
    last_at UInt64,
    count UInt64,
    baseline Float64,
    threshold Float64,
    stored_ns UInt64,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
PARTITION BY ",
            day_of!("first_at"),
            "
ORDER BY alert_id"
        ),
        // A mark per published version of an alert; republication looks for missing marks.
        "CREATE TABLE IF NOT EXISTS log_alert_publications (
    alert_id UInt64,
    alert_updated_ns UInt64,
    published_ns UInt64
) ENGINE = ReplacingMergeTree(published_ns)
ORDER BY (alert_id, alert_updated_ns)",
        // Seed 000's key/value state: watermarks, heartbeats, masking epoch.
        "CREATE TABLE IF NOT EXISTS logminer_state (
    key String,
    value String,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
ORDER BY key",
        // Seed 003: the state of every (alert, target) pair; kept 30 days. created_ns is
        // carried unchanged through a pair's updates, so all its versions share a partition.
        concat!(
            "CREATE TABLE IF NOT EXISTS notifier_deliveries (
    alert_id UInt64,
    target String,
    status String,
    attempts UInt32,
    last_error String,
    created_ns UInt64,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
PARTITION BY ",
            day_of!("created_ns"),
            "
ORDER BY (alert_id, target)"
        ),
        // Samples the API's recorder scrapes from every service's /metrics.
        concat!(
            "CREATE TABLE IF NOT EXISTS pipeline_metrics (
    ts_ns UInt64,
    service String,
    instance String,
    metric String,
    label_keys Array(String),
    label_values Array(String),
    value Float64
) ENGINE = MergeTree()
PARTITION BY ",
            day_of!("ts_ns"),
            "
ORDER BY (service, metric, ts_ns)"
        ),
    ],
},
Migration {
    version: 2,
    name: "trace_logs: the logs of a trace by primary key",
    statements: &[
        // `logs` is ordered by (service, log_id), so "the logs of trace T" would scan every
        // log, and even reading them by key costs a granule per service of the trace. This
        // copy of every log that has a trace id, ordered by trace id, puts a trace's logs
        // side by side: one granule. It doubles the storage of traced logs (not of the
        // others); partitioned like `logs`, with the same retention.
        concat!(
            "CREATE TABLE IF NOT EXISTS trace_logs (
    log_id UInt64,
    service String,
    time_ns UInt64,
    observed_ns UInt64,
    severity_number UInt8,
    severity_text String,
    body String,
    trace_id String,
    span_id String,
    attr_keys Array(String),
    attr_values Array(String),
    resource_keys Array(String),
    resource_values Array(String),
    scope_name String,
    ingest_ns UInt64
) ENGINE = ReplacingMergeTree(ingest_ns)
PARTITION BY ",
            day_of!("time_ns"),
            "
ORDER BY (trace_id, service, log_id)"
        ),
        // Filled on every insert into `logs`, whoever inserts (writer or ingest's direct path).
        "CREATE MATERIALIZED VIEW IF NOT EXISTS trace_logs_mv TO trace_logs AS
SELECT * FROM logs WHERE trace_id != ''",
        // Logs stored before this migration.
        "INSERT INTO trace_logs SELECT * FROM logs WHERE trace_id != ''",
    ],
},
Migration {
    version: 3,
    name: "ingest_backlog: records written directly, kept until replayed to the topics",
    statements: &[
        // Every record ingest writes on the direct path, as it would have been published
        // (topic, key, value, headers), until the broker acknowledged its replay. A replayed
        // record gets a newer version with `replayed = 1` and no value, so merges reclaim
        // the payload; reads take `argMax(replayed, version_ns)`, never FINAL with a WHERE
        // on `replayed` (moved to PREWHERE it would filter before the merge). Drained days
        // are dropped by ingest itself (`store::backlog`), never by the retention sweep.
        concat!(
            "CREATE TABLE IF NOT EXISTS ingest_backlog (
    created_ns UInt64,
    nonce UInt64,
    position UInt32,
    topic String,
    key String,
    header_keys Array(String),
    header_values Array(String),
    value Array(UInt8),
    value_bytes UInt32,
    replayed UInt8,
    version_ns UInt64
) ENGINE = ReplacingMergeTree(version_ns)
PARTITION BY ",
            day_of!("created_ns"),
            "
ORDER BY (created_ns, nonce, position)"
        ),
    ],
},
Migration {
    version: 4,
    name: "log_template_merges: the templates a sibling merge retired",
    statements: &[
        // One row per absorbed template, naming the live template that took its lines
        // (docs/mining.md, "Merging and identity"); a later version of the row (a chain
        // resolved, or the template born again, survivor_id = absorbed_id) replaces it.
        // Small, like log_templates: not partitioned.
        "CREATE TABLE IF NOT EXISTS log_template_merges (
    service String,
    absorbed_id UInt64,
    survivor_id UInt64,
    merged_ns UInt64,
    masking_version String
) ENGINE = ReplacingMergeTree(merged_ns)
ORDER BY (service, absorbed_id)",
    ],
},
Migration {
    version: 5,
    name: "notifier_deliveries: the operator's manual retries",
    statements: &[
        // `tayga deliveries retry` (and its API endpoint) records who reset a failed pair to
        // pending, when, and how many times; the notifier judges a retried pair's age by
        // `retried_ns`. One statement, so a failure leaves no column half added (18.16 has
        // no `ADD COLUMN IF NOT EXISTS`). Existing rows read 0, 0 and ''.
        "ALTER TABLE notifier_deliveries
    ADD COLUMN manual_retries UInt32 DEFAULT 0,
    ADD COLUMN retried_ns UInt64 DEFAULT 0,
    ADD COLUMN retried_by String DEFAULT ''",
    ],
}];

/// Creates our database (a plain identifier, checked by `Config::validate`).
pub fn create_database_sql(database: &str) -> String {
    format!("CREATE DATABASE IF NOT EXISTS {database}")
}

/// Drops our database and everything in it (tests clean up with it).
pub fn drop_database_sql(database: &str) -> String {
    format!("DROP DATABASE IF EXISTS {database}")
}

/// Drops one day partition (`YYYYMMDD`, read back from `system.parts`) of a table: how
/// retention expires rows on every version (`store::retention`).
pub fn drop_partition_sql(table: &str, partition: &str) -> String {
    format!("ALTER TABLE {table} DROP PARTITION {partition}")
}

/// Seed 001: blocks remembered per table for `insert_deduplication_token`.
pub const DEDUP_WINDOW: u32 = 1000;

/// Turns the token window on, one statement per table the writer fills with tokens.
///
/// A table setting applied by the writer at start (`store::insert::enable_token_window`),
/// not a migration: migrations run on every server, 18.16 has no such setting, and the
/// ALTER is idempotent and cheap. Current servers only.
pub fn token_window_statements() -> Vec<String> {
    ["spans", "logs"]
        .iter()
        .map(|t| format!("ALTER TABLE {t} MODIFY SETTING non_replicated_deduplication_window = {DEDUP_WINDOW}"))
        .collect()
}

/// A table partitioned by day: `PARTITION BY toYYYYMMDD(toDateTime(intDiv(<column>, 1e9)))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayPartitioned {
    pub table: &'static str,
    /// The nanosecond timestamp whose day names the partition (the row structs' partition
    /// column, `TableRow::PARTITION_COLUMN`, must agree; a unit test checks).
    pub column: &'static str,
    pub retention: RetentionKey,
}

/// Tables whose partitions are days, with their partition column and the retention key
/// that governs each.
pub const DAY_PARTITIONED: &[DayPartitioned] = &[
    DayPartitioned { table: "spans", column: "start_ns", retention: RetentionKey::Spans },
    DayPartitioned { table: "logs", column: "time_ns", retention: RetentionKey::Logs },
    DayPartitioned { table: "trace_logs", column: "time_ns", retention: RetentionKey::Logs },
    DayPartitioned { table: "log_hits", column: "time_ns", retention: RetentionKey::LogHits },
    DayPartitioned { table: "stories", column: "start_ns", retention: RetentionKey::Stories },
    DayPartitioned { table: "log_alerts", column: "first_at", retention: RetentionKey::LogAlerts },
    DayPartitioned { table: "notifier_deliveries", column: "created_ns", retention: RetentionKey::NotifierDeliveries },
    DayPartitioned { table: "pipeline_metrics", column: "ts_ns", retention: RetentionKey::PipelineMetrics },
    DayPartitioned { table: "ingest_backlog", column: "created_ns", retention: RetentionKey::IngestBacklog },
];

/// The partition column of a day-partitioned table; `None` for the small unpartitioned ones.
pub fn partition_column(table: &str) -> Option<&'static str> {
    DAY_PARTITIONED.iter().find(|d| d.table == table).map(|d| d.column)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionKey {
    Spans,
    Logs,
    LogHits,
    Stories,
    LogAlerts,
    NotifierDeliveries,
    PipelineMetrics,
    /// Never expired by age: a day is dropped only once every record of it was replayed
    /// (`store::backlog::drop_drained_days`), however old it is.
    IngestBacklog,
}

impl RetentionKey {
    pub fn days(self, retention: &crate::config::RetentionConfig) -> u32 {
        match self {
            RetentionKey::Spans => retention.spans_days,
            RetentionKey::Logs => retention.logs_days,
            RetentionKey::LogHits => retention.log_hits_days,
            RetentionKey::Stories => retention.stories_days,
            RetentionKey::LogAlerts => retention.log_alerts_days,
            RetentionKey::NotifierDeliveries => retention.notifier_deliveries_days,
            RetentionKey::PipelineMetrics => retention.pipeline_metrics_days,
            RetentionKey::IngestBacklog => 0,
        }
    }
}

/// Every table the schema creates, in creation order (for checks and tests).
pub fn table_names() -> Vec<String> {
    MIGRATIONS
        .iter()
        .flat_map(|m| m.statements.iter())
        .filter_map(|s| s.strip_prefix("CREATE TABLE IF NOT EXISTS "))
        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

/// Every materialized view the schema creates (`trace_logs_mv`), in creation order.
pub fn view_names() -> Vec<String> {
    MIGRATIONS
        .iter()
        .flat_map(|m| m.statements.iter())
        .filter_map(|s| s.strip_prefix("CREATE MATERIALIZED VIEW IF NOT EXISTS "))
        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_increase_without_gaps() {
        for (i, migration) in MIGRATIONS.iter().enumerate() {
            let name = migration.name;
            assert_eq!(migration.version as usize, i + 1, "migration {name} is out of order or leaves a gap");
        }
    }

    #[test]
    fn every_day_partitioned_table_exists_in_the_schema() {
        let tables = table_names();
        for DayPartitioned { table, .. } in DAY_PARTITIONED {
            assert!(tables.iter().any(|t| t == table), "{table} is not created by any migration");
        }
        assert!(tables.contains(&"notifier_deliveries".to_string()));
        assert_eq!(tables.len(), 13);
        assert_eq!(view_names(), vec!["trace_logs_mv".to_string()]);
    }

    #[test]
    fn every_day_partitioned_table_is_partitioned_by_its_column_and_no_other_is() {
        let ddl = |table: &str| {
            MIGRATIONS
                .iter()
                .flat_map(|m| m.statements.iter())
                .find(|s| {
                    s.strip_prefix("CREATE TABLE IF NOT EXISTS ").is_some_and(|r| r.starts_with(&format!("{table} ")))
                })
                .unwrap_or_else(|| panic!("no DDL for {table}"))
        };
        for table in table_names() {
            let partition_by = ddl(&table).lines().find_map(|l| l.strip_prefix("PARTITION BY "));
            match partition_column(&table) {
                Some(column) => {
                    let want = format!("toYYYYMMDD(toDateTime(intDiv({column}, 1000000000)))");
                    assert_eq!(partition_by, Some(want.as_str()), "{table}");
                }
                None => assert_eq!(partition_by, None, "{table} is partitioned but not in DAY_PARTITIONED"),
            }
        }
    }

    #[test]
    fn the_token_window_covers_both_tables_the_writer_fills() {
        assert_eq!(
            token_window_statements(),
            vec![
                "ALTER TABLE spans MODIFY SETTING non_replicated_deduplication_window = 1000",
                "ALTER TABLE logs MODIFY SETTING non_replicated_deduplication_window = 1000",
            ]
        );
    }

    #[test]
    fn no_feature_missing_from_clickhouse_18_16_is_used() {
        // INFRA.md lists what 18.16 lacks; any of these in DDL breaks our test server.
        let forbidden = ["DateTime64", "Map(", " TTL ", "CODEC", "INDEX ", "IF NOT EXISTS ADD", "LowCardinality"];
        for m in MIGRATIONS {
            for s in m.statements {
                for f in forbidden {
                    assert!(!s.contains(f), "migration {} uses {f}", m.version);
                }
            }
        }
    }
}
