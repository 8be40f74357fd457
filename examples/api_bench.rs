//! API latency: p50/p95 of each endpoint over a database seeded on the server
//! (`store::query::synthetic`: 5 spans per trace, logs in traces, templates, stories, alerts,
//! deliveries, recorder samples spread over the last `--hours`, 24 by default), the searches
//! over 15-minute and one-hour windows. docs/api.md records a run.
//!
//!     cargo run --release --example api_bench -- [--spans 20000000] [--logs 5000000] [--hours 24] [--requests 40] [--examples] [--backfill]
//!
//! `--backfill` also times migration 9's backfills (the time-ordered copies and the rollup,
//! emptied and filled again from the seeded raw tables), per million rows, before the
//! requests.
//!
//! Uses the ClickHouse of TAYGA_CLICKHOUSE_URL (default 127.0.0.1:8123) with a database of
//! its own, dropped at the end (`--keep` keeps it). `--examples` prints one request and its
//! answer per endpoint (lists cut to two items), as docs/api.md shows them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::registry::Registry;
use tayga::config::Config;
use tayga::daemon::api::handlers::AppState;
use tayga::daemon::api::router;
use tayga::store::query::synthetic::{fill, SyntheticData};
use tayga::store::{now_ns, Store};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// Arrays of more than two items cut to two, so an example stays readable.
fn cut(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Array(items) => {
            items.truncate(2);
            items.iter_mut().for_each(cut);
        }
        serde_json::Value::Object(map) => map.values_mut().for_each(cut),
        _ => {}
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The request path of the i-th request to one endpoint.
type PathOf<'a> = Box<dyn Fn(usize) -> String + 'a>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let spans = arg("--spans", 20_000_000);
    let logs = arg("--logs", 5_000_000);
    let hours = arg("--hours", 24);
    let requests = arg("--requests", 40) as usize;
    let mut config = Config::default();
    if let Ok(url) = std::env::var("TAYGA_CLICKHOUSE_URL") {
        config.clickhouse.url = url;
    }
    config.clickhouse.database = format!("api_bench_{}", std::process::id());
    let store = Store::new(&config.clickhouse);
    tayga::store::migrate::migrate(&store).await?;
    let s = SyntheticData {
        spans,
        logs,
        services: 40,
        templates_per_service: 25,
        alerts: (spans / 1000).max(10),
        end_ns: now_ns(),
        span_ns: hours * 3_600_000_000_000,
    };
    let started = Instant::now();
    fill(&store, &s).await?;
    eprintln!("seeded {spans} spans and {logs} logs in {:.1} s", started.elapsed().as_secs_f64());
    if flag("--backfill") {
        time_backfills(&store).await?;
    }

    let state = AppState {
        store: store.clone().with_setting("max_execution_time", "60"),
        query_timeout: Duration::from_secs(60),
        now_ns,
        alerts_topic: None,
    };
    let health: tayga::daemon::HealthFn = Arc::new(|| serde_json::json!({"api": {"status": "serving"}}));
    let app = router::router(state, Arc::new(Registry::default()), Default::default(), health, "");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;

    let traces = (spans / 5).max(1);
    let trace_ids: Vec<String> = store
        .query_for_tests("SELECT lower(hex(MD5(toString(number * 7919 % ?)))) FROM numbers(?)")
        .bind(traces)
        .bind(requests as u64)
        .fetch_all()
        .await?;
    let fingerprint = |i: usize| format!("{:016x}", i % 40 + 1);
    let alert = |i: usize| format!("{:016x}", (i as u64 * 7919) % s.alerts + 1);
    let service = |i: usize| format!("svc-{}", i % s.services as usize);
    // Windows ending every 7 minutes back from the seeded end, so requests read different data.
    let end = s.end_ns;
    let window = move |i: usize, minutes: u64| {
        let to = end - (i as u64 % 60) * 7 * 60_000_000_000;
        format!("from={}&to={to}", to - minutes * 60_000_000_000)
    };
    let mut searches: Vec<(String, PathOf)> = Vec::new();
    for (label, minutes) in [("15 min", 15u64), ("1 h", 60)] {
        searches.push((
            format!("logs: service and phrase, {label}"),
            Box::new(move |i| {
                format!(
                    "/api/v1/logs?q=service:{}%20%22took%20{}%20ms%22&limit=20&{}",
                    service(i),
                    i % 300,
                    window(i, minutes)
                )
            }),
        ));
        searches.push((
            format!("logs: words in every service, {label}"),
            Box::new(move |i| format!("/api/v1/logs?q=request%20took%20{}&limit=20&{}", i % 300, window(i, minutes))),
        ));
        searches.push((
            format!("log counts: phrase (lines), {label}"),
            Box::new(move |i| {
                format!(
                    "/api/v1/logs/counts?q=service:{}%20%22took%20{}%20ms%22&{}",
                    service(i),
                    i % 300,
                    window(i, minutes)
                )
            }),
        ));
        searches.push((
            format!("log counts: severity (rollup), {label}"),
            Box::new(move |i| format!("/api/v1/logs/counts?q=severity>=error&step_secs=60&{}", window(i, minutes))),
        ));
        searches.push((
            format!("trace search: service, min duration, {label}"),
            Box::new(move |i| {
                format!(
                    "/api/v1/traces?service={}&min_duration_ns=500000000&limit=20&{}",
                    service(i),
                    window(i, minutes)
                )
            }),
        ));
        searches.push((
            format!("trace scatter: service, {label}"),
            Box::new(move |i| format!("/api/v1/traces/scatter?service={}&{}", service(i), window(i, minutes))),
        ));
        searches.push((
            format!("services (rollup), {label}"),
            Box::new(move |i| format!("/api/v1/services?{}", window(i, minutes))),
        ));
    }
    let mut endpoints: Vec<(String, PathOf)> = vec![
        ("services".to_string(), Box::new(|_| "/api/v1/services".to_string())),
        ("trace by id".to_string(), Box::new(|i| format!("/api/v1/traces/{}", trace_ids[i]))),
        (
            "trace search".to_string(),
            Box::new(|i| format!("/api/v1/traces?service={}&min_duration_ns=20000000&limit=20", service(i))),
        ),
        ("story by trace".to_string(), Box::new(|i| format!("/api/v1/traces/{}/story", trace_ids[i]))),
        ("shapes".to_string(), Box::new(|_| "/api/v1/shapes?limit=20".to_string())),
        ("shape stories".to_string(), Box::new(|i| format!("/api/v1/shapes/{}/stories?limit=20", fingerprint(i)))),
        ("logs".to_string(), Box::new(|i| format!("/api/v1/logs?service={}&q=took%204&limit=20", service(i)))),
        ("templates".to_string(), Box::new(|i| format!("/api/v1/templates?service={}", service(i)))),
        ("alerts".to_string(), Box::new(|i| format!("/api/v1/alerts?service={}&limit=20", service(i)))),
        ("alert by id".to_string(), Box::new(|i| format!("/api/v1/alerts/{}", alert(i)))),
        ("deliveries".to_string(), Box::new(|_| "/api/v1/deliveries?status=delivered&limit=20".to_string())),
        ("pipeline".to_string(), Box::new(|_| "/api/v1/pipeline?service=logminer".to_string())),
    ];
    endpoints.extend(searches);

    if flag("--examples") {
        for (name, path) in &endpoints {
            let path = path(1);
            let mut body: serde_json::Value = http.get(format!("{base}{path}")).send().await?.json().await?;
            cut(&mut body);
            println!("### {name}\n\n```\nGET {path}\n```\n\n```json\n{}\n```\n", serde_json::to_string_pretty(&body)?);
        }
    } else {
        println!("load average before: {}", load_average());
        println!("| endpoint | p50 ms | p95 ms |\n| --- | ---: | ---: |");
        for (name, path) in &endpoints {
            let mut times = Vec::with_capacity(requests);
            for i in 0..requests {
                let url = format!("{base}{}", path(i));
                let t = Instant::now();
                let response = http.get(&url).send().await?;
                let status = response.status();
                response.bytes().await?;
                anyhow::ensure!(status.is_success(), "{url}: {status}");
                times.push(t.elapsed());
            }
            times.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            println!("| {name} | {:.1} | {:.1} |", ms(percentile(&times, 0.5)), ms(percentile(&times, 0.95)));
        }
    }
    if !flag("--examples") {
        println!("load average after: {}", load_average());
    }
    if !flag("--keep") {
        store.drop_database().await?;
    }
    Ok(())
}

