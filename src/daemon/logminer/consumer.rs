//! The logminer as the consume loop drives it ([`crate::bus::consume::Handler`]): it mines
//! every record of `<prefix>.logs` into the [`TemplateLedger`], stores what was mined and then commits
//! the offsets it covers, applies the group's rebalances (docs/design.md#logminer-rebalances), runs the
//! detection pass every `tick_secs` and as soon as a mined line can raise an alert
//! (`prompt.rs`), and stops cleanly within its bounds
//! (docs/design.md#logminer-shutdown).

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use rdkafka::message::{Message, OwnedMessage};
use tokio::time::Instant;

use super::detect::{Rules, Spikes};
use super::metrics::LogminerMetrics;
use super::ownership::Ownership;
use super::prompt::{PromptPasses, SpikeWatch};
use super::publish::AlertPublisher;
use super::shapes::ShapeRules;
use super::{Cadence, Status};
use crate::bus::consume::{apply_rebalances, Handler, Member};
use crate::bus::producer::Publisher;
use crate::config::{Config, LogminerConfig};
use crate::daemon::Shutdown;
use crate::otlp::flatten::log_rows;
use crate::store::logminer::{self as lm, State};
use crate::store::{now_ns, Store};
use crate::wire::record::{self, SignalPayload};
use crate::workflow::ledger::TemplateLedger;

/// One replica's state. The passes (`passes.rs`) work on it too.
pub(super) struct Logminer {
    pub(super) config: Config,
    pub(super) replica: String,
    pub(super) store: Store,
    pub(super) ledger: TemplateLedger,
    pub(super) rules: Rules,
    pub(super) metrics: LogminerMetrics,
    pub(super) status: Arc<Mutex<Status>>,
    pub(super) shutdown: Shutdown,
    pub(super) ownership: Ownership,
    pub(super) alert_publisher: AlertPublisher,
    cadence: Cadence,
    /// When the next flush and the next periodic detection pass are due.
    next_flush: Instant,
    next_pass: Instant,
    /// A detection pass a mined line asked for, and the spike thresholds lines are
    /// watched for (both idle with `prompt_passes = false`).
    prompt: PromptPasses,
    pub(super) spike_watch: SpikeWatch,
    /// Per partition, the offset after the last record mined (what a commit would store).
    pub(super) mined_up_to: BTreeMap<i32, i64>,
    pub(super) spikes: HashMap<String, Spikes>,
    /// Where the next new-template pass starts.
    pub(super) watermark: u64,
    pub(super) newest_ingest_ns: u64,
    /// The shape rules, the new-shape watermark (none until the first pass when no held
    /// partition has one), the logs topic's partition count (which partition a root service
    /// hashes to: 0 while unknown, and no shape is judged) and the root services judged.
    pub(super) shape_rules: ShapeRules,
    pub(super) shape_watermark: Option<u64>,
    pub(super) logs_partitions: i32,
    pub(super) shape_roots: Vec<String>,
    /// What earlier shape passes read (`shape_history.rs`).
    pub(super) shape_history: super::shape_history::ShapeHistory,
    /// Since when reading has paused at `logminer.max_pending_hits` (none while it reads),
    /// so the pause and the resumption are each reported once.
    paused_since: Option<std::time::Instant>,
}

/// What `serve` prepares for a replica before the store and the member exist.
pub(super) struct Replica {
    pub(super) id: String,
    pub(super) cadence: Cadence,
    pub(super) metrics: LogminerMetrics,
    pub(super) status: Arc<Mutex<Status>>,
    pub(super) shutdown: Shutdown,
}

