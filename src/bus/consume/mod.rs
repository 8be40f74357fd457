//! How every consuming daemon consumes, written once:
//!
//! - [`Group`]: the settings of each of Tayga's consumer groups (docs/design.md#topics);
//! - [`Member`]: a member of one, subscribed, with its poller, its lag refresher, its
//!   publisher and the partitions and commit points it holds;
//! - [`run`] and [`Handler`]: the one consume loop and the trait a daemon implements to be
//!   driven by it (a record, a tick, an assignment, a revoke, the stop);
//! - [`poller`]: the thread that polls a member's consumer and hands records to the loop;
//! - [`rebalance`]: the consumer's context, which hands rebalances to the loop and holds
//!   a revoke until the loop has applied it;
//! - [`commit`]: the explicit, synchronous commit;
//! - [`lag`]: one lag computation, for the daemons (refreshed off their loops) and
//!   `tayga topics list`;
//! - [`metrics`]: the metrics and log lines every consumer reports, one event each.

pub mod commit;
pub mod lag;
mod member;
pub mod metrics;
mod poller;
pub mod rebalance;
mod run;

use std::time::Duration;

use rdkafka::ClientConfig;

pub use self::commit::commit_sync;
pub use self::lag::LagRefresher;
pub use self::member::Member;
pub use self::metrics::ConsumerMetrics;
pub use self::run::{apply_rebalances, run, Handler};
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

    /// How long the group waits for a member between polls, and for a member to apply a
    /// revoke (the poller polls continuously, but waits inside a revoke until the loop
    /// has applied it).
    pub fn max_poll_interval(self) -> Duration {
        match self {
            // Their revokes are bounded in seconds (the writer's store, the logminer's
            // flush and new-template pass); 5 minutes is never reached by a healthy member.
            Group::Writer | Group::Assembler | Group::Logminer => Duration::from_secs(300),
            // docs/design.md#notifier-retries: a revoke waits for the record in hand, and
            // long enough that waits at the Retry-After cap (about 35 minutes for 8
            // attempts) do not cause a rebalance.
            Group::Notifier => Duration::from_secs(40 * 60),
        }
    }

    /// Whether the service publishes what it makes (stories, alerts): its member then
    /// brings a [`crate::bus::producer::Publisher`].
    pub fn publishes(self) -> bool {
        matches!(self, Group::Assembler | Group::Logminer)
    }

    /// The settings of a member: explicit commits only (ARCHITECTURE.md invariant).
    pub fn config(self, kafka: &KafkaConfig, names: &Names) -> ClientConfig {
        super::consumer_config(kafka, self.name(names), &format!("tayga-{}", self.service()), self.max_poll_interval())
    }
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
