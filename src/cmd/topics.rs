//! `tayga topics create` and `tayga topics list`.

use std::io::Write;

use anyhow::Context;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use crate::bus::topics::{describe_topics, ensure_topics, TopicOutcome};
use crate::cli::TopicsCommand;
use crate::config::Config;

pub async fn run(config: &Config, sub: &TopicsCommand, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let names = config.names();
    match sub {
        TopicsCommand::Create => {
            let outcomes = ensure_topics(&config.kafka, &names)
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
            let status = describe_topics(&config.kafka, &names)
                .await
                .with_context(|| format!("reading topics from {}", config.kafka.brokers))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&status)?)?;
                return Ok(());
            }
            let mut table = Table::new();
            table.load_preset(UTF8_FULL_CONDENSED).set_header([
                "topic",
                "partitions",
                "records",
                "group",
                "committed",
                "lag",
            ]);
            for topic in &status {
                let partitions = topic.partitions.map_or("missing".to_string(), |p| p.to_string());
                if topic.groups.is_empty() {
                    table.add_row([
                        topic.topic.clone(),
                        partitions.clone(),
                        topic.records.to_string(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                    ]);
                }
                for group in &topic.groups {
                    table.add_row([
                        topic.topic.clone(),
                        partitions.clone(),
                        topic.records.to_string(),
                        group.group.clone(),
                        group.committed.map_or("none".to_string(), |c| c.to_string()),
                        group.lag.to_string(),
                    ]);
                }
            }
            writeln!(out, "{table}")?;
            Ok(())
        }
    }
}
