//! What the logminer reports: one method per event, each logging and counting together
//! (docs/metrics.md lists the metrics). The Pipeline page takes the largest replica's data
//! lag, template count and up, and sums the rest (docs/design.md#replica-metrics).

use std::fmt::Display;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::bus::consume::{ConsumerMetrics, Group};
use crate::store::AlertRow;

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
    pub logs_mined: Counter,
    pub templates_absorbed: Counter,
    pub templates: Gauge,
    pub services: Gauge,
    pub evicted_templates: Counter,
    pub evicted_services: Counter,
    pub owned_services: Gauge,
    pub up: Gauge,
    pub data_lag_seconds: Gauge,
    pub alerts: Family<KindLabel, Counter>,
    pub alerts_resolved: Family<KindLabel, Counter>,
    pub alerts_republished: Counter,
    pub publish_failures: Counter,
    pub store_failures: Counter,
    pub pass_duration: Family<PassLabel, Histogram, fn() -> Histogram>,
    pub held_back_shapes: Gauge,
    pub pending_hits: Gauge,
    pub paused: Gauge,
    pub pauses: Counter,
}

impl LogminerMetrics {
    pub fn new(registry: &mut Registry) -> LogminerMetrics {
        let m = LogminerMetrics {
            consumer: ConsumerMetrics::register(registry, Group::Logminer),
            logs_mined: Counter::default(),
            templates_absorbed: Counter::default(),
            templates: Gauge::default(),
            services: Gauge::default(),
            evicted_templates: Counter::default(),
            evicted_services: Counter::default(),
            owned_services: Gauge::default(),
            up: Gauge::default(),
            data_lag_seconds: Gauge::default(),
            alerts: Family::default(),
            alerts_resolved: Family::default(),
            alerts_republished: Counter::default(),
            publish_failures: Counter::default(),
            store_failures: Counter::default(),
            pass_duration: Family::new_with_constructor(pass_histogram),
            held_back_shapes: Gauge::default(),
            pending_hits: Gauge::default(),
            paused: Gauge::default(),
            pauses: Counter::default(),
        };
        m.up.set(1);
        let r = registry.sub_registry_with_prefix("tayga_logminer");
        r.register("mined_logs", "Log lines mined into templates", m.logs_mined.clone());
        r.register("templates", "Templates held in memory (all services)", m.templates.clone());
        r.register(
            "absorbed_templates",
            "Templates a sibling merge retired into a surviving template",
            m.templates_absorbed.clone(),
        );
        r.register("services", "Services with templates in memory (at most drain.max_services)", m.services.clone());
        r.register(
            "evicted_templates",
            "Templates forgotten from memory at drain.max_clusters, least recently used first (stored rows stay)",
            m.evicted_templates.clone(),
        );
        r.register(
            "evicted_services",
            "Services whose templates were forgotten from memory at drain.max_services, least recently mined first",
            m.evicted_services.clone(),
        );
        r.register("owned_services", "Services this replica owns", m.owned_services.clone());
        r.register("up", "1 while the logminer runs", m.up.clone());
        r.register(
            "data_lag_seconds",
            "Seconds between ingest of the newest mined record and now",
            m.data_lag_seconds.clone(),
        );
        r.register("raised_alerts", "Alerts raised, by kind (a refresh does not count)", m.alerts.clone());
        r.register(
            "resolved_alerts",
            "Alerts judged inactive and published as resolved, by kind",
            m.alerts_resolved.clone(),
        );
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
        r.register(
            "held_back_shapes",
            "New shapes with evidence the last shape pass held back by the hourly limit per endpoint",
            m.held_back_shapes.clone(),
        );
        r.register(
            "pending_hits",
            "Hits mined and not stored yet (at most logminer.max_pending_hits)",
            m.pending_hits.clone(),
        );
        r.register(
            "paused",
            "1 while reading pauses because logminer.max_pending_hits hits wait to be stored",
            m.paused.clone(),
        );
        r.register(
            "pauses",
            "Times reading paused because logminer.max_pending_hits hits waited to be stored",
            m.pauses.clone(),
        );
        m
    }

    /// How many mined hits wait to be stored now.
    pub fn pending(&self, hits: usize) {
        self.pending_hits.set(hits as i64);
    }

