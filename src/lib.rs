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

/// Turns transparent huge pages off for this process (Linux; elsewhere it does nothing).
/// mimalloc asks for them on its arenas (`madvise(MADV_HUGEPAGE)`), so the first touch in
/// an empty 2 MiB range of an arena faults all 2 MiB in: RSS counts 2 MiB for every range
/// holding any live block, and climbs in 2 MiB steps as the heap moves over the arena. The
/// API's RSS did so under the soak with a heap of about 10 MiB (docs/reliability.md). Called
/// as the daemons start (`cmd::serve::run_services`), before their work fills the arenas
/// (pages already huge stay so); a process started after it inherits it.
pub fn without_transparent_huge_pages() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: PR_SET_THP_DISABLE takes integers only and sets one flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
