//! The writer (docs/design.md#writer): reads `<prefix>.signals` in group
//! `<prefix>-writer` and stores every span and log in ClickHouse, at least once and
//! deduplicated at the store. docs/writer.md describes it for operators.
//!
//! - [`batch`]: what was read and not yet stored, the offsets to commit, the retry backoff
//!   (pure, unit-tested).
//! - [`sink`]: the inserts, batched (18.16) or one per record with deduplication tokens
//!   (current ClickHouse), chosen at start-up.
//! - [`consumer`]: the writer as a handler of the one consume loop: batches, commits,
//!   retries while ClickHouse is down, revokes.
//! - [`metrics`]: what the writer reports (each event logs and counts).
//! - this file: start-up on the shared daemon runtime, the insert mode, `/health`, the
//!   retention sweep the writer owns (ARCHITECTURE.md, "Retention").

pub mod batch;
pub mod consumer;
pub mod metrics;
pub mod sink;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use serde_json::json;

use self::consumer::Writer;
use self::metrics::WriterMetrics;
use self::sink::{InsertMode, Sink};
use crate::bus::consume::Group;
use crate::config::{Config, RetentionConfig};
use crate::daemon::{retry_at_start, DaemonSetup, HealthFn, Shutdown};
use crate::store::Store;

/// `tayga serve writer`: the shared daemon start-up and consume loop
/// ([`crate::daemon::run`]) on `writer.metrics_addr`; it chooses the insert mode,
/// runs the retention sweep, and consumes until `shutdown`, when it stores and commits what
/// it has read and leaves the group.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = WriterMetrics::new(&mut registry);
    let mode = Arc::new(std::sync::Mutex::new(None::<InsertMode>));
    let health: HealthFn = {
        let metrics = metrics.clone();
        let mode = mode.clone();
        Arc::new(move || {
            let down = metrics.is_clickhouse_down();
            json!({
                "status": if down { "degraded" } else { "ok" },
                "service": "writer",
                "clickhouse": if down { "down" } else { "up" },
                "insert_mode": mode.lock().unwrap().map(InsertMode::as_str),
                "assigned_partitions": metrics.consumer.assigned_partitions.get(),
            })
        })
    };
    let spec = DaemonSetup {
        group: Group::Writer,
        metrics_addr: config.writer.metrics_addr.clone(),
        registry,
        consumer: metrics.consumer.clone(),
        health,
    };
    crate::daemon::run(&config, shutdown.clone(), spec, |store, member| {
        let topic = member.topic().to_string();
        let (retention, writer) = (config.retention.clone(), config.writer.clone());
        async move {
            let chosen = retry_at_start(
                "choosing the insert mode",
                crate::daemon::START_LIMIT,
                Duration::from_secs(1),
                &shutdown,
                || sink::choose_mode(&store),
            )
            .await?;
            *mode.lock().unwrap() = Some(chosen);
            tracing::info!(mode = chosen.as_str(), "insert mode chosen");
            let sweep = tokio::spawn(retention_loop(store.clone(), retention, metrics.clone(), shutdown.clone()));
            let sink = Sink { store, mode: chosen, topic, metrics };
            Ok(Writer::new(sink, &writer, sweep))
        }
    })
    .await
}

/// Drops expired day partitions every `retention.interval_secs`, starting at once.
async fn retention_loop(store: Store, retention: RetentionConfig, metrics: WriterMetrics, shutdown: Shutdown) {
    let interval = Duration::from_secs(retention.interval_secs.max(1));
    loop {
        let now_secs = crate::store::now_ns() / 1_000_000_000;
        match crate::store::retention::drop_expired(&store, &retention, now_secs).await {
            Ok(dropped) => metrics.partitions_dropped(&dropped),
            Err(e) => metrics.retention_failed(&e),
        }
        if !shutdown.sleep(interval).await {
            return;
        }
    }
}
