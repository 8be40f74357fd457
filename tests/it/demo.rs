//! `tayga up`: the demo end to end in a real browser (every alert kind, a delivered row for
//! each, the new shape's diff with the lock on the critical path, a story waterfall,
//! Pipeline charts with points), and the process rules (its own
//! ClickHouse and broker as children that die with it, a clean start after kill -9, nothing
//! left after SIGTERM).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fantoccini::Locator;
use serde_json::Value;

use crate::common::{free_addr, free_port, get_json, wait_for, Browser, ChildGuard, TestEnv};

/// `tayga up` with `args`, on free ports, its output in `dir` (`up.log`, `up.err`).
fn up(env: &TestEnv, dir: &Path, name: &str, args: &[&str], extra: &[(&str, String)]) -> (ChildGuard, String) {
    let api = free_addr();
    let logminer = free_port();
    let mut cmd = env.tayga();
    cmd.arg("up")
        .args(args)
        .env("TAYGA_INGEST_HTTP_ADDR", free_addr())
        .env("TAYGA_INGEST_GRPC_ADDR", free_addr())
        .env("TAYGA_WRITER_METRICS_ADDR", free_addr())
        .env("TAYGA_ASSEMBLER_METRICS_ADDR", free_addr())
        .env("TAYGA_NOTIFIER_METRICS_ADDR", free_addr())
        .env("TAYGA_LOGMINER_METRICS_ADDR", format!("127.0.0.1:{logminer}"))
        .env("TAYGA_API_LOGMINER_METRICS", format!("127.0.0.1:{logminer}"))
        .env("TAYGA_API_LISTEN_ADDR", &api)
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap())
        .stderr(std::fs::File::create(dir.join(format!("{name}.err"))).unwrap());
    (ChildGuard::spawn(&mut cmd, "tayga up"), format!("http://{api}"))
}

fn output(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
        + &std::fs::read_to_string(dir.join(format!("{name}.err"))).unwrap_or_default()
}

async fn wait_up(dir: &Path, name: &str, limit: Duration) {
    wait_for(&format!("`tayga up` ({name}) to say it is up"), limit, || async {
        let text = output(dir, name);
        assert!(!text.contains("error:"), "tayga up failed:\n{text}");
        text.contains("Tayga is up").then_some(())
    })
    .await;
}

fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().unwrap();
    assert!(status.success(), "kill -{signal} {pid} failed");
}

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purpose: it holds no port and no file.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn pid_in(file: &Path) -> u32 {
    std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display())).trim().parse().unwrap()
}

async fn gone(pids: &[u32], what: &str) {
    wait_for(what, Duration::from_secs(15), || async { pids.iter().all(|p| !alive(*p)).then_some(()) }).await;
}

