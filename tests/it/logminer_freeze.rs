//! docs/design.md#identity: offsets are committed only for records whose hits and templates are stored.
//! The logminer runs in-process against a ClickHouse of the test's own, frozen with SIGSTOP
//! (a hung server: the kernel accepts connections, nobody answers) while mined rows wait
//! to be stored: once during a revoke, once during a clean stop. While it is frozen, no
//! committed offset may pass a record whose rows were not stored before the freeze; after
//! the thaw, a replica at the daemon's cadence drains the topic, and then every partition's
//! committed offset covers stored records only.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{free_addr, wait_for, PrivateClickHouse, TestEnv};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use prost::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tayga::bus::consume::Group;
use tayga::config::Config;
use tayga::daemon::logminer::Cadence;
use tayga::daemon::Shutdown;
use tayga::otlp::ExportLogsServiceRequest;
use tayga::store::{now_ns, Store};
use tayga::wire::record::{headers, SignalKind};

const WAIT: Duration = Duration::from_secs(60);
/// Log lines per record.
const LINES: usize = 3;
/// The bounds the frozen server runs into (the defaults are 15, 20 and 30 s).
const FLUSH_BOUND_SECS: u64 = 2;
const PASS_BOUND_SECS: u64 = 2;
const LOGS_MINED: &str = "tayga_logminer_mined_logs_total";
const REVOKE_PASSES: &str = "tayga_logminer_pass_duration_seconds_count{pass=\"revoke\"}";

/// A cadence that never flushes on its own: what is mined stays pending until a
/// rebalance, a stop or (with `flush_hits`) the given number of hits.
fn holding(flush_hits: usize) -> Cadence {
    Cadence { flush_every: Duration::from_secs(3600), flush_hits }
}

/// One record produced: where it landed and the log ids it carries.
#[derive(Debug, Clone)]
struct Sent {
    partition: i32,
    offset: i64,
    log_ids: Vec<u64>,
}

/// The logminer running in this process (`tayga::daemon::logminer::serve_with`).
struct InProcess {
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    metrics_addr: String,
}

impl InProcess {
    fn start(config: &Config, cadence: Cadence) -> InProcess {
        if std::env::var("TAYGA_LOG").is_ok() {
            tayga::daemon::init_tracing();
        }
        let mut config = config.clone();
        config.logminer.metrics_addr = free_addr();
        let metrics_addr = config.logminer.metrics_addr.clone();
        let shutdown = Shutdown::new();
        let task = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { tayga::daemon::logminer::serve_with(&config, cadence, shutdown).await }
        });
        InProcess { shutdown, task, metrics_addr }
    }

    async fn metric(&self, name: &str) -> Option<f64> {
        common::scrape(&self.metrics_addr).await.map(|text| common::metric(&text, name))
    }

    /// The partitions `/health` says this replica holds.
    async fn partitions(&self) -> Option<usize> {
        let health: serde_json::Value =
            reqwest::get(format!("http://{}/health", self.metrics_addr)).await.ok()?.json().await.ok()?;
        Some(health["partitions"].as_array()?.len())
    }

    async fn wait_mined(&self, lines: usize) {
        wait_for(&format!("{lines} lines mined"), WAIT, || async {
            (self.metric(LOGS_MINED).await? >= lines as f64).then_some(())
        })
        .await;
    }

    /// A clean stop (SIGTERM's path), which must end within `limit`.
    async fn stop_within(self, limit: Duration, what: &str) {
        self.shutdown.trigger();
        common::stopped_cleanly(self.task, limit, &format!("the logminer, stopped {what}")).await;
    }
}

/// A second member of the logminer's group: its joining revokes the logminer's
/// partitions. It commits nothing, and leaves the group when dropped.
struct Intruder {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Intruder {
    fn join(config: &Config) -> Intruder {
        let names = config.names();
        let consumer: BaseConsumer =
            tayga::bus::consumer_config(&config.kafka, &names.logminer_group, "intruder", Duration::from_secs(10))
                .create()
                .expect("the intruder's consumer");
        consumer.subscribe(&[&names.logs]).expect("subscribing the intruder");
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = consumer.poll(Duration::from_millis(100));
                }
                // Leaves the group now, not at the end of its session.
                consumer.unsubscribe();
            }
        });
        Intruder { stop, thread: Some(thread) }
    }
}

