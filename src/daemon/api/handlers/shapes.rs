//! `GET /api/v1/shapes/{a}/diff/{b}`: what differs between two shapes (docs/api.md): the
//! call edges one has and the other lacks, and per edge the calls and the self time of a
//! representative trace of each side (each shape's newest story in the window).
//! `edge_profile` is the pure part.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS};
use crate::store::query::stories;
use crate::store::SpanRow;
use crate::wire::alert::format_id;

/// Per call edge (`parent_service/parent_operation -> service/operation`, or `ROOT -> …`,
/// the stories' `edges` text): how many spans made that call and their summed self time
/// (each span's duration less the time covered by its children).
pub fn edge_profile(spans: &[SpanRow]) -> BTreeMap<String, (u64, u64)> {
    let by_id: HashMap<&str, &SpanRow> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let mut children: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
    for s in spans {
        if by_id.contains_key(s.parent_span_id.as_str()) {
            children.entry(s.parent_span_id.as_str()).or_default().push((s.start_ns, s.end_ns));
        }
    }
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for s in spans {
        let edge = match by_id.get(s.parent_span_id.as_str()) {
            Some(p) => format!("{}/{} -> {}/{}", p.service, p.name, s.service, s.name),
            None => format!("ROOT -> {}/{}", s.service, s.name),
        };
        let covered = covered_ns(children.get(s.span_id.as_str()).map_or(&[][..], |c| c), s.start_ns, s.end_ns);
        let entry = out.entry(edge).or_default();
        entry.0 += 1;
        entry.1 += s.end_ns.saturating_sub(s.start_ns).saturating_sub(covered);
    }
    out
}

/// How much of `[from, to)` the intervals cover (overlaps counted once).
fn covered_ns(intervals: &[(u64, u64)], from: u64, to: u64) -> u64 {
    let mut clipped: Vec<(u64, u64)> =
        intervals.iter().map(|(s, e)| ((*s).max(from), (*e).min(to))).filter(|(s, e)| s < e).collect();
    clipped.sort();
    let (mut total, mut reach) = (0, from);
    for (s, e) in clipped {
        let s = s.max(reach);
        if e > s {
            total += e - s;
            reach = e;
        }
    }
    total
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DiffParams {
    /// Window start, Unix ns (default: a day before `to`); each side's newest story in it.
    pub from: Option<u64>,
    pub to: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DiffSide {
    pub fingerprint: String,
    /// The representative trace: the shape's newest story in the window.
    pub trace_id: String,
    pub duration_ns: u64,
    pub edges: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EdgeChange {
    pub edge: String,
    /// Spans making this call in each side's trace (0: absent).
    pub calls_a: u64,
    pub calls_b: u64,
    /// Their summed self time, ns.
    pub self_ns_a: u64,
    pub self_ns_b: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ShapeDiff {
    pub a: DiffSide,
    pub b: DiffSide,
    /// Edges of `b` that `a` lacks, and of `a` that `b` lacks.
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Every edge of either side, sorted.
    pub edges: Vec<EdgeChange>,
}

#[utoipa::path(get, path = "/api/v1/shapes/{a}/diff/{b}", tag = "stories", params(
        ("a" = String, Path, description = "the shape diffed against: 16 hex digits"),
        ("b" = String, Path, description = "the shape shown: 16 hex digits"), DiffParams),
    responses((status = 200, body = ShapeDiff), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn diff(
    State(state): State<AppState>,
    Path((a, b)): Path<(String, String)>,
    Query(p): Query<DiffParams>,
) -> Result<Json<ShapeDiff>, ApiError> {
    let (a, b) = (params::hex_id("a", &a)?, params::hex_id("b", &b)?);
    let window = params::window(p.from, p.to, state.now(), DAY_NS, 31 * DAY_NS)?;
    let mut sides = Vec::new();
    for fingerprint in [a, b] {
        let newest = state.run(stories::shape_stories(&state.store, fingerprint, window, None, 1)).await?;
        let story = newest
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::not_found(format!("a story of shape {} in the window", format_id(fingerprint))))?;
        let spans = state.run(crate::store::stories::spans_of_traces(&state.store, &[story.trace_id.as_str()])).await?;
        sides.push((story, edge_profile(&spans)));
    }
    let (sb, pb) = sides.pop().expect("two sides");
    let (sa, pa) = sides.pop().expect("two sides");
    let (ea, eb): (BTreeSet<&String>, BTreeSet<&String>) = (sa.edges.iter().collect(), sb.edges.iter().collect());
    let keys: BTreeSet<&String> =
        pa.keys().chain(pb.keys()).chain(ea.iter().copied()).chain(eb.iter().copied()).collect();
    let edges = keys
        .into_iter()
        .map(|edge| {
            let (calls_a, self_ns_a) = pa.get(edge).copied().unwrap_or_default();
            let (calls_b, self_ns_b) = pb.get(edge).copied().unwrap_or_default();
            EdgeChange { edge: edge.clone(), calls_a, calls_b, self_ns_a, self_ns_b }
        })
        .collect();
    let side = |s: &crate::store::StoryRow| DiffSide {
        fingerprint: format_id(s.fingerprint),
        trace_id: s.trace_id.clone(),
        duration_ns: s.duration_ns,
        edges: s.edges.clone(),
    };
    Ok(Json(ShapeDiff {
        added: eb.difference(&ea).map(|e| e.to_string()).collect(),
        removed: ea.difference(&eb).map(|e| e.to_string()).collect(),
        a: side(&sa),
        b: side(&sb),
        edges,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: &str, parent: &str, service: &str, name: &str, start: u64, end: u64) -> SpanRow {
        SpanRow {
            span_id: id.into(),
            parent_span_id: parent.into(),
            service: service.into(),
            name: name.into(),
            start_ns: start,
            end_ns: end,
            duration_ns: end - start,
            ..Default::default()
        }
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
