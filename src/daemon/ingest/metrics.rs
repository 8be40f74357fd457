//! Ingest's metrics, registered once and shared by the HTTP and gRPC front ends.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub type Labels = Vec<(&'static str, String)>;

#[derive(Clone)]
pub struct IngestMetrics {
    /// Requests by signal, transport and outcome (ok, partial, bad_request, unavailable).
    pub requests: Family<Labels, Counter>,
    /// Spans or logs stored or published, by signal.
    pub accepted: Family<Labels, Counter>,
    /// Spans or logs refused, by signal and reason.
    pub rejected: Family<Labels, Counter>,
    /// Request body bytes as received, by signal.
    pub bytes: Family<Labels, Counter>,
    /// Records acknowledged by the broker, by topic.
    pub records: Family<Labels, Counter>,
    /// Requests carried by each path.
    pub path_requests: Family<Labels, Counter>,
    /// Failures that marked a path down.
    pub path_failures: Family<Labels, Counter>,
    /// 1 when a path is up (its breaker closed), 0 when it is skipped.
    pub path_up: Family<Labels, Gauge>,
    /// Time from a decoded request to its acknowledgement, by signal.
    pub latency: Family<Labels, Histogram>,
}

impl IngestMetrics {
    pub fn register(registry: &mut Registry) -> IngestMetrics {
        let metrics = IngestMetrics {
            requests: Family::default(),
            accepted: Family::default(),
            rejected: Family::default(),
            bytes: Family::default(),
            records: Family::default(),
            path_requests: Family::default(),
            path_failures: Family::default(),
            path_up: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.0005, 2.0, 16))),
        };
        let r = registry.sub_registry_with_prefix("tayga_ingest");
        r.register("requests", "OTLP export requests by signal, transport and outcome", metrics.requests.clone());
        r.register("items_accepted", "Spans and logs acknowledged to clients", metrics.accepted.clone());
        r.register("items_rejected", "Spans and logs refused, by reason", metrics.rejected.clone());
        r.register("received_bytes", "Request body bytes received", metrics.bytes.clone());
        r.register("records_published", "Records acknowledged by the broker, by topic", metrics.records.clone());
        r.register("path_requests", "Requests carried by each ingest path", metrics.path_requests.clone());
        r.register("path_failures", "Failures that marked an ingest path down", metrics.path_failures.clone());
        r.register("path_up", "Whether an ingest path is in use (1) or skipped (0)", metrics.path_up.clone());
        r.register("request_duration_seconds", "Time to store or publish a request", metrics.latency.clone());
        metrics
    }
}

pub fn labels<const N: usize>(pairs: [(&'static str, &str); N]) -> Labels {
    pairs.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}
