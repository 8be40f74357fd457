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
use crate::daemon::api::recorder::rules::{combine, quantile, Point, Rule};
use crate::store::query::pipeline::{self, StepSample};

/// The most points one series may have; a finer step is refused.
pub const MAX_POINTS: u64 = 1000;

/// The hour before `to`, over at most 7 days.
pub const WINDOW: params::WindowRule = params::WindowRule { default_ns: HOUR_NS, max_ns: 7 * DAY_NS };

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
    /// Seconds per point (default: the window over 120 points, at least 1 s). A step longer
    /// than the window is the window; one that gives more than 1,000 points is widened to
    /// the smallest multiple of itself that gives at most 1,000 (`step_secs` says).
    #[param(minimum = 1)]
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

/// A quantile of a histogram over every replica's observations, per step: computed from
/// the bucket rates summed over replicas (the `*_bucket` series with their `le` label).
#[derive(Debug, Serialize, ToSchema)]
pub struct QuantileSeries {
    pub service: String,
    /// The histogram's name (without `_bucket`).
    pub metric: String,
    /// Its labels but `le`.
    pub labels: BTreeMap<String, String>,
    pub quantile: f64,
    /// `[step start ns, value]`; steps without observations are left out.
    pub points: Vec<(u64, f64)>,
}

/// The quantiles computed for every histogram.
pub const QUANTILES: [f64; 2] = [0.5, 0.95];

#[derive(Debug, Serialize, ToSchema)]
pub struct Pipeline {
    pub from_ns: u64,
    pub to_ns: u64,
    pub step_secs: u64,
    pub series: Vec<Series>,
    /// p50 and p95 of every histogram.
    pub quantiles: Vec<QuantileSeries>,
    /// More samples matched than one answer holds: narrow the window or the filters.
    pub truncated: bool,
}

#[utoipa::path(get, path = "/api/v1/pipeline", tag = "pipeline", params(PipelineParams),
    responses((status = 200, body = Pipeline), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn series(
    State(state): State<AppState>,
    Query(p): Query<PipelineParams>,
) -> Result<Json<Pipeline>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let span_secs = (window.to_ns - window.from_ns).div_ceil(1_000_000_000);
    let step_secs = step_secs(span_secs, p.step_secs)?;
    let service = params::text("service", p.service)?;
    let metric = params::text("metric", p.metric)?;
    let rows = state
        .run(pipeline::series(&state.store, window, step_secs * 1_000_000_000, service.as_deref(), metric.as_deref()))
        .await?;
    let truncated = rows.len() as u64 >= pipeline::MAX_SAMPLES;
    let series = group(rows);
    let quantiles = quantiles(&series);
    Ok(Json(Pipeline { from_ns: window.from_ns, to_ns: window.to_ns, step_secs, series, quantiles, truncated }))
}

/// Seconds per point over a window of `span_secs`: `asked`, or the window over 120 points.
/// A step longer than the window is the window (one point); one that would give more than
/// [`MAX_POINTS`] is widened to the smallest multiple of itself that gives at most that
/// many. The answer's `step_secs` says which was used.
fn step_secs(span_secs: u64, asked: Option<u64>) -> Result<u64, ApiError> {
    let span_secs = span_secs.max(1);
    match asked {
        Some(0) => Err(ApiError::bad("step_secs", "must be at least 1")),
        Some(s) => {
            let s = s.min(span_secs);
            Ok(s * span_secs.div_ceil(MAX_POINTS).div_ceil(s).max(1))
        }
        None => Ok(span_secs.div_ceil(120)),
    }
}

/// (service, metric, label keys, label values): one series.
type SeriesKey = (String, String, Vec<String>, Vec<String>);

