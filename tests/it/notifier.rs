//! The notifier against the real ClickHouse and broker, run in-process (docs/design.md#notifier): each
//! alert to each target once, retries, permanent failures, Retry-After, stale and kind
//! filtering, duplicates, the breaker, and offsets. Webhook receivers are small axum servers
//! answering scripted statuses. Backoff is configured to 0 s so ladders run fast; the
//! production numbers are checked by the pure tests in src/daemon/notifier/.

use crate::common;
use crate::notifier_support;

use std::time::Duration;

use common::TestEnv;
use notifier_support::*;
use tayga::daemon::notifier::metrics::DeliveryResult;
use tayga::wire::alert::{format_id, AlertKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_target_gets_the_alert_once_and_a_503_is_retried() {
    let env = TestEnv::new("notify_two");
    let ok = Hook::always(200).await;
    let flaky = Hook::start(vec![Reply::status(503)], Reply::status(200)).await;
    let mut ops = ok.target("ops");
    ops.headers.insert("Authorization".into(), "Bearer s3cret".into());
    let config = notifier_config(&env.config, vec![ops, flaky.target("pager")]);
    let notifier = Running::start(&config).await;
    let store = env.store();

    let mut alert = alert("notify_two", 1, AlertKind::Spike);
    alert.alert_id = 0x00c0_ffee_0000_0001 ^ u64::from(std::process::id());
    publish(&config, &[&alert]).await;

    let pager = wait_status(&store, alert.alert_id, "pager", "delivered").await;
    let opsrow = wait_status(&store, alert.alert_id, "ops", "delivered").await;
    wait_committed(&config, 1).await;
    assert_eq!((opsrow.attempts, opsrow.last_error.as_str()), (1, ""));
    assert_eq!((pager.attempts, pager.last_error.as_str()), (2, "HTTP 503 Service Unavailable"));
    assert_eq!(ok.count(), 1);
    assert_eq!(flaky.count(), 2);

    // The payload is the alert document: receivers deduplicate on alert_id.
    let got = &ok.received()[0];
    assert_eq!(got.body["alert_id"], format_id(alert.alert_id));
    assert_eq!(got.body["version"], 1);
    assert_eq!(got.body["kind"], "spike");
    assert_eq!(got.body["count"], 412);
    assert_eq!(got.headers["content-type"], "application/json");
    assert_eq!(got.headers["authorization"], "Bearer s3cret");
    assert!(flaky.received()[0].headers.get("authorization").is_none());

    let text = notifier.metrics_text();
    for line in [
        r#"tayga_notifier_deliveries_total{target="ops",result="delivered"} 1"#,
        r#"tayga_notifier_deliveries_total{target="pager",result="delivered"} 1"#,
        r#"tayga_notifier_attempts_total{target="pager",outcome="retryable"} 1"#,
        r#"tayga_notifier_attempts_total{target="pager",outcome="success"} 1"#,
        r#"tayga_notifier_retries_total{target="pager"} 1"#,
        r#"tayga_notifier_breaker_open{target="pager"} 0"#,
        r#"tayga_notifier_delivery_duration_seconds_count{target="pager"} 1"#,
        "tayga_notifier_consumed_records_total 1",
    ] {
        assert!(text.contains(line), "missing `{line}` in\n{text}");
    }
    notifier.stop().await;

    // The operator's view of the same rows.
    let (out, stdout, stderr) = tayga(&env, &["deliveries", "show", "--alert-id", &format_id(alert.alert_id)]).await;
    assert!(out.status.success(), "{stderr}");
    let shown = mask_times(&stdout).replace(&format_id(alert.alert_id), "<alert id>");
    // To a pipe: a header and one tab-separated line per row (cmd::table).
    assert_eq!(
        shown,
        "target\tstatus\tattempts\tlast_error\tcreated\tupdated\n\
         ops\tdelivered\t1\t\tYYYY-MM-DDTHH:MM:SS.mmmZ\tYYYY-MM-DDTHH:MM:SS.mmmZ\n\
         pager\tdelivered\t2\tHTTP 503 Service Unavailable\tYYYY-MM-DDTHH:MM:SS.mmmZ\tYYYY-MM-DDTHH:MM:SS.mmmZ\n"
    );

    let (out, stdout, stderr) =
        tayga(&env, &["--json", "deliveries", "show", "--alert-id", &format_id(alert.alert_id)]).await;
    assert!(out.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json[1]["target"], "pager");
    assert_eq!(json[1]["attempts"], 2);
    assert_eq!(json[1]["status"], "delivered");
    assert_eq!(json[1]["alert_id"], format_id(alert.alert_id));
    assert!(json[1]["created_ns"].as_u64().unwrap() <= json[1]["updated_ns"].as_u64().unwrap());

    // An alert with no rows is an answer, not an error; a malformed id is a usage error.
    let (out, stdout, _) = tayga(&env, &["deliveries", "show", "--alert-id", "00000000000000ab"]).await;
    assert!(out.status.success());
    assert!(stdout.starts_with("no deliveries for alert 00000000000000ab"), "{stdout}");
    let (out, _, stderr) = tayga(&env, &["deliveries", "show", "--alert-id", "nope"]).await;
    assert_eq!(out.status.code(), Some(2), "a malformed id is a usage error");
    assert!(stderr.contains("`nope` is not an id"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn republished_copies_and_later_updates_send_nothing() {
    let env = TestEnv::new("notify_dup");
    let hook = Hook::always(200).await;
    let config = notifier_config(&env.config, vec![hook.target("ops")]);
    let notifier = Running::start(&config).await;
    let store = env.store();

    let first = alert("notify_dup", 1, AlertKind::Spike);
    publish(&config, &[&first]).await;
    wait_status(&store, first.alert_id, "ops", "delivered").await;
    // A republished copy, then a later update of the same alert (the spike grew).
    let mut grown = first.clone();
    grown.count = 9000;
    grown.last_at += 60_000_000_000;
    publish(&config, &[&first, &grown]).await;
    wait_committed(&config, 3).await;

    assert_eq!(hook.count(), 1);
    assert_eq!(hook.received()[0].body["count"], 412, "the values it had when first seen");
    assert_eq!(notifier.count("ops", DeliveryResult::delivered), 1);
    assert_eq!(notifier.count("ops", DeliveryResult::duplicate), 2);
    let rows = rows(&store, first.alert_id).await;
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].status.as_str(), rows[0].attempts), ("delivered", 1));
    notifier.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_fails_at_once_and_a_429_waits_for_retry_after() {
    let env = TestEnv::new("notify_4xx");
    let rejecting = Hook::always(400).await;
    let redirecting = Hook::always(302).await;
    let throttling = Hook::start(vec![Reply::status(429).retry_after("1")], Reply::status(200)).await;
    let config = notifier_config(
        &env.config,
        vec![rejecting.target("bad"), redirecting.target("moved"), throttling.target("slow")],
    );
    let notifier = Running::start(&config).await;
    let store = env.store();
    let alert = alert("notify_4xx", 1, AlertKind::NewTemplate);
    publish(&config, &[&alert]).await;

    let bad = wait_status(&store, alert.alert_id, "bad", "failed").await;
    assert_eq!((bad.attempts, bad.last_error.as_str()), (1, "HTTP 400 Bad Request"));
    let moved = wait_status(&store, alert.alert_id, "moved", "failed").await;
    assert_eq!((moved.attempts, moved.last_error.as_str()), (1, "HTTP 302 Found"));
    let slow = wait_status(&store, alert.alert_id, "slow", "delivered").await;
    assert_eq!((slow.attempts, slow.last_error.as_str()), (2, "HTTP 429 Too Many Requests"));
    wait_committed(&config, 1).await;
    assert_eq!(rejecting.count(), 1);
    assert_eq!(redirecting.count(), 1);
    // Backoff base is 0 here: only Retry-After: 1 made it wait (the formula itself is
    // unit-tested in backoff.rs).
    let got = throttling.received();
    assert_eq!(got.len(), 2);
    let gap = got[1].at - got[0].at;
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}, Retry-After said 1 s");
    // A permanent error leaves the breaker alone.
    assert!(notifier.metrics_text().contains(r#"tayga_notifier_breaker_open{target="bad"} 0"#));
    notifier.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_alerts_and_other_kinds_are_skipped_and_committed() {
    let env = TestEnv::new("notify_skip");
    let spikes = Hook::always(200).await;
    let everything = Hook::always(200).await;
    let mut spikes_only = spikes.target("spikes");
    spikes_only.kinds = vec!["spike".into()];
    let config = notifier_config(&env.config, vec![spikes_only, everything.target("all")]);
    let notifier = Running::start(&config).await;
    let store = env.store();

    let mut old = alert("notify_skip", 1, AlertKind::Spike);
    old.last_at -= 3601 * 1_000_000_000;
    let silence = alert("notify_skip", 2, AlertKind::Silence);
    publish(&config, &[&old, &silence]).await;
    wait_status(&store, silence.alert_id, "all", "delivered").await;
    wait_committed(&config, 2).await;

    assert_eq!(spikes.count(), 0);
    assert_eq!(everything.count(), 1);
    assert_eq!(everything.received()[0].body["kind"], "silence");
    assert!(rows(&store, old.alert_id).await.is_empty(), "a stale alert writes no rows");
    assert!(row(&store, silence.alert_id, "spikes").await.is_none(), "a skipped kind writes no row");
    assert_eq!(notifier.count("spikes", DeliveryResult::stale), 1);
    assert_eq!(notifier.count("all", DeliveryResult::stale), 1);
    assert_eq!(notifier.count("spikes", DeliveryResult::skipped), 1);
    assert_eq!(notifier.count("all", DeliveryResult::delivered), 1);
    notifier.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_targets_and_unreadable_records_offsets_still_advance() {
    let env = TestEnv::new("notify_none");
    let config = notifier_config(&env.config, Vec::new());
    let notifier = Running::start(&config).await;
    let a = alert("notify_none", 1, AlertKind::Spike);
    let b = alert("notify_none", 2, AlertKind::Silence);
    publish(&config, &[&a, &b]).await;
    // A record of a future format version, and one that is not JSON: skipped, committed.
    let producer: rdkafka::producer::FutureProducer = tayga::bus::client_config(&config.kafka).create().unwrap();
    for value in [&br#"{"version":2,"alert_id":"0000000000000001"}"#[..], b"garbage"] {
        producer
            .send(
                rdkafka::producer::FutureRecord::<(), _>::to(&config.names().alerts).payload(value),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
    }
    wait_committed(&config, 4).await;
    let text = notifier.metrics_text();
    assert!(text.contains("tayga_notifier_consumed_records_total 4"), "{text}");
    assert!(text.contains("tayga_notifier_undecodable_records_total 2"), "{text}");
    // One accepted commit per record, through the consumer kit; the one member holds the
    // alerts topic's 3 partitions.
    assert!(text.contains("tayga_notifier_commits_total 4"), "{text}");
    assert!(text.contains("tayga_notifier_assigned_partitions 3"), "{text}");
    assert!(rows(&env.store(), a.alert_id).await.is_empty());
    notifier.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_allows_one_attempt_after_a_target_gives_up() {
    let env = TestEnv::new("notify_breaker");
    let dead = Hook::always(503).await;
    let healthy = Hook::always(200).await;
    let mut config = notifier_config(&env.config, vec![dead.target("dead"), healthy.target("healthy")]);
    config.notifier.max_attempts = 3;
    let notifier = Running::start(&config).await;
    let store = env.store();
    let alerts: Vec<_> = (1..=4).map(|i| alert("notify_breaker", i, AlertKind::Spike)).collect();

    // 1: the full ladder, then the breaker opens.
    publish(&config, &[&alerts[0]]).await;
    let first = wait_status(&store, alerts[0].alert_id, "dead", "failed").await;
    assert_eq!((first.attempts, first.last_error.as_str()), (3, "HTTP 503 Service Unavailable"));
    assert_eq!(dead.count(), 3);
    wait_committed(&config, 1).await;
    assert!(notifier.metrics_text().contains(r#"tayga_notifier_breaker_open{target="dead"} 1"#));

    // 2: open: exactly one attempt, then failed; the healthy target is not held back.
    publish(&config, &[&alerts[1]]).await;
    let second = wait_status(&store, alerts[1].alert_id, "dead", "failed").await;
    assert_eq!(second.attempts, 1);
    wait_status(&store, alerts[1].alert_id, "healthy", "delivered").await;
    assert_eq!(dead.count(), 4);

    // 3: the target recovers: its one attempt succeeds and closes the breaker.
    dead.set_default(Reply::status(200));
    publish(&config, &[&alerts[2]]).await;
    let third = wait_status(&store, alerts[2].alert_id, "dead", "delivered").await;
    assert_eq!(third.attempts, 1);
    wait_committed(&config, 3).await;
    assert!(notifier.metrics_text().contains(r#"tayga_notifier_breaker_open{target="dead"} 0"#));

    // 4: closed again: a failing target gets the full ladder once more.
    dead.set_default(Reply::status(503));
    publish(&config, &[&alerts[3]]).await;
    let fourth = wait_status(&store, alerts[3].alert_id, "dead", "failed").await;
    assert_eq!(fourth.attempts, 3);
    assert_eq!(dead.count(), 4 + 1 + 3);
    assert_eq!(healthy.count(), 4);
    wait_committed(&config, 4).await;
    assert_eq!(notifier.count("dead", DeliveryResult::failed), 3);
    assert_eq!(notifier.count("dead", DeliveryResult::delivered), 1);
    notifier.stop().await;
}
