//! `tayga topics create` and `tayga topics list`.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;

use super::reach;
use super::table::{thousands, Layout, Table};
use crate::bus::topics::{describe_topics_within, ensure_topics_within, TopicOutcome};
use crate::cli::TopicsCommand;
use crate::config::Config;

pub async fn run(
    config: &Config,
    sub: &TopicsCommand,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let names = config.names();
    reach::broker(&config.kafka, timeout).await?;
    match sub {
        TopicsCommand::Create => {
            let outcomes = ensure_topics_within(&config.kafka, &names, timeout)
                .await
                .with_context(|| format!("creating topics on {}", config.kafka.brokers))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&outcomes)?)?;
            } else {
                for outcome in &outcomes {
                    match outcome {
                        TopicOutcome::Created { topic, partitions } => {
                            writeln!(out, "created {topic} ({partitions} partitions)")?
                        }
                        TopicOutcome::Existing { topic, partitions, .. } => {
                            writeln!(out, "exists  {topic} ({partitions} partitions)")?
                        }
                    }
                }
            }
            for outcome in outcomes.iter().filter(|o| o.partition_mismatch()) {
                if let TopicOutcome::Existing { topic, partitions, wanted } = outcome {
                    eprintln!(
                        "warning: {topic} has {partitions} partitions, the configuration asks for {wanted}; \
                         partition counts apply only when a topic is created"
                    );
                }
            }
            Ok(())
        }
        TopicsCommand::List => {
            let status = describe_topics_within(&config.kafka, &names, timeout)
                .await
                .with_context(|| format!("reading topics from {}", config.kafka.brokers))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&status)?)?;
                return Ok(());
            }
            let mut table =
                Table::new(["topic", "partitions", "retention", "compression", "records", "group", "committed", "lag"])
                    .numeric(&["partitions", "records", "committed", "lag"]);
            for topic in &status {
                let partitions = topic.partitions.map_or("missing".to_string(), |p| p.to_string());
                // `-`: the broker did not say (Tansu describes no topic configs).
                let retention = topic.retention_ms.map_or("-".to_string(), retention);
                let compression = topic.compression.clone().unwrap_or_else(|| "-".into());
                if topic.groups.is_empty() {
                    table.row([
                        topic.topic.clone(),
                        partitions.clone(),
                        retention.clone(),
                        compression.clone(),
                        thousands(topic.records),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                    ]);
                }
                for group in &topic.groups {
                    table.row([
                        topic.topic.clone(),
                        partitions.clone(),
                        retention.clone(),
                        compression.clone(),
                        thousands(topic.records),
                        group.group.clone(),
                        group.committed.map_or("none".to_string(), thousands),
                        thousands(group.lag),
                    ]);
                }
            }
            write!(out, "{}", table.render(Layout::current()))?;
            Ok(())
        }
    }
}

/// A `retention.ms` as an operator reads it: whole days or hours, else milliseconds;
/// `-1` (keep forever) as `forever`.
fn retention(ms: i64) -> String {
    const HOUR: i64 = 3_600_000;
    match ms {
        ms if ms < 0 => "forever".into(),
        ms if ms > 0 && ms % (24 * HOUR) == 0 => format!("{} d", ms / (24 * HOUR)),
        ms if ms > 0 && ms % HOUR == 0 => format!("{} h", ms / HOUR),
        ms => format!("{ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn retention_reads_in_days_or_hours() {
        let shown: Vec<String> = [604_800_000, 7_200_000, 1500, -1].into_iter().map(super::retention).collect();
        assert_eq!(shown, ["7 d", "2 h", "1500 ms", "forever"]);
    }
}
