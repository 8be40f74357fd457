//! What every consumer reports, one event per method: each logs and counts together, so a
//! consume error (say) is reported the same way by every daemon (docs/metrics.md).

use std::fmt::Display;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Group;

/// The consumer metrics of one service, `tayga_<service>_…`. A default value counts into
/// metrics that no registry shows (for consumers built outside a daemon).
#[derive(Clone, Default)]
pub struct ConsumerMetrics {
    service: Arc<str>,
    pub consumed: Counter,
    pub undecodable: Counter,
    pub consume_errors: Counter,
    pub commits: Counter,
    pub commit_errors: Counter,
    pub lag: Gauge,
    pub assigned_partitions: Gauge,
}

impl ConsumerMetrics {
    /// Creates the metrics of `group`'s service and registers them in `registry`.
    pub fn register(registry: &mut Registry, group: Group) -> ConsumerMetrics {
        let service = group.service();
        let m = ConsumerMetrics { service: service.into(), ..ConsumerMetrics::default() };
        let r = registry.sub_registry_with_prefix(format!("tayga_{service}"));
        r.register("consumed_records", "Records read from the topic", m.consumed.clone());
        r.register(
            "undecodable_records",
            "Records that can never be decoded (headers, OTLP protobuf or alert JSON); logged, skipped and committed past",
            m.undecodable.clone(),
        );
        r.register(
            "consume_errors",
            "Errors the consumer reported while reading (broker unreachable, …)",
            m.consume_errors.clone(),
        );
        r.register("commits", "Accepted offset commits", m.commits.clone());
        r.register(
            "commit_errors",
            "Offset commits the broker did not accept; their offsets go with the next commit",
            m.commit_errors.clone(),
        );
        r.register(
            "lag_records",
            "Records not yet processed and committed (high watermark − commit point)",
            m.lag.clone(),
        );
        r.register(
            "assigned_partitions",
            "Partitions of the topic assigned to this member",
            m.assigned_partitions.clone(),
        );
        m
    }

    /// A record was read.
    pub fn consumed(&self) {
        self.consumed.inc();
    }

    /// A record that no retry can make readable is skipped; its offset will be committed.
    pub fn undecodable(&self, topic: &str, partition: i32, offset: i64, error: &dyn Display) {
        self.undecodable.inc();
        tracing::error!(
            service = %self.service, topic, partition, offset, error = %error,
            "skipping a record that cannot be decoded; its offset will be committed"
        );
    }

    /// Reading failed; the consumer carries on (librdkafka reconnects by itself).
    pub fn consume_error(&self, topic: &str, error: &dyn Display) {
        self.consume_errors.inc();
        tracing::warn!(service = %self.service, topic, error = %error, "reading from the topic failed");
    }

    pub fn committed(&self, offsets: &[(i32, i64)]) {
        self.commits.inc();
        tracing::debug!(service = %self.service, ?offsets, "committed");
    }

    /// A commit the broker refused: the offsets are carried into the next one (or, after a
    /// revoke or a restart, their records are read again, which is harmless).
    pub fn commit_failed(&self, error: &dyn Display) {
        self.commit_errors.inc();
        tracing::warn!(service = %self.service, error = %error, "committing offsets failed; the next commit covers them");
    }

    pub fn lag(&self, records: i64) {
        self.lag.set(records);
    }

    pub fn assigned(&self, partitions: &[i32]) {
        self.assigned_partitions.set(partitions.len() as i64);
        tracing::info!(service = %self.service, ?partitions, "partitions assigned");
    }

    pub fn revoked(&self, partitions: &[i32]) {
        self.assigned_partitions.set(0);
        tracing::info!(service = %self.service, ?partitions, "partitions revoked");
    }

    pub fn rebalance_error(&self, error: &dyn Display) {
        tracing::warn!(service = %self.service, error = %error, "rebalance error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_metrics_follow_the_naming_scheme() {
        let mut registry = Registry::default();
        let m = ConsumerMetrics::register(&mut registry, Group::Assembler);
        m.consumed();
        m.consume_error("t", &"down");
        m.committed(&[(0, 1)]);
        m.lag(7);
        m.assigned(&[0, 1, 2]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "tayga_assembler_consumed_records_total 1",
            "tayga_assembler_undecodable_records_total 0",
            "tayga_assembler_consume_errors_total 1",
            "tayga_assembler_commits_total 1",
            "tayga_assembler_commit_errors_total 0",
            "tayga_assembler_lag_records 7",
            "tayga_assembler_assigned_partitions 3",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
