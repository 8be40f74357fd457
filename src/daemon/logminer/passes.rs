//! The passes (docs/design.md#watermarks). The new-template pass announces the owned services' templates
//! first seen after the watermark; it runs in every detection pass, and once, bounded,
//! after a revoke and at a clean stop. The detection pass runs every tick, and as soon as a
//! mined line can raise an alert (`prompt.rs`): ownership expiry, new templates, the active
//! spikes of services taken over, spikes and silences, republication, then the heartbeat.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::consumer::Logminer;
use super::detect::{self, MINUTE_NS};
use crate::bus::consume::Member;
use crate::identity::alert_id;
use crate::store::logminer::{self as lm, AlertQuery, MinuteCount};
use crate::store::{now_ns, AlertRow, TemplateRow};
use crate::wire::alert::AlertKind;

impl Logminer {
    /// The new-template pass of a revoke or a stop, within `bound`: a failure or a timeout
    /// skips it (its templates are stored; only their announcement can be missed).
    pub(super) async fn bounded_new_template_pass(&mut self, member: &mut Member, pass: &str, bound: Duration) {
        let started = Instant::now();
        match tokio::time::timeout(bound, self.new_template_pass(member)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(pass, error = %format!("{e:#}"), "the new-template pass failed"),
            Err(_) => tracing::warn!(pass, bound_secs = bound.as_secs(), "the new-template pass ran out of time"),
        }
        self.observe(pass, started);
    }

    fn observe(&self, pass: &str, started: Instant) {
        self.metrics.pass_finished(pass, started.elapsed());
    }

    /// Announces the owned services' templates first seen after the watermark, then moves
    /// the watermark (and every assigned partition's key) to the pass time. The templates
    /// are stored first, so every candidate is in ClickHouse.
    async fn new_template_pass(&mut self, member: &mut Member) -> anyhow::Result<()> {
        if !self.flush(member).await {
            anyhow::bail!("hits and templates could not be stored");
        }
        let pass_ns = now_ns();
        let services = self.ownership.services();
        let version = self.ledger.masking_version().to_string();
        let candidates = lm::new_template_candidates(&self.store, &services, &version, self.watermark, pass_ns).await?;
        let ids: Vec<u64> = candidates.iter().map(|t| new_template_id(t.template_id)).collect();
        // A template announced before (by another replica, or before an eviction) is not
        // announced again.
        let known = lm::existing_alert_ids(&self.store, &ids).await?;
        let rows = new_template_alerts(&candidates, &known, pass_ns);
        self.alert_publisher.store_and_publish(&self.store, &self.metrics, rows).await?;
        let keys: Vec<(String, String)> =
            self.ownership.partitions().iter().map(|p| (lm::watermark_key(*p), pass_ns.to_string())).collect();
        lm::write_state(&self.store, &keys, pass_ns).await?;
        self.watermark = pass_ns;
        Ok(())
    }

