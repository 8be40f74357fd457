//! `GET /api/v1/services`: every service seen in a window.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{AppState, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS, HOUR_NS};
use crate::store::query::services::{self, ServiceSummary as Service};

/// Services seen in the hour before `to`, over at most 31 days.
pub const WINDOW: params::WindowRule = params::WindowRule { default_ns: HOUR_NS, max_ns: 31 * DAY_NS };

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ServicesParams {
    /// Window start, Unix ns (default: one hour before `to`).
    pub from: Option<u64>,
    /// Window end, Unix ns (default: now).
    pub to: Option<u64>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/services", tag = "services", params(ServicesParams),
    responses((status = 200, body = Page<Service>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    Query(p): Query<ServicesParams>,
) -> Result<Json<Page<Service>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let limit = params::limit(p.limit)?;
    let after = params::cursor::<String>(p.cursor)?.unwrap_or_default();
    let rows = state.run(services::services(&state.store, window, &after, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&r.service));
    Ok(Json(Page::of(rows, limit, cursor)))
}
