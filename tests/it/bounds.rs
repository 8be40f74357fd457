//! Memory at its bounds (docs/reliability.md, "Bounds"): each per-key state that grows with
//! input, flooded past a lowered bound. Each test checks that the bound holds (sampled while
//! the flood runs), that the counter counts what the policy dropped or evicted, that the
//! policy happened (the oldest evicted, the newest refused, …), and that nothing beyond the
//! policy was lost.

use crate::assembler::{metric, metrics, prepare, produce, s, start_in_process, trace_id, wait_stories, S};
use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{free_port, wait_for, TestEnv};
use tayga::daemon::Shutdown;

/// Samples `read` every 20 ms until stopped; returns the largest value seen and how many
/// samples were taken.
struct Peak {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(Vec<f64>, usize)>,
}

impl Peak {
    /// `read` returns one value per gauge watched.
    fn watch<F, Fut>(gauges: usize, read: F) -> Peak
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Option<Vec<f64>>> + Send,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let (mut peak, mut samples) = (vec![0.0f64; gauges], 0);
            while !s.load(Ordering::Relaxed) {
                if let Some(values) = read().await {
                    for (p, v) in peak.iter_mut().zip(values) {
                        *p = p.max(v);
                    }
                    samples += 1;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (peak, samples)
        });
        Peak { stop, task }
    }

    async fn finish(self) -> (Vec<f64>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// The assembler's span cap (`assembler.max_buffered_spans`), flooded with unique trace
/// ids: open and stored spans stay under it (open traces under cap ÷ spans per trace), the
/// oldest open traces close early and are stored whole, stored traces are forgotten first
/// (counted), and every trace ends as one story with all its spans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assembler_span_cap_closes_the_oldest_early_and_every_trace_keeps_its_spans() {
    const TRACES: u32 = 1_000;
    const SPANS: u64 = 10;
    const CAP: u64 = 2_000;
    const IDLE_SECS: u64 = 20;
    let env = TestEnv::new("bounds_asm");
    let store = prepare(&env).await;
    let mut config = env.config.clone();
    config.assembler.max_buffered_spans = CAP;
    config.assembler.max_open_traces = 100_000;
    let (shutdown, task, port) = start_in_process(&mut config, IDLE_SECS);
    wait_for("the assembler's metrics", Duration::from_secs(30), || metrics(port)).await;
    let peak = Peak::watch(2, move || async move {
        let text = metrics(port).await?;
        Some(vec![metric(&text, "tayga_assembler_open_traces")?, metric(&text, "tayga_assembler_buffered_spans")?])
    });

    let started = Instant::now();
    let trace = |n: u32| -> Vec<S> {
        let base = u64::from(n) * 100;
        (1..=SPANS).map(|i| s(base + i, if i == 1 { 0 } else { base + 1 }, "web", "flood", i * 10)).collect()
    };
    let traces: Vec<([u8; 16], Vec<S>)> = (0..TRACES).map(|n| (trace_id(n), trace(n))).collect();
    for chunk in traces.chunks(100) {
        produce(&env.config, chunk).await;
    }
    // Before any trace could close by idleness, all but those the cap leaves open are
    // stored: closed early, oldest first.
    let held = (CAP / SPANS) as usize;
    let early = wait_stories(&store, "the traces closed early", Duration::from_secs(IDLE_SECS - 5), |s| {
        s.len() >= TRACES as usize - held
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(IDLE_SECS), "stored before the idle close");
    assert!(early.values().all(|r| r.span_count == SPANS as u32), "an early close stores the trace whole");
    let got = wait_stories(&store, "every trace's story", Duration::from_secs(IDLE_SECS + 40), |s| {
        s.len() == TRACES as usize && s.values().all(|r| r.span_count == SPANS as u32)
    })
    .await;
    let (peak, samples) = peak.finish().await;
    let text = metrics(port).await.unwrap();
    let early_closes = metric(&text, "tayga_assembler_early_closes_total").unwrap();
    let evicted = metric(&text, "tayga_assembler_evicted_traces_total").unwrap();
    eprintln!(
        "BOUNDS assembler: {TRACES} traces x {SPANS} spans, cap {CAP} spans: peak open traces {}, peak buffered spans \
         {} ({samples} samples); early closes {early_closes}, stored traces evicted {evicted}; {} s",
        peak[0],
        peak[1],
        started.elapsed().as_secs()
    );
    assert!(samples > 10, "the gauges were sampled during the flood");
    assert!(peak[0] <= (CAP / SPANS) as f64, "open traces {} > cap {CAP} ÷ {SPANS}", peak[0]);
    assert!(peak[1] <= (2 * CAP + SPANS) as f64, "spans held {} > twice the cap plus one record", peak[1]);
    assert!(early_closes >= f64::from(TRACES) - held as f64, "every early close counted: {early_closes}");
    assert!(evicted > 0.0, "stored traces were forgotten first, and counted");
    assert_eq!(got.len(), TRACES as usize);
    let (rows, traces): (u64, u64) =
        store.query_for_tests("SELECT count(), uniqExact(trace_id) FROM stories FINAL").fetch_one().await.unwrap();
    assert_eq!((rows, traces), (u64::from(TRACES), u64::from(TRACES)), "one story per trace");
    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(20), task).await.unwrap().unwrap().unwrap();
}

