//! The one start-up and stop every consuming daemon goes through: `/health` and `/metrics`
//! first (so a daemon waiting for its servers is visible), then the topics and the schema,
//! then the daemon's consumer until it returns; the server stops with it, however it ends.

use std::future::Future;
use std::sync::Arc;

use prometheus_client::registry::Registry;

use super::{prepare, serve_http, HealthFn, Shutdown};
use crate::bus::consume::Group;
use crate::config::Config;
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
    let (_, http) = serve_http(&spec.metrics_addr, Arc::new(spec.registry), spec.health, shutdown.clone()).await?;
    let result = async {
        let store = prepare(config, &shutdown).await?;
        tracing::info!(service, group = spec.group.name(&config.names()), "consuming");
        consume(store).await
    }
    .await;
    shutdown.trigger();
    let _ = http.await;
    match &result {
        Ok(()) => tracing::info!(service, "stopped"),
        Err(e) => tracing::debug!(service, error = format!("{e:#}"), "stopped on an error"),
    }
    result
}
