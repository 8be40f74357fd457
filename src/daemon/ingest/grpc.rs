//! OTLP/gRPC: the trace and logs Export services on one tonic server, gzip accepted.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse};
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use super::metrics::labels;
use super::pipeline::{Accepted, Unavailable};
use super::Ingest;

#[derive(Clone)]
pub struct Grpc(pub Arc<Ingest>);

impl Grpc {
    fn record<T>(&self, signal: &str, bytes: usize, result: Result<Accepted, Unavailable>, response: impl FnOnce(Accepted) -> T) -> Result<Response<T>, Status> {
        let ingest = &self.0;
        ingest.metrics.bytes.get_or_create(&labels([("signal", signal)])).inc_by(bytes as u64);
        let outcome = match &result {
            Ok(a) if a.rejected > 0 => "partial",
            Ok(_) => "ok",
            Err(_) => "unavailable",
        };
        ingest.metrics.requests.get_or_create(&labels([("signal", signal), ("transport", "grpc"), ("outcome", outcome)])).inc();
        result.map(|a| Response::new(response(a))).map_err(|e| Status::unavailable(e.to_string()))
    }
}

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(&self, request: Request<ExportTraceServiceRequest>) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let request = request.into_inner();
        let bytes = request.encoded_len();
        let result = self.0.pipeline.export_traces(request).await;
        self.record("traces", bytes, result, |a| ExportTraceServiceResponse {
            partial_success: (a.rejected > 0).then(|| ExportTracePartialSuccess { rejected_spans: a.rejected, error_message: a.message }),
        })
    }
}

#[tonic::async_trait]
impl LogsService for Grpc {
    async fn export(&self, request: Request<ExportLogsServiceRequest>) -> Result<Response<ExportLogsServiceResponse>, Status> {
        let request = request.into_inner();
        let bytes = request.encoded_len();
        let result = self.0.pipeline.export_logs(request).await;
        self.record("logs", bytes, result, |a| ExportLogsServiceResponse {
            partial_success: (a.rejected > 0).then(|| ExportLogsPartialSuccess { rejected_log_records: a.rejected, error_message: a.message }),
        })
    }
}

pub fn services(ingest: Arc<Ingest>) -> (TraceServiceServer<Grpc>, LogsServiceServer<Grpc>) {
    let limit = ingest.max_body_bytes;
    let grpc = Grpc(ingest);
    (
        TraceServiceServer::new(grpc.clone()).accept_compressed(CompressionEncoding::Gzip).max_decoding_message_size(limit),
        LogsServiceServer::new(grpc).accept_compressed(CompressionEncoding::Gzip).max_decoding_message_size(limit),
    )
}
