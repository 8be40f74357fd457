//! What a client may cost ingest: gRPC status codes clients read right, proto3 JSON doubles,
//! slow and idle connections, and load that fills the producer's queue without ever marking
//! the broker down, under a bound on memory (read from /proc).

use crate::common;
use crate::ingest::{post, span, span_ids_on_signals, start_ingest, traces, wait_until_using};

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{free_addr, metric, scrape, wait_for, ChildGuard, TestEnv};
use opentelemetry_proto::tonic::common::v1::any_value;
use prost::Message as _;
use rdkafka::message::Message;
use tayga::otlp::{hex_id, ExportTraceServiceRequest};

fn grpc_raw(endpoint: &str, payload: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/grpc_raw.py");
    let out = std::process::Command::new("python3").args([script, endpoint, payload]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_answers_malformed_and_oversized_input_with_invalid_argument() {
    let mut env = TestEnv::new("ingest_grpc_codes");
    env.config.ingest.max_body_bytes = 64 * 1024;
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;
    let endpoint = running.grpc_addr.to_string();
    let good = traces("web", vec![span([7; 16], 1)]).encode_to_vec();
    let hex: String = good.iter().map(|b| format!("{b:02x}")).collect();
    let (ok, malformed, oversized) = tokio::task::spawn_blocking(move || {
        (
            grpc_raw(&endpoint, &hex),
            grpc_raw(&endpoint, "zeros:16"),
            grpc_raw(&endpoint, &format!("zeros:{}", 65 * 1024)),
        )
    })
    .await
    .unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(malformed, "INVALID_ARGUMENT", "not INTERNAL");
    assert_eq!(oversized, "INVALID_ARGUMENT", "not OUT_OF_RANGE, which exporters retry forever");
    shutdown.trigger();
    running.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_json_takes_nan_and_infinities_for_doubles() {
    let mut env = TestEnv::new("ingest_json_nan");
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;
    let json = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"web"}}]},
        "scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"x",
        "startTimeUnixNano":"1764460800000000000","endTimeUnixNano":"1764460800000001000",
        "attributes":[{"key":"ratio","value":{"doubleValue":"NaN"}},{"key":"hi","value":{"doubleValue":"Infinity"}},
        {"key":"lo","value":{"doubleValue":"-Infinity"}}]}]}]}]}"#;
    let response = post(&running, "/v1/traces", "application/json", json.as_bytes().to_vec()).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let config = env.config.clone();
    let topic = env.config.names().signals;
    let records = tokio::task::spawn_blocking(move || common::read_topic(&config, &topic, 12, 1)).await.unwrap();
    assert_eq!(records.len(), 1);
    let request = ExportTraceServiceRequest::decode(records[0].payload().unwrap()).unwrap();
    let doubles: Vec<f64> = request.resource_spans[0].scope_spans[0].spans[0]
        .attributes
        .iter()
        .map(|kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::DoubleValue(d)) => *d,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(doubles[0].is_nan());
    assert_eq!(&doubles[1..], &[f64::INFINITY, f64::NEG_INFINITY]);
    shutdown.trigger();
    running.wait().await.unwrap();
}

