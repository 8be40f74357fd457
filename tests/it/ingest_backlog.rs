//! Ingest's start-up probe and its backlog (docs/ingest.md: the direct path is a detour):
//! traffic sent the moment ingest listens goes to the broker; what is written directly
//! during an outage is replayed to the topics once the broker is back, so stories, hits
//! and alerts miss nothing; a kill -9 mid-replay loses and doubles nothing.

use crate::common;
use crate::ingest::{post, span, span_ids_on_signals, start_ingest, traces, wait_until_using};
use crate::notifier_support::Hook;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{free_addr, free_port, metric, resource, scrape, stories, wait_for, ChildGuard, OwnBroker, TestEnv};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use prost::Message as _;
use tayga::config::Config;
use tayga::daemon::Shutdown;
use tayga::otlp::{hex_id, ExportLogsServiceRequest};
use tayga::store::backlog::{self, PendingKey};
use tayga::store::{now_ns, BacklogRow, Store};

const DAY_NS: u64 = 86_400 * 1_000_000_000;

fn trace_id(n: u32) -> [u8; 16] {
    let mut id = [0xa5u8; 16];
    id[12..].copy_from_slice(&n.to_be_bytes());
    id
}

/// Three spans of one trace, parent first, as three separate requests would carry them.
fn three_spans(n: u32) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
    let base = u64::from(n) * 10;
    let mut spans = vec![span(trace_id(n), base + 1), span(trace_id(n), base + 2), span(trace_id(n), base + 3)];
    spans[1].parent_span_id = spans[0].span_id.clone();
    spans[2].parent_span_id = spans[0].span_id.clone();
    spans
}

fn logs(service: &str, bodies: &[String]) -> ExportLogsServiceRequest {
    let t0 = now_ns();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource(service),
            scope_logs: vec![ScopeLogs {
                log_records: bodies
                    .iter()
                    .enumerate()
                    .map(|(i, body)| LogRecord {
                        time_unix_nano: t0 + i as u64,
                        body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.clone())) }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

async fn count(store: &Store, sql: &str) -> u64 {
    store.query_for_tests(sql).fetch_one::<u64>().await.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

async fn health(addr: &str) -> Option<serde_json::Value> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().ok()?;
    client.get(format!("http://{addr}/health")).send().await.ok()?.json().await.ok()
}

/// Starts the consuming daemons in this process on `config`, each with its own port.
fn start_consumers(
    config: &mut Config,
    which: &[&str],
) -> (Shutdown, Vec<tokio::task::JoinHandle<anyhow::Result<()>>>) {
    config.writer.metrics_addr = free_addr();
    config.assembler.metrics_addr = free_addr();
    config.logminer.metrics_addr = free_addr();
    config.notifier.metrics_addr = free_addr();
    config.assembler.idle_close_secs = 1;
    config.logminer.tick_secs = 1;
    let shutdown = Shutdown::new();
    let mut tasks = Vec::new();
    for daemon in which {
        let (c, s) = (config.clone(), shutdown.clone());
        tasks.push(match *daemon {
            "writer" => tokio::spawn(async move { tayga::daemon::writer::run(c, s).await }),
            "assembler" => tokio::spawn(async move { tayga::daemon::assembler::serve(&c, s).await }),
            "logminer" => tokio::spawn(async move { tayga::daemon::logminer::serve(&c, s).await }),
            "notifier" => tokio::spawn(async move { tayga::daemon::notifier::serve(&c, s).await }),
            other => panic!("no daemon {other}"),
        });
    }
    (shutdown, tasks)
}

async fn stop(shutdown: Shutdown, tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>) {
    shutdown.trigger();
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(60), task).await;
    }
}

