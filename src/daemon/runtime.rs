//! The one start-up and stop every consuming daemon goes through: `/health` and `/metrics`
//! first (so a daemon waiting for its servers is visible), then the topics and the schema,
//! then the daemon's consumer until it returns; the server stops with it, however it ends.
//!
//! `/health` is honest about the dependencies the runtime knows: while the daemon is still
//! preparing (waiting for the broker or ClickHouse) it says `starting`, and while the broker
//! does not accept connections (or ClickHouse does not answer) it says `degraded`, each with
//! its reason, whatever the daemon's own document says. Ingest and the API, which do not
//! consume, use the same pieces ([`Known`], [`honest_health`], [`probe_broker`],
//! [`probe_clickhouse`]), so every `/health` follows one rule.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use serde_json::{json, Value};

use super::{prepare, serve_http, HealthFn, Shutdown};
use crate::bus::consume::Group;
use crate::config::{Config, KafkaConfig};
use crate::store::Store;

/// What a daemon brings to [`run`].
pub struct Spec {
    /// The group it consumes in (and so its service name).
    pub group: Group,
    /// Where `/health` and `/metrics` are served (`<service>.metrics_addr`).
    pub metrics_addr: String,
    /// Its metrics, registered under `tayga_<service>_` (docs/metrics.md).
    pub registry: Registry,
    pub health: HealthFn,
}

/// How often `/health`'s view of the broker is refreshed, and how long one look may take.
const BROKER_PROBE_EVERY: Duration = Duration::from_secs(5);
const BROKER_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the runtime knows of a daemon's dependencies, for `/health`.
#[derive(Default)]
pub struct Known {
    ready: AtomicBool,
    broker_down: AtomicBool,
    /// What [`probe_clickhouse`] saw ([`ANSWERS`], [`SILENT`]); 0 for daemons whose own
    /// document says.
    clickhouse: AtomicU8,
}

const ANSWERS: u8 = 1;
const SILENT: u8 = 2;

impl Known {
    /// The daemon finished starting: `/health` stops saying `starting`.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }
}

/// Runs a consuming daemon until `shutdown`: serves `/health` and `/metrics`, creates the
/// topics and the schema if missing (waiting for the broker and ClickHouse at start), then
/// runs `consume` with the store. When `consume` returns, on success or error, shutdown is
/// triggered so every task of the daemon (the server first) ends too.
pub async fn run<F, Fut>(config: &Config, shutdown: Shutdown, spec: Spec, consume: F) -> anyhow::Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let service = spec.group.service();
    let known = Arc::new(Known::default());
    let health = honest_health(spec.health, known.clone(), config.kafka.brokers.clone());
    let (local, http) = serve_http(&spec.metrics_addr, Arc::new(spec.registry), health, shutdown.clone()).await?;
    let probe = tokio::spawn(probe_broker(config.kafka.clone(), known.clone(), shutdown.clone()));
    let result = async {
        let store = prepare(config, &shutdown).await?;
        known.set_ready();
        let names = config.names();
        let group = spec.group.name(&names);
        tracing::info!(
            service,
            group,
            health = format!("http://{local}/health"),
            "ready: {service} consuming as group {group}; /health and /metrics on {local}"
        );
        consume(store).await
    }
    .await;
    shutdown.trigger();
    let _ = http.await;
    let _ = probe.await;
    match &result {
        Ok(()) => tracing::info!(service, "stopped"),
        Err(e) => tracing::debug!(service, error = format!("{e:#}"), "stopped on an error"),
    }
    result
}

