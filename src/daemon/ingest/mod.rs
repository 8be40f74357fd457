//! `tayga serve ingest`: OTLP in (HTTP on 4318, gRPC on 4317), durable out.
//!
//! A request is split into records (`otlp::split`), then made durable on the first usable
//! path (`pipeline.rs`): the broker when one answers, ClickHouse directly otherwise
//! (`failover.rs`, docs/ingest.md *Failover*). Only then is the client answered. The broker is probed before
//! any request is served (requests that arrive first wait for it, and `/health` says
//! `starting`). A background probe notices a path that came back, including a broker that
//! appears after boot (whose topics it then creates); what was written directly meanwhile
//! is replayed to the topics from the backlog (`backlog.rs`). `/health` and `/metrics` are
//! served on the OTLP/HTTP port.

pub mod auth;
pub mod backlog;
pub mod failover;
mod grpc;
mod http;
pub mod listen;
pub mod metrics;
pub mod pipeline;
mod replay;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;

use self::backlog::Backlog;
use self::failover::{Failover, Path};
use self::listen::{Held, Inflight};
use self::metrics::IngestMetrics;
use self::pipeline::Pipeline;
use super::health::{watch_broker, with_dependency_health, DependencyHealth};
use super::tls::{self, Tls};
use super::{admin_router, HealthFn, Shutdown};
use crate::bus::packed::metrics::ProducerMetrics;
use crate::bus::packed::PackedProducer;
use crate::bus::topics::ensure_topics;
use crate::config::Config;
use crate::store::{migrate::migrate, Store};

/// How long the probe waits for the broker's metadata: a dead broker answers nothing.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a probe may take in all (metadata, then creating topics that are missing).
const PROBE_BOUND: Duration = Duration::from_secs(4);
/// How long reading the backlog's size may take at start.
const BACKLOG_READ_BOUND: Duration = Duration::from_secs(2);

/// The signals ingest accepts (`/health` lists them).
pub const SIGNALS: [&str; 2] = ["traces", "logs"];

/// The answer to a metrics export, over HTTP (501) and gRPC (UNIMPLEMENTED).
pub const METRICS_REFUSED: &str = "Tayga stores traces and logs, not metrics: send metrics to a metrics backend \
     (remove the metrics pipeline's Tayga exporter); nothing of this request was stored";

/// The Retry-After (seconds) of a request refused because ingest is busy.
pub const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// What the front ends share.
pub struct Ingest {
    pub pipeline: Pipeline,
    pub auth: auth::Auth,
    pub metrics: IngestMetrics,
    pub max_body_bytes: usize,
    pub probe_interval: Duration,
    pub inflight: Inflight,
    pub body_timeout: Duration,
}

/// A request this large returns its memory to the system when it ends.
const TRIM_AFTER_BYTES: u64 = 1 << 20;

impl Ingest {
    /// Whether the request (protobuf bytes) holds only services its token may send. Bytes
    /// the check cannot read are left to `prepare`, which refuses them as bad input.
    fn allowed<R: pipeline::ExportRequest>(&self, grant: &auth::Grant, protobuf: &[u8]) -> Result<(), auth::Refusal> {
        if *grant == auth::Grant::Any {
            return Ok(());
        }
        match crate::otlp::split::item_services::<R>(protobuf) {
            Ok(services) => grant.allows(services.iter().map(String::as_str)),
            Err(_) => Ok(()),
        }
    }

