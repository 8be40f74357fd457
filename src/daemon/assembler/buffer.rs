//! The assembler's state, pure (no I/O; the clock is passed in as milliseconds): open traces
//! per partition, the closing rules, the memory caps, and the commit frontier.
//!
//! A trace is in one of three states:
//! - **open**: receiving spans; it closes when idle for `idle_close_ms`, at once when a span
//!   would take it past `max_spans_per_trace` (truncated), or early when a memory cap is hit
//!   (oldest first);
//! - **pending**: closed, its story not yet stored and published; still absorbs spans;
//! - **stored**: its story is stored; kept a while (the late window, and the caps) so that
//!   a late span reopens it with all its spans and the updated story is complete.
//!
//! The commit frontier of a partition is the offset of the oldest record that contributed
//! to an open or pending trace (since that trace was last stored), or, when there is none,
//! the offset after the last record read. Committing it means a restart re-reads every
//! record of every trace whose story is not stored, and nothing before.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::trace::{SpanInfo, TraceContent};
use crate::wire::story::Story;

/// The closing rules and caps (from `[assembler]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub idle_close_ms: u64,
    pub max_spans_per_trace: usize,
    /// Open traces, over every partition.
    pub max_open_traces: usize,
    /// Spans held in memory (open, pending and recently stored traces), over every
    /// partition. Stored traces are forgotten first, oldest first.
    pub max_buffered_spans: usize,
    /// How long a stored trace is kept so a late span updates a complete story.
    pub late_window_ms: u64,
}

/// What one record carries for the assembler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// `span_id` is the id's [`crate::identity::span_key`].
    Span {
        trace_id: String,
        span_id: u64,
        span: SpanInfo,
    },
    Log {
        trace_id: String,
        log_id: u64,
    },
}

impl Item {
    fn trace_id(&self) -> &str {
        match self {
            Item::Span { trace_id, .. } | Item::Log { trace_id, .. } => trace_id,
        }
    }
}

/// Counts from one call, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// New spans of a trace that had already closed.
    pub late_spans: u64,
    /// Open traces closed before their time because a cap was hit.
    pub early_closes: u64,
    /// Traces closed because they grew past the span limit.
    pub truncated: u64,
    /// Spans dropped because their trace is truncated.
    pub dropped_spans: u64,
    /// Stored traces forgotten before their late window ended because the span cap was hit.
    pub evicted_stored: u64,
}

impl Outcome {
    fn add(&mut self, o: Outcome) {
        self.late_spans += o.late_spans;
        self.early_closes += o.early_closes;
        self.truncated += o.truncated;
        self.dropped_spans += o.dropped_spans;
        self.evicted_stored += o.evicted_stored;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Pending,
    Stored,
}

#[derive(Debug)]
struct Trace {
    content: TraceContent,
    state: State,
    /// The oldest record that contributed since the trace was last stored.
    first_offset: i64,
    /// Order of opening (for "oldest first").
    seq: u64,
    last_ms: u64,
    stored_ms: u64,
    /// Its story was stored by this process at least once.
    ever_stored: bool,
}

/// A trace id, one copy per trace, shared by every index that names it.
type TraceId = Arc<str>;

#[derive(Debug, Default)]
struct Partition {
    traces: HashMap<TraceId, Trace>,
    /// (first_offset, trace id) of open and pending traces: the frontier is the first.
    holds: BTreeSet<(i64, TraceId)>,
    /// (seq, trace id) of open traces: early closes take the first.
    open_order: BTreeSet<(u64, TraceId)>,
    /// (stored_ms, seq, trace id) of stored traces, oldest first; entries whose trace has
    /// moved on are skipped.
    stored_order: VecDeque<(u64, u64, TraceId)>,
    next_offset: Option<i64>,
    spans: usize,
    /// Spans of pending traces (freed once stored).
    pending_spans: usize,
    stored: usize,
}

impl Partition {
    fn close(&mut self, id: &TraceId) {
        if let Some(t) = self.traces.get_mut(id) {
            if t.state == State::Open {
                t.state = State::Pending;
                self.pending_spans += t.content.spans.len();
                self.open_order.remove(&(t.seq, id.clone()));
            }
        }
    }

