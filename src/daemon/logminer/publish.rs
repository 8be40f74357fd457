//! Alert publication (docs/design.md#republication): every alert version is stored, then
//! published keyed by template id and marked in `log_alert_publications`; after every
//! detection pass the owned services' unmarked alerts of the republication window are
//! published again, oldest first, at most `republish_max_per_pass`, stopping at the first
//! failed send. An unmarked alert is one that may not have reached the topic.

use std::collections::HashSet;

use super::metrics::LogminerMetrics;
use crate::bus::producer::Publisher;
use crate::store::logminer as lm;
use crate::store::{AlertRow, Store};
use crate::workflow::alerts::publish_and_mark;

use crate::time::HOUR_NS;

/// Stores, publishes and marks the alerts of one replica.
pub struct AlertPublisher {
    publisher: Publisher,
    topic: String,
    /// Alert ids raised by this process, so a refresh is not counted as a new alert.
    raised: HashSet<u64>,
}

impl AlertPublisher {
    pub fn new(publisher: Publisher, topic: String) -> AlertPublisher {
        AlertPublisher { publisher, topic, raised: HashSet::new() }
    }

    /// An alert raised before (a spike restored at a takeover): its refreshes are not new.
    pub fn raised_before(&mut self, alert_id: u64) {
        self.raised.insert(alert_id);
    }

    /// Stores alert versions, then publishes and marks them; a failed publication leaves
    /// them unmarked for the republication after the next pass.
    pub async fn store_and_publish(
        &mut self,
        store: &Store,
        metrics: &LogminerMetrics,
        rows: Vec<AlertRow>,
    ) -> anyhow::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        lm::store_alerts(store, &rows).await.inspect_err(|e| metrics.store_failed("storing alerts", e))?;
        for row in &rows {
            if row.resolved_at > 0 {
                metrics.alert_resolved(row);
            } else if self.raised.insert(row.alert_id) {
                metrics.alert_raised(row);
            }
        }
        let publication = publish_and_mark(&self.publisher, store, &self.topic, &rows).await;
        if let Some(e) = publication.error {
            metrics.publish_failed(&e, publication.published, rows.len() - publication.published);
        }
        Ok(())
    }

    /// Republishes the unmarked alerts of `services` stored within `window_hours` before
    /// `now_ns`, at most `max` (docs/design.md#republication).
    pub async fn republish(
        &self,
        store: &Store,
        metrics: &LogminerMetrics,
        services: &[String],
        now_ns: u64,
        window_hours: u64,
        max: u64,
    ) {
        let since = republish_since(now_ns, window_hours);
        let unmarked = match lm::unmarked_alerts(store, Some(services), since, max).await {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(error = %e, "reading unpublished alerts failed");
                return;
            }
        };
        if unmarked.is_empty() {
            return;
        }
        let publication = publish_and_mark(&self.publisher, store, &self.topic, &unmarked).await;
        let left = unmarked.len() - publication.published;
        let stopped = publication.error.as_ref().map(|e| (e as &dyn std::fmt::Display, left));
        metrics.republished(publication.published, stopped);
    }
}

/// The start of the republication window (also the resolution pass's: an alert that turned
/// inactive before it is not resolved any more).
pub fn republish_since(now_ns: u64, window_hours: u64) -> u64 {
    now_ns.saturating_sub(window_hours.saturating_mul(HOUR_NS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_republication_window_ends_now_and_never_before_time_began() {
        let now = 30 * HOUR_NS;
        assert_eq!(republish_since(now, 24), 6 * HOUR_NS);
        assert_eq!(republish_since(now, 48), 0);
        assert_eq!(republish_since(now, u64::MAX), 0);
    }
}
