//! Resolving the logminer's `host:port` on every tick: behind one name (a Compose service
//! scaled to N, a headless Kubernetes service) every replica has its own address. The
//! recorder takes a [`Resolver`], so tests can name their own replicas without DNS.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

pub type Resolved = Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>;

pub trait Resolver: Send + Sync {
    /// Every address `host_port` names, each once, in a stable order.
    fn resolve(&self, host_port: &str) -> Resolved;
}

/// The system resolver (`/etc/hosts`, DNS).
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve(&self, host_port: &str) -> Resolved {
        let host_port = host_port.to_string();
        Box::pin(async move {
            let mut addrs: Vec<SocketAddr> = tokio::net::lookup_host(host_port).await?.collect();
            addrs.sort();
            addrs.dedup();
            Ok(addrs)
        })
    }
}

/// A fixed table of names, for tests; an unknown name does not resolve.
#[derive(Default)]
pub struct FixedResolver {
    pub names: HashMap<String, Vec<SocketAddr>>,
}

impl Resolver for FixedResolver {
    fn resolve(&self, host_port: &str) -> Resolved {
        let found = self.names.get(host_port).cloned();
        let name = host_port.to_string();
        Box::pin(async move {
            found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("{name} does not resolve")))
        })
    }
}
