//! The consumer kit every consuming daemon is built from, so a consumer is assembled once:
//!
//! - [`Group`]: the settings of each of Tayga's consumer groups (docs/design.md#topics), and
//!   [`subscribe`], which creates a member of one and joins it;
//! - [`rebalance`]: the context that records rebalances for the loop to apply;
//! - [`commit`]: the explicit commit of offsets that moved;
//! - [`lag`]: one lag computation, for the daemons (refreshed off their loops), the writer
//!   and `tayga topics list`;
//! - [`poll`]: the wait for the next record, tick or stop at the top of a consumer loop;
//! - [`metrics`]: the metrics and log lines every consumer reports, one event each;
//! - [`leave`]: the leave-group step at the end.
//!
//! The writer polls on a thread of its own (its rebalance callback must store and commit
//! synchronously), so it brings its own context but uses the same pieces.

pub mod commit;
pub mod lag;
pub mod metrics;
pub mod poll;
pub mod rebalance;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rdkafka::consumer::{Consumer, ConsumerContext};
use rdkafka::ClientConfig;

pub use self::commit::{commit_moved, commit_sync};
pub use self::lag::LagRefresher;
pub use self::metrics::ConsumerMetrics;
pub use self::rebalance::{partitions, LoggedConsumer, RebalanceLog, Rebalanced};
use crate::config::KafkaConfig;
use crate::config::Names;

/// One of Tayga's consumer groups: which service reads which topic, and how long its
/// members may go between polls before the broker considers them stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Writer,
    Assembler,
    Logminer,
    Notifier,
}

impl Group {
    /// The service's name, as in `tayga serve <service>` and its metric names.
    pub fn service(self) -> &'static str {
        match self {
            Group::Writer => "writer",
            Group::Assembler => "assembler",
            Group::Logminer => "logminer",
            Group::Notifier => "notifier",
        }
    }

    pub fn name(self, names: &Names) -> &str {
        match self {
            Group::Writer => &names.writer_group,
            Group::Assembler => &names.assembler_group,
            Group::Logminer => &names.logminer_group,
            Group::Notifier => &names.notifier_group,
        }
    }

    /// The topic the group reads.
    pub fn topic(self, names: &Names) -> &str {
        match self {
            Group::Writer | Group::Assembler => &names.signals,
            Group::Logminer => &names.logs,
            Group::Notifier => &names.alerts,
        }
    }

    pub fn max_poll_interval(self) -> Duration {
        match self {
            // The writer polls at least every backoff cap (5 s), even while ClickHouse is
            // down; 5 minutes bounds a stuck insert. The assembler and the logminer poll
            // between ticks; 5 minutes is never reached by a healthy member.
            Group::Writer | Group::Assembler | Group::Logminer => Duration::from_secs(300),
            // docs/design.md#notifier-retries: long enough that waits at the Retry-After cap (about 35 minutes for
            // 8 attempts) do not cause a rebalance.
            Group::Notifier => Duration::from_secs(40 * 60),
        }
    }

    /// The settings of a member: explicit commits only (ARCHITECTURE.md invariant).
    pub fn config(self, kafka: &KafkaConfig, names: &Names) -> ClientConfig {
        super::consumer_config(kafka, self.name(names), &format!("tayga-{}", self.service()), self.max_poll_interval())
    }
}

/// Creates a member of `group` whose rebalances are recorded in a [`RebalanceLog`] that
/// reports to `metrics`, and subscribes it to the group's topic.
pub fn subscribe(
    kafka: &KafkaConfig,
    names: &Names,
    group: Group,
    metrics: ConsumerMetrics,
) -> anyhow::Result<Arc<LoggedConsumer>> {
    let consumer: LoggedConsumer = group
        .config(kafka, names)
        .create_with_context(RebalanceLog::new(metrics))
        .context("creating the Kafka consumer")?;
    let topic = group.topic(names);
    consumer.subscribe(&[topic]).with_context(|| format!("subscribing to {topic}"))?;
    Ok(Arc::new(consumer))
}

/// Leaves the group now rather than whenever the last clone is dropped, off the async
/// workers: librdkafka's leave blocks until the group has handed the partitions over.
pub async fn leave<C, X>(consumer: Arc<C>)
where
    C: Consumer<X> + Send + Sync + 'static,
    X: ConsumerContext + 'static,
{
    let _ = tokio::task::spawn_blocking(move || {
        consumer.unsubscribe();
        drop(consumer);
    })
    .await;
}

/// [`leave`] for a consumer polled on a thread of its own (the writer).
pub fn leave_now<C: Consumer<X>, X: ConsumerContext>(consumer: C) {
    consumer.unsubscribe();
    drop(consumer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_reads_its_topic_with_explicit_commits() {
        let names = Names::new("t1");
        let kafka = KafkaConfig::default();
        let shape: Vec<(&str, &str, &str)> = [Group::Writer, Group::Assembler, Group::Logminer, Group::Notifier]
            .into_iter()
            .map(|g| (g.service(), g.name(&names), g.topic(&names)))
            .collect();
        assert_eq!(
            shape,
            vec![
                ("writer", "t1-writer", "t1.signals"),
                ("assembler", "t1-assembler", "t1.signals"),
                ("logminer", "t1-logminer", "t1.logs"),
                ("notifier", "t1-notifier", "t1.alerts"),
            ]
        );
        let c = Group::Notifier.config(&kafka, &names);
        assert_eq!(c.get("group.id"), Some("t1-notifier"));
        assert_eq!(c.get("client.id"), Some("tayga-notifier"));
        assert_eq!(c.get("enable.auto.commit"), Some("false"));
        assert_eq!(c.get("max.poll.interval.ms"), Some("2400000"));
        assert_eq!(Group::Writer.config(&kafka, &names).get("max.poll.interval.ms"), Some("300000"));
    }
}
