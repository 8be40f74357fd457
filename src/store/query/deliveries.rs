//! Every `(alert, target)` delivery row created in a window: the latest version of each pair
//! (`argMax` by `updated_ns`, as `tayga deliveries show` reads one alert's), in key order.

use super::{and_all, Window, MAX_LIMIT};
use crate::store::statements::Statement;
use crate::store::{DeliveryRow, Store, StoreError};
use crate::wire::alert::AlertState;

#[derive(Debug, Clone, Default)]
pub struct DeliverySearch {
    /// Which deliveries: the alerts' (firing) or their resolved notices'.
    pub state: AlertState,
    pub alert_id: Option<u64>,
    pub target: Option<String>,
    /// pending, delivered or failed: judged on the latest version.
    pub status: Option<String>,
    /// Keyset cursor: the previous page's last (alert id, target).
    pub after: Option<(u64, String)>,
}

/// Binds: from, to, [alert id], [target], [cursor: alert id, alert id, target], [status],
/// limit. No aliases, for the reason `store::deliveries::latest_by_alert_sql` gives.
pub fn deliveries_sql(q: &DeliverySearch) -> String {
    let mut conditions = vec!["created_ns >= ?", "created_ns < ?"];
    if q.alert_id.is_some() {
        conditions.push("alert_id = ?");
    }
    if q.target.is_some() {
        conditions.push("target = ?");
    }
    if q.after.is_some() {
        conditions.push("(alert_id > ? OR (alert_id = ? AND target > ?))");
    }
    let having = if q.status.is_some() { " HAVING argMax(status, updated_ns) = ?" } else { "" };
    format!(
        "SELECT alert_id, target, argMax(status, updated_ns), argMax(attempts, updated_ns), argMax(last_error, updated_ns), \
         min(created_ns), max(updated_ns), argMax(manual_retries, updated_ns), argMax(retried_ns, updated_ns), \
         argMax(retried_by, updated_ns), argMax(silence_id, updated_ns) FROM {} WHERE {} \
         GROUP BY alert_id, target{having} ORDER BY alert_id, target LIMIT ?",
        crate::store::deliveries::table(q.state),
        and_all(&conditions)
    )
}

pub async fn deliveries(
    store: &Store,
    window: Window,
    q: &DeliverySearch,
    limit: u64,
) -> Result<Vec<DeliveryRow>, StoreError> {
    let mut query = store.client().query(&deliveries_sql(q)).bind(window.from_ns).bind(window.to_ns);
    if let Some(id) = q.alert_id {
        query = query.bind(id);
    }
    if let Some(target) = &q.target {
        query = query.bind(target.as_str());
    }
    if let Some((id, target)) = &q.after {
        query = query.bind(*id).bind(*id).bind(target.as_str());
    }
    if let Some(status) = &q.status {
        query = query.bind(status.as_str());
    }
    query.bind(limit.min(MAX_LIMIT)).fetch_all().await.map_err(|e| store.query_error("reading deliveries", e))
}

pub fn statements() -> Vec<Statement> {
    let widest = DeliverySearch {
        state: AlertState::Firing,
        alert_id: Some(0),
        target: Some(String::new()),
        status: Some(String::new()),
        after: Some((0, String::new())),
    };
    let binds = ["0", "1", "0", "'t'", "0", "0", "'t'", "'failed'", "10"];
    vec![
        Statement::new("query.deliveries", deliveries_sql(&widest)).binds(binds),
        Statement::new(
            "query.resolved_deliveries",
            deliveries_sql(&DeliverySearch { state: AlertState::Resolved, ..widest }),
        )
        .binds(binds),
    ]
}
