//! The consumer loop. It runs on a thread of its own with a small single-threaded runtime
//! for the inserts, because the rebalance callback (which librdkafka calls from inside
//! `poll`) must store and commit the revoked partitions *synchronously* before they are
//! given up, and a blocking callback must not sit on an async worker.
//!
//! The guarantees, and where each is kept:
//! - offsets are committed explicitly (`enable.auto.commit` and `enable.auto.offset.store`
//!   are false), at `lastOffset + 1` per partition, only after the batch's rows are stored
//!   ([`WriterState::flush`]);
//! - ClickHouse down: the flush is retried with capped backoff ([`backoff`]) while the
//!   assigned partitions are paused; the retry waits by polling the paused consumer, which
//!   keeps the member inside `max.poll.interval.ms` and serves rebalances, and nothing is
//!   committed until the insert succeeds;
//! - on revoke: the batch is stored and committed before the partitions go
//!   ([`WriterContext::pre_rebalance`]); if that cannot be done in time, the revoked
//!   partitions are forgotten (never committed from this batch) and their next owner
//!   re-reads them;
//! - an undecodable record is logged, counted and committed past.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::{BorrowedHeaders, BorrowedMessage, Message, OwnedMessage};
use rdkafka::ClientContext;

use super::batch::{backoff, Batch, Rows};
use super::metrics::{AfterFailure, WriterMetrics};
use super::sink::Sink;
use crate::bus::consume::rebalance::{report, Hook};
use crate::bus::consume::{commit_sync, Group, LagRefresher, Member, Rebalanced};
use crate::config::Names;
use crate::config::{KafkaConfig, WriterConfig};
use crate::daemon::Shutdown;
use crate::otlp::rowbinary;
use crate::store::StoreError;
use crate::wire::record;

/// How long a revoke waits for ClickHouse before it gives the partitions up uncommitted.
const REVOKE_FLUSH_LIMIT: Duration = Duration::from_secs(10);
/// Longest single poll: bounds how late shutdown and due batches are noticed.
const POLL_SLICE: Duration = Duration::from_millis(100);

/// The flush was abandoned (shutdown, or a revoke out of time): nothing was committed.
#[derive(Debug)]
pub struct GaveUp;

/// A batch whose insert runs while the next batch fills: the batch comes back with the result.
type InFlight = (tokio::task::JoinHandle<(Batch, Result<(), StoreError>)>, Instant);

pub struct WriterState {
    /// One worker: a batch's insert runs there while this thread decodes the next batch.
    rt: tokio::runtime::Runtime,
    sink: Sink,
    metrics: WriterMetrics,
    shutdown: Shutdown,
    topic: String,
    max_rows: usize,
    max_wait: Duration,
    /// Consumed, not yet stored. Taken out of the mutex while a flush runs.
    batch: Mutex<Batch>,
    /// The previous batch, being inserted. Settled (committed, or merged back in front of
    /// `batch` if its insert failed) before another insert starts, so commits stay in order.
    in_flight: Mutex<Option<InFlight>>,
    /// Set while the main loop flushes: a revoke then cannot flush (the batch is in the
    /// main loop's hands) and records its partitions here instead.
    flushing: Mutex<Option<Vec<i32>>>,
    /// Offsets stored whose commit failed, carried into the next commit.
    uncommitted: Mutex<BTreeMap<i32, i64>>,
    /// The member's lag refresher, also called while a flush waits out ClickHouse.
    lag: LagRefresher,
}

pub struct WriterContext {
    inner: std::sync::Arc<WriterState>,
}

impl ClientContext for WriterContext {}

impl ConsumerContext for WriterContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Some(Rebalanced::Revoked(revoked)) = report(&self.inner.metrics.consumer, Hook::Pre, rebalance) {
            self.inner.on_revoke(consumer, &revoked);
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        report(&self.inner.metrics.consumer, Hook::Post, rebalance);
    }
}

