//! `tayga silences add|list|expire`: operators' silences (docs/notifier.md, "Silences"),
//! through `store::silences`, the functions the API's silence endpoints call. A silence is
//! stored in ClickHouse, so every notifier replica honours it and a restart forgets none.
//! A refusal (no such silence, one that already ended) is one line on stderr, exit 1.

use std::io::Write;

use anyhow::Context;
use serde::Serialize;

use crate::cli::{SilencesAddArgs, SilencesCommand};
use crate::cmd::table::{Layout, Table};
use crate::cmd::time::{format_time, table_time, Clock};
use crate::config::Config;
use crate::store::silences::{self, NewSilence, SilenceError};
use crate::store::{SilenceRow, Store};
use crate::wire::alert::format_id;

/// A silence as the command prints it (`--json`: one object per silence).
#[derive(Debug, Serialize)]
struct Shown<'a> {
    silence_id: String,
    /// `active`, `pending`, `ended` (ran its course) or `expired` (ended early).
    state: &'static str,
    service: &'a str,
    /// Empty: every kind.
    kind: &'a str,
    /// Empty: every template.
    template_id: String,
    starts_ns: u64,
    ends_ns: u64,
    starts_at: String,
    ends_at: String,
    comment: &'a str,
    created_by: &'a str,
    expired_by: &'a str,
}

impl<'a> Shown<'a> {
    fn of(s: &'a SilenceRow, now_ns: u64) -> Shown<'a> {
        Shown {
            silence_id: format_id(s.silence_id),
            state: s.state(now_ns),
            service: &s.service,
            kind: &s.kind,
            template_id: if s.template_id == 0 { String::new() } else { format_id(s.template_id) },
            starts_ns: s.starts_ns,
            ends_ns: s.ends_ns,
            starts_at: format_time(s.starts_ns),
            ends_at: format_time(s.ends_ns),
            comment: &s.comment,
            created_by: &s.created_by,
            expired_by: &s.expired_by,
        }
    }
}

pub async fn run(
    config: &Config,
    sub: &SilencesCommand,
    timeout: std::time::Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    super::reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let now = Clock::from_env()?.now_ns();
    let database = &config.clickhouse.database;
    match sub {
        SilencesCommand::Add(args) => {
            let row = silences::add(&store, &new_silence(args), now).await.map_err(|e| told(e, database))?;
            let said = format!("are not delivered until {}", format_time(row.ends_ns));
            write_one(&row, "added", &said, now, json, out)
        }
        SilencesCommand::List { all } => {
            let rows = silences::list(&store, if *all { 0 } else { now })
                .await
                .with_context(|| format!("reading silences from database `{database}`"))?;
            write_list(&rows, *all, now, json, out)
        }
        SilencesCommand::Expire { id } => {
            let row = silences::expire(&store, *id, &super::deliveries::operator(), now)
                .await
                .map_err(|e| told(e, database))?;
            write_one(&row, "expired", "are delivered again from their next update", now, json, out)
        }
    }
}

/// One silence just added or expired: `silence <id> <done>: <what it matches> <said>`, or
/// the silence as one JSON object.
fn write_one(
    row: &SilenceRow,
    done: &str,
    said: &str,
    now: u64,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&Shown::of(row, now))?)?;
    } else {
        writeln!(out, "silence {} {done}: {} {said}", format_id(row.silence_id), matched(row))?;
    }
    Ok(())
}

fn new_silence(args: &SilencesAddArgs) -> NewSilence {
    NewSilence {
        service: args.service.clone(),
        kind: args.kind.map(|k| k.as_str().to_string()).unwrap_or_default(),
        template_id: args.template.unwrap_or(0),
        duration_ns: u64::try_from(args.duration.as_nanos()).unwrap_or(u64::MAX),
        comment: args.comment.clone(),
        by: super::deliveries::operator(),
    }
}

/// A refusal as it is (it says what to do); a store failure with the database it concerned.
fn told(e: SilenceError, database: &str) -> anyhow::Error {
    if e.is_refusal() {
        e.into()
    } else {
        anyhow::Error::new(e).context(format!("writing a silence in database `{database}`"))
    }
}

/// What a silence matches, in words: "alerts of service checkout (kind spike, template …)".
fn matched(s: &SilenceRow) -> String {
    let mut only = Vec::new();
    if !s.kind.is_empty() {
        only.push(format!("kind {}", s.kind));
    }
    if s.template_id != 0 {
        only.push(format!("template {}", format_id(s.template_id)));
    }
    let only = if only.is_empty() { String::new() } else { format!(" ({})", only.join(", ")) };
    format!("alerts of service {}{only}", s.service)
}

/// What a silence matches beyond its service: `any`, a kind, a template, or both.
fn matches_column(s: &SilenceRow) -> String {
    match (s.kind.as_str(), s.template_id) {
        ("", 0) => "any".into(),
        (kind, 0) => kind.into(),
        ("", t) => format!("template {}", format_id(t)),
        (kind, t) => format!("{kind} of {}", format_id(t)),
    }
}

/// The silences as a table (or a JSON array), or a sentence when there are none.
fn write_list(rows: &[SilenceRow], all: bool, now: u64, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        let shown: Vec<Shown> = rows.iter().map(|s| Shown::of(s, now)).collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        return Ok(());
    }
    if rows.is_empty() {
        let which = if all { "no silence was ever made" } else { "no silence is running (--all lists ended ones)" };
        writeln!(out, "{which}")?;
        return Ok(());
    }
    let layout = Layout::current();
    let time = |ns: u64| table_time(ns, now, layout);
    // Who made or expired a silence is in --json; the table keeps what an operator acts on.
    let mut table = Table::new(["id", "state", "service", "matches", "ends", "comment"]).keep(&["id", "state"]);
    for s in rows {
        let shown = Shown::of(s, now);
        table.row([
            shown.silence_id.clone(),
            shown.state.to_string(),
            s.service.clone(),
            matches_column(s),
            time(s.ends_ns),
            s.comment.clone(),
        ]);
    }
    write!(out, "{}", table.render(layout))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_silences_is_a_sentence_or_an_empty_array() {
        let mut out = Vec::new();
        write_list(&[], false, 0, false, &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().starts_with("no silence is running"));
        let mut out = Vec::new();
        write_list(&[], true, 0, true, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().trim(), "[]");
    }

    #[test]
    fn a_silence_says_what_it_matches() {
        let s = SilenceRow { service: "web".into(), kind: "spike".into(), template_id: 0xab, ..Default::default() };
        assert_eq!(matched(&s), "alerts of service web (kind spike, template 00000000000000ab)");
        let s = SilenceRow { service: "web".into(), ..Default::default() };
        assert_eq!(matched(&s), "alerts of service web");
    }
}
