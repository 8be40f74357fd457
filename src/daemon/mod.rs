//! What every daemon shares (docs/design.md#shutdown): logging set up for containers, a shutdown
//! signal raised by SIGTERM/SIGINT, the small HTTP server for `/health` and `/metrics`, and
//! the start-up retries. Each daemon lives in a submodule and is started by
//! `tayga serve <service>`; the consuming ones go through [`run`] ([`runtime`]), ingest
//! uses the server, the shutdown and the topic creation without a consumer, and every
//! `/health` follows [`health`]'s rule.

pub mod api;
pub mod assembler;
pub mod health;
pub mod ingest;
pub mod logminer;
pub mod notifier;
pub mod repeat_filter;
pub mod runtime;
pub mod tls;
pub mod writer;

pub use self::runtime::{run, DaemonSetup};

use std::future::Future;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Logging for daemons: JSON lines on stdout when stdout is not a terminal (containers,
/// log shippers), human-readable otherwise. The filter comes from `TAYGA_LOG` (`info` when
/// unset), in `tracing_subscriber::EnvFilter` syntax (`tayga=debug,rdkafka=warn`); the client
/// libraries' repeated events are limited to one line per condition and minute
/// ([`repeat_filter`]). Does nothing if a subscriber is already installed.
pub fn init_tracing() {
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let filter = tracing_subscriber::EnvFilter::try_from_env("TAYGA_LOG").unwrap_or_else(|_| "info".into());
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stdout);
    let layer = if std::io::stdout().is_terminal() {
        layer.boxed()
    } else {
        layer.json().flatten_event(true).with_current_span(false).boxed()
    };
    let _ = tracing_subscriber::registry()
        .with(layer.with_filter(filter.and(repeat_filter::RepeatFilter::global())))
        .try_init();
}

/// A shutdown flag that many tasks can wait on. Cloning shares the flag; once triggered it
/// stays triggered.
#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown { tx: Arc::new(watch::channel(false).0) }
    }

    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once [`trigger`](Self::trigger) has been called (at once if it was).
    pub fn triggered(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.tx.subscribe();
        async move {
            // The sender lives in `self`'s Arc as long as any clone does; an error would mean
            // every clone is gone, and then nobody can wait either.
            let _ = rx.wait_for(|stopped| *stopped).await;
        }
    }

    /// Sleeps for `duration`; returns false if shutdown came first.
    pub async fn sleep(&self, duration: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(duration) => true,
            _ = self.triggered() => false,
        }
    }

    /// Triggers this shutdown on the first SIGTERM or SIGINT.
    pub fn trigger_on_signals(&self) -> anyhow::Result<JoinHandle<()>> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let this = self.clone();
        Ok(tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::info!(signal = name, "stopping: finishing in-flight work");
            this.trigger();
        }))
    }
}

/// What `/health` answers: a JSON document built on each request.
pub type HealthFn = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Serves `/health` (JSON from `health`) and `/metrics` (the registry in the Prometheus /
/// OpenMetrics text format) on `addr` until `shutdown`. Returns the bound address (useful
/// with port 0) and the server task.
pub async fn serve_http(
    addr: &str,
    registry: Arc<Registry>,
    health: HealthFn,
    shutdown: Shutdown,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for /health and /metrics"))?;
    let local = listener.local_addr()?;
    let app = admin_router(registry, health);
    let task = tokio::spawn(async move {
        let stopped = shutdown.triggered();
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stopped).await {
            tracing::error!(error = %e, "the /health and /metrics server failed");
        }
    });
    tracing::info!(%local, "serving /health and /metrics");
    Ok((local, task))
}

/// The `/health` and `/metrics` routes, for daemons that serve them beside their own
/// (ingest serves them on its OTLP/HTTP port).
pub fn admin_router(registry: Arc<Registry>, health: HealthFn) -> Router {
    Router::new()
        .route("/health", get(move || async move { axum::Json(health()) }))
        .route("/metrics", get(move || async move { metrics_response(&registry) }))
}

