//! `tayga trace ID`: one trace as a waterfall drawn in the terminal, and its logs.
//!
//! On a terminal the waterfall fits its width: a label column (service · operation, indented
//! by depth, a span on the critical path marked `▶`), a bar on the trace's time axis, the
//! span's duration and self time (docs/stories.md), an error span marked `✗`; the logs
//! follow, each at its offset from the trace's start. To a pipe: one tab-separated row per
//! span (offsets, durations and self times in nanoseconds, `critical` true or false) and one
//! per log, each under its header line. `--json`: the spans (with their depth, self time and
//! whether on the critical path, in tree order) and the logs.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use unicode_width::UnicodeWidthStr;

use super::logs::severity_name;
use super::reach;
use super::table::{cut, Layout, Table};
use super::time::format_time;
use crate::cli::TraceArgs;
use crate::config::Config;
use crate::store::query::traces::trace_logs;
use crate::store::{read, LogRow, SpanRow, Store};
use crate::time::duration;

pub async fn run(
    config: &Config,
    args: &TraceArgs,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let id = &args.trace_id;
    let database = &config.clickhouse.database;
    let (spans, logs) = tokio::try_join!(read::fetch_trace(&store, id), trace_logs(&store, id))
        .with_context(|| format!("reading trace {id} of database `{database}`"))?;
    anyhow::ensure!(
        !spans.is_empty() || !logs.is_empty(),
        "no such trace: {id} has no span or log in database `{database}` (it may be older than the retention, \
         or was never sent here); `tayga traces` lists the stored ones"
    );
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&Document::of(id, &spans, &logs))?)?;
        return Ok(());
    }
    out.write_all(render(id, &spans, &logs, Layout::current()).as_bytes())?;
    Ok(())
}

/// A span as the waterfall draws it.
#[derive(Debug, Clone, Copy)]
pub struct Drawn<'a> {
    pub depth: usize,
    pub span: &'a SpanRow,
    /// Its time outside its children (`otlp::critical`).
    pub self_ns: u64,
    /// On the trace's critical path.
    pub critical: bool,
}

/// The spans in tree order (`otlp::tree::tree_order`), each with its depth, self time and
/// whether it is on the critical path.
pub fn tree_order(spans: &[SpanRow]) -> Vec<Drawn<'_>> {
    let timing =
        |i: usize| (spans[i].span_id.as_str(), spans[i].parent_span_id.as_str(), spans[i].start_ns, spans[i].end_ns);
    let self_ns = crate::otlp::critical::self_times(spans.len(), timing);
    let critical = crate::otlp::critical::critical_path(spans.len(), timing).marks(spans.len());
    crate::otlp::tree::tree_order(spans.len(), |i| {
        (spans[i].span_id.as_str(), spans[i].parent_span_id.as_str(), spans[i].start_ns)
    })
    .into_iter()
    .map(|(depth, i)| Drawn { depth, span: &spans[i], self_ns: self_ns[i], critical: critical[i] })
    .collect()
}

#[derive(Debug, Serialize)]
struct Document<'a> {
    trace_id: &'a str,
    spans: Vec<SpanOut<'a>>,
    logs: Vec<LogOut<'a>>,
}

#[derive(Debug, Serialize)]
struct SpanOut<'a> {
    span_id: &'a str,
    parent_span_id: &'a str,
    depth: usize,
    service: &'a str,
    operation: &'a str,
    start_ns: u64,
    end_ns: u64,
    duration_ns: u64,
    start: String,
    /// The OTLP status code: 0 unset, 1 ok, 2 error.
    status_code: u8,
    status_message: &'a str,
    attributes: BTreeMap<&'a str, &'a str>,
    self_ns: u64,
    critical: bool,
}

#[derive(Debug, Serialize)]
struct LogOut<'a> {
    time_ns: u64,
    time: String,
    service: &'a str,
    severity: String,
    span_id: &'a str,
    body: &'a str,
}

