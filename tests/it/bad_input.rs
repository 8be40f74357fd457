//! Bad input end to end, against `tayga serve all` on the shared broker and ClickHouse: each
//! kind of input docs/ingest.md's "Bad input" table names gets its answer there, on OTLP/HTTP
//! and OTLP/gRPC, and what is refused leaves nothing behind while what is odd but valid
//! (trace ids of the wrong length, timestamps far in the future or past) is stored exactly
//! once, as sent.

use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue, KeyValueList};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use tayga::otlp::{hex_id, string_attr, ExportLogsServiceRequest};
use tayga::store::{read, LogRow, SpanRow};

use crate::common::{metric, resource, scrape, wait_for, ServeAll, TestEnv};
use crate::ingest::traces;

const LIMIT: usize = 256 * 1024;

fn span(trace_id: Vec<u8>, id: u64, name: &str, start_ns: u64) -> Span {
    Span {
        trace_id,
        span_id: id.to_be_bytes().to_vec(),
        name: name.to_string(),
        start_time_unix_nano: start_ns,
        end_time_unix_nano: start_ns.saturating_add(1_000),
        ..Default::default()
    }
}

/// `value` wrapped in `depth` levels of key-value lists.
fn nested(depth: usize) -> AnyValue {
    let mut value = AnyValue { value: Some(any_value::Value::StringValue("deep".into())) };
    for _ in 0..depth {
        let kv = KeyValue { key: "k".into(), value: Some(value), ..Default::default() };
        value = AnyValue { value: Some(any_value::Value::KvlistValue(KeyValueList { values: vec![kv] })) };
    }
    value
}

/// A valid request of service `refused` whose attribute value `MARKER` is replaced by bytes
/// that are not UTF-8 (protobuf strings must be).
fn invalid_utf8_protobuf() -> Vec<u8> {
    let mut s = span(vec![7; 16], 1, "refused", 1_764_460_800_000_000_000);
    s.attributes.push(string_attr("user", "MARKER"));
    let mut body = traces("refused", vec![s]).encode_to_vec();
    let at = body.windows(6).position(|w| w == b"MARKER").unwrap();
    body[at..at + 6].copy_from_slice(&[0xff, 0xfe, 0xc3, 0x28, 0xa0, 0xa1]);
    body
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// A JSON trace export whose only attribute is nested `depth` levels deep.
fn nested_json(depth: usize) -> Vec<u8> {
    let open = r#"{"kvlistValue":{"values":[{"key":"k","value":"#.repeat(depth);
    let close = "}]}}".repeat(depth);
    format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"07070707070707070707070707070707","spanId":"0101010101010101","name":"refused","attributes":[{{"key":"a","value":{open}{{"stringValue":"x"}}{close}}}]}}]}}]}}]}}"#
    )
    .into_bytes()
}

