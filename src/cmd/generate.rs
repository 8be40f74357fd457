//! Shell completions and man pages, all derived from the one clap definition in `cli.rs`.
//! The committed copies under `completions/` and `man/` are checked by
//! `tests/it/cli.rs`, which fails when they are stale.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap_complete::Shell as CompleteShell;

use crate::cli::{command, Shell};

const BIN: &str = "tayga";

fn complete_shell(shell: Shell) -> CompleteShell {
    match shell {
        Shell::Bash => CompleteShell::Bash,
        Shell::Zsh => CompleteShell::Zsh,
        Shell::Fish => CompleteShell::Fish,
    }
}

/// The command line as completions offer it: without the hidden `generate`, which
/// clap_complete would list (it ignores `hide` on subcommands).
fn completable() -> clap::Command {
    let full = command();
    let mut cmd = clap::Command::new(BIN)
        .version(crate::cli::VERSION)
        .about(full.get_about().cloned().unwrap_or_default())
        .args(full.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommand_required(true);
    for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        cmd = cmd.subcommand(sub.clone());
    }
    cmd
}

pub fn completions(shell: Shell, out: &mut dyn Write) -> anyhow::Result<()> {
    // Into a buffer first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(complete_shell(shell), &mut completable(), BIN, &mut script);
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}

/// `tayga man`: the top page on the writer (through `man` when the writer is a terminal),
/// or every page into `dir`.
pub fn man(dir: Option<&Path>, out: &mut dyn Write) -> anyhow::Result<()> {
    let pages = man_pages()?;
    let Some(dir) = dir else {
        let page = &pages[&format!("{BIN}.1")];
        if super::table::Layout::current().is_terminal() && std::env::var_os(super::table::FORCE_TTY_VAR).is_none() {
            if let Some(shown) = page_through_man(page)? {
                return shown;
            }
        }
        out.write_all(page)?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, page) in &pages {
        std::fs::write(dir.join(name), page).with_context(|| format!("writing {}", dir.join(name).display()))?;
    }
    Ok(())
}

/// Shows a page with `man -l -` (formatted, through the pager) when `man` is installed;
/// `None` when it is not, so the caller prints the roff source instead.
fn page_through_man(page: &[u8]) -> anyhow::Result<Option<anyhow::Result<()>>> {
    use std::process::{Command, Stdio};
    let child = Command::new("man").args(["-l", "-"]).stdin(Stdio::piped()).spawn();
    let Ok(mut child) = child else { return Ok(None) };
    if let Some(mut stdin) = child.stdin.take() {
        // The pager may quit before reading everything; that is not an error.
        let _ = stdin.write_all(page);
    }
    let status = child.wait().context("waiting for man")?;
    Ok(Some(if status.success() { Ok(()) } else { Err(anyhow::anyhow!("man exited with {status}")) }))
}

/// Sections every page ends with (clap_mangen renders the rest from `cli.rs`).
const MAN_TAIL: &str = r#".SH ENVIRONMENT
.TP
\fBTAYGA_\fR\fISECTION\fR\fB_\fR\fIKEY\fR
Overrides one key of the configuration file, e.g. \fBTAYGA_KAFKA_BROKERS\fR, \fBTAYGA_CLICKHOUSE_URL\fR; arrays and tables are written as TOML. \fBtayga config show\fR lists every key. A \fBTAYGA_\fR variable that names no key is an error.
.TP
\fBLOGMINER_REPLICAS\fR
Sets \fBlogminer.replicas\fR (the name Compose uses).
.TP
\fBTAYGA_CONFIG\fR
The configuration file, as \fB\-\-config\fR.
.TP
\fBTAYGA_TIMEOUT\fR
How long to wait for the broker or ClickHouse, as \fB\-\-timeout\fR.
.TP
\fBTAYGA_LOG\fR
Log filter of the commands (default \fBwarn\fR), e.g. \fBinfo\fR or \fBtayga=debug\fR.
.TP
\fBTAYGA_FORCE_TTY\fR
Print tables as on a terminal even to a pipe; a number sets the width.
.SH FILES
.TP
\fBtayga.toml\fR
The configuration file read from the working directory when \fB\-\-config\fR is not given.
.TP
\fB.env\fR
The Compose env file \fBtayga scale logminer\fR writes \fBLOGMINER_REPLICAS\fR into.
.SH "EXIT STATUS"
.TP
\fB0\fR
Success (also when the reader of the output went away, as with \fB| head\fR).
.TP
\fB1\fR
Failure: a server did not answer, a configuration problem, a refused operation. One line on standard error says what and what to do.
.TP
\fB2\fR
Usage error: an unknown flag, a value out of range, \fB\-\-json\fR given to a command that prints no data.
"#;

/// A page per command and subcommand (`tayga.1`, `tayga-config-show.1`, …), by file name.
fn man_pages() -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    fn render(cmd: &clap::Command, pages: &mut BTreeMap<String, Vec<u8>>) -> anyhow::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            render(sub, pages)?;
        }
        let man = clap_mangen::Man::new(cmd.clone());
        let mut page = Vec::new();
        man.render(&mut page).context("rendering a man page")?;
        page.extend_from_slice(MAN_TAIL.as_bytes());
        pages.insert(man.get_filename(), page);
        Ok(())
    }
    // Building fills in each subcommand's display name (tayga-config-show).
    // The package version only: the commit would make every commit's pages stale.
    let mut cmd = command().version(env!("CARGO_PKG_VERSION")).disable_help_subcommand(true);
    cmd.build();
    let mut pages = BTreeMap::new();
    render(&cmd, &mut pages)?;
    Ok(pages)
}

/// Every generated file, by path relative to the repository root.
pub fn generated_files() -> anyhow::Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut files = BTreeMap::new();
    for (shell, name) in [(Shell::Bash, "tayga.bash"), (Shell::Zsh, "_tayga"), (Shell::Fish, "tayga.fish")] {
        let mut buf = Vec::new();
        completions(shell, &mut buf)?;
        files.insert(Path::new("completions").join(name), buf);
    }
    for (name, page) in man_pages()? {
        files.insert(Path::new("man").join(name), page);
    }
    Ok(files)
}

/// `tayga generate`: rewrite completions/ and man/ under `root`, removing stale pages. It
/// deletes those directories first, so it refuses any directory that is not a checkout of
/// this repository.
pub fn generate(root: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    anyhow::ensure!(
        manifest.lines().any(|l| l.trim() == "name = \"tayga\"") && root.join("src/cli.rs").exists(),
        "{} is not the root of the tayga repository (no Cargo.toml of package tayga and src/cli.rs); \
         run `cargo run -- generate` in the checkout, or pass --root",
        root.display()
    );
    let files = generated_files()?;
    for dir in ["completions", "man"] {
        let dir = root.join(dir);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for (path, content) in &files {
        std::fs::write(root.join(path), content).with_context(|| format!("writing {}", path.display()))?;
    }
    writeln!(out, "wrote {} files under completions/ and man/", files.len())?;
    Ok(())
}
