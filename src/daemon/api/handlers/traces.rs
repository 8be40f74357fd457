//! `GET /api/v1/traces/{trace_id}` (every span with its parent link, and the trace's logs)
//! and `GET /api/v1/traces` (search).

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{attributes, AppState, Log, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS, HOUR_NS};
use crate::model::attributes::{attribute_list, typed_attributes};
use crate::search::{self, Range};
pub use crate::store::query::traces::TraceHit;
use crate::store::query::traces::{self, TraceSearch};
use crate::store::{read, SpanRow};

/// Attributes as a JSON object of typed values: numbers as numbers, arrays and maps as JSON.
type TypedAttributes = serde_json::Map<String, serde_json::Value>;

/// Spans that started in the hour before `to`, over at most 7 days (search and scatter).
pub const WINDOW: params::WindowRule = params::WindowRule { default_ns: HOUR_NS, max_ns: 7 * DAY_NS };

#[derive(Debug, Serialize, ToSchema)]
pub struct Span {
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub service: String,
    pub operation: String,
    /// The OTLP span kind (0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer).
    pub kind: u8,
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    /// The OTLP status code: 0 unset, 1 ok, 2 error.
    pub status_code: u8,
    pub status_message: String,
    pub attributes: BTreeMap<String, String>,
    pub resource: BTreeMap<String, String>,
    pub scope_name: String,
    pub event_count: u32,
    pub link_count: u32,
    /// `attributes` with each value as its OTLP type: numbers as numbers, arrays and maps as
    /// JSON, bytes as hex (spans stored before Tayga kept types: every value a string).
    #[schema(value_type = Object)]
    pub typed_attributes: TypedAttributes,
    /// The W3C trace state ('' when none).
    pub trace_state: String,
    /// The OTLP span flags (bits 0-7: the W3C trace flags; bits 8-9: whether the parent is
    /// remote).
    pub flags: u32,
    pub dropped_attributes_count: u32,
    pub dropped_events_count: u32,
    pub dropped_links_count: u32,
    /// The instrumentation scope that made the span, and the resource's schema URL.
    pub scope: Scope,
    pub resource_schema_url: String,
    /// In the order the SDK sent them (an exception is an event named `exception`, with
    /// `exception.type`, `exception.message` and `exception.stacktrace` attributes).
    pub events: Vec<SpanEvent>,
    pub links: Vec<SpanLink>,
    /// Time in this span outside its children (their intervals clipped to it, overlaps
    /// counted once), ns (docs/stories.md, "Critical path and self time").
    pub self_ns: u64,
    /// Whether the span is on the trace's critical path: the chain of spans the trace's
    /// end-to-end duration waited on.
    pub critical: bool,
}

/// An instrumentation scope.
#[derive(Debug, Serialize, ToSchema)]
pub struct Scope {
    pub name: String,
    pub version: String,
    #[schema(value_type = Object)]
    pub attributes: TypedAttributes,
    pub schema_url: String,
}

/// A span event.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpanEvent {
    pub name: String,
    pub time_ns: u64,
    #[schema(value_type = Object)]
    pub attributes: TypedAttributes,
    pub dropped_attributes_count: u32,
}

/// A span link: a span of this or another trace the span is related to.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpanLink {
    pub trace_id: String,
    pub span_id: String,
    pub trace_state: String,
    #[schema(value_type = Object)]
    pub attributes: TypedAttributes,
    pub flags: u32,
    pub dropped_attributes_count: u32,
    /// Whether Tayga holds any span of the linked trace (it may never have been sent here).
    pub stored: bool,
}

impl Span {
    /// A failed span of `service` and `operation`, with nothing else (the app's unit tests).
    #[cfg(test)]
    pub fn failed_for_tests(service: &str, operation: &str) -> Span {
        let row = SpanRow { service: service.into(), name: operation.into(), status_code: 2, ..Default::default() };
        Span::from_row(row, &BTreeSet::new())
    }

