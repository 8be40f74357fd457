//! Retention by dropping whole day partitions. `TTL` is missing from ClickHouse 18.16, and
//! dropping a partition is cheap and works on every version. The writer daemon runs the
//! sweep every `retention.interval_secs` (ARCHITECTURE.md, "Retention").

use clickhouse::Row;
use serde::Deserialize;

use super::schema::{drop_partition_sql, local_table, DayPartitioned, DAY_PARTITIONED};
use super::statements::Statement;
use super::{Store, StoreError};
use crate::config::RetentionConfig;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedPartition {
    pub table: String,
    /// The day, as `YYYYMMDD`.
    pub partition: String,
}

#[derive(Row, Deserialize)]
struct PartitionId {
    partition: String,
}

/// Day partitions of a table older than a cut-off. Binds: database, table, now (seconds),
/// retention (days).
pub const EXPIRED_PARTITIONS_SQL: &str = "SELECT partition FROM system.parts
WHERE database = ? AND table = ? AND active
GROUP BY partition
HAVING toUInt32(partition) < toYYYYMMDD(toDate(toDateTime(?)) - ?)
ORDER BY partition";
/// The same on a cluster: the local table's partitions on every server. Binds: cluster,
/// database, local table, now (seconds), retention (days).
pub const EXPIRED_PARTITIONS_CLUSTER_SQL: &str = "SELECT partition FROM cluster(?, system.parts)
WHERE database = ? AND table = ? AND active
GROUP BY partition
HAVING toUInt32(partition) < toYYYYMMDD(toDate(toDateTime(?)) - ?)
ORDER BY partition";

/// Drops every day partition older than its table's retention, judged at `now_secs`.
/// Returns what was dropped.
pub async fn drop_expired(
    store: &Store,
    retention: &RetentionConfig,
    now_secs: u64,
) -> Result<Vec<DroppedPartition>, StoreError> {
    let mut dropped = Vec::new();
    for DayPartitioned { table, retention: key, .. } in DAY_PARTITIONED {
        let days = key.days(retention);
        if days == 0 {
            continue;
        }
        let query = match store.cluster() {
            None => store.client().query(EXPIRED_PARTITIONS_SQL).bind(store.database()).bind(*table),
            Some(c) => store
                .client()
                .query(EXPIRED_PARTITIONS_CLUSTER_SQL)
                .bind(&c.name)
                .bind(store.database())
                .bind(local_table(table)),
        };
        let expired = query
            .bind(now_secs)
            .bind(days)
            .fetch_all::<PartitionId>()
            .await
            .map_err(|source| store.query_error(&format!("listing expired partitions of {table}"), source))?;
        for PartitionId { partition } in expired {
            // Partition ids are YYYYMMDD digits read back from system.parts, never user input.
            debug_assert!(partition.bytes().all(|b| b.is_ascii_digit()));
            store
                .execute(
                    &format!("dropping partition {partition} of {table}"),
                    &drop_partition_sql(table, &partition, store.cluster()),
                )
                .await?;
            dropped.push(DroppedPartition { table: table.to_string(), partition });
        }
    }
    Ok(dropped)
}

/// This module's statements with sample binds, for the registry.
pub fn statements(database: &str) -> Vec<Statement> {
    vec![
        Statement::new("retention.expired_partitions", EXPIRED_PARTITIONS_SQL).binds([
            format!("'{database}'"),
            "'spans'".into(),
            "1764460800".into(),
            "7".into(),
        ]),
        Statement::new("retention.expired_partitions_cluster", EXPIRED_PARTITIONS_CLUSTER_SQL)
            .binds([
                "'tayga'".to_string(),
                format!("'{database}'"),
                "'spans_local'".into(),
                "1764460800".into(),
                "7".into(),
            ])
            .cluster_only(),
        Statement::new("retention.drop_partition", drop_partition_sql("spans", "19700101", None)),
    ]
}
