//! `tayga serve <service>`: runs one daemon, or with `all` every daemon this build has, in
//! one process. Each daemon prepares what it needs (topics, schema) at start, serves
//! `/health` and `/metrics`, and stops cleanly on SIGTERM or SIGINT.

use std::io::Write;

use clap::ValueEnum;
use tokio::task::JoinSet;

use super::Reported;
use crate::cli::Service;
use crate::config::{Config, Loaded};
use crate::daemon::{self, Shutdown};

/// The services this build can run, in start order. `serve all` runs exactly these.
pub const AVAILABLE: &[Service] =
    &[Service::Ingest, Service::Writer, Service::Assembler, Service::Logminer, Service::Notifier, Service::Api];

pub async fn run(loaded: Loaded, service: Service, err: &mut dyn Write) -> anyhow::Result<()> {
    if service != Service::All && !AVAILABLE.contains(&service) {
        anyhow::bail!("`tayga serve {}` is not in this build yet", name(service));
    }
    refuse_problems(&loaded, err)?;
    let config = loaded.config;
    let shutdown = Shutdown::new();
    shutdown.trigger_on_signals()?;
    let services: Vec<Service> = if service == Service::All { AVAILABLE.to_vec() } else { vec![service] };
    run_services(config, services, shutdown).await
}

/// Every problem of the configuration on stderr, then a refusal; a daemon never starts on
/// a configuration with problems.
pub fn refuse_problems(loaded: &Loaded, err: &mut dyn Write) -> anyhow::Result<()> {
    let problems = loaded.problems();
    if !problems.is_empty() {
        for problem in &problems {
            writeln!(err, "config: {problem}")?;
        }
        return Err(Reported(format!("the configuration has {} problem(s)", problems.len())).into());
    }
    Ok(())
}

/// Runs `services` in this process until `shutdown` (or until one fails, which stops the
/// others): `serve` and `up` both run their daemons through here.
pub async fn run_services(config: Config, services: Vec<Service>, shutdown: Shutdown) -> anyhow::Result<()> {
    // Here, not in `main`: `tayga up` has started its ClickHouse and broker, which would inherit it.
    crate::without_transparent_huge_pages();
    let repeats = tokio::spawn(daemon::repeat_filter::report(shutdown.clone()));
    tracing::info!(services = ?services.iter().map(|s| name(*s)).collect::<Vec<_>>(), version = env!("CARGO_PKG_VERSION"), "starting");

    let mut tasks = JoinSet::new();
    for s in services.iter().copied() {
        let config = config.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move { (s, serve_one(s, &config, shutdown).await) });
    }
    // The consuming daemons say `ready` themselves (daemon::run); ingest and the API are
    // ready when their ports accept connections.
    for s in services.iter().copied().filter(|s| matches!(s, Service::Ingest | Service::Api)) {
        tokio::spawn(announce_when_listening(s, config.clone(), shutdown.clone()));
    }
    let mut failed = None;
    while let Some(joined) = tasks.join_next().await {
        let (s, result) = joined.map_err(|e| anyhow::anyhow!("a service task failed: {e}"))?;
        if let Err(e) = result {
            if daemon::is_stopped(&e) {
                // Told to stop before it was ready (SIGTERM, or another service failed):
                // not a failure of its own.
                tracing::info!(service = name(s), "stopped before it was ready");
                continue;
            }
            tracing::error!(service = name(s), error = format!("{e:#}"), "service failed");
            // One service down takes the process down, so the supervisor restarts it whole.
            shutdown.trigger();
            failed.get_or_insert_with(|| e.context(format!("tayga serve {}", name(s))));
        }
    }
    shutdown.trigger();
    let _ = repeats.await;
    match failed {
        Some(e) => Err(e),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}

async fn serve_one(service: Service, config: &Config, shutdown: Shutdown) -> anyhow::Result<()> {
    match service {
        Service::Ingest => daemon::ingest::serve(config, shutdown).await,
        Service::Writer => daemon::writer::run(config.clone(), shutdown).await,
        Service::Notifier => daemon::notifier::serve(config, shutdown).await,
        Service::Assembler => daemon::assembler::serve(config, shutdown).await,
        Service::Logminer => daemon::logminer::serve(config, shutdown).await,
        Service::Api => daemon::api::serve(config, shutdown).await,
        other => anyhow::bail!("`tayga serve {}` is not in this build yet", name(other)),
    }
}

/// Logs one `ready` line for ingest or the API once its listeners accept connections.
async fn announce_when_listening(service: Service, config: Config, shutdown: Shutdown) {
    let (addrs, what): (Vec<String>, String) = match service {
        Service::Ingest => (
            vec![config.ingest.http_addr.clone(), config.ingest.grpc_addr.clone()],
            format!(
                "OTLP/HTTP on {} (with /health and /metrics), OTLP/gRPC on {}",
                config.ingest.http_addr, config.ingest.grpc_addr
            ),
        ),
        _ => {
            (vec![config.api.listen_addr.clone()], format!("HTTP API and web app on http://{}", config.api.listen_addr))
        }
    };
    let deadline = tokio::time::Instant::now() + daemon::START_LIMIT;
    for addr in &addrs {
        loop {
            let probe = addr.replace("0.0.0.0", "127.0.0.1").replace("[::]", "[::1]");
            if crate::bus::probe::tcp_connect(&probe, std::time::Duration::from_secs(1)).await.is_ok() {
                break;
            }
            if tokio::time::Instant::now() >= deadline || !shutdown.sleep(std::time::Duration::from_millis(100)).await {
                return;
            }
        }
    }
    let service = name(service);
    tracing::info!(service, "ready: {service}: {what}");
}

fn name(service: Service) -> String {
    service.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_else(|| format!("{service:?}"))
}
