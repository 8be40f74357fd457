//! `tayga deliveries show --alert-id ID`: the latest state of every (alert, target) pair of
//! one alert in `notifier_deliveries`. An alert with no rows is not an error (it may not
//! have been read yet, or was skipped as stale or by kind): it prints a sentence (or `[]`
//! with `--json`) and exits 0. An id that is not 1–16 hex digits is a usage error (exit 2),
//! refused by clap with `alert::parse_id`.

use std::io::Write;

use anyhow::Context;
use serde::Serialize;

use crate::cli::DeliveriesCommand;
use crate::cmd::table::{Layout, Table};
use crate::cmd::time::{format_time, format_time_ago, Clock};
use crate::config::{redact, Config};
use crate::store::deliveries::latest_for_alert;
use crate::store::{DeliveryRow, Store};
use crate::wire::alert::format_id;

#[derive(Debug, Serialize)]
struct Shown<'a> {
    alert_id: String,
    target: &'a str,
    status: &'a str,
    attempts: u32,
    last_error: &'a str,
    created_ns: u64,
    updated_ns: u64,
    created_at: String,
    updated_at: String,
}

pub async fn run(config: &Config, sub: &DeliveriesCommand, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let DeliveriesCommand::Show { alert_id: id } = sub;
    let id = *id;
    let store = Store::new(&config.clickhouse);
    let mut rows = latest_for_alert(&store, id).await.with_context(|| {
        format!("reading deliveries of alert {} from database `{}`", format_id(id), config.clickhouse.database)
    })?;
    // Rows written before the notifier redacted its errors may still name a target's URL.
    let urls: Vec<&str> = config.notifier.targets.iter().map(|t| t.url.as_str()).collect();
    for row in &mut rows {
        row.last_error = redact::text(&row.last_error, &urls);
    }
    write_rows(id, &rows, json, out)
}

/// Prints the rows of one alert as a table, or as a JSON array.
pub fn write_rows(id: u64, rows: &[DeliveryRow], json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let shown: Vec<Shown> = rows
        .iter()
        .map(|r| Shown {
            alert_id: format_id(r.alert_id),
            target: &r.target,
            status: &r.status,
            attempts: r.attempts,
            last_error: &r.last_error,
            created_ns: r.created_ns,
            updated_ns: r.updated_ns,
            created_at: format_time(r.created_ns),
            updated_at: format_time(r.updated_ns),
        })
        .collect();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        return Ok(());
    }
    if shown.is_empty() {
        writeln!(
            out,
            "no deliveries for alert {}: the notifier has not read it, skipped it (stale, or no target takes its kind), \
             or its rows expired",
            format_id(id)
        )?;
        return Ok(());
    }
    let layout = Layout::current();
    let now = Clock::from_env()?.now_ns();
    let time = |ns: u64| if layout.is_terminal() { format_time_ago(ns, now) } else { format_time(ns) };
    if layout.is_terminal() {
        writeln!(out, "alert {}", format_id(id))?;
    }
    let mut table = Table::new(["target", "status", "attempts", "last_error", "created", "updated"])
        .numeric(&["attempts"])
        .keep(&["status"]);
    for (s, row) in shown.iter().zip(rows) {
        table.row([
            s.target.to_string(),
            s.status.to_string(),
            s.attempts.to_string(),
            s.last_error.to_string(),
            time(row.created_ns),
            time(row.updated_ns),
        ]);
    }
    write!(out, "{}", table.render(layout))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rows_is_a_sentence_or_an_empty_array() {
        let mut out = Vec::new();
        write_rows(0xff, &[], false, &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().starts_with("no deliveries for alert 00000000000000ff"));
        let mut out = Vec::new();
        write_rows(0xff, &[], true, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().trim(), "[]");
    }
}
