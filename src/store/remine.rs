//! The reads and the mutations of `tayga remine`: the stored logs of a range, counted per
//! service and per minute, read back in time order a page at a time, and the removal of one
//! masking version's templates and merges before they are rebuilt.
//!
//! `logs` is a ReplacingMergeTree ordered by `(service, log_id)`, so every read here uses
//! `FINAL` (a log the writer stored twice is mined once), and nothing can use the primary key
//! for time: pages are cut into time windows (from the per-minute counts) so that each query
//! only reads the day partitions of its window, and into keyset pages within a window so that
//! memory stays bounded however many logs one minute holds.

use std::time::Duration;

use clickhouse::Row;
use serde::Deserialize;

use super::statements::Statement;
use super::{LogRow, Store, StoreError};
use crate::time::MINUTE_NS;

/// Logs per service at or after a time. Binds: since (ns).
pub const SERVICE_SUMMARY_SQL: &str = "SELECT service, count() AS logs, min(time_ns) AS oldest_ns, \
max(time_ns) AS newest_ns FROM logs FINAL WHERE time_ns >= ? GROUP BY service ORDER BY service";
/// Logs per minute (`time_ns / 60 s`) at or after a time. Binds: since (ns).
pub const MINUTE_COUNTS_SQL: &str = "SELECT intDiv(time_ns, 60000000000) AS minute, count() AS logs \
FROM logs FINAL WHERE time_ns >= ? GROUP BY minute ORDER BY minute";
/// After `FROM logs`: the first page of a window `[from, until)`. Binds: from, until.
pub const FIRST_PAGE_REST: &str = "FINAL WHERE time_ns >= ? AND time_ns < ? ORDER BY time_ns, service, log_id LIMIT ";
/// After `FROM logs`: the page after a cursor `(time, service, log_id)` in a window.
/// Binds: from, until, cursor time twice, cursor service twice, cursor log id.
pub const NEXT_PAGE_REST: &str = "FINAL WHERE time_ns >= ? AND time_ns < ? \
AND (time_ns > ? OR (time_ns = ? AND (service > ? OR (service = ? AND log_id > ?)))) \
ORDER BY time_ns, service, log_id LIMIT ";
/// Removes one masking version's templates (a mutation: asynchronous). Binds: version.
pub const DELETE_TEMPLATES_SQL: &str = "ALTER TABLE log_templates DELETE WHERE masking_version = ?";
/// Removes one masking version's merges (a mutation: asynchronous). Binds: version.
pub const DELETE_MERGES_SQL: &str = "ALTER TABLE log_template_merges DELETE WHERE masking_version = ?";
/// Mutations of `log_templates` and `log_template_merges` the server has not finished.
/// Binds: database.
pub const PENDING_TEMPLATE_MUTATIONS_SQL: &str = "SELECT count() FROM system.mutations WHERE database = ? \
AND table IN ('log_templates', 'log_template_merges') AND is_done = 0";
/// The same on a cluster: the local tables' mutations on every server. Binds: cluster,
/// database.
pub const PENDING_TEMPLATE_MUTATIONS_CLUSTER_SQL: &str = "SELECT count() FROM cluster(?, system.mutations) \
WHERE database = ? AND table IN ('log_templates_local', 'log_template_merges_local') AND is_done = 0";

/// This module's statements with sample binds, for the registry (and, in this order, for
/// `tests/it/logminer_commands.rs`). Pages are shown with a limit of 1000.
pub fn statements() -> Vec<Statement> {
    let page = |name: &str, rest: &str| Statement::select::<LogRow>(name, &format!("{rest}1000"));
    vec![
        Statement::new("remine.service_summary", SERVICE_SUMMARY_SQL).binds(["0"]),
        Statement::new("remine.minute_counts", MINUTE_COUNTS_SQL).binds(["0"]),
        page("remine.first_page", FIRST_PAGE_REST).binds(["0", "1"]),
        page("remine.next_page", NEXT_PAGE_REST).binds(["0", "1", "0", "0", "'a'", "'a'", "0"]),
        Statement::new("remine.delete_templates", DELETE_TEMPLATES_SQL).binds(["'v1'"]),
        Statement::new("remine.delete_merges", DELETE_MERGES_SQL).binds(["'v1'"]),
        Statement::new("remine.pending_template_mutations", PENDING_TEMPLATE_MUTATIONS_SQL)
            .binds(["currentDatabase()"]),
        Statement::new("remine.pending_template_mutations_cluster", PENDING_TEMPLATE_MUTATIONS_CLUSTER_SQL)
            .binds(["'tayga'", "currentDatabase()"])
            .cluster_only(),
    ]
}

/// One service's stored logs in a range.
#[derive(Debug, Clone, PartialEq, Eq, Row, Deserialize, serde::Serialize)]
pub struct ServiceLogs {
    pub service: String,
    pub logs: u64,
    pub oldest_ns: u64,
    pub newest_ns: u64,
}

pub async fn service_summary(store: &Store, since_ns: u64) -> Result<Vec<ServiceLogs>, StoreError> {
    store
        .client()
        .query(SERVICE_SUMMARY_SQL)
        .bind(since_ns)
        .fetch_all::<ServiceLogs>()
        .await
        .map_err(|e| store.query_error("counting stored logs per service", e))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Deserialize)]
