//! `tayga loadgen`: synthetic OTLP at a set rate, over HTTP (protobuf) or gRPC, from a set
//! number of services; reports the achieved rate and every error. Requests are paced from
//! one clock (not per connection), so a slow ingest shows up as a lower achieved rate.

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
    let slots = Arc::new(Semaphore::new(args.concurrency));
    let started = Instant::now();
    let end = started + args.duration;
    let interval = (args.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / args.rate));
    let mut sent: u64 = 0;
    let mut tasks = tokio::task::JoinSet::new();
    // Alternate traces and logs requests when both are asked for.
    let mut next_is_logs = args.traces_per_request == 0;
    while Instant::now() < end {
        if let Some(interval) = interval {
            let due = started + interval.mul_f64(sent as f64);
            if due > end {
                break;
            }
            tokio::time::sleep_until(due.into()).await;
        }
        let permit = slots.clone().acquire_owned().await?;
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
        let identities = acked_ids.as_ref().map(|file| (file.clone(), payload.identities()));
        tasks.spawn(async move {
            let (counter, n) = match &payload {
                Payload::Traces(_, n) => (spans, *n),
                Payload::Logs(_, n) => (logs, *n),
            };
            let result = client.send(payload).await;
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
        for (error, count) in &report.errors {
            writeln!(out, "  {count} × {error}")?;
        }
    }
    anyhow::ensure!(report.ok > 0 || report.requests == 0, "no request succeeded");
    Ok(())
}
