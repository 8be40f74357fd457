//! Stories: `GET /api/v1/traces/{trace_id}/story`, `GET /api/v1/shapes` (one per
//! fingerprint over a window) and `GET /api/v1/shapes/{fingerprint}/stories`.

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::{AppState, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS, HOUR_NS};
use crate::store::query::stories;
pub use crate::store::query::stories::{Shape, ShapeException};
use crate::wire::story::Story;

/// Stories that started in the hour before `to`, over at most 31 days.
pub const WINDOW: params::WindowRule = params::WindowRule { default_ns: HOUR_NS, max_ns: 31 * DAY_NS };

#[utoipa::path(get, path = "/api/v1/traces/{trace_id}/story", tag = "stories",
    params(("trace_id" = String, Path, description = "32 hex digits", pattern = "^[0-9a-fA-F]{32}$")),
    responses((status = 200, body = Story), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn by_trace(State(state): State<AppState>, Path(trace_id): Path<String>) -> Result<Json<Story>, ApiError> {
    let trace_id = params::trace_id("trace_id", &trace_id)?;
    match state.run(stories::story_by_trace(&state.store, &trace_id)).await? {
        Some(row) => Ok(Json(Story::current(row))),
        None => Err(ApiError::not_found(format!("story of trace {trace_id}"))),
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ShapesParams {
    /// Shapes with this service among their stories' services.
    pub service: Option<String>,
    /// Window start, Unix ns (default: one hour before `to`); stories by start.
    pub from: Option<u64>,
    pub to: Option<u64>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/shapes", tag = "stories", params(ShapesParams),
    responses((status = 200, body = Page<Shape>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn shapes(
    State(state): State<AppState>,
    Query(p): Query<ShapesParams>,
) -> Result<Json<Page<Shape>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let limit = params::limit(p.limit)?;
    let service = params::text("service", p.service)?;
    let after = params::cursor::<(u64, u64)>(p.cursor)?;
    let rows = state.run(stories::shapes(&state.store, window, service.as_deref(), after, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&(r.count, r.fingerprint)));
    Ok(Json(Page::of(rows, limit, cursor)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ShapeStoriesParams {
    pub from: Option<u64>,
    pub to: Option<u64>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/shapes/{fingerprint}/stories", tag = "stories",
    params(("fingerprint" = String, Path, description = "1 to 16 hex digits", pattern = "^[0-9a-fA-F]{1,16}$"), ShapeStoriesParams),
    responses((status = 200, body = Page<Story>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn shape_stories(
    State(state): State<AppState>,
    Path(fingerprint): Path<String>,
    Query(p): Query<ShapeStoriesParams>,
) -> Result<Json<Page<Story>>, ApiError> {
    let fingerprint = params::hex_id("fingerprint", &fingerprint)?;
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let limit = params::limit(p.limit)?;
    let after = params::cursor::<(u64, String)>(p.cursor)?;
    let rows = state.run(stories::shape_stories(&state.store, fingerprint, window, after, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&(r.start_ns, r.trace_id.clone())));
    let items = rows.into_iter().map(Story::current).collect();
    Ok(Json(Page::of(items, limit, cursor)))
}
