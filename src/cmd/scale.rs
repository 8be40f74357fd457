//! `tayga scale logminer N [--dry-run] [--env-file PATH]` (docs/logminer-commands.md).
//!
//! Steps, in this order, so that an interruption leaves nothing half-done that matters:
//! 1. refuse N outside 1 ..= min(partitions of `<prefix>.logs`, 12);
//! 2. give every partition its own `new_template_watermark_ns:p<N>` key, with the value it
//!    resolves to now. This is done on every scale, not only when scaling down: it changes no
//!    partition's watermark (a partition without a key resolves to the global one, which is
//!    exactly what is written), `logminer.replicas` as this shell sees it need not be what
//!    runs, and once every partition has a key a survivor of any later scale-down resumes
//!    from the slowest partition it takes over (docs/design.md#watermarks);
//! 3. set `LOGMINER_REPLICAS=N` in the Compose env file;
//! 4. run `docker compose up -d --scale logminer=N`, or print it when docker is not on PATH.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use tokio::io::AsyncBufReadExt as _;

use crate::bus::topics::partition_counts_within;
use crate::cli::{ScaleCommand, ScaleLogminerArgs};
use crate::config::{Config, MAX_LOGMINER_REPLICAS};
use crate::store::logminer::{watermark_key, write_state, State};
use crate::store::{now_ns, Store};

/// The variable compose.yaml reads for the logminer's replica count.
pub const REPLICAS_VAR: &str = "LOGMINER_REPLICAS";
/// The logminer's service name in compose.yaml.
const COMPOSE_SERVICE: &str = "logminer";
/// The env file Compose reads by itself (beside compose.yaml in the project directory).
const DEFAULT_ENV_FILE: &str = ".env";

/// Why a replica count is refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScaleError {
    #[error("cannot scale the logminer to 0 replicas: N must be at least 1 (stop the service to run none)")]
    Zero,
    #[error(
        "cannot scale the logminer to {replicas} replicas: {topic} has {partitions} partitions, and a replica \
         beyond the {partitions}th partition gets no partition and idles"
    )]
    BeyondPartitions { replicas: u32, topic: String, partitions: i32 },
    #[error("cannot scale the logminer to {replicas} replicas: at most {MAX_LOGMINER_REPLICAS} are supported (logminer.replicas)")]
    BeyondMax { replicas: u32 },
}