fn metrics_response(registry: &Registry) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, registry) {
        Ok(()) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding metrics failed: {e}")).into_response(),
    }
}

/// How long a daemon waits at start-up for the broker and ClickHouse to answer.
pub const START_LIMIT: Duration = Duration::from_secs(60);

/// What every consuming daemon does first: create the topics and the schema if missing (both
/// idempotent), waiting up to [`START_LIMIT`] for the broker and ClickHouse to answer.
pub async fn prepare(config: &crate::config::Config, shutdown: &Shutdown) -> anyhow::Result<crate::store::Store> {
    let names = config.names();
    retry_at_start("creating topics", START_LIMIT, Duration::from_secs(1), shutdown, || {
        crate::bus::topics::ensure_topics(&config.kafka, &names)
    })
    .await?;
    let store = crate::store::Store::new(&config.clickhouse);
    let report =
        retry_at_start("migrating the ClickHouse schema", START_LIMIT, Duration::from_secs(1), shutdown, || {
            crate::store::migrate::migrate(&store)
        })
        .await?;
    tracing::info!(server_version = %report.server_version, database = %report.database, schema_version = report.version, "schema ready");
    Ok(store)
}

/// A daemon that was told to stop (SIGTERM) before it was ready: a clean stop, not a
/// failure, so `tayga serve` exits 0 even while a dependency is down.
#[derive(Debug, thiserror::Error)]
#[error("{what}: stopped before it succeeded")]
pub struct Stopped {
    pub what: String,
}

/// Runs `op` until it succeeds, pausing `pause` between failures, for at most `limit`; used
/// at start-up while ClickHouse or the broker may still be coming up. Gives up at once on
/// shutdown, even in the middle of an attempt (an attempt can block for a client timeout),
/// with [`Stopped`]. Each failure is logged with `what`.
pub async fn retry_at_start<T, E, F, Fut>(
    what: &str,
    limit: Duration,
    pause: Duration,
    shutdown: &Shutdown,
    mut op: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display + Into<anyhow::Error> + 'static,
{
    let deadline = tokio::time::Instant::now() + limit;
    let stopped = || anyhow::Error::new(Stopped { what: what.to_string() });
    loop {
        let attempt = tokio::select! {
            result = op() => result,
            _ = shutdown.triggered() => return Err(stopped()),
        };
        match attempt {
            Ok(value) => return Ok(value),
            Err(_) if shutdown.is_triggered() => return Err(stopped()),
            Err(e) if tokio::time::Instant::now() >= deadline || needs_the_operator(&e) => {
                return Err(e.into()).with_context(|| format!("{what} failed"));
            }
            Err(e) => {
                tracing::warn!(error = %e, "{what} failed; retrying");
                if !shutdown.sleep(pause).await {
                    return Err(stopped());
                }
            }
        }
    }
}

/// True when retrying cannot help: ClickHouse or the broker refused the credentials or
/// presented a certificate this machine does not trust. Start-up then fails at once, in one
/// line.
fn needs_the_operator<E: std::fmt::Display + 'static>(error: &E) -> bool {
    let error: &dyn std::any::Any = error;
    let store = error
        .downcast_ref::<crate::store::StoreError>()
        .or_else(|| error.downcast_ref::<anyhow::Error>().and_then(|e| e.chain().find_map(|c| c.downcast_ref())));
    let bus = error.downcast_ref::<crate::bus::topics::TopicError>();
    store.is_some_and(crate::store::StoreError::needs_the_operator)
        || bus.is_some_and(crate::bus::topics::TopicError::needs_the_operator)
}

