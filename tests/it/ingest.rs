//! Ingest against the real broker and ClickHouse: routing by trace id and by service, bad
//! input, and failover between the broker and the direct path (docs/ingest.md).

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{free_port, resource, wait_for, OwnBroker, TestEnv};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use rdkafka::message::{Headers, Message};
use tayga::config::Config;
use tayga::daemon::ingest::{start, Running};
use tayga::daemon::Shutdown;
use tayga::otlp::{hex_id, ExportLogsServiceRequest, ExportTraceServiceRequest};
use tayga::store::SpanRow;

pub(crate) fn span(trace: [u8; 16], id: u64) -> Span {
    Span {
        trace_id: trace.to_vec(),
        span_id: id.to_be_bytes().to_vec(),
        name: format!("op-{id}"),
        start_time_unix_nano: 1_764_460_800_000_000_000 + id,
        end_time_unix_nano: 1_764_460_800_000_000_000 + id + 1000,
        ..Default::default()
    }
}

pub(crate) fn traces(service: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: resource(service),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

fn trace_id(n: u8) -> [u8; 16] {
    [n; 16]
}

pub(crate) async fn start_ingest(config: &mut Config) -> (Running, Shutdown) {
    config.ingest.http_addr = "127.0.0.1:0".into();
    config.ingest.grpc_addr = "127.0.0.1:0".into();
    config.ingest.probe_interval_secs = 1;
    config.ingest.breaker_cooldown_secs = 1;
    let shutdown = Shutdown::new();
    let running = start(config, shutdown.clone()).await.expect("ingest starts");
    (running, shutdown)
}

pub(crate) async fn wait_until_using(running: &Running, path: &str) {
    let url = format!("http://{}/health", running.http_addr);
    wait_for(&format!("/health to say using {path}"), Duration::from_secs(20), || {
        let url = url.clone();
        async move {
            let health: serde_json::Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
            (health["ingest"]["using"] == path).then_some(())
        }
    })
    .await
}

pub(crate) async fn post(running: &Running, path: &str, content_type: &str, body: Vec<u8>) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{}{path}", running.http_addr))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("ingest answers")
}