/// Runs the writer's consumer until `shutdown` (on the calling thread, which must not be an
/// async worker). Returns after a final flush and commit.
pub fn run_consumer(
    kafka: &KafkaConfig,
    names: &Names,
    writer: &WriterConfig,
    sink: Sink,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("tayga-writer-insert")
        .enable_all()
        .build()
        .context("building the insert runtime")?;
    let metrics = sink.metrics.consumer.clone();
    let member: Member<BaseConsumer<WriterContext>> =
        Member::join_with(kafka, names, Group::Writer, metrics, |lag| WriterContext {
            inner: std::sync::Arc::new(WriterState {
                rt,
                metrics: sink.metrics.clone(),
                topic: names.signals.clone(),
                sink,
                shutdown: shutdown.clone(),
                max_rows: writer.batch_max_rows.max(1) as usize,
                max_wait: Duration::from_millis(writer.batch_max_wait_ms),
                batch: Mutex::new(Batch::default()),
                in_flight: Mutex::new(None),
                flushing: Mutex::new(None),
                uncommitted: Mutex::new(BTreeMap::new()),
                lag,
            }),
        })?;
    let consumer = member.consumer();
    let inner = consumer.context().inner.clone();

    let mut held: VecDeque<OwnedMessage> = VecDeque::new();
    let mut gave_up = false;
    // Where the consumer thread's time goes between two flushes (logged at debug).
    let (mut polling, mut decoding, mut settling) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    while !shutdown.is_triggered() {
        inner.refresh_lag();
        let t0 = Instant::now();
        if let Some(m) = held.pop_front() {
            inner.add(In::owned(&m));
            decoding += t0.elapsed();
        } else {
            let timeout = inner.poll_timeout();
            let polled = consumer.poll(timeout);
            let t1 = Instant::now();
            polling += t1 - t0;
            match polled {
                Some(Ok(m)) => {
                    inner.add(In::borrowed(&m));
                    decoding += t1.elapsed();
                }
                Some(Err(e)) => inner.metrics.consumer.consume_error(&inner.topic, &e),
                None => {}
            }
        }
        let due = inner.is_due();
        // Commit a finished insert at once; before starting the next, wait for the previous.
        let t2 = Instant::now();
        let step = inner.settle(consumer, due, None).map(|mut more| {
            if due {
                tracing::debug!(
                    polling_ms = polling.as_millis() as u64,
                    decoding_ms = decoding.as_millis() as u64,
                    waiting_for_insert_ms = (settling + t2.elapsed()).as_millis() as u64,
                    "batch due"
                );
                (polling, decoding, settling) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
                more.extend(inner.start_flush());
            } else {
                settling += t2.elapsed();
            }
            more
        });
        match step {
            Ok(more) => held.extend(more),
            Err(GaveUp) => {
                gave_up = true;
                break;
            }
        }
    }
    // Shutdown: store and commit what was read (unless a flush was just given up because
    // ClickHouse is down: then nothing more is committed and the records are read again at
    // the next start).
    for m in held.drain(..) {
        inner.add(In::owned(&m));
    }
    if gave_up || inner.settle(consumer, true, None).is_err() || inner.flush(consumer, None).is_err() {
        tracing::warn!("writer stopped with records not stored; they were not committed and will be read again");
    } else {
        tracing::info!("writer stopped: everything read was stored and committed");
    }
    // Leave the group now (the revoke finds an empty batch).
    member.leave_now();
    Ok(())
}

impl WriterState {
    /// Decodes one record into the batch; an undecodable one only moves the offset.
    fn add(&self, m: In<'_>) {
        self.metrics.consumer.consumed();
        let now = Instant::now();
        let rows = record::read(m.headers, m.payload).and_then(|raw| rowbinary::record_rows(&raw));
        let mut batch = self.batch.lock().unwrap();
        match rows {
            Ok(rows) => batch.push(m.partition, m.offset, Rows::from(rows), now),
            Err(e) => {
                self.metrics.consumer.undecodable(&self.topic, m.partition, m.offset, &e);
                batch.push_skipped(m.partition, m.offset, now);
            }
        }
        self.metrics.pending(batch.consumed());
    }

    /// The group's lag over every partition, refreshed off this thread when due: its
    /// members commit from the rebalance callback, which only the group's offsets follow.
    fn refresh_lag(&self) {
        let _runtime = self.rt.enter();
        self.lag.refresh_group_when_due();
    }

    fn is_due(&self) -> bool {
        self.batch.lock().unwrap().is_due(Instant::now(), self.max_rows, self.max_wait)
    }

    fn poll_timeout(&self) -> Duration {
        let left = self.batch.lock().unwrap().time_left(Instant::now(), self.max_wait);
        left.map_or(POLL_SLICE, |l| l.min(POLL_SLICE))
    }

    /// Starts inserting the batch (the previous insert must be settled). Returns nothing: the
    /// `Vec` is for symmetry with [`WriterState::settle`].
    fn start_flush(&self) -> Vec<OwnedMessage> {
        let batch = std::mem::take(&mut *self.batch.lock().unwrap());
        self.metrics.pending(0);
        if batch.is_empty() {
            return Vec::new();
        }
        let sink = self.sink.clone();
        let handle = self.rt.spawn(async move {
            let mut batch = batch;
            let result = sink.write(&mut batch).await;
            (batch, result)
        });
        *self.in_flight.lock().unwrap() = Some((handle, Instant::now()));
        Vec::new()
    }

