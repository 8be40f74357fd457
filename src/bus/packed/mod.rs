//! Ingest's producer: every partition a broker leads travels in one produce request.
//!
//! librdkafka sends one partition per produce request
//! ([librdkafka#1700](https://github.com/confluentinc/librdkafka/issues/1700)). Ingest
//! publishes one record per trace id over 12 partitions (docs/design.md#topics), so a request of ten
//! traces touched ten partitions and cost a produce request, an lz4 frame, a response and a
//! wake-up each: most of ingest's CPU went there (docs/ingest.md). This producer keeps, per
//! broker, one request in flight; what arrives meanwhile waits, and the next request carries
//! every partition's waiting records, one record batch per partition.
//!
//! It keeps the guarantees ingest had: `acks=all`; idempotence (one session from
//! `InitProducerId`, a sequence per partition, at most one batch per partition out, and a
//! batch retried byte for byte, so the broker drops a retry it already wrote); the call
//! answered only once the broker acknowledged every record of it, or failed after
//! [`DELIVERY_TIMEOUT`]; a bounded queue whose fullness is backpressure, not an outage; and
//! librdkafka's partitioner, so no key moves.
//!
//! Layout: `plan.rs` is pure (partitioner, batches, what an answer means), `conn.rs` one
//! broker connection, this file the handle and the task that owns the state.

pub(in crate::bus) mod conn;
pub mod metrics;
pub mod plan;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, MetadataRequest, ProduceRequest, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Record;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use self::conn::{Conn, ConnError};
use self::metrics::ProducerMetrics;
use self::plan::{Batch, Outcome, PartitionQueue, Pending, Session, REQUEST_MAX_BYTES};
use super::producer::{OutRecord, DELIVERY_TIMEOUT, QUEUE_MAX_KBYTES, QUEUE_WAIT};
use super::security::Security;
use crate::config::KafkaConfig;

/// How long the producer waits before trying a broker again after a failure (as
/// librdkafka's `reconnect.backoff.max.ms` in `bus::client_config`).
const BACKOFF: Duration = Duration::from_millis(200);

/// How long a metadata or session request may take before the broker counts as silent.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// What a queued record holds besides its bytes (the record, its headers' map, the queue
/// entry), counted against the queue's room so that many small records are bounded too.
const RECORD_OVERHEAD_BYTES: usize = 320;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The queue stayed full for [`QUEUE_WAIT`]: the broker may be fine, ingest is busy.
    #[error("the producer's queue stayed full for {QUEUE_WAIT:?}")]
    QueueFull,
    #[error("the broker did not acknowledge within {DELIVERY_TIMEOUT:?}{}", last.as_deref().map(|p| format!(" (last problem: {p})")).unwrap_or_default())]
    Timeout { last: Option<String> },
    #[error("the broker refused records for {topic}: {error}")]
    Refused { topic: String, error: ResponseError },
    #[error("the producer's task stopped")]
    Stopped,
}

impl SendError {
    /// Load, not an outage: the caller refuses the request and keeps the path.
    pub fn is_backpressure(&self) -> bool {
        matches!(self, SendError::QueueFull)
    }
}

/// The handle: cheap to clone; the task ends when the last handle is dropped.
#[derive(Clone)]
pub struct PackedProducer {
    calls: mpsc::UnboundedSender<Call>,
    room: Arc<Semaphore>,
    last_problem: Arc<Mutex<Option<String>>>,
}

/// One `publish_all`: its records, and where to say how it went.
struct Call {
    topics: Vec<String>,
    records: Vec<(usize, Record)>,
    done: oneshot::Sender<Result<(), SendError>>,
    room: OwnedSemaphorePermit,
}

