//! Publishing to Tayga's topics, with every send acknowledged by the broker before the
//! caller is told it succeeded: ingest acknowledges a client only after this.

use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

use super::client_config;
use crate::config::KafkaConfig;

/// How long one send may wait for its acknowledgement before it counts as failed. Short,
/// so a broker that dies mid-request is noticed in seconds and the request fails over.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[error("publishing to {topic} failed: {source}")]
pub struct PublishError {
    pub topic: String,
    pub source: KafkaError,
}

/// One record to send.
pub struct OutRecord<'a> {
    pub topic: &'a str,
    pub key: &'a str,
    pub value: Vec<u8>,
    pub headers: OwnedHeaders,
}

#[derive(Clone)]
pub struct Publisher {
    producer: FutureProducer,
}

impl Publisher {
    pub fn new(kafka: &KafkaConfig) -> Result<Publisher, KafkaError> {
        let producer = client_config(kafka)
            // Every in-sync replica acknowledges; retries cannot duplicate or reorder.
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("compression.type", "lz4")
            .set("linger.ms", "5")
            // Records are at most 900,000 bytes; leave room for headers and framing.
            .set("message.max.bytes", "1000000")
            .set("message.timeout.ms", DELIVERY_TIMEOUT.as_millis().to_string())
            .create()?;
        Ok(Publisher { producer })
    }

    /// Enqueues every record, then waits until each is acknowledged; the first failure is
    /// the result (records already acknowledged stay published: consumers deduplicate).
    pub async fn publish_all(&self, records: Vec<OutRecord<'_>>) -> Result<(), PublishError> {
        let mut pending = Vec::with_capacity(records.len());
        for r in &records {
            let record = FutureRecord::to(r.topic).key(r.key).payload(&r.value).headers(r.headers.clone());
            // send_result enqueues now, so all records travel together; awaiting the
            // delivery futures afterwards only collects the acknowledgements.
            let delivery = self
                .producer
                .send_result(record)
                .map_err(|(source, _)| PublishError { topic: r.topic.to_string(), source })?;
            pending.push((r.topic, delivery));
        }
        for (topic, delivery) in pending {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((source, _))) => return Err(PublishError { topic: topic.to_string(), source }),
                Err(_canceled) => return Err(PublishError { topic: topic.to_string(), source: KafkaError::Canceled }),
            }
        }
        Ok(())
    }

    /// Waits for queued records to be delivered (used at shutdown).
    pub fn flush(&self, timeout: Duration) {
        let _ = self.producer.flush(Timeout::After(timeout));
    }
}

/// Whether a broker answers a metadata request within `timeout` (the probe: no retries,
/// no publishing).
pub async fn broker_answers(kafka: &KafkaConfig, timeout: Duration) -> bool {
    let kafka = kafka.clone();
    tokio::task::spawn_blocking(move || {
        let Ok(consumer) = client_config(&kafka).create::<rdkafka::consumer::BaseConsumer>() else {
            return false;
        };
        use rdkafka::consumer::Consumer;
        consumer.fetch_metadata(None, timeout).is_ok()
    })
    .await
    .unwrap_or(false)
}
