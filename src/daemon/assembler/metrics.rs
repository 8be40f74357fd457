//! What the assembler reports: one method per event, each logging and counting together
//! (docs/metrics.md lists the metrics).

use std::fmt::Display;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::buffer::Outcome;
use crate::bus::consume::{ConsumerMetrics, Group};

#[derive(Clone, Default)]
pub struct AssemblerMetrics {
    pub consumer: ConsumerMetrics,
    pub open_traces: Gauge,
    pub pending_traces: Gauge,
    pub spans_buffered: Gauge,
    pub stories_emitted: Counter,
    pub late_spans: Counter,
    pub early_closes: Counter,
    pub truncated: Counter,
    pub dropped_spans: Counter,
    pub evicted_stored: Counter,
    pub store_errors: Counter,
    pub revoked_traces: Counter,
}

impl AssemblerMetrics {
    pub fn new(registry: &mut Registry) -> AssemblerMetrics {
        let m = AssemblerMetrics {
            consumer: ConsumerMetrics::register(registry, Group::Assembler),
            ..AssemblerMetrics::default()
        };
        let r = registry.sub_registry_with_prefix("tayga_assembler");
        r.register("open_traces", "Traces open in memory", m.open_traces.clone());
        r.register("pending_traces", "Closed traces whose story is not stored yet", m.pending_traces.clone());
        r.register(
            "buffered_spans",
            "Spans held in memory (open, pending and recently stored traces)",
            m.spans_buffered.clone(),
        );
        r.register(
            "emitted_stories",
            "Stories stored and published (an updated story counts again)",
            m.stories_emitted.clone(),
        );
        r.register("late_spans", "Spans that arrived after their trace closed", m.late_spans.clone());
        r.register(
            "early_closes",
            "Open traces closed before they were idle because a memory cap was hit",
            m.early_closes.clone(),
        );
        r.register("truncated_traces", "Traces closed at the span limit", m.truncated.clone());
        r.register("dropped_spans", "Spans not added because their trace was truncated", m.dropped_spans.clone());
        r.register(
            "evicted_traces",
            "Stored traces forgotten before their late window ended because the span cap was hit",
            m.evicted_stored.clone(),
        );
        r.register("store_errors", "Failed attempts to store and publish stories (retried)", m.store_errors.clone());
        r.register(
            "revoked_traces",
            "Open or pending traces dropped with a revoked partition",
            m.revoked_traces.clone(),
        );
        m
    }

    /// What adding records or enforcing the caps did to the buffer.
    pub fn outcome(&self, o: Outcome) {
        self.late_spans.inc_by(o.late_spans);
        self.early_closes.inc_by(o.early_closes);
        self.truncated.inc_by(o.truncated);
        self.dropped_spans.inc_by(o.dropped_spans);
        self.evicted_stored.inc_by(o.evicted_stored);
    }

    /// What the buffer holds now.
    pub fn buffered(&self, open_traces: usize, pending_traces: usize, spans: usize) {
        self.open_traces.set(open_traces as i64);
        self.pending_traces.set(pending_traces as i64);
        self.spans_buffered.set(spans as i64);
    }

    /// The traces of revoked partitions were dropped; their next owner rebuilds them.
    pub fn traces_revoked(&self, partitions: &[i32], dropped: usize) {
        self.revoked_traces.inc_by(dropped as u64);
        tracing::info!(?partitions, dropped, "partitions revoked: their open traces are dropped");
    }

    pub fn stories_stored(&self, stories: usize) {
        self.stories_emitted.inc_by(stories as u64);
        tracing::debug!(stories, "stories stored and published");
    }

    /// Storing or publishing failed: the stories stay pending (holding the commit frontier)
    /// and are tried again at the next tick.
    pub fn store_failed(&self, error: &dyn Display, stories: usize) {
        self.store_errors.inc();
        tracing::warn!(error = %error, stories, "storing or publishing stories failed; retrying");
    }
}
