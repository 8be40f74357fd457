//! How every client of ClickHouse connects, over `http://` or `https://`: one TLS setting
//! (rustls with ring; the public roots plus `[clickhouse] ssl_ca_file`), used by the
//! [`Store`](super::Store)'s client and by the `/ping` probe alike, and the one way a
//! certificate this machine does not trust is recognised in their errors.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::config::ClickHouseConfig;

/// What the clickhouse crate's own connector keeps too: TCP keepalive, and idle connections
/// dropped before ClickHouse's own keep-alive timeout (3 s on 18.16) closes them under us.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(2);

/// The TLS client setting for `config`: the public roots (webpki-roots, so a container
/// without a CA bundle still reaches ClickHouse Cloud) and the certificates of
/// `ssl_ca_file`, which the configuration loader has already read and checked.
pub(in crate::store) fn client_config(config: &ClickHouseConfig) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    // Checked at load time (`config::read_ssl_ca`), so none is refused here.
    let (_added, _refused) = roots.add_parsable_certificates(config.ssl_ca.iter().cloned());
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// The HTTP client under the [`Store`](super::Store): plain HTTP or HTTPS by the URL's scheme.
pub(in crate::store) fn http_client<B>(config: &ClickHouseConfig) -> Client<HttpsConnector<HttpConnector>, B>
where
    B: hyper::body::Body + Send,
    B::Data: Send,
{
    let mut tcp = HttpConnector::new();
    tcp.set_keepalive(Some(TCP_KEEPALIVE));
    tcp.enforce_http(false);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(client_config(config))
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp);
    Client::builder(TokioExecutor::new()).pool_idle_timeout(POOL_IDLE_TIMEOUT).build(connector)
}

/// Why the server's certificate was refused, when that is what `error` (or one of its
/// causes) is: rustls's own words, e.g. `invalid peer certificate: UnknownIssuer`.
pub(in crate::store) fn untrusted_certificate(error: &(dyn Error + 'static)) -> Option<String> {
    match rustls_cause(error)? {
        refused @ rustls::Error::InvalidCertificate(_) => Some(refused.to_string()),
        _ => None,
    }
}

/// True when the server answered the TLS handshake with something that is not TLS: an
/// `https://` URL pointing at a plain HTTP port.
pub(in crate::store) fn not_tls(error: &(dyn Error + 'static)) -> bool {
    matches!(rustls_cause(error), Some(rustls::Error::InvalidMessage(_)))
}

/// rustls's error among `error`'s causes.
fn rustls_cause<'e>(error: &'e (dyn Error + 'static)) -> Option<&'e rustls::Error> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        // tokio-rustls hands rustls's error over inside an io::Error (itself wrapped in
        // another by hyper), and an io::Error's `source()` skips the error it wraps.
        cause = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn Error + 'static)),
            None => e.source(),
        };
    }
    None
}
