//! The one rule every `/health` follows: the daemon's own document, with what is known of
//! its dependencies laid over it. While the daemon is still preparing (waiting for the broker
//! or ClickHouse) it says `starting`; while the broker does not accept connections or
//! ClickHouse does not answer it says `degraded`, each with its reason, whatever the
//! daemon's own document says. The consuming daemons get it from [`super::runtime`]; ingest
//! and the API, which do not consume, use the same pieces.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::{HealthFn, Shutdown};
use crate::config::KafkaConfig;
use crate::store::Store;

/// How often `/health`'s view of a dependency is refreshed, and how long one look may take.
const LOOK_EVERY: Duration = Duration::from_secs(5);
const LOOK_TIMEOUT: Duration = Duration::from_secs(2);

/// What is known of a daemon's dependencies, for `/health`.
#[derive(Default)]
pub struct DependencyHealth {
    ready: AtomicBool,
    broker_down: AtomicBool,
    /// What [`watch_clickhouse`] saw ([`ANSWERS`], [`SILENT`]); 0 for daemons whose own
    /// document says.
    clickhouse: AtomicU8,
    /// Why ClickHouse was [`SILENT`] at the last look.
    clickhouse_why: std::sync::Mutex<String>,
    /// The broker's refusal of this client (certificate, credentials) at the last look; empty
    /// when it simply does not accept connections.
    broker_why: std::sync::Mutex<String>,
}

const ANSWERS: u8 = 1;
const SILENT: u8 = 2;

impl DependencyHealth {
    /// The daemon finished starting: `/health` stops saying `starting`.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }
}

/// The daemon's `/health` document with `known` laid over it: `status` is `starting` before
/// the daemon is ready and `degraded` while the broker is down (or when the daemon itself
/// says so), and `reasons` says why.
pub fn with_dependency_health(inner: HealthFn, known: Arc<DependencyHealth>, brokers: String) -> HealthFn {
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
            let why = known.clickhouse_why.lock().map(|why| why.clone()).unwrap_or_default();
            reasons.push(if why.is_empty() { crate::store::probe::NOT_ANSWERING.into() } else { why }.into());
        }
        if broker_down {
            let why = known.broker_why.lock().map(|why| why.clone()).unwrap_or_default();
            reasons.push(
                if why.is_empty() { format!("the broker at {brokers} does not accept connections") } else { why }
                    .into(),
            );
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

/// Refreshes `known`'s view of the broker until shutdown ([`crate::bus::probe::reachable`]).
pub async fn watch_broker(kafka: KafkaConfig, known: Arc<DependencyHealth>, shutdown: Shutdown) {
    loop {
        let look = crate::bus::probe::reachable(&kafka, LOOK_TIMEOUT).await;
        if let Ok(mut said) = known.broker_why.lock() {
            *said = match &look {
                Err(crate::bus::probe::Failure::Refused(line)) => line.clone(),
                _ => String::new(),
            };
        }
        known.broker_down.store(look.is_err(), Ordering::Relaxed);
        if !shutdown.sleep(LOOK_EVERY).await {
            return;
        }
    }
}

/// Refreshes `known`'s view of ClickHouse until shutdown, for a daemon whose own document
/// does not say (the API) ([`crate::store::probe::answers`]).
pub async fn watch_clickhouse(store: Store, known: Arc<DependencyHealth>, shutdown: Shutdown) {
    loop {
        let state = match crate::store::probe::answers(&store, LOOK_TIMEOUT).await {
            Ok(()) => ANSWERS,
            Err(why) => {
                if let Ok(mut said) = known.clickhouse_why.lock() {
                    *said = why;
                }
                SILENT
            }
        };
        known.clickhouse.store(state, Ordering::Relaxed);
        if !shutdown.sleep(LOOK_EVERY).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_says_starting_then_degraded_with_the_reason_then_ok() {
        let known = Arc::new(DependencyHealth::default());
        let inner: HealthFn = Arc::new(|| json!({"status": "ok", "service": "writer", "clickhouse": "up"}));
        let health = with_dependency_health(inner, known.clone(), "b:9092".into());
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
        *known.clickhouse_why.lock().unwrap() = "ClickHouse at https://ch:8443 refused the user `tayga`".into();
        assert_eq!(health()["reasons"], json!(["ClickHouse at https://ch:8443 refused the user `tayga`"]));
    }
}
