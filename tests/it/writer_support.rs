//! Shared by the writer tests: OTLP data with known identities, a producer that writes
//! signals records exactly as ingest does (`bus::record::headers`, OTLP protobuf value, keyed
//! by trace id), the writer in-process or as the real binary, and reads of counts, lag and
//! metrics.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use tayga::config::Config;
use tayga::daemon::Shutdown;
use tayga::otlp::{hex_id, string_attr, ExportLogsServiceRequest, ExportTraceServiceRequest};
use tayga::store::{read, Store};
use tayga::wire::record::{headers, SignalKind};

pub use crate::common::{free_addr, resource, PrivateClickHouse, TestEnv};

pub const INGEST_NS: u64 = 1_700_000_000_000_000_000;

/// Nanoseconds of "now" rounded to the second, so rows land in today's partition.
pub fn base_ns() -> u64 {
    tayga::store::now_ns() / 1_000_000_000 * 1_000_000_000
}

/// The 16-byte id of trace `i` (never all zero).
pub fn trace_id(i: u32) -> Vec<u8> {
    let mut id = vec![0xa1, 0, 0, 0, 0, 0, 0, 0];
    id.extend_from_slice(&(u64::from(i) + 1).to_be_bytes());
    id
}

/// Trace `i` with `spans` spans (a root and its children) from two services.
pub fn trace(i: u32, spans: u32, start_ns: u64) -> ExportTraceServiceRequest {
    let tid = trace_id(i);
    let span = |j: u32| Span {
        trace_id: tid.clone(),
        span_id: [(i + 1).to_be_bytes(), (j + 1).to_be_bytes()].concat(),
        parent_span_id: if j == 0 { vec![] } else { [(i + 1).to_be_bytes(), 1u32.to_be_bytes()].concat() },
        name: format!("op-{j}"),
        kind: 2,
        start_time_unix_nano: start_ns + u64::from(j) * 1_000,
        end_time_unix_nano: start_ns + u64::from(j) * 1_000 + 500,
        attributes: vec![string_attr("http.route", &format!("/r/{i}/{j}"))],
        ..Default::default()
    };
    let (front, back): (Vec<u32>, Vec<u32>) = (0..spans).partition(|j| j % 2 == 0);
    ExportTraceServiceRequest {
        resource_spans: vec![
            ResourceSpans {
                resource: resource("frontend"),
                scope_spans: vec![ScopeSpans { spans: front.into_iter().map(span).collect(), ..Default::default() }],
                ..Default::default()
            },
            ResourceSpans {
                resource: resource("backend"),
                scope_spans: vec![ScopeSpans { spans: back.into_iter().map(span).collect(), ..Default::default() }],
                ..Default::default()
            },
        ]
        .into_iter()
        .filter(|rs| !rs.scope_spans[0].spans.is_empty())
        .collect(),
    }
}

