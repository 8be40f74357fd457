//! ClickHouse over HTTPS with a password, against a real 18.16 server of the test's own that
//! answers nothing else (`PrivateClickHouse::start_secured`): the `Store` and the commands
//! reach it with `[clickhouse] ssl_ca_file`; an untrusted certificate and a wrong password
//! each fail at once in one line that says which, never showing the password; the writer
//! daemon stores records through it.

use std::time::Duration;

use crate::common::{self, run, wait_for, PrivateClickHouse, TestEnv};
use crate::writer_support::{counts, producer, send_mix, Daemon};
use tayga::store::{read, SpanRow, StoreError};

const PASSWORD: &str = "tls-test-s3cret";

/// This test's environment pointed at `ch`, trusting its CA (read as the loader reads it).
fn secured_env(test: &str, ch: &PrivateClickHouse) -> TestEnv {
    let mut env = TestEnv::new(test);
    let clickhouse = &mut env.config.clickhouse;
    clickhouse.url = ch.url();
    clickhouse.password = PASSWORD.into();
    clickhouse.ssl_ca_file = ch.ca_file().display().to_string();
    clickhouse.ssl_ca = tayga::config::read_ssl_ca(&clickhouse.ssl_ca_file).expect("the server's CA file");
    env
}

fn span(trace_id: &str, span_id: &str, start_ns: u64) -> SpanRow {
    SpanRow {
        trace_id: trace_id.into(),
        span_id: span_id.into(),
        service: "checkout".into(),
        name: "GET /cart".into(),
        start_ns,
        end_ns: start_ns + 1_000_000,
        duration_ns: 1_000_000,
        ingest_ns: start_ns,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_migrates_inserts_and_reads_over_https_with_a_private_ca() {
    let ch = PrivateClickHouse::start_secured(PASSWORD);
    assert!(ch.url().starts_with("https://"), "{}", ch.url());
    let env = secured_env("tls_store", &ch);
    let store = env.migrated_store().await;
    let now = tayga::store::now_ns();
    store.insert(&[span("t1", "s1", now), span("t1", "s2", now + 1)]).await.unwrap();
    let trace = read::fetch_trace(&store, "t1").await.unwrap();
    assert_eq!(trace.iter().map(|s| s.span_id.as_str()).collect::<Vec<_>>(), ["s1", "s2"]);
    assert_eq!(read::count_spans_dedup(&store).await.unwrap(), 2);
    // The commands' `/ping` check goes through the same TLS setting.
    tayga::store::probe::reachable(&env.config.clickhouse, Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_and_a_wrong_password_each_fail_at_once_saying_which() {
    let ch = PrivateClickHouse::start_secured(PASSWORD);
    let env = secured_env("tls_refusals", &ch);

    let mut untrusted = env.config.clickhouse.clone();
    untrusted.ssl_ca_file = String::new();
    untrusted.ssl_ca = Vec::new();
    let err = tayga::store::migrate::migrate(&tayga::store::Store::new(&untrusted)).await.unwrap_err();
    assert!(matches!(err, StoreError::Untrusted { .. }), "{err:?}");
    assert!(err.needs_the_operator() && !err.is_unreachable());
    let line = err.to_string();
    assert!(
        line.starts_with(&format!("ClickHouse at {} presented a certificate this machine does not trust (", ch.url())),
        "{line}"
    );
    assert!(line.ends_with(tayga::store::UNTRUSTED_ADVICE), "{line}");

    let mut wrong = env.config.clickhouse.clone();
    wrong.password = "not-the-password".into();
    let err = tayga::store::migrate::migrate(&tayga::store::Store::new(&wrong)).await.unwrap_err();
    assert!(matches!(err, StoreError::Refused { code: 193, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("ClickHouse at {} refused the user `default`: wrong password (code 193)", ch.url())
    );

    // The commands say the same in one line, at once (not after `--timeout`), without the
    // password: the certificate at the `/ping` check, the password at the first query.
    let ca_file = env.config.clickhouse.ssl_ca_file.clone();
    let cases = [
        (vec![("TAYGA_CLICKHOUSE_PASSWORD", PASSWORD)], "presented a certificate this machine does not trust"),
        (
            vec![("TAYGA_CLICKHOUSE_PASSWORD", "not-the-password"), ("TAYGA_CLICKHOUSE_SSL_CA_FILE", ca_file.as_str())],
            "refused the user `default`: wrong password (code 193)",
        ),
    ];
    for (settings, says) in cases {
        let started = std::time::Instant::now();
        let (out, _, stderr) = run(env.tayga().args(["--timeout", "20s", "migrate"]).envs(settings));
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&format!("ClickHouse at {}", ch.url())) && stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("not-the-password") && !stderr.contains(PASSWORD), "{stderr}");
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}: {stderr}", started.elapsed());
    }

    // A daemon does not retry what only the operator can cure: it exits at once, saying so.
    let started = std::time::Instant::now();
    let (out, _, stderr) = run(env
        .tayga()
        .args(["serve", "writer"])
        .env("TAYGA_CLICKHOUSE_SSL_CA_FILE", &ca_file)
        .env("TAYGA_CLICKHOUSE_PASSWORD", "not-the-password")
        .env("TAYGA_WRITER_METRICS_ADDR", common::free_addr()));
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("refused the user `default`: wrong password (code 193)"), "{stderr}");
    assert!(!stderr.contains("not-the-password"), "{stderr}");
    assert!(started.elapsed() < tayga::daemon::START_LIMIT / 2, "took {:?}: {stderr}", started.elapsed());
}

#[test]
fn config_check_names_a_missing_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-ca.pem");
    let env = TestEnv::new("tls_check");
    let (out, stdout, stderr) =
        run(env.tayga().args(["config", "check"]).env("TAYGA_CLICKHOUSE_SSL_CA_FILE", &missing));
    assert!(!out.status.success(), "{stdout}{stderr}");
    let said = format!("{stdout}{stderr}");
    let lines: Vec<&str> = said.lines().filter(|l| l.contains("no-such-ca.pem")).collect();
    assert_eq!(lines.len(), 1, "{said}");
    assert!(
        lines[0].contains(&format!(
            "$TAYGA_CLICKHOUSE_SSL_CA_FILE: cannot read the ClickHouse CA file {}",
            missing.display()
        )),
        "{said}"
    );
}

/// `tayga migrate` and the real `tayga serve writer` process, configured only through the
/// environment, store the records of the topic in a ClickHouse reachable only over HTTPS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_and_the_writer_daemon_work_over_https() {
    let ch = PrivateClickHouse::start_secured(PASSWORD);
    let env = secured_env("tls_writer", &ch);
    let ca_file = env.config.clickhouse.ssl_ca_file.clone();
    let secured = [("TAYGA_CLICKHOUSE_SSL_CA_FILE", ca_file.as_str()), ("TAYGA_CLICKHOUSE_PASSWORD", PASSWORD)];
    let (out, stdout, stderr) = run(env.tayga().arg("migrate").envs(secured));
    assert!(out.status.success(), "{stdout}{stderr}");
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.expect("topics");
    let mut writer = Daemon::start(&env, &secured);
    let (spans, logs) = send_mix(&producer(&env), &env, 0, 20, 3, 2).await;
    let store = env.store();
    wait_for("the writer to store every span and log over HTTPS", Duration::from_secs(60), || async {
        let c = counts(&store).await?;
        (c.spans == spans && c.logs == logs).then_some(())
    })
    .await;
    writer.signal("-TERM");
    let status = writer.exit_within(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}\n{}", writer.log());
}

