//! The explicit commit of offsets (never auto-commit, ARCHITECTURE.md invariant): always
//! synchronous, so a commit that returns is one the broker accepted.

use std::collections::BTreeMap;
use std::sync::Arc;

use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext};
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};

use super::{ConsumerMetrics, LoggedConsumer};

/// Commits `(partition, next offset)` of `topic`, synchronously (it blocks: call it off the
/// async workers), and reports the outcome to `metrics`.
pub fn commit_sync<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    topic: &str,
    offsets: &[(i32, i64)],
    metrics: &ConsumerMetrics,
) -> KafkaResult<()> {
    let mut tpl = TopicPartitionList::new();
    for (p, offset) in offsets {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*offset))?;
    }
    match consumer.commit(&tpl, CommitMode::Sync) {
        Ok(()) => {
            metrics.committed(offsets);
            Ok(())
        }
        Err(e) => {
            metrics.commit_failed(&e);
            Err(e)
        }
    }
}

/// Commits every `(partition, next offset)` that differs from `committed`, on a blocking
/// thread, and records them in `committed` once the broker accepted them. A failed commit
/// is left for the next one (after a restart or a revoke, the records since the last
/// accepted commit are read again, which is harmless).
pub async fn commit_moved(
    consumer: &Arc<LoggedConsumer>,
    topic: &str,
    offsets: impl IntoIterator<Item = (i32, i64)>,
    committed: &mut BTreeMap<i32, i64>,
) {
    let moved = moved(offsets, committed);
    if moved.is_empty() {
        return;
    }
    let consumer = consumer.clone();
    let topic = topic.to_string();
    let task = tokio::task::spawn_blocking(move || {
        let result = commit_sync(consumer.as_ref(), &topic, &moved, consumer.context().metrics());
        result.map(|()| moved)
    });
    match task.await {
        Ok(Ok(moved)) => committed.extend(moved),
        // Counted and logged by `commit_sync`.
        Ok(Err(_)) => {}
        Err(e) => tracing::error!(error = %e, "the commit task failed"),
    }
}

/// The offsets that differ from what was last committed.
fn moved(offsets: impl IntoIterator<Item = (i32, i64)>, committed: &BTreeMap<i32, i64>) -> Vec<(i32, i64)> {
    offsets.into_iter().filter(|(p, offset)| committed.get(p) != Some(offset)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_offsets_that_moved_are_committed() {
        let committed = BTreeMap::from([(0, 10), (1, 5)]);
        assert_eq!(moved([(0, 10), (1, 6), (2, 0)], &committed), vec![(1, 6), (2, 0)]);
        assert!(moved([(0, 10)], &committed).is_empty());
    }
}
