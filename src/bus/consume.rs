//! What the consumers polled on the async runtime (the assembler and the logminer) share:
//! a context that records rebalances for the loop to apply before its next record, the
//! explicit commit of offsets that moved, and the lag of the assigned partitions.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// A partition change, as the group reported it.
#[derive(Debug)]
pub enum Rebalanced {
    Assigned(Vec<i32>),
    Revoked(Vec<i32>),
}

/// Records rebalances; the consumer loop takes and applies them in order. librdkafka calls
/// the hooks on its own thread, where the loop's state cannot be reached.
#[derive(Default)]
pub struct RebalanceLog {
    changes: Mutex<Vec<Rebalanced>>,
}

impl RebalanceLog {
    /// The changes reported since the last call, oldest first.
    pub fn take(&self) -> Vec<Rebalanced> {
        std::mem::take(&mut *self.changes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn push(&self, change: Rebalanced) {
        self.changes.lock().unwrap_or_else(|e| e.into_inner()).push(change);
    }
}

fn partitions(tpl: &TopicPartitionList) -> Vec<i32> {
    tpl.elements().iter().map(|e| e.partition()).collect()
}

impl ClientContext for RebalanceLog {}

impl ConsumerContext for RebalanceLog {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            self.push(Rebalanced::Revoked(partitions(tpl)));
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            self.push(Rebalanced::Assigned(partitions(tpl)));
        }
    }
}

/// A consumer whose rebalances are recorded in a [`RebalanceLog`].
pub type LoggedConsumer = StreamConsumer<RebalanceLog>;

/// Commits every `(partition, next offset)` that differs from `committed`, synchronously on
/// a blocking thread, and records them in `committed` once the broker accepted them. A
/// failed commit is logged and left for the next one (after a restart or a revoke, the
/// records since the last accepted commit are read again, which is harmless).
pub async fn commit_moved(
    consumer: &Arc<LoggedConsumer>,
    topic: &str,
    offsets: impl IntoIterator<Item = (i32, i64)>,
    committed: &mut BTreeMap<i32, i64>,
) {
    let mut tpl = TopicPartitionList::new();
    let mut moved = Vec::new();
    for (p, offset) in offsets {
        if committed.get(&p) == Some(&offset) {
            continue;
        }
        if tpl.add_partition_offset(topic, p, Offset::Offset(offset)).is_ok() {
            moved.push((p, offset));
        }
    }
    if moved.is_empty() {
        return;
    }
    let consumer = consumer.clone();
    match tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync)).await {
        Ok(Ok(())) => committed.extend(moved),
        Ok(Err(e)) => tracing::warn!(error = %e, "committing offsets failed; the next commit covers them"),
        Err(e) => tracing::error!(error = %e, "the commit task failed"),
    }
}

/// Records of `partitions` after their commit point (`None`: nothing committed yet, so from
/// the low watermark): the sum of high watermark − commit point. `None` when the broker
/// does not answer within a second per partition.
pub async fn lag(consumer: &Arc<LoggedConsumer>, topic: &str, partitions: Vec<(i32, Option<i64>)>) -> Option<i64> {
    let consumer = consumer.clone();
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || {
        let mut lag = 0i64;
        for (p, committed) in partitions {
            let (low, high) = consumer.fetch_watermarks(&topic, p, Duration::from_secs(1)).ok()?;
            lag += (high - committed.unwrap_or(low).max(low)).max(0);
        }
        Some(lag)
    })
    .await
    .ok()
    .flatten()
}
