//! The pure part of the packed producer: which partition a key goes to, how queued records
//! become one record batch per partition, and what a partition's answer means. No I/O.

use std::collections::{HashMap, VecDeque};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, MetadataResponse, ProduceResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

/// Most bytes of records (keys, values, headers, before compression) one partition's batch
/// holds: a record is at most 900,000 bytes (docs/design.md#topics), and brokers refuse batches past
/// about 1 MiB (Kafka's `message.max.bytes`, Redpanda's `kafka_batch_max_bytes`).
pub const BATCH_MAX_BYTES: usize = 1_000_000;

/// Most bytes of records one produce request carries over all its partitions; what is left
/// goes in the next request to that broker.
pub const REQUEST_MAX_BYTES: usize = 16 * BATCH_MAX_BYTES;

/// The partition of `key` among `partitions`, as librdkafka's default partitioner
/// (`consistent_random`) picks it: CRC-32 of the key modulo the count. Ingest used
/// librdkafka before this producer, so every key stays on the partition it was on, and a
/// service's logs never move to another logminer replica on upgrade. (An empty key, which
/// librdkafka spreads at random, goes to partition 0: one key, one partition, always.)
pub fn partition_for(key: &[u8], partitions: i32) -> i32 {
    debug_assert!(partitions > 0);
    (crc32fast::hash(key) % partitions.max(1) as u32) as i32
}

/// A record as a producer (not a transaction, not a control record) hands it over; the
/// producer id, sequence and offset are set when its batch is encoded.
pub fn record(key: Bytes, value: Bytes, headers: IndexMap<StrBytes, Option<Bytes>>, timestamp_ms: i64) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: timestamp_ms,
        key: Some(key),
        value: Some(value),
        headers,
    }
}

/// One record waiting for its partition's next batch, and the call it belongs to.
#[derive(Debug, Clone)]
pub struct Pending {
    pub call: u64,
    pub record: Record,
    /// Bytes it adds to a batch before compression (key, value, headers).
    pub size: usize,
}

impl Pending {
    pub fn new(call: u64, record: Record) -> Pending {
        let headers: usize = record.headers.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len())).sum();
        let size = record.key.as_ref().map_or(0, |k| k.len()) + record.value.as_ref().map_or(0, |v| v.len()) + headers;
        Pending { call, record, size }
    }
}

/// The producer identity batches are written under (idempotence: the broker drops a batch
/// whose sequence it already has, so a retry never duplicates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// One partition's records, encoded once and sent as they are until the broker answers for
/// them: a retry repeats the same sequence numbers, so the broker can tell it is a retry.
#[derive(Debug, Clone)]
pub struct Batch {
    pub base_sequence: i32,
    pub encoded: Bytes,
    /// The records themselves, kept to be re-encoded if the session must change.
    pub records: Vec<Pending>,
    pub size: usize,
}

impl Batch {
    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    /// The calls its records belong to, one entry per record.
    pub fn calls(&self) -> impl Iterator<Item = u64> + '_ {
        self.records.iter().map(|p| p.call)
    }
}

/// The sequence after `records` records from `sequence`: Kafka's sequences wrap from
/// `i32::MAX` to 0, never into the negatives.
pub fn next_sequence(sequence: i32, records: usize) -> i32 {
    ((sequence as i64 + records as i64) % (i32::MAX as i64 + 1)) as i32
}

/// A partition as the producer keeps it: records waiting, at most one batch out (so the
/// broker sees sequences in order), and the next sequence number.
#[derive(Debug, Default)]
pub struct PartitionQueue {
    pub waiting: VecDeque<Pending>,
    /// A batch the broker did not take yet, sent again before anything newer.
    pub retry: Option<Batch>,
    pub in_flight: bool,
    pub next_sequence: i32,
}

impl PartitionQueue {
    pub fn has_work(&self) -> bool {
        !self.in_flight && (self.retry.is_some() || !self.waiting.is_empty())
    }

