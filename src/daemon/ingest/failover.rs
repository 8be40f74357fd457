//! Which ingest path carries a request (docs/ingest.md, *Failover*: why it is a breaker).
//!
//! Two paths: the broker ("broker") and ClickHouse directly ("direct"). A path that fails
//! is marked down and skipped; only the background probe brings it back, and not before its
//! cooldown has passed, so a client's request never pays to rediscover a dead path. The
//! broker starts down-until-probed: the log is probed before it is published to. The
//! policy orders the paths; it never removes one. While the backlog of direct writes is
//! being replayed, new requests keep to the direct path (and the backlog) so that the
//! topics receive every record in the order it was accepted; once the backlog is drained
//! the broker takes over. Pure state: time comes in as arguments.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::PipelinePolicy;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    Broker,
    Direct,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathState {
    Up,
    /// Failed at `since`; skipped until a probe succeeds after the cooldown.
    Down {
        since: Instant,
    },
    /// Never probed yet (the broker at boot).
    Unprobed,
}

#[derive(Debug, Clone)]
pub struct Failover {
    policy: PipelinePolicy,
    cooldown: Duration,
    broker: PathState,
    direct: PathState,
    /// Direct writes are waiting to be replayed to the topics.
    backlog_pending: bool,
    /// The backlog is at its bound: a direct write would no longer be kept.
    backlog_full: bool,
}

/// What `/health` reports under `ingest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    pub policy: PipelinePolicy,
    /// The path the next request takes, "none" when both are down, "starting" before the
    /// start-up probe answered (requests wait for it).
    pub using: &'static str,
    pub broker: &'static str,
    pub direct: &'static str,
}

impl Failover {
    pub fn new(policy: PipelinePolicy, cooldown: Duration) -> Failover {
        Failover {
            policy,
            cooldown,
            broker: PathState::Unprobed,
            direct: PathState::Up,
            backlog_pending: false,
            backlog_full: false,
        }
    }

    fn state(&self, path: Path) -> PathState {
        match path {
            Path::Broker => self.broker,
            Path::Direct => self.direct,
        }
    }

    fn set(&mut self, path: Path, state: PathState) {
        match path {
            Path::Broker => self.broker = state,
            Path::Direct => self.direct = state,
        }
    }

    /// The preference order: `direct` pins direct first; `auto` and `broker` prefer the
    /// log, except while a backlog is replayed through a working direct path.
    pub fn preference(&self) -> [Path; 2] {
        match self.policy {
            PipelinePolicy::Direct => [Path::Direct, Path::Broker],
            PipelinePolicy::Auto | PipelinePolicy::Broker if self.replaying() && !self.backlog_full => {
                [Path::Direct, Path::Broker]
            }
            PipelinePolicy::Auto | PipelinePolicy::Broker => [Path::Broker, Path::Direct],
        }
    }

    /// Whether direct writes wait to be replayed.
    pub fn backlog_pending(&self) -> bool {
        self.backlog_pending
    }

    pub fn set_backlog_pending(&mut self, pending: bool) {
        self.backlog_pending = pending;
    }

    /// A full backlog could not keep a direct write, so new requests go to the broker even
    /// while it replays (their order is lost, their records are not).
    pub fn set_backlog_full(&mut self, full: bool) {
        self.backlog_full = full;
    }

    /// The backlog is being replayed: both paths work and records wait.
    pub fn replaying(&self) -> bool {
        self.backlog_pending && self.is_up(Path::Broker) && self.is_up(Path::Direct)
    }

    /// Before the start-up probe answered.
    pub fn starting(&self) -> bool {
        self.broker == PathState::Unprobed
    }

    /// The paths a request may try, in order; empty means refuse at once (503).
    pub fn usable(&self) -> Vec<Path> {
        self.preference().into_iter().filter(|p| self.state(*p) == PathState::Up).collect()
    }

    /// A request failed on `path`: skip it from now on.
    pub fn failed(&mut self, path: Path, now: Instant) {
        if !matches!(self.state(path), PathState::Down { .. }) {
            self.set(path, PathState::Down { since: now });
        }
    }

    /// Paths the probe should check now: down ones whose cooldown has passed, and the
    /// broker before its first probe.
    pub fn due_for_probe(&self, now: Instant) -> Vec<Path> {
        [Path::Broker, Path::Direct]
            .into_iter()
            .filter(|p| match self.state(*p) {
                PathState::Up => false,
                PathState::Unprobed => true,
                PathState::Down { since } => now.duration_since(since) >= self.cooldown,
            })
            .collect()
    }

    /// The probe's answer for `path`. A failed probe restarts the cooldown.
    pub fn probed(&mut self, path: Path, ok: bool, now: Instant) {
        self.set(path, if ok { PathState::Up } else { PathState::Down { since: now } });
    }

