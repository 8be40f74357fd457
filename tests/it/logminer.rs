//! The logminer against the real ClickHouse 18.16 and broker (docs/logminer.md), run as
//! `tayga serve logminer` processes: new-template alerts stored, published and marked; a
//! full re-read adds nothing; spikes and silences with deterministic ids; two replicas
//! splitting the partitions and a kill -9 hand-over; republication after a broker outage.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{free_port, wait_for, ChildGuard, OwnBroker, TestEnv};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use tayga::bus::producer::{OutRecord, Publisher};
use tayga::config::Config;
use tayga::identity::alert_id;
use tayga::otlp::ExportLogsServiceRequest;
use tayga::store::{now_ns, AlertRow, Store, TemplateRow};
use tayga::wire::alert::{format_id, AlertKind};
use tayga::wire::record::{header_pairs, SignalKind};

pub(crate) const WAIT: Duration = Duration::from_secs(90);
pub(crate) const MIN: u64 = 60_000_000_000;

/// A `tayga serve logminer` process, killed when dropped (a failing test leaves nothing).
pub(crate) struct Replica {
    child: ChildGuard,
    metrics_addr: String,
}

impl Replica {
    pub(crate) fn start(env: &TestEnv, id: &str, tick_secs: u64) -> Replica {
        Replica::spawn(env, id, tick_secs, true)
    }

    /// A replica whose detection passes run only on its tick (and at revokes and stops):
    /// no mined line starts one, so a test can act between a line's mining and its pass.
    pub(crate) fn start_tick_only(env: &TestEnv, id: &str, tick_secs: u64) -> Replica {
        Replica::spawn(env, id, tick_secs, false)
    }

    fn spawn(env: &TestEnv, id: &str, tick_secs: u64, prompt_passes: bool) -> Replica {
        let metrics_addr = format!("127.0.0.1:{}", free_port());
        let child = ChildGuard::spawn_logged(
            env.tayga()
                .args(["serve", "logminer"])
                .env("TAYGA_LOGMINER_METRICS_ADDR", &metrics_addr)
                .env("TAYGA_LOGMINER_REPLICA_ID", id)
                .env("TAYGA_LOGMINER_TICK_SECS", tick_secs.to_string())
                .env("TAYGA_LOGMINER_PROMPT_PASSES", prompt_passes.to_string()),
            &format!("tayga serve logminer ({id})"),
        );
        Replica { child, metrics_addr }
    }

    async fn health(&self) -> Option<serde_json::Value> {
        reqwest::get(format!("http://{}/health", self.metrics_addr)).await.ok()?.json().await.ok()
    }

    /// (assigned partitions, owned services), once the replica answers.
    pub(crate) async fn ownership(&self) -> Option<(Vec<i64>, BTreeSet<String>)> {
        let h = self.health().await?;
        let partitions = h["partitions"].as_array()?.iter().filter_map(|p| p.as_i64()).collect();
        let owned = h["owned_services"].as_array()?.iter().filter_map(|s| s.as_str().map(String::from)).collect();
        Some((partitions, owned))
    }

    pub(crate) async fn metric(&self, name: &str) -> Option<f64> {
        common::scrape(&self.metrics_addr).await.map(|text| common::metric(&text, name))
    }

    fn signal(&self, signal: &str) {
        let status =
            std::process::Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(status.unwrap().success());
    }