    /// A request was answered: its budget goes back. Its Rust memory is mimalloc's, which
    /// returns freed pages on its own; after a large one glibc is asked to return what the C
    /// libraries (lz4, zlib) freed, which it would otherwise keep resident.
    fn release(&self, held: Held) {
        let large = held.bytes() >= TRIM_AFTER_BYTES;
        drop(held);
        if large {
            tokio::task::spawn_blocking(trim_heap);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: glibc's malloc_trim only releases free heap pages; it takes no pointers.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// A running ingest: where it listens, and its tasks.
pub struct Running {
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    /// The plain `/health` and `/metrics` listener, when `ingest.metrics_addr` is set.
    pub metrics_addr: Option<SocketAddr>,
    pub ingest: Arc<Ingest>,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

impl Running {
    /// Waits until every task ended (after shutdown), returning the first failure.
    pub async fn wait(self) -> anyhow::Result<()> {
        let mut result = Ok(());
        for task in self.tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = result.and(Err(e)),
                Err(e) => result = result.and(Err(anyhow::anyhow!("an ingest task panicked: {e}"))),
            }
        }
        result
    }
}

/// How long a stop may take: requests in flight finish (each is bounded by the broker's
/// delivery timeout or the direct insert timeout), then the servers close.
pub const STOP_BOUND: Duration = Duration::from_secs(20);

pub async fn serve(config: &Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let running = start(config, shutdown.clone()).await?;
    let deadline = async {
        shutdown.triggered().await;
        tokio::time::sleep(STOP_BOUND).await;
    };
    tokio::select! {
        result = running.wait() => result,
        _ = deadline => anyhow::bail!("ingest did not stop within {STOP_BOUND:?} of the signal"),
    }
}

/// Binds both listeners and starts the servers and the probe.
pub async fn start(config: &Config, shutdown: Shutdown) -> anyhow::Result<Running> {
    let mut registry = Registry::default();
    let metrics = IngestMetrics::register(&mut registry);
    let publisher = PackedProducer::new(&config.kafka, ProducerMetrics::register(&mut registry, "tayga_ingest"))
        .map_err(anyhow::Error::msg)?;
    // One certificate for both receivers; a gRPC client offers only `h2` in its handshake.
    let (cert, key) = (&config.ingest.tls_cert_file, &config.ingest.tls_key_file);
    let tls = Tls::from_files("the OTLP receivers", cert, key, &[tls::ALPN_H2, tls::ALPN_HTTP1])?;
    if let Some(tls) = &tls {
        tls.register(&mut registry, "tayga_ingest");
    }
    let registry = Arc::new(registry);
    let store = Store::new(&config.clickhouse);
    let cooldown = Duration::from_secs(config.ingest.breaker_cooldown_secs);
    let mut failover = Failover::new(config.ingest.pipeline, cooldown);
    // The direct path needs the schema; if ClickHouse is not there yet, start with the path
    // down and let the probe bring it back.
    if let Err(e) = migrate(&store).await {
        tracing::warn!(error = %e, "ClickHouse is not ready; the direct path starts down");
        failover.failed(Path::Direct, Instant::now());
    }
    let auth = auth::Auth::from_config(&config.ingest)?;
    let (ready_tx, ready) = tokio::sync::watch::channel(false);
    let ingest = Arc::new(Ingest {
        auth,
        pipeline: Pipeline::new(
            failover,
            publisher,
            store.clone(),
            config.names(),
            config.ingest.max_record_bytes as usize,
            metrics.clone(),
            Backlog::new(store.clone(), config.ingest.backlog_max_bytes),
            ready,
        ),
        metrics,
        max_body_bytes: config.ingest.max_body_bytes as usize,
        probe_interval: Duration::from_secs(config.ingest.probe_interval_secs),
        inflight: Inflight::new(config.ingest.max_inflight_requests, config.ingest.max_inflight_bytes),
        body_timeout: Duration::from_secs(config.ingest.body_timeout_secs),
    });
    ingest.pipeline.update_path_gauges();

    // `/health` through the one rule (daemon::health): `starting` until the
    // start-up probe answered, `degraded` with the reason while the broker refuses (requests
    // then go to ClickHouse directly) or the direct path is down.
    let known = Arc::new(DependencyHealth::default());
    let health_of = ingest.clone();
    let inner: HealthFn = Arc::new(move || {
        let direct_up = health_of.pipeline.failover.lock().unwrap().is_up(Path::Direct);
        serde_json::json!({
            "status": "ok",
            "clickhouse": if direct_up { "up" } else { "down" },
            "ingest": health_of.pipeline.health(),
            "signals": SIGNALS,
        })
    });
    let health = with_dependency_health(inner, known.clone(), config.kafka.brokers.clone());
    let admin = if config.ingest.metrics_addr.is_empty() {
        None
    } else {
        let (addr, task) =
            super::serve_http(&config.ingest.metrics_addr, registry.clone(), health.clone(), shutdown.clone()).await?;
        Some((addr, task))
    };
    let app = http::router(ingest.clone()).merge(admin_router(registry, health));
    let http_listener = tokio::net::TcpListener::bind(&config.ingest.http_addr)
        .await
        .with_context(|| format!("cannot listen for OTLP/HTTP on {}", config.ingest.http_addr))?;
    let grpc_listener = tokio::net::TcpListener::bind(&config.ingest.grpc_addr)
        .await
        .with_context(|| format!("cannot listen for OTLP/gRPC on {}", config.ingest.grpc_addr))?;
    let http_addr = http_listener.local_addr()?;
    let grpc_addr = grpc_listener.local_addr()?;
    tracing::info!(%http_addr, %grpc_addr, tls = tls.is_some(), policy = ?config.ingest.pipeline, "ingest listening");

    let mut tasks = Vec::new();
    let metrics_addr = admin.map(|(addr, task)| {
        tasks.push(tokio::spawn(async move { task.await.context("the /health and /metrics server") }));
        addr
    });
    let stop = shutdown.clone();
    let limits = config.ingest.clone();
    if let Some(watched) = &tls {
        let (watched, stop) = (watched.clone(), shutdown.clone());
        tasks.push(tokio::spawn(async move {
            watched.watch(stop).await;
            Ok(())
        }));
    }
    let grpc_tls = tls.clone();
    tasks.push(tokio::spawn(async move {
        listen::serve_http(http_listener, app, &limits, tls, stop, STOP_BOUND)
            .await
            .context("the OTLP/HTTP server failed")
    }));
    let (traces, logs) = grpc::services(ingest.clone());
    let metrics_refused = grpc::MetricsRefused(ingest.clone());
    let stop = shutdown.clone();
    // A request as a whole: its body, then at most the delivery timeout and the direct
    // insert; a client that trickles its message is cut off past it.
    let request_bound = ingest.body_timeout + crate::bus::producer::DELIVERY_TIMEOUT + pipeline::DIRECT_INSERT_TIMEOUT;
    let (max_connections, handshake_limit) =
        (config.ingest.max_connections, Duration::from_secs(config.ingest.header_timeout_secs));
    tasks.push(tokio::spawn(async move {
        let server = tonic::transport::Server::builder()
            .timeout(request_bound)
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(10)))
            .add_service(traces)
            .add_service(logs)
            .add_service(metrics_refused);
        let served = match grpc_tls {
            Some(tls) => {
                let incoming = listen::tls_incoming(grpc_listener, max_connections, tls, handshake_limit);
                server.serve_with_incoming_shutdown(incoming, stop.triggered()).await
            }
            None => {
                let incoming = listen::bounded_incoming(grpc_listener, max_connections);
                server.serve_with_incoming_shutdown(incoming, stop.triggered()).await
            }
        };
        served.context("the OTLP/gRPC server failed")
    }));
    let mut started = ready_tx.subscribe();
    let ready_known = known.clone();
    tasks.push(tokio::spawn(async move {
        if started.wait_for(|r| *r).await.is_ok() {
            ready_known.set_ready();
        }
        Ok(())
    }));
    let (kafka, stop) = (config.kafka.clone(), shutdown.clone());
    tasks.push(tokio::spawn(async move {
        watch_broker(kafka, known, stop).await;
        Ok(())
    }));
    tasks.push(tokio::spawn(probe_loop(ingest.clone(), config.clone(), store, ready_tx, shutdown.clone())));
    tasks.push(tokio::spawn(replay::replay_loop(ingest.clone(), shutdown.clone())));
    Ok(Running { http_addr, grpc_addr, metrics_addr, ingest, tasks })
}