/// The README's first command, in a browser: every alert kind shows, each delivered to the
/// demo's webhook; the new shape's diff lists the lock edge, draws both checkouts and marks
/// the lock on the critical path; a slow checkout's waterfall draws every span; the Pipeline charts have
/// points. Screenshots go where `TAYGA_WEB_SCREENSHOTS` says (docs/screenshots for the README).
#[tokio::test]
async fn the_demo_shows_every_alert_kind_delivered_a_waterfall_and_charts() {
    let env = TestEnv::new("demo_ui");
    let dir = tempfile::tempdir().unwrap();
    let (mut process, app) = up(&env, dir.path(), "up", &["--demo", "--home", dir.path().to_str().unwrap()], &[]);
    wait_up(dir.path(), "up", Duration::from_secs(60)).await;
    let text = output(dir.path(), "up");
    assert!(
        text.contains("using the server that answers") && text.contains("logminer.silence_after_min 5 → 1"),
        "{text}"
    );
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();

    // Each kind on the template the scenario makes it for, within the scenario's two minutes
    // (the deadline leaves room for a loaded machine).
    let limit = Duration::from_secs(180);
    let mut alerts = BTreeMap::new();
    for (kind, service, template) in [
        ("new_template", "payment", "charge declined by acme-pay"),
        ("spike", "frontend", "cache miss for key product:"),
        ("silence", "checkout", "inventory reserved for order"),
        ("new_shape", "frontend", "POST /checkout"),
    ] {
        let alert = wait_for(&format!("a {kind} alert in {service}"), limit, || async {
            let page = get_json(&http, format!("{app}/api/v1/alerts?kind={kind}&service={service}&limit=100")).await?;
            page["items"]
                .as_array()?
                .iter()
                .find(|a| a["template"].as_str().is_some_and(|t| t.starts_with(template)))
                .cloned()
        })
        .await;
        alerts.insert(kind, alert["alert_id"].as_str().unwrap().to_string());
    }
    for (kind, id) in &alerts {
        wait_for(&format!("the {kind} alert delivered to the demo's webhook"), Duration::from_secs(60), || async {
            let page = get_json(&http, format!("{app}/api/v1/deliveries?alert_id={id}")).await?;
            let items = page["items"].as_array()?;
            items.iter().any(|d| d["target"] == "demo-webhook" && d["status"] == "delivered").then_some(())
        })
        .await;
    }
    // A slow checkout: its story is stored, its trace has the lock wait. The demo makes such
    // a trace every second or so, and a story is stored only once its trace has been idle
    // for `assembler.idle_close_secs` (5 s), so the newest few never have one yet: look
    // further back than the stories' delay.
    let slow = wait_for("a checkout that waited on the row lock, with its story", limit, || async {
        let page =
            get_json(&http, format!("{app}/api/v1/traces?service=database&operation=lock%20payment%20row&limit=30"))
                .await?;
        for hit in page["items"].as_array()? {
            let id = hit["trace_id"].as_str()?;
            if get_json(&http, format!("{app}/api/v1/traces/{id}/story")).await.is_some() {
                return get_json(&http, format!("{app}/api/v1/traces/{id}")).await;
            }
        }
        None
    })
    .await;
    wait_for("the recorder's ingest samples", limit, || async {
        let page =
            get_json(&http, format!("{app}/api/v1/pipeline?service=ingest&metric=tayga_ingest_accepted_items_total"))
                .await?;
        page["series"].as_array()?.iter().any(|s| s["total"].as_array().is_some_and(|t| t.len() >= 2)).then_some(())
    })
    .await;

    let browser = Browser::start().await;
    let checks = std::panic::AssertUnwindSafe(pages(&browser, &app, &alerts, &slow));
    let outcome = futures_util::FutureExt::catch_unwind(checks).await;
    browser.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }

    signal(process.id(), "TERM");
    let status = process.wait_within(Duration::from_secs(40));
    let text = output(dir.path(), "up");
    assert!(status.success(), "tayga up exited with {status}:\n{text}");
    for kind in ["new_template", "spike", "silence", "new_shape"] {
        assert!(text.contains(&format!("webhook: received {kind} in")), "the sink told a {kind} delivery:\n{text}");
    }
    assert!(text.contains("demo: sent "), "{text}");
}

async fn pages(browser: &Browser, app: &str, alerts: &BTreeMap<&str, String>, slow: &Value) {
    browser.open(&format!("{app}/alerts")).await;
    let active = browser.text("#active").await;
    for (kind, id) in alerts {
        assert!(active.contains(kind), "{kind} on the alerts page: {active}");
        assert_eq!(browser.count(&format!("tr.alert[data-alert-id='{id}']")).await, 1, "the {kind} alert's row");
    }
    browser.assert_clean("the alerts page").await;
    browser.screenshot("demo-alerts").await;

    browser.open(&format!("{app}/deliveries")).await;
    for id in alerts.values() {
        let rows = browser.count(&format!("tr.delivery[data-status='delivered'][data-alert-id='{id}']")).await;
        let any = browser.count("tr.delivery[data-status='delivered']").await;
        assert!(rows == 1 || (rows == 0 && any > 0), "a delivered row for {id}");
    }
    browser.assert_clean("the deliveries page").await;
    browser.screenshot("demo-deliveries").await;
    for id in alerts.values() {
        let text = browser.open(&format!("{app}/deliveries?alert_id={id}")).await;
        assert_eq!(browser.count("tr.delivery[data-status='delivered']").await, 1, "{id}: {text}");
    }

    // The new path's alert page shows the edge the row lock added, and a trace of it.
    browser.open(&format!("{app}/alerts/{}", alerts["new_shape"])).await;
    let added = "li.added[data-edge='payment/charge card -> database/lock payment row']";
    assert_eq!(browser.count(added).await, 1, "the new_shape alert names the lock edge");
    assert_eq!(browser.count("#shape-trace").await, 1, "a trace of the new shape");
    browser.assert_clean("the new_shape alert").await;
    browser.screenshot("demo-new-shape").await;

    // Its full diff: both checkouts on one scale, and the slow one waited on the lock.
    browser.click_through("#shape-diff").await;
    assert_eq!(
        browser.count("ul.edges.diff li.added[data-edge='payment/charge card -> database/lock payment row']").await,
        1
    );
    assert_eq!(browser.count("section.diff-side svg.waterfall").await, 2);
    let critical = browser
        .client
        .execute(
            "return [...document.querySelectorAll('#side-b g.span.critical text.label')].map(t => t.textContent)",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        critical.as_array().unwrap().iter().any(|l| l.as_str().is_some_and(|l| l.contains("lock payment row"))),
        "the lock on the critical path: {critical}"
    );
    browser.assert_clean("the new shape's diff").await;
    browser.screenshot("demo-shape-diff").await;

    browser.open(&format!("{app}/stories?service=frontend")).await;
    assert!(browser.count("tr.shape").await >= 3, "checkout, product view and the slow checkout's new shape");
    browser.assert_clean("the stories page").await;
    browser.screenshot("demo-stories").await;

    let id = slow["trace_id"].as_str().unwrap();
    browser.open(&format!("{app}/traces/{id}")).await;
    let spans = slow["spans"].as_array().unwrap();
    let mut drawn = Vec::new();
    for g in browser.client.find_all(Locator::Css("svg.waterfall g.span")).await.unwrap() {
        drawn.push(g.attr("data-span-id").await.unwrap().unwrap());
    }
    assert_eq!(drawn.len(), spans.len(), "the waterfall draws every span of {id}");
    assert!(spans.iter().any(|s| s["operation"] == "lock payment row"), "{slow}");
    browser.assert_clean("the slow trace").await;
    browser.screenshot("demo-trace").await;

    let text = browser.open(&format!("{app}/pipeline?window=15m")).await;
    assert!(browser.count("[data-stage='ingest'] circle.pt").await > 0, "ingest throughput has points: {text}");
    assert!(browser.count("[data-stage='logminer'] circle.pt").await > 0, "logminer throughput has points");
    browser.assert_clean("the pipeline page").await;
    browser.screenshot("demo-pipeline").await;
}

