//! The part of ingest both front ends share: split a decoded request into records, then
//! make it durable on the first usable path (the broker, or ClickHouse directly) before the
//! client is answered. Failover follows `failover.rs`: a failed path is skipped, the next one
//! is tried at once, and with no usable path the request is refused without waiting. The
//! direct path also keeps every record in the backlog (`backlog.rs`) in the same step as
//! its rows: both are stored, or the request fails. Requests that arrive before the
//! start-up probe answered wait for it (at most [`STARTUP_WAIT`]).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use prost::Message;

use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};

use super::backlog::{Backlog, BacklogHealth, Outgoing};
use super::failover::{Failover, Health, Path};
use super::metrics::IngestMetrics;
use crate::bus::packed::{PackedProducer, SendError};
use crate::bus::producer::OutRecord;
use crate::config::Names;
use crate::otlp::decode::DecodeError;
use crate::otlp::flatten::{log_rows, span_rows};
use crate::otlp::split::{ingest_split, OtlpRequest, Split};
use crate::otlp::{ExportLogsServiceRequest, ExportTraceServiceRequest};
use crate::store::Store;
use crate::wire::record::{header_pairs, SignalKind};

/// How long the direct path may take to store one request.
pub const DIRECT_INSERT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request that arrived during start-up waits for the broker's first probe
/// (itself bounded at about 2 s); past it, the request takes whatever path is usable.
pub const STARTUP_WAIT: Duration = Duration::from_secs(5);

/// What the client is told about an accepted request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Accepted {
    /// Items refused (each too large for a record by itself); the rest are durable.
    pub rejected: i64,
    pub message: String,
}

/// The request was not made durable: the client keeps it and retries.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    /// No path could take it.
    #[error("no ingest path is available: {0}")]
    NoPath(String),
    /// The broker is up but its producer's local queue stayed full: load, not an outage.
    #[error("ingest is overloaded, retry later: {0}")]
    Busy(String),
}

pub struct Pipeline {
    pub failover: Mutex<Failover>,
    pub(super) publisher: PackedProducer,
    store: Store,
    names: Names,
    max_record_bytes: usize,
    pub(super) metrics: IngestMetrics,
    pub(super) backlog: Backlog,
    /// True once the start-up probe answered.
    ready: tokio::sync::watch::Receiver<bool>,
    /// Every request holds it shared; a drain that direct writes keep overtaking takes it
    /// alone for its last pass (`backlog.rs`), so the broker can take over while clients
    /// keep sending.
    pub(super) handover: tokio::sync::RwLock<()>,
}

/// What `/health` shows under `ingest`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IngestHealth {
    #[serde(flatten)]
    pub paths: Health,
    pub backlog: BacklogHealth,
}

/// The records one request becomes, each the protobuf encoding of an OTLP request.
pub struct Prepared {
    kind: SignalKind,
    signals: Split<Vec<u8>>,
    /// Logs only: the per-service records for the logs topic.
    logs: Option<Split<Vec<u8>>>,
}

