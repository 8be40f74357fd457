//! The operator's manual retry of a failed delivery (docs/notifier.md "Manual
//! retry"): `tayga deliveries retry` (the binary) and `POST /api/v1/deliveries/{id}/retry`
//! against the notifier's consumer loop, the real ClickHouse and broker, and webhook
//! receivers answering scripted statuses.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::message::{Headers, Message};
use serde_json::{json, Value};
use tayga::daemon::api::handlers::AppState;
use tayga::daemon::notifier::metrics::DeliveryResult;
use tayga::daemon::{prepare, Shutdown};
use tayga::store::{now_ns, DeliveryRow, Store};
use tayga::wire::alert::{format_id, Alert, AlertKind, MANUAL_RETRY_HEADER};
use tayga::workflow::retry::AlertsTopic;

use crate::common::{read_topic, run, wait_for, TestEnv};
use crate::notifier_support::*;

const HOUR_NS: u64 = 3_600_000_000_000;

/// `tayga <args>` as operator `alice`, its clock started at `now_ns` when given.
async fn as_alice(env: &TestEnv, args: &[&str], now_ns: Option<u64>) -> (std::process::Output, String, String) {
    let mut cmd = env.tayga();
    cmd.args(args).env("USER", "alice");
    if let Some(ns) = now_ns {
        cmd.env("TAYGA_NOW_NS", ns.to_string());
    }
    tokio::task::spawn_blocking(move || run(&mut cmd)).await.unwrap()
}

/// What `retried_by` says for a retry by `alice` from this machine.
fn alice() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("cli:alice@{}", host.trim())
}

/// Stores the alert in `log_alerts`, as the logminer does before it publishes it.
async fn store_alert(store: &Store, alert: &Alert) {
    store.insert(&[alert.to_row(alert.last_at, alert.last_at)]).await.unwrap();
}