impl Logminer {
    /// Does the start-up chores on `store`, then makes the replica that publishes its
    /// alerts through `publisher`.
    pub(super) async fn start(
        config: &Config,
        store: Store,
        publisher: Publisher,
        replica: Replica,
    ) -> anyhow::Result<Logminer> {
        let Replica { id: replica, cadence, metrics, status, shutdown } = replica;
        let ledger =
            TemplateLedger::new(config.logminer.mining()).context("the [logminer.masking] settings are not usable")?;
        start_up(&store, &config.logminer, ledger.masking_version()).await?;
        tracing::info!(replica = %replica, masking_version = ledger.masking_version(),
            tick_secs = config.logminer.tick_secs, "logminer replica {replica} mining");
        let now = Instant::now();
        Ok(Logminer {
            config: config.clone(),
            alert_publisher: AlertPublisher::new(publisher, config.names().alerts),
            replica,
            store,
            ledger,
            rules: Rules::from_config(&config.logminer),
            metrics,
            status,
            shutdown,
            ownership: Ownership::default(),
            cadence,
            next_flush: now,
            next_pass: now + pass_every(&config.logminer),
            prompt: PromptPasses::new(Duration::from_millis(config.logminer.prompt_pass_min_gap_ms)),
            spike_watch: SpikeWatch::default(),
            mined_up_to: BTreeMap::new(),
            spikes: HashMap::new(),
            watermark: 0,
            newest_ingest_ns: 0,
            shape_rules: ShapeRules::from_config(&config.logminer.shapes),
            shape_watermark: None,
            logs_partitions: 0,
            shape_roots: Vec::new(),
            shape_history: Default::default(),
            paused_since: None,
        })
    }
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

fn pass_every(config: &LogminerConfig) -> Duration {
    secs(config.tick_secs.max(1))
}

/// The deadline after `due`, `every` later; one that has passed already starts from `now`
/// (a late tick is not followed by a burst of catching up).
fn next_after(due: Instant, every: Duration, now: Instant) -> Instant {
    let next = due + every;
    if next <= now {
        now + every
    } else {
        next
    }
}

/// Reads, mines, flushes and runs passes until shutdown. Whatever is under way gives way
/// to the shutdown, so the clean stop starts at once, even while ClickHouse hangs: work cut
/// short this way loses nothing, as rows leave the ledger only once stored, and offsets are
/// committed only after that.
impl Handler for Logminer {
    fn tick_every(&self) -> Duration {
        self.cadence.flush_every.min(pass_every(&self.config.logminer))
    }

    fn wake_at(&self) -> Option<Instant> {
        self.prompt.due()
    }

    /// Memory stays bounded while ClickHouse is down: past `logminer.max_pending_hits`
    /// the records wait in the topic (the group's lag grows) until a flush stores the hits.
    fn wants_records(&self) -> bool {
        !self.pending_full()
    }

    fn gives_way_to_stop(&self) -> bool {
        true
    }

    async fn record(&mut self, member: &mut Member, message: OwnedMessage) -> ControlFlow<()> {
        self.mine_record(member, &message);
        // At the bound, a flush at once rather than at the tick: reading waits on it.
        if self.ledger.pending_hits() >= self.cadence.flush_hits || self.pending_full() {
            self.flush(member).await;
        }
        self.note_pending();
        ControlFlow::Continue(())
    }

    /// The detection pass when due (periodic or asked for), then the flush when due.
    async fn tick(&mut self, member: &mut Member) {
        let now = Instant::now();
        let periodic = now >= self.next_pass;
        if periodic || self.prompt.is_due(now) {
            if periodic {
                self.next_pass = next_after(self.next_pass, pass_every(&self.config.logminer), now);
            }
            self.prompt.started(now);
            self.detection_pass(member, if periodic { "detection" } else { "prompt" }).await;
        }
        if now >= self.next_flush {
            self.next_flush = next_after(self.next_flush, self.cadence.flush_every, now);
            self.flush(member).await;
        }
    }

