//! The metric recorder (docs/design.md#replica-metrics): every
//! `api.scrape_interval_secs` it scrapes the `/metrics` of ingest, writer, assembler and
//! notifier, resolves `api.logminer_metrics` (and any other `api.*_metrics` name set) and
//! scrapes every address it names, and stores
//! every sample with its labels in `pipeline_metrics`, one INSERT per tick. Each sample's
//! `instance` is the scraped `ip:port`; every scrape also records `up` (1, or 0 when it
//! failed, or when the logminer's name did not resolve at all). The recorder keeps no
//! per-metric knowledge: how series combine is `rules.rs`, applied when they are read.
//!
//! It keeps no state across ticks; a tick holds at most [`MAX_SCRAPE_BYTES`] of text and
//! `api.max_samples_per_scrape` samples per instance scraped (the samples past it are
//! dropped, in the order the instance exposed them, and counted).

pub mod exposition;
pub mod resolve;
pub mod rules;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::config::Config;
use crate::daemon::Shutdown;
use crate::store::{query::pipeline, MetricSampleRow, Store};
use resolve::Resolver;

/// The name of the sample recorded for every scrape.
pub const UP: &str = "up";

/// What is scraped: a service at a fixed address, or at every address a name resolves to.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Fixed { service: String, addr: String },
    Resolved { service: String, host_port: String },
}