impl<'a> Document<'a> {
    fn of(id: &'a str, spans: &'a [SpanRow], logs: &'a [LogRow]) -> Document<'a> {
        Document {
            trace_id: id,
            spans: tree_order(spans)
                .into_iter()
                .map(|Drawn { depth, span: s, self_ns, critical }| SpanOut {
                    span_id: &s.span_id,
                    parent_span_id: &s.parent_span_id,
                    depth,
                    service: &s.service,
                    operation: &s.name,
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    duration_ns: s.duration_ns,
                    start: format_time(s.start_ns),
                    status_code: s.status_code,
                    status_message: &s.status_message,
                    attributes: s
                        .attr_keys
                        .iter()
                        .map(String::as_str)
                        .zip(s.attr_values.iter().map(String::as_str))
                        .collect(),
                    self_ns,
                    critical,
                })
                .collect(),
            logs: logs
                .iter()
                .map(|l| LogOut {
                    time_ns: l.time_ns,
                    time: format_time(l.time_ns),
                    service: &l.service,
                    severity: severity_name(l.severity_number, &l.severity_text).to_string(),
                    span_id: &l.span_id,
                    body: &l.body,
                })
                .collect(),
        }
    }
}

/// The trace's first start and last end (over spans, or logs when it has no span).
fn bounds(spans: &[SpanRow], logs: &[LogRow]) -> (u64, u64) {
    let starts = spans.iter().map(|s| s.start_ns).chain(logs.iter().map(|l| l.time_ns));
    let ends = spans.iter().map(|s| s.end_ns.max(s.start_ns)).chain(logs.iter().map(|l| l.time_ns));
    let start = starts.min().unwrap_or(0);
    (start, ends.max().unwrap_or(start).max(start))
}

/// The whole output for `layout` (pure, so its shape is tested without a store).
pub fn render(id: &str, spans: &[SpanRow], logs: &[LogRow], layout: Layout) -> String {
    match layout {
        Layout::Pipe => render_pipe(spans, logs),
        Layout::Terminal(width) => render_terminal(id, spans, logs, width.unwrap_or(160)),
    }
}

fn render_pipe(spans: &[SpanRow], logs: &[LogRow]) -> String {
    let (start, _) = bounds(spans, logs);
    let mut table = Table::new([
        "span_id",
        "parent_span_id",
        "depth",
        "service",
        "operation",
        "offset_ns",
        "duration_ns",
        "status",
        "self_ns",
        "critical",
    ]);
    for Drawn { depth, span: s, self_ns, critical } in tree_order(spans) {
        table.row([
            s.span_id.clone(),
            s.parent_span_id.clone(),
            depth.to_string(),
            s.service.clone(),
            s.name.clone(),
            s.start_ns.saturating_sub(start).to_string(),
            s.duration_ns.to_string(),
            status_name(s.status_code).to_string(),
            self_ns.to_string(),
            critical.to_string(),
        ]);
    }
    let mut text = if spans.is_empty() { String::new() } else { table.render(Layout::Pipe) };
    if !logs.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        let mut table = Table::new(["time", "offset_ns", "service", "severity", "span_id", "body"]);
        for l in logs {
            table.row([
                format_time(l.time_ns),
                l.time_ns.saturating_sub(start).to_string(),
                l.service.clone(),
                severity_name(l.severity_number, &l.severity_text).to_string(),
                l.span_id.clone(),
                one_line(&l.body),
            ]);
        }
        text.push_str(&table.render(Layout::Pipe));
    }
    text
}

fn status_name(code: u8) -> &'static str {
    match code {
        1 => "ok",
        2 => "error",
        _ => "unset",
    }
}

/// A body on one line: its line breaks and tabs as spaces.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}

/// Columns before the label: the critical path's mark and a space.
const MARK_WIDTH: usize = 2;
/// Columns after the bar: a space, the duration, a space, the self time, the error mark.
const DURATION_WIDTH: usize = 20;
/// A duration's column (`999.9 ms` is the widest).
const TIME_WIDTH: usize = 8;