    /// Flush and commit, then one new-template pass for the services owned, bounded.
    async fn revoked(&mut self, member: &mut Member, partitions: &[i32]) {
        tracing::info!(?partitions, "partitions revoked: flushing, then one new-template pass");
        if !self.bounded_flush(member).await {
            tracing::warn!("the flush before the revoke did not complete: the records will be read again");
        }
        let bound = secs(self.config.logminer.revoke_pass_timeout_secs);
        self.bounded_new_template_pass(member, "revoke", bound).await;
        for p in partitions {
            self.mined_up_to.remove(p);
        }
        self.ownership.revoke(partitions);
        self.gauges();
    }

    async fn assigned(&mut self, member: &mut Member, partitions: &[i32]) {
        let assigned = self.ownership.assign(partitions);
        // The count decides which partition each root service hashes to; the broker knows
        // it (the topic may predate `kafka.partitions`), the configuration is the fallback.
        self.logs_partitions = member.partition_count(Duration::from_secs(5)).unwrap_or(self.config.kafka.partitions);
        self.spikes.clear();
        self.spike_watch.clear();
        // A fresh miner with every stored template: another replica may have mined our new
        // services' logs until now.
        loop {
            match self.reload().await {
                Ok(()) => {
                    self.note_pending();
                    break;
                }
                Err(e) => {
                    self.metrics.store_failed("reloading templates after an assignment", &format!("{e:#}"));
                    if !self.shutdown.sleep(Duration::from_secs(1)).await {
                        return;
                    }
                }
            }
        }
        tracing::info!(?partitions, assigned = ?assigned, templates = self.ledger.template_count(),
            watermark_ns = self.watermark, "partitions assigned: templates reloaded");
        self.gauges();
    }

    /// Clean stop (docs/design.md#logminer-shutdown): flush bounded at 15 s, then one new-template pass bounded at
    /// 20 s, so a template mined just before the stop is still announced.
    async fn stop(&mut self, member: &mut Member) {
        let started = std::time::Instant::now();
        // Rebalances reported meanwhile, so the final flush commits only partitions still
        // held; within the flush bound, as a hung ClickHouse would hold a reload forever.
        let bound = secs(self.config.logminer.shutdown_flush_timeout_secs);
        if tokio::time::timeout(bound, apply_rebalances(member, self)).await.is_err() {
            tracing::warn!("applying the last rebalance at shutdown ran out of time");
        }
        if self.bounded_flush(member).await {
            let bound = secs(self.config.logminer.shutdown_pass_timeout_secs);
            self.bounded_new_template_pass(member, "shutdown", bound).await;
        } else {
            tracing::warn!(
                "the flush at shutdown did not complete: unstored records will be read again; no final pass"
            );
        }
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "logminer stopped");
    }
}

impl Logminer {
    /// Mines one record's logs and notes the services as owned.
    fn mine_record(&mut self, member: &Member, message: &OwnedMessage) {
        let partition = message.partition();
        self.mined_up_to.insert(partition, message.offset() + 1);
        let undecodable = |error: &dyn std::fmt::Display| {
            member.metrics().undecodable(member.topic(), partition, message.offset(), error)
        };
        let record = match record::decode(message.headers().map(|h| h.as_borrowed()), message.payload().or(Some(&[]))) {
            Ok(r) => r,
            Err(e) => return undecodable(&e),
        };
        let SignalPayload::Logs(request) = &record.payload else {
            return undecodable(&"a traces record on the logs topic");
        };
        let now = now_ns();
        let at = std::time::Instant::now();
        self.newest_ingest_ns = self.newest_ingest_ns.max(record.ingest_ns);
        let prompt = self.config.logminer.prompt_passes;
        let mut can_alert = false;
        for row in log_rows(request, record.ingest_ns) {
            self.ownership.mined(&row.service, partition, row.time_ns, now, at);
            let mined = self.ledger.mine(&row.service, row.log_id, row.time_ns, &row.body, now);
            if mined.absorbed > 0 {
                self.metrics.merged(&row.service, mined.template_id, mined.absorbed);
            }
            if mined.evicted_template || mined.evicted_service.is_some() {
                self.metrics.made_room(&row.service, mined.evicted_template, mined.evicted_service);
            }
            can_alert |= prompt && (mined.new || self.spike_watch.hit(&row.service, mined.template_id, row.time_ns));
            self.metrics.mined();
        }
        if can_alert {
            self.prompt.request(Instant::now());
        }
    }

