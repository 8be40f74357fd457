//! One file per operator command. Commands print to the writer they are given (stdout in
//! the binary, a buffer in tests) and return errors; only `src/bin/tayga.rs` decides exit
//! codes.

pub mod alerts;
pub mod config;
pub mod deliveries;
pub mod fail;
pub mod generate;
pub mod loadgen;
pub mod migrate;
pub mod mine;
pub mod reach;
pub mod remine;
pub mod scale;
pub mod serve;
pub mod table;
pub mod time;
pub mod topics;
pub mod up;

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::config::Loaded;

/// A failure the command has already explained on stderr: exit 1 without another line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Reported(pub String);

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
            | Command::Remine(_)
            | Command::Alerts(_)
            | Command::Scale(_)
            | Command::Loadgen(_) => true,
            Command::Serve(_)
            | Command::Up(_)
            | Command::Mine(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::Generate(_) => false,
        }
}

/// Runs one parsed command line.
pub async fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<()> {
    table::set_wide(cli.wide);
    let mut wrapped;
    let out: &mut dyn Write = if prose(&cli) {
        wrapped = table::Wrapping::new(out, table::Layout::current());
        &mut wrapped
    } else {
        out
    };
    let load = || Loaded::load(cli.config.as_deref()).map_err(config::load_failed);
    let timeout = cli.timeout;
    match &cli.command {
        Command::Config(sub) => config::run(sub, cli.config.as_deref(), cli.json, out),
        Command::Migrate(args) => migrate::run(&load()?.config, args, timeout, cli.json, out).await,
        Command::Topics(sub) => topics::run(&load()?.config, sub, timeout, cli.json, out).await,
        Command::Serve(args) => serve::run(load()?, args.service).await,
        Command::Up(args) => up::run(load()?, args, out).await,
        Command::Deliveries(sub) => deliveries::run(&load()?.config, sub, timeout, cli.json, out).await,
        Command::Remine(args) => {
            let config = load()?.config;
            reach::clickhouse(&config.clickhouse, timeout).await?;
            remine::run(&config, args, cli.json, out).await
        }
        Command::Alerts(sub) => alerts::run(&load()?.config, sub, timeout, cli.json, out).await,
        Command::Scale(sub) => scale::run(&load()?.config, sub, timeout, cli.json, out).await,
        Command::Loadgen(args) => loadgen::run(args, cli.json, out).await,
        Command::Mine(args) => mine::run(args, &load()?.config.logminer, cli.json),
        Command::Completions(args) => generate::completions(args.shell, out),
        Command::Man(args) => generate::man(args.dir.as_deref(), out),
        Command::Generate(args) => generate::generate(&args.root, out),
    }
}
