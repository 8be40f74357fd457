//! The Kafka side of Tayga: topic and group names (docs/design.md#topics), client settings, and
//! topic creation and inspection. Every service creates the topics the same way, through
//! [`topics::ensure_topics`], so whichever starts first decides the partition counts.

pub mod consume;
pub mod packed;
pub mod probe;
pub mod producer;
pub mod security;
pub mod topics;

use std::time::Duration;

use rdkafka::ClientConfig;

use crate::config::KafkaConfig;

/// Partitions of the stories and alerts topics (docs/design.md#topics): fixed, not `kafka.partitions`.
pub const SMALL_TOPIC_PARTITIONS: i32 = 3;

/// Settings every client of this install shares, TLS and SASL included.
pub fn client_config(kafka: &KafkaConfig) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &kafka.brokers)
        .set("client.id", "tayga")
        // Notice a dead broker in seconds, not minutes (INFRA.md).
        .set("reconnect.backoff.max.ms", "200")
        .set("socket.connection.setup.timeout.ms", "5000")
        .set("log_level", "3");
    security::apply(&mut config, kafka);
    config
}

/// A member that dies without leaving (SIGKILL) holds its partitions this long before the
/// group hands them to the others.
pub const SESSION_TIMEOUT_MS: u64 = 10_000;

/// Settings of a consumer in `group` that commits explicitly, and only explicitly, after
/// what it read is stored (ARCHITECTURE.md invariant). `max_poll_interval` bounds the
/// longest gap between polls before the broker considers the member stuck.
pub fn consumer_config(kafka: &KafkaConfig, group: &str, client_id: &str, max_poll_interval: Duration) -> ClientConfig {
    let mut c = client_config(kafka);
    c.set("group.id", group)
        .set("client.id", client_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("max.poll.interval.ms", max_poll_interval.as_millis().to_string())
        .set("session.timeout.ms", SESSION_TIMEOUT_MS.to_string())
        .set("heartbeat.interval.ms", "3000");
    c
}

/// How long an operator command waits for the broker before it says so.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);
