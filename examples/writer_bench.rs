//! Writer throughput: rows/s from a pre-filled `<prefix>.signals` into ClickHouse, beside a
//! raw insert of the same rows, in the same round. The ratio (writer ÷ raw) is the figure;
//! docs/writer.md describes the sides, docs/benchmarks.md records the figures.
//!
//!     cargo run --release --example writer_bench -- [--traces 16000] [--spans 20] [--rounds 2] [--warmup 1] [--stages]
//!
//! Uses the ClickHouse and broker of TAYGA_CLICKHOUSE_URL / TAYGA_KAFKA_BROKERS (defaults:
//! 127.0.0.1:8123 and :9092; TAYGA_CLICKHOUSE_CLUSTER names a cluster, docs/scaling.md) with
//! a database and topic prefix of its own per round, removed at the end of it. The writer
//! runs with its defaults (`writer.batch_max_rows`, `batch_max_wait_ms`) and the insert mode
//! it chooses for the server. Each round, in alternating order:
//! - **raw pipelined** (the baseline): the same rows, pre-built, in the writer's batches
//!   (`batch_max_rows` rows of consecutive records), both tables' inserts concurrently and
//!   the next batch encoded while they are in flight ([`raw_pipelined`]);
//! - **raw one-table chunks** (context): the same rows in chunks of `batch_max_rows` rows of
//!   one table, one insert after another;
//! - **the writer**.
//!
//! A side that stored another row count than it was given makes its round void (printed
//! `VOID`). One record in five is a log record of `--spans` logs.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, Status};
use prost::Message as _;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tayga::config::Config;
use tayga::daemon::Shutdown;
use tayga::model::encoded::EncodedRows;
use tayga::otlp::flatten::{log_rows, span_rows};
use tayga::otlp::{hex_id, ExportLogsServiceRequest, ExportTraceServiceRequest};
use tayga::store::{LogRow, SpanRow, Store};
use tayga::wire::record::{headers, SignalKind};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn kv(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value)) }),
        ..Default::default()
    }
}

fn resource(service: &str) -> Option<Resource> {
    Some(Resource {
        attributes: vec![kv("service.name", service.into()), kv("host.name", "node-7".into())],
        ..Default::default()
    })
}

fn trace_id(i: usize) -> Vec<u8> {
    let mut id = 0xbeef_0000_0000_0000u64.to_be_bytes().to_vec();
    id.extend_from_slice(&(i as u64 + 1).to_be_bytes());
    id
}

