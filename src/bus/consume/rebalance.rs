//! The context of a consumer polled on the async runtime: it records rebalances for the
//! loop to apply before its next record, and carries the group's [`ConsumerMetrics`] so
//! the kit's commit and lag steps report through the consumer they are given.

use std::sync::Mutex;

use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::{ClientContext, TopicPartitionList};

use super::ConsumerMetrics;

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
    metrics: ConsumerMetrics,
}

impl RebalanceLog {
    pub fn new(metrics: ConsumerMetrics) -> RebalanceLog {
        RebalanceLog { changes: Mutex::default(), metrics }
    }

    /// The changes reported since the last call, oldest first.
    pub fn take(&self) -> Vec<Rebalanced> {
        std::mem::take(&mut *self.changes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn metrics(&self) -> &ConsumerMetrics {
        &self.metrics
    }

    fn push(&self, change: Rebalanced) {
        self.changes.lock().unwrap_or_else(|e| e.into_inner()).push(change);
    }
}

/// The partition numbers of a rebalance's list.
pub fn partitions(tpl: &TopicPartitionList) -> Vec<i32> {
    tpl.elements().iter().map(|e| e.partition()).collect()
}

impl ClientContext for RebalanceLog {}

impl ConsumerContext for RebalanceLog {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let revoked = partitions(tpl);
                self.metrics.revoked(&revoked);
                self.push(Rebalanced::Revoked(revoked));
            }
            Rebalance::Assign(_) => {}
            Rebalance::Error(e) => self.metrics.rebalance_error(e),
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            let assigned = partitions(tpl);
            self.metrics.assigned(&assigned);
            self.push(Rebalanced::Assigned(assigned));
        }
    }
}

/// A consumer whose rebalances are recorded in a [`RebalanceLog`].
pub type LoggedConsumer = StreamConsumer<RebalanceLog>;
