//! `tayga deliveries show --alert-id ID`: the latest state of every (alert, target) pair of
//! one alert in `notifier_deliveries` (a `silenced` row names the silence that held it
//! back). An alert with no rows is not an error (it may not
//! have been read yet, or was skipped as stale or by kind): it prints a sentence (or `[]`
//! with `--json`) and exits 0. An id that is not 1–16 hex digits is a usage error (exit 2),
//! refused by clap with `alert::parse_id`.
//!
//! `tayga deliveries retry --alert-id ID [--target NAME] [--dry-run]`: the operator's manual
//! retry of a failed delivery, through `workflow::retry::retry` (the API's retry endpoint calls
//! the same function). A refusal (no rows, unknown target, a row that is not failed) is an
//! error: one line on stderr, exit 1, nothing changed.

use std::io::Write;

use anyhow::Context;
use serde::Serialize;

use crate::cli::{DeliveriesCommand, DeliveriesRetryArgs};
use crate::cmd::table::{Layout, Table};
use crate::cmd::time::{format_time, table_time, Clock};
use crate::config::{redact, Config};
use crate::store::deliveries::history;
use crate::store::{DeliveryRow, Store};
use crate::wire::alert::{format_id, AlertState};
use crate::workflow::retry::{retry as retry_deliveries, AlertsTopic, Retried, RetryRequest};

#[derive(Debug, Serialize)]
struct Shown<'a> {
    alert_id: String,
    /// `firing`, or `resolved` for a resolved notice's row.
    state: &'static str,
    target: &'a str,
    status: &'a str,
    attempts: u32,
    last_error: &'a str,
    created_ns: u64,
    updated_ns: u64,
    created_at: String,
    updated_at: String,
    manual_retries: u32,
    retried_ns: u64,
    /// Empty when never retried.
    retried_at: String,
    retried_by: &'a str,
    /// The silence that held a `silenced` pair back; empty otherwise.
    silence_id: String,
}

impl<'a> Shown<'a> {
    fn of(r: &'a DeliveryRow) -> Shown<'a> {
        Shown::in_state(AlertState::Firing, r)
    }

    fn in_state(state: AlertState, r: &'a DeliveryRow) -> Shown<'a> {
        Shown {
            alert_id: format_id(r.alert_id),
            state: state.as_str(),
            target: &r.target,
            status: &r.status,
            attempts: r.attempts,
            last_error: &r.last_error,
            created_ns: r.created_ns,
            updated_ns: r.updated_ns,
            created_at: format_time(r.created_ns),
            updated_at: format_time(r.updated_ns),
            manual_retries: r.manual_retries,
            retried_ns: r.retried_ns,
            retried_at: if r.retried_ns == 0 { String::new() } else { format_time(r.retried_ns) },
            retried_by: &r.retried_by,
            silence_id: if r.silence_id == 0 { String::new() } else { format_id(r.silence_id) },
        }
    }
}

pub async fn run(
    config: &Config,
    sub: &DeliveriesCommand,
    timeout: std::time::Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    super::reach::clickhouse(&config.clickhouse, timeout).await?;
    match sub {
        DeliveriesCommand::Show { alert_id } => show(config, *alert_id, json, out).await,
        DeliveriesCommand::Retry(args) => retry(config, args, timeout, json, out).await,
    }
}

async fn show(config: &Config, id: u64, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let store = Store::new(&config.clickhouse);
    let mut rows = history(&store, id).await.with_context(|| {
        format!("reading deliveries of alert {} from database `{}`", format_id(id), config.clickhouse.database)
    })?;
    for (_, row) in &mut rows {
        redact_errors(config, std::slice::from_mut(row));
    }
    write_rows(id, &rows, json, out)
}

/// Rows written before the notifier redacted its errors may still name a target's URL.
fn redact_errors(config: &Config, rows: &mut [DeliveryRow]) {
    let urls: Vec<&str> = config.notifier.targets.iter().map(|t| t.url.as_str()).collect();
    for row in rows {
        row.last_error = redact::text(&row.last_error, &urls);
    }
}

/// Prints the rows of one alert (its firing deliveries, then its resolved notices) as a
/// table, or as a JSON array.
pub fn write_rows(id: u64, rows: &[(AlertState, DeliveryRow)], json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let shown: Vec<Shown> = rows.iter().map(|(state, r)| Shown::in_state(*state, r)).collect();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(
            out,
            "no deliveries for alert {}: the notifier has not read it, skipped it (stale, or no target takes its kind), \
             or its rows expired",
            format_id(id)
        )?;
        return Ok(());
    }
    if Layout::current().is_terminal() {
        writeln!(out, "alert {}", format_id(id))?;
    }
    write_table(&shown, "last retried", out)
}

/// The rows as a table, then who retried which (a line per retried row, `<target>: <verb>
/// at <time> by <who>`) and which silence holds which back (a line per silenced row). The `manual_retries` column appears only when a row was retried.
/// The `state` column appears only when a resolved notice is among the rows.
fn write_table(rows: &[Shown<'_>], verb: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let retried = rows.iter().any(|r| r.manual_retries > 0);
    let states = rows.iter().any(|r| r.state != AlertState::Firing.as_str());
    let mut header = vec!["target", "status", "attempts", "last_error", "created", "updated"];
    if states {
        header.insert(1, "state");
    }
    if retried {
        header.push("manual_retries");
    }
    let layout = Layout::current();
    let now = Clock::from_env()?.now_ns();
    let time = |ns: u64| table_time(ns, now, layout);
    let mut table = Table::new(header).numeric(&["attempts", "manual_retries"]).keep(&["status"]);
    for s in rows {
        let mut cells = vec![
            s.target.to_string(),
            s.status.to_string(),
            s.attempts.to_string(),
            s.last_error.to_string(),
            time(s.created_ns),
            time(s.updated_ns),
        ];
        if states {
            cells.insert(1, s.state.to_string());
        }
        if retried {
            cells.push(s.manual_retries.to_string());
        }
        table.row(cells);
    }
    write!(out, "{}", table.render(layout))?;
    for s in rows.iter().filter(|r| r.manual_retries > 0) {
        writeln!(out, "{}: {verb} at {} by {}", s.target, s.retried_at, s.retried_by)?;
    }
    for s in rows.iter().filter(|r| !r.silence_id.is_empty()) {
        writeln!(out, "{}: held back by silence {} (tayga silences list --all)", s.target, s.silence_id)?;
    }
    Ok(())
}

/// Who runs the command, as `retried_by` records it: `cli:<user>@<host>`.
pub(crate) fn operator() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()))
        .unwrap_or_else(|| "unknown".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into());
    format!("cli:{}@{}", user.trim(), host)
}

