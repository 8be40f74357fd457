//! `tayga serve <service>`: runs one daemon, or with `all` every daemon this build has, in
//! one process. Each daemon prepares what it needs (topics, schema) at start, serves
//! `/health` and `/metrics`, and stops cleanly on SIGTERM or SIGINT.

use clap::ValueEnum;
use tokio::task::JoinSet;

use super::Reported;
use crate::cli::Service;
use crate::config::{Config, Loaded};
use crate::daemon::{self, Shutdown};

/// The services this build can run, in start order. `serve all` runs exactly these.
pub const AVAILABLE: &[Service] =
    &[Service::Ingest, Service::Writer, Service::Assembler, Service::Logminer, Service::Notifier, Service::Api];

pub async fn run(loaded: Loaded, service: Service) -> anyhow::Result<()> {
    let config = loaded.config;
    if service != Service::All && !AVAILABLE.contains(&service) {
        anyhow::bail!("`tayga serve {}` is not in this build yet", name(service));
    }
    let problems = config.validate();
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("config: {problem}");
        }
        return Err(Reported(format!("the configuration has {} problem(s)", problems.len())).into());
    }
    let shutdown = Shutdown::new();
    shutdown.trigger_on_signals()?;
    let services: Vec<Service> = if service == Service::All { AVAILABLE.to_vec() } else { vec![service] };
    tracing::info!(services = ?services.iter().map(|s| name(*s)).collect::<Vec<_>>(), version = env!("CARGO_PKG_VERSION"), "starting");

    let mut tasks = JoinSet::new();
    for s in services {
        let config = config.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move { (s, serve_one(s, &config, shutdown).await) });
    }
    let mut failed = None;
    while let Some(joined) = tasks.join_next().await {
        let (s, result) = joined.map_err(|e| anyhow::anyhow!("a service task failed: {e}"))?;
        if let Err(e) = result {
            tracing::error!(service = name(s), error = format!("{e:#}"), "service failed");
            // One service down takes the process down, so the supervisor restarts it whole.
            shutdown.trigger();
            failed.get_or_insert_with(|| e.context(format!("tayga serve {}", name(s))));
        }
    }
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

fn name(service: Service) -> String {
    service.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_else(|| format!("{service:?}"))
}
