//! Creating Tayga's four topics and reading their partitions, committed offsets and lag.

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

use super::consume::lag::{committed_offsets, group_reader, partition_lag};
use super::{client_config, SMALL_TOPIC_PARTITIONS};
use crate::config::KafkaConfig;
use crate::config::Names;

#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("the broker at {brokers} did not answer: {source}")]
    Unreachable { brokers: String, source: KafkaError },
    #[error("creating topic {topic} failed: {code}")]
    Create { topic: String, code: RDKafkaErrorCode },
    #[error("reading {what} from the broker failed: {source}")]
    Read { what: String, source: KafkaError },
    /// The broker refused this client's certificate or credentials ([`super::probe::refusal`]):
    /// the whole line, with what to do.
    #[error("{0}")]
    Refused(String),
}

impl TopicError {
    /// Retrying cannot help until the operator changes the configuration or the broker.
    pub fn needs_the_operator(&self) -> bool {
        matches!(self, TopicError::Refused(_))
    }
}

/// A topic Tayga needs, with the partition count it is created with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
}

/// The four topics (docs/design.md#topics).
pub fn topic_specs(names: &Names, kafka: &KafkaConfig) -> Vec<TopicSpec> {
    vec![
        TopicSpec { name: names.signals.clone(), partitions: kafka.partitions },
        TopicSpec { name: names.logs.clone(), partitions: kafka.partitions },
        TopicSpec { name: names.stories.clone(), partitions: SMALL_TOPIC_PARTITIONS },
        TopicSpec { name: names.alerts.clone(), partitions: SMALL_TOPIC_PARTITIONS },
    ]
}

