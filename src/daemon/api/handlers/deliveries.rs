//! `GET /api/v1/deliveries`: the latest state of every `(alert, target)` pair
//! (docs/design.md#notifier-states) created in a window.
//! `POST /api/v1/deliveries/{alert_id}/retry`: the operator's manual retry of a failed
//! delivery, through `workflow::retry::retry`, the function `tayga deliveries retry` calls.

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{AppState, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS};
use crate::model::flattened_schema;
use crate::store::deliveries::Status;
use crate::store::query::deliveries::{self, DeliverySearch};
use crate::store::DeliveryRow;
use crate::wire::alert::{format_id, AlertState};
use crate::workflow::retry::{self, RetryError, RetryRequest};

/// Pairs created in the 7 days before `to`, over at most 31 days.
pub const WINDOW: params::WindowRule = params::WindowRule { default_ns: 7 * DAY_NS, max_ns: 31 * DAY_NS };

/// One `(alert, target)` pair as the API answers it: the state it delivers, then the
/// `notifier_deliveries` row itself ([`DeliveryRow`], whose JSON form writes the ids as the
/// API does), flattened into one JSON object.
#[derive(Debug, Serialize)]
pub struct Delivery {
    pub state: AlertState,
    #[serde(flatten)]
    pub row: DeliveryRow,
}

impl Delivery {
    pub fn new(state: AlertState, row: DeliveryRow) -> Delivery {
        Delivery { state, row }
    }
}

/// The schema the derive would give `Delivery` were it not flattened (a derive would state
/// it as `allOf` of the row and the state): the row's object with `state`, a string, second
/// among the required, where it was while the type had fields of its own, so the OpenAPI
/// document stayed the same.
impl utoipa::PartialSchema for Delivery {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        #[derive(ToSchema)]
        #[allow(dead_code)]
        struct State {
            /// `firing`, or `resolved` for a resolved notice (docs/notifier.md, "Resolved notices").
            state: String,
        }
        let head = <State as utoipa::PartialSchema>::schema();
        let delivery = flattened_schema(head, <DeliveryRow as utoipa::PartialSchema>::schema(), 1);
        utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(delivery))
    }
}

