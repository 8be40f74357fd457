//! The logminer's Prometheus metrics (docs/logminer.md lists them). The Pipeline page
//! takes the largest replica's data lag, template count and up, and sums the rest
//! (seed 000, "Metrics with several replicas").

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

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
    pub records: Counter,
    pub invalid_records: Counter,
    pub logs_mined: Counter,
    pub templates: Gauge,
    pub owned_services: Gauge,
    pub assigned_partitions: Gauge,
    pub up: Gauge,
    pub lag: Gauge,
    pub data_lag_seconds: Gauge,
    pub alerts: Family<KindLabel, Counter>,
    pub alerts_republished: Counter,
    pub publish_failures: Counter,
    pub store_failures: Counter,
    pub pass_duration: Family<PassLabel, Histogram, fn() -> Histogram>,
}

impl LogminerMetrics {
    pub fn new(registry: &mut Registry) -> LogminerMetrics {
        let m = LogminerMetrics {
            records: Counter::default(),
            invalid_records: Counter::default(),
            logs_mined: Counter::default(),
            templates: Gauge::default(),
            owned_services: Gauge::default(),
            assigned_partitions: Gauge::default(),
            up: Gauge::default(),
            lag: Gauge::default(),
            data_lag_seconds: Gauge::default(),
            alerts: Family::default(),
            alerts_republished: Counter::default(),
            publish_failures: Counter::default(),
            store_failures: Counter::default(),
            pass_duration: Family::new_with_constructor(pass_histogram),
        };
        m.up.set(1);
        let r = registry;
        r.register("tayga_logminer_records_consumed", "Records read from the logs topic", m.records.clone());
        r.register(
            "tayga_logminer_invalid_records",
            "Records that could not be decoded; skipped",
            m.invalid_records.clone(),
        );
        r.register("tayga_logminer_logs_mined", "Log lines mined into templates", m.logs_mined.clone());
        r.register("tayga_logminer_templates", "Templates held in memory (all services)", m.templates.clone());
        r.register("tayga_logminer_owned_services", "Services this replica owns", m.owned_services.clone());
        r.register(
            "tayga_logminer_assigned_partitions",
            "Partitions of the logs topic assigned",
            m.assigned_partitions.clone(),
        );
        r.register("tayga_logminer_up", "1 while the logminer runs", m.up.clone());
        r.register(
            "tayga_logminer_lag",
            "Records of the assigned partitions not yet mined and committed",
            m.lag.clone(),
        );
        r.register(
            "tayga_logminer_data_lag_seconds",
            "Seconds between ingest of the newest mined record and now",
            m.data_lag_seconds.clone(),
        );
        r.register("tayga_logminer_alerts", "Alerts raised, by kind (a refresh does not count)", m.alerts.clone());
        r.register(
            "tayga_logminer_alerts_republished",
            "Unmarked alerts republished after a detection pass",
            m.alerts_republished.clone(),
        );
        r.register("tayga_logminer_publish_failures", "Alert publications that failed", m.publish_failures.clone());
        r.register(
            "tayga_logminer_store_failures",
            "Failed writes of hits, templates, alerts or state (retried)",
            m.store_failures.clone(),
        );
        r.register(
            "tayga_logminer_pass_duration_seconds",
            "Duration of new-template and detection passes",
            m.pass_duration.clone(),
        );
        m
    }
}
