//! `GET /api/v1/deliveries`: the latest state of every `(alert, target)` pair (seed 003)
//! created in a window.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{AppState, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS};
use crate::store::deliveries::Status;
use crate::store::query::deliveries::{self, DeliverySearch};
use crate::store::DeliveryRow;
use crate::wire::alert::format_id;

#[derive(Debug, Serialize, ToSchema)]
pub struct Delivery {
    pub alert_id: String,
    pub target: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    pub attempts: u32,
    pub last_error: String,
    pub created_ns: u64,
    pub updated_ns: u64,
}

impl Delivery {
    pub fn from_row(r: DeliveryRow) -> Delivery {
        Delivery {
            alert_id: format_id(r.alert_id),
            target: r.target,
            status: r.status,
            attempts: r.attempts,
            last_error: r.last_error,
            created_ns: r.created_ns,
            updated_ns: r.updated_ns,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesParams {
    pub alert_id: Option<String>,
    pub target: Option<String>,
    /// `pending`, `delivered` or `failed` (the latest state).
    pub status: Option<String>,
    /// Window on the pair's creation, Unix ns (default: the 7 days before `to`; at most 31 days).
    pub from: Option<u64>,
    pub to: Option<u64>,
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/deliveries", tag = "deliveries", params(DeliveriesParams),
    responses((status = 200, body = Page<Delivery>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    Query(p): Query<DeliveriesParams>,
) -> Result<Json<Page<Delivery>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), 7 * DAY_NS, 31 * DAY_NS)?;
    let limit = params::limit(p.limit)?;
    let alert_id = match params::text("alert_id", p.alert_id)? {
        Some(id) => Some(params::hex_id("alert_id", &id)?),
        None => None,
    };
    let status = match params::text("status", p.status)? {
        Some(s) => match Status::parse(&s) {
            Some(st) => Some(st.as_str().to_string()),
            None => return Err(ApiError::bad("status", "must be one of pending, delivered, failed")),
        },
        None => None,
    };
    let after = params::cursor::<(u64, String)>(p.cursor)?;
    let q = DeliverySearch { alert_id, target: params::text("target", p.target)?, status, after };
    let rows = state.run(deliveries::deliveries(&state.store, window, &q, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&(r.alert_id, r.target.clone())));
    let items: Vec<Delivery> = rows.into_iter().map(Delivery::from_row).collect();
    Ok(Json(Page::of(items, limit, cursor)))
}
