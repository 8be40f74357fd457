//! Operators' silences against the real ClickHouse and broker (docs/notifier.md,
//! "Silences"): a silenced service's alerts reach no target and their rows say `silenced`
//! with the silence, `tayga deliveries show` and `tayga silences` say so, an expired
//! silence lets the alert's next update through; a silence holds across a notifier restart
//! and on every replica, since each reads it from the store.

use crate::common;
use crate::notifier_support;

use common::{wait_for, TestEnv};
use notifier_support::*;
use tayga::daemon::notifier::metrics::DeliveryResult;
use tayga::store::silences::{self, NewSilence};
use tayga::wire::alert::{format_id, Alert, AlertKind};

const HOUR_NS: u64 = 3_600_000_000_000;

/// An alert of `service`, unique to the test and `seed`.
fn alert_of(test: &str, seed: u64, service: &str) -> Alert {
    let mut a = alert(test, seed, AlertKind::Spike);
    a.service = service.into();
    a.template_id = tayga::identity::template_id(service, &format!("{test}-{seed}"));
    a
}

/// Alerts of `service` whose keys land on each of the alerts topic's partitions, one each.
fn one_per_partition(test: &str, service: &str, partitions: i32) -> Vec<Alert> {
    let mut by_partition: Vec<Option<Alert>> = vec![None; partitions as usize];
    for seed in 0.. {
        let a = alert_of(test, seed, service);
        let p = tayga::bus::packed::plan::partition_for(a.key().as_bytes(), partitions);
        by_partition[p as usize].get_or_insert(a);
        if by_partition.iter().all(Option::is_some) {
            break;
        }
    }
    by_partition.into_iter().map(Option::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silenced_service_reaches_no_target_until_the_silence_is_expired() {
    let env = TestEnv::new("silence_cli");
    let ops = Hook::always(200).await;
    let pager = Hook::always(200).await;
    let config = notifier_config(&env.config, vec![ops.target("ops"), pager.target("pager")]);
    let store = env.store();
    // The silence is added (through the command) before the notifier starts: a new
    // replica reads it from the store.
    tayga::daemon::prepare(&config, &tayga::daemon::Shutdown::new()).await.unwrap();
    let (out, stdout, stderr) =
        tayga(&env, &["--json", "silences", "add", "--service", "checkout", "--for", "1h", "--comment", "deploy 4.2"])
            .await;
    assert!(out.status.success(), "{stderr}");
    let added: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let silence_id = added["silence_id"].as_str().unwrap().to_string();
    assert_eq!((added["state"].as_str(), added["service"].as_str()), (Some("active"), Some("checkout")));
    assert_eq!(added["comment"], "deploy 4.2");

    let notifier = Running::start(&config).await;
    let silenced = alert_of("silence_cli", 1, "checkout");
    let other = alert_of("silence_cli", 2, "web");
    publish(&config, &[&silenced, &other]).await;
    wait_status(&store, other.alert_id, "ops", "delivered").await;
    wait_status(&store, other.alert_id, "pager", "delivered").await;
    for target in ["ops", "pager"] {
        let row = wait_status(&store, silenced.alert_id, target, "silenced").await;
        assert_eq!((format_id(row.silence_id), row.attempts), (silence_id.clone(), 0));
    }
    // Counted once the record is done (after the row is written), so once it is committed.
    wait_committed(&config, 2).await;
    for target in ["ops", "pager"] {
        assert_eq!(notifier.count(target, DeliveryResult::silenced), 1);
    }
    for hook in [&ops, &pager] {
        let got = hook.received();
        assert_eq!(got.len(), 1, "only the other service's alert is sent");
        assert_eq!(got[0].body["alert_id"], format_id(other.alert_id));
    }

    // A republished copy while the silence runs writes nothing new and sends nothing.
    publish(&config, &[&silenced]).await;
    wait_committed(&config, 3).await;
    assert_eq!(notifier.count("ops", DeliveryResult::silenced), 2);
    assert_eq!(ops.count(), 1);

    // The operator's view: the rows say silenced and name the silence.
    let (out, stdout, stderr) = tayga(&env, &["deliveries", "show", "--alert-id", &format_id(silenced.alert_id)]).await;
    assert!(out.status.success(), "{stderr}");
    let shown = mask_times(&stdout).replace(&silence_id, "<silence>");
    assert_eq!(
        shown,
        "target\tstatus\tattempts\tlast_error\tcreated\tupdated\n\
         ops\tsilenced\t0\t\tYYYY-MM-DDTHH:MM:SS.mmmZ\tYYYY-MM-DDTHH:MM:SS.mmmZ\n\
         pager\tsilenced\t0\t\tYYYY-MM-DDTHH:MM:SS.mmmZ\tYYYY-MM-DDTHH:MM:SS.mmmZ\n\
         ops: held back by silence <silence> (tayga silences list --all)\n\
         pager: held back by silence <silence> (tayga silences list --all)\n"
    );
    let (out, stdout, _) = tayga(&env, &["--json", "silences", "list"]).await;
    assert!(out.status.success());
    let listed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["silence_id"], silence_id.as_str());

    // Expired: the alert's next update is delivered to both targets, once.
    let (out, stdout, stderr) = tayga(&env, &["silences", "expire", &silence_id]).await;
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.starts_with(&format!("silence {silence_id} expired: alerts of service checkout")), "{stdout}");
    let (out, _, stderr) = tayga(&env, &["silences", "expire", &silence_id]).await;
    assert_eq!(out.status.code(), Some(1), "a silence that ended cannot be expired again");
    assert!(stderr.contains("already ended"), "{stderr}");
    let (_, stdout, _) = tayga(&env, &["--json", "silences", "list"]).await;
    assert_eq!(stdout.trim(), "[]", "no silence runs");
    // The notifier reads the silences again within its refresh: until then an update is
    // still held back, so the logminer's updates are stood in for until one is delivered.
    let mut update = silenced.clone();
    wait_for("the update after the silence is delivered", WAIT, || {
        update.last_at += 1_000_000_000;
        let (config, store, update) = (&config, &store, update.clone());
        async move {
            publish(config, &[&update]).await;
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let ops = row(store, update.alert_id, "ops").await?;
            (ops.status == "delivered").then_some(())
        }
    })
    .await;
    let pager_row = wait_status(&store, silenced.alert_id, "pager", "delivered").await;
    assert_eq!((pager_row.silence_id, pager_row.attempts), (0, 1));
    assert_eq!(ops.received().iter().filter(|r| r.body["alert_id"] == format_id(silenced.alert_id)).count(), 1);
    notifier.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silence_holds_across_a_restart_and_on_every_replica() {
    let env = TestEnv::new("silence_replicas");
    let hook = Hook::always(200).await;
    let config = notifier_config(&env.config, vec![hook.target("ops")]);
    let store = env.store();
    tayga::daemon::prepare(&config, &tayga::daemon::Shutdown::new()).await.unwrap();
    let new = NewSilence {
        service: "checkout".into(),
        duration_ns: HOUR_NS,
        comment: "maintenance".into(),
        by: "test".into(),
        ..Default::default()
    };
    let silence = silences::add(&store, &new, tayga::store::now_ns()).await.unwrap();

    // One notifier, then a restart: the new process reads the silence from the store.
    let first = Running::start(&config).await;
    let before = alert_of("silence_replicas", 1000, "checkout");
    publish(&config, &[&before]).await;
    wait_status(&store, before.alert_id, "ops", "silenced").await;
    wait_committed(&config, 1).await;
    first.stop().await;
    let a = Running::start(&config).await;
    let after = alert_of("silence_replicas", 1001, "checkout");
    publish(&config, &[&after]).await;
    let row = wait_status(&store, after.alert_id, "ops", "silenced").await;
    assert_eq!(row.silence_id, silence.silence_id);
    wait_committed(&config, 2).await;

    // A second replica: once the partitions are shared, each replica gets an alert.
    let b = Running::start(&config).await;
    let partitions = tayga::bus::SMALL_TOPIC_PARTITIONS;
    wait_for("both replicas hold partitions", WAIT, || async {
        (a.assigned() > 0 && b.assigned() > 0 && a.assigned() + b.assigned() == i64::from(partitions)).then_some(())
    })
    .await;
    let spread = one_per_partition("silence_replicas", "checkout", partitions);
    publish(&config, &spread.iter().collect::<Vec<_>>()).await;
    for alert in &spread {
        let row = wait_status(&store, alert.alert_id, "ops", "silenced").await;
        assert_eq!(row.silence_id, silence.silence_id);
    }
    wait_committed(&config, 2 + i64::from(partitions)).await;
    assert!(a.count("ops", DeliveryResult::silenced) >= 1 && b.count("ops", DeliveryResult::silenced) >= 1);
    assert_eq!(hook.count(), 0, "no silenced alert reaches the target");
    a.stop().await;
    b.stop().await;
}

/// The API's three silence routes and the app's Silences page and forms, behind the token
/// as every route is: the writes refuse a request without it, a bad parameter is named, an
/// ended silence cannot be expired again, and a form posted from another site is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_and_the_app_add_list_and_expire_silences_behind_the_token() {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{json, Value};
    use tayga::daemon::api::handlers::AppState;

    let env = TestEnv::new("silence_api");
    let shutdown = tayga::daemon::Shutdown::new();
    let store = tayga::daemon::prepare(&env.config, &shutdown).await.expect("topics and schema");
    let state = AppState {
        store: store.clone(),
        query_timeout: Duration::from_secs(10),
        now_ns: tayga::store::now_ns,
        alerts_topic: None,
    };
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = tayga::daemon::api::metrics::RequestMetrics::register(&mut registry);
    let health: tayga::daemon::HealthFn = Arc::new(|| json!({"api": {"status": "serving"}}));
    let app = tayga::daemon::api::router::router(state, Arc::new(registry), metrics, health, "s3cret");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stopped = shutdown.triggered();
    tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap() });
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let post = |path: &str, token: Option<&'static str>| {
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
    let get = |path: &str| {
        let request = http.get(format!("{base}{path}")).bearer_auth("s3cret");
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let add = "/api/v1/silences?service=checkout&kind=spike&duration_secs=3600&comment=deploy%204.2";

    let (status, body) = post(add, None).await;
    assert_eq!(status, 401, "{body}");
    for (query, parameter) in [
        ("service=checkout&duration_secs=0&comment=x", "duration_secs"),
        ("service=checkout&kind=loud&duration_secs=60&comment=x", "kind"),
        ("service=checkout&template_id=nope&duration_secs=60&comment=x", "template_id"),
        ("service=%20&duration_secs=60&comment=x", "service"),
        ("service=checkout&duration_secs=60&comment=%20", "comment"),
    ] {
        let (status, body) = post(&format!("/api/v1/silences?{query}"), Some("s3cret")).await;
        assert_eq!((status, body["error"]["parameter"].as_str()), (400, Some(parameter)), "{query}: {body}");
    }
    assert!(silences::list(&store, 0).await.unwrap().is_empty(), "a refused request stores nothing");

    let (status, added) = post(add, Some("s3cret")).await;
    assert_eq!(status, 200, "{added}");
    let id = added["silence_id"].as_str().unwrap().to_string();
    assert_eq!((added["state"].as_str(), added["kind"].as_str()), (Some("active"), Some("spike")));
    assert_eq!((added["created_by"].as_str(), added["comment"].as_str()), (Some("api"), Some("deploy 4.2")));
    let (status, listed) = get("/api/v1/silences").await;
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["silence_id"], id.as_str(), "{listed}");

    // The app: the page lists it with an Expire button; its add form posts back here.
    let (status, page) = get("/silences").await;
    assert_eq!(status, 200);
    assert!(
        page.contains(&format!("id=\"silence-{id}\"")) && page.contains(&format!("/silences/{id}/expire")),
        "{page}"
    );
    let form =
        [("service", "web"), ("kind", ""), ("template_id", ""), ("duration_secs", "900"), ("comment", "batch job")];
    // From a browser: a form of the session's own page adds; a forged one (no CSRF token) does not.
    let cookie = crate::api_roles::sign_in(&http, &base, "s3cret").await;
    let own_page = http.get(format!("{base}/silences")).header("cookie", &cookie).send().await.unwrap();
    let csrf = crate::api_roles::csrf_of(&own_page.text().await.unwrap());
    let post_form = |fields: Vec<(&'static str, String)>| {
        http.post(format!("{base}/silences")).header("cookie", &cookie).form(&fields).send()
    };
    let fields: Vec<(&'static str, String)> = form.iter().map(|(k, v)| (*k, v.to_string())).collect();
    let forged = post_form(fields.clone()).await.unwrap();
    assert_eq!(forged.status().as_u16(), 403, "a form without the session's CSRF token is refused");
    assert!(
        silences::list(&store, 0).await.unwrap().iter().all(|s| s.service != "web"),
        "a forged form stores nothing"
    );
    let response = post_form([fields, vec![("csrf", csrf)]].concat()).await.unwrap();
    assert_eq!(response.status().as_u16(), 303);
    let back = response.headers()["location"].to_str().unwrap().to_string();
    assert!(back.starts_with("/silences?added="), "{back}");
    let (_, page) = get(&back).await;
    assert!(page.contains("batch job") && page.contains("added"), "{page}");

    // An alert whose delivery a silence held back says so, and offers the Silence form.
    let now = tayga::store::now_ns();
    let alert = tayga::store::AlertRow {
        alert_id: 0xa1e7,
        kind: "spike".into(),
        service: "checkout".into(),
        template_id: 0x7e,
        template: "payment failed".into(),
        first_at: now - 60_000_000_000,
        last_at: now,
        count: 50,
        baseline: 1.0,
        threshold: 5.0,
        stored_ns: now,
        updated_ns: now,
        resolved_at: 0,
        shape: String::new(),
    };
    tayga::store::logminer::store_alerts(&store, std::slice::from_ref(&alert)).await.unwrap();
    let silence_id = tayga::wire::alert::parse_id(&id).unwrap();
    let held = tayga::store::DeliveryRow {
        alert_id: alert.alert_id,
        target: "ops".into(),
        status: "silenced".into(),
        created_ns: now,
        updated_ns: now,
        silence_id,
        ..Default::default()
    };
    store.insert(&[held]).await.unwrap();
    let (status, page) = get(&format!("/alerts/{}", format_id(alert.alert_id))).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Held back by silence") && page.contains(&format!("/silences#silence-{id}")), "{page}");
    assert!(page.contains("action=\"/silences\"") && page.contains("value=\"000000000000007e\""), "{page}");
    // Marked silenced wherever it is listed, with the silence that holds it now.
    assert!(page.contains("id=\"silenced-now\""), "{page}");
    let (_, listed) = get("/api/v1/alerts").await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let item = listed["items"].as_array().unwrap().iter().find(|a| a["alert_id"] == format_id(alert.alert_id)).cloned();
    assert_eq!(item.unwrap()["silenced_by"], id.as_str(), "{listed}");
    let (_, alerts_page) = get("/alerts").await;
    assert!(alerts_page.contains(&format!("title=\"held back by silence {id}\"")), "{alerts_page}");
    let (out, stdout, stderr) = tayga(&env, &["--json", "alerts", "list"]).await;
    assert!(out.status.success(), "{stderr}");
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listed[0]["silenced_by"], id.as_str(), "{listed}");
    let (_, stdout, _) = tayga(&env, &["alerts", "list"]).await;
    assert!(stdout.lines().next().unwrap().ends_with("\tsilenced_by"), "a pipe gets the column: {stdout}");
    let (_, deliveries) =
        get(&format!("/api/v1/deliveries?alert_id={}&status=silenced", format_id(alert.alert_id))).await;
    let deliveries: Value = serde_json::from_str(&deliveries).unwrap();
    assert_eq!(deliveries["items"][0]["silence_id"], id.as_str(), "{deliveries}");

    // Expired through the API: then it is over, and a second expiry is a conflict.
    let expire = format!("/api/v1/silences/{id}/expire");
    let (status, body) = post(&expire, None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = post(&expire, Some("s3cret")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["state"].as_str(), body["expired_by"].as_str()), (Some("expired"), Some("api")));
    let (status, body) = post(&expire, Some("s3cret")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("conflict")), "{body}");
    let (status, body) = post("/api/v1/silences/00000000000000ab/expire", Some("s3cret")).await;
    assert_eq!(status, 404, "{body}");
    let (_, running) = get("/api/v1/silences").await;
    let running: Value = serde_json::from_str(&running).unwrap();
    assert_eq!(running.as_array().unwrap().len(), 1, "only the app's silence still runs: {running}");
    assert_eq!(running[0]["service"], "web");
    let (_, all) = get("/api/v1/silences?all=true").await;
    let all: Value = serde_json::from_str(&all).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    shutdown.trigger();
}
