//! The shape pass (docs/alerts.md, "Shape alerts"; the rules are `shapes.rs`): in every
//! detection pass, after the log rules, a replica judges the endpoints whose root service's
//! logs partition it holds ([`super::ownership::Ownership::holds_key`]), from the stored
//! stories, and stores and publishes their alerts through the same `AlertPublisher`.
//!
//! - **Who judges**: a root service hashes to one partition of the logs topic whether or
//!   not it logs, and the group gives each partition to one replica, so outside a
//!   hand-over two replicas never judge the same endpoint.
//! - **Nothing twice**: a new shape's id names only its fingerprint, and ids already stored
//!   are not raised again (a restart, a re-read, another replica); an ongoing slowdown is
//!   read back from `log_alerts` and keeps its id.
//! - **Nothing lost**: the watermark (`new_shape_watermark_ns:p<N>`) moves to the pass time
//!   only after the pass stored its alerts, and a shape stays a candidate for one evidence
//!   window after the watermark passed its first sighting, so a shape seen just before a
//!   stop, a crash or a revoke is judged by the partition's next owner.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::consumer::Logminer;
use super::shape_history::ShapeHistory;
use super::shapes::{self, Endpoint, EndpointShapes, Ongoing, ShapeRules, ShapeTiming, MINUTE_NS};
use crate::store::logminer::{self as lm, AlertQuery};
use crate::store::shapes as sq;
use crate::store::{now_ns, AlertRow, Store, StoreError};
use crate::wire::alert::AlertKind;

use crate::time::HOUR_NS;

impl Logminer {
    /// Judges the held endpoints' shapes; then the watermark moves to the pass time.
    pub(super) async fn shape_pass(&mut self) -> anyhow::Result<()> {
        if !self.config.logminer.shapes.enabled || self.logs_partitions == 0 {
            return Ok(());
        }
        let rules = self.shape_rules;
        let now = now_ns();
        let watermark = *self.shape_watermark.get_or_insert(now);
        let (ownership, partitions) = (&self.ownership, self.logs_partitions);
        let holds = |root: &str| ownership.holds_key(root, partitions);
        let endpoints = read_shapes(&self.store, &mut self.shape_history, &rules, watermark, now, holds).await?;
        let mut roots: Vec<String> = endpoints.keys().map(|e| e.service.clone()).collect();
        roots.dedup();
        self.shape_roots = roots.clone();
        let mut rows = self.new_shape_rows(&endpoints, &roots, watermark, now).await?;
        rows.extend(self.slowdown_rows(&endpoints, &roots, now).await?);
        self.alert_publisher.store_and_publish(&self.store, &self.metrics, rows).await?;
        let keys: Vec<(String, String)> =
            self.ownership.partitions().iter().map(|p| (lm::shape_watermark_key(*p), now.to_string())).collect();
        lm::write_state(&self.store, &keys, now).await?;
        self.shape_watermark = Some(now);
        Ok(())
    }

    async fn new_shape_rows(
        &self,
        endpoints: &BTreeMap<Endpoint, EndpointShapes>,
        roots: &[String],
        watermark: u64,
        now: u64,
    ) -> anyhow::Result<Vec<AlertRow>> {
        let rules = &self.shape_rules;
        let ids: Vec<u64> =
            endpoints.iter().flat_map(|(e, shapes_of)| shapes::candidate_ids(rules, e, shapes_of, watermark)).collect();
        if ids.is_empty() {
            self.metrics.shapes_held_back(0);
            return Ok(Vec::new());
        }
        let announced = lm::existing_alert_ids(&self.store, &ids).await?;
        let recent = lm::alerts(
            &self.store,
            &AlertQuery {
                services: Some(roots.to_vec()),
                kind: Some(AlertKind::NewShape),
                last_at_since_ns: Some(now.saturating_sub(HOUR_NS)),
                ..Default::default()
            },
        )
        .await?;
        let mut raised_last_hour: HashMap<(&str, &str), u64> = HashMap::new();
        for a in &recent {
            *raised_last_hour.entry((a.service.as_str(), a.template.as_str())).or_default() += 1;
        }
        let mut rows = Vec::new();
        let mut held_back = 0;
        for (endpoint, shapes_of) in endpoints {
            let recent = raised_last_hour.get(&(endpoint.service.as_str(), endpoint.operation.as_str()));
            let judged =
                shapes::new_shapes(rules, endpoint, shapes_of, watermark, &announced, recent.copied().unwrap_or(0));
            if judged.held_back > 0 {
                tracing::info!(service = %endpoint.service, operation = %endpoint.operation, held_back = judged.held_back,
                    "new shapes held back by the rate limit (logminer.shapes.max_new_per_hour)");
            }
            held_back += judged.held_back;
            rows.extend(judged.raised.iter().map(|n| n.to_row(endpoint, now)));
        }
        self.metrics.shapes_held_back(held_back);
        Ok(rows)
    }

