//! Whether the broker answers, asked one way by everyone who needs to know before or beside
//! the real work: the commands before they talk to it and every `/health` ([`reachable`]: a
//! plain TCP connection, since a librdkafka client per look would log its own errors every
//! time the broker is down, and retries a refused connection until its own timeout), and
//! ingest's probe that brings its broker path back ([`answers`]: a metadata request, so a
//! broker that accepts connections but cannot serve is not taken for up).

use std::time::Duration;

use crate::config::KafkaConfig;

/// Succeeds when one of the bootstrap brokers accepts a TCP connection within `timeout`;
/// the error says why the last one did not (`connection refused`, no answer in time, …).
pub async fn reachable(kafka: &KafkaConfig, timeout: Duration) -> Result<(), String> {
    let mut why = "no broker address is set".to_string();
    for addr in kafka.brokers.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        let addr = addr.rsplit("://").next().unwrap_or(addr);
        match tcp_connect(addr, timeout).await {
            Ok(()) => return Ok(()),
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// Whether a broker answers a metadata request within `timeout` (no retries, nothing
/// published).
pub async fn answers(kafka: &KafkaConfig, timeout: Duration) -> bool {
    super::topics::partition_counts_within(kafka, None, timeout).await.is_ok()
}

/// One TCP connection to `addr` (`host:port`), closed at once.
pub async fn tcp_connect(addr: &str, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err("connection refused".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused port is told at once; with several bootstrap brokers (a scheme allowed),
    /// any one that listens will do.
    #[tokio::test]
    async fn a_refused_broker_is_seen_at_once() {
        // Bound, then dropped: the port is free and refuses.
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let alone = KafkaConfig { brokers: refused.to_string(), ..Default::default() };
        assert_eq!(reachable(&alone, Duration::from_secs(30)).await, Err("connection refused".to_string()));
        let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let brokers = format!("{refused}, PLAINTEXT://{}", listening.local_addr().unwrap());
        assert_eq!(reachable(&KafkaConfig { brokers, ..Default::default() }, Duration::from_secs(30)).await, Ok(()));
    }
}
