//! What each fuzz target checks, on any input bytes: a panic is a finding. The cargo-fuzz
//! targets in `fuzz/` (nightly, coverage-guided, `scripts/fuzz.sh`) call these, and so
//! does the suite's stable replay (`tests/it/fuzz_replay.rs`: the committed seeds, every
//! crash kept as a regression, and a bounded run of seeded mutations), so a target and
//! its regression test can never drift apart. Not part of the product's API.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, InitProducerIdResponse, MetadataResponse, ProduceResponse, SaslAuthenticateResponse,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, HeaderVersion};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;

use crate::bus::packed::plan::{self, Outcome, ProduceAnswer};
use crate::config::Loaded;
use crate::mine::{CustomRule, Masker, MaskingConfig};
use crate::model::encoded::EncodedRows;
use crate::model::TableRow;
use crate::otlp::decode::{decode, decompress, DecodeError};
use crate::otlp::protobuf::{check, Msg};
use crate::otlp::rowbinary::{log_rows_into, record_rows, span_rows_into, TableRows};
use crate::otlp::split::{ingest_split, item_services, split_encoded, Grouping, OtlpRequest};
use crate::otlp::{flatten, ExportLogsServiceRequest, ExportTraceServiceRequest};
use crate::wire::record::{RawRecord, SignalKind};