impl ToSchema for Delivery {}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesParams {
    /// `firing` (the alerts' deliveries, the default) or `resolved` (their resolved notices').
    #[param(pattern = "^(firing|resolved)$")]
    pub state: Option<String>,
    /// Only this alert's pairs (1 to 16 hex digits).
    #[param(pattern = "^[0-9a-fA-F]{1,16}$")]
    pub alert_id: Option<String>,
    pub target: Option<String>,
    /// `pending`, `delivered`, `failed` or `silenced` (the latest state).
    #[param(pattern = "^(pending|delivered|failed|silenced)$")]
    pub status: Option<String>,
    /// Window on the pair's creation, Unix ns (default: the 7 days before `to`; at most 31 days).
    pub from: Option<u64>,
    pub to: Option<u64>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/deliveries", tag = "deliveries", params(DeliveriesParams),
    responses((status = 200, body = Page<Delivery>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    Query(p): Query<DeliveriesParams>,
) -> Result<Json<Page<Delivery>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let limit = params::limit(p.limit)?;
    let alert_id = match params::text("alert_id", p.alert_id)? {
        Some(id) => Some(params::hex_id("alert_id", &id)?),
        None => None,
    };
    let status = match params::text("status", p.status)? {
        Some(s) => match Status::parse(&s) {
            Some(st) => Some(st.as_str().to_string()),
            None => return Err(ApiError::bad("status", "must be one of pending, delivered, failed, silenced")),
        },
        None => None,
    };
    let delivery_state = match params::text("state", p.state)?.as_deref() {
        None | Some("firing") => AlertState::Firing,
        Some("resolved") => AlertState::Resolved,
        Some(_) => return Err(ApiError::bad("state", "must be firing or resolved")),
    };
    let after = params::cursor::<(u64, String)>(p.cursor)?;
    let q =
        DeliverySearch { state: delivery_state, alert_id, target: params::text("target", p.target)?, status, after };
    let rows = state.run(deliveries::deliveries(&state.store, window, &q, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&(r.alert_id, r.target.clone())));
    let items: Vec<Delivery> = rows.into_iter().map(|r| Delivery::new(delivery_state, r)).collect();
    Ok(Json(Page::of(items, limit, cursor)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RetryParams {
    /// Only this target (default: every failed target of the alert).
    pub target: Option<String>,
    /// `true`: check and answer what would be retried; change nothing.
    pub dry_run: Option<bool>,
}

/// What a manual retry did (or, with `dry_run`, would do).
#[derive(Debug, Serialize, ToSchema)]
pub struct RetryAnswer {
    pub alert_id: String,
    /// The topic the alert was republished to.
    pub topic: String,
    pub dry_run: bool,
    /// The reset rows: `pending`, attempts 0, the retry recorded.
    pub retried: Vec<Delivery>,
    /// The alert's other targets, left as they are.
    pub untouched: Vec<Delivery>,
}

/// Who the API records as having asked: it knows no users, only the token.
const API_OPERATOR: &str = "api";

#[utoipa::path(post, path = "/api/v1/deliveries/{alert_id}/retry", tag = "deliveries",
    params(("alert_id" = String, Path, description = "1 to 16 hex digits", pattern = "^[0-9a-fA-F]{1,16}$"), RetryParams),
    responses(
        (status = 200, body = RetryAnswer, description = "Reset to pending and republished: the notifier delivers it once more"),
        (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "A viewer's token or session: a retry needs an operator's"),
        (status = 404, body = ErrorBody, description = "No delivery rows for the alert, no row for the target, or no stored alert"),
        (status = 409, body = ErrorBody, description = "The delivery is not failed (delivered or pending)"),
        (status = 503, body = ErrorBody, description = "ClickHouse or the broker is unavailable")))]
pub async fn retry(
    State(state): State<AppState>,
    Path(alert_id): Path<String>,
    Query(p): Query<RetryParams>,
) -> Result<Json<RetryAnswer>, ApiError> {
    let alert_id = params::hex_id("alert_id", &alert_id)?;
    let target = params::text("target", p.target)?;
    let Some(topic) = state.alerts_topic.as_deref() else {
        return Err(ApiError::BrokerUnavailable("this API was started without the alerts topic".into()));
    };
    let request = RetryRequest {
        alert_id,
        target: target.as_deref(),
        dry_run: p.dry_run.unwrap_or(false),
        by: API_OPERATOR,
        now_ns: state.now(),
    };
    // Not bounded by the query timeout: cancelling between the row write and the
    // publication would leave a pending row no record drives. Each step has its own bound.
    let done = retry::retry(&state.store, topic, &request).await.map_err(|e| match e {
        RetryError::UnknownAlert { .. } | RetryError::UnknownTarget { .. } | RetryError::AlertMissing { .. } => {
            ApiError::Missing(e.to_string())
        }
        RetryError::NotFailed { .. } => ApiError::Conflict(e.to_string()),
        RetryError::Store(e) => ApiError::from(e),
        RetryError::Encode { .. } => ApiError::Internal(e.to_string()),
        RetryError::NoTopic { .. }
        | RetryError::Broker(_)
        | RetryError::Publish { .. }
        | RetryError::PublishUnrestored { .. } => ApiError::BrokerUnavailable(e.to_string()),
    })?;
    Ok(Json(RetryAnswer {
        alert_id: format_id(done.alert_id),
        topic: done.topic,
        dry_run: done.dry_run,
        retried: done.retried.into_iter().map(|r| Delivery::new(AlertState::Firing, r)).collect(),
        untouched: done.untouched.into_iter().map(|r| Delivery::new(AlertState::Firing, r)).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(silence_id: u64) -> Delivery {
        Delivery::new(
            AlertState::Resolved,
            DeliveryRow {
                alert_id: 0x00c0_ffee_00c0_ffee,
                target: "ops".into(),
                status: "silenced".into(),
                attempts: 2,
                last_error: "HTTP 503".into(),
                created_ns: 10,
                updated_ns: 11,
                manual_retries: 1,
                retried_ns: 12,
                retried_by: "api".into(),
                silence_id,
            },
        )
    }

    /// The fields and values the API wrote while the type had fields of its own: both ids
    /// as 16 hex digits, no silence as `""`. Only the text's order moved: `state` comes
    /// first, as the flattened row leaves no place between its fields (a JSON object's
    /// members have no order a reader may rely on).
    #[test]
    fn the_json_is_what_the_api_always_wrote() {
        let text = serde_json::to_string(&delivery(0xab)).unwrap();
        let whole = concat!(
            r#"{"state":"resolved","alert_id":"00c0ffee00c0ffee","target":"ops","status":"silenced","attempts":2,"#,
            r#""last_error":"HTTP 503","created_ns":10,"updated_ns":11,"manual_retries":1,"retried_ns":12,"#,
            r#""retried_by":"api","silence_id":"00000000000000ab"}"#
        );
        assert_eq!(text, whole);
        let none = serde_json::to_value(delivery(0)).unwrap();
        assert_eq!(none["silence_id"], "");
    }

    /// The API's schema states the document as it is: every field, all required.
    #[test]
    fn the_schema_is_the_document() {
        use std::collections::BTreeSet;
        use utoipa::openapi::{schema::Schema, RefOr};
        let RefOr::T(Schema::Object(schema)) = <Delivery as utoipa::PartialSchema>::schema() else {
            panic!("Delivery's schema is an object");
        };
        let json = serde_json::to_value(delivery(0)).unwrap();
        let fields: BTreeSet<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(schema.properties.keys().collect::<BTreeSet<_>>(), fields);
        assert_eq!(schema.required.iter().collect::<BTreeSet<_>>(), fields);
        assert_eq!(schema.required[..2], ["alert_id", "state"]);
    }
}
