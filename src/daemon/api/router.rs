//! The routes of `tayga serve api`: `/api/v1/…` (collected with their OpenAPI description
//! from the handlers' own annotations), `/api/v1/openapi.json`, `/health` and `/metrics`,
//! and the web app at `/` (`web/`), behind the access rules (`access.rs`: roles, sessions,
//! CSRF) and with the security headers on every answer.

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Json, Router};
use prometheus_client::registry::Registry;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::access::{self, Access, Roles};
use super::handlers::{self, AppState};
use super::metrics::RequestMetrics;

#[derive(OpenApi)]
#[openapi(
    info(title = "Tayga API", description = "Everything Tayga stores: services, traces, stories, logs, templates, alerts, deliveries, silences and the pipeline's own metrics. Times are Unix nanoseconds; 64-bit ids are 16 hex digits."),
    tags(
        (name = "services"), (name = "traces"), (name = "stories"), (name = "logs"),
        (name = "templates"), (name = "alerts"), (name = "deliveries"), (name = "silences"), (name = "pipeline"),
    )
)]
struct ApiDoc;

/// The API's routes and its OpenAPI document.
pub fn api_routes(state: AppState) -> (Router, utoipa::openapi::OpenApi) {
    let (router, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(handlers::services::list))
        .routes(routes!(handlers::traces::search))
        .routes(routes!(handlers::traces::scatter))
        .routes(routes!(handlers::traces::by_id))
        .routes(routes!(handlers::stories::by_trace))
        .routes(routes!(handlers::stories::shapes))
        .routes(routes!(handlers::stories::shape_stories))
        .routes(routes!(handlers::shapes::diff))
        .routes(routes!(handlers::logs::list))
        .routes(routes!(handlers::logs::counts))
        .routes(routes!(handlers::logs::context))
        .routes(routes!(handlers::templates::list))
        .routes(routes!(handlers::alerts::list))
        .routes(routes!(handlers::alerts::by_id))
        .routes(routes!(handlers::deliveries::list))
        .routes(routes!(handlers::deliveries::retry))
        .routes(routes!(handlers::silences::list, handlers::silences::add))
        .routes(routes!(handlers::silences::expire))
        .routes(routes!(handlers::pipeline::series))
        .with_state(state)
        .split_for_parts();
    (router.layer(middleware::map_response(json_errors)), openapi)
}

/// axum's own extractors refuse in plain text (a path segment that is not UTF-8 once
/// percent-decoded); every API error is the JSON body the document states, so such a 400
/// becomes one.
async fn json_errors(response: Response) -> Response {
    let plain = response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
    if response.status() != StatusCode::BAD_REQUEST || !plain {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024).await.unwrap_or_default();
    super::params::rejected(&String::from_utf8_lossy(&body)).into_response()
}

/// The OpenAPI document alone, as `/api/v1/openapi.json` serves it with no token required
/// (the store is never reached: building the routes only describes them).
pub fn openapi() -> serde_json::Value {
    let store = crate::store::Store::new(&crate::config::ClickHouseConfig::default());
    let state = AppState {
        store,
        query_timeout: std::time::Duration::from_secs(1),
        now_ns: crate::store::now_ns,
        alerts_topic: None,
    };
    super::contract::state(api_routes(state).1, false)
}

/// Every route the daemon serves, with one operator token (`api.token`; empty: open).
pub fn router(
    state: AppState,
    registry: Arc<Registry>,
    metrics: RequestMetrics,
    health: crate::daemon::HealthFn,
    token: &str,
) -> Router {
    secured(state, registry, metrics, health, Access::new(Roles::operator(token), false))
}

/// Every route the daemon serves, each request counted and timed in `metrics`, behind the
/// access rules (`access.rs`: roles, sessions, CSRF) and with the security headers on
/// every answer.
pub fn secured(
    state: AppState,
    registry: Arc<Registry>,
    metrics: RequestMetrics,
    health: crate::daemon::HealthFn,
    access: Arc<Access>,
) -> Router {
    let (api, openapi) = api_routes(state.clone());
    let openapi = Arc::new(super::contract::state(openapi, access.roles().required()));
    let mut app = Router::new()
        .merge(api)
        .merge(super::web::routes(state))
        .route("/api/v1/openapi.json", get(move || async move { Json(openapi.as_ref().clone()) }))
        .merge(crate::daemon::admin_router(registry, health))
        .fallback(super::web::not_found)
        // A route layer, so the matched route pattern is known when the request is counted.
        .route_layer(middleware::from_fn_with_state(metrics, super::metrics::track));
    if access.roles().required() {
        app = app.merge(super::web::login::routes(access.clone()));
    }
    app.layer(middleware::from_fn_with_state(access, access::guard))
        .layer(middleware::from_fn(access::security_headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_describes_every_route_with_its_parameters_and_errors() {
        let doc = serde_json::to_value(openapi()).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        assert_eq!(paths.len(), 19, "{:?}", paths.keys().collect::<Vec<_>>());
        let logs = &doc["paths"]["/api/v1/logs"]["get"];
        let names: Vec<&str> =
            logs["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["service", "template_id", "q", "from", "to", "limit", "cursor"]);
        for (path, item) in paths {
            let operation = item.get("get").or_else(|| item.get("post")).unwrap_or_else(|| panic!("{path}"));
            let responses = &operation["responses"];
            assert!(responses.get("200").is_some() && responses.get("400").is_some(), "{path}");
            assert!(responses.get("503").is_some(), "{path} does not document 503");
        }
        let retry = &doc["paths"]["/api/v1/deliveries/{alert_id}/retry"]["post"];
        for status in ["200", "403", "404", "409"] {
            assert!(retry["responses"].get(status).is_some(), "the retry does not document {status}");
        }
        let add = &doc["paths"]["/api/v1/silences"]["post"];
        let add_params: Vec<&str> =
            add["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(add_params, ["service", "kind", "template_id", "duration_secs", "comment"]);
        let expire = &doc["paths"]["/api/v1/silences/{silence_id}/expire"]["post"];
        for status in ["200", "400", "404", "409", "503"] {
            assert!(
                add["responses"].get(status).is_some() || matches!(status, "404" | "409"),
                "the add does not document {status}"
            );
            assert!(expire["responses"].get(status).is_some(), "the expiry does not document {status}");
        }
        let trace = &doc["components"]["schemas"]["Trace"];
        assert!(trace["properties"]["spans"].is_object(), "{trace}");
    }
}