    fn evict_oldest_stored(&mut self) -> bool {
        while let Some((ms, seq, id)) = self.stored_order.pop_front() {
            if let Some(t) = self.traces.get(&id) {
                if t.state == State::Stored && t.stored_ms == ms && t.seq == seq {
                    self.spans -= t.content.spans.len();
                    self.stored -= 1;
                    self.traces.remove(&id);
                    return true;
                }
            }
        }
        false
    }

    fn oldest_stored_ms(&mut self) -> Option<u64> {
        // Drop stale entries at the front first.
        while let Some((ms, seq, id)) = self.stored_order.front() {
            match self.traces.get(id) {
                Some(t) if t.state == State::Stored && t.stored_ms == *ms && t.seq == *seq => return Some(*ms),
                _ => {
                    self.stored_order.pop_front();
                }
            }
        }
        None
    }
}

/// A closed trace whose story is to be stored and published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingStory {
    pub partition: i32,
    pub story: Story,
    /// This process never stored a story for the trace: one may exist from before a
    /// restart, built from records this process did not read again.
    pub first_time: bool,
}

/// The services and operation names of the spans held, one copy each: most spans share
/// a few. Forgotten whole when it reaches [`MAX_NAMES`] (names with high cardinality): the
/// spans keep their copies, new spans start sharing again.
#[derive(Debug, Default)]
struct Names(HashSet<Arc<str>>);

/// Most names [`Names`] keeps.
const MAX_NAMES: usize = 1 << 16;

impl Names {
    fn share(&mut self, name: &mut Arc<str>) {
        if let Some(shared) = self.0.get(&**name) {
            *name = shared.clone();
            return;
        }
        if self.0.len() >= MAX_NAMES {
            self.0.clear();
        }
        self.0.insert(name.clone());
    }
}

/// The state of every assigned partition.
#[derive(Debug)]
pub struct Buffer {
    limits: Limits,
    partitions: BTreeMap<i32, Partition>,
    seq: u64,
    names: Names,
}

