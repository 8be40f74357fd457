//! The web app in a real browser: Debian's Chromium driven over WebDriver (chromedriver +
//! fantoccini) against a live `tayga serve all` fed by the stock OTel Python SDK, with two
//! webhook targets (one answers 400). Every page loads with data, without a console error or
//! a failed request, and is photographed (target/web-screenshots/, or the folder in
//! `TAYGA_WEB_SCREENSHOTS`, e.g. docs/screenshots). Also: bad URLs get a page with the reason
//! and status, and the Pipeline page combines two logminer replicas as docs/design.md#replica-metrics says.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fantoccini::Locator;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use tayga::daemon::api::handlers::AppState;
use tayga::daemon::api::router;
use tayga::daemon::Shutdown;
use tayga::store::now_ns;

use crate::common::{get_json, wait_for, Browser, ServeAll, TestEnv};

const MIN_NS: u64 = 60_000_000_000;
/// A webhook receiver: `/ok` answers 200, `/pager` answers `pager_status`; each keeps the
/// `alert_id` of every payload it was sent.
struct Hooks {
    addr: SocketAddr,
    pager_status: Arc<AtomicU16>,
    received: Arc<Mutex<Vec<(&'static str, String)>>>,
    shutdown: Shutdown,
}

impl Hooks {
    async fn start() -> Hooks {
        let pager_status = Arc::new(AtomicU16::new(400));
        let received: Arc<Mutex<Vec<(&'static str, String)>>> = Arc::default();
        let hook = |path: &'static str, status: Option<Arc<AtomicU16>>| {
            let received = received.clone();
            axum::routing::post(move |body: axum::Json<Value>| async move {
                let id = body["alert_id"].as_str().unwrap_or_default().to_string();
                received.lock().unwrap().push((path, id));
                let code = status.map_or(200, |s| s.load(Ordering::SeqCst));
                axum::http::StatusCode::from_u16(code).unwrap()
            })
        };
        let app = axum::Router::new()
            .route("/ok", hook("ok", None))
            .route("/pager", hook("pager", Some(pager_status.clone())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = Shutdown::new();
        let stopped = shutdown.triggered();
        tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap() });
        Hooks { addr, pager_status, received, shutdown }
    }