    /// Every tick, and when a line asked (`pass` names which): flush, new templates, spikes
    /// and silences, republication, heartbeat.
    pub(super) async fn detection_pass(&mut self, member: &mut Member, pass: &str) {
        let started = Instant::now();
        self.expire_ownership();
        let result = async {
            self.new_template_pass(member).await?;
            self.restore_taken_over().await?;
            self.spikes_and_silences().await?;
            self.resolutions().await?;
            self.shape_pass().await?;
            let lc = &self.config.logminer;
            self.alert_publisher
                .republish(
                    &self.store,
                    &self.metrics,
                    &super::shape_pass::republished_services(self.ownership.services(), &self.shape_roots),
                    now_ns(),
                    lc.republish_window_hours,
                    lc.republish_max_per_pass,
                )
                .await;
            anyhow::Ok(())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %format!("{e:#}"), "the detection pass failed; the next tick retries");
        }
        // The heartbeat says "a replica is running" (remine refuses while one is), so it is
        // written after a failed pass too.
        let now = now_ns();
        if let Err(e) = lm::write_state(&self.store, &[(lm::heartbeat_key(&self.replica), now.to_string())], now).await
        {
            tracing::warn!(error = %e, "writing the heartbeat failed");
        }
        self.observe(pass, started);
        self.gauges();
    }

    /// A service not mined within the ownership window drops out until it logs again.
    fn expire_ownership(&mut self) {
        let window = Duration::from_secs(self.config.logminer.ownership_window_min.saturating_mul(60));
        for service in self.ownership.expire(window, Instant::now()) {
            tracing::info!(service = %service, "service not seen within the ownership window: no longer owned");
            self.spikes.remove(&service);
            self.spike_watch.forget(&service);
        }
    }

    /// A service taken over gets its active spikes back, so an ongoing spike keeps its id.
    async fn restore_taken_over(&mut self) -> anyhow::Result<()> {
        let fresh = self.ownership.unrestored();
        if fresh.is_empty() {
            return Ok(());
        }
        // One query for every service taken over since the last pass.
        let query = AlertQuery {
            services: Some(fresh.clone()),
            kind: Some(AlertKind::Spike),
            last_at_since_ns: Some(lm::active_cutoff_ns(now_ns())),
            ..Default::default()
        };
        let active = lm::alerts(&self.store, &query).await?;
        for row in &active {
            let spikes = self.spikes.entry(row.service.clone()).or_default();
            spikes.entry(row.template_id).or_insert_with(|| detect::spike_from_row(row));
            self.alert_publisher.raised_before(row.alert_id);
            tracing::info!(service = %row.service, alert_id = %crate::wire::alert::format_id(row.alert_id),
                "restored an active spike of a service taken over");
        }
        self.ownership.mark_restored(&fresh);
        Ok(())
    }

    async fn spikes_and_silences(&mut self) -> anyhow::Result<()> {
        let services = self.ownership.services();
        let Some(oldest_clock) = services.iter().filter_map(|s| self.ownership.clock_of(s)).min() else {
            return Ok(());
        };
        let lookback = self.rules.lookback_min(self.config.logminer.ownership_window_min);
        let version = self.ledger.masking_version();
        let counts = lm::minute_counts(&self.store, &services, version, counts_since(oldest_clock, lookback)).await?;
        let mut by_service = by_service(&counts);
        let now = now_ns();
        let mut rows = Vec::new();
        for service in &services {
            let Some(clock) = self.ownership.clock_of(service) else { continue };
            let counts = by_service.remove(service.as_str()).unwrap_or_default();
            let spikes = self.spikes.entry(service.clone()).or_default();
            for r in detect::detect(&self.rules, &counts, clock, spikes) {
                let template = self.ledger.template_text(service, r.template_id).unwrap_or_default().to_string();
                rows.push(r.to_row(service, &template, now));
            }
            // An ongoing spike is refreshed by the tick; the others are watched for.
            let watched = detect::spike_thresholds(&self.rules, &counts, clock);
            self.spike_watch.set_thresholds(service, watched.into_iter().filter(|(t, _)| !spikes.contains_key(t)));
        }
        let ids: Vec<u64> = rows.iter().map(|r| r.alert_id).collect();
        if !ids.is_empty() {
            let stored = lm::alerts(&self.store, &AlertQuery { ids: Some(ids), ..Default::default() }).await?;
            keep_first_stored(&mut rows, &stored);
        }
        self.alert_publisher.store_and_publish(&self.store, &self.metrics, rows).await
    }
}

impl Logminer {
    /// The alerts this replica answers for that turned inactive since the last pass get their
    /// resolved version, stored and published like any update (docs/alerts.md, "An alert's
    /// life"). At most `republish_max_per_pass` a pass, oldest first, within the
    /// republication window: a backlog drains over the next passes.
    async fn resolutions(&mut self) -> anyhow::Result<()> {
        let lc = &self.config.logminer;
        let now = now_ns();
        let since = super::publish::republish_since(now, lc.republish_window_hours);
        // Of the services it mines, and of the endpoints whose shapes it judges (a shape
        // slowdown recovers, a new path settles).
        let services = super::shape_pass::republished_services(self.ownership.services(), &self.shape_roots);
        let inactive = lm::inactive_unresolved(&self.store, &services, now, since, lc.republish_max_per_pass).await?;
        let rows = inactive.into_iter().map(|row| resolved_version(row, now)).collect();
        self.alert_publisher.store_and_publish(&self.store, &self.metrics, rows).await
    }
}

/// The resolved version of an alert that turned inactive: resolved when the app stopped
/// calling it active (`last_at` plus the active window), so every replica and every re-run
/// write the same time; a newer version, so it replaces the firing one.
fn resolved_version(row: AlertRow, now_ns: u64) -> AlertRow {
    AlertRow {
        resolved_at: row.last_at.saturating_add(lm::ACTIVE_WINDOW_NS),
        updated_ns: now_ns.max(row.updated_ns + 1),
        ..row
    }
}

/// A template is new once, whoever announces it: its alert id names only the template.
fn new_template_id(template_id: u64) -> u64 {
    alert_id(AlertKind::NewTemplate, template_id, 0)
}

/// The `new_template` alerts of a pass at `pass_ns`: the candidates not announced before.
fn new_template_alerts(candidates: &[TemplateRow], known: &HashSet<u64>, pass_ns: u64) -> Vec<AlertRow> {
    candidates
        .iter()
        .map(|t| (t, new_template_id(t.template_id)))
        .filter(|(_, id)| !known.contains(id))
        .map(|(t, id)| AlertRow {
            alert_id: id,
            kind: AlertKind::NewTemplate.as_str().into(),
            service: t.service.clone(),
            template_id: t.template_id,
            template: t.template.clone(),
            first_at: t.first_seen_ns,
            last_at: t.first_seen_ns,
            count: t.count,
            baseline: 0.0,
            threshold: 0.0,
            stored_ns: pass_ns,
            updated_ns: pass_ns,
            resolved_at: 0,
            shape: String::new(),
        })
        .collect()
}

