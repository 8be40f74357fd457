//! `GET /api/v1/silences`: the operators' silences (docs/notifier.md, "Silences"), running
//! ones or all. `POST /api/v1/silences` adds one, `POST /api/v1/silences/{silence_id}/expire`
//! ends one now: writes, behind the token as every route is, through `store::silences`, the
//! functions `tayga silences` calls.

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query};
use crate::store::silences::{self, NewSilence, SilenceError};
use crate::store::SilenceRow;
use crate::wire::alert::{format_id, AlertKind};

/// Who the API records as having added or expired a silence: it knows no users, only the token.
pub const API_OPERATOR: &str = "api";

#[derive(Debug, Serialize, ToSchema)]
pub struct Silence {
    pub silence_id: String,
    /// `active`, `pending`, `ended` (ran its course) or `expired` (ended early).
    pub state: String,
    pub service: String,
    /// Empty: every kind.
    pub kind: String,
    /// Empty: every template.
    pub template_id: String,
    pub starts_ns: u64,
    pub ends_ns: u64,
    pub comment: String,
    /// `cli:<user>@<host>` or `api`.
    pub created_by: String,
    /// Who expired it early; empty otherwise.
    pub expired_by: String,
}

impl Silence {
    pub fn from_row(s: SilenceRow, now_ns: u64) -> Silence {
        Silence {
            silence_id: format_id(s.silence_id),
            state: s.state(now_ns).to_string(),
            template_id: if s.template_id == 0 { String::new() } else { format_id(s.template_id) },
            service: s.service,
            kind: s.kind,
            starts_ns: s.starts_ns,
            ends_ns: s.ends_ns,
            comment: s.comment,
            created_by: s.created_by,
            expired_by: s.expired_by,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SilencesParams {
    /// `true`: every silence, also those that ended; default: the running (and not yet started) ones.
    pub all: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/silences", tag = "silences", params(SilencesParams),
    responses((status = 200, body = Vec<Silence>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    Query(p): Query<SilencesParams>,
) -> Result<Json<Vec<Silence>>, ApiError> {
    let now = state.now();
    let ends_after = if p.all.unwrap_or(false) { 0 } else { now };
    let rows = state.run(silences::list(&state.store, ends_after)).await?;
    Ok(Json(rows.into_iter().map(|s| Silence::from_row(s, now)).collect()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AddParams {
    /// The service whose alerts are held back (not only white space).
    #[param(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u0020\\u007F-\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    pub service: String,
    /// Only alerts of this kind (`new_template`, `spike`, `silence`, `new_shape`,
    /// `shape_slowdown`); default (absent or empty): every kind.
    #[param(pattern = "^(|new_template|spike|silence|new_shape|shape_slowdown)$")]
    pub kind: Option<String>,
    /// Only alerts of this template (1 to 16 hex digits); default (absent or empty): every template.
    #[param(pattern = "^([0-9a-fA-F]{1,16})?$")]
    pub template_id: Option<String>,
    /// How long the silence runs from now, in seconds (above 0).
    #[param(minimum = 1)]
    pub duration_secs: u64,
    /// Why the alerts are held back (not only white space).
    #[param(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u0020\\u007F-\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    pub comment: String,
}

/// What to ask of `store::silences::add`, from the parameters (each problem names its parameter).
pub fn new_silence(p: AddParams, by: &str) -> Result<NewSilence, ApiError> {
    let service =
        params::text("service", Some(p.service))?.ok_or_else(|| ApiError::bad("service", "must not be empty"))?;
    // An empty kind or template (an unselected form field) is no filter.
    let kind = match params::text("kind", p.kind)?.filter(|k| !k.is_empty()) {
        Some(k) => k
            .parse::<AlertKind>()
            .map_err(|_| {
                ApiError::bad("kind", "must be one of new_template, spike, silence, new_shape, shape_slowdown")
            })?
            .as_str()
            .to_string(),
        None => String::new(),
    };
    let template_id = match params::text("template_id", p.template_id)?.filter(|t| !t.is_empty()) {
        Some(t) => params::hex_id("template_id", &t)?,
        None => 0,
    };
    if p.duration_secs == 0 {
        return Err(ApiError::bad("duration_secs", "must be above 0"));
    }
    let comment = params::text("comment", Some(p.comment))?
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| ApiError::bad("comment", "must say why the alerts are held back"))?;
    Ok(NewSilence {
        service,
        kind,
        template_id,
        duration_ns: p.duration_secs.saturating_mul(crate::time::SECOND_NS),
        comment,
        by: by.to_string(),
    })
}

/// A refusal as its status (400, 404, 409), a store failure as the store's.
impl From<SilenceError> for ApiError {
    fn from(e: SilenceError) -> ApiError {
        match e {
            SilenceError::NoService => ApiError::bad("service", "must not be empty"),
            SilenceError::NoDuration => ApiError::bad("duration_secs", "must be above 0"),
            SilenceError::NoComment => ApiError::bad("comment", "must say why the alerts are held back"),
            SilenceError::NotFound(_) => ApiError::Missing(e.to_string()),
            SilenceError::Ended { .. } => ApiError::Conflict(e.to_string()),
            SilenceError::Store(e) => ApiError::from(e),
        }
    }
}

#[utoipa::path(post, path = "/api/v1/silences", tag = "silences", params(AddParams),
    responses(
        (status = 200, body = Silence, description = "Added: the notifier holds matching alerts back within 5 s"),
        (status = 400, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn add(State(state): State<AppState>, Query(p): Query<AddParams>) -> Result<Json<Silence>, ApiError> {
    let new = new_silence(p, API_OPERATOR)?;
    let now = state.now();
    let row = state.run(silences::add(&state.store, &new, now)).await?;
    Ok(Json(Silence::from_row(row, now)))
}

#[utoipa::path(post, path = "/api/v1/silences/{silence_id}/expire", tag = "silences",
    params(("silence_id" = String, Path, description = "1 to 16 hex digits", pattern = "^[0-9a-fA-F]{1,16}$")),
    responses(
        (status = 200, body = Silence, description = "Ended now: matching alerts are delivered again from their next update"),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such silence"),
        (status = 409, body = ErrorBody, description = "The silence already ended"),
        (status = 503, body = ErrorBody)))]
pub async fn expire(State(state): State<AppState>, Path(silence_id): Path<String>) -> Result<Json<Silence>, ApiError> {
    let id = params::hex_id("silence_id", &silence_id)?;
    let now = state.now();
    let row = state.run(silences::expire(&state.store, id, API_OPERATOR, now)).await?;
    Ok(Json(Silence::from_row(row, now)))
}
