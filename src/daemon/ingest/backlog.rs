//! The direct path's backlog (docs/ingest.md, *The backlog*: a detour, not a dead end). Every record ingest
//! writes directly is also kept in ClickHouse (`store::backlog`), in the same step as its
//! rows, exactly as it would have been published (topic, key, value, headers). Once the
//! probe finds the broker back, [`replay_loop`] publishes the backlog oldest first in
//! bounded passes and marks what the broker acknowledged; a crash between the two replays
//! a pass again, which the consumers' identities make harmless. While records wait, new
//! requests keep to the direct path (`failover.rs`), so the topics receive every record in
//! the order ingest accepted it.
//!
//! The backlog is bounded (`ingest.backlog_max_bytes`): past 80 % a warning is logged once;
//! past the bound, direct writes are still stored but no longer kept, and each one is
//! counted (`tayga_ingest_backlog_overflow_records_total`).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::failover::Path;
use super::Ingest;
use crate::bus::producer::OutRecord;
use crate::daemon::Shutdown;
use crate::store::backlog::{self as store_backlog, BacklogStats, PendingKey};
use crate::store::{now_ns, BacklogRow, Store, StoreError};

/// A replay pass publishes at most this many records…
pub const PASS_MAX_RECORDS: usize = 1000;
/// …and at most this many value bytes (at least one record, however large).
pub const PASS_MAX_BYTES: u64 = 16 << 20;
/// How often the replayer looks for work when there was none.
const IDLE: Duration = Duration::from_millis(200);
/// How often, with nothing to replay, the backlog's size is read again from ClickHouse (a
/// start whose read failed, or records another ingest process kept).
const RECHECK: Duration = Duration::from_secs(30);
/// How often drained days are dropped.
const DROP_EVERY: Duration = Duration::from_secs(3600);
/// The share of the bound at which the backlog warns that it is filling.
const WARN_AT_PERCENT: u64 = 80;

/// One record as it would be published.
pub struct Outgoing<'a> {
    /// `signals` or `logs`, for the metrics.
    pub label: &'static str,
    pub topic: &'a str,
    pub key: &'a str,
    pub value: &'a [u8],
}

pub struct Backlog {
    store: Store,
    /// This process's part of every key, so two ingest processes never share one.
    nonce: u64,
    /// The last `created_ns` handed out: every request gets a distinct one.
    clock: AtomicU64,
    records: AtomicU64,
    bytes: AtomicU64,
    /// Direct writes kept so far: a drain ends only if none was kept while it read.
    written: AtomicU64,
    max_bytes: u64,
    full: AtomicBool,
    warned: AtomicBool,
}

impl Backlog {
    pub fn new(store: Store, max_bytes: u64) -> Backlog {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_u64(now_ns());
        Backlog {
            store,
            nonce: hasher.finish(),
            clock: AtomicU64::new(0),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            written: AtomicU64::new(0),
            max_bytes,
            full: AtomicBool::new(false),
            warned: AtomicBool::new(false),
        }
    }

