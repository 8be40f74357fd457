//! One file per operator command. Commands print to the writers they are given (stdout and
//! stderr in the binary) and return errors; only `src/bin/tayga.rs` decides exit codes and
//! touches the process's streams (`tests/it/tidy.rs` checks it).

pub mod alerts;
pub mod config;
pub mod deliveries;
pub mod fail;
pub mod generate;
pub mod loadgen;
pub mod logs;
pub mod migrate;
pub mod mine;
pub mod reach;
pub mod remine;
pub mod scale;
pub mod serve;
pub mod shapes;
pub mod silences;
pub mod table;
pub mod templates;
pub mod time;
pub mod topics;
pub mod trace;
pub mod traces;
pub mod up;

use std::io::Write;
use std::path::Path;

use crate::cli::{Cli, Command};
use crate::config::Loaded;

/// A failure the command has already explained on stderr: exit 1 without another line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Reported(pub String);

/// Whether the process's standard output and error are terminals, as the binary found them:
/// commands lay out tables and show progress by it, never asking the streams themselves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Terminals {
    pub stdout: bool,
    pub stderr: bool,
    /// Standard output's descriptor, so `logs --follow` notices while idle that the reader
    /// of its pipe went away (a write would only tell at the next line).
    pub stdout_fd: Option<i32>,
}

/// Whether a command prints data (and so takes `--json`). The others refuse `--json` as a
/// usage error instead of ignoring it.
pub fn prints_data(command: &Command) -> bool {
    !matches!(
        command,
        Command::Serve(_) | Command::Up(_) | Command::Completions(_) | Command::Man(_) | Command::Generate(_)
    )
}

/// Whether a command's text output is prose an operator reads (sentences, tables), which a
/// terminal narrower than a sentence wraps ([`table::Wrapping`]). Not JSON, DDL, CSV, roff
/// or scripts: those are copied whole.
fn prose(cli: &Cli) -> bool {
    !cli.json
        && match &cli.command {
            Command::Migrate(args) => !args.print,
            Command::Config(_)
            | Command::Topics(_)
            | Command::Deliveries(_)
            | Command::Silences(_)
            | Command::Remine(_)
            | Command::Alerts(_)
            | Command::Scale(_)
            | Command::Traces(_)
            | Command::Loadgen(_) => true,
            // Log lines stay whole, as `kubectl logs` prints them (a template's too); the waterfall
            // and the tables fit by themselves.
            Command::Serve(_)
            | Command::Up(_)
            | Command::Logs(_)
            | Command::Trace(_)
            | Command::Templates(_)
            | Command::Shapes(_)
            | Command::Mine(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::Generate(_) => false,
        }
}

/// Runs one parsed command line: data and answers to `out`, warnings and progress to `err`.
pub async fn run(cli: Cli, out: &mut dyn Write, err: &mut dyn Write, terminals: Terminals) -> anyhow::Result<()> {
    table::set_wide(cli.wide);
    table::set_terminals(terminals);
    let mut wrapped;
    let out: &mut dyn Write = if prose(&cli) {
        wrapped = table::Wrapping::new(out, table::Layout::current());
        &mut wrapped
    } else {
        out
    };
    let file = cli.config.as_deref();
    let timeout = cli.timeout;
    match &cli.command {
        Command::Config(sub) => config::run(sub, file, cli.json, out, err),
        Command::Migrate(args) => migrate::run(&load(file, err)?.config, args, timeout, cli.json, out).await,
        Command::Topics(sub) => topics::run(&load(file, err)?.config, sub, timeout, cli.json, out, err).await,
        Command::Serve(args) => serve::run(load(file, err)?, args.service, err).await,
        Command::Up(args) => up::run(load(file, err)?, args, out, err).await,
        Command::Deliveries(sub) => deliveries::run(&load(file, err)?.config, sub, timeout, cli.json, out).await,
        Command::Silences(sub) => silences::run(&load(file, err)?.config, sub, timeout, cli.json, out).await,
        Command::Remine(args) => {
            let config = load(file, err)?.config;
            reach::clickhouse(&config.clickhouse, timeout).await?;
            remine::run(&config, args, cli.json, out).await
        }
        Command::Alerts(sub) => alerts::run(&load(file, err)?.config, sub, timeout, cli.json, out, err).await,
        Command::Scale(sub) => scale::run(&load(file, err)?.config, sub, timeout, cli.json, out, err).await,
        Command::Logs(args) => {
            logs::run(&load(file, err)?.config, args, timeout, cli.json, terminals.stdout_fd, out).await
        }
        Command::Traces(args) => traces::run(&load(file, err)?.config, args, timeout, cli.json, out).await,
        Command::Trace(args) => trace::run(&load(file, err)?.config, args, timeout, cli.json, out).await,
        Command::Templates(sub) => templates::run(&load(file, err)?.config, sub, timeout, cli.json, out).await,
        Command::Shapes(sub) => shapes::run(&load(file, err)?.config, sub, timeout, cli.json, out).await,
        Command::Loadgen(args) => loadgen::run(args, cli.json, out).await,
        Command::Mine(args) => mine::run(args, &load(file, err)?.config.logminer, cli.json, out, err),
        Command::Completions(args) => generate::completions(args.shell, out),
        Command::Man(args) => generate::man(args.dir.as_deref(), out),
        Command::Generate(args) => generate::generate(&args.root, out),
    }
}

/// The configuration, or its problems on `err` (one line each) and a [`Reported`] failure.
fn load(file: Option<&Path>, err: &mut dyn Write) -> anyhow::Result<Loaded> {
    Loaded::load(file).map_err(|e| config::load_failed(e, err))
}
