//! Decoding OTLP/HTTP request bodies: protobuf or JSON, plain, gzip or deflate, within a size limit.
//! Each failure is typed so ingest can answer with the status OTLP expects (400, 413, 415)
//! and a message that names the problem. Decompression is bounded: a bomb stops at
//! the limit instead of filling memory.

use std::io::Read;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use prost::Message;
use serde::de::DeserializeOwned;

use super::{ExportLogsServiceRequest, ExportTraceServiceRequest};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("unsupported content type `{0}`: send application/x-protobuf or application/json")]
    UnsupportedContentType(String),
    #[error("unsupported content encoding `{0}`: send gzip, deflate or no encoding")]
    UnsupportedContentEncoding(String),
    #[error("request body exceeds the {limit}-byte limit")]
    TooLarge { limit: usize },
    #[error("body is not valid gzip: {0}")]
    Gzip(String),
    #[error("body is not valid deflate (zlib) data: {0}")]
    Deflate(String),
    #[error("the request body could not be read: {0}")]
    BodyRead(String),
    #[error("body is not a valid OTLP protobuf message: {0}")]
    Protobuf(String),
    #[error("body is not valid OTLP JSON: {0}")]
    Json(String),
    #[error("the request body did not arrive within {secs} s")]
    SlowBody { secs: u64 },
}

