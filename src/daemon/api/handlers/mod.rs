//! The `/api/v1` handlers, one file per area, and what their answers share: pages, logs,
//! attributes. Ids are hex strings in JSON (16 digits, or 32 for trace ids), since a 64-bit
//! number does not survive a JavaScript client; times are integer Unix nanoseconds.

pub mod alerts;
pub mod deliveries;
pub mod logs;
pub mod pipeline;
pub mod services;
pub mod shapes;
pub mod silences;
pub mod stories;
pub mod templates;
pub mod traces;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use crate::model::attributes::typed_attributes;
use crate::store::{LogRow, Store};
use crate::wire::alert::format_id;

/// What every handler reads from.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    /// Each query's own bound (`api.query_timeout_secs`): a ClickHouse that stopped
    /// answering is a 503, never a hung request.
    pub query_timeout: Duration,
    /// Unix nanoseconds now (the tests' clock may differ).
    pub now_ns: fn() -> u64,
    /// Where a manual retry republishes alerts (`POST /api/v1/deliveries/{id}/retry`);
    /// `None` where no broker is configured (the OpenAPI document alone): a retry is a 503.
    pub alerts_topic: Option<std::sync::Arc<crate::workflow::retry::AlertsTopic>>,
}

impl AppState {
    /// Runs one store call within the query bound.
    pub async fn run<T, E>(&self, call: impl Future<Output = Result<T, E>>) -> Result<T, ApiError>
    where
        ApiError: From<E>,
    {
        match tokio::time::timeout(self.query_timeout, call).await {
            Ok(result) => result.map_err(ApiError::from),
            Err(_) => Err(ApiError::Unavailable(format!(
                "a ClickHouse query did not finish within {} s",
                self.query_timeout.as_secs_f64()
            ))),
        }
    }

    pub fn now(&self) -> u64 {
        (self.now_ns)()
    }
}

/// One page of a list. `next_cursor`, when present, fetches the next page (`cursor=`);
/// absent, this is the last page.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// A page of at most `limit` items; `last_cursor` (the cursor after the last item) is
    /// handed on only when the page is full.
    pub fn of(items: Vec<T>, limit: u64, last_cursor: Option<String>) -> Page<T> {
        let next_cursor = if items.len() as u64 >= limit { last_cursor } else { None };
        Page { items, next_cursor }
    }
}

/// Parallel key and value arrays as one object (a repeated key keeps its last value).
pub fn attributes(keys: &[String], values: &[String]) -> BTreeMap<String, String> {
    keys.iter().cloned().zip(values.iter().cloned()).collect()
}

/// A log line as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Log {
    pub log_id: String,
    pub service: String,
    pub time_ns: u64,
    pub severity_number: u8,
    pub severity_text: String,
    pub body: String,
    /// Empty when the log belongs to no trace.
    pub trace_id: String,
    pub span_id: String,
    pub attributes: BTreeMap<String, String>,
    /// `attributes` with each value as its OTLP type: numbers as numbers, arrays and maps as
    /// JSON (logs stored before Tayga kept types: every value a string).
    #[schema(value_type = Object)]
    pub typed_attributes: serde_json::Map<String, serde_json::Value>,
    /// The template it matched; absent when not mined yet.
    pub template_id: Option<String>,
    /// The OTLP event name ('' when the log is not an event).
    pub event_name: String,
    /// The OTLP trace flags (bit 0: sampled).
    pub flags: u32,
    pub dropped_attributes_count: u32,
    /// A body that is a map, an array or bytes, as the JSON it is (bytes as base64); absent
    /// when the body is text or a scalar (then `body` is the value). `body` holds the same
    /// map or array as text, which is what the log miner mines.
    #[schema(value_type = Option<Object>)]
    pub structured_body: Option<serde_json::Value>,
}

/// A structured body's JSON from its stored OTLP/JSON form ('' when the body is not one).
pub fn structured_body(body_value: &str) -> Option<serde_json::Value> {
    (!body_value.is_empty())
        .then(|| serde_json::from_str(body_value).ok())
        .flatten()
        .map(|typed| crate::model::attributes::plain(&typed))
}

impl Log {
    pub fn from_row(row: &LogRow, template_id: Option<u64>) -> Log {
        Log {
            log_id: format_id(row.log_id),
            service: row.service.clone(),
            time_ns: row.time_ns,
            severity_number: row.severity_number,
            severity_text: row.severity_text.clone(),
            body: row.body.clone(),
            trace_id: row.trace_id.clone(),
            span_id: row.span_id.clone(),
            attributes: attributes(&row.attr_keys, &row.attr_values),
            typed_attributes: typed_attributes(&row.attr_keys, &row.attr_values, &row.attr_types),
            template_id: template_id.map(format_id),
            event_name: row.event_name.clone(),
            flags: row.flags,
            dropped_attributes_count: row.dropped_attributes_count,
            structured_body: structured_body(&row.body_value),
        }
    }
}
