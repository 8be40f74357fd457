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
//!   once; a request past either is refused at once (503 / `RESOURCE_EXHAUSTED` with a
//!   retry delay) and holds nothing. What a request held is released when it is answered.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::config::IngestConfig;
use crate::daemon::Shutdown;

/// Memory is counted in KiB, so a semaphore's permits hold any byte budget.
const UNIT: u64 = 1024;

/// The budgets requests draw from.
pub struct Inflight {
    requests: Arc<Semaphore>,
    kib: Arc<Semaphore>,
    max_kib: u64,
}

/// What one request holds; released on drop.
pub struct Held {
    _request: OwnedSemaphorePermit,
    kib: OwnedSemaphorePermit,
}

/// Which budget refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    Requests,
    Bytes,
}

impl Held {
    /// The bytes this request holds (rounded up to KiB).
    pub fn bytes(&self) -> u64 {
        self.kib.num_permits() as u64 * UNIT
    }
}

impl Busy {
    pub fn reason(self) -> &'static str {
        match self {
            Busy::Requests => "inflight_requests",
            Busy::Bytes => "inflight_bytes",
        }
    }
}

impl Inflight {
    pub fn new(max_requests: u64, max_bytes: u64) -> Inflight {
        let max_kib = max_bytes.div_ceil(UNIT);
        Inflight {
            requests: Arc::new(Semaphore::new(max_requests as usize)),
            kib: Arc::new(Semaphore::new(max_kib as usize)),
            max_kib,
        }
    }

    /// A request of (at first) `bytes`, or the budget it does not fit in. Never waits.
    pub fn admit(&self, bytes: u64) -> Result<Held, Busy> {
        let request = self.requests.clone().try_acquire_owned().map_err(|_| Busy::Requests)?;
        let kib = self.take_kib(bytes)?;
        Ok(Held { _request: request, kib })
    }

    /// The request grew to `bytes` (its body was decompressed).
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
            TryAcquireError::NoPermits | TryAcquireError::Closed => Busy::Bytes,
        })
    }
}

fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(UNIT)
}

/// Serves `app` on `listener` until `shutdown`, within the connection bound and the header
/// timeout; then lets the connections in flight finish (within `stop_bound`).
pub async fn serve_http(
    listener: TcpListener,
    app: Router,
    config: &IngestConfig,
    shutdown: Shutdown,
    stop_bound: Duration,
) -> anyhow::Result<()> {
    let permits = Arc::new(Semaphore::new(config.max_connections as usize));
    // HTTP/1 (what OTLP/HTTP clients speak), not hyper-util's automatic version detection:
    // that waits for a first byte with no timeout, so a connection that never sent one
    // stayed open for good.
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(config.header_timeout_secs));
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
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = connection.await;
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

/// A connection that frees its place in the bound when dropped.
pub struct BoundedStream {
    stream: tokio::net::TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl tokio::io::AsyncRead for BoundedStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for BoundedStream {
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
    type ConnectInfo = <tokio::net::TcpStream as tonic::transport::server::Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_draw_from_both_budgets_and_give_back_when_dropped() {
        let inflight = Inflight::new(2, 10 * UNIT);
        let a = inflight.admit(4 * UNIT).unwrap();
        let mut b = inflight.admit(4 * UNIT).unwrap();
        assert_eq!(inflight.admit(1).err(), Some(Busy::Requests));
        drop(a);
        assert_eq!(inflight.grow(&mut b, 12 * UNIT).err(), Some(Busy::Bytes), "10 KiB in all");
        inflight.grow(&mut b, 6 * UNIT).unwrap();
        assert_eq!(inflight.admit(5 * UNIT).err(), Some(Busy::Bytes), "6 of 10 KiB are held");
        let c = inflight.admit(4 * UNIT).unwrap();
        drop((b, c));
        assert!(inflight.admit(10 * UNIT).is_ok(), "everything was given back");
    }
}
