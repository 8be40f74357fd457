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
}

/// The partition numbers of a rebalance's list.
pub fn partitions(tpl: &TopicPartitionList) -> Vec<i32> {
    tpl.elements().iter().map(|e| e.partition()).collect()
}

/// When librdkafka calls a rebalance hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Pre,
    Post,
}

/// Reports a rebalance to `metrics` and says what changed: partitions are revoked in the
/// `Pre` hook (before they go) and assigned in the `Post` hook. Every consumer context calls
/// it from both hooks, so rebalances are logged and counted one way.
pub fn report(metrics: &ConsumerMetrics, hook: Hook, rebalance: &Rebalance<'_>) -> Option<Rebalanced> {
    match (hook, rebalance) {
        (Hook::Pre, Rebalance::Revoke(tpl)) => {
            let revoked = partitions(tpl);
            metrics.revoked(&revoked);
            Some(Rebalanced::Revoked(revoked))
        }
        (Hook::Post, Rebalance::Assign(tpl)) => {
            let assigned = partitions(tpl);
            metrics.assigned(&assigned);
            Some(Rebalanced::Assigned(assigned))
        }
        (Hook::Pre, Rebalance::Error(e)) => {
            metrics.rebalance_error(e);
            None
        }
        _ => None,
    }
}

impl ClientContext for RebalanceLog {}

impl ConsumerContext for RebalanceLog {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.push_reported(Hook::Pre, rebalance);
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.push_reported(Hook::Post, rebalance);
    }
}

impl RebalanceLog {
    fn push_reported(&self, hook: Hook, rebalance: &Rebalance<'_>) {
        if let Some(change) = report(&self.metrics, hook, rebalance) {
            self.changes.lock().unwrap_or_else(|e| e.into_inner()).push(change);
        }
    }
}

/// A consumer whose rebalances are recorded in a [`RebalanceLog`].
pub type LoggedConsumer = StreamConsumer<RebalanceLog>;
