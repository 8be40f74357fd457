//! `tayga config show` and `tayga config check`.

use std::io::Write;
use std::path::Path;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::json;

use super::Reported;
use crate::cli::ConfigCommand;
use crate::config::{display_value, is_secret, ConfigError, Loaded};

pub fn run(sub: &ConfigCommand, file: Option<&Path>, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let loaded = match Loaded::load(file) {
        Ok(loaded) => loaded,
        Err(e) => return Err(load_failed(e)),
    };
    match sub {
        ConfigCommand::Show => show(&loaded, json, out),
        ConfigCommand::Check => check(&loaded, out),
    }
}

/// A configuration that does not load: one stderr line per problem, then exit 1.
pub fn load_failed(err: ConfigError) -> anyhow::Error {
    for problem in &err.problems {
        eprintln!("config: {problem}");
    }
    Reported(format!("the configuration has {} problem(s)", err.problems.len())).into()
}

fn show(loaded: &Loaded, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        let values: serde_json::Map<String, serde_json::Value> = loaded
            .values
            .iter()
            .map(|(key, (value, source))| {
                let shown = if is_secret(key) || key.ends_with("targets") {
                    serde_json::Value::String(display_value(key, value))
                } else {
                    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
                };
                (key.clone(), json!({ "value": shown, "source": source }))
            })
            .collect();
        let doc = json!({ "file": loaded.file.as_ref().map(|f| f.display().to_string()), "values": values });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    match &loaded.file {
        Some(file) => writeln!(out, "# file: {}", file.display())?,
        None => writeln!(out, "# no config file; defaults and environment only")?,
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header(["key", "value", "source"]);
    for (key, (value, source)) in &loaded.values {
        table.add_row([key.clone(), display_value(key, value), source.to_string()]);
    }
    writeln!(out, "{table}")?;
    Ok(())
}

fn check(loaded: &Loaded, out: &mut dyn Write) -> anyhow::Result<()> {
    let problems = loaded.config.validate();
    if problems.is_empty() {
        let from = loaded.file.as_ref().map_or("defaults and environment".to_string(), |f| f.display().to_string());
        writeln!(out, "config ok ({from})")?;
        return Ok(());
    }
    for problem in &problems {
        eprintln!("config: {problem}");
    }
    Err(Reported(format!("the configuration has {} problem(s)", problems.len())).into())
}
