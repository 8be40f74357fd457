//! `tayga traces [--service S] [--operation O] [--min-duration D] [--max-duration D]
//! [--status error|ok] [--attr k=v]… [--since D | --from T --to T]`: the stored traces with a
//! span that matches every filter, the most recent first, as the Traces page lists them:
//! start, root operation, spans, duration, error. `tayga trace ID` draws one.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::logs::window;
use super::reach;
use super::table::{count, Layout, Table};
use super::time::{format_time, table_time, Clock};
use crate::cli::{TraceStatus, TracesArgs};
use crate::config::Config;
use crate::store::query::traces::{search, TraceHit, TraceSearch};
use crate::store::Store;
use crate::time::duration;

#[derive(Debug, Serialize)]
struct Listed<'a> {
    trace_id: &'a str,
    start: String,
    start_ns: u64,
    /// The longest matching span (the root's duration when the root matches).
    duration_ns: u64,
    matching_spans: u64,
    error: bool,
    services: &'a [String],
    operations: &'a [String],
}

pub async fn run(
    config: &Config,
    args: &TracesArgs,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let now = Clock::from_env()?.now_ns();
    let window = window(&args.range, now)?;
    anyhow::ensure!(
        args.attrs.is_empty(),
        "--attr is not searchable by this version's store yet: narrow with --service, --operation and durations"
    );
    reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let q = TraceSearch {
        service: args.service.clone(),
        operation: args.operation.clone(),
        min_duration_ns: args.min_duration.map(|d| d.as_nanos() as u64),
        error: args.status.map(|s| s == TraceStatus::Error),
        after: None,
    };
    let max = args.max_duration.map(|d| d.as_nanos() as u64);
    let hits: Vec<TraceHit> = search(&store, window, &q, args.limit)
        .await
        .with_context(|| format!("searching the traces of database `{}`", config.clickhouse.database))?
        .into_iter()
        .filter(|h| max.is_none_or(|m| h.max_duration_ns <= m))
        .collect();
    if json {
        let listed: Vec<Listed> = hits
            .iter()
            .map(|h| Listed {
                trace_id: &h.trace_id,
                start: format_time(h.first_start_ns),
                start_ns: h.first_start_ns,
                duration_ns: h.max_duration_ns,
                matching_spans: h.matching_spans,
                error: h.error != 0,
                services: &h.services,
                operations: &h.operations,
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&listed)?)?;
        return Ok(());
    }
    if hits.is_empty() {
        writeln!(out, "no trace matches in {} to {}", format_time(window.from_ns), format_time(window.to_ns))?;
        return Ok(());
    }
    let layout = Layout::current();
    // A terminal that cuts to fit keeps the trace id whole and drops the services (the
    // operations name them often enough); --wide and pipes have both.
    let narrow = matches!(layout, Layout::Terminal(Some(_)));
    let mut headers = vec!["trace_id", "start", "duration", "spans", "error"];
    if !narrow {
        headers.push("services");
    }
    headers.push("operations");
    let mut table =
        Table::new(headers).numeric(&["duration", "spans"]).keep(&["trace_id", "start", "duration", "spans", "error"]);
    for h in &hits {
        let mut row = vec![
            h.trace_id.clone(),
            table_time(h.first_start_ns, now, layout),
            if layout.is_terminal() { duration(h.max_duration_ns as f64) } else { h.max_duration_ns.to_string() },
            count(h.matching_spans, layout),
            if h.error != 0 { "error" } else { "" }.to_string(),
        ];
        if !narrow {
            row.push(h.services.join(","));
        }
        row.push(h.operations.join(","));
        table.row(row);
    }
    write!(out, "{}", table.render(layout))?;
    if hits.len() as u64 == args.limit && layout.is_terminal() {
        writeln!(out, "the {} most recent; --limit N shows more, `tayga trace ID` draws one", args.limit)?;
    }
    Ok(())
}
