//! The logminer's loop: it reads `<prefix>.logs`, mines every record into the [`Book`],
//! stores what was mined and then commits the offsets it covers, applies the group's
//! rebalances in order (docs/design.md#logminer-rebalances), runs the detection pass every tick, and
//! stops cleanly within its bounds (docs/design.md#logminer-shutdown).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaResult;
use rdkafka::message::{Message, OwnedMessage};

use super::book::Book;
use super::detect::{Rules, Spikes};
use super::metrics::LogminerMetrics;
use super::ownership::Ownership;
use super::publish::Outbox;
use super::{Cadence, Status};
use crate::bus::consume::{self, commit_moved, Group, LagRefresher, LoggedConsumer, Rebalanced};
use crate::bus::producer::Publisher;
use crate::config::Names;
use crate::config::{Config, LogminerConfig};
use crate::daemon::Shutdown;
use crate::otlp::flatten::log_rows;
use crate::store::logminer::{self as lm, State};
use crate::store::{now_ns, Store};
use crate::wire::record::{self, SignalPayload};

/// Reading pauses while this many hits wait (ClickHouse down): memory stays bounded.
const MAX_PENDING_HITS: usize = 200_000;

/// One replica's state. The passes (`passes.rs`) work on it too.
pub(super) struct Logminer {
    pub(super) config: Config,
    pub(super) names: Names,
    pub(super) replica: String,
    pub(super) store: Store,
    pub(super) consumer: Arc<LoggedConsumer>,
    pub(super) lag: LagRefresher,
    pub(super) book: Book,
    pub(super) rules: Rules,
    pub(super) metrics: LogminerMetrics,
    pub(super) status: Arc<Mutex<Status>>,
    pub(super) shutdown: Shutdown,
    pub(super) ownership: Ownership,
    pub(super) outbox: Outbox,
    /// Per partition, the offset after the last record mined (what a commit would store).
    pub(super) mined_up_to: BTreeMap<i32, i64>,
    pub(super) committed: BTreeMap<i32, i64>,
    pub(super) spikes: HashMap<String, Spikes>,
    /// Where the next new-template pass starts.
    pub(super) watermark: u64,
    pub(super) newest_ingest_ns: u64,
}

/// What woke the loop.
enum Wake {
    Pass,
    Flush,
    Message(KafkaResult<OwnedMessage>),
}

/// Consumes until `shutdown`, then stops cleanly.
pub(super) async fn run(
    config: &Config,
    cadence: Cadence,
    replica: String,
    metrics: LogminerMetrics,
    status: Arc<Mutex<Status>>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let names = config.names();
    let store = Store::new(&config.clickhouse);
    let book = Book::new(config.logminer.mining()).context("the [logminer.masking] settings are not usable")?;
    start_up(&store, &config.logminer, book.masking_version()).await?;
    let consumer = consume::subscribe(&config.kafka, &names, Group::Logminer, metrics.consumer.clone())?;
    let lag = LagRefresher::new(&config.kafka, &names, Group::Logminer, metrics.consumer.clone())
        .context("creating the Kafka client that reads the lag")?;
    let publisher = Publisher::new(&config.kafka).context("creating the Kafka producer")?;
    tracing::info!(topic = %names.logs, group = %names.logminer_group, replica = %replica,
        masking_version = book.masking_version(), tick_secs = config.logminer.tick_secs, "logminer started");
    let mut m = Logminer {
        config: config.clone(),
        outbox: Outbox::new(publisher, names.alerts.clone()),
        names,
        replica,
        store,
        consumer,
        lag,
        book,
        rules: Rules::from_config(&config.logminer),
        metrics,
        status,
        shutdown,
        ownership: Ownership::default(),
        mined_up_to: BTreeMap::new(),
        committed: BTreeMap::new(),
        spikes: HashMap::new(),
        watermark: 0,
        newest_ingest_ns: 0,
    };
    m.consume(cadence).await;
    m.stop().await;
    Ok(())
}

