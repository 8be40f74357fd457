//! `GET /api/v1/alerts` (filtered by kind, service and active/inactive) and
//! `GET /api/v1/alerts/{alert_id}` (its values, sample lines, publication marks and
//! deliveries). Both read through the functions `tayga alerts list` and `tayga deliveries
//! show` use, and judge "active" by the same rule (`store::logminer::active_cutoff_ns`).

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::deliveries::Delivery;
use super::{AppState, Log, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query};
use crate::store::deliveries::history;
use crate::store::logminer::{active_cutoff_ns, alerts, published_versions, AlertQuery};
use crate::store::query::alerts::{publications, sample_lines, SAMPLE_LOOKBACK_NS};
use crate::store::silences::{self, matching_row};
use crate::store::{AlertRow, SilenceRow};
use crate::wire::alert::{format_id, AlertKind, ShapeChange};

/// Sample lines shown with one alert.
pub const SAMPLE_LINES: u64 = 20;

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// `last_at` within the last 5 minutes: still refreshed by the logminer.
    Active,
    Inactive,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AlertsParams {
    /// `new_template`, `spike`, `silence`, `new_shape` or `shape_slowdown`.
    #[param(pattern = "^(new_template|spike|silence|new_shape|shape_slowdown)$")]
    pub kind: Option<String>,
    pub service: Option<String>,
    /// `active` or `inactive`.
    #[param(inline)]
    pub state: Option<AlertState>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Alert {
    pub alert_id: String,
    pub kind: String,
    pub service: String,
    pub template_id: String,
    pub template: String,
    pub first_at: u64,
    pub last_at: u64,
    /// The minute count that raised it (spike), or lines seen (new template).
    pub count: u64,
    pub baseline: f64,
    pub threshold: f64,
    pub stored_ns: u64,
    /// The version of the alert shown (its latest update).
    pub updated_ns: u64,
    /// Whether `last_at` is within the last 5 minutes. A spike or silence stops being
    /// refreshed once its service is quiet for 60 minutes, or after a restart or a
    /// hand-over until its service logs again; it is then inactive.
    pub active: bool,
    /// This version reached the alerts topic (it has a publication mark).
    pub published: bool,
    /// When the logminer resolved it (Unix ns; docs/alerts.md): 0 while it is not resolved.
    pub resolved_at: u64,
    /// The running operator's silence that holds its deliveries back now (16 hex digits);
    /// empty when none matches it.
    pub silenced_by: String,
    /// Shape alerts (`new_shape`, `shape_slowdown`): what the shape changed, as in the
    /// alert record's `shape` object (docs/alerts.md, "Shape alerts").
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub shape: Option<ShapeChange>,
}

/// What [`Alert::from_row`] judges a row by, read once per request.
struct Judged<'a> {
    cutoff_ns: u64,
    now_ns: u64,
    silences: &'a [SilenceRow],
}

impl Alert {
    fn from_row(r: &AlertRow, judged: &Judged<'_>, published: bool) -> Alert {
        let silenced_by = matching_row(judged.silences, r, judged.now_ns).map(|s| format_id(s.silence_id));
        Alert {
            alert_id: format_id(r.alert_id),
            kind: r.kind.clone(),
            service: r.service.clone(),
            template_id: format_id(r.template_id),
            template: r.template.clone(),
            first_at: r.first_at,
            last_at: r.last_at,
            count: r.count,
            baseline: r.baseline,
            threshold: r.threshold,
            stored_ns: r.stored_ns,
            updated_ns: r.updated_ns,
            active: r.last_at >= judged.cutoff_ns,
            published,
            resolved_at: r.resolved_at,
            silenced_by: silenced_by.unwrap_or_default(),
            shape: ShapeChange::from_column(&r.shape),
        }
    }
}