/// The scrape set of a configuration: each service at its `api.<service>_metrics` name,
/// resolved on every tick, or at its own listen address when that is empty.
pub fn targets(config: &Config) -> Vec<Target> {
    let api = &config.api;
    let target = |service: &str, name: &str, own: &str| {
        if name.is_empty() {
            Target::Fixed { service: service.into(), addr: own.into() }
        } else {
            Target::Resolved { service: service.into(), host_port: name.into() }
        }
    };
    // Ingest's own metrics listener when it has one (plain HTTP, also when its receivers
    // speak TLS), else its OTLP/HTTP port.
    let ingest_own =
        if config.ingest.metrics_addr.is_empty() { &config.ingest.http_addr } else { &config.ingest.metrics_addr };
    vec![
        target("ingest", &api.ingest_metrics, ingest_own),
        target("writer", &api.writer_metrics, &config.writer.metrics_addr),
        target("assembler", &api.assembler_metrics, &config.assembler.metrics_addr),
        target("notifier", &api.notifier_metrics, &config.notifier.metrics_addr),
        target("logminer", &api.logminer_metrics, &config.logminer.metrics_addr),
    ]
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ServiceLabel {
    service: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ScrapeLabels {
    service: String,
    outcome: String,
}

/// The recorder's own metrics, on the api's `/metrics`.
#[derive(Clone, Default)]
pub struct RecorderMetrics {
    scrapes: Family<ScrapeLabels, Counter>,
    samples: Counter,
    dropped: Family<ServiceLabel, Counter>,
    store_failures: Counter,
}

impl RecorderMetrics {
    pub fn register(registry: &mut Registry) -> RecorderMetrics {
        let m = RecorderMetrics::default();
        registry.register("tayga_api_scrapes", "Scrapes by service and outcome (ok, failed)", m.scrapes.clone());
        registry.register("tayga_api_recorded_samples", "Samples stored in pipeline_metrics", m.samples.clone());
        registry.register(
            "tayga_api_dropped_samples",
            "Samples of a scrape past api.max_samples_per_scrape, not stored, by service",
            m.dropped.clone(),
        );
        registry.register(
            "tayga_api_record_errors",
            "Ticks whose samples could not be stored",
            m.store_failures.clone(),
        );
        m
    }
}

pub struct Recorder {
    store: Store,
    targets: Vec<Target>,
    resolver: Arc<dyn Resolver>,
    http: reqwest::Client,
    scrape_timeout: Duration,
    max_samples: usize,
    metrics: RecorderMetrics,
}

/// Most bytes of one scrape's text: a longer answer is a failed scrape (`up` 0).
pub const MAX_SCRAPE_BYTES: usize = 16 << 20;

/// One scrape's bound: a replica that does not answer costs at most this.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

impl Recorder {
    pub fn new(store: Store, targets: Vec<Target>, resolver: Arc<dyn Resolver>, metrics: RecorderMetrics) -> Recorder {
        Recorder {
            store,
            targets,
            resolver,
            http: reqwest::Client::new(),
            scrape_timeout: SCRAPE_TIMEOUT,
            max_samples: usize::MAX,
            metrics,
        }
        .with_scrape_timeout(SCRAPE_TIMEOUT)
    }

    /// Stores at most `max` samples of each scrape (`api.max_samples_per_scrape`).
    pub fn with_max_samples(mut self, max: usize) -> Recorder {
        self.max_samples = max.max(1);
        self
    }

    /// Bounds each resolution and each scrape at `limit` instead of [`SCRAPE_TIMEOUT`].
    pub fn with_scrape_timeout(mut self, limit: Duration) -> Recorder {
        self.http = reqwest::Client::builder().timeout(limit).build().expect("a plain HTTP client builds");
        self.scrape_timeout = limit;
        self
    }

    /// Ticks every `interval` until shutdown.
    pub async fn run(self, interval: Duration, shutdown: Shutdown) {
        loop {
            let rows = self.scrape_all(crate::store::now_ns()).await;
            if let Err(e) = self.store_rows(&rows).await {
                tracing::warn!(error = %e, samples = rows.len(), "storing scraped metrics failed; this tick is lost");
            }
            if !shutdown.sleep(interval).await {
                return;
            }
        }
    }

    pub async fn store_rows(&self, rows: &[MetricSampleRow]) -> Result<(), crate::store::StoreError> {
        match pipeline::record(&self.store, rows).await {
            Ok(()) => {
                self.metrics.samples.inc_by(rows.len() as u64);
                Ok(())
            }
            Err(e) => {
                self.metrics.store_failures.inc();
                Err(e)
            }
        }
    }

    /// One tick: every target scraped at once, the rows of every sample (and `up`), all
    /// stamped `ts_ns`.
    pub async fn scrape_all(&self, ts_ns: u64) -> Vec<MetricSampleRow> {
        let mut instances: Vec<(String, String, Option<SocketAddr>)> = Vec::new();
        for target in &self.targets {
            match target {
                Target::Fixed { service, addr } => instances.push((service.clone(), addr.clone(), addr.parse().ok())),
                // A resolver that hangs (a DNS server that does not answer) costs one scrape's bound.
                Target::Resolved { service, host_port } => {
                    match tokio::time::timeout(self.scrape_timeout, self.resolver.resolve(host_port)).await {
                        Ok(Ok(addrs)) if !addrs.is_empty() => {
                            instances.extend(addrs.into_iter().map(|a| (service.clone(), a.to_string(), Some(a))))
                        }
                        _ => {
                            tracing::debug!(%service, %host_port, "the metrics name did not resolve");
                            instances.push((service.clone(), host_port.clone(), None));
                        }
                    }
                }
            }
        }
        let scrapes = instances.into_iter().map(|(service, instance, addr)| async move {
            let text = match addr {
                Some(addr) => self.scrape(addr).await,
                None => None,
            };
            let outcome = if text.is_some() { "ok" } else { "failed" };
            self.metrics
                .scrapes
                .get_or_create(&ScrapeLabels { service: service.clone(), outcome: outcome.into() })
                .inc();
            let (rows, dropped) = samples_to_rows(ts_ns, &service, &instance, text.as_deref(), self.max_samples);
            if dropped > 0 {
                self.metrics.dropped.get_or_create(&ServiceLabel { service: service.clone() }).inc_by(dropped as u64);
                tracing::debug!(%service, %instance, dropped, "a scrape exposed more samples than api.max_samples_per_scrape");
            }
            rows
        });
        futures_util::future::join_all(scrapes).await.into_iter().flatten().collect()
    }

    async fn scrape(&self, addr: SocketAddr) -> Option<String> {
        let mut response = self.http.get(format!("http://{addr}/metrics")).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.ok()? {
            if body.len() + chunk.len() > MAX_SCRAPE_BYTES {
                return None;
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).ok()
    }
}

/// The rows of one scrape: `up` and, when it answered, the first `max` samples it exposed
/// (finite values only), with how many more were dropped.
pub fn samples_to_rows(
    ts_ns: u64,
    service: &str,
    instance: &str,
    text: Option<&str>,
    max: usize,
) -> (Vec<MetricSampleRow>, usize) {
    let row = |metric: &str, labels: &[(String, String)], value: f64| MetricSampleRow {
        ts_ns,
        service: service.to_string(),
        instance: instance.to_string(),
        metric: metric.to_string(),
        label_keys: labels.iter().map(|(k, _)| k.clone()).collect(),
        label_values: labels.iter().map(|(_, v)| v.clone()).collect(),
        value,
    };
    let mut rows = vec![row(UP, &[], if text.is_some() { 1.0 } else { 0.0 })];
    let mut dropped = 0;
    if let Some(text) = text {
        let (samples, _bad) = exposition::parse(text);
        let finite: Vec<_> = samples.iter().filter(|s| s.value.is_finite()).collect();
        dropped = finite.len().saturating_sub(max);
        rows.extend(finite.iter().take(max).map(|s| row(&s.name, &s.labels, s.value)));
    }
    (rows, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_is_scraped_at_its_own_address_unless_a_name_is_set() {
        let mut config = Config::default();
        config.api.writer_metrics = "writer:9401".into();
        let t = targets(&config);
        assert_eq!(t[0], Target::Fixed { service: "ingest".into(), addr: config.ingest.http_addr.clone() });
        assert_eq!(t[1], Target::Resolved { service: "writer".into(), host_port: "writer:9401".into() });
        assert_eq!(
            t[4],
            Target::Resolved { service: "logminer".into(), host_port: config.api.logminer_metrics.clone() }
        );
        // Ingest with a metrics listener of its own (its receivers may speak TLS) is scraped there.
        config.ingest.metrics_addr = "127.0.0.1:9409".into();
        assert_eq!(targets(&config)[0], Target::Fixed { service: "ingest".into(), addr: "127.0.0.1:9409".into() });
    }

    /// A resolver that never answers.
    struct Hanging;

    impl Resolver for Hanging {
        fn resolve(&self, _: &str) -> resolve::Resolved {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn a_name_that_never_resolves_is_up_zero_after_the_scrape_bound() {
        let store = Store::new(&crate::config::ClickHouseConfig::default());
        let targets = vec![Target::Resolved { service: "logminer".into(), host_port: "lm:9403".into() }];
        let recorder = Recorder::new(store, targets, Arc::new(Hanging), RecorderMetrics::default())
            .with_scrape_timeout(Duration::from_millis(50));
        let rows = tokio::time::timeout(Duration::from_secs(10), recorder.scrape_all(1)).await.expect("the tick ends");
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].instance.as_str(), rows[0].metric.as_str(), rows[0].value), ("lm:9403", UP, 0.0));
    }

    #[test]
    fn a_failed_scrape_is_up_zero_and_nothing_else() {
        let (rows, dropped) = samples_to_rows(7, "logminer", "127.0.0.2:9403", None, 10);
        assert_eq!((rows.len(), dropped), (1, 0));
        assert_eq!((rows[0].metric.as_str(), rows[0].value, rows[0].instance.as_str()), (UP, 0.0, "127.0.0.2:9403"));
    }

    #[test]
    fn a_scrape_past_the_sample_bound_keeps_the_first_samples_and_counts_the_rest() {
        let text: String = (0..25).map(|i| format!("series_{i} {i}\nbad_{i} NaN\n")).collect();
        let (rows, dropped) = samples_to_rows(7, "writer", "127.0.0.1:9401", Some(&text), 10);
        assert_eq!((rows.len(), dropped), (11, 15), "up and the first ten finite samples");
        assert_eq!(rows[10].metric, "series_9");
    }

    #[test]
    fn every_sample_keeps_its_labels_and_instance() {
        let (rows, _) =
            samples_to_rows(7, "writer", "127.0.0.1:9401", Some("a_total{table=\"spans\"} 3\nb 1\nc NaN\n"), 10);
        assert_eq!(rows.len(), 3, "up, a and b; NaN is not stored");
        assert_eq!(rows[1].label_keys, vec!["table"]);
        assert_eq!(rows[1].label_values, vec!["spans"]);
        assert!(rows.iter().all(|r| r.instance == "127.0.0.1:9401" && r.ts_ns == 7));
    }
}