/// The topic configs every topic is created with (`[kafka]` retention and compression).
/// Like partition counts they apply only at creation: an existing topic keeps its own.
pub fn topic_configs(kafka: &KafkaConfig) -> Vec<(&'static str, String)> {
    vec![
        ("retention.ms", kafka.retention_hours.saturating_mul(3_600_000).to_string()),
        ("compression.type", kafka.compression.clone()),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TopicOutcome {
    Created {
        topic: String,
        partitions: i32,
    },
    /// The topic was there. Partition counts apply only at creation, so a different count
    /// is reported, not changed.
    Existing {
        topic: String,
        partitions: i32,
        wanted: i32,
    },
}

impl TopicOutcome {
    pub fn partition_mismatch(&self) -> bool {
        matches!(self, TopicOutcome::Existing { partitions, wanted, .. } if partitions != wanted)
    }
}

/// Creates every missing topic; existing ones are left as they are and reported.
pub async fn ensure_topics(kafka: &KafkaConfig, names: &Names) -> Result<Vec<TopicOutcome>, TopicError> {
    ensure_topics_within(kafka, names, super::ADMIN_TIMEOUT).await
}

/// [`ensure_topics`], each broker request bounded by `timeout` (an operator's `--timeout`).
pub async fn ensure_topics_within(
    kafka: &KafkaConfig,
    names: &Names,
    timeout: Duration,
) -> Result<Vec<TopicOutcome>, TopicError> {
    let specs = topic_specs(names, kafka);
    let admin: AdminClient<DefaultClientContext> = client_config(kafka)
        .create()
        .map_err(|source| TopicError::Unreachable { brokers: kafka.brokers.clone(), source })?;
    let existing = partition_counts_within(kafka, None, timeout).await?;

    let missing: Vec<&TopicSpec> = specs.iter().filter(|s| !existing.contains_key(&s.name)).collect();
    let configs = topic_configs(kafka);
    let new_topics: Vec<NewTopic> = missing
        .iter()
        .map(|s| {
            configs.iter().fold(
                NewTopic::new(&s.name, s.partitions, TopicReplication::Fixed(kafka.replication_factor)),
                |topic, (key, value)| topic.set(key, value),
            )
        })
        .collect();
    let mut created = BTreeMap::new();
    if !new_topics.is_empty() {
        let options = AdminOptions::new().operation_timeout(Some(timeout)).request_timeout(Some(timeout));
        let results = admin
            .create_topics(new_topics.iter(), &options)
            .await
            .map_err(|source| TopicError::Unreachable { brokers: kafka.brokers.clone(), source })?;
        for result in results {
            match result {
                Ok(topic) => {
                    created.insert(topic, true);
                }
                // Another service created it between our look and our create: that is success.
                Err((topic, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    created.insert(topic, false);
                }
                Err((topic, code)) => return Err(TopicError::Create { topic, code }),
            }
        }
    }

    let now =
        if created.values().any(|c| !c) { partition_counts_within(kafka, None, timeout).await? } else { existing };
    Ok(specs
        .into_iter()
        .map(|spec| match created.get(&spec.name) {
            Some(true) => TopicOutcome::Created { topic: spec.name, partitions: spec.partitions },
            _ => TopicOutcome::Existing {
                partitions: now.get(&spec.name).copied().unwrap_or(0),
                topic: spec.name,
                wanted: spec.partitions,
            },
        })
        .collect())
}

/// Partition counts by topic name, from the broker's metadata (one topic or all).
pub async fn partition_counts(kafka: &KafkaConfig, topic: Option<&str>) -> Result<BTreeMap<String, i32>, TopicError> {
    partition_counts_within(kafka, topic, super::ADMIN_TIMEOUT).await
}

/// [`partition_counts`], the metadata request bounded by `timeout`.
pub async fn partition_counts_within(
    kafka: &KafkaConfig,
    topic: Option<&str>,
    timeout: Duration,
) -> Result<BTreeMap<String, i32>, TopicError> {
    let counts = metadata_partition_counts(kafka.clone(), topic.map(str::to_string), timeout).await;
    if counts.is_err() {
        // librdkafka tells a refused password or certificate as a broker that did not answer.
        if let Some(line) = super::probe::refusal(kafka, timeout).await {
            return Err(TopicError::Refused(line));
        }
    }
    counts
}

async fn metadata_partition_counts(
    kafka: KafkaConfig,
    topic: Option<String>,
    timeout: Duration,
) -> Result<BTreeMap<String, i32>, TopicError> {
    blocking(move || {
        let consumer: BaseConsumer = client_config(&kafka)
            .create()
            .map_err(|source| TopicError::Unreachable { brokers: kafka.brokers.clone(), source })?;
        let metadata = consumer
            .fetch_metadata(topic.as_deref(), timeout)
            .map_err(|source| TopicError::Unreachable { brokers: kafka.brokers.clone(), source })?;
        Ok(metadata
            .topics()
            .iter()
            .filter(|t| t.error().is_none())
            .map(|t| (t.name().to_string(), t.partitions().len() as i32))
            .collect())
    })
    .await
}

/// One consumer group's position on one topic.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupLag {
    pub group: String,
    /// Sum over partitions of committed offsets; `None` when the group never committed.
    pub committed: Option<i64>,
    /// Records not yet consumed: high watermark − committed offset (or − low watermark for a
    /// partition the group never committed).
    pub lag: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TopicStatus {
    pub topic: String,
    /// `None` when the topic does not exist.
    pub partitions: Option<i32>,
    /// Records held: the sum of high − low watermarks.
    pub records: i64,
    /// `retention.ms` and `compression.type` as the broker describes the topic; `None`
    /// when it does not report the key (Tansu answers DescribeConfigs with no entries).
    pub retention_ms: Option<i64>,
    pub compression: Option<String>,
    pub groups: Vec<GroupLag>,
}

/// Partitions, record counts and each Tayga group's lag, for the four topics.
pub async fn describe_topics(kafka: &KafkaConfig, names: &Names) -> Result<Vec<TopicStatus>, TopicError> {
    describe_topics_within(kafka, names, super::ADMIN_TIMEOUT).await
}

/// [`describe_topics`], each broker request bounded by `timeout`.
pub async fn describe_topics_within(
    kafka: &KafkaConfig,
    names: &Names,
    timeout: Duration,
) -> Result<Vec<TopicStatus>, TopicError> {
    let counts = partition_counts_within(kafka, None, timeout).await?;
    let specs = topic_specs(names, kafka);
    let present: Vec<String> = specs.iter().filter(|s| counts.contains_key(&s.name)).map(|s| s.name.clone()).collect();
    let mut configs = topic_config_values(kafka, &present, timeout).await?;
    let kafka = kafka.clone();
    let names = names.clone();
    blocking(move || {
        let mut out = Vec::new();
        for spec in specs {
            let Some(&partitions) = counts.get(&spec.name) else {
                out.push(TopicStatus {
                    topic: spec.name,
                    partitions: None,
                    records: 0,
                    retention_ms: None,
                    compression: None,
                    groups: Vec::new(),
                });
                continue;
            };
            let watermarks = watermarks(&kafka, &spec.name, partitions, timeout)?;
            let records = watermarks.iter().map(|(low, high)| high - low).sum();
            let mut groups = Vec::new();
            for group in names.groups_of(&spec.name) {
                groups.push(group_lag(&kafka, group, &spec.name, &watermarks, timeout)?);
            }
            let (retention_ms, compression) = configs.remove(&spec.name).unwrap_or_default();
            out.push(TopicStatus {
                topic: spec.name,
                partitions: Some(partitions),
                records,
                retention_ms,
                compression,
                groups,
            });
        }
        Ok(out)
    })
    .await
}

/// `retention.ms` and `compression.type` of each of `topics`, as the broker describes them.
async fn topic_config_values(
    kafka: &KafkaConfig,
    topics: &[String],
    timeout: Duration,
) -> Result<BTreeMap<String, (Option<i64>, Option<String>)>, TopicError> {
    if topics.is_empty() {
        return Ok(BTreeMap::new());
    }
    let admin: AdminClient<DefaultClientContext> = client_config(kafka)
        .create()
        .map_err(|source| TopicError::Unreachable { brokers: kafka.brokers.clone(), source })?;
    let specifiers: Vec<ResourceSpecifier> = topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let results = admin
        .describe_configs(specifiers.iter(), &options)
        .await
        .map_err(|source| TopicError::Read { what: "topic configs".into(), source })?;
    let mut out = BTreeMap::new();
    for (topic, result) in topics.iter().zip(results) {
        // A broker that refuses DescribeConfigs for one topic leaves its columns unknown;
        // the rest of `topics list` is still worth printing.
        let Ok(resource) = result else { continue };
        let value = |key: &str| resource.get(key).and_then(|e| e.value.clone());
        out.insert(topic.clone(), (value("retention.ms").and_then(|v| v.parse().ok()), value("compression.type")));
    }
    Ok(out)
}

/// (low, high) watermarks of every partition of `topic`, in partition order.
pub fn watermarks(
    kafka: &KafkaConfig,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<Vec<(i64, i64)>, TopicError> {
    let consumer: BaseConsumer = client_config(kafka)
        .create()
        .map_err(|source| TopicError::Unreachable { brokers: kafka.brokers.clone(), source })?;
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, timeout)
                .map_err(|source| TopicError::Read { what: format!("watermarks of {topic}/{p}"), source })
        })
        .collect()
}

fn group_lag(
    kafka: &KafkaConfig,
    group: &str,
    topic: &str,
    watermarks: &[(i64, i64)],
    timeout: Duration,
) -> Result<GroupLag, TopicError> {
    let consumer = group_reader(kafka, group)
        .map_err(|source| TopicError::Unreachable { brokers: kafka.brokers.clone(), source })?;
    let committed = committed_offsets(&consumer, topic, 0..watermarks.len() as i32, timeout)
        .map_err(|source| TopicError::Read { what: format!("committed offsets of group {group}"), source })?;
    let total_committed = committed.iter().filter_map(|(_, o)| *o).reduce(|a, b| a + b);
    let lag =
        committed.iter().zip(watermarks).map(|((_, point), (low, high))| partition_lag(*low, *high, *point)).sum();
    Ok(GroupLag { group: group.to_string(), committed: total_committed, lag })
}

/// librdkafka's metadata and offset calls block; keep them off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, TopicError> + Send + 'static,
) -> Result<T, TopicError> {
    tokio::task::spawn_blocking(f).await.expect("blocking broker call panicked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_topics_have_the_seed_partition_counts() {
        let kafka = KafkaConfig::default();
        let specs = topic_specs(&Names::new("tayga"), &kafka);
        let shape: Vec<(&str, i32)> = specs.iter().map(|s| (s.name.as_str(), s.partitions)).collect();
        assert_eq!(shape, vec![("tayga.signals", 12), ("tayga.logs", 12), ("tayga.stories", 3), ("tayga.alerts", 3)]);
    }

    #[test]
    fn topics_are_created_with_a_week_of_retention_and_lz4_by_default() {
        let mut kafka = KafkaConfig::default();
        assert_eq!(
            topic_configs(&kafka),
            vec![("retention.ms", "604800000".to_string()), ("compression.type", "lz4".to_string())]
        );
        kafka.retention_hours = 24;
        kafka.compression = "zstd".into();
        assert_eq!(
            topic_configs(&kafka),
            vec![("retention.ms", "86400000".into()), ("compression.type", "zstd".into())]
        );
    }

    #[test]
    fn groups_follow_the_design_table() {
        let names = Names::new("t1");
        assert_eq!(names.groups_of("t1.signals"), vec!["t1-writer", "t1-assembler"]);
        assert_eq!(names.groups_of("t1.logs"), vec!["t1-logminer"]);
        assert_eq!(names.groups_of("t1.alerts"), vec!["t1-notifier"]);
        assert!(names.groups_of("t1.stories").is_empty());
    }
}
