//! Whether the broker answers, asked one way by everyone who needs to know before or beside
//! the real work: the commands before they talk to it and every `/health` ([`reachable`]: a
//! plain TCP connection, since a librdkafka client per look would log its own errors every
//! time the broker is down, and retries a refused connection until its own timeout; with TLS
//! or SASL configured, the handshake and the authentication of our own connection
//! (`packed::conn`), so a certificate or a password the broker refuses is told as such), and
//! ingest's probe that brings its broker path back ([`answers`]: a metadata request, so a
//! broker that accepts connections but cannot serve is not taken for up).

use std::time::Duration;

use super::packed::conn::{Conn, ConnError};
use super::security::Security;
use crate::config::KafkaConfig;

/// Why no bootstrap broker could be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// None answered: `connection refused`, no answer in time, …
    #[error("{0}")]
    Down(String),
    /// One answered and refused this client (its certificate, its credentials, the
    /// mechanism), or the settings cannot be used: the whole line, with what to do.
    #[error("{0}")]
    Refused(String),
}

/// Succeeds when one of the bootstrap brokers accepts a connection within `timeout` (and,
/// when `[kafka]` asks for TLS or SASL, completes the handshake and accepts the
/// credentials); the error says why the last one did not.
pub async fn reachable(kafka: &KafkaConfig, timeout: Duration) -> Result<(), Failure> {
    let security = Security::new(kafka).map_err(Failure::Refused)?;
    let mut why = Failure::Down("no broker address is set".to_string());
    for addr in bootstrap(kafka) {
        let result = if security.is_plain() {
            tcp_connect(addr, timeout).await.map_err(Failure::Down)
        } else {
            open(addr, &security, timeout).await
        };
        match result {
            Ok(()) => return Ok(()),
            // A refusal is the answer: another broker of the same cluster refuses alike.
            Err(refused @ Failure::Refused(_)) => return Err(refused),
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// The refusal line when a secured broker refuses this client; `None` when it accepts, when
/// none answers, or without TLS and SASL. Asked when a librdkafka client failed, whose own
/// error says only that the broker did not answer.
pub async fn refusal(kafka: &KafkaConfig, timeout: Duration) -> Option<String> {
    match reachable(kafka, timeout).await {
        Err(Failure::Refused(line)) => Some(line),
        _ => None,
    }
}

/// The bootstrap addresses, a scheme (`SSL://`) allowed.
pub fn bootstrap(kafka: &KafkaConfig) -> impl Iterator<Item = &str> {
    kafka.brokers.split(',').map(str::trim).filter(|b| !b.is_empty()).map(|b| b.rsplit("://").next().unwrap_or(b))
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
        Ok(Err(e)) => Err(connect_error(&e)),
        Err(_) => Err(no_answer(timeout)),
    }
}

/// One connection of our own to `addr`, through TLS and SASL, closed at once.
async fn open(addr: &str, security: &Security, timeout: Duration) -> Result<(), Failure> {
    match tokio::time::timeout(timeout, Conn::open(addr, security)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.needs_the_operator() => Err(Failure::Refused(e.to_string())),
        Ok(Err(ConnError::Connect { source, .. })) => Err(Failure::Down(connect_error(&source))),
        Ok(Err(ConnError::ConnectTimeout { .. })) | Err(_) => Err(Failure::Down(no_answer(timeout))),
        Ok(Err(e)) => Err(Failure::Down(e.to_string())),
    }
}

fn connect_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        _ => e.to_string(),
    }
}

fn no_answer(timeout: Duration) -> String {
    format!("no answer within {} ms", timeout.as_millis())
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
        assert_eq!(
            reachable(&alone, Duration::from_secs(30)).await,
            Err(Failure::Down("connection refused".to_string()))
        );
        let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let brokers = format!("{refused}, PLAINTEXT://{}", listening.local_addr().unwrap());
        assert_eq!(reachable(&KafkaConfig { brokers, ..Default::default() }, Duration::from_secs(30)).await, Ok(()));
    }
}
