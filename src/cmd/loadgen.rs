//! `tayga loadgen`: synthetic OTLP at a set rate, over HTTP (protobuf) or gRPC, from a set
//! number of services; reports the achieved rate, the requests' latency percentiles and
//! every error. Requests are paced from one clock (not per connection). By default a request
//! waits for a free slot of `--concurrency`, so a slow ingest shows up as a lower achieved
//! rate; with `--open-loop` each request leaves at its due time whatever the answers so far,
//! and its latency counts from that time (a stalled ingest cannot slow the clock that judges
//! it).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::cli::{LoadgenArgs, Protocol};
use crate::identity;
use crate::otlp::flatten;
use crate::otlp::synth::{Shape, Synth};
use crate::store::now_ns;

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub seconds: f64,
    pub requests: u64,
    pub ok: u64,
    /// Errors by what the server (or the connection) said.
    pub errors: BTreeMap<String, u64>,
    pub spans: u64,
    pub logs: u64,
    pub requests_per_sec: f64,
    pub spans_per_sec: f64,
    pub logs_per_sec: f64,
    /// Whether requests left on schedule whatever the answers (`--open-loop`).
    pub open_loop: bool,
    /// Requests that fell due while `--concurrency` were in flight (open loop only): not
    /// sent, and not in `requests`.
    pub not_sent: u64,
    /// Every request sent, from its due time (open loop) or its start (otherwise) to its
    /// answer, an error answer or a failure included.
    pub latency_ms: Latency,
}

/// Latency percentiles in milliseconds (nearest rank); all 0 when nothing was sent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Latency {
    pub fn of(mut millis: Vec<f64>) -> Latency {
        if millis.is_empty() {
            return Latency::default();
        }
        millis.sort_by(f64::total_cmp);
        // Nearest rank: the smallest value at or above the fraction q of all values.
        let at = |q: f64| millis[((q * millis.len() as f64).ceil() as usize).clamp(1, millis.len()) - 1];
        Latency { p50: at(0.50), p90: at(0.90), p99: at(0.99), max: millis[millis.len() - 1] }
    }
}

#[derive(Clone)]
enum Client {
    Http {
        http: reqwest::Client,
        base: String,
    },
    Grpc {
        traces: Box<TraceServiceClient<tonic::transport::Channel>>,
        logs: Box<LogsServiceClient<tonic::transport::Channel>>,
    },
}

enum Payload {
    Traces(crate::otlp::ExportTraceServiceRequest, u64),
    Logs(crate::otlp::ExportLogsServiceRequest, u64),
}

impl Payload {
    /// The lines `--acked-ids` writes for this request once it is acknowledged: each span's
    /// trace and span id and each log line's id, from the rows the store would keep.
    fn identities(&self) -> String {
        let mut lines = String::new();
        match self {
            Payload::Traces(request, _) => {
                for row in flatten::span_rows(request, 0) {
                    lines.push_str(&format!("span {} {}\n", row.trace_id, row.span_id));
                }
            }
            Payload::Logs(request, _) => {
                for row in flatten::log_rows(request, 0) {
                    lines.push_str(&format!("log {:016x}\n", identity::log_id(&row.content())));
                }
            }
        }
        lines
    }
}

impl Client {
    async fn send(&self, payload: Payload) -> Result<(), String> {
        match (self, payload) {
            (Client::Http { http, base }, payload) => {
                let (path, body) = match &payload {
                    Payload::Traces(r, _) => ("/v1/traces", r.encode_to_vec()),
                    Payload::Logs(r, _) => ("/v1/logs", r.encode_to_vec()),
                };
                let response = http
                    .post(format!("{base}{path}"))
                    .header("content-type", "application/x-protobuf")
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| if e.is_timeout() { "timeout".to_string() } else { "connection error".to_string() })?;
                if response.status().is_success() {
                    Ok(())
                } else {
                    Err(format!("HTTP {}", response.status().as_u16()))
                }
            }
            (Client::Grpc { traces, .. }, Payload::Traces(r, _)) => {
                traces.as_ref().clone().export(r).await.map(|_| ()).map_err(|s| format!("gRPC {:?}", s.code()))
            }
            (Client::Grpc { logs, .. }, Payload::Logs(r, _)) => {
                logs.as_ref().clone().export(r).await.map(|_| ()).map_err(|s| format!("gRPC {:?}", s.code()))
            }
        }
    }
}

