//! What one shape pass costs at scale (docs/alerts.md, "What a pass reads"): a database
//! seeded on the server with a day of stories (`store::query::synthetic::shape_stories_sql`:
//! `--stories` over 24 h across `--endpoints` endpoints, up to 17 shapes each), then the
//! pass's reads as the logminer makes them (`shape_pass::read_shapes` and the slowdown
//! timings): the first pass of a replica, which reads the day once, and the passes after it,
//! each a second later with the watermark moved. For comparison, the reads the pass made of
//! `stories` before `shape_minutes` existed (a day of stories every pass). Per step: wall
//! time, and the rows and bytes ClickHouse read (`system.query_log`).
//!
//!     cargo run --release --example shape_pass_bench -- [--stories 1200000] [--endpoints 20] [--passes 10]
//!
//! Uses the ClickHouse of TAYGA_CLICKHOUSE_URL (default 127.0.0.1:8123) with a database of
//! its own, dropped at the end.

use std::time::{Duration, Instant};

use tayga::config::{Config, ShapesConfig};
use tayga::daemon::logminer::shape_history::ShapeHistory;
use tayga::daemon::logminer::shape_pass::read_shapes;
use tayga::daemon::logminer::shapes::{slowdown_bounds, ShapeRules, MINUTE_NS};
use tayga::store::query::synthetic::fill_shape_stories;
use tayga::store::{now_ns, shapes, Store};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The three reads every pass made before migration 11: every endpoint's shapes over the
/// history, the minute counts and the durations, all from `stories` (ordered by trace id).
const BEFORE: [&str; 3] = [
    "SELECT root_service, root_operation, fingerprint, min(start_ns) AS first_seen_ns, \
     uniqExact(trace_id) AS traces, argMin(edges, start_ns) AS first_edges, argMin(trace_id, start_ns) AS first_trace_id \
     FROM stories WHERE start_ns >= ? AND truncated = 0 AND root_service != '' \
     GROUP BY root_service, root_operation, fingerprint",
    "SELECT root_service, root_operation, fingerprint, \
     intDiv(start_ns, 60000000000) AS minute, uniqExact(trace_id) AS traces \
     FROM stories WHERE has(?, root_service) AND start_ns >= ? AND truncated = 0 \
     GROUP BY root_service, root_operation, fingerprint, minute",
    "SELECT root_service, root_operation, fingerprint, \
     uniqExactIf(trace_id, start_ns >= ?) AS window_traces, \
     toUInt64(quantileExactIf(0.95)(duration_ns, start_ns >= ?)) AS window_p95_ns, \
     uniqExactIf(trace_id, start_ns < ?) AS baseline_traces, \
     toUInt64(quantileExactIf(0.95)(duration_ns, start_ns < ?)) AS baseline_p95_ns \
     FROM stories WHERE has(?, root_service) AND start_ns >= ? AND start_ns <= ? AND truncated = 0 \
     GROUP BY root_service, root_operation, fingerprint",
];

/// Rows and bytes ClickHouse read for the queries tagged `query_id`, and how many.
async fn read_by(store: &Store, query_id: &str) -> anyhow::Result<(u64, u64, u64)> {
    store.query_for_tests("SYSTEM FLUSH LOGS").execute().await?;
    Ok(store
        .query_for_tests(
            "SELECT count(), sum(read_rows), sum(read_bytes) FROM system.query_log WHERE type = 2 AND query_id = ?",
        )
        .bind(query_id)
        .fetch_one::<(u64, u64, u64)>()
        .await?)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let stories = arg("--stories", 1_200_000);
    let endpoints = arg("--endpoints", 20);
    let passes = arg("--passes", 10).max(1);
    let mut config = Config::default();
    if let Ok(url) = std::env::var("TAYGA_CLICKHOUSE_URL") {
        config.clickhouse.url = url;
    }
    config.clickhouse.database = format!("shape_pass_bench_{}", std::process::id());
    let store = Store::new(&config.clickhouse).with_setting("log_queries", "1");
    tayga::store::migrate::migrate(&store).await?;
    let result = run(&store, stories, endpoints, passes).await;
    store.drop_database().await?;
    result
}