    /// The batch to send next: the one to retry, or a new one from the waiting records of
    /// calls still `live`, at most [`BATCH_MAX_BYTES`] (one record at least, whatever its
    /// size: the split keeps records under the limit). `None` when nothing live waits.
    pub fn next_batch(&mut self, session: Session, live: impl Fn(u64) -> bool) -> Option<Batch> {
        if let Some(batch) = self.retry.take() {
            return Some(batch);
        }
        let mut records = Vec::new();
        let mut size = 0;
        while let Some(front) = self.waiting.front() {
            if !live(front.call) {
                self.waiting.pop_front();
                continue;
            }
            if !records.is_empty() && size + front.size > BATCH_MAX_BYTES {
                break;
            }
            size += front.size;
            records.extend(self.waiting.pop_front());
        }
        if records.is_empty() {
            return None;
        }
        Some(encode(records, size, self.next_sequence, session))
    }

    /// The broker took `batch`: the next batch starts after it.
    pub fn acknowledged(&mut self, batch: &Batch) {
        self.next_sequence = next_sequence(self.next_sequence, batch.record_count());
    }

    /// A new session starts every partition at sequence 0; a batch encoded for the old one
    /// goes back to the front of the queue, to be encoded again.
    pub fn restart(&mut self) {
        self.next_sequence = 0;
        if let Some(batch) = self.retry.take() {
            for p in batch.records.into_iter().rev() {
                self.waiting.push_front(p);
            }
        }
    }
}

/// Encodes `records` as one record batch (v2, lz4) starting at `base_sequence`.
pub fn encode(mut records: Vec<Pending>, size: usize, base_sequence: i32, session: Session) -> Batch {
    for (i, p) in records.iter_mut().enumerate() {
        let r = &mut p.record;
        r.offset = i as i64;
        // Only the base sequence is written; the encoder wants offset - sequence constant
        // across a batch, so past `i32::MAX` it wraps the way it computes.
        r.sequence = base_sequence.wrapping_add(i as i32);
        r.producer_id = session.producer_id;
        r.producer_epoch = session.producer_epoch;
    }
    let mut buf = BytesMut::with_capacity(size / 2 + 128);
    let options = RecordEncodeOptions { version: 2, compression: Compression::Lz4 };
    RecordBatchEncoder::encode_with_custom_compression(
        &mut buf,
        records.iter().map(|p| &p.record),
        &options,
        Some(lz4_fast),
    )
    .expect("encoding a record batch into memory cannot fail");
    Batch { base_sequence, encoded: buf.freeze(), records, size }
}

/// LZ4 as librdkafka writes it: the fast compressor (level 0), independent 64 KiB blocks, no
/// checksums (the record batch has its CRC). The crate's own LZ4 uses the high-compression
/// mode (level 4), which cost ingest a fifth of its CPU for a few percent fewer bytes.
fn lz4_fast(records: &mut BytesMut, out: &mut BytesMut, compression: Compression) -> anyhow::Result<()> {
    use std::io::Write;
    debug_assert_eq!(compression, Compression::Lz4);
    let mut encoder = lz4::EncoderBuilder::new()
        .level(0)
        .block_size(lz4::BlockSize::Max64KB)
        .block_mode(lz4::BlockMode::Independent)
        .checksum(lz4::ContentChecksum::NoChecksum)
        .block_checksum(lz4::liblz4::BlockChecksum::NoBlockChecksum)
        .build(out.writer())?;
    encoder.write_all(records)?;
    let (_, finished) = encoder.finish();
    Ok(finished?)
}

/// What a partition's answer to a produce request means for its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written (or written before: a duplicate sequence is a retry of a batch the broker has).
    Written,
    /// Not written, and it may be later: send the same batch again, after new metadata when
    /// `refresh` (the partition's leader may have moved).
    Retry { refresh: bool },
    /// The broker no longer accepts this producer's sequences (it did not write the batch):
    /// the producer starts a new session and sends the records again under it.
    NewSession(ResponseError),
    /// Refused for good (too large, invalid, not authorised): the batch's calls fail.
    Refused(ResponseError),
}

pub fn outcome(error_code: i16) -> Outcome {
    let Some(error) = ResponseError::try_from_code(error_code) else {
        return Outcome::Written;
    };
    match error {
        ResponseError::DuplicateSequenceNumber => Outcome::Written,
        ResponseError::OutOfOrderSequenceNumber
        | ResponseError::UnknownProducerId
        | ResponseError::InvalidProducerEpoch
        | ResponseError::ProducerFenced => Outcome::NewSession(error),
        ResponseError::NotLeaderOrFollower
        | ResponseError::LeaderNotAvailable
        | ResponseError::UnknownTopicOrPartition
        | ResponseError::FencedLeaderEpoch
        | ResponseError::UnknownLeaderEpoch => Outcome::Retry { refresh: true },
        e if e.is_retriable() => Outcome::Retry { refresh: false },
        e => Outcome::Refused(e),
    }
}

