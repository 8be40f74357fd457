//! Logminer throughput: log lines per second from a pre-filled `<prefix>.logs` into
//! templates and hits in ClickHouse, and per CPU-second of the logminer (this process),
//! plus the detection pass duration once the templates exist. docs/logminer.md records it.
//!
//!     cargo run --release --example logminer_bench -- [--lines 300000] [--services 20] [--per-record 200] [--merge-siblings 5]
//!
//! Uses the ClickHouse and broker of TAYGA_CLICKHOUSE_URL / TAYGA_KAFKA_BROKERS (defaults:
//! 127.0.0.1:8123 and :9092) with a database and topic prefix of its own, removed at the end.
//! Each service logs 40 shapes of line (ids, numbers, IPs, paths, durations in them), like
//! an application's log, in records of `--per-record` lines keyed by service as ingest
//! publishes them.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tayga::config::Config;
use tayga::daemon::Shutdown;
use tayga::otlp::ExportLogsServiceRequest;
use tayga::store::Store;
use tayga::wire::record::{headers, SignalKind};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

/// Line `i` of a service: one of 40 shapes, with varying values.
fn line(service: usize, i: usize) -> String {
    let n = i.wrapping_mul(2_654_435_761) % 100_000;
    match i % 40 {
        0 => format!("GET /api/v{}/orders/{n} 200 in {} ms", service % 3 + 1, n % 900),
        1 => format!("user {n} logged in from 10.{}.{}.{}", n % 255, (n / 7) % 255, (n / 13) % 255),
        2 => format!("cache miss for key product:{n}, loading from db"),
        3 => format!("payment {n:08x} authorised for {}.{:02} EUR", n % 500, n % 100),
        4 => format!("worker-{} picked job {n} from queue emails", n % 16),
        5 => format!("connection to db-{}.internal:5432 reset by peer after {} s", n % 4, n % 60),
        6 => format!("request {n:016x} exceeded deadline of 2 s"),
        7 => format!("wrote {n} bytes to /var/data/segment-{}.log", n % 1000),
        k => format!("event kind {k} handled for tenant {} with status ok in {} us", n % 50, n % 5000),
    }
}

fn request(service: usize, lines: std::ops::Range<usize>, base: u64) -> ExportLogsServiceRequest {
    let kv = |k: &str, v: String| KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(v)) }),
        ..Default::default()
    };
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![kv("service.name", format!("bench-{service}"))],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                log_records: lines
                    .map(|i| LogRecord {
                        time_unix_nano: base + i as u64 * 1_000,
                        body: Some(AnyValue { value: Some(any_value::Value::StringValue(line(service, i))) }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// This process's user + system CPU seconds (Linux).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let lines = arg("--lines", 300_000);
    let services = arg("--services", 20).max(1);
    let per_record = arg("--per-record", 200).max(1);
    let mut config = Config::default();
    // `--merge-siblings 0` times the miner without the sibling merge (the default before it
    // was on), in the same build.
    config.logminer.drain.merge_siblings = arg("--merge-siblings", config.logminer.drain.merge_siblings);
    if let Ok(url) = std::env::var("TAYGA_CLICKHOUSE_URL") {
        config.clickhouse.url = url;
    }
    if let Ok(brokers) = std::env::var("TAYGA_KAFKA_BROKERS") {
        config.kafka.brokers = brokers;
    }
    let name = format!("bench_logminer_{}", std::process::id());
    config.clickhouse.database = name.clone();
    config.kafka.topic_prefix = name.clone();
    config.logminer.metrics_addr = "127.0.0.1:0".into();
    let names = config.names();
    tayga::bus::topics::ensure_topics(&config.kafka, &names).await?;
    let store = Store::new(&config.clickhouse);
    tayga::store::migrate::migrate(&store).await?;

    // Pre-fill the logs topic: each service's lines in records of `per_record`.
    let producer: FutureProducer = tayga::bus::client_config(&config.kafka).set("linger.ms", "20").create()?;
    let base = tayga::store::now_ns() - 3_600_000_000_000;
    let per_service = lines / services;
    let mut pending = Vec::new();
    for service in 0..services {
        let key = format!("bench-{service}");
        let mut start = 0;
        while start < per_service {
            let end = (start + per_record).min(per_service);
            let value = request(service, start..end, base).encode_to_vec();
            let record =
                FutureRecord::to(&names.logs).key(&key).payload(&value).headers(headers(SignalKind::Logs, base));
            pending.push(producer.send_result(record).map_err(|(e, _)| e)?);
            start = end;
        }
    }
    for delivery in pending {
        delivery.await?.map_err(|(e, _)| e)?;
    }
    let total = per_service * services;
    println!("pre-filled {total} lines in records of {per_record} over {services} services");

    let shutdown = Shutdown::new();
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let task = {
        let (config, shutdown) = (config.clone(), shutdown.clone());
        tokio::spawn(async move { tayga::daemon::logminer::serve(&config, shutdown).await })
    };
    loop {
        let hits: u64 = store.query_for_tests("SELECT count() FROM log_hits").fetch_one().await.unwrap_or(0);
        if hits as usize >= total {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(1800), "the logminer did not finish in 30 minutes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let templates: u64 = store.query_for_tests("SELECT count() FROM log_templates FINAL").fetch_one().await?;
    // Detection passes over the finished state: time a few.
    let mut passes = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let counts = tayga::store::logminer::minute_counts(
            &store,
            &(0..services).map(|s| format!("bench-{s}")).collect::<Vec<_>>(),
            tayga::mine::MASKING_VERSION,
            base.saturating_sub(60 * 60_000_000_000),
        )
        .await?;
        passes.push((t.elapsed().as_secs_f64(), counts.len()));
    }
    shutdown.trigger();
    task.await??;
    println!(
        "mined {total} lines in {wall:.2} s: {:.0} lines/s wall, {:.0} lines per logminer CPU-second ({cpu:.2} CPU-s), \
         {templates} templates, peak RSS {:.0} MB",
        total as f64 / wall,
        total as f64 / cpu.max(1e-9),
        peak_rss_mb()
    );
    let best = passes.iter().map(|p| p.0).fold(f64::MAX, f64::min);
    println!("minute-count query of a detection pass: {:.3} s for {} (template, minute) rows", best, passes[0].1);

    let _ = store.drop_database().await;
    let admin: AdminClient<DefaultClientContext> = tayga::bus::client_config(&config.kafka).create()?;
    let topics = [names.signals, names.logs, names.stories, names.alerts];
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    let _ = admin.delete_topics(&refs, &AdminOptions::new()).await;
    Ok(())
}