async fn run(store: &Store, stories: u64, endpoints: u64, passes: u64) -> anyhow::Result<()> {
    let rules = ShapeRules::from_config(&ShapesConfig::default());
    let end = now_ns() / MINUTE_NS * MINUTE_NS;
    let started = Instant::now();
    fill_shape_stories(store, stories, endpoints, end, 24 * 3_600_000_000_000).await?;
    println!(
        "seeded {stories} stories over 24 h, {endpoints} endpoints, in {:.1} s (merged)",
        started.elapsed().as_secs_f64()
    );
    let tag = |step: &str| format!("shape_pass_bench_{}_{step}", std::process::id());
    let all = |_: &str| true;
    let roots: Vec<String> = (0..8).map(|i| format!("svc-{i}")).collect();

    // Before: the three reads of `stories`, every pass alike.
    let mut walls = Vec::new();
    let before = store.clone().with_setting("query_id", &tag("before"));
    for _ in 0..passes.min(3) {
        let now = now_ns();
        let watermark = now - 1_000_000_000;
        let (window, baseline) = slowdown_bounds(&rules, now);
        let t = Instant::now();
        before.query_for_tests(BEFORE[0]).bind(rules.history_since(now)).fetch_all::<Seen>().await?;
        before
            .query_for_tests(BEFORE[1])
            .bind(&roots)
            .bind(rules.minutes_since(watermark))
            .fetch_all::<Minute>()
            .await?;
        let q = before.query_for_tests(BEFORE[2]).bind(window).bind(window).bind(window).bind(window);
        q.bind(&roots).bind(baseline).bind(now).fetch_all::<Timing>().await?;
        walls.push(t.elapsed());
    }
    let (n, rows, bytes) = read_by(store, &tag("before")).await?;
    let runs = walls.len() as u64;
    println!(
        "before (every pass read `stories`): {:.0} ms a pass (median of {runs}), read {} rows, {:.1} MB a pass ({} queries)",
        median(walls).as_secs_f64() * 1e3,
        rows / runs,
        bytes as f64 / runs as f64 / 1e6,
        n / runs
    );

    // After: a replica's first pass, then the passes after it, a second apart.
    let mut history = ShapeHistory::default();
    let mut watermark = now_ns();
    let step = |name: &str| store.clone().with_setting("query_id", &tag(name));
    let mut pass_walls = Vec::new();
    let mut shapes_seen = 0;
    for i in 0..=passes {
        let s = step(if i == 0 { "first" } else { "later" });
        let now = now_ns();
        let t = Instant::now();
        let read = read_shapes(&s, &mut history, &rules, watermark, now, all).await?;
        let (window, baseline) = slowdown_bounds(&rules, now);
        shapes::shape_timings(&s, &roots, baseline, window, now).await?;
        let wall = t.elapsed();
        shapes_seen = read.values().map(|e| e.shapes.len()).sum::<usize>();
        if i == 0 {
            let (n, rows, bytes) = read_by(store, &tag("first")).await?;
            println!(
                "after, a replica's first pass (the day from `shape_minutes`, once): {:.0} ms, read {rows} rows, {:.1} MB ({n} queries), {shapes_seen} shapes, {} minute cells kept",
                wall.as_secs_f64() * 1e3,
                bytes as f64 / 1e6,
                history.kept()
            );
        } else {
            pass_walls.push(wall);
        }
        watermark = now;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (n, rows, bytes) = read_by(store, &tag("later")).await?;
    println!(
        "after, every later pass (the fresh minutes and the slowdown window): {:.0} ms a pass (median of {passes}), read {} rows, {:.2} MB a pass ({} queries), {shapes_seen} shapes",
        median(pass_walls).as_secs_f64() * 1e3,
        rows / passes,
        bytes as f64 / passes as f64 / 1e6,
        n / passes
    );
    Ok(())
}

#[derive(clickhouse::Row, serde::Deserialize)]
#[allow(dead_code)]
struct Seen {
    root_service: String,
    root_operation: String,
    fingerprint: u64,
    first_seen_ns: u64,
    traces: u64,
    first_edges: Vec<String>,
    first_trace_id: String,
}

#[derive(clickhouse::Row, serde::Deserialize)]
#[allow(dead_code)]
struct Minute {
    root_service: String,
    root_operation: String,
    fingerprint: u64,
    minute: u64,
    traces: u64,
}

#[derive(clickhouse::Row, serde::Deserialize)]
#[allow(dead_code)]
struct Timing {
    root_service: String,
    root_operation: String,
    fingerprint: u64,
    window_traces: u64,
    window_p95_ns: u64,
    baseline_traces: u64,
    baseline_p95_ns: u64,
}
