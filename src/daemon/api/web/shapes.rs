//! `/shapes/{a}/diff/{b}`: what shape `b` does that shape `a` does not (the API's
//! `GET /api/v1/shapes/{a}/diff/{b}`): the edges it adds and removes, per edge the change in
//! calls and self time, and the representative trace of each side as two waterfalls on one
//! time scale, the critical path marked on both. The shape page and a shape alert's page
//! link here; the alert's page shows the same summary inline ([`edge_changes`]).

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use maud::{html, Markup};
use serde::Deserialize;

use super::charts;
use super::format;
use super::layout::{respond, shell, Nav, PageResult};
use super::query;
use super::stories::bars_of;
use crate::daemon::api::handlers::shapes::{self, DiffParams, EdgeChange, ShapeDiff};
use crate::daemon::api::handlers::{traces, AppState};
use crate::daemon::api::params::Query;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffQuery {
    /// The API's window, Unix ns: each side's newest story in it.
    from: Option<u64>,
    to: Option<u64>,
}

/// The diff page's address for `a` against `b` over `[from, to)` (the API's default window
/// when none).
pub fn diff_href(a: &str, b: &str, window: Option<(u64, u64)>) -> String {
    match window {
        Some((from, to)) => format!("/shapes/{a}/diff/{b}?from={from}&to={to}"),
        None => format!("/shapes/{a}/diff/{b}"),
    }
}

pub async fn diff(State(state): State<AppState>, Path((a, b)): Path<(String, String)>, uri: Uri) -> PageResult {
    let p: DiffQuery = query(&uri)?;
    let d =
        shapes::diff(State(state.clone()), Path((a.clone(), b.clone())), Query(DiffParams { from: p.from, to: p.to }))
            .await?
            .0;
    let (ta, tb) = tokio::try_join!(
        traces::by_id(State(state.clone()), Path(d.a.trace_id.clone())),
        traces::by_id(State(state.clone()), Path(d.b.trace_id.clone())),
    )?;
    let (bars_a, bars_b) = (bars_of(&ta.0.spans), bars_of(&tb.0.spans));
    // One axis for both: the longer trace fills it, the shorter is drawn shorter.
    let axis = charts::trace_length(&bars_a).max(charts::trace_length(&bars_b));
    let root = tb.0.spans.iter().find(|s| s.parent_span_id.is_empty()).or(tb.0.spans.first());
    let body = html! {
        p.crumbs { a href="/stories" { "Stories" } " › " a href={ "/stories/" (d.b.fingerprint) } { "shape " (d.b.fingerprint) } " › against " (d.a.fingerprint) }
        h1 {
            "Shape " code { (d.b.fingerprint) } " against " code { (d.a.fingerprint) }
            @if let Some(r) = root { " " span.muted { (r.service) " · " (r.operation) } }
        }
        p.lead { "What the shape does that the other does not, in each shape's newest trace of the window, drawn on one time scale." }
        (edge_changes(&d))
        section #side-a.diff-side {
            h2 { "Compared with: shape " a href={ "/stories/" (d.a.fingerprint) } { code { (d.a.fingerprint) } } }
            p.note { "Trace " a.side-trace href={ "/traces/" (d.a.trace_id) } { code { (d.a.trace_id) } } ", " (format::duration(d.a.duration_ns as f64)) }
            (charts::waterfall(&bars_a, axis))
        }
        section #side-b.diff-side {
            h2 { "This shape: " a href={ "/stories/" (d.b.fingerprint) } { code { (d.b.fingerprint) } } }
            p.note { "Trace " a.side-trace href={ "/traces/" (d.b.trace_id) } { code { (d.b.trace_id) } } ", " (format::duration(d.b.duration_ns as f64)) }
            (charts::waterfall(&bars_b, axis))
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Stories, "Shape diff", None, body)))
}

/// A change as `+n` / `−n` (nothing when none).
fn signed(a: u64, b: u64, text: impl Fn(u64) -> String) -> String {
    match b.cmp(&a) {
        std::cmp::Ordering::Greater => format!("+{}", text(b - a)),
        std::cmp::Ordering::Less => format!("−{}", text(a - b)),
        std::cmp::Ordering::Equal => String::new(),
    }
}