impl Buffer {
    pub fn new(limits: Limits) -> Buffer {
        Buffer { limits, partitions: BTreeMap::new(), seq: 0, names: Names::default() }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Starts a partition with no state (the records from its committed offset rebuild it).
    pub fn assign(&mut self, partition: i32) {
        self.partitions.entry(partition).or_default();
    }

    /// Drops a revoked partition's state (docs/design.md#assembler); returns how many open or pending
    /// traces were dropped. Its next owner rebuilds them from the uncommitted records.
    pub fn revoke(&mut self, partition: i32) -> usize {
        self.partitions.remove(&partition).map_or(0, |p| p.holds.len())
    }

    pub fn is_assigned(&self, partition: i32) -> bool {
        self.partitions.contains_key(&partition)
    }

    pub fn partitions(&self) -> Vec<i32> {
        self.partitions.keys().copied().collect()
    }

    /// Open traces over every partition.
    pub fn open_traces(&self) -> usize {
        self.partitions.values().map(|p| p.open_order.len()).sum()
    }

    /// Closed traces whose story is not stored yet.
    pub fn pending_traces(&self) -> usize {
        self.partitions.values().map(|p| p.holds.len() - p.open_order.len()).sum()
    }

    /// Spans held in memory over every partition.
    pub fn buffered_spans(&self) -> usize {
        self.partitions.values().map(|p| p.spans).sum()
    }

    /// Whether to read more records. The caps count the spans of open and stored traces;
    /// closed traces wait for their stories to be stored (ClickHouse slow or down), so their
    /// spans are bounded apart: reading pauses while they reach `max_buffered_spans`, and
    /// the spans held stay under twice the cap (plus one record's).
    pub fn takes_records(&self) -> bool {
        self.pending_spans() < self.limits.max_buffered_spans
    }

    /// Spans of closed traces whose stories are not stored yet.
    pub fn pending_spans(&self) -> usize {
        self.partitions.values().map(|p| p.pending_spans).sum()
    }

    /// The offset to commit for `partition`: see the module documentation. None before the
    /// first record (nothing to commit).
    pub fn frontier(&self, partition: i32) -> Option<i64> {
        let p = self.partitions.get(&partition)?;
        p.holds.first().map(|(offset, _)| *offset).or(p.next_offset)
    }

    /// Takes in one record, read at `offset` of `partition` at time `now_ms`.
    pub fn add_record(&mut self, partition: i32, offset: i64, mut items: Vec<Item>, now_ms: u64) -> Outcome {
        let limits = self.limits;
        let mut out = Outcome::default();
        for item in &mut items {
            if let Item::Span { span, .. } = item {
                self.names.share(&mut span.service);
                self.names.share(&mut span.operation);
            }
        }
        let p = self.partitions.entry(partition).or_default();
        p.next_offset = Some(p.next_offset.map_or(offset + 1, |n| n.max(offset + 1)));
        for item in items {
            let id: TraceId = match p.traces.get_key_value(item.trace_id()) {
                Some((id, _)) => id.clone(),
                None => Arc::from(item.trace_id()),
            };
            let is_span = matches!(item, Item::Span { .. });
            // Open, or reopen, the trace.
            let reopen = match p.traces.get(&id) {
                None => {
                    self.seq += 1;
                    let t = Trace {
                        content: TraceContent::default(),
                        state: State::Open,
                        first_offset: offset,
                        seq: self.seq,
                        last_ms: now_ms,
                        stored_ms: 0,
                        ever_stored: false,
                    };
                    p.holds.insert((offset, id.clone()));
                    p.open_order.insert((t.seq, id.clone()));
                    p.traces.insert(id.clone(), t);
                    false
                }
                Some(t) => t.state == State::Stored,
            };
            if reopen {
                let t = p.traces.get_mut(&id).expect("present");
                if t.content.truncated {
                    // A truncated story stays as it is.
                    if is_span {
                        out.dropped_spans += 1;
                        out.late_spans += 1;
                    }
                    continue;
                }
                self.seq += 1;
                t.state = State::Open;
                t.first_offset = offset;
                t.seq = self.seq;
                p.stored -= 1;
                p.holds.insert((offset, id.clone()));
                p.open_order.insert((t.seq, id.clone()));
            }
            let t = p.traces.get_mut(&id).expect("present");
            let late = t.ever_stored || t.state == State::Pending;
            if t.state == State::Open {
                t.last_ms = now_ms;
            }
            match item {
                Item::Log { log_id, .. } => {
                    t.content.log_ids.insert(log_id);
                }
                Item::Span { span_id, span, .. } => {
                    if t.content.spans.contains_key(&span_id) {
                        continue;
                    }
                    if t.content.truncated || t.content.spans.len() >= limits.max_spans_per_trace {
                        out.dropped_spans += 1;
                        if !t.content.truncated {
                            t.content.truncated = true;
                            out.truncated += 1;
                            p.close(&id);
                        }
                        continue;
                    }
                    t.content.add_span(span_id, span);
                    p.spans += 1;
                    if t.state == State::Pending {
                        p.pending_spans += 1;
                    }
                    if late {
                        out.late_spans += 1;
                    }
                }
            }
        }
        out.add(self.enforce_caps());
        out
    }

    /// Closes open traces early, oldest first, and forgets stored ones, until the caps
    /// hold (pending traces are freed only once stored).
    pub fn enforce_caps(&mut self) -> Outcome {
        let mut out = Outcome::default();
        let limits = self.limits;
        // Stored traces count against the span cap only (each holds at least one span).
        loop {
            let open = self.open_traces();
            // Spans of pending traces are on their way out: closing more would not help.
            let spans = self.buffered_spans() - self.partitions.values().map(|p| p.pending_spans).sum::<usize>();
            if open > limits.max_open_traces {
                self.close_oldest_open();
                out.early_closes += 1;
            } else if spans > limits.max_buffered_spans {
                if self.evict_oldest_stored() {
                    out.evicted_stored += 1;
                    continue;
                }
                if open == 0 {
                    break;
                }
                self.close_oldest_open();
                out.early_closes += 1;
            } else {
                break;
            }
        }
        out
    }

    fn close_oldest_open(&mut self) {
        let oldest = self
            .partitions
            .iter()
            .filter_map(|(n, p)| p.open_order.first().map(|(seq, id)| (*seq, *n, id.clone())))
            .min();
        if let Some((_, n, id)) = oldest {
            self.partitions.get_mut(&n).expect("present").close(&id);
        }
    }

    fn evict_oldest_stored(&mut self) -> bool {
        let oldest = self.partitions.iter_mut().filter_map(|(n, p)| p.oldest_stored_ms().map(|ms| (ms, *n))).min();
        match oldest {
            Some((_, n)) => self.partitions.get_mut(&n).expect("present").evict_oldest_stored(),
            None => false,
        }
    }

    /// Closes the traces idle for `idle_close_ms` and forgets stored traces past the late
    /// window. Returns how many closed.
    pub fn close_due(&mut self, now_ms: u64) -> usize {
        let limits = self.limits;
        let mut closed = 0;
        for p in self.partitions.values_mut() {
            let due: Vec<TraceId> = p
                .traces
                .iter()
                .filter(|(_, t)| t.state == State::Open && now_ms.saturating_sub(t.last_ms) >= limits.idle_close_ms)
                .map(|(id, _)| id.clone())
                .collect();
            closed += due.len();
            for id in due {
                p.close(&id);
            }
            while p.oldest_stored_ms().is_some_and(|ms| now_ms.saturating_sub(ms) >= limits.late_window_ms) {
                p.evict_oldest_stored();
            }
        }
        closed
    }

    /// The stories of every pending trace, stamped `version_ns`. Pending traces with no
    /// span (only logs carried their id) have no story and are forgotten here.
    pub fn pending_stories(&mut self, version_ns: u64) -> Vec<PendingStory> {
        let mut out = Vec::new();
        for (n, p) in self.partitions.iter_mut() {
            let pending: Vec<TraceId> = p
                .holds
                .iter()
                .filter(|(_, id)| p.traces.get(id).is_some_and(|t| t.state == State::Pending))
                .map(|(_, id)| id.clone())
                .collect();
            for id in pending {
                let t = &p.traces[&id];
                match t.content.story(&id, version_ns) {
                    Some(story) => out.push(PendingStory { partition: *n, story, first_time: !t.ever_stored }),
                    None => {
                        p.holds.remove(&(t.first_offset, id.clone()));
                        p.traces.remove(&id);
                    }
                }
            }
        }
        out
    }

    /// Adds spans read from elsewhere (the spans table) to a pending trace, so a story
    /// rebuilt from part of its records after a restart is complete. Returns its new story.
    pub fn merge_spans(
        &mut self,
        partition: i32,
        trace_id: &str,
        spans: Vec<(u64, SpanInfo)>,
        version_ns: u64,
    ) -> Option<Story> {
        let limits = self.limits;
        let p = self.partitions.get_mut(&partition)?;
        let t = p.traces.get_mut(trace_id).filter(|t| t.state == State::Pending)?;
        for (span_id, mut span) in spans {
            self.names.share(&mut span.service);
            self.names.share(&mut span.operation);
            if t.content.spans.contains_key(&span_id) {
                continue;
            }
            if t.content.spans.len() >= limits.max_spans_per_trace {
                t.content.truncated = true;
                break;
            }
            t.content.add_span(span_id, span);
            p.spans += 1;
            p.pending_spans += 1;
        }
        t.content.story(trace_id, version_ns)
    }

    /// Marks a pending trace's story stored (and published): its records are no longer
    /// needed, and it is kept for late spans.
    pub fn mark_stored(&mut self, partition: i32, trace_id: &str, now_ms: u64) {
        let Some(p) = self.partitions.get_mut(&partition) else {
            return;
        };
        let Some(id) = p.traces.get_key_value(trace_id).map(|(id, _)| id.clone()) else {
            return;
        };
        let t = p.traces.get_mut(&id).expect("present");
        if t.state != State::Pending {
            return;
        }
        p.holds.remove(&(t.first_offset, id.clone()));
        p.pending_spans -= t.content.spans.len();
        t.state = State::Stored;
        t.stored_ms = now_ms;
        t.ever_stored = true;
        p.stored += 1;
        p.stored_order.push_back((now_ms, t.seq, id));
    }

    /// Forgets a pending trace without a story stored (its stored story is more complete
    /// than what this process could rebuild); its records are released like a stored one's.
    pub fn forget(&mut self, partition: i32, trace_id: &str) {
        let Some(p) = self.partitions.get_mut(&partition) else {
            return;
        };
        if let Some((id, t)) = p.traces.remove_entry(trace_id) {
            p.holds.remove(&(t.first_offset, id.clone()));
            p.open_order.remove(&(t.seq, id));
            p.spans -= t.content.spans.len();
            match t.state {
                State::Stored => p.stored -= 1,
                State::Pending => p.pending_spans -= t.content.spans.len(),
                State::Open => {}
            }
        }
    }
}

#[cfg(test)]
impl Buffer {
    fn open_or_pending(&self, partition: i32, trace_id: &str) -> bool {
        self.partitions.get(&partition).and_then(|p| p.traces.get(trace_id)).is_some_and(|t| t.state != State::Stored)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::identity::span_key;
    use crate::wire::story::StoryRow;
    use proptest::prelude::*;

    fn limits() -> Limits {
        Limits {
            idle_close_ms: 1000,
            max_spans_per_trace: 100,
            max_open_traces: 100,
            max_buffered_spans: 1000,
            late_window_ms: 60_000,
        }
    }

    fn span_item(trace: &str, id: &str, parent: &str) -> Item {
        Item::Span {
            trace_id: trace.into(),
            span_id: span_key(id),
            span: SpanInfo {
                parent: (!parent.is_empty()).then(|| span_key(parent)),
                service: "svc".into(),
                operation: format!("op{}", id.len()).into(),
                start_ns: 10,
                end_ns: 20,
                error: false,
                exception: None,
            },
        }
    }

    fn store_all(b: &mut Buffer, now_ms: u64) -> Vec<StoryRow> {
        let pending = b.pending_stories(now_ms);
        for s in &pending {
            b.mark_stored(s.partition, &s.story.row.trace_id, now_ms);
        }
        pending.into_iter().map(|p| p.story.row).collect()
    }

    #[test]
    fn idle_traces_close_and_the_frontier_follows_stored_stories() {
        let mut b = Buffer::new(limits());
        b.assign(0);
        assert_eq!(b.frontier(0), None);
        b.add_record(0, 10, vec![span_item("a", "1", "")], 0);
        b.add_record(0, 11, vec![span_item("b", "1", "")], 500);
        b.add_record(0, 12, vec![span_item("a", "2", "1")], 600);
        assert_eq!(b.frontier(0), Some(10));
        assert_eq!(b.close_due(1000), 0, "a was active at 600");
        assert_eq!(b.close_due(1500), 1, "b idle since 500");
        let stories = store_all(&mut b, 1500);
        assert_eq!(stories.len(), 1);
        assert_eq!(stories[0].trace_id, "b");
        assert_eq!(b.frontier(0), Some(10), "a is still open: its first record holds the frontier");
        assert_eq!(b.close_due(1600), 1);
        // Closed but not stored: the frontier still waits.
        assert_eq!(b.frontier(0), Some(10));
        let stories = store_all(&mut b, 1600);
        assert_eq!(stories[0].span_count, 2);
        assert_eq!(b.frontier(0), Some(13));
        assert_eq!((b.open_traces(), b.pending_traces()), (0, 0));
    }

    #[test]
    fn late_spans_reopen_the_stored_trace_and_update_its_story() {
        let mut b = Buffer::new(limits());
        b.add_record(0, 0, vec![span_item("a", "1", "")], 0);
        b.close_due(1000);
        let first = store_all(&mut b, 1000);
        assert_eq!(first[0].span_count, 1);
        let out = b.add_record(0, 1, vec![span_item("a", "22", "1"), span_item("a", "1", "")], 1100);
        assert_eq!(out.late_spans, 1, "a re-read span is not late");
        assert_eq!(b.frontier(0), Some(1));
        b.close_due(2100);
        let pending = b.pending_stories(2100);
        assert!(!pending[0].first_time);
        let second = store_all(&mut b, 2100);
        assert_eq!(second[0].span_count, 2);
        assert_ne!(second[0].fingerprint, first[0].fingerprint);
        assert!(second[0].version_ns > first[0].version_ns);
    }

    #[test]
    fn span_limit_truncates_and_closes_at_once() {
        let mut b = Buffer::new(Limits { max_spans_per_trace: 3, ..limits() });
        let items: Vec<Item> = (0..5).map(|i| span_item("t", &i.to_string(), "")).collect();
        let out = b.add_record(0, 0, items, 0);
        assert_eq!((out.truncated, out.dropped_spans), (1, 2));
        assert_eq!(b.open_traces(), 0);
        let stories = store_all(&mut b, 0);
        assert!(stories[0].truncated);
        assert_eq!(stories[0].span_count, 3);
        let out = b.add_record(0, 1, vec![span_item("t", "9", "")], 10);
        assert_eq!(out.dropped_spans, 1, "a truncated story is not reopened");
        assert_eq!(b.frontier(0), Some(2));
    }

    #[test]
    fn caps_close_the_oldest_early() {
        let mut b = Buffer::new(Limits { max_open_traces: 3, max_buffered_spans: 5, ..limits() });
        let mut early = 0;
        for i in 0..4 {
            early += b.add_record(0, i, vec![span_item(&format!("t{i}"), "1", "")], i as u64).early_closes;
        }
        assert_eq!(early, 1);
        assert_eq!(b.open_traces(), 3);
        let pending = b.pending_stories(5);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].story.row.trace_id, "t0", "the oldest closes first");
        // The span cap: three more spans on t3 make 6 > 5 in open traces (t0's pending
        // span is on its way out and does not count).
        let items = vec![span_item("t3", "2", "1"), span_item("t3", "3", "1"), span_item("t3", "4", "1")];
        let out = b.add_record(0, 4, items, 10);
        assert_eq!(out.early_closes, 1);
        assert_eq!(b.open_traces(), 2);
    }