#[tokio::test]
async fn the_backlog_keeps_replays_and_drops_drained_days_on_clickhouse() {
    let env = TestEnv::new("backlog_store");
    let store = env.migrated_store().await;
    let now = now_ns();
    let old = now - 5 * DAY_NS;
    let row = |created_ns: u64, position: u32, value: &[u8]| BacklogRow {
        created_ns,
        nonce: 77,
        position,
        topic: "t.signals".into(),
        key: format!("key-{position}"),
        header_keys: vec!["tayga-kind".into(), "tayga-ingest-ns".into()],
        header_values: vec!["traces".into(), created_ns.to_string()],
        value: value.to_vec(),
        value_bytes: value.len() as u32,
        replayed: 0,
        version_ns: created_ns,
    };
    let kept = vec![row(old, 0, b"\x00\x01\xffone"), row(old, 1, b"two"), row(old + 1, 0, b""), row(now, 0, b"four!")];
    backlog::keep(&store, &kept).await.unwrap();
    let back: Vec<BacklogRow> =
        store.select_for_tests::<BacklogRow>("ORDER BY created_ns, position").fetch_all().await.unwrap();
    assert_eq!(back, kept, "binary values and headers read back as written");
    assert_eq!(backlog::stats(&store).await.unwrap(), backlog::BacklogStats { records: 4, bytes: 6 + 3 + 5 });

    let first = backlog::pending_keys(&store, 0, 2).await.unwrap();
    assert_eq!(
        first,
        vec![
            PendingKey { created_ns: old, nonce: 77, position: 0, value_bytes: 6 },
            PendingKey { created_ns: old, nonce: 77, position: 1, value_bytes: 3 }
        ],
        "oldest first"
    );
    assert_eq!(backlog::records(&store, &first).await.unwrap(), kept[..2].to_vec());
    backlog::mark_replayed(&store, &first, now_ns()).await.unwrap();
    let rest = backlog::pending_keys(&store, 0, 10).await.unwrap();
    assert_eq!(rest.iter().map(|k| (k.created_ns, k.position)).collect::<Vec<_>>(), vec![(old + 1, 0), (now, 0)]);
    assert_eq!(backlog::stats(&store).await.unwrap().records, 2);
    assert!(backlog::drop_drained_days(&store).await.unwrap().is_empty(), "the old day still has a record to replay");

    backlog::mark_replayed(&store, &rest[..1], now_ns()).await.unwrap();
    let dropped = backlog::drop_drained_days(&store).await.unwrap();
    assert_eq!(dropped.len(), 1, "the drained old day is dropped: {dropped:?}");
    let left: Vec<BacklogRow> = store.select_for_tests::<BacklogRow>("").fetch_all().await.unwrap();
    assert_eq!(left, vec![kept[3].clone()], "today's day is kept, with its pending record");
    assert_eq!(backlog::stats(&store).await.unwrap(), backlog::BacklogStats { records: 1, bytes: 5 });
}

/// A broker that never answers (a socket nobody serves): the start-up probe takes its full
/// bound, so `/health` says `starting`, and a request sent meanwhile waits for the probe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_starting_until_the_broker_was_probed_and_requests_wait_for_it() {
    let mut env = TestEnv::new("ingest_starting");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    env.config.kafka.brokers = silent.local_addr().unwrap().to_string();
    let (running, shutdown) = start_ingest(&mut env.config).await;
    let addr = running.http_addr.to_string();
    let first = health(&addr).await.expect("/health answers at once");
    assert_eq!(first["ingest"]["using"], "starting", "{first}");
    let response =
        post(&running, "/v1/traces", "application/x-protobuf", traces("web", three_spans(1)).encode_to_vec()).await;
    assert_eq!(response.status(), 200, "stored once the probe answered (directly: the broker is silent)");
    let after = health(&addr).await.unwrap();
    assert_eq!(after["ingest"]["using"], "direct", "{after}");
    assert_eq!(after["ingest"]["broker"], "down");
    assert_eq!(after["ingest"]["backlog"]["records"], 1, "the direct write is kept for the topics: {after}");
    shutdown.trigger();
    running.wait().await.unwrap();
    drop(silent);
}

