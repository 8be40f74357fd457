//! The explicit commit of offsets (never auto-commit, ARCHITECTURE.md invariant): always
//! synchronous, so a commit that returns is one the broker accepted.

use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext};
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};

use super::ConsumerMetrics;

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