/// Whether the server closed `stream` (EOF or reset), reading whatever it answered first.
fn closed_by_server(stream: &mut TcpStream) -> Option<String> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&answer).into_owned()),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                return None
            }
            Err(_) => return Some(String::from_utf8_lossy(&answer).into_owned()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_connections_are_closed_and_bounded() {
    let mut env = TestEnv::new("ingest_slow");
    env.config.ingest.header_timeout_secs = 1;
    env.config.ingest.body_timeout_secs = 2;
    env.config.ingest.max_connections = 40;
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;
    let addr = running.http_addr;
    let slow = tokio::task::spawn_blocking(move || {
        let mut conns = Vec::new();
        for i in 0..120 {
            let mut s = TcpStream::connect(addr).unwrap();
            match i % 3 {
                0 => {} // idle: never sends a byte
                1 => s.write_all(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Ty").unwrap(),
                _ => s
                    .write_all(
                        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 10000000\r\n\r\n\x0a",
                    )
                    .unwrap(),
            }
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            conns.push((i % 3, s));
        }
        conns
    })
    .await
    .unwrap();
    // Past the bound the rest wait in the kernel's queue; every one is closed in time,
    // the half-sent bodies with a 408.
    let started = Instant::now();
    let mut conns = slow;
    let mut answers = Vec::new();
    while !conns.is_empty() {
        let kinds: Vec<u32> = conns.iter().map(|(k, _)| *k).collect();
        assert!(started.elapsed() < Duration::from_secs(60), "slow connections still open, by kind: {kinds:?}");
        let mut open = Vec::new();
        for (kind, mut s) in conns {
            match closed_by_server(&mut s) {
                Some(answer) => answers.push((kind, answer)),
                None => open.push((kind, s)),
            }
        }
        conns = open;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let bodies: Vec<&String> = answers.iter().filter(|(k, _)| *k == 2).map(|(_, a)| a).collect();
    // A half-sent body is cut off (408), or, past the in-flight bytes its Content-Length
    // claims, refused before it is read (503).
    let status = |a: &str| a.split(' ').nth(1).unwrap_or("").to_string();
    assert!(bodies.iter().all(|a| ["408", "503"].contains(&status(a).as_str())), "{bodies:?}");
    assert!(bodies.iter().any(|a| status(a) == "408"), "a half-sent body is answered 408");
    // And a well-behaved client is served.
    let response =
        post(&running, "/v1/traces", "application/x-protobuf", traces("web", vec![span([8; 16], 1)]).encode_to_vec())
            .await;
    assert_eq!(response.status(), 200);
    shutdown.trigger();
    running.wait().await.unwrap();
}

/// A `kB` field of `/proc/<pid>/status` (`VmHWM`: peak resident memory, `VmRSS`: now), in bytes.
pub(crate) fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kb * 1024
}

/// A request of `traces` one-span traces (the shape that costs ingest most per byte: a
/// record, a resource and a delivery per span).
pub(crate) fn many_traces(first: u32, traces_n: u32) -> (Vec<u8>, Vec<String>) {
    let spans: Vec<_> = (first..first + traces_n)
        .map(|n| {
            let mut id = [0x5au8; 16];
            id[12..].copy_from_slice(&n.to_be_bytes());
            span(id, u64::from(n) + 1)
        })
        .collect();
    let ids = spans.iter().map(|s| hex_id(&s.span_id)).collect();
    (traces("load", spans).encode_to_vec(), ids)
}

/// The bounds the memory tests run ingest under: 8 MiB bodies, 12 MiB in flight.
pub(crate) const BOUNDED_BODY_BYTES: u64 = 8 << 20;
pub(crate) const BOUNDED_INFLIGHT_BYTES: u64 = 12 << 20;

/// `tayga serve ingest` on `http` with these memory bounds, once it uses the broker.
pub(crate) async fn spawn_bounded_ingest(env: &TestEnv, http: &str, max_body: u64, max_inflight: u64) -> ChildGuard {
    let mut cmd = env.tayga();
    cmd.args(["serve", "ingest"])
        .env("TAYGA_INGEST_HTTP_ADDR", http)
        .env("TAYGA_INGEST_GRPC_ADDR", free_addr())
        .env("TAYGA_INGEST_MAX_BODY_BYTES", max_body.to_string())
        .env("TAYGA_INGEST_MAX_INFLIGHT_BYTES", max_inflight.to_string())
        // The body timeout has its own test; on a starved machine six 40,000-span bodies
        // sent at once took over 30 s to arrive (408), which is not what these tests are about.
        .env("TAYGA_INGEST_BODY_TIMEOUT_SECS", "600")
        .stdout(std::process::Stdio::null());
    let child = ChildGuard::spawn(&mut cmd, "tayga serve ingest");
    wait_for("ingest to use the broker", Duration::from_secs(30), || async {
        let h: serde_json::Value = reqwest::get(format!("http://{http}/health")).await.ok()?.json().await.ok()?;
        (h["ingest"]["using"] == "broker").then_some(())
    })
    .await;
    child
}

/// Concurrent large requests that fill librdkafka's local queue: the broker is never marked
/// down, every accepted span is on the topic, the excess is refused with 503 and
/// Retry-After, and the peak RSS of the process stays under the bound docs/ingest.md gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_large_requests_are_backpressure_not_an_outage_under_a_memory_bound() {
    let env = TestEnv::new("ingest_load");
    let http = free_addr();
    let child = spawn_bounded_ingest(&env, &http, BOUNDED_BODY_BYTES, BOUNDED_INFLIGHT_BYTES).await;
    let pid = child.id();
    let idle_rss = proc_status_bytes(pid, "VmRSS");

    let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (http, watching) = (http.clone(), watching.clone());
        tokio::spawn(async move {
            let mut seen = BTreeSet::new();
            while watching.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(r) = reqwest::get(format!("http://{http}/health")).await {
                    if let Ok(h) = r.json::<serde_json::Value>().await {
                        seen.insert(h["ingest"]["broker"].as_str().unwrap_or("?").to_string());
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            seen
        })
    };
    let client = reqwest::Client::new();
    let (per_request, rounds, concurrent) = (40_000u32, 2u32, 6u32);
    let mut accepted = BTreeSet::new();
    let mut refused = 0;
    for round in 0..rounds {
        // Every body is built first, so the requests arrive together.
        let bodies: Vec<_> =
            (0..concurrent).map(|c| many_traces((round * concurrent + c) * per_request, per_request)).collect();
        let mut sends = Vec::new();
        for (body, ids) in bodies {
            let client = client.clone();
            let url = format!("http://{http}/v1/traces");
            sends.push(tokio::spawn(async move {
                let r =
                    client.post(url).header("content-type", "application/x-protobuf").body(body).send().await.unwrap();
                (r.status().as_u16(), r.headers().get("retry-after").is_some(), ids)
            }));
        }
        for send in sends {
            let (status, retry_after, ids) = send.await.unwrap();
            match status {
                200 => accepted.extend(ids),
                503 => {
                    assert!(retry_after, "a refusal says when to retry");
                    refused += 1;
                }
                other => panic!("status {other}"),
            }
        }
    }
    watching.store(false, std::sync::atomic::Ordering::Relaxed);
    let seen = watcher.await.unwrap();
    let peak = proc_status_bytes(pid, "VmHWM");
    // The memory of the last requests is given back once they are answered (the trim runs
    // on a blocking thread after each large one): wait for it, within a deadline.
    let after = wait_for("memory to be given back after the load", Duration::from_secs(30), || async {
        let now = proc_status_bytes(pid, "VmRSS");
        (now < peak).then_some(now)
    })
    .await;
    let text = scrape(&http).await.unwrap();
    eprintln!(
        "load: {} spans accepted, {refused} requests refused; RSS idle {} MiB, peak {} MiB, after {} MiB; busy {}",
        accepted.len(),
        idle_rss >> 20,
        peak >> 20,
        after >> 20,
        metric(&text, "tayga_ingest_busy_requests_total")
    );
    assert_eq!(seen, BTreeSet::from(["up".to_string()]), "/health never showed the broker down");
    assert_eq!(metric(&text, "tayga_ingest_path_errors_total"), 0.0, "{text}");
    assert!(refused > 0, "some requests were over the in-flight bound");
    assert!(!accepted.is_empty());
    // docs/ingest.md: peak RSS stays under 64 MiB + 48 × ingest.max_inflight_bytes (one-span
    // traces, the costliest shape per byte, measured about 37 ×).
    let bound = (64u64 << 20) + 48 * BOUNDED_INFLIGHT_BYTES;
    assert!(peak < bound, "peak RSS {} MiB is over the bound of {} MiB", peak >> 20, bound >> 20);

    let on_topic = span_ids_on_signals(&env.config, accepted.len()).await;
    assert_eq!(accepted.difference(&on_topic).count(), 0, "every accepted span is on the topic");
    drop(child);
}
