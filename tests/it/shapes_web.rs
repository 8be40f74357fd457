//! Trace shapes as knowledge, in a real browser (Chromium over WebDriver, as `web.rs`) on
//! seeded spans, stories and alerts served by the API in-process: a trace with a parallel
//! fan-out marks exactly the chain it waited on (the longer branch, its child and the call
//! after it; not the shorter branch); a shape's page leads to its diff against the
//! endpoint's usual shape, where the added lock edge is listed and both representative
//! traces are drawn on one time scale with the lock on the critical path; a new_shape
//! alert shows the diff inline and links it; a shape_slowdown alert links exactly the slow
//! traces.

use std::collections::BTreeSet;
use std::time::Duration;

use fantoccini::Locator;
use serde_json::Value;
use tayga::store::{now_ns, AlertRow, SpanRow, StoryRow};
use tayga::wire::alert::{format_id, ShapeChange};

use crate::api::Api;
use crate::common::{span_row, Browser, TestEnv};

const MS: u64 = 1_000_000;
const USUAL: u64 = 0x1a;
const LOCKED: u64 = 0x2b;
const FAN: &str = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0";
const LOCKED_TRACE: &str = "2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b";
const LOCK_EDGE: &str = "web/GET /checkout -> db/lock row";
const NEW_SHAPE_ALERT: u64 = 0x0a0a_0a0a_0a0a_0a0a;
const SLOWDOWN_ALERT: u64 = 0x0b0b_0b0b_0b0b_0b0b;

/// A span of `trace` from `from_ms` to `to_ms` after `at`.
fn span(
    trace: &str,
    id: &str,
    parent: &str,
    service: &str,
    name: &str,
    at: u64,
    (from_ms, to_ms): (u64, u64),
) -> SpanRow {
    span_row(trace, id, parent, service, name, at + from_ms * MS, at + to_ms * MS)
}

fn story(trace: &str, fingerprint: u64, at: u64, duration_ms: u64, edges: &[&str]) -> StoryRow {
    StoryRow {
        trace_id: trace.into(),
        fingerprint,
        root_service: "web".into(),
        root_operation: "GET /checkout".into(),
        start_ns: at,
        duration_ns: duration_ms * MS,
        span_count: edges.len() as u32,
        services: vec!["db".into(), "web".into()],
        edges: edges.iter().map(|e| e.to_string()).collect(),
        version_ns: at,
        ..Default::default()
    }
}

