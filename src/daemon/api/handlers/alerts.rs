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
use crate::store::silences::{self, matching};
use crate::store::{AlertRow, SilenceRow};
use crate::wire::alert::{self as wire, format_id, AlertKind};

/// Sample lines shown with one alert.
pub const SAMPLE_LINES: u64 = 20;

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
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
    pub state: Option<Activity>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

/// An alert as the API shows it: the document the alerts topic and webhooks carry
/// (docs/alerts.md), and beside it what only the store and the clock tell.
#[derive(Debug, Serialize, ToSchema)]
pub struct Alert {
    #[serde(flatten)]
    pub record: wire::Alert,
    pub stored_ns: u64,
    /// The version of the alert shown (its latest update).
    pub updated_ns: u64,
    /// Whether `last_at` is within the last 5 minutes. A spike or silence stops being
    /// refreshed once its service is quiet for 60 minutes, or after a restart or a
    /// hand-over until its service logs again; it is then inactive.
    pub active: bool,
    /// This version reached the alerts topic (it has a publication mark).
    pub published: bool,
    /// The running operator's silence that holds its deliveries back now (16 hex digits);
    /// empty when none matches it.
    pub silenced_by: String,
}

/// What [`Alert::judged`] judges a row by, read once per request.
struct Judged<'a> {
    cutoff_ns: u64,
    now_ns: u64,
    silences: &'a [SilenceRow],
}

impl Alert {
    /// The stored alert `r` with its judgement; an error for a kind this build does not
    /// know (a row a newer Tayga wrote).
    fn judged(r: &AlertRow, judged: &Judged<'_>, published: bool) -> Result<Alert, ApiError> {
        let record = wire::Alert::from_row(r)
            .map_err(|e| ApiError::Internal(format!("alert {}: {e}", format_id(r.alert_id))))?;
        let silenced_by = matching(judged.silences, &record, judged.now_ns).map(|s| format_id(s.silence_id));
        Ok(Alert {
            stored_ns: r.stored_ns,
            updated_ns: r.updated_ns,
            active: r.last_at >= judged.cutoff_ns,
            published,
            silenced_by: silenced_by.unwrap_or_default(),
            record,
        })
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
        last_at_since_ns: matches!(p.state, Some(Activity::Active)).then_some(cutoff),
        last_at_before_ns: matches!(p.state, Some(Activity::Inactive)).then_some(cutoff),
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
    let items = rows
        .iter()
        .map(|r| Alert::judged(r, &judged, marks.contains(&(r.alert_id, r.updated_ns))))
        .collect::<Result<Vec<Alert>, ApiError>>()?;
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
        alert: Alert::judged(&row, &judged, published)?,
        publications: marks
            .iter()
            .map(|m| Publication { alert_updated_ns: m.alert_updated_ns, published_ns: m.published_ns })
            .collect(),
        sample_lines: lines.iter().map(|l| Log::from_row(l, Some(row.template_id))).collect(),
        deliveries: deliveries.into_iter().map(|(s, row)| Delivery::new(s, row)).collect(),
    }))
}
