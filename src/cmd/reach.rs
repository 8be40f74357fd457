//! The check a command makes before it talks to a server, within `--timeout`, told the
//! operator's way: the probes are `bus::probe` and `store::probe`; this names the server,
//! the flag that bounds the wait and what to do (`cmd::fail` adds the hint). librdkafka
//! retries a refused connection until its own timeout and the ClickHouse client wraps the
//! refusal three times; the probes answer a refused port at once, in one sentence.

use std::time::Duration;

use crate::config::{ClickHouseConfig, KafkaConfig};

#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    #[error("cannot reach the broker at {brokers}: {why}")]
    Broker { brokers: String, why: String },
    /// The broker answered and refused this client: the line says what to do.
    #[error("{0}")]
    BrokerRefused(String),
    #[error("cannot reach ClickHouse at {url}: {why}")]
    ClickHouse { url: String, why: String },
    #[error(
        "ClickHouse at {url} presented a certificate this machine does not trust ({why}): {}",
        crate::store::UNTRUSTED_ADVICE
    )]
    Untrusted { url: String, why: String },
}

impl Unreachable {
    pub fn hint(&self) -> &'static str {
        match self {
            Unreachable::Broker { .. } => super::fail::BROKER_HINT,
            // Its line already says what to do.
            Unreachable::BrokerRefused(_) => "",
            Unreachable::ClickHouse { .. } => super::fail::CLICKHOUSE_HINT,
            Unreachable::Untrusted { .. } => crate::store::UNTRUSTED_ADVICE,
        }
    }
}

/// Succeeds when at least one bootstrap broker accepts a connection (and, with TLS or SASL
/// configured, this client's certificate check and credentials).
pub async fn broker(kafka: &KafkaConfig, timeout: Duration) -> Result<(), Unreachable> {
    use crate::bus::probe::Failure;
    crate::bus::probe::reachable(kafka, timeout).await.map_err(|failure| match failure {
        Failure::Down(why) => Unreachable::Broker { brokers: kafka.brokers.clone(), why: with_flag(why, timeout) },
        Failure::Refused(line) => Unreachable::BrokerRefused(line),
    })
}

/// Succeeds when the broker accepts a connection and answers for `topic`, which exists, all
/// within `timeout` (a broker that accepts and never answers is bounded by librdkafka's
/// metadata timeout, set to the same value). A command that writes and then publishes calls
/// it before its first write.
pub async fn topic(kafka: &KafkaConfig, topic: &str, timeout: Duration) -> anyhow::Result<()> {
    use anyhow::Context;
    broker(kafka, timeout).await?;
    let topics = crate::bus::topics::partition_counts_within(kafka, Some(topic), timeout)
        .await
        .with_context(|| format!("reading topic {topic} from {}", kafka.brokers))?;
    anyhow::ensure!(topics.contains_key(topic), "topic {topic} does not exist; create it with `tayga topics create`");
    Ok(())
}

/// Succeeds when ClickHouse's `/ping` answers within `timeout` (a refused port at once).
pub async fn clickhouse(config: &ClickHouseConfig, timeout: Duration) -> Result<(), Unreachable> {
    use crate::store::probe::PingFailure;
    let url = crate::config::redact::url(&config.url);
    crate::store::probe::reachable(config, timeout).await.map_err(|failure| match failure {
        PingFailure::Untrusted(why) => Unreachable::Untrusted { url, why },
        PingFailure::Other(why) => Unreachable::ClickHouse { url, why: with_flag(why, timeout) },
    })
}

/// A timeout named as the operator sets it.
fn with_flag(why: String, timeout: Duration) -> String {
    if why.starts_with("no answer within") {
        format!("no answer within {} (--timeout)", humanize(timeout))
    } else {
        why
    }
}

/// `10s`, `1.5s`, `250ms`.
pub fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_port_fails_before_the_timeout() {
        // Bind then drop: the port is free and refuses.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let kafka = KafkaConfig { brokers: format!("127.0.0.1:{port}"), ..Default::default() };
        let started = std::time::Instant::now();
        let timeout = Duration::from_secs(30);
        let err = broker(&kafka, timeout).await.unwrap_err();
        assert!(started.elapsed() < timeout, "waited for the timeout");
        assert!(err.to_string().ends_with("connection refused"), "{err}");
    }

    #[tokio::test]
    async fn a_port_that_accepts_and_never_answers_fails_at_the_timeout() {
        // Listening, never accepting: the kernel completes the handshake, nobody answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let config = ClickHouseConfig { url, ..Default::default() };
        let err = clickhouse(&config, Duration::from_millis(300)).await.unwrap_err();
        assert!(err.to_string().ends_with("no answer within 300ms (--timeout)"), "{err}");
    }
}