    /// Stores pending hits and templates, then commits the offsets they cover. False when
    /// storing failed. The rows leave the ledger only once their insert succeeded, so a
    /// flush that fails or is abandoned (a timeout, a shutdown) leaves them pending and
    /// their offsets uncommitted; the next flush stores them (docs/design.md#identity: offsets are
    /// committed only for records whose hits and templates are stored).
    pub(super) async fn flush(&mut self, member: &mut Member) -> bool {
        let pending = self.ledger.pending(now_ns());
        if !pending.is_empty() {
            let receipt = pending.receipt();
            if let Err(e) = lm::store_mined(&self.store, pending.rows()).await {
                self.metrics.store_failed("storing hits, merges and templates", &e);
                self.note_pending();
                return false;
            }
            self.ledger.stored(receipt);
            self.note_pending();
        }
        // For every partition mined, the offset after its last stored record. A commit
        // after a revoke may be refused: the records are then read again (harmless).
        member.commit(self.mined_up_to.iter().map(|(p, o)| (*p, *o))).await;
        self.gauges();
        true
    }

    /// A flush within `shutdown_flush_timeout_secs` (a revoke's, a stop's). False when it
    /// failed or ran out of time: its rows stay pending.
    async fn bounded_flush(&mut self, member: &mut Member) -> bool {
        let bound = secs(self.config.logminer.shutdown_flush_timeout_secs);
        matches!(tokio::time::timeout(bound, self.flush(member)).await, Ok(true))
    }

    async fn reload(&mut self) -> anyhow::Result<()> {
        let mut ledger = TemplateLedger::new(self.config.logminer.mining())?;
        let rows = lm::load_templates(&self.store, ledger.masking_version()).await?;
        let merges = lm::load_merges(&self.store, ledger.masking_version()).await?;
        ledger.restore(rows, merges);
        let state = State::load(&self.store).await?;
        // Every partition was revoked before this assignment (eager rebalancing), so rows
        // the old ledger could not store belong to revoked partitions: never committed by
        // this replica, they are read again by the partitions' next owner.
        self.ledger = ledger;
        self.watermark = state.watermark(&self.ownership.partitions());
        self.shape_watermark = state.shape_watermark(&self.ownership.partitions());
        Ok(())
    }

    fn pending_full(&self) -> bool {
        self.ledger.pending_hits() as u64 >= self.config.logminer.max_pending_hits
    }

    /// Reports the pending hits, and reading pausing at `logminer.max_pending_hits` or
    /// resuming under it: once per turn, not per record. Called wherever the count changes
    /// (a record mined, a flush, a reload).
    fn note_pending(&mut self) {
        let pending = self.ledger.pending_hits();
        self.metrics.pending(pending);
        match (self.paused_since, self.pending_full()) {
            (None, true) => {
                self.paused_since = Some(std::time::Instant::now());
                self.metrics.reading_paused(pending, self.config.logminer.max_pending_hits);
            }
            (Some(since), false) => {
                self.paused_since = None;
                self.metrics.reading_resumed(pending, since.elapsed());
            }
            _ => {}
        }
    }

    pub(super) fn gauges(&self) {
        let data_lag =
            (self.newest_ingest_ns > 0).then(|| Duration::from_nanos(now_ns().saturating_sub(self.newest_ingest_ns)));
        self.metrics.holds(
            self.ledger.template_count(),
            self.ledger.service_count(),
            self.ownership.owned_count(),
            data_lag,
        );
        let partitions = self.ownership.partitions();
        let mut status = self.status.lock().unwrap();
        status.partitions = partitions;
        status.owned = self.ownership.services();
    }
}
