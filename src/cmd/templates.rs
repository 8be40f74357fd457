//! `tayga templates list` and `tayga templates show ID`: the logminer's templates as the
//! Templates page shows them (count, first and last seen, the last hour per minute), and one
//! template with its most recent lines.
//!
//! The last hour is a sparkline on a terminal (`▁▂▃▄▅▆▇█`, each character a few minutes,
//! blank for a quiet stretch), its line count to a pipe, and every minute's count in `--json`.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::logs::{write_lines, LineFormat};
use super::reach;
use super::table::{count, Layout, Table};
use super::time::{format_time, table_time, Clock};
use crate::cli::TemplatesCommand;
use crate::config::Config;
use crate::store::query::logs::{logs, LogSearch};
use crate::store::query::templates::{minute_counts, templates, TemplateCursor};
use crate::store::query::{Window, MAX_LIMIT};
use crate::store::{Store, TemplateRow};
use crate::time::{DAY_NS, HOUR_NS, MINUTE_NS};
use crate::wire::alert::format_id;

/// Characters of the last hour's sparkline on a terminal (five minutes each).
const SPARK_CHARS: usize = 12;

pub async fn run(
    config: &Config,
    sub: &TemplatesCommand,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let now = Clock::from_env()?.now_ns();
    match sub {
        TemplatesCommand::List { service, limit } => list(&store, service.as_deref(), *limit, now, json, out).await,
        TemplatesCommand::Show { id, service, lines } => {
            show(&store, *id, service.as_deref(), *lines, now, json, out).await
        }
    }
    .with_context(|| format!("reading the templates of database `{}`", config.clickhouse.database))
}

/// Up to `limit` templates (0: all), the most frequent first, paging through the store.
async fn read_templates(store: &Store, service: Option<&str>, limit: u64) -> anyhow::Result<Vec<TemplateRow>> {
    let mut all = Vec::new();
    let mut cursor: Option<TemplateCursor> = None;
    loop {
        let want = if limit == 0 { MAX_LIMIT } else { (limit - all.len() as u64).min(MAX_LIMIT) };
        let page = templates(store, service, cursor.as_ref(), want).await?;
        let full = page.len() as u64 == want;
        cursor = page.last().map(|t| (t.count, t.service.clone(), t.template_id));
        all.extend(page);
        if !full || (limit != 0 && all.len() as u64 >= limit) {
            return Ok(all);
        }
    }
}

/// Each template's lines per minute over the hour before `now`, by (service, id).
async fn last_hour(
    store: &Store,
    rows: &[TemplateRow],
    now: u64,
) -> anyhow::Result<HashMap<(String, u64), Vec<(u64, u64)>>> {
    let mut by_template: HashMap<(String, u64), Vec<(u64, u64)>> = HashMap::new();
    if rows.is_empty() {
        return Ok(by_template);
    }
    let mut services: Vec<String> = rows.iter().map(|r| r.service.clone()).collect();
    services.sort();
    services.dedup();
    let ids: Vec<u64> = rows.iter().map(|r| r.template_id).collect();
    let window = Window { from_ns: now.saturating_sub(HOUR_NS), to_ns: now };
    for c in minute_counts(store, window, &services, &ids).await? {
        by_template.entry((c.service, c.template_id)).or_default().push((c.minute * MINUTE_NS, c.count));
    }
    Ok(by_template)
}

/// Per-minute counts of the hour before `now` as `chars` characters, each the busiest minute
/// of its stretch against the busiest of the hour; a stretch without a line is a space.
pub fn sparkline(minutes: &[(u64, u64)], now: u64, chars: usize) -> String {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let from = now.saturating_sub(HOUR_NS);
    let mut cells = vec![0u64; chars.max(1)];
    for (minute, n) in minutes {
        if *minute + MINUTE_NS <= from || *minute >= now {
            continue;
        }
        let at = ((minute.max(&from) - from) as u128 * cells.len() as u128 / HOUR_NS as u128) as usize;
        let cell = &mut cells[at.min(chars.max(1) - 1)];
        *cell = (*cell).max(*n);
    }
    let peak = cells.iter().copied().max().unwrap_or(0).max(1);
    cells.iter().map(|n| if *n == 0 { ' ' } else { LEVELS[((n * 8 - 1) / peak).min(7) as usize] }).collect()
}

#[derive(Debug, Serialize)]
struct Listed<'a> {
    template_id: String,
    service: &'a str,
    template: &'a str,
    count: u64,
    first_seen_ns: u64,
    last_seen_ns: u64,
    first_seen: String,
    last_seen: String,
    masking_version: &'a str,
    /// Lines in the hour before now.
    last_hour: u64,
    /// (minute start ns, lines) of the last hour; minutes without a line left out.
    minutes: &'a [(u64, u64)],
}

impl<'a> Listed<'a> {
    fn of(t: &'a TemplateRow, minutes: &'a [(u64, u64)]) -> Listed<'a> {
        Listed {
            template_id: format_id(t.template_id),
            service: &t.service,
            template: &t.template,
            count: t.count,
            first_seen_ns: t.first_seen_ns,
            last_seen_ns: t.last_seen_ns,
            first_seen: format_time(t.first_seen_ns),
            last_seen: format_time(t.last_seen_ns),
            masking_version: &t.masking_version,
            last_hour: minutes.iter().map(|m| m.1).sum(),
            minutes,
        }
    }
}

