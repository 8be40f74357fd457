//! The broker over TLS, against a real broker of the test's own that answers only TLS
//! (`scripts/services.sh` with TAYGA_BROKER_TLS_PORT: Tansu behind stunnel, a CA made at
//! start): every client reaches it with `[kafka] security_protocol = "ssl"` and
//! `ssl_ca_file` (librdkafka's admin, producer, consumers and lag reader; ingest's own
//! producer; the probe), and with a client certificate when the broker asks for one; a
//! certificate this machine does not trust is one line everywhere, and ingest's `/health`
//! says `degraded` with it. No broker that runs here authenticates with SASL
//! (docs/security.md), so no test here claims SASL.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use prost::Message as _;
use rdkafka::message::Message as _;
use tayga::bus::packed::PackedProducer;
use tayga::bus::probe::{reachable, Failure};
use tayga::bus::producer::OutRecord;
use tayga::bus::topics::{describe_topics, ensure_topics, TopicError};

use crate::common::{read_topic, run, wait_for, ChildGuard, TestEnv};
use crate::ingest::{span, start_ingest, traces, wait_until_using};
use crate::writer_support::{counts, producer, send_mix, topic_records, Daemon};

/// A broker of this test's own that answers only TLS on `port` (Tansu on `port + 1` behind
/// stunnel); stopped when dropped.
struct TlsBroker {
    home: tempfile::TempDir,
    port: u16,
    client_certificates: bool,
}

impl TlsBroker {
    /// `client_certificates`: the broker refuses a client without a certificate of its CA.
    fn start(client_certificates: bool) -> TlsBroker {
        let broker = TlsBroker { home: tempfile::tempdir().unwrap(), port: ports(), client_certificates };
        broker.services("start-broker");
        broker
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn tls_file(&self, name: &str) -> PathBuf {
        self.home.path().join("broker-tls/tls").join(name)
    }

    /// `env` pointed at this broker over TLS, trusting its CA (read as the loader reads it).
    fn configure(&self, env: &mut TestEnv) {
        let kafka = &mut env.config.kafka;
        kafka.brokers = self.address();
        kafka.security_protocol = "ssl".into();
        kafka.ssl_ca_file = self.tls_file("ca.pem").display().to_string();
        kafka.ssl_ca = tayga::config::read_ca_file(&kafka.ssl_ca_file, "broker").expect("the broker's CA file");
    }

    /// The same settings as a process's environment.
    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("TAYGA_KAFKA_SECURITY_PROTOCOL", "ssl".into()),
            ("TAYGA_KAFKA_SSL_CA_FILE", self.tls_file("ca.pem").display().to_string()),
        ]
    }

    /// A new CA and certificate in place of the old ones, as a broker's operator might
    /// roll them: stunnel restarted on them, the broker behind it untouched.
    fn replace_certificate(&self) {
        let pid = std::fs::read_to_string(self.home.path().join("broker-tls/stunnel.pid")).unwrap();
        let status = Command::new("kill").arg(pid.trim()).status().unwrap();
        assert!(status.success(), "stopping stunnel");
        self.services("start-broker");
    }

    fn services(&self, what: &str) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/services.sh");
        let mut cmd = Command::new(script);
        cmd.arg(what).env("TAYGA_HOME", self.home.path()).env("TAYGA_BROKER_TLS_PORT", self.port.to_string());
        if self.client_certificates {
            cmd.env("TAYGA_BROKER_CLIENT_CA", "1");
        }
        let out = cmd.output().expect("scripts/services.sh runs");
        assert!(out.status.success(), "services.sh {what} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for TlsBroker {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.services("stop-broker")));
    }
}

/// A TLS port with its plaintext port after it, both free, below Linux's ephemeral range (as
/// the private ClickHouse's ports are: an OS-assigned port can be reused at once).
fn ports() -> u16 {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let seed = std::process::id() as u64
        ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    (0..500u64)
        .map(|attempt| 20_000 + ((seed.wrapping_mul(6364136223846793005).wrapping_add(attempt * 7919)) % 12_000) as u16)
        .find(|&port| free(port) && free(port + 1))
        .expect("two free ports between 20000 and 32000")
}

