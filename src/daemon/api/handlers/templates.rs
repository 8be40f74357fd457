//! `GET /api/v1/templates`: templates (of a service, or all), the most frequent first, each
//! with its per-minute hit counts over a window (for sparklines).

use std::collections::HashMap;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{AppState, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, Window, DAY_NS, HOUR_NS};
use crate::store::query::templates;
use crate::time::MINUTE_NS;
use crate::wire::alert::format_id;

/// The per-minute counts of the hour before `to`, over at most a day.
pub const WINDOW: params::WindowRule = params::WindowRule { default_ns: HOUR_NS, max_ns: DAY_NS };

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TemplatesParams {
    pub service: Option<String>,
    /// Window of the per-minute counts, Unix ns (default: the hour before `to`; at most 24 h).
    pub from: Option<u64>,
    pub to: Option<u64>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MinuteCount {
    /// The minute's start, Unix ns.
    pub minute_ns: u64,
    pub count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Template {
    pub service: String,
    pub template_id: String,
    pub template: String,
    /// Lines matched since the template was first seen.
    pub count: u64,
    pub first_seen_ns: u64,
    pub last_seen_ns: u64,
    pub masking_version: String,
    /// Distinct lines per minute in the window; minutes without a line are left out.
    pub minutes: Vec<MinuteCount>,
}

#[utoipa::path(get, path = "/api/v1/templates", tag = "templates", params(TemplatesParams),
    responses((status = 200, body = Page<Template>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    Query(p): Query<TemplatesParams>,
) -> Result<Json<Page<Template>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let limit = params::limit(p.limit)?;
    let service = params::text("service", p.service)?;
    let after = params::cursor::<(u64, String, u64)>(p.cursor)?;
    let rows = state.run(templates::templates(&state.store, service.as_deref(), after.as_ref(), limit)).await?;
    let mut services: Vec<String> = rows.iter().map(|r| r.service.clone()).collect();
    services.sort();
    services.dedup();
    let ids: Vec<u64> = rows.iter().map(|r| r.template_id).collect();
    let mut minutes =
        if rows.is_empty() { HashMap::new() } else { minute_counts(&state, window, &services, &ids).await? };
    let cursor = rows.last().map(|r| params::next_cursor(&(r.count, r.service.clone(), r.template_id)));
    let items: Vec<Template> = rows
        .into_iter()
        .map(|r| Template {
            minutes: minutes.remove(&(r.service.clone(), r.template_id)).unwrap_or_default(),
            template_id: format_id(r.template_id),
            service: r.service,
            template: r.template,
            count: r.count,
            first_seen_ns: r.first_seen_ns,
            last_seen_ns: r.last_seen_ns,
            masking_version: r.masking_version,
        })
        .collect();
    Ok(Json(Page::of(items, limit, cursor)))
}

/// Distinct lines per minute in `window` of each of `ids` (of `services`), by (service,
/// template id); minutes without a line are left out. The series of every template
/// `GET /api/v1/templates` lists, and of the app's template and alert charts.
pub async fn minute_counts(
    state: &AppState,
    window: Window,
    services: &[String],
    ids: &[u64],
) -> Result<HashMap<(String, u64), Vec<MinuteCount>>, ApiError> {
    let counts = state.run(templates::minute_counts(&state.store, window, services, ids)).await?;
    let mut minutes: HashMap<(String, u64), Vec<MinuteCount>> = HashMap::new();
    for c in counts {
        minutes
            .entry((c.service, c.template_id))
            .or_default()
            .push(MinuteCount { minute_ns: c.minute * MINUTE_NS, count: c.count });
    }
    Ok(minutes)
}

/// One template's series from [`minute_counts`], as (minute start ns, lines) pairs.
pub async fn minute_series(
    state: &AppState,
    window: Window,
    service: &str,
    template_id: u64,
) -> Result<Vec<(u64, u64)>, ApiError> {
    let mut minutes = minute_counts(state, window, &[service.to_string()], &[template_id]).await?;
    let series = minutes.remove(&(service.to_string(), template_id)).unwrap_or_default();
    Ok(series.into_iter().map(|m| (m.minute_ns, m.count)).collect())
}