/// Checks N against the partitions of the logs topic and the supported maximum.
pub fn check_replicas(replicas: u32, topic: &str, partitions: i32) -> Result<(), ScaleError> {
    if replicas == 0 {
        return Err(ScaleError::Zero);
    }
    if i64::from(replicas) > i64::from(partitions) {
        return Err(ScaleError::BeyondPartitions { replicas, topic: topic.to_string(), partitions });
    }
    if replicas > MAX_LOGMINER_REPLICAS {
        return Err(ScaleError::BeyondMax { replicas });
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct WatermarkKey {
    partition: i32,
    key: String,
    value_ns: u64,
}

#[derive(Debug, Serialize)]
struct Plan {
    dry_run: bool,
    /// `LOGMINER_REPLICAS` in the env file, else `logminer.replicas` as this shell sees it.
    replicas_before: u32,
    replicas: u32,
    topic: String,
    partitions: i32,
    /// Keys written for partitions that had none.
    watermark_keys: Vec<WatermarkKey>,
    env_file: PathBuf,
    command: Vec<String>,
    /// Whether the command was run (docker on PATH, not a dry run).
    ran: bool,
}

pub async fn run(
    config: &Config,
    sub: &ScaleCommand,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    let ScaleCommand::Logminer(args) = sub;
    logminer(config, args, timeout, json, out, err).await
}

async fn logminer(
    config: &Config,
    args: &ScaleLogminerArgs,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    let n = args.replicas;
    // clap refuses 0 and more than the maximum as usage errors; this keeps the rule whole
    // for any other caller.
    if n == 0 {
        return Err(ScaleError::Zero.into());
    }
    if n > MAX_LOGMINER_REPLICAS {
        return Err(ScaleError::BeyondMax { replicas: n }.into());
    }
    let topic = config.names().logs;
    super::reach::broker(&config.kafka, timeout).await?;
    let counts = partition_counts_within(&config.kafka, Some(&topic), timeout)
        .await
        .with_context(|| format!("reading the partitions of {topic} from {}", config.kafka.brokers))?;
    let partitions = *counts
        .get(&topic)
        .with_context(|| format!("topic {topic} does not exist; create it with `tayga topics create`"))?;
    check_replicas(n, &topic, partitions)?;

    super::reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let state = State::load(&store)
        .await
        .with_context(|| format!("reading logminer_state of database `{}`", config.clickhouse.database))?;
    let watermark_keys: Vec<WatermarkKey> = state
        .partitions_without_watermark(partitions)
        .into_iter()
        .map(|p| WatermarkKey { partition: p, key: watermark_key(p), value_ns: state.watermark(&[p]) })
        .collect();

    let env_text = match std::fs::read_to_string(&args.env_file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", args.env_file.display())),
    };
    let replicas_before =
        env_text.as_deref().and_then(|t| env_value(t, REPLICAS_VAR)?.parse().ok()).unwrap_or(config.logminer.replicas);
    let command = compose_command(&args.env_file, n);
    let docker = find_on_path("docker");

    let mut plan = Plan {
        dry_run: args.dry_run,
        replicas_before,
        replicas: n,
        topic,
        partitions,
        watermark_keys,
        env_file: args.env_file.clone(),
        command,
        ran: false,
    };
    if args.dry_run {
        return write_plan(&plan, docker.is_some(), json, out);
    }

    if !plan.watermark_keys.is_empty() {
        let entries: Vec<(String, String)> =
            plan.watermark_keys.iter().map(|k| (k.key.clone(), k.value_ns.to_string())).collect();
        write_state(&store, &entries, now_ns()).await.context("writing the partition watermark keys")?;
    }
    let text = set_env_value(env_text.as_deref().unwrap_or(""), REPLICAS_VAR, &n.to_string());
    write_atomically(&args.env_file, &text).with_context(|| format!("writing {}", args.env_file.display()))?;

    if let Some(docker) = &docker {
        // Compose's own output goes to `err`, line by line as it comes, so `out` stays this
        // command's (and --json's).
        let mut child = tokio::process::Command::new(docker)
            .args(&plan.command[1..])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", docker.display()))?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        while let Some(line) = lines.next_line().await.with_context(|| format!("reading {}", docker.display()))? {
            writeln!(err, "{line}")?;
        }
        let status = child.wait().await.with_context(|| format!("running {}", docker.display()))?;
        anyhow::ensure!(
            status.success(),
            "`{}` failed ({status}); {REPLICAS_VAR}={n} is set in {} and the watermark keys are written, so run it \
             again once docker works",
            plan.command.join(" "),
            args.env_file.display()
        );
        plan.ran = true;
    }
    write_plan(&plan, docker.is_some(), json, out)
}

fn write_plan(plan: &Plan, docker: bool, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(plan)?)?;
        return Ok(());
    }
    let (verb, would) = if plan.dry_run { ("would", "would ") } else { ("", "") };
    if plan.dry_run {
        writeln!(out, "dry run: nothing was changed")?;
    }
    writeln!(
        out,
        "logminer replicas: {} -> {} ({} has {} partitions)",
        plan.replicas_before, plan.replicas, plan.topic, plan.partitions
    )?;
    if plan.watermark_keys.is_empty() {
        writeln!(out, "watermark keys: every partition has its own")?;
    } else {
        let written = if plan.dry_run { "would be written" } else { "written" };
        writeln!(
            out,
            "watermark keys {written} for partitions without one (the value each resolves to now): {}",
            plan.watermark_keys
                .iter()
                .map(|k| format!("p{}={}", k.partition, k.value_ns))
                .collect::<Vec<_>>()
                .join(" ")
        )?;
    }
    writeln!(out, "{would}set {REPLICAS_VAR}={} in {}", plan.replicas, plan.env_file.display())?;
    let command = plan.command.join(" ");
    match (plan.ran, docker, plan.dry_run) {
        (true, _, _) => writeln!(out, "ran: {command}")?,
        (false, true, true) => writeln!(out, "{verb} run: {command}")?,
        _ => writeln!(out, "docker is not on PATH; run: {command}")?,
    }
    Ok(())
}

