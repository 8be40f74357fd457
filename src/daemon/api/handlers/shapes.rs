//! `GET /api/v1/shapes/{a}/diff/{b}`: what differs between two shapes (docs/api.md): the
//! call edges one has and the other lacks, and per edge the calls and the self time of a
//! representative trace of each side (each shape's newest story in the window), as
//! `store::query::stories::shape_diff` reads it (`tayga shapes diff` reads the same).

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS};
use crate::store::query::stories::{self, ShapeDiffError};
use crate::wire::alert::format_id;

/// Each side's newest story in the day before `to`, over at most 31 days.
pub const WINDOW: params::WindowRule = params::WindowRule { default_ns: DAY_NS, max_ns: 31 * DAY_NS };

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DiffParams {
    /// Window start, Unix ns (default: a day before `to`); each side's newest story in it.
    pub from: Option<u64>,
    pub to: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DiffSide {
    pub fingerprint: String,
    /// The representative trace: the shape's newest story in the window.
    pub trace_id: String,
    pub duration_ns: u64,
    pub edges: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EdgeChange {
    pub edge: String,
    /// Spans making this call in each side's trace (0: absent).
    pub calls_a: u64,
    pub calls_b: u64,
    /// Their summed self time, ns.
    pub self_ns_a: u64,
    pub self_ns_b: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ShapeDiff {
    pub a: DiffSide,
    pub b: DiffSide,
    /// Edges of `b` that `a` lacks, and of `a` that `b` lacks.
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Every edge of either side, sorted.
    pub edges: Vec<EdgeChange>,
}

#[utoipa::path(get, path = "/api/v1/shapes/{a}/diff/{b}", tag = "stories", params(
        ("a" = String, Path, description = "the shape diffed against: 1 to 16 hex digits", pattern = "^[0-9a-fA-F]{1,16}$"),
        ("b" = String, Path, description = "the shape shown: 1 to 16 hex digits", pattern = "^[0-9a-fA-F]{1,16}$"), DiffParams),
    responses((status = 200, body = ShapeDiff), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn diff(
    State(state): State<AppState>,
    Path((a, b)): Path<(String, String)>,
    Query(p): Query<DiffParams>,
) -> Result<Json<ShapeDiff>, ApiError> {
    let (a, b) = (params::hex_id("a", &a)?, params::hex_id("b", &b)?);
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let d = state.run(stories::shape_diff(&state.store, a, b, window)).await?;
    let side = |s: &crate::store::StoryRow| DiffSide {
        fingerprint: format_id(s.fingerprint),
        trace_id: s.trace_id.clone(),
        duration_ns: s.duration_ns,
        edges: s.edges.clone(),
    };
    let edges = d
        .edges
        .into_iter()
        .map(|e| EdgeChange {
            edge: e.edge,
            calls_a: e.calls_a,
            calls_b: e.calls_b,
            self_ns_a: e.self_ns_a,
            self_ns_b: e.self_ns_b,
        })
        .collect();
    Ok(Json(ShapeDiff { a: side(&d.a), b: side(&d.b), added: d.added, removed: d.removed, edges }))
}

impl From<ShapeDiffError> for ApiError {
    fn from(e: ShapeDiffError) -> ApiError {
        match e {
            ShapeDiffError::NoStory(fingerprint) => {
                ApiError::not_found(format!("a story of shape {} in the window", format_id(fingerprint)))
            }
            ShapeDiffError::Store(e) => e.into(),
        }
    }
}