fn records<'a>(topic: &'a str, keys: &'a [String]) -> Vec<OutRecord<'a>> {
    keys.iter().map(|k| OutRecord { topic, key: k, value: k.as_bytes().to_vec().into(), headers: &[] }).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_reaches_the_broker_over_tls_with_a_private_ca() {
    let broker = TlsBroker::start(false);
    let mut env = TestEnv::new("broker_tls_clients");
    broker.configure(&mut env);
    let names = env.config.names();

    reachable(&env.config.kafka, Duration::from_secs(10)).await.expect("the probe's handshake");
    ensure_topics(&env.config.kafka, &names).await.expect("librdkafka's admin over TLS");

    // Ingest's own producer: its session, metadata and produce requests over TLS.
    let producer_of_ingest = PackedProducer::new(&env.config.kafka, Default::default()).unwrap();
    let keys: Vec<String> = (0..40).map(|i| format!("{:032x}", i * 7919)).collect();
    producer_of_ingest.publish_all(records(&names.logs, &keys)).await.expect("acknowledged over TLS");
    let (config, topic) = (env.config.clone(), names.logs.clone());
    let read = tokio::task::spawn_blocking(move || read_topic(&config, &topic, 12, 40)).await.unwrap();
    let mut read: Vec<String> = read.iter().map(crate::common::key_of).collect();
    read.sort();
    let mut expected = keys.clone();
    expected.sort();
    assert_eq!(read, expected, "every record once, read by a librdkafka consumer over TLS");

    // librdkafka's producer, and the real writer process configured only through the
    // environment: its consumer group over TLS, into ClickHouse.
    let store = env.migrated_store().await;
    let (spans, logs) = send_mix(&producer(&env), &env, 0, 10, 3, 2).await;
    let settings = broker.settings();
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut writer = Daemon::start(&env, &settings);
    wait_for("the writer to store every span and log read over TLS", Duration::from_secs(60), || async {
        let c = counts(&store).await?;
        (c.spans == spans && c.logs == logs).then_some(())
    })
    .await;
    // The lag reader (`topics list`'s) over TLS sees the writer's group caught up.
    let lagging = wait_for("the writer's group to show no lag", Duration::from_secs(30), || async {
        let topics = describe_topics(&env.config.kafka, &names).await.ok()?;
        let signals = topics.into_iter().find(|t| t.topic == names.signals)?;
        let writer = signals.groups.into_iter().find(|g| g.group.ends_with("writer"))?;
        (writer.lag == 0).then_some(writer)
    })
    .await;
    assert!(lagging.committed.is_some(), "{lagging:?}");
    writer.signal("-TERM");
    let status = writer.exit_within(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}\n{}", writer.log());

    // Ingest itself: its broker path over TLS (probe, topics, its own producer).
    let before = topic_records(&env.config).await as usize;
    let mut config = env.config.clone();
    let (running, shutdown) = start_ingest(&mut config).await;
    wait_until_using(&running, "broker").await;
    let body = traces("tls", vec![span([42; 16], 1), span([42; 16], 2)]).encode_to_vec();
    let response = crate::ingest::post(&running, "/v1/traces", "application/x-protobuf", body).await;
    assert_eq!(response.status(), 200);
    let (config, topic) = (env.config.clone(), names.signals.clone());
    let read = tokio::task::spawn_blocking(move || read_topic(&config, &topic, 12, before + 1)).await.unwrap();
    let published: Vec<_> = read.iter().filter(|m| crate::common::key_of(m) == "2a".repeat(16)).collect();
    assert_eq!(published.len(), 1, "the trace published once by ingest over TLS");
    let request = tayga::otlp::ExportTraceServiceRequest::decode(published[0].payload().unwrap()).unwrap();
    assert_eq!(request.resource_spans[0].scope_spans[0].spans.len(), 2);
    shutdown.trigger();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_asks_for_a_client_certificate_gets_the_configured_one() {
    let broker = TlsBroker::start(true);
    let mut env = TestEnv::new("broker_mtls");
    broker.configure(&mut env);

    // Without a certificate the broker refuses the connection, and the probe says so.
    let err = reachable(&env.config.kafka, Duration::from_secs(10)).await.unwrap_err();
    let Failure::Refused(line) = err else { panic!("{err:?}") };
    assert!(
        line.starts_with(&format!("the broker at {} refused this client's certificate (", broker.address())),
        "{line}"
    );
    assert!(line.ends_with(tayga::bus::security::CLIENT_CERTIFICATE_ADVICE), "{line}");

    let kafka = &mut env.config.kafka;
    kafka.ssl_certificate_file = broker.tls_file("client.pem").display().to_string();
    kafka.ssl_key_file = broker.tls_file("client.key").display().to_string();
    let loaded = tayga::config::Loaded::from_parts(
        None,
        &[
            ("TAYGA_KAFKA_SECURITY_PROTOCOL".to_string(), "ssl".to_string()),
            ("TAYGA_KAFKA_SSL_CERTIFICATE_FILE".to_string(), kafka.ssl_certificate_file.clone()),
            ("TAYGA_KAFKA_SSL_KEY_FILE".to_string(), kafka.ssl_key_file.clone()),
        ]
        .into_iter()
        .collect(),
    )
    .expect("the client certificate and key load");
    kafka.ssl_client = loaded.config.kafka.ssl_client;
    assert!(kafka.ssl_client.is_some());
    // A key of another certificate is one line when the configuration loads.
    let other_key = broker.tls_file("server.key").display().to_string();
    let err = tayga::config::Loaded::from_parts(
        None,
        &[
            ("TAYGA_KAFKA_SECURITY_PROTOCOL".to_string(), "ssl".to_string()),
            ("TAYGA_KAFKA_SSL_CERTIFICATE_FILE".to_string(), kafka.ssl_certificate_file.clone()),
            ("TAYGA_KAFKA_SSL_KEY_FILE".to_string(), other_key.clone()),
        ]
        .into_iter()
        .collect(),
    )
    .unwrap_err();
    let wanted = format!(
        "$TAYGA_KAFKA_SSL_KEY_FILE: the broker client key file {other_key} cannot sign for the certificate of {}: ",
        kafka.ssl_certificate_file
    );
    assert!(err.problems.len() == 1 && err.problems[0].starts_with(&wanted), "{err}");

    reachable(&env.config.kafka, Duration::from_secs(10)).await.expect("the handshake with a client certificate");
    let names = env.config.names();
    ensure_topics(&env.config.kafka, &names).await.expect("librdkafka with the client certificate");
    let producer_of_ingest = PackedProducer::new(&env.config.kafka, Default::default()).unwrap();
    let keys = vec!["a".to_string(), "b".to_string()];
    producer_of_ingest.publish_all(records(&names.stories, &keys)).await.expect("ingest's producer with it");
    let (config, topic) = (env.config.clone(), names.stories.clone());
    let read = tokio::task::spawn_blocking(move || read_topic(&config, &topic, 3, 2)).await.unwrap();
    assert_eq!(read.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_one_line_at_every_client_and_on_ingest_health() {
    let broker = TlsBroker::start(false);
    let mut env = TestEnv::new("broker_untrusted");
    broker.configure(&mut env);
    env.config.kafka.ssl_ca_file = String::new();
    env.config.kafka.ssl_ca = Vec::new();
    let line_starts =
        format!("the broker at {} presented a certificate this machine does not trust (", broker.address());
    let advice = tayga::bus::security::UNTRUSTED_ADVICE;

    let err = reachable(&env.config.kafka, Duration::from_secs(10)).await.unwrap_err();
    let Failure::Refused(line) = err else { panic!("{err:?}") };
    assert!(line.starts_with(&line_starts) && line.ends_with(advice), "{line}");
    // librdkafka's admin fails as a broker that does not answer; the probe says why.
    let err = ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap_err();
    assert!(matches!(&err, TopicError::Refused(l) if *l == line), "{err:?}");
    assert!(err.needs_the_operator());

    // A command says it in one line, at once.
    let started = std::time::Instant::now();
    let (out, _, stderr) =
        run(env.tayga().args(["--timeout", "20s", "topics", "create"]).env("TAYGA_KAFKA_SECURITY_PROTOCOL", "ssl"));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&line_starts) && stderr.trim_end().ends_with(advice), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}: {stderr}", started.elapsed());

    // A consuming daemon does not retry it: it stops at start, saying so.
    let started = std::time::Instant::now();
    let (out, _, stderr) = run(env
        .tayga()
        .args(["serve", "writer"])
        .env("TAYGA_KAFKA_SECURITY_PROTOCOL", "ssl")
        .env("TAYGA_WRITER_METRICS_ADDR", crate::common::free_addr()));
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&line_starts), "{stderr}");
    assert!(started.elapsed() < tayga::daemon::START_LIMIT / 2, "took {:?}: {stderr}", started.elapsed());

    // Ingest keeps serving (straight to ClickHouse) and its `/health` says why the broker
    // path is out.
    env.migrated_store().await;
    let http = crate::common::free_addr();
    let _ingest = ChildGuard::spawn(
        env.tayga()
            .args(["serve", "ingest"])
            .env("TAYGA_KAFKA_SECURITY_PROTOCOL", "ssl")
            .env("TAYGA_INGEST_HTTP_ADDR", &http)
            .env("TAYGA_INGEST_GRPC_ADDR", crate::common::free_addr())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
        "tayga serve ingest",
    );
    let doc = wait_for("ingest's /health to say why the broker is out", Duration::from_secs(60), || async {
        let doc: serde_json::Value = reqwest::get(format!("http://{http}/health")).await.ok()?.json().await.ok()?;
        (doc["status"] == "degraded" && doc["broker"] == "down").then_some(doc)
    })
    .await;
    assert_eq!(doc["reasons"], serde_json::json!([line]), "{doc}");
}

