//! The writer's part of the one consume loop: a [`Handler`] that decodes each record into
//! the batch, inserts a batch while the next one fills, and commits what was stored.
//!
//! The guarantees, and where each is kept:
//! - offsets are committed explicitly, at `lastOffset + 1` per partition, only after the
//!   batch's rows are stored ([`Writer::stored`]); batches are settled in order, so a
//!   committed offset always has every record below it stored;
//! - ClickHouse down: the batch is retried with capped backoff ([`backoff`]) while the loop
//!   reads nothing (the member's poller pauses the partitions and keeps the member in its
//!   group, serving rebalances); nothing is committed until the insert succeeds;
//! - on revoke: the group waits while the batch is stored and committed
//!   ([`Writer::revoked`]); when that cannot be done in time, or ClickHouse is already
//!   down, the revoked partitions are forgotten (never committed from this batch) and
//!   their next owner re-reads them;
//! - an undecodable record is logged, counted and committed past.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use rdkafka::message::{Message, OwnedMessage};

use super::batch::{backoff, Batch, Rows};
use super::metrics::{AfterFailure, WriterMetrics};
use super::sink::Sink;
use crate::bus::consume::{apply_rebalances, Handler, Member};
use crate::config::WriterConfig;
use crate::otlp::rowbinary;
use crate::store::StoreError;
use crate::wire::record;

/// How long a revoke waits for ClickHouse before it gives the partitions up uncommitted.
const REVOKE_FLUSH_LIMIT: Duration = Duration::from_secs(10);
/// How often the loop ticks: bounds how late a finished insert is committed.
const TICK: Duration = Duration::from_millis(100);

/// A batch whose insert runs while the next batch fills: the batch comes back with the result.
struct InFlight {
    task: tokio::task::JoinHandle<(Batch, Result<(), StoreError>)>,
    started: Instant,
}

/// ClickHouse refuses inserts: the failed attempts so far, and when to try again.
struct Retry {
    attempts: u32,
    at: Instant,
    started: Instant,
}

pub struct Writer {
    sink: Sink,
    metrics: WriterMetrics,
    max_rows: usize,
    max_wait: Duration,
    /// Consumed, not yet stored.
    batch: Batch,
    /// The previous batch, being inserted. Settled (committed, or put back in front of
    /// `batch` if its insert failed) before another insert starts, so commits stay in order.
    in_flight: Option<InFlight>,
    /// Set while ClickHouse refuses `batch`: the loop reads nothing until it is stored.
    retry: Option<Retry>,
    /// Per partition, the next offset of what was stored, for the member to commit (it
    /// commits only what moved, and keeps a refused commit for the next).
    stored: BTreeMap<i32, i64>,
    /// The retention sweep, which ends with the daemon.
    retention: Option<tokio::task::JoinHandle<()>>,
}

impl Writer {
    pub fn new(sink: Sink, writer: &WriterConfig, retention: tokio::task::JoinHandle<()>) -> Writer {
        Writer {
            metrics: sink.metrics.clone(),
            sink,
            max_rows: writer.batch_max_rows.max(1) as usize,
            max_wait: Duration::from_millis(writer.batch_max_wait_ms),
            batch: Batch::default(),
            in_flight: None,
            retry: None,
            stored: BTreeMap::new(),
            retention: Some(retention),
        }
    }
}

impl Handler for Writer {
    fn tick_every(&self) -> Duration {
        TICK
    }

    /// When the batch is due by age, or the next retry.
    fn wake_at(&self) -> Option<tokio::time::Instant> {
        let now = Instant::now();
        let left = match &self.retry {
            Some(retry) => Some(retry.at.saturating_duration_since(now)),
            None => self.batch.time_left(now, self.max_wait),
        };
        left.map(|left| tokio::time::Instant::now() + left)
    }

    fn wants_records(&self) -> bool {
        self.retry.is_none()
    }

    /// While ClickHouse is down a stop need not wait for the retry: nothing of the batch is
    /// committed, and it is read again at the next start.
    fn gives_way_to_stop(&self) -> bool {
        self.retry.is_some()
    }

    async fn record(&mut self, member: &mut Member, record: OwnedMessage) -> ControlFlow<()> {
        self.add(member, &record);
        if self.is_due() {
            self.flush_due(member).await;
        }
        ControlFlow::Continue(())
    }

    async fn tick(&mut self, member: &mut Member) {
        match &self.retry {
            Some(retry) if Instant::now() >= retry.at => self.retry_insert(member).await,
            Some(_) => {}
            None if self.is_due() => self.flush_due(member).await,
            // Commit a finished insert at once.
            None => self.settle(member, false).await,
        }
    }

    async fn assigned(&mut self, _member: &mut Member, _partitions: &[i32]) {}

    async fn revoked(&mut self, member: &mut Member, partitions: &[i32]) {
        let stored = if self.retry.is_some() {
            tracing::warn!(
                ?partitions,
                "revoked while ClickHouse is unavailable: giving them up uncommitted; their next owner re-reads them"
            );
            false
        } else {
            let until = Instant::now() + REVOKE_FLUSH_LIMIT;
            let stored = matches!(
                tokio::time::timeout(REVOKE_FLUSH_LIMIT, self.store_everything(member, until)).await,
                Ok(true)
            );
            if !stored {
                tracing::warn!(
                    ?partitions,
                    "could not store the revoked partitions' records in time; giving them up uncommitted"
                );
            }
            stored
        };
        if !stored {
            self.batch.forget(partitions);
        }
        for p in partitions {
            self.stored.remove(p);
        }
    }

