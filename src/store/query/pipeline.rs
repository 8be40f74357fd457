//! The recorder's samples: written in batches, read back per service, instance, metric and
//! label set, one value per time step (the last sample of the step). The aggregation over
//! replicas happens in `daemon::api::recorder::rules`, where the per-metric rule lives.

use clickhouse::Row;
use serde::Deserialize;

use super::Window;
use crate::store::statements::Statement;
use crate::store::{MetricSampleRow, Store, StoreError};

/// The recorder's samples of one tick, in one INSERT.
pub async fn record(store: &Store, samples: &[MetricSampleRow]) -> Result<(), StoreError> {
    store.insert(samples).await
}

#[derive(Debug, Clone, PartialEq, Row, Deserialize)]
pub struct StepSample {
    pub service: String,
    pub instance: String,
    pub metric: String,
    pub label_keys: Vec<String>,
    pub label_values: Vec<String>,
    /// The start of the step, ns.
    pub step_ns: u64,
    /// The last value recorded in the step.
    pub value: f64,
}

/// The most rows one series read returns; a window and step that need more are refused by
/// the API before it asks.
pub const MAX_SAMPLES: u64 = 200_000;

/// Binds: step, step, from, to, [service], [metric], limit.
pub fn series_sql(by_service: bool, by_metric: bool) -> String {
    let service = if by_service { " AND service = ?" } else { "" };
    let metric = if by_metric { " AND metric = ?" } else { "" };
    format!(
        "SELECT service, instance, metric, label_keys, label_values, intDiv(ts_ns, ?) * ? AS step_start, argMax(value, ts_ns) \
         FROM pipeline_metrics WHERE ts_ns >= ? AND ts_ns < ?{service}{metric} \
         GROUP BY service, instance, metric, label_keys, label_values, step_start \
         ORDER BY service, metric, label_keys, label_values, instance, step_start LIMIT ?"
    )
}

pub async fn series(
    store: &Store,
    window: Window,
    step_ns: u64,
    service: Option<&str>,
    metric: Option<&str>,
) -> Result<Vec<StepSample>, StoreError> {
    let step = step_ns.max(1);
    let mut query = store
        .client()
        .query(&series_sql(service.is_some(), metric.is_some()))
        .bind(step)
        .bind(step)
        .bind(window.from_ns)
        .bind(window.to_ns);
    if let Some(service) = service {
        query = query.bind(service);
    }
    if let Some(metric) = metric {
        query = query.bind(metric);
    }
    query.bind(MAX_SAMPLES).fetch_all().await.map_err(|e| store.query_error("reading pipeline metrics", e))
}

pub fn statements() -> Vec<Statement> {
    vec![Statement::new("query.pipeline_series", series_sql(true, true)).binds(["1", "1", "0", "1", "'s'", "'m'", "10"])]
}
