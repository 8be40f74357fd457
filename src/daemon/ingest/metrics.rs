//! What ingest reports, shared by the HTTP and gRPC front ends: one method per event, each
//! counting (and logging where an operator needs the line) together (docs/metrics.md).

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::auth::Refusal;
use crate::store::backlog::BacklogStats;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub signal: &'static str,
    /// `http` or `grpc`.
    pub transport: &'static str,
    /// `ok`, `partial`, `bad_request`, `unavailable`, `busy`, `unauthorized` or `not_implemented`.
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalLabel {
    pub signal: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectLabels {
    pub signal: &'static str,
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PathLabel {
    /// `broker` or `direct`.
    pub path: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabel {
    /// `signals` or `logs`.
    pub topic: &'static str,
}

#[derive(Clone)]
pub struct IngestMetrics {
    requests: Family<RequestLabels, Counter>,
    accepted: Family<SignalLabel, Counter>,
    rejected: Family<RejectLabels, Counter>,
    bytes: Family<SignalLabel, Counter>,
    published: Family<TopicLabel, Counter>,
    path_requests: Family<PathLabel, Counter>,
    path_errors: Family<PathLabel, Counter>,
    path_up: Family<PathLabel, Gauge>,
    latency: Family<SignalLabel, Histogram>,
    busy: Family<BusyLabels, Counter>,
    backlog_records: Gauge,
    backlog_bytes: Gauge,
    backlog_replayed: Counter,
    backlog_replayed_bytes: Counter,
    backlog_replay_errors: Counter,
    backlog_overflow: Counter,
    busy_log: Arc<OncePerSecond>,
    unauthorized: Family<UnauthorizedLabels, Counter>,
    unauthorized_log: Arc<OncePerSecond>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnauthorizedLabels {
    pub transport: &'static str,
    /// `missing`, `invalid` (no accepted token) or `service` (the token may not send a
    /// service of the request).
    pub reason: &'static str,
}

/// Lets one event per key through each second, counting those held back: the next line
/// says how many it stands for.
#[derive(Default)]
pub struct OncePerSecond {
    last: Mutex<HashMap<&'static str, (Instant, u64)>>,
}

impl OncePerSecond {
    /// `Some(events)` (this one included, and those held back since the last) when this
    /// event is to be logged now.
    pub fn admit(&self, key: &'static str, now: Instant) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match last.get_mut(key) {
            Some((at, held_back)) if now.duration_since(*at) < Duration::from_secs(1) => {
                *held_back += 1;
                None
            }
            Some((at, held_back)) => {
                let events = *held_back + 1;
                *at = now;
                *held_back = 0;
                Some(events)
            }
            None => {
                last.insert(key, (now, 0));
                Some(1)
            }
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BusyLabels {
    pub signal: &'static str,
    /// `producer_queue` (the broker's local queue stayed full), `inflight_bytes` or
    /// `inflight_requests` (the caps on requests being handled).
    pub reason: &'static str,
}

impl IngestMetrics {
    pub fn register(registry: &mut Registry) -> IngestMetrics {
        let metrics = IngestMetrics {
            requests: Family::default(),
            accepted: Family::default(),
            rejected: Family::default(),
            bytes: Family::default(),
            published: Family::default(),
            path_requests: Family::default(),
            path_errors: Family::default(),
            path_up: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.0005, 2.0, 16))),
            busy: Family::default(),
            backlog_records: Gauge::default(),
            backlog_bytes: Gauge::default(),
            backlog_replayed: Counter::default(),
            backlog_replayed_bytes: Counter::default(),
            backlog_replay_errors: Counter::default(),
            backlog_overflow: Counter::default(),
            busy_log: Arc::default(),
            unauthorized: Family::default(),
            unauthorized_log: Arc::default(),
        };
        let r = registry.sub_registry_with_prefix("tayga_ingest");
        r.register("requests", "OTLP export requests by signal, transport and outcome", metrics.requests.clone());
        r.register("accepted_items", "Spans and logs acknowledged to clients", metrics.accepted.clone());
        r.register("rejected_items", "Spans and logs refused, by reason", metrics.rejected.clone());
        r.register("received_bytes", "Request body bytes received", metrics.bytes.clone());
        r.register("published_records", "Records acknowledged by the broker, by topic", metrics.published.clone());
        r.register("path_requests", "Requests carried by each ingest path", metrics.path_requests.clone());
        r.register("path_errors", "Failures that marked an ingest path down", metrics.path_errors.clone());
        r.register("path_up", "Whether an ingest path is in use (1) or skipped (0)", metrics.path_up.clone());
        r.register("request_duration_seconds", "Time to store or publish a request", metrics.latency.clone());
        r.register("busy_requests", "Requests refused as overload (503, Retry-After), by reason", metrics.busy.clone());
        r.register(
            "unauthorized_requests",
            "Requests refused for their token (401/403, UNAUTHENTICATED/PERMISSION_DENIED), by reason",
            metrics.unauthorized.clone(),
        );
        r.register(
            "backlog_records",
            "Direct-path records waiting to be replayed to the topics",
            metrics.backlog_records.clone(),
        );
        r.register("backlog_bytes", "Value bytes of the records waiting to be replayed", metrics.backlog_bytes.clone());
        r.register(
            "backlog_replayed_records",
            "Backlog records the broker acknowledged on replay",
            metrics.backlog_replayed.clone(),
        );
        r.register(
            "backlog_replayed_bytes",
            "Value bytes of the records replayed",
            metrics.backlog_replayed_bytes.clone(),
        );
        r.register(
            "backlog_replay_errors",
            "Replay passes that failed (retried)",
            metrics.backlog_replay_errors.clone(),
        );
        r.register(
            "backlog_overflow_records",
            "Direct-path records stored but not kept for the topics: the backlog was full",
            metrics.backlog_overflow.clone(),
        );
        metrics
    }

    /// A request body arrived (before it is decoded).
    pub fn received(&self, signal: &'static str, bytes: usize) {
        self.bytes.get_or_create(&SignalLabel { signal }).inc_by(bytes as u64);
    }

    /// A request was answered.
    pub fn answered(&self, signal: &'static str, transport: &'static str, outcome: &'static str) {
        self.requests.get_or_create(&RequestLabels { signal, transport, outcome }).inc();
    }

    /// Items that can never be published (a single item over the record limit).
    pub fn rejected_too_large(&self, signal: &'static str, items: usize) {
        self.rejected.get_or_create(&RejectLabels { signal, reason: "too_large" }).inc_by(items as u64);
    }

    /// A request's items were made durable on `path`, `took` after it was decoded.
    pub fn accepted(&self, signal: &'static str, path: &'static str, items: usize, took: Duration) {
        self.path_requests.get_or_create(&PathLabel { path }).inc();
        self.accepted.get_or_create(&SignalLabel { signal }).inc_by(items as u64);
        self.latency.get_or_create(&SignalLabel { signal }).observe(took.as_secs_f64());
    }

    /// A path failed a request: it is skipped until the probe finds it back.
    pub fn path_failed(&self, path: &'static str, error: &dyn Display) {
        self.path_errors.get_or_create(&PathLabel { path }).inc();
        tracing::warn!(path, error = %error, "ingest path failed; skipping it until a probe finds it back");
    }

    pub fn published(&self, topic: &'static str) {
        self.published.get_or_create(&TopicLabel { topic }).inc();
    }

    pub fn set_path_up(&self, path: &'static str, up: bool) {
        self.path_up.get_or_create(&PathLabel { path }).set(i64::from(up));
    }

    /// A request was refused because ingest is saturated (not because a path is down).
    /// Counted every time; logged at most once a second per reason, with how many were
    /// refused for it since the last line, so a flood of refusals is one line a second.
    pub fn busy(&self, signal: &'static str, reason: &'static str, detail: &dyn Display) {
        self.busy.get_or_create(&BusyLabels { signal, reason }).inc();
        if let Some(refused) = self.busy_log.admit(reason, std::time::Instant::now()) {
            tracing::warn!(
                signal,
                reason,
                refused,
                "requests refused, ingest is busy: {detail}; clients retry after 1 s"
            );
        }
    }

    /// A request was refused for its token. Counted every time; logged at most once a
    /// second per reason, never with the token.
    pub fn unauthorized(&self, transport: &'static str, refusal: &Refusal) {
        let reason = refusal.reason();
        self.unauthorized.get_or_create(&UnauthorizedLabels { transport, reason }).inc();
        if let Some(refused) = self.unauthorized_log.admit(reason, std::time::Instant::now()) {
            tracing::warn!(transport, reason, refused, "OTLP requests refused: {refusal}");
        }
    }

    pub fn set_backlog(&self, stats: BacklogStats) {
        self.backlog_records.set(stats.records as i64);
        self.backlog_bytes.set(stats.bytes as i64);
    }

    /// One replay pass: `records` acknowledged by the broker and marked.
    pub fn backlog_replayed(&self, records: u64, bytes: u64) {
        self.backlog_replayed.inc_by(records);
        self.backlog_replayed_bytes.inc_by(bytes);
    }

    /// A replay pass failed; the next one starts again from the oldest record.
    pub fn backlog_replay_failed(&self, error: &dyn Display) {
        self.backlog_replay_errors.inc();
        tracing::warn!(error = %error, "replaying the ingest backlog failed; retrying");
    }

    /// A drain ended: the backlog was empty as of its last pass.
    pub fn backlog_drained(&self, records: u64, bytes: u64, took: Option<Duration>) {
        if records > 0 {
            let took_ms = took.map_or(0, |t| t.as_millis() as u64);
            tracing::info!(records, bytes, took_ms, "replayed the ingest backlog to the topics");
        }
    }

    /// Direct-path records that were stored but could not be kept (the backlog is full).
    pub fn backlog_overflow(&self, records: u64) {
        self.backlog_overflow.inc_by(records);
    }

    /// The backlog reached (or left) its bound.
    pub fn backlog_full(&self, full: bool, stats: BacklogStats, max_bytes: u64) {
        if full {
            tracing::error!(
                records = stats.records,
                bytes = stats.bytes,
                max_bytes,
                "the ingest backlog is full: direct writes are stored but no longer replayed to the topics \
                 (no stories, templates or alerts for them) until the broker is back and the backlog drains; \
                 raise ingest.backlog_max_bytes or bring the broker back"
            );
        } else {
            tracing::info!(
                records = stats.records,
                bytes = stats.bytes,
                max_bytes,
                "the ingest backlog has room again"
            );
        }
    }

    /// The backlog passed 80 % of its bound (logged once per crossing).
    pub fn backlog_filling(&self, stats: BacklogStats, max_bytes: u64) {
        tracing::warn!(
            records = stats.records,
            bytes = stats.bytes,
            max_bytes,
            "the ingest backlog is over 80% of ingest.backlog_max_bytes; past it, direct writes stop being kept for the topics"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_second_per_reason_counting_the_rest() {
        let limit = OncePerSecond::default();
        let t0 = Instant::now();
        assert_eq!(limit.admit("inflight_bytes", t0), Some(1));
        assert_eq!(limit.admit("inflight_bytes", t0 + Duration::from_millis(10)), None);
        assert_eq!(limit.admit("inflight_requests", t0 + Duration::from_millis(20)), Some(1), "another reason");
        assert_eq!(limit.admit("inflight_bytes", t0 + Duration::from_millis(999)), None);
        assert_eq!(limit.admit("inflight_bytes", t0 + Duration::from_secs(1)), Some(3), "two held back and this one");
        assert_eq!(limit.admit("inflight_bytes", t0 + Duration::from_millis(1500)), None);
    }
}
