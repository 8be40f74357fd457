//! The shape rules as `tayga serve logminer` replicas apply them to stored stories
//! (docs/alerts.md, "Shape alerts"): two replicas split the endpoints by the logs partition
//! their root service hashes to; one is killed with SIGKILL right after new paths appeared
//! in its endpoints, and the survivor announces every new path exactly once (on a cache hit
//! and on a miss it is two fingerprints, one change, one alert), while steady
//! branches, fan-outs of any width and a rare new branch raise nothing; the same stories
//! stored again (as an assembler re-reading `signals` stores them) and a fresh replica
//! raise nothing twice. A slower shape raises one `shape_slowdown` that keeps its id across
//! a kill. End to end with the Python SDK, both kinds are delivered once, and once the slow
//! shape is fast again both resolve, each with one resolved notice.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::common::{self, wait_for, ChildGuard, TestEnv};
use crate::logminer::{alerts, count, prepare, MIN, WAIT};
use tayga::bus::packed::plan::partition_for;
use tayga::identity::{new_path_subject, story_fingerprint};
use tayga::store::logminer::{self as lm, heartbeat_key, State};
use tayga::store::{now_ns, AlertRow, Store, StoryRow};
use tayga::wire::alert::{AlertKind, ShapeChange};

const OP: &str = "GET /x";

/// A `tayga serve logminer` replica with the shape rules shortened for a test's minutes.
struct Judge {
    child: ChildGuard,
    metrics_addr: String,
}

impl Judge {
    fn start(env: &TestEnv, id: &str) -> Judge {
        let metrics_addr = format!("127.0.0.1:{}", common::free_port());
        let child = ChildGuard::spawn_logged(
            env.tayga()
                .args(["serve", "logminer"])
                .env("TAYGA_LOGMINER_METRICS_ADDR", &metrics_addr)
                .env("TAYGA_LOGMINER_REPLICA_ID", id)
                .env("TAYGA_LOGMINER_TICK_SECS", "1")
                .env("TAYGA_LOGMINER_SHAPES_WARMUP_MIN", "10")
                .env("TAYGA_LOGMINER_SHAPES_WARMUP_TRACES", "50")
                .env("TAYGA_LOGMINER_SHAPES_EVIDENCE_WINDOW_MIN", "5")
                .env("TAYGA_LOGMINER_SHAPES_MIN_COUNT", "5")
                .env("TAYGA_LOGMINER_SHAPES_MIN_SHARE", "0.05")
                .env("TAYGA_LOGMINER_SHAPES_SLOWDOWN_WINDOW_MIN", "5")
                .env("TAYGA_LOGMINER_SHAPES_SLOWDOWN_BASELINE_MIN", "30")
                .env("TAYGA_LOGMINER_SHAPES_SLOWDOWN_MIN_COUNT", "10"),
            &format!("tayga serve logminer ({id})"),
        );
        Judge { child, metrics_addr }
    }

    async fn partitions(&self) -> Option<BTreeSet<i32>> {
        let h: serde_json::Value =
            reqwest::get(format!("http://{}/health", self.metrics_addr)).await.ok()?.json().await.ok()?;
        Some(h["partitions"].as_array()?.iter().filter_map(|p| p.as_i64().map(|p| p as i32)).collect())
    }

    fn kill9(&mut self) {
        let status = std::process::Command::new("kill").arg("-KILL").arg(self.child.id().to_string()).status();
        assert!(status.unwrap().success());
        self.child.wait_within(Duration::from_secs(10));
    }
}

/// A call edge: the parent (none for the root) and the callee, each (service, operation).
type Edge<'a> = (Option<(&'a str, &'a str)>, (&'a str, &'a str));

/// A root's shape: the root span and the calls it makes (repeated calls are one edge).
fn story(trace_id: String, root: &str, calls: &[(&str, &str)], start_ns: u64, duration_ms: u64) -> StoryRow {
    let mut edges: Vec<Edge<'_>> = vec![(None, (root, OP))];
    edges.extend(calls.iter().map(|c| (Some((root, OP)), *c)));
    let text: BTreeSet<String> = edges
        .iter()
        .map(|(parent, (s, o))| match parent {
            None => format!("ROOT -> {s}/{o}"),
            Some((ps, po)) => format!("{ps}/{po} -> {s}/{o}"),
        })
        .collect();
    StoryRow {
        trace_id,
        fingerprint: story_fingerprint(edges.iter().copied()),
        root_service: root.into(),
        root_operation: OP.into(),
        start_ns,
        duration_ns: duration_ms * 1_000_000,
        span_count: edges.len() as u32,
        services: vec![root.into()],
        edges: text.into_iter().collect(),
        version_ns: now_ns(),
        ..Default::default()
    }
}

