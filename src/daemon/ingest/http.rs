//! OTLP/HTTP: `POST /v1/traces` and `POST /v1/logs`, protobuf or JSON, optionally gzip.
//! Answers follow the OTLP/HTTP spec: the response is encoded like the request; a failure
//! is a `google.rpc.Status` with a message that names the problem; 503 carries Retry-After.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use futures_util::StreamExt as _;
use prost::Message;

use super::auth::Refusal;
use super::listen::{Busy, Held, Inflight};
use super::pipeline::{ExportRequest, Unavailable};
use super::{Ingest, BUSY_RETRY_AFTER_SECS};
use crate::otlp::decode::{decompress, encoding_of, parse, DecodeError, Encoding};
use crate::otlp::{ExportLogsServiceRequest, ExportTraceServiceRequest};

pub fn router(ingest: Arc<Ingest>) -> Router {
    Router::new()
        .route("/v1/traces", post(export::<ExportTraceServiceRequest>))
        .route("/v1/logs", post(export::<ExportLogsServiceRequest>))
        .route("/v1/metrics", post(metrics_refused))
        .with_state(ingest)
}

/// `POST /v1/metrics`: 501, which OTLP exporters do not retry, with a google.rpc.Status in
/// JSON that says what Tayga stores.
async fn metrics_refused(State(ingest): State<Arc<Ingest>>) -> Response {
    ingest.metrics.answered("metrics", "http", "not_implemented");
    let status = RpcStatus { code: tonic::Code::Unimplemented as i32, message: super::METRICS_REFUSED.into() };
    encoded(StatusCode::NOT_IMPLEMENTED, Encoding::Json, &status, &[])
}

/// google.rpc.Status, the body of an OTLP/HTTP error (details left out).
#[derive(Clone, PartialEq, Message, serde::Serialize)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn export<R: ExportRequest>(State(ingest): State<Arc<Ingest>>, headers: HeaderMap, body: Body) -> Response {
    let content_type = header_str(&headers, header::CONTENT_TYPE);
    let encoding = match encoding_of(content_type) {
        Ok(encoding) => encoding,
        Err(e) => return ingest.refuse(R::SIGNAL, Encoding::Json, &e),
    };
    // Judged before a byte of the body is read: a client without a token costs nothing.
    let token = headers.get(ingest.auth.header()).and_then(|v| v.to_str().ok());
    let grant = match ingest.auth.check(token) {
        Ok(grant) => grant,
        Err(refusal) => return ingest.unauthorized(R::SIGNAL, encoding, &refusal),
    };
    let limit = ingest.max_body_bytes;
    let declared = header_str(&headers, header::CONTENT_LENGTH).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return ingest.refuse(R::SIGNAL, encoding, &DecodeError::TooLarge { limit });
    }
    // A declared body is admitted for its length before a byte is read; a chunked one for
    // what it holds, growing as it arrives (`read_body`). A refused request holds nothing.
    let mut held = match ingest.inflight.admit(declared.unwrap_or(0) as u64) {
        Ok(held) => held,
        Err(busy) => return ingest.busy(R::SIGNAL, encoding, busy),
    };
    let read = read_body(body, declared, limit, &ingest.inflight, &mut held);
    let body = match tokio::time::timeout(ingest.body_timeout, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(BodyError::Decode(e))) => return ingest.refuse(R::SIGNAL, encoding, &e),
        Ok(Err(BodyError::Busy(busy))) => return ingest.busy(R::SIGNAL, encoding, busy),
        Err(_) => {
            let secs = ingest.body_timeout.as_secs();
            return ingest.refuse(R::SIGNAL, encoding, &DecodeError::SlowBody { secs });
        }
    };
    ingest.metrics.received(R::SIGNAL, body.len());
    let prepared = {
        let bytes = match decompress(&body, header_str(&headers, header::CONTENT_ENCODING), limit) {
            Ok(bytes) => bytes,
            Err(e) => return ingest.refuse(R::SIGNAL, encoding, &e),
        };
        // A plain body is parsed where it lies; a compressed one is held twice meanwhile.
        let held_bytes = match &bytes {
            std::borrow::Cow::Borrowed(_) => body.len(),
            std::borrow::Cow::Owned(decompressed) => body.len() + decompressed.len(),
        };
        if let Err(busy) = ingest.inflight.grow(&mut held, held_bytes as u64) {
            return ingest.busy(R::SIGNAL, encoding, busy);
        }
        // Protobuf is split where it lies, never decoded; JSON is decoded, then encoded once.
        let protobuf = match encoding {
            Encoding::Protobuf => std::borrow::Cow::Borrowed(bytes.as_ref()),
            Encoding::Json => match parse::<R>(&bytes, encoding) {
                Ok(request) => std::borrow::Cow::Owned(request.encode_to_vec()),
                Err(e) => return ingest.refuse(R::SIGNAL, encoding, &e),
            },
        };
        if let Err(refusal) = ingest.allowed::<R>(&grant, &protobuf) {
            return ingest.unauthorized(R::SIGNAL, encoding, &refusal);
        }
        match ingest.pipeline.prepare::<R>(&protobuf) {
            Ok(prepared) => prepared,
            Err(e) => return ingest.refuse(R::SIGNAL, encoding, &e),
        }
    };
    drop(body);
    let result = ingest.pipeline.export(prepared).await;
    let response = ingest.answer(
        R::SIGNAL,
        encoding,
        result.map(|accepted| {
            let partial = accepted.rejected > 0;
            (R::response(accepted), partial)
        }),
    );
    ingest.release(held);
    response
}

