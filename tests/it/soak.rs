//! The soak: the whole pipeline as separate `tayga serve <service>` processes, on a
//! ClickHouse 18.16 and a durable broker of its own (`PrivateClickHouse`,
//! `OwnBroker::start_durable`: the shared ones are never stopped), fed at a steady rate by three clients (this harness's own OTLP/HTTP
//! client, `tayga loadgen`, the stock OpenTelemetry Python SDK over gRPC) with bad input mixed
//! in, two webhook targets (one healthy; one that turns dead, then answers 503, then 429 with
//! Retry-After, then recovers), and faults on a schedule: ClickHouse stopped, killed -9 and
//! frozen, the (durable) broker frozen and killed -9 under load, each restarted or thawed;
//! kill -9 of each daemon and restart, a logminer replica added and removed, ingest
//! restarted mid-load. A second replica of each daemon is never killed, and its memory is
//! judged over the whole run. The own client scripts alerts known beforehand (a new
//! template per milestone, a spike, a new trace path). At the end it reconciles from what
//! the clients were acknowledged and prints one table; any discrepancy fails the test, named.
//!
//! One implementation, two profiles: `short_soak_reconciles` in the suite (about 3
//! minutes), and `soak` (ignored; `scripts/soak.sh --minutes N` runs it with
//! `TAYGA_SOAK_MINUTES`). docs/reliability.md has the faults and a long run's figures.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use tayga::otlp::{hex_id, ExportLogsServiceRequest, ExportTraceServiceRequest};
use tayga::store::{AlertRow, DeliveryRow, HitRow, LogRow, SpanRow, Store, StoryRow};
use tayga::wire::alert::AlertKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{free_addr, resource, stories, ChildGuard, OwnBroker, PrivateClickHouse, TestEnv};

/// The suite's profile: about 120 s of traffic, every fault once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_soak_reconciles() {
    run_soak(Duration::from_secs(120)).await;
}

/// The long profile: `TAYGA_SOAK_MINUTES` (default 30) of traffic, the faults in cycles.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "long: run it with scripts/soak.sh --minutes N"]
async fn soak() {
    let minutes: f64 = std::env::var("TAYGA_SOAK_MINUTES").ok().and_then(|m| m.parse().ok()).unwrap_or(30.0);
    run_soak(Duration::from_secs_f64(minutes * 60.0)).await;
}

/// The services the harness's own clients send as; loadgen sends as `svc-<n>`.
const OWN_TRACE_SERVICES: [&str; 2] = ["soak-front", "soak-back"];
const OWN_LOG_SERVICE: &str = "soak-app";
const SDK_SERVICE: &str = "soak-sdk";
const BAD_SERVICE: &str = "soak-bad";
const DAEMONS: [&str; 6] = ["ingest", "writer", "assembler", "logminer", "notifier", "api"];
/// A second replica of each daemon that the fault schedule never touches: its memory is
/// judged over the whole run (loadgen sends to `ingest-long`, the harness reads from
/// `api-long`).
const LONG_LIVED: [&str; 6] =
    ["ingest-long", "writer-long", "assembler-long", "logminer-long", "notifier-long", "api-long"];
/// The service of the scripted spike: a probe line every 4 s (15 a minute, under
/// `spike_min_count`, so its steady minutes never spike), then one burst.
const SPIKE_SERVICE: &str = "soak-spike";
/// Lines in the burst: far over the probe template's threshold (20: its baseline is under 1).
const SPIKE_BURST: usize = 60;
/// The scripted new path: from a point of the run, one of the own client's two traces per
/// request also calls `reserve` from `call-1`, an edge its endpoint never took.
const NEW_EDGE: &str = "soak-back/call-1 -> soak-back/reserve";

pub(crate) fn elapsed_secs(since: Instant) -> f64 {
    since.elapsed().as_secs_f64()
}

/// What happened when, for the table and for explaining a duplicate delivery.
#[derive(Default)]
pub(crate) struct Timeline {
    pub(crate) events: Vec<(f64, String)>,
    pub(crate) notifier_kills: Vec<f64>,
}

// ---------------------------------------------------------------------------------------
// The daemons: one process each, restartable.

struct Daemon {
    child: ChildGuard,
}

/// Field order is drop order: the daemons are killed before the environment's database and
/// topics are removed.
pub(crate) struct Pipeline {
    daemons: BTreeMap<String, Daemon>,
    pub(crate) env: TestEnv,
    dir: PathBuf,
    pub(crate) vars: Vec<(String, String)>,
    /// The metrics address of each further replica (`writer-b`), kept across its restarts.
    replica_metrics: BTreeMap<String, String>,
    /// Pids and start times of the running daemons, for the RSS sampler.
    pids: Arc<Mutex<BTreeMap<String, (u32, Instant)>>>,
    pub(crate) ingest_http: String,
    ingest_grpc: String,
}

