//! The writer's outage behaviour (docs/writer.md, "ClickHouse down"), reproduced with the
//! real `tayga serve writer` against a ClickHouse server of this test's own (the shared one
//! is never stopped): N rows stored; ClickHouse stopped; M more records sent; the backlog waits in the broker (the writer
//! group's lag is M) while the writer retries with backoff, paused; ClickHouse started; after
//! the drain the deduplicated count is exactly N + M.

use crate::common;
use crate::writer_support;

use std::time::{Duration, Instant};

use common::{wait_for, TestEnv};
use tayga::daemon::writer::batch::max_attempts_within;
use writer_support::*;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clickhouse_outage_waits_in_the_broker_and_drains_exactly() {
    let ch = PrivateClickHouse::start();
    let mut env = TestEnv::new("writer_outage");
    env.config.clickhouse.url = ch.url();
    let config = env.config.clone();
    tayga::bus::topics::ensure_topics(&config.kafka, &config.names()).await.expect("topics");
    let mut writer = Daemon::start(&env, &[("TAYGA_WRITER_BATCH_MAX_WAIT_MS", "200")]);
    let store = env.store();
    let producer = producer(&env);

    let (s1, l1) = send_mix(&producer, &env, 0, 100, 4, 4).await;
    let before = wait_for("the first records stored and committed", WAIT, || async {
        let c = counts(&store).await?;
        (c.spans == s1 && c.logs == l1 && writer_lag(&config).await? == 0).then_some(c)
    })
    .await;

    // From before the stop: the writer's first failure can come while `down` still waits for
    // the server to exit, and the backoff bound must count from there.
    let stopped = Instant::now();
    ch.down();
    let sent = 80;
    let (s2, l2) = send_mix(&producer, &env, 100, sent, 4, 4).await;
    let retries = wait_for("the writer retrying, paused, while ClickHouse is down", WAIT, || async {
        let retries = writer.metric("tayga_writer_insert_retries_total").await?;
        let paused = writer.metric("tayga_writer_paused").await?;
        (retries >= 3.0 && paused == 1.0).then_some(retries)
    })
    .await;
    let lag = writer_lag(&config).await.unwrap();
    assert_eq!(lag, i64::from(sent), "the backlog waits in the broker, uncommitted");
    assert!(
        retries < f64::from(max_attempts_within(stopped.elapsed())),
        "{retries} retries in {:?}: the backoff is not respected",
        stopped.elapsed()
    );
    let health: serde_json::Value =
        reqwest::get(format!("http://{}/health", writer.metrics_addr)).await.unwrap().json().await.unwrap();
    assert_eq!(health["clickhouse"], "down");

    ch.up();
    let after = wait_for("the backlog drained after ClickHouse returned", WAIT, || async {
        let c = counts(&store).await?;
        (c.spans == s1 + s2 && c.logs == l1 + l2 && writer_lag(&config).await? == 0).then_some(c)
    })
    .await;
    println!(
        "rows before outage: {} (raw {})\n   ... {sent} records ({} rows) sent while ClickHouse was down ...\n   backlog held in the broker, lag {lag}, {retries} retries\nrows after drain: {} (raw {})",
        before.spans + before.logs,
        before.spans_raw + before.logs_raw,
        s2 + l2,
        after.spans + after.logs,
        after.spans_raw + after.logs_raw,
    );
    assert_eq!(after.spans + after.logs, before.spans + before.logs + s2 + l2, "nothing lost, nothing doubled");

    writer.signal("-TERM");
    let status = writer.exit_within(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}\n{}", writer.log());
}
