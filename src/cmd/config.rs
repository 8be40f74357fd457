//! `tayga config show` and `tayga config check`.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use super::table::{Layout, Table};
use super::Reported;
use crate::cli::ConfigCommand;
use crate::config::{display_value, json_value, ConfigError, Loaded};

pub fn run(
    sub: &ConfigCommand,
    file: Option<&Path>,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    let loaded = match Loaded::load(file) {
        Ok(loaded) => loaded,
        Err(e) if json && matches!(sub, ConfigCommand::Check) => return check_json(file, &e.problems, out),
        Err(e) => return Err(load_failed(e, err)),
    };
    match sub {
        ConfigCommand::Show => show(&loaded, json, out),
        ConfigCommand::Check => check(&loaded, json, out, err),
    }
}

/// A configuration that does not load: one stderr line per problem, then exit 1.
pub fn load_failed(e: ConfigError, err: &mut dyn Write) -> anyhow::Error {
    report(&e.problems, err)
}

fn report(problems: &[String], err: &mut dyn Write) -> anyhow::Error {
    for problem in problems {
        // A stderr that cannot be written to leaves only the failure's own line.
        let _ = writeln!(err, "config: {problem}");
    }
    Reported(format!("the configuration has {} problem(s)", problems.len())).into()
}

fn show(loaded: &Loaded, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        let values: serde_json::Map<String, serde_json::Value> = loaded
            .values
            .iter()
            .map(|(key, (value, source))| (key.clone(), json!({ "value": json_value(key, value), "source": source })))
            .collect();
        let doc = json!({ "file": loaded.file.as_ref().map(|f| f.display().to_string()), "values": values });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let layout = Layout::current();
    if layout.is_terminal() {
        match &loaded.file {
            Some(file) => writeln!(out, "# file: {}", file.display())?,
            None => writeln!(out, "# no config file; defaults and environment only")?,
        }
    }
    let mut table = Table::new(["key", "value", "source"]).keep(&["key", "source"]);
    for (key, (value, source)) in &loaded.values {
        table.row([key.clone(), display_value(key, value), source.to_string()]);
    }
    write!(out, "{}", table.render(layout))?;
    Ok(())
}

fn check(loaded: &Loaded, json: bool, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<()> {
    let problems = loaded.problems();
    if json {
        return check_json(loaded.file.as_deref(), &problems, out);
    }
    if problems.is_empty() {
        let from = loaded.file.as_ref().map_or("defaults and environment".to_string(), |f| f.display().to_string());
        writeln!(out, "config ok ({from})")?;
        return Ok(());
    }
    Err(report(&problems, err))
}

/// `config check --json`: `{"ok": …, "file": …, "problems": […]}` on stdout, exit 1 when
/// there is a problem.
fn check_json(file: Option<&Path>, problems: &[String], out: &mut dyn Write) -> anyhow::Result<()> {
    let doc = json!({
        "ok": problems.is_empty(),
        "file": file.map(|f| f.display().to_string()),
        "problems": problems,
    });
    writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Reported(format!("the configuration has {} problem(s)", problems.len())).into())
    }
}
