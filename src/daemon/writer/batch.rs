//! What the writer has consumed and not yet stored: the rows of each record, in consumption
//! order, and per partition the offset to commit once they are stored (`lastOffset + 1`).
//! Pure: no I/O, so the rules are unit-tested here.
//!
//! Rules:
//! - every consumed record, decodable or not, moves its partition's commit offset to
//!   `offset + 1`; records arrive in offset order per partition, so everything below that
//!   offset is either in this batch or was committed before;
//! - a revoked partition is *forgotten*: its offset is never committed from this batch (the
//!   next owner re-reads from the group's committed offset); its rows may still be inserted,
//!   which the identities make harmless;
//! - what was stored is marked, so a retried flush inserts only what has not succeeded yet.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::encoded::EncodedRows;
use crate::otlp::rowbinary::TableRows;
use crate::store::{LogRow, SpanRow};

/// The rows one record carries, encoded for their insert. Shared (`Arc`) so per-record
/// inserts can run as tasks.
#[derive(Debug, Clone)]
pub enum Rows {
    Spans(Arc<EncodedRows<SpanRow>>),
    Logs(Arc<EncodedRows<LogRow>>),
}

impl From<TableRows> for Rows {
    fn from(rows: TableRows) -> Rows {
        match rows {
            TableRows::Spans(r) => Rows::Spans(Arc::new(r)),
            TableRows::Logs(r) => Rows::Logs(Arc::new(r)),
        }
    }
}

