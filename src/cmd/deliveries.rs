//! `tayga deliveries show --alert-id ID`: the latest state of every (alert, target) pair of
//! one alert in `notifier_deliveries`. An alert with no rows is not an error (it may not
//! have been read yet, or was skipped as stale or by kind): it prints a sentence (or `[]`
//! with `--json`) and exits 0. An id that is not 1–16 hex digits exits 1.

use std::io::Write;

use anyhow::Context;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

use crate::alert::{format_id, parse_id};
use crate::cli::DeliveriesCommand;
use crate::config::Config;
use crate::daemon::notifier::store::latest_for_alert;
use crate::store::{DeliveryRow, Store};

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
    let DeliveriesCommand::Show { alert_id } = sub;
    let id = parse_id(alert_id)?;
    let store = Store::new(&config.clickhouse);
    let rows = latest_for_alert(&store, id).await.with_context(|| {
        format!("reading deliveries of alert {} from database `{}`", format_id(id), config.clickhouse.database)
    })?;
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
    writeln!(out, "alert {}", format_id(id))?;
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "target",
        "status",
        "attempts",
        "last_error",
        "created",
        "updated",
    ]);
    for s in &shown {
        table.add_row([
            s.target.to_string(),
            s.status.to_string(),
            s.attempts.to_string(),
            s.last_error.to_string(),
            s.created_at.clone(),
            s.updated_at.clone(),
        ]);
    }
    writeln!(out, "{table}")?;
    Ok(())
}

/// Nanoseconds since the epoch as RFC 3339 UTC with milliseconds: `2026-11-29T10:00:00.123Z`.
pub fn format_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let millis = (ns % 1_000_000_000) / 1_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time(1_445_412_480_123_456_789), "2015-10-21T07:28:00.123Z");
        assert_eq!(format_time(951_782_400_000_000_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_time(4_102_444_799_000_000_000), "2099-12-31T23:59:59.000Z");
    }

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
