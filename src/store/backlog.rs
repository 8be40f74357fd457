//! `ingest_backlog`: the records ingest wrote on the direct path, kept until the broker
//! acknowledged their replay (docs/design.md#ingest-backlog: the direct path is a detour, not a dead end).
//!
//! A record's key is `(created_ns, nonce, position)`, which is also replay order (oldest
//! first). Replaying one inserts a newer version of its key with `replayed = 1` and no
//! value; every read takes the newest version by `argMax(…, version_ns)` (the same on 18.16
//! and current servers, and never a `WHERE replayed` under `FINAL`, which a server may move
//! to PREWHERE, before the merge). Merges then drop the replayed payloads, and a day whose
//! records are all replayed is dropped whole ([`drop_drained_days`]).

use clickhouse::Row;
use serde::Deserialize;

use super::schema::drop_partition_sql;
use super::statements::Statement;
use super::{BacklogRow, Store, StoreError};

pub const TABLE: &str = "ingest_backlog";

/// The next pending keys from `created_ns >= ?`, oldest first, at most `?`. Binds: from
/// (ns), limit.
pub const PENDING_KEYS_SQL: &str = "SELECT created_ns, nonce, position, argMax(value_bytes, version_ns) AS bytes \
FROM ingest_backlog WHERE created_ns >= ? GROUP BY created_ns, nonce, position \
HAVING argMax(replayed, version_ns) = 0 ORDER BY created_ns, nonce, position LIMIT ?";

/// The pending versions of the records in `[from, to]` (some may have been replayed since:
/// callers keep only the keys [`pending_keys`] returned). Binds: from, to (ns).
const RECORDS_REST: &str = "WHERE created_ns >= ? AND created_ns <= ? AND replayed = 0 \
ORDER BY created_ns, nonce, position";

/// Records and value bytes not yet replayed.
pub const STATS_SQL: &str = "SELECT count() AS records, sum(bytes) AS total FROM \
(SELECT argMax(replayed, version_ns) AS done, argMax(value_bytes, version_ns) AS bytes \
FROM ingest_backlog GROUP BY created_ns, nonce, position) WHERE done = 0";

/// Days (`YYYYMMDD`, the partition) before yesterday whose every record is replayed. Days
/// from yesterday on are kept: a process writes only at its own now, and a clock a little
/// behind another's must not see its day dropped under it.
pub const DRAINED_DAYS_SQL: &str = "SELECT day FROM \
(SELECT toYYYYMMDD(toDateTime(intDiv(created_ns, 1000000000))) AS day, argMax(replayed, version_ns) AS done \
FROM ingest_backlog GROUP BY day, created_ns, nonce, position) \
GROUP BY day HAVING min(done) = 1 AND day < toYYYYMMDD(today() - 1) ORDER BY day";

/// A pending record's key and the size of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Row, Deserialize)]
pub struct PendingKey {
    pub created_ns: u64,
    pub nonce: u64,
    pub position: u32,
    pub value_bytes: u32,
}

impl PendingKey {
    pub fn id(&self) -> (u64, u64, u32) {
        (self.created_ns, self.nonce, self.position)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Row, Deserialize)]
pub struct BacklogStats {
    pub records: u64,
    pub bytes: u64,
}

/// Keeps `rows` (pending records) durably. One day partition per insert, so the records of
/// one call are one block: all kept, or none.
pub async fn keep(store: &Store, rows: &[BacklogRow]) -> Result<(), StoreError> {
    store.insert(rows).await
}

/// Up to `limit` pending keys from `from_ns` on, oldest first.
pub async fn pending_keys(store: &Store, from_ns: u64, limit: u64) -> Result<Vec<PendingKey>, StoreError> {
    store
        .client()
        .query(PENDING_KEYS_SQL)
        .bind(from_ns)
        .bind(limit)
        .fetch_all::<PendingKey>()
        .await
        .map_err(|e| store.query_error("reading the ingest backlog's pending keys", e))
}