/// A logminer in-process on `config` with a detection pass every second and its metrics
/// on a free port, once they answer: its stop, its task and its metrics address.
async fn start_logminer(
    mut config: tayga::config::Config,
) -> (Shutdown, tokio::task::JoinHandle<anyhow::Result<()>>, String) {
    config.logminer.tick_secs = 1;
    let addr = format!("127.0.0.1:{}", free_port());
    config.logminer.metrics_addr = addr.clone();
    let shutdown = Shutdown::new();
    let task = {
        let s = shutdown.clone();
        tokio::spawn(async move { tayga::daemon::logminer::serve(&config, s).await })
    };
    wait_for("the logminer's metrics", Duration::from_secs(30), || common::scrape(&addr)).await;
    (shutdown, task, addr)
}

/// The logminer's trees (`logminer.drain.max_services`) and templates per service
/// (`logminer.drain.max_clusters`), flooded with more of both: the services and templates
/// held stay under their bounds, the service mined least recently and the template used least
/// recently are forgotten (each counted exactly), and nothing mined is lost: every line has
/// its hit and every template born its row, also those forgotten before they were stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logminer_forgets_the_least_recent_services_and_templates_and_stores_every_row() {
    const SERVICES: usize = 20;
    const MAX_SERVICES: usize = 5;
    const MAX_CLUSTERS: usize = 3;
    // Templates no threshold can join: one per token count.
    const LINES: [&str; 6] = [
        "alpha",
        "bravo charlie",
        "delta echo foxtrot",
        "golf hotel india juliet",
        "kilo lima mike november oscar",
        "papa quebec romeo sierra tango uniform",
    ];
    let env = TestEnv::new("bounds_lm");
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    let store = env.migrated_store().await;
    let mut config = env.config.clone();
    config.logminer.drain.max_services = MAX_SERVICES;
    config.logminer.drain.max_clusters = MAX_CLUSTERS;
    let (shutdown, task, addr) = start_logminer(config).await;
    let peak = {
        let addr = addr.clone();
        Peak::watch(2, move || {
            let addr = addr.clone();
            async move {
                let text = common::scrape(&addr).await?;
                Some(vec![
                    common::metric(&text, "tayga_logminer_services"),
                    common::metric(&text, "tayga_logminer_templates"),
                ])
            }
        })
    };
    let now = tayga::store::now_ns();
    for n in 0..SERVICES {
        let lines: Vec<(u64, String)> = LINES.iter().map(|l| (now, l.to_string())).collect();
        crate::logminer::produce(&env.config, &format!("svc{n:02}"), &lines).await;
    }
    let total = (SERVICES * LINES.len()) as u64;
    let counts = || async {
        let (hits, templates): (u64, u64) = store
            .query_for_tests(
                "SELECT (SELECT count() FROM log_hits), (SELECT uniqExact(service, template_id) FROM log_templates FINAL)",
            )
            .fetch_one()
            .await
            .ok()?;
        (hits == total && templates == total).then_some(())
    };
    wait_for("every hit and every template's row stored", Duration::from_secs(60), counts).await;
    let services_evicted = (SERVICES - MAX_SERVICES) as f64;
    let templates_evicted = (SERVICES * (LINES.len() - MAX_CLUSTERS)) as f64;
    let counted = wait_for("the evictions counted", Duration::from_secs(20), || async {
        let text = common::scrape(&addr).await?;
        let got = (
            common::metric(&text, "tayga_logminer_evicted_services_total"),
            common::metric(&text, "tayga_logminer_evicted_templates_total"),
        );
        (got == (services_evicted, templates_evicted)).then_some(got)
    })
    .await;
    let (peak, samples) = peak.finish().await;
    eprintln!(
        "BOUNDS logminer: {SERVICES} services x {} templates, bounds {MAX_SERVICES} services x {MAX_CLUSTERS}: peak \
         services {}, peak templates {} ({samples} samples); evicted services, templates {counted:?}",
        LINES.len(),
        peak[0],
        peak[1]
    );
    assert!(samples > 10);
    assert!(peak[0] <= MAX_SERVICES as f64, "services held {} > {MAX_SERVICES}", peak[0]);
    assert!(peak[1] <= (MAX_SERVICES * MAX_CLUSTERS) as f64, "templates held {}", peak[1]);
    // The templates each service held last: its most recent three.
    let text = common::scrape(&addr).await.unwrap();
    assert_eq!(common::metric(&text, "tayga_logminer_services"), MAX_SERVICES as f64);
    assert_eq!(common::metric(&text, "tayga_logminer_templates"), (MAX_SERVICES * MAX_CLUSTERS) as f64);
    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(60), task).await.unwrap().unwrap().unwrap();
}

