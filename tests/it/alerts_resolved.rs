//! Resolved notices against the real ClickHouse and broker (docs/alerts.md "An alert's
//! life", docs/notifier.md "Resolved notices"): the logminer resolves an alert that turned
//! inactive once, with a deterministic time; the notifier sends it once to each target that
//! asked (`send_resolved`) and was told of the alert while firing, signed and verified by
//! the Standard Webhooks reference verifier, as a PagerDuty resolve with the trigger's
//! dedup key; a copy read again sends nothing; a target whose breaker is open gets one
//! attempt.

use crate::common;
use crate::logminer::{self, Replica, MIN};
use crate::notifier_support::*;

use common::{wait_for, TestEnv};
use tayga::daemon::notifier::metrics::DeliveryResult;
use tayga::store::deliveries::latest_for_alert;
use tayga::store::{now_ns, AlertRow, DeliveryRow, Store};
use tayga::wire::alert::{format_id, Alert, AlertKind, AlertState};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The version of `alert` the logminer publishes once it turned inactive.
fn resolved(alert: &Alert) -> Alert {
    Alert { state: AlertState::Resolved, resolved_at: now_ns(), ..alert.clone() }
}

async fn resolved_row(store: &Store, alert_id: u64, target: &str) -> Option<DeliveryRow> {
    let rows = latest_for_alert(store, alert_id, AlertState::Resolved).await.unwrap();
    rows.into_iter().find(|r| r.target == target)
}