    fn from_row(r: SpanRow, stored: &BTreeSet<String>) -> Span {
        let events = (0..r.event_names.len())
            .map(|i| SpanEvent {
                name: r.event_names[i].clone(),
                time_ns: r.event_time_ns.get(i).copied().unwrap_or(0),
                attributes: r.event_attributes.get(i).map_or_else(Default::default, |a| attribute_list(a)),
                dropped_attributes_count: r.event_dropped_attributes.get(i).copied().unwrap_or(0),
            })
            .collect();
        let links = (0..r.link_trace_ids.len())
            .map(|i| SpanLink {
                trace_id: r.link_trace_ids[i].clone(),
                span_id: r.link_span_ids.get(i).cloned().unwrap_or_default(),
                trace_state: r.link_trace_states.get(i).cloned().unwrap_or_default(),
                attributes: r.link_attributes.get(i).map_or_else(Default::default, |a| attribute_list(a)),
                flags: r.link_flags.get(i).copied().unwrap_or(0),
                dropped_attributes_count: r.link_dropped_attributes.get(i).copied().unwrap_or(0),
                stored: stored.contains(&r.link_trace_ids[i]),
            })
            .collect();
        Span {
            attributes: attributes(&r.attr_keys, &r.attr_values),
            typed_attributes: typed_attributes(&r.attr_keys, &r.attr_values, &r.attr_types),
            resource: attributes(&r.resource_keys, &r.resource_values),
            scope: Scope {
                name: r.scope_name.clone(),
                version: r.scope_version,
                attributes: attribute_list(&r.scope_attributes),
                schema_url: r.scope_schema_url,
            },
            resource_schema_url: r.resource_schema_url,
            trace_state: r.trace_state,
            flags: r.flags,
            dropped_attributes_count: r.dropped_attributes_count,
            dropped_events_count: r.dropped_events_count,
            dropped_links_count: r.dropped_links_count,
            events,
            links,
            span_id: r.span_id,
            parent_span_id: r.parent_span_id,
            service: r.service,
            operation: r.name,
            kind: r.kind,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            duration_ns: r.duration_ns,
            status_code: r.status_code,
            status_message: r.status_message,
            scope_name: r.scope_name,
            event_count: r.event_count,
            link_count: r.link_count,
            self_ns: 0,
            critical: false,
        }
    }
}

