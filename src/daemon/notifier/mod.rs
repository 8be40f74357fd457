//! The notifier (docs/design.md#notifier, docs/notifier.md): reads `<prefix>.alerts` in group
//! `<prefix>-notifier` and delivers each alert to each webhook target once, with retries,
//! backoff and a per-target breaker. docs/notifier.md describes the behaviour for operators.
//!
//! - [`backoff`] and [`breaker`]: the seed's rules as pure functions, unit-tested.
//! - [`deliver`]: one alert to one target: attempts, ladder, rows.
//! - [`store`]: `notifier_deliveries` reads (argMax) and writes (timeouts, retries).
//! - [`silences`]: the operators' running silences, read from the store and cached briefly.
//! - [`metrics`]: what the notifier reports (each event logs and counts).
//! - this file: the notifier as the consume loop drives it ([`crate::bus::consume::Handler`]):
//!   the decision order (with a manual retry's, `crate::workflow::retry`) and the offset commits.

pub mod backoff;
pub mod breaker;
pub mod deliver;
pub mod metrics;
pub mod payload;
pub mod persist;
pub mod silences;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use prometheus_client::registry::Registry;
use rdkafka::message::{Message, OwnedMessage};
use serde_json::json;
use tokio::task::JoinSet;

use self::deliver::{DeliveryContext, Settings, Target, TargetEnd};
use self::metrics::{DeliveryResult, NotifierMetrics};
use self::silences::Silences;
use crate::bus::consume::{Group, Handler, Member};
use crate::config::Config;
use crate::daemon::{DaemonSetup, HealthFn, Shutdown};
use crate::store::deliveries::Status;
use crate::store::{now_ns, DeliveryRow, Store};
use crate::wire::alert::{format_id, manual_retry_ns, Alert, AlertState};

/// `tayga serve notifier`: the shared daemon start-up ([`crate::daemon::run`]) on
/// `notifier.metrics_addr`, then the consumer loop until `shutdown`.
pub async fn serve(config: &Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = NotifierMetrics::new(&mut registry);
    let targets = Notifier::targets(config, &metrics)?;
    let health: HealthFn = {
        let targets = targets.clone();
        Arc::new(move || health(&targets))
    };
    let spec = DaemonSetup {
        group: Group::Notifier,
        metrics_addr: config.notifier.metrics_addr.clone(),
        registry,
        consumer: metrics.consumer.clone(),
        health,
    };
    crate::daemon::run(config, shutdown.clone(), spec, |store, _| async move {
        Notifier::with_targets(config, store, targets, metrics, shutdown)
    })
    .await
}

fn health(targets: &[Arc<Target>]) -> serde_json::Value {
    let targets: Vec<_> = targets
        .iter()
        .map(|t| json!({"name": t.name, "breaker": if t.breaker_open() { "open" } else { "closed" }}))
        .collect();
    json!({"status": "ok", "service": "notifier", "targets": targets})
}

/// How a record ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordEnd {
    /// Every target is delivered or failed, or the record was skipped: commit its offset.
    Done,
    /// Stopped by shutdown before every target was final: do not commit.
    Interrupted,
}

pub struct Notifier {
    ctx: Arc<DeliveryContext>,
    targets: Arc<Vec<Arc<Target>>>,
    silences: Silences,
}

impl Notifier {
    /// The notifier of `config`'s targets, writing its delivery rows through `store`.
    pub fn new(
        config: &Config,
        store: Store,
        metrics: NotifierMetrics,
        shutdown: Shutdown,
    ) -> anyhow::Result<Notifier> {
        let targets = Notifier::targets(config, &metrics)?;
        Notifier::with_targets(config, store, targets, metrics, shutdown)
    }

    /// The configured targets, each with its breaker shown closed.
    fn targets(config: &Config, metrics: &NotifierMetrics) -> anyhow::Result<Arc<Vec<Arc<Target>>>> {
        let cooldown = Settings::from_config(&config.notifier).breaker_cooldown;
        let targets = config
            .notifier
            .targets
            .iter()
            .map(|t| Target::new(t, cooldown, &config.api.public_url).map(Arc::new))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for t in &targets {
            metrics.set_breaker(&t.name, false);
        }
        Ok(Arc::new(targets))
    }

    fn with_targets(
        config: &Config,
        store: Store,
        targets: Arc<Vec<Arc<Target>>>,
        metrics: NotifierMetrics,
        shutdown: Shutdown,
    ) -> anyhow::Result<Notifier> {
        let settings = Settings::from_config(&config.notifier);
        let http = DeliveryContext::http_client(&settings).context("building the HTTP client")?;
        let silences = Silences::new(store.clone());
        let ctx = DeliveryContext { store, http, settings, metrics, shutdown };
        Ok(Notifier { ctx: Arc::new(ctx), targets, silences })
    }

