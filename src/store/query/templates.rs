//! Templates: per service (or all), with count and first/last seen, the most frequent first,
//! and their per-minute hit counts over a window (the sparklines).
//!
//! A template a sibling merge absorbed is not listed (its survivor's count holds its lines),
//! and its hits count as its survivor's (`log_template_merges`, docs/mining.md).

use super::{Window, MAX_LIMIT};
use crate::store::statements::Statement;
use crate::store::{Store, StoreError, TemplateRow};

/// Keyset cursor of the template list: the previous page's last (count, service, id).
pub type TemplateCursor = (u64, String, u64);

/// Binds: [service], [cursor: count, count, service, template id], limit.
pub fn templates_sql(by_service: bool, after: bool) -> String {
    let mut conditions = vec![
        "(service, template_id, masking_version) NOT IN (SELECT service, absorbed_id, masking_version \
         FROM log_template_merges FINAL WHERE survivor_id != absorbed_id)",
    ];
    if by_service {
        conditions.push("service = ?");
    }
    if after {
        conditions.push("(count < ? OR (count = ? AND (service, template_id) > (?, ?)))");
    }
    format!(
        "SELECT service, template_id, template, count, first_seen_ns, last_seen_ns, masking_version, updated_ns \
         FROM log_templates FINAL WHERE {} ORDER BY count DESC, service, template_id LIMIT ?",
        conditions.join(" AND ")
    )
}

pub async fn templates(
    store: &Store,
    service: Option<&str>,
    after: Option<&TemplateCursor>,
    limit: u64,
) -> Result<Vec<TemplateRow>, StoreError> {
    let mut query = store.client().query(&templates_sql(service.is_some(), after.is_some()));
    if let Some(service) = service {
        query = query.bind(service);
    }
    if let Some((count, service, id)) = after {
        query = query.bind(*count).bind(*count).bind(service.as_str()).bind(*id);
    }
    query.bind(limit.min(MAX_LIMIT)).fetch_all().await.map_err(|e| store.query_error("reading templates", e))
}

/// The same per-template minute counts the logminer's rules read.
pub use crate::store::logminer::MinuteCount;

/// Hits per template and minute; distinct log ids, so re-read logs count once. A hit of an
/// absorbed template counts for its survivor (0: no merge row). Binds: from, to, services
/// (array) twice, template ids (array).
pub const MINUTE_COUNTS_SQL: &str = "SELECT service, survivor, minute, uniqExact(log_id)
FROM (SELECT service, if(survivor_id = 0, template_id, survivor_id) AS survivor,
        intDiv(time_ns, 60000000000) AS minute, log_id
    FROM (SELECT service, template_id, log_id, time_ns FROM log_hits
        WHERE time_ns >= ? AND time_ns < ? AND has(?, service)) AS hits
    ANY LEFT JOIN (SELECT service, absorbed_id AS template_id, survivor_id FROM log_template_merges FINAL
        WHERE has(?, service)) AS merges USING (service, template_id))
WHERE has(?, survivor)
GROUP BY service, survivor, minute
ORDER BY service, survivor, minute";

pub async fn minute_counts(
    store: &Store,
    window: Window,
    services: &[String],
    template_ids: &[u64],
) -> Result<Vec<MinuteCount>, StoreError> {
    store
        .client()
        .query(MINUTE_COUNTS_SQL)
        .bind(window.from_ns)
        .bind(window.to_ns)
        .bind(services)
        .bind(services)
        .bind(template_ids)
        .fetch_all()
        .await
        .map_err(|e| store.query_error("reading template minute counts", e))
}

pub fn statements() -> Vec<Statement> {
    vec![
        Statement::new("query.templates", templates_sql(true, true)).binds(["'s'", "0", "0", "'s'", "0", "10"]),
        Statement::new("query.template_minute_counts", MINUTE_COUNTS_SQL).binds(["0", "1", "['s']", "['s']", "[0]"]),
    ]
}
