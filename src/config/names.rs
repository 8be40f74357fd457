//! The names of one install's topics and consumer groups (docs/design.md#topics), derived from
//! `kafka.topic_prefix`. Tests give each run its own prefix.

/// The topic and consumer-group names of one install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub signals: String,
    pub logs: String,
    pub stories: String,
    pub alerts: String,
    pub writer_group: String,
    pub assembler_group: String,
    pub logminer_group: String,
    pub notifier_group: String,
}

impl Names {
    pub fn new(prefix: &str) -> Names {
        Names {
            signals: format!("{prefix}.signals"),
            logs: format!("{prefix}.logs"),
            stories: format!("{prefix}.stories"),
            alerts: format!("{prefix}.alerts"),
            writer_group: format!("{prefix}-writer"),
            assembler_group: format!("{prefix}-assembler"),
            logminer_group: format!("{prefix}-logminer"),
            notifier_group: format!("{prefix}-notifier"),
        }
    }

    /// The consumer groups that read `topic` in Tayga (docs/design.md#topics).
    pub fn groups_of(&self, topic: &str) -> Vec<&str> {
        if topic == self.signals {
            vec![&self.writer_group, &self.assembler_group]
        } else if topic == self.logs {
            vec![&self.logminer_group]
        } else if topic == self.alerts {
            vec![&self.notifier_group]
        } else {
            Vec::new()
        }
    }
}
