//! `/stories`: trace shapes by frequency (count, p50/p95 duration, error rate);
//! `/stories/{fingerprint}`: a shape's traces; `/traces/{trace_id}`: one trace as a span
//! waterfall (its events marked on their spans), its exceptions, its links and its logs.

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use maud::{html, Markup};
use serde::Deserialize;

use super::charts::{self, Bar, EventMark};
use super::format::{self, Window};
use super::layout::{chip, log_table, respond, shell, time, window_picker, Nav, PageError, PageResult};
use super::{given, query};
use crate::daemon::api::error::ApiError;
use crate::daemon::api::handlers::stories::{self, ShapeStoriesParams, ShapesParams};
use crate::daemon::api::handlers::traces;
use crate::daemon::api::handlers::AppState;
use crate::daemon::api::params::Query;
use crate::wire::alert::format_id;

/// Shapes and a shape's traces listed on one page.
const LISTED: u64 = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapesQuery {
    service: Option<String>,
    window: Option<String>,
}

pub async fn shapes(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: ShapesQuery = query(&uri)?;
    let window = Window::parse(p.window.as_deref())?;
    let service = given(p.service);
    let now = state.now();
    let shapes = stories::shapes(
        State(state.clone()),
        Query(ShapesParams {
            service: service.clone(),
            from: Some(now.saturating_sub(window.ns())),
            to: None,
            limit: Some(LISTED),
            cursor: None,
        }),
    )
    .await?
    .0
    .items;
    let base = match &service {
        Some(s) => format!("/stories?service={}", format::encode(s)),
        None => "/stories".to_string(),
    };
    let body = html! {
        h1 { "Stories" @if let Some(s) = &service { " of " (s) } }
        p.lead { "Every trace becomes a story; traces with the same service/operation call edges share a shape." }
        (window_picker(&base, window))
        @if shapes.is_empty() {
            p.empty-chart { "No story started in the last " (window.as_str()) ". Stories appear once a trace has been idle for a few seconds." }
        } @else {
            table.list.shapes {
                thead { tr { th { "root" } th { "calls" } th.num { "traces" } th.num { "p50" } th.num { "p95" } th.num { "errors" } th { "last" } th { "" } } }
                tbody {
                    @for (s, fingerprint) in shapes.iter().map(|s| (s, format_id(s.fingerprint))) {
                        tr.shape data-fingerprint=(fingerprint) {
                            td.nowrap {
                                a href={ "/stories/" (fingerprint) "?window=" (window.as_str()) } { strong { (s.root_service) } " · " (s.root_operation) }
                                @if let Some(e) = &s.top_exception {
                                    br;
                                    span.shape-exception title="the exception this shape's error traces tell most often" {
                                        (exception_line(&e.r#type, &e.message))
                                    }
                                }
                            }
                            @let calls = calls(&s.edges);
                            td.edges title=(s.edges.join("\n")) {
                                @for e in calls.iter().take(3) { code { (e) } br; }
                                @if calls.len() > 3 { span.muted { "+" (calls.len() - 3) " more" } }
                                @if calls.is_empty() { span.muted { "a single span" } }
                            }
                            td.num { (s.count) }
                            td.num { (format::duration(s.p50_duration_ns)) }
                            td.num { (format::duration(s.p95_duration_ns)) }
                            td.num { @if s.error_rate > 0.0 { span.bad-text { (format::percent(s.error_rate)) } } @else { "0 %" } }
                            td.nowrap { (time(s.last_start_ns)) }
                            td.nowrap { a href={ "/traces/" (s.example_trace_id) } { "a trace" } }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Stories, "Stories", Some(30), body)))
}

/// A shape's call edges without the edge into its root span (the root is shown apart).
fn calls(edges: &[String]) -> Vec<&str> {
    edges.iter().map(String::as_str).filter(|e| !e.starts_with("ROOT ->")).collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapeQuery {
    window: Option<String>,
}

pub async fn shape(State(state): State<AppState>, Path(fingerprint): Path<String>, uri: Uri) -> PageResult {
    let p: ShapeQuery = query(&uri)?;
    let window = match p.window.as_deref() {
        None => Window::H24,
        w => Window::parse(w)?,
    };
    let now = state.now();
    let list = stories::shape_stories(
        State(state.clone()),
        Path(fingerprint.clone()),
        Query(ShapeStoriesParams {
            from: Some(now.saturating_sub(window.ns())),
            to: None,
            limit: Some(LISTED),
            cursor: None,
        }),
    )
    .await?
    .0
    .items;
    let base = format!("/stories/{fingerprint}");
    let first = list.first().map(|s| &s.row);
    let from = now.saturating_sub(window.ns());
    let endpoint_shapes = match first {
        Some(s) => endpoint_shapes(&state, &s.root_service, &s.root_operation, from).await?,
        None => Vec::new(),
    };
    let body = html! {
        p.crumbs { a href="/stories" { "Stories" } " › shape " (fingerprint) }
        @match first {
            Some(s) => {
                h1 { (s.root_service) " · " (s.root_operation) }
                p.edges { @for e in calls(&s.edges) { code { (e) } br; } }
                (compare_link(&format_id(s.fingerprint), &endpoint_shapes, (from, now), window))
            }
            None => { h1 { "Shape " (fingerprint) } }
        }
        (window_picker(&base, window))
        @if list.is_empty() {
            p.empty-chart { "No trace of this shape started in the last " (window.as_str()) "; try a longer window." }
        } @else {
            table.list.stories {
                thead { tr { th { "trace" } th { "start" } th.num { "duration" } th.num { "spans" } th.num { "logs" } th { "" } } }
                tbody {
                    @for s in list.iter().map(|s| &s.row) {
                        tr.story {
                            td { a href={ "/traces/" (s.trace_id) } { code { (s.trace_id) } } }
                            td.nowrap { (time(s.start_ns)) }
                            td.num { (format::duration(s.duration_ns as f64)) }
                            td.num { (s.span_count) }
                            td.num { (s.log_count) }
                            td { @if s.error { (chip("bad", "error")) } }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Stories, "Shape", Some(30), body)))
}

pub async fn trace(State(state): State<AppState>, Path(trace_id): Path<String>) -> PageResult {
    let t = traces::by_id(State(state.clone()), Path(trace_id.clone())).await?.0;
    let story = match stories::by_trace(State(state.clone()), Path(trace_id)).await {
        Ok(s) => Some(s.0.row),
        Err(ApiError::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let bars = bars_of(&t.spans);
    let exceptions: Vec<(&traces::Span, &traces::SpanEvent)> = t
        .spans
        .iter()
        .filter(|s| s.status_code == 2)
        .flat_map(|s| s.events.iter().filter(|e| e.name == EXCEPTION_EVENT).map(move |e| (s, e)))
        .collect();
    let links: Vec<(&traces::Span, &traces::SpanLink)> =
        t.spans.iter().flat_map(|s| s.links.iter().map(move |l| (s, l))).collect();
    let start = t.spans.iter().map(|s| s.start_ns).min();
    let end = t.spans.iter().map(|s| s.end_ns).max();
    let errors = bars.iter().filter(|b| b.error).count();
    let body = html! {
        p.crumbs { a href="/stories" { "Stories" }
            @if let Some(s) = &story { @let shape = format_id(s.fingerprint); " › " a href={ "/stories/" (shape) } { "shape " (shape) } }
            " › trace" }
        h1 { "Trace " code { (t.trace_id) } }
        dl.facts {
            @if let (Some(start), Some(end)) = (start, end) {
                dt { "start" } dd { (time(start)) }
                dt { "duration" } dd { (format::duration(end.saturating_sub(start) as f64)) }
            }
            dt { "spans" } dd { (t.spans.len()) @if errors > 0 { " " (chip("bad", &format!("{errors} with an error"))) } }
            dt { "logs" } dd { (t.logs.len()) }
            @if let Some(s) = &story { dt { "story" } dd { (s.root_service) " · " (s.root_operation) @if s.truncated { " " (chip("warn", "truncated")) } } }
        }
        section #waterfall {
            h2 { "Spans" }
            @if bars.is_empty() { p.empty-chart { "No span of this trace is stored; only its logs are." } }
            @else { (charts::waterfall(&bars, 0)) }
        }
        @if !exceptions.is_empty() {
            section #exceptions {
                h2 { "Exceptions" }
                @for (span, event) in &exceptions { (exception_panel(span, event)) }
            }
        }
        @if !links.is_empty() {
            section #links {
                h2 { "Links" }
                table.list.links {
                    thead { tr { th { "from span" } th { "linked span" } th { "attributes" } } }
                    tbody {
                        @for (span, link) in &links {
                            tr.link {
                                td.nowrap { (span.service) " · " (span.operation) }
                                td {
                                    @if link.stored {
                                        a href={ "/traces/" (link.trace_id) } { code { (link.trace_id) } }
                                    } @else {
                                        code { (link.trace_id) } " " span.muted.not-stored { "not stored" }
                                    }
                                    " span " code { (link.span_id) }
                                }
                                td { (attribute_text(&link.attributes)) }
                            }
                        }
                    }
                }
            }
        }
        section #logs {
            h2 { "Logs" }
            (log_table(&t.logs, "No log line carries this trace id."))
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Stories, "Trace", None, body)))
}

/// A trace's spans as the waterfall draws them.
pub(super) fn bars_of(spans: &[traces::Span]) -> Vec<Bar> {
    spans
        .iter()
        .map(|s| Bar {
            span_id: s.span_id.clone(),
            parent_span_id: s.parent_span_id.clone(),
            service: s.service.clone(),
            operation: s.operation.clone(),
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            error: s.status_code == 2,
            events: s
                .events
                .iter()
                .map(|e| EventMark { time_ns: e.time_ns, exception: e.name == EXCEPTION_EVENT, tip: event_tip(e) })
                .collect(),
            self_ns: s.self_ns,
            critical: s.critical,
        })
        .collect()
}

/// The fingerprints of an endpoint's shapes since `from`, the most frequent first (the
/// order of the shapes list, `stories::shapes`): the first is the endpoint's usual shape,
/// as the shape rules name it (the most frequent; docs/alerts.md).
async fn endpoint_shapes(
    state: &AppState,
    service: &str,
    operation: &str,
    from: u64,
) -> Result<Vec<String>, PageError> {
    let shapes = stories::shapes(
        State(state.clone()),
        Query(ShapesParams {
            service: Some(service.to_string()),
            from: Some(from),
            to: None,
            limit: Some(LISTED),
            cursor: None,
        }),
    )
    .await?
    .0
    .items;
    Ok(shapes
        .into_iter()
        .filter(|s| s.root_service == service && s.root_operation == operation)
        .map(|s| format_id(s.fingerprint))
        .collect())
}

/// A link to the diff of this shape against its endpoint's usual one; for the usual shape
/// itself, of the next most frequent against it.
fn compare_link(fingerprint: &str, endpoint_shapes: &[String], window: (u64, u64), w: Window) -> Markup {
    let usual = endpoint_shapes.first().map(String::as_str);
    html! {
        @match usual {
            Some(usual) if usual != fingerprint => {
                p.compare { a #compare-usual href=(super::shapes::diff_href(usual, fingerprint, Some(window))) {
                    "Compare with the endpoint's usual shape" } " " span.muted { "(its most frequent in the last " (w.as_str()) ": " code { (usual) } ")" } }
            }
            Some(_) => {
                p.compare { "This is the endpoint's usual shape (its most frequent in the last " (w.as_str()) ")."
                    @if let Some(next) = endpoint_shapes.get(1) {
                        " " a #compare-next href=(super::shapes::diff_href(fingerprint, next, Some(window))) { "Compare its next most frequent shape with it" }
                    }
                }
            }
            None => {}
        }
    }
}

/// The span event an exception is recorded as.
const EXCEPTION_EVENT: &str = "exception";

/// Lines of a stack trace shown before the rest is folded away.
const STACK_LINES_SHOWN: usize = 20;

/// `Type: message`, as a runtime prints an exception.
fn exception_line(r#type: &str, message: &str) -> String {
    match (r#type.is_empty(), message.is_empty()) {
        (false, false) => format!("{type}: {message}"),
        (false, true) => r#type.to_string(),
        _ => message.to_string(),
    }
}

/// An event's hover: its name, time and attributes.
fn event_tip(e: &traces::SpanEvent) -> String {
    let mut tip = format!("{} at {}", e.name, crate::time::rfc3339(e.time_ns));
    for (key, value) in &e.attributes {
        tip.push_str(&format!("\n{key} = {}", value_text(value)));
    }
    tip
}

fn value_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn attribute_text(attributes: &serde_json::Map<String, serde_json::Value>) -> String {
    attributes.iter().map(|(k, v)| format!("{k}={}", value_text(v))).collect::<Vec<_>>().join(", ")
}

/// An error span's exception: type, message, and the stack trace in a monospace block whose
/// lines past the first [`STACK_LINES_SHOWN`] are folded.
fn exception_panel(span: &traces::Span, event: &traces::SpanEvent) -> Markup {
    let text = |key: &str| event.attributes.get(key).map(value_text).unwrap_or_default();
    let (r#type, message, stack) = (text("exception.type"), text("exception.message"), text("exception.stacktrace"));
    let lines: Vec<&str> = stack.lines().collect();
    let (shown, folded) = lines.split_at(lines.len().min(STACK_LINES_SHOWN));
    html! {
        section.exception data-span-id=(span.span_id) {
            h3 { (if r#type.is_empty() { "Exception" } else { r#type.as_str() }) " in " (span.service) " · " (span.operation) }
            @if !message.is_empty() { p.message { (message) } }
            @if !shown.is_empty() {
                pre.stack { (shown.join("\n")) }
                @if !folded.is_empty() {
                    details {
                        summary { (folded.len()) " more lines" }
                        pre.stack { (folded.join("\n")) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span_with(stack: &str) -> (traces::Span, traces::SpanEvent) {
        let event = traces::SpanEvent {
            name: EXCEPTION_EVENT.into(),
            time_ns: 1,
            attributes: serde_json::json!({
                "exception.type": "TypeError",
                "exception.message": "x is <undefined>",
                "exception.stacktrace": stack,
            })
            .as_object()
            .unwrap()
            .clone(),
            dropped_attributes_count: 0,
        };
        (traces::Span::failed_for_tests("pay", "charge"), event)
    }

    #[test]
    fn a_stack_trace_past_20_lines_is_folded_and_the_message_escaped() {
        let stack: Vec<String> = (1..=25).map(|i| format!("    at frame{i} (app.js:{i}:1)")).collect();
        let (span, event) = span_with(&stack.join("\n"));
        let html = exception_panel(&span, &event).into_string();
        assert!(html.contains("TypeError") && html.contains("x is &lt;undefined&gt;"), "{html}");
        let (shown, folded) = html.split_once("<details>").expect("the rest folded");
        assert!(shown.contains("frame20 ") && !shown.contains("frame21 "), "{shown}");
        assert!(folded.contains("5 more lines") && folded.contains("frame21 ") && folded.contains("frame25 "));

        let (span, event) = span_with("Error: short\n    at one (a.js:1:1)");
        assert!(!exception_panel(&span, &event).into_string().contains("<details>"), "nothing to fold");
    }
}
