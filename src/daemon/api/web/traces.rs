//! `/traces`: the trace search of Explore. A GET form (service, operation, duration range,
//! status, time range) whose address is the search, a scatter of the matches' durations over
//! time (a click on a point opens its trace), and the matches, the most recent first, in
//! keyset pages. Everything comes from the API's trace search handler.

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use maud::html;
use serde::Deserialize;

use super::charts::{self, ScatterPoint};
use super::format;
use super::layout::{chip, respond, shell, time, Nav, PageResult};
use super::range::{self, Range};
use super::{given, query};
use crate::daemon::api::error::ApiError;
use crate::daemon::api::handlers::traces::{self, ScatterParams, TraceHit, TraceSearchParams};
use crate::daemon::api::handlers::AppState;
use crate::daemon::api::params::Query;

/// Traces on one page (and points on the scatter).
const PAGE: u64 = 100;
/// The most points on the scatter (an even sample of the matches beyond).
const POINTS: u64 = 2000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TracesQuery {
    /// The search language: `key=value` attributes, `status:`, `trace:`, … (docs/api.md, "Search").
    q: Option<String>,
    service: Option<String>,
    operation: Option<String>,
    /// A duration as typed: `250ms`, `1.5s`.
    min: Option<String>,
    max: Option<String>,
    /// `error` or `ok`.
    status: Option<String>,
    since: Option<String>,
    from: Option<String>,
    to: Option<String>,
    cursor: Option<String>,
}

fn duration_param(name: &str, value: Option<&str>) -> Result<Option<u64>, ApiError> {
    value
        .map(|v| {
            crate::search::duration_ns(v.trim()).ok_or_else(|| {
                ApiError::bad(name, format!("`{v}` is not a duration: write a number and a unit, as in 250ms or 1.5s"))
            })
        })
        .transpose()
}

pub async fn page(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: TracesQuery = query(&uri)?;
    let text = given(p.q);
    let (service, operation) = (given(p.service), given(p.operation));
    let (min_text, max_text) = (given(p.min), given(p.max));
    let min = duration_param("min", min_text.as_deref())?;
    let max = duration_param("max", max_text.as_deref())?;
    let status = given(p.status);
    let error = match status.as_deref() {
        None => None,
        Some("error") => Some(true),
        Some("ok") => Some(false),
        Some(other) => {
            return Err(ApiError::bad("status", format!("`{other}` is not a status: use error or ok")).into())
        }
    };
    let range = Range::parse(p.since.as_deref(), p.from.as_deref(), p.to.as_deref(), state.now())?;
    let cursor = given(p.cursor);
    let params = |limit: u64, cursor: Option<String>| TraceSearchParams {
        service: service.clone(),
        operation: operation.clone(),
        min_duration_ns: min,
        max_duration_ns: max,
        error,
        q: text.clone(),
        from: Some(range.from_ns),
        to: Some(range.to_ns),
        limit: Some(limit),
        cursor,
    };
    let found = traces::search(State(state.clone()), Query(params(PAGE, cursor.clone()))).await?.0;
    let p = params(POINTS, None);
    let scatter = traces::scatter(
        State(state.clone()),
        Query(ScatterParams {
            service: p.service,
            operation: p.operation,
            min_duration_ns: p.min_duration_ns,
            max_duration_ns: p.max_duration_ns,
            error: p.error,
            q: p.q,
            from: p.from,
            to: p.to,
            limit: p.limit,
        }),
    )
    .await?
    .0;
    let hits: Vec<&TraceHit> = found.items.iter().collect();
    let points: Vec<ScatterPoint> = scatter
        .points
        .iter()
        .map(|t| ScatterPoint {
            time_ns: t.start_ns,
            value: t.duration_ns as f64,
            error: t.error,
            href: format!("/traces/{}", t.trace_id),
            tip: format!(
                "{}{} at {}",
                format::duration(t.duration_ns as f64),
                if t.error { " (error)" } else { "" },
                format::utc(t.start_ns)
            ),
        })
        .collect();
    // The search's own parameters, for the preset links and the next page.
    let mut kept = vec![
        ("q", text.clone().unwrap_or_default()),
        ("service", service.clone().unwrap_or_default()),
        ("operation", operation.clone().unwrap_or_default()),
        ("min", min_text.clone().unwrap_or_default()),
        ("max", max_text.clone().unwrap_or_default()),
        ("status", status.clone().unwrap_or_default()),
    ];
    let range_params = match range.preset {
        Some(p) => vec![("since", p.to_string())],
        None => vec![("from", range::field_value(range.from_ns)), ("to", range::field_value(range.to_ns))],
    };
    let next = found.next_cursor.as_ref().map(|c| {
        let mut all = range_params.clone();
        all.push(("cursor", c.clone()));
        range::link("/traces", &kept, &all)
    });
    let first_page = range::link("/traces", &kept, &range_params);
    kept.retain(|(_, v)| !v.is_empty());
    let body = html! {
        h1 { "Traces" }
        form.filters.search #trace-search method="get" action="/traces" {
            input.query type="search" name="q" value=[text.as_deref()] placeholder="http.route=/pay status:error" aria-label="query";
            label { "service " input type="text" name="service" value=[service.as_deref()] placeholder="any"; }
            label { "operation " input type="text" name="operation" value=[operation.as_deref()] placeholder="any"; }
            label { "duration ≥ " input.short type="text" name="min" value=[min_text.as_deref()] placeholder="250ms"; }
            label { "≤ " input.short type="text" name="max" value=[max_text.as_deref()] placeholder="2s"; }
            label { "status "
                select name="status" {
                    option value="" { "any" }
                    option value="error" selected[error == Some(true)] { "error" }
                    option value="ok" selected[error == Some(false)] { "no error" }
                }
            }
            (range::hidden(&range))
            button type="submit" { "Search" }
        }
        div.range-row {
            (range::presets("/traces", &kept, &range))
            (range::custom_form("/traces", &kept, &range))
        }
        section #scatter {
            h2 { "Duration over time" @if scatter.sampled { " " span.count { "(an even sample of " (POINTS) ")" } } }
            (charts::scatter(&points, range.from_ns, range.to_ns, format::duration, "No trace matches in this range."))
        }
        section #results {
            h2 { (format::count(hits.len() as u64, "trace")) @if cursor.is_some() { " (a later page)" } }
            @if !hits.is_empty() {
                table.list.traces {
                    thead { tr { th { "start" } th { "root" } th { "services" } th.num { "spans" } th.num { "duration" } th { "" } th { "trace" } } }
                    tbody {
                        @for h in &hits {
                            tr.trace data-trace-id=(h.trace_id) {
                                td.nowrap { (time(h.start_ns)) }
                                td { a href={ "/traces/" (h.trace_id) } {
                                    @if h.root_operation.is_empty() { span.muted { "root before the range" } }
                                    @else { strong { (h.root_service) } " · " (h.root_operation) }
                                } }
                                td { (h.services.join(", ")) }
                                td.num { (h.span_count) }
                                td.num { (format::duration(h.duration_ns as f64)) }
                                td { @if h.error { (chip("bad", "error")) } }
                                td { a.trace-id href={ "/traces/" (h.trace_id) } { code { (h.trace_id[..16.min(h.trace_id.len())]) "…" } } }
                            }
                        }
                    }
                }
            }
            p.pager {
                @if cursor.is_some() { a href=(first_page) { "Newest" } " " }
                @if let Some(next) = &next { a.next href=(next) { "Older traces →" } }
            }
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Traces, "Traces", None, body)))
}