impl PackedProducer {
    /// Starts the producer's task, which opens its session at once (the first call then
    /// waits only for its own request); it reports through `metrics`. The error is the
    /// configuration's problem line when `[kafka]`'s security settings cannot be used.
    pub fn new(kafka: &KafkaConfig, metrics: ProducerMetrics) -> Result<PackedProducer, String> {
        let security = Security::new(kafka)?;
        let (calls, incoming) = mpsc::unbounded_channel();
        let last_problem = Arc::new(Mutex::new(None));
        let bootstrap = super::probe::bootstrap(kafka).map(str::to_string).collect();
        let task = Sender::new(incoming, bootstrap, security, last_problem.clone(), metrics);
        tokio::spawn(task.run());
        Ok(PackedProducer { calls, room: Arc::new(Semaphore::new(QUEUE_MAX_KBYTES as usize)), last_problem })
    }

    /// Sends every record and waits until the broker acknowledged each; the first failure is
    /// the result (records already acknowledged stay published: consumers deduplicate).
    pub async fn publish_all(&self, records: Vec<OutRecord<'_>>) -> Result<(), SendError> {
        if records.is_empty() {
            return Ok(());
        }
        let bytes: usize = records
            .iter()
            .map(|r| {
                let headers: usize = r.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
                r.value.len() + r.key.len() + headers + RECORD_OVERHEAD_BYTES
            })
            .sum();
        let kib = (bytes / 1024 + 1).min(QUEUE_MAX_KBYTES as usize) as u32;
        let room = match self.room.clone().try_acquire_many_owned(kib) {
            Ok(room) => room,
            Err(_) => tokio::time::timeout(QUEUE_WAIT, self.room.clone().acquire_many_owned(kib))
                .await
                .map_err(|_| SendError::QueueFull)?
                .map_err(|_| SendError::Stopped)?,
        };
        let (done, answered) = oneshot::channel();
        self.calls.send(call(records, room, done)).map_err(|_| SendError::Stopped)?;
        match tokio::time::timeout(DELIVERY_TIMEOUT, answered).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(SendError::Stopped),
            Err(_) => {
                Err(SendError::Timeout { last: self.last_problem.lock().unwrap_or_else(|e| e.into_inner()).clone() })
            }
        }
    }
}

/// The records of a call as the broker will store them (the value copied once, as
/// librdkafka did; creation time now).
fn call(records: Vec<OutRecord<'_>>, room: OwnedSemaphorePermit, done: oneshot::Sender<Result<(), SendError>>) -> Call {
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let mut topics: Vec<String> = Vec::new();
    // Records of a call usually share one header slice: its map is built once and cloned.
    let mut shared: Option<(*const [(String, String)], HeaderMap)> = None;
    let records = records
        .into_iter()
        .map(|r| {
            let topic = topics.iter().position(|t| t == r.topic).unwrap_or_else(|| {
                topics.push(r.topic.to_string());
                topics.len() - 1
            });
            let headers = match &shared {
                Some((slice, map)) if std::ptr::eq(*slice, r.headers) => map.clone(),
                _ => {
                    let map: IndexMap<_, _> = r
                        .headers
                        .iter()
                        .map(|(k, v)| (StrBytes::from_string(k.clone()), Some(Bytes::copy_from_slice(v.as_bytes()))))
                        .collect();
                    shared = Some((r.headers as *const _, map.clone()));
                    map
                }
            };
            let value = match r.value {
                std::borrow::Cow::Borrowed(v) => Bytes::copy_from_slice(v),
                std::borrow::Cow::Owned(v) => Bytes::from(v),
            };
            (topic, plan::record(Bytes::copy_from_slice(r.key.as_bytes()), value, headers, timestamp))
        })
        .collect();
    Call { topics, records, done, room }
}

type HeaderMap = IndexMap<StrBytes, Option<Bytes>>;

/// A call the task still owes an answer.
struct Waiting {
    remaining: usize,
    done: oneshot::Sender<Result<(), SendError>>,
    _room: OwnedSemaphorePermit,
}

struct Topic {
    partitions: Vec<PartitionQueue>,
    /// The leader of each partition (-1: none known).
    leaders: Vec<i32>,
}