    /// The decision order for one record (docs/design.md#notifier-decisions).
    pub async fn handle(&self, message: &OwnedMessage) -> RecordEnd {
        let read_at = Instant::now();
        let payload = message.payload().unwrap_or_default();
        let alert = match Alert::from_json(payload) {
            Ok(alert) => alert,
            Err(e) => {
                // A record no build of this version can read would block the partition
                // forever if it were retried: skip it, loudly.
                self.ctx.metrics.consumer.undecodable(message.topic(), message.partition(), message.offset(), &e);
                return RecordEnd::Done;
            }
        };
        let id = format_id(alert.alert_id);
        // 1. No targets: nothing is sent.
        if self.targets.is_empty() {
            tracing::debug!(alert_id = %id, "no targets configured");
            return RecordEnd::Done;
        }
        if alert.state == AlertState::Resolved {
            return self.handle_resolved(alert, read_at).await;
        }
        // A manual retry's record (docs/notifier.md "Manual retry"): the pairs the operator
        // reset are judged by when the retry was asked for, not by the alert's `last_at`.
        let manual_retry = manual_retry_ns(message.headers().map(|h| h.as_borrowed())).is_some();
        // 2. Kind filter, per target. 3. Staleness, judged now, when the record is read.
        let now = now_ns();
        let too_old = |at: u64| self.ctx.settings.too_old(at, now);
        let age_ns = now.saturating_sub(alert.last_at);
        let stale = too_old(alert.last_at);
        let mut wanted = Vec::new();
        for target in self.targets.iter() {
            if !target.accepts(&alert) {
                self.ctx.metrics.result(&target.name, DeliveryResult::skipped);
            } else if stale && !manual_retry {
                self.ctx.metrics.result(&target.name, DeliveryResult::stale);
            } else {
                wanted.push(target.clone());
            }
        }
        if stale && !manual_retry {
            tracing::info!(alert_id = %id, age_secs = age_ns / 1_000_000_000, "stale alert skipped");
        }
        if wanted.is_empty() {
            return RecordEnd::Done;
        }
        // 4.–6. Every remaining target by its pair's recorded state: a final row is a
        // duplicate (judged in `deliver`), a running silence holds back a pair not yet being
        // delivered, and the rest are delivered.
        let Some(mut existing) = self.rows(alert.alert_id, AlertState::Firing).await else {
            return RecordEnd::Interrupted;
        };
        // The operators' silences (docs/notifier.md, "Silences"), read at most 5 s ago.
        let Ok(running) = self.silences.running(&self.ctx.shutdown).await else {
            return RecordEnd::Interrupted;
        };
        let silence = crate::store::silences::matching(&running, &alert, now).map(|s| s.silence_id);
        let shared = Arc::new(alert.clone());
        let mut tasks = JoinSet::new();
        for target in wanted {
            let row = existing.remove(&target.name);
            let retried = row.as_ref().filter(|r| r.is_pending_manual_retry()).map(|r| r.retried_ns);
            match retried {
                // A retried pair's age is that of the later of `last_at` and the retry.
                Some(retried_ns) if too_old(alert.last_at.max(retried_ns)) => {
                    let row = row.expect("a retried pair has a row");
                    tasks.spawn(deliver::expire_manual_retry(self.ctx.clone(), target, row, read_at));
                    continue;
                }
                Some(_) => self.ctx.metrics.manual_retry(&id, &target.name),
                // Only a manual retry's record reaches here stale: the other pairs stay skipped.
                None if stale => {
                    self.ctx.metrics.result(&target.name, DeliveryResult::stale);
                    continue;
                }
                None => {}
            }
            let not_started = row.as_ref().is_none_or(|r| Status::parse(&r.status) == Some(Status::Silenced));
            if let (Some(silence_id), true, None) = (silence, not_started, retried) {
                tasks.spawn(deliver::hold_back(self.ctx.clone(), target, alert.alert_id, row, silence_id));
                continue;
            }
            tasks.spawn(deliver::deliver(self.ctx.clone(), target, shared.clone(), row, read_at));
        }
        join(tasks, &id, &self.ctx.metrics).await
    }

