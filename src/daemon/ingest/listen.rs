//! What a client may hold: connections, time, and memory.
//!
//! - **Connections**: each listener serves at most `ingest.max_connections` at once; more
//!   wait in the kernel's accept queue until one closes.
//! - **Time** (OTLP/HTTP): a connection must send a request's headers within
//!   `ingest.header_timeout_secs` of being opened or of its previous answer (hyper's header
//!   timeout also closes idle keep-alive connections), and the body within
//!   `ingest.body_timeout_secs` (408 otherwise). OTLP/gRPC requests are bounded as a whole
//!   by the body timeout plus the time to make them durable.
//! - **Memory**: at most `ingest.max_inflight_requests` requests and
//!   `ingest.max_inflight_bytes` of request bodies (after decompression) are handled at
//!   once. A body is counted by what it holds: its declared `Content-Length` up front, or,
//!   for a chunked body of unknown length (the Node.js exporters send every body so), the
//!   bytes it has delivered so far, growing as it is read. A request past either bound is
//!   refused at once (503 / `RESOURCE_EXHAUSTED` with a retry delay, naming the bound and
//!   how full it was). What a request held is released when it is answered, on every path.
//!
//! With `ingest.tls_cert_file` set, both listeners speak TLS only (`daemon::tls`): the
//! handshake must finish within the header timeout, and the HTTP version is the one the
//! handshake chose (ALPN: `h2` or HTTP/1.1) rather than told from the first bytes.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio_rustls::server::TlsStream;

use crate::config::IngestConfig;
use crate::daemon::tls::{negotiated_h2, Tls};
use crate::daemon::Shutdown;

/// Memory is counted in KiB, so a semaphore's permits hold any byte budget.
const UNIT: u64 = 1024;

/// The budgets requests draw from.
pub struct Inflight {
    requests: Arc<Semaphore>,
    max_requests: u64,
    kib: Arc<Semaphore>,
    max_kib: u64,
}

/// What one request holds; released on drop.
pub struct Held {
    _request: OwnedSemaphorePermit,
    kib: OwnedSemaphorePermit,
}

/// Which budget refused a request, and how full it was: the refusal names both, so a
/// client's operator can tell a burst from a bound set too low.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// `in_flight` of `max` requests were being handled.
    Requests { in_flight: u64, max: u64 },
    /// Requests in flight held `held` of `max` bytes; this one needed `wanted` more.
    Bytes { held: u64, max: u64, wanted: u64 },
}

impl Held {
    /// The bytes this request holds (rounded up to KiB).
    pub fn bytes(&self) -> u64 {
        self.kib.num_permits() as u64 * UNIT
    }
}

impl Busy {
    /// The label this refusal is counted and logged under.
    pub fn reason(self) -> &'static str {
        match self {
            Busy::Requests { .. } => "inflight_requests",
            Busy::Bytes { .. } => "inflight_bytes",
        }
    }
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MIB: f64 = (1u64 << 20) as f64;
        match *self {
            Busy::Requests { in_flight, max } => {
                write!(f, "{in_flight} of {max} requests in flight (ingest.max_inflight_requests)")
            }
            Busy::Bytes { held, max, wanted } => write!(
                f,
                "requests in flight hold {:.1} of {:.1} MiB and this one needs {:.1} MiB more \
                 (ingest.max_inflight_bytes)",
                held as f64 / MIB,
                max as f64 / MIB,
                wanted as f64 / MIB
            ),
        }
    }
}

impl Inflight {
    pub fn new(max_requests: u64, max_bytes: u64) -> Inflight {
        let max_kib = max_bytes.div_ceil(UNIT);
        Inflight {
            requests: Arc::new(Semaphore::new(max_requests as usize)),
            max_requests,
            kib: Arc::new(Semaphore::new(max_kib as usize)),
            max_kib,
        }
    }

    /// A request that (for now) holds `bytes`, or the budget it does not fit in. Never
    /// waits. A body of unknown length is admitted with what it holds so far (nothing) and
    /// grows as it is read.
    pub fn admit(&self, bytes: u64) -> Result<Held, Busy> {
        let request = self.requests.clone().try_acquire_owned().map_err(|_| Busy::Requests {
            in_flight: self.max_requests - self.requests.available_permits() as u64,
            max: self.max_requests,
        })?;
        let kib = self.take_kib(bytes)?;
        Ok(Held { _request: request, kib })
    }

