//! The part of ingest both front ends share: split a decoded request into records, then
//! make it durable on the first usable path (the broker, or ClickHouse directly) before the
//! client is answered. Failover follows `failover.rs`: a failed path is skipped, the next one
//! is tried at once, and with no usable path the request is refused without waiting.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};

use super::failover::{Failover, Health, Path};
use super::metrics::IngestMetrics;
use crate::bus::producer::{OutRecord, Publisher};
use crate::config::Names;
use crate::otlp::flatten::{log_rows, span_rows};
use crate::otlp::split::{split, Grouping, OtlpRequest, Split};
use crate::otlp::{ExportLogsServiceRequest, ExportTraceServiceRequest};
use crate::store::{now_ns, Store};
use crate::wire::record::{headers, SignalKind};

/// How long the direct path may take to store one request.
pub const DIRECT_INSERT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the client is told about an accepted request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Accepted {
    /// Items refused (each too large for a record by itself); the rest are durable.
    pub rejected: i64,
    pub message: String,
}

/// No path could take the request: the client keeps it and retries.
#[derive(Debug, thiserror::Error)]
#[error("no ingest path is available: {0}")]
pub struct Unavailable(pub String);

pub struct Pipeline {
    pub failover: Mutex<Failover>,
    publisher: Publisher,
    store: Store,
    names: Names,
    max_record_bytes: usize,
    metrics: IngestMetrics,
}

/// The records one request becomes.
struct Prepared<R> {
    signals: Split<R>,
    /// Logs only: the per-service records for the logs topic.
    logs: Option<Split<R>>,
}

impl Pipeline {
    pub fn new(
        failover: Failover,
        publisher: Publisher,
        store: Store,
        names: Names,
        max_record_bytes: usize,
        metrics: IngestMetrics,
    ) -> Pipeline {
        Pipeline { failover: Mutex::new(failover), publisher, store, names, max_record_bytes, metrics }
    }

    pub fn health(&self) -> Health {
        self.failover.lock().unwrap().health()
    }

    pub async fn export_traces(&self, request: ExportTraceServiceRequest) -> Result<Accepted, Unavailable> {
        let prepared = Prepared { signals: split(request, Grouping::ByTrace, self.max_record_bytes), logs: None };
        self.export(SignalKind::Traces, prepared, |req, ingest_ns| Rows::Spans(span_rows(req, ingest_ns))).await
    }

    pub async fn export_logs(&self, request: ExportLogsServiceRequest) -> Result<Accepted, Unavailable> {
        let logs = split(request.clone(), Grouping::ByService, self.max_record_bytes);
        let prepared = Prepared { signals: split(request, Grouping::ByTrace, self.max_record_bytes), logs: Some(logs) };
        self.export(SignalKind::Logs, prepared, |req, ingest_ns| Rows::Logs(log_rows(req, ingest_ns))).await
    }

    async fn export<R: OtlpRequest>(
        &self,
        kind: SignalKind,
        prepared: Prepared<R>,
        to_rows: impl Fn(&R, u64) -> Rows,
    ) -> Result<Accepted, Unavailable> {
        let started = Instant::now();
        let ingest_ns = now_ns();
        let signal = kind.as_str();
        let rejected = prepared.signals.rejected.len() as i64;
        let items: usize = prepared.signals.records.iter().map(|r| r.items).sum();
        let message = prepared.signals.rejected.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("; ");
        if rejected > 0 {
            self.metrics.rejected_too_large(signal, rejected as usize);
        }
        if items == 0 {
            return Ok(Accepted { rejected, message });
        }

        let paths = self.failover.lock().unwrap().usable();
        let mut last_error = String::from("both paths are in their cooldown");
        for path in paths {
            let result = match path {
                Path::Redpanda => self.publish(kind, &prepared, ingest_ns).await,
                Path::Direct => self.insert(&prepared.signals, ingest_ns, &to_rows).await,
            };
            let path_name = path_name(path);
            match result {
                Ok(()) => {
                    self.metrics.accepted(signal, path_name, items, started.elapsed());
                    return Ok(Accepted { rejected, message });
                }
                Err(e) => {
                    self.metrics.path_failed(path_name, &e);
                    self.failover.lock().unwrap().failed(path, Instant::now());
                    self.update_path_gauges();
                    last_error = format!("{path_name}: {e}");
                }
            }
        }
        Err(Unavailable(last_error))
    }

