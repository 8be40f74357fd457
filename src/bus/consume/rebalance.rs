//! The context of every member's consumer: it reports each rebalance to the group's
//! [`ConsumerMetrics`] and hands it to the consume loop, and a revoke waits until the loop
//! has applied it, so a daemon stores and commits what it read before the partitions go.
//!
//! librdkafka calls the hooks on the member's poller thread ([`super::poller`]), from
//! inside `poll`, where the loop's state cannot be reached; the loop runs on the async
//! runtime and acknowledges each revoke once its handler is done with it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, TopicPartitionList};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::ConsumerMetrics;

/// A partition change, as the group reported it.
#[derive(Debug, PartialEq, Eq)]
pub enum Rebalanced {
    Assigned(Vec<i32>),
    Revoked(Vec<i32>),
}

/// A change on its way to the loop; a revoke carries the acknowledgement its hook waits for.
#[derive(Debug)]
pub struct Change {
    pub rebalanced: Rebalanced,
    applied: Option<SyncSender<()>>,
}

impl Change {
    /// The loop has applied the change: a revoke's hook may return.
    pub fn done(self) {
        if let Some(applied) = self.applied {
            let _ = applied.send(());
        }
    }
}

/// Reports rebalances and hands them to the loop in the order they happened.
pub struct MemberContext {
    metrics: ConsumerMetrics,
    changes: UnboundedSender<Change>,
    /// Revokes reported so far. A record carries the count from when it was polled, so the
    /// loop can tell a record read before a revoke of its partition (see [`super::Member`]).
    revokes: AtomicU64,
    /// Set when the loop has ended: a revoke then (the member leaving) waits for nobody.
    loop_ended: AtomicBool,
    /// How long a revoke waits for the loop: the group's `max.poll.interval.ms`, which is
    /// also how long the group waits for the member to rejoin. A loop busy past it applies
    /// the revoke later, and what it could not commit is read again by the next owner.
    revoke_wait: Duration,
}

impl MemberContext {
    /// A context and the receiving end the loop reads its changes from.
    pub fn new(metrics: ConsumerMetrics, revoke_wait: Duration) -> (MemberContext, UnboundedReceiver<Change>) {
        let (changes, received) = unbounded_channel();
        let context = MemberContext {
            metrics,
            changes,
            revokes: AtomicU64::new(0),
            loop_ended: AtomicBool::new(false),
            revoke_wait,
        };
        (context, received)
    }

    pub fn metrics(&self) -> &ConsumerMetrics {
        &self.metrics
    }

    /// Revokes reported so far.
    pub fn revokes(&self) -> u64 {
        self.revokes.load(Ordering::SeqCst)
    }

    pub fn end_of_loop(&self) {
        self.loop_ended.store(true, Ordering::SeqCst);
    }

    fn revoked(&self, partitions: Vec<i32>) {
        self.revokes.fetch_add(1, Ordering::SeqCst);
        if self.loop_ended.load(Ordering::SeqCst) {
            return;
        }
        let (applied, acknowledged) = sync_channel(1);
        let change = Change { rebalanced: Rebalanced::Revoked(partitions.clone()), applied: Some(applied) };
        if self.changes.send(change).is_err() {
            return;
        }
        match acknowledged.recv_timeout(self.revoke_wait) {
            // Applied, or the loop ended and dropped the change: either way nothing waits.
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {}
            Err(RecvTimeoutError::Timeout) => tracing::warn!(
                ?partitions,
                wait_secs = self.revoke_wait.as_secs(),
                "the revoke was not applied in time: the partitions go with what was not committed; their next owner reads it again"
            ),
        }
    }
}

/// The partition numbers of a rebalance's list.
pub fn partitions(tpl: &TopicPartitionList) -> Vec<i32> {
    tpl.elements().iter().map(|e| e.partition()).collect()
}

impl ClientContext for MemberContext {}

impl ConsumerContext for MemberContext {
    /// Partitions are revoked before they go.
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let revoked = partitions(tpl);
                self.metrics.revoked(&revoked);
                self.revoked(revoked);
            }
            Rebalance::Error(e) => self.metrics.rebalance_error(e),
            Rebalance::Assign(_) => {}
        }
    }

    /// Partitions are assigned once they are ours.
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            let assigned = partitions(tpl);
            self.metrics.assigned(&assigned);
            let _ = self.changes.send(Change { rebalanced: Rebalanced::Assigned(assigned), applied: None });
        }
    }
}

/// A member's consumer.
pub type MemberConsumer = BaseConsumer<MemberContext>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A revoke's hook returns once the loop applied it, or at once when the loop is gone;
    /// either way the count of revokes moves, so older records can be told apart.
    #[test]
    fn a_revoke_waits_for_the_loop_and_never_for_a_loop_that_ended() {
        let (context, mut changes) = MemberContext::new(ConsumerMetrics::default(), Duration::from_secs(60));
        let context = std::sync::Arc::new(context);
        let hook = {
            let context = context.clone();
            std::thread::spawn(move || context.revoked(vec![1, 2]))
        };
        let change = changes.blocking_recv().unwrap();
        assert_eq!(change.rebalanced, Rebalanced::Revoked(vec![1, 2]));
        assert!(!hook.is_finished(), "the hook returned before the loop applied the revoke");
        change.done();
        hook.join().unwrap();
        assert_eq!(context.revokes(), 1);

        context.end_of_loop();
        context.revoked(vec![3]);
        assert_eq!(context.revokes(), 2);
        assert!(changes.try_recv().is_err(), "nothing is handed to a loop that ended");
    }
}
