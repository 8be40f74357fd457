//! The demo's webhook target: a small HTTP server on a free loopback port that accepts the
//! notifier's deliveries (the alert document, docs/alerts.md) and tells each one, so the
//! Deliveries page fills without an outside receiver.

use std::net::SocketAddr;

use axum::http::StatusCode;

use crate::daemon::Shutdown;
use crate::wire::alert::Alert;

/// The target name the demo configures.
pub const TARGET: &str = "demo-webhook";

/// A running sink: where it listens.
pub struct Sink {
    pub addr: SocketAddr,
}

impl Sink {
    pub fn url(&self) -> String {
        format!("http://{}/alerts", self.addr)
    }
}

/// Starts the sink on `127.0.0.1:0`; `received` is told one line per delivery. It stops with
/// `shutdown`.
pub async fn start(
    shutdown: Shutdown,
    received: impl Fn(String) + Clone + Send + Sync + 'static,
) -> std::io::Result<Sink> {
    let app = axum::Router::new().route(
        "/alerts",
        axum::routing::post(move |body: axum::body::Bytes| {
            let received = received.clone();
            async move {
                match Alert::from_json(&body) {
                    Ok(alert) => {
                        received(format!("{} in {}: {}", alert.kind.as_str(), alert.service, alert.template));
                        StatusCode::OK
                    }
                    // Tell the notifier, as a real receiver would: the row shows the 400.
                    Err(_) => StatusCode::BAD_REQUEST,
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stopped = shutdown.triggered();
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stopped).await {
            tracing::warn!(error = %e, "the demo's webhook sink stopped");
        }
    });
    Ok(Sink { addr })
}