/// The logminer's hits not stored yet (`logminer.max_pending_hits`), flooded while its
/// ClickHouse is unreachable (through a link the test cuts; the shared server stays up):
/// the hits held never pass the bound by more than one record's lines, reading pauses once
/// (counted, `paused` 1) and the records wait in the topic (the group's lag grows, records
/// read stop), and once ClickHouse is back every line's hit is stored: nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logminer_pauses_reading_at_its_pending_hits_and_stores_every_hit_after_an_outage() {
    use tayga::bus::producer::{OutRecord, Publisher};
    use tayga::wire::record::{header_pairs, SignalKind};
    const BOUND: u64 = 200;
    const LINES: u64 = 10;
    const BEFORE: u64 = 5;
    const RECORDS: u64 = 100;
    let env = TestEnv::new("bounds_pending");
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    let store = env.migrated_store().await;
    let link = common::CuttableLink::start(&env.config.clickhouse.url).await;
    let mut config = env.config.clone();
    config.clickhouse.url = link.url();
    config.logminer.max_pending_hits = BOUND;
    let (shutdown, task, addr) = start_logminer(config).await;
    let read = {
        let addr = addr.clone();
        move |names: &'static [&'static str]| {
            let addr = addr.clone();
            async move {
                let text = common::scrape(&addr).await?;
                Some(names.iter().map(|n| common::metric(&text, n)).collect::<Vec<f64>>())
            }
        }
    };
    let publisher = Publisher::new(&env.config.kafka).unwrap();
    let topic = env.config.names().logs;
    let headers = header_pairs(SignalKind::Logs, tayga::store::now_ns());
    let now = tayga::store::now_ns();
    let records = |from: u64, count: u64| -> Vec<Vec<u8>> {
        (from..from + count)
            .map(|r| {
                let lines: Vec<(u64, String)> = (0..LINES)
                    .map(|l| (now + r * LINES + l, format!("flood request {} served", r * LINES + l)))
                    .collect();
                prost::Message::encode_to_vec(&crate::logminer::logs_request("flood", &lines))
            })
            .collect()
    };
    let publish = |values: Vec<Vec<u8>>| {
        let (publisher, topic, headers) = (&publisher, &topic, &headers);
        async move {
            // One record a call: the lag is asserted, and the test broker (Tansu) reported
            // a high watermark of 6 after 105 records sent in two calls.
            for v in &values {
                let out = vec![OutRecord { topic, key: "flood", value: v.as_slice().into(), headers }];
                publisher.publish_all(out).await.expect("the record is acknowledged");
            }
        }
    };
    let hits = || async {
        let (rows, ids): (u64, u64) =
            store.query_for_tests("SELECT count(), uniqExact(log_id) FROM log_hits FINAL").fetch_one().await.ok()?;
        Some((rows, ids))
    };

    // Through the link while it is up: stored and committed. The hits are visible before
    // the flush has stored the rest of its rows (templates) and committed, so the cut waits
    // for the commit too: a flush cut in between is stored again and its records read again,
    // which would add them to the lag asserted below.
    publish(records(0, BEFORE)).await;
    wait_for("the first lines stored", Duration::from_secs(60), || async {
        (hits().await? == (BEFORE * LINES, BEFORE * LINES)).then_some(())
    })
    .await;
    wait_for("the first records committed", Duration::from_secs(60), || async {
        let committed = common::committed(&env.config, tayga::bus::consume::Group::Logminer).await?;
        (committed.values().sum::<i64>() == BEFORE as i64).then_some(())
    })
    .await;
    let consumed_before = read(&["tayga_logminer_consumed_records_total"]).await.unwrap()[0];

    link.cut();
    let peak = {
        let read = read.clone();
        Peak::watch(1, move || read(&["tayga_logminer_pending_hits"]))
    };
    let started = Instant::now();
    publish(records(BEFORE, RECORDS)).await;
    let names = &["tayga_logminer_paused", "tayga_logminer_pauses_total", "tayga_logminer_store_errors_total"];
    let at_pause = wait_for("reading paused at the bound", Duration::from_secs(60), || async {
        let got = read(names).await?;
        (got[0] == 1.0 && got[1] == 1.0).then_some(got)
    })
    .await;
    // Three more failed flushes (a tick apart) later, reading has not moved.
    wait_for("three more failed flushes", Duration::from_secs(30), || async {
        (read(names).await?[2] >= at_pause[2] + 3.0).then_some(())
    })
    .await;
    let lag = wait_for("the group's lag: every record since the outage", Duration::from_secs(30), || async {
        let lag = read(&["tayga_logminer_lag_records"]).await?[0];
        (lag == RECORDS as f64).then_some(lag)
    })
    .await;
    let during =
        read(&["tayga_logminer_consumed_records_total", "tayga_logminer_pending_hits", "tayga_logminer_paused"])
            .await
            .unwrap();
    let read_during = during[0] - consumed_before;

    link.restore();
    wait_for("every hit stored after the outage", Duration::from_secs(90), || async {
        (hits().await? == ((BEFORE + RECORDS) * LINES, (BEFORE + RECORDS) * LINES)).then_some(())
    })
    .await;
    let after = wait_for("reading resumed, everything committed", Duration::from_secs(30), || async {
        let got = read(&[
            "tayga_logminer_paused",
            "tayga_logminer_lag_records",
            "tayga_logminer_pending_hits",
            "tayga_logminer_pauses_total",
        ])
        .await?;
        (got[0] == 0.0 && got[1] == 0.0 && got[2] == 0.0).then_some(got)
    })
    .await;
    let (peak, samples) = peak.finish().await;
    eprintln!(
        "BOUNDS logminer pending: {RECORDS} records x {LINES} lines during the outage, bound {BOUND} hits: peak pending \
         {} ({samples} samples), at the pause {} held and {read_during} records read, lag {lag} records; pauses {}; \
         {} hits stored after; {} s",
        peak[0],
        during[1],
        after[3],
        (BEFORE + RECORDS) * LINES,
        started.elapsed().as_secs()
    );
    assert!(samples > 10, "the gauge was sampled during the flood");
    assert!(
        peak[0] < (BOUND + LINES) as f64,
        "hits held {} >= the bound {BOUND} + one record's {LINES} lines",
        peak[0]
    );
    assert!(during[1] >= BOUND as f64 && during[2] == 1.0, "paused at the bound: {during:?}");
    assert!(
        read_during <= (BOUND / LINES) as f64 + 1.0,
        "{read_during} records read during the outage: reading did not pause at {BOUND} hits"
    );
    assert_eq!(after[3], 1.0, "one pause for the outage, counted once");
    shutdown.trigger();
    common::stopped_cleanly(task, Duration::from_secs(60), "the logminer").await;
}

