//! The assembler (docs/design.md#assembler): reads `<prefix>.signals` in group
//! `<prefix>-assembler`, keeps open traces in memory per partition, and turns each closed
//! trace into a story ([`crate::wire::story::Story`]), stored in the `stories` table and published
//! to `<prefix>.stories` keyed by fingerprint. docs/stories.md describes it for operators.
//!
//! - [`trace`]: a trace's content and the story built from it (pure).
//! - [`buffer`]: open/pending/stored traces, closing rules, caps, the commit frontier (pure).
//! - [`metrics`]: what the assembler reports (each event logs and counts).
//! - this file: the assembler as the consume loop drives it
//!   ([`crate::bus::consume::Handler`]): storing and publishing, commits, rebalances.
//!
//! Guarantees, and where each is kept:
//! - offsets are committed explicitly, per partition, at [`Buffer::frontier`]: never past
//!   the first record of a trace that is open or whose story is not stored, so a restart
//!   (even `kill -9`) re-reads and rebuilds exactly the unfinished traces;
//! - a story is identified by its trace id: the table is a ReplacingMergeTree by trace id
//!   and `version_ns`, so a rebuilt or updated story replaces the row in deduplicated reads;
//! - a trace rebuilt from only part of its records (its first records were committed past
//!   with an earlier story) is completed from the spans table before it is stored, and is
//!   never stored with fewer spans than the story already stored;
//! - a revoked partition's traces are dropped; its next owner rebuilds them.

pub mod buffer;
pub mod metrics;
pub mod trace;

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use prometheus_client::registry::Registry;
use rdkafka::message::{Message, OwnedMessage};
use serde_json::json;

use self::buffer::{Buffer, Item, Limits, Outcome, PendingStory};
use self::metrics::AssemblerMetrics;
use self::trace::SpanInfo;
use crate::bus::consume::{apply_rebalances, Group, Handler, Member};
use crate::bus::producer::{OutRecord, Publisher};
use crate::config::Names;
use crate::config::{AssemblerConfig, Config};
use crate::daemon::{DaemonSetup, HealthFn, Shutdown};
use crate::identity::span_key;
use crate::otlp::flatten::{log_rows, span_rows};
use crate::store::{now_ns, stories, Store, StoryRow};
use crate::wire::record::{self, SignalPayload};

/// How long a stored trace is kept for late spans (bounded also by the caps).
pub const LATE_WINDOW: Duration = Duration::from_secs(300);
/// How often offsets are committed (when a frontier moved).
const COMMIT_EVERY: Duration = Duration::from_secs(1);

/// `tayga serve assembler`: the shared daemon start-up ([`crate::daemon::run`]) on
/// `assembler.metrics_addr`, then the consume loop until `shutdown`.
pub async fn serve(config: &Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = AssemblerMetrics::new(&mut registry);
    let health: HealthFn = {
        let m = metrics.clone();
        Arc::new(move || {
            json!({"status": "ok", "service": "assembler",
                   "open_traces": m.open_traces.get(), "spans_buffered": m.spans_buffered.get()})
        })
    };
    let spec = DaemonSetup {
        group: Group::Assembler,
        metrics_addr: config.assembler.metrics_addr.clone(),
        registry,
        consumer: metrics.consumer.clone(),
        health,
    };
    crate::daemon::run(config, shutdown, spec, |store, member| {
        let publisher = member.publisher().cloned().context("the assembler's member publishes");
        async move { Ok(Assembler::new(config, store, publisher?, metrics)) }
    })
    .await
}

/// The closing rules and caps of `[assembler]`.
pub fn limits(config: &AssemblerConfig) -> Limits {
    Limits {
        idle_close_ms: config.idle_close_secs.saturating_mul(1000),
        max_spans_per_trace: usize::try_from(config.max_spans_per_trace).unwrap_or(usize::MAX).max(1),
        max_open_traces: usize::try_from(config.max_open_traces).unwrap_or(usize::MAX).max(1),
        max_buffered_spans: usize::try_from(config.max_buffered_spans).unwrap_or(usize::MAX).max(1),
        late_window_ms: LATE_WINDOW.as_millis() as u64,
    }
}

/// What a record carries for the assembler: its spans and logs with a valid trace id.
pub fn items_of(
    headers: Option<&rdkafka::message::BorrowedHeaders>,
    payload: Option<&[u8]>,
) -> Result<Vec<Item>, record::RecordError> {
    let record = record::decode(headers, payload.or(Some(&[])))?;
    let valid = |id: &str| id.len() == 32 && id.bytes().any(|b| b != b'0');
    Ok(match &record.payload {
        SignalPayload::Traces(request) => span_rows(request, record.ingest_ns)
            .into_iter()
            .filter(|r| valid(&r.trace_id))
            .map(|r| {
                let span = SpanInfo::from_row(&r);
                Item::Span { trace_id: r.trace_id, span_id: span_key(&r.span_id), span }
            })
            .collect(),
        SignalPayload::Logs(request) => log_rows(request, record.ingest_ns)
            .into_iter()
            .filter(|r| valid(&r.trace_id))
            .map(|r| Item::Log { trace_id: r.trace_id, log_id: r.log_id })
            .collect(),
    })
}

