//! What the notifier reports: one method per event, each logging and counting together
//! (docs/metrics.md lists the metrics).

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::bus::consume::{ConsumerMetrics, Group};
use crate::store::DeliveryRow;

/// The `result` label of `tayga_notifier_deliveries_total`: how a record ended for a target.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum DeliveryResult {
    /// A 2xx was received.
    delivered,
    /// Permanent error, max_attempts reached, or one failed attempt while the breaker was open.
    failed,
    /// The pair already had a delivered or failed row: nothing was sent.
    duplicate,
    /// `last_at` older than `max_age_secs` when read (for a manual retry: the later of
    /// `last_at` and the retry): nothing was sent.
    stale,
    /// The target's `kinds` do not include the alert's kind.
    skipped,
    /// An operator's silence matched the alert: nothing was sent, the pair is `silenced`.
    silenced,
    /// A resolved notice for a target the firing alert was not delivered to (silenced,
    /// failed, or filtered then): nothing was sent.
    unannounced,
}

/// The `outcome` label of `tayga_notifier_attempts_total`.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum AttemptLabel {
    success,
    retryable,
    permanent,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetResult {
    pub target: String,
    pub result: DeliveryResult,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetAttempt {
    pub target: String,
    pub outcome: AttemptLabel,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabel {
    pub target: String,
}

type HistogramFamily = Family<TargetLabel, Histogram, fn() -> Histogram>;

#[derive(Clone)]
pub struct NotifierMetrics {
    pub consumer: ConsumerMetrics,
    pub deliveries: Family<TargetResult, Counter>,
    pub attempts: Family<TargetAttempt, Counter>,
    pub retries: Family<TargetLabel, Counter>,
    pub manual_retries: Family<TargetLabel, Counter>,
    pub breaker_open: Family<TargetLabel, Gauge>,
    pub delivery_seconds: HistogramFamily,
    pub inflight: Gauge,
}

fn latency_histogram() -> Histogram {
    // 10 ms to about 45 minutes: a delivery may wait out the whole ladder.
    Histogram::new(exponential_buckets(0.01, 2.5, 14))
}

impl NotifierMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn new(registry: &mut Registry) -> NotifierMetrics {
        let m = NotifierMetrics {
            consumer: ConsumerMetrics::register(registry, Group::Notifier),
            deliveries: Family::default(),
            attempts: Family::default(),
            retries: Family::default(),
            manual_retries: Family::default(),
            breaker_open: Family::default(),
            delivery_seconds: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            inflight: Gauge::default(),
        };
        let r = registry.sub_registry_with_prefix("tayga_notifier");
        r.register(
            "deliveries",
            "How each record ended for each target: delivered, failed, duplicate, stale, skipped, silenced, unannounced",
            m.deliveries.clone(),
        );
        r.register("attempts", "HTTP attempts by target and outcome", m.attempts.clone());
        r.register("retries", "Attempts scheduled after a retryable failure", m.retries.clone());
        r.register(
            "manual_retries",
            "Pairs an operator reset to pending (tayga deliveries retry) that the notifier took up",
            m.manual_retries.clone(),
        );
        r.register("breaker_open", "1 while the target's circuit breaker is open, else 0", m.breaker_open.clone());
        r.register(
            "inflight_deliveries",
            "Deliveries in memory now: at most one per target (one record at a time)",
            m.inflight.clone(),
        );
        r.register(
            "delivery_duration_seconds",
            "From reading a record to its target's final outcome (delivered or failed), retries included",
            m.delivery_seconds.clone(),
        );
        m
    }

    pub fn result(&self, target: &str, result: DeliveryResult) {
        self.deliveries.get_or_create(&TargetResult { target: target.to_string(), result }).inc();
    }

    pub fn attempt(&self, target: &str, outcome: AttemptLabel) {
        self.attempts.get_or_create(&TargetAttempt { target: target.to_string(), outcome }).inc();
    }

    /// A retryable attempt failed; the next one is made after `wait`.
    pub fn retrying(&self, alert_id: &str, row: &DeliveryRow, wait: Duration) {
        self.retries.get_or_create(&TargetLabel { target: row.target.clone() }).inc();
        tracing::info!(
            alert_id, target = %row.target, attempts = row.attempts, error = %row.last_error,
            wait_ms = wait.as_millis() as u64, "attempt failed; retrying"
        );
    }

    /// The pair already had a delivered or failed row: nothing is sent.
    pub fn duplicate(&self, alert_id: &str, target: &str, status: &str) {
        self.result(target, DeliveryResult::duplicate);
        tracing::debug!(alert_id, target, status, "already handled; nothing sent");
    }

    /// An operator's silence held the pair back: nothing is sent.
    pub fn silenced(&self, alert_id: &str, target: &str, silence_id: &str) {
        self.result(target, DeliveryResult::silenced);
        tracing::info!(alert_id, target, silence_id, "silenced; nothing sent");
    }

    /// A resolved notice not sent: the target never heard of the alert firing.
    pub fn unannounced(&self, alert_id: &str, target: &str, firing_status: &str) {
        self.result(target, DeliveryResult::unannounced);
        tracing::debug!(alert_id, target, firing_status, "resolved, but never delivered while firing; nothing sent");
    }

    /// A pair an operator reset to pending is delivered once more (its outcome follows).
    pub fn manual_retry(&self, alert_id: &str, target: &str) {
        self.manual_retries.get_or_create(&TargetLabel { target: target.to_string() }).inc();
        tracing::info!(alert_id, target, "manual retry: delivering once more");
    }

    /// A manual retry read too late (`max_age_secs`): not sent, the pair failed again.
    pub fn manual_retry_expired(&self, alert_id: &str, row: &DeliveryRow, latency: Duration) {
        self.manual_retries.get_or_create(&TargetLabel { target: row.target.clone() }).inc();
        self.result(&row.target, DeliveryResult::stale);
        self.observe_delivery(&row.target, latency.as_secs_f64());
        tracing::warn!(alert_id, target = %row.target, error = %row.last_error, "manual retry expired; the delivery is failed again");
    }

    /// The pair ended delivered or failed, `latency` after its record was read.
    pub fn delivery_finished(&self, alert_id: &str, row: &DeliveryRow, result: DeliveryResult, latency: Duration) {
        self.result(&row.target, result);
        self.observe_delivery(&row.target, latency.as_secs_f64());
        tracing::info!(
            alert_id, target = %row.target, status = %row.status, attempts = row.attempts,
            last_error = %row.last_error, "delivery finished"
        );
    }

    pub fn set_breaker(&self, target: &str, open: bool) {
        self.breaker_open.get_or_create(&TargetLabel { target: target.to_string() }).set(i64::from(open));
    }

    pub fn observe_delivery(&self, target: &str, seconds: f64) {
        self.delivery_seconds.get_or_create(&TargetLabel { target: target.to_string() }).observe(seconds);
    }

    /// The current count of `result` for `target` (tests, `/health`).
    pub fn result_count(&self, target: &str, result: DeliveryResult) -> u64 {
        self.deliveries.get_or_create(&TargetResult { target: target.to_string(), result }).get()
    }
}