fn render_terminal(id: &str, spans: &[SpanRow], logs: &[LogRow], width: usize) -> String {
    let width = width.max(40);
    let (start, end) = bounds(spans, logs);
    let total = end - start;
    let errors = spans.iter().filter(|s| s.status_code == 2).count();
    let order = tree_order(spans);
    let mut text = format!("trace {id}\n");
    if let Some(Drawn { span: root, .. }) = order.first() {
        let summary = format!(
            "{} · {} · {} · {} · {} · started {}",
            root.service,
            root.name,
            duration(total as f64),
            plural(spans.len(), "span"),
            plural(errors, "error"),
            format_time(start)
        );
        text.push_str(&cut(&summary, width));
        text.push('\n');
    }
    if !order.is_empty() {
        let labels: Vec<String> = order
            .iter()
            .map(|d| format!("{}{} · {}", "  ".repeat(d.depth.min(10)), d.span.service, d.span.name))
            .collect();
        let longest = labels.iter().map(|l| l.width()).max().unwrap_or(0);
        let label_width = longest.min(width * 2 / 5 - MARK_WIDTH).max(12);
        let bar_width = width.saturating_sub(MARK_WIDTH + label_width + 2 + DURATION_WIDTH).max(8);
        let col =
            |t: u64| (t.saturating_sub(start) as f64 / total.max(1) as f64 * bar_width as f64).min(bar_width as f64);
        // The axis: 0 under the bar's start, the total at its end, the middle between.
        let mut axis = vec![' '; bar_width];
        let mid = duration(total as f64 / 2.0);
        let end_label = duration(total as f64);
        place(&mut axis, 0, "0");
        place(&mut axis, (bar_width / 2).saturating_sub(mid.chars().count() / 2), &mid);
        place(&mut axis, bar_width.saturating_sub(end_label.chars().count()), &end_label);
        text.push_str(&format!(
            "{:w$}  {} {:>TIME_WIDTH$} {:>TIME_WIDTH$}\n",
            "",
            axis.iter().collect::<String>(),
            "total",
            "self",
            w = MARK_WIDTH + label_width
        ));
        for (d, label) in order.iter().zip(&labels) {
            let s = d.span;
            let from = col(s.start_ns).floor() as usize;
            let to = (col(s.end_ns.max(s.start_ns)).ceil() as usize).clamp(from + 1, bar_width.max(from + 1));
            let from = from.min(bar_width - 1);
            let to = to.min(bar_width);
            let mut bar = " ".repeat(from);
            bar.push_str(&"█".repeat(to - from));
            bar.push_str(&" ".repeat(bar_width - to));
            let mark = if s.status_code == 2 { " ✗" } else { "" };
            let path = if d.critical { "▶ " } else { "  " };
            let shown = cut(label, label_width);
            let pad = label_width - shown.width();
            text.push_str(&format!(
                "{path}{shown}{}  {bar} {:>TIME_WIDTH$} {:>TIME_WIDTH$}{mark}\n",
                " ".repeat(pad),
                duration(s.duration_ns as f64),
                duration(d.self_ns as f64)
            ));
        }
        let legend = "▶ on the critical path: what the trace waited on · self: time outside children";
        text.push_str(&cut(legend, width));
        text.push('\n');
    }
    if !logs.is_empty() {
        text.push_str(&format!("\n{}\n", plural(logs.len(), "log")));
        for l in logs {
            let line = format!(
                "+{:<9} {} {:<5} {}",
                duration(l.time_ns.saturating_sub(start) as f64),
                l.service,
                severity_name(l.severity_number, &l.severity_text),
                one_line(&l.body)
            );
            text.push_str(&cut(&line, width));
            text.push('\n');
        }
    }
    text
}