/// Reads a broker's answer (the bytes after its length) to request `correlation_id` of `api`
/// at `version`: the header, then a `Resp` that uses every byte. The error is the reason
/// the answer cannot be acted on.
pub fn read_answer<Resp: Decodable + HeaderVersion>(
    mut body: Bytes,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<Resp, String> {
    let header = ResponseHeader::decode(&mut body, Resp::header_version(version))
        .map_err(|e| format!("an unreadable answer header: {e}"))?;
    if header.correlation_id != correlation_id {
        return Err(format!("the answer to request {} where {correlation_id} was asked", header.correlation_id));
    }
    let response =
        Resp::decode(&mut body, version).map_err(|e| format!("an unreadable {api:?} v{version} answer: {e}"))?;
    if body.has_remaining() {
        // Bytes left over mean the answer was misread: say so rather than act on it.
        return Err(format!("{} bytes left after a {api:?} v{version} answer", body.remaining()));
    }
    Ok(response)
}

/// A produce answer's error code for each partition it names.
pub struct ProduceAnswer<'a>(HashMap<(&'a str, i32), i16>);

impl<'a> ProduceAnswer<'a> {
    pub fn of(answer: &'a ProduceResponse) -> ProduceAnswer<'a> {
        let mut codes = HashMap::new();
        for t in &answer.responses {
            for p in &t.partition_responses {
                codes.insert((t.name.0.as_str(), p.index), p.error_code);
            }
        }
        ProduceAnswer(codes)
    }

    /// The code given for a partition a batch was sent to, and what it means. A partition
    /// the answer leaves out was not written: ask again where it lives.
    pub fn outcome(&self, topic: &str, partition: i32) -> (Option<i16>, Outcome) {
        let code = self.0.get(&(topic, partition)).copied();
        (code, code.map_or(Outcome::Retry { refresh: true }, outcome))
    }
}

/// Most partitions a topic may have here: a queue is kept for each, so an answer naming
/// partition 2,000,000,000 must not make two billion of them. Kafka tops out far below
/// (its guidance is thousands per broker).
pub const MAX_PARTITIONS: usize = 1 << 16;

/// What a metadata answer says, as the producer uses it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layout {
    /// Every broker named: its node id and address.
    pub brokers: Vec<(i32, String)>,
    pub topics: Vec<TopicLayout>,
    /// The topics the answer gives no usable partitions for, each with why.
    pub missing: Vec<String>,
}

/// A topic's partitions: `leaders[i]` is partition i's leader, -1 when the answer names
/// none (a partition left out, or given with an error).
#[derive(Debug, Clone, PartialEq)]
pub struct TopicLayout {
    pub name: String,
    pub leaders: Vec<i32>,
}