    #[test]
    fn the_span_cap_forgets_stored_traces_first_then_closes_the_oldest_open() {
        let mut b = Buffer::new(Limits { max_open_traces: 100, max_buffered_spans: 6, ..limits() });
        // Two traces of two spans, stored: held for late spans.
        b.add_record(0, 0, vec![span_item("s1", "1", ""), span_item("s1", "2", "1")], 0);
        b.add_record(0, 1, vec![span_item("s2", "1", ""), span_item("s2", "2", "1")], 1);
        b.close_due(5000);
        assert_eq!(store_all(&mut b, 5000).len(), 2);
        assert_eq!(b.buffered_spans(), 4);
        // Three open spans more: 7 > 6, the oldest stored trace goes, nothing closes.
        let items = vec![span_item("o1", "1", ""), span_item("o1", "2", "1"), span_item("o1", "3", "1")];
        let out = b.add_record(0, 2, items, 5001);
        assert_eq!((out.evicted_stored, out.early_closes), (1, 0));
        assert_eq!((b.buffered_spans(), b.open_traces()), (5, 1));
        // Four more open spans: s2 goes, then the oldest open trace closes early.
        let items: Vec<Item> = (1..=4).map(|i| span_item("o2", &i.to_string(), "")).collect();
        let out = b.add_record(0, 3, items, 5002);
        assert_eq!((out.evicted_stored, out.early_closes), (1, 1));
        assert_eq!(b.open_traces(), 1);
        let stories = store_all(&mut b, 5002);
        assert_eq!((stories[0].trace_id.as_str(), stories[0].span_count), ("o1", 3), "closed early, whole");
        assert!(b.buffered_spans() <= 7, "o1's 3 stored spans and o2's 4 open");
        // A late span of an evicted trace starts it afresh (the assembler completes it from
        // the spans table, `merge_spans`).
        b.add_record(0, 4, vec![span_item("s1", "3", "1")], 5003);
        b.close_due(10_000);
        let again = b.pending_stories(10_000);
        let s1 = again.iter().find(|p| p.story.row.trace_id == "s1").unwrap();
        assert!(s1.first_time, "this process no longer knows it stored s1");
    }