    async fn slowdown_rows(
        &self,
        endpoints: &BTreeMap<Endpoint, EndpointShapes>,
        roots: &[String],
        now: u64,
    ) -> anyhow::Result<Vec<AlertRow>> {
        let rules = &self.shape_rules;
        let (window, baseline) = shapes::slowdown_bounds(rules, now);
        let timings = sq::shape_timings(&self.store, roots, baseline, window, now).await?;
        if timings.is_empty() {
            return Ok(Vec::new());
        }
        let ongoing_rows = lm::alerts(
            &self.store,
            &AlertQuery {
                services: Some(roots.to_vec()),
                kind: Some(AlertKind::ShapeSlowdown),
                last_at_since_ns: Some(lm::active_cutoff_ns(now)),
                ..Default::default()
            },
        )
        .await?;
        let ongoing: HashMap<u64, &AlertRow> = ongoing_rows.iter().map(|a| (a.template_id, a)).collect();
        let mut rows = Vec::new();
        for t in timings {
            let endpoint = Endpoint { service: t.root_service, operation: t.root_operation };
            let timing = ShapeTiming {
                fingerprint: t.fingerprint,
                window_traces: t.window_traces,
                window_p95_ns: t.window_p95_ns,
                baseline_traces: t.baseline_traces,
                baseline_p95_ns: t.baseline_p95_ns,
            };
            let stored = ongoing.get(&t.fingerprint);
            let current = stored.map(|a| Ongoing {
                alert_id: a.alert_id,
                first_at: a.first_at,
                baseline_ms: a.baseline,
                threshold_ms: a.threshold,
            });
            let Some(s) = shapes::slowdown(rules, &timing, now, current) else { continue };
            let shape = endpoints.get(&endpoint).and_then(|e| e.shapes.iter().find(|s| s.fingerprint == t.fingerprint));
            let mut row = s.to_row(&endpoint, shape, now);
            if let Some(a) = stored {
                row.stored_ns = a.stored_ns;
            }
            rows.push(row);
        }
        Ok(rows)
    }
}

/// What the stored stories say about the endpoints `holds` says a pass judges at `now` with
/// its new-shape `watermark`: the history's shapes and the minute counts from
/// [`ShapeRules::minutes_since`] the watermark on. The day of history is read once into
/// `history`; then each pass reads the minutes that left the fresh ones since, and the fresh
/// ones again (`shape_history.rs`). Also `examples/shape_pass_bench.rs`'s pass.
pub async fn read_shapes(
    store: &Store,
    history: &mut ShapeHistory,
    rules: &ShapeRules,
    watermark: u64,
    now: u64,
    holds: impl Fn(&str) -> bool,
) -> Result<BTreeMap<Endpoint, EndpointShapes>, StoreError> {
    let since = rules.history_since(now) / MINUTE_NS * MINUTE_NS;
    let fresh = rules.minutes_since(watermark).max(since);
    if let Some((from, until)) = history.to_settle(since, fresh) {
        let rows = sq::shape_minutes(store, from, until).await?;
        history.settle(rows, until);
    }
    let fresh_rows = sq::shape_minutes(store, fresh, u64::MAX).await?;
    let missing = history.missing_edges(&fresh_rows);
    if !missing.is_empty() {
        let edges = sq::shape_edges(store, &missing, since).await?;
        history.add_edges(edges);
    }
    let (endpoints, present) = history.endpoints(&fresh_rows, holds, fresh);
    history.forget_edges_except(&present);
    Ok(endpoints)
}

/// The services whose alerts a replica answers for (it republishes and resolves them): those
/// it mines and the root services whose shapes it judges.
pub(super) fn republished_services(owned: Vec<String>, roots: &[String]) -> Vec<String> {
    let set: HashSet<String> = owned.into_iter().chain(roots.iter().cloned()).collect();
    let mut all: Vec<String> = set.into_iter().collect();
    all.sort();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn republication_covers_mined_services_and_judged_roots_once() {
        let all = republished_services(vec!["web".into(), "db".into()], &["web".into(), "edge".into()]);
        assert_eq!(all, vec!["db", "edge", "web"]);
    }
}