/// The assembler's state: the traces of the partitions it holds, and where it stores and
/// publishes their stories.
struct Assembler {
    buffer: Buffer,
    publisher: Publisher,
    store: Store,
    names: Names,
    metrics: AssemblerMetrics,
    started: Instant,
    last_commit: Instant,
}

impl Handler for Assembler {
    fn tick_every(&self) -> Duration {
        Duration::from_millis((self.buffer.limits().idle_close_ms / 4).clamp(50, 1000))
    }

    fn wants_records(&self) -> bool {
        self.buffer.takes_records()
    }

    async fn record(&mut self, member: &mut Member, message: OwnedMessage) -> ControlFlow<()> {
        let items = match items_of(message.headers().map(|h| h.as_borrowed()), message.payload()) {
            Ok(items) => items,
            Err(e) => {
                member.metrics().undecodable(member.topic(), message.partition(), message.offset(), &e);
                Vec::new()
            }
        };
        let now = self.now_ms();
        let outcome = self.buffer.add_record(message.partition(), message.offset(), items, now);
        self.count(outcome);
        ControlFlow::Continue(())
    }

    async fn tick(&mut self, member: &mut Member) {
        let now = self.now_ms();
        self.buffer.close_due(now);
        self.flush().await;
        if self.last_commit.elapsed() >= COMMIT_EVERY {
            self.commit(member).await;
            self.last_commit = Instant::now();
        }
        self.gauges();
    }

    async fn assigned(&mut self, _member: &mut Member, partitions: &[i32]) {
        for p in partitions {
            self.buffer.revoke(*p);
            self.buffer.assign(*p);
        }
    }

    async fn revoked(&mut self, _member: &mut Member, partitions: &[i32]) {
        let dropped = partitions.iter().map(|p| self.buffer.revoke(*p)).sum();
        self.metrics.traces_revoked(partitions, dropped);
    }

    /// Clean stop: store what has closed and commit; open traces are re-read at restart.
    async fn stop(&mut self, member: &mut Member) {
        apply_rebalances(member, self).await;
        self.flush().await;
        self.commit(member).await;
        tracing::info!(
            open_traces = self.buffer.open_traces(),
            "assembler stopped; open traces will be rebuilt at restart"
        );
    }
}

