//! The API's contract, judged by a fuzzer nobody here wrote: schemathesis (PyPI, the version
//! scripts/test.sh pins) reads `/api/v1/openapi.json` from the API over a seeded store and
//! sends every operation, the writes included, with an operator's token: requests the
//! document calls valid (each must be accepted), requests it calls invalid (each must be
//! refused), and sequences that follow one answer's ids into the next request, with every
//! check it has: no 5xx, every status, content type, header and body as documented, no
//! valid request refused, no invalid one accepted, no answer without a token, no slow
//! answer. Any failure fails the test with schemathesis's report. The three rules the
//! document can only state in words are taught to it by tests/contract/schemathesis_hooks.py
//! (docs/api.md, "The contract").

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use tayga::config::ApiConfig;
use tayga::daemon::api::access::{Access, Roles};
use tayga::daemon::api::handlers::AppState;
use tayga::daemon::api::router;
use tayga::daemon::{prepare, Shutdown};
use tayga::store::now_ns;
use tayga::workflow::retry::AlertsTopic;

use crate::common::TestEnv;

const OPERATOR: &str = "operator-contract-5e1d";
/// Test cases per operation and phase: enough to reach every rule, within about two minutes
/// on two cores.
const EXAMPLES: &str = "60";
/// The fixed seed, so a failure is found again by the same run.
const SEED: &str = "20261204";
/// Slower than this is a failure (a hang among them).
const MAX_RESPONSE_SECS: &str = "5";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_the_server_doing_what_its_document_says() {
    let env = TestEnv::new("api_contract");
    let shutdown = Shutdown::new();
    let store = prepare(&env.config, &shutdown).await.expect("topics and schema");
    crate::api::seed(&store, now_ns()).await;

    let api = ApiConfig { operator_tokens: vec![OPERATOR.into()], ..ApiConfig::default() };
    let state = AppState {
        store,
        query_timeout: Duration::from_secs(10),
        now_ns,
        alerts_topic: Some(Arc::new(AlertsTopic::new(&env.config))),
    };
    let mut registry = Registry::default();
    let metrics = tayga::daemon::api::metrics::RequestMetrics::register(&mut registry);
    let health: tayga::daemon::HealthFn = Arc::new(|| json!({"api": {"status": "serving"}}));
    let access = Access::new(Roles::from_config(&api).unwrap(), false);
    let app = router::secured(state, Arc::new(registry), metrics, health, access);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stopped = shutdown.triggered();
    tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap() });

    let document = format!("{base}/api/v1/openapi.json");
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let doc: Value = http.get(&document).bearer_auth(OPERATOR).send().await.unwrap().json().await.unwrap();
    let operations: usize =
        doc["paths"].as_object().unwrap().values().map(|item| item.as_object().unwrap().len()).sum();

    let hooks = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/contract/schemathesis_hooks.py");
    let run = tokio::process::Command::new("python3")
        .args(["-m", "schemathesis.cli", "run", &document, "--checks", "all"])
        .args(["--header", &format!("Authorization: Bearer {OPERATOR}")])
        .args(["--max-examples", EXAMPLES, "--seed", SEED, "--max-response-time", MAX_RESPONSE_SECS])
        .args(["--request-timeout", "20", "--generation-database", "none", "--no-color"])
        .env("SCHEMATHESIS_HOOKS", hooks)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("schemathesis finished within 5 minutes")
        .expect("python3 runs (scripts/test.sh installs schemathesis)");
    shutdown.trigger();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named schemathesis"),
        "schemathesis is not installed: scripts/test.sh installs it (python3 -m pip install schemathesis==…)\n{stderr}"
    );
    assert!(output.status.success(), "schemathesis found the server breaking its document:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("Selected: {operations}/{operations}"))
            && stdout.contains(&format!("Tested: {operations}")),
        "schemathesis did not test all {operations} operations:\n{stdout}"
    );
    eprintln!("{stdout}");
}
