//! A member of one of Tayga's consumer groups, with everything a consume loop holds beside
//! the daemon's own work: the subscribed consumer and its [`Poller`], the [`LagRefresher`]
//! that reads its lag off the loop, the [`Publisher`] of a daemon that publishes, and the
//! partitions it holds with the offsets the broker accepted for them. A daemon reaches these
//! only through the member it is handed ([`super::Handler`]), so each is made and kept in one
//! place.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use tokio::sync::mpsc::{Receiver, UnboundedReceiver};

use super::poller::{Polled, Poller};
use super::rebalance::{Change, MemberConsumer, MemberContext, Rebalanced};
use super::{commit_sync, ConsumerMetrics, Group, LagRefresher};
use crate::bus::producer::Publisher;
use crate::config::{KafkaConfig, Names};

/// How long a stopping member waits for what it published to be acknowledged.
const PUBLISH_FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// What a member waited for.
pub(super) enum Next {
    Rebalance(Change),
    Record(Polled),
}

/// One member of `group`, subscribed to the group's topic and polled by its [`Poller`].
pub struct Member {
    consumer: Arc<MemberConsumer>,
    poller: Poller,
    records: Receiver<Polled>,
    changes: UnboundedReceiver<Change>,
    topic: String,
    metrics: ConsumerMetrics,
    lag: LagRefresher,
    publisher: Option<Publisher>,
    /// The partitions the group assigned to this member, as the loop last applied them.
    assigned: BTreeSet<i32>,
    /// Per assigned partition, the next offset the broker accepted as committed through
    /// [`Member::commit`].
    committed: BTreeMap<i32, i64>,
    /// Revokes the loop has applied, and per partition the count at its last revoke: a
    /// record polled before that revoke is not read (its partition may be ours again,
    /// read afresh from the committed offset).
    revokes: u64,
    revoked_at: BTreeMap<i32, u64>,
}

impl Member {
    /// Joins `group`: subscribes, and starts the poller (on the calling runtime). The
    /// member publishes when its group does.
    pub fn join(kafka: &KafkaConfig, names: &Names, group: Group, metrics: ConsumerMetrics) -> anyhow::Result<Self> {
        let lag = LagRefresher::new(kafka, names, group, metrics.clone())
            .context("creating the Kafka client that reads the lag")?;
        let publisher =
            group.publishes().then(|| Publisher::new(kafka)).transpose().context("creating the Kafka producer")?;
        let (context, changes) = MemberContext::new(metrics.clone(), group.max_poll_interval());
        let consumer: MemberConsumer =
            group.config(kafka, names).create_with_context(context).context("creating the Kafka consumer")?;
        let topic = group.topic(names).to_string();
        consumer.subscribe(&[&topic]).with_context(|| format!("subscribing to {topic}"))?;
        let consumer = Arc::new(consumer);
        let (poller, records) = Poller::start(consumer.clone(), topic.clone(), group.service())
            .context("starting the consumer's poller thread")?;
        Ok(Member {
            consumer,
            poller,
            records,
            changes,
            topic,
            metrics,
            lag,
            publisher,
            assigned: BTreeSet::new(),
            committed: BTreeMap::new(),
            revokes: 0,
            revoked_at: BTreeMap::new(),
        })
    }

    /// How many partitions the topic has, from the broker's metadata (none when it does
    /// not answer within `timeout`). Blocks the caller for at most `timeout`.
    pub fn partition_count(&self, timeout: Duration) -> Option<i32> {
        let metadata = self.consumer.fetch_metadata(Some(&self.topic), timeout).ok()?;
        let count = metadata.topics().iter().find(|t| t.name() == self.topic)?.partitions().len();
        (count > 0).then_some(count as i32)
    }

    /// The rebalances reported since the last call, oldest first, without waiting.
    pub(super) fn take_rebalances(&mut self) -> Vec<Change> {
        std::iter::from_fn(|| self.changes.try_recv().ok()).collect()
    }

    /// Waits for the next rebalance or, when `reading`, the next record (a rebalance first
    /// when both are there); the loop calls it. Never resolves once the poller is gone.
    pub(super) async fn next(&mut self, reading: bool) -> Next {
        tokio::select! {
            biased;
            Some(change) = self.changes.recv() => Next::Rebalance(change),
            Some(polled) = self.records.recv(), if reading => Next::Record(polled),
            else => std::future::pending().await,
        }
    }

    /// Whether `polled` was read while its partition was this member's and has not been
    /// revoked since: only such a record is the daemon's to read.
    pub(super) fn holds(&self, polled: &Polled) -> bool {
        let partition = polled.record.partition();
        self.assigned.contains(&partition)
            && self.revoked_at.get(&partition).is_none_or(|r| *r <= polled.revokes_before)
    }

    /// Commits every `(partition, next offset)` of a partition it holds that moved since the
    /// last accepted commit, synchronously on a blocking thread (never auto-commit). A
    /// refused commit is left for the next one: after a restart or a revoke its records are
    /// read again, which is harmless.
    pub async fn commit(&mut self, offsets: impl IntoIterator<Item = (i32, i64)>) {
        let held = offsets.into_iter().filter(|(p, _)| self.assigned.contains(p));
        let moved = moved(held, &self.committed);
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

    /// Leaves the group: waits (bounded) for what was published to be acknowledged, stops
    /// the poller, then leaves now rather than whenever the last clone is dropped, off the
    /// async workers (librdkafka's leave blocks until the group has handed the partitions
    /// over; its revoke waits for no loop).
    pub async fn leave(self) {
        if let Some(publisher) = &self.publisher {
            publisher.flush(PUBLISH_FLUSH_LIMIT);
        }
        let Member { consumer, poller, changes, records, .. } = self;
        consumer.context().end_of_loop();
        // Revokes still queued are dropped with the channel: their hooks return.
        drop(changes);
        drop(records);
        let _ = tokio::task::spawn_blocking(move || {
            poller.stop();
            consumer.unsubscribe();
            drop(consumer);
        })
        .await;
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

    /// Notes what the group changed: partitions assigned, or revoked (forgotten with their
    /// commit points: their next owner commits them). The loop calls it after the
    /// handler's own step for a revoke, before it for an assignment.
    pub(super) fn note(&mut self, rebalanced: &Rebalanced) {
        match rebalanced {
            Rebalanced::Assigned(partitions) => self.assigned.extend(partitions),
            Rebalanced::Revoked(partitions) => {
                self.revokes += 1;
                for p in partitions {
                    self.assigned.remove(p);
                    self.committed.remove(p);
                    self.revoked_at.insert(*p, self.revokes);
                }
            }
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