/// The metric recorder's samples per scrape (`api.max_samples_per_scrape`), against a
/// replica exposing five times as many series: each tick stores `up` and the first samples
/// in the order exposed, and counts the rest per service; the next tick starts afresh (the
/// recorder keeps nothing across ticks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorder_stores_at_most_its_samples_per_scrape_and_counts_the_rest() {
    use tayga::daemon::api::recorder::resolve::SystemResolver;
    use tayga::daemon::api::recorder::{Recorder, RecorderMetrics, Target};
    const SERIES: usize = 5_000;
    const MAX: usize = 1_000;
    const TICKS: u64 = 3;
    let env = TestEnv::new("bounds_rec");
    let store = env.migrated_store().await;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let text: String = (0..SERIES).map(|i| format!("flood_series{{n=\"{i}\"}} {i}\n")).collect();
    let stop = common::fake_metrics(addr, text).await;
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = RecorderMetrics::register(&mut registry);
    let targets = vec![Target::Fixed { service: "writer".into(), addr: addr.to_string() }];
    let recorder = Recorder::new(store.clone(), targets, Arc::new(SystemResolver), metrics).with_max_samples(MAX);
    for tick in 1..=TICKS {
        let rows = recorder.scrape_all(tayga::store::now_ns() + tick).await;
        assert_eq!(rows.len(), MAX + 1, "tick {tick}: up and the first {MAX} samples");
        recorder.store_rows(&rows).await.unwrap();
    }
    stop.trigger();
    let mut exposed = String::new();
    prometheus_client::encoding::text::encode(&mut exposed, &registry).unwrap();
    let dropped = common::metric(&exposed, "tayga_api_dropped_samples_total");
    let (rows, ticks, highest): (u64, u64, f64) = store
        .query_for_tests(
            "SELECT count(), uniqExact(ts_ns), max(value) FROM pipeline_metrics WHERE metric = 'flood_series'",
        )
        .fetch_one()
        .await
        .unwrap();
    eprintln!(
        "BOUNDS recorder: {SERIES} series a scrape, bound {MAX}: {rows} rows over {ticks} ticks, dropped {dropped}"
    );
    assert_eq!((rows, ticks), (TICKS * MAX as u64, TICKS), "the bound held on every tick");
    assert_eq!(highest, (MAX - 1) as f64, "the first samples in the order exposed were kept");
    assert_eq!(dropped, (TICKS as usize * (SERIES - MAX)) as f64, "every sample dropped is counted");
    assert!(exposed.contains("tayga_api_dropped_samples_total{service=\"writer\"}"), "{exposed}");
}