async fn wait_resolved(store: &Store, alert_id: u64, target: &str, status: &str) -> DeliveryRow {
    wait_for(&format!("{target}'s resolved notice {status}"), WAIT, || async move {
        resolved_row(store, alert_id, target).await.filter(|r| r.status == status)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolved_alert_reaches_each_target_that_asked_and_was_told_once() {
    let env = TestEnv::new("resolved_notices");
    let secrets = tempfile::tempdir().unwrap();
    let secrets_file = secrets.path().join("signing");
    std::fs::write(&secrets_file, SECRET).unwrap();
    let routing_key_file = secrets.path().join("routing_key");
    std::fs::write(&routing_key_file, "R0UT1NGKEY0000000000000000000000").unwrap();

    // The signed target fails its resolved notice once: the retry is the same message.
    let ops_hook = Hook::start(vec![Reply::status(200), Reply::status(503)], Reply::status(200)).await;
    let (pager_hook, quiet_hook, broken_hook) =
        (Hook::always(202).await, Hook::always(200).await, Hook::always(400).await);
    let mut ops = ops_hook.target("ops");
    ops.secrets_file = secrets_file.display().to_string();
    ops.send_resolved = true;
    let mut pager = pager_hook.target("pager");
    pager.format = "pagerduty".into();
    pager.routing_key_file = routing_key_file.display().to_string();
    pager.send_resolved = true;
    // Never asked for resolved notices.
    let quiet = quiet_hook.target("quiet");
    // Asked, but its firing delivery failed (a permanent 400): it never heard of the alert.
    let mut broken = broken_hook.target("broken");
    broken.send_resolved = true;
    let config = notifier_config(&env.config, vec![ops, pager, quiet, broken]);
    let notifier = Running::start(&config).await;
    let store = env.store();

    let firing = alert("resolved_notices", 1, AlertKind::Spike);
    publish(&config, &[&firing]).await;
    for target in ["ops", "pager", "quiet"] {
        wait_status(&store, firing.alert_id, target, "delivered").await;
    }
    wait_status(&store, firing.alert_id, "broken", "failed").await;
    wait_committed(&config, 1).await;

    let done = resolved(&firing);
    publish(&config, &[&done]).await;
    let ops_row = wait_resolved(&store, firing.alert_id, "ops", "delivered").await;
    assert_eq!(ops_row.attempts, 2, "a 503, then the notice");
    wait_resolved(&store, firing.alert_id, "pager", "delivered").await;
    wait_committed(&config, 2).await;
    assert_eq!(notifier.count("broken", DeliveryResult::unannounced), 1);
    assert!(resolved_row(&store, firing.alert_id, "broken").await.is_none(), "nothing recorded for it");
    assert!(resolved_row(&store, firing.alert_id, "quiet").await.is_none());
    assert_eq!((quiet_hook.count(), broken_hook.count()), (1, 1), "the firing alert only");

    // A copy read again (a republication, a re-read of the topic) sends nothing more.
    publish(&config, &[&done]).await;
    wait_committed(&config, 3).await;
    assert_eq!(notifier.count("ops", DeliveryResult::duplicate), 1);
    assert_eq!(notifier.count("pager", DeliveryResult::duplicate), 1);

    // ops: the firing alert, then the resolved notice twice (a 503 and its retry), the
    // notice a message of its own, signed, and accepted by the reference verifier.
    let got = ops_hook.received();
    assert_eq!(got.len(), 3, "{:?}", got.iter().map(|r| &r.body).collect::<Vec<_>>());
    assert_eq!((got[0].body["state"].as_str(), got[2].body["state"].as_str()), (Some("firing"), Some("resolved")));
    assert_eq!(got[2].body["alert_id"], format_id(firing.alert_id));
    assert_eq!(got[2].body["resolved_at"], done.resolved_at);
    let id = |r: &Received| r.headers["webhook-id"].to_str().unwrap().to_string();
    assert_eq!(id(&got[1]), id(&got[2]), "a retry of the notice is the same message");
    assert_ne!(id(&got[0]), id(&got[2]), "the notice is not the firing message");
    let check = |r: &Received| serde_json::json!({"check": "signature", "secret": SECRET, "headers": headers_json(r), "body_b64": b64(&r.raw)});
    assert_eq!(verify(&[check(&got[0]), check(&got[2])]), ["ok", "ok"]);

    // pager: a trigger, then a resolve naming the same incident.
    let events: Vec<serde_json::Value> = pager_hook.received().into_iter().map(|r| r.body).collect();
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[0]["event_action"].as_str(), events[1]["event_action"].as_str()),
        (Some("trigger"), Some("resolve"))
    );
    assert_eq!(events[1]["dedup_key"], events[0]["dedup_key"]);
    assert_eq!(events[1]["routing_key"], "R0UT1NGKEY0000000000000000000000");

    // The delivery history shows each state as its own row.
    let (out, stdout, stderr) = tayga(&env, &["deliveries", "show", "--alert-id", &format_id(firing.alert_id)]).await;
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "target\tstate\tstatus\tattempts\tlast_error\tcreated\tupdated");
    let states: Vec<(&str, &str, &str)> = lines[1..]
        .iter()
        .map(|l| {
            let cells: Vec<&str> = l.split('\t').collect();
            (cells[0], cells[1], cells[2])
        })
        .collect();
    assert_eq!(
        states,
        [
            ("broken", "firing", "failed"),
            ("ops", "firing", "delivered"),
            ("pager", "firing", "delivered"),
            ("quiet", "firing", "delivered"),
            ("ops", "resolved", "delivered"),
            ("pager", "resolved", "delivered"),
        ]
    );

    // The API and the app list the notices by state.
    let base = serve_api(&store).await;
    let api: serde_json::Value =
        reqwest::get(format!("{base}/api/v1/deliveries?state=resolved")).await.unwrap().json().await.unwrap();
    let notices: Vec<(&str, &str)> = api["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["target"].as_str().unwrap(), d["state"].as_str().unwrap()))
        .collect();
    assert_eq!(notices, [("ops", "resolved"), ("pager", "resolved")], "{api}");
    let page = reqwest::get(format!("{base}/deliveries?state=resolved")).await.unwrap().text().await.unwrap();
    assert_eq!(page.matches("<tr class=\"delivery\"").count(), 2, "{page}");
    // The alert page (of the alert as the logminer stores it) says when it was resolved and
    // shows each target's notice beside its delivery.
    let stored = done.to_row(done.first_at, done.resolved_at);
    tayga::store::logminer::store_alerts(&store, std::slice::from_ref(&stored)).await.unwrap();
    let alert_page =
        reqwest::get(format!("{base}/alerts/{}", format_id(firing.alert_id))).await.unwrap().text().await.unwrap();
    assert!(alert_page.contains("<dt>resolved</dt>"), "{alert_page}");
    assert_eq!(alert_page.matches("<span class=\"muted\">resolved</span>").count(), 2, "{alert_page}");
    notifier.stop().await;
}

/// The API and app on `store`, without tokens, on a free loopback port; its base URL.
async fn serve_api(store: &Store) -> String {
    let state = tayga::daemon::api::handlers::AppState {
        store: store.clone(),
        query_timeout: std::time::Duration::from_secs(10),
        now_ns,
        alerts_topic: None,
    };
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = tayga::daemon::api::metrics::RequestMetrics::register(&mut registry);
    let health: tayga::daemon::HealthFn = std::sync::Arc::new(|| serde_json::json!({}));
    let app = tayga::daemon::api::router::router(state, std::sync::Arc::new(registry), metrics, health, "");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// A target whose breaker is open gets one attempt of a resolved notice, like any alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolved_notice_to_a_target_with_an_open_breaker_gets_one_attempt() {
    let env = TestEnv::new("resolved_breaker");
    // The first alert is delivered; the second fails its whole ladder (2 attempts), which
    // opens the breaker; the first's resolved notice then gets a single attempt.
    let hook = Hook::start(vec![Reply::status(200)], Reply::status(503)).await;
    let mut flaky = hook.target("flaky");
    flaky.send_resolved = true;
    let mut config = notifier_config(&env.config, vec![flaky]);
    config.notifier.max_attempts = 2;
    let notifier = Running::start(&config).await;
    let store = env.store();

    let first = alert("resolved_breaker", 1, AlertKind::Spike);
    let second = alert("resolved_breaker", 2, AlertKind::Spike);
    publish(&config, &[&first]).await;
    wait_status(&store, first.alert_id, "flaky", "delivered").await;
    publish(&config, &[&second]).await;
    wait_status(&store, second.alert_id, "flaky", "failed").await;
    assert!(notifier.metrics_text().contains("tayga_notifier_breaker_open{target=\"flaky\"} 1"));

    publish(&config, &[&resolved(&first)]).await;
    let row = wait_resolved(&store, first.alert_id, "flaky", "failed").await;
    assert_eq!((row.attempts, row.last_error.as_str()), (1, "HTTP 503 Service Unavailable"));
    wait_committed(&config, 3).await;
    assert_eq!(hook.count(), 1 + 2 + 1);
    notifier.stop().await;
}

/// The logminer resolves an alert of a service it owns once it turned inactive: a newer
/// version with `resolved_at` = `last_at` + the active window, stored, then published with
/// state `resolved`; later passes do not resolve it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_logminer_resolves_an_inactive_alert_once() {
    let env = TestEnv::new("resolved_logminer");
    let store = logminer::prepare(&env).await;
    let replica = Replica::start_tick_only(&env, "r1", 1);
    // The replica owns a service once it mined one of its lines.
    logminer::produce(&env.config, "payments", &[(now_ns(), "card 4 declined by issuer".into())]).await;
    wait_for("payments owned", logminer::WAIT, || {
        let r = &replica;
        async move { r.ownership().await?.1.contains("payments").then_some(()) }
    })
    .await;
    // A spike of payments whose last minute was 10 minutes ago: inactive since 5 minutes.
    let last_at = now_ns() - 10 * MIN;
    let spike = AlertRow {
        alert_id: 0x05e5_01ed,
        kind: "spike".into(),
        service: "payments".into(),
        template_id: 77,
        template: "card <*> declined by issuer".into(),
        first_at: last_at - MIN,
        last_at,
        count: 400,
        baseline: 3.0,
        threshold: 15.0,
        stored_ns: last_at,
        updated_ns: last_at,
        resolved_at: 0,
        shape: String::new(),
    };
    store.insert(std::slice::from_ref(&spike)).await.unwrap();
    let resolved =
        wait_for("the resolved version", logminer::WAIT, || {
            let store = store.clone();
            async move {
                logminer::alerts(&store).await.into_iter().find(|a| a.alert_id == spike.alert_id && a.resolved_at > 0)
            }
        })
        .await;
    assert_eq!(resolved.resolved_at, last_at + tayga::store::logminer::ACTIVE_WINDOW_NS);
    assert_eq!((resolved.last_at, resolved.count, resolved.stored_ns), (last_at, 400, last_at));
    wait_for("the resolution counted", logminer::WAIT, || {
        let r = &replica;
        async move { (r.metric("tayga_logminer_resolved_alerts_total").await? >= 1.0).then_some(()) }
    })
    .await;
    // Three more passes resolve nothing again.
    let passes = || {
        let r = &replica;
        async move { r.metric("tayga_logminer_pass_duration_seconds_count{pass=\"detection\"}").await }
    };
    let before = wait_for("a pass", logminer::WAIT, || async { passes().await }).await;
    wait_for("three more passes", logminer::WAIT, || async { (passes().await? >= before + 3.0).then_some(()) }).await;
    let versions = logminer::count(
        &store,
        &format!("SELECT count() FROM log_alerts WHERE alert_id = {} AND resolved_at > 0", spike.alert_id),
    )
    .await;
    assert_eq!(versions, 1, "resolved once");
    assert_eq!(replica.metric("tayga_logminer_resolved_alerts_total").await, Some(1.0));
    // On the topic: the payments line's new template, and the spike's resolved version once
    // (the firing version, never marked, was replaced by it before any republication).
    let records = common::read_alerts(&env.config, 2);
    let ours: Vec<&Alert> = records.iter().map(|(_, a)| a).filter(|a| a.alert_id == spike.alert_id).collect();
    let resolved_copies: Vec<&&Alert> = ours.iter().filter(|a| a.state == AlertState::Resolved).collect();
    assert_eq!(resolved_copies.len(), 1, "{ours:?}");
    assert_eq!(resolved_copies[0].resolved_at, resolved.resolved_at);
    drop(replica);
}