/// Why a body was not read whole.
enum BodyError {
    Decode(DecodeError),
    Busy(Busy),
}

/// Reads a body frame by frame, at most `limit` bytes, holding in `held` what its buffer
/// takes as it grows: a body of unknown length costs the in-flight bound what it really
/// holds, never the limit it might reach, so concurrent chunked requests share the bound.
async fn read_body(
    body: Body,
    declared: Option<usize>,
    limit: usize,
    inflight: &Inflight,
    held: &mut Held,
) -> Result<Vec<u8>, BodyError> {
    let mut frames = body.into_data_stream();
    let mut buffer = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(|e| BodyError::Decode(DecodeError::BodyRead(e.to_string())))?;
        if buffer.len() + frame.len() > limit {
            return Err(BodyError::Decode(DecodeError::TooLarge { limit }));
        }
        // What the buffer will hold after this frame (it grows by doubling, up to the limit).
        let needed = buffer.len() + frame.len();
        if needed > buffer.capacity() {
            let capacity = needed.max(buffer.capacity() * 2).min(limit);
            inflight.grow(held, capacity as u64).map_err(BodyError::Busy)?;
            buffer.reserve_exact(capacity - buffer.len());
        }
        buffer.extend_from_slice(&frame);
    }
    Ok(buffer)
}

fn encoded<M: Message + serde::Serialize>(
    status: StatusCode,
    encoding: Encoding,
    message: &M,
    extra: &[(header::HeaderName, String)],
) -> Response {
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
    fn refuse(&self, signal: &'static str, encoding: Encoding, error: &DecodeError) -> Response {
        self.metrics.answered(signal, "http", "bad_request");
        let status = StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        // gRPC code INVALID_ARGUMENT (3) for bad input, as OTLP maps it.
        encoded(status, encoding, &RpcStatus { code: 3, message: error.to_string() }, &[])
    }

    /// Refused for its token: 401 (none, or not accepted; gRPC UNAUTHENTICATED) or 403 (the
    /// token may not send a service of the request; PERMISSION_DENIED). Not retried.
    fn unauthorized(&self, signal: &'static str, encoding: Encoding, refusal: &Refusal) -> Response {
        self.metrics.unauthorized("http", refusal);
        self.metrics.answered(signal, "http", "unauthorized");
        let (status, code) = match refusal {
            Refusal::Service(_) => (StatusCode::FORBIDDEN, tonic::Code::PermissionDenied),
            Refusal::Missing(_) | Refusal::Invalid => (StatusCode::UNAUTHORIZED, tonic::Code::Unauthenticated),
        };
        let challenge = (header::WWW_AUTHENTICATE, "Bearer".to_string());
        let extra: &[(header::HeaderName, String)] =
            if status == StatusCode::UNAUTHORIZED { &[challenge] } else { &[] };
        encoded(status, encoding, &RpcStatus { code: code as i32, message: refusal.to_string() }, extra)
    }

    /// Refused because a bound on requests in flight is reached: 503, retry in a second.
    fn busy(&self, signal: &'static str, encoding: Encoding, busy: Busy) -> Response {
        self.metrics.busy(signal, busy.reason(), &busy);
        self.metrics.answered(signal, "http", "busy");
        let message = format!("ingest is busy ({}: {busy}), retry later", busy.reason());
        encoded(
            StatusCode::SERVICE_UNAVAILABLE,
            encoding,
            &RpcStatus { code: 14, message },
            &[(header::RETRY_AFTER, BUSY_RETRY_AFTER_SECS.to_string())],
        )
    }

    fn answer<M: Message + serde::Serialize>(
        &self,
        signal: &'static str,
        encoding: Encoding,
        result: Result<(M, bool), Unavailable>,
    ) -> Response {
        match result {
            Ok((response, partial)) => {
                let outcome = if partial { "partial" } else { "ok" };
                self.metrics.answered(signal, "http", outcome);
                encoded(StatusCode::OK, encoding, &response, &[])
            }
            Err(e) => {
                let outcome = match e {
                    Unavailable::NoPath(_) => "unavailable",
                    Unavailable::Busy(_) => "busy",
                };
                self.metrics.answered(signal, "http", outcome);
                // gRPC code UNAVAILABLE (14): the client keeps its batch and retries, after
                // the next probe when no path works, or in a second when ingest is busy.
                let retry_after = match e {
                    Unavailable::NoPath(_) => self.probe_interval.as_secs().max(1),
                    Unavailable::Busy(_) => BUSY_RETRY_AFTER_SECS,
                }
                .to_string();
                encoded(
                    StatusCode::SERVICE_UNAVAILABLE,
                    encoding,
                    &RpcStatus { code: 14, message: e.to_string() },
                    &[(header::RETRY_AFTER, retry_after)],
                )
            }
        }
    }
}
