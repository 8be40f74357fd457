//! The API's own metrics on its `/metrics`: requests by route and status, and their
//! latency by route (what the benchmark measures, live). The recorder's counters are
//! registered beside them (`recorder::RecorderMetrics`).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The route pattern (`/api/v1/traces/{trace_id}`), never the raw path: ids would make
    /// one series per request.
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: String,
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

#[derive(Clone)]
pub struct RequestMetrics {
    requests: Family<RequestLabels, Counter>,
    seconds: Family<RouteLabel, Histogram, fn() -> Histogram>,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics {
            requests: Family::default(),
            seconds: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
        }
    }
}

impl RequestMetrics {
    pub fn register(registry: &mut Registry) -> RequestMetrics {
        let m = RequestMetrics::default();
        registry.register("tayga_api_requests", "API requests by route and status", m.requests.clone());
        registry.register("tayga_api_request_duration_seconds", "API request latency by route", m.seconds.clone());
        m
    }
}

/// Middleware: counts and times every request.
pub async fn track(State(metrics): State<RequestMetrics>, request: Request, next: Next) -> Response {
    let route =
        request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "other".into());
    let started = Instant::now();
    let response = next.run(request).await;
    metrics.seconds.get_or_create(&RouteLabel { route: route.clone() }).observe(started.elapsed().as_secs_f64());
    metrics.requests.get_or_create(&RequestLabels { route, status: response.status().as_u16() }).inc();
    response
}