    /// The request now holds `bytes` (more of its body arrived, or it was decompressed).
    /// Never shrinks what it holds; a refusal leaves it holding what it held.
    pub fn grow(&self, held: &mut Held, bytes: u64) -> Result<(), Busy> {
        let have = held.kib.num_permits() as u64;
        let want = kib(bytes);
        if want > have {
            held.kib.merge(self.take_kib((want - have) * UNIT)?);
        }
        Ok(())
    }

    fn take_kib(&self, bytes: u64) -> Result<OwnedSemaphorePermit, Busy> {
        let n = kib(bytes).min(self.max_kib).max(1) as u32;
        self.kib.clone().try_acquire_many_owned(n).map_err(|e| match e {
            TryAcquireError::NoPermits | TryAcquireError::Closed => Busy::Bytes {
                held: (self.max_kib - self.kib.available_permits() as u64) * UNIT,
                max: self.max_kib * UNIT,
                wanted: u64::from(n) * UNIT,
            },
        })
    }
}

fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(UNIT)
}

/// What an HTTP/2 client with prior knowledge (h2c) sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The HTTP version a connection speaks, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Http1,
    H2c,
}

/// Whether `first` (what arrived so far) settles the version: `None` while it is still a
/// prefix of the HTTP/2 preface.
fn version_of(first: &[u8]) -> Option<Version> {
    let n = first.len().min(H2_PREFACE.len());
    if first[..n] != H2_PREFACE[..n] {
        Some(Version::Http1)
    } else if n == H2_PREFACE.len() {
        Some(Version::H2c)
    } else {
        None
    }
}

