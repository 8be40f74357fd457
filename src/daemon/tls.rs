//! TLS for the servers Tayga listens with (the API, the OTLP receivers): a certificate
//! chain and its key read from PEM files, and read again on SIGHUP or when either file
//! changes, so a renewed certificate is served without a restart. A reload that fails
//! (a half-written file, a key that does not match) is logged and the certificate in use
//! is kept; only the start-up read is fatal.
//!
//! rustls with ring, as the ClickHouse client (`store::tls`): no OpenSSL, no aws-lc.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};

use super::Shutdown;

/// How often the files are looked at for a change (their modification time and size).
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Application protocols offered in the handshake (ALPN): gRPC needs `h2`; an OTLP/HTTP
/// or API client may take either.
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// The server side of TLS for one listener: the current configuration, swapped whole on a
/// reload, so a handshake in progress keeps the one it started with.
pub struct Tls {
    what: &'static str,
    /// Handshakes that did not finish, by why: counted, since a client that cannot connect
    /// (an old CA, a plain-text client on the TLS port) is seen nowhere else.
    handshake_failures: Family<HandshakeFailure, Counter>,
    cert_file: PathBuf,
    key_file: PathBuf,
    alpn: Vec<Vec<u8>>,
    current: RwLock<Arc<ServerConfig>>,
    seen: RwLock<Stamp>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandshakeFailure {
    reason: HandshakeReason,
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
enum HandshakeReason {
    error,
    timeout,
}

/// What the files looked like when last read, to notice a change without reading them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Stamp(Vec<Option<(SystemTime, u64)>>);

fn stamp(files: &[&Path]) -> Stamp {
    Stamp(files.iter().map(|f| std::fs::metadata(f).ok().and_then(|m| Some((m.modified().ok()?, m.len())))).collect())
}

impl Tls {
    /// The TLS of a listener, or `None` when neither file is set (the configuration's
    /// validation refuses one without the other). `what` names the listener in errors and
    /// logs (`the API`, `OTLP/gRPC`).
    pub fn from_files(
        what: &'static str,
        cert_file: &str,
        key_file: &str,
        alpn: &[&[u8]],
    ) -> anyhow::Result<Option<Arc<Tls>>> {
        if cert_file.is_empty() && key_file.is_empty() {
            return Ok(None);
        }
        let (cert_file, key_file) = (PathBuf::from(cert_file), PathBuf::from(key_file));
        let alpn: Vec<Vec<u8>> = alpn.iter().map(|p| p.to_vec()).collect();
        let seen = stamp(&[&cert_file, &key_file]);
        let config = server_config(&cert_file, &key_file, &alpn).with_context(|| format!("TLS for {what}"))?;
        Ok(Some(Arc::new(Tls {
            what,
            handshake_failures: Family::default(),
            cert_file,
            key_file,
            alpn,
            current: RwLock::new(config),
            seen: RwLock::new(seen),
        })))
    }

    /// Registers the handshake failure counter as `<prefix>_tls_handshake_failures_total`
    /// (docs/metrics.md).
    pub fn register(&self, registry: &mut Registry, prefix: &str) {
        registry.sub_registry_with_prefix(prefix).register(
            "tls_handshake_failures",
            "TLS handshakes that failed (error: refused or broken; timeout: no handshake within 10 s)",
            self.handshake_failures.clone(),
        );
    }

    fn handshake_failed(&self, reason: HandshakeReason) {
        self.handshake_failures.get_or_create(&HandshakeFailure { reason }).inc();
    }

    /// The configuration a new connection's handshake uses.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.current.read().unwrap().clone()
    }

    /// Reads both files again; on success new connections use them. `Err`: the files as
    /// they are cannot serve, and the configuration in use is kept.
    pub fn reload(&self) -> anyhow::Result<()> {
        let seen = stamp(&[&self.cert_file, &self.key_file]);
        let config = server_config(&self.cert_file, &self.key_file, &self.alpn)?;
        *self.current.write().unwrap() = config;
        *self.seen.write().unwrap() = seen;
        Ok(())
    }

    /// Whether either file changed since it was last read.
    fn changed(&self) -> bool {
        stamp(&[&self.cert_file, &self.key_file]) != *self.seen.read().unwrap()
    }

    /// Reloads on SIGHUP and whenever a file changes, until `shutdown`. A failed reload is
    /// one warning per change (the next change or SIGHUP tries again).
    pub async fn watch(self: Arc<Self>, shutdown: Shutdown) {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangup = match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, listener = self.what, "no SIGHUP handler: TLS files are reloaded on change only");
                None
            }
        };
        let stop = shutdown.triggered();
        tokio::pin!(stop);
        let mut ticks = tokio::time::interval(WATCH_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let why = tokio::select! {
                _ = &mut stop => return,
                _ = ticks.tick() => {
                    if !self.changed() {
                        continue;
                    }
                    "changed"
                }
                Some(()) = async { match hangup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => "SIGHUP",
            };
            match self.reload() {
                Ok(()) => {
                    tracing::info!(listener = self.what, trigger = why, cert_file = %self.cert_file.display(), "TLS certificate reloaded")
                }
                Err(e) => {
                    // Do not warn again for the same files: wait for the next change.
                    *self.seen.write().unwrap() = stamp(&[&self.cert_file, &self.key_file]);
                    tracing::warn!(
                        listener = self.what,
                        trigger = why,
                        error = format!("{e:#}"),
                        "TLS files could not be reloaded; the certificate in use is kept"
                    )
                }
            }
        }
    }

    /// The server handshake on `stream`, within `limit` (a client that opens a connection
    /// and sends nothing holds no place for long).
    pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stream: S,
        limit: Duration,
    ) -> Option<tokio_rustls::server::TlsStream<S>> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config());
        match tokio::time::timeout(limit, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Some(tls),
            Ok(Err(e)) => {
                self.handshake_failed(HandshakeReason::error);
                tracing::debug!(listener = self.what, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                self.handshake_failed(HandshakeReason::timeout);
                None
            }
        }
    }
}