pub async fn run(args: &LoadgenArgs, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.traces_per_request > 0 || args.logs_per_request > 0,
        "nothing to send: give --traces-per-request or --logs-per-request above 0"
    );
    anyhow::ensure!(
        !args.duration.is_zero() && args.rate >= 0.0 && args.concurrency > 0,
        "--duration and --concurrency must be above 0, --rate at least 0"
    );
    anyhow::ensure!(!args.open_loop || args.rate > 0.0, "--open-loop needs a schedule: give --rate above 0");
    let client = match args.protocol {
        Protocol::Http => Client::Http {
            http: reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?,
            base: args
                .endpoint
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1:4318".into())
                .trim_end_matches('/')
                .to_string(),
        },
        Protocol::Grpc => {
            let endpoint = args.endpoint.clone().unwrap_or_else(|| "http://127.0.0.1:4317".into());
            let channel = tonic::transport::Endpoint::from_shared(endpoint.clone())
                .with_context(|| format!("`{endpoint}` is not a valid gRPC endpoint"))?
                .connect()
                .await
                .with_context(|| format!("connecting to {endpoint}"))?;
            Client::Grpc {
                traces: Box::new(TraceServiceClient::new(channel.clone())),
                logs: Box::new(LogsServiceClient::new(channel)),
            }
        }
    };
    let shape = Shape {
        services: args.services,
        traces_per_request: args.traces_per_request,
        spans_per_trace: args.spans_per_trace,
        logs_per_request: args.logs_per_request,
        exception_every: args.exception_every,
    };
    let mut synth = Synth::new(shape, 0x7A96A);
    let spans_per_request = (args.traces_per_request * args.spans_per_trace.max(1)) as u64;

    let acked_ids = match &args.acked_ids {
        Some(path) => Some(Arc::new(Mutex::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )))),
        None => None,
    };
    let report = Arc::new(Mutex::new(Report::default()));
    let spans = Arc::new(AtomicU64::new(0));
    let logs = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::<f64>::new()));
    let mut not_sent: u64 = 0;
    let slots = Arc::new(Semaphore::new(args.concurrency));
    let started = Instant::now();
    let end = started + args.duration;
    let interval = (args.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / args.rate));
    let mut sent: u64 = 0;
    let mut tasks = tokio::task::JoinSet::new();
    // Alternate traces and logs requests when both are asked for.
    let mut next_is_logs = args.traces_per_request == 0;
    loop {
        // On a schedule, the schedule alone says when to stop (a late client still sends
        // every request that fell due); otherwise the clock does.
        let mut due = None;
        if let Some(interval) = interval {
            let at = started + interval.mul_f64((sent + not_sent) as f64);
            if at >= end {
                break;
            }
            tokio::time::sleep_until(at.into()).await;
            due = Some(at);
        } else if Instant::now() >= end {
            break;
        }
        let permit = if args.open_loop {
            match slots.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    not_sent += 1;
                    continue;
                }
            }
        } else {
            let permit = slots.clone().acquire_owned().await?;
            if Instant::now() >= end {
                break;
            }
            permit
        };
        // Open loop: the clock starts when the request was due, so time it spent waiting
        // behind the client's own work counts against the answer.
        let clock = if args.open_loop { due.unwrap_or_else(Instant::now) } else { Instant::now() };
        let payload = if next_is_logs {
            Payload::Logs(synth.logs(now_ns()), args.logs_per_request as u64)
        } else {
            Payload::Traces(synth.traces(now_ns()), spans_per_request)
        };
        if args.traces_per_request > 0 && args.logs_per_request > 0 {
            next_is_logs = !next_is_logs;
        }
        sent += 1;
        let (client, report, spans, logs) = (client.clone(), report.clone(), spans.clone(), logs.clone());
        let latencies = latencies.clone();
        let identities = acked_ids.as_ref().map(|file| (file.clone(), payload.identities()));
        tasks.spawn(async move {
            let (counter, n) = match &payload {
                Payload::Traces(_, n) => (spans, *n),
                Payload::Logs(_, n) => (logs, *n),
            };
            let result = client.send(payload).await;
            latencies.lock().unwrap().push(clock.elapsed().as_secs_f64() * 1000.0);
            let mut report = report.lock().unwrap();
            report.requests += 1;
            match result {
                Ok(()) => {
                    report.ok += 1;
                    counter.fetch_add(n, Ordering::Relaxed);
                    if let Some((file, lines)) = identities {
                        if let Err(e) = file.lock().unwrap().write_all(lines.as_bytes()) {
                            *report.errors.entry(format!("writing --acked-ids: {e}")).or_default() += 1;
                        }
                    }
                }
                Err(e) => *report.errors.entry(e).or_default() += 1,
            }
            drop(permit);
        });
    }
    while tasks.join_next().await.is_some() {}
    if let (Some(file), Some(path)) = (acked_ids, &args.acked_ids) {
        file.lock().unwrap().flush().with_context(|| format!("writing {}", path.display()))?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut report =
        Arc::try_unwrap(report).map_err(|_| anyhow::anyhow!("a request task outlived the run"))?.into_inner().unwrap();
    report.seconds = seconds;
    report.spans = spans.load(Ordering::Relaxed);
    report.logs = logs.load(Ordering::Relaxed);
    report.requests_per_sec = report.requests as f64 / seconds;
    report.spans_per_sec = report.spans as f64 / seconds;
    report.logs_per_sec = report.logs as f64 / seconds;
    report.open_loop = args.open_loop;
    report.not_sent = not_sent;
    report.latency_ms = Latency::of(std::mem::take(&mut *latencies.lock().unwrap()));
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        writeln!(
            out,
            "{} requests in {:.1} s ({:.1}/s): {} ok, {} failed; {} spans ({:.0}/s), {} logs ({:.0}/s)",
            report.requests,
            report.seconds,
            report.requests_per_sec,
            report.ok,
            report.requests - report.ok,
            report.spans,
            report.spans_per_sec,
            report.logs,
            report.logs_per_sec
        )?;
        let l = report.latency_ms;
        writeln!(
            out,
            "latency{}: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            if args.open_loop { " from each request's due time" } else { "" },
            l.p50,
            l.p90,
            l.p99,
            l.max
        )?;
        if report.not_sent > 0 {
            writeln!(out, "  {} due while {} were in flight: not sent", report.not_sent, args.concurrency)?;
        }
        for (error, count) in &report.errors {
            writeln!(out, "  {count} × {error}")?;
        }
    }
    anyhow::ensure!(report.ok > 0 || report.requests == 0, "no request succeeded");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        assert_eq!(Latency::of(vec![]), Latency::default());
        let hundred: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(Latency::of(hundred), Latency { p50: 50.0, p90: 90.0, p99: 99.0, max: 100.0 });
        let one_slow = [vec![1.0; 199], vec![500.0]].concat();
        let l = Latency::of(one_slow);
        assert_eq!((l.p99, l.max), (1.0, 500.0), "one slow request in 200 is past the p99");
    }

    /// An OTLP/HTTP receiver that answers every request `delay` after it arrived.
    async fn slow_receiver(delay: Duration) -> String {
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move || async move {
                tokio::time::sleep(delay).await;
                ""
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    async fn report(endpoint: &str, extra: &[&str]) -> serde_json::Value {
        let base = ["tayga", "loadgen", "--endpoint", endpoint, "--rate", "40", "--duration", "0.5"];
        let cli = Cli::try_parse_from(base.iter().chain(extra)).unwrap();
        let Command::Loadgen(args) = cli.command else { panic!("not loadgen") };
        let mut out = Vec::new();
        run(&args, true, &mut out).await.unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[tokio::test]
    async fn open_loop_sends_on_schedule_whatever_the_answers_and_times_from_it() {
        let endpoint = slow_receiver(Duration::from_millis(300)).await;
        // 40 requests/s for 0.5 s is 20 due; none is answered before the last is due.
        let open = report(&endpoint, &["--open-loop", "--concurrency", "64"]).await;
        assert_eq!((open["requests"].as_u64(), open["not_sent"].as_u64()), (Some(20), Some(0)), "{open}");
        assert!(open["latency_ms"]["p50"].as_f64().unwrap() >= 300.0, "{open}");
        // Closed, two in flight: each slot waits for its answer, so few are sent.
        let closed = report(&endpoint, &["--concurrency", "2"]).await;
        assert!(closed["requests"].as_u64().unwrap() <= 6, "{closed}");
        // Open with a cap of two: what fell due while two were in flight is counted, not sent.
        let capped = report(&endpoint, &["--open-loop", "--concurrency", "2"]).await;
        let (sent, skipped) = (capped["requests"].as_u64().unwrap(), capped["not_sent"].as_u64().unwrap());
        assert_eq!(sent + skipped, 20, "{capped}");
        assert!(skipped >= 10, "{capped}");
    }

    #[tokio::test]
    async fn open_loop_needs_a_rate() {
        let cli = Cli::try_parse_from(["tayga", "loadgen", "--rate", "0", "--open-loop"]).unwrap();
        let Command::Loadgen(args) = cli.command else { panic!("not loadgen") };
        let err = run(&args, true, &mut Vec::new()).await.unwrap_err();
        assert!(err.to_string().contains("--open-loop needs"), "{err}");
    }
}
