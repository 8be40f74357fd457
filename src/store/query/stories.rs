//! Stories: the story of a trace (the stories table's primary key), the shapes of a window
//! (one per fingerprint, with its count, duration quantiles, error rate and an example), and
//! the stories of one shape.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use super::{Window, MAX_LIMIT};
use crate::store::statements::Statement;
use crate::store::{SpanRow, Store, StoreError, StoryRow};
use crate::wire::alert::hex_id;

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

/// A shape as the API, the app and `tayga shapes list --json` show it, read in one query.
#[derive(Debug, Clone, PartialEq, Row, Deserialize, Serialize, utoipa::ToSchema)]
pub struct Shape {
    #[serde(serialize_with = "hex_id::serialize")]
    #[schema(value_type = String, pattern = "^[0-9a-f]{16}$")]
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
    /// The exception its error stories tell most often; absent when none tells one. (`topK`,
    /// so approximate when a shape's stories tell very many different exceptions.)
    #[serde(deserialize_with = "first_exception")]
    pub top_exception: Option<ShapeException>,
}

/// An exception, as stories tell it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ShapeException {
    pub r#type: String,
    pub message: String,
}

/// The query's `topK(1)` of (type, message): an array of one tuple, or empty.
fn first_exception<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ShapeException>, D::Error> {
    let top = <Vec<(String, String)> as Deserialize>::deserialize(d)?;
    Ok(top.into_iter().next().map(|(r#type, message)| ShapeException { r#type, message }))
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

/// Per call edge (`parent_service/parent_operation -> service/operation`, or `ROOT -> …`,
/// the stories' `edges` text): how many spans made that call and their summed self time
/// (each span's duration less the time covered by its children). The same self time as
/// `otlp::critical::self_times` (a layer above `store`, so not called here; a property test
/// there holds the two equal).
pub fn edge_profile(spans: &[SpanRow]) -> BTreeMap<String, (u64, u64)> {
    let by_id: HashMap<&str, &SpanRow> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let mut children: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
    for s in spans {
        // A span that names itself as its parent is not its own child.
        if by_id.contains_key(s.parent_span_id.as_str()) && s.parent_span_id != s.span_id {
            children.entry(s.parent_span_id.as_str()).or_default().push((s.start_ns, s.end_ns));
        }
    }
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for s in spans {
        let edge = match by_id.get(s.parent_span_id.as_str()) {
            Some(p) => format!("{}/{} -> {}/{}", p.service, p.name, s.service, s.name),
            None => format!("ROOT -> {}/{}", s.service, s.name),
        };
        let (from, to) = (s.start_ns, s.end_ns.max(s.start_ns));
        let covered = crate::time::covered_ns(children.get(s.span_id.as_str()).map_or(&[][..], |c| c), from, to);
        let entry = out.entry(edge).or_default();
        entry.0 += 1;
        entry.1 += (to - from) - covered;
    }
    out
}

/// One call edge in a diff of two shapes: the spans making that call in each side's
/// representative trace (0: absent) and their summed self time.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct EdgeCalls {
    pub edge: String,
    pub calls_a: u64,
    pub calls_b: u64,
    pub self_ns_a: u64,
    pub self_ns_b: u64,
}

/// What differs between two shapes (docs/api.md): each side's newest story in the window (its
/// representative trace), the edges `b` adds and removes against `a`, and every edge of either
/// side with its calls and self time in each trace. The API's diff and `tayga shapes diff` read it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeDiff {
    pub a: StoryRow,
    pub b: StoryRow,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub edges: Vec<EdgeCalls>,
}

/// Why a diff has no answer.
#[derive(Debug, thiserror::Error)]
pub enum ShapeDiffError {
    #[error("no story of shape {} in the window", crate::wire::alert::format_id(*.0))]
    NoStory(u64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The diff of shapes `a` and `b` over `window`.
pub async fn shape_diff(store: &Store, a: u64, b: u64, window: Window) -> Result<ShapeDiff, ShapeDiffError> {
    let mut sides = Vec::with_capacity(2);
    for fingerprint in [a, b] {
        let story = shape_stories(store, fingerprint, window, None, 1)
            .await?
            .into_iter()
            .next()
            .ok_or(ShapeDiffError::NoStory(fingerprint))?;
        let spans = crate::store::stories::spans_of_traces(store, &[story.trace_id.as_str()]).await?;
        sides.push((story, spans));
    }
    let (b_side, a_side) = (sides.pop().expect("two sides"), sides.pop().expect("two sides"));
    Ok(diff_of(a_side, b_side))
}

/// The pure part of [`shape_diff`]: two stories, each with its trace's spans.
pub fn diff_of((a, a_spans): (StoryRow, Vec<SpanRow>), (b, b_spans): (StoryRow, Vec<SpanRow>)) -> ShapeDiff {
    let (pa, pb) = (edge_profile(&a_spans), edge_profile(&b_spans));
    let (ea, eb): (BTreeSet<&String>, BTreeSet<&String>) = (a.edges.iter().collect(), b.edges.iter().collect());
    let keys: BTreeSet<&String> =
        pa.keys().chain(pb.keys()).chain(ea.iter().copied()).chain(eb.iter().copied()).collect();
    let edges = keys
        .into_iter()
        .map(|edge| {
            let (calls_a, self_ns_a) = pa.get(edge).copied().unwrap_or_default();
            let (calls_b, self_ns_b) = pb.get(edge).copied().unwrap_or_default();
            EdgeCalls { edge: edge.clone(), calls_a, calls_b, self_ns_a, self_ns_b }
        })
        .collect();
    let added = eb.difference(&ea).map(|e| e.to_string()).collect();
    let removed = ea.difference(&eb).map(|e| e.to_string()).collect();
    ShapeDiff { a, b, added, removed, edges }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: &str, parent: &str, service: &str, name: &str, start: u64, end: u64) -> SpanRow {
        SpanRow::sketch(id, parent, service, name, start, end)
    }

    #[test]
    fn each_edge_counts_its_calls_and_their_self_time() {
        let spans = [
            span("r", "", "web", "GET /", 0, 100),
            span("a", "r", "db", "query", 10, 30),
            span("b", "r", "db", "query", 20, 50), // overlaps a: 10..50 covered once
            span("c", "r", "db", "lock", 60, 90),
            span("d", "c", "db", "wait", 65, 95), // runs past its parent: clipped
        ];
        let p = edge_profile(&spans);
        assert_eq!(p["ROOT -> web/GET /"], (1, 100 - 40 - 30));
        assert_eq!(p["web/GET / -> db/query"], (2, 20 + 30));
        assert_eq!(p["web/GET / -> db/lock"], (1, 30 - 25));
        assert_eq!(p["db/lock -> db/wait"], (1, 30));
    }

    #[test]
    fn a_span_whose_parent_never_arrived_is_a_root_edge() {
        let p = edge_profile(&[span("x", "gone", "api", "call", 5, 9)]);
        assert_eq!(p["ROOT -> api/call"], (1, 4));
    }
}
