//! OTLP/gRPC: the trace and logs Export services on one tonic server, gzip accepted. The
//! services are written here rather than generated: the generated ones decode every request
//! into owned structs, where ingest only needs its bytes (it splits them in place).

use std::marker::PhantomData;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::bytes::Bytes;
use tonic::codegen::{http, BoxFuture};
use tonic::{Request, Response, Status};

use super::auth::Refusal;
use super::pipeline::{ExportRequest, Unavailable};
use super::{Ingest, BUSY_RETRY_AFTER_SECS};

#[derive(Clone)]
pub struct Grpc(pub Arc<Ingest>);

impl Grpc {
    async fn export<R: ExportRequest>(&self, request: Request<Bytes>) -> Result<Response<R::Response>, Status> {
        let ingest = &self.0;
        let token = request.metadata().get(ingest.auth.header()).and_then(|v| v.to_str().ok());
        let grant = ingest.auth.check(token).map_err(|refusal| unauthorized::<R>(ingest, &refusal))?;
        let request = request.into_inner();
        let size = request.len();
        ingest.metrics.received(R::SIGNAL, size);
        // Tonic has read the message already (bounded by the size limit); past the caps it
        // is dropped at once instead of being split and held.
        let held = match ingest.inflight.admit(size as u64) {
            Ok(held) => held,
            Err(busy) => {
                ingest.metrics.busy(R::SIGNAL, busy.reason(), &busy);
                ingest.metrics.answered(R::SIGNAL, "grpc", "busy");
                let message = format!("ingest is busy ({}: {busy}), retry later", busy.reason());
                return Err(retry_later(message, BUSY_RETRY_AFTER_SECS));
            }
        };
        if let Err(refusal) = ingest.allowed::<R>(&grant, &request) {
            return Err(unauthorized::<R>(ingest, &refusal));
        }
        let prepared = match ingest.pipeline.prepare::<R>(&request) {
            Ok(prepared) => prepared,
            Err(e) => {
                ingest.metrics.answered(R::SIGNAL, "grpc", "bad_request");
                return Err(Status::invalid_argument(e.to_string()));
            }
        };
        drop(request);
        let result = ingest.pipeline.export(prepared).await;
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

/// Refused for its token: UNAUTHENTICATED, or PERMISSION_DENIED for a service the token
/// may not send; neither is retried by exporters.
fn unauthorized<R: ExportRequest>(ingest: &Ingest, refusal: &Refusal) -> Status {
    ingest.metrics.unauthorized("grpc", refusal);
    ingest.metrics.answered(R::SIGNAL, "grpc", "unauthorized");
    match refusal {
        Refusal::Service(_) => Status::permission_denied(refusal.to_string()),
        Refusal::Missing(_) | Refusal::Invalid => Status::unauthenticated(refusal.to_string()),
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

/// The gRPC method of an export request.
pub trait GrpcExport: ExportRequest {
    const SERVICE: &'static str;
    const PATH: &'static str;
}

impl GrpcExport for ExportTraceServiceRequest {
    const SERVICE: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
    const PATH: &'static str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
}

impl GrpcExport for ExportLogsServiceRequest {
    const SERVICE: &'static str = "opentelemetry.proto.collector.logs.v1.LogsService";
    const PATH: &'static str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";
}

/// The Export service of one signal: tonic reads the message (gzip, size limit), ingest
/// gets its bytes.
pub struct ExportService<R> {
    grpc: Grpc,
    limit: usize,
    request: PhantomData<fn() -> R>,
}

impl<R> Clone for ExportService<R> {
    fn clone(&self) -> Self {
        ExportService { grpc: self.grpc.clone(), limit: self.limit, request: PhantomData }
    }
}

impl<R: GrpcExport> tonic::codegen::Service<http::Request<tonic::body::Body>> for ExportService<R> {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        if request.uri().path() != R::PATH {
            return Box::pin(async {
                let mut response = http::Response::new(tonic::body::Body::default());
                response.headers_mut().insert(Status::GRPC_STATUS, (tonic::Code::Unimplemented as i32).into());
                response.headers_mut().insert(http::header::CONTENT_TYPE, tonic::metadata::GRPC_CONTENT_TYPE);
                Ok(response)
            });
        }
        let method = ExportMethod::<R> { grpc: self.grpc.clone(), request: PhantomData };
        let limit = self.limit;
        Box::pin(async move { Ok(crate::otlp::grpc::server::<R::Response>(limit).unary(method, request).await) })
    }
}

impl<R: GrpcExport> tonic::server::NamedService for ExportService<R> {
    const NAME: &'static str = R::SERVICE;
}

struct ExportMethod<R> {
    grpc: Grpc,
    request: PhantomData<fn() -> R>,
}

impl<R: GrpcExport> tonic::server::UnaryService<Bytes> for ExportMethod<R> {
    type Response = R::Response;
    type Future = BoxFuture<Response<R::Response>, Status>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let grpc = self.grpc.clone();
        Box::pin(async move { grpc.export::<R>(request).await })
    }
}

/// `MetricsService/Export` (and anything else under the metrics service): Tayga does not
/// store metrics, and says so with UNIMPLEMENTED, which exporters do not retry, instead of
/// leaving a Collector pipeline that exports all three signals to guess.
#[derive(Clone)]
pub struct MetricsRefused(pub Arc<Ingest>);

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for MetricsRefused {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: http::Request<tonic::body::Body>) -> Self::Future {
        self.0.metrics.answered("metrics", "grpc", "not_implemented");
        Box::pin(async { Ok(Status::unimplemented(super::METRICS_REFUSED).into_http()) })
    }
}

impl tonic::server::NamedService for MetricsRefused {
    const NAME: &'static str = "opentelemetry.proto.collector.metrics.v1.MetricsService";
}

pub fn services(
    ingest: Arc<Ingest>,
) -> (InputCodes<ExportService<ExportTraceServiceRequest>>, InputCodes<ExportService<ExportLogsServiceRequest>>) {
    let limit = ingest.max_body_bytes;
    let grpc = Grpc(ingest);
    (
        InputCodes(ExportService { grpc: grpc.clone(), limit, request: PhantomData }),
        InputCodes(ExportService { grpc, limit, request: PhantomData }),
    )
}

/// Gives input the codes OTLP clients read right (`otlp::grpc::input_code`).
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
            let code = response.headers().get("grpc-status").and_then(|v| v.to_str().ok()?.parse::<i32>().ok());
            if let Some(code) = code.map(tonic::Code::from_i32) {
                let answered = crate::otlp::grpc::input_code(code);
                if answered != code {
                    let answered = (answered as i32).to_string();
                    response.headers_mut().insert("grpc-status", answered.parse().expect("a digit is a header value"));
                }
            }
            Ok(response)
        })
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for InputCodes<S> {
    const NAME: &'static str = S::NAME;
}