/// Start-up chores: heartbeats older than a day go (docs/design.md#watermarks), and the masking epoch is
/// checked. A changed rule set starts a new epoch: templates mined under the old one are
/// not loaded, so its lines are mined afresh; `tayga remine` rebuilds the history.
async fn start_up(store: &Store, config: &LogminerConfig, masking_version: &str) -> anyhow::Result<()> {
    let now = now_ns();
    lm::delete_heartbeats_before(store, now.saturating_sub(config.heartbeat_expire_secs.saturating_mul(1_000_000_000)))
        .await
        .context("deleting old heartbeats from logminer_state")?;
    let state = State::load(store).await.context("reading logminer_state")?;
    match state.masking_epoch() {
        Some((version, _)) if version == masking_version => {}
        previous => {
            if let Some((old, _)) = &previous {
                tracing::warn!(old = %old, new = masking_version,
                    "the masking rules changed: a new masking epoch starts now; templates of the old rules are not reused; run `tayga remine` (with the logminers stopped) to rebuild templates from stored logs");
            }
            lm::write_state(
                store,
                &[
                    (lm::MASKING_VERSION.into(), masking_version.into()),
                    (lm::MASKING_EPOCH_START.into(), now.to_string()),
                ],
                now,
            )
            .await
            .context("writing the masking epoch to logminer_state")?;
        }
    }
    Ok(())
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Runs `work` unless `shutdown` comes first. Work cut short this way loses nothing:
/// rows leave the book only once stored, and offsets are committed only after that.
async fn unless_stopped(shutdown: &Shutdown, work: impl Future<Output = ()>) -> bool {
    tokio::select! {
        biased;
        _ = shutdown.triggered() => false,
        _ = work => true,
    }
}

impl Logminer {
    /// Reads, mines, flushes and runs passes until shutdown. Whatever is under way gives
    /// way to the shutdown, so the clean stop starts at once, even while ClickHouse hangs.
    async fn consume(&mut self, cadence: Cadence) {
        let shutdown = self.shutdown.clone();
        let mut flush_tick = tokio::time::interval(cadence.flush_every);
        flush_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pass_tick = tokio::time::interval(secs(self.config.logminer.tick_secs.max(1)));
        pass_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        pass_tick.tick().await;
        loop {
            let reading = self.book.pending_hits() < MAX_PENDING_HITS;
            let wake = tokio::select! {
                biased;
                _ = shutdown.triggered() => return,
                _ = pass_tick.tick() => Wake::Pass,
                _ = flush_tick.tick() => Wake::Flush,
                message = self.consumer.recv(), if reading => Wake::Message(message.map(|m| m.detach())),
            };
            let work = async {
                match wake {
                    Wake::Pass => {
                        self.apply_changes().await;
                        self.detection_pass().await;
                    }
                    Wake::Flush => {
                        self.apply_changes().await;
                        self.flush().await;
                        self.refresh_lag();
                    }
                    Wake::Message(Err(e)) => {
                        self.metrics.consumer.consume_error(&self.names.logs, &e);
                        self.shutdown.sleep(Duration::from_millis(500)).await;
                    }
                    Wake::Message(Ok(message)) => {
                        self.apply_changes().await;
                        // Read before a revoke we have applied: its next owner reads it.
                        if self.ownership.is_assigned(message.partition()) {
                            self.mine_record(&message);
                            if self.book.pending_hits() >= cadence.flush_hits {
                                self.flush().await;
                            }
                        }
                    }
                }
            };
            if !unless_stopped(&shutdown, work).await {
                return;
            }
        }
    }

    /// Mines one record's logs and notes the services as owned.
    fn mine_record(&mut self, message: &OwnedMessage) {
        self.metrics.consumer.consumed();
        let partition = message.partition();
        self.mined_up_to.insert(partition, message.offset() + 1);
        let undecodable = |error: &dyn std::fmt::Display| {
            self.metrics.consumer.undecodable(&self.names.logs, partition, message.offset(), error)
        };
        let record = match record::decode(message.headers().map(|h| h.as_borrowed()), message.payload().or(Some(&[]))) {
            Ok(r) => r,
            Err(e) => return undecodable(&e),
        };
        let SignalPayload::Logs(request) = &record.payload else {
            return undecodable(&"a traces record on the logs topic");
        };
        let now = now_ns();
        let at = Instant::now();
        self.newest_ingest_ns = self.newest_ingest_ns.max(record.ingest_ns);
        for row in log_rows(request, record.ingest_ns) {
            self.ownership.mined(&row.service, partition, row.time_ns, now, at);
            let mined = self.book.mine(&row.service, row.log_id, row.time_ns, &row.body, now);
            if mined.absorbed > 0 {
                self.metrics.merged(&row.service, mined.template_id, mined.absorbed);
            }
            self.metrics.mined();
        }
    }

    /// Stores pending hits and templates, then commits the offsets they cover. False when
    /// storing failed. The rows leave the book only once their insert succeeded, so a
    /// flush that fails or is abandoned (a timeout, a shutdown) leaves them pending and
    /// their offsets uncommitted; the next flush stores them (docs/design.md#identity: offsets are
    /// committed only for records whose hits and templates are stored).
    pub(super) async fn flush(&mut self) -> bool {
        let pending = self.book.pending(now_ns());
        if !pending.is_empty() {
            let receipt = pending.receipt();
            if let Err(e) = lm::store_mined(&self.store, pending.rows()).await {
                self.metrics.store_failed("storing hits, merges and templates", &e);
                return false;
            }
            self.book.stored(receipt);
        }
        self.commit().await;
        self.gauges();
        true
    }

    /// A flush within `shutdown_flush_timeout_secs` (a revoke's, a stop's). False when it
    /// failed or ran out of time: its rows stay pending.
    async fn bounded_flush(&mut self) -> bool {
        let bound = secs(self.config.logminer.shutdown_flush_timeout_secs);
        matches!(tokio::time::timeout(bound, self.flush()).await, Ok(true))
    }

    /// Commits, for every partition mined, the offset after its last stored record. A
    /// commit after a revoke may be refused: the records are then read again (harmless).
    async fn commit(&mut self) {
        let offsets: Vec<(i32, i64)> = self.mined_up_to.iter().map(|(p, o)| (*p, *o)).collect();
        commit_moved(&self.consumer, &self.names.logs, offsets, &mut self.committed).await;
    }

    /// Applies the rebalances the consumer reported, in order.
    async fn apply_changes(&mut self) {
        let changes = self.consumer.context().take();
        for change in changes {
            match change {
                Rebalanced::Revoked(partitions) => self.revoked(partitions).await,
                Rebalanced::Assigned(partitions) => self.assigned(partitions).await,
            }
        }
    }

    async fn revoked(&mut self, partitions: Vec<i32>) {
        tracing::info!(?partitions, "partitions revoked: flushing, then one new-template pass");
        if !self.bounded_flush().await {
            tracing::warn!("the flush before the revoke did not complete: the records will be read again");
        }
        self.bounded_new_template_pass("revoke", secs(self.config.logminer.revoke_pass_timeout_secs)).await;
        for p in &partitions {
            self.mined_up_to.remove(p);
            self.committed.remove(p);
        }
        self.ownership.revoke(&partitions);
        self.gauges();
    }

    async fn assigned(&mut self, partitions: Vec<i32>) {
        let assigned = self.ownership.assign(&partitions);
        self.spikes.clear();
        // A fresh miner with every stored template: another replica may have mined our new
        // services' logs until now.
        loop {
            match self.reload().await {
                Ok(()) => break,
                Err(e) => {
                    self.metrics.store_failed("reloading templates after an assignment", &format!("{e:#}"));
                    if !self.shutdown.sleep(Duration::from_secs(1)).await {
                        return;
                    }
                }
            }
        }
        tracing::info!(?partitions, assigned = ?assigned, templates = self.book.template_count(),
            watermark_ns = self.watermark, "partitions assigned: templates reloaded");
        self.gauges();
    }

    async fn reload(&mut self) -> anyhow::Result<()> {
        let mut book = Book::new(self.config.logminer.mining())?;
        let rows = lm::load_templates(&self.store, book.masking_version()).await?;
        let merges = lm::load_merges(&self.store, book.masking_version()).await?;
        book.restore(rows, merges);
        let state = State::load(&self.store).await?;
        // Every partition was revoked before this assignment (eager rebalancing), so rows
        // the old book could not store belong to revoked partitions: never committed by
        // this replica, they are read again by the partitions' next owner.
        self.book = book;
        self.watermark = state.watermark(&self.ownership.partitions());
        Ok(())
    }

    pub(super) fn gauges(&self) {
        let data_lag =
            (self.newest_ingest_ns > 0).then(|| Duration::from_nanos(now_ns().saturating_sub(self.newest_ingest_ns)));
        self.metrics.holds(self.book.template_count(), self.ownership.owned_count(), data_lag);
        let partitions = self.ownership.partitions();
        let mut status = self.status.lock().unwrap();
        status.partitions = partitions;
        status.owned = self.ownership.services();
    }

    /// Lag: over the assigned partitions, high watermark − committed offset (in the
    /// background, when due).
    fn refresh_lag(&self) {
        let parts = self.ownership.partitions().into_iter().map(|p| (p, self.committed.get(&p).copied())).collect();
        self.lag.refresh_when_due(parts);
    }

    /// Clean stop (docs/design.md#logminer-shutdown): flush bounded at 15 s, then one new-template pass bounded at
    /// 20 s, so a template mined just before the stop is still announced.
    async fn stop(mut self) {
        let started = Instant::now();
        // Rebalances reported meanwhile, so the final flush commits only partitions still
        // held; within the flush bound, as a hung ClickHouse would hold a reload forever.
        let bound = secs(self.config.logminer.shutdown_flush_timeout_secs);
        if tokio::time::timeout(bound, self.apply_changes()).await.is_err() {
            tracing::warn!("applying the last rebalance at shutdown ran out of time");
        }
        if self.bounded_flush().await {
            self.bounded_new_template_pass("shutdown", secs(self.config.logminer.shutdown_pass_timeout_secs)).await;
        } else {
            tracing::warn!(
                "the flush at shutdown did not complete: unstored records will be read again; no final pass"
            );
        }
        self.outbox.flush(Duration::from_secs(5));
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "logminer stopped");
        let consumer = self.consumer.clone();
        drop(self);
        consume::leave(consumer).await;
    }
}