/// The stock SDK with SimpleSpanProcessor (one request per span) started the moment ingest
/// listens, plus a request sent before ingest's first probe: every trace is one complete
/// story, and nothing was written directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn traffic_sent_at_start_goes_to_the_broker_and_every_trace_is_one_complete_story() {
    let mut env = TestEnv::new("ingest_at_start");
    let store = env.migrated_store().await;
    let (consumers, tasks) = start_consumers(&mut env.config, &["assembler"]);
    let (running, shutdown) = start_ingest(&mut env.config).await;
    let endpoint = format!("http://{}", running.http_addr);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/otel_simple_traces.py");
    let sdk = tokio::process::Command::new("python3").args([script, &endpoint, "sdk-start", "4"]).output();
    let mut first = traces("web", three_spans(1));
    first.resource_spans[0].scope_spans[0].spans.truncate(1);
    let (sdk, response) =
        tokio::join!(sdk, post(&running, "/v1/traces", "application/x-protobuf", first.encode_to_vec()));
    assert_eq!(response.status(), 200);
    let sdk = sdk.unwrap();
    assert!(sdk.status.success(), "the SDK export failed:\n{}", String::from_utf8_lossy(&sdk.stderr));
    let rest = traces("web", three_spans(1)).resource_spans[0].scope_spans[0].spans[1..].to_vec();
    assert_eq!(
        post(&running, "/v1/traces", "application/x-protobuf", traces("web", rest).encode_to_vec()).await.status(),
        200
    );

    let mut want: BTreeSet<String> = String::from_utf8(sdk.stdout).unwrap().lines().map(String::from).collect();
    want.insert(hex_id(&trace_id(1)));
    assert_eq!(want.len(), 5);
    let got = wait_for("a story of 3 spans for each of the 5 traces", Duration::from_secs(60), || async {
        let s = stories(&store).await;
        let complete = want.iter().all(|id| s.get(id).is_some_and(|st| st.span_count == 3));
        complete.then_some(s)
    })
    .await;
    assert_eq!(got.len(), 5, "one story per trace: {:?}", got.keys());
    assert_eq!(count(&store, "SELECT count() FROM spans").await, 0, "no span was written directly");
    assert_eq!(backlog::stats(&store).await.unwrap().records, 0);
    let text = scrape(&running.http_addr.to_string()).await.unwrap();
    assert_eq!(metric(&text, r#"tayga_ingest_path_requests_total{path="direct"}"#), 0.0, "{text}");
    stop(consumers, tasks).await;
    shutdown.trigger();
    running.wait().await.unwrap();
}

/// Broker frozen (SIGSTOP): traces and logs, with a log shape never seen, go direct and into
/// the backlog; broker back: every trace is one complete story, every log is a hit, the new
/// shape's alert reaches the webhook once, the tables hold each row once, the backlog is
/// empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_outage_is_replayed_into_stories_hits_and_one_alert() {
    let mut env = TestEnv::new("ingest_outage");
    let broker = OwnBroker::start(free_port());
    env.config.kafka.brokers = broker.address();
    let hook = Hook::always(200).await;
    env.config.notifier.targets = vec![hook.target("ops")];
    let store = env.migrated_store().await;
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;
    let (consumers, tasks) = start_consumers(&mut env.config, &["writer", "assembler", "logminer", "notifier"]);
    let service = "shop";
    let known: Vec<String> = (0..5).map(|i| format!("user {i} logged in from 10.0.0.{i}")).collect();
    let limit = Duration::from_secs(120);
    let response = post(&running, "/v1/logs", "application/x-protobuf", logs(service, &known).encode_to_vec()).await;
    assert_eq!(response.status(), 200);
    wait_for("the known shape to be mined (the logminer joined)", limit, || async {
        (count(&store, "SELECT uniqExact(log_id) FROM log_hits").await == 5).then_some(())
    })
    .await;
    let hits_before = 5;

    broker.signal("STOP");
    // The first request pays for the discovery (the broker's delivery timeout), then goes
    // direct; the rest go direct at once.
    let n = 6u32;
    for t in 1..=n {
        for s in three_spans(t) {
            let response =
                post(&running, "/v1/traces", "application/x-protobuf", traces("web", vec![s]).encode_to_vec()).await;
            assert_eq!(response.status(), 200, "trace {t}");
        }
    }
    let mut outage_logs: Vec<String> = (10..20).map(|i| format!("user {i} logged in from 10.0.1.{i}")).collect();
    outage_logs.push("payment gateway refused the settlement batch for merchant acme".into());
    outage_logs.push("payment gateway refused the settlement batch for merchant zeta".into());
    for chunk in outage_logs.chunks(5) {
        let response = post(&running, "/v1/logs", "application/x-protobuf", logs(service, chunk).encode_to_vec()).await;
        assert_eq!(response.status(), 200);
    }
    let during = health(&running.http_addr.to_string()).await.unwrap();
    assert_eq!(during["ingest"]["using"], "direct", "{during}");
    assert!(during["ingest"]["backlog"]["records"].as_u64().unwrap() >= u64::from(n) * 3, "{during}");
    broker.signal("CONT");

    wait_for("the backlog to be replayed", limit, || async {
        let h = health(&running.http_addr.to_string()).await?;
        (h["ingest"]["backlog"]["records"] == 0 && h["ingest"]["using"] == "broker").then_some(())
    })
    .await;
    let want: BTreeSet<String> = (1..=n).map(|t| hex_id(&trace_id(t))).collect();
    wait_for("a complete story for every trace", limit, || async {
        let s = stories(&store).await;
        want.iter().all(|id| s.get(id).is_some_and(|st| st.span_count == 3)).then_some(())
    })
    .await;
    let logs_sent = hits_before + outage_logs.len() as u64;
    wait_for("a hit for every log", limit, || async {
        (count(&store, "SELECT uniqExact(log_id) FROM log_hits").await == logs_sent).then_some(())
    })
    .await;
    let is_gateway_alert = |body: &serde_json::Value| {
        body["kind"] == "new_template" && body["template"].as_str().is_some_and(|t| t.contains("gateway"))
    };
    wait_for("the new shape's alert at the webhook", limit, || async {
        hook.received().iter().any(|r| is_gateway_alert(&r.body)).then_some(())
    })
    .await;
    assert_eq!(count(&store, "SELECT count() FROM spans FINAL").await, u64::from(n) * 3);
    assert_eq!(count(&store, "SELECT count() FROM logs FINAL").await, logs_sent);
    assert_eq!(backlog::stats(&store).await.unwrap().records, 0);
    let text = scrape(&running.http_addr.to_string()).await.unwrap();
    assert!(metric(&text, "tayga_ingest_backlog_replayed_records_total") >= f64::from(n) * 3.0, "{text}");
    stop(consumers, tasks).await;
    let deliveries = hook.received().iter().filter(|r| is_gateway_alert(&r.body)).count();
    assert_eq!(deliveries, 1, "the new shape's alert is delivered once");
    assert_eq!(stories(&store).await.len(), n as usize, "one story per trace");
    shutdown.trigger();
    running.wait().await.unwrap();
    drop(broker);
}