async fn list(
    store: &Store,
    service: Option<&str>,
    limit: u64,
    now: u64,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let rows = read_templates(store, service, limit).await?;
    let minutes = last_hour(store, &rows, now).await?;
    let none: Vec<(u64, u64)> = Vec::new();
    let of = |t: &TemplateRow| minutes.get(&(t.service.clone(), t.template_id)).unwrap_or(&none);
    if json {
        let listed: Vec<Listed> = rows.iter().map(|t| Listed::of(t, of(t))).collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&listed)?)?;
        return Ok(());
    }
    if rows.is_empty() {
        match service {
            Some(s) => {
                writeln!(out, "no template of service {s}: templates appear once the logminer has mined its logs")?
            }
            None => writeln!(out, "no template yet: templates appear once the logminer has mined a service's logs")?,
        }
        return Ok(());
    }
    let layout = Layout::current();
    // Short headers, so a terminal of 80 columns leaves the template some room.
    let (first, last) = if layout.is_terminal() { ("first", "last") } else { ("first_seen", "last_seen") };
    let mut table = Table::new(["template_id", "service", "count", first, last, "last_hour", "template"])
        .numeric(&["count"])
        .keep(&["template_id", "count", first, last, "last_hour"]);
    for t in &rows {
        let hour = of(t);
        let last_hour = if layout.is_terminal() {
            sparkline(hour, now, SPARK_CHARS)
        } else {
            hour.iter().map(|m| m.1).sum::<u64>().to_string()
        };
        table.row([
            format_id(t.template_id),
            t.service.clone(),
            count(t.count, layout),
            table_time(t.first_seen_ns, now, layout),
            table_time(t.last_seen_ns, now, layout),
            last_hour,
            t.template.clone(),
        ]);
    }
    write!(out, "{}", table.render(layout))?;
    if limit != 0 && rows.len() as u64 == limit && layout.is_terminal() {
        writeln!(out, "the {limit} most frequent; --limit N shows more, --limit 0 all")?;
    }
    Ok(())
}

/// The template `id` (of `service` when given); an id two services share needs `--service`.
async fn find(store: &Store, id: u64, service: Option<&str>) -> anyhow::Result<TemplateRow> {
    let mut found: Vec<TemplateRow> =
        read_templates(store, service, 0).await?.into_iter().filter(|t| t.template_id == id).collect();
    match found.len() {
        0 => anyhow::bail!(
            "no template {}{}: `tayga templates list` shows the stored ones (an absorbed template is listed as its survivor)",
            format_id(id),
            service.map(|s| format!(" of service {s}")).unwrap_or_default()
        ),
        1 => Ok(found.remove(0)),
        _ => anyhow::bail!(
            "template {} belongs to services {}: say which with --service",
            format_id(id),
            found.iter().map(|t| t.service.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

async fn show(
    store: &Store,
    id: u64,
    service: Option<&str>,
    lines: u64,
    now: u64,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let t = find(store, id, service).await?;
    let minutes =
        last_hour(store, std::slice::from_ref(&t), now).await?.remove(&(t.service.clone(), id)).unwrap_or_default();
    // Its lines from the day before it was last seen: the newest of them.
    let to = t.last_seen_ns.saturating_add(1);
    let window = Window { from_ns: to.saturating_sub(DAY_NS), to_ns: to };
    let query = crate::search::Query { services: vec![t.service.clone()], templates: vec![id], ..Default::default() };
    let search = LogSearch { query, before: None };
    let recent = if lines == 0 { Vec::new() } else { logs(store, window, &search, lines).await? };
    if json {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            template: Listed<'a>,
            lines: Vec<super::logs::LineOut<'a>>,
        }
        let shown =
            Shown { template: Listed::of(&t, &minutes), lines: recent.iter().map(super::logs::LineOut::of).collect() };
        writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        return Ok(());
    }
    let layout = Layout::current();
    let when = |ns| table_time(ns, now, layout);
    // The hour a minute a character where the terminal has the room.
    let spark = match layout {
        Layout::Terminal(Some(width)) => width.saturating_sub(32).clamp(SPARK_CHARS, 60),
        _ => 60,
    };
    writeln!(out, "template {} of {}", format_id(id), t.service)?;
    writeln!(out, "  {}", t.template)?;
    writeln!(out, "lines       {}", count(t.count, layout))?;
    writeln!(out, "first seen  {}", when(t.first_seen_ns))?;
    writeln!(out, "last seen   {}", when(t.last_seen_ns))?;
    writeln!(out, "masking     {}", t.masking_version)?;
    let hour_total: u64 = minutes.iter().map(|m| m.1).sum();
    writeln!(out, "last hour   {} lines  |{}|", count(hour_total, layout), sparkline(&minutes, now, spark))?;
    if lines > 0 {
        writeln!(out)?;
        if recent.is_empty() {
            writeln!(out, "no line of it in the day before it was last seen (retention may have dropped them)")?;
        } else {
            writeln!(out, "its {} most recent lines, newest first:", recent.len())?;
            write_lines(&recent, LineFormat::for_layout(layout, false), out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sparkline_scales_to_the_busiest_stretch_and_leaves_quiet_ones_blank() {
        let now = 100 * HOUR_NS;
        let start = now - HOUR_NS;
        let minutes = [(start, 1), (start + 30 * MINUTE_NS, 8), (now - MINUTE_NS, 4)];
        let line = sparkline(&minutes, now, 12);
        assert_eq!(line.chars().count(), 12);
        assert_eq!(line, "▁     █    ▄");
        assert_eq!(sparkline(&[], now, 5), "     ");
        assert_eq!(sparkline(&[(start - HOUR_NS, 9)], now, 3), "   ", "an older minute is left out");
    }
}