/// Ingest's backlog (`ingest.backlog_max_bytes`), flooded with the broker down: the backlog
/// keeps the oldest direct writes up to its bound and no more; past it each record is
/// stored but not kept for the topics, and counted; every span of every request is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_backlog_keeps_the_oldest_to_its_bound_and_every_span_is_stored() {
    use crate::ingest::{post, span, start_ingest, traces, wait_until_using};
    use prost::Message as _;
    const REQUESTS: u32 = 60;
    const MAX_BYTES: u64 = 10_000;
    let mut env = TestEnv::new("bounds_backlog");
    // Nobody listens there: the broker is refused, and ingest writes directly.
    env.config.kafka.brokers = format!("127.0.0.1:{}", free_port());
    env.config.ingest.backlog_max_bytes = MAX_BYTES;
    let store = env.migrated_store().await;
    let (running, shutdown) = start_ingest(&mut env.config).await;
    wait_until_using(&running, "direct").await;
    let health_url = format!("http://{}/health", running.http_addr);
    let trace = |n: u32| {
        let mut id = [0x5au8; 16];
        id[12..].copy_from_slice(&n.to_be_bytes());
        id
    };
    let mut peak_bytes = 0u64;
    for n in 0..REQUESTS {
        let spans = (1..=3).map(|i| span(trace(n), u64::from(n) * 10 + i)).collect();
        let response =
            post(&running, "/v1/traces", "application/x-protobuf", traces("web", spans).encode_to_vec()).await;
        assert_eq!(response.status(), 200, "request {n} is stored, kept or not");
        let health: serde_json::Value = reqwest::get(&health_url).await.unwrap().json().await.unwrap();
        peak_bytes = peak_bytes.max(health["ingest"]["backlog"]["bytes"].as_u64().unwrap());
    }
    let stats = tayga::store::backlog::stats(&store).await.unwrap();
    let text = common::scrape(&running.http_addr.to_string()).await.unwrap();
    let overflow = common::metric(&text, "tayga_ingest_backlog_overflow_records_total");
    let spans: u64 = store.query_for_tests("SELECT count() FROM spans FINAL").fetch_one().await.unwrap();
    let kept: Vec<String> = store
        .query_for_tests("SELECT key FROM ingest_backlog ORDER BY created_ns, position")
        .fetch_all()
        .await
        .unwrap();
    eprintln!(
        "BOUNDS backlog: {REQUESTS} requests, bound {MAX_BYTES} bytes: kept {} records ({} bytes, peak {peak_bytes}), \
         overflow {overflow}, spans stored {spans}",
        stats.records, stats.bytes
    );
    assert!(stats.bytes <= MAX_BYTES && peak_bytes <= MAX_BYTES, "the bound held: {stats:?}, peak {peak_bytes}");
    assert!(stats.records > 0 && stats.records < u64::from(REQUESTS), "the flood passed the bound: {stats:?}");
    assert_eq!(stats.records as f64 + overflow, f64::from(REQUESTS), "every record not kept is counted");
    let oldest: Vec<String> = (0..stats.records as u32).map(|n| tayga::otlp::hex_id(&trace(n))).collect();
    assert_eq!(kept, oldest, "the oldest are kept, the newest are not");
    assert_eq!(spans, 3 * u64::from(REQUESTS), "every span is stored, kept for the topics or not");
    shutdown.trigger();
    running.wait().await.unwrap();
}