impl Pipeline {
    pub(crate) fn new(env: TestEnv, dir: &Path, targets: &str) -> Pipeline {
        let ingest_http = free_addr();
        let ingest_grpc = free_addr();
        let logminer_metrics = free_addr();
        let vars: Vec<(String, String)> = [
            ("TAYGA_INGEST_HTTP_ADDR", ingest_http.clone()),
            ("TAYGA_INGEST_GRPC_ADDR", ingest_grpc.clone()),
            ("TAYGA_INGEST_PROBE_INTERVAL_SECS", "1".into()),
            ("TAYGA_INGEST_BREAKER_COOLDOWN_SECS", "2".into()),
            ("TAYGA_WRITER_METRICS_ADDR", free_addr()),
            ("TAYGA_ASSEMBLER_METRICS_ADDR", free_addr()),
            ("TAYGA_ASSEMBLER_IDLE_CLOSE_SECS", "3".into()),
            ("TAYGA_LOGMINER_METRICS_ADDR", logminer_metrics.clone()),
            ("TAYGA_LOGMINER_TICK_SECS", "1".into()),
            ("TAYGA_LOGMINER_REPLICA_ID", "soak-a".into()),
            ("TAYGA_NOTIFIER_METRICS_ADDR", free_addr()),
            ("TAYGA_NOTIFIER_TARGETS", targets.to_string()),
            ("TAYGA_NOTIFIER_MAX_ATTEMPTS", "4".into()),
            ("TAYGA_NOTIFIER_TIMEOUT_SECS", "2".into()),
            ("TAYGA_NOTIFIER_BREAKER_COOLDOWN_SECS", "20".into()),
            ("TAYGA_API_LISTEN_ADDR", free_addr()),
            ("TAYGA_API_LOGMINER_METRICS", logminer_metrics),
            ("TAYGA_API_SCRAPE_INTERVAL_SECS", "5".into()),
            ("TAYGA_LOG", "info".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Pipeline {
            env,
            dir: dir.to_path_buf(),
            vars,
            daemons: BTreeMap::new(),
            replica_metrics: BTreeMap::new(),
            pids: Arc::default(),
            ingest_http,
            ingest_grpc,
        }
    }

    pub(crate) fn var(&self, key: &str) -> &str {
        &self.vars.iter().find(|(k, _)| k == key).expect("a known variable").1
    }

    /// Where daemon `name` (a consuming service, or a further replica of one) serves
    /// `/metrics`; for a further replica of ingest, its OTLP/HTTP address (`/metrics` is
    /// served there too; `<name>/grpc` is its OTLP/gRPC one), and of the api, its address.
    pub(crate) fn metrics_addr(&mut self, name: &str) -> String {
        match name.split_once('-') {
            None => self.var(&format!("TAYGA_{}_METRICS_ADDR", name.to_uppercase())).to_string(),
            Some(_) => self.replica_metrics.entry(name.to_string()).or_insert_with(free_addr).clone(),
        }
    }

    /// Starts daemon `name`: a service (`writer`), or a further replica of one (`writer-b`:
    /// the same consumer group, a metrics address of its own, and for the logminer a replica
    /// id of its own). Spawned from the test's own thread, so the kernel kills it with the
    /// test (`ChildGuard`).
    pub(crate) fn start(&mut self, name: &str) {
        let (service, replica) = name.split_once('-').map_or((name, None), |(s, r)| (s, Some(r)));
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(format!("{name}.log"))).unwrap();
        let mut cmd = self.env.tayga();
        cmd.args(["serve", service])
            .envs(self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some(replica) = replica {
            // A further replica listens where the first does not: ingest on OTLP ports of
            // its own, the api on an address of its own, the consumers on their metrics.
            let addr = self.metrics_addr(name);
            match service {
                "ingest" => {
                    let grpc = self.metrics_addr(&format!("{name}/grpc"));
                    cmd.env("TAYGA_INGEST_HTTP_ADDR", addr).env("TAYGA_INGEST_GRPC_ADDR", grpc);
                }
                "api" => {
                    cmd.env("TAYGA_API_LISTEN_ADDR", addr);
                }
                _ => {
                    cmd.env(format!("TAYGA_{}_METRICS_ADDR", service.to_uppercase()), addr);
                }
            }
            if service == "logminer" {
                cmd.env("TAYGA_LOGMINER_REPLICA_ID", format!("soak-{replica}"));
            }
        }
        let child = ChildGuard::spawn(&mut cmd, &format!("tayga serve {name}"));
        self.pids.lock().unwrap().insert(name.to_string(), (child.id(), Instant::now()));
        self.daemons.insert(name.to_string(), Daemon { child });
    }

    pub(crate) fn kill9(&mut self, name: &str) {
        self.pids.lock().unwrap().remove(name);
        if let Some(mut d) = self.daemons.remove(name) {
            d.child.kill();
        }
    }

    /// SIGTERM and wait for a clean exit (bounded as Compose's 40 s grace period is).
    fn stop(&mut self, name: &str) -> bool {
        self.pids.lock().unwrap().remove(name);
        let Some(mut d) = self.daemons.remove(name) else { return true };
        let _ = Command::new("kill").arg("-TERM").arg(d.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(45);
        while Instant::now() < deadline {
            if let Some(status) = d.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        d.child.kill();
        false
    }

    pub(crate) fn exited(&mut self) -> Vec<String> {
        self.daemons.iter_mut().filter_map(|(n, d)| d.child.try_wait().map(|_| n.clone())).collect()
    }
}

pub(crate) async fn wait_http_ok(url: &str, limit: Duration) -> bool {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if http.get(url).send().await.is_ok_and(|r| r.status().is_success()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

// ---------------------------------------------------------------------------------------
// Webhook targets: a raw HTTP/1.1 server whose answers follow a script of phases.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Healthy,
    Dead,
    Unavailable,
    TooMany,
    Recovered,
    /// 200, a second after the request: a kill -9 of the notifier often lands mid-delivery.
    Slow,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Healthy => "healthy",
            Phase::Dead => "dead (connection reset)",
            Phase::Unavailable => "503",
            Phase::TooMany => "429 + Retry-After: 1",
            Phase::Recovered => "recovered",
            Phase::Slow => "200 after 1 s",
        }
    }
}

/// A receipt: which alert, when (seconds into the run), and whether it was answered 2xx.
#[derive(Clone, Debug)]
pub(crate) struct Receipt {
    pub(crate) alert_id: u64,
    /// Seconds since the `started` given to [`hook`].
    pub(crate) at: f64,
    pub(crate) ok: bool,
}

pub(crate) struct Hook {
    pub(crate) url: String,
    receipts: Arc<Mutex<Vec<Receipt>>>,
}

impl Hook {
    /// What the target answered with a 2xx so far, in order.
    pub(crate) fn receipts(&self) -> Vec<Receipt> {
        self.receipts.lock().unwrap().iter().filter(|r| r.ok).cloned().collect()
    }
}

/// Serves webhook POSTs; `phase` says how to answer at each moment.
pub(crate) async fn hook(started: Instant, phase: Arc<dyn Fn(f64) -> Phase + Send + Sync>) -> Hook {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let receipts: Arc<Mutex<Vec<Receipt>>> = Arc::default();
    let kept = receipts.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { continue };
            let (receipts, phase) = (kept.clone(), phase.clone());
            tokio::spawn(async move {
                let now = elapsed_secs(started);
                let current = phase(now);
                if current == Phase::Dead {
                    return; // dropped unanswered: the notifier sees a network error
                }
                let Some(body) = read_request(&mut socket).await else { return };
                let alert_id = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["alert_id"].as_str().and_then(|s| u64::from_str_radix(s, 16).ok()))
                    .unwrap_or(0);
                let (status, extra) = match current {
                    Phase::Unavailable => ("503 Service Unavailable", ""),
                    Phase::TooMany => ("429 Too Many Requests", "Retry-After: 1\r\n"),
                    _ => ("200 OK", ""),
                };
                receipts.lock().unwrap().push(Receipt { alert_id, at: now, ok: status.starts_with("200") });
                if current == Phase::Slow {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let answer = format!("HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Hook { url, receipts }
}

/// One HTTP/1.1 request's body (Content-Length framed), or None if the client went away.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut chunk)).await.ok()?.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    while buf.len() < header_end + length {
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut chunk)).await.ok()?.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[header_end..header_end + length].to_vec())
}

// ---------------------------------------------------------------------------------------
// The harness's own client: unique ids, retries until acknowledged, bad input mixed in.

#[derive(Default)]
pub(crate) struct Acked {
    /// trace id → spans in it (each trace is sent whole, in one request).
    pub(crate) traces: BTreeMap<String, u32>,
    pub(crate) spans: BTreeSet<(String, String)>,
    pub(crate) logs: BTreeSet<String>,
    requests: u64,
    retries: u64,
    /// Batches given up on (never acknowledged): not reconciled, counted.
    abandoned: u64,
    bad_refused: u64,
    bad_accepted: Vec<String>,
    bad_unanswered: u64,
    /// The scripted spike's burst, once acknowledged: its lines' time and when it was sent
    /// (seconds into the client's run).
    pub(crate) spike_burst: Option<(u64, f64)>,
    /// The scripted new path: its first acknowledged trace's start and when it was sent,
    /// and how many of its traces were acknowledged.
    pub(crate) new_path: Option<(u64, f64)>,
    pub(crate) new_path_traces: u64,
}

/// What the own client scripts on top of its steady traffic, so that the soak knows each
/// alert the traffic must raise: the spike's probe lines from the start and its burst at
/// `spike_at`, the new path from `new_path_at`.
#[derive(Clone, Copy)]
pub(crate) struct Script {
    pub(crate) spike_at: Instant,
    pub(crate) new_path_at: Instant,
}

/// Two traces of `checkout` (front) calling `call-1` and `call-2` (back); with `new_path`,
/// the second also has `call-1` call `reserve` ([`NEW_EDGE`]).
fn own_traces(n: u64, new_path: bool) -> (ExportTraceServiceRequest, Vec<(String, String)>) {
    let mut spans_by_service: [Vec<Span>; 2] = Default::default();
    let mut ids = Vec::new();
    let now = tayga::store::now_ns();
    for t in 0..2u64 {
        let mut trace_id = vec![0x50, 0xa4];
        trace_id.extend_from_slice(&[0; 6]);
        trace_id.extend_from_slice(&(n * 2 + t).to_be_bytes());
        let spans = if new_path && t == 1 { 4 } else { 3 };
        for s in 0..spans {
            let span_id = ((n * 2 + t) * 4 + s + 1).to_be_bytes().to_vec();
            // `reserve` (span 3) is a child of `call-1` (span 1); the others of the root.
            let parent_of = if s == 3 { 2 } else { 1 };
            let parent = if s == 0 { vec![] } else { ((n * 2 + t) * 4 + parent_of).to_be_bytes().to_vec() };
            ids.push((hex_id(&trace_id), hex_id(&span_id)));
            spans_by_service[(s > 0) as usize].push(Span {
                trace_id: trace_id.clone(),
                span_id,
                parent_span_id: parent,
                name: match s {
                    0 => "checkout".into(),
                    3 => "reserve".into(),
                    _ => format!("call-{s}"),
                },
                kind: 2,
                start_time_unix_nano: now + s * 1_000,
                end_time_unix_nano: now + s * 1_000 + 500,
                ..Default::default()
            });
        }
    }
    let [front, back] = spans_by_service;
    let resource_spans = [(OWN_TRACE_SERVICES[0], front), (OWN_TRACE_SERVICES[1], back)]
        .into_iter()
        .map(|(service, spans)| ResourceSpans {
            resource: resource(service),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        })
        .collect();
    (ExportTraceServiceRequest { resource_spans }, ids)
}

/// Four log lines of a few steady templates, and on every `new_every`-th request one line
/// of a shape never seen before (a longer run of words: a new Drain length group), so the
/// logminer raises `new_template` alerts throughout the run. With `probes`, every 8th
/// request (every 4 s) also carries a line of [`SPIKE_SERVICE`]'s one template, and with
/// `burst` [`SPIKE_BURST`] of them at once; every such line is unique (its number).
/// Returns the lines' time too.
fn own_logs(n: u64, new_every: u64, probes: bool, burst: bool) -> (ExportLogsServiceRequest, Vec<String>, u64) {
    let now = tayga::store::now_ns();
    let mut bodies = vec![
        format!("payment {n} accepted for user {} in {} ms", n % 97, n % 13 + 1),
        format!("cache miss for key k{:x} on shard {}", n * 7919, n % 4),
        format!("worker {} finished job {n} with status ok", n % 5),
        format!("request {n} served from 10.0.{}.{}", n % 3, n % 200),
    ];
    if n.is_multiple_of(new_every) {
        bodies.push(format!(
            "soak milestone {}{} (request {n})",
            "reached ".repeat((n / new_every + 1) as usize),
            "now"
        ));
    }
    let probe_count = match (probes && n.is_multiple_of(8), burst) {
        (_, true) => SPIKE_BURST,
        (true, false) => 1,
        (false, false) => 0,
    };
    let probe_lines: Vec<String> =
        (0..probe_count).map(|i| format!("spike probe {} handled in {} ms", n * 1000 + i as u64, i % 7 + 1)).collect();
    let records = |lines: &[String]| -> Vec<LogRecord> {
        lines
            .iter()
            .enumerate()
            .map(|(i, body)| LogRecord {
                time_unix_nano: now + i as u64,
                severity_number: 9,
                body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.clone())) }),
                ..Default::default()
            })
            .collect()
    };
    let resource_logs = [(OWN_LOG_SERVICE, &bodies), (SPIKE_SERVICE, &probe_lines)]
        .into_iter()
        .filter(|(_, lines)| !lines.is_empty())
        .map(|(service, lines)| ResourceLogs {
            resource: resource(service),
            scope_logs: vec![ScopeLogs { log_records: records(lines), ..Default::default() }],
            ..Default::default()
        })
        .collect();
    bodies.extend(probe_lines);
    (ExportLogsServiceRequest { resource_logs }, bodies, now)
}

