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

use std::time::Duration;

use serde_json::Value;
use tayga::daemon::{prepare, Shutdown};
use tayga::store::now_ns;

use crate::api_roles::{OPERATOR, VIEWER};
use crate::common::TestEnv;

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
    let store = prepare(&env.config, &Shutdown::new()).await.expect("topics and schema");
    crate::api::seed(&store, now_ns()).await;

    // Viewer, operator and `api.token` tokens, as the roles test has them; the run is the
    // operator's.
    let (base, shutdown) = crate::api_roles::start(&env, store).await;

    let document = format!("{base}/api/v1/openapi.json");
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let doc: Value = http.get(&document).bearer_auth(OPERATOR).send().await.unwrap().json().await.unwrap();
    let operations: usize =
        doc["paths"].as_object().unwrap().values().map(|item| item.as_object().unwrap().len()).sum();

    // The operator runs everything; a viewer's writes must be the documented 403s.
    let post = ["--include-method", "POST", "--max-examples", "10"];
    let runs: [(&str, &str, &[&str]); 2] =
        [("operator", OPERATOR, &["--max-examples", EXAMPLES]), ("viewer", VIEWER, &post)];
    for (who, token, args) in runs {
        let stdout = schemathesis(&document, token, args).await;
        let tested = if who == "operator" { operations } else { posts(&doc) };
        assert!(
            stdout.contains(&format!("Tested: {tested}")),
            "schemathesis ({who}) did not test all {tested} operations:\n{stdout}"
        );
        eprintln!("{stdout}");
    }
    // Schemathesis sends UTF-8 only: a path segment that is not UTF-8 once decoded was a
    // plain-text 400 from axum's extractor, not the documented JSON body.
    for (path, param) in [("/api/v1/alerts/%FF", "alert_id"), ("/api/v1/shapes/ff/diff/%C3%28", "b")] {
        let answer = http.get(format!("{base}{path}")).bearer_auth(OPERATOR).send().await.unwrap();
        assert_eq!(answer.status(), 400, "{path}");
        assert_eq!(answer.headers()["content-type"], "application/json", "{path}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["parameter"], param, "{path}: {body}");
    }
    shutdown.trigger();
}

/// The document's POST operations.
fn posts(doc: &Value) -> usize {
    doc["paths"].as_object().unwrap().values().filter(|item| item.get("post").is_some()).count()
}

/// Runs schemathesis with `token` and `args` against `document`, with every check, the
/// fixed seed and the response-time bound; its report, once it found nothing.
async fn schemathesis(document: &str, token: &str, args: &[&str]) -> String {
    let hooks = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/contract/schemathesis_hooks.py");
    // Schemathesis keeps a cache of what it found in its working folder: not the checkout's.
    let folder = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new("python3")
        .current_dir(folder.path())
        .args(["-m", "schemathesis.cli", "run", document, "--checks", "all"])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--seed", SEED, "--max-response-time", MAX_RESPONSE_SECS])
        .args(["--request-timeout", "20", "--generation-database", "none", "--no-color"])
        .args(args)
        .env("SCHEMATHESIS_HOOKS", hooks)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("schemathesis finished within 5 minutes")
        .expect("python3 runs (scripts/test.sh installs schemathesis)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named schemathesis"),
        "schemathesis is not installed: scripts/test.sh installs it (python3 -m pip install schemathesis==…)\n{stderr}"
    );
    assert!(output.status.success(), "schemathesis found the server breaking its document:\n{stdout}\n{stderr}");
    stdout
}