/// `n` distinct logs of trace `i`.
pub fn logs(i: u32, n: u32, time_ns: u64) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource("backend"),
            scope_logs: vec![ScopeLogs {
                log_records: (0..n)
                    .map(|j| LogRecord {
                        time_unix_nano: time_ns + u64::from(j),
                        severity_number: 9,
                        severity_text: "INFO".into(),
                        body: Some(AnyValue {
                            value: Some(any_value::Value::StringValue(format!("request {i} step {j} done"))),
                        }),
                        trace_id: trace_id(i),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

pub fn producer(env: &TestEnv) -> FutureProducer {
    tayga::bus::client_config(&env.config.kafka)
        .set("acks", "all")
        .set("message.timeout.ms", "10000")
        .set("linger.ms", "5")
        .create()
        .expect("a producer")
}

/// Produces one record on `<prefix>.signals` and waits for the broker's ack.
pub async fn send_raw(
    producer: &FutureProducer,
    env: &TestEnv,
    key: &str,
    headers: Option<rdkafka::message::OwnedHeaders>,
    value: &[u8],
) {
    let topic = env.config.names().signals;
    let mut record = FutureRecord::to(&topic).key(key).payload(value);
    if let Some(h) = headers {
        record = record.headers(h);
    }
    producer.send(record, Duration::from_secs(10)).await.map_err(|(e, _)| e).expect("the broker takes the record");
}

pub async fn send_trace(producer: &FutureProducer, env: &TestEnv, request: &ExportTraceServiceRequest) {
    let key = hex_id(&request.resource_spans[0].scope_spans[0].spans[0].trace_id);
    send_raw(producer, env, &key, Some(headers(SignalKind::Traces, INGEST_NS)), &request.encode_to_vec()).await;
}

pub async fn send_logs(producer: &FutureProducer, env: &TestEnv, request: &ExportLogsServiceRequest) {
    let key = hex_id(&request.resource_logs[0].scope_logs[0].log_records[0].trace_id);
    send_raw(producer, env, &key, Some(headers(SignalKind::Logs, INGEST_NS)), &request.encode_to_vec()).await;
}

/// Sends `count` records from index `from`: each `log_every`-th is a log record (3 logs),
/// the others traces of `spans` spans. Returns (spans, logs) sent.
pub async fn send_mix(
    producer: &FutureProducer,
    env: &TestEnv,
    from: u32,
    count: u32,
    spans: u32,
    log_every: u32,
) -> (u64, u64) {
    let base = base_ns();
    let (mut s, mut l) = (0, 0);
    let mut sends = Vec::new();
    for i in from..from + count {
        if log_every > 0 && i % log_every == 0 {
            let r = logs(i, 3, base + u64::from(i));
            l += 3;
            let key = hex_id(&trace_id(i));
            sends.push((key, SignalKind::Logs, r.encode_to_vec()));
        } else {
            let r = trace(i, spans, base + u64::from(i) * 1_000_000);
            s += u64::from(spans);
            sends.push((hex_id(&trace_id(i)), SignalKind::Traces, r.encode_to_vec()));
        }
    }
    // Many in flight at once: each waits only for its own ack.
    let topic = env.config.names().signals;
    let futures: Vec<_> = sends
        .iter()
        .map(|(key, kind, value)| {
            producer.send(
                FutureRecord::to(&topic).key(key).payload(value).headers(headers(*kind, INGEST_NS)),
                Duration::from_secs(10),
            )
        })
        .collect();
    for f in futures {
        f.await.map_err(|(e, _)| e).expect("the broker takes the record");
    }
    (s, l)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub spans: u64,
    pub spans_raw: u64,
    pub logs: u64,
    pub logs_raw: u64,
}

pub async fn counts(store: &Store) -> Option<Counts> {
    Some(Counts {
        spans: read::count_spans_dedup(store).await.ok()?,
        spans_raw: read::count_spans_raw(store).await.ok()?,
        logs: read::count_logs_dedup(store).await.ok()?,
        logs_raw: read::count_logs_raw(store).await.ok()?,
    })
}

/// The writer group's lag on the signals topic (None if the broker does not answer).
pub async fn writer_lag(config: &Config) -> Option<i64> {
    let names = config.names();
    let status = tayga::bus::topics::describe_topics(&config.kafka, &names).await.ok()?;
    let signals = status.into_iter().find(|t| t.topic == names.signals)?;
    signals.groups.into_iter().find(|g| g.group == names.writer_group).map(|g| g.lag)
}

/// The records held by the signals topic.
pub async fn topic_records(config: &Config) -> i64 {
    let names = config.names();
    let status = tayga::bus::topics::describe_topics(&config.kafka, &names).await.expect("describe topics");
    status.into_iter().find(|t| t.topic == names.signals).map_or(0, |t| t.records)
}

/// Sets the writer group's committed offsets back to the start of every partition, as
/// `kafka-consumer-groups --reset-offsets --to-earliest` does (the writer must be stopped).
pub fn reset_writer_group(config: &Config) {
    let names = config.names();
    let partitions = config.kafka.partitions;
    let consumer: BaseConsumer = tayga::bus::client_config(&config.kafka)
        .set("group.id", &names.writer_group)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        let (low, _) = consumer.fetch_watermarks(&names.signals, p, Duration::from_secs(10)).unwrap();
        tpl.add_partition_offset(&names.signals, p, Offset::Offset(low)).unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).expect("committing the reset offsets");
}

/// A free loopback address for `/metrics`.
pub use crate::common::{metric, scrape};

/// The writer running in this process (`tayga::daemon::writer::run`).
pub struct InProcess {
    pub shutdown: Shutdown,
    pub task: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub metrics_addr: String,
}

impl InProcess {
    pub fn start(config: &Config) -> InProcess {
        if std::env::var("TAYGA_LOG").is_ok() {
            tayga::daemon::init_tracing();
        }
        let mut config = config.clone();
        config.writer.metrics_addr = free_addr();
        let shutdown = Shutdown::new();
        let metrics_addr = config.writer.metrics_addr.clone();
        let task = tokio::spawn(tayga::daemon::writer::run(config, shutdown.clone()));
        InProcess { shutdown, task, metrics_addr }
    }

    pub async fn metric(&self, name: &str) -> Option<f64> {
        scrape(&self.metrics_addr).await.map(|t| metric(&t, name))
    }

    pub async fn stop(self) {
        self.shutdown.trigger();
        crate::common::stopped_cleanly(self.task, Duration::from_secs(30), "the writer").await;
    }
}

/// The real `tayga serve writer` process, logging into a file.
pub struct Daemon {
    pub child: crate::common::ChildGuard,
    pub log: PathBuf,
    pub metrics_addr: String,
    _dir: tempfile::TempDir,
}

impl Daemon {
    pub fn start(env: &TestEnv, settings: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("writer.log");
        let metrics_addr = free_addr();
        let mut cmd = env.tayga();
        cmd.args(["serve", "writer"])
            .env("TAYGA_LOG", "info,tayga=debug")
            .env("TAYGA_WRITER_METRICS_ADDR", &metrics_addr)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
            .stdin(Stdio::null());
        for (key, value) in settings {
            cmd.env(key, value);
        }
        let child = crate::common::ChildGuard::spawn(&mut cmd, "tayga serve writer");
        Daemon { child, log, metrics_addr, _dir: dir }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn metric(&self, name: &str) -> Option<f64> {
        scrape(&self.metrics_addr).await.map(|t| metric(&t, name))
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill").args([name, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, at most `limit`.
    pub async fn exit_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait() {
                return status;
            }
            assert!(Instant::now() < deadline, "the writer did not exit within {limit:?}\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- last lines of the writer's log ---");
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
        // The child is killed and reaped by its ChildGuard, dropped next.
    }
}