fn ns(v: u64) -> String {
    format::duration(v as f64)
}

/// What `b` adds and removes against `a`, and a row per edge whose calls or self time
/// changed (an edge that is the same on both sides is left out): calls and self time on
/// each side and the change; the edges added or removed first, then by the change in self
/// time, largest first.
pub fn edge_changes(d: &ShapeDiff) -> Markup {
    let mut changed: Vec<&EdgeChange> =
        d.edges.iter().filter(|e| e.calls_a != e.calls_b || e.self_ns_a != e.self_ns_b).collect();
    // The edges added or removed first, then the largest change in self time.
    changed.sort_by_key(|e| {
        let moved = d.added.contains(&e.edge) || d.removed.contains(&e.edge);
        (!moved, std::cmp::Reverse(e.self_ns_a.abs_diff(e.self_ns_b)))
    });
    let class = |e: &EdgeChange| {
        if d.added.contains(&e.edge) {
            "edge-change added"
        } else if d.removed.contains(&e.edge) {
            "edge-change removed"
        } else {
            "edge-change"
        }
    };
    html! {
        dl.facts.diff-facts {
            dt { "duration" }
            dd { (ns(d.a.duration_ns)) " → " (ns(d.b.duration_ns)) " "
                span.delta { (signed(d.a.duration_ns, d.b.duration_ns, ns)) } }
            dt { "edges" }
            dd { (d.added.len()) " added, " (d.removed.len()) " removed" }
        }
        @if !d.added.is_empty() || !d.removed.is_empty() {
            ul.edges.diff {
                @for e in &d.added { li.added data-edge=(e) { "+ " code { (e) } } }
                @for e in &d.removed { li.removed data-edge=(e) { "− " code { (e) } } }
            }
        }
        @if changed.is_empty() {
            p.note { "Every edge makes the same calls for the same self time in both traces." }
        } @else {
            table.list.edge-changes {
                thead { tr { th { "edge" } th.num { "calls" } th.num { "" } th.num { "self time" } th.num { "" } } }
                tbody {
                    @for e in &changed {
                        tr class=(class(e)) data-edge=(e.edge) {
                            td { code { (e.edge) } }
                            td.num.nowrap { (e.calls_a) " → " (e.calls_b) }
                            td.num.delta { (signed(e.calls_a, e.calls_b, |n| n.to_string())) }
                            td.num.nowrap { (ns(e.self_ns_a)) " → " (ns(e.self_ns_b)) }
                            td.num.delta { (signed(e.self_ns_a, e.self_ns_b, ns)) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::api::handlers::shapes::DiffSide;

    fn side(fingerprint: &str, duration_ns: u64) -> DiffSide {
        DiffSide { fingerprint: fingerprint.into(), trace_id: "t".into(), duration_ns, edges: vec![] }
    }

    #[test]
    fn only_the_edges_that_changed_are_listed_with_their_signed_changes() {
        let edge = |edge: &str, calls_a, calls_b, self_ns_a, self_ns_b| EdgeChange {
            edge: edge.into(),
            calls_a,
            calls_b,
            self_ns_a,
            self_ns_b,
        };
        let d = ShapeDiff {
            a: side("a", 100_000_000),
            b: side("b", 1_100_000_000),
            added: vec!["x -> lock".into()],
            removed: vec![],
            edges: vec![
                edge("ROOT -> x", 1, 1, 50_000_000, 40_000_000),
                edge("x -> lock", 0, 1, 0, 1_000_000_000),
                edge("x -> query", 1, 1, 20_000_000, 20_000_000),
            ],
        };
        let html = edge_changes(&d).into_string();
        assert_eq!(html.matches("<tr class=\"edge-change").count(), 2, "the unchanged query is left out: {html}");
        assert!(
            html.find("data-edge=\"x -&gt; lock\"").unwrap() < html.find("data-edge=\"ROOT").unwrap(),
            "added first"
        );
        assert!(html.contains("<tr class=\"edge-change added\" data-edge=\"x -&gt; lock\">"), "{html}");
        assert!(html.contains("+1.00 s") && html.contains("−10.0 ms"), "{html}");
        assert!(html.contains("1 added, 0 removed"), "{html}");
    }
}
