//! Whether ClickHouse answers, asked one way by everyone who needs to know before or beside
//! the real work: the commands before they talk to it ([`reachable`]: its `/ping`, no
//! credentials needed) and every `/health` ([`answers`]: a query through the [`Store`], so
//! a server that refuses our credentials or database counts as down).

use std::time::Duration;

use super::Store;
use crate::config::ClickHouseConfig;

/// Succeeds when ClickHouse's `/ping` answers within `timeout` (on 18.16 and current
/// servers). A refused port fails at once as `connection refused`; a server that accepts
/// the connection and never answers (hung, frozen: the kernel accepts for it) fails at the
/// timeout as `no answer within …`. The error names the cause in a few words, never the
/// URL (which may hold credentials).
pub async fn reachable(config: &ClickHouseConfig, timeout: Duration) -> Result<(), String> {
    let mut ping = reqwest::Url::parse(&config.url).map_err(|e| format!("not a URL ({e})"))?;
    if ping.host_str().is_none() {
        return Err("the URL has no host".into());
    }
    ping.set_path("/ping");
    ping.set_query(None);
    let _ = ping.set_username("");
    let _ = ping.set_password(None);
    let client = reqwest::Client::builder().timeout(timeout).build().map_err(|e| e.to_string())?;
    match client.get(ping).send().await {
        Ok(answer) if answer.status().is_success() => Ok(()),
        Ok(answer) => Err(format!("/ping answered {}", answer.status())),
        Err(e) if e.is_timeout() => Err(format!("no answer within {} ms", timeout.as_millis())),
        Err(e) if e.is_connect() => Err(connect_failure(&e)),
        Err(e) => Err(format!("/ping failed ({e})")),
    }
}

/// Whether ClickHouse answers a query through `store` within `timeout`.
pub async fn answers(store: &Store, timeout: Duration) -> bool {
    matches!(tokio::time::timeout(timeout, store.server_version()).await, Ok(Ok(_)))
}

/// Why a connection could not be opened, from the socket's own error: `connection refused`,
/// a name that does not resolve, …
fn connect_failure(error: &reqwest::Error) -> String {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
                _ => io.to_string(),
            };
        }
        cause = e.source();
    }
    format!("cannot connect ({error})")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal is found under the HTTP client's wrapping, and told in two words.
    /// (A server that accepts and never answers: `cmd::reach`'s test.)
    #[tokio::test]
    async fn a_refused_port_is_told_as_such() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let config = ClickHouseConfig { url: format!("http://user:secret@{free}/?database=x"), ..Default::default() };
        assert_eq!(reachable(&config, Duration::from_secs(30)).await.unwrap_err(), "connection refused");
    }
}
