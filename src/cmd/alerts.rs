//! `tayga alerts list` and `tayga alerts republish` (docs/logminer-commands.md).
//!
//! `list` shows the newest version of each alert with two facts the alert document does not
//! carry: whether it is active (its `last_at` within `store::logminer::ACTIVE_WINDOW_NS`;
//! docs/design.md#active-alerts: a silence is refreshed only while its service logs, so an
//! unrefreshed one is inactive) and whether that version reached the alerts topic.
//!
//! `republish` sends through `workflow::alerts::publish_and_mark`, the logminer's own path, so a
//! publication mark means the same whoever wrote it.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::reach;
use super::table::{count, shown_of, Layout, Table};
use crate::bus::producer::Publisher;
use crate::cli::{AlertsCommand, AlertsListArgs, AlertsRepublishArgs};
use crate::cmd::time::{format_time, format_time_ago, table_time, Clock};
use crate::config::Config;
use crate::store::logminer::{active_cutoff_ns, alerts, count_alerts, published_versions, unmarked_alerts, AlertQuery};
use crate::store::{silences, AlertRow, Store};
use crate::wire::alert::{format_id, Alert};
use crate::workflow::alerts::publish_and_mark;

pub async fn run(
    config: &Config,
    sub: &AlertsCommand,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    match sub {
        AlertsCommand::List(args) => list(config, args, timeout, json, out, err).await,
        AlertsCommand::Republish(args) => republish(config, args, timeout, json, out).await,
    }
}

/// One alert as `alerts list --json` prints it: the alert document, its times as RFC 3339
/// beside the nanoseconds (`first_at`, `first_at_ns`), plus two fields.
#[derive(Debug)]
struct Listed {
    alert: Alert,
    active: bool,
    published: bool,
    /// The running operator's silence that holds its deliveries back now.
    silenced_by: Option<u64>,
}

impl Serialize for Listed {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut doc = serde_json::to_value(&self.alert).map_err(serde::ser::Error::custom)?;
        if let Some(obj) = doc.as_object_mut() {
            for (key, ns) in [("first_at", self.alert.first_at), ("last_at", self.alert.last_at)] {
                obj.insert(key.into(), format_time(ns).into());
                obj.insert(format!("{key}_ns"), ns.into());
            }
            obj.insert("active".into(), self.active.into());
            obj.insert("published".into(), self.published.into());
            obj.insert("silenced_by".into(), self.silenced_by.map(format_id).unwrap_or_default().into());
        }
        doc.serialize(serializer)
    }
}