#[derive(Default)]
struct Broker {
    addr: String,
    conn: Option<Conn>,
    busy: bool,
    not_before: Option<Instant>,
}

/// What came back from one produce request.
struct Exchange {
    broker: i32,
    addr: String,
    conn: Option<Conn>,
    sent: Vec<(String, i32, Batch)>,
    answer: Result<kafka_protocol::messages::ProduceResponse, ConnError>,
}

type InFlight = FuturesUnordered<std::pin::Pin<Box<dyn std::future::Future<Output = Exchange> + Send>>>;

/// The task: it owns every queue, connection and sequence, so nothing is locked.
struct Sender {
    incoming: mpsc::UnboundedReceiver<Call>,
    bootstrap: Vec<String>,
    security: Security,
    calls: HashMap<u64, Waiting>,
    next_call: u64,
    topics: HashMap<String, Topic>,
    /// Records whose topic's partitions are not known yet.
    unrouted: Vec<(String, Pending)>,
    brokers: HashMap<i32, Broker>,
    /// For metadata and sessions, apart from the produce connections.
    control: Option<Conn>,
    session: Option<Session>,
    new_session: bool,
    metadata_stale: bool,
    control_not_before: Option<Instant>,
    in_flight: InFlight,
    last_problem: Arc<Mutex<Option<String>>>,
    metrics: ProducerMetrics,
}

impl Sender {
    fn new(
        incoming: mpsc::UnboundedReceiver<Call>,
        bootstrap: Vec<String>,
        security: Security,
        last_problem: Arc<Mutex<Option<String>>>,
        metrics: ProducerMetrics,
    ) -> Sender {
        Sender {
            incoming,
            bootstrap,
            security,
            calls: HashMap::new(),
            next_call: 0,
            topics: HashMap::new(),
            unrouted: Vec::new(),
            brokers: HashMap::new(),
            control: None,
            session: None,
            new_session: true,
            metadata_stale: true,
            control_not_before: None,
            in_flight: FuturesUnordered::new(),
            last_problem,
            metrics,
        }
    }

    async fn run(mut self) {
        loop {
            self.forget_abandoned_calls();
            self.prepare().await;
            self.dispatch();
            let wake = self.next_wake();
            tokio::select! {
                call = self.incoming.recv() => match call {
                    Some(call) => self.accept(call),
                    // Every handle is gone, so nobody waits for an answer.
                    None => return,
                },
                Some(exchange) = self.in_flight.next(), if !self.in_flight.is_empty() => self.answered(exchange),
                _ = sleep_until(wake) => {}
            }
            // Whatever else arrived meanwhile joins the same requests.
            while let Ok(call) = self.incoming.try_recv() {
                self.accept(call);
            }
        }
    }

    fn accept(&mut self, call: Call) {
        let id = self.next_call;
        self.next_call += 1;
        let Call { topics, records, done, room } = call;
        self.calls.insert(id, Waiting { remaining: records.len(), done, _room: room });
        for (topic, record) in records {
            let pending = Pending::new(id, record);
            let name = &topics[topic];
            match self.topics.get_mut(name.as_str()) {
                Some(t) => route(t, pending),
                None => {
                    self.unrouted.push((name.clone(), pending));
                    self.metadata_stale = true;
                }
            }
        }
    }

    /// A caller that stopped waiting (its delivery timeout passed) is owed nothing: its
    /// records still queued are skipped when the next batch is made.
    fn forget_abandoned_calls(&mut self) {
        let before = self.calls.len();
        self.calls.retain(|_, w| !w.done.is_closed());
        if self.calls.len() == before {
            return;
        }
        let calls = &self.calls;
        self.unrouted.retain(|(_, p)| calls.contains_key(&p.call));
        for topic in self.topics.values_mut() {
            for queue in &mut topic.partitions {
                queue.waiting.retain(|p| calls.contains_key(&p.call));
            }
        }
    }