    /// A request's ingest time: now, and distinct from every other request of this process
    /// (it is also the backlog key's first part).
    pub fn stamp(&self) -> u64 {
        let now = now_ns();
        let mut last = self.clock.load(Ordering::Relaxed);
        loop {
            let next = now.max(last + 1);
            match self.clock.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// The rows that keep `records` of the request stamped `created_ns`, or `None` when the
    /// backlog is full (the records are then only stored, not kept for the topics).
    pub fn rows(&self, created_ns: u64, headers: &[(String, String)], records: &[Outgoing]) -> Option<Vec<BacklogRow>> {
        let bytes: u64 = records.iter().map(|r| r.value.len() as u64).sum();
        if !self.has_room(bytes) {
            return None;
        }
        let (header_keys, header_values): (Vec<String>, Vec<String>) = headers.iter().cloned().unzip();
        Some(
            records
                .iter()
                .enumerate()
                .map(|(i, r)| BacklogRow {
                    created_ns,
                    nonce: self.nonce,
                    position: i as u32,
                    topic: r.topic.to_string(),
                    key: r.key.to_string(),
                    header_keys: header_keys.clone(),
                    header_values: header_values.clone(),
                    value: r.value.to_vec(),
                    value_bytes: r.value.len() as u32,
                    replayed: 0,
                    version_ns: created_ns,
                })
                .collect(),
        )
    }

    fn has_room(&self, more: u64) -> bool {
        let bytes = self.bytes.load(Ordering::Relaxed);
        bytes + more <= self.max_bytes
    }

    /// Keeps `rows` durably (one insert: all or nothing).
    pub async fn keep(&self, rows: &[BacklogRow]) -> Result<(), StoreError> {
        store_backlog::keep(&self.store, rows).await
    }

    /// `rows` were kept (after the request's rows were stored too).
    pub fn kept(&self, rows: &[BacklogRow]) {
        self.records.fetch_add(rows.len() as u64, Ordering::Relaxed);
        self.bytes.fetch_add(rows.iter().map(|r| r.value_bytes as u64).sum(), Ordering::Relaxed);
        self.written.fetch_add(1, Ordering::SeqCst);
    }

    /// Direct writes kept so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    pub fn stats(&self) -> BacklogStats {
        BacklogStats { records: self.records.load(Ordering::Relaxed), bytes: self.bytes.load(Ordering::Relaxed) }
    }

    fn set_stats(&self, stats: BacklogStats) {
        self.records.store(stats.records, Ordering::Relaxed);
        self.bytes.store(stats.bytes, Ordering::Relaxed);
    }

    fn replayed(&self, records: u64, bytes: u64) {
        let sub = |a: &AtomicU64, n: u64| {
            let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_sub(n)));
        };
        sub(&self.records, records);
        sub(&self.bytes, bytes);
    }

    /// Reads the backlog's size from ClickHouse (at start, and after each drain).
    pub async fn refresh(&self) -> Result<BacklogStats, StoreError> {
        let stats = store_backlog::stats(&self.store).await?;
        self.set_stats(stats);
        Ok(stats)
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }
}

/// What `/health` shows of the backlog.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BacklogHealth {
    pub records: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    /// Being replayed now (the broker is back, records wait).
    pub replaying: bool,
}

