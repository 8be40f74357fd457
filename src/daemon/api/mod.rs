//! `tayga serve api`: the HTTP API over everything Tayga stores (docs/api.md) and the metric
//! recorder. `router.rs` assembles the routes and the OpenAPI document, `handlers/` holds one
//! file per area, `params.rs` reads and checks parameters, `error.rs` maps failures to
//! statuses, `access.rs` the loopback and token rules, `metrics.rs` the API's own metrics,
//! `recorder/` the scraper, `web/` the app served at `/`, `contract.rs` the
//! rules the OpenAPI document states for every route at once. Every read goes through `store::query` (or the `store` functions
//! the commands use).

pub mod access;
pub mod contract;
pub mod error;
pub mod handlers;
pub mod metrics;
pub mod params;
pub mod recorder;
pub mod router;
pub mod web;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::registry::Registry;

use crate::config::Config;
use crate::daemon::health::{watch_broker, watch_clickhouse, with_dependency_health, DependencyHealth};
use crate::daemon::{retry_at_start, Shutdown, START_LIMIT};
use crate::store::Store;
use handlers::AppState;
use recorder::{resolve::SystemResolver, Recorder, RecorderMetrics};

/// How long the requests in flight at a stop may take to finish over TLS.
const STOP_BOUND: Duration = Duration::from_secs(10);

pub async fn serve(config: &Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let roles = access::Roles::from_config(&config.api)?;
    if let Some(problem) = access::listen_problem(&config.api.listen_addr, &roles) {
        anyhow::bail!("{problem}");
    }
    let alpn: &[&[u8]] = &[crate::daemon::tls::ALPN_H2, crate::daemon::tls::ALPN_HTTP1];
    let tls =
        crate::daemon::tls::Tls::from_files("the API", &config.api.tls_cert_file, &config.api.tls_key_file, alpn)?;
    let plain = Store::new(&config.clickhouse);
    // The recorder writes pipeline_metrics, and the reads need the trace_logs lookup.
    retry_at_start("migrating the ClickHouse schema", START_LIMIT, Duration::from_secs(1), &shutdown, || {
        crate::store::migrate::migrate(&plain)
    })
    .await?;
    let timeout = Duration::from_secs(config.api.query_timeout_secs);
    // The server stops a query at the same bound the request waits, so an abandoned query
    // does not keep running.
    let store = plain.clone().with_setting("max_execution_time", &config.api.query_timeout_secs.to_string());

    let mut registry = Registry::default();
    let recorder_metrics = RecorderMetrics::register(&mut registry);
    let request_metrics = metrics::RequestMetrics::register(&mut registry);
    if let Some(tls) = &tls {
        tls.register(&mut registry, "tayga_api");
    }
    let recorder = Recorder::new(plain, recorder::targets(config), Arc::new(SystemResolver), recorder_metrics)
        .with_max_samples(usize::try_from(config.api.max_samples_per_scrape).unwrap_or(usize::MAX));
    let interval = Duration::from_secs(config.api.scrape_interval_secs);
    let recording = tokio::spawn(recorder.run(interval, shutdown.clone()));

    let alerts_topic = Some(Arc::new(crate::workflow::retry::AlertsTopic::new(config)));
    let state = AppState { store, query_timeout: timeout, now_ns: crate::store::now_ns, alerts_topic };
    // `/health` through the one rule (daemon::health): `degraded` with the reason
    // while ClickHouse does not answer (every read fails) or the broker refuses (delivery
    // retries fail).
    let known = Arc::new(DependencyHealth::default());
    let inner: crate::daemon::HealthFn = Arc::new(|| serde_json::json!({"status": "ok", "api": {"status": "serving"}}));
    let health = with_dependency_health(inner, known.clone(), config.kafka.brokers.clone());
    let access = access::Access::new(roles, tls.is_some());
    let app = router::secured(state, Arc::new(registry), request_metrics, health, access);
    let listener = tokio::net::TcpListener::bind(&config.api.listen_addr)
        .await
        .with_context(|| format!("cannot listen on {} for the API", config.api.listen_addr))?;
    let probes = [
        tokio::spawn(watch_broker(config.kafka.clone(), known.clone(), shutdown.clone())),
        tokio::spawn(watch_clickhouse(Store::new(&config.clickhouse), known.clone(), shutdown.clone())),
    ];
    known.set_ready();
    tracing::info!(addr = %listener.local_addr()?, tls = tls.is_some(), "serving the API");
    match tls {
        Some(tls) => {
            let watching = tokio::spawn(tls.clone().watch(shutdown.clone()));
            crate::daemon::tls::serve_router(listener, app, tls, shutdown, STOP_BOUND).await?;
            let _ = watching.await;
        }
        None => axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.triggered())
            .await
            .context("the API server failed")?,
    }
    let _ = recording.await;
    for probe in probes {
        let _ = probe.await;
    }
    Ok(())
}