/// The records of `keys` (the oldest first), with their values. A key whose record is
/// gone (replayed and merged away meanwhile) is left out.
pub async fn records(store: &Store, keys: &[PendingKey]) -> Result<Vec<BacklogRow>, StoreError> {
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return Ok(Vec::new());
    };
    let wanted: std::collections::HashSet<(u64, u64, u32)> = keys.iter().map(PendingKey::id).collect();
    let mut rows = store
        .select::<BacklogRow>(RECORDS_REST)
        .bind(first.created_ns)
        .bind(last.created_ns)
        .fetch_all::<BacklogRow>()
        .await
        .map_err(|e| store.query_error("reading the ingest backlog's records", e))?;
    let mut seen = std::collections::HashSet::new();
    rows.retain(|r| {
        let id = (r.created_ns, r.nonce, r.position);
        wanted.contains(&id) && seen.insert(id)
    });
    Ok(rows)
}

/// Marks `keys` replayed at `now_ns`: their newer version has no value.
pub async fn mark_replayed(store: &Store, keys: &[PendingKey], now_ns: u64) -> Result<(), StoreError> {
    let marks: Vec<BacklogRow> = keys.iter().map(|k| replayed_mark(k, now_ns)).collect();
    store.insert(&marks).await
}

fn replayed_mark(key: &PendingKey, now_ns: u64) -> BacklogRow {
    BacklogRow {
        created_ns: key.created_ns,
        nonce: key.nonce,
        position: key.position,
        replayed: 1,
        // Newer than the pending version (`created_ns`) even on a clock that went back.
        version_ns: now_ns.max(key.created_ns + 1),
        ..Default::default()
    }
}

/// Records and bytes not yet replayed.
pub async fn stats(store: &Store) -> Result<BacklogStats, StoreError> {
    store
        .client()
        .query(STATS_SQL)
        .fetch_one::<BacklogStats>()
        .await
        .map_err(|e| store.query_error("counting the ingest backlog", e))
}

/// Drops every day before yesterday whose records are all replayed; returns them.
pub async fn drop_drained_days(store: &Store) -> Result<Vec<u32>, StoreError> {
    let days = store
        .client()
        .query(DRAINED_DAYS_SQL)
        .fetch_all::<u32>()
        .await
        .map_err(|e| store.query_error("listing the ingest backlog's drained days", e))?;
    for day in &days {
        let what = format!("dropping the drained day {day} of {TABLE}");
        store.execute(&what, &drop_partition_sql(TABLE, &day.to_string(), store.cluster())).await?;
    }
    Ok(days)
}

/// This module's statements with sample binds, for the registry.
pub fn statements() -> Vec<Statement> {
    vec![
        Statement::insert("backlog.mark_replayed", &[replayed_mark(&PendingKey::default_for_tests(), 2)], None),
        Statement::new("backlog.pending_keys", PENDING_KEYS_SQL).binds(["0", "1000"]),
        Statement::select::<BacklogRow>("backlog.records", RECORDS_REST).binds(["0", "1764460800000000000"]),
        Statement::new("backlog.stats", STATS_SQL),
        Statement::new("backlog.drained_days", DRAINED_DAYS_SQL),
        Statement::new("backlog.drop_day", drop_partition_sql(TABLE, "19700101", None)),
    ]
}

impl PendingKey {
    fn default_for_tests() -> PendingKey {
        PendingKey { created_ns: 1, nonce: 0, position: 0, value_bytes: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_newer_than_its_record_and_carries_no_value() {
        let key = PendingKey { created_ns: 100, nonce: 7, position: 3, value_bytes: 512 };
        let mark = replayed_mark(&key, 50);
        assert_eq!((mark.created_ns, mark.nonce, mark.position, mark.replayed), (100, 7, 3, 1));
        assert!(mark.version_ns > key.created_ns, "a clock behind the writer's still wins");
        assert!(mark.value.is_empty() && mark.value_bytes == 0);
        assert_eq!(replayed_mark(&key, 1_000).version_ns, 1_000);
    }
}
