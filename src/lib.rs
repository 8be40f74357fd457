//! Tayga: an observability pipeline for OpenTelemetry traces and logs. See ARCHITECTURE.md
//! for the map of this crate and the rules each layer keeps.

pub mod bus;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod daemon;
pub mod demo;
#[doc(hidden)]
pub mod fuzz_checks;
pub mod identity;
pub mod mine;
pub mod model;
pub mod otlp;
pub mod search;
pub mod store;
pub mod time;
pub mod wire;
pub mod workflow;

/// glibc's malloc took ~12% of ingest's CPU under load (perf, docs/ingest.md): mimalloc's
/// per-thread free lists serve the many small, short-lived buffers of a request without
/// the arena locking and consolidation. Set here, not in `main`, so the benchmarks and
/// tests run the daemons' code on the allocator they run on in production.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