/// The daemon's `/health` document with the runtime's knowledge laid over it: `status` is
/// `starting` before the daemon is ready and `degraded` while the broker is down (or when the
/// daemon itself says so), and `reasons` says why.
pub fn honest_health(inner: HealthFn, known: Arc<Known>, brokers: String) -> HealthFn {
    Arc::new(move || {
        let mut doc = inner();
        let broker_down = known.broker_down.load(Ordering::Relaxed);
        let ready = known.ready.load(Ordering::Relaxed);
        let Some(obj) = doc.as_object_mut() else { return doc };
        let mut reasons: Vec<Value> = Vec::new();
        match known.clickhouse.load(Ordering::Relaxed) {
            ANSWERS => drop(obj.insert("clickhouse".into(), json!("up"))),
            SILENT => drop(obj.insert("clickhouse".into(), json!("down"))),
            _ => {}
        }
        if obj.get("clickhouse").and_then(Value::as_str) == Some("down") {
            reasons.push("ClickHouse does not answer".into());
        }
        if broker_down {
            reasons.push(format!("the broker at {brokers} does not accept connections").into());
        }
        if !ready {
            reasons.push("starting: waiting for the broker and ClickHouse".into());
        }
        obj.insert("broker".into(), json!(if broker_down { "down" } else { "up" }));
        let own = obj.get("status").and_then(Value::as_str).unwrap_or("ok").to_string();
        let status = match (ready, reasons.is_empty()) {
            (false, _) => "starting".to_string(),
            (true, false) => "degraded".to_string(),
            (true, true) => own,
        };
        obj.insert("status".into(), json!(status));
        if !reasons.is_empty() {
            obj.insert("reasons".into(), Value::Array(reasons));
        }
        doc
    })
}

/// Refreshes `known.broker_down` until shutdown, with a plain TCP connect: a librdkafka client
/// per look would log its own errors every time the broker is down.
pub async fn probe_broker(kafka: KafkaConfig, known: Arc<Known>, shutdown: Shutdown) {
    loop {
        let down = broker_reachable(&kafka, BROKER_PROBE_TIMEOUT).await.is_err();
        known.broker_down.store(down, Ordering::Relaxed);
        if !shutdown.sleep(BROKER_PROBE_EVERY).await {
            return;
        }
    }
}

/// Refreshes `known`'s view of ClickHouse until shutdown, for a daemon whose own document
/// does not say (the API): the server's version, asked with a bound.
pub async fn probe_clickhouse(store: Store, known: Arc<Known>, shutdown: Shutdown) {
    loop {
        let answered = tokio::time::timeout(BROKER_PROBE_TIMEOUT, store.server_version()).await;
        let state = if matches!(answered, Ok(Ok(_))) { ANSWERS } else { SILENT };
        known.clickhouse.store(state, Ordering::Relaxed);
        if !shutdown.sleep(BROKER_PROBE_EVERY).await {
            return;
        }
    }
}

/// Whether one of the bootstrap brokers accepts a TCP connection within `timeout`; the error
/// says why the last one did not (`connection refused`, no answer in time, …).
pub async fn broker_reachable(kafka: &KafkaConfig, timeout: Duration) -> Result<(), String> {
    let mut why = "no broker address is set".to_string();
    for addr in kafka.brokers.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        let addr = addr.rsplit("://").next().unwrap_or(addr);
        match tcp_connect(addr, timeout).await {
            Ok(()) => return Ok(()),
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// One TCP connection to `addr` (`host:port`), closed at once.
pub async fn tcp_connect(addr: &str, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err("connection refused".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_says_starting_then_degraded_with_the_reason_then_ok() {
        let known = Arc::new(Known::default());
        let inner: HealthFn = Arc::new(|| json!({"status": "ok", "service": "writer", "clickhouse": "up"}));
        let health = honest_health(inner, known.clone(), "b:9092".into());
        assert_eq!(health()["status"], "starting");
        known.ready.store(true, Ordering::Relaxed);
        assert_eq!(health()["status"], "ok");
        assert!(health().get("reasons").is_none());
        known.broker_down.store(true, Ordering::Relaxed);
        let doc = health();
        assert_eq!((doc["status"].clone(), doc["broker"].clone()), (json!("degraded"), json!("down")));
        assert!(doc["reasons"][0].as_str().unwrap().contains("b:9092"), "{doc}");
        known.broker_down.store(false, Ordering::Relaxed);
        known.clickhouse.store(SILENT, Ordering::Relaxed);
        let doc = health();
        assert_eq!((doc["status"].clone(), doc["clickhouse"].clone()), (json!("degraded"), json!("down")));
        assert_eq!(doc["reasons"], json!(["ClickHouse does not answer"]), "said once");
    }

    #[tokio::test]
    async fn a_refused_broker_is_seen_at_once() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let kafka = KafkaConfig { brokers: format!("127.0.0.1:{port}"), ..Default::default() };
        assert_eq!(broker_reachable(&kafka, Duration::from_secs(30)).await, Err("connection refused".to_string()));
    }
}