fn spawn_ingest(env: &TestEnv, http: &str, log: &std::path::Path) -> ChildGuard {
    let mut cmd = env.tayga();
    cmd.args(["serve", "ingest"])
        .env("TAYGA_INGEST_HTTP_ADDR", http)
        .env("TAYGA_INGEST_GRPC_ADDR", free_addr())
        .env("TAYGA_INGEST_PROBE_INTERVAL_SECS", "1")
        .env("TAYGA_INGEST_BREAKER_COOLDOWN_SECS", "1")
        .stdout(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap())
        .stderr(std::process::Stdio::null());
    ChildGuard::spawn(&mut cmd, "tayga serve ingest")
}

/// kill -9 of ingest mid-replay, then a restart: the replay completes, every record is on
/// the topic, and the writer stores each span once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_mid_replay_then_restart_loses_and_doubles_nothing() {
    let mut env = TestEnv::new("ingest_kill_replay");
    let broker = OwnBroker::start(free_port());
    env.config.kafka.brokers = broker.address();
    let store = env.migrated_store().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ingest.log");
    let http = free_addr();
    let mut ingest = spawn_ingest(&env, &http, &log);
    wait_for("ingest to use the broker", Duration::from_secs(30), || async {
        (health(&http).await?["ingest"]["using"] == "broker").then_some(())
    })
    .await;
    let (consumers, tasks) = start_consumers(&mut env.config, &["writer"]);

    broker.signal("STOP");
    let client = reqwest::Client::new();
    let (requests, per_request) = (80u32, 100u32);
    let mut sent = BTreeSet::new();
    for r in 0..requests {
        let spans: Vec<_> = (0..per_request)
            .map(|i| {
                let n = r * per_request + i;
                let mut s = span(trace_id(100_000 + n), u64::from(n) + 1);
                s.name = format!("op {n}");
                s
            })
            .collect();
        sent.extend(spans.iter().map(|s| hex_id(&s.span_id)));
        let response = client
            .post(format!("http://{http}/v1/traces"))
            .header("content-type", "application/x-protobuf")
            .body(traces("web", spans).encode_to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "request {r}");
    }
    let backlogged = health(&http).await.unwrap()["ingest"]["backlog"]["records"].as_u64().unwrap();
    assert_eq!(backlogged, u64::from(requests * per_request), "one record per trace");
    broker.signal("CONT");

    // Kill the moment a pass was acknowledged and records still wait.
    let left = wait_for("the replay to be under way", Duration::from_secs(60), || async {
        let text = scrape(&http).await?;
        let replayed = metric(&text, "tayga_ingest_backlog_replayed_records_total");
        let left = metric(&text, "tayga_ingest_backlog_records");
        (replayed > 0.0 && left > 0.0).then_some(left)
    })
    .await;
    ingest.kill();
    assert!(left > 0.0);
    let _ingest = spawn_ingest(&env, &http, &log);
    wait_for("the restarted ingest to finish the replay", Duration::from_secs(120), || async {
        let h = health(&http).await?;
        (h["ingest"]["backlog"]["records"] == 0 && h["ingest"]["using"] == "broker").then_some(())
    })
    .await;
    assert_eq!(backlog::stats(&store).await.unwrap().records, 0);
    let lines = std::fs::read_to_string(&log).unwrap();
    assert!(lines.contains("the ingest backlog holds records to replay"), "the restart found the rest:\n{lines}");

    let on_topic = span_ids_on_signals(&env.config, sent.len()).await;
    let lost: Vec<&String> = sent.difference(&on_topic).take(5).collect();
    assert!(lost.is_empty(), "{} spans never reached the topic, e.g. {lost:?}", sent.difference(&on_topic).count());
    let writer = env.config.writer.metrics_addr.clone();
    wait_for("the writer to store every replayed span", Duration::from_secs(60), || async {
        let text = scrape(&writer).await?;
        let written = metric(&text, r#"tayga_writer_written_rows_total{table="spans"}"#);
        (written >= sent.len() as f64).then_some(())
    })
    .await;
    assert_eq!(count(&store, "SELECT count() FROM spans FINAL").await, sent.len() as u64, "each span once");
    stop(consumers, tasks).await;
    drop(broker);
}
