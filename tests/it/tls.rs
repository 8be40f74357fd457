//! TLS on the servers Tayga listens with: the OTLP receivers (the stock Python SDK over
//! HTTPS and gRPC with a CA file, gRPC's UNAUTHENTICATED without a token) and the API
//! (`tayga serve api` as a process, its session cookie `Secure`), each serving a renewed
//! certificate once its files change, or (the API) on SIGHUP, without a restart. Certificates are made here with
//! Debian's `openssl`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tayga::config::AuthToken;

use crate::common::{free_port, metric, run, wait_for, ChildGuard, TestEnv};
use crate::ingest::start_ingest;

const TOKEN: &str = "tls-ops-51c0ffee";

/// A CA made for the test, which issues server certificates for 127.0.0.1.
pub struct TestCa {
    dir: tempfile::TempDir,
    serial: std::cell::Cell<u32>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa { dir, serial: std::cell::Cell::new(0) };
        ca.new_key(&[
            "-x509",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=Tayga test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        ca
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A new certificate and key for 127.0.0.1 and localhost (a new serial each time),
    /// written over `cert` and `key`: the file change a renewal makes.
    pub fn issue(&self, cert: &Path, key: &Path) {
        let n = self.serial.get() + 1;
        self.serial.set(n);
        let (csr, ext, fresh) = (format!("s{n}.csr"), format!("s{n}.ext"), format!("s{n}.pem"));
        std::fs::write(
            self.dir.path().join(&ext),
            // What Python's strict verification (3.13) asks of a leaf: its key identifiers too.
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n\
             subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n",
        )
        .unwrap();
        let new_key = format!("s{n}.key");
        self.new_key(&["-keyout", &new_key, "-out", &csr, "-subj", "/CN=127.0.0.1"]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            &(1000 + n).to_string(),
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &fresh,
        ]);
        // The key first, then the certificate: a reload between the two sees a pair that
        // does not match, which is refused and tried again at the next change. Each file
        // padded to one size (PEM allows text around its blocks), so a renewal can be made
        // that only SIGHUP reveals (`renew_unseen`).
        for (from, to, size) in [(new_key, key, 1024), (fresh, cert, 2048)] {
            let mut pem = std::fs::read(self.dir.path().join(from)).unwrap();
            assert!(pem.len() <= size);
            pem.resize(size, b'\n');
            std::fs::write(to, pem).unwrap();
        }
    }

    /// A renewal the file watch cannot see: new files of the same sizes, given the old
    /// modification times before they are renamed over the old ones, so no look at the
    /// files ever sees a change.
    pub fn renew_unseen(&self, cert: &Path, key: &Path) {
        let staged = |f: &Path| PathBuf::from(format!("{}.staged", f.display()));
        self.issue(&staged(cert), &staged(key));
        for file in [cert, key] {
            let time = std::fs::metadata(file).unwrap().modified().unwrap();
            std::fs::File::options().write(true).open(staged(file)).unwrap().set_modified(time).unwrap();
            std::fs::rename(staged(file), file).unwrap();
        }
    }

    /// `openssl req` with a new P-256 key, unencrypted.
    fn new_key(&self, args: &[&str]) {
        let mut all = vec!["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        all.extend_from_slice(args);
        self.openssl(&all);
    }

    fn openssl(&self, args: &[&str]) {
        let (out, _, stderr) = run(Command::new("openssl").args(args).current_dir(self.dir.path()));
        assert!(out.status.success(), "openssl {args:?}: {stderr}");
    }
}

/// The DER of the certificate in a PEM file.
fn der_of(cert: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_file(cert).unwrap().to_vec()
}

/// A client that trusts only `ca` and keeps the server's certificate of each answer.
fn https_client(ca: &Path) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .tls_built_in_root_certs(false)
        .tls_info(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// Waits until a new connection to `url` is served `cert`'s certificate.
async fn wait_served(url: &str, ca: &Path, cert: &Path) {
    let want = der_of(cert);
    wait_for("the renewed certificate to be served", Duration::from_secs(20), || async {
        // A fresh client, so a new connection and a new handshake.
        let response = https_client(ca).get(url).send().await.ok()?;
        let info = response.extensions().get::<reqwest::tls::TlsInfo>()?;
        (info.peer_certificate()? == want.as_slice()).then_some(())
    })
    .await;
}

/// The stock SDK (tests/sdk/otel_export.py) trusting `ca` (`OTEL_EXPORTER_OTLP_CERTIFICATE`,
/// its standard setting): whether every export succeeded.
async fn python_sdk(protocol: &str, endpoint: &str, service: &str, ca: &Path, token: Option<&str>) -> bool {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/otel_export.py");
    let mut cmd = tokio::process::Command::new("python3");
    cmd.args([script, protocol, endpoint, service]).env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca);
    // `requests` lets these replace the exporter's CA file (it sets the file on its session,
    // and a request's unset `verify` is filled from the environment first).
    cmd.env_remove("REQUESTS_CA_BUNDLE").env_remove("CURL_CA_BUNDLE");
    if let Some(token) = token {
        cmd.env("OTEL_EXPORTER_OTLP_HEADERS", format!("authorization=Bearer%20{token}"));
    }
    let output = cmd.output().await.unwrap();
    if !output.status.success() {
        eprintln!("the SDK ({protocol}, {service}):\n{}", String::from_utf8_lossy(&output.stderr));
    }
    output.status.success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_otlp_receivers_serve_tls_to_the_sdk_and_a_renewed_certificate_without_a_restart() {
    let ca = TestCa::new();
    let files = tempfile::tempdir().unwrap();
    let (cert, key) = (files.path().join("ingest.pem"), files.path().join("ingest.key"));
    ca.issue(&cert, &key);
    let mut env = TestEnv::new("ingest_tls");
    env.config.ingest.auth_tokens = vec![AuthToken::Any(TOKEN.into())];
    env.config.ingest.tls_cert_file = cert.to_str().unwrap().into();
    env.config.ingest.tls_key_file = key.to_str().unwrap().into();
    env.config.ingest.metrics_addr = "127.0.0.1:0".into();
    let (running, shutdown) = start_ingest(&mut env.config).await;
    let (http, grpc) = (format!("https://{}", running.http_addr), format!("https://{}", running.grpc_addr));
    let client = https_client(&ca.ca_file());
    let health = format!("{http}/health");
    wait_for("ingest to use the broker", Duration::from_secs(20), || async {
        let body: serde_json::Value = client.get(&health).send().await.ok()?.json().await.ok()?;
        (body["ingest"]["using"] == "broker").then_some(())
    })
    .await;

    // Plain HTTP to a TLS port is not served.
    let plain = reqwest::Client::new().get(format!("http://{}/health", running.http_addr)).send().await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success(), "plain HTTP on the TLS listener");

    assert!(python_sdk("http", &http, "tls-http", &ca.ca_file(), Some(TOKEN)).await, "the SDK over HTTPS");
    assert!(python_sdk("grpc", &grpc, "tls-grpc", &ca.ca_file(), Some(TOKEN)).await, "the SDK over gRPC with TLS");
    // Without the token, gRPC under TLS is still UNAUTHENTICATED (judged, not a TLS failure).
    assert!(!python_sdk("grpc", &grpc, "tls-denied", &ca.ca_file(), None).await);
    let text = client.get(format!("{http}/metrics")).send().await.unwrap().text().await.unwrap();
    let refused = metric(&text, r#"tayga_ingest_unauthorized_requests_total{transport="grpc",reason="missing"}"#);
    assert_eq!(refused, 4.0, "the SDK's 4 exports were refused for their token: {text}");
    // The plain-HTTP request above never finished a handshake: counted.
    let failed = metric(&text, r#"tayga_ingest_tls_handshake_failures_total{reason="error"}"#);
    assert!(failed >= 1.0, "the plain request's handshake is counted: {text}");
    // The same metrics in plain HTTP on ingest's own metrics listener, where the recorder scrapes.
    let own = format!("http://{}/metrics", running.metrics_addr.expect("a metrics listener"));
    let plain_text = reqwest::get(&own).await.unwrap().text().await.unwrap();
    assert!(plain_text.contains("tayga_ingest_tls_handshake_failures_total"), "{plain_text}");

    // A renewal: new files, the same paths. The receivers serve the new certificate, and the
    // SDK still sends, over both transports.
    let before = der_of(&cert);
    ca.issue(&cert, &key);
    assert_ne!(der_of(&cert), before);
    wait_served(&health, &ca.ca_file(), &cert).await;
    assert!(python_sdk("http", &http, "tls-http-renewed", &ca.ca_file(), Some(TOKEN)).await);
    assert!(python_sdk("grpc", &grpc, "tls-grpc-renewed", &ca.ca_file(), Some(TOKEN)).await);

    // Only what the SDK sent with its token is on the topics: 2 clients × 2 rounds.
    let names = env.config.names();
    let config = env.config.clone();
    let logs =
        tokio::task::spawn_blocking(move || crate::common::read_topic(&config, &names.logs, 12, 4)).await.unwrap();
    let mut services: Vec<String> = logs.iter().map(crate::common::key_of).collect();
    services.sort();
    assert_eq!(services, ["tls-grpc", "tls-grpc-renewed", "tls-http", "tls-http-renewed"]);
    shutdown.trigger();
    running.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_serves_https_with_secure_sessions_and_a_renewed_certificate() {
    let ca = TestCa::new();
    let files = tempfile::tempdir().unwrap();
    let (cert, key) = (files.path().join("api.pem"), files.path().join("api.key"));
    ca.issue(&cert, &key);
    let operators = files.path().join("operators");
    std::fs::write(&operators, "# the on-call rota\nop-7e11a\n").unwrap();
    let env = TestEnv::new("api_tls");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = env.tayga();
    cmd.args(["serve", "api"])
        .env("TAYGA_API_LISTEN_ADDR", &addr)
        .env("TAYGA_API_TLS_CERT_FILE", &cert)
        .env("TAYGA_API_TLS_KEY_FILE", &key)
        .env("TAYGA_API_VIEWER_TOKENS", r#"["view-3b9d"]"#)
        .env("TAYGA_API_OPERATOR_TOKENS_FILE", &operators);
    let mut api = ChildGuard::spawn_logged(&mut cmd, "tayga serve api");
    let base = format!("https://{addr}");
    let client = https_client(&ca.ca_file());
    wait_for("the API to answer over HTTPS", Duration::from_secs(60), || async {
        let r = client.get(format!("{base}/health")).bearer_auth("view-3b9d").send().await.ok()?;
        (r.status() == 200).then_some(())
    })
    .await;
    let bare = client.get(format!("{base}/api/v1/services")).send().await.unwrap();
    assert_eq!(bare.status(), 401);
    let viewer = client.post(format!("{base}/api/v1/deliveries/00000000000000ab/retry")).bearer_auth("view-3b9d");
    let viewer = viewer.send().await.unwrap();
    assert_eq!(viewer.status(), 403, "a viewer from the environment may not retry");
    let operator = client.post(format!("{base}/api/v1/deliveries/00000000000000ab/retry")).bearer_auth("op-7e11a");
    assert_eq!(operator.send().await.unwrap().status(), 404, "an operator from the file gets past the roles");

    let signed_in = client.post(format!("{base}/login")).form(&[("token", "op-7e11a"), ("next", "/")]).send().await;
    let signed_in = signed_in.unwrap();
    assert_eq!(signed_in.status(), 303);
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap().to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Secure"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let page = client.get(format!("{base}/")).header("cookie", cookie.split(';').next().unwrap()).send().await;
    let page = page.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers().contains_key("content-security-policy"));
    assert!(page.text().await.unwrap().contains(r#"data-role="operator""#));

    let before = der_of(&cert);
    ca.issue(&cert, &key);
    assert_ne!(der_of(&cert), before);
    wait_served(&format!("{base}/login"), &ca.ca_file(), &cert).await;

    // SIGHUP reloads too: a renewal the watch cannot see (same sizes, same times) is served
    // once the process is told.
    let before = der_of(&cert);
    ca.renew_unseen(&cert, &key);
    assert_ne!(der_of(&cert), before);
    let (out, _, stderr) = run(Command::new("kill").args(["-HUP", &api.id().to_string()]));
    assert!(out.status.success(), "{stderr}");
    wait_served(&format!("{base}/login"), &ca.ca_file(), &cert).await;
    assert!(api.try_wait().is_none(), "SIGHUP does not stop the API");
}

/// compose.hardened.yaml: ingest and the API get TLS from the mounted folder and their
/// tokens from secret files (never in the environment), each named secret is declared,
/// and the health checks speak TLS.
#[test]
fn the_hardened_compose_file_gives_ingest_and_the_api_tls_and_tokens_from_secret_files() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/compose.hardened.yaml")).unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/compose.yaml")).unwrap();
    let base: serde_yaml::Value = serde_yaml::from_str(&base).unwrap();
    let declared = doc["secrets"].as_mapping().unwrap();
    for (service, keys) in [
        ("ingest", &["TAYGA_INGEST_AUTH_TOKENS_FILE", "TAYGA_INGEST_TLS_CERT_FILE", "TAYGA_INGEST_TLS_KEY_FILE"][..]),
        (
            "api",
            &[
                "TAYGA_API_OPERATOR_TOKENS_FILE",
                "TAYGA_API_VIEWER_TOKENS_FILE",
                "TAYGA_API_TLS_CERT_FILE",
                "TAYGA_API_TLS_KEY_FILE",
            ][..],
        ),
    ] {
        let s = &doc["services"][service];
        let env = s["environment"].as_mapping().unwrap();
        for key in keys {
            let value = env.get(*key).and_then(|v| v.as_str()).unwrap_or_else(|| panic!("{service}: no {key}"));
            let from_mount = value.starts_with("/etc/tayga/tls/") || value.starts_with("/run/secrets/");
            assert!(from_mount, "{service}: {key} = {value}");
            if let Some(secret) = value.strip_prefix("/run/secrets/") {
                assert!(declared.contains_key(secret), "{service}: the secret {secret} is not declared");
                let listed = s["secrets"].as_sequence().unwrap();
                assert!(listed.iter().any(|v| v.as_str() == Some(secret)), "{service} does not mount {secret}");
            }
        }
        for (key, _) in env {
            let key = key.as_str().unwrap();
            // Addresses are no secret; everything else comes from a file.
            let address = ["TAYGA_INGEST_METRICS_ADDR", "TAYGA_API_INGEST_METRICS"].contains(&key);
            assert!(key.ends_with("_FILE") || address, "{service}: {key} puts a value in the environment");
        }
        // The recorder scrapes ingest's plain metrics listener, which is published nowhere.
        let recorder_target = doc["services"]["api"]["environment"]["TAYGA_API_INGEST_METRICS"].as_str();
        let ingest_metrics = doc["services"]["ingest"]["environment"]["TAYGA_INGEST_METRICS_ADDR"].as_str();
        assert_eq!((recorder_target, ingest_metrics), (Some("ingest:9400"), Some("0.0.0.0:9400")));
        let listed = s["secrets"].as_sequence().unwrap();
        assert!(listed.iter().any(|v| v.as_str() == Some("clickhouse_password")), "{service} keeps its password");
        assert_eq!(s["volumes"][0].as_str(), Some("./secrets/tls:/etc/tayga/tls:ro"), "{service}");
        assert!(format!("{:?}", s["healthcheck"]["test"]).contains("https://127.0.0.1:"), "{service}");
    }
    let api_ports = base["services"]["api"]["ports"].as_sequence().unwrap();
    assert!(api_ports.iter().all(|p| p.as_str().unwrap().starts_with("127.0.0.1:")), "the API on loopback only");
}

/// `config check` (and every daemon's start, which loads the same way) reads a listener's
/// certificate and key: a missing file and a key that is not the certificate's are each one
/// line naming the file and the variable that set it; a matching pair is fine.
#[test]
fn config_check_reads_each_listeners_certificate_and_key() {
    let env = TestEnv::new("tls_check");
    let ca = TestCa::new();
    let dir = tempfile::tempdir().unwrap();
    let (a_cert, a_key, b_key) = (dir.path().join("a.pem"), dir.path().join("a.key"), dir.path().join("b.key"));
    ca.issue(&a_cert, &a_key);
    ca.issue(&dir.path().join("b.pem"), &b_key);
    let check = |cert: &Path, key: &Path| {
        let mut cmd = env.tayga();
        cmd.args(["config", "check"]).env("TAYGA_INGEST_TLS_CERT_FILE", cert).env("TAYGA_INGEST_TLS_KEY_FILE", key);
        run(&mut cmd)
    };
    let (out, stdout, stderr) = check(&a_cert, &a_key);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.starts_with("config ok"), "{stdout}");

    let (out, _, stderr) = check(&a_cert, &b_key);
    assert_eq!(out.status.code(), Some(1));
    let key = b_key.display().to_string();
    assert!(
        stderr.contains("$TAYGA_INGEST_TLS_KEY_FILE") && stderr.contains(&format!("the key in {key} does not go with")),
        "{stderr}"
    );

    let missing = dir.path().join("gone.pem");
    let (out, _, stderr) = check(&missing, &a_key);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("$TAYGA_INGEST_TLS_CERT_FILE")
            && stderr.contains(&format!("cannot read the certificate file {}", missing.display())),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
}