impl Assembler {
    fn new(config: &Config, store: Store, publisher: Publisher, metrics: AssemblerMetrics) -> Assembler {
        Assembler {
            buffer: Buffer::new(limits(&config.assembler)),
            publisher,
            store,
            names: config.names(),
            metrics,
            started: Instant::now(),
            last_commit: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn count(&self, o: Outcome) {
        self.metrics.outcome(o);
        self.gauges();
    }

    fn gauges(&self) {
        self.metrics.buffered(self.buffer.open_traces(), self.buffer.pending_traces(), self.buffer.buffered_spans());
    }

    /// Stores and publishes the stories of every closed trace; on failure they stay
    /// pending (and keep holding the frontier) and are retried at the next tick.
    async fn flush(&mut self) {
        let version_ns = now_ns();
        let mut pending = self.buffer.pending_stories(version_ns);
        if pending.is_empty() {
            return;
        }
        if let Err(e) = self.complete_rebuilt(&mut pending, version_ns).await {
            self.metrics.store_failed(&format!("{e:#}"), pending.len());
            return;
        }
        if pending.is_empty() {
            return;
        }
        let rows: Vec<StoryRow> = pending.iter().map(|p| p.story.row.clone()).collect();
        let stored = async {
            self.store.insert(&rows).await?;
            let mut records = Vec::with_capacity(pending.len());
            let keys: Vec<String> = pending.iter().map(|p| p.story.key()).collect();
            for (p, key) in pending.iter().zip(&keys) {
                records.push(OutRecord {
                    topic: &self.names.stories,
                    key,
                    value: p.story.to_json()?.into(),
                    headers: &[],
                });
            }
            self.publisher.publish_all(records).await?;
            anyhow::Ok(())
        }
        .await;
        match stored {
            Ok(()) => {
                let now = self.now_ms();
                for p in &pending {
                    self.buffer.mark_stored(p.partition, &p.story.row.trace_id, now);
                }
                self.metrics.stories_stored(pending.len());
                let o = self.buffer.enforce_caps();
                self.count(o);
            }
            Err(e) => self.metrics.store_failed(&format!("{e:#}"), pending.len()),
        }
    }

    /// For traces this process never stored: when a story is already stored (from before a
    /// restart), the trace may have been rebuilt from only its later records. Completes it
    /// from the spans table; drops it if the stored story still has more spans.
    async fn complete_rebuilt(&mut self, pending: &mut Vec<PendingStory>, version_ns: u64) -> anyhow::Result<()> {
        let first: Vec<&str> = pending.iter().filter(|p| p.first_time).map(|p| p.story.row.trace_id.as_str()).collect();
        if first.is_empty() {
            return Ok(());
        }
        let stored: HashMap<String, u32> =
            stories::stored_span_counts(&self.store, &first).await.context("reading stored stories")?;
        if stored.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = stored.keys().map(String::as_str).collect();
        let mut spans: HashMap<String, Vec<(u64, SpanInfo)>> = HashMap::new();
        for row in stories::spans_of_traces(&self.store, &ids).await.context("reading stored spans")? {
            spans.entry(row.trace_id.clone()).or_default().push((span_key(&row.span_id), SpanInfo::from_row(&row)));
        }
        let mut kept = Vec::with_capacity(pending.len());
        for mut p in pending.drain(..) {
            if let Some(stored_count) = stored.get(&p.story.row.trace_id) {
                let extra = spans.remove(&p.story.row.trace_id).unwrap_or_default();
                if let Some(story) = self.buffer.merge_spans(p.partition, &p.story.row.trace_id, extra, version_ns) {
                    p.story = story;
                }
                // As many spans: stored and published again, since nothing tells whether the
                // process that stored it was killed before the broker acknowledged the
                // publication (the topic is at least once; the table keeps one row).
                if p.story.row.span_count < *stored_count {
                    tracing::info!(trace_id = %p.story.row.trace_id, rebuilt = p.story.row.span_count, stored = stored_count,
                        "a rebuilt trace has fewer spans than its stored story; keeping the stored one");
                    self.buffer.forget(p.partition, &p.story.row.trace_id);
                    continue;
                }
            }
            kept.push(p);
        }
        *pending = kept;
        Ok(())
    }

    /// Commits the frontier of every assigned partition that moved.
    async fn commit(&self, member: &mut Member) {
        let frontiers: Vec<(i32, i64)> =
            self.buffer.partitions().into_iter().filter_map(|p| Some((p, self.buffer.frontier(p)?))).collect();
        member.commit(frontiers).await;
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;
    use rdkafka::message::{Message as _, OwnedMessage, Timestamp};

    use super::*;
    use crate::otlp::{ExportLogsServiceRequest, ExportTraceServiceRequest};
    use crate::wire::record::{headers, SignalKind};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    fn items(kind: SignalKind, value: Vec<u8>) -> Vec<Item> {
        let m = OwnedMessage::new(Some(value), None, "t".into(), Timestamp::NotAvailable, 0, 0, Some(headers(kind, 1)));
        items_of(m.headers().map(|h| h.as_borrowed()), m.payload()).unwrap()
    }

    #[test]
    fn records_become_items_with_valid_trace_ids_only() {
        let span = |trace: Vec<u8>, id: u8| Span {
            trace_id: trace,
            span_id: vec![id; 8],
            name: "op".into(),
            ..Default::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span(vec![1; 16], 1), span(vec![0; 16], 2), span(Vec::new(), 3)],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let got = items(SignalKind::Traces, request.encode_to_vec());
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], Item::Span { trace_id, span_id, span }
            if trace_id == &"01".repeat(16) && *span_id == span_key(&"01".repeat(8)) && &*span.service == "unknown_service"));
        let logs = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs {
                    log_records: vec![LogRecord { trace_id: vec![2; 16], ..Default::default() }, LogRecord::default()],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let got = items(SignalKind::Logs, logs.encode_to_vec());
        assert!(matches!(&got[..], [Item::Log { trace_id, .. }] if trace_id == &"02".repeat(16)));
        let m = OwnedMessage::new(
            Some(vec![0xff]),
            None,
            "t".into(),
            Timestamp::NotAvailable,
            0,
            0,
            Some(headers(SignalKind::Traces, 1)),
        );
        assert!(items_of(m.headers().map(|h| h.as_borrowed()), m.payload()).is_err());
    }

    #[test]
    fn limits_come_from_the_config() {
        let l = limits(&AssemblerConfig::default());
        assert_eq!((l.idle_close_ms, l.max_spans_per_trace, l.max_open_traces), (30_000, 10_000, 100_000));
    }
}
