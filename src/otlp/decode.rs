//! Decoding OTLP/HTTP request bodies: protobuf or JSON, plain or gzip, within a size limit.
//! Each failure is typed so ingest can answer with the status OTLP expects (400, 413, 415)
//! and a message that names the problem. Decompression is bounded: a gzip bomb stops at
//! the limit instead of filling memory.

use std::io::Read;

use prost::Message;
use serde::de::DeserializeOwned;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("unsupported content type `{0}`: send application/x-protobuf or application/json")]
    UnsupportedContentType(String),
    #[error("unsupported content encoding `{0}`: send gzip or no encoding")]
    UnsupportedContentEncoding(String),
    #[error("request body exceeds the {limit}-byte limit")]
    TooLarge { limit: usize },
    #[error("body is not valid gzip: {0}")]
    Gzip(String),
    #[error("body is not a valid OTLP protobuf message: {0}")]
    Protobuf(String),
    #[error("body is not valid OTLP JSON: {0}")]
    Json(String),
}

impl DecodeError {
    /// The HTTP status OTLP/HTTP prescribes for this failure.
    pub fn http_status(&self) -> u16 {
        match self {
            DecodeError::UnsupportedContentType(_) | DecodeError::UnsupportedContentEncoding(_) => 415,
            DecodeError::TooLarge { .. } => 413,
            DecodeError::Gzip(_) | DecodeError::Protobuf(_) | DecodeError::Json(_) => 400,
        }
    }
}

/// The encoding named by a Content-Type header (parameters such as `charset` ignored).
pub fn encoding_of(content_type: Option<&str>) -> Result<Encoding, DecodeError> {
    let mime = content_type.unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match mime.as_str() {
        "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        _ => Err(DecodeError::UnsupportedContentType(content_type.unwrap_or("").to_string())),
    }
}

/// The body with its Content-Encoding undone, at most `limit` bytes.
pub fn decompress(body: &[u8], content_encoding: Option<&str>, limit: usize) -> Result<Vec<u8>, DecodeError> {
    let encoding = content_encoding.unwrap_or("").trim().to_ascii_lowercase();
    match encoding.as_str() {
        "" | "identity" => {
            if body.len() > limit {
                return Err(DecodeError::TooLarge { limit });
            }
            Ok(body.to_vec())
        }
        "gzip" => {
            let mut out = Vec::new();
            // Read one byte past the limit to tell "exactly the limit" from "more".
            flate2::read::MultiGzDecoder::new(body)
                .take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| DecodeError::Gzip(e.to_string()))?;
            if out.len() > limit {
                return Err(DecodeError::TooLarge { limit });
            }
            Ok(out)
        }
        other => Err(DecodeError::UnsupportedContentEncoding(other.to_string())),
    }
}

/// Decodes an OTLP export request from an HTTP body.
pub fn decode<R: Message + Default + DeserializeOwned>(
    body: &[u8],
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    limit: usize,
) -> Result<R, DecodeError> {
    let encoding = encoding_of(content_type)?;
    let bytes = decompress(body, content_encoding, limit)?;
    match encoding {
        Encoding::Protobuf => R::decode(bytes.as_slice()).map_err(|e| DecodeError::Protobuf(e.to_string())),
        Encoding::Json => serde_json::from_slice(&bytes).map_err(|e| DecodeError::Json(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::ExportTraceServiceRequest;
    use flate2::write::GzEncoder;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use proptest::prelude::*;
    use std::io::Write;

    fn sample() -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![Span {
                        trace_id: vec![0xab; 16],
                        span_id: vec![0xcd; 8],
                        name: "GET /".into(),
                        start_time_unix_nano: 1_700_000_000_000_000_000,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn protobuf_plain_and_gzip() {
        let bytes = sample().encode_to_vec();
        let plain: ExportTraceServiceRequest = decode(&bytes, Some("application/x-protobuf"), None, 1 << 20).unwrap();
        assert_eq!(plain, sample());
        let zipped: ExportTraceServiceRequest =
            decode(&gzip(&bytes), Some("application/x-protobuf"), Some("gzip"), 1 << 20).unwrap();
        assert_eq!(zipped, sample());
    }

    #[test]
    fn otlp_json_with_hex_ids_and_string_timestamps() {
        // As the OTLP/JSON spec writes it: camelCase, hex ids, 64-bit integers as strings.
        let json = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"abababababababababababababababab",
            "spanId":"cdcdcdcdcdcdcdcd","name":"GET /","startTimeUnixNano":"1700000000000000000"}]}]}]}"#;
        let got: ExportTraceServiceRequest =
            decode(json.as_bytes(), Some("application/json; charset=utf-8"), None, 1 << 20).unwrap();
        assert_eq!(got, sample());
    }

    #[test]
    fn each_failure_gets_its_status() {
        let bytes = sample().encode_to_vec();
        let truncated = &bytes[..bytes.len() - 3];
        let err =
            decode::<ExportTraceServiceRequest>(truncated, Some("application/x-protobuf"), None, 1 << 20).unwrap_err();
        assert_eq!(err.http_status(), 400, "{err}");
        let err =
            decode::<ExportTraceServiceRequest>(b"{\"resourceSpans\": 7}", Some("application/json"), None, 1 << 20)
                .unwrap_err();
        assert_eq!(err.http_status(), 400, "{err}");
        let err = decode::<ExportTraceServiceRequest>(&bytes, Some("text/plain"), None, 1 << 20).unwrap_err();
        assert_eq!(err.http_status(), 415);
        let err = decode::<ExportTraceServiceRequest>(&bytes, Some("application/x-protobuf"), Some("br"), 1 << 20)
            .unwrap_err();
        assert_eq!(err.http_status(), 415);
        let err = decode::<ExportTraceServiceRequest>(&bytes, Some("application/x-protobuf"), None, 10).unwrap_err();
        assert_eq!(err, DecodeError::TooLarge { limit: 10 });
        assert_eq!(err.http_status(), 413);
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limit() {
        let bomb = gzip(&vec![0u8; 64 << 20]); // 64 MiB of zeros, about 64 KiB compressed
        assert!(bomb.len() < 1 << 20);
        let err = decode::<ExportTraceServiceRequest>(&bomb, Some("application/x-protobuf"), Some("gzip"), 1 << 20)
            .unwrap_err();
        assert_eq!(err, DecodeError::TooLarge { limit: 1 << 20 });
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512), json in any::<bool>(), zipped in any::<bool>()) {
            let ct = if json { "application/json" } else { "application/x-protobuf" };
            let ce = if zipped { Some("gzip") } else { None };
            let _ = decode::<ExportTraceServiceRequest>(&body, Some(ct), ce, 1 << 16);
        }
    }
}