/// A target's check: returns on any input, panics on a finding.
pub type Check = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/<name>.rs` and seed folder.
pub const TARGETS: &[(&str, Check)] = &[
    ("otlp_http_decode", otlp_http_decode),
    ("otlp_split", otlp_split),
    ("masking", masking),
    ("config_load", config_load),
    ("otlp_grpc_request", otlp_grpc_request),
    ("rowbinary_rows", rowbinary_rows),
    ("otlp_schema", otlp_schema),
    ("broker_answers", broker_answers),
];

/// The body limit the decode target works under.
const DECODE_LIMIT: usize = 1 << 20;

/// OTLP/HTTP bodies as ingest reads them: the content type and encoding headers, the
/// bounded decompression and the protobuf/JSON parse. The first byte picks the headers,
/// the rest is the body. Any input ends in a request or a typed error whose status
/// OTLP/HTTP allows, and never decompresses past the limit.
pub fn otlp_http_decode(data: &[u8]) {
    const CONTENT_TYPES: [Option<&str>; 5] = [
        Some("application/x-protobuf"),
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("text/plain"),
        None,
    ];
    const ENCODINGS: [Option<&str>; 4] = [None, Some("gzip"), Some("identity"), Some("br")];
    fn refused_as_allowed<T>(result: Result<T, DecodeError>) {
        if let Err(e) = result {
            assert!(matches!(e.http_status(), 400 | 413 | 415), "unexpected status for {e}");
            assert!(!e.to_string().is_empty(), "an error without a message");
        }
    }
    let Some((&selector, body)) = data.split_first() else { return };
    let content_type = CONTENT_TYPES[(selector & 0x7) as usize % CONTENT_TYPES.len()];
    let encoding = ENCODINGS[((selector >> 3) & 0x3) as usize];
    if let Ok(bytes) = decompress(body, encoding, DECODE_LIMIT) {
        assert!(bytes.len() <= DECODE_LIMIT, "decompressed past the limit");
    }
    if selector & 0x80 == 0 {
        refused_as_allowed(decode::<ExportTraceServiceRequest>(body, content_type, encoding, DECODE_LIMIT));
    } else {
        refused_as_allowed(decode::<ExportLogsServiceRequest>(body, content_type, encoding, DECODE_LIMIT));
    }
}

/// The byte-level record split ingest applies to every request, with a record limit and
/// a grouping taken from the input (small limits force the size-driven cuts). Bytes the
/// split accepts are bytes prost accepts; every item comes out exactly once, in a record
/// or as rejected; every record fits the limit, decodes, and holds the items it counts;
/// the direct path's rows (`flatten`) are one per item.
pub fn otlp_split(data: &[u8]) {
    let [lo, hi, selector, body @ ..] = data else { return };
    let max_bytes = 16 + u16::from_le_bytes([*lo, *hi]) as usize;
    let grouping = if selector & 2 == 0 { Grouping::ByTrace } else { Grouping::ByService };
    if selector & 1 == 0 {
        split_conserves::<ExportTraceServiceRequest>(body, grouping, max_bytes, |r| {
            let rows = flatten::span_rows(r, 1).len();
            let items = r.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
            (items, rows)
        });
    } else {
        split_conserves::<ExportLogsServiceRequest>(body, grouping, max_bytes, |r| {
            let rows = flatten::log_rows(r, 1).len();
            let items = r.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum();
            (items, rows)
        });
    }
}

/// `items_and_rows`: a decoded request's items, and the rows flattening it gives.
fn split_conserves<R: OtlpRequest>(
    body: &[u8],
    grouping: Grouping,
    max_bytes: usize,
    items_and_rows: impl Fn(&R) -> (usize, usize),
) {
    let decoded = R::decode(body);
    let split = split_encoded::<R>(body, grouping, max_bytes);
    let (request, split) = match (decoded, split) {
        (Ok(request), Ok(split)) => (request, split),
        (Err(_), Err(_)) => return,
        (decoded, split) => panic!(
            "the split and prost disagree: prost {}, split {}",
            if decoded.is_ok() { "accepts" } else { "refuses" },
            if split.is_ok() { "accepts" } else { "refuses" },
        ),
    };
    let (items, rows) = items_and_rows(&request);
    assert_eq!(rows, items, "flatten made a row count other than the item count");
    let mut seen = split.rejected.len();
    for record in &split.records {
        assert!(record.request.len() <= max_bytes, "a record over the limit");
        let decoded = R::decode(record.request.as_slice()).expect("a record decodes");
        assert_eq!(items_and_rows(&decoded).0, record.items, "a record's item count is wrong");
        seen += record.items;
    }
    assert_eq!(seen, items, "items lost or doubled by the split");
}

/// The masking rules on any line, with the default rules and with a custom rule whose glob
/// comes from the input (`pattern\nline`, as `[[logminer.masking.custom]]` would give
/// it). The output is words separated by single spaces, and masking is a function.
pub fn masking(data: &[u8]) {
    fn well_formed(masker: &Masker, line: &str) {
        let masked = masker.mask(line);
        assert!(!masked.contains("  "), "double space in {masked:?}");
        assert!(!masked.starts_with(' ') && !masked.ends_with(' '), "edge space in {masked:?}");
        assert_eq!(masked, masker.mask(line), "masking is not deterministic");
        let mut buffer = String::from("left over");
        masker.mask_into(line, &mut buffer);
        assert_eq!(buffer, masked, "mask_into differs from mask");
    }
    let text = String::from_utf8_lossy(data);
    well_formed(&Masker::default(), &text);
    if let Some((pattern, line)) = text.split_once('\n') {
        let config = MaskingConfig {
            enabled: true,
            disable: vec!["num".to_string()],
            custom: vec![CustomRule {
                name: "fuzz".to_string(),
                pattern: pattern.to_string(),
                placeholder: "<FUZZ>".to_string(),
            }],
        };
        if let Ok(custom) = Masker::new(&config) {
            well_formed(&custom, line);
        }
    }
}

/// The config loader on any `tayga.toml` text and environment (the file text, then after
/// a NUL byte `NAME=value` lines): a configuration, or a refusal naming its problems.
pub fn config_load(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (file, env_text) = text.split_once('\0').unwrap_or((&text, ""));
    let env: BTreeMap<String, String> =
        env_text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    match Loaded::from_parts(Some(file), &env) {
        Ok(loaded) => {
            // What loaded passed its checks; reporting on it must work too.
            let _ = loaded.problems();
        }
        Err(e) => assert!(!e.problems.is_empty(), "a refusal with no problem named"),
    }
}

/// The gRPC message limit the gRPC target works under when the input does not ask for a
/// small one.
const GRPC_LIMIT: usize = 1 << 20;

/// An OTLP/gRPC Export request's body as ingest's server reads it (`otlp::grpc::server`:
/// tonic's framing, gzip, the size limit), then what ingest does with the message: the
/// services a token is judged by and the split into records. The first byte picks the
/// signal (bit 0), the `grpc-encoding` header (bits 1-2: none, gzip, identity, br), a small
/// limit (bit 3) and the record limit (bits 4-7); the second where the body is cut in two
/// chunks; the rest is the body. Tonic hands over exactly the first message of a body of
/// whole, valid frames (read here from the gRPC spec, with the same gzip reader), and
/// anything else is refused with a code ingest answers as INVALID_ARGUMENT, UNIMPLEMENTED
/// (an encoding it does not take) or RESOURCE_EXHAUSTED (decompressed past the limit);
/// the message is then accepted by the split and the service check exactly when prost
/// accepts it, and every item comes out once.
pub fn otlp_grpc_request(data: &[u8]) {
    const ENCODINGS: [Option<&str>; 4] = [None, Some("gzip"), Some("identity"), Some("br")];
    let [selector, cut, body @ ..] = data else { return };
    let encoding = ENCODINGS[((selector >> 1) & 0x3) as usize];
    let limit = if selector & 0x8 == 0 { GRPC_LIMIT } else { 300 };
    let max_record_bytes = 16usize << (selector >> 4);
    let cut = *cut as usize % (body.len() + 1);
    let (delivered, code) = if selector & 1 == 0 {
        serve::<ExportTraceServiceResponse>(body, cut, encoding, limit)
    } else {
        serve::<ExportLogsServiceResponse>(body, cut, encoding, limit)
    };
    let expected = grpc_frames(body, encoding, limit);
    match (&expected, &delivered) {
        (Ok(message), Some(got)) => assert_eq!(message, got, "tonic handed over other bytes than the first message"),
        (Err(want), None) => assert_eq!(
            crate::otlp::grpc::input_code(code),
            *want,
            "refused with another code than the frames call for (tonic said {code:?})"
        ),
        (expected, delivered) => panic!(
            "the frames read {}, tonic {} (code {code:?})",
            if expected.is_ok() { "a message" } else { "a refusal" },
            if delivered.is_some() { "handed one over" } else { "refused" },
        ),
    }
    let Some(message) = delivered else { return };
    if selector & 1 == 0 {
        ingest_conserves::<ExportTraceServiceRequest>(&message, max_record_bytes, |r| {
            r.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum()
        });
    } else {
        ingest_conserves::<ExportLogsServiceRequest>(&message, max_record_bytes, |r| {
            r.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum()
        });
    }
}

/// The first message of a gRPC request body, read frame by frame as the gRPC spec has it
/// (1 byte compressed flag, 4 bytes big-endian length, the message), or the code of its
/// refusal as ingest answers it.
fn grpc_frames(body: &[u8], encoding: Option<&str>, limit: usize) -> Result<Bytes, tonic::Code> {
    use tonic::Code;
    let gzip = match encoding {
        None | Some("identity") => false,
        Some("gzip") => true,
        Some(_) => return Err(Code::Unimplemented),
    };
    let mut first = None;
    let mut rest = body;
    while !rest.is_empty() {
        let [flag, a, b, c, d, after @ ..] = rest else { return Err(Code::InvalidArgument) };
        let compressed = match flag {
            0 => false,
            1 if gzip => true,
            _ => return Err(Code::InvalidArgument),
        };
        let len = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
        if len > limit {
            return Err(Code::InvalidArgument);
        }
        if after.is_empty() && len > 0 {
            // Tonic's one leniency: a last frame of which only the header came is
            // ignored (the header is read off the buffer, and at the body's end no bytes
            // are left over). The first message is whole either way.
            break;
        }
        if after.len() < len {
            return Err(Code::InvalidArgument);
        }
        let (frame, next) = after.split_at(len);
        let message = if compressed {
            let mut out = Vec::new();
            let read = flate2::read::GzDecoder::new(frame).take(limit as u64 + 1).read_to_end(&mut out);
            if out.len() > limit {
                return Err(Code::ResourceExhausted);
            }
            read.map_err(|_| Code::InvalidArgument)?;
            Bytes::from(out)
        } else {
            Bytes::copy_from_slice(frame)
        };
        first.get_or_insert(message);
        rest = next;
    }
    first.ok_or(Code::InvalidArgument)
}

/// Runs `body` (in two chunks, cut at `cut`) through the Export server as ingest
/// configures it: the message it hands over, or the code it answers with.
fn serve<T: prost::Message + Default + Send + 'static>(
    body: &[u8],
    cut: usize,
    encoding: Option<&str>,
    limit: usize,
) -> (Option<Bytes>, tonic::Code) {
    use tonic::codegen::{http, BoxFuture};

    struct Keep<T>(Arc<Mutex<Option<Bytes>>>, std::marker::PhantomData<fn() -> T>);
    impl<T: Default + Send + 'static> tonic::server::UnaryService<Bytes> for Keep<T> {
        type Response = T;
        type Future = BoxFuture<tonic::Response<T>, tonic::Status>;
        fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
            *self.0.lock().unwrap() = Some(request.into_inner());
            Box::pin(async { Ok(tonic::Response::new(T::default())) })
        }
    }

    thread_local! {
        static RUNTIME: tokio::runtime::Runtime =
            tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime");
    }
    let chunks = [Bytes::copy_from_slice(&body[..cut]), Bytes::copy_from_slice(&body[cut..])];
    let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
    let mut request = http::Request::builder()
        .method("POST")
        .uri("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        .header("content-type", "application/grpc");
    if let Some(encoding) = encoding {
        request = request.header("grpc-encoding", encoding);
    }
    let request = request.body(tonic::body::Body::new(axum::body::Body::from_stream(stream))).expect("a request");
    let kept = Arc::new(Mutex::new(None));
    let method = Keep::<T>(kept.clone(), std::marker::PhantomData);
    let response = RUNTIME.with(|rt| rt.block_on(crate::otlp::grpc::server::<T>(limit).unary(method, request)));
    let code = response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok()?.parse::<i32>().ok())
        .map_or(tonic::Code::Ok, tonic::Code::from_i32);
    let delivered = kept.lock().unwrap().take();
    assert_eq!(delivered.is_some(), code == tonic::Code::Ok, "a message handed over and refused, or neither");
    (delivered, code)
}

/// What ingest does with a request's message: the token's services and the split, each
/// accepting exactly what prost accepts; every item out once per split, in a record that
/// fits and decodes, or rejected.
fn ingest_conserves<R: OtlpRequest>(message: &[u8], max_bytes: usize, items: impl Fn(&R) -> usize) {
    let decoded = R::decode(message);
    let services = item_services::<R>(message);
    let split = ingest_split::<R>(message, max_bytes);
    assert_eq!(services.is_ok(), decoded.is_ok(), "the service check and prost disagree");
    assert_eq!(split.is_ok(), decoded.is_ok(), "the split and prost disagree");
    let (Ok(request), Ok((signals, logs))) = (decoded, split) else { return };
    assert_eq!(logs.is_some(), R::INGEST_GROUPINGS.len() == 2, "a split for each grouping");
    let total = items(&request);
    for split in std::iter::once(&signals).chain(logs.as_ref()) {
        let mut seen = split.rejected.len();
        for record in &split.records {
            assert!(record.request.len() <= max_bytes, "a record over the limit");
            let decoded = R::decode(record.request.as_slice()).expect("a record decodes");
            assert_eq!(items(&decoded), record.items, "a record's item count is wrong");
            seen += record.items;
        }
        assert_eq!(seen, total, "items lost or doubled by the split");
    }
    if total > 0 {
        assert!(!services.unwrap().is_empty(), "items without a service to judge them by");
    }
}

/// The writer's rows straight from a record's protobuf bytes (`otlp::rowbinary`), on any
/// bytes as a trace or logs record (first byte: bit 0 the signal, the rest the ingest
/// time). The fast path gives exactly the rows prost and `flatten` give, byte for byte,
/// or defers (`NotCanonical`) leaving the rows before it untouched; it never makes rows
/// of bytes prost refuses; `record_rows`, which the writer calls, gives the decoded rows
/// whenever prost accepts the record and an error otherwise.
pub fn rowbinary_rows(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else { return };
    let ingest_ns = u64::from(selector >> 1) * 1_000_000_007;
    if selector & 1 == 0 {
        let slow = ExportTraceServiceRequest::decode(body)
            .ok()
            .map(|r| EncodedRows::from_rows(&flatten::span_rows(&r, ingest_ns)));
        fast_rows_agree(body, slow.as_ref(), |b, rows| span_rows_into(b, ingest_ns, rows).is_ok());
        let record = RawRecord { kind: SignalKind::Traces, value: body, ingest_ns };
        match (record_rows(&record), slow) {
            (Ok(TableRows::Spans(rows)), Some(slow)) => assert!(rows == slow, "the writer's span rows differ"),
            (Err(_), None) => {}
            (got, slow) => {
                panic!("record_rows {} where prost {}", ok(&got), if slow.is_some() { "accepts" } else { "refuses" })
            }
        }
    } else {
        let slow = ExportLogsServiceRequest::decode(body)
            .ok()
            .map(|r| EncodedRows::from_rows(&flatten::log_rows(&r, ingest_ns)));
        fast_rows_agree(body, slow.as_ref(), |b, rows| log_rows_into(b, ingest_ns, rows).is_ok());
        let record = RawRecord { kind: SignalKind::Logs, value: body, ingest_ns };
        match (record_rows(&record), slow) {
            (Ok(TableRows::Logs(rows)), Some(slow)) => assert!(rows == slow, "the writer's log rows differ"),
            (Err(_), None) => {}
            (got, slow) => {
                panic!("record_rows {} where prost {}", ok(&got), if slow.is_some() { "accepts" } else { "refuses" })
            }
        }
    }
}

fn ok<T, E>(result: &Result<T, E>) -> &'static str {
    if result.is_ok() {
        "gives rows"
    } else {
        "refuses"
    }
}

/// The fast path after a row already written (a record before this one in the same
/// block): its rows follow that row unchanged and equal `slow`, or it defers and leaves
/// the row alone.
fn fast_rows_agree<T: TableRow>(
    body: &[u8],
    slow: Option<&EncodedRows<T>>,
    fast: impl Fn(&[u8], &mut EncodedRows<T>) -> bool,
) {
    let mut rows = EncodedRows::<T>::default();
    rows.buffer().extend_from_slice(b"an earlier row");
    rows.end_row(42);
    let before = (rows.bytes().to_vec(), rows.partition_ns().to_vec());
    if !fast(body, &mut rows) {
        assert_eq!((rows.bytes(), rows.partition_ns()), (&before.0[..], &before.1[..]), "a deferred record left rows");
        return;
    }
    let slow = slow.expect("rows from bytes prost refuses");
    assert_eq!(rows.len(), 1 + slow.len(), "another row count than the decoded request's");
    assert_eq!(rows.row(0), &before.0[..], "the earlier row changed");
    for i in 0..slow.len() {
        assert_eq!(rows.row(1 + i), slow.row(i), "row {i} differs from the decoded request's");
    }
    assert_eq!(&rows.partition_ns()[1..], slow.partition_ns(), "partitions differ");
}

/// The OTLP schema check (`otlp::protobuf::check`) on any bytes as any of its messages
/// (the first byte picks which): it accepts exactly the bytes prost's decode of that
/// message accepts.
pub fn otlp_schema(data: &[u8]) {
    use opentelemetry_proto::tonic::common::v1 as common;
    use opentelemetry_proto::tonic::logs::v1 as logs;
    use opentelemetry_proto::tonic::resource::v1 as resource;
    use opentelemetry_proto::tonic::trace::v1 as trace;
    fn prost_accepts<M: Message + Default>(bytes: &[u8]) -> bool {
        M::decode(bytes).is_ok()
    }
    type Accepts = fn(&[u8]) -> bool;
    const MESSAGES: [(Msg, Accepts); 18] = [
        (Msg::TraceRequest, prost_accepts::<ExportTraceServiceRequest>),
        (Msg::ResourceSpans, prost_accepts::<trace::ResourceSpans>),
        (Msg::ScopeSpans, prost_accepts::<trace::ScopeSpans>),
        (Msg::Span, prost_accepts::<trace::Span>),
        (Msg::Event, prost_accepts::<trace::span::Event>),
        (Msg::Link, prost_accepts::<trace::span::Link>),
        (Msg::Status, prost_accepts::<trace::Status>),
        (Msg::LogsRequest, prost_accepts::<ExportLogsServiceRequest>),
        (Msg::ResourceLogs, prost_accepts::<logs::ResourceLogs>),
        (Msg::ScopeLogs, prost_accepts::<logs::ScopeLogs>),
        (Msg::LogRecord, prost_accepts::<logs::LogRecord>),
        (Msg::Resource, prost_accepts::<resource::Resource>),
        (Msg::EntityRef, prost_accepts::<common::EntityRef>),
        (Msg::Scope, prost_accepts::<common::InstrumentationScope>),
        (Msg::KeyValue, prost_accepts::<common::KeyValue>),
        (Msg::AnyValue, prost_accepts::<common::AnyValue>),
        (Msg::ArrayValue, prost_accepts::<common::ArrayValue>),
        (Msg::KeyValueList, prost_accepts::<common::KeyValueList>),
    ];
    let Some((&selector, body)) = data.split_first() else { return };
    // Most inputs as the two requests, which hold every other message.
    let picked = match selector % 4 {
        0 => 0,
        1 => 7,
        _ => selector as usize / 4 % MESSAGES.len(),
    };
    let (msg, prost) = MESSAGES[picked];
    let ours = check(body, msg);
    assert_eq!(ours.is_ok(), prost(body), "{msg:?}: the check says {ours:?}, prost disagrees");
}

/// What the packed producer reads from a broker (`bus::packed::plan`): any bytes as the
/// answer to any request it sends, at any version it may agree on (first byte: which
/// answer, second: which version), read as the connection reads it (header, correlation
/// id 7, every byte used). A readable produce answer gives every partition it names a
/// defined outcome (written, retried, a new session, refused with its error) and one it
/// leaves out a retry after new metadata; a readable metadata answer gives every topic
/// leaders within its partition count, or a reason it has none.
pub fn broker_answers(data: &[u8]) {
    let [which, version, body @ ..] = data else { return };
    let body = Bytes::copy_from_slice(body);
    let pick = |(min, max): (i16, i16)| min + (*version as i16) % (max - min + 1);
    fn read<R: Decodable + HeaderVersion>(body: Bytes, api: ApiKey, version: i16) -> Option<R> {
        match plan::read_answer::<R>(body, api, version, 7) {
            Ok(answer) => Some(answer),
            Err(reason) => {
                assert!(!reason.is_empty(), "a refusal without a reason");
                None
            }
        }
    }
    match which % 6 {
        0 => {
            let Some(answer) = read::<ProduceResponse>(body, ApiKey::Produce, pick((3, 12))) else { return };
            let codes = ProduceAnswer::of(&answer);
            for t in &answer.responses {
                for p in &t.partition_responses {
                    let (code, outcome) = codes.outcome(t.name.0.as_str(), p.index);
                    let code = code.expect("a partition the answer names has its code");
                    match outcome {
                        Outcome::Written => assert!(
                            code == 0 || code == ResponseError::DuplicateSequenceNumber.code(),
                            "written on error code {code}"
                        ),
                        Outcome::Retry { .. } | Outcome::NewSession(_) => assert_ne!(code, 0),
                        Outcome::Refused(error) => assert_eq!(error.code(), code, "refused with another error"),
                    }
                }
            }
            let (code, outcome) = codes.outcome("a topic the answer does not name", -1);
            if code.is_none() {
                assert_eq!(outcome, Outcome::Retry { refresh: true }, "a partition left out is not retried");
            }
        }
        1 => {
            let Some(answer) = read::<MetadataResponse>(body, ApiKey::Metadata, pick((4, 12))) else { return };
            let layout = plan::layout(&answer);
            let named = answer.topics.iter().filter(|t| t.name.is_some()).count();
            assert_eq!(layout.topics.len() + layout.missing.len(), named, "a topic neither laid out nor missing");
            assert_eq!(layout.brokers.len(), answer.brokers.len());
            for topic in &layout.topics {
                assert!(!topic.leaders.is_empty(), "{}: laid out without partitions", topic.name);
                assert!(topic.leaders.len() <= plan::MAX_PARTITIONS, "{}: too many partitions", topic.name);
            }
        }
        2 => drop(read::<ApiVersionsResponse>(body, ApiKey::ApiVersions, 0)),
        3 => drop(read::<InitProducerIdResponse>(body, ApiKey::InitProducerId, pick((0, 4)))),
        4 => drop(read::<SaslHandshakeResponse>(body, ApiKey::SaslHandshake, 1)),
        _ => drop(read::<SaslAuthenticateResponse>(body, ApiKey::SaslAuthenticate, pick((0, 2)))),
    }
}
