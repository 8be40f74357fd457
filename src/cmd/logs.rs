//! `tayga logs [QUERY] [--service S] [--since D | --from T --to T] [--follow]`: the stored
//! logs that match a query (the Logs page's query language), or a tail of them.
//!
//! One line per log, like `kubectl logs`: time, service, severity, template id (`-` when not
//! mined yet), the line. No header, so a pipe gets only lines: tab-separated there (the time
//! as RFC 3339, the body on one line), JSON lines with `--json`. Without `--follow` the
//! newest lines come first (a search); with it, the newest `--limit` lines of the window come
//! oldest first, then every new line as it is stored (a tail).
//!
//! Following polls the store each second for the lines of the last [`LATE_NS`] (a line's time
//! is when it happened, and it is stored a moment later), printing those not printed yet. It
//! ends when the reader of the pipe goes away, even while no line comes.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::reach;
use super::table::Layout;
use super::time::{format_time, Clock};
use crate::cli::{LogsArgs, RangeArgs};
use crate::config::Config;
use crate::search::{Query, Scope};
use crate::store::query::logs::{logs, LogSearch, LogWithTemplate};
use crate::store::query::{Window, MAX_LIMIT};
use crate::store::Store;
use crate::time::{HOUR_NS, SECOND_NS};
use crate::wire::alert::format_id;

/// How far back each poll of `--follow` looks: a line stored later than this after it
/// happened is not shown by a follow (a search finds it).
pub const LATE_NS: u64 = 60 * SECOND_NS;
/// Between two polls of `--follow`.
const POLL: Duration = Duration::from_secs(1);

/// A log's severity as a word: its text when the SDK sent one, else the OTLP number's name
/// (`-` for none).
pub fn severity_name(number: u8, text: &str) -> &str {
    match (text, number) {
        ("", 0) => "-",
        ("", n) => crate::otlp::severity_name(n),
        (text, _) => text,
    }
}

/// The window a search covers: `--from`/`--to`, or the `--since` (default 1 h) before now.
pub fn window(range: &RangeArgs, now: u64) -> anyhow::Result<Window> {
    let to = range.to.unwrap_or(now);
    let from = match (range.from, range.since) {
        (Some(from), _) => from,
        (None, Some(since)) => to.saturating_sub(since.as_nanos() as u64),
        (None, None) => to.saturating_sub(HOUR_NS),
    };
    anyhow::ensure!(from < to, "--from ({}) is not before --to ({})", format_time(from), format_time(to));
    Ok(Window { from_ns: from, to_ns: to })
}

/// A log as `--json` prints it (and `templates show --json` its lines).
#[derive(Debug, Serialize)]
pub struct LineOut<'a> {
    pub time: String,
    pub time_ns: u64,
    pub service: &'a str,
    pub severity: &'a str,
    pub severity_number: u8,
    /// `null` when the line is not mined yet.
    pub template_id: Option<String>,
    pub body: &'a str,
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub log_id: String,
    pub attributes: BTreeMap<&'a str, &'a str>,
}

impl<'a> LineOut<'a> {
    pub fn of(l: &'a LogWithTemplate) -> LineOut<'a> {
        LineOut {
            time: format_time(l.log.time_ns),
            time_ns: l.log.time_ns,
            service: &l.log.service,
            severity: severity_name(l.log.severity_number, &l.log.severity_text),
            severity_number: l.log.severity_number,
            template_id: (l.template_id != 0).then(|| format_id(l.template_id)),
            body: &l.log.body,
            trace_id: &l.log.trace_id,
            span_id: &l.log.span_id,
            log_id: format_id(l.log.log_id),
            attributes: l
                .log
                .attr_keys
                .iter()
                .map(String::as_str)
                .zip(l.log.attr_values.iter().map(String::as_str))
                .collect(),
        }
    }
}

/// How lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFormat {
    /// Aligned on a terminal: a short UTC time, the service padded to this width.
    Terminal { service_width: usize },
    /// Tab-separated.
    Pipe,
    /// One JSON object per line.
    Json,
}

impl LineFormat {
    pub fn for_layout(layout: Layout, json: bool) -> LineFormat {
        match (json, layout) {
            (true, _) => LineFormat::Json,
            (false, Layout::Terminal(_)) => LineFormat::Terminal { service_width: 0 },
            (false, Layout::Pipe) => LineFormat::Pipe,
        }
    }
}

