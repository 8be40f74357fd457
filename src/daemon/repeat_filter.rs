//! Client libraries repeat themselves: librdkafka logs every failed reconnect to a broker
//! that is down (a hundred lines in fifteen seconds), and a daemon's log drowns. This filter
//! lets the first event of each condition through, counts the ones that follow, and
//! [`report`] logs one line per condition with the count once a window; a condition is a
//! message with its numbers left out, so "after 3ms" and "after 5ms" are the same condition.
//! Only the client libraries' events are limited; Tayga's own events are already one per
//! state change.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::{Event, Metadata};
use tracing_subscriber::layer::{Context, Filter};

use super::Shutdown;

/// How long repeats of one condition are counted before their line is logged.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Most conditions tracked at once; beyond it, new ones pass unlimited (never lose a line).
const MAX_CONDITIONS: usize = 1000;

/// Log targets of the client libraries (librdkafka through rdkafka, hyper under the
/// ClickHouse client and reqwest).
fn is_client_library(target: &str) -> bool {
    ["librdkafka", "rdkafka", "hyper", "h2", "reqwest"]
        .iter()
        .any(|t| target == *t || target.starts_with(&format!("{t}::")))
}

#[derive(Default)]
struct Condition {
    /// The first message, as logged.
    message: String,
    target: String,
    suppressed: u64,
}

/// The per-layer filter (installed by `daemon::init_tracing`).
#[derive(Default)]
pub struct RepeatFilter {
    conditions: Mutex<HashMap<String, Condition>>,
}

static GLOBAL: OnceLock<&'static RepeatFilter> = OnceLock::new();

impl RepeatFilter {
    /// The process's filter: one, so [`report`] finds it.
    pub fn global() -> &'static RepeatFilter {
        GLOBAL.get_or_init(|| Box::leak(Box::default()))
    }

    /// Whether this event passes: the first of its condition does, repeats are counted.
    fn admit(&self, target: &str, message: &str) -> bool {
        let key = format!("{target}\u{0}{}", condition_of(message));
        let mut conditions = self.conditions.lock().unwrap_or_else(|e| e.into_inner());
        let full = conditions.len() >= MAX_CONDITIONS;
        match conditions.get_mut(&key) {
            Some(c) => {
                c.suppressed += 1;
                false
            }
            None if full => true,
            None => {
                conditions
                    .insert(key, Condition { message: message.to_string(), target: target.to_string(), suppressed: 0 });
                true
            }
        }
    }

    /// The conditions repeated since the last call, with their counts. A condition that
    /// repeated stays known (its next repeats are counted for the next line); one that did not
    /// is forgotten, so its next occurrence passes again.
    fn take(&self) -> Vec<(String, String, u64)> {
        let mut conditions = self.conditions.lock().unwrap_or_else(|e| e.into_inner());
        let repeated = conditions
            .values()
            .filter(|c| c.suppressed > 0)
            .map(|c| (c.target.clone(), c.message.clone(), c.suppressed))
            .collect();
        conditions.retain(|_, c| std::mem::take(&mut c.suppressed) > 0);
        repeated
    }
}

/// A message with its digits left out: the condition it reports.
fn condition_of(message: &str) -> String {
    message.chars().filter(|c| !c.is_ascii_digit()).collect()
}

impl<S> Filter<S> for &'static RepeatFilter {
    fn enabled(&self, _meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _cx: &Context<'_, S>) -> bool {
        let mut fields = Fields::default();
        // Events from the `log` crate (rdkafka logs through it) arrive with target `log` and
        // their own target in the `log.target` field.
        let target = event.metadata().target();
        if target == "log" {
            event.record(&mut fields);
            if !is_client_library(&fields.log_target) {
                return true;
            }
            return self.admit(&fields.log_target, &fields.message);
        }
        if !is_client_library(target) {
            return true;
        }
        event.record(&mut fields);
        self.admit(target, &fields.message)
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    log_target: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            "log.target" => {
                let _ = write!(self.log_target, "{value:?}");
            }
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            "log.target" => self.log_target.push_str(value),
            _ => {}
        }
    }
}

/// Every [`WINDOW`] until shutdown, logs one line per condition that repeated, with how many
/// times; run by `tayga serve`.
pub async fn report(shutdown: Shutdown) {
    while shutdown.sleep(WINDOW).await {
        log_repeated();
    }
    log_repeated();
}

fn log_repeated() {
    for (target, message, repeated) in RepeatFilter::global().take() {
        tracing::warn!(
            library = target,
            repeated,
            window_secs = WINDOW.as_secs(),
            "{message} (and {repeated} more like it in the last {} s)",
            WINDOW.as_secs()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_a_condition_passes_and_repeats_are_counted() {
        let r = RepeatFilter::default();
        let refused = |ms: u32| format!("FAIL 127.0.0.1:9092: Connect failed: Connection refused (after {ms}ms)");
        assert!(r.admit("librdkafka", &refused(3)));
        assert!(!r.admit("librdkafka", &refused(5)));
        assert!(!r.admit("librdkafka", &refused(17)));
        assert!(r.admit("librdkafka", "another condition"));
        assert_eq!(r.take(), vec![("librdkafka".to_string(), refused(3), 2)]);
        assert!(!r.admit("librdkafka", &refused(1)), "a condition that repeated is still counted");
        assert!(r.admit("librdkafka", "another condition"), "a quiet one is forgotten");
        assert_eq!(r.take(), vec![("librdkafka".to_string(), refused(3), 1)]);
    }

    #[test]
    fn only_client_libraries_are_limited() {
        assert!(
            is_client_library("librdkafka")
                && is_client_library("rdkafka::client")
                && is_client_library("hyper::proto")
        );
        assert!(!is_client_library("tayga::daemon::writer") && !is_client_library("hyperion"));
    }
}