/// Sets each span's `self_ns` and `critical` (`otlp::critical`).
fn time_spans(spans: &mut [Span]) {
    let timing = |i: usize| {
        let s: &Span = &spans[i];
        (s.span_id.as_str(), s.parent_span_id.as_str(), s.start_ns, s.end_ns)
    };
    let self_ns = crate::otlp::critical::self_times(spans.len(), timing);
    let critical = crate::otlp::critical::critical_path(spans.len(), timing).marks(spans.len());
    for ((span, self_ns), critical) in spans.iter_mut().zip(self_ns).zip(critical) {
        span.self_ns = self_ns;
        span.critical = critical;
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Trace {
    pub trace_id: String,
    /// In start order.
    pub spans: Vec<Span>,
    /// In time order.
    pub logs: Vec<Log>,
}

#[utoipa::path(get, path = "/api/v1/traces/{trace_id}", tag = "traces",
    params(("trace_id" = String, Path, description = "32 hex digits", pattern = "^[0-9a-fA-F]{32}$")),
    responses((status = 200, body = Trace), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn by_id(State(state): State<AppState>, Path(trace_id): Path<String>) -> Result<Json<Trace>, ApiError> {
    let trace_id = params::trace_id("trace_id", &trace_id)?;
    let (spans, logs) = tokio::try_join!(
        state.run(read::fetch_trace(&state.store, &trace_id)),
        state.run(traces::trace_logs(&state.store, &trace_id)),
    )?;
    if spans.is_empty() && logs.is_empty() {
        return Err(ApiError::not_found(format!("trace {trace_id}")));
    }
    let linked: BTreeSet<String> =
        spans.iter().flat_map(|s| &s.link_trace_ids).filter(|id| **id != trace_id).cloned().collect();
    let mut stored: BTreeSet<String> = if linked.is_empty() {
        BTreeSet::new()
    } else {
        let linked: Vec<String> = linked.into_iter().collect();
        state.run(traces::stored_traces(&state.store, &linked)).await?.into_iter().collect()
    };
    if !spans.is_empty() {
        stored.insert(trace_id.clone());
    }
    let mut spans: Vec<Span> = spans.into_iter().map(|s| Span::from_row(s, &stored)).collect();
    time_spans(&mut spans);
    Ok(Json(Trace { trace_id, spans, logs: logs.iter().map(|l| Log::from_row(l, None)).collect() }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TraceSearchParams {
    /// Traces with a span of this service (the same as `service:NAME` in `q`).
    #[param(max_length = 1024)]
    pub service: Option<String>,
    /// Traces with a span of this name (the same as `operation:NAME`).
    #[param(max_length = 1024)]
    pub operation: Option<String>,
    /// Traces with a matching span at least this long (ns).
    pub min_duration_ns: Option<u64>,
    /// Traces with a matching span at most this long (ns).
    pub max_duration_ns: Option<u64>,
    /// `true`: traces with an error span; `false`: traces without one.
    pub error: Option<bool>,
    /// A search: `service:NAME`, `operation:NAME`, `duration>=250ms` (also `>`, `<=`, `<`),
    /// `status:error|ok|unset`, `key=value` (span or resource attributes), `trace:ID`; every
    /// term a condition on one span (docs/api.md, "Search").
    #[param(max_length = 1024)]
    pub q: Option<String>,
    /// Window start, Unix ns (default: one hour before `to`); spans are matched by start; at
    /// most 7 days before `to`.
    pub from: Option<u64>,
    /// Window end, Unix ns (default: now).
    pub to: Option<u64>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The search the parameters ask for: `q` with the other filters added.
pub fn trace_search(p: &TraceSearchParams) -> Result<TraceSearch, ApiError> {
    let mut query = match params::text("q", p.q.clone())? {
        Some(q) => search::parse(&q, search::Scope::Traces).map_err(|e| ApiError::bad("q", e.to_string()))?,
        None => search::Query::default(),
    };
    if let Some(service) = params::text("service", p.service.clone())? {
        query.services.push(service);
    }
    if let Some(operation) = params::text("operation", p.operation.clone())? {
        query.operations.push(operation);
    }
    if p.min_duration_ns.is_some() || p.max_duration_ns.is_some() {
        let asked = Range { min: p.min_duration_ns.unwrap_or(0), max: p.max_duration_ns.unwrap_or(u64::MAX) };
        let old = query.duration.unwrap_or(Range { min: 0, max: u64::MAX });
        let range = Range { min: old.min.max(asked.min), max: old.max.min(asked.max) };
        if range.min > range.max {
            return Err(ApiError::bad("min_duration_ns", "the duration range is empty"));
        }
        query.duration = Some(range);
    }
    Ok(TraceSearch { query, error: p.error, after: None })
}

#[utoipa::path(get, path = "/api/v1/traces", tag = "traces", params(TraceSearchParams),
    responses((status = 200, body = Page<TraceHit>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn search(
    State(state): State<AppState>,
    Query(p): Query<TraceSearchParams>,
) -> Result<Json<Page<TraceHit>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let limit = params::limit(p.limit)?;
    let mut q = trace_search(&p)?;
    q.after = params::cursor::<(u64, String)>(p.cursor)?;
    let rows = state.run(traces::search(&state.store, window, &q, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&(r.last_start_ns, r.trace_id.clone())));

    Ok(Json(Page::of(rows, limit, cursor)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ScatterParams {
    #[param(max_length = 1024)]
    pub service: Option<String>,
    #[param(max_length = 1024)]
    pub operation: Option<String>,
    pub min_duration_ns: Option<u64>,
    pub max_duration_ns: Option<u64>,
    pub error: Option<bool>,
    /// The search, as `GET /api/v1/traces` takes it.
    #[param(max_length = 1024)]
    pub q: Option<String>,
    /// Window start, Unix ns (default: one hour before `to`); at most 7 days before `to`.
    pub from: Option<u64>,
    /// Window end, Unix ns (default: now).
    pub to: Option<u64>,
    /// The most points, 1 to 5000 (default 1000).
    #[param(minimum = 1, maximum = 5000)]
    pub limit: Option<u64>,
}

/// A trace as a point: when it started, how long it took, whether it failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct TracePoint {
    pub trace_id: String,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub error: bool,
}

/// The matching traces of a window as points for a duration-over-time scatter: all of them,
/// or an even sample (by trace id) when there are more than `limit`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Scatter {
    /// In start order.
    pub points: Vec<TracePoint>,
    /// Whether more traces matched than the points show.
    pub sampled: bool,
}

#[utoipa::path(get, path = "/api/v1/traces/scatter", tag = "traces", params(ScatterParams),
    responses((status = 200, body = Scatter), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn scatter(State(state): State<AppState>, Query(p): Query<ScatterParams>) -> Result<Json<Scatter>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let limit = match p.limit.unwrap_or(1000) {
        n @ 1..=traces::MAX_POINTS => n,
        n => return Err(ApiError::bad("limit", format!("must be 1 to {}, is {n}", traces::MAX_POINTS))),
    };
    let q = trace_search(&TraceSearchParams {
        service: p.service,
        operation: p.operation,
        min_duration_ns: p.min_duration_ns,
        max_duration_ns: p.max_duration_ns,
        error: p.error,
        q: p.q,
        from: None,
        to: None,
        limit: None,
        cursor: None,
    })?;
    let rows = state.run(traces::scatter(&state.store, window, &q, limit)).await?;
    let sampled = rows.len() as u64 >= limit;
    let points = rows
        .into_iter()
        .map(|r| TracePoint {
            trace_id: r.trace_id,
            start_ns: r.start_ns,
            duration_ns: r.duration_ns,
            error: r.error != 0,
        })
        .collect();
    Ok(Json(Scatter { points, sampled }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::attributes::value_type;

    #[test]
    fn the_openapi_document_describes_events_links_and_the_new_log_fields() {
        let doc = serde_json::to_value(crate::daemon::api::router::openapi()).unwrap();
        let schemas = &doc["components"]["schemas"];
        let span = &schemas["Span"]["properties"];
        for field in ["events", "links", "trace_state", "flags", "scope", "typed_attributes", "dropped_events_count"] {
            assert!(span.get(field).is_some(), "Span.{field} is not documented: {span}");
        }
        for (schema, fields) in [
            ("SpanEvent", &["name", "time_ns", "attributes", "dropped_attributes_count"][..]),
            ("SpanLink", &["trace_id", "span_id", "trace_state", "attributes", "flags", "stored"][..]),
            ("Scope", &["name", "version", "attributes", "schema_url"][..]),
            ("Log", &["event_name", "flags", "dropped_attributes_count", "structured_body", "typed_attributes"][..]),
        ] {
            for field in fields {
                assert!(schemas[schema]["properties"].get(field).is_some(), "{schema}.{field} is not documented");
            }
        }
    }

    #[test]
    fn each_span_gets_its_self_time_and_whether_the_trace_waited_on_it() {
        let span = |id: &str, parent: &str, start: u64, end: u64| {
            let row = SpanRow {
                span_id: id.into(),
                parent_span_id: parent.into(),
                start_ns: start,
                end_ns: end,
                ..Default::default()
            };
            Span::from_row(row, &BTreeSet::new())
        };
        let mut spans = vec![span("r", "", 0, 100), span("fast", "r", 10, 40), span("slow", "r", 10, 90)];
        time_spans(&mut spans);
        let got: Vec<(u64, bool)> = spans.iter().map(|s| (s.self_ns, s.critical)).collect();
        assert_eq!(got, [(20, true), (30, false), (80, true)]);
        let doc = serde_json::to_value(crate::daemon::api::router::openapi()).unwrap();
        for field in ["self_ns", "critical"] {
            assert!(doc["components"]["schemas"]["Span"]["properties"].get(field).is_some(), "Span.{field}");
        }
    }

    #[test]
    fn a_row_gives_its_events_and_links_with_whether_each_linked_trace_is_stored() {
        let row = SpanRow {
            attr_keys: vec!["n".into()],
            attr_values: vec!["3".into()],
            attr_types: vec![value_type::INT],
            event_time_ns: vec![9],
            event_names: vec!["exception".into()],
            event_attributes: vec![r#"[{"key":"exception.message","value":{"stringValue":"boom"}}]"#.into()],
            event_dropped_attributes: vec![0],
            link_trace_ids: vec!["a".repeat(32), "b".repeat(32)],
            link_span_ids: vec!["c".repeat(16), "d".repeat(16)],
            link_trace_states: vec![String::new(), "k=v".into()],
            link_attributes: vec![String::new(), String::new()],
            link_flags: vec![1, 0],
            link_dropped_attributes: vec![0, 0],
            ..Default::default()
        };
        let stored = BTreeSet::from(["a".repeat(32)]);
        let span = serde_json::to_value(Span::from_row(row, &stored)).unwrap();
        assert_eq!(span["typed_attributes"], serde_json::json!({"n": 3}));
        assert_eq!(span["attributes"], serde_json::json!({"n": "3"}));
        assert_eq!(span["events"][0]["attributes"]["exception.message"], "boom");
        assert_eq!(span["events"][0]["time_ns"], 9);
        assert_eq!(
            (span["links"][0]["stored"].as_bool(), span["links"][1]["stored"].as_bool()),
            (Some(true), Some(false))
        );
        assert_eq!(span["links"][1]["trace_state"], "k=v");
    }
}
