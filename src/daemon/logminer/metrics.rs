//! What the logminer reports: one method per event, each logging and counting together
//! (docs/metrics.md lists the metrics). The Pipeline page takes the largest replica's data
//! lag, template count and up, and sums the rest (seed 000, "Metrics with several
//! replicas").

use std::fmt::Display;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::bus::consume::{ConsumerMetrics, Group};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassLabel {
    /// `detection`, `revoke` or `shutdown`.
    pub pass: String,
}

fn pass_histogram() -> Histogram {
    Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0])
}

#[derive(Clone)]
pub struct LogminerMetrics {
    pub consumer: ConsumerMetrics,
    /// The consumer's counters under the names the consumer loop uses (the same metrics).
    pub records: Counter,
    pub invalid_records: Counter,
    pub assigned_partitions: Gauge,
    pub lag: Gauge,
    pub logs_mined: Counter,
    pub templates: Gauge,
    pub owned_services: Gauge,
    pub up: Gauge,
    pub data_lag_seconds: Gauge,
    pub alerts: Family<KindLabel, Counter>,
    pub alerts_republished: Counter,
    pub publish_failures: Counter,
    pub store_failures: Counter,
    pub pass_duration: Family<PassLabel, Histogram, fn() -> Histogram>,
}

impl LogminerMetrics {
    pub fn new(registry: &mut Registry) -> LogminerMetrics {
        let consumer = ConsumerMetrics::register(registry, Group::Logminer);
        let m = LogminerMetrics {
            records: consumer.consumed.clone(),
            invalid_records: consumer.undecodable.clone(),
            assigned_partitions: consumer.assigned_partitions.clone(),
            lag: consumer.lag.clone(),
            consumer,
            logs_mined: Counter::default(),
            templates: Gauge::default(),
            owned_services: Gauge::default(),
            up: Gauge::default(),
            data_lag_seconds: Gauge::default(),
            alerts: Family::default(),
            alerts_republished: Counter::default(),
            publish_failures: Counter::default(),
            store_failures: Counter::default(),
            pass_duration: Family::new_with_constructor(pass_histogram),
        };
        m.up.set(1);
        let r = registry.sub_registry_with_prefix("tayga_logminer");
        r.register("mined_logs", "Log lines mined into templates", m.logs_mined.clone());
        r.register("templates", "Templates held in memory (all services)", m.templates.clone());
        r.register("owned_services", "Services this replica owns", m.owned_services.clone());
        r.register("up", "1 while the logminer runs", m.up.clone());
        r.register(
            "data_lag_seconds",
            "Seconds between ingest of the newest mined record and now",
            m.data_lag_seconds.clone(),
        );
        r.register("raised_alerts", "Alerts raised, by kind (a refresh does not count)", m.alerts.clone());
        r.register(
            "republished_alerts",
            "Unmarked alerts republished after a detection pass",
            m.alerts_republished.clone(),
        );
        r.register("publish_errors", "Alert publications that failed", m.publish_failures.clone());
        r.register(
            "store_errors",
            "Failed writes of hits, templates, alerts or state (retried)",
            m.store_failures.clone(),
        );
        r.register("pass_duration_seconds", "Duration of new-template and detection passes", m.pass_duration.clone());
        m
    }

    pub fn mined(&self) {
        self.logs_mined.inc();
    }

    pub fn alert_raised(&self, kind: &str) {
        self.alerts.get_or_create(&KindLabel { kind: kind.to_string() }).inc();
    }

    pub fn republished(&self, alerts: usize) {
        self.alerts_republished.inc_by(alerts as u64);
    }

    /// A write to ClickHouse failed; what it carried is kept and written again.
    pub fn store_failed(&self, what: &str, error: &dyn Display) {
        self.store_failures.inc();
        tracing::warn!(error = %error, what, "storing failed; retrying");
    }

    /// An alert could not be published; it stays unmarked, so republication sends it.
    pub fn publish_failed(&self, error: &dyn Display) {
        self.publish_failures.inc();
        tracing::warn!(error = %error, "publishing an alert failed; it stays unmarked and is republished");
    }

    pub fn pass_finished(&self, pass: &str, took: Duration) {
        self.pass_duration.get_or_create(&PassLabel { pass: pass.into() }).observe(took.as_secs_f64());
    }

    /// What this replica holds now.
    pub fn holds(&self, templates: usize, owned_services: usize, assigned_partitions: usize) {
        self.templates.set(templates as i64);
        self.owned_services.set(owned_services as i64);
        self.assigned_partitions.set(assigned_partitions as i64);
    }

    pub fn data_lag(&self, behind: Duration) {
        self.data_lag_seconds.set(behind.as_secs() as i64);
    }
}
