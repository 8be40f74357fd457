//! The one start-up and stop every consuming daemon goes through: `/health` and `/metrics`
//! first (so a daemon waiting for its servers is visible), then the topics and the schema,
//! then the daemon's work until it returns; the server stops with it, however it ends.
//!
//! Every consuming daemon is driven by the one consume loop ([`crate::bus::consume::run`]):
//! [`run`] joins the group with a [`Member`], makes the daemon's [`Handler`] from the `Store`
//! it prepared, and runs the loop until shutdown.
//!
//! `/health` follows [`super::health`]'s rule: `starting` until the daemon is ready,
//! `degraded` with its reason while the broker refuses connections.

use std::future::Future;
use std::sync::Arc;

use prometheus_client::registry::Registry;

use super::health::{watch_broker, with_dependency_health, DependencyHealth};
use super::{prepare, serve_http, HealthFn, Shutdown};
use crate::bus::consume::{self, ConsumerMetrics, Group, Handler, Member};
use crate::config::Config;
use crate::store::Store;

/// What a daemon brings to [`run`].
pub struct DaemonSetup {
    /// The group it consumes in (and so its service name).
    pub group: Group,
    /// Where `/health` and `/metrics` are served (`<service>.metrics_addr`).
    pub metrics_addr: String,
    /// Its metrics, registered under `tayga_<service>_` (docs/metrics.md).
    pub registry: Registry,
    /// Its consumer metrics (part of `registry`), which its member reports to.
    pub consumer: ConsumerMetrics,
    pub health: HealthFn,
}

/// Runs a consuming daemon until `shutdown`: serves `/health` and `/metrics`, creates the
/// topics and the schema if missing (waiting for the broker and ClickHouse at start), joins
/// the daemon's group, has `start` make the daemon from the store (and the member, for its
/// publisher and topic), and runs the consume loop until shutdown. However it ends, shutdown
/// is triggered so every task of the daemon (the server first) ends too.
pub async fn run<H, F, Fut>(config: &Config, shutdown: Shutdown, spec: DaemonSetup, start: F) -> anyhow::Result<()>
where
    H: Handler,
    F: FnOnce(Store, &Member) -> Fut,
    Fut: Future<Output = anyhow::Result<H>>,
{
    let service = spec.group.service();
    let known = Arc::new(DependencyHealth::default());
    let health = with_dependency_health(spec.health, known.clone(), config.kafka.brokers.clone());
    let (local, http) = serve_http(&spec.metrics_addr, Arc::new(spec.registry), health, shutdown.clone()).await?;
    let watch = tokio::spawn(watch_broker(config.kafka.clone(), known.clone(), shutdown.clone()));
    let result = async {
        let store = prepare(config, &shutdown).await?;
        known.set_ready();
        let names = config.names();
        let group = spec.group.name(&names);
        let topic = spec.group.topic(&names);
        tracing::info!(
            service,
            group,
            topic,
            health = format!("http://{local}/health"),
            "ready: {service} consuming {topic} as group {group}; /health and /metrics on {local}"
        );
        let member = Member::join(&config.kafka, &names, spec.group, spec.consumer)?;
        let handler = start(store, &member).await?;
        consume::run(member, handler, shutdown.triggered()).await;
        Ok(())
    }
    .await;
    shutdown.trigger();
    let _ = http.await;
    let _ = watch.await;
    match &result {
        Ok(()) => tracing::info!(service, "stopped"),
        Err(e) => tracing::debug!(service, error = format!("{e:#}"), "stopped on an error"),
    }
    result
}