    /// SIGTERM, then the exit status within the seed's 40 s grace.
    pub(crate) async fn stop(mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        let deadline = std::time::Instant::now() + Duration::from_secs(40);
        loop {
            if let Some(status) = self.child.try_wait() {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "the logminer did not stop within 40 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Publishes one `logs` record of `service` (keyed by service, as ingest does) holding
/// `lines` of (log time, body).
pub(crate) async fn produce(config: &Config, service: &str, lines: &[(u64, String)]) {
    produce_request(config, service, logs_request(service, lines)).await;
}

/// Publishes `request` as one `logs` record keyed by `service`.
pub(crate) async fn produce_request(config: &Config, service: &str, request: ExportLogsServiceRequest) {
    let publisher = Publisher::new(&config.kafka).unwrap();
    let topic = config.names().logs;
    let record = OutRecord {
        topic: &topic,
        key: service,
        value: request.encode_to_vec().into(),
        headers: &header_pairs(SignalKind::Logs, now_ns()),
    };
    publisher.publish_all(vec![record]).await.expect("the record is acknowledged");
}

/// One OTLP logs request of `service` holding `lines` of (log time, body).
pub(crate) fn logs_request(service: &str, lines: &[(u64, String)]) -> ExportLogsServiceRequest {
    let resource = Resource {
        attributes: vec![KeyValue {
            key: "service.name".into(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(service.into())) }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let request = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource),
            scope_logs: vec![ScopeLogs {
                log_records: lines
                    .iter()
                    .map(|(time, body)| LogRecord {
                        time_unix_nano: *time,
                        body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.clone())) }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    request
}

pub(crate) async fn prepare(env: &TestEnv) -> Store {
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.expect("topics");
    env.migrated_store().await
}

pub(crate) async fn alerts(store: &Store) -> Vec<AlertRow> {
    store.select_for_tests::<AlertRow>("FINAL ORDER BY first_at, alert_id").fetch_all::<AlertRow>().await.unwrap()
}

pub(crate) async fn templates(store: &Store, service: &str) -> Vec<TemplateRow> {
    store
        .select_for_tests::<TemplateRow>("FINAL WHERE service = ? ORDER BY first_seen_ns")
        .bind(service)
        .fetch_all::<TemplateRow>()
        .await
        .unwrap()
}

pub(crate) async fn count(store: &Store, sql: &str) -> u64 {
    store.query_for_tests(sql).fetch_one::<u64>().await.unwrap()
}

fn reset_group(config: &Config) {
    let names = config.names();
    let consumer = common::group_client(config, &names.logminer_group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..config.kafka.partitions {
        let (low, _) = consumer.fetch_watermarks(&names.logs, p, Duration::from_secs(10)).unwrap();
        tpl.add_partition_offset(&names.logs, p, Offset::Offset(low)).unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).expect("committing the reset offsets");
}

/// A new shape is announced by the pass its line starts, not by the next tick: the tick here
/// is 10 minutes away, and the alert is awaited for far less.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_line_shape_is_announced_by_the_pass_its_line_starts_without_waiting_for_the_tick() {
    let env = TestEnv::new("logminer_prompt");
    let store = prepare(&env).await;
    let replica = Replica::start(&env, "r1", 600);
    wait_for("the assignment", WAIT, || {
        let r = &replica;
        async move { (r.ownership().await?.0.len() == 12).then_some(()) }
    })
    .await;
    produce(&env.config, "checkout", &[(now_ns(), "refund issued for order 41".into())]).await;
    let alert = wait_for("the new_template alert", WAIT, || {
        let store = store.clone();
        async move { alerts(&store).await.into_iter().find(|a| a.kind == "new_template") }
    })
    .await;
    assert_eq!(alert.service, "checkout");
    let passes = |pass: &'static str| {
        let r = &replica;
        async move { r.metric(&format!("tayga_logminer_pass_duration_seconds_count{{pass=\"{pass}\"}}")).await }
    };
    // A pass is counted when it ends, after its alerts are stored and published.
    wait_for("the prompt pass to be counted", WAIT, || async { (passes("prompt").await? >= 1.0).then_some(()) }).await;
    assert_eq!(passes("detection").await.unwrap_or(0.0), 0.0, "no periodic pass has run yet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_line_shape_raises_one_alert_and_a_full_reread_adds_nothing() {
    let env = TestEnv::new("logminer_new");
    let store = prepare(&env).await;
    let replica = Replica::start(&env, "r1", 1);
    let now = now_ns();
    let lines: Vec<(u64, String)> =
        (0..5).map(|i| (now + i, format!("payment accepted for order {}", 100 + i))).collect();
    produce(&env.config, "checkout", &lines).await;

    // The pass that marks the alert writes the watermarks after it and its heartbeat last,
    // so wait for a heartbeat newer than the alert: an older one (the passes run every
    // second) is from a pass before it, and the watermarks may not be written yet.
    let alert = wait_for("a new_template alert, published and marked, and the pass's heartbeat", WAIT, || {
        let store = store.clone();
        async move {
            let a = alerts(&store).await;
            let marks = count(&store, "SELECT count() FROM log_alert_publications").await;
            let state = tayga::store::logminer::State::load(&store).await.ok()?;
            let alert = a.first()?;
            let beat = state.heartbeats().iter().any(|h| h.replica == "r1" && h.at_ns > alert.stored_ns);
            (a.len() == 1 && marks >= 1 && beat).then(|| alert.clone())
        }
    })
    .await;
    let template = templates(&store, "checkout").await;
    assert_eq!(template.len(), 1);
    assert_eq!(alert.kind, "new_template");
    assert_eq!(alert.template_id, template[0].template_id);
    assert_eq!(alert.alert_id, alert_id(AlertKind::NewTemplate, template[0].template_id, 0));
    // logminer_state as docs/design.md#watermarks has it: the replica's heartbeat, a watermark per partition,
    // the masking epoch.
    let state = tayga::store::logminer::State::load(&store).await.unwrap();
    assert!(state.heartbeats().iter().any(|h| h.replica == "r1" && h.at_ns >= now), "{state:?}");
    assert_eq!(state.partitions_without_watermark(12), Vec::<i32>::new(), "{state:?}");
    assert!(state.watermark(&(0..12).collect::<Vec<_>>()) >= now);
    assert_eq!(state.masking_epoch().map(|(v, _)| v).as_deref(), Some(tayga::mine::MASKING_VERSION));
    let records = common::read_alerts(&env.config, 1);
    assert_eq!(records.len(), 1, "published once: {records:?}");
    assert_eq!(records[0].0, format_id(template[0].template_id), "keyed by template id");
    assert_eq!(records[0].1.alert_id, alert.alert_id);

    // The same shape again: no second alert. Then a full re-read adds no hit and no alert.
    produce(&env.config, "checkout", &[(now + 10, "payment accepted for order 999".into())]).await;
    wait_for("6 hits", WAIT, || {
        let store = store.clone();
        async move { (count(&store, "SELECT count() FROM log_hits FINAL").await == 6).then_some(()) }
    })
    .await;
    assert!(replica.stop().await.success(), "SIGTERM ends the logminer with exit 0");
    let hits_before = count(&store, "SELECT count() FROM log_hits FINAL").await;
    reset_group(&env.config);
    let replica = Replica::start(&env, "r1", 1);
    wait_for("the re-read to be mined", WAIT, || {
        let r = &replica;
        async move { (r.metric("tayga_logminer_mined_logs_total").await? >= 6.0).then_some(()) }
    })
    .await;
    // One more pass after the re-read is mined, so any alert it would raise is stored.
    let passes = replica.metric("tayga_logminer_pass_duration_seconds_count").await.unwrap_or(0.0);
    wait_for("two more detection passes", WAIT, || {
        let r = &replica;
        async move { (r.metric("tayga_logminer_pass_duration_seconds_count").await? >= passes + 2.0).then_some(()) }
    })
    .await;
    assert_eq!(count(&store, "SELECT count() FROM log_hits FINAL").await, hits_before);
    assert_eq!(count(&store, "SELECT uniqExact(log_id) FROM log_hits").await, hits_before);
    assert_eq!(alerts(&store).await.len(), 1, "no alert from the re-read");
    assert_eq!(common::read_alerts(&env.config, 1).len(), 1);
    assert!(templates(&store, "checkout").await[0].count >= 6, "only the count may grow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_a_spike_and_a_steady_template_that_stops_is_a_silence() {
    let env = TestEnv::new("logminer_rules");
    let store = prepare(&env).await;
    let now = now_ns();
    let this_min = now / MIN;
    let mut lines = Vec::new();
    for m in this_min - 40..this_min - 10 {
        for i in 0..3 {
            lines.push((m * MIN + i * 1_000_000_000, format!("cache refresh took {} ms", 10 + i)));
        }
    }
    for m in this_min - 40..=this_min {
        lines.push((m * MIN + 5_000_000_000, format!("heartbeat ok from worker {}", m % 7)));
    }
    for m in this_min - 31..this_min {
        for i in 0..2 {
            lines.push((m * MIN + 7_000_000_000 + i, format!("payment declined for card {}", 4000 + i)));
        }
    }
    // The burst, in the current minute (never after the wall clock).
    let burst_at = (this_min * MIN).max(now.saturating_sub(1_000_000_000));
    for i in 0..60 {
        lines.push((burst_at + i, format!("payment declined for card {}", 5000 + i)));
    }
    let replica = Replica::start(&env, "r1", 1);
    produce(&env.config, "billing", &lines).await;

    let (spike, silence) = wait_for("a spike and a silence", WAIT, || {
        let store = store.clone();
        async move {
            let a = alerts(&store).await;
            let spike = a.iter().find(|a| a.kind == "spike")?.clone();
            let silence = a.iter().find(|a| a.kind == "silence")?.clone();
            Some((spike, silence))
        }
    })
    .await;
    let t = templates(&store, "billing").await;
    let id_of = |needle: &str| t.iter().find(|t| t.template.contains(needle)).unwrap().template_id;
    assert_eq!(spike.template_id, id_of("payment declined"));
    assert_eq!(spike.first_at, (burst_at / MIN) * MIN);
    assert_eq!(spike.alert_id, alert_id(AlertKind::Spike, spike.template_id, spike.first_at));
    assert!(spike.count >= 60 && spike.threshold >= 20.0, "{spike:?}");
    assert_eq!(silence.template_id, id_of("cache refresh"));
    assert_eq!(silence.first_at, (this_min - 10) * MIN, "a silence starts the minute after the last log");
    assert_eq!(silence.alert_id, alert_id(AlertKind::Silence, silence.template_id, silence.first_at));
    let kinds: Vec<String> = alerts(&store).await.into_iter().map(|a| a.kind).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "spike").count(), 1);
    assert_eq!(kinds.iter().filter(|k| *k == "silence").count(), 1, "the steady heartbeat is not silent");
    drop(replica);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_split_the_partitions_and_a_survivor_takes_over_under_the_same_ids() {
    let env = TestEnv::new("logminer_replicas");
    let store = prepare(&env).await;
    let a = Replica::start(&env, "a", 1);
    let b = Replica::start(&env, "b", 1);
    wait_for("a 6/6 split", WAIT, || {
        let (a, b) = (&a, &b);
        async move {
            let (pa, _) = a.ownership().await?;
            let (pb, _) = b.ownership().await?;
            (pa.len() == 6 && pb.len() == 6).then_some(())
        }
    })
    .await;
    let services: Vec<String> = (0..12).map(|i| format!("svc-{i}")).collect();
    let now = now_ns();
    for s in &services {
        produce(&env.config, s, &[(now, format!("{s} started with {} workers", 4))]).await;
    }
    let (owned_a, owned_b) = wait_for("every service owned", WAIT, || {
        let (a, b, services) = (&a, &b, &services);
        async move {
            let (_, oa) = a.ownership().await?;
            let (_, ob) = b.ownership().await?;
            (oa.len() + ob.len() == services.len()).then_some((oa, ob))
        }
    })
    .await;
    assert!(owned_a.is_disjoint(&owned_b), "each service is owned by exactly one replica: {owned_a:?} {owned_b:?}");
    assert_eq!(owned_a.union(&owned_b).count(), 12);
    assert!(!owned_a.is_empty(), "replica a owns a service");

    // A spike in one of a's services.
    let hot = owned_a.iter().next().unwrap().clone();
    let burst = |from: u64| -> Vec<(u64, String)> {
        (0..40).map(|i| (from + i, format!("queue overflow on shard {i}"))).collect()
    };
    // A history of one line a minute (a spike needs a baseline), then the burst.
    let history: Vec<(u64, String)> =
        (1..=10).map(|m| (now_ns() - m * MIN, format!("queue overflow on shard {m}"))).collect();
    produce(&env.config, &hot, &history).await;
    produce(&env.config, &hot, &burst(now_ns())).await;
    let spike = wait_for("a spike raised by replica a", WAIT, || {
        let store = store.clone();
        async move { alerts(&store).await.into_iter().find(|a| a.kind == "spike") }
    })
    .await;

    // kill -9 a: b takes all 12 partitions, reloads templates and keeps the spike's id.
    a.signal("KILL");
    let killed_at = now_ns();
    wait_for("b to hold all 12 partitions", WAIT, || {
        let b = &b;
        async move { (b.ownership().await?.0.len() == 12).then_some(()) }
    })
    .await;
    let templates_held = b.metric("tayga_logminer_templates").await.unwrap();
    assert!(templates_held >= 13.0, "b reloaded every stored template, found {templates_held}");
    produce(&env.config, &hot, &burst(now_ns())).await;
    produce(&env.config, &hot, &[(now_ns(), format!("{hot} started with 8 workers"))]).await;
    let refreshed = wait_for("b to refresh the same spike", WAIT, || {
        let store = store.clone();
        async move {
            let spikes: Vec<AlertRow> = alerts(&store).await.into_iter().filter(|a| a.kind == "spike").collect();
            spikes.iter().find(|s| s.updated_ns > killed_at + 1_000_000_000).cloned().map(|s| (s, spikes.len()))
        }
    })
    .await;
    assert_eq!(refreshed.1, 1, "no second spike id");
    assert_eq!(refreshed.0.alert_id, spike.alert_id);
    assert_eq!(refreshed.0.first_at, spike.first_at);
    let twice = count(
        &store,
        "SELECT count() FROM (SELECT template_id FROM log_alerts GROUP BY template_id, kind HAVING uniqExact(alert_id) > 1)",
    )
    .await;
    assert_eq!(twice, 0, "no alert is raised twice under different ids");
    assert_eq!(
        count(&store, "SELECT count() FROM log_alerts FINAL WHERE kind = 'new_template'").await,
        13,
        "12 start-up templates and the overflow template, each announced once"
    );
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_stored_while_the_broker_is_down_is_republished_when_it_returns() {
    let broker = OwnBroker::start(free_port());
    let mut env = TestEnv::new("logminer_republish");
    env.config.kafka.brokers = broker.address();
    let store = prepare(&env).await;
    // The test's config names its own broker, and Replica::start passes it on.
    let replica = Replica::start_tick_only(&env, "r1", 4);
    wait_for("the assignment", WAIT, || {
        let r = &replica;
        async move { (r.ownership().await?.0.len() == 12).then_some(()) }
    })
    .await;

    // The template row is stored by the 1 s flush; the broker is frozen before the next
    // 4 s detection pass can publish the alert (no line starts a pass here). If a pass slips in between, try another line.
    let mut frozen_alert = None;
    for attempt in 0..3 {
        let body = format!("disk {attempt} of node {} is full", attempt + 7);
        // Letters, not digits: words that differ only in their digits are one template.
        let shape = format!("shape{}", char::from(b'a' + attempt as u8));
        produce(&env.config, "storage", &[(now_ns(), format!("{shape} {body}"))]).await;
        wait_for("the template row", WAIT, || {
            let store = store.clone();
            let shape = shape.clone();
            async move { templates(&store, "storage").await.into_iter().any(|t| t.template.contains(&shape)).then_some(()) }
        })
        .await;
        broker.signal("STOP");
        let alert = wait_for("the alert stored", WAIT, || {
            let store = store.clone();
            let shape = shape.clone();
            async move { alerts(&store).await.into_iter().find(|a| a.template.contains(&shape)) }
        })
        .await;
        let marks =
            count(&store, &format!("SELECT count() FROM log_alert_publications WHERE alert_id = {}", alert.alert_id))
                .await;
        if marks == 0 {
            frozen_alert = Some(alert);
            break;
        }
        broker.signal("CONT");
    }
    let alert = frozen_alert.expect("an alert was stored while the broker was frozen");
    // Past the 10 s delivery timeout: the publication failed, the alert stays unmarked.
    wait_for("a failed publication", WAIT, || {
        let r = &replica;
        async move { (r.metric("tayga_logminer_publish_errors_total").await? >= 1.0).then_some(()) }
    })
    .await;
    let unmarked = tayga::store::logminer::unmarked_alerts(&store, None, 0, 10).await.unwrap();
    assert!(unmarked.iter().any(|a| a.alert_id == alert.alert_id), "stored unmarked while the broker is down");
    broker.signal("CONT");
    // The frozen broker may have expired the replica's group session; after the
    // rebalance it owns "storage" again once the service logs (republication is for owned
    // services: docs/design.md#republication).
    produce(&env.config, "storage", &[(now_ns(), "shape0 disk 0 of node 7 is full".into())]).await;
    wait_for("the alert republished and counted", WAIT, || {
        let (r, store) = (&replica, store.clone());
        async move {
            let marks = count(
                &store,
                &format!("SELECT count() FROM log_alert_publications WHERE alert_id = {}", alert.alert_id),
            )
            .await;
            (marks >= 1 && r.metric("tayga_logminer_republished_alerts_total").await? >= 1.0).then_some(())
        }
    })
    .await;
    let records = common::read_alerts(&env.config, 1);
    assert!(records.iter().any(|(_, a)| a.alert_id == alert.alert_id), "the alert reached the topic");
    drop(replica);
}

async fn wait_for_template(store: &Store, service: &str) -> TemplateRow {
    wait_for("the template row", WAIT, || {
        let store = store.clone();
        let service = service.to_string();
        async move { templates(&store, &service).await.into_iter().next() }
    })
    .await
}

async fn new_template_alert_of(store: &Store, template_id: u64) -> Option<AlertRow> {
    alerts(store).await.into_iter().find(|a| a.kind == "new_template" && a.template_id == template_id)
}

/// Seed 000: a template mined just before a revoke or a clean stop is still announced, by
/// the bounded new-template pass each of them runs. Detection ticks are 10 minutes apart
/// here, so only those passes can announce it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_mined_just_before_a_revoke_or_a_clean_stop_is_still_announced() {
    let env = TestEnv::new("logminer_passes");
    let store = prepare(&env).await;
    let a = Replica::start_tick_only(&env, "a", 600);
    wait_for("a's assignment", WAIT, || {
        let a = &a;
        async move { (a.ownership().await?.0.len() == 12).then_some(()) }
    })
    .await;
    produce(&env.config, "before-revoke", &[(now_ns(), "export job finished in 5 s".into())]).await;
    let t = wait_for_template(&store, "before-revoke").await;
    assert!(new_template_alert_of(&store, t.template_id).await.is_none(), "no detection pass has run yet");

    // b joins: a's partitions are revoked, and a's revoke pass announces the template.
    let b = Replica::start_tick_only(&env, "b", 600);
    let announced = wait_for("the revoke pass to announce the template", WAIT, || {
        let store = store.clone();
        async move { new_template_alert_of(&store, t.template_id).await }
    })
    .await;
    assert_eq!(announced.service, "before-revoke");
    wait_for("a's revoke pass to be counted", WAIT, || {
        let a = &a;
        async move { (a.metric("tayga_logminer_pass_duration_seconds_count{pass=\"revoke\"}").await? >= 1.0).then_some(()) }
    })
    .await;
    wait_for("a 6/6 split", WAIT, || {
        let (a, b) = (&a, &b);
        async move { (a.ownership().await?.0.len() == 6 && b.ownership().await?.0.len() == 6).then_some(()) }
    })
    .await;

    // A template mined just before a clean stop: announced by the shutdown pass.
    produce(&env.config, "before-stop", &[(now_ns(), "nightly report mailed to 3 people".into())]).await;
    let t = wait_for_template(&store, "before-stop").await;
    // Its owner: the one replica that reports it (a replica shows what it mined only after
    // the flush that stored it has committed, so neither may report it yet).
    let a_owns = wait_for("exactly one replica to own before-stop", WAIT, || {
        let (a, b) = (&a, &b);
        async move {
            let (in_a, in_b) =
                (a.ownership().await?.1.contains("before-stop"), b.ownership().await?.1.contains("before-stop"));
            (in_a != in_b).then_some(in_a)
        }
    })
    .await;
    let (owner, other) = if a_owns { (a, b) } else { (b, a) };
    assert!(owner.stop().await.success());
    let announced = new_template_alert_of(&store, t.template_id).await;
    assert!(announced.is_some(), "the shutdown pass announced the template before the process exited");
    drop(other);
}