/// Sends `body` as a raw OTLP/gRPC trace export (tests/sdk/grpc_raw.py, grpcio) and returns
/// the status name it was answered with (`OK` or a gRPC code).
async fn grpc_raw(addr: &str, body: &[u8]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/grpc_raw.py");
    // A large body of zeros goes as its length: an argument list has a limit.
    let payload = if body.len() > 4096 && body.iter().all(|b| *b == 0) {
        format!("zeros:{}", body.len())
    } else {
        body.iter().map(|b| format!("{b:02x}")).collect()
    };
    let (addr, hex) = (addr.to_string(), payload);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3").arg(script).arg(addr).arg(hex).output().expect("python3 runs")
    })
    .await
    .unwrap();
    assert!(out.status.success(), "grpc_raw.py failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_documented_answer_and_odd_input_is_stored_once() {
    let env = TestEnv::new("bad_input");
    let limit = LIMIT.to_string();
    let serve = ServeAll::start(&env, &[("TAYGA_INGEST_MAX_BODY_BYTES", &limit)]).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();

    let good = traces("refused", vec![span(vec![7; 16], 1, "refused", 1_764_460_800_000_000_000)]).encode_to_vec();
    let deep = {
        let mut s = span(vec![7; 16], 2, "refused", 1_764_460_800_000_000_000);
        s.attributes.push(KeyValue { key: "deep".into(), value: Some(nested(200)), ..Default::default() });
        traces("refused", vec![s]).encode_to_vec()
    };
    let mut bad_json_utf8 = nested_json(1);
    let at = bad_json_utf8.windows(3).position(|w| w == b"\"x\"").unwrap();
    bad_json_utf8[at + 1] = 0xff;

    // (what, content type, content encoding, body, HTTP status, gRPC status or None)
    type Case = (&'static str, Option<&'static str>, Option<&'static str>, Vec<u8>, u16, Option<&'static str>);
    let pb = Some("application/x-protobuf");
    let json = Some("application/json");
    let cases: Vec<Case> = vec![
        ("truncated protobuf", pb, None, good[..good.len() - 3].to_vec(), 400, Some("INVALID_ARGUMENT")),
        ("protobuf garbage", pb, None, vec![0xff; 64], 400, Some("INVALID_ARGUMENT")),
        ("deeply nested protobuf (200 levels)", pb, None, deep.clone(), 400, Some("INVALID_ARGUMENT")),
        ("invalid UTF-8 in a protobuf attribute", pb, None, invalid_utf8_protobuf(), 400, Some("INVALID_ARGUMENT")),
        ("deeply nested JSON (5,000 levels)", json, None, nested_json(5_000), 400, None),
        ("invalid UTF-8 in a JSON attribute", json, None, bad_json_utf8, 400, None),
        ("JSON of the wrong shape", json, None, br#"{"resourceSpans": "no"}"#.to_vec(), 400, None),
        (
            "trace id of odd hex length in JSON",
            json,
            None,
            nested_json(0).replace_first(b"07070707", b"0707070"),
            400,
            None,
        ),
        ("wrong content type", Some("text/plain"), None, good.clone(), 415, None),
        ("no content type", None, None, good.clone(), 415, None),
        ("unsupported content encoding", pb, Some("br"), good.clone(), 415, None),
        ("invalid gzip", pb, Some("gzip"), b"\x1f\x8b\x08\x00garbage".to_vec(), 400, None),
        ("oversized body", pb, None, vec![0u8; LIMIT + 1], 413, Some("INVALID_ARGUMENT")),
        ("gzip bomb (16 MiB of zeros)", pb, Some("gzip"), gzip(&vec![0u8; 16 << 20]), 413, None),
    ];
    let mut http_refused = 0;
    for (what, content_type, encoding, body, status, grpc) in &cases {
        let mut request = http.post(format!("http://{}/v1/traces", serve.http_addr)).body(body.clone());
        if let Some(content_type) = content_type {
            request = request.header("content-type", *content_type);
        }
        if let Some(encoding) = encoding {
            request = request.header("content-encoding", *encoding);
        }
        let response = request.send().await.unwrap_or_else(|e| panic!("{what}: no answer: {e}"));
        assert_eq!(response.status().as_u16(), *status, "{what}");
        let answer = response.bytes().await.unwrap();
        // The error is a google.rpc.Status in the request's encoding (JSON when that is unknown).
        let text = if *content_type == pb {
            let status = tayga_rpc_status(&answer);
            assert_eq!(status.0, 3, "{what}: INVALID_ARGUMENT");
            status.1
        } else {
            let value: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(value["code"], 3, "{what}: {value}");
            value["message"].as_str().unwrap().to_string()
        };
        assert!(!text.is_empty(), "{what}: the error names the problem");
        http_refused += 1;
        if let Some(want) = grpc {
            assert_eq!(grpc_raw(&serve.grpc_addr, body).await, *want, "{what} over gRPC");
        }
    }

    // Odd but valid: accepted, stored as sent, exactly once. Spans without a valid trace id
    // are keyed by service (docs/ingest.md); timestamps are kept as the client sent them.
    let now = tayga::store::now_ns();
    let odd_spans = vec![
        span(vec![1, 2, 3], 101, "trace id of 3 bytes", now),
        span(vec![9; 17], 102, "trace id of 17 bytes", now),
        span(vec![], 103, "no trace id", now),
        span(vec![0; 16], 104, "all-zero trace id", now),
        span(vec![5; 16], 105, "far future", u64::MAX - 1_000),
        span(vec![5; 16], 106, "far past", 1),
        span(vec![5; 16], 107, "zero time", 0),
    ];
    let body = traces("odd", odd_spans.clone()).encode_to_vec();
    let response = http
        .post(format!("http://{}/v1/traces", serve.http_addr))
        .header("content-type", "application/x-protobuf")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "odd spans over HTTP");
    // The same kinds over gRPC, as other spans.
    let grpc_spans: Vec<Span> = odd_spans
        .iter()
        .map(|s| Span {
            span_id: (u64::from_be_bytes(s.span_id[..].try_into().unwrap()) + 100).to_be_bytes().to_vec(),
            ..s.clone()
        })
        .collect();
    assert_eq!(
        grpc_raw(&serve.grpc_addr, &traces("odd", grpc_spans.clone()).encode_to_vec()).await,
        "OK",
        "odd spans over gRPC"
    );
    let odd_spans: Vec<Span> = odd_spans.into_iter().chain(grpc_spans).collect();
    let odd_logs = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource("odd"),
            scope_logs: vec![ScopeLogs {
                log_records: vec![
                    log("far future log line", u64::MAX - 1, vec![1, 2, 3]),
                    log("far past log line", 1, vec![0; 16]),
                    log("log line with no time at all", 0, vec![9; 17]),
                ],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let response = http
        .post(format!("http://{}/v1/logs", serve.http_addr))
        .header("content-type", "application/x-protobuf")
        .body(odd_logs.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "odd logs over HTTP");

    let store = env.store();
    wait_for("the odd spans and logs to be stored", Duration::from_secs(60), || async {
        let spans = read::count_spans_dedup(&store).await.ok()?;
        let logs = read::count_logs_dedup(&store).await.ok()?;
        (spans >= odd_spans.len() as u64 && logs >= 3).then_some(())
    })
    .await;
    let spans: Vec<SpanRow> = store.select_for_tests::<SpanRow>("FINAL ORDER BY span_id").fetch_all().await.unwrap();
    assert!(spans.iter().all(|s| s.service == "odd"), "nothing of a refused request is stored");
    let stored: Vec<(String, String, u64)> =
        spans.iter().map(|s| (s.name.clone(), s.trace_id.clone(), s.start_ns)).collect();
    let want: Vec<(String, String, u64)> =
        odd_spans.iter().map(|s| (s.name.clone(), hex_id(&s.trace_id), s.start_time_unix_nano)).collect();
    assert_eq!(stored, want, "each odd span stored as sent");
    let logs: Vec<LogRow> = store.select_for_tests::<LogRow>("FINAL ORDER BY body").fetch_all().await.unwrap();
    let bodies: Vec<(&str, u64)> = logs.iter().map(|l| (l.body.as_str(), l.time_ns)).collect();
    assert_eq!(
        bodies,
        vec![("far future log line", u64::MAX - 1), ("far past log line", 1), ("log line with no time at all", 0)]
    );
    // Exactly once: no second row for any of them.
    assert_eq!(read::count_spans_raw(&store).await.unwrap(), odd_spans.len() as u64, "each span stored once");
    assert_eq!(read::count_logs_raw(&store).await.unwrap(), 3, "each log stored once");

    let metrics = scrape(&serve.http_addr).await.expect("ingest's /metrics");
    let bad =
        metric(&metrics, r#"tayga_ingest_requests_total{signal="traces",transport="http",outcome="bad_request"}"#);
    assert_eq!(bad, http_refused as f64, "every refusal counted once");
}

fn log(body: &str, time_ns: u64, trace_id: Vec<u8>) -> LogRecord {
    LogRecord {
        time_unix_nano: time_ns,
        body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.into())) }),
        trace_id,
        ..Default::default()
    }
}

/// (code, message) of a protobuf google.rpc.Status.
fn tayga_rpc_status(bytes: &[u8]) -> (i32, String) {
    #[derive(Clone, PartialEq, prost::Message)]
    struct RpcStatus {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }
    let status = RpcStatus::decode(bytes).expect("a google.rpc.Status");
    (status.code, status.message)
}

trait ReplaceFirst {
    fn replace_first(self, from: &[u8], to: &[u8]) -> Vec<u8>;
}

impl ReplaceFirst for Vec<u8> {
    fn replace_first(self, from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = self.windows(from.len()).position(|w| w == from).expect("the pattern is there");
        [&self[..at], to, &self[at + from.len()..]].concat()
    }
}