/// A writer already running when the broker's certificate changes to one this machine does
/// not trust is not stopped: its `/health` says `degraded`, with the refusal as its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_writer_says_degraded_with_the_reason_when_the_certificate_is_no_longer_trusted() {
    let broker = TlsBroker::start(false);
    let mut env = TestEnv::new("broker_tls_writer_health");
    broker.configure(&mut env);
    env.migrated_store().await;
    let settings = broker.settings();
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let writer = Daemon::start(&env, &settings);
    let health = |want: &'static str| {
        let url = format!("http://{}/health", writer.metrics_addr);
        async move {
            let doc: serde_json::Value = reqwest::get(url).await.ok()?.json().await.ok()?;
            (doc["status"] == want).then_some(doc)
        }
    };
    wait_for("the writer's /health to say ok", Duration::from_secs(60), || health("ok")).await;
    broker.replace_certificate();
    let doc =
        wait_for("the writer's /health to say why the broker is out", Duration::from_secs(60), || health("degraded"))
            .await;
    // The new CA has the old one's name and another key: its certificate's signature fails.
    let line = format!(
        "the broker at {} presented a certificate this machine does not trust (invalid peer certificate: BadSignature): {}",
        broker.address(),
        tayga::bus::security::UNTRUSTED_ADVICE
    );
    assert_eq!(doc["reasons"], serde_json::json!([line]), "{doc}");
    assert_eq!(doc["broker"], "down", "{doc}");
}

