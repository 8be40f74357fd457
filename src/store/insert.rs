//! The one insert path: every row Tayga stores (the writer's batches and per-record inserts,
//! ingest's direct path, the logminer, the notifier, the assembler, `migrate`) goes through
//! [`insert_rows`].
//!
//! - Every INSERT is bounded in time ([`INSERT_TIMEOUT`]): a server that accepts the
//!   connection but never answers fails the insert instead of holding its caller.
//! - A deduplication token, where the caller has one, is sent as
//!   `insert_deduplication_token` (current servers, behind [`supports_tokens`]).
//! - Rows are split into one INSERT per group of day partitions. Current ClickHouse refuses
//!   an insert block that touches more than `max_partitions_per_insert_block` (100)
//!   partitions, so one OTLP request whose spans cover more than 100 days would fail every
//!   retry forever; 18.16 has no such limit, so the grouping is a pure function, tested
//!   alone ([`partition_groups`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{schema, Store, StoreError, TableRow};
use crate::model::encoded::EncodedRows;
use crate::time::DAY_NS;

/// An insert that has not answered in this long is failed (and retried by its caller).
pub const INSERT_TIMEOUT: Duration = Duration::from_secs(30);

/// Current ClickHouse's default `max_partitions_per_insert_block`.
pub const MAX_PARTITIONS_PER_INSERT_BLOCK: usize = 100;

/// Distinct UTC days one INSERT may cover. The server computes a row's partition
/// (`toYYYYMMDD(toDateTime(…))`) in its own time zone, and one UTC day overlaps at most two
/// days of any zone, so half the server's limit holds wherever the server runs.
pub const MAX_UTC_DAYS_PER_INSERT: usize = MAX_PARTITIONS_PER_INSERT_BLOCK / 2;

/// Is `insert_deduplication_token` a setting of this server? (0 on 18.16, 1 on current.)
pub const TOKEN_SUPPORT_SQL: &str = "SELECT count() FROM system.settings WHERE name = 'insert_deduplication_token'";

/// Whether the server supports `insert_deduplication_token`.
pub async fn supports_tokens(store: &Store) -> Result<bool, StoreError> {
    let n: u64 = store
        .client()
        .query(TOKEN_SUPPORT_SQL)
        .fetch_one()
        .await
        .map_err(|source| store.query_error("looking up insert_deduplication_token", source))?;
    Ok(n > 0)
}

/// Sets the deduplication window on the tables filled with tokens (without it, a token is
/// accepted and silently ignored: docs/design.md#writer).
pub async fn enable_token_window(store: &Store) -> Result<(), StoreError> {
    for sql in schema::token_window_statements(store.cluster()) {
        store.execute("setting non_replicated_deduplication_window", &sql).await?;
    }
    Ok(())
}

/// Inserts `rows` into `table` (`T`'s, or another with its columns): one INSERT per partition group, each bounded by
/// [`INSERT_TIMEOUT`], each with the deduplication token if one is given.
///
/// When the rows need more than one INSERT, group `i` carries `<token>-g<i>`: the groups
/// are a pure function of the rows, so a replay of the same record produces the same
/// groups and tokens, and the server discards them as before. A single group keeps the
/// token unchanged. A failure after some groups were stored leaves those stored; the
/// caller's retry re-inserts them, which identity (and the token) make harmless.
pub async fn insert_rows<'a, T: TableRow + 'a>(
    store: &Store,
    table: &str,
    rows: impl IntoIterator<Item = &'a T>,
    dedup_token: Option<&str>,
) -> Result<(), StoreError> {
    let rows: Vec<&T> = rows.into_iter().collect();
    if rows.is_empty() {
        return Ok(());
    }
    let days: Vec<u64> = rows.iter().map(|r| r.partition_ns().map_or(0, |ns| ns / DAY_NS)).collect();
    let groups = partition_groups(&days, MAX_UTC_DAYS_PER_INSERT);
    for (g, group) in groups.iter().enumerate() {
        let token = dedup_token.map(|t| group_token(t, g, groups.len()));
        insert_block(store, table, group.iter().map(|&i| rows[i]), group.len(), token.as_deref()).await?;
    }
    Ok(())
}

