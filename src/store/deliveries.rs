//! `notifier_deliveries` and `notifier_resolved_deliveries`: the state of every (alert,
//! target) pair's firing and resolved delivery (docs/design.md#notifier-states), read by the
//! notifier before it sends and by `tayga deliveries show`. Both tables are a
//! ReplacingMergeTree by (alert_id, target) with `updated_ns` as the version, so every
//! change is a new row (written with [`write`]) and reads take the latest version with
//! `argMax`.

use std::fmt;

use super::statements::Statement;
use super::{DeliveryRow, Store, StoreError};
use crate::wire::alert::AlertState;

/// The table holding the pairs' rows of one alert state.
pub fn table(state: AlertState) -> &'static str {
    match state {
        AlertState::Firing => "notifier_deliveries",
        AlertState::Resolved => "notifier_resolved_deliveries",
    }
}

/// The latest version of every (alert, target) row of one alert, by target. `created_ns`
/// is the pair's first row's, `updated_ns` its latest. No aliases: ClickHouse would let an
/// alias named like a column shadow that column inside the other aggregates. Rows are read
/// by position (RowBinary), in `DeliveryRow`'s field order. Binds: alert id.
pub fn latest_by_alert_sql(state: AlertState) -> String {
    format!(
        "SELECT alert_id, target,
    argMax(status, updated_ns),
    argMax(attempts, updated_ns),
    argMax(last_error, updated_ns),
    min(created_ns),
    max(updated_ns),
    argMax(manual_retries, updated_ns),
    argMax(retried_ns, updated_ns),
    argMax(retried_by, updated_ns),
    argMax(silence_id, updated_ns)
FROM {}
WHERE alert_id = ?
GROUP BY alert_id, target
ORDER BY target",
        table(state)
    )
}

/// The latest row of every target of one alert in one state, ordered by target.
pub async fn latest_for_alert(store: &Store, alert_id: u64, state: AlertState) -> Result<Vec<DeliveryRow>, StoreError> {
    store
        .client()
        .query(&latest_by_alert_sql(state))
        .bind(alert_id)
        .fetch_all::<DeliveryRow>()
        .await
        .map_err(|source| store.query_error(&format!("reading {}", table(state)), source))
}

/// The latest row of every target of one alert, firing first, then resolved: the alert's
/// whole delivery history, as `tayga deliveries show` and the alert page show it.
pub async fn history(store: &Store, alert_id: u64) -> Result<Vec<(AlertState, DeliveryRow)>, StoreError> {
    let (firing, resolved) = tokio::try_join!(
        latest_for_alert(store, alert_id, AlertState::Firing),
        latest_for_alert(store, alert_id, AlertState::Resolved)
    )?;
    let tag = |state| move |row| (state, row);
    Ok(firing
        .into_iter()
        .map(tag(AlertState::Firing))
        .chain(resolved.into_iter().map(tag(AlertState::Resolved)))
        .collect())
}

/// Writes one version of a pair's row in `state`'s table.
pub async fn write(store: &Store, state: AlertState, row: &DeliveryRow) -> Result<(), StoreError> {
    store.insert_into(table(state), std::slice::from_ref(row)).await
}

impl DeliveryRow {
    /// The pair's next version after an operator's manual retry (`tayga deliveries retry`):
    /// pending again with no attempts, so the notifier's decision reads "deliver" and the
    /// attempts and backoff ladder start over, and who asked and when recorded. `last_error`
    /// is kept: until the next attempt it says what the retry is for. `created_ns` is kept
    /// (every version of a pair shares its partition).
    pub fn manual_retry(&self, now_ns: u64, by: &str) -> DeliveryRow {
        DeliveryRow {
            status: Status::Pending.as_str().into(),
            attempts: 0,
            updated_ns: now_ns.max(self.updated_ns + 1),
            manual_retries: self.manual_retries + 1,
            retried_ns: now_ns,
            retried_by: by.to_string(),
            ..self.clone()
        }
    }

    /// Whether this is a pair an operator reset to pending that no attempt has finished yet.
    pub fn is_pending_manual_retry(&self) -> bool {
        self.manual_retries > 0 && Status::parse(&self.status) == Some(Status::Pending)
    }
}

/// This module's statements with sample binds, for the registry.
pub fn statements() -> Vec<Statement> {
    vec![
        Statement::new("deliveries.latest_by_alert", latest_by_alert_sql(AlertState::Firing)).binds(["11"]),
        Statement::new("deliveries.latest_resolved_by_alert", latest_by_alert_sql(AlertState::Resolved)).binds(["11"]),
    ]
}

/// The `status` column of `notifier_deliveries` (docs/design.md#notifier-states): the notifier writes it, the
/// commands and the API read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Attempts made, none succeeded yet; more may follow (after a restart too).
    Pending,
    Delivered,
    Failed,
    /// Held back by an operator's silence (`silence_id` names it); nothing was sent. Not
    /// final: a copy of the alert read once no silence matches it is delivered
    /// (docs/notifier.md, "Silences").
    Silenced,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Delivered => "delivered",
            Status::Failed => "failed",
            Status::Silenced => "silenced",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        [Status::Pending, Status::Delivered, Status::Failed, Status::Silenced].into_iter().find(|st| st.as_str() == s)
    }

    /// Delivered or failed: a re-read copy of the alert sends nothing to this target.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Delivered | Status::Failed)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_retry_resets_the_ladder_and_records_who_and_when() {
        let failed = DeliveryRow {
            alert_id: 7,
            target: "ops".into(),
            status: "failed".into(),
            attempts: 8,
            last_error: "HTTP 400 Bad Request".into(),
            created_ns: 100,
            updated_ns: 500,
            ..Default::default()
        };
        assert!(!failed.is_pending_manual_retry());
        let retried = failed.manual_retry(1_000, "cli:ops@host");
        assert_eq!((retried.status.as_str(), retried.attempts), ("pending", 0));
        assert_eq!(
            (retried.manual_retries, retried.retried_ns, retried.retried_by.as_str()),
            (1, 1_000, "cli:ops@host")
        );
        assert_eq!((retried.created_ns, retried.updated_ns), (100, 1_000));
        assert_eq!(retried.last_error, "HTTP 400 Bad Request");
        assert!(retried.is_pending_manual_retry());
        // A clock behind the row's last write still makes a newer version.
        let again = DeliveryRow { status: "failed".into(), ..retried }.manual_retry(10, "api");
        assert_eq!((again.manual_retries, again.updated_ns, again.retried_ns), (2, 1_001, 10));
    }
}
