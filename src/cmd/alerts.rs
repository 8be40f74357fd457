//! `tayga alerts list` and `tayga alerts republish` (docs/logminer-commands.md).
//!
//! `list` shows the newest version of each alert with two facts the alert document does not
//! carry: whether it is active (its `last_at` within `store::logminer::ACTIVE_WINDOW_NS`; seed
//! 000: a silence is refreshed only while its service logs, so an unrefreshed one is
//! inactive) and whether that version reached the alerts topic.
//!
//! `republish` sends through `bus::alerts::publish_and_mark`, the logminer's own path, so a
//! publication mark means the same whoever wrote it.

use std::io::Write;

use anyhow::Context;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

use crate::bus::alerts::publish_and_mark;
use crate::bus::producer::Publisher;
use crate::bus::topics::partition_counts;
use crate::cli::{AlertsCommand, AlertsListArgs, AlertsRepublishArgs};
use crate::cmd::time::{format_time, Clock};
use crate::config::Config;
use crate::store::logminer::{active_cutoff_ns, alerts, published_versions, unmarked_alerts, AlertQuery};
use crate::store::{AlertRow, Store};
use crate::wire::alert::{format_id, Alert};

pub async fn run(config: &Config, sub: &AlertsCommand, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    match sub {
        AlertsCommand::List(args) => list(config, args, json, out).await,
        AlertsCommand::Republish(args) => republish(config, args, json, out).await,
    }
}

/// One alert as `alerts list --json` prints it: the alert document plus two fields.
#[derive(Debug, Serialize)]
struct Listed {
    #[serde(flatten)]
    alert: Alert,
    active: bool,
    published: bool,
}

async fn list(config: &Config, args: &AlertsListArgs, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let cutoff = active_cutoff_ns(Clock::from_env()?.now_ns());
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
    let marks = published_versions(&store, &rows).await.context("reading publication marks")?;
    let listed = rows
        .iter()
        .map(|row| {
            let alert =
                Alert::from_row(row).with_context(|| format!("alert {} in log_alerts", format_id(row.alert_id)))?;
            Ok(Listed {
                alert,
                active: row.last_at >= cutoff,
                published: marks.contains(&(row.alert_id, row.updated_ns)),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    write_list(&listed, json, out)
}

/// Template texts longer than this are cut in the table (`--json` has them whole).
const TEMPLATE_WIDTH: usize = 60;

fn write_list(listed: &[Listed], json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(listed)?)?;
        return Ok(());
    }
    if listed.is_empty() {
        writeln!(out, "no alerts match")?;
        return Ok(());
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "alert_id",
        "kind",
        "service",
        "template",
        "first_at",
        "last_at",
        "count",
        "active",
        "published",
    ]);
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    for l in listed {
        let a = &l.alert;
        let template = match a.template.char_indices().nth(TEMPLATE_WIDTH) {
            Some((cut, _)) => format!("{}…", &a.template[..cut]),
            None => a.template.clone(),
        };
        table.add_row([
            format_id(a.alert_id),
            a.kind.to_string(),
            a.service.clone(),
            template,
            format_time(a.first_at),
            format_time(a.last_at),
            a.count.to_string(),
            yes_no(l.active),
            yes_no(l.published),
        ]);
    }
    writeln!(out, "{table}")?;
    Ok(())
}

#[derive(Debug, Serialize)]
struct Republished<'a> {
    topic: &'a str,
    published: usize,
    /// Why publication stopped early, if it did.
    error: Option<String>,
}

async fn republish(config: &Config, args: &AlertsRepublishArgs, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let store = Store::new(&config.clickhouse);
    let topic = config.names().alerts;
    let database = &config.clickhouse.database;
    // Say plainly that the topic is missing instead of failing each send after a timeout.
    let topics = partition_counts(&config.kafka, Some(&topic))
        .await
        .with_context(|| format!("reading topic {topic} from {}", config.kafka.brokers))?;
    anyhow::ensure!(topics.contains_key(&topic), "topic {topic} does not exist; create it with `tayga topics create`");
    let publisher = Publisher::new(&config.kafka).context("creating a Kafka producer")?;

    let (published, error) = match args.alert_id {
        Some(id) => {
            let rows = alerts(&store, &AlertQuery { alert_id: Some(id), ..Default::default() })
                .await
                .with_context(|| format!("reading alert {} of database `{database}`", format_id(id)))?;
            anyhow::ensure!(!rows.is_empty(), "no alert {} in log_alerts of database `{database}`", format_id(id));
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
/// (seed 000's bound per pass), until none is left or a send fails. Returns how many were
/// published and why it stopped early.
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