/// Where the minute counts of a pass start: `lookback_min` minutes before the oldest data
/// clock, on a minute boundary.
fn counts_since(oldest_clock_ns: u64, lookback_min: u64) -> u64 {
    oldest_clock_ns.saturating_sub(lookback_min.saturating_mul(MINUTE_NS)) / MINUTE_NS * MINUTE_NS
}

fn by_service(counts: &[MinuteCount]) -> HashMap<&str, Vec<MinuteCount>> {
    let mut by_service: HashMap<&str, Vec<MinuteCount>> = HashMap::new();
    for c in counts {
        by_service.entry(c.service.as_str()).or_default().push(c.clone());
    }
    by_service
}

/// A refreshed alert keeps the time it was first stored.
fn keep_first_stored(rows: &mut [AlertRow], stored: &[AlertRow]) {
    let first_stored: HashMap<u64, u64> = stored.iter().map(|a| (a.alert_id, a.stored_ns)).collect();
    for r in rows {
        if let Some(s) = first_stored.get(&r.alert_id) {
            r.stored_ns = *s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(service: &str, template_id: u64, first_seen_ns: u64) -> TemplateRow {
        TemplateRow {
            service: service.into(),
            template_id,
            template: format!("shape {template_id} <*>"),
            count: 4,
            first_seen_ns,
            last_seen_ns: first_seen_ns + 10,
            masking_version: "v1".into(),
            updated_ns: 0,
        }
    }

    #[test]
    fn a_new_template_is_announced_at_its_first_sighting_unless_it_was_before() {
        let candidates = [template("web", 7, 100), template("db", 9, 200)];
        let known = HashSet::from([new_template_id(9)]);
        let rows = new_template_alerts(&candidates, &known, 1_000);
        assert_eq!(rows.len(), 1, "template 9 was announced before: {rows:?}");
        let a = &rows[0];
        assert_eq!(a.alert_id, alert_id(AlertKind::NewTemplate, 7, 0));
        assert_eq!((a.kind.as_str(), a.service.as_str(), a.template_id), ("new_template", "web", 7));
        assert_eq!((a.first_at, a.last_at, a.count), (100, 100, 4));
        assert_eq!((a.stored_ns, a.updated_ns), (1_000, 1_000));
        assert_eq!(a.template, "shape 7 <*>");
    }

    #[test]
    fn a_resolved_version_is_newer_and_says_when_the_alert_stopped_being_active() {
        let firing = AlertRow { alert_id: 5, last_at: 1_000, updated_ns: 2_000, stored_ns: 900, ..Default::default() };
        let resolved = resolved_version(firing.clone(), 50_000);
        assert_eq!(resolved.resolved_at, 1_000 + lm::ACTIVE_WINDOW_NS);
        assert_eq!((resolved.updated_ns, resolved.stored_ns, resolved.last_at), (50_000, 900, 1_000));
        // Another replica, later, with a clock behind the stored version: the same resolution
        // time, still a newer version.
        let again = resolved_version(firing, 1_500);
        assert_eq!((again.resolved_at, again.updated_ns), (resolved.resolved_at, 2_001));
    }

    #[test]
    fn the_alert_id_of_a_new_template_does_not_depend_on_when_or_who() {
        assert_eq!(new_template_id(42), new_template_id(42));
        assert_ne!(new_template_id(42), new_template_id(43));
    }

    #[test]
    fn minute_counts_start_a_lookback_before_the_oldest_clock_on_a_minute() {
        let clock = 100 * MINUTE_NS + 17_000_000_000;
        assert_eq!(counts_since(clock, 90), 10 * MINUTE_NS);
        assert_eq!(counts_since(clock, 100), 0);
        assert_eq!(counts_since(clock, 1_000), 0, "never before time began");
    }

    #[test]
    fn counts_are_grouped_per_service() {
        let c = |service: &str, minute| MinuteCount { service: service.into(), template_id: 1, minute, count: 3 };
        let counts = [c("web", 1), c("db", 1), c("web", 2)];
        let grouped = by_service(&counts);
        assert_eq!(grouped["web"].iter().map(|c| c.minute).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(grouped["db"].len(), 1);
        assert!(!grouped.contains_key("api"));
    }

    #[test]
    fn a_refreshed_alert_keeps_its_first_stored_time() {
        let row = |alert_id, stored_ns| AlertRow { alert_id, stored_ns, ..Default::default() };
        let mut rows = vec![row(1, 500), row(2, 500)];
        keep_first_stored(&mut rows, &[row(1, 100), row(3, 50)]);
        assert_eq!(rows.iter().map(|r| r.stored_ns).collect::<Vec<_>>(), vec![100, 500]);
    }
}
