//! Several replicas of each consuming daemon (docs/scaling.md "Replicas and
//! hand-overs"): ingest, two writers, two assemblers, the logminer and two notifiers as
//! separate `tayga serve` processes (the soak's [`Pipeline`]), fed by the soak's own client
//! (new log shapes raise `new_template` alerts throughout) and delivering to two webhook
//! targets (b answers a second late, so a delivery is often in flight at the kill). While
//! the load runs, one writer, then one assembler, then one notifier is killed with SIGKILL
//! and never restarted: the survivor of each pair must take over all of the topic's
//! partitions. Then it reconciles from what the client was acknowledged: every span
//! stored once (FINAL; raw copies only of records the dead writer had stored and not yet
//! committed), every trace one complete story, every alert delivered once per target (seed
//! 003's kill between the 2xx and the row write aside, named). It prints one table; with
//! `TAYGA_REPLICAS_KEEP` set (and whenever it fails) the daemons' logs are kept. It runs
//! twice: on one ClickHouse server, and on the two-shard cluster of `cluster.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tayga::store::{AlertRow, DeliveryRow, LogRow, SpanRow};

use crate::cluster::PrivateCluster;
use crate::common::{free_port, metric, scrape, stories, OwnBroker, PrivateClickHouse, TestEnv};
use crate::soak::{
    delivered_once_row, elapsed_secs, fetch, first_few, hook, own_client, stories_row, tally_spans, wait_http_ok,
    Acked, Phase, Pipeline, Report, Timeline,
};

/// How long the client sends.
const TRAFFIC: Duration = Duration::from_secs(70);
/// Which replica is killed when (seconds into the traffic), one after another.
const KILLS: [(&str, f64); 3] = [("writer", 8.0), ("assembler", 26.0), ("notifier", 44.0)];
/// The soak client's services (its spans and its logs).
const TRACED: &str = "'soak-front','soak-back'";
const LOGGED: &str = "'soak-app'";
/// A record the killed writer had stored but not committed was ingested at most this long
/// before the kill (it commits after every stored batch; batches close within a second).
const UNCOMMITTED_WINDOW_NS: u64 = 30 * 1_000_000_000;

// A ClickHouse (or cluster) and a broker of the test's own, as the soak's: the shared ones
// may be stopped by another run's teardown, and SIGKILLed members must not linger in them.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_of_each_consumer_lose_one_to_kill9_and_nothing_is_lost_or_doubled() {
    let ch = PrivateClickHouse::start();
    let broker = OwnBroker::start(free_port());
    let mut env = TestEnv::new("replicas");
    env.config.clickhouse.url = ch.url();
    env.config.kafka.brokers = broker.address();
    let failures = two_of_each(env).await;
    // The daemons are gone; the servers they used go next.
    drop(broker);
    drop(ch);
    assert!(failures.is_empty(), "the replicas test found discrepancies: {}", failures.join("; "));
}

/// The same on the two-shard ClickHouse cluster (what docs/scaling.md promises holds on a cluster too):
/// every insert goes through the Distributed tables to both shards, and the writers run in
/// the per-record-block mode an 18.16 cluster needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_clickhouse_cluster_two_of_each_consumer_lose_one_to_kill9_and_nothing_is_lost_or_doubled() {
    let cluster = PrivateCluster::start();
    let broker = OwnBroker::start(free_port());
    let mut env = cluster.env("replicas_cluster");
    env.config.kafka.brokers = broker.address();
    let failures = two_of_each(env).await;
    drop(broker);
    drop(cluster);
    assert!(failures.is_empty(), "the replicas test on the cluster found discrepancies: {}", failures.join("; "));
}

