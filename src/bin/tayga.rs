//! The `tayga` binary: parse, set up logging, run, map the outcome to an exit code
//! (0 ok, 1 failure, 2 usage; clap exits 2 on a usage error by itself).

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use tayga::cli::Cli;
use tayga::cmd::{self, fail, Reported};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.json && !cmd::prints_data(&cli.command) {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--json is for commands that print data; this one prints none",
            )
            .exit();
    }
    if matches!(cli.command, tayga::cli::Command::Serve(_)) {
        // Daemons log JSON in containers, at info by default (src/daemon/mod.rs).
        tayga::daemon::init_tracing();
    } else {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("TAYGA_LOG").unwrap_or_else(|_| "warn".into()))
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Not `.lock()`: daemons log to stdout from other threads, and a lock held here for the
    // whole run would block them forever.
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    let terminals = cmd::Terminals {
        stdout: stdout.is_terminal(),
        stderr: stderr.is_terminal(),
        stdout_fd: Some(std::os::fd::AsRawFd::as_raw_fd(&stdout)),
    };
    let outcome = runtime.block_on(cmd::run(cli, &mut stdout, &mut stderr, terminals));
    // Daemon threads (librdkafka's among them) may still hold work; do not wait for them.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`tayga … | head`): what it wanted was written.
        Err(e) if fail::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.is::<Reported>() => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {}", fail::one_line(&e));
            ExitCode::FAILURE
        }
    }
}
