//! OTLP/gRPC: the trace and logs Export services on one tonic server, gzip accepted.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use tonic::codec::CompressionEncoding;
use tonic::codegen::http;
use tonic::{Request, Response, Status};

use super::pipeline::{ExportRequest, Unavailable};
use super::{Ingest, BUSY_RETRY_AFTER_SECS};

#[derive(Clone)]
pub struct Grpc(pub Arc<Ingest>);

impl Grpc {
    async fn export<R: ExportRequest>(&self, request: Request<R>) -> Result<Response<R::Response>, Status> {
        let request = request.into_inner();
        let ingest = &self.0;
        let size = request.encoded_len();
        ingest.metrics.received(R::SIGNAL, size);
        // Tonic has decoded the message already (bounded by the size limit); past the caps
        // it is dropped at once instead of being split and held.
        let held = match ingest.inflight.admit(size as u64) {
            Ok(held) => held,
            Err(busy) => {
                ingest.metrics.busy(R::SIGNAL, busy.reason());
                ingest.metrics.answered(R::SIGNAL, "grpc", "busy");
                let message = format!("ingest is busy ({}), retry later", busy.reason());
                return Err(retry_later(message, BUSY_RETRY_AFTER_SECS));
            }
        };
        let result = R::export(&ingest.pipeline, request).await;
        ingest.release(held);
        let outcome = match &result {
            Ok(a) if a.rejected > 0 => "partial",
            Ok(_) => "ok",
            Err(Unavailable::NoPath(_)) => "unavailable",
            Err(Unavailable::Busy(_)) => "busy",
        };
        ingest.metrics.answered(R::SIGNAL, "grpc", outcome);
        result.map(|a| Response::new(R::response(a))).map_err(|e| match e {
            // No path: UNAVAILABLE, which OTLP exporters retry with their own backoff.
            Unavailable::NoPath(_) => Status::unavailable(e.to_string()),
            // Real backpressure: RESOURCE_EXHAUSTED is retryable only with RetryInfo (OTLP).
            Unavailable::Busy(_) => retry_later(e.to_string(), BUSY_RETRY_AFTER_SECS),
        })
    }
}

/// google.rpc.RetryInfo, google.protobuf.Duration and Any: the details of a status that
/// tells an OTLP exporter when to retry.
#[derive(Clone, PartialEq, prost::Message)]
struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    retry_delay: Option<ProtoDuration>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoDuration {
    #[prost(int64, tag = "1")]
    seconds: i64,
    #[prost(int32, tag = "2")]
    nanos: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<Any>,
}

/// RESOURCE_EXHAUSTED with a RetryInfo of `seconds`.
pub fn retry_later(message: String, seconds: u64) -> Status {
    use prost::Message as _;
    let info = RetryInfo { retry_delay: Some(ProtoDuration { seconds: seconds as i64, nanos: 0 }) };
    let details = RpcStatus {
        code: tonic::Code::ResourceExhausted as i32,
        message: message.clone(),
        details: vec![Any { type_url: "type.googleapis.com/google.rpc.RetryInfo".into(), value: info.encode_to_vec() }],
    };
    Status::with_details(tonic::Code::ResourceExhausted, message, details.encode_to_vec().into())
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

pub fn services(ingest: Arc<Ingest>) -> (InputCodes<TraceServiceServer<Grpc>>, InputCodes<LogsServiceServer<Grpc>>) {
    let limit = ingest.max_body_bytes;
    let grpc = Grpc(ingest);
    (
        InputCodes(
            TraceServiceServer::new(grpc.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
        ),
        InputCodes(
            LogsServiceServer::new(grpc).accept_compressed(CompressionEncoding::Gzip).max_decoding_message_size(limit),
        ),
    )
}

/// Gives input the codes OTLP clients read right. Tonic answers a message over the size
/// limit with OUT_OF_RANGE, which OTLP exporters retry (forever, for the same message), and
/// one it cannot decode with INTERNAL; both are the client's data: INVALID_ARGUMENT, which
/// is not retried. Ingest's own answers never use either code.
#[derive(Clone)]
pub struct InputCodes<S>(S);

impl<S> tonic::codegen::Service<http::Request<tonic::body::Body>> for InputCodes<S>
where
    S: tonic::codegen::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let answer = self.0.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            let code = response.headers().get("grpc-status").and_then(|v| v.to_str().ok());
            let input = [tonic::Code::OutOfRange, tonic::Code::Internal].map(|c| (c as i32).to_string());
            if code.is_some_and(|c| input.iter().any(|i| i == c)) {
                let invalid = (tonic::Code::InvalidArgument as i32).to_string();
                response.headers_mut().insert("grpc-status", invalid.parse().expect("a digit is a header value"));
            }
            Ok(response)
        })
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for InputCodes<S> {
    const NAME: &'static str = S::NAME;
}