impl Drop for Intruder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn request(service: &str, bodies: &[String], time_ns: u64) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(tayga::otlp::service_resource(service)),
            scope_logs: vec![ScopeLogs {
                log_records: bodies
                    .iter()
                    .map(|body| LogRecord {
                        time_unix_nano: time_ns,
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

/// One record on every partition of `<prefix>.logs` (service `svc-<p>` on partition p),
/// each of [`LINES`] lines of `round`.
async fn produce_round(config: &Config, round: &str) -> Vec<Sent> {
    let producer: FutureProducer = tayga::bus::client_config(&config.kafka)
        .set("acks", "all")
        .set("message.timeout.ms", "10000")
        .create()
        .expect("a producer");
    let topic = config.names().logs;
    let mut sent = Vec::new();
    for p in 0..config.kafka.partitions {
        let service = format!("svc-{p}");
        let bodies: Vec<String> = (0..LINES).map(|j| format!("{round} order {p}{j} shipped to depot")).collect();
        let ingest_ns = now_ns();
        let request = request(&service, &bodies, ingest_ns);
        let log_ids = tayga::otlp::flatten::log_rows(&request, ingest_ns).iter().map(|r| r.log_id).collect();
        let value = request.encode_to_vec();
        let record = FutureRecord::to(&topic)
            .key(&service)
            .partition(p)
            .payload(&value)
            .headers(headers(SignalKind::Logs, ingest_ns));
        let delivery = producer
            .send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .expect("the record is acknowledged");
        sent.push(Sent { partition: delivery.partition, offset: delivery.offset, log_ids });
    }
    sent
}

/// Are the record's hits stored, each with its template?
async fn stored(store: &Store, sent: &Sent) -> bool {
    let count = |sql: &'static str| {
        let store = store.clone();
        let ids = sent.log_ids.clone();
        async move { store.query_for_tests(sql).bind(ids).fetch_one::<u64>().await.expect("counting stored rows") }
    };
    let hits = count("SELECT count() FROM log_hits FINAL WHERE has(?, log_id)").await;
    let orphans = count(
        "SELECT count() FROM log_hits FINAL WHERE has(?, log_id) AND template_id NOT IN (SELECT template_id FROM log_templates)",
    )
    .await;
    hits == sent.log_ids.len() as u64 && orphans == 0
}

async fn assert_none_stored(store: &Store, sent: &[Sent]) {
    for s in sent {
        assert!(
            !stored(store, s).await,
            "record {s:?} was stored before ClickHouse was frozen: the test proves nothing"
        );
    }
}

/// While ClickHouse is frozen: no partition's committed offset passes its record of
/// `unstored` (none of them stored before the freeze, so none can be now).
async fn assert_not_committed(config: &Config, unstored: &[Sent], when: &str) {
    let committed = common::committed(config, Group::Logminer).await.expect("the committed offsets");
    let past: Vec<String> = unstored
        .iter()
        .filter(|s| committed.get(&s.partition).copied().unwrap_or(0) > s.offset)
        .map(|s| format!("p{} committed {} past unstored offset {}", s.partition, committed[&s.partition], s.offset))
        .collect();
    assert!(past.is_empty(), "{when}: offsets committed past records whose hits were never stored: {past:?}");
}

fn ends(sent: &[Sent]) -> BTreeMap<i32, i64> {
    let mut ends = BTreeMap::new();
    for s in sent {
        let end = ends.entry(s.partition).or_insert(0);
        *end = (*end).max(s.offset + 1);
    }
    ends
}

/// After the thaw: a replica at the daemon's own cadence reads on from the committed
/// offsets until every partition is committed to its end, and stops.
async fn drain(config: &Config, sent: &[Sent]) {
    let ends = ends(sent);
    let replica = InProcess::start(config, Cadence::default());
    wait_for("every partition committed to its end", WAIT, || async {
        let committed = common::committed(config, Group::Logminer).await.expect("the committed offsets");
        ends.iter().all(|(p, end)| committed.get(p).is_some_and(|c| c >= end)).then_some(())
    })
    .await;
    replica.stop_within(Duration::from_secs(30), "after draining").await;
}

/// The commit rule, per partition: the committed offset is at most one past the last
/// record whose hits and templates are stored, and every record below it is stored.
async fn assert_commits_cover_stored_records(store: &Store, config: &Config, sent: &[Sent]) {
    let committed = common::committed(config, Group::Logminer).await.expect("the committed offsets");
    let mut violations = Vec::new();
    for (p, c) in &committed {
        let mut records: Vec<&Sent> = sent.iter().filter(|s| s.partition == *p).collect();
        records.sort_by_key(|s| s.offset);
        let mut last_stored = -1;
        for r in records {
            let is_stored = stored(store, r).await;
            if is_stored {
                last_stored = last_stored.max(r.offset);
            } else if r.offset < *c {
                violations.push(format!("p{p}: committed {c}, but record {} is not stored", r.offset));
            }
        }
        if *c > last_stored + 1 {
            violations.push(format!("p{p}: committed {c}, last stored record {last_stored}"));
        }
    }
    assert!(violations.is_empty(), "offsets committed past unstored records: {violations:?}");
    for s in sent {
        assert!(stored(store, s).await, "every record is stored once the topic is drained: {s:?} is not");
    }
}

/// A test's world: its ClickHouse (to freeze), its database and topics, and a config with
/// short bounds. Dropped in field order: the database goes before its server.
struct Rig {
    /// Held for its cleanup.
    _env: TestEnv,
    ch: PrivateClickHouse,
    config: Config,
    store: Store,
}

impl Rig {
    async fn start(test: &str) -> Rig {
        let ch = PrivateClickHouse::start();
        let mut env = TestEnv::new(test);
        env.config.clickhouse.url = ch.url();
        let mut config = env.config.clone();
        // Only rebalances and stops pass here; no detection pass runs.
        config.logminer.tick_secs = 3600;
        config.logminer.prompt_passes = false;
        config.logminer.shutdown_flush_timeout_secs = FLUSH_BOUND_SECS;
        config.logminer.shutdown_pass_timeout_secs = PASS_BOUND_SECS;
        config.logminer.revoke_pass_timeout_secs = PASS_BOUND_SECS;
        tayga::bus::topics::ensure_topics(&config.kafka, &config.names()).await.expect("topics");
        let store = env.migrated_store().await;
        Rig { _env: env, ch, config, store }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_while_clickhouse_is_frozen_commits_no_offset_past_an_unstored_record() {
    let rig = Rig::start("logminer_freeze_revoke").await;
    let (ch, config, store) = (&rig.ch, &rig.config, &rig.store);
    let miner = InProcess::start(config, holding(usize::MAX));
    let sent = produce_round(config, "before").await;
    miner.wait_mined(sent.len() * LINES).await;
    assert_none_stored(store, &sent).await;

    ch.signal("STOP");
    let intruder = Intruder::join(config);
    // The revoke flush and the revoke pass both run into their bounds.
    wait_for("the revoke pass to have run", WAIT, || async {
        (miner.metric(REVOKE_PASSES).await? >= 1.0).then_some(())
    })
    .await;
    assert_not_committed(config, &sent, "after a revoke with ClickHouse frozen").await;

    ch.signal("CONT");
    drop(intruder);
    // The group settles before the miner leaves it: against Tansu, a replica that joined
    // while the intruder and the miner left together was not assigned within a minute.
    wait_for("the miner to hold every partition again", WAIT, || async {
        (miner.partitions().await? == config.kafka.partitions as usize).then_some(())
    })
    .await;
    miner.stop_within(Duration::from_secs(30), "after the thaw").await;
    drain(config, &sent).await;
    assert_commits_cover_stored_records(store, config, &sent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_clickhouse_is_frozen_ends_in_its_bounds_and_commits_no_offset_past_an_unstored_record() {
    let rig = Rig::start("logminer_freeze_stop").await;
    let (ch, config, store) = (&rig.ch, &rig.config, &rig.store);
    // Every record is stored and committed as soon as it is mined.
    let miner = InProcess::start(config, holding(1));
    let stored_first = produce_round(config, "stored").await;
    let first_ends = ends(&stored_first);
    wait_for("the first round stored and committed", WAIT, || async {
        let committed = common::committed(config, Group::Logminer).await.expect("the committed offsets");
        first_ends.iter().all(|(p, end)| committed.get(p) == Some(end)).then_some(())
    })
    .await;

    ch.signal("STOP");
    let frozen = produce_round(config, "frozen").await;
    // Its first record's insert now hangs.
    miner.wait_mined(stored_first.len() * LINES + LINES).await;
    let bound = Duration::from_secs(FLUSH_BOUND_SECS + PASS_BOUND_SECS + 10);
    miner.stop_within(bound, "with ClickHouse frozen (the flush and the pass are bounded)").await;
    assert_not_committed(config, &frozen, "after a stop with ClickHouse frozen").await;

    ch.signal("CONT");
    let sent: Vec<Sent> = stored_first.into_iter().chain(frozen).collect();
    drain(config, &sent).await;
    assert_commits_cover_stored_records(store, config, &sent).await;
}
