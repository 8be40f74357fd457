//! The web app `tayga serve api` serves at `/` (docs/web.md): pages rendered on the server
//! with maud from the same handler functions the JSON API answers with (no HTTP to itself,
//! no SQL of its own), SVG charts drawn here, and one stylesheet and one small script
//! embedded in the binary. Pages work without the script; it only converts times to the
//! browser's zone, refreshes live pages and shows chart values on hover.
//!
//! `layout.rs` is the shell and the shared pieces, `format.rs` and `charts.rs` are pure, and
//! each area has its file: `overview`, `alerts`, `templates`, `stories` (shapes, a shape's
//! traces, a trace), `shapes` (the diff of two shapes), `pipeline`, `deliveries`, `silences`; `login` signs a browser in when the API has a token.

pub mod charts;
pub mod format;
pub mod layout;
pub mod range;

mod alerts;
mod deliveries;
pub mod login;
mod logs;
mod overview;
mod pipeline;
mod shapes;
mod silences;
mod stories;
mod templates;
mod traces;

use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::handlers::AppState;
use layout::PageError;

/// The app's routes, with their state.
pub fn routes(state: AppState) -> Router {
    Router::new()
        .route("/", get(overview::page))
        .route("/alerts", get(alerts::list))
        .route("/alerts/{alert_id}", get(alerts::detail))
        .route("/templates", get(templates::list))
        .route("/templates/{service}/{template_id}", get(templates::detail))
        .route("/stories", get(stories::shapes))
        .route("/stories/{fingerprint}", get(stories::shape))
        .route("/shapes/{a}/diff/{b}", get(shapes::diff))
        .route("/logs", get(logs::page))
        .route("/logs/context", get(logs::context))
        .route("/traces", get(traces::page))
        .route("/traces/{trace_id}", get(stories::trace))
        .route("/pipeline", get(pipeline::page))
        .route("/deliveries", get(deliveries::page))
        .route("/deliveries/{alert_id}/retry", post(deliveries::retry))
        .route("/silences", get(silences::page).post(silences::add))
        .route("/silences/{silence_id}/expire", post(silences::expire))
        .route("/assets/style.css", get(|| async { asset("text/css; charset=utf-8", layout::STYLE) }))
        .route("/assets/app.js", get(|| async { asset("text/javascript; charset=utf-8", layout::SCRIPT) }))
        .with_state(state)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "public, max-age=300")], body).into_response()
}

/// What a path outside every route gets: the API's JSON 404 under `/api/`, a page elsewhere.
pub async fn not_found(uri: Uri) -> Response {
    if uri.path().starts_with("/api/") {
        ApiError::not_found("route").into_response()
    } else {
        let mut page = PageError(ApiError::not_found(format!("the page {}", uri.path()))).into_response();
        *page.status_mut() = StatusCode::NOT_FOUND;
        page
    }
}

/// A page's query string read into `T` (unknown names refused, the faulty one named).
fn query<T: DeserializeOwned>(uri: &Uri) -> Result<T, PageError> {
    Ok(super::params::parse_query(uri.query().unwrap_or(""))?)
}

/// A form field: an empty value (an unselected filter) is no value.
fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}