/// `up` on addresses where nothing answers starts its own ClickHouse and broker (data
/// under a temporary home); killed with -9 it takes them along; the next `up` cleans the
/// stale PID files and starts; SIGTERM stops everything and leaves no process or PID file.
#[tokio::test]
async fn up_starts_its_own_services_restarts_after_kill_9_and_leaves_nothing_after_sigterm() {
    let clickhouse = format!("http://127.0.0.1:{}", free_port());
    let broker = free_addr();
    let env = TestEnv::new("demo_up");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let extra = [("TAYGA_CLICKHOUSE_URL", clickhouse.clone()), ("TAYGA_KAFKA_BROKERS", broker.clone())];
    let args = ["--home", home.to_str().unwrap()];
    let (ch_pid, broker_pid) = (home.join("clickhouse/pid"), home.join("broker/pid"));

    let (mut first, _) = up(&env, dir.path(), "first", &args, &extra);
    wait_up(dir.path(), "first", Duration::from_secs(90)).await;
    let text = output(dir.path(), "first");
    assert!(text.contains(&format!("clickhouse: running at {clickhouse}")), "{text}");
    assert!(text.contains(&format!("broker: running at {broker}")), "{text}");
    let children = [pid_in(&ch_pid), pid_in(&broker_pid)];
    assert!(children.iter().all(|p| alive(*p)), "both children run: {children:?}");

    first.kill();
    gone(&children, "the children of a SIGKILLed `up` to die with it").await;
    assert!(ch_pid.exists() && broker_pid.exists(), "a crash leaves its PID files");

    let (mut second, app) = up(&env, dir.path(), "second", &args, &extra);
    wait_up(dir.path(), "second", Duration::from_secs(90)).await;
    let text = output(dir.path(), "second");
    for name in ["clickhouse", "broker"] {
        assert!(text.contains(&format!("{name}: removed the stale")) && text.contains("is gone)"), "{text}");
    }
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    assert!(
        get_json(&http, format!("{app}/api/v1/services")).await.is_some(),
        "the API answers from the new ClickHouse"
    );
    let again = [pid_in(&ch_pid), pid_in(&broker_pid)];
    assert!(again.iter().all(|p| alive(*p)) && again != children, "{again:?} after {children:?}");

    signal(second.id(), "TERM");
    let status = second.wait_within(Duration::from_secs(40));
    let text = output(dir.path(), "second");
    assert!(status.success(), "{status}:\n{text}");
    assert!(text.contains("clickhouse: stopped") && text.contains("broker: stopped"), "{text}");
    gone(&again, "the children after SIGTERM").await;
    assert!(!ch_pid.exists() && !broker_pid.exists(), "no PID file is left");
}