fn trace(i: usize, spans: usize, base: u64) -> ExportTraceServiceRequest {
    let tid = trace_id(i);
    let spans: Vec<Span> = (0..spans)
        .map(|j| Span {
            trace_id: tid.clone(),
            span_id: (((i as u64) << 20) | (j as u64 + 1)).to_be_bytes().to_vec(),
            parent_span_id: if j == 0 { vec![] } else { ((i as u64) << 20 | 1).to_be_bytes().to_vec() },
            name: format!("GET /api/v1/items/{}", j % 7),
            kind: 2,
            start_time_unix_nano: base + (i * 1000 + j) as u64 * 1_000,
            end_time_unix_nano: base + (i * 1000 + j) as u64 * 1_000 + 250_000,
            attributes: vec![
                kv("http.method", "GET".into()),
                kv("http.status_code", "200".into()),
                kv("user.id", format!("u{}", i % 97)),
            ],
            status: Some(Status { code: status::StatusCode::Ok as i32, ..Default::default() }),
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: resource(if i.is_multiple_of(2) { "frontend" } else { "checkout" }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

fn logs(i: usize, n: usize, base: u64) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource("checkout"),
            scope_logs: vec![ScopeLogs {
                log_records: (0..n)
                    .map(|j| LogRecord {
                        time_unix_nano: base + (i * 1000 + j) as u64,
                        severity_number: 9,
                        severity_text: "INFO".into(),
                        body: Some(AnyValue {
                            value: Some(any_value::Value::StringValue(format!("order {i} item {j} reserved in 12 ms"))),
                        }),
                        trace_id: trace_id(i),
                        attributes: vec![kv("code.function", "reserve".into())],
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with(' ') || r.starts_with('{')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[derive(Debug, Clone, Copy)]
enum Side {
    Raw = 0,
    Chunks = 1,
    Writer = 2,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Raw => "raw pipelined",
            Side::Chunks => "raw one-table chunks",
            Side::Writer => "writer",
        }
    }
}

/// The strong raw baseline: the writer's batches of pre-built rows, each encoded to
/// RowBinary (`EncodedRows::from_rows`, what the writer's decoding path uses) and sent with
/// `store::insert::insert_encoded` (the writer's insert), spans and logs concurrently; the
/// next batch is encoded while the previous one's two inserts are in flight, one batch in
/// flight at a time, as the writer does. It never fetches from the broker nor reads
/// protobuf: the rows are in memory. The clock starts with the first batch's rows in hand,
/// before any encoding, and stops when the last insert answered.
async fn raw_pipelined(store: &Store, batches: &[(Vec<SpanRow>, Vec<LogRow>)]) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut in_flight: Option<tokio::task::JoinHandle<anyhow::Result<()>>> = None;
    for (spans, logs_rows) in batches {
        let spans = EncodedRows::<SpanRow>::from_rows(spans.iter());
        let logs_rows = EncodedRows::<LogRow>::from_rows(logs_rows.iter());
        if let Some(previous) = in_flight.take() {
            previous.await??;
        }
        let store = store.clone();
        in_flight = Some(tokio::spawn(async move {
            let (spans, logs_rows) = ([&spans], [&logs_rows]);
            let (a, b) = tokio::join!(
                tayga::store::insert::insert_encoded(&store, &spans, None),
                tayga::store::insert::insert_encoded(&store, &logs_rows, None)
            );
            a?;
            b?;
            Ok(())
        }));
    }
    if let Some(last) = in_flight {
        last.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// For context: the same rows in fewer, larger inserts, `batch_max_rows` rows of one table
/// each, one after another (the clickhouse crate serializing the structs), which the writer
/// does not make (its batches hold both tables' rows).
async fn raw_chunks(store: &Store, batches: &[(Vec<SpanRow>, Vec<LogRow>)], batch: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    let all_spans: Vec<&SpanRow> = batches.iter().flat_map(|b| &b.0).collect();
    let all_logs: Vec<&LogRow> = batches.iter().flat_map(|b| &b.1).collect();
    for chunk in all_spans.chunks(batch) {
        tayga::store::insert::insert_rows(store, "spans", chunk.iter().copied(), None).await?;
    }
    for chunk in all_logs.chunks(batch) {
        tayga::store::insert::insert_rows(store, "logs", chunk.iter().copied(), None).await?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The writer, in this process, with its defaults, reading the pre-filled topic; timed from
/// its first consumed record (the record in hand, before any encoding: the raw side's
/// start) to its last row written, so the group join is excluded. `None` when it did not
/// write every row within 300 s.
async fn writer_side(config: &Config, total_rows: f64) -> anyhow::Result<Option<f64>> {
    let mut writer_config = config.clone();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    writer_config.writer.metrics_addr = format!("127.0.0.1:{port}");
    let addr = writer_config.writer.metrics_addr.clone();
    let shutdown = Shutdown::new();
    let task = tokio::spawn(tayga::daemon::writer::run(writer_config, shutdown.clone()));
    let http = reqwest::Client::new();
    let scrape = || async { http.get(format!("http://{addr}/metrics")).send().await.ok()?.text().await.ok() };
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut first = None;
    let took = loop {
        if Instant::now() > deadline {
            break None;
        }
        if let Some(text) = scrape().await {
            if first.is_none() && metric(&text, "tayga_writer_consumed_records_total") > 0.0 {
                first = Some(Instant::now());
            }
            if metric(&text, "tayga_writer_written_rows_total") >= total_rows {
                break first.map(|f| f.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    shutdown.trigger();
    task.await??;
    Ok(took)
}

/// For context (`--stages`, first round only): the same records fetched only (a plain
/// consumer, new group), made into rows the writer's way (RowBinary straight from the
/// bytes), and the old way (decoded with prost and flattened into row structs), each alone,
/// in memory.
async fn print_stages(
    config: &Config,
    topic: &str,
    name: &str,
    values: &[(String, SignalKind, Vec<u8>)],
    records: usize,
    total_rows: f64,
    now: u64,
) -> anyhow::Result<()> {
    let fetch_secs = {
        let consumer: BaseConsumer = tayga::bus::client_config(&config.kafka)
            .set("group.id", format!("{name}-fetch"))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .create()?;
        consumer.subscribe(&[topic])?;
        let mut seen = 0;
        let mut first = None;
        let deadline = Instant::now() + Duration::from_secs(120);
        while seen < records && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                m?;
                first.get_or_insert_with(Instant::now);
                seen += 1;
            }
        }
        first.map_or(0.0, |f| f.elapsed().as_secs_f64())
    };
    let decode_secs = {
        let started = Instant::now();
        let mut n = 0;
        for (_, kind, value) in values {
            let h = headers(*kind, now);
            let rec = tayga::wire::record::decode(Some(h.as_borrowed()), Some(value))?;
            n += match &rec.payload {
                tayga::wire::record::SignalPayload::Traces(r) => span_rows(r, rec.ingest_ns).len(),
                tayga::wire::record::SignalPayload::Logs(r) => log_rows(r, rec.ingest_ns).len(),
            };
        }
        anyhow::ensure!(n as f64 == total_rows);
        started.elapsed().as_secs_f64()
    };
    let encode_secs = {
        let started = Instant::now();
        let mut n = 0;
        for (_, kind, value) in values {
            let raw = tayga::wire::record::RawRecord { kind: *kind, ingest_ns: now, value };
            n += match tayga::otlp::rowbinary::record_rows(&raw)? {
                tayga::otlp::rowbinary::TableRows::Spans(r) => r.len(),
                tayga::otlp::rowbinary::TableRows::Logs(r) => r.len(),
            };
        }
        anyhow::ensure!(n as f64 == total_rows);
        started.elapsed().as_secs_f64()
    };
    println!(
        "stages alone: fetch {:.0} records/s = {:.0} rows/s; encode {:.0} rows/s (decode+flatten {:.0} rows/s)",
        records as f64 / fetch_secs,
        total_rows / fetch_secs,
        total_rows / encode_secs,
        total_rows / decode_secs
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    if std::env::var("TAYGA_LOG").is_ok() {
        tayga::daemon::init_tracing();
    }
    let per = arg("--spans", 20);
    let rounds = arg("--rounds", 2);
    let warmup = arg("--warmup", 1);
    let stages = std::env::args().any(|a| a == "--stages");
    let mut base_config = Config::default();
    // Whole batches only: the writer cannot know the stream ended, so a last partial batch
    // waits `batch_max_wait_ms` for rows that never come. A stream that goes on never has
    // that wait; the raw side never has it either. Rounded up to whole batches.
    let batch = base_config.writer.batch_max_rows as usize;
    let per_batch = batch.div_ceil(per).max(1);
    let records = arg("--traces", 16_000).div_ceil(per_batch) * per_batch;
    if let Ok(url) = std::env::var("TAYGA_CLICKHOUSE_URL") {
        base_config.clickhouse.url = url;
    }
    if let Ok(brokers) = std::env::var("TAYGA_KAFKA_BROKERS") {
        base_config.kafka.brokers = brokers;
    }
    // A cluster (docs/scaling.md): the writer's tables are Distributed over its shards.
    if let Ok(cluster) = std::env::var("TAYGA_CLICKHOUSE_CLUSTER") {
        base_config.clickhouse.cluster = cluster;
    }
    let now = tayga::store::now_ns();

    // The data, and the rows the writer must produce from it, cut into the writer's
    // batches: `batch_max_rows` rows of consecutive records, each batch one insert per table.
    let mut values = Vec::with_capacity(records);
    let mut batches: Vec<(Vec<SpanRow>, Vec<LogRow>)> = Vec::new();
    for i in 0..records {
        if i % per_batch == 0 {
            batches.push(Default::default());
        }
        let (spans, logs_rows) = batches.last_mut().expect("pushed above");
        if i % 5 == 4 {
            let r = logs(i, per, now);
            logs_rows.extend(log_rows(&r, now));
            values.push((hex_id(&trace_id(i)), SignalKind::Logs, r.encode_to_vec()));
        } else {
            let r = trace(i, per, now);
            spans.extend(span_rows(&r, now));
            values.push((hex_id(&trace_id(i)), SignalKind::Traces, r.encode_to_vec()));
        }
    }
    let span_count: usize = batches.iter().map(|b| b.0.len()).sum();
    let log_count: usize = batches.iter().map(|b| b.1.len()).sum();
    let total_rows = (span_count + log_count) as f64;
    let bytes: usize = values.iter().map(|v| v.2.len()).sum();
    println!(
        "data: {records} records ({} MB of OTLP protobuf), {span_count} spans + {log_count} logs = {total_rows} rows; {} batches of batch_max_rows {batch}",
        bytes / 1_000_000,
        batches.len()
    );

    // Round 0 (and any further `--warmup` rounds) warms ClickHouse, the broker and the
    // caches; it is printed but marked, and bench.sh leaves it out.
    for round in 0..warmup + rounds {
        let warm = if round < warmup { " (warm-up)" } else { "" };
        let name = format!("bench_writer_{}_{round}", std::process::id());
        let mut config = base_config.clone();
        config.clickhouse.database = name.clone();
        config.kafka.topic_prefix = name.clone();
        config.writer.metrics_addr = "127.0.0.1:0".into();
        let store = Store::new(&config.clickhouse);
        tayga::store::migrate::migrate(&store).await?;

        // Pre-fill the topic, outside every clock.
        tayga::bus::topics::ensure_topics(&config.kafka, &config.names()).await?;
        let producer: FutureProducer = tayga::bus::client_config(&config.kafka)
            .set("linger.ms", "20")
            .set("batch.size", "1000000")
            .set("queue.buffering.max.messages", "1000000")
            .set("queue.buffering.max.kbytes", "2000000")
            .create()?;
        let topic = config.names().signals;
        let produced = Instant::now();
        let mut pending = Vec::with_capacity(values.len());
        for (key, kind, value) in &values {
            pending.push(
                producer
                    .send_result(FutureRecord::to(&topic).key(key).payload(value).headers(headers(*kind, now)))
                    .map_err(|(e, _)| e)?,
            );
        }
        for p in pending {
            p.await?.map_err(|(e, _)| e)?;
        }
        let produce_secs = produced.elapsed().as_secs_f64();

        // The sides alternate: the writer last in even rounds, first in odd ones, so a
        // trend in the machine's load (or ClickHouse's merges of the previous side's
        // parts) does not always fall on the same side.
        let order: [Side; 3] = if round % 2 == 0 {
            [Side::Raw, Side::Chunks, Side::Writer]
        } else {
            [Side::Writer, Side::Chunks, Side::Raw]
        };
        let mut secs = [0.0f64; 3];
        let mut void = Vec::new();
        for side in order {
            let took = match side {
                Side::Raw => Some(raw_pipelined(&store, &batches).await?),
                Side::Chunks => Some(raw_chunks(&store, &batches, batch).await?),
                Side::Writer => writer_side(&config, total_rows).await?,
            };
            // A side that stored another number of rows than it was given is void, and so is
            // its round: its time measured something else.
            let stored =
                tayga::store::read::count_spans_raw(&store).await? + tayga::store::read::count_logs_raw(&store).await?;
            match took {
                Some(t) if stored as f64 == total_rows => secs[side as usize] = t,
                Some(_) => void.push(format!("{} stored {stored} rows of {total_rows}", side.name())),
                None => void.push(format!("{} stored {stored} rows of {total_rows} within 300 s", side.name())),
            }
            store.query_for_tests("TRUNCATE TABLE spans").execute().await?;
            store.query_for_tests("TRUNCATE TABLE logs").execute().await?;
            // The views' tables too, so every side starts from the same empty store.
            for table in ["spans_by_time", "logs_by_time", "service_minutes", "trace_logs"] {
                let _ = store.query_for_tests(&format!("TRUNCATE TABLE {table}")).execute().await;
            }
        }

        if stages && round == 0 {
            print_stages(&config, &topic, &name, &values, records, total_rows, now).await?;
        }
        let [raw, chunks, writer] = secs.map(|s| if s > 0.0 { total_rows / s } else { 0.0 });
        println!(
            "round {round}{warm}: raw pipelined {raw:>9.0} rows/s ({:.2} s) | raw one-table chunks {chunks:>9.0} rows/s ({:.2} s) | writer {writer:>9.0} rows/s ({:.2} s) | ratio {:.3} | ratio to chunks {:.3} | order {} | (produce {:.0} records/s){}",
            secs[0],
            secs[1],
            secs[2],
            if raw > 0.0 { writer / raw } else { 0.0 },
            if chunks > 0.0 { writer / chunks } else { 0.0 },
            order.map(|s| s.name()).join(","),
            records as f64 / produce_secs,
            if void.is_empty() { String::new() } else { format!(" | VOID: {}", void.join("; ")) }
        );

        let _ = store.drop_database().await;
        let admin: AdminClient<DefaultClientContext> = tayga::bus::client_config(&config.kafka).create()?;
        let names = config.names();
        let topics = [names.signals.as_str(), names.logs.as_str(), names.stories.as_str(), names.alerts.as_str()];
        let _ = admin.delete_topics(&topics, &AdminOptions::new()).await;
    }
    Ok(())
}
