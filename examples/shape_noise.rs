//! How noisy the shape rules are (docs/alerts.md, "Noise: measured"): simulated traffic of
//! four endpoints with conditional paths (cache hits and misses, optional calls, fan-outs
//! of varying width, rare branches, partial stories that miss a call), one of which takes a
//! genuinely new path (a row lock on half its checkouts) at hour 10, and another that only
//! appears at hour 6, run through the logminer's own rules (`daemon::logminer::shapes`) as
//! its passes apply them: once a minute, with a moving watermark, the ids announced
//! before, and the rate limit. It prints, per endpoint, the traces, the shapes and the
//! alerts raised, with the default `[logminer.shapes]` and with every guard off.
//!
//!     cargo run --example shape_noise -- [--hours 12] [--seed 7]
//!
//! Pure and seeded: the same arguments print the same table. No server is needed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use tayga::config::ShapesConfig;
use tayga::daemon::logminer::shapes::{self, Endpoint, EndpointShapes, ShapeMinute, ShapeRules, ShapeSeen};
use tayga::identity::story_fingerprint;

const MINUTE_NS: u64 = 60_000_000_000;
/// The genuinely new call, on checkout from hour 10.
const LOCK: (&str, &str, &str, &str) = ("payment", "charge", "database", "lock payment row");
const LOCK_FROM_MIN: u64 = 600;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        (self.next() % 1_000_000) as f64 / 1_000_000.0 < p
    }

    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

type Call = (&'static str, &'static str, &'static str, &'static str);
/// A story's edge: the parent (none for the root) and the callee, each (service, operation).
type Edge<'a> = (Option<(&'a str, &'a str)>, (&'a str, &'a str));

/// One endpoint's traffic: its rate and the calls one request makes, drawn at random.
struct Model {
    service: &'static str,
    operation: &'static str,
    per_minute: u64,
    from_minute: u64,
    calls: fn(&mut Rng, u64) -> Vec<Call>,
}

fn checkout(r: &mut Rng, minute: u64) -> Vec<Call> {
    let mut c = vec![
        ("frontend", "POST /checkout", "checkout", "place order"),
        ("checkout", "place order", "cache", "GET cart"),
    ];
    if r.chance(0.3) {
        c.push(("checkout", "place order", "database", "SELECT cart")); // a cache miss
    }
    if r.chance(0.1) {
        c.push(("checkout", "place order", "fraud", "score")); // an optional check
    }
    for _ in 0..r.between(1, 8) {
        c.push(("checkout", "place order", "inventory", "reserve")); // a fan-out
    }
    c.push(("checkout", "place order", "payment", "charge"));
    if r.chance(0.003) {
        c.push(("payment", "charge", "payment", "retry")); // rare
    }
    if r.chance(0.0005) {
        c.push(("checkout", "place order", "audit", "export")); // rarer
    }
    if minute >= LOCK_FROM_MIN && r.chance(0.5) {
        c.push(LOCK);
    }
    c
}

fn search(r: &mut Rng, _: u64) -> Vec<Call> {
    let mut c = vec![("frontend", "GET /search", "search", "query")];
    if r.chance(0.5) {
        c.push(("search", "query", "cache", "GET results"));
    } else {
        for _ in 0..r.between(2, 12) {
            c.push(("search", "query", "shard", "scan"));
        }
    }
    if r.chance(0.05) {
        c.push(("search", "query", "spell", "suggest"));
    }
    if r.chance(0.002) {
        c.push(("search", "query", "ml", "rerank"));
    }
    c
}

fn profile(r: &mut Rng, _: u64) -> Vec<Call> {
    let mut c = vec![("frontend", "GET /profile", "users", "get")];
    if r.chance(0.2) {
        c.push(("users", "get", "images", "avatar"));
    }
    if r.chance(0.01) {
        c.push(("users", "get", "legacy", "lookup"));
    }
    c
}

fn report(r: &mut Rng, _: u64) -> Vec<Call> {
    let mut c = vec![("frontend", "GET /report", "reports", "build")];
    if r.chance(0.3) {
        c.push(("reports", "build", "pdf", "render"));
    }
    if r.chance(0.1) {
        c.push(("reports", "build", "mail", "send"));
    }
    c
}

/// What the logminer knows of one endpoint: its shapes and minute counts.
#[derive(Default)]
struct Seen {
    shapes: HashMap<u64, ShapeSeen>,
    minutes: BTreeMap<u64, HashMap<u64, u64>>,
    traces: u64,
}

impl Seen {
    fn add(&mut self, root: (&str, &str), calls: &[Call], at: u64, trace: u64) {
        let mut edges: Vec<Edge<'_>> = vec![(None, root)];
        edges.extend(calls.iter().map(|(ps, po, s, o)| (Some((*ps, *po)), (*s, *o))));
        let fingerprint = story_fingerprint(edges.iter().copied());
        let shape = self.shapes.entry(fingerprint).or_insert_with(|| {
            let text: BTreeSet<String> = edges
                .iter()
                .map(|(p, (s, o))| match p {
                    None => format!("ROOT -> {s}/{o}"),
                    Some((ps, po)) => format!("{ps}/{po} -> {s}/{o}"),
                })
                .collect();
            ShapeSeen {
                fingerprint,
                first_seen_ns: at,
                traces: 0,
                edges: text.into_iter().collect(),
                trace_id: trace.to_string(),
            }
        });
        shape.traces += 1;
        *self.minutes.entry(at / MINUTE_NS).or_default().entry(fingerprint).or_default() += 1;
        self.traces += 1;
    }