    /// Reading pauses: `pending` hits reached `logminer.max_pending_hits` (`bound`); the
    /// records wait in the topic until a flush stores the hits.
    pub fn reading_paused(&self, pending: usize, bound: u64) {
        self.pauses.inc();
        self.paused.set(1);
        tracing::warn!(pending_hits = pending, max_pending_hits = bound,
            "reading paused: {pending} hits wait to be stored (logminer.max_pending_hits); records wait in the topic until a flush stores them");
    }

    /// Reading resumes `paused_for` after it paused: a flush stored the hits (or a
    /// reassignment left them to the partitions' next owner).
    pub fn reading_resumed(&self, pending: usize, paused_for: Duration) {
        self.paused.set(0);
        tracing::info!(
            pending_hits = pending,
            paused_ms = paused_for.as_millis() as u64,
            "reading resumed: the pending hits are under logminer.max_pending_hits again"
        );
    }

    /// The shape pass held back this many new shapes (rate limit), over every endpoint.
    pub fn shapes_held_back(&self, held_back: usize) {
        self.held_back_shapes.set(held_back as i64);
    }

    pub fn mined(&self) {
        self.logs_mined.inc();
    }

    /// A sibling merge: `survivor` took over the lines of `absorbed` other templates.
    pub fn merged(&self, service: &str, survivor: u64, absorbed: usize) {
        self.templates_absorbed.inc_by(absorbed as u64);
        tracing::info!(service = %service, survivor = %crate::wire::alert::format_id(survivor), absorbed,
            "templates merged: the survivor keeps its id, the absorbed ones are retired");
    }

    /// An alert this process had not raised before (a refresh is not counted).
    pub fn alert_raised(&self, row: &AlertRow) {
        self.alerts.get_or_create(&KindLabel { kind: row.kind.clone() }).inc();
        tracing::info!(alert_id = %crate::wire::alert::format_id(row.alert_id), kind = %row.kind, service = %row.service,
            template = %row.template, "alert raised");
    }

    /// An alert judged inactive: its resolved version is stored and about to be published.
    pub fn alert_resolved(&self, row: &AlertRow) {
        self.alerts_resolved.get_or_create(&KindLabel { kind: row.kind.clone() }).inc();
        tracing::info!(alert_id = %crate::wire::alert::format_id(row.alert_id), kind = %row.kind, service = %row.service,
            "alert resolved");
    }

    /// Stored alerts could not all be published; they stay unmarked for republication.
    pub fn publish_failed(&self, error: &dyn Display, published: usize, unpublished: usize) {
        self.publish_failures.inc();
        tracing::warn!(error = %error, published, unpublished,
            "publishing alerts failed; they are republished after a later pass");
    }

    /// Unmarked alerts were republished; `stopped` is the failed send that ended it, with
    /// how many are left for the next pass.
    pub fn republished(&self, published: usize, stopped: Option<(&dyn Display, usize)>) {
        self.alerts_republished.inc_by(published as u64);
        match stopped {
            None => tracing::info!(republished = published, "unpublished alerts republished"),
            Some((error, left)) => {
                self.publish_failures.inc();
                tracing::warn!(error = %error, republished = published, left,
                    "republishing stopped at a failed send; the next pass goes on");
            }
        }
    }

    /// A write to ClickHouse (`what`) failed; what it carried is kept and written again.
    pub fn store_failed(&self, what: &str, error: &dyn Display) {
        self.store_failures.inc();
        tracing::warn!(error = %error, "{what} failed; retrying");
    }

    /// What mining a line made room for: a template of its service evicted at
    /// `drain.max_clusters`, another service's templates (how many) at `drain.max_services`.
    pub fn made_room(&self, service: &str, evicted_template: bool, evicted_service: Option<usize>) {
        if evicted_template {
            self.evicted_templates.inc();
        }
        if let Some(templates) = evicted_service {
            self.evicted_services.inc();
            tracing::debug!(service = %service, templates,
                "a service's templates were forgotten to make room (logminer.drain.max_services)");
        }
    }

    pub fn pass_finished(&self, pass: &str, took: Duration) {
        self.pass_duration.get_or_create(&PassLabel { pass: pass.into() }).observe(took.as_secs_f64());
    }

    /// What this replica holds now, and how far behind ingest its newest mined record is.
    pub fn holds(&self, templates: usize, services: usize, owned_services: usize, data_lag: Option<Duration>) {
        self.templates.set(templates as i64);
        self.services.set(services as i64);
        self.owned_services.set(owned_services as i64);
        if let Some(behind) = data_lag {
            self.data_lag_seconds.set(behind.as_secs() as i64);
        }
    }
}
