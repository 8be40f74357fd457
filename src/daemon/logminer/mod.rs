//! The logminer (seed 000, DESIGN.md §7): reads `<prefix>.logs` in group
//! `<prefix>-logminer`, mines every log line into a template of its service, stores
//! templates and hits, and raises `new_template`, `spike` and `silence` alerts for the
//! services it owns, published to `<prefix>.alerts`. docs/logminer.md is the operator's
//! view; this is where each seed 000 rule is kept:
//!
//! - **Offsets** are committed only after the hits and templates of the records before
//!   them are stored ([`Logminer::flush`]).
//! - **Ownership**: a replica owns the services whose logs it mined within
//!   `ownership_window_min`; every alert-raising query is filtered to them.
//! - **Rebalances** ([`Logminer::apply_changes`]): on a revoke, flush and commit, then one
//!   new-template pass for the services owned, bounded by `revoke_pass_timeout_secs`; on an
//!   assignment, a fresh miner loaded with every stored template, and owned services,
//!   partition clocks and spike state cleared. A service taken over first gets its active
//!   spikes back from `log_alerts`, so an ongoing spike keeps its id.
//! - **Watermarks**: one per partition in `logminer_state`; an assignment starts from the
//!   minimum over its partitions; every new-template pass moves the assigned partitions'
//!   keys to the pass time.
//! - **Publication**: each alert version is published and marked; after every detection
//!   pass, unmarked alerts of owned services from the last 24 h are republished, oldest
//!   first, at most 1,000, stopping at the first failed send.
//! - **Clean stop**: flush bounded by `shutdown_flush_timeout_secs`, then a new-template
//!   pass bounded by `shutdown_pass_timeout_secs`.

pub mod detect;
pub mod metrics;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use prometheus_client::registry::Registry;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use serde_json::json;

use self::detect::{Rules, Spikes, MINUTE_NS};
use self::metrics::{KindLabel, LogminerMetrics, PassLabel};
use crate::alert::AlertKind;
use crate::bus::alerts::publish_and_mark;
use crate::bus::consume::{commit_moved, lag, LoggedConsumer, RebalanceLog, Rebalanced};
use crate::bus::producer::Publisher;
use crate::bus::record::{self, SignalPayload};
use crate::bus::Names;
use crate::config::{Config, KafkaConfig};
use crate::daemon::{serve_http, HealthFn, Shutdown};
use crate::identity::alert_id;
use crate::mine::book::Book;
use crate::otlp::flatten::log_rows;
use crate::store::logminer::{self as lm, AlertQuery, State};
use crate::store::{now_ns, AlertRow, Store};

/// Longest gap between polls: a pass is bounded (30 s at most), so this is never reached
/// by a healthy replica.
pub const MAX_POLL_INTERVAL_MS: u64 = 300_000;
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
/// Reading pauses while this many hits wait (ClickHouse down): memory stays bounded.
const MAX_PENDING_HITS: usize = 200_000;
const LAG_EVERY: Duration = Duration::from_secs(5);

/// The consumer settings: explicit commits only.
pub fn consumer_config(kafka: &KafkaConfig, names: &Names) -> rdkafka::ClientConfig {
    crate::bus::consumer_config(
        kafka,
        &names.logminer_group,
        "tayga-logminer",
        Duration::from_millis(MAX_POLL_INTERVAL_MS),
    )
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

/// `tayga serve logminer`: prepares topics and schema, serves `/health` and `/metrics` on
/// `logminer.metrics_addr`, and runs until `shutdown`.
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
    let (_, http) = serve_http(&config.logminer.metrics_addr, Arc::new(registry), health, shutdown.clone()).await?;
    let result = async {
        crate::daemon::prepare(config, &shutdown).await?;
        run(config, cadence, replica, metrics, status, shutdown.clone()).await
    }
    .await;
    shutdown.trigger();
    let _ = http.await;
    result
}

