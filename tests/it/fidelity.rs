//! All an OpenTelemetry SDK sends comes back whole: the stock JavaScript SDK over OTLP/HTTP
//! JSON, OTLP/HTTP protobuf and OTLP/gRPC, and the stock Python SDK over OTLP/HTTP and gRPC,
//! each send an error trace with a recorded exception, a span event of typed attributes and
//! two span links, and two logs (one with a map body and an event name), to `tayga serve
//! all`; the API then returns every span, every event with its attributes, the exception's
//! type, message and stack trace, every link (the one to a trace never sent marked as not
//! stored), and every log with its new fields.

use crate::common;

use std::time::Duration;

use common::{get_json, wait_for, TestEnv};
use serde_json::{json, Value};

const NODE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/node");
const PYTHON_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/otel_whole.py");

/// What one run of `otel_whole.mjs` or `otel_whole.py` sent.
#[derive(serde::Deserialize, Debug)]
struct Sent {
    trace: String,
    spans: Vec<String>,
    error_span: String,
    linked: Ids,
    never_sent: Ids,
    exception: Exception,
    exports: usize,
    failed: Vec<Value>,
}

#[derive(serde::Deserialize, Debug)]
struct Ids {
    trace: String,
    span: String,
}

#[derive(serde::Deserialize, Debug)]
struct Exception {
    r#type: String,
    message: String,
    stacktrace: String,
}

async fn node(encoding: &str, endpoint: &str, service: &str) -> Sent {
    assert!(
        std::path::Path::new(NODE_DIR).join("node_modules/@opentelemetry").is_dir(),
        "the OpenTelemetry JS SDK is not installed in {NODE_DIR} (scripts/test.sh runs `npm ci` there)"
    );
    let mut cmd = tokio::process::Command::new("node");
    cmd.current_dir(NODE_DIR).args(["otel_whole.mjs", encoding, endpoint, service]);
    sent(&format!("node {encoding}"), cmd).await
}

async fn python(protocol: &str, endpoint: &str, service: &str) -> Sent {
    let mut cmd = tokio::process::Command::new("python3");
    cmd.args([PYTHON_SCRIPT, protocol, endpoint, service]);
    sent(&format!("python {protocol}"), cmd).await
}

