//! `tayga topics create` and `tayga topics list`.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;

use super::reach;
use super::table::{count, Layout, Table};
use crate::bus::topics::{describe_topics_within, ensure_topics_within, TopicOutcome, TopicStatus};
use crate::cli::TopicsCommand;
use crate::config::Config;

pub async fn run(
    config: &Config,
    sub: &TopicsCommand,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
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
                    writeln!(
                        err,
                        "warning: {topic} has {partitions} partitions, the configuration asks for {wanted}; \
                         partition counts apply only when a topic is created"
                    )?;
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
            write_list(&status, Layout::current(), out)
        }
    }
}

/// The topics and their groups. A terminal that cuts to fit shows what an operator scans
/// (topic, group, how far behind) and, when every topic has the same retention and
/// compression (the usual case: they are set at creation), says them once below; `--wide`
/// and pipes give every column on every row.
fn write_list(status: &[TopicStatus], layout: Layout, out: &mut dyn Write) -> anyhow::Result<()> {
    let settings = |t: &TopicStatus| {
        // `-`: the broker did not say.
        (t.retention_ms.map_or("-".to_string(), retention), t.compression.clone().unwrap_or_else(|| "-".into()))
    };
    let shared = status.first().map(settings).filter(|first| status.iter().all(|t| settings(t) == *first));
    let narrow = matches!(layout, Layout::Terminal(Some(_))) && shared.is_some();
    let mut headers = vec!["topic", "partitions"];
    if !narrow {
        headers.extend(["retention", "compression"]);
    }
    headers.extend(["records", "group", "committed", "lag"]);
    let mut table =
        Table::new(headers).numeric(&["partitions", "records", "committed", "lag"]).keep(&["topic", "group"]);
    for topic in status {
        let partitions = topic.partitions.map_or("missing".to_string(), |p| p.to_string());
        let (retention, compression) = settings(topic);
        let groups: Vec<[String; 3]> = if topic.groups.is_empty() {
            vec![["-".into(), "-".into(), "-".into()]]
        } else {
            topic
                .groups
                .iter()
                .map(|g| {
                    let committed = g.committed.map_or("none".to_string(), |c| count(c, layout));
                    [g.group.clone(), committed, count(g.lag, layout)]
                })
                .collect()
        };
        for [group, committed, lag] in groups {
            let mut row = vec![topic.topic.clone(), partitions.clone()];
            if !narrow {
                row.extend([retention.clone(), compression.clone()]);
            }
            row.extend([count(topic.records, layout), group, committed, lag]);
            table.row(row);
        }
    }
    write!(out, "{}", table.render(layout))?;
    if let (true, Some((retention, compression))) = (narrow, shared) {
        writeln!(out, "every topic: retention {retention}, compression {compression} (--wide shows them per topic)")?;
    }
    Ok(())
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
