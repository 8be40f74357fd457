//! The assembler's Prometheus metrics (docs/stories.md lists them).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Default)]
pub struct AssemblerMetrics {
    pub records: Counter,
    pub invalid_records: Counter,
    pub open_traces: Gauge,
    pub pending_traces: Gauge,
    pub spans_buffered: Gauge,
    pub stories_emitted: Counter,
    pub late_spans: Counter,
    pub early_closes: Counter,
    pub truncated: Counter,
    pub dropped_spans: Counter,
    pub store_failures: Counter,
    pub revoked_traces: Counter,
    pub lag: Gauge,
}

impl AssemblerMetrics {
    pub fn new(registry: &mut Registry) -> AssemblerMetrics {
        let m = AssemblerMetrics::default();
        registry.register("tayga_assembler_records_consumed", "Records read from the signals topic", m.records.clone());
        registry.register(
            "tayga_assembler_invalid_records",
            "Records that could not be decoded; skipped",
            m.invalid_records.clone(),
        );
        registry.register("tayga_assembler_open_traces", "Traces open in memory", m.open_traces.clone());
        registry.register(
            "tayga_assembler_pending_traces",
            "Closed traces whose story is not stored yet",
            m.pending_traces.clone(),
        );
        registry.register(
            "tayga_assembler_spans_buffered",
            "Spans held in memory (open, pending and recently stored traces)",
            m.spans_buffered.clone(),
        );
        registry.register(
            "tayga_assembler_stories_emitted",
            "Stories stored and published (an updated story counts again)",
            m.stories_emitted.clone(),
        );
        registry.register(
            "tayga_assembler_late_spans",
            "Spans that arrived after their trace closed",
            m.late_spans.clone(),
        );
        registry.register(
            "tayga_assembler_early_closes",
            "Open traces closed before they were idle because a memory cap was hit",
            m.early_closes.clone(),
        );
        registry.register("tayga_assembler_truncated_traces", "Traces closed at the span limit", m.truncated.clone());
        registry.register(
            "tayga_assembler_dropped_spans",
            "Spans not added because their trace was truncated",
            m.dropped_spans.clone(),
        );
        registry.register(
            "tayga_assembler_store_failures",
            "Failed attempts to store and publish stories (retried)",
            m.store_failures.clone(),
        );
        registry.register(
            "tayga_assembler_revoked_traces",
            "Open or pending traces dropped with a revoked partition",
            m.revoked_traces.clone(),
        );
        registry.register(
            "tayga_assembler_lag",
            "Records of the assigned partitions after the commit frontier (high watermark - frontier)",
            m.lag.clone(),
        );
        m
    }
}
