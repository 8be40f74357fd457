//! The writer against the real ClickHouse 18.16 and broker, in-process: every span and log
//! stored once; a full re-read (group reset to the beginning) writes no duplicate in
//! deduplicated reads; undecodable records are skipped, counted and committed past; a
//! revoke stores and commits before giving partitions up; retention runs; the insert mode
//! chosen on 18.16 is the batched one.

use crate::common;
use crate::writer_support;

use std::time::Duration;

use common::{wait_for, TestEnv};
use rdkafka::message::{Header, OwnedHeaders};
use tayga::daemon::writer::sink::{self, InsertMode};
use tayga::otlp::flatten::{log_rows, span_rows};
use tayga::otlp::hex_id;
use tayga::store::{read, SpanRow};
use tayga::wire::record::{headers, SignalKind, KIND_HEADER};
use writer_support::*;

const WAIT: Duration = Duration::from_secs(60);

async fn ensure_topics(env: &TestEnv) {
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.expect("topics");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_every_span_and_log_once_and_a_full_reread_adds_no_duplicate() {
    let env = TestEnv::new("writer_reread");
    let mut config = env.config.clone();
    config.writer.batch_max_wait_ms = 200;
    config.writer.batch_max_rows = 500;
    ensure_topics(&env).await;
    let store = env.store();
    let producer = producer(&env);

    // 120 records: 96 traces of 5 spans, 24 log records of 3 logs; then one trace record
    // sent twice (as ingest does when an ack is lost): its spans are stored twice raw.
    let (spans, logs) = send_mix(&producer, &env, 0, 120, 5, 5).await;
    let again = trace(1000, 5, base_ns());
    send_trace(&producer, &env, &again).await;
    send_trace(&producer, &env, &again).await;
    let records = 122;

    let writer = InProcess::start(&config);
    let c = wait_for("every row stored and committed", WAIT, || async {
        let c = counts(&store).await?;
        (c.spans == spans + 5 && c.logs == logs && writer_lag(&config).await? == 0).then_some(c)
    })
    .await;
    assert_eq!(c.spans_raw, spans + 10, "the record sent twice is stored twice raw, once deduplicated");

    // The writer's flattening is the one in otlp::flatten: a trace reads back as its rows.
    let mut expected: Vec<SpanRow> = span_rows(&again, INGEST_NS);
    expected.sort_by(|a, b| (a.start_ns, &a.span_id).cmp(&(b.start_ns, &b.span_id)));
    assert_eq!(read::fetch_trace(&store, &hex_id(&trace_id(1000))).await.unwrap(), expected);
    let stored_logs = read::fetch_trace_logs(&store, &hex_id(&trace_id(5))).await.unwrap();
    let time_ns = stored_logs.first().map_or(0, |l| l.time_ns);
    assert_eq!(stored_logs, log_rows(&writer_support::logs(5, 3, time_ns), INGEST_NS));

    let consumed = writer.metric("tayga_writer_consumed_records_total").await.unwrap();
    assert_eq!(consumed, records as f64);
    let m = scrape(&writer.metrics_addr).await.unwrap();
    for name in [
        "tayga_writer_written_rows_total",
        "tayga_writer_insert_duration_seconds_bucket",
        "tayga_writer_lag_records",
        "tayga_writer_insert_retries_total",
        "tayga_writer_undecodable_records_total",
        "tayga_writer_commits_total",
    ] {
        assert!(m.contains(name), "{name} missing from /metrics:\n{m}");
    }
    assert_eq!(metric(&m, "tayga_writer_written_rows_total"), (spans + 10 + logs) as f64);
    let health: serde_json::Value =
        reqwest::get(format!("http://{}/health", writer.metrics_addr)).await.unwrap().json().await.unwrap();
    assert_eq!(health["service"], "writer");
    assert_eq!(health["clickhouse"], "up");
    assert_eq!(health["insert_mode"], "batched");
    writer.stop().await;

    // Reset the group to the beginning and re-read the whole topic.
    reset_writer_group(&config);
    assert_eq!(writer_lag(&config).await, Some(records));
    let writer = InProcess::start(&config);
    wait_for("the whole topic re-read and committed", WAIT, || async {
        let consumed = writer.metric("tayga_writer_consumed_records_total").await?;
        (consumed == records as f64 && writer_lag(&config).await? == 0).then_some(())
    })
    .await;
    let after = counts(&store).await.unwrap();
    writer.stop().await;
    println!("after the re-read: {after:?}");
    assert_eq!((after.spans, after.logs), (spans + 5, logs), "0 duplicates in deduplicated reads");
    assert_eq!(after.spans_raw, 2 * c.spans_raw, "ClickHouse 18.16 has no insert tokens: the re-read is stored raw");
    let final_count: u64 = store.query_for_tests("SELECT count() FROM spans FINAL").fetch_one().await.unwrap();
    assert_eq!(final_count, spans + 5, "FINAL sees each span once");
    store.query_for_tests("OPTIMIZE TABLE spans FINAL").execute().await.unwrap();
    assert_eq!(read::count_spans_raw(&store).await.unwrap(), spans + 5, "a merge collapses the copies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_records_are_skipped_counted_and_committed_past() {
    let mut env = TestEnv::new("writer_undecodable");
    env.config.kafka.partitions = 1; // one partition: the bad records sit between good ones
    let mut config = env.config.clone();
    config.writer.batch_max_wait_ms = 100;
    ensure_topics(&env).await;
    let producer = producer(&env);
    send_trace(&producer, &env, &trace(0, 4, base_ns())).await;
    send_raw(&producer, &env, "k", Some(headers(SignalKind::Traces, 1)), &[0xff, 0xff, 0xff]).await;
    send_raw(&producer, &env, "k", None, b"no headers").await;
    let metrics_kind = OwnedHeaders::new().insert(Header { key: KIND_HEADER, value: Some("metrics") });
    send_raw(&producer, &env, "k", Some(metrics_kind), b"").await;
    send_trace(&producer, &env, &trace(1, 3, base_ns())).await;

    let writer = InProcess::start(&config);
    let store = env.store();
    wait_for("the good records stored and everything committed", WAIT, || async {
        let c = counts(&store).await?;
        (c.spans == 7 && writer_lag(&config).await? == 0).then_some(())
    })
    .await;
    assert_eq!(writer.metric("tayga_writer_undecodable_records_total").await, Some(3.0));
    assert_eq!(writer.metric("tayga_writer_consumed_records_total").await, Some(5.0));
    writer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_stores_and_commits_before_the_partitions_go() {
    let env = TestEnv::new("writer_revoke");
    let mut config = env.config.clone();
    // Nothing is flushed by size or age during the test: only the revoke can store it.
    config.writer.batch_max_wait_ms = 600_000;
    config.writer.batch_max_rows = 1_000_000;
    ensure_topics(&env).await;
    let producer = producer(&env);
    let (spans, _) = send_mix(&producer, &env, 0, 40, 3, 0).await;

    let first = InProcess::start(&config);
    wait_for("the first writer to read every record", WAIT, || async {
        (first.metric("tayga_writer_consumed_records_total").await? == 40.0).then_some(())
    })
    .await;
    let store = env.store();
    assert_eq!(counts(&store).await.unwrap().spans, 0, "nothing stored before the revoke");
    assert_eq!(writer_lag(&config).await, Some(40), "nothing committed before the revoke");

    // A second member joins: the first is revoked and must store and commit first.
    let second = InProcess::start(&config);
    wait_for("the revoked records stored and committed", WAIT, || async {
        let c = counts(&store).await?;
        (c.spans == spans && writer_lag(&config).await? == 0).then_some(())
    })
    .await;
    assert!(first.metric("tayga_writer_commits_total").await.unwrap() >= 1.0);
    second.stop().await;
    first.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_runs_retention() {
    let env = TestEnv::new("writer_retention");
    let store = env.migrated_store().await;
    let now = base_ns();
    let old = now - 30 * 86_400 * 1_000_000_000;
    let row = |trace_id: &str, start_ns| SpanRow {
        trace_id: trace_id.into(),
        span_id: "01".into(),
        start_ns,
        ..Default::default()
    };
    store.insert(&[row("aa", old), row("bb", now)]).await.unwrap();
    let writer = InProcess::start(&env.config);
    wait_for("the expired partition dropped", WAIT, || async {
        (read::count_spans_raw(&store).await.ok()? == 1).then_some(())
    })
    .await;
    // The sweep counts its drops once it has gone over every table, a moment after the rows
    // went: wait for the count, and for exactly three, the old day of `spans` and of what its
    // views filled from it, `spans_by_time` and the `service_minutes` rollup.
    wait_for("the drops counted", WAIT, || async {
        (writer.metric("tayga_writer_retention_dropped_partitions_total").await == Some(3.0)).then_some(())
    })
    .await;
    assert_eq!(read::fetch_trace(&store, "bb").await.unwrap().len(), 1);
    writer.stop().await;
}

#[tokio::test]
async fn clickhouse_18_16_gets_batched_inserts() {
    let env = TestEnv::new("writer_mode");
    let store = env.migrated_store().await;
    assert!(!tayga::store::insert::supports_tokens(&store).await.unwrap(), "18.16 has no insert_deduplication_token");
    assert_eq!(sink::choose_mode(&store).await.unwrap(), InsertMode::Batched);
}