    /// How many times `path` was sent `alert_id`.
    fn sent(&self, path: &str, alert_id: &str) -> usize {
        self.received.lock().unwrap().iter().filter(|(p, id)| *p == path && id == alert_id).count()
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

/// The stock SDK → `tayga serve all` → every page, in Chromium.
#[tokio::test]
async fn every_page_shows_the_live_pipeline_in_a_real_browser() {
    let env = TestEnv::new("web_e2e");
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start().await;
    let config = dir.path().join("tayga.toml");
    std::fs::write(
        &config,
        format!(
            "[[notifier.targets]]\nname = \"ops-webhook\"\nurl = \"http://{0}/ok\"\n\n\
             [[notifier.targets]]\nname = \"pager\"\nurl = \"http://{0}/pager\"\n",
            hooks.addr
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_string();
    let daemons = ServeAll::start(&env, &[("TAYGA_CONFIG", &config)]).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let (app, http_addr) = (format!("http://{}", daemons.api_addr), daemons.http_addr.clone());

    let browser = Browser::start().await;
    let checks = std::panic::AssertUnwindSafe(pages(&env, &browser, &http, &app, &http_addr, &hooks));
    let outcome = futures_util::FutureExt::catch_unwind(checks).await;
    browser.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn pages(env: &TestEnv, browser: &Browser, http: &reqwest::Client, app: &str, ingest: &str, hooks: &Hooks) {
    // Nothing stored yet: the overview says what to do.
    let text = browser.open(&format!("{app}/")).await;
    assert!(text.contains("Nothing stored yet") && text.contains("4318") && text.contains("4317"), "{text}");
    assert!(text.contains("tayga up --demo"), "{text}");
    browser.assert_clean("the empty overview").await;
    browser.screenshot("empty").await;

    let service = "web-e2e";
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/otel_export.py");
    let output = tokio::process::Command::new("python3")
        .args([script, "http", &format!("http://{ingest}"), service])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "the SDK export failed:\n{}", String::from_utf8_lossy(&output.stderr));
    // Some synthetic traffic besides, so the pipeline's charts have rates to draw.
    let mut loadgen = env.tayga();
    loadgen.args([
        "loadgen",
        "--endpoint",
        &format!("http://{ingest}"),
        "--rate",
        "10",
        "--duration",
        "8",
        "--services",
        "3",
        "--logs-per-request",
        "5",
    ]);
    let loadgen = tokio::process::Command::from(loadgen).output().await.unwrap();
    assert!(loadgen.status.success(), "loadgen failed: {}", String::from_utf8_lossy(&loadgen.stderr));

    // Wait, through the API, for everything the pages show.
    let limit = Duration::from_secs(90);
    let alert = wait_for("an active new_template alert", limit, || async {
        let page =
            get_json(http, format!("{app}/api/v1/alerts?kind=new_template&state=active&service={service}")).await?;
        page["items"].as_array()?.first().cloned()
    })
    .await;
    let alert_id = alert["alert_id"].as_str().unwrap().to_string();
    let template_id = alert["template_id"].as_str().unwrap().to_string();
    let deliveries = wait_for("both targets' deliveries to finish", limit, || async {
        let page = get_json(http, format!("{app}/api/v1/deliveries?alert_id={alert_id}")).await?;
        let items = page["items"].as_array()?.clone();
        let done: BTreeSet<(String, String)> = items
            .iter()
            .map(|d| (d["target"].as_str().unwrap().to_string(), d["status"].as_str().unwrap().to_string()))
            .collect();
        (done == BTreeSet::from([("ops-webhook".into(), "delivered".into()), ("pager".into(), "failed".into())]))
            .then_some(items)
    })
    .await;
    assert_eq!(deliveries.len(), 2);
    let hits = wait_for("both SDK traces in the search", limit, || async {
        let page = get_json(http, format!("{app}/api/v1/traces?service={service}")).await?;
        let items = page["items"].as_array()?.clone();
        (items.len() == 2).then_some(items)
    })
    .await;
    let mut traces = Vec::new();
    for hit in &hits {
        let id = hit["trace_id"].as_str().unwrap().to_string();
        let trace = wait_for("the trace's story and log", limit, || async {
            get_json(http, format!("{app}/api/v1/traces/{id}/story")).await?;
            let t = get_json(http, format!("{app}/api/v1/traces/{id}")).await?;
            let spans = t["spans"].as_array()?;
            let with_log = spans.iter().any(|s| s["operation"] == "with-log");
            (!with_log || !t["logs"].as_array()?.is_empty()).then_some(t)
        })
        .await;
        traces.push(trace);
    }
    wait_for("the recorder's throughput samples", limit, || async {
        let from = now_ns() - 5 * MIN_NS;
        let page = get_json(
            http,
            format!("{app}/api/v1/pipeline?service=ingest&metric=tayga_ingest_accepted_items_total&from={from}"),
        )
        .await?;
        page["series"].as_array()?.iter().any(|s| s["total"].as_array().is_some_and(|t| !t.is_empty())).then_some(())
    })
    .await;

    // Overview.
    let text = browser.open(&format!("{app}/")).await;
    assert!(text.contains(service) && text.contains("active alerts"), "{text}");
    browser.assert_clean("the overview").await;
    browser.screenshot("overview").await;

    // Alerts: the new-template alert, active, with its template.
    let text = browser.open(&format!("{app}/alerts")).await;
    let active = browser.text("#active").await;
    assert!(active.contains("new_template") && active.contains(service), "{active}");
    assert!(active.contains("payment declined for order"), "the template is shown: {active}");
    assert_eq!(browser.count(&format!("#active tr.alert[data-alert-id='{alert_id}']")).await, 1, "{text}");
    // The script wrote the time in the browser's zone (UTC here) and kept UTC on hover.
    let shown = browser.client.find(Locator::Css("#active time")).await.unwrap();
    let (text, title) = (shown.text().await.unwrap(), shown.attr("title").await.unwrap().unwrap());
    assert!(title.ends_with(" UTC") && text.len() >= 19 && text.as_bytes()[4] == b'-', "{text} / {title}");
    browser.assert_clean("the alerts page").await;
    browser.screenshot("alerts").await;

    // The alert: its sample line, chart and a chip per target.
    browser.click_through(&format!("tr[data-alert-id='{alert_id}'] a.template-link")).await;
    let text = browser.text("body").await;
    assert!(browser.text("#samples").await.contains("payment declined for order 42"), "{text}");
    assert!(browser.count("svg.time-chart circle.pt").await > 0, "the count chart has points");
    let chips = browser.text(".chips").await;
    assert!(chips.contains("ops-webhook") && chips.contains("delivered"), "{chips}");
    assert!(chips.contains("pager") && chips.contains("failed"), "{chips}");
    browser.assert_clean("the alert page").await;
    browser.screenshot("alert").await;

    // Alert → template → its lines → a trace.
    browser.click_through(".template-line a").await;
    let lines = browser.text("#lines").await;
    assert!(lines.contains("payment declined for order 42"), "{lines}");
    browser.assert_clean("the template page").await;
    browser.screenshot("template").await;
    browser.click_through("#lines a[href^='/traces/']").await;
    let logs = browser.text("#logs").await;
    assert!(logs.contains("payment declined for order 42"), "the trace shows its log: {logs}");
    browser.assert_clean("the trace of a line").await;

    // Templates, with the new-in-24-h filter.
    browser.open(&format!("{app}/templates")).await;
    assert!(browser.count("section.service-templates").await >= 2, "the SDK's and loadgen's services");
    browser.assert_clean("the templates page").await;
    browser.screenshot("templates").await;
    let text = browser.open(&format!("{app}/templates?service={service}&new=24h")).await;
    assert!(text.contains("payment declined for order"), "{text}");
    assert_eq!(browser.count(&format!("tr.template[data-template-id='{template_id}']")).await, 1);
    assert_eq!(browser.count("tr.template svg.sparkline").await, browser.count("tr.template").await);
    browser.assert_clean("a service's new templates").await;

    // Stories: both shapes; a shape's traces; each trace's waterfall has every span.
    browser.open(&format!("{app}/stories")).await;
    browser.assert_clean("the stories page").await;
    browser.screenshot("stories").await;
    let text = browser.open(&format!("{app}/stories?service={service}")).await;
    assert_eq!(browser.count("tr.shape").await, 2, "{text}");
    browser.assert_clean("a service's stories").await;
    browser.click_through("tr.shape a").await;
    assert!(browser.count("tr.story").await >= 1);
    browser.assert_clean("a shape's page").await;
    for trace in &traces {
        let id = trace["trace_id"].as_str().unwrap();
        browser.open(&format!("{app}/traces/{id}")).await;
        let spans: BTreeSet<String> =
            trace["spans"].as_array().unwrap().iter().map(|s| s["span_id"].as_str().unwrap().to_string()).collect();
        let mut drawn = BTreeSet::new();
        for g in browser.client.find_all(Locator::Css("svg.waterfall g.span")).await.unwrap() {
            drawn.insert(g.attr("data-span-id").await.unwrap().unwrap());
        }
        assert_eq!(drawn, spans, "the waterfall of {id} draws every span");
        browser.assert_clean("a trace page").await;
    }
    // A loadgen trace, the one with the most spans and logs, for the picture.
    let page = get_json(http, format!("{app}/api/v1/traces?service=svc-0&limit=20")).await.unwrap();
    let mut best: Option<(usize, String)> = None;
    for hit in page["items"].as_array().unwrap() {
        let id = hit["trace_id"].as_str().unwrap();
        let t = get_json(http, format!("{app}/api/v1/traces/{id}")).await.unwrap();
        let size = t["spans"].as_array().unwrap().len() * 100 + t["logs"].as_array().unwrap().len();
        if best.as_ref().is_none_or(|(s, _)| size > *s) {
            best = Some((size, id.to_string()));
        }
    }
    let (size, id) = best.expect("loadgen's traces are stored");
    let story = wait_for(&format!("the story of {id}"), Duration::from_secs(60), || {
        get_json(http, format!("{app}/api/v1/traces/{id}/story"))
    })
    .await;
    browser.open(&format!("{app}/traces/{id}")).await;
    assert_eq!(browser.count("svg.waterfall g.span").await, size / 100, "every span of {id}");
    browser.assert_clean("a loadgen trace").await;
    let shape = story["fingerprint"].as_str().unwrap();
    assert_eq!(
        browser.count(&format!("p.crumbs a[href='/stories/{shape}']")).await,
        1,
        "the crumb opens shape {shape}"
    );
    browser.screenshot("trace").await;

    // Pipeline: charts with points, the replica count, the ingest leg.
    let text = browser.open(&format!("{app}/pipeline?window=15m")).await;
    assert!(browser.count("[data-stage='ingest'] circle.pt").await > 0, "ingest throughput has points: {text}");
    assert!(browser.count("[data-stage='logminer'] circle.pt").await > 0, "logminer throughput has points");
    assert_eq!(browser.text("#logminer-replicas .value").await, "1");
    assert!(browser.text("#ingest-leg").await.contains("broker"), "{text}");
    browser.assert_clean("the pipeline page").await;
    browser.screenshot("pipeline").await;
    browser.color_scheme("dark").await;
    let background =
        browser.client.execute("return getComputedStyle(document.body).backgroundColor", vec![]).await.unwrap();
    assert_eq!(background, json!("rgb(17, 20, 26)"), "dark mode follows prefers-color-scheme");
    browser.screenshot("pipeline-dark").await;
    browser.color_scheme("light").await;

    // Deliveries: both rows, the failed one with its error; the per-target panel.
    browser.open(&format!("{app}/deliveries")).await;
    browser.assert_clean("the deliveries page").await;
    browser.screenshot("deliveries").await;
    let text = browser.open(&format!("{app}/deliveries?alert_id={alert_id}")).await;
    assert_eq!(browser.count("tr.delivery").await, 2, "{text}");
    let failed = browser.text("tr.delivery[data-status='failed']").await;
    assert!(failed.contains("pager") && failed.contains("400"), "{failed}");
    assert!(browser.text("[data-target='ops-webhook']").await.contains("100.0 %"));
    assert!(browser.text("[data-target='pager']").await.contains("0.0 %"));
    browser.assert_clean("an alert's deliveries").await;
    assert_eq!((hooks.sent("ok", &alert_id), hooks.sent("pager", &alert_id)), (1, 1), "once per alert and target");

    // The operator fixes the pager and retries from the page: exactly one more delivery,
    // recorded as a manual retry.
    hooks.pager_status.store(200, Ordering::SeqCst);
    assert_eq!(
        browser.count("tr.delivery[data-status='delivered'] form.retry").await,
        0,
        "only a failed row has the button"
    );
    browser.click_through("tr.delivery[data-status='failed'] form.retry button").await;
    let notice = browser.text("#retried").await;
    assert!(notice.contains("pager") && notice.contains(&alert_id), "{notice}");
    browser.assert_clean("the retry's answer").await;
    let pager = wait_for("the retried delivery", limit, || async {
        let page = get_json(http, format!("{app}/api/v1/deliveries?alert_id={alert_id}&target=pager")).await?;
        let row = page["items"].as_array()?.first()?.clone();
        (row["status"] == "delivered").then_some(row)
    })
    .await;
    assert_eq!((pager["manual_retries"].as_u64(), pager["retried_by"].as_str()), (Some(1), Some("api")), "{pager}");
    assert_eq!(hooks.sent("pager", &alert_id), 2, "exactly one more delivery");
    assert_eq!(hooks.sent("ok", &alert_id), 1, "the other target is left alone");
    browser.open(&format!("{app}/deliveries?alert_id={alert_id}")).await;
    let row = browser.text("tr.delivery[data-target='pager']").await;
    assert!(row.contains("1 time by api"), "{row}");
    assert_eq!(browser.count("form.retry").await, 0, "nothing is failed any more");
    browser.assert_clean("the retried deliveries").await;

    // Bad addresses: a page with the reason and the status, never a trace.
    for (path, status, reason) in [
        ("/alerts/not-hex", 400, "must be 1 to 16 hex digits"),
        ("/alerts/00000000000000ff", 404, "alert 00000000000000ff not found"),
        ("/pipeline?window=7x", 400, "use one of 15m, 1h, 6h or 24h"),
        ("/traces/abc", 400, "must be 32 hex digits"),
        ("/templates?new=1y", 400, "use new=24h"),
        ("/stories?colour=red", 400, "colour"),
        ("/no/such/page", 404, "not found"),
    ] {
        let response = http.get(format!("{app}{path}")).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{path}");
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/html"), "{path}");
        let body = response.text().await.unwrap();
        assert!(body.contains(reason), "{path}: {body}");
    }
    let text = browser.open(&format!("{app}/pipeline?window=7x")).await;
    assert!(text.contains("`7x` is not a window"), "{text}");
    browser.screenshot("error").await;
}

/// docs/design.md#replica-metrics on the Pipeline page: two logminer replicas behind one name (and a third that
/// does not answer); the page shows the larger replica's template count and the summed
/// rate, and the replica count.
#[tokio::test]
async fn the_pipeline_page_shows_the_larger_replicas_templates_and_the_summed_rates() {
    let env = TestEnv::new("web_replicas");
    let store = env.migrated_store().await;
    let (recorder, crate::common::ReplicaAddrs { a, b, dead }) = crate::common::two_replica_recorder(&store);
    // The page's 15-minute window has 8-second steps, and rates are taken between step
    // starts: ticks on step starts, 64 s apart; the replicas mine 64 and 128 lines between.
    const STEP: u64 = 8_000_000_000;
    let t0 = (now_ns() - 5 * MIN_NS) / STEP * STEP;
    crate::common::record_two_replicas(&recorder, a, b, &[(t0, (100.0, 1000.0)), (t0 + 8 * STEP, (164.0, 1128.0))])
        .await;

    let state = AppState { store, query_timeout: Duration::from_secs(10), now_ns, alerts_topic: None };
    let health: tayga::daemon::HealthFn = Arc::new(|| json!({}));
    let mut registry = Registry::default();
    let metrics = tayga::daemon::api::metrics::RequestMetrics::register(&mut registry);
    let app = router::router(state, Arc::new(registry), metrics, health, "");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = Shutdown::new();
    let stopped = shutdown.triggered();
    tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap() });
    let html = reqwest::get(format!("http://{addr}/pipeline?window=15m")).await.unwrap().text().await.unwrap();
    shutdown.trigger();
    let tile = |id: &str| {
        let start = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id} in {html}"));
        let value = &html[start..];
        let value = &value[value.find("class=\"value\">").unwrap() + 14..];
        value[..value.find("</span>").unwrap()].to_string()
    };
    assert_eq!(tile("logminer-templates"), "9", "the larger replica, not 14");
    assert_eq!(tile("logminer-rate"), "3/s", "1 + 2 lines per second");
    assert_eq!(tile("logminer-replicas"), "2", "two replicas up, the third scraped and down");
    assert!(html.contains(&format!("<code>{dead}</code>")), "the dead replica is listed");
}
