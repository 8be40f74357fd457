//! The real `tayga serve writer` process: kill -9 with records read but not stored, and
//! restart (nothing lost, nothing doubled); SIGTERM with records read but not stored (they
//! are stored and committed before the process exits 0).

use crate::common;
use crate::writer_support;

use std::time::Duration;

use common::{wait_for, TestEnv};
use writer_support::*;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_batch_then_sigterm_lose_nothing_and_double_nothing() {
    let env = TestEnv::new("writer_kill");
    let config = env.config.clone();
    tayga::bus::topics::ensure_topics(&config.kafka, &config.names()).await.expect("topics");
    // Flush every 100 rows, never by age: 260 records of 2 spans leave 10 records read and
    // not stored after 5 flushes.
    let settings = [("TAYGA_WRITER_BATCH_MAX_ROWS", "100"), ("TAYGA_WRITER_BATCH_MAX_WAIT_MS", "600000")];
    let mut first = Daemon::start(&env, &settings);
    let producer = producer(&env);
    let (spans, _) = send_mix(&producer, &env, 0, 260, 2, 0).await;
    let store = env.store();
    wait_for("5 batches stored and committed, 10 records pending", WAIT, || async {
        let pending = first.metric("tayga_writer_pending_records").await?;
        let c = counts(&store).await?;
        (pending == 10.0 && c.spans == 500 && writer_lag(&config).await? == 10).then_some(())
    })
    .await;

    first.signal("-KILL");
    first.exit_within(Duration::from_secs(10)).await;
    assert_eq!(counts(&store).await.unwrap().spans, 500);
    assert_eq!(writer_lag(&config).await, Some(10), "only stored records were committed");

    let mut second = Daemon::start(&env, &settings);
    // Every record is read again: stored, or pending in the restarted writer's batch (a
    // rebalance while the killed member is evicted may store part of it early).
    let pending = wait_for("the restarted writer to re-read the 10 records", WAIT, || async {
        let pending = second.metric("tayga_writer_pending_records").await?;
        let c = counts(&store).await?;
        (c.spans + 2 * pending as u64 == spans).then_some(pending)
    })
    .await;
    println!("SIGTERM with {pending} records read and not stored");
    second.signal("-TERM");
    let status = second.exit_within(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}\n{}", second.log());
    let c = counts(&store).await.unwrap();
    println!("after kill -9, restart and SIGTERM: {c:?}");
    assert_eq!(c.spans, spans, "nothing lost, nothing doubled in deduplicated reads");
    assert_eq!(writer_lag(&config).await, Some(0), "SIGTERM stored and committed what was read");
}
