//! Every way a standard OTLP client sends gets in: the OpenTelemetry JavaScript SDK's
//! exporters (chunked bodies without Content-Length, several at once), raw chunked bodies
//! that share the in-flight bound and are refused only when it is really reached, HTTP/1.1
//! pipelining and `Expect: 100-continue`, HTTP/2 cleartext, deflate bodies, a chunked body
//! that stalls; and a metrics export gets a clear answer instead of a 404.

use crate::common;
use crate::ingest::{span_ids_on_signals, start_ingest, wait_until_using};
use crate::ingest_limits::{
    many_traces, proc_status_bytes, spawn_bounded_ingest, BOUNDED_BODY_BYTES, BOUNDED_INFLIGHT_BYTES,
};

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{free_addr, get_json, metric, scrape, wait_for, TestEnv};

const NODE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/node");

/// What one run of `tests/sdk/node/otel_send.mjs` sent.
#[derive(serde::Deserialize, Debug)]
struct NodeSent {
    traces: Vec<String>,
    spans: Vec<String>,
    logs: Vec<String>,
    exports: usize,
    failed: Vec<serde_json::Value>,
}

async fn node_send(encoding: &str, endpoint: &str, service: &str, compression: &str) -> NodeSent {
    assert!(
        std::path::Path::new(NODE_DIR).join("node_modules/@opentelemetry").is_dir(),
        "the OpenTelemetry JS SDK is not installed in {NODE_DIR} (scripts/test.sh runs `npm ci` there)"
    );
    let output = tokio::process::Command::new("node")
        .current_dir(NODE_DIR)
        .args(["otel_send.mjs", encoding, endpoint, service, "6", compression])
        .output()
        .await
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let sent: NodeSent = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("{encoding}/{compression}: no report ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr))
    });
    assert!(output.status.success() && sent.failed.is_empty(), "{encoding}/{compression}: exports failed: {sent:?}");
    // A simple processor exports each span and each log line by itself: 2 spans and a log
    // per trace.
    assert_eq!(sent.exports, 3 * sent.traces.len(), "{sent:?}");
    sent
}

