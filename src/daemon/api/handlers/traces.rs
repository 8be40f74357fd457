//! `GET /api/v1/traces/{trace_id}` (every span with its parent link, and the trace's logs)
//! and `GET /api/v1/traces` (search).

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{attributes, AppState, Log, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS, HOUR_NS};
use crate::store::query::traces::{self, TraceSearch};
use crate::store::{read, SpanRow};

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
}

impl Span {
    fn from_row(r: SpanRow) -> Span {
        Span {
            attributes: attributes(&r.attr_keys, &r.attr_values),
            resource: attributes(&r.resource_keys, &r.resource_values),
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
        }
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
    params(("trace_id" = String, Path, description = "32 hex digits")),
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
    Ok(Json(Trace {
        trace_id,
        spans: spans.into_iter().map(Span::from_row).collect(),
        logs: logs.iter().map(|l| Log::from_row(l, None)).collect(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TraceSearchParams {
    /// Traces with a span of this service.
    pub service: Option<String>,
    /// Traces with a span of this name.
    pub operation: Option<String>,
    /// Traces with a matching span at least this long (ns).
    pub min_duration_ns: Option<u64>,
    /// `true`: traces with an error span; `false`: traces without one.
    pub error: Option<bool>,
    /// Window start, Unix ns (default: one hour before `to`); spans are matched by start.
    pub from: Option<u64>,
    /// Window end, Unix ns (default: now).
    pub to: Option<u64>,
    /// Page size, 1 to 1000 (default 100).
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TraceHit {
    pub trace_id: String,
    /// The latest start among the matching spans (the list's order, newest first).
    pub last_start_ns: u64,
    pub first_start_ns: u64,
    pub max_duration_ns: u64,
    pub matching_spans: u64,
    pub error: bool,
    pub services: Vec<String>,
    pub operations: Vec<String>,
}

#[utoipa::path(get, path = "/api/v1/traces", tag = "traces", params(TraceSearchParams),
    responses((status = 200, body = Page<TraceHit>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn search(
    State(state): State<AppState>,
    Query(p): Query<TraceSearchParams>,
) -> Result<Json<Page<TraceHit>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), HOUR_NS, 7 * DAY_NS)?;
    let limit = params::limit(p.limit)?;
    let after = params::cursor::<(u64, String)>(p.cursor)?;
    let q = TraceSearch {
        service: params::text("service", p.service)?,
        operation: params::text("operation", p.operation)?,
        min_duration_ns: p.min_duration_ns,
        error: p.error,
        after,
    };
    let rows = state.run(traces::search(&state.store, window, &q, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&(r.last_start_ns, r.trace_id.clone())));
    let items = rows
        .into_iter()
        .map(|r| TraceHit {
            trace_id: r.trace_id,
            last_start_ns: r.last_start_ns,
            first_start_ns: r.first_start_ns,
            max_duration_ns: r.max_duration_ns,
            matching_spans: r.matching_spans,
            error: r.error != 0,
            services: r.services,
            operations: r.operations,
        })
        .collect();
    Ok(Json(Page::of(items, limit, cursor)))
}
