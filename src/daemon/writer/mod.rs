//! The writer (DESIGN.md §6, seed 001 adapted): reads `<prefix>.signals` in group
//! `<prefix>-writer` and stores every span and log in ClickHouse, at least once and
//! deduplicated at the store. docs/writer.md describes it for operators.
//!
//! - [`batch`]: what was read and not yet stored, the offsets to commit, the retry backoff
//!   (pure, unit-tested).
//! - [`sink`]: the inserts, batched (18.16) or one per record with deduplication tokens
//!   (current ClickHouse), chosen at start-up.
//! - [`consumer`]: the consumer loop, pause while ClickHouse is down, commits, revokes.
//! - [`metrics`]: the Prometheus metrics.
//! - this file: start-up (topics, schema, mode), `/health` and `/metrics`, the retention
//!   sweep the writer owns (ARCHITECTURE.md, "Retention").

pub mod batch;
pub mod consumer;
pub mod metrics;
pub mod sink;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::registry::Registry;
use serde_json::json;

use self::metrics::{ErrorKind, WriterMetrics};
use self::sink::{InsertMode, Sink};
use crate::config::Config;
use crate::daemon::{retry_at_start, serve_http, HealthFn, Shutdown};
use crate::store::Store;

/// `tayga serve writer`: prepares topics and schema, chooses the insert mode, serves
/// `/health` and `/metrics` on `writer.metrics_addr`, runs the retention sweep, and consumes
/// until `shutdown`, when it stores and commits what it has read and leaves the group.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = WriterMetrics::new(&mut registry);
    let mode = Arc::new(std::sync::Mutex::new(None::<InsertMode>));
    let health: HealthFn = {
        let state = metrics.state.clone();
        let mode = mode.clone();
        Arc::new(move || {
            let down = state.clickhouse_down.load(Ordering::Relaxed);
            json!({
                "status": if down { "degraded" } else { "ok" },
                "service": "writer",
                "clickhouse": if down { "down" } else { "up" },
                "insert_mode": mode.lock().unwrap().map(InsertMode::as_str),
                "assigned_partitions": state.assigned.load(Ordering::Relaxed),
            })
        })
    };
    let (_, http) = serve_http(&config.writer.metrics_addr, Arc::new(registry), health, shutdown.clone()).await?;
    let result = async {
        let store = crate::daemon::prepare(&config, &shutdown).await?;
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
        let retention = tokio::spawn(retention_loop(config.clone(), metrics.clone(), shutdown.clone()));
        let lag = tokio::spawn(lag_loop(config.clone(), metrics.clone(), shutdown.clone()));
        let result = consume(&config, chosen, metrics.clone(), shutdown.clone()).await;
        shutdown.trigger();
        let _ = retention.await;
        let _ = lag.await;
        result
    }
    .await;
    // Stop the HTTP server too when the writer ends on an error.
    shutdown.trigger();
    let _ = http.await;
    result
}

/// Runs the consumer on a thread of its own (see [`consumer`]) and waits for it.
async fn consume(config: &Config, mode: InsertMode, metrics: WriterMetrics, shutdown: Shutdown) -> anyhow::Result<()> {
    let names = config.names();
    // A Store of its own: its connection pool lives on the consumer thread's runtime.
    let sink = Sink { store: Store::new(&config.clickhouse), mode, topic: names.signals.clone(), metrics };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let kafka = config.kafka.clone();
    let writer = config.writer.clone();
    let on_panic = shutdown.clone();
    std::thread::Builder::new()
        .name("tayga-writer".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                consumer::run_consumer(&kafka, &names, &writer, sink, shutdown)
            }));
            let result = result.unwrap_or_else(|_| Err(anyhow::anyhow!("the writer's consumer thread panicked")));
            if result.is_err() {
                on_panic.trigger();
            }
            let _ = tx.send(result);
        })
        .context("starting the writer's consumer thread")?;
    rx.await.unwrap_or_else(|_| Err(anyhow::anyhow!("the writer's consumer thread ended without a result")))
}

/// How often the lag gauge is refreshed.
const LAG_REFRESH: Duration = Duration::from_secs(5);

/// Sets `tayga_writer_lag_records` every few seconds: over every partition of the signals
/// topic, high watermark − the group's committed offset (what the group has not stored yet).
/// Runs on a client of its own (it never joins the group), off the consumer thread, whose
/// polling it must never delay.
async fn lag_loop(config: Config, metrics: WriterMetrics, shutdown: Shutdown) {
    loop {
        let kafka = config.kafka.clone();
        let names = config.names();
        let lag = tokio::task::spawn_blocking(move || group_lag(&kafka, &names)).await;
        match lag {
            Ok(Ok(lag)) => {
                metrics.lag.set(lag);
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "reading the writer group's lag failed"),
            Err(_) => {}
        }
        if !shutdown.sleep(LAG_REFRESH).await {
            return;
        }
    }
}

fn group_lag(kafka: &crate::config::KafkaConfig, names: &crate::bus::Names) -> anyhow::Result<i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let timeout = Duration::from_secs(2);
    let consumer: BaseConsumer = crate::bus::client_config(kafka)
        .set("group.id", &names.writer_group)
        .set("enable.auto.commit", "false")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(&names.signals), timeout)?;
    let partitions = metadata.topics().first().map_or(0, |t| t.partitions().len() as i32);
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(&names.signals, p);
    }
    let committed = consumer.committed_offsets(tpl, timeout)?;
    let mut lag = 0;
    for p in 0..partitions {
        let (low, high) = consumer.fetch_watermarks(&names.signals, p, timeout)?;
        let done = match committed.find_partition(&names.signals, p).map(|e| e.offset()) {
            Some(rdkafka::Offset::Offset(o)) => o.max(low),
            _ => low,
        };
        lag += (high - done).max(0);
    }
    Ok(lag)
}

/// Drops expired day partitions every `retention.interval_secs`, starting at once.
async fn retention_loop(config: Config, metrics: WriterMetrics, shutdown: Shutdown) {
    let store = Store::new(&config.clickhouse);
    let interval = Duration::from_secs(config.retention.interval_secs.max(1));
    loop {
        let now_secs = crate::store::now_ns() / 1_000_000_000;
        match crate::store::retention::drop_expired(&store, &config.retention, now_secs).await {
            Ok(dropped) => {
                for d in &dropped {
                    tracing::info!(table = %d.table, partition = %d.partition, "retention: dropped an expired day partition");
                }
                metrics.partitions_dropped.inc_by(dropped.len() as u64);
            }
            Err(e) => {
                metrics.error(ErrorKind::retention);
                tracing::warn!(error = %e, "retention sweep failed; it runs again at the next interval");
            }
        }
        if !shutdown.sleep(interval).await {
            return;
        }
    }
}