/// The OpenTelemetry JS SDK over OTLP/HTTP JSON and protobuf (plain and gzip) and gRPC,
/// five clients at once against `tayga serve all`: every export succeeds, none is refused
/// for the bytes in flight, and every span and every log line is stored and read back
/// through the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_sdk_sends_concurrently_and_everything_is_stored() {
    let env = TestEnv::new("ingest_node_sdk");
    let daemons = common::ServeAll::start(&env, &[]).await;
    let http_endpoint = format!("http://{}", daemons.http_addr);
    let grpc_endpoint = format!("http://{}", daemons.grpc_addr);
    let send = |encoding: &'static str, endpoint: String, compression: &'static str| async move {
        let service = format!("node-{encoding}-{compression}");
        (service.clone(), node_send(encoding, &endpoint, &service, compression).await)
    };
    // The HTTP clients at once: 72 requests, more than the 64 that may be in flight on a
    // slow machine, which the SDK retries (503 + Retry-After).
    let http_clients = [("json", "none"), ("json", "gzip"), ("proto", "none"), ("proto", "gzip")];
    let mut sent = futures_util::future::join_all(http_clients.map(|(e, c)| send(e, http_endpoint.clone(), c))).await;
    // The gRPC exporter alone: it retries no error at all (SDK 0.223), so a refusal for
    // load would lose its data; docs/ingest.md says so.
    sent.push(send("grpc", grpc_endpoint, "gzip").await);

    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let api = format!("http://{}", daemons.api_addr);
    for (service, sent) in &sent {
        let expected_spans: BTreeSet<&str> = sent.spans.iter().map(String::as_str).collect();
        let mut stored_spans = BTreeSet::new();
        let mut stored_logs = BTreeSet::new();
        for trace_id in &sent.traces {
            let trace =
                wait_for(&format!("{service}'s trace {trace_id} with its log"), Duration::from_secs(90), || {
                    let url = format!("{api}/api/v1/traces/{trace_id}");
                    let http = http.clone();
                    async move {
                        let trace = get_json(&http, url).await?;
                        let complete = trace["spans"].as_array()?.len() == 2 && !trace["logs"].as_array()?.is_empty();
                        complete.then_some(trace)
                    }
                })
                .await;
            for s in trace["spans"].as_array().unwrap() {
                assert_eq!(s["service"], service.as_str(), "{s}");
                stored_spans.insert(s["span_id"].as_str().unwrap().to_string());
            }
            for l in trace["logs"].as_array().unwrap() {
                stored_logs.insert(l["body"].as_str().unwrap().to_string());
            }
        }
        let stored_spans: BTreeSet<&str> = stored_spans.iter().map(String::as_str).collect();
        assert_eq!(stored_spans, expected_spans, "{service}: every span stored");
        assert_eq!(stored_logs, sent.logs.iter().cloned().collect(), "{service}: every log line stored");
    }
    // Refusals for the number of requests in flight are load, and retried; none may be for
    // bytes, as every concurrent chunked body was before it was counted by what it holds.
    let text = scrape(&daemons.http_addr).await.unwrap();
    let for_bytes = metric(&text, r#"tayga_ingest_busy_requests_total{signal="traces",reason="inflight_bytes"}"#)
        + metric(&text, r#"tayga_ingest_busy_requests_total{signal="logs",reason="inflight_bytes"}"#);
    assert_eq!(for_bytes, 0.0, "no request was refused for the bytes in flight:\n{text}");
}

/// Sends a request's head with a chunked body and returns the connection.
fn chunked_head(addr: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    let head = "POST /v1/traces HTTP/1.1\r\nHost: tayga\r\nContent-Type: application/x-protobuf\r\n\
                Transfer-Encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

fn write_chunk(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
    stream.write_all(bytes)?;
    stream.write_all(b"\r\n")
}

/// The responses arriving on one HTTP/1.1 connection, in order (pipelined requests
/// included): each a status and a Content-Length body.
struct Responses {
    stream: TcpStream,
    buffered: Vec<u8>,
}

impl Responses {
    fn new(stream: TcpStream) -> Responses {
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Responses { stream, buffered: Vec::new() }
    }

    fn fill(&mut self) -> std::io::Result<()> {
        let mut buf = [0u8; 8192];
        match self.stream.read(&mut buf)? {
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                self.buffered.extend_from_slice(&buf[..n]);
                Ok(())
            }
        }
    }

    /// The next response; a `100 Continue` is returned like any other.
    fn next(&mut self) -> std::io::Result<(u16, String)> {
        let end = loop {
            if let Some(end) = self.buffered.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            self.fill()?;
        };
        let head = String::from_utf8_lossy(&self.buffered[..end]).into_owned();
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while self.buffered.len() < end + 4 + length {
            self.fill()?;
        }
        let body = String::from_utf8_lossy(&self.buffered[end + 4..end + 4 + length]).into_owned();
        self.buffered.drain(..end + 4 + length);
        Ok((status, body))
    }
}

/// Sixteen chunked bodies held open at once under the default bounds (each may grow to 32
/// MiB, the whole in-flight bound): all are served, because each holds only what it sent.
/// On the same listener: pipelined requests on one connection (one of them deflated), an
/// `Expect: 100-continue` request, and a chunked body that stalls (408).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_chunked_pipelined_and_continued_requests_are_served() {
    let mut env = TestEnv::new("ingest_chunked");
    env.config.ingest.body_timeout_secs = 3;
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;
    let addr = running.http_addr.to_string();

    let (statuses, pipelined, continued, stalled, sent) = tokio::task::spawn_blocking(move || {
        let mut sent = Vec::new();
        // Sixteen heads and first halves, all in flight together, then the second halves.
        let mut open = Vec::new();
        for c in 0..16u32 {
            let (body, ids) = many_traces(c * 100, 100);
            sent.extend(ids);
            let mut stream = chunked_head(&addr);
            let (first, second) = body.split_at(body.len() / 2);
            write_chunk(&mut stream, first).unwrap();
            open.push((stream, second.to_vec()));
        }
        let mut statuses = Vec::new();
        for (mut stream, second) in open {
            write_chunk(&mut stream, &second).unwrap();
            stream.write_all(b"0\r\n\r\n").unwrap();
            statuses.push(Responses::new(stream).next().unwrap());
        }

        // Three requests written back to back before any answer is read.
        let mut stream = TcpStream::connect(&addr).unwrap();
        for (i, first) in [5000u32, 5100, 5200].into_iter().enumerate() {
            let (body, ids) = many_traces(first, 10);
            sent.extend(ids);
            let (encoding, body) = if i == 1 {
                let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                z.write_all(&body).unwrap();
                ("Content-Encoding: deflate\r\n", z.finish().unwrap())
            } else {
                ("", body)
            };
            let head = format!(
                "POST /v1/traces HTTP/1.1\r\nHost: tayga\r\nContent-Type: application/x-protobuf\r\n{encoding}\
                 Content-Length: {}\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(&body).unwrap();
        }
        let mut responses = Responses::new(stream);
        let pipelined: Vec<u16> = (0..3).map(|_| responses.next().unwrap().0).collect();

        // Expect: 100-continue: the body follows the interim answer.
        let (body, ids) = many_traces(6000, 10);
        sent.extend(ids);
        let mut stream = TcpStream::connect(&addr).unwrap();
        let head = format!(
            "POST /v1/traces HTTP/1.1\r\nHost: tayga\r\nContent-Type: application/x-protobuf\r\n\
             Expect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let mut responses = Responses::new(stream.try_clone().unwrap());
        let interim = responses.next().unwrap().0;
        stream.write_all(&body).unwrap();
        let continued = (interim, responses.next().unwrap().0);

        // A chunked body that stops after its first chunk.
        let (body, _) = many_traces(7000, 10);
        let mut stream = chunked_head(&addr);
        write_chunk(&mut stream, &body[..body.len() / 2]).unwrap();
        let stalled = Responses::new(stream).next().unwrap();
        (statuses, pipelined, continued, stalled, sent)
    })
    .await
    .unwrap();

    assert!(statuses.iter().all(|(status, _)| *status == 200), "every chunked request is served: {statuses:?}");
    assert_eq!(pipelined, vec![200, 200, 200], "pipelined requests, answered in order");
    assert_eq!(continued, (100, 200), "100 Continue, then the answer");
    assert_eq!(stalled.0, 408, "a stalled body is cut off: {stalled:?}");
    let text = scrape(&running.http_addr.to_string()).await.unwrap();
    assert_eq!(metric(&text, "tayga_ingest_busy_requests_total"), 0.0, "{text}");
    let on_topic = span_ids_on_signals(&env.config, sent.len()).await;
    let sent: BTreeSet<String> = sent.into_iter().collect();
    assert_eq!(sent.difference(&on_topic).count(), 0, "every span sent is on the topic");
    shutdown.trigger();
    running.wait().await.unwrap();
}

/// A flood of chunked bodies that each grow to the maximum body size, sent in lockstep so
/// that together they pass the in-flight bound many times over: those that no longer fit
/// are refused while they grow (503 naming the bound and how full it was), the rest are
/// served, every refusal is counted, every accepted span is on the topic, and the peak
/// RSS stays under the same bound as for declared bodies (docs/ingest.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_maximum_size_chunked_bodies_stays_under_the_memory_bound() {
    let env = TestEnv::new("ingest_chunked_flood");
    let http = free_addr();
    let (max_body, max_inflight) = (BOUNDED_BODY_BYTES, BOUNDED_INFLIGHT_BYTES);
    let child = spawn_bounded_ingest(&env, &http, max_body, max_inflight).await;
    let pid = child.id();

    let addr = http.clone();
    let (accepted, refusals, resets) = tokio::task::spawn_blocking(move || {
        // Eight bodies of just under the maximum (64 MiB together, over five times the bound).
        let bodies: Vec<(Vec<u8>, Vec<String>)> = (0..8u32).map(|c| many_traces(c * 125_000, 125_000)).collect();
        let sizes: Vec<usize> = bodies.iter().map(|(b, _)| b.len()).collect();
        assert!(sizes.iter().all(|&n| (n as u64) < max_body && (n as u64) > max_body * 3 / 4), "{sizes:?}");
        let mut open: Vec<Option<(TcpStream, Responses)>> = bodies
            .iter()
            .map(|_| {
                let stream = chunked_head(&addr);
                let responses = Responses::new(stream.try_clone().unwrap());
                Some((stream, responses))
            })
            .collect();
        let (mut refusals, mut resets) = (Vec::new(), 0);
        let step = 256 << 10;
        let longest = bodies.iter().map(|(b, _)| b.len()).max().unwrap();
        let mut at = 0;
        while at < longest {
            for (i, (body, _)) in bodies.iter().enumerate() {
                let Some((stream, responses)) = open[i].as_mut() else { continue };
                let end = (at + step).min(body.len());
                if at >= end {
                    continue;
                }
                if write_chunk(stream, &body[at..end]).is_err() {
                    // Refused while growing: the answer came before the rest of the body.
                    match responses.next() {
                        Ok(answer) => refusals.push(answer),
                        Err(_) => resets += 1,
                    }
                    open[i] = None;
                }
            }
            at += step;
        }
        let mut accepted = Vec::new();
        for (i, slot) in open.iter_mut().enumerate() {
            let Some((stream, responses)) = slot.as_mut() else { continue };
            let answer = stream.write_all(b"0\r\n\r\n").map_err(|_| ()).and_then(|_| responses.next().map_err(|_| ()));
            match answer {
                Ok((200, _)) => accepted.extend(bodies[i].1.iter().cloned()),
                Ok(other) => refusals.push(other),
                Err(()) => resets += 1,
            }
        }
        (accepted, refusals, resets)
    })
    .await
    .unwrap();

    let peak = proc_status_bytes(pid, "VmHWM");
    let text = scrape(&http).await.unwrap();
    let busy = metric(&text, "tayga_ingest_busy_requests_total{signal=\"traces\",reason=\"inflight_bytes\"}");
    eprintln!(
        "chunked flood: {} spans accepted, {} refused with an answer, {resets} reset; peak RSS {} MiB; busy {busy}",
        accepted.len(),
        refusals.len(),
        peak >> 20
    );
    assert!(!accepted.is_empty(), "bodies that fit the bound are served");
    assert!(refusals.len() + resets > 0, "the bound was reached");
    for (status, body) in &refusals {
        assert_eq!(*status, 503, "{body}");
        assert!(body.contains("inflight_bytes") && body.contains("MiB"), "names the bound and how full: {body}");
    }
    assert_eq!(busy as usize, refusals.len() + resets, "every refusal is counted, a reset one too");
    let bound = (64u64 << 20) + 48 * max_inflight;
    assert!(peak < bound, "peak RSS {} MiB is over the bound of {} MiB", peak >> 20, bound >> 20);
    let on_topic = span_ids_on_signals(&env.config, accepted.len()).await;
    let accepted: BTreeSet<String> = accepted.into_iter().collect();
    assert_eq!(accepted.difference(&on_topic).count(), 0, "every accepted span is on the topic");
    drop(child);
}

/// HTTP/2 over cleartext with prior knowledge (a client that prefers h2c), on the
/// OTLP/HTTP port; and a metrics export over HTTP and gRPC is told, non-retryably, that
/// Tayga stores traces and logs, which `/health` lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_is_served_and_metrics_are_refused_clearly() {
    let mut env = TestEnv::new("ingest_h2c");
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;

    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let (body, ids) = many_traces(9000, 5);
    let request = hyper::Request::post(format!("http://{}/v1/traces", running.http_addr))
        .header("content-type", "application/x-protobuf")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let response = client.request(request).await.expect("an h2c request is answered");
    assert_eq!(response.version(), hyper::Version::HTTP_2);
    assert_eq!(response.status(), 200);
    let on_topic = span_ids_on_signals(&env.config, ids.len()).await;
    assert!(ids.iter().all(|id| on_topic.contains(id)));

    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/metrics", running.http_addr))
        .header("content-type", "application/x-protobuf")
        .body(vec![0u8; 4])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 501, "not retried by exporters, unlike a 404 or a 503");
    assert_eq!(response.headers()["content-type"], "application/json");
    let status: serde_json::Value = response.json().await.unwrap();
    assert!(status["message"].as_str().unwrap().contains("stores traces and logs"), "{status}");

    let endpoint = running.grpc_addr.to_string();
    let answer = tokio::task::spawn_blocking(move || {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/grpc_raw.py");
        let method = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
        let out = std::process::Command::new("python3").args([script, &endpoint, "zeros:0", method]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    })
    .await
    .unwrap();
    assert!(answer.starts_with("UNIMPLEMENTED: ") && answer.contains("stores traces and logs"), "{answer}");

    let health: serde_json::Value =
        reqwest::get(format!("http://{}/health", running.http_addr)).await.unwrap().json().await.unwrap();
    assert_eq!(health["signals"], serde_json::json!(["traces", "logs"]));
    shutdown.trigger();
    running.wait().await.unwrap();
}
