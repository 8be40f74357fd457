//! What the packed producer reports (docs/metrics.md): one method per event, counting and,
//! where an operator needs the line, logging together.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabel {
    /// `connection` (the answer never came) or `broker` (the broker asked for it).
    pub reason: &'static str,
}

#[derive(Clone, Default)]
pub struct ProducerMetrics {
    requests: Counter,
    batches: Counter,
    retries: Family<RetryLabel, Counter>,
    sessions: Counter,
}

impl ProducerMetrics {
    /// Registers under `prefix` (`tayga_ingest`: ingest is the producer's one user).
    pub fn register(registry: &mut Registry, prefix: &str) -> ProducerMetrics {
        let metrics = ProducerMetrics::default();
        let r = registry.sub_registry_with_prefix(prefix);
        r.register("produce_requests", "Produce requests sent to brokers", metrics.requests.clone());
        r.register(
            "produce_batches",
            "Partition record batches sent (several per produce request)",
            metrics.batches.clone(),
        );
        r.register("produce_retries", "Record batches sent again, by reason", metrics.retries.clone());
        r.register("producer_sessions", "Idempotent producer sessions started", metrics.sessions.clone());
        metrics
    }

    pub fn sent(&self, batches: usize) {
        self.requests.inc();
        self.batches.inc_by(batches as u64);
    }

    pub fn will_retry(&self, reason: &'static str, batches: usize) {
        self.retries.get_or_create(&RetryLabel { reason }).inc_by(batches as u64);
    }

    pub fn session_started(&self, producer_id: i64, first: bool) {
        self.sessions.inc();
        if !first {
            tracing::info!(producer_id, "ingest's producer started a new idempotent session");
        }
    }
}
