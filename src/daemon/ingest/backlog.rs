//! The direct path's backlog (docs/ingest.md, *The backlog*: a detour, not a dead end). Every record ingest
//! writes directly is also kept in ClickHouse (`store::backlog`), in the same step as its
//! rows, exactly as it would have been published (topic, key, value, headers). Once the
//! probe finds the broker back, the replayer (`replay.rs`) publishes the backlog oldest first in
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

use crate::store::backlog::{self as store_backlog, BacklogStats};
use crate::store::{now_ns, BacklogRow, Store, StoreError};

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
    pub(super) store: Store,
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

    pub(super) fn replayed(&self, records: u64, bytes: u64) {
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

    /// What changed in the backlog's room since the last call: each crossing is reported
    /// once, so its log line is written once.
    pub fn room_crossings(&self) -> RoomCrossings {
        let full = !self.has_room(1);
        let full_changed = (full != self.full.swap(full, Ordering::Relaxed)).then_some(full);
        let high = self.stats().bytes >= self.max_bytes / 100 * WARN_AT_PERCENT;
        let started_filling = high != self.warned.swap(high, Ordering::Relaxed) && high && !full;
        RoomCrossings { full_changed, started_filling }
    }
}

/// [`Backlog::room_crossings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoomCrossings {
    /// The backlog became full (`Some(true)`) or has room again (`Some(false)`).
    pub full_changed: Option<bool>,
    /// It just passed 80 % of its bound without being full.
    pub started_filling: bool,
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

#[cfg(test)]
mod tests {
    use super::*;

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