/// `2026-12-04 03:00:00.123`: UTC, to the millisecond, without the zone's letter.
fn short_time(ns: u64) -> String {
    let t = format_time(ns);
    t.replacen('T', " ", 1).trim_end_matches('Z').to_string()
}

/// A body on one line: line breaks and tabs as spaces.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}

/// Writes `lines` in their order, one per line, and flushes.
pub fn write_lines(lines: &[LogWithTemplate], format: LineFormat, out: &mut dyn Write) -> anyhow::Result<()> {
    let widest = lines.iter().map(|l| l.log.service.chars().count()).max().unwrap_or(0);
    for l in lines {
        let template = if l.template_id == 0 { "-".to_string() } else { format_id(l.template_id) };
        let severity = severity_name(l.log.severity_number, &l.log.severity_text);
        match format {
            LineFormat::Json => writeln!(out, "{}", serde_json::to_string(&LineOut::of(l))?)?,
            LineFormat::Pipe => writeln!(
                out,
                "{}\t{}\t{}\t{template}\t{}\t{}",
                format_time(l.log.time_ns),
                l.log.service,
                severity,
                l.log.trace_id,
                one_line(&l.log.body)
            )?,
            LineFormat::Terminal { service_width } => {
                let width = service_width.max(widest);
                writeln!(
                    out,
                    "{} {:width$} {:<5} {template:<16} {}",
                    short_time(l.log.time_ns),
                    l.log.service,
                    severity,
                    l.log.body.trim_end().replace('\n', " ⏎ ")
                )?
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// The query `tayga logs` and `tayga traces` search with: the words given, read by the
/// search language for `scope`, with `--service` added.
pub fn parse_query(words: &[String], service: Option<&str>, scope: Scope) -> anyhow::Result<Query> {
    let text = words.join(" ");
    let mut query =
        crate::search::parse(&text, scope).map_err(|e| anyhow::anyhow!("the query `{text}` cannot be read: {e}"))?;
    if let Some(service) = service {
        query.services.push(service.to_string());
    }
    Ok(query)
}

/// One page of matching lines in `window`, newest first, before the `before` cursor.
async fn page(
    store: &Store,
    query: &Query,
    window: Window,
    before: Option<(u64, u64)>,
    limit: u64,
) -> anyhow::Result<Vec<LogWithTemplate>> {
    let search = LogSearch { query: query.clone(), before };
    Ok(logs(store, window, &search, limit).await?)
}

/// Whether the reader of `fd` (a pipe) went away: poll reports an error on a pipe without a
/// reader. Never on a terminal or a file.
fn reader_gone(fd: Option<i32>) -> bool {
    let Some(fd) = fd else { return false };
    let mut poll = libc::pollfd { fd, events: 0, revents: 0 };
    // SAFETY: one valid pollfd, a zero timeout.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

pub async fn run(
    config: &Config,
    args: &LogsArgs,
    timeout: Duration,
    json: bool,
    stdout_fd: Option<i32>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let clock = Clock::from_env()?;
    let window = window(&args.range, clock.now_ns())?;
    let search = parse_query(&args.query, args.service.as_deref(), Scope::Logs)?;
    reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let database = &config.clickhouse.database;
    let mut lines = page(&store, &search, window, None, args.limit)
        .await
        .with_context(|| format!("searching the logs of database `{database}`"))?;
    let layout = Layout::current();
    let mut format = LineFormat::for_layout(layout, json);
    if !args.follow {
        return write_lines(&lines, format, out);
    }
    lines.reverse();
    if let LineFormat::Terminal { service_width } = &mut format {
        *service_width = lines.iter().map(|l| l.log.service.chars().count()).max().unwrap_or(0);
    }
    write_lines(&lines, format, out)?;
    // Lines printed, by id, with their time, forgotten once older than a poll looks back.
    let mut printed: HashMap<u64, u64> = lines.iter().map(|l| (l.log.log_id, l.log.time_ns)).collect();
    // A follow given --to stops there; otherwise it follows now.
    let fixed_end = args.range.to;
    loop {
        let mut slept = Duration::ZERO;
        while slept < POLL {
            if reader_gone(stdout_fd) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            slept += Duration::from_millis(100);
        }
        let now = clock.now_ns();
        let to = fixed_end.unwrap_or(now + SECOND_NS);
        let recent = Window { from_ns: now.saturating_sub(LATE_NS).max(window.from_ns), to_ns: to };
        if recent.from_ns >= recent.to_ns {
            return Ok(());
        }
        let mut fresh = Vec::new();
        let mut before = None;
        loop {
            let batch = page(&store, &search, recent, before, MAX_LIMIT)
                .await
                .with_context(|| format!("following the logs of database `{database}`"))?;
            let full = batch.len() as u64 == MAX_LIMIT;
            before = batch.last().map(|l| (l.log.time_ns, l.log.log_id));
            fresh.extend(batch.into_iter().filter(|l| !printed.contains_key(&l.log.log_id)));
            if !full {
                break;
            }
        }
        fresh.sort_by_key(|l| (l.log.time_ns, l.log.log_id));
        if let LineFormat::Terminal { service_width } = &mut format {
            *service_width =
                (*service_width).max(fresh.iter().map(|l| l.log.service.chars().count()).max().unwrap_or(0));
        }
        write_lines(&fresh, format, out)?;
        printed.extend(fresh.iter().map(|l| (l.log.log_id, l.log.time_ns)));
        printed.retain(|_, t| *t + 2 * LATE_NS >= now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LogRow;

    fn line(service: &str, time_ns: u64, template_id: u64, body: &str) -> LogWithTemplate {
        let log = LogRow {
            log_id: time_ns,
            service: service.into(),
            time_ns,
            severity_number: 17,
            body: body.into(),
            trace_id: "ab".repeat(16),
            attr_keys: vec!["k".into()],
            attr_values: vec!["v".into()],
            attr_types: vec![0],
            ..Default::default()
        };
        LogWithTemplate { log, template_id }
    }

    #[test]
    fn lines_are_one_per_log_in_every_format() {
        let t = 1_764_588_658_250_000_000;
        let lines = [line("checkout", t, 0x9f3c, "declined\tfor\norder 42"), line("db", t + 1, 0, "slow")];
        let mut term = Vec::new();
        write_lines(&lines, LineFormat::Terminal { service_width: 0 }, &mut term).unwrap();
        assert_eq!(
            String::from_utf8(term).unwrap(),
            "2025-12-01 11:30:58.250 checkout ERROR 0000000000009f3c declined\tfor ⏎ order 42\n\
             2025-12-01 11:30:58.250 db       ERROR -                slow\n"
        );
        let mut pipe = Vec::new();
        write_lines(&lines, LineFormat::Pipe, &mut pipe).unwrap();
        let pipe = String::from_utf8(pipe).unwrap();
        assert_eq!(pipe.lines().next().unwrap().split('\t').collect::<Vec<_>>().len(), 6, "{pipe}");
        assert!(pipe.starts_with("2025-12-01T11:30:58.250Z\tcheckout\tERROR\t0000000000009f3c\t"), "{pipe}");
        assert!(pipe.lines().next().unwrap().ends_with("\tdeclined for order 42"), "{pipe}");
        let mut json = Vec::new();
        write_lines(&lines, LineFormat::Json, &mut json).unwrap();
        let docs: Vec<serde_json::Value> =
            String::from_utf8(json).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(docs[0]["template_id"], "0000000000009f3c");
        assert_eq!(docs[1]["template_id"], serde_json::Value::Null);
        assert_eq!(docs[0]["attributes"]["k"], "v");
    }

    #[test]
    fn the_window_is_since_or_from_to() {
        let now = 10 * HOUR_NS;
        let range = |since: Option<u64>, from: Option<u64>, to: Option<u64>| RangeArgs {
            since: since.map(Duration::from_secs),
            from,
            to,
        };
        assert_eq!(window(&range(None, None, None), now).unwrap(), Window { from_ns: 9 * HOUR_NS, to_ns: now });
        assert_eq!(window(&range(Some(60), None, None), now).unwrap().from_ns, now - 60 * SECOND_NS);
        assert_eq!(window(&range(None, Some(5), Some(9)), now).unwrap(), Window { from_ns: 5, to_ns: 9 });
        assert!(window(&range(None, Some(9), Some(5)), now).is_err());
    }
}
