//! OTLP/gRPC: the trace and logs Export services on one tonic server, gzip accepted.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use super::pipeline::ExportRequest;
use super::Ingest;

#[derive(Clone)]
pub struct Grpc(pub Arc<Ingest>);

impl Grpc {
    async fn export<R: ExportRequest>(&self, request: Request<R>) -> Result<Response<R::Response>, Status> {
        let request = request.into_inner();
        let ingest = &self.0;
        ingest.metrics.received(R::SIGNAL, request.encoded_len());
        let result = R::export(&ingest.pipeline, request).await;
        let outcome = match &result {
            Ok(a) if a.rejected > 0 => "partial",
            Ok(_) => "ok",
            Err(_) => "unavailable",
        };
        ingest.metrics.answered(R::SIGNAL, "grpc", outcome);
        result.map(|a| Response::new(R::response(a))).map_err(|e| Status::unavailable(e.to_string()))
    }
}

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        Grpc::export(self, request).await
    }
}

#[tonic::async_trait]
impl LogsService for Grpc {
    async fn export(
        &self,
        request: Request<ExportLogsServiceRequest>,
    ) -> Result<Response<ExportLogsServiceResponse>, Status> {
        Grpc::export(self, request).await
    }
}

pub fn services(ingest: Arc<Ingest>) -> (TraceServiceServer<Grpc>, LogsServiceServer<Grpc>) {
    let limit = ingest.max_body_bytes;
    let grpc = Grpc(ingest);
    (
        TraceServiceServer::new(grpc.clone())
            .accept_compressed(CompressionEncoding::Gzip)
            .max_decoding_message_size(limit),
        LogsServiceServer::new(grpc).accept_compressed(CompressionEncoding::Gzip).max_decoding_message_size(limit),
    )
}