/// True when `error` is a [`Stopped`]: the daemon ended because it was told to.
pub fn is_stopped(error: &anyhow::Error) -> bool {
    error.chain().any(|c| c.is::<Stopped>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shutdown_wakes_every_waiter_and_stays_triggered() {
        let shutdown = Shutdown::new();
        assert!(!shutdown.is_triggered());
        let waiters: Vec<_> = (0..3).map(|_| tokio::spawn(shutdown.clone().triggered())).collect();
        let sleeper = {
            let s = shutdown.clone();
            tokio::spawn(async move { s.sleep(Duration::from_secs(3600)).await })
        };
        shutdown.clone().trigger();
        for w in waiters {
            tokio::time::timeout(Duration::from_secs(5), w).await.unwrap().unwrap();
        }
        assert!(!tokio::time::timeout(Duration::from_secs(5), sleeper).await.unwrap().unwrap());
        assert!(shutdown.is_triggered());
        // A waiter that starts late returns at once.
        tokio::time::timeout(Duration::from_secs(1), shutdown.triggered()).await.unwrap();
    }

    #[tokio::test]
    async fn health_and_metrics_are_served() {
        let mut registry = Registry::default();
        let counter = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("tayga_test_things", "Things", counter.clone());
        counter.inc_by(3);
        let shutdown = Shutdown::new();
        let health: HealthFn = Arc::new(|| serde_json::json!({"status": "ok"}));
        let (addr, task) = serve_http("127.0.0.1:0", Arc::new(registry), health, shutdown.clone()).await.unwrap();
        let client = reqwest::Client::new();
        let health: serde_json::Value =
            client.get(format!("http://{addr}/health")).send().await.unwrap().json().await.unwrap();
        assert_eq!(health["status"], "ok");
        let metrics = client.get(format!("http://{addr}/metrics")).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains("tayga_test_things_total 3"), "{metrics}");
        shutdown.trigger();
        tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn retry_at_start_retries_then_gives_up() {
        let shutdown = Shutdown::new();
        let mut calls = 0;
        let value = retry_at_start("thing", Duration::from_secs(5), Duration::from_millis(1), &shutdown, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(anyhow::anyhow!("not yet"))
                } else {
                    Ok(n)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
        let err =
            retry_at_start::<(), _, _, _>("other", Duration::ZERO, Duration::from_millis(1), &shutdown, || async {
                Err(anyhow::anyhow!("down"))
            })
            .await
            .unwrap_err();
        assert!(format!("{err:#}").contains("other failed: down"), "{err:#}");
    }

    /// Refused credentials are not retried for the hour the limit allows: only the operator
    /// can cure them. Seen as the store's error or inside an anyhow chain alike.
    #[tokio::test]
    async fn retry_at_start_gives_up_at_once_on_what_only_the_operator_can_cure() {
        let shutdown = Shutdown::new();
        let refused =
            || crate::store::StoreError::Refused { url: "https://ch:8443".into(), user: "tayga".into(), code: 193 };
        let mut attempts = 0;
        let err = retry_at_start::<(), _, _, _>(
            "migrating",
            Duration::from_secs(3600),
            Duration::from_secs(1),
            &shutdown,
            || {
                attempts += 1;
                std::future::ready(Err(refused()))
            },
        )
        .await
        .unwrap_err();
        assert_eq!(attempts, 1);
        assert!(format!("{err:#}").contains("wrong password (code 193)"), "{err:#}");
        let mut attempts = 0;
        retry_at_start::<(), anyhow::Error, _, _>(
            "migrating",
            Duration::from_secs(3600),
            Duration::from_secs(1),
            &shutdown,
            || {
                attempts += 1;
                std::future::ready(Err(anyhow::Error::new(refused()).context("reading")))
            },
        )
        .await
        .unwrap_err();
        assert_eq!(attempts, 1);
    }

    #[tokio::test]
    async fn shutdown_interrupts_an_attempt_in_flight_and_is_a_clean_stop() {
        let shutdown = Shutdown::new();
        let waiting = {
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                retry_at_start::<(), anyhow::Error, _, _>(
                    "creating topics",
                    Duration::from_secs(3600),
                    Duration::from_secs(1),
                    &shutdown,
                    std::future::pending,
                )
                .await
            })
        };
        shutdown.trigger();
        let err = tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap().unwrap_err();
        assert!(is_stopped(&err), "{err:#}");
        assert!(!is_stopped(&anyhow::anyhow!("down")));
    }
}