pub fn layout(answer: &MetadataResponse) -> Layout {
    let mut layout = Layout::default();
    for b in &answer.brokers {
        let host = b.host.as_str();
        let addr = if host.contains(':') { format!("[{host}]:{}", b.port) } else { format!("{host}:{}", b.port) };
        layout.brokers.push((b.node_id.0, addr));
    }
    for t in &answer.topics {
        let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else { continue };
        if t.error_code != 0 || t.partitions.is_empty() {
            let error = ResponseError::try_from_code(t.error_code).map(|e| e.to_string());
            layout.missing.push(format!("{name}: {}", error.unwrap_or_else(|| "no partitions".into())));
            continue;
        }
        // An index outside what a topic can have is a broker's (or the network's) mistake:
        // the topic is left out, as one with an error is, rather than sized by it (or, for
        // a negative index, indexed by it).
        let mut count = 0;
        let mut out_of_range = None;
        for p in &t.partitions {
            match usize::try_from(p.partition_index) {
                Ok(i) if i < MAX_PARTITIONS => count = count.max(i + 1),
                _ => drop(out_of_range.get_or_insert(p.partition_index)),
            }
        }
        if let Some(index) = out_of_range {
            layout.missing.push(format!("{name}: a partition index of {index}"));
            continue;
        }
        let mut leaders = vec![-1; count];
        for p in &t.partitions {
            leaders[p.partition_index as usize] = if p.error_code == 0 { p.leader_id.0 } else { -1 };
        }
        layout.topics.push(TopicLayout { name, leaders });
    }
    layout
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;
    use proptest::prelude::*;

    fn sample(value_len: usize, tag: u8) -> Record {
        record(Bytes::from(vec![b'k', tag]), Bytes::from(vec![tag; value_len]), IndexMap::new(), 1_700_000_000_000)
    }

    const SESSION: Session = Session { producer_id: 7, producer_epoch: 1 };

    /// A metadata answer for one topic whose partitions have these indexes.
    fn metadata(indexes: &[i32]) -> MetadataResponse {
        use kafka_protocol::messages::metadata_response::{
            MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
        };
        use kafka_protocol::messages::BrokerId;
        let partitions = indexes
            .iter()
            .map(|&i| MetadataResponsePartition::default().with_partition_index(i).with_leader_id(BrokerId(1)));
        let topic = MetadataResponseTopic::default()
            .with_name(Some(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(partitions.collect());
        let broker = MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("h"))
            .with_port(9092);
        MetadataResponse::default().with_brokers(vec![broker]).with_topics(vec![topic])
    }

    #[test]
    fn a_layout_has_a_leader_per_partition_and_none_for_one_left_out() {
        let layout = layout(&metadata(&[0, 2]));
        assert_eq!(layout.brokers, vec![(1, "h:9092".to_string())]);
        assert_eq!(layout.topics, vec![TopicLayout { name: "t".into(), leaders: vec![1, -1, 1] }]);
        assert!(layout.missing.is_empty());
    }

    /// The broker_answers fuzz target's finding: the producer sized (and indexed) a topic's
    /// queues by the partition indexes an answer named, so one index of 2^31 - 1 asked
    /// for two billion queues, and a negative one panicked the producer's task.
    #[test]
    fn an_answer_naming_a_partition_out_of_range_leaves_its_topic_out() {
        for index in [-1, i32::MIN, MAX_PARTITIONS as i32, i32::MAX] {
            let layout = layout(&metadata(&[0, index]));
            assert!(layout.topics.is_empty(), "{index}");
            assert_eq!(layout.missing, vec![format!("t: a partition index of {index}")]);
        }
        let layout = layout(&metadata(&[MAX_PARTITIONS as i32 - 1]));
        assert_eq!(layout.topics[0].leaders.len(), MAX_PARTITIONS);
    }

    #[test]
    fn partitions_match_librdkafka_consistent_random() {
        // rdkafka's own partitioner, called directly: the same partition for every key.
        for key in ["a", "0af7651916cd43dd8448eb211c80319c", "checkout", "payment-service", "\u{e9}t\u{e9}"] {
            for partitions in [1, 3, 12, 13] {
                let theirs = unsafe {
                    rdkafka::bindings::rd_kafka_msg_partitioner_consistent_random(
                        std::ptr::null(),
                        key.as_ptr().cast(),
                        key.len(),
                        partitions,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(partition_for(key.as_bytes(), partitions), theirs, "key {key:?} over {partitions}");
            }
        }
    }

    #[test]
    fn a_batch_decodes_to_its_records_with_sequences_from_the_queue() {
        let mut q = PartitionQueue { next_sequence: 40, ..Default::default() };
        for i in 0..3 {
            q.waiting.push_back(Pending::new(i, sample(100, i as u8)));
        }
        let batch = q.next_batch(SESSION, |_| true).unwrap();
        assert_eq!(
            (batch.record_count(), batch.base_sequence, batch.calls().collect::<Vec<_>>()),
            (3, 40, vec![0, 1, 2])
        );
        let decoded = RecordBatchDecoder::decode(&mut batch.encoded.clone()).unwrap();
        assert_eq!(decoded.compression, Compression::Lz4);
        let seqs: Vec<i32> = decoded.records.iter().map(|r| r.sequence).collect();
        assert_eq!(seqs, vec![40, 41, 42]);
        assert!(decoded.records.iter().all(|r| r.producer_id == 7 && r.producer_epoch == 1));
        assert_eq!(decoded.records[2].value.as_deref(), Some(&[2u8; 100][..]));
        q.acknowledged(&batch);
        assert_eq!(q.next_sequence, 43);
    }

    #[test]
    fn calls_no_longer_waiting_are_not_sent() {
        let mut q = PartitionQueue::default();
        for i in 0..4 {
            q.waiting.push_back(Pending::new(i, sample(10, 0)));
        }
        let batch = q.next_batch(SESSION, |call| call % 2 == 1).unwrap();
        assert_eq!(batch.calls().collect::<Vec<_>>(), vec![1, 3]);
        assert!(q.waiting.is_empty());
        assert!(q.next_batch(SESSION, |_| true).is_none());
    }

    #[test]
    fn a_retry_is_the_same_batch_and_a_new_session_re_encodes_it() {
        let mut q = PartitionQueue { next_sequence: 5, ..Default::default() };
        q.waiting.push_back(Pending::new(1, sample(10, 1)));
        q.waiting.push_back(Pending::new(2, sample(10, 2)));
        let batch = q.next_batch(SESSION, |_| true).unwrap();
        q.retry = Some(batch.clone());
        q.waiting.push_back(Pending::new(3, sample(10, 3)));
        let again = q.next_batch(SESSION, |_| true).unwrap();
        assert_eq!((again.encoded.clone(), again.base_sequence), (batch.encoded.clone(), 5));
        q.retry = Some(again);
        q.restart();
        let fresh = Session { producer_id: 8, producer_epoch: 0 };
        let renewed = q.next_batch(fresh, |_| true).unwrap();
        assert_eq!((renewed.base_sequence, renewed.calls().collect::<Vec<_>>()), (0, vec![1, 2, 3]));
    }

    #[test]
    fn sequences_wrap_to_zero_as_kafkas_do() {
        assert_eq!(next_sequence(5, 3), 8);
        assert_eq!(next_sequence(i32::MAX - 1, 1), i32::MAX);
        assert_eq!(next_sequence(i32::MAX - 1, 2), 0);
        assert_eq!(next_sequence(i32::MAX, 10), 9);
        // A batch across the wrap is still one batch, starting at the base sequence.
        let batch = encode(vec![Pending::new(0, sample(1, 0)), Pending::new(0, sample(1, 1))], 2, i32::MAX, SESSION);
        let sets = RecordBatchDecoder::decode_all(&mut batch.encoded.clone()).unwrap();
        assert_eq!((sets.len(), sets[0].records.len(), sets[0].records[0].sequence), (1, 2, i32::MAX));
    }

    #[test]
    fn answers_are_classified_as_the_protocol_defines_them() {
        assert_eq!(outcome(0), Outcome::Written);
        assert_eq!(outcome(46), Outcome::Written);
        assert_eq!(outcome(6), Outcome::Retry { refresh: true });
        assert_eq!(outcome(7), Outcome::Retry { refresh: false });
        assert_eq!(outcome(19), Outcome::Retry { refresh: false });
        assert_eq!(outcome(45), Outcome::NewSession(ResponseError::OutOfOrderSequenceNumber));
        assert_eq!(outcome(59), Outcome::NewSession(ResponseError::UnknownProducerId));
        assert_eq!(outcome(10), Outcome::Refused(ResponseError::MessageTooLarge));
        assert_eq!(outcome(-1), Outcome::Refused(ResponseError::UnknownServerError));
    }

    proptest! {
        /// Batches take the waiting records in order, each once, each under the size bound
        /// unless a single record is larger, and leave nothing live behind.
        #[test]
        fn batches_keep_order_and_bounds(sizes in prop::collection::vec(1usize..400_000, 1..30), dead in prop::collection::vec(any::<bool>(), 30)) {
            let mut q = PartitionQueue::default();
            for (i, &len) in sizes.iter().enumerate() {
                q.waiting.push_back(Pending::new(i as u64, sample(len, 0)));
            }
            let live = |call: u64| !dead[call as usize];
            let mut seen = Vec::new();
            let mut seq = 0;
            while let Some(batch) = q.next_batch(SESSION, live) {
                prop_assert!(batch.record_count() == 1 || batch.size <= BATCH_MAX_BYTES);
                prop_assert_eq!(batch.base_sequence, seq);
                seq += batch.record_count() as i32;
                q.acknowledged(&batch);
                seen.extend(batch.calls());
            }
            let expected: Vec<u64> = (0..sizes.len() as u64).filter(|&c| live(c)).collect();
            prop_assert_eq!(seen, expected);
        }
    }
}