    #[test]
    fn reading_pauses_while_unstored_stories_hold_the_span_cap() {
        let mut b = Buffer::new(Limits { max_open_traces: 2, max_buffered_spans: 4, ..limits() });
        let mut taken = 0;
        while b.takes_records() {
            let t = format!("t{taken}");
            b.add_record(0, taken, vec![span_item(&t, "1", ""), span_item(&t, "2", "1")], taken as u64);
            assert!(b.buffered_spans() - b.pending_spans() <= 4, "the caps hold open and stored spans");
            taken += 1;
            assert!(taken < 100, "reading never paused");
        }
        // Nothing was stored (ClickHouse down): the two oldest traces closed early and wait.
        assert_eq!((taken, b.pending_traces(), b.pending_spans(), b.open_traces()), (4, 2, 4, 2));
        assert!(b.buffered_spans() <= 2 * 4 + 2, "under twice the cap plus one record");
        store_all(&mut b, 10);
        assert!(b.takes_records(), "stored: reading goes on");
    }

    #[test]
    fn revoke_drops_the_partition() {
        let mut b = Buffer::new(limits());
        b.assign(1);
        b.add_record(1, 0, vec![span_item("a", "1", "")], 0);
        assert_eq!(b.revoke(1), 1);
        assert_eq!((b.open_traces(), b.buffered_spans(), b.frontier(1)), (0, 0, None));
        assert!(!b.is_assigned(1));
    }