/// How many of `keys` (oldest first) one pass takes: at most `max_records`, and no more
/// value bytes than `max_bytes`, but always the first (a record is never too large to
/// replay). Pure.
pub fn pass_len(keys: &[PendingKey], max_records: usize, max_bytes: u64) -> usize {
    let mut bytes = 0u64;
    let mut n = 0;
    for key in keys.iter().take(max_records) {
        bytes += key.value_bytes as u64;
        if n > 0 && bytes > max_bytes {
            break;
        }
        n += 1;
    }
    n
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pass {
    records: u64,
    bytes: u64,
    /// Where the next pass starts (the last key's time: a request cut by the bound has
    /// more records at that time).
    next_from: u64,
    /// The pass took every pending record it saw: the backlog was drained as of its read.
    drained: bool,
}

#[derive(Debug, thiserror::Error)]
enum ReplayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Publish(#[from] crate::bus::packed::SendError),
}

impl Ingest {
    /// One pass: the oldest pending records from `from_ns`, published, then marked.
    async fn replay_pass(&self, from_ns: u64) -> Result<Pass, ReplayError> {
        let backlog = &self.pipeline.backlog;
        let keys = store_backlog::pending_keys(&backlog.store, from_ns, PASS_MAX_RECORDS as u64).await?;
        let n = pass_len(&keys, PASS_MAX_RECORDS, PASS_MAX_BYTES);
        let chosen = &keys[..n];
        let drained = n == keys.len() && keys.len() < PASS_MAX_RECORDS;
        let Some(last) = chosen.last() else {
            return Ok(Pass { records: 0, bytes: 0, next_from: from_ns, drained });
        };
        let rows = store_backlog::records(&backlog.store, chosen).await?;
        let headers: Vec<Vec<(String, String)>> =
            rows.iter().map(|r| r.header_keys.iter().cloned().zip(r.header_values.iter().cloned()).collect()).collect();
        let out: Vec<OutRecord> = rows
            .iter()
            .zip(&headers)
            .map(|(r, h)| OutRecord { topic: &r.topic, key: &r.key, value: r.value.as_slice().into(), headers: h })
            .collect();
        self.pipeline.publisher.publish_all(out).await?;
        store_backlog::mark_replayed(&backlog.store, chosen, now_ns()).await?;
        let bytes = chosen.iter().map(|k| k.value_bytes as u64).sum();
        backlog.replayed(n as u64, bytes);
        self.metrics.backlog_replayed(n as u64, bytes);
        Ok(Pass { records: n as u64, bytes, next_from: last.created_ns, drained })
    }
}

/// Replays the backlog whenever both paths work and records wait: passes back to back
/// until one drains it, then the broker takes new requests again (`failover.rs`).
pub(super) async fn replay_loop(ingest: Arc<Ingest>, shutdown: Shutdown) -> anyhow::Result<()> {
    let pipeline = &ingest.pipeline;
    let mut from_ns = 0;
    let mut drain = DrainProgress::default();
    let mut last_drop: Option<Instant> = None;
    let mut last_check = Instant::now();
    // Set when a drain reached the end but direct writes had kept records meanwhile: the
    // next pass runs with new requests held (`Pipeline::handover`), so a client sending
    // faster than one pass takes cannot keep the broker out for ever.
    let mut hold_requests = false;
    loop {
        if shutdown.is_triggered() {
            return Ok(());
        }
        let (replaying, pending, direct_up) = {
            let f = pipeline.failover.lock().unwrap();
            (f.replaying(), f.backlog_pending(), f.is_up(Path::Direct))
        };
        if !pending && direct_up && last_check.elapsed() >= RECHECK {
            last_check = Instant::now();
            if let Ok(stats) = pipeline.backlog.refresh().await {
                if stats.records > 0 {
                    pipeline.failover.lock().unwrap().set_backlog_pending(true);
                }
            }
        }
        if replaying {
            let _held = if hold_requests { Some(pipeline.handover.write().await) } else { None };
            let epoch = pipeline.backlog.written();
            match ingest.replay_pass(from_ns).await {
                Ok(pass) => {
                    drain.add(pass);
                    from_ns = pass.next_from;
                    if !pass.drained {
                        // More than one pass is left: requests are not held that long.
                        hold_requests = false;
                        continue;
                    }
                    from_ns = 0;
                    hold_requests = !ingest.drained(epoch, std::mem::take(&mut drain)).await;
                    if last_drop.is_none_or(|t| t.elapsed() >= DROP_EVERY) {
                        last_drop = Some(Instant::now());
                        match store_backlog::drop_drained_days(&pipeline.backlog.store).await {
                            Ok(days) if !days.is_empty() => tracing::info!(?days, "dropped drained backlog days"),
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(error = %e, "dropping drained backlog days failed; retried in an hour")
                            }
                        }
                    }
                }
                Err(e) => {
                    from_ns = 0;
                    ingest.metrics.backlog_replay_failed(&e);
                    // A broker that cannot take the replay cannot take requests either; a
                    // full local queue is only load (the next pass waits for room).
                    let path = match &e {
                        ReplayError::Publish(p) if p.is_backpressure() => None,
                        ReplayError::Publish(_) => Some(Path::Broker),
                        ReplayError::Store(s) if s.is_unreachable() => Some(Path::Direct),
                        ReplayError::Store(_) => None,
                    };
                    if let Some(path) = path {
                        pipeline.failover.lock().unwrap().failed(path, Instant::now());
                        pipeline.update_path_gauges();
                    }
                }
            }
        }
        ingest.metrics.set_backlog(pipeline.backlog.stats());
        if !shutdown.sleep(IDLE).await {
            return Ok(());
        }
    }
}

/// What one drain (passes until the backlog was empty) replayed, for its log line.
#[derive(Debug, Default)]
struct DrainProgress {
    records: u64,
    bytes: u64,
    started: Option<Instant>,
}

