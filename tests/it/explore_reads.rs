//! Reads that scale with the window, measured: a day of synthetic traffic (2,000,000 spans,
//! 500,000 logs and their hits over 24 hours, made on the server through the raw tables, so
//! the views fill the time-ordered copies and the rollup as the writer's inserts do), merged
//! as a settled day is; then each search of a 15-minute window is checked for what it
//! answers (against the raw tables) and for the rows it read (`read_rows` in
//! `system.query_log`), and the services overview and the count chart for reading the
//! rollup only (docs/api.md, "Reading by time").

use std::time::Duration;

use tayga::store::query::synthetic::{self, SyntheticData};
use tayga::store::{now_ns, Store};

use crate::api::{read_rows_of, Api};
use crate::common::TestEnv;

const SPANS: u64 = 2_000_000;
const LOGS: u64 = 500_000;
const DAY_NS: u64 = 86_400_000_000_000;
const MINUTE_NS: u64 = 60_000_000_000;

/// The tables the synthetic day fills, raw and derived, each merged to one part.
const FILLED: [&str; 3] = ["spans", "logs", "log_hits"];
const MERGED: [&str; 7] =
    ["spans", "logs", "log_hits", "spans_by_time", "logs_by_time", "log_hits_by_time", "service_minutes"];

async fn count(store: &Store, sql: &str) -> u64 {
    store.query_for_tests(sql).fetch_one::<u64>().await.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Yesterday (UTC), whole: one day partition of every table.
async fn seeded_day(store: &Store) -> (SyntheticData, u64) {
    let day = now_ns() / DAY_NS * DAY_NS - DAY_NS;
    let data = SyntheticData {
        spans: SPANS,
        logs: LOGS,
        services: 8,
        templates_per_service: 20,
        alerts: 0,
        end_ns: day + DAY_NS,
        span_ns: DAY_NS,
    };
    let started = std::time::Instant::now();
    for (table, sql) in synthetic::statements(&data) {
        if FILLED.contains(&table) {
            store.query_for_tests(&sql).execute().await.unwrap_or_else(|e| panic!("filling {table}: {e}"));
        }
    }
    for table in MERGED {
        store.query_for_tests(&synthetic::optimize_sql(table)).execute().await.unwrap();
    }
    eprintln!("seeded and merged a day in {:.1} s", started.elapsed().as_secs_f64());
    (data, day)
}

#[tokio::test]
async fn a_window_search_reads_its_window_and_the_overview_reads_the_rollup() {
    let env = TestEnv::new("explore_reads");
    let store = env.migrated_store().await;
    let (_, day) = seeded_day(&store).await;
    let since = now_ns() / 1_000_000_000 - 1;
    let api = Api::start(store.clone().with_setting("log_queries", "1"), "", Duration::from_secs(60)).await;

    // A window across a bucket boundary (10:07 to 10:22), so it reads two buckets.
    let from = day + 10 * 60 * MINUTE_NS + 7 * MINUTE_NS;
    let to = from + 15 * MINUTE_NS;

    // Logs of one service by phrase: every matching line, and only those.
    let lines = api
        .all_pages(&format!("/api/v1/logs?q=service:svc-3%20%22took%2015%20ms%22&from={from}&to={to}&limit=1000"))
        .await;
    let truth = count(
        &store,
        &format!(
            "SELECT count() FROM logs WHERE service = 'svc-3' AND time_ns >= {from} AND time_ns < {to} \
             AND position(body, 'took 15 ms') > 0"
        ),
    )
    .await;
    assert!(truth > 0, "the synthetic day has lines to find");
    assert_eq!(lines.len() as u64, truth);
    for line in &lines {
        assert_eq!(line["service"], "svc-3");
        assert!(line["body"].as_str().unwrap().contains("took 15 ms"), "{line}");
        assert!(line["template_id"].is_string(), "each line has its hit: {line}");
    }
    let times: Vec<u64> = lines.iter().map(|l| l["time_ns"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]) && times.iter().all(|t| (from..to).contains(t)));

    // Its count over time, from the lines (a phrase is not in the rollup), sums to the same.
    let counts =
        api.ok(&format!("/api/v1/logs/counts?q=service:svc-3%20%22took%2015%20ms%22&from={from}&to={to}")).await;
    assert_eq!(counts["source"], "logs");
    let counted: u64 = counts["steps"].as_array().unwrap().iter().map(|s| s["counts"]["info"].as_u64().unwrap()).sum();
    assert_eq!(counted, truth);

    // A line's context: the same service, around it.
    let line = &lines[lines.len() / 2];
    let context = api
        .ok(&format!(
            "/api/v1/logs/{}/context?service=svc-3&time_ns={}&lines=5",
            line["log_id"].as_str().unwrap(),
            line["time_ns"]
        ))
        .await;
    assert_eq!(context["line"]["log_id"], line["log_id"]);
    let before = context["before"].as_array().unwrap();
    let after = context["after"].as_array().unwrap();
    assert_eq!((before.len(), after.len()), (5, 5));
    let line_time = line["time_ns"].as_u64().unwrap();
    assert!(before.iter().all(|l| l["service"] == "svc-3" && l["time_ns"].as_u64().unwrap() <= line_time));
    assert!(after.iter().all(|l| l["service"] == "svc-3" && l["time_ns"].as_u64().unwrap() >= line_time));

    // Traces of one service with a slow span: every such trace, with its root.
    let min = 750_000_000u64;
    let traces = api
        .all_pages(&format!("/api/v1/traces?service=svc-3&min_duration_ns={min}&from={from}&to={to}&limit=1000"))
        .await;
    let truth = count(
        &store,
        &format!(
            "SELECT uniqExact(trace_id) FROM spans WHERE service = 'svc-3' AND duration_ns >= {min} \
             AND start_ns >= {from} AND start_ns < {to}"
        ),
    )
    .await;
    assert!(truth > 0);
    assert_eq!(traces.len() as u64, truth);
    let rooted = traces.iter().filter(|t| t["root_operation"] == "op-0").count();
    assert!(rooted * 10 >= traces.len() * 9, "{rooted} of {} traces have their root", traces.len());
    assert!(traces
        .iter()
        .all(|t| t["max_duration_ns"].as_u64().unwrap() >= min && t["span_count"].as_u64().unwrap() <= 5));
    let scatter = api
        .ok(&format!("/api/v1/traces/scatter?service=svc-3&min_duration_ns={min}&from={from}&to={to}&limit=5000"))
        .await;
    assert_eq!(scatter["points"].as_array().unwrap().len() as u64, truth);
    assert_eq!(scatter["sampled"], false);

    // Every statement of those requests read at most 5 % of the day's rows of its table.
    let reads = read_rows_of(&store, since, &from.to_string(), 5).await;
    assert!(reads.len() >= 5, "{reads:?}");
    for (query, rows) in &reads {
        let of = if query.contains("spans_by_time") { SPANS } else { LOGS };
        eprintln!("read_rows {rows:>7} ({:.2}% of {of}): {:.120}", *rows as f64 * 100.0 / of as f64, query);
        assert!(*rows * 20 <= of, "{rows} rows read (of {of}) by {query}");
    }

    // The day's overview and error chart: from the rollup only, and right.
    let overview_from = day;
    let services = api.ok(&format!("/api/v1/services?from={overview_from}&to={}", day + DAY_NS)).await;
    let items = services["items"].as_array().unwrap();
    assert_eq!(items.len(), 8);
    let spans: u64 = items.iter().map(|s| s["spans"].as_u64().unwrap()).sum();
    let logs: u64 = items.iter().map(|s| s["logs"].as_u64().unwrap()).sum();
    assert_eq!((spans, logs), (SPANS, LOGS));
    let error_logs: u64 = items.iter().map(|s| s["error_logs"].as_u64().unwrap()).sum();
    let errors =
        api.ok(&format!("/api/v1/logs/counts?q=severity>=error&from={overview_from}&to={}", day + DAY_NS)).await;
    assert_eq!(errors["source"], "rollup");
    let charted: u64 = errors["steps"].as_array().unwrap().iter().map(|s| s["counts"]["error"].as_u64().unwrap()).sum();
    assert_eq!(charted, error_logs);
    assert_eq!(error_logs, count(&store, "SELECT count() FROM logs WHERE severity_number >= 17").await);
    let rollup_rows = count(&store, "SELECT count() FROM service_minutes").await;
    let reads = read_rows_of(&store, since, &overview_from.to_string(), 2).await;
    assert_eq!(reads.len(), 2, "{reads:?}");
    for (query, rows) in &reads {
        eprintln!("read_rows {rows:>7} (rollup of {rollup_rows} rows): {:.120}", query);
        assert!(query.contains("FROM service_minutes") && !query.contains("_by_time"), "{query}");
        assert!(*rows <= rollup_rows, "{rows} rows read by {query}");
    }
}