impl DecodeError {
    /// The HTTP status OTLP/HTTP prescribes for this failure.
    pub fn http_status(&self) -> u16 {
        match self {
            DecodeError::UnsupportedContentType(_) | DecodeError::UnsupportedContentEncoding(_) => 415,
            DecodeError::TooLarge { .. } => 413,
            DecodeError::Gzip(_)
            | DecodeError::Deflate(_)
            | DecodeError::BodyRead(_)
            | DecodeError::Protobuf(_)
            | DecodeError::Json(_) => 400,
            DecodeError::SlowBody { .. } => 408,
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

/// The body with its Content-Encoding undone, at most `limit` bytes (a plain body as is).
pub fn decompress<'a>(
    body: &'a [u8],
    content_encoding: Option<&str>,
    limit: usize,
) -> Result<std::borrow::Cow<'a, [u8]>, DecodeError> {
    let encoding = content_encoding.unwrap_or("").trim().to_ascii_lowercase();
    match encoding.as_str() {
        "" | "identity" => {
            if body.len() > limit {
                return Err(DecodeError::TooLarge { limit });
            }
            Ok(std::borrow::Cow::Borrowed(body))
        }
        "gzip" | "x-gzip" => {
            bounded(flate2::read::MultiGzDecoder::new(body), limit).map_err(|e| e.or(DecodeError::Gzip))
        }
        // HTTP's `deflate` is the zlib format (RFC 9110); some clients send raw deflate
        // instead, which is told apart by its missing zlib header.
        "deflate" => {
            let zlib =
                body.len() >= 2 && body[0] & 0x0f == 8 && u16::from_be_bytes([body[0], body[1]]).is_multiple_of(31);
            let read = if zlib {
                bounded(flate2::read::ZlibDecoder::new(body), limit)
            } else {
                bounded(flate2::read::DeflateDecoder::new(body), limit)
            };
            read.map_err(|e| e.or(DecodeError::Deflate))
        }
        other => Err(DecodeError::UnsupportedContentEncoding(other.to_string())),
    }
}

/// Why a bounded decompression stopped.
enum Inflate {
    TooLarge(usize),
    Corrupt(String),
}

impl Inflate {
    fn or(self, corrupt: fn(String) -> DecodeError) -> DecodeError {
        match self {
            Inflate::TooLarge(limit) => DecodeError::TooLarge { limit },
            Inflate::Corrupt(e) => corrupt(e),
        }
    }
}

/// Everything `decoder` yields, at most `limit` bytes: a bomb stops at the limit.
fn bounded<'a>(decoder: impl Read, limit: usize) -> Result<std::borrow::Cow<'a, [u8]>, Inflate> {
    let mut out = Vec::new();
    // Read one byte past the limit to tell "exactly the limit" from "more".
    decoder.take(limit as u64 + 1).read_to_end(&mut out).map_err(|e| Inflate::Corrupt(e.to_string()))?;
    if out.len() > limit {
        return Err(Inflate::TooLarge(limit));
    }
    Ok(std::borrow::Cow::Owned(out))
}

/// Decodes an OTLP export request from an HTTP body.
pub fn decode<R: Message + Default + DeserializeOwned + AnyValues>(
    body: &[u8],
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    limit: usize,
) -> Result<R, DecodeError> {
    let encoding = encoding_of(content_type)?;
    let bytes = decompress(body, content_encoding, limit)?;
    parse(&bytes, encoding)
}

/// Decodes an OTLP export request from a decompressed body.
pub fn parse<R: Message + Default + DeserializeOwned + AnyValues>(
    bytes: &[u8],
    encoding: Encoding,
) -> Result<R, DecodeError> {
    match encoding {
        Encoding::Protobuf => R::decode(bytes).map_err(|e| DecodeError::Protobuf(e.to_string())),
        Encoding::Json => decode_json(bytes),
    }
}

/// OTLP/JSON, with proto3's JSON forms of a double: a number, or a string holding a number,
/// `"NaN"`, `"Infinity"` or `"-Infinity"`. The OTLP types read only numbers, so string
/// doubles are rewritten first: numbers in place, the three specials as placeholder
/// integers that are turned back into NaN and ±infinity once the request is decoded.
fn decode_json<R: DeserializeOwned + AnyValues>(bytes: &[u8]) -> Result<R, DecodeError> {
    let Some(rewritten) = rewrite_string_doubles(bytes) else {
        return serde_json::from_slice(bytes).map_err(|e| DecodeError::Json(e.to_string()));
    };
    let mut request: R = serde_json::from_slice(&rewritten).map_err(|e| DecodeError::Json(e.to_string()))?;
    request.for_each_value(&mut |value| {
        if let Some(any_value::Value::DoubleValue(d)) = &mut value.value {
            if let Some((_, special)) = SPECIAL_DOUBLES.iter().find(|(placeholder, _)| *d == *placeholder as f64) {
                *d = *special;
            }
        }
    });
    Ok(request)
}

/// Stand-ins for the doubles JSON numbers cannot hold: odd integers near -2^53, exact in
/// any JSON parser, and (being what they are) never sent as a real attribute value.
const SPECIAL_DOUBLES: [(i64, f64); 3] = [
    (-9_007_199_254_740_991, f64::NAN),
    (-9_007_199_254_740_989, f64::INFINITY),
    (-9_007_199_254_740_987, f64::NEG_INFINITY),
];

/// The body with every `"doubleValue": "<string>"` replaced by a JSON number, or `None`
/// when there is none (the common case: the body is decoded as sent). A string that is
/// not a double is left alone, so the decoder names it. Only a key can match: inside a
/// JSON string a quote is always escaped.
fn rewrite_string_doubles(json: &[u8]) -> Option<Vec<u8>> {
    const KEY: &[u8] = b"\"doubleValue\"";
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut at = 0;
    while let Some(found) = find(&json[at..], KEY).map(|i| i + at) {
        at = found + KEY.len();
        if found > 0 && json[found - 1] == b'\\' {
            continue;
        }
        let mut i = at;
        while i < json.len() && json[i].is_ascii_whitespace() {
            i += 1;
        }
        if json.get(i) != Some(&b':') {
            continue;
        }
        i += 1;
        while i < json.len() && json[i].is_ascii_whitespace() {
            i += 1;
        }
        if json.get(i) != Some(&b'"') {
            continue;
        }
        let Some(len) = json[i + 1..].iter().position(|b| *b == b'"') else { continue };
        let text = &json[i + 1..i + 1 + len];
        let number = match text {
            b"NaN" => SPECIAL_DOUBLES[0].0.to_string(),
            b"Infinity" => SPECIAL_DOUBLES[1].0.to_string(),
            b"-Infinity" => SPECIAL_DOUBLES[2].0.to_string(),
            other => match std::str::from_utf8(other).ok().and_then(|t| t.trim().parse::<f64>().ok()) {
                Some(d) if d.is_finite() => format!("{d:?}"),
                _ => continue,
            },
        };
        let out = out.get_or_insert_with(|| Vec::with_capacity(json.len()));
        out.extend_from_slice(&json[copied..i]);
        out.extend_from_slice(number.as_bytes());
        copied = i + 1 + len + 1;
        at = copied;
    }
    let mut out = out?;
    out.extend_from_slice(&json[copied..]);
    Some(out)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Every `AnyValue` of a request (attributes, bodies, and what arrays and maps hold).
pub trait AnyValues {
    fn for_each_value(&mut self, f: &mut dyn FnMut(&mut AnyValue));
}

fn visit_attributes(attributes: &mut [KeyValue], f: &mut dyn FnMut(&mut AnyValue)) {
    for kv in attributes {
        if let Some(v) = kv.value.as_mut() {
            visit_value(v, f);
        }
    }
}

fn visit_value(value: &mut AnyValue, f: &mut dyn FnMut(&mut AnyValue)) {
    match &mut value.value {
        Some(any_value::Value::ArrayValue(a)) => a.values.iter_mut().for_each(|v| visit_value(v, f)),
        Some(any_value::Value::KvlistValue(kv)) => visit_attributes(&mut kv.values, f),
        _ => f(value),
    }
}

impl AnyValues for ExportTraceServiceRequest {
    fn for_each_value(&mut self, f: &mut dyn FnMut(&mut AnyValue)) {
        for rs in &mut self.resource_spans {
            if let Some(r) = rs.resource.as_mut() {
                visit_attributes(&mut r.attributes, f);
            }
            for ss in &mut rs.scope_spans {
                if let Some(scope) = ss.scope.as_mut() {
                    visit_attributes(&mut scope.attributes, f);
                }
                for span in &mut ss.spans {
                    visit_attributes(&mut span.attributes, f);
                    span.events.iter_mut().for_each(|e| visit_attributes(&mut e.attributes, f));
                    span.links.iter_mut().for_each(|l| visit_attributes(&mut l.attributes, f));
                }
            }
        }
    }
}

impl AnyValues for ExportLogsServiceRequest {
    fn for_each_value(&mut self, f: &mut dyn FnMut(&mut AnyValue)) {
        for rl in &mut self.resource_logs {
            if let Some(r) = rl.resource.as_mut() {
                visit_attributes(&mut r.attributes, f);
            }
            for sl in &mut rl.scope_logs {
                if let Some(scope) = sl.scope.as_mut() {
                    visit_attributes(&mut scope.attributes, f);
                }
                for log in &mut sl.log_records {
                    visit_attributes(&mut log.attributes, f);
                    if let Some(body) = log.body.as_mut() {
                        visit_value(body, f);
                    }
                }
            }
        }
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
    fn json_doubles_may_be_strings_nan_and_infinities() {
        let json = r#"{"resourceSpans":[{"resource":{"attributes":[
            {"key":"a","value":{"doubleValue":"NaN"}},
            {"key":"b","value":{"doubleValue" : "Infinity"}},
            {"key":"c","value":{"doubleValue":"-Infinity"}},
            {"key":"d","value":{"doubleValue":"2.5"}},
            {"key":"e","value":{"doubleValue":1.25}},
            {"key":"f","value":{"arrayValue":{"values":[{"doubleValue":"NaN"}]}}},
            {"key":"g","value":{"stringValue":"say \"doubleValue\":\"NaN\" verbatim"}}]},
            "scopeSpans":[{"spans":[{"traceId":"abababababababababababababababab","spanId":"cdcdcdcdcdcdcdcd",
            "name":"x","attributes":[{"key":"h","value":{"doubleValue":"Infinity"}}]}]}]}]}"#;
        let got: ExportTraceServiceRequest = decode(json.as_bytes(), Some("application/json"), None, 1 << 20).unwrap();
        let attrs = &got.resource_spans[0].resource.as_ref().unwrap().attributes;
        let double = |v: &Option<AnyValue>| match v.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::DoubleValue(d)) => *d,
            other => panic!("not a double: {other:?}"),
        };
        assert!(double(&attrs[0].value).is_nan());
        assert_eq!(double(&attrs[1].value), f64::INFINITY);
        assert_eq!(double(&attrs[2].value), f64::NEG_INFINITY);
        assert_eq!(double(&attrs[3].value), 2.5);
        assert_eq!(double(&attrs[4].value), 1.25);
        let Some(any_value::Value::ArrayValue(a)) = attrs[5].value.as_ref().and_then(|v| v.value.as_ref()) else {
            panic!("an array")
        };
        assert!(double(&Some(a.values[0].clone())).is_nan());
        let Some(any_value::Value::StringValue(text)) = attrs[6].value.as_ref().and_then(|v| v.value.as_ref()) else {
            panic!("a string")
        };
        assert_eq!(text, r#"say "doubleValue":"NaN" verbatim"#, "a string is never rewritten");
        assert_eq!(double(&got.resource_spans[0].scope_spans[0].spans[0].attributes[0].value), f64::INFINITY);
        let err = decode::<ExportTraceServiceRequest>(
            br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"a","value":{"doubleValue":"lots"}}]}}]}"#,
            Some("application/json"),
            None,
            1 << 20,
        )
        .unwrap_err();
        assert_eq!(err.http_status(), 400, "{err}");
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

    #[test]
    fn deflate_bodies_in_zlib_and_raw_form() {
        let request = sample();
        let bytes = request.encode_to_vec();
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(&bytes).unwrap();
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        raw.write_all(&bytes).unwrap();
        for body in [zlib.finish().unwrap(), raw.finish().unwrap()] {
            let decoded: ExportTraceServiceRequest =
                decode(&body, Some("application/x-protobuf"), Some("deflate"), 1 << 20).unwrap();
            assert_eq!(decoded, request);
        }
        let err = decode::<ExportTraceServiceRequest>(
            b"\x78\x9cnot zlib",
            Some("application/x-protobuf"),
            Some("deflate"),
            1 << 20,
        )
        .unwrap_err();
        assert!(matches!(err, DecodeError::Deflate(_)), "{err:?}");
        let mut bomb = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        bomb.write_all(&vec![0u8; 16 << 20]).unwrap();
        let err = decode::<ExportTraceServiceRequest>(
            &bomb.finish().unwrap(),
            Some("application/x-protobuf"),
            Some("deflate"),
            1 << 20,
        )
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
