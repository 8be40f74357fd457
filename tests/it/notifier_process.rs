//! The real `tayga serve notifier` process: SIGKILL while a target is failing and restart
//! (the pending row keeps its attempt count, nothing is sent twice), and SIGTERM (an
//! in-flight attempt finishes and its row is written, the process exits 0 in bounds; a
//! backoff wait is not waited out).

use crate::common;
use crate::notifier_support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{wait_for, ChildGuard, TestEnv};
use notifier_support::*;
use tayga::wire::alert::AlertKind;

/// A running `tayga serve notifier`, logging into a file.
struct Daemon {
    child: ChildGuard,
    log: PathBuf,
    metrics: String,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(env: &TestEnv, hook: &Hook, settings: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("notifier.log");
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let metrics = format!("127.0.0.1:{port}");
        let mut cmd = env.tayga();
        cmd.args(["serve", "notifier"])
            .env("TAYGA_LOG", "info,tayga=debug")
            .env("TAYGA_NOTIFIER_TARGETS", format!(r#"[{{name="hook", url="{}"}}]"#, hook.url))
            .env("TAYGA_NOTIFIER_METRICS_ADDR", &metrics)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
            .stdin(Stdio::null());
        for (key, value) in settings {
            cmd.env(key, value);
        }
        let child = ChildGuard::spawn(&mut cmd, "tayga serve notifier");
        Daemon { child, log, metrics, _dir: dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill").args([name, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, at most `limit`.
    async fn exit_within(&mut self, limit: Duration) -> ExitStatus {
        let child = &mut self.child;
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait() {
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "the notifier did not exit within {limit:?}; log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Topics exist before the test publishes (the daemon would create them too).
async fn topics(env: &TestEnv) {
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    env.migrated_store().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_killed_notifier_resumes_the_pending_attempt_count() {
    let env = TestEnv::new("notify_kill");
    topics(&env).await;
    let store = env.store();
    let hook = Hook::always(503).await;
    let settings = [("TAYGA_NOTIFIER_BACKOFF_BASE_SECS", "1"), ("TAYGA_NOTIFIER_BACKOFF_CAP_SECS", "1")];
    let alert = alert("notify_kill", 1, AlertKind::Spike);
    publish(&env.config, &[&alert]).await;

    let mut first = Daemon::start(&env, &hook, &settings);
    let pending = wait_for("two failed attempts recorded", Duration::from_secs(60), || async {
        row(&store, alert.alert_id, "hook").await.filter(|r| r.attempts >= 2)
    })
    .await;
    assert_eq!(pending.status, "pending", "{}", first.log());
    first.child.kill();
    let at_kill = row(&store, alert.alert_id, "hook").await.unwrap();
    assert_eq!(at_kill.status, "pending");
    let sent_before = hook.count();
    // The documented hard-kill window: at most the one attempt whose row was not written.
    assert!(
        sent_before == at_kill.attempts as usize || sent_before == at_kill.attempts as usize + 1,
        "{sent_before} requests for {} recorded attempts",
        at_kill.attempts
    );
    assert_eq!(committed(&env.config).await, None, "nothing committed while pending");

    hook.set_default(Reply::status(200));
    let mut second = Daemon::start(&env, &hook, &settings);
    // The killed member holds its partitions until its session times out (10 s).
    let delivered = wait_for("delivery after the restart", Duration::from_secs(60), || async {
        row(&store, alert.alert_id, "hook").await.filter(|r| r.status == "delivered")
    })
    .await;
    assert_eq!(delivered.attempts, at_kill.attempts + 1, "the count carried on from the pending row");
    assert_eq!(delivered.created_ns, at_kill.created_ns);
    wait_for("the offset committed", Duration::from_secs(30), || async {
        (committed(&env.config).await == Some(1)).then_some(())
    })
    .await;
    assert_eq!(hook.successes(), 1, "delivered once");
    assert_eq!(hook.count(), sent_before + 1, "one attempt after the restart");

    second.signal("-TERM");
    let status = second.exit_within(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}\n{}", second.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_in_flight_attempt_finish_and_write_its_row() {
    let env = TestEnv::new("notify_term");
    topics(&env).await;
    let store = env.store();
    let hold = Duration::from_secs(3);
    let hook = Hook::start(vec![Reply::status(200).delayed(hold)], Reply::status(200)).await;
    let mut daemon = Daemon::start(&env, &hook, &[("TAYGA_NOTIFIER_TIMEOUT_SECS", "10")]);

    // The daemon's own /health and /metrics.
    let http = reqwest::Client::new();
    let health: serde_json::Value = wait_for("/health", Duration::from_secs(30), || {
        let url = format!("http://{}/health", daemon.metrics);
        let http = http.clone();
        async move { http.get(url).send().await.ok()?.json().await.ok() }
    })
    .await;
    assert_eq!(health["service"], "notifier");
    assert_eq!(health["targets"][0]["breaker"], "closed");

    let alert = alert("notify_term", 1, AlertKind::NewTemplate);
    publish(&env.config, &[&alert]).await;
    wait_for("the attempt in flight", Duration::from_secs(30), || async { (hook.count() == 1).then_some(()) }).await;
    daemon.signal("-TERM");
    // docs/design.md#notifier-stop: the attempt finishes within timeout_secs (10), its row write within 15 s;
    // Compose allows 40 s.
    let status = daemon.exit_within(Duration::from_secs(40)).await;
    let answered_at = hook.received()[0].at + hold;
    assert!(status.success(), "{status:?}\n{}", daemon.log());
    assert!(Instant::now() >= answered_at, "exited before the in-flight attempt was answered");

    let row = row(&store, alert.alert_id, "hook").await.unwrap_or_else(|| panic!("no row\n{}", daemon.log()));
    assert_eq!((row.status.as_str(), row.attempts), ("delivered", 1));
    assert_eq!(committed(&env.config).await, Some(1), "the finished record is committed before exit");
    assert_eq!(hook.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_does_not_wait_out_a_backoff_and_leaves_the_record_uncommitted() {
    let env = TestEnv::new("notify_term_wait");
    topics(&env).await;
    let store = env.store();
    let hook = Hook::always(503).await;
    let mut daemon = Daemon::start(
        &env,
        &hook,
        &[("TAYGA_NOTIFIER_BACKOFF_BASE_SECS", "120"), ("TAYGA_NOTIFIER_BACKOFF_CAP_SECS", "300")],
    );
    let alert = alert("notify_term_wait", 1, AlertKind::Silence);
    publish(&env.config, &[&alert]).await;
    let pending = wait_for("the first failed attempt", Duration::from_secs(30), || async {
        row(&store, alert.alert_id, "hook").await
    })
    .await;
    assert_eq!((pending.status.as_str(), pending.attempts), ("pending", 1));

    let sent = Instant::now();
    daemon.signal("-TERM");
    let status = daemon.exit_within(Duration::from_secs(20)).await;
    assert!(status.success(), "{status:?}\n{}", daemon.log());
    assert!(sent.elapsed() < Duration::from_secs(15), "stopping took {:?}", sent.elapsed());
    assert_eq!(committed(&env.config).await, None, "a pending record is read again after a restart");
    assert_eq!(hook.count(), 1);
}