    pub fn is_up(&self, path: Path) -> bool {
        self.state(path) == PathState::Up
    }

    pub fn health(&self) -> Health {
        let word = |p: Path| if self.is_up(p) { "up" } else { "down" };
        Health {
            policy: self.policy,
            using: match self.usable().first() {
                _ if self.starting() => "starting",
                Some(Path::Broker) => "broker",
                Some(Path::Direct) => "direct",
                None => "none",
            },
            broker: word(Path::Broker),
            direct: word(Path::Direct),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOLDOWN: Duration = Duration::from_secs(30);

    #[test]
    fn the_broker_is_probed_before_it_is_published_to() {
        let now = Instant::now();
        let mut f = Failover::new(PipelinePolicy::Auto, COOLDOWN);
        assert!(f.starting());
        assert_eq!(f.health().using, "starting");
        assert_eq!(f.due_for_probe(now), vec![Path::Broker]);
        f.probed(Path::Broker, true, now);
        assert_eq!(f.usable(), vec![Path::Broker, Path::Direct]);
        assert_eq!(f.health().using, "broker");
    }

    #[test]
    fn a_failed_path_is_skipped_until_a_probe_after_the_cooldown() {
        let t0 = Instant::now();
        let mut f = Failover::new(PipelinePolicy::Auto, COOLDOWN);
        f.probed(Path::Broker, true, t0);
        f.failed(Path::Broker, t0);
        assert_eq!(f.usable(), vec![Path::Direct], "the next request goes straight to direct");
        assert!(f.due_for_probe(t0 + COOLDOWN / 2).is_empty(), "no probe inside the cooldown");
        assert_eq!(f.due_for_probe(t0 + COOLDOWN), vec![Path::Broker]);
        f.probed(Path::Broker, false, t0 + COOLDOWN);
        assert!(f.due_for_probe(t0 + COOLDOWN + COOLDOWN / 2).is_empty(), "a failed probe restarts the cooldown");
        f.probed(Path::Broker, true, t0 + 2 * COOLDOWN);
        assert_eq!(f.usable()[0], Path::Broker);
    }

    #[test]
    fn both_down_means_refuse_at_once() {
        let t0 = Instant::now();
        let mut f = Failover::new(PipelinePolicy::Broker, COOLDOWN);
        f.probed(Path::Broker, false, t0);
        f.failed(Path::Direct, t0);
        assert!(f.usable().is_empty());
        assert_eq!(
            f.health(),
            Health { policy: PipelinePolicy::Broker, using: "none", broker: "down", direct: "down" }
        );
    }

    #[test]
    fn the_policy_orders_paths_but_never_removes_one() {
        let t0 = Instant::now();
        let mut f = Failover::new(PipelinePolicy::Direct, COOLDOWN);
        f.probed(Path::Broker, true, t0);
        assert_eq!(f.usable(), vec![Path::Direct, Path::Broker]);
        f.failed(Path::Direct, t0);
        assert_eq!(f.usable(), vec![Path::Broker], "pinned direct still fails over to the log");
    }

    #[test]
    fn a_pending_backlog_keeps_new_requests_direct_until_it_is_replayed() {
        let t0 = Instant::now();
        let mut f = Failover::new(PipelinePolicy::Auto, COOLDOWN);
        f.probed(Path::Broker, false, t0);
        f.set_backlog_pending(true);
        assert!(!f.replaying(), "nothing replays while the broker is down");
        assert_eq!(f.usable(), vec![Path::Direct]);
        f.probed(Path::Broker, true, t0 + COOLDOWN);
        assert!(f.replaying());
        assert_eq!(f.usable(), vec![Path::Direct, Path::Broker], "the topics get the backlog first");
        assert_eq!(f.health().using, "direct");
        f.set_backlog_full(true);
        assert_eq!(f.usable(), vec![Path::Broker, Path::Direct], "a full backlog cannot keep new requests");
        assert!(f.replaying());
        f.set_backlog_full(false);
        f.failed(Path::Direct, t0 + COOLDOWN);
        assert_eq!(f.usable(), vec![Path::Broker], "with ClickHouse down the broker takes everything");
        f.probed(Path::Direct, true, t0 + 2 * COOLDOWN);
        f.set_backlog_pending(false);
        assert_eq!(f.usable(), vec![Path::Broker, Path::Direct], "drained: the broker takes over");
    }

    #[test]
    fn health_names_the_leg_in_use_and_each_path_state() {
        let mut f = Failover::new(PipelinePolicy::Auto, COOLDOWN);
        f.probed(Path::Broker, true, Instant::now());
        assert_eq!(
            serde_json::to_string(&f.health()).unwrap(),
            r#"{"policy":"auto","using":"broker","broker":"up","direct":"up"}"#
        );
    }
}