/// The bad requests mixed into the traffic (docs/ingest.md's "Bad input"), each of
/// service `soak-bad`: (what, content type, content encoding, body).
fn bad_requests(limit: usize) -> Vec<(&'static str, &'static str, Option<&'static str>, Vec<u8>)> {
    let span = Span { trace_id: vec![9; 16], span_id: vec![9; 8], name: "bad".into(), ..Default::default() };
    let good = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: resource(BAD_SERVICE),
            scope_spans: vec![ScopeSpans { spans: vec![span], ..Default::default() }],
            ..Default::default()
        }],
    }
    .encode_to_vec();
    let gzip_bomb = {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&vec![0u8; limit * 2]).unwrap();
        enc.finish().unwrap()
    };
    let nested = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{}{{"stringValue":"{BAD_SERVICE}"}}{}}}]}}}}]}}"#,
        r#"{"kvlistValue":{"values":[{"key":"k","value":"#.repeat(3000),
        "}]}}".repeat(3000)
    );
    vec![
        ("truncated protobuf", "application/x-protobuf", None, good[..good.len() - 2].to_vec()),
        ("wrong content type", "text/plain", None, good.clone()),
        ("gzip bomb", "application/x-protobuf", Some("gzip"), gzip_bomb),
        ("deeply nested JSON", "application/json", None, nested.into_bytes()),
        ("oversized body", "application/x-protobuf", None, vec![0u8; limit + 1]),
        ("invalid gzip", "application/x-protobuf", Some("gzip"), b"\x1f\x8bnot gzip".to_vec()),
    ]
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    content_type: &str,
    encoding: Option<&str>,
    body: Vec<u8>,
) -> Result<u16, String> {
    let mut request = http.post(url).header("content-type", content_type).body(body);
    if let Some(encoding) = encoding {
        request = request.header("content-encoding", encoding);
    }
    request.send().await.map(|r| r.status().as_u16()).map_err(|e| e.to_string())
}

/// Sends `body` until it is acknowledged (200), as an OTLP client keeps and retries its
/// batch; gives up only when the run is over and a minute more has passed.
async fn send_until_acked(
    http: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    give_up: Instant,
    acked: &Mutex<Acked>,
) -> bool {
    loop {
        match post(http, url, "application/x-protobuf", None, body.clone()).await {
            Ok(200) => return true,
            Ok(status) if (400..500).contains(&status) => panic!("ingest refused a valid request with {status}"),
            _ => {}
        }
        if Instant::now() > give_up {
            return false;
        }
        acked.lock().unwrap().retries += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub(crate) async fn own_client(base: String, until: Instant, new_every: u64, limit: usize, acked: Arc<Mutex<Acked>>) {
    own_client_scripted(base, until, new_every, limit, acked, None).await;
}

/// The own client, with `script`'s alerts scripted into its traffic.
pub(crate) async fn own_client_scripted(
    base: String,
    until: Instant,
    new_every: u64,
    limit: usize,
    acked: Arc<Mutex<Acked>>,
    script: Option<Script>,
) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(15)).build().unwrap();
    let bad = bad_requests(limit);
    let give_up = until + Duration::from_secs(60);
    let mut n = 0u64;
    let started = Instant::now();
    let mut burst_sent = false;
    while Instant::now() < until {
        let new_path = script.is_some_and(|s| Instant::now() >= s.new_path_at);
        let sent_ns = tayga::store::now_ns();
        let (traces, span_ids) = own_traces(n, new_path);
        let ok = send_until_acked(&http, &format!("{base}/v1/traces"), traces.encode_to_vec(), give_up, &acked).await;
        {
            let mut a = acked.lock().unwrap();
            a.requests += 1;
            if ok {
                for (t, s) in span_ids {
                    *a.traces.entry(t.clone()).or_default() += 1;
                    a.spans.insert((t, s));
                }
                if new_path {
                    a.new_path.get_or_insert((sent_ns, elapsed_secs(started)));
                    a.new_path_traces += 1;
                }
            } else {
                a.abandoned += 1;
            }
        }
        let burst = script.is_some_and(|s| !burst_sent && Instant::now() >= s.spike_at);
        burst_sent |= burst;
        let (logs, bodies, lines_ns) = own_logs(n, new_every, script.is_some(), burst);
        let ok = send_until_acked(&http, &format!("{base}/v1/logs"), logs.encode_to_vec(), give_up, &acked).await;
        {
            let mut a = acked.lock().unwrap();
            a.requests += 1;
            if ok {
                a.logs.extend(bodies);
                if burst {
                    a.spike_burst = Some((lines_ns, elapsed_secs(started)));
                }
            } else {
                a.abandoned += 1;
            }
        }
        if n.is_multiple_of(8) {
            let (what, content_type, encoding, body) = &bad[(n / 8) as usize % bad.len()];
            let answer = post(&http, &format!("{base}/v1/traces"), content_type, *encoding, body.clone()).await;
            let mut a = acked.lock().unwrap();
            match answer {
                Ok(400..=499) => a.bad_refused += 1,
                Ok(200..=299) => a.bad_accepted.push(what.to_string()),
                _ => a.bad_unanswered += 1,
            }
        }
        n += 1;
        // 4 requests a second at most (2 traces and 2 logs), paced from one clock.
        let due = started + Duration::from_millis(500) * n as u32;
        tokio::time::sleep_until(due.into()).await;
    }
}

// ---------------------------------------------------------------------------------------
// RSS samples per daemon.

