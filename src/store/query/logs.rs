//! Logs of a window, filtered by service, template and a case-insensitive substring of the
//! body, each with the template it matched (from `log_hits`; 0 when not mined yet), newest
//! first, in keyset pages.

use clickhouse::Row;
use serde::Deserialize;

use super::{and_all, Window, MAX_LIMIT};
use crate::store::statements::Statement;
use crate::store::{Store, StoreError};

#[derive(Debug, Clone, PartialEq, Row, Deserialize)]
pub struct LogWithTemplate {
    pub log_id: u64,
    pub service: String,
    pub time_ns: u64,
    pub severity_number: u8,
    pub severity_text: String,
    pub body: String,
    pub trace_id: String,
    pub span_id: String,
    pub attr_keys: Vec<String>,
    pub attr_values: Vec<String>,
    pub attr_types: Vec<u8>,
    pub event_name: String,
    pub flags: u32,
    pub dropped_attributes_count: u32,
    pub body_value: String,
    /// 0 when the log has no hit (not mined yet).
    pub template_id: u64,
}

#[derive(Debug, Clone, Default)]
pub struct LogSearch {
    pub service: Option<String>,
    pub template_id: Option<u64>,
    /// Matched anywhere in the body, ignoring case.
    pub contains: Option<String>,
    /// Keyset cursor: the previous page's last (time, log id).
    pub before: Option<(u64, u64)>,
}

/// Binds, in order: from, to, [service] (the hits side), from, to, [service], [template id],
/// [substring], [cursor: time, time, log id], limit.
pub fn logs_sql(q: &LogSearch) -> String {
    let hits_service = if q.service.is_some() { " AND service = ?" } else { "" };
    let mut conditions = vec!["time_ns >= ?", "time_ns < ?"];
    if q.service.is_some() {
        conditions.push("service = ?");
    }
    if q.template_id.is_some() {
        conditions.push("template_id = ?");
    }
    if q.contains.is_some() {
        conditions.push("positionCaseInsensitiveUTF8(body, ?) > 0");
    }
    if q.before.is_some() {
        conditions.push("(time_ns < ? OR (time_ns = ? AND log_id < ?))");
    }
    format!(
        "SELECT log_id, service, time_ns, severity_number, severity_text, body, trace_id, span_id, attr_keys, attr_values, \
         attr_types, event_name, flags, dropped_attributes_count, body_value, template_id \
         FROM logs FINAL \
         ANY LEFT JOIN (SELECT service, log_id, template_id FROM log_hits WHERE time_ns >= ? AND time_ns < ?{hits_service}) AS hits \
         USING (service, log_id) \
         WHERE {} ORDER BY time_ns DESC, log_id DESC LIMIT ?",
        and_all(&conditions)
    )
}

pub async fn logs(
    store: &Store,
    window: Window,
    q: &LogSearch,
    limit: u64,
) -> Result<Vec<LogWithTemplate>, StoreError> {
    let mut query = store.client().query(&logs_sql(q)).bind(window.from_ns).bind(window.to_ns);
    if let Some(service) = &q.service {
        query = query.bind(service.as_str());
    }
    query = query.bind(window.from_ns).bind(window.to_ns);
    if let Some(service) = &q.service {
        query = query.bind(service.as_str());
    }
    if let Some(id) = q.template_id {
        query = query.bind(id);
    }
    if let Some(text) = &q.contains {
        query = query.bind(text.as_str());
    }
    if let Some((time, id)) = q.before {
        query = query.bind(time).bind(time).bind(id);
    }
    query.bind(limit.min(MAX_LIMIT)).fetch_all().await.map_err(|e| store.query_error("reading logs", e))
}

pub fn statements() -> Vec<Statement> {
    let widest = LogSearch {
        service: Some(String::new()),
        template_id: Some(0),
        contains: Some(String::new()),
        before: Some((0, 0)),
    };
    vec![
        Statement::new("query.logs", logs_sql(&widest))
            .binds(["0", "1", "'s'", "0", "1", "'s'", "0", "'q'", "0", "0", "0", "10"]),
        Statement::new("query.logs_unfiltered", logs_sql(&LogSearch::default())).binds(["0", "1", "0", "1", "10"]),
    ]
}