pub struct MinuteLogs {
    pub minute: u64,
    pub logs: u64,
}

pub async fn minute_counts(store: &Store, since_ns: u64) -> Result<Vec<MinuteLogs>, StoreError> {
    store
        .client()
        .query(MINUTE_COUNTS_SQL)
        .bind(since_ns)
        .fetch_all::<MinuteLogs>()
        .await
        .map_err(|e| store.query_error("counting stored logs per minute", e))
}

/// A time range of logs, `[from_ns, until_ns)`, expected to hold about `logs` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from_ns: u64,
    pub until_ns: u64,
    pub logs: u64,
}

/// Groups consecutive minutes into windows of about `target` logs (a busier minute is a
/// window of its own), starting no earlier than `since_ns`. Pure.
pub fn windows(minutes: &[MinuteLogs], since_ns: u64, target: u64) -> Vec<Window> {
    let mut out: Vec<Window> = Vec::new();
    for m in minutes {
        let from = (m.minute * MINUTE_NS).max(since_ns);
        let until = (m.minute + 1).saturating_mul(MINUTE_NS);
        match out.last_mut() {
            Some(w) if w.logs + m.logs <= target => {
                w.until_ns = until;
                w.logs += m.logs;
            }
            _ => out.push(Window { from_ns: from, until_ns: until, logs: m.logs }),
        }
    }
    out
}

/// The next page of a window: logs ordered by `(time_ns, service, log_id)` after `after`
/// (the last log of the previous page), at most `limit`.
pub async fn logs_page(
    store: &Store,
    window: &Window,
    after: Option<&LogRow>,
    limit: u64,
) -> Result<Vec<LogRow>, StoreError> {
    let query = match after {
        None => store.select::<LogRow>(&format!("{FIRST_PAGE_REST}{limit}")).bind(window.from_ns).bind(window.until_ns),
        Some(last) => store
            .select::<LogRow>(&format!("{NEXT_PAGE_REST}{limit}"))
            .bind(window.from_ns)
            .bind(window.until_ns)
            .bind(last.time_ns)
            .bind(last.time_ns)
            .bind(last.service.as_str())
            .bind(last.service.as_str())
            .bind(last.log_id),
    };
    query.fetch_all::<LogRow>().await.map_err(|e| store.query_error("reading stored logs", e))
}

/// Why the templates of a masking version could not be removed.
#[derive(Debug, thiserror::Error)]
pub enum DeleteTemplatesError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "ClickHouse had not finished deleting the templates and merges of masking version {version} after \
         {waited:?} (see system.mutations); nothing else was changed, run remine again"
    )]
    Timeout { version: String, waited: Duration },
}

/// Deletes the templates and merges of `masking_version` and waits, up to `deadline`, until
/// the server has applied the deletions: rows written afterwards must not be caught by
/// them, and a reader must not see old and new templates side by side (nor an old merge
/// retire a rebuilt template).
pub async fn delete_templates(
    store: &Store,
    masking_version: &str,
    deadline: Duration,
) -> Result<(), DeleteTemplatesError> {
    for (sql, what) in [(DELETE_TEMPLATES_SQL, "deleting templates"), (DELETE_MERGES_SQL, "deleting template merges")] {
        let sql = super::schema::mutation_sql(sql, store.cluster());
        store.client().query(&sql).bind(masking_version).execute().await.map_err(|e| store.query_error(what, e))?;
    }
    let started = tokio::time::Instant::now();
    loop {
        let pending = match store.cluster() {
            None => store.client().query(PENDING_TEMPLATE_MUTATIONS_SQL),
            Some(c) => store.client().query(PENDING_TEMPLATE_MUTATIONS_CLUSTER_SQL).bind(&c.name),
        };
        let pending: u64 = pending
            .bind(store.database())
            .fetch_one()
            .await
            .map_err(|e| store.query_error("reading system.mutations", e))?;
        if pending == 0 {
            return Ok(());
        }
        if started.elapsed() >= deadline {
            return Err(DeleteTemplatesError::Timeout { version: masking_version.to_string(), waited: deadline });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(minute: u64, logs: u64) -> MinuteLogs {
        MinuteLogs { minute, logs }
    }

    #[test]
    fn minutes_group_into_windows_of_about_the_target() {
        let got = windows(&[m(1, 3), m(2, 3), m(5, 5), m(6, 20), m(7, 1)], 0, 6);
        let shape: Vec<(u64, u64, u64)> =
            got.iter().map(|w| (w.from_ns / MINUTE_NS, w.until_ns / MINUTE_NS, w.logs)).collect();
        // A gap between minutes does not matter; a minute above the target stands alone.
        assert_eq!(shape, vec![(1, 3, 6), (5, 6, 5), (6, 7, 20), (7, 8, 1)]);
        assert!(windows(&[], 0, 6).is_empty());
    }

    #[test]
    fn the_first_window_starts_at_the_range_not_its_minute() {
        let got = windows(&[m(1, 3)], MINUTE_NS + 5, 10);
        assert_eq!(got, vec![Window { from_ns: MINUTE_NS + 5, until_ns: 2 * MINUTE_NS, logs: 3 }]);
    }
}