/// The notifier's per-target state (a breaker per configured target) and its deliveries in
/// memory (one record at a time), flooded with alerts while one of two targets is dead: at
/// most one delivery per target is ever in memory, the breakers are the configured ones,
/// the dead target's breaker opens (one attempt per alert after it), and every alert ends
/// delivered to the live target and failed at the dead one: nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifier_holds_one_delivery_per_target_and_every_alert_ends_at_both() {
    use crate::notifier_support::{alert, notifier_config, publish, row, Hook, Running};
    use tayga::daemon::notifier::metrics::DeliveryResult;
    use tayga::wire::alert::AlertKind;
    const ALERTS: u64 = 40;
    let env = TestEnv::new("bounds_notifier");
    let hook = Hook::always(200).await;
    let mut dead = hook.target("dead");
    dead.url = format!("http://127.0.0.1:{}/", free_port());
    let mut config = notifier_config(&env.config, vec![hook.target("live"), dead]);
    config.notifier.max_attempts = 2;
    let running = Running::start(&config).await;
    let store = env.migrated_store().await;
    let registry_text = Arc::new(std::sync::Mutex::new(String::new()));
    let alerts: Vec<_> = (0..ALERTS).map(|n| alert("bounds_notifier", n, AlertKind::NewTemplate)).collect();
    let sampled = {
        let running = Arc::new(running);
        let r = running.clone();
        let peak = Peak::watch(1, move || {
            let text = r.metrics_text();
            async move { Some(vec![common::metric(&text, "tayga_notifier_inflight_deliveries")]) }
        });
        publish(&config, &alerts.iter().collect::<Vec<_>>()).await;
        wait_for("every alert's end at both targets", Duration::from_secs(120), || async {
            let done = running.count("live", DeliveryResult::delivered) == ALERTS
                && running.count("dead", DeliveryResult::failed) == ALERTS;
            done.then_some(())
        })
        .await;
        *registry_text.lock().unwrap() = running.metrics_text();
        let (peak, samples) = peak.finish().await;
        Arc::into_inner(running).expect("the sampler let go").stop().await;
        (peak, samples)
    };
    let (peak, samples) = sampled;
    let text = registry_text.lock().unwrap().clone();
    let breakers: Vec<&str> = text.lines().filter(|l| l.starts_with("tayga_notifier_breaker_open{")).collect();
    let attempts_dead: f64 = text
        .lines()
        .filter(|l| l.starts_with("tayga_notifier_attempts_total{") && l.contains("target=\"dead\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    eprintln!(
        "BOUNDS notifier: {ALERTS} alerts, 2 targets (one dead): peak deliveries in memory {} ({samples} samples), \
         breakers {breakers:?}, attempts at the dead target {attempts_dead}, hook received {}",
        peak[0],
        hook.successes()
    );
    assert!(samples > 10);
    assert!(peak[0] <= 2.0, "deliveries in memory {} > targets", peak[0]);
    assert_eq!(breakers.len(), 2, "one breaker per configured target: {breakers:?}");
    assert!(text.contains("tayga_notifier_breaker_open{target=\"dead\"} 1"), "the dead target's breaker is open");
    assert_eq!(hook.successes() as u64, ALERTS, "each alert delivered once to the live target");
    assert_eq!(attempts_dead, (ALERTS + 1) as f64, "the first alert's ladder (2), then one attempt each: the breaker");
    for a in &alerts {
        assert_eq!(row(&store, a.alert_id, "live").await.map(|r| r.status), Some("delivered".to_string()));
        assert_eq!(row(&store, a.alert_id, "dead").await.map(|r| r.status), Some("failed".to_string()));
    }
}
