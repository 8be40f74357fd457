//! A member of one of Tayga's consumer groups, with everything a consume loop holds beside
//! the daemon's own work: the subscribed consumer, the [`LagRefresher`] that reads its lag
//! off the loop, the [`Publisher`] of a daemon that publishes, and the partitions it holds
//! with the offsets the broker accepted for them. A daemon reaches these only through the
//! member it is handed ([`super::Handler`]), so each is made and kept in one place.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rdkafka::config::FromClientConfigAndContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::OwnedMessage;

use super::{commit_sync, ConsumerMetrics, Group, LagRefresher, LoggedConsumer, RebalanceLog, Rebalanced};
use crate::bus::producer::Publisher;
use crate::config::{KafkaConfig, Names};

/// How long a stopping member waits for what it published to be acknowledged.
const PUBLISH_FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// One member of `group`, subscribed to the group's topic. `C` is the consumer: the async
/// [`LoggedConsumer`] every daemon but the writer polls through [`super::run`], or the
/// writer's `BaseConsumer`, polled on a thread of its own.
pub struct Member<C = LoggedConsumer> {
    consumer: Arc<C>,
    topic: String,
    metrics: ConsumerMetrics,
    lag: LagRefresher,
    publisher: Option<Publisher>,
    /// The partitions the group assigned to this member, as the loop last applied them.
    assigned: BTreeSet<i32>,
    /// Per assigned partition, the next offset the broker accepted as committed through
    /// [`Member::commit`]. (The writer commits from its rebalance callback with
    /// [`commit_sync`] and reports its group's lag, so nothing is kept here for it.)
    committed: BTreeMap<i32, i64>,
}

impl Member<LoggedConsumer> {
    /// Joins `group` with a consumer whose rebalances are recorded for the loop to apply.
    pub fn join(kafka: &KafkaConfig, names: &Names, group: Group, metrics: ConsumerMetrics) -> anyhow::Result<Self> {
        let context = RebalanceLog::new(metrics.clone());
        Member::join_with(kafka, names, group, metrics, |_| context)
    }

    /// How many partitions the topic has, from the broker's metadata (none when it does
    /// not answer within `timeout`). Blocks the caller for at most `timeout`.
    pub fn partition_count(&self, timeout: Duration) -> Option<i32> {
        let metadata = self.consumer.fetch_metadata(Some(&self.topic), timeout).ok()?;
        let count = metadata.topics().iter().find(|t| t.name() == self.topic)?.partitions().len();
        (count > 0).then_some(count as i32)
    }

    /// The rebalances reported since the last call, oldest first.
    pub(super) fn take_rebalances(&self) -> Vec<Rebalanced> {
        self.consumer.context().take()
    }

    /// Waits for the next record; the loop calls it.
    pub(super) async fn recv(&self) -> rdkafka::error::KafkaResult<OwnedMessage> {
        self.consumer.recv().await.map(|m| m.detach())
    }

    /// Commits every `(partition, next offset)` that moved since the last accepted commit,
    /// synchronously on a blocking thread (never auto-commit). A refused commit is left for
    /// the next one: after a restart or a revoke its records are read again, which is
    /// harmless.
    pub async fn commit(&mut self, offsets: impl IntoIterator<Item = (i32, i64)>) {
        let moved = moved(offsets, &self.committed);
        if moved.is_empty() {
            return;
        }
        let consumer = self.consumer.clone();
        let topic = self.topic.clone();
        let task = tokio::task::spawn_blocking(move || {
            let result = commit_sync(consumer.as_ref(), &topic, &moved, consumer.context().metrics());
            result.map(|()| moved)
        });
        match task.await {
            Ok(Ok(moved)) => self.committed.extend(moved),
            // Counted and logged by `commit_sync`.
            Ok(Err(_)) => {}
            Err(e) => tracing::error!(error = %e, "the commit task failed"),
        }
    }

    /// Leaves the group: waits (bounded) for what was published to be acknowledged, then
    /// leaves now rather than whenever the last clone is dropped, off the async workers
    /// (librdkafka's leave blocks until the group has handed the partitions over).
    pub async fn leave(self) {
        if let Some(publisher) = &self.publisher {
            publisher.flush(PUBLISH_FLUSH_LIMIT);
        }
        let consumer = self.consumer;
        let _ = tokio::task::spawn_blocking(move || {
            consumer.unsubscribe();
            drop(consumer);
        })
        .await;
    }
}

impl<X: ConsumerContext> Member<BaseConsumer<X>> {
    /// [`Member::leave`] for a member polled on a thread of its own (the writer), which
    /// publishes nothing.
    pub fn leave_now(self) {
        self.consumer.unsubscribe();
    }
}

impl<C> Member<C> {
    /// Joins `group` with a consumer of the caller's context, made by `context` from a
    /// handle on the member's lag refresher (the writer's context refreshes the lag while
    /// its loop waits out ClickHouse). The member publishes when its group does.
    pub fn join_with<X>(
        kafka: &KafkaConfig,
        names: &Names,
        group: Group,
        metrics: ConsumerMetrics,
        context: impl FnOnce(LagRefresher) -> X,
    ) -> anyhow::Result<Self>
    where
        X: ConsumerContext,
        C: Consumer<X> + FromClientConfigAndContext<X>,
    {
        let lag = LagRefresher::new(kafka, names, group, metrics.clone())
            .context("creating the Kafka client that reads the lag")?;
        let publisher =
            group.publishes().then(|| Publisher::new(kafka)).transpose().context("creating the Kafka producer")?;
        let consumer: C = group
            .config(kafka, names)
            .create_with_context(context(lag.clone()))
            .context("creating the Kafka consumer")?;
        let topic = group.topic(names).to_string();
        consumer.subscribe(&[&topic]).with_context(|| format!("subscribing to {topic}"))?;
        Ok(Member {
            consumer: Arc::new(consumer),
            topic,
            metrics,
            lag,
            publisher,
            assigned: BTreeSet::new(),
            committed: BTreeMap::new(),
        })
    }

    pub fn consumer(&self) -> &C {
        &self.consumer
    }

    /// The topic the member reads.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn metrics(&self) -> &ConsumerMetrics {
        &self.metrics
    }

    /// Where the daemon publishes, for a group that does ([`Group::publishes`]).
    pub fn publisher(&self) -> Option<&Publisher> {
        self.publisher.as_ref()
    }

    pub fn is_assigned(&self, partition: i32) -> bool {
        self.assigned.contains(&partition)
    }

    /// Notes partitions the group assigned.
    pub(super) fn note_assigned(&mut self, partitions: &[i32]) {
        self.assigned.extend(partitions);
    }

    /// Forgets revoked partitions and their commit points: their next owner commits them.
    pub(super) fn forget(&mut self, partitions: &[i32]) {
        for p in partitions {
            self.assigned.remove(p);
            self.committed.remove(p);
        }
    }

    /// Starts a refresh of the lag over the assigned partitions, from their commit points,
    /// when one is due; never waits ([`LagRefresher::refresh_when_due`]).
    pub fn refresh_lag(&self) {
        let points = self.assigned.iter().map(|p| (*p, self.committed.get(p).copied())).collect();
        self.lag.refresh_when_due(points);
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
