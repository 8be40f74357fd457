//! `GET /api/v1/pipeline`: the recorder's samples as time series per service, metric and
//! label set, each with its per-instance series and their combination over replicas by the
//! metric's rule (`recorder::rules`).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, DAY_NS, HOUR_NS};
use crate::daemon::api::recorder::rules::{combine, Point, Rule};
use crate::store::query::pipeline::{self, StepSample};

/// The most points one series may have; a finer step is refused.
pub const MAX_POINTS: u64 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PipelineParams {
    /// `ingest`, `writer`, `assembler`, `logminer` or `notifier`; all when absent.
    pub service: Option<String>,
    /// One metric name; all when absent.
    pub metric: Option<String>,
    /// Window start, Unix ns (default: one hour before `to`; at most 7 days).
    pub from: Option<u64>,
    pub to: Option<u64>,
    /// Seconds per point (default: the window over 120 points, at least 1 s).
    pub step_secs: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceSeries {
    /// `ip:port` of the scraped replica.
    pub instance: String,
    /// `[step start ns, value]` pairs; rates per second for counters.
    pub points: Vec<(u64, f64)>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Series {
    pub service: String,
    pub metric: String,
    pub labels: BTreeMap<String, String>,
    /// How the replicas combine into `total`.
    pub rule: Rule,
    pub instances: Vec<InstanceSeries>,
    pub total: Vec<(u64, f64)>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Pipeline {
    pub from_ns: u64,
    pub to_ns: u64,
    pub step_secs: u64,
    pub series: Vec<Series>,
    /// More samples matched than one answer holds: narrow the window or the filters.
    pub truncated: bool,
}

#[utoipa::path(get, path = "/api/v1/pipeline", tag = "pipeline", params(PipelineParams),
    responses((status = 200, body = Pipeline), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn series(State(state): State<AppState>, Query(p): Query<PipelineParams>) -> Result<Json<Pipeline>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), HOUR_NS, 7 * DAY_NS)?;
    let span_secs = (window.to_ns - window.from_ns).div_ceil(1_000_000_000);
    let step_secs = match p.step_secs {
        Some(0) => return Err(ApiError::bad("step_secs", "must be at least 1")),
        Some(s) if s > span_secs.max(1) => return Err(ApiError::bad("step_secs", "is longer than the window")),
        Some(s) if span_secs.div_ceil(s) > MAX_POINTS => {
            return Err(ApiError::bad("step_secs", format!("gives more than {MAX_POINTS} points over the window")))
        }
        Some(s) => s,
        None => span_secs.div_ceil(120).max(1),
    };
    let service = params::text("service", p.service)?;
    let metric = params::text("metric", p.metric)?;
    let rows = state
        .run(pipeline::series(&state.store, window, step_secs * 1_000_000_000, service.as_deref(), metric.as_deref()))
        .await?;
    let truncated = rows.len() as u64 >= pipeline::MAX_SAMPLES;
    Ok(Json(Pipeline { from_ns: window.from_ns, to_ns: window.to_ns, step_secs, series: group(rows), truncated }))
}

/// Rows ordered by service, metric and labels, into one combined series per label set.
fn group(rows: Vec<StepSample>) -> Vec<Series> {
    let mut groups: BTreeMap<(String, String, Vec<String>, Vec<String>), Vec<Point>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((r.service, r.metric, r.label_keys, r.label_values))
            .or_default()
            .push(Point { instance: r.instance, step_ns: r.step_ns, value: r.value });
    }
    groups
        .into_iter()
        .map(|((service, metric, keys, values), points)| {
            let combined = combine(&metric, &points);
            Series {
                labels: keys.into_iter().zip(values).collect(),
                rule: combined.rule,
                instances: combined
                    .instances
                    .into_iter()
                    .map(|(instance, points)| InstanceSeries { instance, points })
                    .collect(),
                total: combined.total,
                service,
                metric,
            }
        })
        .collect()
}