    fn as_pass_reads(&self, since_minute: u64) -> EndpointShapes {
        EndpointShapes {
            shapes: self.shapes.values().cloned().collect(),
            minutes: self
                .minutes
                .range(since_minute..)
                .flat_map(|(m, fps)| fps.iter().map(|(f, c)| ShapeMinute { fingerprint: *f, minute: *m, traces: *c }))
                .collect(),
        }
    }
}

/// Alerts raised per endpoint: (true, false).
type Tally = BTreeMap<&'static str, (u64, u64, Vec<String>)>;

fn run(
    models: &[Model],
    rules: &ShapeRules,
    hours: u64,
    seed: u64,
    partial: f64,
) -> (Tally, BTreeMap<&'static str, (u64, usize, usize)>) {
    let mut rng = Rng(seed.max(1));
    let mut seen: Vec<Seen> = models.iter().map(|_| Seen::default()).collect();
    let mut announced: HashSet<u64> = HashSet::new();
    let mut raised_at: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut tally: Tally = BTreeMap::new();
    let mut trace = 0u64;
    let mut watermark: Option<u64> = None;
    for minute in 0..hours * 60 {
        for (i, m) in models.iter().enumerate() {
            if minute < m.from_minute {
                continue;
            }
            let n = m.per_minute * 3 / 4 + rng.next() % (m.per_minute / 2 + 1);
            for k in 0..n {
                let mut calls = (m.calls)(&mut rng, minute);
                if rng.chance(partial) && calls.len() > 1 {
                    // A partial story: a span that never arrived, its call left out.
                    let drop = 1 + (rng.next() as usize) % (calls.len() - 1);
                    calls.remove(drop);
                }
                trace += 1;
                let at = minute * MINUTE_NS + k * (MINUTE_NS / n.max(1));
                seen[i].add((m.service, m.operation), &calls, at, trace);
            }
        }
        // The pass at the end of the minute.
        let now = (minute + 1) * MINUTE_NS;
        let w = *watermark.get_or_insert(now);
        for (i, m) in models.iter().enumerate() {
            let endpoint = Endpoint { service: m.service.into(), operation: m.operation.into() };
            let reads = seen[i].as_pass_reads(rules.minutes_since(w) / MINUTE_NS);
            let recent = raised_at.get(&i).map_or(0, |t| t.iter().filter(|t| **t + 60 * MINUTE_NS > now).count());
            let judged = shapes::new_shapes(rules, &endpoint, &reads, w, &announced, recent as u64);
            for n in judged.raised {
                announced.insert(n.alert_id);
                raised_at.entry(i).or_default().push(now);
                let genuine = n.change.new_edges.iter().any(|e| e.ends_with(LOCK.3));
                let entry = tally.entry(m.operation).or_default();
                if genuine {
                    entry.0 += 1;
                } else {
                    entry.1 += 1;
                }
                entry.2.push(format!("min {}: +{}", n.first_seen_ns / MINUTE_NS, n.change.new_edges.join(", +")));
            }
        }
        watermark = Some(now);
    }
    // A fingerprint first seen after the endpoint's first minute: what a rule on fingerprints
    // alone would announce.
    let sizes = models
        .iter()
        .zip(&seen)
        .map(|(m, s)| {
            let later = s.shapes.values().filter(|f| f.first_seen_ns >= (m.from_minute + 1) * MINUTE_NS).count();
            (m.operation, (s.traces, s.shapes.len(), later))
        })
        .collect();
    (tally, sizes)
}

fn main() {
    let hours = arg("--hours", 12);
    let seed = arg("--seed", 7);
    let models = [
        Model { service: "frontend", operation: "POST /checkout", per_minute: 60, from_minute: 0, calls: checkout },
        Model { service: "frontend", operation: "GET /search", per_minute: 90, from_minute: 0, calls: search },
        Model { service: "frontend", operation: "GET /profile", per_minute: 6, from_minute: 0, calls: profile },
        Model { service: "frontend", operation: "GET /report", per_minute: 4, from_minute: 360, calls: report },
    ];
    let defaults = ShapeRules::from_config(&ShapesConfig::default());
    let off = ShapeRules {
        warmup_min: 0,
        warmup_traces: 0,
        min_count: 1,
        min_share: 0.0,
        max_new_per_hour: u64::MAX,
        ..defaults
    };
    let (with, sizes) = run(&models, &defaults, hours, seed, 0.005);
    let (without, _) = run(&models, &off, hours, seed, 0.005);
    let total: u64 = sizes.values().map(|s| s.0).sum();
    println!("{hours} h of simulated traffic, seed {seed}: {total} traces (0.5% partial)\n");
    println!(
        "| endpoint | traces | shapes | shapes first seen after its first minute | new_shape, defaults (true / false) | new_shape, guards off (true / false) |"
    );
    println!("| --- | ---: | ---: | ---: | --- | --- |");
    for m in &models {
        let (traces, shapes, later) = sizes[m.operation];
        let w = with.get(m.operation).map_or((0, 0), |t| (t.0, t.1));
        let o = without.get(m.operation).map_or((0, 0), |t| (t.0, t.1));
        println!(
            "| frontend `{}` | {traces} | {shapes} | {later} | {} / {} | {} / {} |",
            m.operation, w.0, w.1, o.0, o.1
        );
    }
    for (title, tally) in [("the defaults", &with), ("the guards off", &without)] {
        println!("\nRaised with {title}:");
        for (op, t) in tally {
            for line in &t.2 {
                println!("  {op}: {line}");
            }
        }
    }
}