/// Runs the scenario of the module docs on `env`'s ClickHouse and broker; returns the
/// failed checks, after the daemons are stopped.
async fn two_of_each(env: TestEnv) -> Vec<String> {
    let started = Instant::now();
    let started_ns = tayga::store::now_ns();
    let dir = tempfile::Builder::new().prefix("tayga-replicas-").tempdir().unwrap();
    let store = env.store();
    let config = env.config.clone();
    let limit = 4 << 20;
    // Target b answers a second late, so the notifier's kill often lands mid-delivery.
    let targets = [hook(started, Arc::new(|_| Phase::Healthy)).await, hook(started, Arc::new(|_| Phase::Slow)).await];
    let target_list = format!(r#"[{{name="a", url="{}"}}, {{name="b", url="{}"}}]"#, targets[0].url, targets[1].url);
    let mut p = Pipeline::new(env, dir.path(), &target_list);
    p.vars.push(("TAYGA_INGEST_MAX_BODY_BYTES".into(), limit.to_string()));
    for name in ["ingest", "writer", "writer-b", "assembler", "assembler-b", "logminer", "notifier", "notifier-b"] {
        p.start(name);
    }
    let base = format!("http://{}", p.ingest_http);
    assert!(wait_http_ok(&format!("{base}/health"), Duration::from_secs(60)).await, "ingest did not answer");
    let mut timeline = Timeline::default();
    let mut report = Report::default();

    // Each pair splits its topic's partitions before the load starts.
    let partitions = |service: &str| match service {
        "notifier" => tayga::bus::SMALL_TOPIC_PARTITIONS,
        _ => config.kafka.partitions,
    };
    for (service, _) in KILLS {
        let (a, b) = (p.metrics_addr(service), p.metrics_addr(&format!("{service}-b")));
        let gauge = format!("tayga_{service}_assigned_partitions");
        let total = f64::from(partitions(service));
        let split = wait_until(Duration::from_secs(90), || async {
            let (x, y) = (metric(&scrape(&a).await?, &gauge), metric(&scrape(&b).await?, &gauge));
            (x > 0.0 && y > 0.0 && x + y == total).then_some((x, y))
        })
        .await;
        let value = split.map_or("not split within 90 s".into(), |(x, y)| format!("{x} + {y} of {total} partitions"));
        report.row(&format!("{service} replicas split the partitions"), value, split.is_some());
    }
    timeline.events.push((elapsed_secs(started), "pipeline up, each pair split its partitions".into()));

    let traffic_start = Instant::now();
    let acked: Arc<Mutex<Acked>> = Arc::default();
    let own = tokio::spawn(own_client(base, traffic_start + TRAFFIC, 4, limit, acked.clone()));

    // Kill one of each pair while the load runs; the survivor must take every partition.
    let mut writer_killed_ns = 0;
    // (kill, takeover) of each service, seconds into the run.
    let mut windows: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for (service, at) in KILLS {
        tokio::time::sleep_until((traffic_start + Duration::from_secs_f64(at)).into()).await;
        let victim = format!("{service}-b");
        let gauge = format!("tayga_{service}_assigned_partitions");
        let victim_addr = p.metrics_addr(&victim);
        let owned = scrape(&victim_addr).await.map_or(0.0, |t| metric(&t, &gauge));
        let killed_at = elapsed_secs(started);
        if service == "writer" {
            writer_killed_ns = tayga::store::now_ns();
        }
        if service == "notifier" {
            timeline.notifier_kills.push(killed_at);
        }
        p.kill9(&victim);
        let survivor = p.metrics_addr(service);
        let total = f64::from(partitions(service));
        let took = wait_until(Duration::from_secs(60), || async {
            (metric(&scrape(&survivor).await?, &gauge) == total).then(|| elapsed_secs(started) - killed_at)
        })
        .await;
        let value = match took {
            Some(s) => format!("{victim} owned {owned}; {service} owned all {total} {s:.1} s after the kill"),
            None => format!("{victim} owned {owned}; {service} did not own all {total} within 60 s"),
        };
        timeline.events.push((killed_at, format!("kill -9 {victim} (not restarted)")));
        windows.insert(service, (killed_at, killed_at + took.unwrap_or(60.0)));
        report.row(&format!("{service} takes over after kill -9"), value, owned > 0.0 && took.is_some());
    }

    own.await.unwrap();
    timeline.events.push((elapsed_secs(started), "traffic ended".into()));
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let exited = p.exited();

    // Settle: until the reconciliation is clean, or for at most 90 s.
    let settle = Instant::now() + Duration::from_secs(90);
    let mut checks;
    loop {
        checks = reconcile(&store, &acked, (started_ns, writer_killed_ns), &windows, &targets, &timeline).await;
        if checks.failures().is_empty() || Instant::now() > settle {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    report.row("daemons that exited by themselves", format!("{exited:?}"), exited.is_empty());

    let mut table =
        format!("\nreplicas: {:.0} s of traffic, {:.0} s in all\n", TRAFFIC.as_secs_f64(), elapsed_secs(started));
    for (at, what) in &timeline.events {
        writeln!(table, "  {at:>7.1} s  {what}").unwrap();
    }
    table.push_str(&report.render());
    table.push_str(&checks.render());
    println!("{table}");
    let failures: Vec<String> = report.failures().into_iter().chain(checks.failures()).collect();
    if !failures.is_empty() || std::env::var("TAYGA_REPLICAS_KEEP").is_ok() {
        eprintln!("replica logs kept in {}", dir.keep().display());
    }
    drop(p);
    failures
}

/// Polls `check` every 250 ms until it answers, for at most `limit`.
async fn wait_until<T, F, Fut>(limit: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(value) = check().await {
            return Some(value);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

async fn reconcile(
    store: &tayga::store::Store,
    acked: &Acked,
    (started_ns, writer_killed_ns): (u64, u64),
    windows: &BTreeMap<&str, (f64, f64)>,
    targets: &[crate::soak::Hook; 2],
    timeline: &Timeline,
) -> Report {
    let mut r = Report::default();

    // Spans: once in a FINAL read; a second raw copy only of what the dead writer stored
    // and had not committed (its survivor read those records again).
    let final_spans: Vec<SpanRow> = fetch!(store, SpanRow, format!("FINAL WHERE service IN ({TRACED})"));
    let raw_spans: Vec<SpanRow> = fetch!(store, SpanRow, format!("WHERE service IN ({TRACED})"));
    let tally = tally_spans(&final_spans, &acked.spans);
    let mut copies: BTreeMap<(&str, &str), (usize, u64)> = BTreeMap::new();
    for s in &raw_spans {
        copies.entry((&s.trace_id, &s.span_id)).or_insert((0, s.ingest_ns)).0 += 1;
    }
    let recopied =
        |ingest_ns: u64| ingest_ns <= writer_killed_ns && writer_killed_ns - ingest_ns <= UNCOMMITTED_WINDOW_NS;
    let raw_extra: usize = copies.values().map(|(n, _)| n - 1).sum();
    let unexplained: Vec<String> = copies
        .iter()
        .filter(|(_, (n, at))| *n > 1 && !recopied(*at))
        .map(|((t, s), (n, _))| format!("{t}/{s} ×{n}"))
        .collect();
    r.row(
        "acknowledged spans stored once",
        format!(
            "{}: lost {}, doubled (FINAL) {}; raw {} rows, {raw_extra} second copies re-read after the writer kill, {} other{}",
            acked.spans.len(),
            tally.lost,
            tally.doubled,
            raw_spans.len(),
            unexplained.len(),
            first_few(&unexplained)
        ),
        tally.lost == 0 && tally.doubled == 0 && unexplained.is_empty() && !acked.spans.is_empty(),
    );

    // Logs go through the same writers.
    let logs: Vec<LogRow> = fetch!(store, LogRow, format!("FINAL WHERE service IN ({LOGGED})"));
    let mut by_body: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &logs {
        *by_body.entry(l.body.as_str()).or_default() += 1;
    }
    let lost_logs = acked.logs.iter().filter(|b| !by_body.contains_key(b.as_str())).count();
    let doubled_logs = by_body.values().filter(|n| **n > 1).count();
    r.row(
        "acknowledged logs stored once",
        format!("{}: lost {lost_logs}, doubled (FINAL) {doubled_logs}", acked.logs.len()),
        lost_logs == 0 && doubled_logs == 0,
    );

    // Stories: one, complete, per acknowledged trace (each is sent whole in one request).
    let want_traces: BTreeMap<&str, u32> = acked.traces.iter().map(|(t, n)| (t.as_str(), *n)).collect();
    let stored_stories = stories(store).await;
    stories_row(&mut r, &stored_stories, &want_traces);
    // What waited for a hand-over: sent between a replica's kill and its survivor's takeover,
    // and finished after the dead member's session expired and at least 2 s after it was sent
    // (informational: which partitions a trace or an alert lands on is up to its key's hash).
    let secs = |ns: u64| ns.saturating_sub(started_ns) as f64 / 1e9;
    let session = tayga::bus::SESSION_TIMEOUT_MS as f64 / 1e3;
    let handed_over = |service: &str, from: f64, done: f64| {
        windows.get(service).is_some_and(|(kill, takeover)| {
            (*kill..*takeover).contains(&from) && done >= kill + session && done - from >= 2.0
        })
    };
    let waited = stored_stories.values().filter(|s| handed_over("assembler", secs(s.start_ns), secs(s.version_ns)));
    r.row("stories that waited for the assembler hand-over", waited.count().to_string(), true);

    // Alerts: each delivered once to each target, and each pair's row final.
    let alerts: Vec<AlertRow> = fetch!(store, AlertRow, "FINAL");
    let milestones = alerts.iter().filter(|a| a.kind == "new_template" && a.template.contains("milestone")).count();
    r.row("alerts raised", format!("{} ({milestones} from the client's new shapes)", alerts.len()), milestones > 0);
    let deliveries: Vec<DeliveryRow> = fetch!(store, DeliveryRow, "FINAL");
    let stored_at: BTreeMap<u64, u64> = alerts.iter().map(|a| (a.alert_id, a.stored_ns)).collect();
    let waited = targets[0]
        .receipts()
        .iter()
        .filter(|t| stored_at.get(&t.alert_id).is_some_and(|at| handed_over("notifier", secs(*at), t.at)))
        .count();
    r.row("alerts that waited for the notifier hand-over", waited.to_string(), true);
    for (name, target) in ["a", "b"].iter().zip(targets) {
        delivered_once_row(&mut r, &format!("alerts delivered to target {name}"), &alerts, target, timeline);
        let rows: BTreeSet<u64> =
            deliveries.iter().filter(|d| d.target == *name && d.status == "delivered").map(|d| d.alert_id).collect();
        let without: Vec<String> =
            alerts.iter().filter(|a| !rows.contains(&a.alert_id)).map(|a| format!("{:016x}", a.alert_id)).collect();
        r.row(
            &format!("target {name}'s rows say delivered"),
            format!("{} of {}{}", rows.len(), alerts.len(), first_few(&without)),
            without.is_empty(),
        );
    }
    r
}