const HIT: &[(&str, &str)] = &[("cache", "get")];
const MISS: &[(&str, &str)] = &[("cache", "get"), ("db", "query")];
/// A fan-out: its width varies, its edges do not.
fn fan_out(width: usize) -> Vec<(&'static str, &'static str)> {
    std::iter::once(("cache", "get")).chain(std::iter::repeat_n(("item", "get"), width)).collect()
}
const LOCK: &[(&str, &str)] = &[("cache", "get"), ("db", "lock row")];
/// The new path on a cache miss: another fingerprint, the same change.
const LOCK_MISS: &[(&str, &str)] = &[("cache", "get"), ("db", "query"), ("db", "lock row")];
const RARE_OLD: &[(&str, &str)] = &[("cache", "get"), ("audit", "write")];
const RARE_NEW: &[(&str, &str)] = &[("cache", "get"), ("audit", "export")];

/// One minute of an endpoint's steady traffic: 3 cache hits, 2 misses, 1 fan-out, and
/// every tenth minute a rare branch.
fn steady_minute(root: &str, minute_start: u64, tag: &str) -> Vec<StoryRow> {
    let id = |i: usize| format!("{root}-{tag}-{minute_start}-{i}");
    let mut rows = vec![
        story(id(0), root, HIT, minute_start + 1_000, 100),
        story(id(1), root, HIT, minute_start + 2_000, 100),
        story(id(2), root, HIT, minute_start + 3_000, 100),
        story(id(3), root, MISS, minute_start + 4_000, 100),
        story(id(4), root, MISS, minute_start + 5_000, 100),
        story(id(5), root, &fan_out(1 + (minute_start / MIN % 7) as usize), minute_start + 6_000, 100),
    ];
    if (minute_start / MIN).is_multiple_of(10) {
        rows.push(story(id(6), root, RARE_OLD, minute_start + 7_000, 100));
    }
    rows
}

async fn insert(store: &Store, rows: &[StoryRow]) {
    store.insert(rows).await.expect("stories stored");
}

fn of_kind(rows: &[AlertRow], kind: AlertKind) -> Vec<AlertRow> {
    rows.iter().filter(|a| a.kind == kind.as_str()).cloned().collect()
}