    /// Settles the insert in flight if it has finished (or, with `wait`, once it has): commits
    /// its offsets, or on failure puts its batch back in front of the current one and stores
    /// both with [`WriterState::flush`] (retries, pause).
    fn settle(
        &self,
        consumer: &BaseConsumer<WriterContext>,
        wait: bool,
        revoke_deadline: Option<Instant>,
    ) -> Result<Vec<OwnedMessage>, GaveUp> {
        let (handle, started) = {
            let mut in_flight = self.in_flight.lock().unwrap();
            match in_flight.as_ref() {
                None => return Ok(Vec::new()),
                Some((h, _)) if !wait && !h.is_finished() => return Ok(Vec::new()),
                Some(_) => in_flight.take().expect("checked above"),
            }
        };
        let (batch, result) = self.rt.block_on(handle).expect("an insert task panicked");
        match result {
            Ok(()) => {
                self.metrics.insert_succeeded(1);
                self.stored(consumer, batch, started);
                Ok(Vec::new())
            }
            Err(e) => {
                self.metrics.insert_failed(&e, AfterFailure::Merged);
                self.batch.lock().unwrap().prepend(batch);
                self.flush(consumer, revoke_deadline)
            }
        }
    }

    /// A batch is stored: count it and commit its offsets.
    fn stored(&self, consumer: &BaseConsumer<WriterContext>, batch: Batch, flush_started: Instant) {
        let committing = Instant::now();
        self.commit(consumer, batch.offsets().clone());
        self.metrics.batch_stored(
            batch.consumed(),
            batch.rows(),
            batch.age(flush_started),
            committing - flush_started,
            committing.elapsed(),
        );
    }

    /// Stores the batch and commits its offsets, synchronously. `revoke_deadline` is `Some` when called from
    /// the rebalance callback: then it gives up at the deadline instead of polling while it
    /// waits (polling inside the callback is not allowed). Returns the records that arrived
    /// while it waited (normally none: the partitions are paused).
    fn flush(
        &self,
        consumer: &BaseConsumer<WriterContext>,
        revoke_deadline: Option<Instant>,
    ) -> Result<Vec<OwnedMessage>, GaveUp> {
        let flush_started = Instant::now();
        let mut batch = std::mem::take(&mut *self.batch.lock().unwrap());
        let mut held = Vec::new();
        if batch.is_empty() {
            self.commit(consumer, BTreeMap::new());
            return Ok(held);
        }
        let in_callback = revoke_deadline.is_some();
        if !in_callback {
            *self.flushing.lock().unwrap() = Some(Vec::new());
        }
        let mut attempt = 0u32;
        let mut paused = false;
        let result = loop {
            match self.rt.block_on(self.sink.write(&mut batch)) {
                Ok(()) => {
                    self.metrics.insert_succeeded(attempt + 1);
                    break Ok(());
                }
                Err(e) => {
                    attempt += 1;
                    let wait = backoff(attempt);
                    let out_of_time = revoke_deadline.is_some_and(|d| Instant::now() + wait > d);
                    if self.shutdown.is_triggered() || out_of_time {
                        self.metrics.insert_failed(&e, AfterFailure::GaveUp { attempts: attempt });
                        break Err(GaveUp);
                    }
                    self.metrics.insert_failed(&e, AfterFailure::Retry { attempt, wait });
                    if !e.is_unreachable() && (attempt == 1 || attempt.is_multiple_of(10)) {
                        // The server answers but refuses: perhaps its schema is gone (a new
                        // volume). Migrating is idempotent, so make sure it is there.
                        self.rt.block_on(self.sink.repair());
                    }
                    if in_callback {
                        std::thread::sleep(wait);
                    } else {
                        if !paused {
                            self.metrics.set_paused(true);
                            paused = true;
                        }
                        self.wait_paused(consumer, wait, &mut held);
                    }
                }
            }
        };
        if !in_callback {
            if let Some(revoked) = self.flushing.lock().unwrap().take() {
                batch.forget(&revoked);
            }
            if paused {
                if let Ok(assignment) = consumer.assignment() {
                    let _ = consumer.resume(&assignment);
                }
                self.metrics.set_paused(false);
            }
        }
        match result {
            Ok(()) => {
                self.stored(consumer, batch, flush_started);
                self.metrics.pending(self.batch.lock().unwrap().consumed());
                Ok(held)
            }
            Err(GaveUp) => {
                // Keep the rows (and the offsets of partitions still ours) so nothing is
                // committed past them; the caller decides whether to go on.
                self.batch.lock().unwrap().prepend(batch);
                Err(GaveUp)
            }
        }
    }

