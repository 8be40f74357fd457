//! Helpers shared by tests/it/notifier.rs, tests/it/notifier_process.rs and tests/it/retry.rs:
//! the notifier in-process, scripted webhook receivers, alert publishing, the binary, and
//! reads of delivery rows and committed offsets.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{run, wait_for, TestEnv};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use prometheus_client::registry::Registry;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tayga::bus::consume::{self, Group, Member};
use tayga::config::{Config, TargetConfig};
use tayga::daemon::notifier::metrics::{DeliveryResult, NotifierMetrics};
use tayga::daemon::notifier::Notifier;
use tayga::daemon::prepare;
use tayga::daemon::Shutdown;
use tayga::store::{now_ns, DeliveryRow, Store};
use tayga::wire::alert::{Alert, AlertKind, ALERT_FORMAT_VERSION};
use tokio::task::JoinHandle;

pub const WAIT: Duration = Duration::from_secs(30);

/// The notifier daemon on the consume loop, in-process.
pub struct Running {
    pub shutdown: Shutdown,
    task: JoinHandle<anyhow::Result<()>>,
    registry: Arc<Registry>,
    metrics: NotifierMetrics,
}

impl Running {
    pub async fn start(config: &Config) -> Running {
        let shutdown = Shutdown::new();
        let store =
            prepare(config, &shutdown).await.expect("topics and schema (are ClickHouse and the broker running?)");
        let mut registry = Registry::default();
        let metrics = NotifierMetrics::new(&mut registry);
        let notifier = Notifier::new(config, store, metrics.clone(), shutdown.clone()).unwrap();
        let member = Member::join(&config.kafka, &config.names(), Group::Notifier, metrics.consumer.clone()).unwrap();
        let stop = shutdown.triggered();
        let task = tokio::spawn(async move {
            consume::run(member, notifier, stop).await;
            anyhow::Ok(())
        });
        Running { shutdown, task, registry: Arc::new(registry), metrics }
    }

    pub fn count(&self, target: &str, result: DeliveryResult) -> u64 {
        self.metrics.result_count(target, result)
    }

    /// Partitions of the alerts topic this replica holds now.
    pub fn assigned(&self) -> i64 {
        self.metrics.consumer.assigned_partitions.get()
    }

    pub fn metrics_text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    pub async fn stop(self) {
        self.shutdown.trigger();
        tokio::time::timeout(WAIT, self.task).await.expect("the notifier stops").unwrap().unwrap();
    }
}

pub async fn wait_committed(config: &Config, n: i64) {
    wait_for(
        &format!("committed offset {n}"),
        WAIT,
        || async move { (committed(config).await == Some(n)).then_some(()) },
    )
    .await;
}

pub async fn wait_status(store: &Store, alert_id: u64, target: &str, status: &str) -> tayga::store::DeliveryRow {
    wait_for(&format!("{target} {status}"), WAIT, || async move {
        row(store, alert_id, target).await.filter(|r| r.status == status)
    })
    .await
}

/// Runs the binary with the test's database and topic prefix, off the async workers.
pub async fn tayga(env: &TestEnv, args: &[&str]) -> (std::process::Output, String, String) {
    let mut cmd = env.tayga();
    cmd.args(args);
    tokio::task::spawn_blocking(move || run(&mut cmd)).await.unwrap()
}

