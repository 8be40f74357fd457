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

pub fn completions(shell: Shell, out: &mut dyn Write) -> anyhow::Result<()> {
    clap_complete::generate(complete_shell(shell), &mut command(), BIN, out);
    Ok(())
}

/// `tayga man`: the top page on the writer, or every page into `dir`.
pub fn man(dir: Option<&Path>, out: &mut dyn Write) -> anyhow::Result<()> {
    let pages = man_pages()?;
    let Some(dir) = dir else {
        out.write_all(&pages[&format!("{BIN}.1")])?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, page) in &pages {
        std::fs::write(dir.join(name), page).with_context(|| format!("writing {}", dir.join(name).display()))?;
    }
    Ok(())
}

/// A page per command and subcommand (`tayga.1`, `tayga-config-show.1`, …), by file name.
fn man_pages() -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    fn render(cmd: &clap::Command, pages: &mut BTreeMap<String, Vec<u8>>) -> anyhow::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            render(sub, pages)?;
        }
        let man = clap_mangen::Man::new(cmd.clone());
        let mut page = Vec::new();
        man.render(&mut page).context("rendering a man page")?;
        pages.insert(man.get_filename(), page);
        Ok(())
    }
    // Building fills in each subcommand's display name (tayga-config-show).
    let mut cmd = command().disable_help_subcommand(true);
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

/// `tayga generate`: rewrite completions/ and man/ under `root`, removing stale pages.
pub fn generate(root: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
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
