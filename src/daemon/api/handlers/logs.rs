//! `GET /api/v1/logs`: logs of a window by service, template and substring, each with its
//! template id, newest first.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{attributes, structured_body, AppState, Log, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS, HOUR_NS};
use crate::store::attributes::typed_attributes;
use crate::store::query::logs::{self, LogSearch};
use crate::wire::alert::format_id;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LogsParams {
    pub service: Option<String>,
    /// Only logs that matched this template (16 hex digits).
    pub template_id: Option<String>,
    /// A substring of the body, matched ignoring case.
    pub q: Option<String>,
    /// Window start, Unix ns (default: one hour before `to`).
    pub from: Option<u64>,
    pub to: Option<u64>,
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/logs", tag = "logs", params(LogsParams),
    responses((status = 200, body = Page<Log>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, Query(p): Query<LogsParams>) -> Result<Json<Page<Log>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), HOUR_NS, 7 * DAY_NS)?;
    let limit = params::limit(p.limit)?;
    let template_id = match params::text("template_id", p.template_id)? {
        Some(t) => Some(params::hex_id("template_id", &t)?),
        None => None,
    };
    let before = params::cursor::<(u64, u64)>(p.cursor)?;
    let q = LogSearch {
        service: params::text("service", p.service)?,
        template_id,
        contains: params::text("q", p.q)?,
        before,
    };
    let rows = state.run(logs::logs(&state.store, window, &q, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&(r.time_ns, r.log_id)));
    let items: Vec<Log> = rows
        .into_iter()
        .map(|r| Log {
            log_id: format_id(r.log_id),
            attributes: attributes(&r.attr_keys, &r.attr_values),
            typed_attributes: typed_attributes(&r.attr_keys, &r.attr_values, &r.attr_types),
            service: r.service,
            time_ns: r.time_ns,
            severity_number: r.severity_number,
            severity_text: r.severity_text,
            body: r.body,
            trace_id: r.trace_id,
            span_id: r.span_id,
            template_id: (r.template_id != 0).then(|| format_id(r.template_id)),
            structured_body: structured_body(&r.body_value),
            event_name: r.event_name,
            flags: r.flags,
            dropped_attributes_count: r.dropped_attributes_count,
        })
        .collect();
    Ok(Json(Page::of(items, limit, cursor)))
}