/// `docker compose [--env-file PATH] up -d --scale logminer=N`: Compose reads `.env` by
/// itself, any other file only when told.
fn compose_command(env_file: &Path, replicas: u32) -> Vec<String> {
    let mut cmd = vec!["docker".to_string(), "compose".to_string()];
    if env_file != Path::new(DEFAULT_ENV_FILE) {
        cmd.extend(["--env-file".to_string(), env_file.display().to_string()]);
    }
    cmd.extend(["up", "-d", "--scale"].map(String::from));
    cmd.push(format!("{COMPOSE_SERVICE}={replicas}"));
    cmd
}

/// The value of `KEY=value` (or `export KEY=value`) in an env file, unquoted.
fn env_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().rev().find_map(|line| {
        let value = assignment_of(line, key)?;
        Some(value.trim().trim_matches(|c| c == '"' || c == '\''))
    })
}

/// The value part of `line` when it assigns `key`.
fn assignment_of<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let t = line.trim_start();
    let t = t.strip_prefix("export ").map(str::trim_start).unwrap_or(t);
    t.strip_prefix(key)?.trim_start().strip_prefix('=')
}

/// `text` with every assignment of `key` replaced by `key=value`, or one appended; every
/// other line is kept as it was.
pub fn set_env_value(text: &str, key: &str, value: &str) -> String {
    let mut found = false;
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| match assignment_of(line, key) {
            Some(_) => {
                found = true;
                format!("{key}={value}")
            }
            None => line.to_string(),
        })
        .collect();
    if !found {
        lines.push(format!("{key}={value}"));
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// Writes through a file beside `path` and a rename, so a reader never sees half a file.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tayga-tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// The first executable `name` in `$PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_must_fit_the_partitions() {
        assert_eq!(check_replicas(0, "t.logs", 12), Err(ScaleError::Zero));
        assert!(check_replicas(1, "t.logs", 12).is_ok());
        assert!(check_replicas(12, "t.logs", 12).is_ok());
        let err = check_replicas(13, "t.logs", 12).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot scale the logminer to 13 replicas: t.logs has 12 partitions, and a replica beyond the 12th \
             partition gets no partition and idles"
        );
        assert_eq!(check_replicas(13, "t.logs", 24), Err(ScaleError::BeyondMax { replicas: 13 }));
    }

    #[test]
    fn the_env_file_keeps_other_lines() {
        assert_eq!(set_env_value("", REPLICAS_VAR, "2"), "LOGMINER_REPLICAS=2\n");
        assert_eq!(
            set_env_value("# comment\nA=1\nLOGMINER_REPLICAS = 3\nB=\"x y\"", REPLICAS_VAR, "2"),
            "# comment\nA=1\nLOGMINER_REPLICAS=2\nB=\"x y\"\n"
        );
        assert_eq!(set_env_value("export LOGMINER_REPLICAS=3\n", REPLICAS_VAR, "1"), "LOGMINER_REPLICAS=1\n");
        assert_eq!(
            set_env_value("LOGMINER_REPLICAS_OLD=3\n", REPLICAS_VAR, "1"),
            "LOGMINER_REPLICAS_OLD=3\nLOGMINER_REPLICAS=1\n"
        );
        assert_eq!(env_value("A=1\nLOGMINER_REPLICAS=\"4\"\n", REPLICAS_VAR), Some("4"));
        assert_eq!(env_value("A=1\n", REPLICAS_VAR), None);
    }

    #[test]
    fn compose_reads_dot_env_by_itself() {
        assert_eq!(compose_command(Path::new(".env"), 3).join(" "), "docker compose up -d --scale logminer=3");
        assert_eq!(
            compose_command(Path::new("deploy/prod.env"), 2).join(" "),
            "docker compose --env-file deploy/prod.env up -d --scale logminer=2"
        );
    }
}