    async fn publish<R: OtlpRequest>(
        &self,
        kind: SignalKind,
        prepared: &Prepared<R>,
        ingest_ns: u64,
    ) -> anyhow::Result<()> {
        let logs = prepared.logs.iter().flat_map(|l| l.records.iter().map(|r| ("logs", &self.names.logs, r)));
        let signals = prepared.signals.records.iter().map(|r| ("signals", &self.names.signals, r));
        let out: Vec<(&'static str, OutRecord)> = signals
            .chain(logs)
            .map(|(label, topic, record)| {
                (
                    label,
                    OutRecord {
                        topic,
                        key: record.key.as_str(),
                        value: record.request.encode_to_vec(),
                        headers: headers(kind, ingest_ns),
                    },
                )
            })
            .collect();
        let topics: Vec<&'static str> = out.iter().map(|(t, _)| *t).collect();
        self.publisher.publish_all(out.into_iter().map(|(_, r)| r).collect()).await?;
        for topic in topics {
            self.metrics.published(topic);
        }
        Ok(())
    }

    async fn insert<R: OtlpRequest>(
        &self,
        signals: &Split<R>,
        ingest_ns: u64,
        to_rows: &impl Fn(&R, u64) -> Rows,
    ) -> anyhow::Result<()> {
        let mut spans = Vec::new();
        let mut logs = Vec::new();
        for record in &signals.records {
            match to_rows(&record.request, ingest_ns) {
                Rows::Spans(rows) => spans.extend(rows),
                Rows::Logs(rows) => logs.extend(rows),
            }
        }
        // A ClickHouse that accepts connections but never answers must not hold the client:
        // past the bound the path counts as failed and the request fails over.
        tokio::time::timeout(DIRECT_INSERT_TIMEOUT, async {
            self.store.insert(&spans).await?;
            self.store.insert(&logs).await
        })
        .await
        .map_err(|_| anyhow::anyhow!("ClickHouse did not answer the insert within {DIRECT_INSERT_TIMEOUT:?}"))??;
        Ok(())
    }

    pub fn update_path_gauges(&self) {
        let failover = self.failover.lock().unwrap();
        for path in [Path::Redpanda, Path::Direct] {
            self.metrics.set_path_up(path_name(path), failover.is_up(path));
        }
    }
}

enum Rows {
    Spans(Vec<crate::store::SpanRow>),
    Logs(Vec<crate::store::LogRow>),
}

/// An OTLP export request ingest accepts, with what differs between traces and logs.
pub trait ExportRequest: OtlpRequest + serde::de::DeserializeOwned + Send + 'static {
    const SIGNAL: &'static str;
    type Response: prost::Message + serde::Serialize + Default + Send + 'static;
    fn export(
        pipeline: &Pipeline,
        request: Self,
    ) -> impl std::future::Future<Output = Result<Accepted, Unavailable>> + Send;
    /// The OTLP response: a partial success when items were refused.
    fn response(accepted: Accepted) -> Self::Response;
}

impl ExportRequest for ExportTraceServiceRequest {
    const SIGNAL: &'static str = "traces";
    type Response = ExportTraceServiceResponse;

    fn export(
        pipeline: &Pipeline,
        request: Self,
    ) -> impl std::future::Future<Output = Result<Accepted, Unavailable>> + Send {
        pipeline.export_traces(request)
    }

    fn response(a: Accepted) -> Self::Response {
        ExportTraceServiceResponse {
            partial_success: (a.rejected > 0)
                .then_some(ExportTracePartialSuccess { rejected_spans: a.rejected, error_message: a.message }),
        }
    }
}

impl ExportRequest for ExportLogsServiceRequest {
    const SIGNAL: &'static str = "logs";
    type Response = ExportLogsServiceResponse;

    fn export(
        pipeline: &Pipeline,
        request: Self,
    ) -> impl std::future::Future<Output = Result<Accepted, Unavailable>> + Send {
        pipeline.export_logs(request)
    }

    fn response(a: Accepted) -> Self::Response {
        ExportLogsServiceResponse {
            partial_success: (a.rejected > 0)
                .then_some(ExportLogsPartialSuccess { rejected_log_records: a.rejected, error_message: a.message }),
        }
    }
}

pub fn path_name(path: Path) -> &'static str {
    match path {
        Path::Redpanda => "redpanda",
        Path::Direct => "direct",
    }
}
