//! Explore in a real browser (Chromium over WebDriver, as `web.rs`) against a live
//! `tayga serve all` fed by the stock OpenTelemetry Python SDK (`tests/sdk/explore_feed.py`):
//! a phrase sent seconds earlier is found, `key=value` narrows to the right lines, a line's
//! context shows its neighbours in order, following shows a line sent after the page opened,
//! a minimum duration finds exactly the slow traces, every link opens the right page, and no
//! page logs an error. The Logs and Traces pages are photographed (`TAYGA_WEB_SCREENSHOTS`).

use std::collections::BTreeSet;
use std::time::Duration;

use fantoccini::Locator;
use serde_json::Value;

use crate::common::{get_json, wait_for, Browser, ServeAll, TestEnv};

const SERVICE: &str = "explore-web";

async fn feed(ingest: &str, args: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/explore_feed.py");
    let output = tokio::process::Command::new("python3")
        .arg(script)
        .arg(args[0])
        .arg(format!("http://{ingest}"))
        .arg(SERVICE)
        .args(&args[1..])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "the SDK export failed:\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn ids(v: &Value) -> BTreeSet<String> {
    v.as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn explore_finds_what_the_sdk_sent_seconds_earlier() {
    let env = TestEnv::new("explore_web");
    let daemons = ServeAll::start(&env, &[]).await;
    let app = format!("http://{}", daemons.api_addr);
    let browser = Browser::start().await;
    let checks = std::panic::AssertUnwindSafe(pages(&browser, &app, &daemons.http_addr));
    let outcome = futures_util::FutureExt::catch_unwind(checks).await;
    browser.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The text of every row of `css`, in page order.
async fn rows(browser: &Browser, css: &str) -> Vec<String> {
    let mut texts = Vec::new();
    for row in browser.client.find_all(Locator::Css(css)).await.unwrap() {
        texts.push(row.text().await.unwrap());
    }
    texts
}

async fn pages(browser: &Browser, app: &str, ingest: &str) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let tag = format!("t{}", std::process::id());
    let sent = feed(ingest, &["seed", &tag]).await;
    let limit = Duration::from_secs(60);
    let q = |query: &str| format::encode(query);
    // Stored and mined (the refused line's template), through the API.
    wait_for("the lines and their templates", limit, || async {
        let page = get_json(&http, format!("{app}/api/v1/logs?q={}", q(&format!("service:{SERVICE} {tag}")))).await?;
        let items = page["items"].as_array()?;
        (items.len() == 11 && items.iter().all(|l| l["template_id"].is_string())).then_some(())
    })
    .await;
    // Three fast, two slow and the refused line's.
    wait_for("the six traces", limit, || async {
        let page = get_json(&http, format!("{app}/api/v1/traces?service={SERVICE}")).await?;
        (page["items"].as_array()?.len() == 6).then_some(())
    })
    .await;

    // A phrase: the one line that holds it.
    let phrase = format!("\"card expired {tag}\"");
    browser.open(&format!("{app}/logs?q={}&since=15m", q(&phrase))).await;
    let found = rows(browser, "#log-lines tr.log-line").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains(&format!("checkout refused: card expired {tag}")) && found[0].contains("ERROR"),
        "{found:?}"
    );
    assert!(browser.count("svg.bars rect.bar").await > 0, "the count chart has a bar");
    browser.assert_clean("the logs page, a phrase").await;

    // A custom range (UTC, as the range form sends it) that holds the lines finds the phrase;
    // one that ends before them finds nothing, and says so.
    let field = |ns: u64| tayga::time::rfc3339(ns)[..19].to_string();
    let now = tayga::store::now_ns();
    let minute = 60_000_000_000;
    let custom = |from: u64, to: u64| format!("{app}/logs?q={}&from={}&to={}", q(&phrase), field(from), field(to));
    browser.open(&custom(now - 10 * minute, now + minute)).await;
    assert_eq!(browser.count("#log-lines tr.log-line").await, 1);
    assert_eq!(browser.text("nav.range a.current").await, "custom");
    let text = browser.open(&custom(now - 20 * minute, now - 10 * minute)).await;
    assert!(text.contains("No line matches in this range"), "{text}");
    browser.assert_clean("a custom range").await;
    browser.open(&format!("{app}/logs?q={}&since=15m", q(&phrase))).await;

    // The line's trace: its page shows the line.
    browser.click_through("#log-lines a.trace-link").await;
    let url = browser.client.current_url().await.unwrap();
    assert!(url.path().ends_with(sent["with_line"].as_str().unwrap()), "{url}");
    assert!(browser.text("#logs").await.contains("card expired"));
    browser.assert_clean("the trace of a line").await;

    // key=value narrows to the even steps, newest first.
    browser.open(&format!("{app}/logs?q={}&since=15m", q(&format!("tenant=acme \"of batch {tag}\"")))).await;
    let found = rows(browser, "#log-lines tr.log-line").await;
    let steps: Vec<u32> = found.iter().map(|r| step_of(r, &tag)).collect();
    assert_eq!(steps, [10, 8, 6, 4, 2], "{found:?}");
    // The template's slots are highlighted, and its link opens the template.
    assert!(browser.count("#log-lines code.body span.slot").await >= 5, "each line's number is a slot");
    browser.click_through("#log-lines a.template-link").await;
    assert!(browser.client.current_url().await.unwrap().path().starts_with(&format!("/templates/{SERVICE}/")));
    assert!(browser.text(".template-line").await.contains("step"), "the template page");
    browser.assert_clean("a line's template").await;

    // Step 5's context: its neighbours, in order, the line marked.
    browser.open(&format!("{app}/logs?q={}&since=15m", q(&format!("\"step 5 of batch {tag}\"")))).await;
    browser.click_through("#log-lines a.context-link").await;
    let context = rows(browser, "#context tr.log-line").await;
    let order: Vec<u32> = context.iter().filter(|r| r.contains("of batch")).map(|r| step_of(r, &tag)).collect();
    assert_eq!(order, (1..=10).collect::<Vec<_>>(), "{context:?}");
    assert!(browser.text("#context tr.focus").await.contains(&format!("step 5 of batch {tag}")));
    assert!(browser.text("p.lead").await.contains("service.instance.id=explore-1"));
    browser.assert_clean("a line's context").await;

    // Following: a line sent after the page opened comes on top.
    browser.open(&format!("{app}/logs?q={}&since=5m", q(&format!("service:{SERVICE}")))).await;
    browser.screenshot("logs").await;
    browser.client.find(Locator::Css("#follow")).await.unwrap().click().await.unwrap();
    let late = format!("late arrival {tag}");
    feed(ingest, &["line", &late]).await;
    let top = wait_for("the late line on top", limit, || async {
        let first = browser.client.find(Locator::Css("#log-lines tbody tr.log-line")).await.ok()?.text().await.ok()?;
        first.contains(&late).then_some(first)
    })
    .await;
    assert!(top.contains("WARN"), "{top}");
    assert_eq!(browser.count("#log-lines tr.log-line.new").await, 1, "one new line, marked");
    browser.assert_clean("following").await;

    // Traces: a minimum duration finds exactly the slow ones; the scatter's points open them.
    let slow = ids(&sent["slow"]);
    browser.open(&format!("{app}/traces?service={SERVICE}&min=500ms&since=15m")).await;
    let mut shown = BTreeSet::new();
    for row in browser.client.find_all(Locator::Css("tr.trace")).await.unwrap() {
        shown.insert(row.attr("data-trace-id").await.unwrap().unwrap());
    }
    assert_eq!(shown, slow);
    assert_eq!(browser.count("svg.scatter circle.dot").await, 2);
    assert!(browser.text("#results").await.contains("slow-op"), "the root operation is listed");
    browser.assert_clean("the traces page").await;
    browser.open(&format!("{app}/traces?service={SERVICE}&since=5m")).await;
    assert_eq!(browser.count("tr.trace").await, 6);
    assert_eq!(browser.count("svg.scatter circle.dot").await, 6);
    browser.screenshot("traces").await;
    browser.open(&format!("{app}/traces?service={SERVICE}&min=500ms&since=15m")).await;
    // The two points nearly overlap: the one drawn last is on top.
    browser.click_through("svg.scatter a:last-of-type circle.dot").await;
    let path = browser.client.current_url().await.unwrap().path().to_string();
    assert!(slow.iter().any(|id| path == format!("/traces/{id}")), "{path}");
    assert_eq!(browser.count("svg.waterfall g.span").await, 2, "the slow trace's two spans");
    browser.assert_clean("a slow trace from the scatter").await;
    browser.open(&format!("{app}/traces?service={SERVICE}&min=500ms&since=15m")).await;
    browser.click_through("tr.trace td a").await;
    assert!(browser.client.current_url().await.unwrap().path().starts_with("/traces/"));
    browser.assert_clean("a slow trace from the list").await;

    // The overview's links lead to a service's lines and traces.
    browser.open(&format!("{app}/")).await;
    browser.click_through(&format!("tr:has(a.logs-link[href*='{SERVICE}']) a.logs-link")).await;
    assert!(rows(browser, "#log-lines tr.log-line").await.len() >= 12, "the service's lines");
    browser.assert_clean("a service's logs from the overview").await;
    browser.open(&format!("{app}/")).await;
    browser.click_through(&format!("a.traces-link[href='/traces?service={SERVICE}']")).await;
    assert_eq!(browser.count("tr.trace").await, 6, "the service's traces");
    browser.assert_clean("a service's traces from the overview").await;

    // The navigation reaches both pages; a query that cannot be read is a 400 page saying where.
    browser.open(&format!("{app}/")).await;
    browser.click_through("header nav a[href='/logs']").await;
    assert!(browser.text("h1").await.contains("Logs"));
    browser.click_through("header nav a[href='/traces']").await;
    assert!(browser.text("h1").await.contains("Traces"));
    browser.assert_clean("the navigation").await;
    let status = http.get(format!("{app}/logs?q={}", q("\"open"))).send().await.unwrap().status();
    assert_eq!(status, 400);
    let text = browser.open(&format!("{app}/logs?q={}", q("\"open"))).await;
    assert!(text.contains("at character 1"), "{text}");
}

/// N of a `step N of batch TAG` row.
fn step_of(row: &str, tag: &str) -> u32 {
    let end = row.find(&format!(" of batch {tag}")).unwrap_or_else(|| panic!("no step in {row:?}"));
    row[..end].rsplit(' ').next().unwrap().parse().unwrap()
}

mod format {
    pub fn encode(value: &str) -> String {
        form_urlencoded::byte_serialize(value.as_bytes()).collect()
    }
}