async fn retry(
    config: &Config,
    args: &DeliveriesRetryArgs,
    timeout: std::time::Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let by = operator();
    let mut request = RetryRequest {
        alert_id: args.alert_id,
        target: args.target.as_deref(),
        dry_run: true,
        by: &by,
        now_ns: Clock::from_env()?.now_ns(),
    };
    let store = Store::new(&config.clickhouse);
    let topic = AlertsTopic::new(config);
    // The refusals need only ClickHouse and are said first (a dry run is all of it); then
    // the broker must be reachable before a row is reset, or the reset rows would wait for
    // a republication that cannot happen.
    let mut retried = attempt(config, &store, &topic, &request).await?;
    if !args.dry_run {
        super::reach::topic(&config.kafka, &topic.topic, timeout).await?;
        request.dry_run = false;
        retried = attempt(config, &store, &topic, &request).await?;
    }
    redact_errors(config, &mut retried.retried);
    redact_errors(config, &mut retried.untouched);
    write_retried(&retried, json, out)
}

/// One retry through `workflow::retry`: a refusal as it is (it says what to do), anything else
/// with the alert and database it concerned.
async fn attempt(
    config: &Config,
    store: &Store,
    topic: &AlertsTopic,
    request: &RetryRequest<'_>,
) -> anyhow::Result<Retried> {
    match retry_deliveries(store, topic, request).await {
        Ok(r) => Ok(r),
        Err(e) if e.is_refusal() => Err(e.into()),
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "retrying deliveries of alert {} in database `{}`",
            format_id(request.alert_id),
            config.clickhouse.database
        ))),
    }
}

#[derive(Debug, Serialize)]
struct RetriedShown<'a> {
    alert_id: String,
    topic: &'a str,
    dry_run: bool,
    retried: Vec<Shown<'a>>,
    untouched: Vec<Shown<'a>>,
}

/// Prints what a retry did: a sentence and the reset rows, or one JSON object.
pub fn write_retried(r: &Retried, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        let shown = RetriedShown {
            alert_id: format_id(r.alert_id),
            topic: &r.topic,
            dry_run: r.dry_run,
            retried: r.retried.iter().map(Shown::of).collect(),
            untouched: r.untouched.iter().map(Shown::of).collect(),
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        return Ok(());
    }
    let n = r.retried.len();
    let noun = if n == 1 { "delivery" } else { "deliveries" };
    let id = format_id(r.alert_id);
    if r.dry_run {
        writeln!(
            out,
            "dry run: would reset {n} failed {noun} of alert {id} to pending and republish the alert to {}; \
             nothing changed",
            r.topic
        )?;
    } else {
        writeln!(
            out,
            "alert {id}: {n} failed {noun} reset to pending and the alert republished to {}; the notifier delivers \
             it once more",
            r.topic
        )?;
    }
    let reset: Vec<Shown> = r.retried.iter().map(Shown::of).collect();
    write_table(&reset, if r.dry_run { "would be retried" } else { "retried" }, out)?;
    if !r.untouched.is_empty() {
        let others: Vec<String> = r.untouched.iter().map(|u| format!("{} ({})", u.target, u.status)).collect();
        writeln!(out, "left as they are: {}", others.join(", "))?;
    }
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