/// Writes `label` into `row` from `at`, within the row.
fn place(row: &mut [char], at: usize, label: &str) {
    for (i, c) in label.chars().enumerate() {
        if let Some(cell) = row.get_mut(at + i) {
            *cell = c;
        }
    }
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn span(id: &str, parent: &str, service: &str, name: &str, start: u64, end: u64, status: u8) -> SpanRow {
        SpanRow {
            trace_id: "a".repeat(32),
            status_code: status,
            ..SpanRow::sketch(id, parent, service, name, start, end)
        }
    }

    fn sample() -> (Vec<SpanRow>, Vec<LogRow>) {
        let ms = 1_000_000;
        let t0 = 1_764_588_600_000_000_000;
        let spans = vec![
            span("c", "b", "db", "SELECT orders", t0 + 20 * ms, t0 + 140 * ms, 0),
            span("a", "", "checkout", "POST /pay", t0, t0 + 400 * ms, 2),
            span("b", "a", "payments", "charge", t0 + 10 * ms, t0 + 300 * ms, 2),
            span("d", "a", "checkout", "render receipt", t0 + 310 * ms, t0 + 390 * ms, 0),
        ];
        let logs = vec![LogRow {
            service: "payments".into(),
            time_ns: t0 + 150 * ms,
            severity_number: 17,
            body: "payment declined\tfor order 42".into(),
            span_id: "b".into(),
            ..Default::default()
        }];
        (spans, logs)
    }

    #[test]
    fn spans_come_parent_first_and_every_span_once() {
        let (mut spans, _) = sample();
        spans.push(span("x", "y", "s", "cycle", 1, 2, 0));
        spans.push(span("y", "x", "s", "cycle", 1, 2, 0));
        spans.push(span("o", "missing", "s", "orphan", 1, 2, 0));
        let order: Vec<(usize, &str)> = tree_order(&spans).iter().map(|d| (d.depth, d.span.span_id.as_str())).collect();
        assert_eq!(order[..4], [(0, "o"), (0, "a"), (1, "b"), (2, "c")]);
        assert_eq!(order.len(), spans.len());
    }

    #[test]
    fn the_waterfall_fits_the_terminal_and_marks_errors() {
        let (spans, logs) = sample();
        for width in [60, 80, 132] {
            let text = render(&"a".repeat(32), &spans, &logs, Layout::Terminal(Some(width)));
            for line in text.lines() {
                assert!(line.width() <= width, "{width}: {line:?} is {} wide", line.width());
            }
            assert_eq!(text.matches('✗').count(), 2, "{text}");
            assert!(text.contains("+150.0 ms  payments ERROR payment declined for order 42"), "{text}");
        }
        let text = render(&"a".repeat(32), &spans, &logs, Layout::Terminal(Some(80)));
        let rows: Vec<&str> = text.lines().skip(3).take(4).collect();
        assert!(
            rows[0].starts_with("▶ checkout · POST /pay") && rows[3].starts_with("▶   checkout · render receipt"),
            "{text}"
        );
        // The root's bar spans the whole axis; a child's starts later.
        let bar_start = |row: &str| row.find('█').unwrap();
        assert!(bar_start(rows[2]) > bar_start(rows[0]), "{text}");
    }

    #[test]
    fn the_critical_path_is_marked_and_each_span_has_its_self_time() {
        // A second, shorter call beside the charge: the trace did not wait on it.
        let (mut spans, logs) = sample();
        let t0 = spans[1].start_ns;
        spans.push(span("e", "a", "fraud", "score", t0 + 10_000_000, t0 + 50_000_000, 0));
        let text = render(&"a".repeat(32), &spans, &logs, Layout::Terminal(Some(80)));
        let marked: Vec<&str> = text.lines().filter(|l| l.starts_with("▶ ") && l.contains('█')).collect();
        assert_eq!(marked.len(), 4, "{text}");
        assert!(text.lines().any(|l| l.starts_with("    fraud · score")), "{text}");
        // The charge: 290 ms, of which its query took 120.
        let charge = text.lines().find(|l| l.contains("payments · charge")).unwrap();
        assert!(charge.ends_with("290.0 ms 170.0 ms ✗"), "{charge}");
        assert!(text.contains("▶ on the critical path"), "{text}");
    }

    #[test]
    fn a_pipe_gets_tab_separated_rows() {
        let (spans, logs) = sample();
        let text = render("t", &spans, &logs, Layout::Pipe);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "span_id\tparent_span_id\tdepth\tservice\toperation\toffset_ns\tduration_ns\tstatus\tself_ns\tcritical"
        );
        assert_eq!(lines[1], "a\t\t0\tcheckout\tPOST /pay\t0\t400000000\terror\t30000000\ttrue");
        assert!(text.contains("\tpayments\tERROR\tb\tpayment declined for order 42"), "{text}");
    }
}
