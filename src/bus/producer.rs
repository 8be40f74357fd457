//! Publishing to Tayga's topics, with every send acknowledged by the broker before the
//! caller is told it succeeded: ingest acknowledges a client only after this.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::util::Timeout;
use tokio::sync::oneshot;

use super::client_config;
use crate::config::KafkaConfig;

/// How long one send may wait for its acknowledgement before it counts as failed. Short,
/// so a broker that dies mid-request is noticed in seconds and the request fails over.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a send waits for room in the producer's local queue. A full queue is load, not
/// a dead broker: past this the send fails as backpressure ([`PublishError::is_backpressure`]).
pub const QUEUE_WAIT: Duration = Duration::from_secs(5);

/// The producer's local queue, in KiB of record values (librdkafka copies each value in):
/// it bounds the memory records wait in, far below librdkafka's 1 GiB default.
pub const QUEUE_MAX_KBYTES: u32 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
#[error("publishing to {topic} failed: {source}")]
pub struct PublishError {
    pub topic: String,
    pub source: KafkaError,
}

impl PublishError {
    /// The local queue stayed full for [`QUEUE_WAIT`]: the broker may be fine, ingest is busy.
    pub fn is_backpressure(&self) -> bool {
        matches!(self.source, KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull))
    }
}

/// One record to send. The value is borrowed where the caller keeps it anyway (ingest's
/// split records), so it is copied once, by librdkafka.
pub struct OutRecord<'a> {
    pub topic: &'a str,
    pub key: &'a str,
    pub value: std::borrow::Cow<'a, [u8]>,
    /// (key, value) pairs, usually shared by every record of a call.
    pub headers: &'a [(String, String)],
}

/// An acknowledged producer that survives its own fatal errors: an idempotent producer
/// whose in-flight record timed out can be fenced by the broker (seen on Tansu after a
/// frozen broker came back), after which every send fails. The producer is then replaced
/// by a fresh one, so the next send works once the broker does.
#[derive(Clone)]
pub struct Publisher {
    kafka: KafkaConfig,
    /// (generation, producer): the generation makes a replacement happen once even when
    /// several sends saw the same fatal error.
    producer: Arc<RwLock<(u64, Arc<AckedProducer>)>>,
}

type AckedProducer = ThreadedProducer<AckContext>;

/// The acknowledgements one `publish_all` call waits for. The caller is woken once, by the
/// last acknowledgement or the first failure, not once per record: ingest sends one record
/// per trace id, and a wake-up per record cost more CPU than the records' own bytes.
struct Acks {
    remaining: AtomicUsize,
    done: Mutex<Option<oneshot::Sender<Result<(), PublishError>>>>,
}

impl Acks {
    fn finish(&self, result: Result<(), PublishError>) {
        if let Some(done) = self.done.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = done.send(result);
        }
    }
}

/// Routes each delivery report to the [`Acks`] of the call that sent the record.
struct AckContext;

impl ClientContext for AckContext {}

impl ProducerContext for AckContext {
    type DeliveryOpaque = Arc<Acks>;

    fn delivery(&self, result: &DeliveryResult<'_>, acks: Arc<Acks>) {
        match result {
            Ok(_) => {
                if acks.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    acks.finish(Ok(()));
                }
            }
            Err((source, message)) => {
                acks.finish(Err(PublishError { topic: message.topic().to_string(), source: source.clone() }))
            }
        }
    }
}

fn create(kafka: &KafkaConfig) -> Result<AckedProducer, KafkaError> {
    client_config(kafka)
        // Every in-sync replica acknowledges; retries cannot duplicate or reorder.
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("compression.type", "lz4")
        .set("linger.ms", "5")
        // Records are at most 900,000 bytes; leave room for headers and framing.
        .set("message.max.bytes", "1000000")
        .set("message.timeout.ms", DELIVERY_TIMEOUT.as_millis().to_string())
        .set("queue.buffering.max.kbytes", QUEUE_MAX_KBYTES.to_string())
        .create_with_context(AckContext)
}

impl Publisher {
    pub fn new(kafka: &KafkaConfig) -> Result<Publisher, KafkaError> {
        Ok(Publisher { kafka: kafka.clone(), producer: Arc::new(RwLock::new((0, Arc::new(create(kafka)?)))) })
    }

    fn current(&self) -> (u64, Arc<AckedProducer>) {
        self.producer.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces producer `generation` after a fatal error. The old one is dropped on a
    /// blocking thread: librdkafka's destructor waits for its queues.
    fn replace(&self, generation: u64, failed: Arc<AckedProducer>, error: &KafkaError) {
        let fenced = matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::InvalidProducerEpoch)
        );
        let Some((code, reason)) =
            failed.client().fatal_error().or(fenced.then(|| (RDKafkaErrorCode::ProducerFenced, error.to_string())))
        else {
            drop_off_runtime(failed);
            return;
        };
        let mut guard = self.producer.write().unwrap_or_else(|e| e.into_inner());
        if guard.0 == generation {
            match create(&self.kafka) {
                Ok(fresh) => {
                    tracing::warn!(code = ?code, reason = %reason, "the Kafka producer hit a fatal error; replaced it with a new one");
                    let old = std::mem::replace(&mut *guard, (generation + 1, Arc::new(fresh)));
                    drop(guard);
                    drop_off_runtime(old.1);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the Kafka producer hit a fatal error and a new one could not be created")
                }
            }
        }
        drop_off_runtime(failed);
    }

    /// Enqueues every record, then waits until each is acknowledged; the first failure is
    /// the result (records already acknowledged stay published: consumers deduplicate).
    pub async fn publish_all(&self, records: Vec<OutRecord<'_>>) -> Result<(), PublishError> {
        let (generation, producer) = self.current();
        let result = send_all(&producer, records).await;
        if let Err(e) = &result {
            self.replace(generation, producer, &e.source);
        }
        result
    }

    /// Waits for queued records to be delivered (used at shutdown).
    pub fn flush(&self, timeout: Duration) {
        let _ = self.current().1.flush(Timeout::After(timeout));
    }
}

fn drop_off_runtime(producer: Arc<AckedProducer>) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(move || drop(producer));
        }
        Err(_) => drop(producer),
    }
}

async fn send_all(producer: &AckedProducer, records: Vec<OutRecord<'_>>) -> Result<(), PublishError> {
    if records.is_empty() {
        return Ok(());
    }
    let (done, acknowledged) = oneshot::channel();
    let acks = Arc::new(Acks { remaining: AtomicUsize::new(records.len()), done: Mutex::new(Some(done)) });
    for r in &records {
        let mut full_since: Option<Instant> = None;
        let mut record = BaseRecord::with_opaque_to(r.topic, acks.clone()).key(r.key).payload(&*r.value);
        if !r.headers.is_empty() {
            record = record.headers(crate::wire::record::owned_headers(r.headers));
        }
        // Enqueued now, so all records travel together; the acknowledgements are awaited
        // afterwards, all at once.
        while let Err((source, returned)) = producer.send(record) {
            // Room comes back as the broker acknowledges what is queued.
            if !matches!(source, KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull))
                || full_since.get_or_insert_with(Instant::now).elapsed() >= QUEUE_WAIT
            {
                return Err(PublishError { topic: r.topic.to_string(), source });
            }
            record = returned;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    drop(acks);
    acknowledged.await.unwrap_or_else(|_canceled| {
        Err(PublishError { topic: records[0].topic.to_string(), source: KafkaError::Canceled })
    })
}