/// Brings paths back: every interval, each path that is due (down past its cooldown, or
/// the broker never probed) is checked without publishing anything. The first round is the
/// start-up probe: after it (and after reading the backlog's size) requests are served.
async fn probe_loop(
    ingest: Arc<Ingest>,
    config: Config,
    store: Store,
    ready: tokio::sync::watch::Sender<bool>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let names = config.names();
    loop {
        let due = ingest.pipeline.failover.lock().unwrap().due_for_probe(Instant::now());
        for path in due {
            let ok = match path {
                // A broker that answers gets its topics now: whichever service starts
                // first creates them.
                Path::Broker => tokio::time::timeout(PROBE_BOUND, async {
                    crate::bus::probe::answers(&config.kafka, PROBE_TIMEOUT).await
                        && match ensure_topics(&config.kafka, &names).await {
                            Ok(_) => true,
                            Err(e) => {
                                tracing::warn!(error = %e, "the broker answers but topics could not be ensured");
                                false
                            }
                        }
                })
                .await
                .unwrap_or(false),
                Path::Direct => migrate(&store).await.is_ok(),
            };
            let was_up = ingest.pipeline.failover.lock().unwrap().is_up(path);
            ingest.pipeline.failover.lock().unwrap().probed(path, ok, Instant::now());
            if ok && !was_up {
                tracing::info!(path = pipeline::path_name(path), "ingest path is up");
            }
            ingest.pipeline.update_path_gauges();
        }
        if !*ready.borrow() {
            read_backlog(&ingest).await;
            let health = ingest.pipeline.health();
            tracing::info!(using = health.paths.using, backlog_records = health.backlog.records, "ingest is ready");
            ready.send_replace(true);
        }
        if !shutdown.sleep(ingest.probe_interval).await {
            return Ok(());
        }
    }
}

/// Reads what an earlier run left in the backlog, so it is replayed (and new requests wait
/// behind it) as soon as both paths work.
async fn read_backlog(ingest: &Ingest) {
    let pipeline = &ingest.pipeline;
    if !pipeline.failover.lock().unwrap().is_up(Path::Direct) {
        return;
    }
    match tokio::time::timeout(BACKLOG_READ_BOUND, pipeline.backlog.refresh()).await {
        Ok(Ok(stats)) => {
            if stats.records > 0 {
                tracing::info!(
                    records = stats.records,
                    bytes = stats.bytes,
                    "the ingest backlog holds records to replay"
                );
                pipeline.failover.lock().unwrap().set_backlog_pending(true);
            }
            ingest.metrics.set_backlog(stats);
            pipeline.note_backlog_room();
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "reading the ingest backlog failed; it is read again within 30 s"),
        Err(_) => tracing::warn!("reading the ingest backlog timed out; it is read again within 30 s"),
    }
}