impl Rows {
    pub fn len(&self) -> usize {
        match self {
            Rows::Spans(r) => r.len(),
            Rows::Logs(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One decoded record of the batch.
#[derive(Debug, Clone)]
pub struct RecordRows {
    pub partition: i32,
    pub offset: i64,
    pub rows: Rows,
    /// Inserted (per-record mode): a retry skips it.
    pub stored: bool,
}

#[derive(Debug, Default)]
pub struct Batch {
    pub records: Vec<RecordRows>,
    /// partition → offset to commit once the batch is stored.
    offsets: BTreeMap<i32, i64>,
    /// Records consumed into this batch, undecodable ones included.
    consumed: usize,
    rows: usize,
    spans: usize,
    logs: usize,
    started: Option<Instant>,
    /// Batched mode: every span / log row of the batch has been inserted.
    pub spans_stored: bool,
    pub logs_stored: bool,
}

impl Batch {
    /// Adds a decoded record.
    pub fn push(&mut self, partition: i32, offset: i64, rows: Rows, now: Instant) {
        self.note(partition, offset, now);
        self.rows += rows.len();
        match &rows {
            Rows::Spans(r) => self.spans += r.len(),
            Rows::Logs(r) => self.logs += r.len(),
        }
        if !rows.is_empty() {
            self.records.push(RecordRows { partition, offset, rows, stored: false });
        }
    }

    /// Adds a record that carries nothing to store (undecodable): only its offset moves.
    pub fn push_skipped(&mut self, partition: i32, offset: i64, now: Instant) {
        self.note(partition, offset, now);
    }

    fn note(&mut self, partition: i32, offset: i64, now: Instant) {
        let next = self.offsets.entry(partition).or_insert(offset + 1);
        *next = (*next).max(offset + 1);
        self.consumed += 1;
        self.started.get_or_insert(now);
    }

    /// Nothing consumed since the last flush.
    pub fn is_empty(&self) -> bool {
        self.consumed == 0
    }

    pub fn consumed(&self) -> usize {
        self.consumed
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn span_count(&self) -> usize {
        self.spans
    }

    pub fn log_count(&self) -> usize {
        self.logs
    }

    /// Full (`max_rows` rows, or as many records), or its first record has waited `max_wait`.
    pub fn is_due(&self, now: Instant, max_rows: usize, max_wait: Duration) -> bool {
        self.rows >= max_rows
            || self.consumed >= max_rows
            || self.started.is_some_and(|s| now.saturating_duration_since(s) >= max_wait)
    }

    /// How long the batch had been filling at `now`.
    pub fn age(&self, now: Instant) -> Duration {
        self.started.map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }

    /// How long until the batch is due by age (`None` when it is empty).
    pub fn time_left(&self, now: Instant, max_wait: Duration) -> Option<Duration> {
        self.started.map(|s| max_wait.saturating_sub(now.saturating_duration_since(s)))
    }

    /// The offsets to commit once the batch is stored, by partition.
    pub fn offsets(&self) -> &BTreeMap<i32, i64> {
        &self.offsets
    }

    /// Never commits these partitions from this batch (they were revoked).
    pub fn forget(&mut self, partitions: &[i32]) {
        for p in partitions {
            self.offsets.remove(p);
        }
    }

    /// Moves `other`'s records and offsets in front of this batch's (used to put back a
    /// batch whose flush was given up).
    pub fn prepend(&mut self, mut other: Batch) {
        other.records.append(&mut self.records);
        self.records = other.records;
        for (p, o) in other.offsets {
            let next = self.offsets.entry(p).or_insert(o);
            *next = (*next).max(o);
        }
        self.consumed += other.consumed;
        self.rows += other.rows;
        self.spans += other.spans;
        self.logs += other.logs;
        self.started = match (self.started, other.started) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.spans_stored = false;
        self.logs_stored = false;
    }

    /// The span rows of the batch, record by record in consumption order.
    pub fn spans(&self) -> Vec<&EncodedRows<SpanRow>> {
        self.records
            .iter()
            .filter_map(|r| match &r.rows {
                Rows::Spans(rows) => Some(&**rows),
                Rows::Logs(_) => None,
            })
            .collect()
    }

    /// The log rows of the batch, record by record in consumption order.
    pub fn logs(&self) -> Vec<&EncodedRows<LogRow>> {
        self.records
            .iter()
            .filter_map(|r| match &r.rows {
                Rows::Logs(rows) => Some(&**rows),
                Rows::Spans(_) => None,
            })
            .collect()
    }
}

/// The wait before flush attempt `attempt + 1` after `attempt` failures (1-based): 100 ms,
/// doubling, capped at 5 s. Capped so ClickHouse's return is noticed within seconds; never
/// zero, so an outage is never a busy loop.
pub fn backoff(attempt: u32) -> Duration {
    const BASE_MS: u64 = 100;
    const CAP_MS: u64 = 5_000;
    let exp = attempt.saturating_sub(1).min(16);
    Duration::from_millis((BASE_MS << exp).min(CAP_MS))
}

/// The most flush attempts the backoff allows within `elapsed` (tests use it to prove the
/// writer does not spin while ClickHouse is down).
pub fn max_attempts_within(elapsed: Duration) -> u32 {
    let mut waited = Duration::ZERO;
    let mut attempts = 1;
    while waited + backoff(attempts) <= elapsed {
        waited += backoff(attempts);
        attempts += 1;
    }
    attempts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(n: usize) -> Rows {
        Rows::Spans(Arc::new(EncodedRows::from_rows(&vec![SpanRow::default(); n])))
    }

    fn logs(n: usize) -> Rows {
        Rows::Logs(Arc::new(EncodedRows::from_rows(&vec![LogRow::default(); n])))
    }

    #[test]
    fn commit_offsets_are_last_offset_plus_one_per_partition() {
        let now = Instant::now();
        let mut b = Batch::default();
        b.push(0, 10, spans(2), now);
        b.push(0, 11, logs(1), now);
        b.push_skipped(3, 7, now);
        b.push(3, 8, spans(0), now);
        assert_eq!(b.offsets().iter().map(|(p, o)| (*p, *o)).collect::<Vec<_>>(), vec![(0, 12), (3, 9)]);
        assert_eq!((b.consumed(), b.rows(), b.span_count(), b.log_count()), (4, 3, 2, 1));
        assert_eq!(b.records.len(), 2, "records without rows are not kept");
        assert_eq!(b.spans().iter().map(|r| r.len()).sum::<usize>(), 2);
        assert_eq!(b.logs().iter().map(|r| r.len()).sum::<usize>(), 1);
    }

    #[test]
    fn due_by_rows_records_or_age() {
        let now = Instant::now();
        let wait = Duration::from_millis(500);
        let mut b = Batch::default();
        assert!(!b.is_due(now, 10, wait));
        assert_eq!(b.time_left(now, wait), None);
        b.push(0, 0, spans(3), now);
        assert!(!b.is_due(now, 10, wait));
        assert_eq!(b.time_left(now + Duration::from_millis(200), wait), Some(Duration::from_millis(300)));
        assert!(b.is_due(now + wait, 10, wait));
        b.push(0, 1, spans(7), now);
        assert!(b.is_due(now, 10, wait));
        let mut skipped = Batch::default();
        for o in 0..10 {
            skipped.push_skipped(1, o, now);
        }
        assert!(skipped.is_due(now, 10, wait), "undecodable records alone also fill a batch");
    }

    #[test]
    fn forgotten_partitions_are_not_committed_and_prepend_keeps_order() {
        let now = Instant::now();
        let mut old = Batch::default();
        old.push(0, 5, spans(1), now);
        old.push(1, 9, spans(1), now);
        old.forget(&[1]);
        assert_eq!(old.offsets().keys().copied().collect::<Vec<_>>(), vec![0]);
        let mut new = Batch::default();
        new.push(0, 6, logs(2), now + Duration::from_secs(1));
        new.prepend(old);
        assert_eq!(new.records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![5, 9, 6]);
        assert_eq!(new.offsets().get(&0), Some(&7));
        assert_eq!(new.offsets().get(&1), None);
        assert_eq!((new.consumed(), new.rows()), (3, 4));
        assert_eq!(new.time_left(now, Duration::from_secs(2)), Some(Duration::from_secs(2)));
    }

    #[test]
    fn backoff_doubles_to_a_cap_and_never_spins() {
        let waits: Vec<u64> = (1..=8).map(|a| backoff(a).as_millis() as u64).collect();
        assert_eq!(waits, vec![100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(5));
        assert_eq!(max_attempts_within(Duration::ZERO), 1);
        assert_eq!(max_attempts_within(Duration::from_millis(300)), 3);
        assert_eq!(max_attempts_within(Duration::from_secs(60)), 7 + (60_000 - 6_300) / 5_000);
    }
}