/// Whether a finished handshake chose HTTP/2.
pub fn negotiated_h2<S>(stream: &tokio_rustls::server::TlsStream<S>) -> bool {
    stream.get_ref().1.alpn_protocol() == Some(ALPN_H2)
}

/// Serves `app` over TLS on `listener` until `shutdown` (HTTP/2 when the client offers it,
/// HTTP/1.1 otherwise), then lets the connections in flight finish within `stop_bound`.
/// The API's server when `[api] tls_cert_file` is set; the plain one is `axum::serve`.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Arc<Tls>,
    shutdown: Shutdown,
    stop_bound: Duration,
) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::graceful::GracefulShutdown;
    use hyper_util::service::TowerToHyperService;

    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(HANDSHAKE_LIMIT);
    let h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, listener = tls.what, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.triggered() => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let (tls, http1, h2, watcher) = (tls.clone(), http1.clone(), h2.clone(), graceful.watcher());
        tokio::spawn(async move {
            let Some(stream) = tls.accept(stream, HANDSHAKE_LIMIT).await else { return };
            if negotiated_h2(&stream) {
                let _ = watcher.watch(h2.serve_connection(TokioIo::new(stream), service)).await;
            } else {
                let _ = watcher.watch(http1.serve_connection(TokioIo::new(stream), service)).await;
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(stop_bound, graceful.shutdown()).await.is_err() {
        tracing::warn!(listener = tls.what, "connections still open at the stop bound were closed");
    }
    Ok(())
}

/// How long a client has for its handshake and then its request's headers.
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

fn server_config(cert_file: &Path, key_file: &Path, alpn: &[Vec<u8>]) -> anyhow::Result<Arc<ServerConfig>> {
    let pem = std::fs::read(cert_file)
        .with_context(|| format!("cannot read the certificate file {}", cert_file.display()))?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("the certificate file {} is not PEM", cert_file.display()))?;
    anyhow::ensure!(!chain.is_empty(), "the certificate file {} holds no PEM certificate", cert_file.display());
    let pem = std::fs::read(key_file).with_context(|| format!("cannot read the key file {}", key_file.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&pem)
        .with_context(|| format!("the key file {} holds no PEM private key", key_file.display()))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .with_context(|| {
            format!("the key in {} does not go with the certificate in {}", key_file.display(), cert_file.display())
        })?;
    config.alpn_protocols = alpn.to_vec();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_files_is_plain_and_a_missing_file_is_named() {
        assert!(Tls::from_files("the API", "", "", &[ALPN_HTTP1]).unwrap().is_none());
        let e =
            Tls::from_files("the API", "/nonexistent/cert.pem", "/nonexistent/key.pem", &[ALPN_HTTP1]).err().unwrap();
        let text = format!("{e:#}");
        assert!(text.contains("TLS for the API") && text.contains("/nonexistent/cert.pem"), "{text}");
    }

    #[test]
    fn a_file_that_is_not_pem_is_told_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert, "not a certificate").unwrap();
        std::fs::write(&key, "not a key").unwrap();
        let e =
            Tls::from_files("OTLP/HTTP", cert.to_str().unwrap(), key.to_str().unwrap(), &[ALPN_HTTP1]).err().unwrap();
        assert!(format!("{e:#}").contains("holds no PEM certificate"), "{e:#}");
    }
}
