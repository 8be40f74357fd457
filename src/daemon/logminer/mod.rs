//! The logminer (docs/design.md#logminer-ownership and the sections after it): reads `<prefix>.logs` in group
//! `<prefix>-logminer`, mines every log line into a template of its service, stores
//! templates and hits, and raises `new_template`, `spike` and `silence` alerts for the
//! services it owns, published to `<prefix>.alerts`. docs/logminer.md is the operator's
//! view; this is where each of its rules is kept:
//!
//! - **Offsets** are committed only after the hits and templates of the records before
//!   them are stored: rows leave the [`crate::workflow::ledger::TemplateLedger`] only once their insert succeeded, and
//!   the loop commits after that (`consumer.rs`).
//! - **Ownership** (`ownership.rs`): a replica owns the services whose logs it mined within
//!   `ownership_window_min`; every alert-raising query is filtered to them.
//! - **Rebalances** (`consumer.rs`): on a revoke, flush and commit, then one new-template
//!   pass for the services owned, bounded by `revoke_pass_timeout_secs`; on an assignment,
//!   a fresh miner loaded with every stored template, and owned services, partition clocks
//!   and spike state cleared. A service taken over first gets its active spikes back from
//!   `log_alerts`, so an ongoing spike keeps its id (`passes.rs`).
//! - **Watermarks** (`passes.rs`): one per partition in `logminer_state`; an assignment
//!   starts from the minimum over its partitions; every new-template pass moves the
//!   assigned partitions' keys to the pass time.
//! - **Prompt passes** (`prompt.rs`): a mined line that births a template or brings its
//!   minute to a spike threshold starts the detection pass at once (debounced, passes at
//!   least `prompt_pass_min_gap_ms` apart) instead of waiting for the tick.
//! - **Publication** (`publish.rs`): each alert version is stored, published and marked;
//!   after every detection pass, unmarked alerts of owned services from the last 24 h are
//!   republished, oldest first, at most 1,000, stopping at the first failed send.
//! - **Shapes** (`shapes.rs` the rules, pure; `shape_pass.rs`): every detection pass also
//!   judges the stored stories of the endpoints whose root service hashes to a held
//!   partition of the logs topic, raising `new_shape` and `shape_slowdown` through the same
//!   `AlertPublisher`, with a watermark per partition (`new_shape_watermark_ns:p<N>`).
//! - **Clean stop** (`consumer.rs`): whatever the loop was doing gives way at once; then a
//!   flush bounded by `shutdown_flush_timeout_secs` and a new-template pass bounded by
//!   `shutdown_pass_timeout_secs`.

mod consumer;
pub mod detect;
pub mod metrics;
mod ownership;
mod passes;
mod prompt;
mod publish;
pub mod shape_history;
pub mod shape_pass;
pub mod shapes;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::registry::Registry;
use serde_json::json;

use anyhow::Context as _;

use self::consumer::{Logminer, Replica};
use self::metrics::LogminerMetrics;
use crate::bus::consume::Group;
use crate::config::Config;
use crate::daemon::{DaemonSetup, HealthFn, Shutdown};

/// How often the loop stores the hits and templates it mined, and commits their offsets.
/// The daemon runs the default; tests stretch it to hold mined rows pending.
#[derive(Debug, Clone, Copy)]
pub struct Cadence {
    /// Stored at least this often, so offsets follow closely …
    pub flush_every: Duration,
    /// … or as soon as this many hits wait.
    pub flush_hits: usize,
}

impl Default for Cadence {
    fn default() -> Cadence {
        Cadence { flush_every: Duration::from_secs(1), flush_hits: 20_000 }
    }
}

/// This replica's id in heartbeats: `logminer.replica_id`, else the hostname (the
/// container's name under Compose).
pub fn replica_id(configured: &str) -> String {
    if !configured.trim().is_empty() {
        return configured.trim().to_string();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "logminer".to_string())
}

/// What `/health` shows: which partitions and services this replica has.
#[derive(Debug, Default, Clone)]
struct Status {
    partitions: Vec<i32>,
    owned: Vec<String>,
}

/// `tayga serve logminer`: the shared daemon start-up ([`crate::daemon::run`]) on
/// `logminer.metrics_addr`, then the consume loop until `shutdown`.
pub async fn serve(config: &Config, shutdown: Shutdown) -> anyhow::Result<()> {
    serve_with(config, Cadence::default(), shutdown).await
}

/// [`serve`] at another flush cadence.
pub async fn serve_with(config: &Config, cadence: Cadence, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = LogminerMetrics::new(&mut registry);
    let status = Arc::new(Mutex::new(Status::default()));
    let replica = replica_id(&config.logminer.replica_id);
    let health: HealthFn = {
        let status = status.clone();
        let replica = replica.clone();
        Arc::new(move || {
            let s = status.lock().unwrap().clone();
            json!({"status": "ok", "service": "logminer", "replica": replica,
                   "partitions": s.partitions, "owned_services": s.owned})
        })
    };
    let spec = DaemonSetup {
        group: Group::Logminer,
        metrics_addr: config.logminer.metrics_addr.clone(),
        registry,
        consumer: metrics.consumer.clone(),
        health,
    };
    crate::daemon::run(config, shutdown.clone(), spec, |store, member| {
        let publisher = member.publisher().cloned().context("the logminer's member publishes");
        let replica = Replica { id: replica, cadence, metrics, status, shutdown };
        async move { Logminer::start(config, store, publisher?, replica).await }
    })
    .await
}