    #[test]
    fn logs_only_traces_leave_no_story() {
        let mut b = Buffer::new(limits());
        b.add_record(0, 0, vec![Item::Log { trace_id: "x".into(), log_id: 1 }], 0);
        b.add_record(0, 1, vec![span_item("y", "1", ""), Item::Log { trace_id: "y".into(), log_id: 2 }], 0);
        b.close_due(5000);
        let stories = store_all(&mut b, 5000);
        assert_eq!(stories.len(), 1);
        assert_eq!(stories[0].log_count, 1);
        assert_eq!(b.frontier(0), Some(2));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Record { partition: i32, items: Vec<(u8, u8, bool)> },
        Tick(u64),
        Store,
        Revoke(i32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..2i32, prop::collection::vec((0..12u8, 0..20u8, any::<bool>()), 0..4))
                .prop_map(|(partition, items)| Op::Record { partition, items }),
            2 => (0..1500u64).prop_map(Op::Tick),
            2 => Just(Op::Store),
            1 => (0..2i32).prop_map(Op::Revoke),
        ]
    }

    fn items_of(partition: i32, items: &[(u8, u8, bool)]) -> Vec<Item> {
        items
            .iter()
            .map(|(t, s, log)| {
                let trace = format!("p{partition}t{t}");
                if *log {
                    Item::Log { trace_id: trace, log_id: u64::from(*s) }
                } else {
                    span_item(&trace, &format!("s{s}"), "")
                }
            })
            .collect()
    }

    proptest! {
        /// The commit frontier never passes the first record (since its last store) of a
        /// trace that is open or pending, never moves back, and the caps on open traces
        /// hold after every record.
        #[test]
        fn frontier_never_passes_an_unstored_trace(ops in prop::collection::vec(op(), 1..80), small in any::<bool>()) {
            let lim = if small {
                Limits { max_open_traces: 3, max_buffered_spans: 8, max_spans_per_trace: 4, ..limits() }
            } else {
                limits()
            };
            let mut b = Buffer::new(lim);
            let mut now = 0u64;
            let mut next = [0i64; 2];
            // The model: trace -> offsets of its records since its story was last stored.
            let mut unstored: HashMap<String, Vec<i64>> = HashMap::new();
            let mut last_frontier: [Option<i64>; 2] = [None, None];
            for op in ops {
                match op {
                    Op::Record { partition, items } => {
                        let offset = next[partition as usize];
                        next[partition as usize] += 1;
                        let items = items_of(partition, &items);
                        for item in &items {
                            unstored.entry(item.trace_id().to_string()).or_default().push(offset);
                        }
                        b.add_record(partition, offset, items, now);
                        prop_assert!(b.open_traces() <= lim.max_open_traces);
                    }
                    Op::Tick(ms) => { now += ms; b.close_due(now); }
                    Op::Store => {
                        for s in b.pending_stories(now) {
                            b.mark_stored(s.partition, &s.story.row.trace_id, now);
                        }
                    }
                    Op::Revoke(p) => {
                        b.revoke(p);
                        unstored.retain(|id, _| !id.starts_with(&format!("p{p}")));
                        last_frontier[p as usize] = None;
                        // A new owner starts from the committed offset; keep numbering.
                        b.assign(p);
                    }
                }
                // Keep in the model only what the buffer holds as open or pending: its
                // offsets are then those since the trace last (re)opened.
                unstored.retain(|id, _| b.open_or_pending(if id.starts_with("p0") { 0 } else { 1 }, id));
                for p in 0..2i32 {
                    let f = b.frontier(p);
                    for (id, offsets) in &unstored {
                        if id.starts_with(&format!("p{p}")) && b.open_or_pending(p, id) {
                            let first = *offsets.iter().min().unwrap();
                            prop_assert!(f.is_some_and(|f| f <= first), "frontier {f:?} passed {id} at {first}");
                        }
                    }
                    if let (Some(before), Some(now_f)) = (last_frontier[p as usize], f) {
                        prop_assert!(now_f >= before, "frontier moved back from {before} to {now_f}");
                    }
                    if f.is_some() { last_frontier[p as usize] = f; }
                }
            }
        }

        /// With room enough, every span sent ends in its trace's final story exactly once.
        #[test]
        fn every_span_ends_in_one_story(records in prop::collection::vec(prop::collection::vec((0..6u8, 0..30u8, Just(false)), 1..4), 1..40),
                                        gaps in prop::collection::vec(0..2500u64, 40)) {
            let mut b = Buffer::new(limits());
            let mut sent: HashMap<String, HashSet<String>> = HashMap::new();
            let mut latest: HashMap<String, StoryRow> = HashMap::new();
            let mut now = 0;
            for (i, items) in records.iter().enumerate() {
                for (t, s, _) in items {
                    sent.entry(format!("p0t{t}")).or_default().insert(format!("s{s}"));
                }
                b.add_record(0, i as i64, items_of(0, items), now);
                now += gaps[i];
                b.close_due(now);
                for s in store_all(&mut b, now) { latest.insert(s.trace_id.clone(), s); }
            }
            b.close_due(now + 10_000);
            for s in store_all(&mut b, now + 10_000) { latest.insert(s.trace_id.clone(), s); }
            prop_assert_eq!(latest.len(), sent.len());
            for (id, spans) in &sent {
                prop_assert_eq!(latest[id].span_count as usize, spans.len());
            }
            prop_assert_eq!(b.frontier(0), Some(records.len() as i64));
        }
    }
}
