//! Lag, computed one way everywhere (the daemons' `tayga_<service>_lag_records` and
//! `tayga topics list`): over partitions, high watermark − commit point, where a partition
//! with no commit point counts from its low watermark.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};

use super::{ConsumerMetrics, Group};
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

/// How often a member's lag gauge is refreshed from the broker.
pub const LAG_EVERY: Duration = Duration::from_secs(5);

/// Keeps a member's `tayga_<service>_lag_records` fresh without ever holding up its loop.
///
/// The broker answers the requests of one connection in order, and a member's connection
/// usually carries a long-polling Fetch (up to `fetch.wait.max.ms`). Watermark requests
/// sent on it waited behind that Fetch, one partition after another: with 12 partitions
/// the loop stood still for up to 6 s every few seconds, and a log line sent meanwhile
/// missed its detection pass. So the watermarks are read by a client of its own, which
/// never joins the group, on a blocking thread the loop does not wait for. A clone shares
/// the client, the gauge and the schedule.
#[derive(Clone)]
pub struct LagRefresher {
    reader: Arc<BaseConsumer>,
    topic: String,
    metrics: ConsumerMetrics,
    /// When the last refresh ended, and whether one is under way.
    state: Arc<Mutex<(Option<Instant>, bool)>>,
}

impl LagRefresher {
    /// A refresher of `group`'s lag on its topic, reporting to `metrics` (the member's).
    pub fn new(kafka: &KafkaConfig, names: &Names, group: Group, metrics: ConsumerMetrics) -> KafkaResult<Self> {
        Ok(LagRefresher {
            reader: Arc::new(group_reader(kafka, group.name(names))?),
            topic: group.topic(names).to_string(),
            metrics,
            state: Arc::new(Mutex::new((None, false))),
        })
    }

    /// Starts a refresh of the lag of `partitions` (each with the commit point the member
    /// holds in memory; a partition without one counts from the group's committed offset),
    /// unless one is under way or the last ended less than [`LAG_EVERY`] ago: a refresh
    /// that waited on a slow broker is not followed at once by the next. Never waits; a
    /// broker that does not answer within a second per call leaves the gauge as it was.
    pub fn refresh_when_due(&self, partitions: Vec<(i32, Option<i64>)>) {
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.1 || state.0.is_some_and(|ended| ended.elapsed() < LAG_EVERY) {
                return;
            }
            state.1 = true;
        }
        let (reader, topic, metrics, state) =
            (self.reader.clone(), self.topic.clone(), self.metrics.clone(), self.state.clone());
        tokio::task::spawn_blocking(move || {
            if let Some(lag) = member_lag(reader.as_ref(), &topic, partitions, Duration::from_secs(1)) {
                metrics.lag(lag);
            }
            *state.lock().unwrap_or_else(|e| e.into_inner()) = (Some(Instant::now()), false);
        });
    }
}

fn member_lag(
    reader: &BaseConsumer,
    topic: &str,
    partitions: Vec<(i32, Option<i64>)>,
    timeout: Duration,
) -> Option<i64> {
    let unknown: Vec<i32> = partitions.iter().filter(|(_, point)| point.is_none()).map(|(p, _)| *p).collect();
    let group_points =
        if unknown.is_empty() { Vec::new() } else { committed_offsets(reader, topic, unknown, timeout).ok()? };
    let points: Vec<(i32, Option<i64>)> = partitions
        .into_iter()
        .map(|(p, point)| (p, point.or_else(|| group_points.iter().find(|(q, _)| *q == p).and_then(|(_, o)| *o))))
        .collect();
    lag_of(reader, topic, &points, timeout).ok()
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

    /// The refresh runs beside the loop: the call returns with the refresh under way, a
    /// second call meanwhile starts nothing, and a broker that never answers leaves the
    /// gauge as it was.
    #[tokio::test]
    async fn a_refresh_never_holds_the_caller_and_a_silent_broker_keeps_the_gauge() {
        let kafka = KafkaConfig { brokers: "127.0.0.1:1".into(), ..KafkaConfig::default() };
        let names = crate::config::Config::default().names();
        let metrics = ConsumerMetrics::default();
        metrics.lag.set(7);
        let refresher = LagRefresher::new(&kafka, &names, Group::Logminer, metrics.clone()).unwrap();
        refresher.refresh_when_due(vec![(0, None), (1, Some(3))]);
        assert!(refresher.state.lock().unwrap().1, "the call returned before the refresh ended");
        refresher.refresh_when_due(vec![(0, None)]);
        let deadline = Instant::now() + Duration::from_secs(60);
        while refresher.state.lock().unwrap().1 {
            assert!(Instant::now() < deadline, "the refresh never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(metrics.lag.get(), 7);
        // Ended just now: not due again before LAG_EVERY.
        refresher.refresh_when_due(vec![(0, None)]);
        assert!(!refresher.state.lock().unwrap().1);
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