#[test]
fn config_check_says_what_is_wrong_with_the_kafka_security_settings_in_one_line_each() {
    let env = TestEnv::new("broker_tls_check");
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[("TAYGA_KAFKA_SECURITY_PROTOCOL", "tls")],
            "$TAYGA_KAFKA_SECURITY_PROTOCOL: kafka.security_protocol must be one of plaintext, ssl, sasl_plaintext, sasl_ssl, is `tls`",
        ),
        (
            &[("TAYGA_KAFKA_SECURITY_PROTOCOL", "SASL_SSL"), ("TAYGA_KAFKA_SASL_USERNAME", "tayga"), ("TAYGA_KAFKA_SASL_PASSWORD", "s3cret")],
            "kafka.sasl_mechanism must be set with security_protocol sasl_ssl: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        ),
        (
            &[("TAYGA_KAFKA_SASL_PASSWORD", "s3cret")],
            "$TAYGA_KAFKA_SASL_PASSWORD: kafka.sasl_password is set but security_protocol plaintext sends no credentials: use sasl_plaintext or sasl_ssl",
        ),
        (
            &[("TAYGA_KAFKA_SECURITY_PROTOCOL", "sasl_plaintext"), ("TAYGA_KAFKA_SSL_CA_FILE", "/etc/ca.pem"), ("TAYGA_KAFKA_SASL_MECHANISM", "PLAIN"), ("TAYGA_KAFKA_SASL_USERNAME", "u"), ("TAYGA_KAFKA_SASL_PASSWORD", "p")],
            "$TAYGA_KAFKA_SSL_CA_FILE: kafka.ssl_ca_file is set but security_protocol sasl_plaintext is not TLS: use sasl_ssl",
        ),
    ];
    for (settings, says) in cases {
        let (out, stdout, stderr) = run(env.tayga().args(["config", "check"]).envs(settings.iter().copied()));
        let said = format!("{stdout}{stderr}");
        assert!(!out.status.success(), "{said}");
        assert!(said.lines().any(|l| l.ends_with(says)), "wanted `{says}` in:\n{said}");
        assert!(!said.contains("s3cret"), "{said}");
    }
}