    /// Stores and commits what was read, unless ClickHouse was down when the stop came: then
    /// nothing more is committed and the records are read again at the next start.
    async fn stop(&mut self, member: &mut Member) {
        apply_rebalances(member, self).await;
        let stored = self.retry.is_none() && self.store_everything(member, Instant::now()).await;
        if stored {
            tracing::info!("writer stopped: everything read was stored and committed");
        } else {
            tracing::warn!("writer stopped with records not stored; they were not committed and will be read again");
        }
        if let Some(retention) = self.retention.take() {
            let _ = retention.await;
        }
    }
}

impl Writer {
    /// Decodes one record into the batch; an undecodable one only moves the offset.
    fn add(&mut self, member: &Member, m: &OwnedMessage) {
        let now = Instant::now();
        let rows = record::read(m.headers().map(|h| h.as_borrowed()), m.payload())
            .and_then(|raw| rowbinary::record_rows(&raw));
        match rows {
            Ok(rows) => self.batch.push(m.partition(), m.offset(), Rows::from(rows), now),
            Err(e) => {
                member.metrics().undecodable(member.topic(), m.partition(), m.offset(), &e);
                self.batch.push_skipped(m.partition(), m.offset(), now);
            }
        }
        self.metrics.pending(self.batch.consumed());
    }

    fn is_due(&self) -> bool {
        self.batch.is_due(Instant::now(), self.max_rows, self.max_wait)
    }

    /// The batch is due: waits for the previous insert to settle, then starts this one's.
    async fn flush_due(&mut self, member: &mut Member) {
        let due = Instant::now();
        self.settle(member, true).await;
        tracing::debug!(
            records = self.batch.consumed(),
            rows = self.batch.rows(),
            filled_ms = self.batch.age(due).as_millis() as u64,
            waiting_for_insert_ms = due.elapsed().as_millis() as u64,
            "batch due"
        );
        if self.retry.is_none() {
            self.start_insert();
        }
    }

    /// Starts inserting the batch while the next fills (the previous insert is settled).
    fn start_insert(&mut self) {
        let mut batch = std::mem::take(&mut self.batch);
        self.metrics.pending(0);
        if batch.is_empty() {
            return;
        }
        let sink = self.sink.clone();
        let task = tokio::spawn(async move {
            let result = sink.write(&mut batch).await;
            (batch, result)
        });
        self.in_flight = Some(InFlight { task, started: Instant::now() });
    }

    /// Settles the insert in flight if it has finished (or, with `wait`, once it has):
    /// commits its offsets, or on failure puts its batch back in front of the current one,
    /// to be retried with it at once.
    async fn settle(&mut self, member: &mut Member, wait: bool) {
        let Some(in_flight) = self.in_flight.as_mut() else { return };
        if !wait && !in_flight.task.is_finished() {
            return;
        }
        // Awaited in place: a caller that gives up waiting (a revoke out of time) leaves it.
        let (batch, result) = (&mut in_flight.task).await.expect("an insert task panicked");
        let started = in_flight.started;
        self.in_flight = None;
        match result {
            Ok(()) => {
                self.metrics.insert_succeeded(1);
                self.stored(member, batch, started).await;
            }
            Err(e) => {
                self.metrics.insert_failed(&e, AfterFailure::Merged);
                self.batch.prepend(batch);
                self.metrics.pending(self.batch.consumed());
                self.retry = Some(Retry { attempts: 0, at: Instant::now(), started });
            }
        }
    }

    /// One more attempt at the batch ClickHouse refused.
    async fn retry_insert(&mut self, member: &mut Member) {
        let Some(retry) = self.retry.as_mut() else { return };
        match self.sink.write(&mut self.batch).await {
            Ok(()) => {
                self.metrics.insert_succeeded(retry.attempts + 1);
                let started = retry.started;
                self.retry = None;
                self.metrics.set_paused(false);
                let batch = std::mem::take(&mut self.batch);
                self.stored(member, batch, started).await;
                self.metrics.pending(0);
            }
            Err(e) => {
                retry.attempts += 1;
                let attempt = retry.attempts;
                let wait = backoff(attempt);
                retry.at = Instant::now() + wait;
                self.metrics.insert_failed(&e, AfterFailure::Retry { attempt, wait });
                self.metrics.set_paused(true);
                if !e.is_unreachable() && (attempt == 1 || attempt.is_multiple_of(10)) {
                    // The server answers but refuses: perhaps its schema is gone (a new
                    // volume). Migrating is idempotent, so make sure it is there.
                    self.sink.repair().await;
                }
            }
        }
    }

    /// Stores everything read (the insert in flight, then the batch), retrying until
    /// `until`, and commits it. False when something is not stored: it stays in the batch,
    /// and the loop goes on retrying what is still the member's.
    async fn store_everything(&mut self, member: &mut Member, until: Instant) -> bool {
        self.settle(member, true).await;
        if self.retry.is_none() {
            if self.batch.is_empty() {
                return true;
            }
            let now = Instant::now();
            self.retry = Some(Retry { attempts: 0, at: now, started: now });
        }
        loop {
            self.retry_insert(member).await;
            let Some(retry) = &self.retry else { return true };
            if retry.at > until {
                self.metrics.gave_up(retry.attempts);
                return false;
            }
            tokio::time::sleep_until(retry.at.into()).await;
        }
    }

    /// A batch is stored: count it and commit its offsets.
    async fn stored(&mut self, member: &mut Member, batch: Batch, flush_started: Instant) {
        let committing = Instant::now();
        for (p, next) in batch.offsets() {
            let offset = self.stored.entry(*p).or_insert(*next);
            *offset = (*offset).max(*next);
        }
        member.commit(self.stored.iter().map(|(p, o)| (*p, *o))).await;
        self.metrics.batch_stored(
            batch.consumed(),
            batch.rows(),
            batch.age(flush_started),
            committing - flush_started,
            committing.elapsed(),
        );
    }
}