/// Waits until `replica`'s heartbeat is after `after_ns` (it completed a detection pass
/// started after then).
async fn pass_after(store: &Store, replica: &str, after_ns: u64) {
    wait_for(&format!("a pass of {replica} after {after_ns}"), WAIT, || async move {
        let state = State::load(store).await.ok()?;
        (state.get_ns(&heartbeat_key(replica))? > after_ns).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_judges_lose_one_to_kill9_and_every_new_path_is_announced_once() {
    let env = TestEnv::new("shapes_replicas");
    let store = prepare(&env).await;
    let partitions = env.config.kafka.partitions;
    let roots: Vec<String> = (0..8).map(|i| format!("edge-{i}")).collect();
    let start = now_ns() / MIN * MIN;
    // 40 minutes of history: every branch the endpoints take is learnt.
    let mut history = Vec::new();
    for root in &roots {
        for m in 1..=40 {
            history.extend(steady_minute(root, start - m * MIN, "h"));
        }
    }
    insert(&store, &history).await;

    let mut a = Judge::start(&env, "a");
    let b = Judge::start(&env, "b");
    let (held_a, held_b) = wait_for("a 6/6 split", WAIT, || {
        let (a, b) = (&a, &b);
        async move {
            let (pa, pb) = (a.partitions().await?, b.partitions().await?);
            (pa.len() == 6 && pb.len() == 6).then_some((pa, pb))
        }
    })
    .await;
    let judged_by = |held: &BTreeSet<i32>| -> Vec<String> {
        roots.iter().filter(|r| held.contains(&partition_for(r.as_bytes(), partitions))).cloned().collect()
    };
    let (roots_a, roots_b) = (judged_by(&held_a), judged_by(&held_b));
    assert_eq!(roots_a.len() + roots_b.len(), roots.len());
    assert!(!roots_a.is_empty() && !roots_b.is_empty(), "each replica judges an endpoint: {roots_a:?} {roots_b:?}");
    // Both judged the history once: nothing in it is new.
    let since = now_ns();
    pass_after(&store, "a", since).await;
    pass_after(&store, "b", since).await;
    assert!(alerts(&store).await.is_empty(), "history and steady branches raise nothing");

    // Now: steady traffic everywhere, a rare branch never seen before (too few traces to be
    // a path), and a new path (the row lock) taken by a third of the traffic.
    let now = now_ns();
    let mut current = Vec::new();
    let mut new_paths = BTreeMap::new();
    for root in &roots {
        current.extend(steady_minute(root, now, "n"));
        current.push(story(format!("{root}-rare-new"), root, RARE_NEW, now + 8_000, 100));
        let lock: Vec<StoryRow> = (0..3)
            .map(|i| {
                story(format!("{root}-lock-{i}"), root, if i == 1 { LOCK_MISS } else { LOCK }, now + 9_000 + i, 900)
            })
            .collect();
        new_paths.insert(root.clone(), lock[0].fingerprint);
        current.extend(lock);
    }
    // a's endpoints first, and a dies at once: its new paths were seen just before it stopped.
    let (for_a, for_b): (Vec<StoryRow>, Vec<StoryRow>) =
        current.iter().cloned().partition(|s| roots_a.contains(&s.root_service));
    insert(&store, &for_a).await;
    a.kill9();
    insert(&store, &for_b).await;
    // 3 lock traces of 9 are 5 short of min_count; 2 more minutes give the evidence.
    let mut more = Vec::new();
    for root in &roots {
        for m in 1..=2 {
            more.extend(steady_minute(root, now + m * MIN / 4, &format!("m{m}")));
            more.extend(
                (0..3).map(|i| story(format!("{root}-lock-{m}-{i}"), root, LOCK, now + m * MIN / 4 + 9_000 + i, 900)),
            );
        }
    }
    insert(&store, &more).await;
    wait_for("b to hold all 12 partitions", WAIT, || {
        let b = &b;
        async move { (b.partitions().await?.len() == 12).then_some(()) }
    })
    .await;
    let raised = wait_for("a new_shape alert per endpoint", WAIT, || {
        let store = store.clone();
        let n = roots.len();
        async move {
            let new = of_kind(&alerts(&store).await, AlertKind::NewShape);
            (new.len() >= n).then_some(new)
        }
    })
    .await;
    // A few more passes change nothing.
    pass_after(&store, "b", now_ns()).await;
    pass_after(&store, "b", now_ns()).await;
    let all = alerts(&store).await;
    assert_eq!(all.len(), roots.len(), "one alert per new path and no other: {all:#?}");
    for alert in &raised {
        assert_eq!(alert.template, OP);
        assert_eq!(Some(&alert.template_id), new_paths.get(&alert.service), "the lock path of {}", alert.service);
        let change = ShapeChange::from_column(&alert.shape).expect("a shape alert says what changed");
        assert_eq!(change.edges_added, vec![format!("{}/{OP} -> db/lock row", alert.service)]);
        assert!(change.edges_removed.is_empty(), "{change:?}");
        assert!(change.trace_id.starts_with(&format!("{}-lock-", alert.service)));
        assert_eq!(change.new_edges, change.edges_added);
        let subject = new_path_subject(&alert.service, OP, &change.new_edges);
        assert_eq!(alert.alert_id, tayga::identity::alert_id(AlertKind::NewShape, subject, 0));
    }
    assert_eq!(count(&store, "SELECT count() FROM log_alerts").await, roots.len() as u64, "each stored once");
    // Every alert reached the topic, as version 2 with its edges.
    let published = common::read_alerts(&env.config, roots.len());
    let ids: BTreeSet<u64> = published.iter().map(|(_, a)| a.alert_id).collect();
    assert_eq!(ids, raised.iter().map(|a| a.alert_id).collect());
    assert!(published
        .iter()
        .all(|(_, a)| a.version == 2 && a.shape.as_ref().is_some_and(|s| s.edges_added.len() == 1)));

    // The same stories stored again (a re-read), then a fresh replica: nothing twice.
    let again: Vec<StoryRow> =
        current.iter().chain(&more).map(|s| StoryRow { version_ns: now_ns(), ..s.clone() }).collect();
    insert(&store, &again).await;
    drop(b);
    let c = Judge::start(&env, "c");
    wait_for("c to hold all 12 partitions", WAIT, || {
        let c = &c;
        async move { (c.partitions().await?.len() == 12).then_some(()) }
    })
    .await;
    let restarted = now_ns();
    pass_after(&store, "c", restarted).await;
    pass_after(&store, "c", now_ns()).await;
    assert_eq!(count(&store, "SELECT count() FROM log_alerts").await, roots.len() as u64, "nothing raised twice");
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slower_shape_raises_one_slowdown_that_keeps_its_id_across_a_kill() {
    let env = TestEnv::new("shapes_slowdown");
    let store = prepare(&env).await;
    let now = now_ns();
    let mut rows = Vec::new();
    // 40 minutes at 100 ms, then the last 3 at 800 ms (10 traces a minute).
    for m in 0..40u64 {
        let minute = now - (40 - m) * MIN;
        let ms = if m >= 37 { 800 } else { 100 };
        rows.extend((0..10).map(|i| story(format!("pay-{m}-{i}"), "pay", HIT, minute + i * 1_000_000, ms + i)));
    }
    insert(&store, &rows).await;
    let mut a = Judge::start(&env, "a");
    let slow = wait_for("a shape_slowdown", WAIT, || {
        let store = store.clone();
        async move { of_kind(&alerts(&store).await, AlertKind::ShapeSlowdown).into_iter().next() }
    })
    .await;
    assert_eq!(slow.service, "pay");
    assert_eq!(slow.template_id, rows[0].fingerprint);
    assert!((100.0..110.0).contains(&slow.baseline), "baseline p95 {}", slow.baseline);
    assert!(slow.threshold >= 2.0 * slow.baseline);
    let change = ShapeChange::from_column(&slow.shape).unwrap();
    assert!(change.p95_ms.unwrap() >= 800.0, "{change:?}");
    a.kill9();
    let b = Judge::start(&env, "b");
    let killed = now_ns();
    let after = wait_for("b to refresh the slowdown", WAIT, || {
        let store = store.clone();
        async move {
            let slow = of_kind(&alerts(&store).await, AlertKind::ShapeSlowdown);
            slow.iter().any(|a| a.updated_ns > killed).then_some(slow)
        }
    })
    .await;
    assert_eq!(after.len(), 1, "the same slowdown: {after:#?}");
    assert_eq!((after[0].alert_id, after[0].first_at), (slow.alert_id, slow.first_at));
    assert_eq!(after[0].stored_ns, slow.stored_ns, "it keeps the time it was first stored");
    assert!(of_kind(&alerts(&store).await, AlertKind::NewShape).is_empty(), "no path changed");
    drop(b);
}

/// What `tests/sdk/otel_shapes.py` sent.
#[derive(serde::Deserialize, Debug)]
struct SdkSent {
    traces: u64,
    slow: u64,
    /// Traces of the shape that slowed down, at its usual speed, and the start of its last
    /// slow one.
    usual: u64,
    last_slow_ns: u64,
    lock: u64,
    exports: u64,
    failed: Vec<String>,
}

const SDK_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/otel_shapes.py");
const LOCK_EDGE: &str = "shop/GET /item -> db/SELECT item FOR UPDATE";

/// The user's acceptance, end to end: the stock OpenTelemetry Python SDK sends an
/// endpoint's steady traffic with noisy branches (a cache hit or miss, an optional quote, a
/// fan-out of varying width), one shape that turns slow, then a genuinely new path (on a
/// hit and on a miss) and a rare new branch, to `tayga serve all`: exactly one new_shape,
/// naming the new edge, and one shape_slowdown, each delivered once to the webhook. Then the
/// slow shape is fast again (the SDK sends its usual traffic in real time): the slowdown
/// resolves 5 minutes after its last slow window, the new path 5 minutes after it was first
/// seen (docs/alerts.md, "An alert's life"), and the target, which asked for resolved
/// notices, receives one of each. About ten minutes: the active window is 5 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_endpoint_raises_one_new_path_and_one_slowdown_each_delivered_once_and_resolved_once() {
    use crate::notifier_support::{Hook, Received};
    let env = TestEnv::new("shapes_sdk");
    let hook = Hook::always(200).await;
    let targets =
        format!(r#"[{{name="hook", url="{}", kinds=["new_shape", "shape_slowdown"], send_resolved=true}}]"#, hook.url);
    let serve = common::ServeAll::start(
        &env,
        &[
            ("TAYGA_NOTIFIER_TARGETS", targets.as_str()),
            ("TAYGA_LOGMINER_SHAPES_WARMUP_MIN", "5"),
            ("TAYGA_LOGMINER_SHAPES_WARMUP_TRACES", "50"),
            ("TAYGA_LOGMINER_SHAPES_EVIDENCE_WINDOW_MIN", "5"),
            ("TAYGA_LOGMINER_SHAPES_MIN_COUNT", "5"),
            ("TAYGA_LOGMINER_SHAPES_SLOWDOWN_WINDOW_MIN", "3"),
            ("TAYGA_LOGMINER_SHAPES_SLOWDOWN_BASELINE_MIN", "15"),
            ("TAYGA_LOGMINER_SHAPES_SLOWDOWN_MIN_COUNT", "10"),
        ],
    )
    .await;
    let output = tokio::process::Command::new("python3")
        .args([SDK_SCRIPT, "http", &format!("http://{}", serve.http_addr)])
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let sent: SdkSent = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("no report ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success() && sent.failed.is_empty() && sent.exports > 0, "{sent:?}");
    assert_eq!((sent.traces, sent.lock), (253, 6), "{sent:?}");
    assert!(sent.slow >= 10, "{sent:?}");
    // At once, the endpoint's usual traffic in real time, the slow shape fast again: the
    // slowdown is judged with enough traces in its window until its slow ones have left it.
    let recovery = tokio::spawn(
        tokio::process::Command::new("python3")
            .args([SDK_SCRIPT, "http", &format!("http://{}", serve.http_addr), "recover", "300"])
            .output(),
    );
    let recovery_started = now_ns();

    let store = env.store();
    let raised = wait_for("one new_shape and one shape_slowdown", WAIT, || {
        let store = store.clone();
        async move {
            let all = alerts(&store).await;
            let (new, slow) = (of_kind(&all, AlertKind::NewShape), of_kind(&all, AlertKind::ShapeSlowdown));
            (!new.is_empty() && !slow.is_empty()).then_some(all)
        }
    })
    .await;
    wait_for("both delivered to the webhook", WAIT, || {
        let hook = &hook;
        async move { (hook.successes() >= 2).then_some(()) }
    })
    .await;
    // More passes, and more time for the notifier, change nothing.
    three_more_seconds_of_passes(&store).await;
    let all = alerts(&store).await;
    let kinds: Vec<&str> = all.iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(kinds.len(), 2, "one new_shape and one shape_slowdown, nothing else: {all:#?}");
    assert_eq!(all.iter().map(|a| a.alert_id).collect::<BTreeSet<_>>(), raised.iter().map(|a| a.alert_id).collect());
    let new = &of_kind(&all, AlertKind::NewShape)[0];
    assert_eq!((new.service.as_str(), new.template.as_str()), ("shop", "GET /item"));
    let change = ShapeChange::from_column(&new.shape).unwrap();
    assert_eq!(change.new_edges, vec![LOCK_EDGE]);
    assert!(change.edges_added.contains(&LOCK_EDGE.to_string()), "{change:?}");
    let slow = &of_kind(&all, AlertKind::ShapeSlowdown)[0];
    assert!(slow.threshold >= 2.0 * slow.baseline && slow.baseline < 100.0, "{slow:?}");

    let received = hook.received();
    let by_kind = |kind: &str| received.iter().filter(|r| r.body["kind"] == kind).collect::<Vec<_>>();
    let (new_sent, slow_sent) = (by_kind("new_shape"), by_kind("shape_slowdown"));
    assert_eq!((new_sent.len(), slow_sent.len(), received.len()), (1, 1, 2), "each delivered once");
    let body = &new_sent[0].body;
    assert_eq!(body["version"], 2);
    assert_eq!(body["shape"]["new_edges"], serde_json::json!([LOCK_EDGE]));
    assert!(body["shape"]["edges_added"].as_array().unwrap().iter().any(|e| e == LOCK_EDGE), "{body}");
    assert!(slow_sent[0].body["shape"]["p95_ms"].as_f64().unwrap() >= 400.0, "{}", slow_sent[0].body);

    // What changed, from the alert to the diff: the usual shape against the new one.
    let http = reqwest::Client::new();
    let url = format!(
        "http://{}/api/v1/shapes/{}/diff/{}",
        serve.api_addr,
        tayga::wire::alert::format_id(change.usual_fingerprint),
        tayga::wire::alert::format_id(new.template_id)
    );
    let diff = wait_for("the diff of the usual and the new shape, spans stored", WAIT, || {
        let (http, url) = (&http, &url);
        async move {
            let diff = common::get_json(http, url.clone()).await?;
            let lock = diff["edges"].as_array()?.iter().find(|e| e["edge"] == LOCK_EDGE)?.clone();
            (lock["calls_b"] == 1).then_some((diff, lock))
        }
    })
    .await;
    assert!(diff.0["added"].as_array().unwrap().iter().any(|e| e == LOCK_EDGE), "{}", diff.0);
    assert_eq!(diff.1["calls_a"], 0);
    assert!(diff.1["self_ns_b"].as_u64().unwrap() >= 30_000_000, "the lock's 30 ms are its own: {}", diff.1);
    assert_ne!(diff.0["a"]["trace_id"], diff.0["b"]["trace_id"]);

    // Recovery: the slowdown resolves once its window is fast again.
    let resolved = |kind: AlertKind| {
        let store = store.clone();
        async move { of_kind(&alerts(&store).await, kind).into_iter().find(|a| a.resolved_at > 0) }
    };
    let recovered = wait_for("the slowdown resolved", RECOVERY, || resolved(AlertKind::ShapeSlowdown)).await;
    let first_shape = wait_for("the new path resolved", WAIT, || resolved(AlertKind::NewShape)).await;
    let output = recovery.await.unwrap().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let fast: SdkSent = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("no report ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success() && fast.failed.is_empty() && fast.slow == 0, "{fast:?}");
    assert!(fast.usual >= 40, "the window had the shape's fast traces to judge: {fast:?}");
    // The last slow trace leaves the 3-minute window (on whole minutes) at `gone`. The
    // slowdown was refreshed, judged on a window with the fast traces in it, until a slow
    // share under 5 % no longer moved the p95 (the last minute or two of slow traces), and
    // never once the window was all fast; it resolved 5 minutes after its last refresh,
    // with its id and start.
    let gone = (sent.last_slow_ns / MIN + 4) * MIN;
    assert_eq!((recovered.alert_id, recovered.first_at), (slow.alert_id, slow.first_at));
    assert!(recovered.last_at > recovery_started, "judged with the fast traffic in the window: {recovered:?}");
    assert!(
        (gone - 2 * MIN..gone + 5_000_000_000).contains(&recovered.last_at),
        "last refreshed {} s from the slow traces' leaving the window: {recovered:?}",
        (recovered.last_at as i128 - gone as i128) / 1_000_000_000
    );
    assert_eq!(recovered.resolved_at, recovered.last_at + lm::ACTIVE_WINDOW_NS);
    assert!(recovered.resolved_at <= now_ns());
    assert_eq!(first_shape.alert_id, new.alert_id);
    assert_eq!(first_shape.resolved_at, new.last_at + lm::ACTIVE_WINDOW_NS, "5 minutes after it was first seen");
    let resolved_notices = wait_for("a resolved notice of each", WAIT, || {
        let hook = &hook;
        async move {
            let got: Vec<Received> = hook.received().into_iter().filter(|r| r.body["state"] == "resolved").collect();
            (got.len() >= 2).then_some(got)
        }
    })
    .await;
    // More passes, and more time for the notifier: nothing more.
    three_more_seconds_of_passes(&store).await;
    let all = alerts(&store).await;
    assert_eq!(all.len(), 2, "recovery raised nothing: {all:#?}");
    assert!(all.iter().all(|a| a.resolved_at > 0), "{all:#?}");
    let received = hook.received();
    assert_eq!(received.len(), 4, "each alert once firing and once resolved: {received:#?}");
    for alert in [&recovered, &first_shape] {
        let notices: Vec<&Received> = resolved_notices
            .iter()
            .filter(|r| r.body["alert_id"] == tayga::wire::alert::format_id(alert.alert_id))
            .collect();
        assert_eq!(notices.len(), 1, "one resolved notice for {}: {resolved_notices:#?}", alert.kind);
        assert_eq!(notices[0].body["resolved_at"], alert.resolved_at, "{:?}", notices[0].body);
        assert_eq!(notices[0].body["kind"], alert.kind.as_str());
    }
    drop(serve);
}

/// Waits until a replica completed a pass starting three seconds from now.
async fn three_more_seconds_of_passes(store: &Store) {
    let later = now_ns() + 3_000_000_000;
    wait_for("three more seconds of passes", WAIT, || async move {
        let state = State::load(store).await.ok()?;
        state.heartbeats().iter().any(|h| h.at_ns > later).then_some(())
    })
    .await;
}

/// How long the SDK test waits for its slowdown to resolve: the slow traces leave the
/// 3-minute window (up to 4 minutes on whole minutes), then the 5-minute active window.
const RECOVERY: Duration = Duration::from_secs(12 * 60);
