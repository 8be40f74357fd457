//! What the API shows beside an alert: a sample of the log lines that raised it and its
//! publication marks. The alert list itself is `store::logminer::alerts`, the same read
//! `tayga alerts list` makes; the deliveries are `store::deliveries::latest_for_alert`,
//! the same read `tayga deliveries show` makes.

use crate::store::statements::Statement;
use crate::store::{AlertPublicationRow, LogRow, Store, StoreError};

/// After `FROM logs`: the newest logs of one template within a time range, found through its
/// hits. Binds: service, from, to, service, template id, from, to, limit.
pub const SAMPLE_LINES_REST: &str = "FINAL
WHERE service = ? AND time_ns >= ? AND time_ns <= ?
  AND log_id IN (SELECT log_id FROM log_hits WHERE service = ? AND template_id = ? AND time_ns >= ? AND time_ns <= ?)
ORDER BY time_ns DESC, log_id DESC LIMIT ?";

/// How far before an alert's `first_at` its sample lines may come from: a silence has no
/// hits between `first_at` and `last_at` (that is what it reports), so its sample is the
/// template's last lines before it went quiet.
pub const SAMPLE_LOOKBACK_NS: u64 = 60 * 60 * 1_000_000_000;

/// Up to `limit` lines of `template_id` in `[from_ns, to_ns]`, newest first.
pub async fn sample_lines(
    store: &Store,
    service: &str,
    template_id: u64,
    from_ns: u64,
    to_ns: u64,
    limit: u64,
) -> Result<Vec<LogRow>, StoreError> {
    store
        .select::<LogRow>(SAMPLE_LINES_REST)
        .bind(service)
        .bind(from_ns)
        .bind(to_ns)
        .bind(service)
        .bind(template_id)
        .bind(from_ns)
        .bind(to_ns)
        .bind(limit)
        .fetch_all()
        .await
        .map_err(|e| store.query_error("reading an alert's sample lines", e))
}

/// After `FROM log_alert_publications`: every publication mark of one alert (a prefix of the
/// table's key). Binds: alert id.
pub const PUBLICATIONS_REST: &str = "FINAL WHERE alert_id = ? ORDER BY alert_updated_ns";

pub async fn publications(store: &Store, alert_id: u64) -> Result<Vec<AlertPublicationRow>, StoreError> {
    store
        .select::<AlertPublicationRow>(PUBLICATIONS_REST)
        .bind(alert_id)
        .fetch_all()
        .await
        .map_err(|e| store.query_error("reading an alert's publication marks", e))
}

pub fn statements() -> Vec<Statement> {
    vec![
        Statement::select::<LogRow>("query.alert_sample_lines", SAMPLE_LINES_REST)
            .binds(["'s'", "0", "1", "'s'", "0", "0", "1", "20"]),
        Statement::select::<AlertPublicationRow>("query.alert_publications", PUBLICATIONS_REST).binds(["0"]),
    ]
}