/// The 1, 5 and 15 minute load averages, as `uptime` shows them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Empties the tables migration 9 fills from the raw ones and runs its backfills again,
/// printing each one's time per million source rows.
async fn time_backfills(store: &Store) -> anyhow::Result<()> {
    let backfills: Vec<&str> = tayga::store::schema::MIGRATIONS
        .iter()
        .filter(|m| m.version == 9)
        .flat_map(|m| m.statements.iter().copied())
        .filter(|s| s.starts_with("INSERT INTO "))
        .collect();
    for table in ["spans_by_time", "logs_by_time", "log_hits_by_time", "service_minutes"] {
        store.query_for_tests(&format!("TRUNCATE TABLE {table}")).execute().await?;
    }
    println!("| backfill | source rows | seconds | seconds per million rows |\n| --- | ---: | ---: | ---: |");
    for sql in backfills {
        let target = sql.trim_start_matches("INSERT INTO ").split('(').next().unwrap_or_default();
        let source = sql.split(" FROM ").last().unwrap_or_default().split_whitespace().next().unwrap_or_default();
        let rows: u64 = store.query_for_tests(&format!("SELECT count() FROM {source}")).fetch_one().await?;
        let t = Instant::now();
        store.query_for_tests(sql).execute().await?;
        let secs = t.elapsed().as_secs_f64();
        println!("| {target} from {source} | {rows} | {secs:.1} | {:.2} |", secs * 1e6 / rows.max(1) as f64);
    }
    Ok(())
}
