//! Lag, computed one way everywhere (the daemons' `tayga_<service>_lag_records` and
//! `tayga topics list`): over partitions, high watermark − commit point, where a partition
//! with no commit point counts from its low watermark.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};

use super::{Group, LoggedConsumer};
use crate::bus::client_config;
use crate::config::KafkaConfig;
use crate::config::Names;

/// Records of one partition after `commit_point` (the next offset to read; `None`: nothing
/// committed, so from `low`). Records below `low` are gone and never count.
pub fn partition_lag(low: i64, high: i64, commit_point: Option<i64>) -> i64 {
    (high - commit_point.unwrap_or(low).max(low)).max(0)
}

/// The group's committed offsets of `partitions` of `topic`, from the broker (`None` for a
/// partition the group never committed). `consumer` must be configured with the group's id.
pub fn committed_offsets<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    topic: &str,
    partitions: impl IntoIterator<Item = i32>,
    timeout: Duration,
) -> KafkaResult<Vec<(i32, Option<i64>)>> {
    let mut wanted = TopicPartitionList::new();
    let partitions: Vec<i32> = partitions.into_iter().collect();
    for p in &partitions {
        wanted.add_partition(topic, *p);
    }
    let committed = consumer.committed_offsets(wanted, timeout)?;
    Ok(partitions
        .into_iter()
        .map(|p| {
            let offset = match committed.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => Some(o),
                _ => None,
            };
            (p, offset)
        })
        .collect())
}

/// The lag of `points` (partition, commit point) of `topic`, reading each partition's
/// watermarks (it blocks: call it off the async workers).
pub fn lag_of<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    topic: &str,
    points: &[(i32, Option<i64>)],
    timeout: Duration,
) -> KafkaResult<i64> {
    let mut lag = 0;
    for (p, point) in points {
        let (low, high) = consumer.fetch_watermarks(topic, *p, timeout)?;
        lag += partition_lag(low, high, *point);
    }
    Ok(lag)
}

/// A client that reads `group`'s committed offsets without ever joining the group.
pub fn group_reader(kafka: &KafkaConfig, group: &str) -> KafkaResult<BaseConsumer> {
    client_config(kafka).set("group.id", group).set("enable.auto.commit", "false").create()
}

/// The lag of `group` over every partition of its topic, from what the group committed
/// (so the same for every member), read by a client of its own (it blocks).
pub fn group_lag(kafka: &KafkaConfig, names: &Names, group: Group, timeout: Duration) -> KafkaResult<i64> {
    let consumer = group_reader(kafka, group.name(names))?;
    let topic = group.topic(names);
    let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
    let partitions = metadata.topics().first().map_or(0, |t| t.partitions().len() as i32);
    let points = committed_offsets(&consumer, topic, 0..partitions, timeout)?;
    lag_of(&consumer, topic, &points, timeout)
}

/// The lag of a member's `partitions` of `topic`, each with the commit point the member
/// holds in memory; a partition without one (nothing read since it was assigned) counts
/// from the group's committed offset. Reported to the consumer's metrics; `None` when the
/// broker does not answer within a second per call.
pub async fn lag(consumer: &Arc<LoggedConsumer>, topic: &str, partitions: Vec<(i32, Option<i64>)>) -> Option<i64> {
    let consumer = consumer.clone();
    let topic = topic.to_string();
    let timeout = Duration::from_secs(1);
    tokio::task::spawn_blocking(move || {
        let unknown: Vec<i32> = partitions.iter().filter(|(_, point)| point.is_none()).map(|(p, _)| *p).collect();
        let group_points = if unknown.is_empty() {
            Vec::new()
        } else {
            committed_offsets(consumer.as_ref(), &topic, unknown, timeout).ok()?
        };
        let points: Vec<(i32, Option<i64>)> = partitions
            .into_iter()
            .map(|(p, point)| (p, point.or_else(|| group_points.iter().find(|(q, _)| *q == p).and_then(|(_, o)| *o))))
            .collect();
        let lag = lag_of(consumer.as_ref(), &topic, &points, timeout).ok()?;
        consumer.context().metrics().lag(lag);
        Some(lag)
    })
    .await
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lag_counts_from_the_commit_point_or_the_low_watermark() {
        assert_eq!(partition_lag(0, 10, Some(4)), 6);
        assert_eq!(partition_lag(3, 10, None), 7);
        // Committed below what retention kept: only records still held count.
        assert_eq!(partition_lag(5, 10, Some(2)), 5);
        assert_eq!(partition_lag(0, 10, Some(10)), 0);
    }

    proptest! {
        #[test]
        fn lag_is_never_negative_nor_more_than_the_partition_holds(
            low in 0i64..1_000, held in 0i64..1_000, point in proptest::option::of(0i64..3_000),
        ) {
            let high = low + held;
            let lag = partition_lag(low, high, point);
            prop_assert!((0..=held).contains(&lag));
            if let Some(p) = point {
                if p >= low && p <= high {
                    prop_assert_eq!(lag, high - p);
                }
            }
        }
    }
}
