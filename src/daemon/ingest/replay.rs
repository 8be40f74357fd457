//! The backlog's replayer (docs/ingest.md, *The backlog*): whenever both paths work and
//! records wait, bounded passes publish the oldest kept records and mark what the broker
//! acknowledged, until a pass drains the backlog and the broker takes new requests again
//! (`failover.rs`). A crash between publishing and marking replays a pass again, which the
//! consumers' identities make harmless.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::failover::Path;
use super::Ingest;
use crate::bus::producer::OutRecord;
use crate::daemon::Shutdown;
use crate::store::backlog::{self as store_backlog, PendingKey};
use crate::store::{now_ns, StoreError};

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
}
