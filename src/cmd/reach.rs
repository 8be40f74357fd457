//! The check a command makes before it talks to a server: can a TCP connection be opened at
//! all, within `--timeout`? librdkafka retries a refused connection until its own timeout
//! and the ClickHouse client wraps the refusal three times; this answers a refused port at
//! once, in one sentence, with what to do (`cmd::fail` adds the hint). A ClickHouse that
//! accepts the connection and never answers (a hung or frozen server: the kernel accepts
//! for it) is caught by its `/ping`, which must answer within the same `--timeout`.

use std::time::Duration;

use crate::config::{ClickHouseConfig, KafkaConfig};
use crate::daemon::runtime::{broker_reachable, tcp_connect};

#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    #[error("cannot reach the broker at {brokers}: {why}")]
    Broker { brokers: String, why: String },
    #[error("cannot reach ClickHouse at {url}: {why}")]
    ClickHouse { url: String, why: String },
}

impl Unreachable {
    pub fn hint(&self) -> &'static str {
        match self {
            Unreachable::Broker { .. } => super::fail::BROKER_HINT,
            Unreachable::ClickHouse { .. } => super::fail::CLICKHOUSE_HINT,
        }
    }
}

/// Succeeds when at least one bootstrap broker accepts a connection.
pub async fn broker(kafka: &KafkaConfig, timeout: Duration) -> Result<(), Unreachable> {
    broker_reachable(kafka, timeout)
        .await
        .map_err(|why| Unreachable::Broker { brokers: kafka.brokers.clone(), why: with_flag(why, timeout) })
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

/// Succeeds when ClickHouse's HTTP port accepts a connection and its `/ping` answers, each
/// within `timeout`.
pub async fn clickhouse(config: &ClickHouseConfig, timeout: Duration) -> Result<(), Unreachable> {
    let shown = crate::config::redact::url(&config.url);
    let fail = |why: String| Unreachable::ClickHouse { url: shown.clone(), why };
    let url = reqwest::Url::parse(&config.url).map_err(|e| fail(format!("not a URL ({e})")))?;
    let host = url.host_str().ok_or_else(|| fail("the URL has no host".into()))?;
    let port = url.port_or_known_default().ok_or_else(|| fail("the URL has no port".into()))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    connect(&format!("{}:{port}", if host.contains(':') { format!("[{host}]") } else { host.to_string() }), timeout)
        .await
        .map_err(fail)?;
    ping(&url, timeout).await.map_err(fail)
}

/// `GET /ping` (no credentials needed, on 18.16 and current servers), answered within `timeout`.
async fn ping(url: &reqwest::Url, timeout: Duration) -> Result<(), String> {
    let mut ping = url.clone();
    ping.set_path("/ping");
    ping.set_query(None);
    let _ = ping.set_username("");
    let _ = ping.set_password(None);
    let client = reqwest::Client::builder().timeout(timeout).build().map_err(|e| e.to_string())?;
    match client.get(ping).send().await {
        Ok(answer) if answer.status().is_success() => Ok(()),
        Ok(answer) => Err(format!("/ping answered {}", answer.status())),
        Err(e) if e.is_timeout() => Err(with_flag("no answer within".into(), timeout)),
        Err(e) => Err(format!("/ping failed ({e})")),
    }
}

async fn connect(addr: &str, timeout: Duration) -> Result<(), String> {
    tcp_connect(addr, timeout).await.map_err(|why| with_flag(why, timeout))
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
