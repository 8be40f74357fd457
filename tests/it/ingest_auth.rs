//! Tokens on the OTLP receivers: without an accepted token a request is refused before its
//! body is read (401 / UNAUTHENTICATED) and nothing is stored; a token bound to services
//! may send only theirs (403 / PERMISSION_DENIED); the stock Python SDK sends with its
//! standard header setting; tokens never show in `config show` or in what ingest answers.

use crate::common;
use crate::ingest::{span, start_ingest, traces, wait_until_using};

use std::time::Duration;

use common::{free_addr, metric, scrape, wait_for, ChildGuard, TestEnv};
use prost::Message as _;
use tayga::config::AuthToken;

const OPS_TOKEN: &str = "ops-4f1c2e9a7b";
const WEB_TOKEN: &str = "web-only-8d3a61";

async fn post_with(addr: &str, token: Option<&str>, service: &str, trace: u8) -> (u16, String) {
    let body = traces(service, vec![span([trace; 16], 1)]).encode_to_vec();
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}/v1/traces"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&tayga::otlp::ExportTraceServiceRequest::decode(body.as_slice()).unwrap()).unwrap());
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
    let text = response.text().await.unwrap();
    if status == 401 {
        assert_eq!(challenge.as_deref(), Some("Bearer"), "a 401 names the scheme");
    }
    (status, text)
}