impl Pipeline {
    /// Logs (once per crossing) that the backlog passed 80 % of its bound, or is full, or
    /// has room again.
    pub fn note_backlog_room(&self) {
        let b = &self.backlog;
        let crossed = b.room_crossings();
        if let Some(full) = crossed.full_changed {
            self.failover.lock().unwrap().set_backlog_full(full);
            self.metrics.backlog_full(full, b.stats(), b.max_bytes());
        }
        if crossed.started_filling {
            self.metrics.backlog_filling(b.stats(), b.max_bytes());
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        failover: Failover,
        publisher: PackedProducer,
        store: Store,
        names: Names,
        max_record_bytes: usize,
        metrics: IngestMetrics,
        backlog: Backlog,
        ready: tokio::sync::watch::Receiver<bool>,
    ) -> Pipeline {
        Pipeline {
            failover: Mutex::new(failover),
            publisher,
            store,
            names,
            max_record_bytes,
            metrics,
            backlog,
            ready,
            handover: tokio::sync::RwLock::new(()),
        }
    }

    pub fn health(&self) -> IngestHealth {
        let failover = self.failover.lock().unwrap();
        let stats = self.backlog.stats();
        let mut paths = failover.health();
        // Until the start-up round also read what an earlier run left in the backlog, its
        // size here is not known yet: a path that answered is not yet the whole answer.
        if !*self.ready.borrow() {
            paths.using = "starting";
        }
        IngestHealth {
            paths,
            backlog: BacklogHealth {
                records: stats.records,
                bytes: stats.bytes,
                max_bytes: self.backlog.max_bytes(),
                replaying: failover.replaying(),
            },
        }
    }

    /// Waits (bounded) until the start-up probe answered.
    async fn started(&self) {
        let mut ready = self.ready.clone();
        let _ = tokio::time::timeout(STARTUP_WAIT, ready.wait_for(|r| *r)).await;
    }

    /// Splits the protobuf encoding of a request into its records, without decoding it
    /// (`otlp::split::ingest_split`); bytes that are not a valid `R` are refused.
    pub fn prepare<R: ExportRequest>(&self, bytes: &[u8]) -> Result<Prepared, DecodeError> {
        let (signals, logs) =
            ingest_split::<R>(bytes, self.max_record_bytes).map_err(|e| DecodeError::Protobuf(e.to_string()))?;
        Ok(Prepared { kind: R::KIND, signals, logs })
    }

    /// Makes a prepared request durable on the first usable path.
    pub async fn export(&self, prepared: Prepared) -> Result<Accepted, Unavailable> {
        self.started().await;
        let kind = prepared.kind;
        let started = Instant::now();
        let ingest_ns = self.backlog.stamp();
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

        let _handover = self.handover.read().await;
        let paths = self.failover.lock().unwrap().usable();
        let mut last_error = String::from("both paths are in their cooldown");
        for path in paths {
            let result = match path {
                Path::Broker => self.publish(kind, &prepared, ingest_ns).await,
                Path::Direct => self.insert(kind, &prepared, ingest_ns).await.map_err(PathError::Failed),
            };
            let path_name = path_name(path);
            match result {
                Ok(()) => {
                    self.metrics.accepted(signal, path_name, items, started.elapsed());
                    return Ok(Accepted { rejected, message });
                }
                // Load is not an outage: the broker stays up, the client retries later.
                Err(PathError::Busy(e)) => {
                    self.metrics.busy(signal, "producer_queue", &e);
                    return Err(Unavailable::Busy(e.to_string()));
                }
                Err(PathError::Failed(e)) => {
                    self.metrics.path_failed(path_name, &e);
                    self.failover.lock().unwrap().failed(path, Instant::now());
                    self.update_path_gauges();
                    last_error = format!("{path_name}: {e}");
                }
            }
        }
        Err(Unavailable::NoPath(last_error))
    }

    /// The records a request becomes, as they are published (and kept on the direct path).
    fn outgoing<'a>(&'a self, prepared: &'a Prepared) -> Vec<Outgoing<'a>> {
        let logs = prepared.logs.iter().flat_map(|l| l.records.iter().map(|r| ("logs", &self.names.logs, r)));
        let signals = prepared.signals.records.iter().map(|r| ("signals", &self.names.signals, r));
        signals
            .chain(logs)
            .map(|(label, topic, record)| Outgoing { label, topic, key: record.key.as_str(), value: &record.request })
            .collect()
    }

    async fn publish(&self, kind: SignalKind, prepared: &Prepared, ingest_ns: u64) -> Result<(), PathError> {
        let headers = header_pairs(kind, ingest_ns);
        let outgoing = self.outgoing(prepared);
        let labels: Vec<&'static str> = outgoing.iter().map(|o| o.label).collect();
        let out: Vec<OutRecord> = outgoing
            .into_iter()
            .map(|o| OutRecord { topic: o.topic, key: o.key, value: o.value.into(), headers: &headers })
            .collect();
        self.publisher.publish_all(out).await.map_err(|e| {
            if e.is_backpressure() {
                PathError::Busy(e)
            } else {
                PathError::Failed(e.into())
            }
        })?;
        for label in labels {
            self.metrics.published(label);
        }
        Ok(())
    }

    /// The direct path: the rows, and the records kept in the backlog, in one step.
    async fn insert(&self, kind: SignalKind, prepared: &Prepared, ingest_ns: u64) -> anyhow::Result<()> {
        let mut spans = Vec::new();
        let mut logs = Vec::new();
        // The records are checked encodings, so they decode; the direct path is the rare
        // one, and the broker path never pays for a decode.
        for record in &prepared.signals.records {
            let bytes = record.request.as_slice();
            match kind {
                SignalKind::Traces => spans.extend(span_rows(
                    &ExportTraceServiceRequest::decode(bytes).context("decoding a checked trace record")?,
                    ingest_ns,
                )),
                SignalKind::Logs => logs.extend(log_rows(
                    &ExportLogsServiceRequest::decode(bytes).context("decoding a checked log record")?,
                    ingest_ns,
                )),
            }
        }
        let outgoing = self.outgoing(prepared);
        let kept = self.backlog.rows(ingest_ns, &header_pairs(kind, ingest_ns), &outgoing);
        drop(outgoing);
        if kept.is_none() {
            self.metrics.backlog_overflow(prepared.records());
            self.note_backlog_room();
        }
        let kept = kept.unwrap_or_default();
        // A ClickHouse that accepts connections but never answers must not hold the client:
        // past the bound the path counts as failed and the request fails over. The three
        // inserts run together; any failure fails the request (the client retries, and
        // rows or records stored twice are harmless by identity).
        tokio::time::timeout(DIRECT_INSERT_TIMEOUT, async {
            let (spans, logs, kept) =
                tokio::join!(self.store.insert(&spans), self.store.insert(&logs), self.backlog.keep(&kept));
            spans.and(logs).and(kept)
        })
        .await
        .map_err(|_| anyhow::anyhow!("ClickHouse did not answer the insert within {DIRECT_INSERT_TIMEOUT:?}"))??;
        if !kept.is_empty() {
            self.backlog.kept(&kept);
            self.failover.lock().unwrap().set_backlog_pending(true);
            self.metrics.set_backlog(self.backlog.stats());
            self.note_backlog_room();
        }
        Ok(())
    }

    pub fn update_path_gauges(&self) {
        let failover = self.failover.lock().unwrap();
        for path in [Path::Broker, Path::Direct] {
            self.metrics.set_path_up(path_name(path), failover.is_up(path));
        }
    }
}

/// Why a path did not take a request.
enum PathError {
    /// The path is broken: mark it down and try the next.
    Failed(anyhow::Error),
    /// The path works but is saturated: refuse the request, keep the path.
    Busy(SendError),
}

impl Prepared {
    fn records(&self) -> u64 {
        (self.signals.records.len() + self.logs.as_ref().map_or(0, |l| l.records.len())) as u64
    }
}

/// An OTLP export request ingest accepts, with what differs between traces and logs.
pub trait ExportRequest:
    OtlpRequest + crate::otlp::decode::AnyValues + serde::de::DeserializeOwned + Send + 'static
{
    const SIGNAL: &'static str;
    const KIND: SignalKind;
    type Response: prost::Message + serde::Serialize + Default + Send + 'static;
    /// The OTLP response: a partial success when items were refused.
    fn response(accepted: Accepted) -> Self::Response;
}

impl ExportRequest for ExportTraceServiceRequest {
    const SIGNAL: &'static str = "traces";
    const KIND: SignalKind = SignalKind::Traces;
    type Response = ExportTraceServiceResponse;

    fn response(a: Accepted) -> Self::Response {
        ExportTraceServiceResponse {
            partial_success: (a.rejected > 0)
                .then_some(ExportTracePartialSuccess { rejected_spans: a.rejected, error_message: a.message }),
        }
    }
}

impl ExportRequest for ExportLogsServiceRequest {
    const SIGNAL: &'static str = "logs";
    const KIND: SignalKind = SignalKind::Logs;
    type Response = ExportLogsServiceResponse;

    fn response(a: Accepted) -> Self::Response {
        ExportLogsServiceResponse {
            partial_success: (a.rejected > 0)
                .then_some(ExportLogsPartialSuccess { rejected_log_records: a.rejected, error_message: a.message }),
        }
    }
}

pub fn path_name(path: Path) -> &'static str {
    match path {
        Path::Broker => "broker",
        Path::Direct => "direct",
    }
}