impl DrainProgress {
    fn add(&mut self, pass: Pass) {
        self.started.get_or_insert_with(Instant::now);
        self.records += pass.records;
        self.bytes += pass.bytes;
    }
}

impl Ingest {
    /// A pass found nothing more to replay. Unless a direct write was kept since that pass
    /// began reading (`epoch`), the broker takes new requests again; the size is re-read
    /// from ClickHouse, so what another process kept is not missed. Says whether the broker
    /// took over.
    async fn drained(&self, epoch: u64, drain: DrainProgress) -> bool {
        let backlog = &self.pipeline.backlog;
        let stats = backlog.refresh().await.unwrap_or_else(|_| backlog.stats());
        let empty = backlog.written() == epoch && stats.records == 0;
        if empty {
            self.pipeline.failover.lock().unwrap().set_backlog_pending(false);
        }
        self.metrics.backlog_drained(drain.records, drain.bytes, drain.started.map(|t| t.elapsed()));
        self.metrics.set_backlog(backlog.stats());
        self.pipeline.update_path_gauges();
        self.pipeline.note_backlog_room();
        empty
    }
}

impl super::pipeline::Pipeline {
    /// Logs (once per crossing) that the backlog passed 80 % of its bound, or is full, or
    /// has room again.
    pub fn note_backlog_room(&self) {
        let b = &self.backlog;
        let stats = b.stats();
        let warn_at = b.max_bytes / 100 * WARN_AT_PERCENT;
        let full = !b.has_room(1);
        if full != b.full.swap(full, Ordering::Relaxed) {
            self.failover.lock().unwrap().set_backlog_full(full);
            self.metrics.backlog_full(full, stats, b.max_bytes);
        }
        let high = stats.bytes >= warn_at;
        if high != b.warned.swap(high, Ordering::Relaxed) && high && !full {
            self.metrics.backlog_filling(stats, b.max_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(created_ns: u64, value_bytes: u32) -> PendingKey {
        PendingKey { created_ns, nonce: 1, position: 0, value_bytes }
    }

    #[test]
    fn a_pass_is_bounded_by_records_and_bytes_but_takes_at_least_one() {
        let keys: Vec<PendingKey> = (0..10).map(|i| key(i, 100)).collect();
        assert_eq!(pass_len(&keys, 4, 10_000), 4);
        assert_eq!(pass_len(&keys, 100, 350), 3);
        assert_eq!(pass_len(&keys, 100, 300), 3, "exactly the bound fits");
        assert_eq!(pass_len(&[key(0, 5_000), key(1, 1)], 100, 10), 1, "one oversized record still goes");
        assert_eq!(pass_len(&[], 100, 10), 0);
    }

    #[test]
    fn every_request_gets_a_distinct_increasing_stamp() {
        let backlog = Backlog::new(Store::new(&crate::config::ClickHouseConfig::default()), 1 << 20);
        let stamps: Vec<u64> = (0..1000).map(|_| backlog.stamp()).collect();
        assert!(stamps.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn past_the_bound_records_are_no_longer_kept() {
        let backlog = Backlog::new(Store::new(&crate::config::ClickHouseConfig::default()), 1000);
        let headers = [("tayga-kind".to_string(), "traces".to_string())];
        let zeros = [0u8; 600];
        let record = |n| Outgoing { label: "signals", topic: "t.signals", key: "k", value: &zeros[..n] };
        let rows = backlog.rows(5, &headers, &[record(600), record(300)]).expect("room for 900 bytes");
        assert_eq!(rows.iter().map(|r| r.position).collect::<Vec<_>>(), vec![0, 1]);
        assert!(rows.iter().all(|r| r.created_ns == 5 && r.version_ns == 5 && r.header_keys == ["tayga-kind"]));
        backlog.kept(&rows);
        assert_eq!(backlog.stats(), BacklogStats { records: 2, bytes: 900 });
        assert!(backlog.rows(6, &headers, &[record(200)]).is_none(), "1100 bytes are over the bound");
        backlog.replayed(1, 600);
        assert!(backlog.rows(6, &headers, &[record(200)]).is_some());
    }
}