/// The manual retry end to end: the target answers 400, so the delivery fails; the operator
/// fixes the target and retries; exactly one more delivery follows, recorded as a manual
/// retry, and the other target (already delivered) gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_is_delivered_exactly_once_more_after_a_manual_retry() {
    let env = TestEnv::new("retry_accept");
    // Answers 400 once (a permanent failure), then, fixed, 200.
    let ops = Hook::start(vec![Reply::status(400)], Reply::status(200)).await;
    let pager = Hook::always(200).await;
    let config = notifier_config(&env.config, vec![ops.target("ops"), pager.target("pager")]);
    let notifier = Running::start(&config).await;
    let store = env.store();
    let alert = alert("retry_accept", 1, AlertKind::Spike);
    store_alert(&store, &alert).await;
    publish(&config, &[&alert]).await;

    let failed = wait_status(&store, alert.alert_id, "ops", "failed").await;
    assert_eq!((failed.attempts, failed.last_error.as_str(), failed.manual_retries), (1, "HTTP 400 Bad Request", 0));
    wait_status(&store, alert.alert_id, "pager", "delivered").await;
    wait_committed(&config, 1).await;
    assert_eq!((ops.count(), pager.count()), (1, 1));
    let id = format_id(alert.alert_id);
    let topic = config.names().alerts;
    let hide = |text: &str| {
        mask_times(text).replace(&id, "<alert id>").replace(&topic, "<alerts topic>").replace(&alice(), "<alice>")
    };

    // A dry run says what it would do and changes nothing.
    let (out, stdout, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", &id, "--dry-run"], None).await;
    assert!(out.status.success(), "{stderr}");
    insta::assert_snapshot!("retry_dry_run", hide(&stdout));
    assert_eq!(row(&store, alert.alert_id, "ops").await.unwrap(), failed);

    // A delivered pair is refused: exit 1, one line, nothing written.
    let (out, _, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", &id, "--target", "pager"], None).await;
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!("error: only a failed delivery can be retried: alert {id} is delivered to `pager`")
    );
    // An unknown alert is refused from its (missing) rows alone: the broker is never asked.
    let (out, _, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", "00000000000000ab"], None).await;
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: alert 00000000000000ab has no deliveries, so there is nothing to retry"),
        "{stderr}"
    );
    let (out, _, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", &id, "--target", "mail"], None).await;
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("has no delivery to target `mail`; its targets: ops, pager"), "{stderr}");
    assert_eq!(ops.count(), 1);

    // The retry, of every failed target of the alert (here, ops alone).
    let (out, stdout, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", &id], None).await;
    assert!(out.status.success(), "{stderr}");
    insta::assert_snapshot!("retry_done", hide(&stdout));

    let delivered = wait_status(&store, alert.alert_id, "ops", "delivered").await;
    wait_committed(&config, 2).await;
    assert_eq!((delivered.attempts, delivered.manual_retries), (1, 1), "the ladder started over");
    assert_eq!(delivered.retried_by, alice());
    assert!(delivered.retried_ns > failed.updated_ns);
    assert_eq!(delivered.last_error, "HTTP 400 Bad Request", "what the retry was for");
    assert_eq!(ops.count(), 2, "exactly one more request");
    assert_eq!(ops.successes(), 1);
    assert_eq!(ops.received()[1].body["alert_id"], id);
    assert_eq!(pager.count(), 1, "the delivered target is not sent to again");
    assert_eq!(notifier.count("ops", DeliveryResult::delivered), 1);
    assert_eq!(notifier.count("pager", DeliveryResult::duplicate), 1);
    let text = notifier.metrics_text();
    assert!(text.contains(r#"tayga_notifier_manual_retries_total{target="ops"} 1"#), "{text}");

    // Delivered now, so refused like any final pair: the retry happens once per request.
    let (out, _, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", &id], None).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains(&format!("alert {id} is delivered to `ops`, delivered to `pager`")), "{stderr}");
    let (out, stdout, stderr) = as_alice(&env, &["deliveries", "show", "--alert-id", &id], None).await;
    assert!(out.status.success(), "{stderr}");
    insta::assert_snapshot!("retry_show", hide(&stdout));
    let (_, stdout, _) = as_alice(&env, &["--json", "deliveries", "show", "--alert-id", &id], None).await;
    let shown: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(shown[0]["manual_retries"], 1);
    assert_eq!(shown[0]["retried_by"], alice());
    assert_eq!(shown[0]["retried_ns"], delivered.retried_ns);
    assert_eq!(shown[1]["manual_retries"], 0);
    assert_eq!(ops.count(), 2);
    notifier.stop().await;
}

/// `max_age_secs` judges a retried pair by the later of the alert's `last_at` and the retry,
/// so yesterday's failed alert can be retried today, while a retry that reaches the notifier
/// too late is not sent and fails again, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_alert_is_retried_by_the_retry_time_and_a_late_retry_fails_again() {
    let env = TestEnv::new("retry_stale");
    let hook = Hook::always(200).await;
    let config = notifier_config(&env.config, vec![hook.target("ops")]);
    let notifier = Running::start(&config).await;
    let store = env.store();
    let now = now_ns();
    // Two alerts of yesterday whose deliveries failed then.
    let old: Vec<Alert> = (1..=2)
        .map(|i| {
            let mut a = alert("retry_stale", i, AlertKind::Silence);
            (a.first_at, a.last_at) = (now - 25 * HOUR_NS, now - 24 * HOUR_NS);
            a
        })
        .collect();
    for a in &old {
        store_alert(&store, a).await;
        let failed = DeliveryRow {
            alert_id: a.alert_id,
            target: "ops".into(),
            status: "failed".into(),
            attempts: 8,
            last_error: "HTTP 503 Service Unavailable".into(),
            created_ns: a.last_at,
            updated_ns: a.last_at + 1,
            ..Default::default()
        };
        store.insert(&[failed]).await.unwrap();
    }
    let ids: Vec<String> = old.iter().map(|a| format_id(a.alert_id)).collect();

    // An ordinary copy of it is stale: nothing is sent.
    publish(&config, &[&old[0]]).await;
    wait_committed(&config, 1).await;
    assert_eq!(notifier.count("ops", DeliveryResult::stale), 1);
    assert_eq!(hook.count(), 0);

    // A retry now is judged by its own time: delivered.
    let (out, _, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", &ids[0]], None).await;
    assert!(out.status.success(), "{stderr}");
    let delivered = wait_status(&store, old[0].alert_id, "ops", "delivered").await;
    assert_eq!((delivered.attempts, delivered.manual_retries), (1, 1));
    wait_committed(&config, 2).await;
    assert_eq!(hook.count(), 1);
    assert_eq!(hook.received()[0].body["alert_id"], ids[0]);

    // A retry asked for two hours ago (as if the notifier had been down since) is read too
    // late: not sent, and failed again with the reason, so it can be asked for again.
    let two_hours_ago = now_ns() - 2 * HOUR_NS;
    let (out, _, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", &ids[1]], Some(two_hours_ago)).await;
    assert!(out.status.success(), "{stderr}");
    let expired = wait_for("the late retry failed again", WAIT, || async {
        row(&store, old[1].alert_id, "ops").await.filter(|r| r.status == "failed" && r.manual_retries == 1)
    })
    .await;
    assert!(
        expired.last_error.starts_with("manual retry not sent: read 720")
            && expired.last_error.ends_with("s after it was asked for, beyond max_age_secs (3600)"),
        "{}",
        expired.last_error
    );
    wait_committed(&config, 3).await;
    assert_eq!(hook.count(), 1, "nothing sent for the late retry");
    assert_eq!(notifier.count("ops", DeliveryResult::stale), 2);

    let (out, _, stderr) = as_alice(&env, &["deliveries", "retry", "--alert-id", &ids[1]], None).await;
    assert!(out.status.success(), "{stderr}");
    let second = wait_status(&store, old[1].alert_id, "ops", "delivered").await;
    assert_eq!(second.manual_retries, 2);
    wait_committed(&config, 4).await;
    assert_eq!(hook.count(), 2);
    notifier.stop().await;
}

/// `POST /api/v1/deliveries/{alert_id}/retry`: the token, 400/404/409, the dry run, and a
/// retry that resets the row and republishes the alert with the retry's header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_endpoint_retries_behind_the_token() {
    let env = TestEnv::new("retry_api");
    let shutdown = Shutdown::new();
    let store = prepare(&env.config, &shutdown).await.expect("topics and schema");
    let alert = alert("retry_api", 1, AlertKind::NewTemplate);
    store_alert(&store, &alert).await;
    let pair = |target: &str, status: &str| DeliveryRow {
        alert_id: alert.alert_id,
        target: target.into(),
        status: status.into(),
        attempts: 1,
        last_error: if status == "failed" { "HTTP 404 Not Found".into() } else { String::new() },
        created_ns: alert.last_at,
        updated_ns: alert.last_at + 1,
        ..Default::default()
    };
    store.insert(&[pair("ops", "failed"), pair("pager", "delivered")]).await.unwrap();

    let state = AppState {
        store: store.clone(),
        query_timeout: Duration::from_secs(10),
        now_ns,
        alerts_topic: Some(Arc::new(AlertsTopic::new(&env.config))),
    };
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = tayga::daemon::api::metrics::RequestMetrics::register(&mut registry);
    let health: tayga::daemon::HealthFn = Arc::new(|| json!({"api": {"status": "serving"}}));
    let app = tayga::daemon::api::router::router(state, Arc::new(registry), metrics, health, "s3cret");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stopped = shutdown.triggered();
    tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap() });
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let post = |path: String, token: Option<&'static str>| {
        let mut request = http.post(format!("{base}{path}"));
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let id = format_id(alert.alert_id);
    let retry = |query: &str| format!("/api/v1/deliveries/{id}/retry{query}");
    let ops_row = || async { row(&store, alert.alert_id, "ops").await.unwrap() };
    let before = ops_row().await;

    let (status, body) = post(retry(""), None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = post(retry(""), Some("wrong")).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = post("/api/v1/deliveries/00000000000000ab/retry".into(), Some("s3cret")).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
    assert!(body["error"]["message"].as_str().unwrap().contains("has no deliveries"), "{body}");
    let (status, body) = post("/api/v1/deliveries/nope/retry".into(), Some("s3cret")).await;
    assert_eq!((status, body["error"]["parameter"].as_str()), (400, Some("alert_id")), "{body}");
    let (status, body) = post(retry("?target=mail"), Some("s3cret")).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = post(retry("?target=pager"), Some("s3cret")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("conflict")), "{body}");
    let (status, body) = post(retry("?colour=red"), Some("s3cret")).await;
    assert_eq!(status, 400, "{body}");

    // The dry run answers what would happen and changes nothing.
    let (status, body) = post(retry("?dry_run=true"), Some("s3cret")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["dry_run"], true);
    assert_eq!(body["retried"][0]["target"], "ops");
    assert_eq!(body["retried"][0]["status"], "pending");
    assert_eq!(body["untouched"][0]["target"], "pager");
    assert_eq!(ops_row().await, before);

    let (status, body) = post(retry("?target=ops"), Some("s3cret")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["alert_id"].as_str(), body["dry_run"].as_bool()), (Some(id.as_str()), Some(false)));
    assert_eq!(body["topic"], env.config.names().alerts);
    let reset = ops_row().await;
    assert_eq!((reset.status.as_str(), reset.attempts, reset.manual_retries), ("pending", 0, 1));
    assert_eq!(reset.retried_by, "api");
    assert_eq!(body["retried"][0]["retried_ns"], reset.retried_ns);
    // The list shows it too, for the Deliveries page.
    let listed: Value = http
        .get(format!("{base}/api/v1/deliveries?alert_id={id}"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["items"][0]["manual_retries"], 1, "{listed}");
    assert_eq!(listed["items"][0]["retried_by"], "api");

    // The record: the stored document, keyed by template id, with the retry's time.
    let config = env.config.clone();
    let records = tokio::task::spawn_blocking(move || {
        read_topic(&config, &config.names().alerts, tayga::bus::SMALL_TOPIC_PARTITIONS, 1)
    })
    .await
    .unwrap();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(Alert::from_json(record.payload().unwrap()).unwrap(), alert);
    assert_eq!(record.key(), Some(alert.key().as_bytes()));
    let header = record.headers().unwrap().iter().find(|h| h.key == MANUAL_RETRY_HEADER).expect("the retry header");
    assert_eq!(header.value, Some(reset.retried_ns.to_string().as_bytes()));

    // Pending now: a second request is a conflict, not a second delivery.
    let (status, body) = post(retry(""), Some("s3cret")).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("pending to `ops`"), "{body}");
    shutdown.trigger();
}
