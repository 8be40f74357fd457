//! `tayga traces [--service S] [--operation O] [--min-duration D] [--max-duration D]
//! [--status error|ok] [--attr k=v]… [--since D | --from T --to T]`: the stored traces with a
//! span that matches every filter, the most recent first, as the Traces page lists them:
//! start, root operation, spans, duration, error. `tayga trace ID` draws one.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::logs::{parse_query, window};
use super::reach;
use super::table::{count, Layout, Table};
use super::time::{format_time, table_time, Clock};
use crate::cli::{TraceStatus, TracesArgs};
use crate::config::Config;
use crate::search::{Range, Scope};
use crate::store::query::traces::{search, TraceHit, TraceSearch};
use crate::store::Store;
use crate::time::duration;

/// A hit as the API shows it, with its start in words.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    start: String,
    #[serde(flatten)]
    hit: &'a TraceHit,
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
    let mut query = parse_query(&args.query, args.service.as_deref(), Scope::Traces)?;
    query.operations.extend(args.operation.iter().cloned());
    query.attributes.extend(args.attrs.iter().cloned());
    if args.min_duration.is_some() || args.max_duration.is_some() {
        let (min, max) = (
            args.min_duration.map_or(0, |d| d.as_nanos() as u64),
            args.max_duration.map_or(u64::MAX, |d| d.as_nanos() as u64),
        );
        let asked = query.duration.unwrap_or(Range { min: 0, max: u64::MAX });
        query.duration = Some(Range { min: asked.min.max(min), max: asked.max.min(max) });
    }
    reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let q = TraceSearch { query, error: args.status.map(|s| s == TraceStatus::Error), after: None };
    let hits: Vec<TraceHit> = search(&store, window, &q, args.limit)
        .await
        .with_context(|| format!("searching the traces of database `{}`", config.clickhouse.database))?;
    if json {
        let listed: Vec<Listed> = hits.iter().map(|hit| Listed { start: format_time(hit.start_ns), hit }).collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&listed)?)?;
        return Ok(());
    }
    if hits.is_empty() {
        writeln!(out, "no trace matches in {} to {}", format_time(window.from_ns), format_time(window.to_ns))?;
        return Ok(());
    }
    let layout = Layout::current();
    // A terminal that cuts to fit keeps the trace id whole and leaves the services to
    // --wide and pipes.
    let narrow = matches!(layout, Layout::Terminal(Some(_)));
    let mut headers = vec!["trace_id", "start", "duration", "spans", "error", "root"];
    if !narrow {
        headers.push("services");
    }
    let mut table =
        Table::new(headers).numeric(&["duration", "spans"]).keep(&["trace_id", "start", "duration", "spans", "error"]);
    for h in &hits {
        let root = if h.root_operation.is_empty() {
            "(root before the range)".to_string()
        } else {
            format!("{} · {}", h.root_service, h.root_operation)
        };
        let mut row = vec![
            h.trace_id.clone(),
            table_time(h.start_ns, now, layout),
            if layout.is_terminal() { duration(h.duration_ns as f64) } else { h.duration_ns.to_string() },
            count(h.span_count, layout),
            if h.error { "error" } else { "" }.to_string(),
            root,
        ];
        if !narrow {
            row.push(h.services.join(","));
        }
        table.row(row);
    }
    write!(out, "{}", table.render(layout))?;
    if hits.len() as u64 == args.limit && layout.is_terminal() {
        writeln!(out, "the {} most recent; --limit N shows more, `tayga trace ID` draws one", args.limit)?;
    }
    Ok(())
}
