//! `tayga shapes list` and `tayga shapes diff A B`: the trace shapes of a window as the
//! Stories page lists them, and what differs between two shapes, as the API's diff
//! (`store::query::stories::shape_diff`) reads it: the edges B adds and removes against A,
//! and per edge the calls and the self time in each shape's newest trace of the window.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::reach;
use super::table::{count, Layout, Table};
use super::time::Clock;
use crate::cli::ShapesCommand;
use crate::config::Config;
use crate::store::query::stories::{shape_diff, shapes, EdgeCalls, Shape, ShapeDiff};
use crate::store::query::Window;
use crate::store::{Store, StoryRow};
use crate::time::duration;
use crate::wire::alert::format_id;

pub async fn run(
    config: &Config,
    sub: &ShapesCommand,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    reach::clickhouse(&config.clickhouse, timeout).await?;
    let store = Store::new(&config.clickhouse);
    let now = Clock::from_env()?.now_ns();
    let database = &config.clickhouse.database;
    let window = |since: &Duration| Window { from_ns: now.saturating_sub(since.as_nanos() as u64), to_ns: now };
    match sub {
        ShapesCommand::List { service, since, limit } => {
            let rows = shapes(&store, window(since), service.as_deref(), None, *limit)
                .await
                .with_context(|| format!("reading the shapes of database `{database}`"))?;
            write_list(&rows, json, out)
        }
        ShapesCommand::Diff { a, b, since } => {
            let diff = shape_diff(&store, *a, *b, window(since)).await.with_context(|| {
                format!("diffing shapes {} and {} in database `{database}`", format_id(*a), format_id(*b))
            })?;
            write_diff(&diff, json, out)
        }
    }
}

fn write_list(rows: &[Shape], json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(rows)?)?;
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(out, "no story in the window: shapes appear once the assembler has closed traces")?;
        return Ok(());
    }
    let layout = Layout::current();
    let mut table = Table::new(["fingerprint", "count", "p50", "p95", "errors", "edges", "root"])
        .numeric(&["count", "edges"])
        .keep(&["fingerprint", "count", "p50", "p95", "errors", "edges"]);
    for s in rows {
        table.row([
            format_id(s.fingerprint),
            count(s.count, layout),
            duration(s.p50_duration_ns),
            duration(s.p95_duration_ns),
            format!("{:.0}%", s.error_rate * 100.0),
            s.edges.len().to_string(),
            format!("{} {}", s.root_service, s.root_operation),
        ]);
    }
    write!(out, "{}", table.render(layout))?;
    Ok(())
}

#[derive(Debug, Serialize)]
struct DiffSide<'a> {
    fingerprint: String,
    trace_id: &'a str,
    duration_ns: u64,
    edges: &'a [String],
}

#[derive(Debug, Serialize)]
struct DiffOut<'a> {
    a: DiffSide<'a>,
    b: DiffSide<'a>,
    added: &'a [String],
    removed: &'a [String],
    edges: &'a [EdgeCalls],
}

fn side(s: &StoryRow) -> DiffSide<'_> {
    DiffSide {
        fingerprint: format_id(s.fingerprint),
        trace_id: &s.trace_id,
        duration_ns: s.duration_ns,
        edges: &s.edges,
    }
}

/// The diff: each side's trace and duration, then a row per edge: `+` added by B, `-` removed,
/// blank when both take it, with its calls and self time on each side.
fn write_diff(d: &ShapeDiff, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        let shown = DiffOut { a: side(&d.a), b: side(&d.b), added: &d.added, removed: &d.removed, edges: &d.edges };
        writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        return Ok(());
    }
    for (name, s) in [("A", &d.a), ("B", &d.b)] {
        writeln!(
            out,
            "{name} {}: trace {} took {}",
            format_id(s.fingerprint),
            s.trace_id,
            duration(s.duration_ns as f64)
        )?;
    }
    writeln!(out, "B adds {} edge(s) and removes {} against A", d.added.len(), d.removed.len())?;
    let layout = Layout::current();
    let mut table = Table::new(["", "edge", "calls_a", "calls_b", "self_a", "self_b"])
        .numeric(&["calls_a", "calls_b"])
        .keep(&["", "calls_a", "calls_b", "self_a", "self_b"]);
    for e in &d.edges {
        let mark = if d.added.contains(&e.edge) {
            "+"
        } else if d.removed.contains(&e.edge) {
            "-"
        } else {
            ""
        };
        let self_time = |calls: u64, ns: u64| if calls == 0 { "-".to_string() } else { duration(ns as f64) };
        table.row([
            mark.to_string(),
            e.edge.clone(),
            e.calls_a.to_string(),
            e.calls_b.to_string(),
            self_time(e.calls_a, e.self_ns_a),
            self_time(e.calls_b, e.self_ns_b),
        ]);
    }
    write!(out, "{}", table.render(layout))?;
    Ok(())
}