/// A service this replica owns: it mined the service's logs within the ownership window.
#[derive(Debug)]
struct Owned {
    last_mined: Instant,
    partition: i32,
    /// Its active spikes were restored from `log_alerts` (done once per takeover).
    restored: bool,
}

struct Logminer {
    config: Config,
    names: Names,
    replica: String,
    store: Store,
    publisher: Publisher,
    consumer: Arc<LoggedConsumer>,
    book: Book,
    rules: Rules,
    metrics: LogminerMetrics,
    status: Arc<Mutex<Status>>,
    shutdown: Shutdown,
    assigned: BTreeSet<i32>,
    /// Per partition, the offset after the last record mined (what a commit would store).
    mined_up_to: BTreeMap<i32, i64>,
    committed: BTreeMap<i32, i64>,
    owned: HashMap<String, Owned>,
    /// Per partition, the newest log time read from it (capped at the wall clock): the
    /// "now" of the spike and silence rules for its services.
    clocks: BTreeMap<i32, u64>,
    spikes: HashMap<String, Spikes>,
    /// Where the next new-template pass starts.
    watermark: u64,
    /// Alert ids raised by this process, so a refresh is not counted as a new alert.
    raised: HashSet<u64>,
    newest_ingest_ns: u64,
}

/// Consumes until `shutdown`.
async fn run(
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
    let consumer: Arc<LoggedConsumer> = Arc::new(
        consumer_config(&config.kafka, &names)
            .create_with_context(RebalanceLog::default())
            .context("creating the Kafka consumer")?,
    );
    consumer.subscribe(&[&names.logs]).with_context(|| format!("subscribing to {}", names.logs))?;
    let publisher = Publisher::new(&config.kafka).context("creating the Kafka producer")?;
    tracing::info!(topic = %names.logs, group = %names.logminer_group, replica = %replica,
        masking_version = book.masking_version(), tick_secs = config.logminer.tick_secs, "logminer started");
    let mut m = Logminer {
        config: config.clone(),
        names,
        replica,
        store,
        publisher,
        consumer,
        book,
        rules: Rules::from_config(&config.logminer),
        metrics,
        status,
        shutdown: shutdown.clone(),
        assigned: BTreeSet::new(),
        mined_up_to: BTreeMap::new(),
        committed: BTreeMap::new(),
        owned: HashMap::new(),
        clocks: BTreeMap::new(),
        spikes: HashMap::new(),
        watermark: 0,
        raised: HashSet::new(),
        newest_ingest_ns: 0,
    };
    let mut flush_tick = tokio::time::interval(cadence.flush_every);
    flush_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pass_tick = tokio::time::interval(Duration::from_secs(config.logminer.tick_secs.max(1)));
    pass_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    pass_tick.tick().await;
    let mut last_lag = Instant::now() - LAG_EVERY;
    loop {
        let reading = m.book.pending_hits() < MAX_PENDING_HITS;
        let message = tokio::select! {
            biased;
            _ = shutdown.triggered() => break,
            _ = pass_tick.tick() => {
                m.apply_changes().await;
                m.detection_pass().await;
                continue;
            }
            _ = flush_tick.tick() => {
                m.apply_changes().await;
                m.flush().await;
                if last_lag.elapsed() >= LAG_EVERY {
                    m.refresh_lag().await;
                    last_lag = Instant::now();
                }
                continue;
            }
            message = m.consumer.recv(), if reading => message.map(|msg| msg.detach()),
        };
        let message = match message {
            Ok(msg) => msg,
            Err(e) => {
                tracing::warn!(error = %e, "reading from the logs topic failed");
                shutdown.sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        m.apply_changes().await;
        if !m.assigned.contains(&message.partition()) {
            // Read before a revoke we have applied: its next owner reads it.
            continue;
        }
        m.mine_record(&message);
        if m.book.pending_hits() >= cadence.flush_hits {
            m.flush().await;
        }
    }
    m.stop().await;
    Ok(())
}

/// Start-up chores: heartbeats older than a day go (seed 000), and the masking epoch is
/// checked. A changed rule set starts a new epoch: templates mined under the old one are
/// not loaded, so its lines are mined afresh; `tayga remine` rebuilds the history.
async fn start_up(store: &Store, config: &crate::config::LogminerConfig, masking_version: &str) -> anyhow::Result<()> {
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

impl Logminer {
    /// Mines one record's logs and notes the services as owned.
    fn mine_record(&mut self, message: &rdkafka::message::OwnedMessage) {
        self.metrics.records.inc();
        let partition = message.partition();
        self.mined_up_to.insert(partition, message.offset() + 1);
        let record = match record::decode(message.headers().map(|h| h.as_borrowed()), message.payload().or(Some(&[]))) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, partition, offset = message.offset(), "skipping a record that cannot be decoded");
                self.metrics.invalid_records.inc();
                return;
            }
        };
        let SignalPayload::Logs(request) = &record.payload else {
            tracing::error!(partition, offset = message.offset(), "skipping a traces record on the logs topic");
            self.metrics.invalid_records.inc();
            return;
        };
        let now = now_ns();
        self.newest_ingest_ns = self.newest_ingest_ns.max(record.ingest_ns);
        let clock = self.clocks.entry(partition).or_insert(0);
        for row in log_rows(request, record.ingest_ns) {
            *clock = (*clock).max(row.time_ns.min(now));
            self.book.mine(&row.service, row.log_id, row.time_ns, &row.body, now);
            self.metrics.logs_mined.inc();
            match self.owned.get_mut(&row.service) {
                Some(o) => {
                    o.last_mined = Instant::now();
                    o.partition = partition;
                }
                None => {
                    self.owned.insert(row.service, Owned { last_mined: Instant::now(), partition, restored: false });
                }
            }
        }
    }

    /// Stores pending hits and templates, then commits the offsets they cover. False when
    /// storing failed (the rows are kept and retried).
    async fn flush(&mut self) -> bool {
        let (templates, hits) = self.book.take_pending(now_ns());
        if !templates.is_empty() || !hits.is_empty() {
            if let Err(e) = lm::store_mined(&self.store, &templates, &hits).await {
                self.metrics.store_failures.inc();
                tracing::warn!(error = %e, hits = hits.len(), "storing hits and templates failed; retrying");
                self.book.restore_pending(templates, hits);
                return false;
            }
        }
        self.commit().await;
        self.gauges();
        true
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
        let flushed = tokio::time::timeout(secs(self.config.logminer.shutdown_flush_timeout_secs), self.flush()).await;
        if !matches!(flushed, Ok(true)) {
            tracing::warn!("the flush before the revoke did not complete: the records will be read again");
        }
        self.bounded_new_template_pass("revoke", secs(self.config.logminer.revoke_pass_timeout_secs)).await;
        for p in &partitions {
            self.assigned.remove(p);
            self.mined_up_to.remove(p);
            self.committed.remove(p);
            self.clocks.remove(p);
        }
        self.owned.retain(|_, o| !partitions.contains(&o.partition));
        self.gauges();
    }

    async fn assigned(&mut self, partitions: Vec<i32>) {
        self.assigned.extend(partitions.iter().copied());
        let assigned: Vec<i32> = self.assigned.iter().copied().collect();
        // A fresh miner with every stored template: another replica may have mined our new
        // services' logs until now.
        loop {
            match self.reload(&assigned).await {
                Ok(()) => break,
                Err(e) => {
                    self.metrics.store_failures.inc();
                    tracing::warn!(error = %format!("{e:#}"), "reloading templates after an assignment failed; retrying");
                    if !self.shutdown.sleep(Duration::from_secs(1)).await {
                        return;
                    }
                }
            }
        }
        self.owned.clear();
        self.clocks.clear();
        self.spikes.clear();
        tracing::info!(?partitions, assigned = ?assigned, templates = self.book.template_count(),
            watermark_ns = self.watermark, "partitions assigned: templates reloaded");
        self.gauges();
    }

    async fn reload(&mut self, assigned: &[i32]) -> anyhow::Result<()> {
        let mut book = Book::new(self.config.logminer.mining())?;
        let rows = lm::load_templates(&self.store, book.masking_version()).await?;
        book.restore(rows);
        let state = State::load(&self.store).await?;
        // Pending rows of the old book were flushed at the revoke; a failed flush leaves
        // them unstored and uncommitted, so they are read again.
        self.book = book;
        self.watermark = state.watermark(assigned);
        Ok(())
    }

    fn owned_services(&self) -> Vec<String> {
        let mut s: Vec<String> = self.owned.keys().cloned().collect();
        s.sort();
        s
    }

    async fn bounded_new_template_pass(&mut self, pass: &str, bound: Duration) {
        let started = Instant::now();
        match tokio::time::timeout(bound, self.new_template_pass()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(pass, error = %format!("{e:#}"), "the new-template pass failed"),
            Err(_) => tracing::warn!(pass, bound_secs = bound.as_secs(), "the new-template pass ran out of time"),
        }
        self.observe(pass, started);
    }

    fn observe(&self, pass: &str, started: Instant) {
        self.metrics
            .pass_duration
            .get_or_create(&PassLabel { pass: pass.into() })
            .observe(started.elapsed().as_secs_f64());
    }

    /// Announces the owned services' templates first seen after the watermark, then moves
    /// the watermark (and every assigned partition's key) to the pass time.
    async fn new_template_pass(&mut self) -> anyhow::Result<()> {
        if !self.flush().await {
            anyhow::bail!("hits and templates could not be stored");
        }
        let pass_ns = now_ns();
        let services = self.owned_services();
        let version = self.book.masking_version().to_string();
        let candidates = lm::new_template_candidates(&self.store, &services, &version, self.watermark, pass_ns).await?;
        let ids: Vec<u64> = candidates.iter().map(|t| alert_id(AlertKind::NewTemplate, t.template_id, 0)).collect();
        // A template announced before (by another replica, or before an eviction) is not
        // announced again.
        let known = lm::existing_alert_ids(&self.store, &ids).await?;
        let rows: Vec<AlertRow> = candidates
            .iter()
            .zip(&ids)
            .filter(|(_, id)| !known.contains(id))
            .map(|(t, id)| AlertRow {
                alert_id: *id,
                kind: AlertKind::NewTemplate.as_str().into(),
                service: t.service.clone(),
                template_id: t.template_id,
                template: t.template.clone(),
                first_at: t.first_seen_ns,
                last_at: t.first_seen_ns,
                count: t.count,
                baseline: 0.0,
                threshold: 0.0,
                stored_ns: pass_ns,
                updated_ns: pass_ns,
            })
            .collect();
        self.store_and_publish(rows).await?;
        let keys: Vec<(String, String)> =
            self.assigned.iter().map(|p| (lm::watermark_key(*p), pass_ns.to_string())).collect();
        lm::write_state(&self.store, &keys, pass_ns).await?;
        self.watermark = pass_ns;
        Ok(())
    }

    /// Stores alert versions, then publishes and marks them; a failed publication leaves
    /// them unmarked for the republication after the next pass.
    async fn store_and_publish(&mut self, rows: Vec<AlertRow>) -> anyhow::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        lm::store_alerts(&self.store, &rows).await.inspect_err(|_| {
            self.metrics.store_failures.inc();
        })?;
        for row in &rows {
            if self.raised.insert(row.alert_id) {
                self.metrics.alerts.get_or_create(&KindLabel { kind: row.kind.clone() }).inc();
                tracing::info!(alert_id = %crate::alert::format_id(row.alert_id), kind = %row.kind, service = %row.service,
                    template = %row.template, "alert raised");
            }
        }
        let publication = publish_and_mark(&self.publisher, &self.store, &self.names.alerts, &rows).await;
        if let Some(e) = publication.error {
            self.metrics.publish_failures.inc();
            tracing::warn!(error = %e, published = publication.published, unpublished = rows.len() - publication.published,
                "publishing alerts failed; they are republished after a later pass");
        }
        Ok(())
    }

    /// Every tick: flush, new templates, spikes and silences, republication, heartbeat.
    async fn detection_pass(&mut self) {
        let started = Instant::now();
        self.expire_ownership();
        let result = async {
            self.new_template_pass().await?;
            self.restore_taken_over().await?;
            self.spikes_and_silences().await?;
            self.republish().await;
            anyhow::Ok(())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %format!("{e:#}"), "the detection pass failed; the next tick retries");
        }
        // The heartbeat says "a replica is running" (remine refuses while one is), so it is
        // written after a failed pass too.
        let now = now_ns();
        if let Err(e) = lm::write_state(&self.store, &[(lm::heartbeat_key(&self.replica), now.to_string())], now).await
        {
            tracing::warn!(error = %e, "writing the heartbeat failed");
        }
        self.observe("detection", started);
        self.gauges();
    }

    /// A service not mined within the ownership window drops out until it logs again.
    fn expire_ownership(&mut self) {
        let window = Duration::from_secs(self.config.logminer.ownership_window_min.saturating_mul(60));
        let expired: Vec<String> =
            self.owned.iter().filter(|(_, o)| o.last_mined.elapsed() > window).map(|(s, _)| s.clone()).collect();
        for service in expired {
            tracing::info!(service = %service, "service not seen within the ownership window: no longer owned");
            self.owned.remove(&service);
            self.spikes.remove(&service);
        }
    }

    /// A service taken over gets its active spikes back, so an ongoing spike keeps its id.
    async fn restore_taken_over(&mut self) -> anyhow::Result<()> {
        let cutoff = lm::active_cutoff_ns(now_ns());
        let fresh: Vec<String> = self.owned.iter().filter(|(_, o)| !o.restored).map(|(s, _)| s.clone()).collect();
        if fresh.is_empty() {
            return Ok(());
        }
        // One query for every service taken over since the last pass.
        let query = AlertQuery {
            services: Some(fresh.clone()),
            kind: Some(AlertKind::Spike),
            last_at_since_ns: Some(cutoff),
            ..Default::default()
        };
        let active = lm::alerts(&self.store, &query).await?;
        for row in &active {
            let spikes = self.spikes.entry(row.service.clone()).or_default();
            spikes.entry(row.template_id).or_insert_with(|| detect::spike_from_row(row));
            self.raised.insert(row.alert_id);
            tracing::info!(service = %row.service, alert_id = %crate::alert::format_id(row.alert_id),
                "restored an active spike of a service taken over");
        }
        for service in &fresh {
            if let Some(o) = self.owned.get_mut(service) {
                o.restored = true;
            }
        }
        Ok(())
    }

    async fn spikes_and_silences(&mut self) -> anyhow::Result<()> {
        let services = self.owned_services();
        let Some(oldest_clock) = services.iter().filter_map(|s| self.clock_of(s)).min() else { return Ok(()) };
        let lookback = self.rules.lookback_min(self.config.logminer.ownership_window_min);
        let since = oldest_clock.saturating_sub(lookback * MINUTE_NS) / MINUTE_NS * MINUTE_NS;
        let counts = lm::minute_counts(&self.store, &services, since).await?;
        let mut by_service: HashMap<&str, Vec<lm::MinuteCount>> = HashMap::new();
        for c in &counts {
            by_service.entry(c.service.as_str()).or_default().push(c.clone());
        }
        let now = now_ns();
        let mut rows = Vec::new();
        for service in &services {
            let Some(clock) = self.clock_of(service) else { continue };
            let counts = by_service.remove(service.as_str()).unwrap_or_default();
            let spikes = self.spikes.entry(service.clone()).or_default();
            for r in detect::detect(&self.rules, &counts, clock, spikes) {
                let template = self.book.template_text(service, r.template_id).unwrap_or_default().to_string();
                rows.push(r.to_row(service, &template, now));
            }
        }
        // A refreshed alert keeps the time it was first stored.
        let ids: Vec<u64> = rows.iter().map(|r| r.alert_id).collect();
        if !ids.is_empty() {
            let stored = lm::alerts(&self.store, &AlertQuery { ids: Some(ids), ..Default::default() }).await?;
            let first_stored: HashMap<u64, u64> = stored.iter().map(|a| (a.alert_id, a.stored_ns)).collect();
            for r in &mut rows {
                if let Some(s) = first_stored.get(&r.alert_id) {
                    r.stored_ns = *s;
                }
            }
        }
        self.store_and_publish(rows).await
    }

    fn clock_of(&self, service: &str) -> Option<u64> {
        let o = self.owned.get(service)?;
        self.clocks.get(&o.partition).copied()
    }

    /// Republishes unmarked alerts of the owned services (seed 000).
    async fn republish(&mut self) {
        let services = self.owned_services();
        let since =
            now_ns().saturating_sub(self.config.logminer.republish_window_hours.saturating_mul(3_600_000_000_000));
        let unmarked =
            match lm::unmarked_alerts(&self.store, Some(&services), since, self.config.logminer.republish_max_per_pass)
                .await
            {
                Ok(u) => u,
                Err(e) => {
                    tracing::warn!(error = %e, "reading unpublished alerts failed");
                    return;
                }
            };
        if unmarked.is_empty() {
            return;
        }
        let publication = publish_and_mark(&self.publisher, &self.store, &self.names.alerts, &unmarked).await;
        self.metrics.alerts_republished.inc_by(publication.published as u64);
        match publication.error {
            None => tracing::info!(republished = publication.published, "unpublished alerts republished"),
            Some(e) => {
                self.metrics.publish_failures.inc();
                tracing::warn!(error = %e, republished = publication.published, left = unmarked.len() - publication.published,
                    "republishing stopped at a failed send; the next pass goes on");
            }
        }
    }

    fn gauges(&self) {
        self.metrics.templates.set(self.book.template_count() as i64);
        self.metrics.owned_services.set(self.owned.len() as i64);
        self.metrics.assigned_partitions.set(self.assigned.len() as i64);
        if self.newest_ingest_ns > 0 {
            self.metrics.data_lag_seconds.set((now_ns().saturating_sub(self.newest_ingest_ns) / 1_000_000_000) as i64);
        }
        let mut status = self.status.lock().unwrap();
        status.partitions = self.assigned.iter().copied().collect();
        status.owned = self.owned_services();
    }

    /// Lag: over the assigned partitions, high watermark − committed offset.
    async fn refresh_lag(&self) {
        let parts = self.assigned.iter().map(|p| (*p, self.committed.get(p).copied())).collect();
        if let Some(lag) = lag(&self.consumer, &self.names.logs, parts).await {
            self.metrics.lag.set(lag);
        }
    }

    /// Clean stop (seed 000): flush bounded at 15 s, then one new-template pass bounded at
    /// 20 s, so a template mined just before the stop is still announced.
    async fn stop(mut self) {
        self.apply_changes().await;
        let started = Instant::now();
        let flushed = tokio::time::timeout(secs(self.config.logminer.shutdown_flush_timeout_secs), self.flush()).await;
        if matches!(flushed, Ok(true)) {
            self.bounded_new_template_pass("shutdown", secs(self.config.logminer.shutdown_pass_timeout_secs)).await;
        } else {
            tracing::warn!(
                "the flush at shutdown did not complete: unstored records will be read again; no final pass"
            );
        }
        self.publisher.flush(Duration::from_secs(5));
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "logminer stopped");
        let consumer = self.consumer.clone();
        drop(self);
        // librdkafka's leave-group blocks: keep it off the async runtime.
        let _ = tokio::task::spawn_blocking(move || {
            consumer.unsubscribe();
            drop(consumer);
        })
        .await;
    }
}