/// Rows ordered by service, metric and labels, into one combined series per label set.
fn group(rows: Vec<StepSample>) -> Vec<Series> {
    let mut groups: BTreeMap<SeriesKey, Vec<Point>> = BTreeMap::new();
    for r in rows {
        groups.entry((r.service, r.metric, r.label_keys, r.label_values)).or_default().push(Point {
            instance: r.instance,
            step_ns: r.step_ns,
            value: r.value,
        });
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

/// The p50 and p95 of every histogram among `series`, per step.
fn quantiles(series: &[Series]) -> Vec<QuantileSeries> {
    type Key = (String, String, Vec<(String, String)>);
    // Per histogram: step → (bound, summed bucket rate).
    let mut histograms: BTreeMap<Key, BTreeMap<u64, Vec<(f64, f64)>>> = BTreeMap::new();
    for s in series {
        let Some(base) = s.metric.strip_suffix("_bucket") else { continue };
        let Some(bound) = s.labels.get("le").and_then(|le| le.parse::<f64>().ok()) else { continue };
        let labels: Vec<(String, String)> =
            s.labels.iter().filter(|(k, _)| k.as_str() != "le").map(|(k, v)| (k.clone(), v.clone())).collect();
        let steps = histograms.entry((s.service.clone(), base.to_string(), labels)).or_default();
        for (step, rate) in &s.total {
            steps.entry(*step).or_default().push((bound, *rate));
        }
    }
    let mut out = Vec::new();
    for ((service, metric, labels), steps) in histograms {
        for q in QUANTILES {
            let points = steps.iter().filter_map(|(step, buckets)| Some((*step, quantile(q, buckets)?))).collect();
            out.push(QuantileSeries {
                service: service.clone(),
                metric: metric.clone(),
                labels: labels.iter().cloned().collect(),
                quantile: q,
                points,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(instance: &str, le: &str, step_ns: u64, value: f64) -> StepSample {
        StepSample {
            service: "writer".into(),
            instance: instance.into(),
            metric: "tayga_writer_insert_seconds_bucket".into(),
            label_keys: vec!["le".into(), "table".into()],
            label_values: vec![le.into(), "spans".into()],
            step_ns,
            value,
        }
    }

    #[test]
    fn a_step_too_long_or_too_fine_for_the_window_is_made_to_fit() {
        assert!(step_secs(3600, Some(0)).is_err());
        assert_eq!(step_secs(3600, None).unwrap(), 30);
        assert_eq!(step_secs(3600, Some(u64::MAX)).unwrap(), 3600, "one point");
        assert_eq!(step_secs(7 * 86_400, Some(1)).unwrap(), 605);
        assert_eq!(step_secs(7 * 86_400, Some(60)).unwrap(), 660);
        assert_eq!(step_secs(0, Some(5)).unwrap(), 1);
        for (span, asked) in [(86_400, 7), (3601, 1), (604_800, 13)] {
            let s = step_secs(span, Some(asked)).unwrap();
            assert!(span.div_ceil(s) <= MAX_POINTS && s.is_multiple_of(asked), "{span} {asked}: {s}");
        }
    }

    #[test]
    fn histogram_quantiles_come_from_the_bucket_rates_of_every_replica() {
        const S: u64 = 1_000_000_000;
        // Over one second replica a observes 10 fast inserts, replica b 10 slow ones.
        let rows = vec![
            sample("a", "0.1", 0, 0.0),
            sample("a", "0.1", S, 10.0),
            sample("a", "1", 0, 0.0),
            sample("a", "1", S, 10.0),
            sample("a", "+Inf", 0, 0.0),
            sample("a", "+Inf", S, 10.0),
            sample("b", "0.1", 0, 0.0),
            sample("b", "0.1", S, 0.0),
            sample("b", "1", 0, 0.0),
            sample("b", "1", S, 10.0),
            sample("b", "+Inf", 0, 0.0),
            sample("b", "+Inf", S, 10.0),
        ];
        let q = quantiles(&group(rows));
        assert_eq!(q.len(), 2);
        assert_eq!((q[0].metric.as_str(), q[0].quantile), ("tayga_writer_insert_seconds", 0.5));
        assert_eq!(q[0].labels, BTreeMap::from([("table".to_string(), "spans".to_string())]));
        assert_eq!(q[0].points, vec![(S, 0.1)], "half of the 20 observations are at most 0.1 s");
        assert!((q[1].points[0].1 - 0.91).abs() < 1e-9);
    }
}