/// The Python SDK's exporters with `OTEL_EXPORTER_OTLP_HEADERS` (their standard setting):
/// whether every export succeeded.
async fn python_sdk(protocol: &str, endpoint: &str, service: &str, token: Option<&str>) -> bool {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/otel_export.py");
    let mut cmd = tokio::process::Command::new("python3");
    cmd.args([script, protocol, endpoint, service]);
    if let Some(token) = token {
        cmd.env("OTEL_EXPORTER_OTLP_HEADERS", format!("authorization=Bearer%20{token}"));
    }
    cmd.output().await.unwrap().status.success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_admit_their_clients_and_nothing_else_is_stored() {
    let mut env = TestEnv::new("ingest_auth");
    env.config.ingest.auth_tokens = vec![
        AuthToken::Any(OPS_TOKEN.into()),
        AuthToken::Bound { token: WEB_TOKEN.into(), services: vec!["web".into()] },
    ];
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "broker").await;
    let addr = running.http_addr.to_string();

    let (status, body) = post_with(&addr, None, "web", 1).await;
    assert_eq!(status, 401);
    assert!(body.contains("requires a token") && body.contains("Authorization: Bearer"), "{body}");
    assert_eq!(post_with(&addr, Some("not-a-token"), "web", 2).await.0, 401);
    assert_eq!(post_with(&addr, Some(OPS_TOKEN), "db", 3).await.0, 200, "an unbound token sends any service");
    assert_eq!(post_with(&addr, Some(WEB_TOKEN), "web", 4).await.0, 200);
    let (status, body) = post_with(&addr, Some(WEB_TOKEN), "db", 5).await;
    assert_eq!(status, 403);
    assert!(body.contains("service `db`"), "{body}");

    // The stock SDK, over HTTP and gRPC: with the token it gets in, without it it does not.
    let (http, grpc) = (format!("http://{}", running.http_addr), format!("http://{}", running.grpc_addr));
    assert!(python_sdk("http", &http, "sdk-http", Some(OPS_TOKEN)).await);
    assert!(python_sdk("grpc", &grpc, "sdk-grpc", Some(OPS_TOKEN)).await);
    assert!(!python_sdk("http", &http, "sdk-denied-http", None).await);
    assert!(!python_sdk("grpc", &grpc, "sdk-denied-grpc", None).await);
    assert!(!python_sdk("grpc", &grpc, "sdk-denied-grpc", Some("wrong")).await);

    // Only what an accepted token sent is on the topics.
    let names = env.config.names();
    let logs = common::read_topic(&env.config, &names.logs, 12, 2);
    let mut services: Vec<String> = logs.iter().map(common::key_of).collect();
    services.sort();
    assert_eq!(services, ["sdk-grpc", "sdk-http"], "no denied client's logs");
    let signals = common::read_topic(&env.config, &names.signals, 12, 2 + 2 * 4);
    assert_eq!(signals.len(), 2 + 2 * 4, "2 accepted posts, and 3 spans + 1 log per SDK client");

    let text = scrape(&addr).await.unwrap();
    assert!(!text.contains(OPS_TOKEN) && !text.contains(WEB_TOKEN));
    let count = |labels: &str| metric(&text, &format!("tayga_ingest_unauthorized_requests_total{{{labels}}}"));
    // The SDK exports each of its 3 spans and its log line by itself (simple processors),
    // and does not retry a 401 / UNAUTHENTICATED.
    assert_eq!(count(r#"transport="http",reason="missing""#), 1.0 + 4.0, "the raw post and the SDK's 4 exports");
    assert_eq!(count(r#"transport="http",reason="invalid""#), 1.0);
    assert_eq!(count(r#"transport="http",reason="service""#), 1.0);
    assert_eq!(count(r#"transport="grpc",reason="missing""#), 4.0, "{text}");
    assert_eq!(count(r#"transport="grpc",reason="invalid""#), 4.0, "{text}");
    shutdown.trigger();
    running.wait().await.unwrap();
}

/// The process, configured as an operator would: tokens from the environment and from a
/// file; `config show` shows neither, and the log never holds a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_from_the_environment_and_a_file_are_never_shown() {
    let env = TestEnv::new("ingest_auth_process");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(&file, format!("# one per line\n{WEB_TOKEN} web\n")).unwrap();
    let tokens_env = format!(r#"["{OPS_TOKEN}"]"#);
    let show = env
        .tayga()
        .args(["config", "show"])
        .env("TAYGA_INGEST_AUTH_TOKENS", &tokens_env)
        .env("TAYGA_INGEST_AUTH_TOKENS_FILE", &file)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "{}", String::from_utf8_lossy(&show.stderr));
    assert!(shown.contains("ingest.auth_tokens") && !shown.contains(OPS_TOKEN), "{shown}");

    let http = free_addr();
    let log = dir.path().join("ingest.log");
    let mut cmd = env.tayga();
    cmd.args(["serve", "ingest"])
        .env("TAYGA_INGEST_HTTP_ADDR", &http)
        .env("TAYGA_INGEST_GRPC_ADDR", free_addr())
        .env("TAYGA_INGEST_AUTH_TOKENS", &tokens_env)
        .env("TAYGA_INGEST_AUTH_TOKENS_FILE", &file)
        .stdout(std::fs::File::create(&log).unwrap());
    let child = ChildGuard::spawn(&mut cmd, "tayga serve ingest");
    wait_for("ingest to use the broker", Duration::from_secs(30), || async {
        let h: serde_json::Value = reqwest::get(format!("http://{http}/health")).await.ok()?.json().await.ok()?;
        (h["ingest"]["using"] == "broker").then_some(())
    })
    .await;
    assert_eq!(post_with(&http, Some(OPS_TOKEN), "db", 1).await.0, 200, "a token from the environment");
    assert_eq!(post_with(&http, Some(WEB_TOKEN), "web", 2).await.0, 200, "a token from the file");
    assert_eq!(post_with(&http, Some(WEB_TOKEN), "db", 3).await.0, 403, "bound to web in the file");
    assert_eq!(post_with(&http, Some("guess"), "web", 4).await.0, 401);
    wait_for("the refusals to be logged", Duration::from_secs(10), || async {
        let text = std::fs::read_to_string(&log).ok()?;
        text.contains("OTLP requests refused").then_some(())
    })
    .await;
    drop(child);
    let text = std::fs::read_to_string(&log).unwrap();
    for secret in [OPS_TOKEN, WEB_TOKEN, "guess"] {
        assert!(!text.contains(secret), "the log holds a token:\n{text}");
    }
}