    /// A resolved notice (docs/notifier.md, "Resolved notices"), in the firing decision
    /// order with three differences: only targets with `send_resolved` take it, and only
    /// those the alert was delivered to while firing (a receiver is never told that
    /// something it never heard of has ended); staleness is judged by `resolved_at`; and a
    /// silence does not hold it back (the receiver already knows of the alert, and its end
    /// is what it waits for). Each target gets it once, with the firing delivery's
    /// attempts, backoff and breaker.
    async fn handle_resolved(&self, alert: Alert, read_at: Instant) -> RecordEnd {
        let id = format_id(alert.alert_id);
        let wanted: Vec<_> = self.targets.iter().filter(|t| t.send_resolved && t.accepts(&alert)).cloned().collect();
        if wanted.is_empty() {
            return RecordEnd::Done;
        }
        let now = now_ns();
        if self.ctx.settings.too_old(alert.resolved_at, now) {
            for target in &wanted {
                self.ctx.metrics.result(&target.name, DeliveryResult::stale);
            }
            let age_secs = now.saturating_sub(alert.resolved_at) / 1_000_000_000;
            tracing::info!(alert_id = %id, age_secs, "stale resolved notice skipped");
            return RecordEnd::Done;
        }
        let Some(firing) = self.rows(alert.alert_id, AlertState::Firing).await else {
            return RecordEnd::Interrupted;
        };
        let Some(mut resolved) = self.rows(alert.alert_id, AlertState::Resolved).await else {
            return RecordEnd::Interrupted;
        };
        let shared = Arc::new(alert);
        let mut tasks = JoinSet::new();
        for target in wanted {
            let firing_status = firing.get(&target.name).map_or("none", |r| r.status.as_str());
            if Status::parse(firing_status) != Some(Status::Delivered) {
                self.ctx.metrics.unannounced(&id, &target.name, firing_status);
                continue;
            }
            let row = resolved.remove(&target.name);
            tasks.spawn(deliver::deliver(self.ctx.clone(), target, shared.clone(), row, read_at));
        }
        join(tasks, &id, &self.ctx.metrics).await
    }

    /// The latest rows of an alert in one state, by target; read until it succeeds (`None`:
    /// a stop came first). Nothing is sent without them.
    async fn rows(&self, alert_id: u64, state: AlertState) -> Option<BTreeMap<String, DeliveryRow>> {
        loop {
            match persist::latest_by_target(&self.ctx.store, alert_id, state).await {
                Ok(rows) => return Some(rows),
                Err(e) => {
                    tracing::warn!(error = %e, alert_id = %format_id(alert_id), "cannot read delivery rows; retrying");
                    if self.ctx.shutdown.is_triggered() || !self.ctx.shutdown.sleep(Duration::from_secs(1)).await {
                        return None;
                    }
                }
            }
        }
    }
}

/// Waits for every target's delivery task of a record: the record is done only when each is.
/// They are all the deliveries in memory (`tayga_notifier_inflight_deliveries`).
async fn join(mut tasks: JoinSet<TargetEnd>, alert_id: &str, metrics: &NotifierMetrics) -> RecordEnd {
    let mut end = RecordEnd::Done;
    metrics.inflight.set(tasks.len() as i64);
    while let Some(result) = tasks.join_next().await {
        metrics.inflight.set(tasks.len() as i64);
        match result {
            Ok(TargetEnd::Final) => {}
            Ok(TargetEnd::Interrupted) => end = RecordEnd::Interrupted,
            Err(e) => {
                tracing::error!(error = %e, alert_id, "a delivery task failed");
                end = RecordEnd::Interrupted;
            }
        }
    }
    end
}

/// The notifier as the consume loop drives it: a record is committed once it is done (every
/// target delivered or failed, or nothing to send); a record that a stop interrupted ends
/// the loop uncommitted, so it is read again. It keeps no state per partition.
impl Handler for Notifier {
    fn tick_every(&self) -> Duration {
        Duration::from_secs(1)
    }

    async fn record(&mut self, member: &mut Member, message: OwnedMessage) -> ControlFlow<()> {
        if self.handle(&message).await == RecordEnd::Interrupted {
            tracing::info!(
                partition = message.partition(),
                offset = message.offset(),
                "stopped before the record was done; it will be read again"
            );
            return ControlFlow::Break(());
        }
        member.commit([(message.partition(), message.offset() + 1)]).await;
        ControlFlow::Continue(())
    }

    async fn tick(&mut self, _member: &mut Member) {
        // An elapsed cooldown closes a breaker without any event: show it.
        for t in self.targets.iter() {
            self.ctx.metrics.set_breaker(&t.name, t.breaker_open());
        }
    }

    async fn assigned(&mut self, _member: &mut Member, _partitions: &[i32]) {}

    async fn revoked(&mut self, _member: &mut Member, _partitions: &[i32]) {}

    async fn stop(&mut self, _member: &mut Member) {}
}