#[utoipa::path(get, path = "/api/v1/alerts", tag = "alerts", params(AlertsParams),
    responses((status = 200, body = Page<Alert>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, Query(p): Query<AlertsParams>) -> Result<Json<Page<Alert>>, ApiError> {
    let limit = params::limit(p.limit)?;
    let kind = match params::text("kind", p.kind)? {
        Some(k) => Some(k.parse::<AlertKind>().map_err(|_| {
            let kinds: Vec<&str> = AlertKind::ALL.iter().map(|k| k.as_str()).collect();
            ApiError::bad("kind", format!("must be one of {}", kinds.join(", ")))
        })?),
        None => None,
    };
    let after = params::cursor::<(u64, u64)>(p.cursor)?;
    let now = state.now();
    let cutoff = active_cutoff_ns(now);
    let query = AlertQuery {
        service: params::text("service", p.service)?,
        kind,
        last_at_since_ns: matches!(p.state, Some(AlertState::Active)).then_some(cutoff),
        last_at_before_ns: matches!(p.state, Some(AlertState::Inactive)).then_some(cutoff),
        after,
        limit: Some(limit),
        ..Default::default()
    };
    let rows = state.run(alerts(&state.store, &query)).await?;
    let (marks, silences) = tokio::try_join!(
        state.run(published_versions(&state.store, &rows)),
        state.run(silences::list(&state.store, now))
    )?;
    let judged = Judged { cutoff_ns: cutoff, now_ns: now, silences: &silences };
    let cursor = rows.last().map(|r| params::next_cursor(&(r.last_at, r.alert_id)));
    let items: Vec<Alert> =
        rows.iter().map(|r| Alert::from_row(r, &judged, marks.contains(&(r.alert_id, r.updated_ns)))).collect();
    Ok(Json(Page::of(items, limit, cursor)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Publication {
    /// The alert version (`updated_ns`) that was published.
    pub alert_updated_ns: u64,
    pub published_ns: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AlertDetail {
    #[serde(flatten)]
    pub alert: Alert,
    /// Every publication mark, oldest version first.
    pub publications: Vec<Publication>,
    /// Up to 20 of the template's lines in the alert's window (for a silence: its last
    /// lines before it went quiet), newest first.
    pub sample_lines: Vec<Log>,
    pub deliveries: Vec<Delivery>,
}

#[utoipa::path(get, path = "/api/v1/alerts/{alert_id}", tag = "alerts",
    params(("alert_id" = String, Path, description = "1 to 16 hex digits", pattern = "^[0-9a-fA-F]{1,16}$")),
    responses((status = 200, body = AlertDetail), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn by_id(State(state): State<AppState>, Path(alert_id): Path<String>) -> Result<Json<AlertDetail>, ApiError> {
    let id = params::hex_id("alert_id", &alert_id)?;
    let rows = state
        .run(alerts(&state.store, &AlertQuery { alert_id: Some(id), limit: Some(1), ..Default::default() }))
        .await?;
    let Some(row) = rows.into_iter().next() else {
        return Err(ApiError::not_found(format!("alert {}", format_id(id))));
    };
    let from = row.first_at.saturating_sub(SAMPLE_LOOKBACK_NS);
    let now = state.now();
    let (marks, lines, deliveries, silences) = tokio::try_join!(
        state.run(publications(&state.store, id)),
        state.run(sample_lines(&state.store, &row.service, row.template_id, from, row.last_at, SAMPLE_LINES)),
        state.run(history(&state.store, id)),
        state.run(silences::list(&state.store, now)),
    )?;
    let published = marks.iter().any(|m| m.alert_updated_ns == row.updated_ns);
    let judged = Judged { cutoff_ns: active_cutoff_ns(now), now_ns: now, silences: &silences };
    Ok(Json(AlertDetail {
        alert: Alert::from_row(&row, &judged, published),
        publications: marks
            .iter()
            .map(|m| Publication { alert_updated_ns: m.alert_updated_ns, published_ns: m.published_ns })
            .collect(),
        sample_lines: lines.iter().map(|l| Log::from_row(l, Some(row.template_id))).collect(),
        deliveries: deliveries.into_iter().map(|(s, row)| Delivery::in_state(s, row)).collect(),
    }))
}
