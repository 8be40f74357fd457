//! Two helpers of the storage section of scripts/bench.sh (what a span and a log line cost on
//! disk and on the broker), both printing one JSON object:
//!
//!     storage_bench demo --endpoint http://127.0.0.1:4318 [--seconds 1800] [--seed 7]
//!     storage_bench topic --topic tayga.signals
//!
//! - `demo` sends `--seconds` of the OTel demo scenario of `tayga up --demo`
//!   (`demo::scenario`: four services, nested spans, logs with their trace ids, the incident
//!   with its errors, burst and slow path) to an ingest's OTLP/HTTP endpoint, every second
//!   backdated so that the whole run, incident included, lies in the past, as fast as ingest
//!   takes it (no UI, no waiting for the clock).
//! - `topic` reads a topic whole (a plain consumer of a new group, from the earliest offset
//!   to the high watermarks read at start) and counts its records by `tayga-kind` header, with
//!   their bytes as produced (key + value + headers, uncompressed) and the bytes the broker
//!   sent to serve them (librdkafka's `rx_bytes` statistic: the stored record batches,
//!   compressed as the producer sent them, plus the protocol's framing).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientContext, Statistics, TopicPartitionList};
use tayga::config::Config;
use tayga::demo::scenario::{Scenario, Timeline};
use tayga::time::SECOND_NS;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("demo") => demo().await,
        Some("topic") => topic(),
        _ => anyhow::bail!("usage: storage_bench demo --endpoint URL [--seconds N] [--seed N] | topic --topic NAME"),
    }
}

async fn demo() -> anyhow::Result<()> {
    let endpoint = arg("--endpoint").unwrap_or_else(|| "http://127.0.0.1:4318".into());
    let seconds: u64 = arg("--seconds").map_or(Ok(1800), |s| s.parse())?;
    let seed: u64 = arg("--seed").map_or(Ok(7), |s| s.parse())?;
    // The scenario's incident starts up to 70 s after its start and its burst lasts 15 s: the
    // last 120 s of the run follow the start, and the run ends before now.
    let after = 120;
    anyhow::ensure!(seconds > after + 60, "--seconds must be more than {}", after + 60);
    let now = tayga::store::now_ns();
    let wanted = Timeline { history_secs: seconds - after, ..Timeline::default() };
    let (timeline, origin) = wanted.aligned(now - after * SECOND_NS);
    let total = timeline.history_secs + after;
    let mut scenario = Scenario::new(timeline, seed);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let (mut spans, mut logs, mut failed) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    for t in 0..total {
        let second = scenario.second(t, origin + t * SECOND_NS);
        for (path, body) in [("/v1/traces", second.traces.encode_to_vec()), ("/v1/logs", second.logs.encode_to_vec())] {
            let mut sent = false;
            for attempt in 1..=10u64 {
                let r = http
                    .post(format!("{endpoint}{path}"))
                    .header("content-type", "application/x-protobuf")
                    .body(body.clone())
                    .send()
                    .await;
                if r.as_ref().is_ok_and(|r| r.status().is_success()) {
                    sent = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            failed += u64::from(!sent);
        }
        spans += second.spans as u64;
        logs += second.log_records as u64;
    }
    println!(
        "{}",
        serde_json::json!({"seconds": total, "spans": spans, "logs": logs, "failed_requests": failed,
                           "wall_secs": started.elapsed().as_secs_f64()})
    );
    Ok(())
}

/// Keeps the last `rx_bytes` (bytes received from the brokers) librdkafka reported.
struct RxBytes(Arc<AtomicI64>);

impl ClientContext for RxBytes {
    fn stats(&self, statistics: Statistics) {
        self.0.store(statistics.rx_bytes, Ordering::Relaxed);
    }
}

impl ConsumerContext for RxBytes {}

fn topic() -> anyhow::Result<()> {
    let name = arg("--topic").ok_or_else(|| anyhow::anyhow!("--topic NAME"))?;
    let mut config = Config::default();
    if let Ok(brokers) = std::env::var("TAYGA_KAFKA_BROKERS") {
        config.kafka.brokers = brokers;
    }
    let rx = Arc::new(AtomicI64::new(0));
    let consumer: BaseConsumer<RxBytes> = tayga::bus::client_config(&config.kafka)
        .set("group.id", format!("storage-bench-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("statistics.interval.ms", "100")
        .create_with_context(RxBytes(rx.clone()))?;
    let metadata = consumer.fetch_metadata(Some(&name), Duration::from_secs(10))?;
    let partitions: Vec<i32> = metadata.topics().iter().flat_map(|t| t.partitions().iter().map(|p| p.id())).collect();
    let mut ends = BTreeMap::new();
    let mut assignment = TopicPartitionList::new();
    for &p in &partitions {
        let (low, high) = consumer.fetch_watermarks(&name, p, Duration::from_secs(10))?;
        if high > low {
            ends.insert(p, high);
            assignment.add_partition_offset(&name, p, rdkafka::Offset::Offset(low))?;
        }
    }
    consumer.assign(&assignment)?;
    // kind → (records, key + value + header bytes)
    let mut by_kind: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut left = ends.clone();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !left.is_empty() && Instant::now() < deadline {
        let Some(m) = consumer.poll(Duration::from_millis(200)) else { continue };
        let m = m?;
        let mut bytes = m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
        let mut kind = "none".to_string();
        if let Some(headers) = m.headers() {
            for h in headers.iter() {
                bytes += h.key.len() + h.value.map_or(0, <[u8]>::len);
                if h.key == "tayga-kind" {
                    kind = String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned();
                }
            }
        }
        let entry = by_kind.entry(kind).or_default();
        entry.0 += 1;
        entry.1 += bytes as u64;
        if left.get(&m.partition()).is_some_and(|&end| m.offset() + 1 >= end) {
            left.remove(&m.partition());
        }
    }
    anyhow::ensure!(left.is_empty(), "the topic was not read to its end within 300 s");
    // One more statistics interval, so rx_bytes includes the last fetch.
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        let _ = consumer.poll(Duration::from_millis(100));
    }
    let kinds: serde_json::Map<String, serde_json::Value> = by_kind
        .into_iter()
        .map(|(k, (records, bytes))| (k, serde_json::json!({"records": records, "bytes": bytes})))
        .collect();
    println!("{}", serde_json::json!({"topic": name, "kinds": kinds, "fetched_bytes": rx.load(Ordering::Relaxed)}));
    Ok(())
}