/// Every record of `topic` as (key, kind header, value), read from the beginning (see
/// `common::read_topic`).
fn read_topic(config: &Config, topic: &str, partitions: i32, expected: usize) -> Vec<(String, String, Vec<u8>)> {
    common::read_topic(config, topic, partitions, expected)
        .iter()
        .map(|m| {
            let kind = m
                .headers()
                .and_then(|h| h.iter().find(|h| h.key == "tayga-kind").and_then(|h| h.value))
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            (common::key_of(m), kind, m.payload().unwrap_or_default().to_vec())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_traces_make_three_records_keyed_by_trace_id() {
    let mut env = TestEnv::new("ingest_traces");
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;

    let request =
        traces("web", vec![span(trace_id(1), 1), span(trace_id(2), 2), span(trace_id(1), 3), span(trace_id(3), 4)]);
    let response = post(&running, "/v1/traces", "application/x-protobuf", request.encode_to_vec()).await;
    assert_eq!(response.status(), 200);

    let names = env.config.names();
    let records = read_topic(&env.config, &names.signals, 12, 3);
    let mut keys: Vec<&str> = records.iter().map(|(k, _, _)| k.as_str()).collect();
    keys.sort();
    assert_eq!(keys, vec![hex_id(&trace_id(1)), hex_id(&trace_id(2)), hex_id(&trace_id(3))]);
    assert!(records.iter().all(|(_, kind, _)| kind == "traces"));
    // Each record holds only its trace's spans.
    for (key, _, value) in &records {
        let request = ExportTraceServiceRequest::decode(value.as_slice()).unwrap();
        let spans: Vec<&Span> =
            request.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).collect();
        assert!(spans.iter().all(|s| &hex_id(&s.trace_id) == key));
        assert_eq!(spans.len(), if key == &hex_id(&trace_id(1)) { 2 } else { 1 });
    }
    assert_eq!(records.len(), 3, "exactly 3 records");
    shutdown.trigger();
    running.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_published_by_service_and_by_trace_and_spans_without_trace_by_service() {
    let mut env = TestEnv::new("ingest_logs");
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;

    let log = |trace: Option<u8>, body: &str| LogRecord {
        trace_id: trace.map(|t| trace_id(t).to_vec()).unwrap_or_default(),
        time_unix_nano: 1_764_460_800_000_000_000,
        body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.into())) }),
        ..Default::default()
    };
    let request = ExportLogsServiceRequest {
        resource_logs: ["api", "db"]
            .into_iter()
            .enumerate()
            .map(|(i, service)| ResourceLogs {
                resource: resource(service),
                scope_logs: vec![ScopeLogs {
                    log_records: vec![
                        log(Some(7), &format!("{service} one")),
                        log(None, &format!("{service} two")),
                        log(Some(8 + i as u8), "x"),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    };
    let response = post(&running, "/v1/logs", "application/x-protobuf", request.encode_to_vec()).await;
    assert_eq!(response.status(), 200);

    let names = env.config.names();
    let logs = read_topic(&env.config, &names.logs, 12, 2);
    let mut keys: Vec<&str> = logs.iter().map(|(k, _, _)| k.as_str()).collect();
    keys.sort();
    assert_eq!(keys, vec!["api", "db"], "one record per request and service");
    assert_eq!(logs.len(), 2);
    // On signals: trace 7 (both services), trace 8, trace 9, and one per service for the
    // logs without a trace id.
    let signals = read_topic(&env.config, &names.signals, 12, 5);
    let mut keys: Vec<String> = signals.iter().map(|(k, kind, _)| format!("{kind}:{k}")).collect();
    keys.sort();
    let mut want = vec![
        format!("logs:{}", hex_id(&trace_id(7))),
        format!("logs:{}", hex_id(&trace_id(8))),
        format!("logs:{}", hex_id(&trace_id(9))),
        "logs:api".to_string(),
        "logs:db".to_string(),
    ];
    want.sort();
    assert_eq!(keys, want);
    assert!(signals.iter().all(|(_, kind, _)| kind == "logs"));

    // Spans without a valid trace id are keyed by their service.
    let mut no_trace = span(trace_id(0), 1);
    no_trace.trace_id.clear();
    let response =
        post(&running, "/v1/traces", "application/x-protobuf", traces("billing", vec![no_trace]).encode_to_vec()).await;
    assert_eq!(response.status(), 200);
    let signals = read_topic(&env.config, &names.signals, 12, 6);
    assert!(
        signals.iter().any(|(k, kind, _)| k == "billing" && kind == "traces"),
        "{:?}",
        signals.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
    shutdown.trigger();
    running.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_4xx_and_publishes_nothing() {
    let mut env = TestEnv::new("ingest_bad");
    env.config.ingest.max_body_bytes = 64 * 1024;
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;

    let good = traces("web", vec![span(trace_id(1), 1)]).encode_to_vec();
    let truncated = good[..good.len() - 4].to_vec();
    // (what, content type, body, content encoding, expected status)
    type Case<'a> = (&'a str, &'a str, Vec<u8>, Option<&'a str>, u16);
    let cases: Vec<Case> = vec![
        ("truncated protobuf", "application/x-protobuf", truncated, None, 400),
        ("wrong JSON", "application/json", br#"{"resourceSpans": "no"}"#.to_vec(), None, 400),
        ("wrong content type", "text/plain", good.clone(), None, 415),
        ("oversized body", "application/x-protobuf", vec![0u8; 65 * 1024], None, 413),
        ("gzip bomb", "application/x-protobuf", gzip(&vec![0u8; 16 << 20]), Some("gzip"), 413),
    ];
    for (what, content_type, body, encoding, status) in cases {
        let mut request = reqwest::Client::new()
            .post(format!("http://{}/v1/traces", running.http_addr))
            .header("content-type", content_type)
            .body(body);
        if let Some(encoding) = encoding {
            request = request.header("content-encoding", encoding);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{what}");
        let text = response.text().await.unwrap();
        assert!(!text.is_empty(), "{what}: the error names the problem");
    }
    let names = env.config.names();
    assert!(read_topic(&env.config, &names.signals, 12, 0).is_empty(), "nothing of a rejected request is published");
    shutdown.trigger();
    running.wait().await.unwrap();
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// The span ids on the signals topic (at least `expected` records are read).
pub(crate) async fn span_ids_on_signals(config: &Config, expected: usize) -> std::collections::BTreeSet<String> {
    let (config, topic) = (config.clone(), config.names().signals);
    let records = tokio::task::spawn_blocking(move || common::read_topic(&config, &topic, 12, expected)).await.unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for m in &records {
        let request = ExportTraceServiceRequest::decode(m.payload().unwrap_or_default()).unwrap();
        for s in request.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
            ids.insert(hex_id(&s.span_id));
        }
    }
    ids
}

async fn stored_span_ids(env: &TestEnv) -> Vec<String> {
    let store = env.store();
    let rows: Vec<SpanRow> = store.select_for_tests::<SpanRow>("FINAL ORDER BY span_id").fetch_all().await.unwrap();
    rows.into_iter().map(|r| r.span_id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_broker_ingest_goes_direct_and_moves_to_a_broker_that_appears() {
    let mut env = TestEnv::new("ingest_failover");
    let port = free_port();
    env.config.kafka.brokers = format!("127.0.0.1:{port}");
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "direct").await;

    let response = post(
        &running,
        "/v1/traces",
        "application/x-protobuf",
        traces("web", vec![span(trace_id(1), 1)]).encode_to_vec(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(stored_span_ids(&env).await, vec![hex_id(&1u64.to_be_bytes())], "the direct path stored the span");

    // A broker appears: the probe finds it, creates the topics, and traffic moves, while
    // clients keep sending without a single error.
    let broker = OwnBroker::start(port);
    let mut sent = 1u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        sent += 1;
        let response = post(
            &running,
            "/v1/traces",
            "application/x-protobuf",
            traces("web", vec![span(trace_id(2), sent)]).encode_to_vec(),
        )
        .await;
        assert_eq!(response.status(), 200, "no client error during the move");
        let health: serde_json::Value =
            reqwest::get(format!("http://{}/health", running.http_addr)).await.unwrap().json().await.unwrap();
        if health["ingest"]["using"] == "broker" {
            assert_eq!(health["ingest"]["broker"], "up");
            break;
        }
        assert!(Instant::now() < deadline, "the broker was not picked up: {health}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let response = post(
        &running,
        "/v1/traces",
        "application/x-protobuf",
        traces("web", vec![span(trace_id(3), 1000)]).encode_to_vec(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let names = env.config.names();
    let records = read_topic(&env.config, &names.signals, 12, 1);
    assert!(records.iter().any(|(key, _, _)| key == &hex_id(&trace_id(3))), "published once the broker is up");
    drop(broker);
    shutdown.trigger();
    running.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_stops_under_load_loses_no_acknowledged_span() {
    let mut env = TestEnv::new("ingest_broker_dies");
    let broker = OwnBroker::start(free_port());
    env.config.kafka.brokers = broker.address();
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;

    // Freeze the broker (SIGSTOP) partway: it stops answering but keeps what it
    // acknowledged, so afterwards broker records + direct rows can be counted.
    let mut acknowledged = Vec::new();
    for i in 1..=60u64 {
        if i == 20 {
            broker.signal("STOP");
        }
        let response = post(
            &running,
            "/v1/traces",
            "application/x-protobuf",
            traces("web", vec![span(trace_id((i % 250) as u8 + 1), i)]).encode_to_vec(),
        )
        .await;
        if response.status() == 200 {
            acknowledged.push(hex_id(&i.to_be_bytes()));
        }
    }
    let health: serde_json::Value =
        reqwest::get(format!("http://{}/health", running.http_addr)).await.unwrap().json().await.unwrap();
    assert_eq!(health["ingest"]["using"], "direct", "{health}");
    assert!(acknowledged.len() >= 59, "at most the request in flight at the freeze may fail: {}", acknowledged.len());
    broker.signal("CONT");

    let names = env.config.names();
    let mut stored: std::collections::BTreeSet<String> = stored_span_ids(&env).await.into_iter().collect();
    let published = read_topic(&env.config, &names.signals, 12, 19);
    for (_, _, value) in &published {
        let request = ExportTraceServiceRequest::decode(value.as_slice()).unwrap();
        for s in request.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
            stored.insert(hex_id(&s.span_id));
        }
    }
    let lost: Vec<&String> = acknowledged.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(lost.is_empty(), "acknowledged but stored nowhere: {lost:?}");

    // Thawed, the broker carries traffic again. (Its idempotent producer was fenced by the
    // broker after the frozen sends timed out; the publisher replaces it.)
    let thawed = trace_id(251);
    wait_for("a request published to the thawed broker", Duration::from_secs(60), || {
        let (running, config, names) = (&running, &env.config, &names);
        async move {
            let body = traces("web", vec![span(thawed, 5000)]).encode_to_vec();
            if post(running, "/v1/traces", "application/x-protobuf", body).await.status() != 200 {
                return None;
            }
            let health: serde_json::Value =
                reqwest::get(format!("http://{}/health", running.http_addr)).await.ok()?.json().await.ok()?;
            if health["ingest"]["using"] != "broker" {
                return None;
            }
            let records = read_topic(config, &names.signals, 12, 1);
            records.iter().any(|(key, _, _)| key == &hex_id(&thawed)).then_some(())
        }
    })
    .await;
    shutdown.trigger();
    running.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_both_paths_down_a_request_is_refused_at_once() {
    let mut env = TestEnv::new("ingest_both_down");
    env.config.kafka.brokers = format!("127.0.0.1:{}", free_port());
    env.config.clickhouse.url = format!("http://127.0.0.1:{}", free_port());
    let (running, shutdown) = start_ingest(&mut env.config).await;
    let body = traces("web", vec![span(trace_id(1), 1)]).encode_to_vec();
    // The first request pays for the discovery.
    let first = post(&running, "/v1/traces", "application/x-protobuf", body.clone()).await;
    assert_eq!(first.status(), 503);
    let mut timings = BTreeMap::new();
    for i in 0..5 {
        let started = Instant::now();
        let response = post(&running, "/v1/traces", "application/x-protobuf", body.clone()).await;
        assert_eq!(response.status(), 503);
        assert!(response.headers().contains_key("retry-after"));
        timings.insert(i, started.elapsed());
    }
    let slowest = timings.values().max().unwrap();
    assert!(*slowest < Duration::from_millis(100), "refusals took up to {slowest:?}");
    shutdown.trigger();
    running.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_export_with_gzip_and_partial_success_for_an_oversized_span() {
    use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    use tonic::codec::CompressionEncoding;

    let mut env = TestEnv::new("ingest_grpc");
    env.config.ingest.max_record_bytes = 10_000;
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;

    let mut client = TraceServiceClient::connect(format!("http://{}", running.grpc_addr))
        .await
        .unwrap()
        .send_compressed(CompressionEncoding::Gzip);
    let mut big = span(trace_id(5), 2);
    big.name = "x".repeat(20_000);
    let response = client.export(traces("web", vec![span(trace_id(5), 1), big])).await.unwrap().into_inner();
    let partial = response.partial_success.expect("a partial success names the rejected span");
    assert_eq!(partial.rejected_spans, 1);
    assert!(partial.error_message.contains("exceeds the 10000-byte record limit"), "{}", partial.error_message);

    let mut logs = LogsServiceClient::connect(format!("http://{}", running.grpc_addr)).await.unwrap();
    let request = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource("api"),
            scope_logs: vec![ScopeLogs {
                log_records: vec![LogRecord { time_unix_nano: 1, ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let response = logs.export(request).await.unwrap().into_inner();
    assert!(response.partial_success.is_none());

    let names = env.config.names();
    let signals = read_topic(&env.config, &names.signals, 12, 2);
    let kinds: Vec<&str> = signals.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "traces").count(), 1, "the small span, alone");
    assert_eq!(kinds.iter().filter(|k| **k == "logs").count(), 1);

    // The same partial success over OTLP/HTTP JSON.
    let mut big = span(trace_id(6), 3);
    big.name = "y".repeat(20_000);
    let body = serde_json::to_vec(&traces("web", vec![big])).unwrap();
    let response = post(&running, "/v1/traces", "application/json", body).await;
    assert_eq!(response.status(), 200);
    let json: serde_json::Value = response.json().await.unwrap();
    assert_eq!(json["partialSuccess"]["rejectedSpans"], serde_json::json!(1), "{json}");
    shutdown.trigger();
    running.wait().await.unwrap();
}

/// Stock OpenTelemetry SDK exporters (Python), over OTLP/HTTP and OTLP/gRPC, unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_opentelemetry_sdk_exporters_work_unchanged() {
    let mut env = TestEnv::new("ingest_sdk");
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/otel_export.py");
    for (protocol, endpoint, service) in [
        ("http", format!("http://{}", running.http_addr), "sdk-http"),
        ("grpc", format!("http://{}", running.grpc_addr), "sdk-grpc"),
    ] {
        let output = tokio::process::Command::new("python3")
            .args([script, protocol, &endpoint, service])
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{protocol} exporter failed (scripts/test.sh installs the SDK):\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let names = env.config.names();
    let logs = read_topic(&env.config, &names.logs, 12, 2);
    let mut services: Vec<&str> = logs.iter().map(|(k, _, _)| k.as_str()).collect();
    services.sort();
    assert_eq!(services, vec!["sdk-grpc", "sdk-http"]);
    // 3 spans and 1 log per exporter, every one on signals under its trace id.
    let signals = read_topic(&env.config, &names.signals, 12, 8);
    let mut spans = 0;
    for (key, kind, value) in &signals {
        assert_eq!(key.len(), 32, "keyed by trace id");
        if kind == "traces" {
            spans += ExportTraceServiceRequest::decode(value.as_slice()).unwrap().resource_spans[0].scope_spans[0]
                .spans
                .len();
        }
    }
    assert_eq!(spans, 6);
    shutdown.trigger();
    running.wait().await.unwrap();
}

/// The real binary: serves /health, and stops on SIGTERM with exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingest_process_stops_cleanly_on_sigterm() {
    let env = TestEnv::new("ingest_process");
    let port = free_port();
    let mut child = tokio::process::Command::from(env.tayga())
        .env("TAYGA_INGEST_HTTP_ADDR", format!("127.0.0.1:{port}"))
        .env("TAYGA_INGEST_GRPC_ADDR", format!("127.0.0.1:{}", free_port()))
        .args(["serve", "ingest"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the ingest process to answer /health", Duration::from_secs(20), || async move {
        let health: serde_json::Value =
            reqwest::get(format!("http://127.0.0.1:{port}/health")).await.ok()?.json().await.ok()?;
        (health["ingest"]["using"] == "broker").then_some(())
    })
    .await;
    let status = std::process::Command::new("kill").args(["-TERM", &child.id().unwrap().to_string()]).status().unwrap();
    assert!(status.success());
    let exit =
        tokio::time::timeout(Duration::from_secs(30), child.wait()).await.expect("stopped within the bound").unwrap();
    assert!(exit.success(), "{exit:?}");
    let mut logs = String::new();
    tokio::io::AsyncReadExt::read_to_string(child.stdout.as_mut().unwrap(), &mut logs).await.unwrap();
    // Not a terminal: one JSON object per line.
    for line in logs.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
    assert!(logs.contains("stopped"), "{logs}");
}