#[derive(Clone)]
struct RssSample {
    daemon: String,
    /// The daemon's start, so samples of one incarnation are told apart.
    incarnation: Instant,
    age: f64,
    /// Seconds into the run.
    at: f64,
    kib: u64,
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Every 2 s, each running daemon's VmRSS; with `api`, also a read of the alerts and the
/// services from that api, so the never-killed api serves all along (its recorder alone
/// would leave its request path idle).
async fn sample_rss(
    pids: Arc<Mutex<BTreeMap<String, (u32, Instant)>>>,
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Vec<RssSample>>>,
    started: Instant,
    api: Option<String>,
) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
    while !stop.load(Ordering::Relaxed) {
        let now: Vec<(String, u32, Instant)> =
            pids.lock().unwrap().iter().map(|(n, (p, s))| (n.clone(), *p, *s)).collect();
        for (daemon, pid, incarnation) in now {
            if let Some(kib) = rss_kib(pid) {
                let (age, at) = (elapsed_secs(incarnation), elapsed_secs(started));
                out.lock().unwrap().push(RssSample { daemon, incarnation, age, at, kib });
            }
        }
        if let Some(api) = &api {
            for path in ["/api/v1/alerts?limit=100", "/api/v1/services"] {
                let _ = http.get(format!("{api}{path}")).send().await;
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The least-squares slope of `(seconds, KiB)` points, in MiB per minute.
fn slope_mib_per_min(points: &[(f64, u64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_k = points.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (t, k) in points {
        num += (t - mean_t) * (*k as f64 - mean_k);
        den += (t - mean_t) * (t - mean_t);
    }
    if den == 0.0 {
        return 0.0;
    }
    num / den * 60.0 / 1024.0
}

/// Whether a run is long enough for the strict rule on the never-killed daemons' memory.
const LONG_RUN: Duration = Duration::from_secs(600);

/// The row of one never-killed daemon: its RSS over the whole run, judged on the second
/// half of its samples (the first half is its warm-up: caches, the allocator's pages and
/// the consumers' buffers fill while the load starts). A long run (≥ 10 minutes of
/// traffic) passes when the second half's least-squares slope is at most 0.5 MiB a minute
/// and its last sample at most 1.2 × the second half's median; a short run, too short to
/// tell a leak from a warm-up, when the last sample is at most 1.5 × that median and at
/// most 64 MiB above it (the slope is shown).
fn long_life_row(report: &mut Report, name: &str, samples: &[RssSample], long_run: bool) {
    let mine: Vec<&RssSample> = samples.iter().filter(|s| s.daemon == name).collect();
    let lives = mine.iter().map(|s| s.incarnation).collect::<BTreeSet<_>>().len();
    let check = format!("rss {name} (never killed)");
    if mine.len() < 6 || lives != 1 {
        report.row(&check, format!("{} samples in {lives} lives: not one whole life", mine.len()), false);
        return;
    }
    let (from, to) = (mine[0].at, mine[mine.len() - 1].at);
    let warm = (from + to) / 2.0;
    let second: Vec<(f64, u64)> = mine.iter().filter(|s| s.at >= warm).map(|s| (s.at, s.kib)).collect();
    let mut sorted: Vec<u64> = second.iter().map(|p| p.1).collect();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    let last = second.last().map_or(0, |p| p.1);
    let peak = mine.iter().map(|s| s.kib).max().unwrap_or(0);
    let slope = slope_mib_per_min(&second);
    // The curve's shape: the median of each tenth of the run, to tell a warm-up that levels
    // off from a steady climb.
    let tenths: Vec<String> = (0..10)
        .filter_map(|i| {
            let (a, b) = (from + (to - from) * i as f64 / 10.0, from + (to - from) * (i + 1) as f64 / 10.0);
            let mut part: Vec<u64> = mine.iter().filter(|s| s.at >= a && (s.at < b || i == 9)).map(|s| s.kib).collect();
            part.sort_unstable();
            part.get(part.len() / 2).map(|k| format!("{:.0}", *k as f64 / 1024.0))
        })
        .collect();
    let ok = if long_run {
        slope <= 0.5 && last as f64 <= 1.2 * median as f64
    } else {
        last as f64 <= 1.5 * median as f64 && last <= median + 64 * 1024
    };
    let mib = |k: u64| k as f64 / 1024.0;
    report.row(
        &check,
        format!(
            "{} samples over {:.0}–{:.0} s (by tenths {} MiB); after warm-up (from {warm:.0} s) median {:.1} MiB, last {:.1} MiB, slope {slope:+.2} MiB/min; first {:.1}, peak {:.1} MiB ({} rule)",
            mine.len(),
            from,
            to,
            tenths.join(" "),
            mib(median),
            mib(last),
            mib(mine[0].kib),
            mib(peak),
            if long_run { "long-run" } else { "short-run, lenient" }
        ),
        ok,
    );
}

// ---------------------------------------------------------------------------------------
// The run.

#[derive(Clone, Copy, Debug)]
enum Fault {
    Kill9(&'static str),
    /// SIGTERM, as services.sh stops it, and start again.
    ClickHouseOutage,
    /// SIGKILL, and start again: parts written without their final rename, a crash.
    ClickHouseKill,
    /// SIGSTOP, SIGCONT after a while: connections accepted and never answered.
    ClickHouseFreeze,
    BrokerFreeze,
    /// SIGKILL of the durable broker under load, and start again on its storage.
    BrokerKill,
    AddReplica,
    RemoveReplica,
    RestartIngest,
}

const SCHEDULE: [Fault; 14] = [
    Fault::Kill9("writer"),
    Fault::ClickHouseOutage,
    Fault::Kill9("assembler"),
    Fault::AddReplica,
    Fault::BrokerFreeze,
    Fault::Kill9("logminer"),
    Fault::BrokerKill,
    Fault::RestartIngest,
    Fault::ClickHouseFreeze,
    Fault::Kill9("notifier"),
    Fault::RemoveReplica,
    Fault::ClickHouseKill,
    Fault::Kill9("ingest"),
    Fault::Kill9("api"),
];

/// The loadgen report (`--json`): what it was acknowledged, with the identities of what
/// its acknowledged requests carried (`--acked-ids`).
#[derive(Default, serde::Deserialize)]
struct LoadgenReport {
    requests: u64,
    ok: u64,
    spans: u64,
    logs: u64,
    #[serde(skip)]
    acked_spans: BTreeSet<(String, String)>,
    #[serde(skip)]
    acked_logs: BTreeSet<u64>,
}

impl LoadgenReport {
    /// Reads the `--acked-ids` file into the report.
    fn read_ids(&mut self, path: &Path) {
        for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts[..] {
                ["span", trace, span] => {
                    self.acked_spans.insert((trace.to_string(), span.to_string()));
                }
                ["log", id] => {
                    self.acked_logs.extend(u64::from_str_radix(id, 16).ok());
                }
                _ => {}
            }
        }
    }
}

/// Loadgen's services (`svc-<n>`), as a condition on `service`.
const LOADGEN_SERVICES: &str = "service LIKE 'svc-%'";

async fn run_soak(traffic: Duration) {
    let started = Instant::now();
    let started_ns = tayga::store::now_ns();
    let dir = tempfile::Builder::new().prefix("tayga-soak-").tempdir().unwrap();
    let keep = std::env::var("TAYGA_SOAK_KEEP").is_ok();
    let ch = PrivateClickHouse::start();
    let mut broker = OwnBroker::start_durable();
    let mut env = TestEnv::new("soak");
    env.config.clickhouse.url = ch.url();
    env.config.kafka.brokers = broker.address();
    let store = env.store();
    let limit = 4 << 20;

    // Targets: the flaky one's phases divide the traffic time in five.
    let fifth = traffic.as_secs_f64() / 5.0;
    let healthy = hook(started, Arc::new(|_| Phase::Healthy)).await;
    let traffic_clock: Arc<std::sync::OnceLock<f64>> = Arc::default();
    let clock = traffic_clock.clone();
    let flaky_phase = move |t: f64| match clock.get().map(|start| ((t - start) / fifth).floor() as i64) {
        None | Some(i64::MIN..=0) => Phase::Healthy,
        Some(1) => Phase::Dead,
        Some(2) => Phase::Unavailable,
        Some(3) => Phase::TooMany,
        Some(_) => Phase::Recovered,
    };
    let flaky = hook(started, Arc::new(flaky_phase)).await;
    let targets = format!(r#"[{{name="healthy", url="{}"}}, {{name="flaky", url="{}"}}]"#, healthy.url, flaky.url);

    let mut p = Pipeline::new(env, dir.path(), &targets);
    p.vars.push(("TAYGA_INGEST_MAX_BODY_BYTES".into(), limit.to_string()));
    // The scripted new path must be judged within the run: an endpoint is warm after a
    // minute and 40 traces (the own client sends 240 a minute), not 30 minutes and 200.
    p.vars.push(("TAYGA_LOGMINER_SHAPES_WARMUP_MIN".into(), "1".into()));
    p.vars.push(("TAYGA_LOGMINER_SHAPES_WARMUP_TRACES".into(), "40".into()));
    for name in DAEMONS.iter().chain(&LONG_LIVED) {
        p.start(name);
    }
    let base = format!("http://{}", p.ingest_http);
    let long_base = format!("http://{}", p.metrics_addr("ingest-long"));
    let long_api = format!("http://{}", p.metrics_addr("api-long"));
    for (url, what) in [
        (format!("{base}/health"), "ingest"),
        (format!("{long_base}/health"), "ingest-long"),
        (format!("http://{}/health", p.var("TAYGA_API_LISTEN_ADDR")), "the api"),
        (format!("{long_api}/health"), "api-long"),
    ] {
        assert!(wait_http_ok(&url, Duration::from_secs(60)).await, "{what} did not answer");
    }
    let mut timeline = Timeline::default();
    timeline.events.push((elapsed_secs(started), "pipeline up".into()));

    // Feeders.
    let traffic_start = Instant::now();
    let setup = elapsed_secs(started);
    traffic_clock.set(setup).unwrap();
    let until = traffic_start + traffic;
    let acked: Arc<Mutex<Acked>> = Arc::default();
    let new_every = (traffic.as_secs() / 40).clamp(4, 40);
    // The spike's burst and the new path come after a minute of traffic (a spike needs a
    // minute of its template before it, a new path a warm endpoint), early enough to be
    // raised and delivered before the traffic ends.
    let script = Script {
        spike_at: traffic_start + traffic.mul_f64(0.45).max(Duration::from_secs(65)),
        new_path_at: traffic_start + traffic.mul_f64(0.55).max(Duration::from_secs(75)),
    };
    let own = tokio::spawn(own_client_scripted(base.clone(), until, new_every, limit, acked.clone(), Some(script)));
    let clock = RunClock { started_ns, traffic_start_ns: tayga::store::now_ns() };
    let loadgen_out = dir.path().join("loadgen.json");
    let loadgen_ids = dir.path().join("loadgen-ids.txt");
    let mut loadgen = ChildGuard::spawn(
        p.env
            .tayga()
            .args([
                "loadgen",
                "--json",
                "--endpoint",
                &long_base,
                "--rate",
                "4",
                "--concurrency",
                "2",
                "--services",
                "2",
            ])
            .arg("--acked-ids")
            .arg(&loadgen_ids)
            .args(["--traces-per-request", "5", "--spans-per-trace", "4", "--logs-per-request", "10"])
            .args(["--duration", &format!("{}s", traffic.as_secs())])
            .stdout(std::fs::File::create(&loadgen_out).unwrap())
            .stderr(Stdio::null()),
        "tayga loadgen",
    );
    let sdk_out = dir.path().join("sdk.txt");
    let mut sdk = ChildGuard::spawn(
        Command::new("python3")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/soak_feed.py"))
            .args(["grpc", &format!("http://{}", p.ingest_grpc), SDK_SERVICE, &traffic.as_secs().to_string(), "0.5"])
            .arg(&sdk_out)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("sdk.err")).unwrap()),
        "the OpenTelemetry SDK client",
    );
    let rss: Arc<Mutex<Vec<RssSample>>> = Arc::default();
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampler =
        tokio::spawn(sample_rss(p.pids.clone(), stop_sampling.clone(), rss.clone(), started, Some(long_api.clone())));

    // Faults, one every `gap`, in cycles of the whole schedule.
    let cycles = (traffic.as_secs_f64() / 300.0).floor().max(1.0) as usize;
    let steps = SCHEDULE.len() * cycles;
    let gap = traffic.as_secs_f64() / (steps + 1) as f64;
    let outage = (gap * 0.5).clamp(4.0, 20.0);
    let mut unexpected_exits = Vec::new();
    for step in 0..steps {
        let due = traffic_start + Duration::from_secs_f64(gap * (step + 1) as f64);
        while Instant::now() < due {
            tokio::time::sleep(Duration::from_millis(200)).await;
            for name in p.exited() {
                unexpected_exits.push(format!("{name} exited by itself at {:.0} s", elapsed_secs(started)));
                p.kill9(&name);
                p.start(&name);
            }
        }
        let fault = SCHEDULE[step % SCHEDULE.len()];
        let at = elapsed_secs(started);
        let what = match fault {
            Fault::Kill9(name) => {
                p.kill9(name);
                if name == "notifier" {
                    timeline.notifier_kills.push(at);
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                p.start(name);
                format!("kill -9 {name}, restarted after 2 s")
            }
            Fault::ClickHouseOutage => {
                ch.down();
                tokio::time::sleep(Duration::from_secs_f64(outage)).await;
                let back = clickhouse_back(&ch).await;
                format!("ClickHouse stopped for {outage:.0} s (answering again {back:.0} s after the start)")
            }
            Fault::ClickHouseKill => {
                ch.kill();
                tokio::time::sleep(Duration::from_secs(2)).await;
                let back = clickhouse_back(&ch).await;
                format!("ClickHouse kill -9, restarted after 2 s (answering again {back:.0} s after the start)")
            }
            Fault::ClickHouseFreeze => {
                ch.signal("STOP");
                tokio::time::sleep(Duration::from_secs_f64(outage)).await;
                ch.signal("CONT");
                format!("ClickHouse SIGSTOP for {outage:.0} s, SIGCONT")
            }
            Fault::BrokerKill => {
                broker.kill();
                tokio::time::sleep(Duration::from_secs_f64(outage)).await;
                let restart = Instant::now();
                broker.restart();
                format!(
                    "broker kill -9 under load, restarted after {outage:.0} s (listening {:.1} s later)",
                    elapsed_secs(restart)
                )
            }
            Fault::BrokerFreeze => {
                broker.signal("STOP");
                tokio::time::sleep(Duration::from_secs_f64(outage)).await;
                broker.signal("CONT");
                format!("broker SIGSTOP for {outage:.0} s, SIGCONT")
            }
            Fault::AddReplica => {
                p.start("logminer-b");
                "logminer replica soak-b added".to_string()
            }
            Fault::RemoveReplica => {
                let clean = p.stop("logminer-b");
                format!("logminer replica soak-b removed (SIGTERM, exit {})", if clean { "0" } else { "not clean" })
            }
            Fault::RestartIngest => {
                let clean = p.stop("ingest");
                p.start("ingest");
                format!("ingest restarted mid-load (SIGTERM{})", if clean { ", exit 0" } else { ", not clean" })
            }
        };
        timeline.events.push((at, what));
    }
    for phase in [Phase::Dead, Phase::Unavailable, Phase::TooMany, Phase::Recovered] {
        let at = setup + fifth * (phase as u8) as f64;
        timeline.events.push((at, format!("flaky target turns {}", phase.name())));
    }

    // Traffic ends; the clients finish their last batches.
    own.await.unwrap();
    {
        let a = acked.lock().unwrap();
        if let Some((_, at)) = a.spike_burst {
            timeline
                .events
                .push((setup + at, format!("scripted spike: {SPIKE_BURST} lines of {SPIKE_SERVICE} at once")));
        }
        if let Some((_, at)) = a.new_path {
            timeline.events.push((setup + at, format!("scripted new path: {NEW_EDGE} in half the own traces")));
        }
        timeline.events.sort_by(|x, y| x.0.total_cmp(&y.0));
    }
    let loadgen_status = tokio::task::block_in_place(|| loadgen.wait_within(Duration::from_secs(120)));
    let sdk_status = tokio::task::block_in_place(|| sdk.wait_within(Duration::from_secs(120)));
    let mut loadgen_report: LoadgenReport =
        serde_json::from_slice(&std::fs::read(&loadgen_out).unwrap_or_default()).unwrap_or_default();
    loadgen_report.read_ids(&loadgen_ids);
    timeline.events.push((elapsed_secs(started), "traffic ended".into()));

    // Settle: wait (bounded) until the reconciliation is clean or stops changing. The own
    // client has ended, so what it was acknowledged is final: taken out of its lock once.
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let sdk_acked = read_sdk(&sdk_out);
    let settle_deadline = Instant::now() + Duration::from_secs(if traffic.as_secs() > 600 { 300 } else { 90 });
    let mut report;
    loop {
        for name in p.exited() {
            unexpected_exits.push(format!("{name} exited by itself at {:.0} s", elapsed_secs(started)));
            p.kill9(&name);
            p.start(&name);
        }
        report = reconcile(&store, &acked, &sdk_acked, &loadgen_report, (&healthy, &flaky), &timeline, &clock).await;
        if report.failures().is_empty() || Instant::now() > settle_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    stop_sampling.store(true, Ordering::Relaxed);
    sampler.await.unwrap();

    // RSS, per daemon's last incarnation, after a warm-up of a third of its life (≥ 20 s).
    let samples = rss.lock().unwrap().clone();
    for name in DAEMONS {
        let Some(last) = samples.iter().filter(|s| s.daemon == name).map(|s| s.incarnation).max() else { continue };
        let life: Vec<&RssSample> = samples.iter().filter(|s| s.daemon == name && s.incarnation == last).collect();
        let span = life.last().map_or(0.0, |s| s.age);
        let warm = (span / 3.0).max(20.0);
        let after: Vec<u64> = life.iter().filter(|s| s.age >= warm).map(|s| s.kib).collect();
        let peak = samples.iter().filter(|s| s.daemon == name).map(|s| s.kib).max().unwrap_or(0);
        if after.len() < 3 {
            report.row(
                &format!("rss {name}"),
                format!("peak {} MiB; last life {span:.0} s (too short to judge growth)", peak / 1024),
                true,
            );
            continue;
        }
        let (first, last_kib, max) = (after[0], *after.last().unwrap(), *after.iter().max().unwrap());
        // Growth after warm-up: more than half again and more than 64 MiB.
        let grew = last_kib > first + first / 2 && last_kib > first + 64 * 1024;
        report.row(
            &format!("rss {name}"),
            format!(
                "after warm-up {} → {} MiB (max {}, peak of the run {}) over {:.0} s",
                first / 1024,
                last_kib / 1024,
                max / 1024,
                peak / 1024,
                span - warm
            ),
            !grew,
        );
    }
    for name in LONG_LIVED {
        long_life_row(&mut report, name, &samples, traffic >= LONG_RUN);
    }
    let tsv: String = samples.iter().map(|s| format!("{:.1}\t{}\t{}\n", s.at, s.daemon, s.kib)).collect();
    std::fs::write(dir.path().join("rss.tsv"), format!("seconds\tdaemon\tkib\n{tsv}")).unwrap();
    let a = &acked;
    let clients = format!(
        "own {} requests ({} retries, {} abandoned); loadgen {} of {} requests ok ({}); sdk exit {}",
        a.requests, a.retries, a.abandoned, loadgen_report.ok, loadgen_report.requests, loadgen_status, sdk_status
    );
    report.row("clients", clients, loadgen_status.success() && sdk_status.success());
    let bad = format!(
        "{} refused with 4xx, {} unanswered (daemon down), {} accepted {:?}",
        a.bad_refused,
        a.bad_unanswered,
        a.bad_accepted.len(),
        a.bad_accepted
    );
    report.row("bad input mixed in", bad, a.bad_accepted.is_empty() && a.bad_refused > 0);
    report.row("daemons that exited by themselves", format!("{:?}", unexpected_exits), unexpected_exits.is_empty());

    let mut table = String::new();
    writeln!(
        table,
        "\nsoak: {:.0} s of traffic, {:.0} s in all; logs in {}",
        traffic.as_secs_f64(),
        elapsed_secs(started),
        dir.path().display()
    )
    .unwrap();
    for (at, what) in &timeline.events {
        writeln!(table, "  {at:>7.1} s  {what}").unwrap();
    }
    table.push_str(&report.render());
    println!("{table}");
    std::fs::write(dir.path().join("report.txt"), &table).unwrap();
    let failures = report.failures();
    if !failures.is_empty() || keep {
        // Keep the daemons' logs for inspection.
        let kept = dir.keep();
        eprintln!("soak logs kept in {}", kept.display());
    }
    // Stop the daemons before the servers they use, and say how long the teardown takes.
    let teardown = Instant::now();
    let Pipeline { daemons, env, .. } = p;
    drop(daemons);
    let t1 = elapsed_secs(teardown);
    drop(env);
    let t2 = elapsed_secs(teardown);
    drop(broker);
    let t3 = elapsed_secs(teardown);
    drop(ch);
    println!("teardown took {:.1} s (daemons {t1:.1}, env {t2:.1}, broker {t3:.1})", elapsed_secs(teardown));
    assert!(failures.is_empty(), "the soak found discrepancies: {}", failures.join("; "));
}

/// Starts the soak's ClickHouse again and returns how long it took to answer. On a loaded
/// machine 18.16 can take longer than services.sh waits (60 s) to load its parts after a
/// stop; the server keeps starting, so wait for it (at most 5 minutes more) rather than
/// fail the run on the harness's own patience.
async fn clickhouse_back(ch: &PrivateClickHouse) -> f64 {
    let began = Instant::now();
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ch.up())).is_err() {
        let ping = format!("{}/ping", ch.url());
        assert!(wait_http_ok(&ping, Duration::from_secs(300)).await, "the soak's ClickHouse did not come back");
    }
    elapsed_secs(began)
}

fn read_sdk(path: &Path) -> SdkAcked {
    let mut spans: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    let mut logs = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let mut parts = line.splitn(3, ' ');
        let (Some(kind), Some(outcome), Some(rest)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let ok = outcome == "OK";
        match kind {
            "span" => {
                if let Some((trace, span)) = rest.split_once(' ') {
                    spans.entry(trace.to_string()).or_default().push((span.to_string(), ok));
                }
            }
            "log" => {
                let seen = logs.entry(rest.to_string()).or_insert(false);
                *seen |= ok;
            }
            _ => {}
        }
    }
    (spans, logs)
}

// ---------------------------------------------------------------------------------------
// Reconciliation.

#[derive(Default)]
pub(crate) struct Report {
    rows: Vec<(String, String, bool)>,
}

impl Report {
    pub(crate) fn row(&mut self, check: &str, value: String, ok: bool) {
        self.rows.push((check.to_string(), value, ok));
    }

    pub(crate) fn failures(&self) -> Vec<String> {
        self.rows.iter().filter(|(_, _, ok)| !ok).map(|(c, v, _)| format!("{c}: {v}")).collect()
    }

    pub(crate) fn render(&self) -> String {
        let width = self.rows.iter().map(|(c, _, _)| c.len()).max().unwrap_or(0);
        let mut out = String::new();
        writeln!(out, "  {:width$}  {:4}  value", "check", "ok").unwrap();
        for (check, value, ok) in &self.rows {
            writeln!(out, "  {check:width$}  {:4}  {value}", if *ok { "yes" } else { "NO" }).unwrap();
        }
        out
    }
}

/// The rows of `$row`'s table after `$rest`; a failed read (ClickHouse restarting) reads as
/// nothing, so the settle loop tries again.
macro_rules! fetch {
    ($store:expr, $row:ty, $rest:expr) => {
        $store.select_for_tests::<$row>(&$rest).fetch_all::<$row>().await.unwrap_or_default()
    };
}
pub(crate) use fetch;

type SdkAcked = (BTreeMap<String, Vec<(String, bool)>>, BTreeMap<String, bool>);

async fn reconcile(
    store: &Store,
    own: &Acked,
    (sdk_spans, sdk_logs): &SdkAcked,
    loadgen: &LoadgenReport,
    (healthy, flaky): (&Hook, &Hook),
    timeline: &Timeline,
    clock: &RunClock,
) -> Report {
    let mut r = Report::default();
    let services = |list: &[&str]| list.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(",");
    let traced = services(&[OWN_TRACE_SERVICES[0], OWN_TRACE_SERVICES[1], SDK_SERVICE, BAD_SERVICE]);
    let final_spans: Vec<SpanRow> = fetch!(store, SpanRow, format!("FINAL WHERE service IN ({traced})"));
    let raw_spans: Vec<SpanRow> = fetch!(store, SpanRow, format!("WHERE service IN ({traced})"));

    // Spans: every acknowledged one stored once.
    let mut want: BTreeSet<(String, String)> = own.spans.clone();
    let mut sdk_span_total = 0;
    for (trace, spans) in sdk_spans {
        for (span, ok) in spans {
            if *ok {
                want.insert((trace.clone(), span.clone()));
                sdk_span_total += 1;
            }
        }
    }
    let SpanTally { lost, doubled, .. } = tally_spans(&final_spans, &want);
    let raw_extra = raw_spans.len().saturating_sub(final_spans.len());
    r.row(
        "spans acknowledged (own + sdk)",
        format!("{} + {}: lost {lost}, doubled (FINAL) {doubled}; raw rows {} (+{raw_extra} not yet merged: re-reads after faults)", own.spans.len(), sdk_span_total, raw_spans.len()),
        lost == 0 && doubled == 0,
    );
    let bad_stored = final_spans.iter().filter(|s| s.service == BAD_SERVICE).count();
    r.row("bad input stored", format!("{bad_stored} spans"), bad_stored == 0);

    // Loadgen's spans by identity, as the harness's own: it wrote down what every
    // acknowledged request carried.
    let loadgen_final: Vec<SpanRow> = fetch!(store, SpanRow, format!("FINAL WHERE {LOADGEN_SERVICES}"));
    let SpanTally { lost, doubled, .. } = tally_spans(&loadgen_final, &loadgen.acked_spans);
    r.row(
        "loadgen spans acknowledged",
        format!(
            "{} ({} by its report): lost {lost}, doubled (FINAL) {doubled}; stored {} (FINAL)",
            loadgen.acked_spans.len(),
            loadgen.spans,
            loadgen_final.len()
        ),
        lost == 0 && doubled == 0 && loadgen.acked_spans.len() as u64 == loadgen.spans,
    );
    // Logs: stored once, and each has its hit.
    let logged = services(&[OWN_LOG_SERVICE, SPIKE_SERVICE, SDK_SERVICE]);
    let final_logs: Vec<LogRow> = fetch!(store, LogRow, format!("FINAL WHERE service IN ({logged})"));
    let raw_logs = fetch!(store, LogRow, format!("WHERE service IN ({logged})")).len();
    let by_body: BTreeMap<&str, Vec<&LogRow>> = final_logs.iter().fold(BTreeMap::new(), |mut m, l| {
        m.entry(l.body.as_str()).or_insert_with(Vec::new).push(l);
        m
    });
    let sdk_ok: Vec<&String> = sdk_logs.iter().filter(|(_, ok)| **ok).map(|(b, _)| b).collect();
    let want_logs: Vec<&String> = own.logs.iter().chain(sdk_ok.iter().copied()).collect();
    let lost_logs = want_logs.iter().filter(|b| !by_body.contains_key(b.as_str())).count();
    let doubled_logs = by_body.values().filter(|v| v.len() > 1).count();
    r.row(
        "logs acknowledged (own + sdk)",
        format!(
            "{} + {}: lost {lost_logs}, doubled (FINAL) {doubled_logs}; raw rows {raw_logs}",
            own.logs.len(),
            sdk_ok.len()
        ),
        lost_logs == 0 && doubled_logs == 0,
    );
    let hits: BTreeSet<u64> =
        fetch!(store, HitRow, format!("WHERE service IN ({logged})")).into_iter().map(|h| h.log_id).collect();
    let no_hit: Vec<&str> = want_logs
        .iter()
        .filter_map(|b| by_body.get(b.as_str()))
        .flatten()
        .filter(|l| !hits.contains(&l.log_id))
        .map(|l| l.body.as_str())
        .collect();
    r.row(
        "acknowledged logs with their hit",
        format!("{} of {}{}", want_logs.len() - no_hit.len(), want_logs.len(), first_few(&no_hit)),
        no_hit.is_empty() && lost_logs == 0,
    );
    let loadgen_logs: Vec<LogRow> = fetch!(store, LogRow, format!("FINAL WHERE {LOADGEN_SERVICES}"));
    let mut stored_logs: BTreeMap<u64, usize> = BTreeMap::new();
    for l in &loadgen_logs {
        *stored_logs.entry(l.log_id).or_default() += 1;
    }
    let lost_logs = loadgen.acked_logs.iter().filter(|id| !stored_logs.contains_key(id)).count();
    let doubled_logs = stored_logs.values().filter(|n| **n > 1).count();
    r.row(
        "loadgen logs acknowledged",
        format!(
            "{} ({} by its report): lost {lost_logs}, doubled (FINAL) {doubled_logs}; stored {} (FINAL)",
            loadgen.acked_logs.len(),
            loadgen.logs,
            loadgen_logs.len()
        ),
        lost_logs == 0 && doubled_logs == 0 && loadgen.acked_logs.len() as u64 == loadgen.logs,
    );

    // Raw rows: a re-read after a fault inserts a row again, which the table's merges fold
    // into one. Once merged (`OPTIMIZE … FINAL`), no extra row may remain.
    let mut unmerged = Vec::new();
    for table in ["spans", "logs"] {
        let _ = store.query_for_tests(&format!("OPTIMIZE TABLE {table} FINAL")).execute().await;
        let count = |rest: &'static str| {
            let sql = format!("SELECT count() FROM {table}{rest}");
            async move { store.query_for_tests(&sql).fetch_one::<u64>().await.unwrap_or(0) }
        };
        let (raw, merged) = (count("").await, count(" FINAL").await);
        unmerged.push((table, raw, merged));
    }
    r.row(
        "raw rows after OPTIMIZE … FINAL",
        unmerged
            .iter()
            .map(|(t, raw, merged)| format!("{t} {raw} raw / {merged} FINAL"))
            .collect::<Vec<_>>()
            .join(", "),
        unmerged.iter().all(|(_, raw, merged)| raw == merged),
    );

    // Stories: each acknowledged trace has one, complete.
    let stories = stories(store).await;
    let mut want_traces: BTreeMap<&str, u32> = own.traces.iter().map(|(t, n)| (t.as_str(), *n)).collect();
    for (trace, spans) in sdk_spans {
        if spans.iter().all(|(_, ok)| *ok) {
            want_traces.insert(trace.as_str(), spans.len() as u32);
        }
    }
    for (trace, _) in &loadgen.acked_spans {
        *want_traces.entry(trace.as_str()).or_default() += 1;
    }
    stories_row(&mut r, &stories, &want_traces);

    // Alerts and deliveries (docs/design.md#notifier).
    let alerts: Vec<AlertRow> = fetch!(store, AlertRow, "FINAL");
    let deliveries: Vec<DeliveryRow> = fetch!(store, DeliveryRow, "FINAL");
    alert_rows(&mut r, &alerts, own, healthy, timeline, clock);
    delivered_once_row(&mut r, "alerts delivered to the healthy target", &alerts, healthy, timeline);
    let now = tayga::store::now_ns();
    // The flaky target: every row final, and its status agrees with what the target answered.
    let flaky_ok: BTreeSet<u64> = flaky.receipts.lock().unwrap().iter().filter(|r| r.ok).map(|r| r.alert_id).collect();
    let flaky_rows: Vec<&DeliveryRow> = deliveries.iter().filter(|d| d.target == "flaky").collect();
    let status_count = |s: &str| flaky_rows.iter().filter(|d| d.status == s).count();
    let pending =
        flaky_rows.iter().filter(|d| d.status == "pending").map(|d| format!("{:016x}", d.alert_id)).collect::<Vec<_>>();
    let disagree: Vec<String> = flaky_rows
        .iter()
        .filter(|d| (d.status == "delivered") != flaky_ok.contains(&d.alert_id) && d.status != "pending")
        .map(|d| format!("{:016x} {} (target saw a 2xx: {})", d.alert_id, d.status, flaky_ok.contains(&d.alert_id)))
        .collect();
    let missing_rows = alerts
        .iter()
        .filter(|a| now.saturating_sub(a.last_at) <= MAX_AGE_NS && !flaky_rows.iter().any(|d| d.alert_id == a.alert_id))
        .count();
    r.row(
        "flaky target's rows",
        format!(
            "{} delivered, {} failed, {} pending{}, {} without a row, {} disagreeing with the target{}",
            status_count("delivered"),
            status_count("failed"),
            pending.len(),
            first_few(&pending),
            missing_rows,
            disagree.len(),
            first_few(&disagree)
        ),
        pending.is_empty() && missing_rows == 0 && disagree.is_empty(),
    );
    let healthy_rows = deliveries.iter().filter(|d| d.target == "healthy").collect::<Vec<_>>();
    let not_delivered = healthy_rows.iter().filter(|d| d.status != "delivered").count();
    r.row(
        "healthy target's rows",
        format!("{} rows, {not_delivered} not delivered", healthy_rows.len()),
        not_delivered == 0,
    );
    r
}

/// The run's clock in the store's time: when it started and when the traffic did.
struct RunClock {
    started_ns: u64,
    traffic_start_ns: u64,
}

impl RunClock {
    /// Seconds into the run of a store time.
    fn secs(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.started_ns) as f64 / 1e9
    }
}

/// Background spikes come only from the ramp: a template's baseline is the mean of its last
/// 30 minutes, the minutes before the run counting 0, so a steady template's k-th minute
/// is hot (≥ 5 × baseline = k/6 of its own rate) until about its sixth minute, and a
/// noisy one (loadgen picks its templates at random) a little later. After this many
/// minutes of traffic a minute would have to be 5/3 of its template's mean.
const RAMP_MIN: u64 = 10;

/// The rows "each alert the scripted traffic must raise is raised once and delivered once
/// to the healthy target" (one per expectation), and "the other alerts are of the kinds
/// the background traffic may raise".
fn alert_rows(r: &mut Report, alerts: &[AlertRow], own: &Acked, healthy: &Hook, timeline: &Timeline, clock: &RunClock) {
    let mut receipts: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for receipt in healthy.receipts() {
        receipts.entry(receipt.alert_id).or_default().push(receipt.at);
    }
    // How the healthy target got one alert, by the delivery rules (docs/notifier.md, "What
    // happens to each record"; docs/design.md#notifier-twice), and whether that is right.
    let delivery = |a: &AlertRow| -> (String, bool) {
        let stored = clock.secs(a.stored_ns);
        let restarted_after = |from: f64, to: f64| timeline.notifier_kills.iter().any(|k| *k >= from && *k <= to);
        match receipts.get(&a.alert_id).map(Vec::as_slice) {
            Some([at]) if restarted_after(stored - 2.0, *at) => {
                (format!("delivered once at {at:.0} s, after a notifier kill -9 (raised at {stored:.0} s)"), true)
            }
            Some([at]) => (format!("delivered once at {at:.0} s (raised at {stored:.0} s)"), true),
            Some([first, second]) if restarted_after(*first, *second) => (
                format!("delivered at {first:.0} s and again at {second:.0} s across a notifier kill -9 (between a 2xx and its row write)"),
                true,
            ),
            Some(many) if !many.is_empty() => (format!("delivered {} times", many.len()), false),
            _ if tayga::store::now_ns().saturating_sub(a.last_at) > MAX_AGE_NS => {
                ("not delivered: stale (older than max_age_secs)".into(), true)
            }
            _ => ("NOT delivered".into(), false),
        }
    };
    // One expectation: exactly one alert, of `want_id` when it is known beforehand.
    let expect = |r: &mut Report, check: &str, what: String, found: Vec<&AlertRow>, want_id: Option<u64>| {
        let (value, ok) = match (found.as_slice(), want_id) {
            ([a], Some(id)) if a.alert_id != id => {
                (format!("raised once, as {:016x}, not the expected {id:016x}", a.alert_id), false)
            }
            ([a], _) => {
                let (delivered, ok) = delivery(a);
                (
                    format!(
                        "raised once ({:016x}{}), {delivered}",
                        a.alert_id,
                        if want_id.is_some() { ", the expected id" } else { "" }
                    ),
                    ok,
                )
            }
            (none, _) => (
                format!(
                    "raised {} times{}",
                    none.len(),
                    first_few(&none.iter().map(|a| format!("{:016x}", a.alert_id)).collect::<Vec<_>>())
                ),
                false,
            ),
        };
        r.row(check, format!("{what}: {value}"), ok);
    };

    // Each acknowledged milestone line is a template of its own (its run of `reached` sets
    // its length): one new_template alert each. A batch given up on may still have been
    // stored, and its milestone announced.
    let reached = |text: &str| text.split_whitespace().filter(|w| *w == "reached").count();
    let acked_milestones: BTreeSet<usize> =
        own.logs.iter().filter(|b| b.starts_with("soak milestone")).map(|b| reached(b)).collect();
    let milestone =
        |a: &&AlertRow| a.kind == "new_template" && a.service == OWN_LOG_SERVICE && a.template.contains("milestone");
    let mut per_milestone: BTreeMap<usize, Vec<&AlertRow>> = BTreeMap::new();
    for a in alerts.iter().filter(milestone) {
        per_milestone.entry(reached(&a.template)).or_default().push(a);
    }
    let missing = acked_milestones.iter().filter(|k| !per_milestone.contains_key(k)).count();
    let twice = per_milestone.values().filter(|v| v.len() > 1).count();
    let extra = per_milestone.keys().filter(|k| !acked_milestones.contains(k)).count();
    let (mut once, mut undelivered) = (0, Vec::new());
    for a in per_milestone.values().flatten() {
        match delivery(a) {
            (_, true) => once += 1,
            (how, false) => undelivered.push(format!("{:016x} {how}", a.alert_id)),
        }
    }
    r.row(
        "expected: new_template per milestone",
        format!(
            "{} acknowledged milestones: {} raised once, {missing} missing, {twice} twice, {extra} not acknowledged; to the healthy target {once} delivered by the rules, {} not{}",
            acked_milestones.len(),
            per_milestone.values().filter(|v| v.len() == 1).count(),
            undelivered.len(),
            first_few(&undelivered)
        ),
        missing == 0 && twice == 0 && (extra == 0 || own.abandoned > 0) && undelivered.is_empty(),
    );

    // The spike's template: announced once, when its first probe line was mined.
    let probe_template: Vec<&AlertRow> =
        alerts.iter().filter(|a| a.kind == "new_template" && a.service == SPIKE_SERVICE).collect();
    let template_id = probe_template.first().map(|a| a.template_id);
    expect(
        r,
        "expected: new_template of the spike's probe",
        format!("{SPIKE_SERVICE}'s one template"),
        probe_template,
        None,
    );

    // The spike: the burst's minute is the first hot one (the probes' minutes never reach
    // spike_min_count), so its id is known: (spike, the probe template, that minute).
    let spikes: Vec<&AlertRow> = alerts.iter().filter(|a| a.kind == "spike" && a.service == SPIKE_SERVICE).collect();
    match own.spike_burst {
        Some((ns, at)) => {
            let minute = ns / tayga::time::MINUTE_NS * tayga::time::MINUTE_NS;
            let want = template_id.map(|t| tayga::identity::alert_id(AlertKind::Spike, t, minute));
            let what = format!(
                "spike of {SPIKE_SERVICE}, a burst of {SPIKE_BURST} lines sent {at:.0} s into the traffic, hot from {}",
                tayga::time::rfc3339(minute)
            );
            expect(r, "expected: spike", what, spikes, want.or(Some(0)));
        }
        None => r.row("expected: spike", "the burst was never acknowledged".into(), false),
    }

    // The new path: its id names the endpoint and the edge it never took before.
    let new_shapes: Vec<&AlertRow> = alerts.iter().filter(|a| a.kind == "new_shape").collect();
    let want = tayga::identity::alert_id(
        AlertKind::NewShape,
        tayga::identity::new_path_subject(OWN_TRACE_SERVICES[0], "checkout", &[NEW_EDGE.to_string()]),
        0,
    );
    match own.new_path {
        Some((_, at)) => {
            let what = format!(
                "new_shape of {} checkout, +{NEW_EDGE} from {at:.0} s into the traffic ({} traces acknowledged)",
                OWN_TRACE_SERVICES[0], own.new_path_traces
            );
            expect(r, "expected: new_shape", what, new_shapes, Some(want));
        }
        None => r.row("expected: new_shape", "no trace of the new path was acknowledged".into(), false),
    }

    // Everything else came from the background traffic. It may raise: a new_template for
    // each template's first line (once by its id), and ramp spikes of the steady
    // templates; no other kind (no silence: no steady template stops while its service
    // logs; no shape alert: the other endpoints keep their shapes, and no duration moves
    // by 100 ms).
    let background_services = |s: &str| s == OWN_LOG_SERVICE || s == SDK_SERVICE || s.starts_with("svc-");
    let ramp_end = clock.traffic_start_ns + RAMP_MIN * tayga::time::MINUTE_NS;
    let scripted = |a: &AlertRow| {
        milestone(&a)
            || a.service == SPIKE_SERVICE && matches!(a.kind.as_str(), "new_template" | "spike")
            || a.kind == "new_shape"
    };
    let (mut templates, mut ramp_spikes, mut unexpected) = (BTreeMap::<&str, usize>::new(), 0, Vec::new());
    for a in alerts.iter().filter(|a| !scripted(a)) {
        match a.kind.as_str() {
            "new_template" if background_services(&a.service) => *templates.entry(a.service.as_str()).or_default() += 1,
            "spike" if background_services(&a.service) && a.first_at < ramp_end => ramp_spikes += 1,
            _ => unexpected.push(format!(
                "{} {} {:?} from {:.0} s",
                a.kind,
                a.service,
                a.template,
                clock.secs(a.first_at)
            )),
        }
    }
    r.row(
        "background alerts",
        format!(
            "new_template {templates:?}; spike {ramp_spikes} (all hot within the first {RAMP_MIN} minutes of traffic: the ramp of a 30-minute baseline); unexpected {}{}",
            unexpected.len(),
            first_few(&unexpected)
        ),
        unexpected.is_empty(),
    );
}

pub(crate) fn first_few<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = items.iter().take(3).map(|i| i.to_string()).collect();
    format!(" ({}{})", shown.join(", "), if items.len() > 3 { ", …" } else { "" })
}

/// Alerts older than this when reconciled are the notifier's to skip as stale (the
/// default `max_age_secs`), not to deliver.
const MAX_AGE_NS: u64 = 3600 * 1_000_000_000;

/// How the acknowledged spans were stored (deduplicated reads).
pub(crate) struct SpanTally {
    /// Acknowledged, and not stored.
    pub(crate) lost: usize,
    /// Stored more than once in a `FINAL` read.
    pub(crate) doubled: usize,
}

pub(crate) fn tally_spans(final_spans: &[SpanRow], want: &BTreeSet<(String, String)>) -> SpanTally {
    let mut stored: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for s in final_spans {
        *stored.entry((s.trace_id.as_str(), s.span_id.as_str())).or_default() += 1;
    }
    SpanTally {
        lost: want.iter().filter(|(t, s)| !stored.contains_key(&(t.as_str(), s.as_str()))).count(),
        doubled: stored.values().filter(|n| **n > 1).count(),
    }
}

/// The row "each acknowledged trace (id → its span count) has one complete story".
pub(crate) fn stories_row(r: &mut Report, stories: &BTreeMap<String, StoryRow>, want_traces: &BTreeMap<&str, u32>) {
    let missing: Vec<&str> = want_traces.keys().filter(|t| !stories.contains_key(**t)).copied().collect();
    let incomplete: Vec<String> = want_traces
        .iter()
        .filter_map(|(t, n)| {
            stories.get(*t).filter(|s| s.span_count != *n).map(|s| format!("{t}: {} of {n}", s.span_count))
        })
        .collect();
    r.row(
        "acknowledged traces with one complete story",
        format!(
            "{} traces: {} without a story{}, {} incomplete{}",
            want_traces.len(),
            missing.len(),
            first_few(&missing),
            incomplete.len(),
            first_few(&incomplete)
        ),
        missing.is_empty() && incomplete.is_empty(),
    );
}

/// The row "every alert was delivered exactly once to `hook`": an alert received twice, in
/// two receipts on either side of a notifier kill -9, is the one allowed case (docs/design.md#notifier-twice) (a kill
/// between the 2xx and the row's write), counted apart.
pub(crate) fn delivered_once_row(r: &mut Report, check: &str, alerts: &[AlertRow], hook: &Hook, timeline: &Timeline) {
    let received = hook.receipts.lock().unwrap().clone();
    let mut times: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for receipt in received.iter().filter(|r| r.ok) {
        times.entry(receipt.alert_id).or_default().push(receipt.at);
    }
    let now = tayga::store::now_ns();
    let (mut once, mut stale, mut undelivered, mut explained, mut doubled_alerts) = (0, 0, Vec::new(), 0, Vec::new());
    for alert in alerts {
        match times.get(&alert.alert_id).map(Vec::as_slice) {
            Some([_]) => once += 1,
            None | Some([]) if now.saturating_sub(alert.last_at) > MAX_AGE_NS => stale += 1,
            None | Some([]) => undelivered.push(format!("{:016x}", alert.alert_id)),
            Some(many) => {
                // docs/design.md#notifier-twice: a hard kill between the 2xx and the row write sends it again.
                let (first, last) = (many[0], many[many.len() - 1]);
                if many.len() == 2 && timeline.notifier_kills.iter().any(|k| *k >= first && *k <= last) {
                    explained += 1;
                } else {
                    doubled_alerts.push(format!("{:016x} ×{}", alert.alert_id, many.len()));
                }
            }
        }
    }
    r.row(
        check,
        format!(
            "once {once}, twice across a notifier kill -9 (between a 2xx and its row write) {explained}, stale {stale}, undelivered {}{}, doubled {}{}",
            undelivered.len(),
            first_few(&undelivered),
            doubled_alerts.len(),
            first_few(&doubled_alerts)
        ),
        undelivered.is_empty() && doubled_alerts.is_empty(),
    );
}