/// Three checkouts of the usual shape (a query), one that waited on a row lock, the
/// fan-out trace, and an alert of each shape kind.
async fn seed(env: &TestEnv, now: u64) {
    let store = env.migrated_store().await;
    let at = now - 10 * 60_000 * MS;
    let base = ["ROOT -> web/GET /checkout", "web/GET /checkout -> db/query"];
    let mut spans = Vec::new();
    let mut stories = Vec::new();
    for n in 0..3u64 {
        let trace = format!("1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a{n:02}");
        let start = at + n * 1000 * MS;
        spans.push(span(&trace, &format!("u{n}00000000000001"), "", "web", "GET /checkout", start, (0, 100)));
        spans.push(span(
            &trace,
            &format!("u{n}00000000000002"),
            &format!("u{n}00000000000001"),
            "db",
            "query",
            start,
            (10, 30),
        ));
        stories.push(story(&trace, USUAL, start, 100, &base));
    }
    let t = LOCKED_TRACE;
    let locked_at = at + 5000 * MS;
    spans.push(span(t, "l000000000000001", "", "web", "GET /checkout", locked_at, (0, 1100)));
    spans.push(span(t, "l000000000000002", "l000000000000001", "db", "query", locked_at, (10, 30)));
    spans.push(span(t, "l000000000000003", "l000000000000001", "db", "lock row", locked_at, (40, 1040)));
    stories.push(story(t, LOCKED, locked_at, 1100, &[base[0], base[1], LOCK_EDGE]));
    // A fan-out: `short` and `long` run side by side, `long` ends later; `after` follows.
    let fan_at = at + 8000 * MS;
    spans.push(span(FAN, "f000000000000001", "", "api", "GET /fan", fan_at, (0, 200)));
    spans.push(span(FAN, "f000000000000002", "f000000000000001", "a", "short", fan_at, (10, 60)));
    spans.push(span(FAN, "f000000000000003", "f000000000000002", "a", "inner", fan_at, (15, 55)));
    spans.push(span(FAN, "f000000000000004", "f000000000000001", "b", "long", fan_at, (10, 150)));
    spans.push(span(FAN, "f000000000000005", "f000000000000004", "b", "inner", fan_at, (20, 140)));
    spans.push(span(FAN, "f000000000000006", "f000000000000001", "c", "after", fan_at, (160, 190)));
    store.insert(&spans).await.unwrap();
    store.insert(&stories).await.unwrap();
    let alert = |alert_id: u64, kind: &str, change: ShapeChange, threshold: f64| AlertRow {
        alert_id,
        kind: kind.into(),
        service: "web".into(),
        template_id: LOCKED,
        template: "GET /checkout".into(),
        first_at: locked_at,
        last_at: locked_at + 60_000 * MS,
        count: 1,
        baseline: 100.0,
        threshold,
        stored_ns: now,
        updated_ns: now,
        resolved_at: 0,
        shape: change.to_column(),
    };
    let new_path = ShapeChange {
        usual_fingerprint: USUAL,
        edges_added: vec![LOCK_EDGE.into()],
        share: 0.25,
        trace_id: LOCKED_TRACE.into(),
        new_edges: vec![LOCK_EDGE.into()],
        ..Default::default()
    };
    let slower = ShapeChange {
        usual_fingerprint: LOCKED,
        trace_id: LOCKED_TRACE.into(),
        p95_ms: Some(1100.0),
        ..Default::default()
    };
    store
        .insert(&[
            alert(NEW_SHAPE_ALERT, "new_shape", new_path, 0.0),
            alert(SLOWDOWN_ALERT, "shape_slowdown", slower, 500.0),
        ])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_diff_shows_the_new_edge_on_one_scale_and_a_trace_marks_the_chain_it_waited_on() {
    let env = TestEnv::new("shapes_web");
    let now = now_ns();
    seed(&env, now).await;
    let api = Api::start(env.store(), "", Duration::from_secs(10)).await;
    let browser = Browser::start().await;
    let checks = std::panic::AssertUnwindSafe(pages(&browser, &api));
    let outcome = futures_util::FutureExt::catch_unwind(checks).await;
    browser.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The `data-span-id` of every element `css` finds.
async fn span_ids(browser: &Browser, css: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for g in browser.client.find_all(Locator::Css(css)).await.unwrap() {
        ids.insert(g.attr("data-span-id").await.unwrap().unwrap());
    }
    ids
}

/// The drawn width, in CSS pixels, of span `id`'s bar in the waterfall under `scope`.
async fn bar_px(browser: &Browser, scope: &str, id: &str) -> f64 {
    let script = format!(
        "return document.querySelector(\"{scope} g.span[data-span-id='{id}'] rect.bar\").getBoundingClientRect().width"
    );
    browser.client.execute(&script, vec![]).await.unwrap().as_f64().unwrap()
}

async fn pages(browser: &Browser, api: &Api) {
    let app = api.base();
    let chain: BTreeSet<String> =
        ["f000000000000001", "f000000000000004", "f000000000000005", "f000000000000006"].map(String::from).into();

    // The fan-out: the trace waited on the longer branch and its child, then on `after`.
    browser.open(&format!("{app}/traces/{FAN}")).await;
    assert_eq!(browser.count("svg.waterfall g.span").await, 6);
    assert_eq!(span_ids(browser, "svg.waterfall g.span.critical").await, chain);
    assert_eq!(browser.count("svg.waterfall g.span.critical text.crit-mark").await, 4, "a marker, not only a colour");
    assert_eq!(browser.count("svg.waterfall g.span:not(.critical) text.crit-mark").await, 0);
    assert!(browser.text("figure.waterfall-figure figcaption").await.contains("on the critical path"));
    // The long branch: 140 ms, 120 of them in its child.
    let long = browser.client.find(Locator::Css("g.span[data-span-id='f000000000000004'] text.dur")).await.unwrap();
    assert_eq!(long.text().await.unwrap(), "140.0 ms · self 20.0 ms");
    browser.assert_clean("the fan-out trace").await;
    // The API says the same.
    let trace = api.ok(&format!("/api/v1/traces/{FAN}")).await;
    let marked: BTreeSet<String> = trace["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["critical"] == Value::Bool(true))
        .map(|s| s["span_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(marked, chain);

    // The lock's shape links its diff against the endpoint's usual (most frequent) shape.
    let (usual, locked) = (format_id(USUAL), format_id(LOCKED));
    browser.open(&format!("{app}/stories/{locked}")).await;
    browser.click_through("#compare-usual").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), format!("/shapes/{usual}/diff/{locked}"));
    diff_page(browser).await;
    // The usual shape's page says it is the usual one.
    let text = browser.open(&format!("{app}/stories/{usual}")).await;
    assert!(text.contains("This is the endpoint's usual shape"), "{text}");
    assert_eq!(browser.count("#compare-usual").await, 0);

    // The new path's alert shows the diff inline and links it.
    browser.open(&format!("{app}/alerts/{}", format_id(NEW_SHAPE_ALERT))).await;
    assert_eq!(browser.count(&format!("#shape tr.edge-change.added[data-edge='{LOCK_EDGE}']")).await, 1);
    assert!(browser.text("#shape").await.contains("+1.00 s"), "the lock's self time, inline");
    browser.assert_clean("the new_shape alert").await;
    browser.click_through("#shape-diff").await;
    assert_eq!(browser.client.current_url().await.unwrap().path(), format!("/shapes/{usual}/diff/{locked}"));
    diff_page(browser).await;

    // The slowdown links the endpoint's traces slower than its threshold: the locked one only.
    browser.open(&format!("{app}/alerts/{}", format_id(SLOWDOWN_ALERT))).await;
    assert_eq!(browser.count("#shape-diff").await, 0, "a slowdown's usual shape is itself");
    browser.click_through("#slow-traces").await;
    let mut listed = BTreeSet::new();
    for row in browser.client.find_all(Locator::Css("tr.trace")).await.unwrap() {
        listed.insert(row.attr("data-trace-id").await.unwrap().unwrap());
    }
    assert_eq!(listed, BTreeSet::from([LOCKED_TRACE.to_string()]));
    browser.assert_clean("the slow traces of a slowdown").await;
}

/// The diff of the locked shape against the usual one.
async fn diff_page(browser: &Browser) {
    assert_eq!(browser.count(&format!("ul.edges.diff li.added[data-edge='{LOCK_EDGE}']")).await, 1);
    assert_eq!(browser.count("ul.edges.diff li").await, 1, "one edge added, none removed");
    let row = browser.text(&format!("tr.edge-change.added[data-edge='{LOCK_EDGE}']")).await;
    assert!(row.contains("0 → 1") && row.contains("+1.00 s"), "{row}");
    // Two waterfalls on one axis: 100 ms is drawn 1/11 as wide as 1.1 s.
    assert_eq!(browser.count("section.diff-side svg.waterfall").await, 2);
    let axes: BTreeSet<String> = {
        let mut axes = BTreeSet::new();
        for svg in browser.client.find_all(Locator::Css("section.diff-side svg.waterfall")).await.unwrap() {
            axes.insert(svg.attr("data-axis-ns").await.unwrap().unwrap());
        }
        axes
    };
    assert_eq!(axes, BTreeSet::from([(1100 * MS).to_string()]));
    let (short, long) =
        (bar_px(browser, "#side-a", "u200000000000001").await, bar_px(browser, "#side-b", "l000000000000001").await);
    assert!(long > 300.0 && (short / long - 100.0 / 1100.0).abs() < 0.01, "{short} px against {long} px");
    // The lock is on the locked trace's critical path.
    assert_eq!(
        span_ids(browser, "#side-b g.span.critical").await,
        ["l000000000000001", "l000000000000002", "l000000000000003"].map(String::from).into(),
        "the query, then the lock, each waited on in turn"
    );
    browser.assert_clean("the shape diff").await;
}
