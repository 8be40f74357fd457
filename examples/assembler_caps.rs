//! What one buffered span costs the assembler: its buffer (`daemon::assembler::buffer`, the
//! daemon's own state, pure) filled with unique traces until it holds `--spans` spans, as
//! the assembler holds them at its caps, and the growth of the process's resident set
//! divided by the spans held. The spans look like the traffic of `tayga loadgen` (16-hex
//! span ids, a parent each but the root, a few services and operations). docs/stories.md
//! has the figures; `scripts/bench.sh` (section `caps`) measures the whole daemon.
//!
//!     cargo run --release --example assembler_caps -- [--spans 1000000] [--per-trace 10]
//!
//! No server is needed.

use std::sync::Arc;

use tayga::daemon::assembler::buffer::{Buffer, Item, Limits};
use tayga::daemon::assembler::trace::SpanInfo;
use tayga::identity::span_key;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Resident bytes of this process (`/proc/self/statm`).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("statm's resident field");
    pages * 4096
}

const SERVICES: [&str; 5] = ["frontend", "checkout", "payment", "inventory", "database"];
const OPERATIONS: [&str; 6] =
    ["GET /api/checkout", "charge card", "reserve stock", "SELECT orders", "POST /api/cart", "publish event"];

fn main() {
    let spans = arg("--spans", 1_000_000) as usize;
    let per_trace = arg("--per-trace", 10).max(1) as usize;
    let traces = spans.div_ceil(per_trace);
    // The caps well above the flood, so nothing closes: every span stays held.
    let limits = Limits {
        idle_close_ms: u64::MAX / 2,
        max_spans_per_trace: per_trace,
        max_open_traces: traces + 1,
        max_buffered_spans: spans + 1,
        late_window_ms: 300_000,
    };
    let mut buffer = Buffer::new(limits);
    buffer.assign(0);
    let before = resident_bytes();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for t in 0..traces {
        let trace_id = format!("{:016x}{:016x}", next(), next());
        let ids: Vec<String> = (0..per_trace).map(|_| format!("{:016x}", next())).collect();
        let items = ids
            .iter()
            .enumerate()
            .map(|(i, id)| Item::Span {
                trace_id: trace_id.clone(),
                span_id: span_key(id),
                span: SpanInfo {
                    parent: (i > 0).then(|| span_key(&ids[(i - 1) / 2])),
                    // As the assembler gets them: each span's own copy, from its row.
                    service: Arc::from(SERVICES[i % SERVICES.len()].to_string()),
                    operation: Arc::from(OPERATIONS[(t + i) % OPERATIONS.len()].to_string()),
                    start_ns: 1_700_000_000_000_000_000 + (t * 1000 + i) as u64,
                    end_ns: 1_700_000_000_000_000_000 + (t * 1000 + i) as u64 + 5_000_000,
                    error: i == 3 && t % 50 == 0,
                    exception: None,
                },
            })
            .collect();
        buffer.add_record(0, t as i64, items, 0);
    }
    let after = resident_bytes();
    let held = buffer.buffered_spans();
    assert_eq!(held, traces * per_trace, "every span is held");
    let grown = after.saturating_sub(before);
    println!(
        "assembler buffer: {held} spans in {} open traces ({per_trace} spans each): resident set grew {:.1} MiB, \
         {:.0} bytes per buffered span",
        buffer.open_traces(),
        grown as f64 / (1 << 20) as f64,
        grown as f64 / held as f64
    );
}
