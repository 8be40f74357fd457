//! Ingest's producer (`bus::packed`) against the real broker: every record once, on the
//! partition librdkafka would have picked, with its headers; a frozen broker fails the call
//! within the delivery timeout, and the producer recovers once it thaws.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::message::{Headers, Message};
use tayga::bus::packed::metrics::ProducerMetrics;
use tayga::bus::packed::plan::partition_for;
use tayga::bus::packed::{PackedProducer, SendError};
use tayga::bus::producer::{OutRecord, DELIVERY_TIMEOUT};
use tayga::bus::topics::ensure_topics;

use crate::common::{free_port, metric, read_topic, OwnBroker, TestEnv};

fn records<'a>(topic: &'a str, keys: &'a [String], headers: &'a [(String, String)]) -> Vec<OutRecord<'a>> {
    keys.iter()
        .map(|k| OutRecord { topic, key: k, value: format!("value of {k}").into_bytes().into(), headers })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_written_once_each_on_librdkafkas_partition() {
    let env = TestEnv::new("packed_once");
    let names = env.config.names();
    ensure_topics(&env.config.kafka, &names).await.unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let producer =
        PackedProducer::new(&env.config.kafka, ProducerMetrics::register(&mut registry, "tayga_ingest")).unwrap();
    let headers = vec![("tayga-kind".to_string(), "traces".to_string()), ("tayga-ingest-ns".into(), "42".into())];

    // Eight callers at once, as ingest's clients are: their records share requests.
    let calls: Vec<Vec<String>> =
        (0..8).map(|c| (0..25).map(|i| format!("{:032x}", (c * 1000 + i) * 7919)).collect()).collect();
    let mut tasks = Vec::new();
    for keys in calls.clone() {
        let (producer, topic, headers) = (producer.clone(), names.signals.clone(), headers.clone());
        tasks.push(tokio::spawn(async move { producer.publish_all(records(&topic, &keys, &headers)).await }));
    }
    for task in tasks {
        task.await.unwrap().expect("every call is acknowledged");
    }
    // Logs on the other topic in the same producer.
    let service = ["checkout".to_string()];
    producer.publish_all(records(&names.logs, &service, &headers)).await.unwrap();

    let config = env.config.clone();
    let signals = names.signals.clone();
    let read = tokio::task::spawn_blocking(move || read_topic(&config, &signals, 12, 200)).await.unwrap();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for m in &read {
        let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
        assert_eq!(m.partition(), partition_for(key.as_bytes(), 12), "key {key} on librdkafka's partition");
        assert_eq!(m.payload().unwrap(), format!("value of {key}").as_bytes());
        let h = m.headers().expect("headers kept");
        let pairs: Vec<(String, String)> = h
            .iter()
            .map(|h| (h.key.to_string(), String::from_utf8(h.value.unwrap_or_default().to_vec()).unwrap()))
            .collect();
        assert_eq!(pairs, headers);
        *seen.entry(key).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = calls.concat().into_iter().map(|k| (k, 1)).collect();
    assert_eq!(seen, expected, "every record once");
    let config = env.config.clone();
    let logs = tokio::task::spawn_blocking(move || read_topic(&config, &names.logs, 12, 1)).await.unwrap();
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].partition(), partition_for(b"checkout", 12));

    // The point of this producer: a produce request carries several partitions' batches.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let (requests, batches) =
        (metric(&text, "tayga_ingest_produce_requests_total"), metric(&text, "tayga_ingest_produce_batches_total"));
    assert!(requests >= 1.0 && batches > requests, "{batches} batches in {requests} requests:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_broker_fails_the_call_in_time_and_the_producer_recovers_without_duplicates() {
    let mut env = TestEnv::new("packed_frozen");
    let broker = OwnBroker::start(free_port());
    env.config.kafka.brokers = broker.address();
    let names = env.config.names();
    ensure_topics(&env.config.kafka, &names).await.unwrap();
    let producer = PackedProducer::new(&env.config.kafka, Default::default()).unwrap();
    let keys: Vec<String> = (0..3).map(|i| format!("before-{i}")).collect();
    producer.publish_all(records(&names.signals, &keys, &[])).await.unwrap();

    broker.signal("STOP");
    let started = Instant::now();
    let frozen = ["during".to_string()];
    let error = producer.publish_all(records(&names.signals, &frozen, &[])).await.unwrap_err();
    assert!(matches!(error, SendError::Timeout { .. }), "{error}");
    assert!(!error.is_backpressure());
    let waited = started.elapsed();
    // Bounded by the delivery timeout, not by the broker (generous above it: a loaded machine).
    assert!(waited >= DELIVERY_TIMEOUT && waited < DELIVERY_TIMEOUT + Duration::from_secs(10), "waited {waited:?}");

    broker.signal("CONT");
    // The next call is written once the producer has given up on the frozen request and
    // started a new session; the caller's own deadline bounds each attempt.
    let after = ["after".to_string()];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut attempts = 1;
    while let Err(e) = producer.publish_all(records(&names.signals, &after, &[])).await {
        assert!(Instant::now() < deadline, "the producer did not recover: {e}");
        attempts += 1;
    }
    let config = env.config.clone();
    let signals = names.signals.clone();
    let read = tokio::task::spawn_blocking(move || read_topic(&config, &signals, 12, 4)).await.unwrap();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for m in &read {
        *seen.entry(String::from_utf8(m.key().unwrap().to_vec()).unwrap()).or_default() += 1;
    }
    for k in &keys {
        assert_eq!(seen.get(k), Some(&1), "{k} once: {seen:?}");
    }
    // Once per call the caller made (a call that timed out may still have been written).
    let written = seen.get("after").copied().unwrap_or(0);
    assert!((1..=attempts).contains(&written), "after: {written} copies from {attempts} calls");
    assert!(seen.get("during").copied().unwrap_or(0) <= 1, "the abandoned record at most once: {seen:?}");
    drop(broker);
}
