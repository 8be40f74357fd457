//! Whether ClickHouse answers, asked one way by everyone who needs to know before or beside
//! the real work: the commands before they talk to it ([`reachable`]: its `/ping`, no
//! credentials needed) and every `/health` ([`answers`]: a query through the [`Store`], so
//! a server that refuses our credentials or database counts as down).

use std::time::Duration;

use super::Store;
use crate::config::ClickHouseConfig;

/// Why ClickHouse's `/ping` did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PingFailure {
    /// It answered over TLS with a certificate this machine does not trust (rustls's reason):
    /// only the operator can cure it, by naming the CA.
    Untrusted(String),
    /// Anything else, in a few words (`connection refused`, `no answer within …`).
    Other(String),
}

/// Succeeds when ClickHouse's `/ping` answers within `timeout` (on 18.16 and current
/// servers), over `http://` or `https://` with the store's own TLS setting. A refused port
/// fails at once as `connection refused`; a server that accepts the connection and never
/// answers (hung, frozen: the kernel accepts for it) fails at the timeout as `no answer
/// within …`. The error names the cause in a few words, never the URL (which may hold
/// credentials).
pub async fn reachable(config: &ClickHouseConfig, timeout: Duration) -> Result<(), PingFailure> {
    use PingFailure::Other;
    let mut ping = reqwest::Url::parse(&config.url).map_err(|e| Other(format!("not a URL ({e})")))?;
    if ping.host_str().is_none() {
        return Err(Other("the URL has no host".into()));
    }
    ping.set_path("/ping");
    ping.set_query(None);
    let _ = ping.set_username("");
    let _ = ping.set_password(None);
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .use_preconfigured_tls(super::tls::client_config(config))
        .build()
        .map_err(|e| Other(e.to_string()))?;
    match client.get(ping).send().await {
        Ok(answer) if answer.status().is_success() => Ok(()),
        Ok(answer) => Err(Other(format!("/ping answered {}", answer.status()))),
        Err(e) if e.is_timeout() => Err(Other(format!("no answer within {} ms", timeout.as_millis()))),
        Err(e) => match super::tls::untrusted_certificate(&e) {
            Some(why) => Err(PingFailure::Untrusted(why)),
            None if super::tls::not_tls(&e) => {
                Err(Other("the port does not speak TLS (plain HTTP? use http://)".into()))
            }
            None if e.is_connect() => Err(Other(connect_failure(&e))),
            None => Err(Other(format!("/ping failed ({e})"))),
        },
    }
}

/// `/health`'s reason when ClickHouse does not answer.
pub const NOT_ANSWERING: &str = "ClickHouse does not answer";

/// Whether ClickHouse answers a query through `store` within `timeout`; when it does not,
/// why, in one line for `/health`: what the operator must cure (credentials refused, a
/// certificate not trusted) said as such, anything else as not answering.
pub async fn answers(store: &Store, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, store.server_version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.needs_the_operator() => Err(e.to_string()),
        _ => Err(NOT_ANSWERING.into()),
    }
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

    /// An `https://` URL at a port that answers plain HTTP is told as such, not as a
    /// corrupt message.
    #[tokio::test]
    async fn https_to_a_plain_http_port_is_told_as_such() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut hello = [0u8; 512];
            let _ = socket.read(&mut hello).await;
            let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").await;
        });
        let config = ClickHouseConfig { url: format!("https://{addr}"), ..Default::default() };
        assert_eq!(
            reachable(&config, Duration::from_secs(30)).await.unwrap_err(),
            PingFailure::Other("the port does not speak TLS (plain HTTP? use http://)".into())
        );
    }

    /// The refusal is found under the HTTP client's wrapping, and told in two words.
    /// (A server that accepts and never answers: `cmd::reach`'s test.)
    #[tokio::test]
    async fn a_refused_port_is_told_as_such() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let config = ClickHouseConfig { url: format!("http://user:secret@{free}/?database=x"), ..Default::default() };
        assert_eq!(
            reachable(&config, Duration::from_secs(30)).await.unwrap_err(),
            PingFailure::Other("connection refused".into())
        );
    }
}
