//! The assembler's reads: when a trace this process never stored turns out to have a
//! stored story (it was rebuilt after a restart from only its later records), the story's
//! span count and the trace's stored spans, to complete it. Stories are written with
//! [`super::Store::insert`].
//!
//! Both use `trace_id IN (?, …)` rather than `has(?, trace_id)`: `trace_id` leads the
//! primary key of both tables, and only `IN` lets the server use it. Ids go in chunks to
//! keep each statement short.

use std::collections::HashMap;

use super::statements::Statement;
use super::{SpanRow, Store, StoreError};

const SPAN_COUNT_CHUNK: usize = 500;
const SPANS_CHUNK: usize = 200;

/// `?, ?, …` for `n` bound values.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// The newest stored span count of each of `n` traces. Binds: `n` trace ids.
pub fn span_counts_sql(n: usize) -> String {
    format!(
        "SELECT trace_id, argMax(span_count, version_ns) FROM stories WHERE trace_id IN ({}) GROUP BY trace_id",
        placeholders(n)
    )
}

/// After `FROM spans`: the stored spans of `n` traces, each once. Binds: `n` trace ids.
pub fn spans_rest(n: usize) -> String {
    format!("FINAL WHERE trace_id IN ({})", placeholders(n))
}

/// The span count of the newest stored story of each of `trace_ids` that has one.
pub async fn stored_span_counts(store: &Store, trace_ids: &[&str]) -> Result<HashMap<String, u32>, StoreError> {
    let mut counts = HashMap::new();
    for chunk in trace_ids.chunks(SPAN_COUNT_CHUNK) {
        let mut q = store.client().query(&span_counts_sql(chunk.len()));
        for id in chunk {
            q = q.bind(*id);
        }
        let rows = q.fetch_all::<(String, u32)>().await.map_err(|e| store.query_error("reading stored stories", e))?;
        counts.extend(rows);
    }
    Ok(counts)
}

/// The stored spans of `trace_ids`, each once, in no particular order.
pub async fn spans_of_traces(store: &Store, trace_ids: &[&str]) -> Result<Vec<SpanRow>, StoreError> {
    let mut spans = Vec::new();
    for chunk in trace_ids.chunks(SPANS_CHUNK) {
        let mut q = store.select::<SpanRow>(&spans_rest(chunk.len()));
        for id in chunk {
            q = q.bind(*id);
        }
        spans.extend(q.fetch_all::<SpanRow>().await.map_err(|e| store.query_error("reading stored spans", e))?);
    }
    Ok(spans)
}

/// This module's statements with sample binds, for the registry.
pub fn statements() -> Vec<Statement> {
    let ids = ["'0af7651916cd43dd8448eb211c80319c'", "'b7ad6b7169203331b7ad6b7169203331'"];
    vec![
        Statement::new("stories.span_counts", span_counts_sql(2)).binds(ids),
        Statement::select::<SpanRow>("stories.spans_of_traces", &spans_rest(2)).binds(ids),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_placeholder_per_trace_id() {
        assert_eq!(span_counts_sql(1).matches('?').count(), 1);
        assert_eq!(spans_rest(3), "FINAL WHERE trace_id IN (?, ?, ?)");
    }
}