/// Inserts rows already encoded (`model::encoded`), the parts one after another, into
/// `T`'s table, under the same rules as [`insert_rows`]: one INSERT per partition group, in
/// the same groups (the grouping sees the same days), with the same tokens.
pub async fn insert_encoded<T: TableRow>(
    store: &Store,
    parts: &[&EncodedRows<T>],
    dedup_token: Option<&str>,
) -> Result<(), StoreError> {
    let days: Vec<u64> = parts.iter().flat_map(|p| p.partition_ns().iter().map(|ns| ns / DAY_NS)).collect();
    let groups = partition_groups(&days, MAX_UTC_DAYS_PER_INSERT);
    if let [_] = groups.as_slice() {
        let mut body = Vec::with_capacity(parts.iter().map(|p| p.bytes().len()).sum());
        for part in parts {
            body.extend_from_slice(part.bytes());
        }
        return insert_encoded_block::<T>(store, body, days.len(), dedup_token).await;
    }
    let located: Vec<(usize, usize)> =
        parts.iter().enumerate().flat_map(|(p, part)| (0..part.len()).map(move |r| (p, r))).collect();
    for (g, group) in groups.iter().enumerate() {
        let mut body = Vec::new();
        for &i in group {
            let (p, r) = located[i];
            body.extend_from_slice(parts[p].row(r));
        }
        let token = dedup_token.map(|t| group_token(t, g, groups.len()));
        insert_encoded_block::<T>(store, body, group.len(), token.as_deref()).await?;
    }
    Ok(())
}

/// One INSERT of encoded rows.
async fn insert_encoded_block<T: TableRow>(
    store: &Store,
    body: Vec<u8>,
    count: usize,
    token: Option<&str>,
) -> Result<(), StoreError> {
    let what = || format!("inserting {count} rows into {}", T::TABLE);
    let sql = format!("INSERT INTO {}({}) FORMAT RowBinary", T::TABLE, T::COLUMN_NAMES.join(","));
    let mut insert =
        store.client().insert_formatted_with(sql).with_timeouts(Some(INSERT_TIMEOUT), Some(INSERT_TIMEOUT));
    if let Some(token) = token {
        insert = insert.with_setting("insert_deduplication_token", token);
    }
    insert.send(body.into()).await.map_err(|e| store.query_error(&what(), e))?;
    insert.end().await.map_err(|e| store.query_error(&what(), e))
}

/// The token of group `group` of `groups`: the record's own when it is one insert, else
/// suffixed, so that no two inserts of a record share a token (the server would discard
/// the second as a replay of the first).
fn group_token(token: &str, group: usize, groups: usize) -> String {
    if groups == 1 {
        token.to_string()
    } else {
        format!("{token}-g{group}")
    }
}

/// One INSERT.
async fn insert_block<'a, T: TableRow + 'a>(
    store: &Store,
    table: &str,
    rows: impl Iterator<Item = &'a T>,
    count: usize,
    token: Option<&str>,
) -> Result<(), StoreError> {
    let what = || format!("inserting {count} rows into {table}");
    let mut insert = store.client().insert::<T>(table).await.map_err(|e| store.query_error(&what(), e))?;
    insert = insert.with_timeouts(Some(INSERT_TIMEOUT), Some(INSERT_TIMEOUT));
    if let Some(token) = token {
        insert = insert.with_setting("insert_deduplication_token", token);
    }
    for row in rows {
        insert.write(row).await.map_err(|e| store.query_error(&what(), e))?;
    }
    insert.end().await.map_err(|e| store.query_error(&what(), e))
}