/// Waits for the first bytes of a connection (leaving them to be read) until they tell
/// HTTP/1 from h2c. `None`: the connection closed or sent nothing in time.
async fn detect_version(stream: &TcpStream, timeout: Duration) -> Option<Version> {
    let detect = async {
        let mut first = [0u8; 24];
        loop {
            let n = stream.peek(&mut first).await.ok()?;
            if n == 0 {
                return None;
            }
            if let Some(version) = version_of(&first[..n]) {
                return Some(version);
            }
            // A preface split across packets: the rest is on its way (rare; a short wait
            // rather than peeking the same bytes in a busy loop).
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(timeout, detect).await.ok().flatten()
}

/// Serves `app` on `listener` until `shutdown`, within the connection bound and the header
/// timeout; then lets the connections in flight finish (within `stop_bound`). HTTP/1.1
/// (keep-alive and pipelining included) is what OTLP/HTTP clients speak; HTTP/2 over
/// cleartext is served to a client that starts with its preface (prior knowledge); over
/// `tls`, the version the handshake chose.
pub async fn serve_http(
    listener: TcpListener,
    app: Router,
    config: &IngestConfig,
    tls: Option<Arc<Tls>>,
    shutdown: Shutdown,
    stop_bound: Duration,
) -> anyhow::Result<()> {
    let permits = Arc::new(Semaphore::new(config.max_connections as usize));
    let header_timeout = Duration::from_secs(config.header_timeout_secs);
    // The version is told from the first bytes under the header timeout, not by
    // hyper-util's automatic detection: that waits for a first byte with no timeout, so a
    // connection that never sent one stayed open for good.
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(header_timeout);
    let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    // A peer that stops answering pings is gone: its connection is closed.
    h2.timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    let graceful = GracefulShutdown::new();
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.context("the connection bound was closed")?,
            _ = shutdown.triggered() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, do not spin.
                    tracing::warn!(error = %e, "accepting an OTLP/HTTP connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.triggered() => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let (http1, h2, watcher, tls) = (http1.clone(), h2.clone(), graceful.watcher(), tls.clone());
        tokio::spawn(async move {
            if let Some(tls) = tls {
                if let Some(stream) = tls.accept(stream, header_timeout).await {
                    if negotiated_h2(&stream) {
                        let _ = watcher.watch(h2.serve_connection(TokioIo::new(stream), service)).await;
                    } else {
                        let _ = watcher.watch(http1.serve_connection(TokioIo::new(stream), service)).await;
                    }
                }
                drop(permit);
                return;
            }
            match detect_version(&stream, header_timeout).await {
                Some(Version::Http1) => {
                    let _ = watcher.watch(http1.serve_connection(TokioIo::new(stream), service)).await;
                }
                Some(Version::H2c) => {
                    let _ = watcher.watch(h2.serve_connection(TokioIo::new(stream), service)).await;
                }
                None => {}
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(stop_bound, graceful.shutdown()).await.is_err() {
        tracing::warn!("OTLP/HTTP connections still open at the stop bound were closed");
    }
    Ok(())
}

/// The gRPC listener's connections, each holding a permit of the connection bound while
/// it is open.
pub fn bounded_incoming(
    listener: TcpListener,
    max_connections: u64,
) -> impl futures_util::Stream<Item = std::io::Result<BoundedStream>> + Send + 'static {
    let permits = Arc::new(Semaphore::new(max_connections as usize));
    futures_util::stream::unfold((listener, permits), |(listener, permits)| async move {
        let permit = permits.clone().acquire_owned().await.ok()?;
        let accepted = listener.accept().await.map(|(stream, _)| {
            let _ = stream.set_nodelay(true);
            BoundedStream { stream, _permit: permit }
        });
        Some((accepted, (listener, permits)))
    })
}

/// The gRPC listener's connections over TLS: each holds a permit of the connection bound
/// from its accept, and is handed to the server once its handshake finished (within
/// `handshake_limit`). Handshakes run apart from the accepting, so a slow client delays
/// no other.
pub fn tls_incoming(
    listener: TcpListener,
    max_connections: u64,
    tls: Arc<Tls>,
    handshake_limit: Duration,
) -> impl futures_util::Stream<Item = std::io::Result<BoundedStream<TlsStream<TcpStream>>>> + Send + 'static {
    let (ready, handshaken) = tokio::sync::mpsc::channel(64);
    let accepted = bounded_incoming(listener, max_connections);
    tokio::spawn(async move {
        use futures_util::StreamExt as _;
        tokio::pin!(accepted);
        loop {
            let stream = tokio::select! {
                next = accepted.next() => match next {
                    Some(Ok(stream)) => stream,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "accepting an OTLP/gRPC connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    None => return,
                },
                // The server stopped taking connections.
                _ = ready.closed() => return,
            };
            let (tls, ready) = (tls.clone(), ready.clone());
            tokio::spawn(async move {
                let BoundedStream { stream, _permit } = stream;
                if let Some(stream) = tls.accept(stream, handshake_limit).await {
                    let _ = ready.send(BoundedStream { stream, _permit }).await;
                }
            });
        }
    });
    futures_util::stream::unfold(handshaken, |mut handshaken| async move {
        let stream = handshaken.recv().await?;
        Some((Ok(stream), handshaken))
    })
}

/// A connection (plain, or over TLS) that frees its place in the bound when dropped.
pub struct BoundedStream<S = TcpStream> {
    stream: S,
    _permit: OwnedSemaphorePermit,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for BoundedStream<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for BoundedStream<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for BoundedStream {
    type ConnectInfo = <TcpStream as tonic::transport::server::Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl tonic::transport::server::Connected for BoundedStream<TlsStream<TcpStream>> {
    type ConnectInfo = <TcpStream as tonic::transport::server::Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.get_ref().0.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_tell_http1_from_h2c() {
        assert_eq!(version_of(b"POST /v1/traces HTTP/1.1\r\n"), Some(Version::Http1));
        assert_eq!(version_of(b"P"), None, "could still be either");
        assert_eq!(version_of(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(version_of(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00"), Some(Version::H2c));
        assert_eq!(version_of(b"PRI * HTTP/1.1"), Some(Version::Http1));
        assert_eq!(version_of(b"POST"), Some(Version::Http1), "settled by the second byte");
    }

    #[test]
    fn requests_draw_from_both_budgets_and_give_back_when_dropped() {
        let inflight = Inflight::new(2, 10 * UNIT);
        let a = inflight.admit(4 * UNIT).unwrap();
        let mut b = inflight.admit(4 * UNIT).unwrap();
        assert_eq!(inflight.admit(1).err(), Some(Busy::Requests { in_flight: 2, max: 2 }));
        drop(a);
        assert_eq!(
            inflight.grow(&mut b, 12 * UNIT).err(),
            Some(Busy::Bytes { held: 4 * UNIT, max: 10 * UNIT, wanted: 8 * UNIT }),
            "10 KiB in all"
        );
        inflight.grow(&mut b, 6 * UNIT).unwrap();
        assert_eq!(
            inflight.admit(5 * UNIT).err(),
            Some(Busy::Bytes { held: 6 * UNIT, max: 10 * UNIT, wanted: 5 * UNIT }),
            "6 of 10 KiB are held"
        );
        let c = inflight.admit(4 * UNIT).unwrap();
        drop((b, c));
        assert!(inflight.admit(10 * UNIT).is_ok(), "everything was given back");
    }
}