/// A daemon already running when its password stops working (rotated on the server) is
/// not stopped: the API's `/health` says `degraded`, with the refusal as its reason and
/// without the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_health_says_degraded_with_the_refusal_after_a_rotation() {
    let ch = PrivateClickHouse::start_secured(PASSWORD);
    let env = secured_env("tls_api_health", &ch);
    let addr = common::free_addr();
    let _api = common::ChildGuard::spawn(
        env.tayga()
            .args(["serve", "api"])
            .env("TAYGA_API_LISTEN_ADDR", &addr)
            .env("TAYGA_CLICKHOUSE_SSL_CA_FILE", &env.config.clickhouse.ssl_ca_file)
            .env("TAYGA_CLICKHOUSE_PASSWORD", PASSWORD)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
        "tayga serve api",
    );
    let http = reqwest::Client::new();
    let health = |want: &'static str| {
        let (http, addr) = (http.clone(), addr.clone());
        async move {
            let doc: serde_json::Value =
                http.get(format!("http://{addr}/health")).send().await.ok()?.json().await.ok()?;
            (doc["clickhouse"] == want).then_some(doc)
        }
    };
    wait_for("the API's /health to see ClickHouse up", Duration::from_secs(60), || health("up")).await;
    ch.set_password("rotated-elsewhere");
    let doc =
        wait_for("the API's /health to say why ClickHouse is down", Duration::from_secs(60), || health("down")).await;
    assert_eq!(doc["status"], "degraded", "{doc}");
    assert_eq!(
        doc["reasons"],
        serde_json::json!([format!(
            "ClickHouse at {} refused the user `default`: wrong password (code 193)",
            ch.url()
        )]),
        "{doc}"
    );
    assert!(!doc.to_string().contains(PASSWORD), "{doc}");
}
