//! Stories: the story of a trace (the stories table's primary key), the shapes of a window
//! (one per fingerprint, with its count, duration quantiles, error rate and an example), and
//! the stories of one shape.

use clickhouse::Row;
use serde::Deserialize;

use super::{Window, MAX_LIMIT};
use crate::store::statements::Statement;
use crate::store::{Store, StoreError, StoryRow};

/// After `FROM stories`: the newest version of one trace's story. Binds: trace id.
pub const STORY_BY_TRACE_REST: &str = "FINAL WHERE trace_id = ? LIMIT 1";

pub async fn story_by_trace(store: &Store, trace_id: &str) -> Result<Option<StoryRow>, StoreError> {
    store
        .select::<StoryRow>(STORY_BY_TRACE_REST)
        .bind(trace_id)
        .fetch_optional()
        .await
        .map_err(|e| store.query_error("reading a story", e))
}

#[derive(Debug, Clone, PartialEq, Row, Deserialize)]
pub struct Shape {
    pub fingerprint: u64,
    pub count: u64,
    pub p50_duration_ns: f64,
    pub p95_duration_ns: f64,
    /// The share of its stories with an error, 0 to 1.
    pub error_rate: f64,
    pub example_trace_id: String,
    pub root_service: String,
    pub root_operation: String,
    pub edges: Vec<String>,
    pub last_start_ns: u64,
    /// The most frequent (exception type, message) of its error stories: one element, or
    /// none when no story of the shape told an exception. `topK`, so approximate when a
    /// shape's stories tell very many different exceptions.
    pub top_exception: Vec<(String, String)>,
}

/// Binds: from, to, [service], [cursor: count, count, fingerprint], limit. Ordered by count,
/// the most frequent first; the cursor is the previous page's last (count, fingerprint).
pub fn shapes_sql(by_service: bool, after: bool) -> String {
    let service = if by_service { " AND has(services, ?)" } else { "" };
    let having = if after { " HAVING count() < ? OR (count() = ? AND fingerprint > ?)" } else { "" };
    format!(
        "SELECT fingerprint, count(), quantile(0.5)(duration_ns), quantile(0.95)(duration_ns), avg(error), \
         any(trace_id), any(root_service), any(root_operation), any(edges), max(start_ns), \
         topKIf(1)((exception_type, exception_message), exception_type != '' OR exception_message != '') \
         FROM stories FINAL WHERE start_ns >= ? AND start_ns < ?{service} \
         GROUP BY fingerprint{having} ORDER BY count() DESC, fingerprint LIMIT ?"
    )
}

pub async fn shapes(
    store: &Store,
    window: Window,
    service: Option<&str>,
    after: Option<(u64, u64)>,
    limit: u64,
) -> Result<Vec<Shape>, StoreError> {
    let mut query =
        store.client().query(&shapes_sql(service.is_some(), after.is_some())).bind(window.from_ns).bind(window.to_ns);
    if let Some(service) = service {
        query = query.bind(service);
    }
    if let Some((count, fingerprint)) = after {
        query = query.bind(count).bind(count).bind(fingerprint);
    }
    query.bind(limit.min(MAX_LIMIT)).fetch_all().await.map_err(|e| store.query_error("reading story shapes", e))
}

/// After `FROM stories`: the stories of one shape in a window, newest first. Binds:
/// fingerprint, from, to, [cursor: start, start, trace id], limit.
pub fn shape_stories_rest(after: bool) -> String {
    let cursor = if after { " AND (start_ns < ? OR (start_ns = ? AND trace_id > ?))" } else { "" };
    format!(
        "FINAL WHERE fingerprint = ? AND start_ns >= ? AND start_ns < ?{cursor} ORDER BY start_ns DESC, trace_id LIMIT ?"
    )
}

pub async fn shape_stories(
    store: &Store,
    fingerprint: u64,
    window: Window,
    after: Option<(u64, String)>,
    limit: u64,
) -> Result<Vec<StoryRow>, StoreError> {
    let rest = shape_stories_rest(after.is_some());
    let mut query = store.select::<StoryRow>(&rest).bind(fingerprint).bind(window.from_ns).bind(window.to_ns);
    if let Some((start, trace_id)) = &after {
        query = query.bind(*start).bind(*start).bind(trace_id.as_str());
    }
    query.bind(limit.min(MAX_LIMIT)).fetch_all().await.map_err(|e| store.query_error("reading a shape's stories", e))
}

pub fn statements() -> Vec<Statement> {
    vec![
        Statement::select::<StoryRow>("query.story_by_trace", STORY_BY_TRACE_REST).binds(["'t'"]),
        Statement::new("query.shapes", shapes_sql(true, true)).binds(["0", "1", "'s'", "0", "0", "0", "10"]),
        Statement::select::<StoryRow>("query.shape_stories", &shape_stories_rest(true))
            .binds(["0", "0", "1", "0", "0", "'t'", "10"]),
    ]
}
