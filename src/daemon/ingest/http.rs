//! OTLP/HTTP: `POST /v1/traces` and `POST /v1/logs`, protobuf or JSON, optionally gzip.
//! Answers follow the OTLP/HTTP spec: the response is encoded like the request; a failure
//! is a `google.rpc.Status` with a message that names the problem; 503 carries Retry-After.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
use prost::Message;

use super::metrics::labels;
use super::pipeline::{Accepted, Unavailable};
use super::Ingest;
use crate::otlp::decode::{decode, encoding_of, DecodeError, Encoding};

pub fn router(ingest: Arc<Ingest>) -> Router {
    Router::new().route("/v1/traces", post(traces)).route("/v1/logs", post(logs)).with_state(ingest)
}

/// google.rpc.Status, the body of an OTLP/HTTP error (details left out).
#[derive(Clone, PartialEq, Message, serde::Serialize)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

struct Request {
    encoding: Encoding,
    body: Bytes,
}

async fn read_body(ingest: &Ingest, headers: &HeaderMap, body: Body, signal: &str) -> Result<(Request, Option<String>, Option<String>), Response> {
    let content_type = header_str(headers, header::CONTENT_TYPE);
    let encoding = encoding_of(content_type.as_deref()).map_err(|e| ingest.refuse(signal, Encoding::Json, &e))?;
    let limit = ingest.max_body_bytes;
    let body = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ingest.refuse(signal, encoding, &DecodeError::TooLarge { limit }))?;
    ingest.metrics.bytes.get_or_create(&labels([("signal", signal)])).inc_by(body.len() as u64);
    Ok((Request { encoding, body }, content_type, header_str(headers, header::CONTENT_ENCODING)))
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn traces(State(ingest): State<Arc<Ingest>>, headers: HeaderMap, body: Body) -> Response {
    let (req, content_type, content_encoding) = match read_body(&ingest, &headers, body, "traces").await {
        Ok(r) => r,
        Err(response) => return response,
    };
    let request = match decode(&req.body, content_type.as_deref(), content_encoding.as_deref(), ingest.max_body_bytes) {
        Ok(request) => request,
        Err(e) => return ingest.refuse("traces", req.encoding, &e),
    };
    let result = ingest.pipeline.export_traces(request).await;
    ingest.answer("traces", req.encoding, result, |a| ExportTraceServiceResponse {
        partial_success: (a.rejected > 0).then(|| ExportTracePartialSuccess { rejected_spans: a.rejected, error_message: a.message }),
    })
}

async fn logs(State(ingest): State<Arc<Ingest>>, headers: HeaderMap, body: Body) -> Response {
    let (req, content_type, content_encoding) = match read_body(&ingest, &headers, body, "logs").await {
        Ok(r) => r,
        Err(response) => return response,
    };
    let request = match decode(&req.body, content_type.as_deref(), content_encoding.as_deref(), ingest.max_body_bytes) {
        Ok(request) => request,
        Err(e) => return ingest.refuse("logs", req.encoding, &e),
    };
    let result = ingest.pipeline.export_logs(request).await;
    ingest.answer("logs", req.encoding, result, |a| ExportLogsServiceResponse {
        partial_success: (a.rejected > 0).then(|| ExportLogsPartialSuccess { rejected_log_records: a.rejected, error_message: a.message }),
    })
}

fn encoded<M: Message + serde::Serialize>(status: StatusCode, encoding: Encoding, message: &M, extra: &[(header::HeaderName, String)]) -> Response {
    let (content_type, body) = match encoding {
        Encoding::Protobuf => ("application/x-protobuf", message.encode_to_vec()),
        Encoding::Json => ("application/json", serde_json::to_vec(message).unwrap_or_default()),
    };
    let mut response = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
    for (name, value) in extra {
        if let Ok(value) = value.parse() {
            response.headers_mut().insert(name.clone(), value);
        }
    }
    response
}

impl Ingest {
    fn refuse(&self, signal: &str, encoding: Encoding, error: &DecodeError) -> Response {
        self.metrics.requests.get_or_create(&labels([("signal", signal), ("transport", "http"), ("outcome", "bad_request")])).inc();
        let status = StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        // gRPC code INVALID_ARGUMENT (3) for bad input, as OTLP maps it.
        encoded(status, encoding, &RpcStatus { code: 3, message: error.to_string() }, &[])
    }

    fn answer<M: Message + serde::Serialize>(
        &self,
        signal: &str,
        encoding: Encoding,
        result: Result<Accepted, Unavailable>,
        response: impl FnOnce(Accepted) -> M,
    ) -> Response {
        match result {
            Ok(accepted) => {
                let outcome = if accepted.rejected > 0 { "partial" } else { "ok" };
                self.metrics.requests.get_or_create(&labels([("signal", signal), ("transport", "http"), ("outcome", outcome)])).inc();
                encoded(StatusCode::OK, encoding, &response(accepted), &[])
            }
            Err(e) => {
                self.metrics.requests.get_or_create(&labels([("signal", signal), ("transport", "http"), ("outcome", "unavailable")])).inc();
                // gRPC code UNAVAILABLE (14): the client keeps its batch and retries.
                let retry_after = self.probe_interval.as_secs().max(1).to_string();
                encoded(StatusCode::SERVICE_UNAVAILABLE, encoding, &RpcStatus { code: 14, message: e.to_string() }, &[(header::RETRY_AFTER, retry_after)])
            }
        }
    }
}