    fn has_work(&self) -> bool {
        self.topics.values().any(|t| t.partitions.iter().any(PartitionQueue::has_work))
    }

    /// Sessions and metadata, on the control connection, when due; bounded as a whole by
    /// [`CONTROL_TIMEOUT`], since no produce answer is read meanwhile.
    async fn prepare(&mut self) {
        match self.control_not_before {
            Some(t) if Instant::now() < t => return,
            Some(_) => self.control_not_before = None,
            None => {}
        }
        let session_due = self.new_session && self.in_flight.is_empty();
        let metadata_due = (self.metadata_stale && self.has_work()) || !self.unrouted.is_empty();
        if !session_due && !metadata_due {
            return;
        }
        let steps = async {
            if session_due {
                self.start_session().await?;
            }
            if metadata_due {
                self.refresh_metadata().await?;
            }
            Ok::<(), String>(())
        };
        let result = tokio::time::timeout(CONTROL_TIMEOUT, steps).await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.control_failed(e),
            Err(_) => self.control_failed(format!(
                "the broker did not answer a metadata or session request within {CONTROL_TIMEOUT:?}"
            )),
        }
    }

    fn control_failed(&mut self, problem: String) {
        self.control = None;
        self.control_not_before = Some(Instant::now() + BACKOFF);
        self.problem(problem);
    }

    fn problem(&self, problem: String) {
        let mut last = self.last_problem.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_deref() != Some(problem.as_str()) {
            tracing::warn!(problem = %problem, "ingest's producer: {problem}");
        }
        *last = Some(problem);
    }

    async fn control_conn(&mut self) -> Result<&mut Conn, String> {
        if self.control.is_none() {
            let mut candidates = self.bootstrap.clone();
            for b in self.brokers.values() {
                if !candidates.contains(&b.addr) {
                    candidates.push(b.addr.clone());
                }
            }
            let mut errors = Vec::new();
            for addr in candidates {
                match Conn::open(&addr, &self.security).await {
                    Ok(conn) => {
                        self.control = Some(conn);
                        break;
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if self.control.is_none() {
                return Err(if errors.is_empty() {
                    "no broker address is configured".into()
                } else {
                    errors.join("; ")
                });
            }
        }
        Ok(self.control.as_mut().expect("opened above"))
    }

    /// A new idempotent session: every partition starts again at sequence 0.
    async fn start_session(&mut self) -> Result<(), String> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let conn = self.control_conn().await?;
        let answer = conn.init_producer_id(&request, CONTROL_TIMEOUT).await.map_err(|e| e.to_string())?;
        if let Some(error) = ResponseError::try_from_code(answer.error_code) {
            return Err(format!("the broker refused a producer id: {error}"));
        }
        let session = Session { producer_id: answer.producer_id.0, producer_epoch: answer.producer_epoch };
        self.metrics.session_started(session.producer_id, self.session.is_none());
        self.session = Some(session);
        self.new_session = false;
        for topic in self.topics.values_mut() {
            topic.partitions.iter_mut().for_each(PartitionQueue::restart);
        }
        Ok(())
    }

    async fn refresh_metadata(&mut self) -> Result<(), String> {
        let mut names: Vec<String> = self.topics.keys().cloned().collect();
        for (name, _) in &self.unrouted {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        let request = MetadataRequest::default().with_allow_auto_topic_creation(false).with_topics(Some(
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(n.clone())))))
                .collect(),
        ));
        let conn = self.control_conn().await?;
        let answer = conn.metadata(&request, CONTROL_TIMEOUT).await.map_err(|e| e.to_string())?;
        let plan::Layout { brokers, topics, missing } = plan::layout(&answer);
        for (id, addr) in brokers {
            let broker = self.brokers.entry(id).or_default();
            if broker.addr != addr {
                // A request out to the old address comes back to it; its connection is
                // then dropped (`answered`).
                broker.addr = addr;
                broker.conn = None;
            }
        }
        for plan::TopicLayout { name, leaders } in topics {
            let topic =
                self.topics.entry(name).or_insert_with(|| Topic { partitions: Vec::new(), leaders: Vec::new() });
            if topic.partitions.len() < leaders.len() {
                topic.partitions.resize_with(leaders.len(), PartitionQueue::default);
            }
            topic.leaders = vec![-1; topic.partitions.len()];
            for (i, leader) in leaders.into_iter().enumerate() {
                topic.leaders[i] = if self.brokers.contains_key(&leader) { leader } else { -1 };
            }
        }
        for (name, pending) in std::mem::take(&mut self.unrouted) {
            match self.topics.get_mut(&name) {
                Some(t) => route(t, pending),
                None => self.unrouted.push((name, pending)),
            }
        }
        let leaderless = self.topics.values().any(|t| t.leaders.contains(&-1));
        self.metadata_stale = leaderless || !missing.is_empty();
        if self.metadata_stale {
            self.control_not_before = Some(Instant::now() + BACKOFF);
            if !missing.is_empty() {
                self.problem(format!("no partitions known for {}", missing.join(", ")));
            }
        }
        Ok(())
    }

    /// Sends a request to every idle broker that leads a partition with records waiting.
    fn dispatch(&mut self) {
        let Some(session) = self.session.filter(|_| !self.new_session) else { return };
        let now = Instant::now();
        let calls = &self.calls;
        let live = |call: u64| calls.contains_key(&call);
        for (&id, broker) in self.brokers.iter_mut() {
            if broker.not_before.is_some_and(|t| t <= now) {
                broker.not_before = None;
            }
            if broker.busy || broker.not_before.is_some() {
                continue;
            }
            let mut sent = Vec::new();
            let mut bytes = 0;
            'topics: for (name, topic) in self.topics.iter_mut() {
                for (partition, queue) in topic.partitions.iter_mut().enumerate() {
                    if topic.leaders[partition] != id || !queue.has_work() {
                        continue;
                    }
                    if bytes >= REQUEST_MAX_BYTES {
                        break 'topics;
                    }
                    // A retry goes out even when none of its callers waits any more: it
                    // keeps the partition's sequences unbroken.
                    let Some(batch) = queue.next_batch(session, live) else { continue };
                    queue.in_flight = true;
                    bytes += batch.size;
                    sent.push((name.clone(), partition as i32, batch));
                }
            }
            if sent.is_empty() {
                continue;
            }
            broker.busy = true;
            self.metrics.sent(sent.len());
            let request = produce_request(&sent);
            let (conn, addr, security) = (broker.conn.take(), broker.addr.clone(), self.security.clone());
            self.in_flight.push(Box::pin(async move {
                let mut conn = match conn {
                    Some(conn) => conn,
                    None => match Conn::open(&addr, &security).await {
                        Ok(conn) => conn,
                        Err(e) => return Exchange { broker: id, addr, conn: None, sent, answer: Err(e) },
                    },
                };
                let answer = conn.produce(&request, DELIVERY_TIMEOUT + CONTROL_TIMEOUT).await;
                Exchange { broker: id, addr, conn: answer.is_ok().then_some(conn), sent, answer }
            }));
        }
    }

    fn answered(&mut self, exchange: Exchange) {
        let Exchange { broker: id, addr, conn, sent, answer } = exchange;
        let failed_conn = answer.is_err();
        {
            let broker = self.brokers.entry(id).or_default();
            broker.busy = false;
            broker.conn = conn.filter(|_| broker.addr == addr);
            if failed_conn {
                broker.not_before = Some(Instant::now() + BACKOFF);
            }
        }
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                // Written or not, nobody knows: the same batches go again, and the broker
                // drops any it already has.
                self.metadata_stale = true;
                self.metrics.will_retry("connection", sent.len());
                for (topic, partition, batch) in sent {
                    let queue = self.queue(&topic, partition);
                    queue.in_flight = false;
                    queue.retry = Some(batch);
                }
                self.problem(e.to_string());
                return;
            }
        };
        let codes = plan::ProduceAnswer::of(&answer);
        let mut retry_reason = None;
        let mut retried = 0;
        let mut failed = Vec::new();
        let mut written = Vec::new();
        for (topic, partition, batch) in sent {
            let (code, outcome) = codes.outcome(&topic, partition);
            let queue = self.queue(&topic, partition);
            queue.in_flight = false;
            match outcome {
                Outcome::Written => {
                    queue.acknowledged(&batch);
                    written.extend(batch.calls());
                }
                Outcome::Retry { refresh } => {
                    retried += 1;
                    queue.retry = Some(batch);
                    self.metadata_stale |= refresh;
                    let error = code.and_then(ResponseError::try_from_code);
                    let error = error.map_or_else(|| "left out of the answer".to_string(), |e| e.to_string());
                    retry_reason = Some(format!("{topic}[{partition}]: {error}"));
                }
                Outcome::NewSession(error) => {
                    // Not written: the records go again under the next session.
                    retried += 1;
                    queue.retry = Some(batch);
                    self.new_session = true;
                    retry_reason = Some(format!("{topic}[{partition}]: {error}"));
                }
                Outcome::Refused(error) => failed.push((topic, error, batch.calls().collect::<Vec<_>>())),
            }
        }
        if let Some(reason) = retry_reason {
            self.metrics.will_retry("broker", retried);
            self.brokers.entry(id).or_default().not_before = Some(Instant::now() + BACKOFF);
            self.problem(format!("{addr} did not write {reason}; retrying"));
        } else if failed.is_empty() {
            *self.last_problem.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        for call in written {
            self.written(call);
        }
        for (topic, error, calls) in failed {
            self.problem(format!("the broker refused records for {topic}: {error}"));
            for call in calls {
                if let Some(w) = self.calls.remove(&call) {
                    let _ = w.done.send(Err(SendError::Refused { topic: topic.clone(), error }));
                }
            }
        }
    }

    fn written(&mut self, call: u64) {
        let Some(waiting) = self.calls.get_mut(&call) else { return };
        waiting.remaining -= 1;
        if waiting.remaining == 0 {
            let waiting = self.calls.remove(&call).expect("present above");
            let _ = waiting.done.send(Ok(()));
        }
    }

    fn queue(&mut self, topic: &str, partition: i32) -> &mut PartitionQueue {
        let topic = self.topics.get_mut(topic).expect("a batch is only made for a known topic");
        &mut topic.partitions[partition as usize]
    }

    /// The next moment a back-off ends while something waits for it.
    fn next_wake(&self) -> Option<Instant> {
        let waiting = self.has_work() || !self.unrouted.is_empty();
        let brokers = self.brokers.values().filter_map(|b| b.not_before);
        // A time already past wakes the loop at once; `dispatch` and `prepare` clear it.
        brokers.chain(self.control_not_before).filter(|_| waiting).min()
    }
}

fn route(topic: &mut Topic, pending: Pending) {
    let key = pending.record.key.as_deref().unwrap_or_default();
    let partition = plan::partition_for(key, topic.partitions.len() as i32) as usize;
    topic.partitions[partition].waiting.push_back(pending);
}

fn produce_request(sent: &[(String, i32, Batch)]) -> ProduceRequest {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for (topic, partition, batch) in sent {
        let data = PartitionProduceData::default().with_index(*partition).with_records(Some(batch.encoded.clone()));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partition_data.push(data),
            None => topics.push(
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_data(vec![data]),
            ),
        }
    }
    ProduceRequest::default().with_acks(-1).with_timeout_ms(DELIVERY_TIMEOUT.as_millis() as i32).with_topic_data(topics)
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