async fn sent(what: &str, mut cmd: tokio::process::Command) -> Sent {
    let output = cmd.output().await.expect("the SDK client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let sent: Sent = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what}: no report ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success() && sent.failed.is_empty(), "{what}: exports failed: {sent:?}");
    // A simple processor exports each span and each log by itself: 3 spans and 2 logs.
    assert_eq!(sent.exports, 5, "{what}: {sent:?}");
    sent
}

/// The trace by id from the API once its spans and logs are all stored.
async fn whole_trace(http: &reqwest::Client, api: &str, trace_id: &str, spans: usize, logs: usize) -> Value {
    wait_for(&format!("trace {trace_id} with {spans} spans and {logs} logs"), Duration::from_secs(90), || {
        let url = format!("{api}/api/v1/traces/{trace_id}");
        let http = http.clone();
        async move {
            let trace = get_json(&http, url).await?;
            let complete = trace["spans"].as_array()?.len() == spans && trace["logs"].as_array()?.len() == logs;
            complete.then_some(trace)
        }
    })
    .await
}

/// Checks that the API returns what `sent` sent, whole.
async fn check_whole(what: &str, http: &reqwest::Client, api: &str, sent: &Sent) {
    // The linked trace first: the error trace's link to it must then read as stored.
    let linked = whole_trace(http, api, &sent.linked.trace, 1, 0).await;
    assert_eq!(linked["spans"][0]["span_id"], sent.linked.span.as_str(), "{what}");
    let trace = whole_trace(http, api, &sent.trace, 2, 2).await;
    let spans = trace["spans"].as_array().unwrap();
    let mut ids: Vec<&str> = spans.iter().map(|s| s["span_id"].as_str().unwrap()).collect();
    ids.sort();
    let mut want: Vec<&str> = sent.spans.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(ids, want, "{what}: every span");

    let span = |id: &str| spans.iter().find(|s| s["span_id"] == id).unwrap_or_else(|| panic!("{what}: span {id}"));
    let error = span(&sent.error_span);
    assert_eq!(error["status_code"], 2, "{what}: {error}");
    assert_eq!(error["scope"]["name"], "tayga-whole", "{what}: {error}");
    assert_eq!(error["scope"]["version"], "1.2.3", "{what}: {error}");
    let events = error["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{what}: both events: {error}");
    assert_eq!(events[0]["name"], "card.checked", "{what}");
    assert_eq!(
        events[0]["attributes"],
        json!({"card.brand": "visa", "attempt": 2, "ratio": 0.5, "tags": ["a", "b"]}),
        "{what}: the event's attributes, each of its type"
    );
    assert!(events[0]["time_ns"].as_u64().unwrap() > 0, "{what}");
    assert_eq!(events[1]["name"], "exception", "{what}");
    let exception = &events[1]["attributes"];
    assert_eq!(exception["exception.type"], sent.exception.r#type.as_str(), "{what}: {exception}");
    assert_eq!(exception["exception.message"], sent.exception.message.as_str(), "{what}: {exception}");
    assert_eq!(
        exception["exception.stacktrace"],
        sent.exception.stacktrace.as_str(),
        "{what}: the whole stack trace: {exception}"
    );
    assert!(sent.exception.stacktrace.lines().count() > 2, "{what}: a real stack trace: {sent:?}");

    let root = spans.iter().find(|s| s["parent_span_id"] == "").unwrap_or_else(|| panic!("{what}: a root"));
    assert_eq!(root["typed_attributes"]["http.response.status_code"], 402, "{what}: a number stays a number");
    assert_eq!(root["attributes"]["http.response.status_code"], "402", "{what}: the text map as before");
    let links = root["links"].as_array().unwrap();
    assert_eq!(links.len(), 2, "{what}: both links: {root}");
    assert_eq!(links[0]["trace_id"], sent.linked.trace.as_str(), "{what}");
    assert_eq!(links[0]["span_id"], sent.linked.span.as_str(), "{what}");
    assert_eq!(links[0]["attributes"], json!({"messaging.operation": "receive"}), "{what}");
    assert_eq!(links[0]["stored"], true, "{what}: the linked trace was sent");
    assert_eq!(links[1]["trace_id"], sent.never_sent.trace.as_str(), "{what}");
    assert_eq!(links[1]["span_id"], sent.never_sent.span.as_str(), "{what}");
    assert_eq!(links[1]["attributes"], json!({"link.why": "never sent"}), "{what}");
    assert_eq!(links[1]["stored"], false, "{what}: Tayga never received that trace");

    let logs = trace["logs"].as_array().unwrap();
    let text = logs.iter().find(|l| l["body"] == "payment failed").unwrap_or_else(|| panic!("{what}: {logs:?}"));
    assert_eq!(text["attributes"], json!({"order.id": "42", "retry": "true"}), "{what}");
    assert_eq!(text["typed_attributes"], json!({"order.id": 42, "retry": true}), "{what}: each of its type");
    assert_eq!(text["structured_body"], Value::Null, "{what}");
    assert_eq!(text["span_id"], sent.error_span.as_str(), "{what}: the log's span");
    let event = logs.iter().find(|l| l["event_name"] == "order.declined").unwrap_or_else(|| panic!("{what}: {logs:?}"));
    assert_eq!(
        event["structured_body"],
        json!({"order": 42, "status": "declined", "items": ["a", "b"]}),
        "{what}: the map body whole"
    );
    assert_eq!(event["body"], r#"{"items":["a","b"],"order":42,"status":"declined"}"#, "{what}: the mined text");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_and_python_sdks_come_back_whole() {
    let env = TestEnv::new("sdk_whole");
    let daemons = common::ServeAll::start(&env, &[]).await;
    let http_endpoint = format!("http://{}", daemons.http_addr);
    let grpc_endpoint = format!("http://{}", daemons.grpc_addr);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let api = format!("http://{}", daemons.api_addr);
    for encoding in ["json", "proto", "grpc"] {
        let endpoint = if encoding == "grpc" { &grpc_endpoint } else { &http_endpoint };
        let sent = node(encoding, endpoint, &format!("node-{encoding}")).await;
        check_whole(&format!("node {encoding}"), &http, &api, &sent).await;
    }
    for protocol in ["http", "grpc"] {
        let endpoint = if protocol == "grpc" { &grpc_endpoint } else { &http_endpoint };
        let sent = python(protocol, endpoint, &format!("python-{protocol}")).await;
        check_whole(&format!("python {protocol}"), &http, &api, &sent).await;
    }
}

/// The same through ingest's direct path (`ingest.pipeline = direct`): the rows it inserts
/// itself, and the records it keeps and replays to the writer and the assembler, keep it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_direct_path_and_its_replay_keep_it_all_too() {
    let env = TestEnv::new("sdk_whole_direct");
    let daemons = common::ServeAll::start(&env, &[("TAYGA_INGEST_PIPELINE", "direct")]).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let api = format!("http://{}", daemons.api_addr);
    let health = get_json(&http, format!("http://{}/health", daemons.http_addr)).await.unwrap();
    assert_eq!(health["ingest"]["policy"], "direct", "{health}");
    let sent = node("proto", &format!("http://{}", daemons.http_addr), "node-direct").await;
    check_whole("node proto, direct", &http, &api, &sent).await;
    // The replayed records made the story, exception included. The replay waits for the
    // broker path's probe, which a loaded machine can fail once (a 30 s cooldown).
    wait_for("the story of the direct trace with its exception", Duration::from_secs(180), || async {
        let story = get_json(&http, format!("{api}/api/v1/traces/{}/story", sent.trace)).await?;
        (story["exception_message"] == sent.exception.message.as_str()).then_some(())
    })
    .await;
}

/// The app shows what the SDK sent: the trace page marks the events on their spans, opens
/// an exception panel for the error span (type, message, stack trace), links the linked
/// trace and says "not stored" of the one never sent; the Stories page tells the shape's
/// most frequent exception. In Chromium.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_shows_an_error_traces_exception_events_and_links_in_a_real_browser() {
    let env = TestEnv::new("web_exception");
    let daemons = common::ServeAll::start(&env, &[]).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let app = format!("http://{}", daemons.api_addr);
    let sent = node("json", &format!("http://{}", daemons.http_addr), "checkout").await;
    whole_trace(&http, &app, &sent.trace, 2, 2).await;
    wait_for("the error shape with its exception", Duration::from_secs(90), || async {
        let shapes = get_json(&http, format!("{app}/api/v1/shapes")).await?;
        let told = shapes["items"]
            .as_array()?
            .iter()
            .any(|s| s["top_exception"]["message"] == sent.exception.message.as_str());
        told.then_some(())
    })
    .await;

    let browser = common::Browser::start().await;
    let checks = std::panic::AssertUnwindSafe(async {
        let text = browser.open(&format!("{app}/traces/{}", sent.trace)).await;
        browser.assert_clean("the trace page").await;
        let panel = browser.text("section.exception").await;
        assert!(panel.contains("Error") && panel.contains(&sent.exception.message), "{panel}");
        let first_frame = sent.exception.stacktrace.lines().nth(1).unwrap().trim();
        let stack = browser.text("section.exception pre.stack").await;
        assert!(stack.contains(first_frame), "the stack trace, monospace: {stack}");
        assert_eq!(browser.count("svg.waterfall polygon.event.exception").await, 1, "the exception on its bar");
        assert_eq!(browser.count("svg.waterfall polygon.event").await, 2, "both events on their bar");
        assert_eq!(browser.count(&format!("a[href='/traces/{}']", sent.linked.trace)).await, 1, "the linked trace");
        assert!(text.contains(&sent.never_sent.trace) && text.contains("not stored"), "{text}");
        browser.screenshot("trace-exception").await;

        let text = browser.open(&format!("{app}/stories")).await;
        browser.assert_clean("the stories page").await;
        assert!(text.contains(&format!("Error: {}", sent.exception.message)), "{text}");
    });
    let outcome = futures_util::FutureExt::catch_unwind(checks).await;
    browser.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