async fn list(
    config: &Config,
    args: &AlertsListArgs,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    // One reading of the clock: the active rule and the ages in the table agree.
    let now = Clock::from_env()?.now_ns();
    let cutoff = active_cutoff_ns(now);
    reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let query = AlertQuery {
        service: args.service.clone(),
        kind: args.kind,
        last_at_since_ns: args.active.then_some(cutoff),
        limit: (args.limit > 0).then_some(args.limit),
        ..Default::default()
    };
    let database = &config.clickhouse.database;
    let rows = alerts(&store, &query).await.with_context(|| format!("reading alerts of database `{database}`"))?;
    // Only when the limit may have cut: how many there are in all, for "100 of N shown".
    let total = match query.limit {
        Some(limit) if rows.len() as u64 >= limit => {
            let all = AlertQuery { limit: None, ..query.clone() };
            count_alerts(&store, &all).await.with_context(|| format!("counting alerts of database `{database}`"))?
        }
        _ => rows.len() as u64,
    };
    let marks = published_versions(&store, &rows).await.context("reading publication marks")?;
    let silences = silences::list(&store, now).await.context("reading the running silences")?;
    let listed = rows
        .iter()
        .map(|row| {
            let alert =
                Alert::from_row(row).with_context(|| format!("alert {} in log_alerts", format_id(row.alert_id)))?;
            Ok(Listed {
                active: row.last_at >= cutoff,
                published: marks.contains(&(row.alert_id, row.updated_ns)),
                silenced_by: silences::matching(&silences, &alert, now).map(|s| s.silence_id),
                alert,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    write_list(&listed, total, now, json, out, err)
}

fn write_list(
    listed: &[Listed],
    total: u64,
    now: u64,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(listed)?)?;
        return Ok(());
    }
    if listed.is_empty() {
        writeln!(out, "no alerts match")?;
        return Ok(());
    }
    let layout = Layout::current();
    if let Layout::Terminal(Some(_)) = layout {
        write_narrow(listed, now, layout, out)?;
    } else {
        write_whole(listed, now, layout, out)?;
    }
    if let Some(cut) = shown_of(listed.len(), total, "--limit N shows more, --limit 0 all") {
        // On stderr to a pipe, so the rows stay rows.
        if layout.is_terminal() {
            writeln!(out, "{cut}")?;
        } else {
            writeln!(err, "{cut}")?;
        }
    }
    Ok(())
}

/// A terminal that cuts to fit: what an operator scans for (id to act on, kind, service, how
/// long ago, how often, the template) with the template last, so it takes the rest of the
/// line. The list is most recently active first, so the active alerts are the first rows, and
/// a line says how many; first_at and published are in --wide, --json and pipes.
fn write_narrow(listed: &[Listed], now: u64, layout: Layout, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut table = Table::new(["alert_id", "kind", "service", "last_seen", "count", "template"])
        .numeric(&["count"])
        .keep(&["alert_id", "kind", "last_seen", "count"]);
    for l in listed {
        let a = &l.alert;
        table.row([
            format_id(a.alert_id),
            a.kind.to_string(),
            a.service.clone(),
            table_time(a.last_at, now, layout),
            count(a.count, layout),
            a.template.clone(),
        ]);
    }
    write!(out, "{}", table.render(layout))?;
    for l in listed {
        if let Some(silence) = l.silenced_by {
            writeln!(
                out,
                "{}: silenced by {} (its updates reach no target; tayga silences list)",
                format_id(l.alert.alert_id),
                format_id(silence)
            )?;
        }
    }
    let active = listed.iter().filter(|l| l.active).count();
    let rule = format!("last seen within {}m", crate::store::logminer::ACTIVE_WINDOW_NS / 60_000_000_000);
    match active {
        0 => writeln!(out, "none active ({rule}); --wide adds first_at and published")?,
        n if n == listed.len() => writeln!(out, "all active ({rule}); --wide adds first_at and published")?,
        n => writeln!(out, "the first {n} active ({rule}); --wide adds first_at and published")?,
    }
    Ok(())
}

/// Every column: on a terminal with --wide, times carry their age; to a pipe they stay plain
/// RFC 3339, every value whole. A `silenced_by` column appears when a silence holds one back.
fn write_whole(listed: &[Listed], now: u64, layout: Layout, out: &mut dyn Write) -> anyhow::Result<()> {
    let time = |ns: u64| if layout.is_terminal() { format_time_ago(ns, now) } else { format_time(ns) };
    let silenced = listed.iter().any(|l| l.silenced_by.is_some());
    let mut header =
        vec!["alert_id", "kind", "service", "template", "first_at", "last_at", "count", "active", "published"];
    if silenced {
        header.push("silenced_by");
    }
    let mut table = Table::new(header).numeric(&["count"]);
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    for l in listed {
        let a = &l.alert;
        let mut cells = vec![
            format_id(a.alert_id),
            a.kind.to_string(),
            a.service.clone(),
            a.template.clone(),
            time(a.first_at),
            time(a.last_at),
            count(a.count, layout),
            yes_no(l.active),
            yes_no(l.published),
        ];
        if silenced {
            cells.push(l.silenced_by.map(format_id).unwrap_or_default());
        }
        table.row(cells);
    }
    write!(out, "{}", table.render(layout))?;
    Ok(())
}

#[derive(Debug, Serialize)]
struct Republished<'a> {
    topic: &'a str,
    published: usize,
    /// Why publication stopped early, if it did.
    error: Option<String>,
}

async fn republish(
    config: &Config,
    args: &AlertsRepublishArgs,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let topic = config.names().alerts;
    let database = &config.clickhouse.database;
    // What needs only ClickHouse comes first: an unknown id is said at once, whatever the
    // broker's state.
    reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let one = match args.alert_id {
        Some(id) => {
            let rows = alerts(&store, &AlertQuery { alert_id: Some(id), ..Default::default() })
                .await
                .with_context(|| format!("reading alert {} of database `{database}`", format_id(id)))?;
            anyhow::ensure!(
                !rows.is_empty(),
                "no such alert: {} is not in log_alerts of database `{database}`",
                format_id(id)
            );
            Some(rows)
        }
        None => None,
    };
    // Say plainly that the topic is missing instead of failing each send after a timeout.
    reach::topic(&config.kafka, &topic, timeout).await?;
    let publisher = Publisher::new(&config.kafka).context("creating a Kafka producer")?;

    let (published, error) = match one {
        Some(rows) => {
            let p = publish_and_mark(&publisher, &store, &topic, &rows).await;
            (p.published, p.error.map(|e| e.to_string()))
        }
        None => {
            let window =
                args.since.unwrap_or(std::time::Duration::from_secs(config.logminer.republish_window_hours * 3600));
            let since = Clock::from_env()?.now_ns().saturating_sub(window.as_nanos() as u64);
            republish_unmarked(&publisher, &store, &topic, since, config.logminer.republish_max_per_pass)
                .await
                .with_context(|| format!("reading unpublished alerts of database `{database}`"))?
        }
    };

    let report = Republished { topic: &topic, published, error };
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        let noun = if published == 1 { "alert" } else { "alerts" };
        writeln!(out, "published {published} {noun} to {topic}")?;
    }
    match report.error {
        None => Ok(()),
        Some(e) => Err(anyhow::anyhow!(
            "publication stopped after {published} {}: {e}; the rest stay unmarked and are sent by the next republish",
            if published == 1 { "alert" } else { "alerts" }
        )),
    }
}

/// Every unmarked alert updated at or after `since_ns`, oldest first, in chunks of `chunk`
/// (the logminer's bound per pass, docs/design.md#republication), until none is left or a
/// send fails. Returns how many were published and why it stopped early.
async fn republish_unmarked(
    publisher: &Publisher,
    store: &Store,
    topic: &str,
    since_ns: u64,
    chunk: u64,
) -> Result<(usize, Option<String>), crate::store::StoreError> {
    let mut published = 0;
    loop {
        let batch: Vec<AlertRow> = unmarked_alerts(store, None, since_ns, chunk.max(1)).await?;
        if batch.is_empty() {
            return Ok((published, None));
        }
        let p = publish_and_mark(publisher, store, topic, &batch).await;
        published += p.published;
        if let Some(e) = p.error {
            return Ok((published, Some(e.to_string())));
        }
        // A short chunk was the last: the next read would find only alerts updated since.
        if (batch.len() as u64) < chunk.max(1) {
            return Ok((published, None));
        }
    }
}