/// `2015-10-21T07:28:00.123Z` → a fixed placeholder of the same width, so tables keep
/// their shape.
pub fn mask_times(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let is_time = |s: &[u8]| {
        s.len() >= 24
            && s[..24].iter().enumerate().all(|(k, c)| match k {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'.',
                23 => *c == b'Z',
                _ => c.is_ascii_digit(),
            })
    };
    while i < b.len() {
        if is_time(&b[i..]) {
            out.push_str("YYYY-MM-DDTHH:MM:SS.mmmZ");
            i += 24;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// What a receiver answers to one request.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<String>,
    /// Held this long before answering (an attempt "in flight").
    pub delay: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply { status, retry_after: None, delay: Duration::ZERO }
    }

    pub fn retry_after(mut self, value: &str) -> Reply {
        self.retry_after = Some(value.to_string());
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

/// A request a receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub body: serde_json::Value,
    /// The body as sent (what a signature covers).
    pub raw: Vec<u8>,
    pub headers: HeaderMap,
    pub at: Instant,
    /// The status it was answered with.
    pub status: u16,
}

struct HookState {
    script: VecDeque<Reply>,
    default: Reply,
    received: Vec<Received>,
}

/// A webhook receiver on 127.0.0.1:0 answering from a script, then with a default reply.
#[derive(Clone)]
pub struct Hook {
    pub url: String,
    state: Arc<Mutex<HookState>>,
}

impl Hook {
    pub async fn start(script: Vec<Reply>, default: Reply) -> Hook {
        let state = Arc::new(Mutex::new(HookState { script: script.into(), default, received: Vec::new() }));
        let app = Router::new().fallback(answer).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Hook { url: format!("http://{addr}/hook"), state }
    }

    /// Always answers `status`.
    pub async fn always(status: u16) -> Hook {
        Hook::start(Vec::new(), Reply::status(status)).await
    }

    pub fn set_default(&self, reply: Reply) {
        self.state.lock().unwrap().default = reply;
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// Requests received so far (counted on arrival, before the reply).
    pub fn count(&self) -> usize {
        self.state.lock().unwrap().received.len()
    }

    /// Requests answered with a 2xx.
    pub fn successes(&self) -> usize {
        self.received().iter().filter(|r| (200..300).contains(&r.status)).count()
    }

    pub fn target(&self, name: &str) -> TargetConfig {
        TargetConfig { name: name.into(), url: self.url.clone(), ..Default::default() }
    }
}

async fn answer(State(state): State<Arc<Mutex<HookState>>>, headers: HeaderMap, body: Bytes) -> Response {
    let reply = {
        let mut s = state.lock().unwrap();
        let reply = s.script.pop_front().unwrap_or_else(|| s.default.clone());
        s.received.push(Received {
            body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
            raw: body.to_vec(),
            headers,
            at: Instant::now(),
            status: reply.status,
        });
        reply
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = StatusCode::from_u16(reply.status).unwrap().into_response();
    if let Some(value) = reply.retry_after {
        response.headers_mut().insert("retry-after", value.parse().unwrap());
    }
    response
}

/// A fresh alert whose id is unique to the test (`seed` tells several apart).
pub fn alert(test: &str, seed: u64, kind: AlertKind) -> Alert {
    let alert_id = tayga::identity::template_id(test, &seed.to_string());
    let now = now_ns();
    Alert {
        version: ALERT_FORMAT_VERSION,
        alert_id,
        kind,
        service: "checkout".into(),
        template_id: tayga::identity::template_id("checkout", test),
        template: "payment failed: card <*> declined".into(),
        first_at: now - 60_000_000_000,
        last_at: now,
        count: 412,
        baseline: 12.5,
        threshold: 62.5,
        state: Default::default(),
        resolved_at: 0,
        shape: None,
    }
}

/// Publishes alerts to the test's alerts topic, keyed by template id (docs/design.md#topics).
pub async fn publish(config: &Config, alerts: &[&Alert]) {
    let producer: FutureProducer = tayga::bus::client_config(&config.kafka).create().unwrap();
    let topic = config.names().alerts;
    for alert in alerts {
        let key = alert.key();
        let value = alert.to_json().unwrap();
        producer
            .send(FutureRecord::to(&topic).key(&key).payload(&value), Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .expect("publishing an alert");
    }
}

/// Test settings: no backoff (base 0), fast ladders; production defaults stay the seed's.
pub fn notifier_config(base: &Config, targets: Vec<TargetConfig>) -> Config {
    let mut config = base.clone();
    config.notifier.targets = targets;
    config.notifier.backoff_base_secs = 0;
    config.notifier.backoff_cap_secs = 2;
    config.notifier.timeout_secs = 5;
    config.notifier.breaker_cooldown_secs = 120;
    config.notifier.metrics_addr = "127.0.0.1:0".into();
    config
}

/// The latest row of every target of an alert.
pub async fn rows(store: &Store, alert_id: u64) -> Vec<DeliveryRow> {
    tayga::store::deliveries::latest_for_alert(store, alert_id, tayga::wire::alert::AlertState::Firing).await.unwrap()
}

pub async fn row(store: &Store, alert_id: u64, target: &str) -> Option<DeliveryRow> {
    rows(store, alert_id).await.into_iter().find(|r| r.target == target)
}

/// The notifier group's committed offsets on the alerts topic, summed over partitions;
/// `None` while it committed nothing (or the broker did not answer).
pub async fn committed(config: &Config) -> Option<i64> {
    let sum: i64 = crate::common::committed(config, Group::Notifier).await?.values().sum();
    (sum > 0).then_some(sum)
}

/// Runs tests/sdk/verify_webhooks.py over `checks` (one JSON document each) and returns
/// its verdict per check.
pub fn verify(checks: &[serde_json::Value]) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/verify_webhooks.py");
    let input: String = checks.iter().map(|c| format!("{c}\n")).collect();
    let out = crate::common::run_python(script, input.as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "the verifiers are not installed (scripts/test.sh installs standardwebhooks and slack-sdk):\n{stderr}"
    );
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

pub fn b64(bytes: &[u8]) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)
}

pub fn headers_json(r: &Received) -> serde_json::Value {
    r.headers.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v.to_str().unwrap_or_default()))).collect()
}