    /// Waits `wait` by polling with every assigned partition paused: the member stays in
    /// its group, rebalances are served, and no record is fetched. A record that still
    /// arrives (fetched before the pause) is kept for later.
    fn wait_paused(&self, consumer: &BaseConsumer<WriterContext>, wait: Duration, held: &mut Vec<OwnedMessage>) {
        let until = Instant::now() + wait;
        loop {
            // Re-pause each time: a rebalance may have assigned new partitions.
            if let Ok(assignment) = consumer.assignment() {
                let _ = consumer.pause(&assignment);
            }
            self.refresh_lag();
            let now = Instant::now();
            if now >= until || self.shutdown.is_triggered() {
                return;
            }
            match consumer.poll((until - now).min(POLL_SLICE)) {
                Some(Ok(m)) => held.push(m.detach()),
                Some(Err(e)) => self.metrics.consumer.consume_error(&self.topic, &e),
                None => {}
            }
        }
    }

    /// The rebalance callback's work: store and commit before the partitions go.
    fn on_revoke(&self, consumer: &BaseConsumer<WriterContext>, partitions: &[i32]) {
        if self.shutdown.is_triggered() && !self.batch.lock().unwrap().is_empty() {
            // Leaving after a final flush that failed: it is not tried again.
            self.batch.lock().unwrap().forget(partitions);
            self.forget_uncommitted(partitions);
            return;
        }
        {
            let mut flushing = self.flushing.lock().unwrap();
            if let Some(revoked) = flushing.as_mut() {
                // The main loop is retrying a failed insert (ClickHouse is down): its batch
                // cannot be stored now, so these partitions will not be committed from it.
                tracing::warn!(?partitions, "revoked while ClickHouse is unavailable: giving them up uncommitted; their next owner re-reads them");
                revoked.extend_from_slice(partitions);
                drop(flushing);
                self.batch.lock().unwrap().forget(partitions);
                self.forget_uncommitted(partitions);
                return;
            }
        }
        let deadline = Instant::now() + REVOKE_FLUSH_LIMIT;
        let settled = self.settle(consumer, true, Some(deadline));
        if settled.is_err() || self.flush(consumer, Some(deadline)).is_err() {
            tracing::warn!(
                ?partitions,
                "could not store the revoked partitions' records in time; giving them up uncommitted"
            );
            self.batch.lock().unwrap().forget(partitions);
        }
        self.forget_uncommitted(partitions);
    }

    fn forget_uncommitted(&self, partitions: &[i32]) {
        let mut uncommitted = self.uncommitted.lock().unwrap();
        for p in partitions {
            uncommitted.remove(p);
        }
    }

    /// Commits `offsets` (and any earlier offsets whose commit failed) synchronously, for the
    /// partitions this member still holds.
    fn commit(&self, consumer: &BaseConsumer<WriterContext>, offsets: BTreeMap<i32, i64>) {
        let mut all = std::mem::take(&mut *self.uncommitted.lock().unwrap());
        for (p, o) in offsets {
            let next = all.entry(p).or_insert(o);
            *next = (*next).max(o);
        }
        if all.is_empty() {
            return;
        }
        let assigned: Vec<i32> = match consumer.assignment() {
            Ok(tpl) => tpl.elements_for_topic(&self.topic).iter().map(|e| e.partition()).collect(),
            Err(_) => Vec::new(),
        };
        let held: Vec<(i32, i64)> = all.iter().filter(|(p, _)| assigned.contains(p)).map(|(p, o)| (*p, *o)).collect();
        if held.is_empty() {
            return;
        }
        if commit_sync(consumer, &self.topic, &held, &self.metrics.consumer).is_err() {
            let mut uncommitted = self.uncommitted.lock().unwrap();
            for (p, o) in held {
                let next = uncommitted.entry(p).or_insert(o);
                *next = (*next).max(o);
            }
        }
    }
}

/// A record as the batch needs it, from a borrowed or an owned message.
struct In<'a> {
    partition: i32,
    offset: i64,
    headers: Option<&'a BorrowedHeaders>,
    payload: Option<&'a [u8]>,
}

impl<'a> In<'a> {
    fn borrowed(m: &'a BorrowedMessage<'_>) -> In<'a> {
        In { partition: m.partition(), offset: m.offset(), headers: m.headers(), payload: m.payload() }
    }

    fn owned(m: &'a OwnedMessage) -> In<'a> {
        In {
            partition: m.partition(),
            offset: m.offset(),
            headers: m.headers().map(|h| h.as_borrowed()),
            payload: m.payload(),
        }
    }
}