/// Splits rows, given by their partition keys (`keys[i]` is row `i`'s), into groups of row
/// indices such that no group holds more than `max_keys` distinct keys. Every row is in
/// exactly one group, all rows of a key are in the same group, and each group lists its
/// rows in their original order. Rows of at most `max_keys` keys stay one group, as given.
/// Deterministic: the same keys always give the same groups (deduplication tokens rely on
/// it). Pure.
pub fn partition_groups(keys: &[u64], max_keys: usize) -> Vec<Vec<usize>> {
    assert!(max_keys > 0, "a group must hold at least one partition");
    let distinct: BTreeSet<u64> = keys.iter().copied().collect();
    if distinct.len() <= max_keys {
        return if keys.is_empty() { Vec::new() } else { vec![(0..keys.len()).collect()] };
    }
    // Consecutive keys share a group, so a group covers one stretch of days.
    let group_of: BTreeMap<u64, usize> = distinct.iter().enumerate().map(|(n, &k)| (k, n / max_keys)).collect();
    let mut groups = vec![Vec::new(); distinct.len().div_ceil(max_keys)];
    for (i, key) in keys.iter().enumerate() {
        groups[group_of[key]].push(i);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rows_within_the_limit_are_one_insert_in_their_order() {
        assert_eq!(partition_groups(&[3, 1, 3, 2], 3), vec![vec![0, 1, 2, 3]]);
        assert!(partition_groups(&[], 3).is_empty());
    }

    #[test]
    fn rows_over_the_limit_are_cut_into_stretches_of_days() {
        // Days 1..=5, at most 2 per insert: {1,2}, {3,4}, {5}.
        assert_eq!(partition_groups(&[5, 1, 3, 2, 1, 4], 2), vec![vec![1, 3, 4], vec![2, 5], vec![0]]);
    }

    #[test]
    fn two_hundred_days_need_four_inserts_of_fifty_days() {
        let keys: Vec<u64> = (0..200).map(|d| 20_000 + d).collect();
        let groups = partition_groups(&keys, MAX_UTC_DAYS_PER_INSERT);
        assert_eq!(groups.len(), 4);
        assert!(groups.iter().all(|g| g.len() == 50));
    }

    #[test]
    fn a_record_in_one_insert_keeps_its_token_and_a_cut_one_gets_one_per_insert() {
        assert_eq!(group_token("t.signals-3-17", 0, 1), "t.signals-3-17");
        let cut: Vec<String> = (0..3).map(|g| group_token("t.signals-3-17", g, 3)).collect();
        assert_eq!(cut, ["t.signals-3-17-g0", "t.signals-3-17-g1", "t.signals-3-17-g2"]);
    }

    proptest! {
        #[test]
        fn every_group_is_within_the_limit_and_every_row_is_kept_once_in_order(
            keys in prop::collection::vec(0u64..400, 0..1500),
            max in 1usize..120,
        ) {
            let groups = partition_groups(&keys, max);
            let mut seen = vec![0u32; keys.len()];
            for g in &groups {
                prop_assert!(!g.is_empty());
                let distinct: BTreeSet<u64> = g.iter().map(|&i| keys[i]).collect();
                prop_assert!(distinct.len() <= max, "a group holds {} keys", distinct.len());
                prop_assert!(g.windows(2).all(|w| w[0] < w[1]), "a group reorders its rows");
                for &i in g {
                    seen[i] += 1;
                }
            }
            prop_assert!(seen.iter().all(|&n| n == 1), "a row is lost or repeated");
            // A key never straddles two inserts (one partition, one block, one token).
            let mut group_of_key = BTreeMap::new();
            for (n, g) in groups.iter().enumerate() {
                for &i in g {
                    prop_assert_eq!(*group_of_key.entry(keys[i]).or_insert(n), n);
                }
            }
            prop_assert_eq!(partition_groups(&keys, max), groups, "the grouping is deterministic");
        }

        /// Whatever the server's time zone, an insert covers at most 100 of its partitions.
        #[test]
        fn no_insert_covers_more_than_100_server_partitions_in_any_time_zone(
            times in prop::collection::vec(0u64..(400 * DAY_NS), 1..1500),
            offset_minutes in -720i64..=840,
        ) {
            let days: Vec<u64> = times.iter().map(|t| t / DAY_NS).collect();
            for g in partition_groups(&days, MAX_UTC_DAYS_PER_INSERT) {
                let local: BTreeSet<i64> = g
                    .iter()
                    .map(|&i| (times[i] as i64 + offset_minutes * 60_000_000_000).div_euclid(DAY_NS as i64))
                    .collect();
                prop_assert!(local.len() <= MAX_PARTITIONS_PER_INSERT_BLOCK, "{} partitions", local.len());
            }
        }
    }
}
