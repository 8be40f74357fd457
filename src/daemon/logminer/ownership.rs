//! What a replica holds (docs/design.md#logminer-ownership): the partitions assigned to
//! it, the services it owns (those whose logs it mined within the ownership window), and
//! per partition the data clock the spike and silence rules judge by. Pure: the loop
//! tells it what was mined and what the group changed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Owned {
    last_mined: Instant,
    partition: i32,
    /// Its active spikes were restored from `log_alerts` (done once per takeover).
    restored: bool,
}

#[derive(Debug, Default)]
pub struct Ownership {
    assigned: BTreeSet<i32>,
    owned: HashMap<String, Owned>,
    /// Per partition, the newest log time read from it (capped at the wall clock): the
    /// "now" of the spike and silence rules for its services.
    clocks: BTreeMap<i32, u64>,
}

impl Ownership {
    /// Partitions added by the group. What a replica knew of its services may be stale
    /// (another replica may have mined them meanwhile), so owned services and clocks start
    /// afresh; they come back as logs are mined. Returns every assigned partition.
    pub fn assign(&mut self, partitions: &[i32]) -> Vec<i32> {
        self.assigned.extend(partitions.iter().copied());
        self.owned.clear();
        self.clocks.clear();
        self.partitions()
    }

    /// Partitions taken away: their services and clocks go with them.
    pub fn revoke(&mut self, partitions: &[i32]) {
        for p in partitions {
            self.assigned.remove(p);
            self.clocks.remove(p);
        }
        self.owned.retain(|_, o| !partitions.contains(&o.partition));
    }

    pub fn partitions(&self) -> Vec<i32> {
        self.assigned.iter().copied().collect()
    }

    /// Whether the partition a record keyed `key` goes to (of `partitions`) is assigned
    /// here. A root service's endpoints are judged by the replica holding the partition its
    /// logs go to, whether or not it logs: exactly one replica outside a hand-over.
    pub fn holds_key(&self, key: &str, partitions: i32) -> bool {
        partitions > 0 && self.assigned.contains(&crate::bus::packed::plan::partition_for(key.as_bytes(), partitions))
    }

    /// A log of `service` with log time `time_ns` was mined from `partition` at `at`
    /// (wall clock `now_ns`): the service is owned, and the partition's clock moves on,
    /// never past the wall clock.
    pub fn mined(&mut self, service: &str, partition: i32, time_ns: u64, now_ns: u64, at: Instant) {
        let clock = self.clocks.entry(partition).or_insert(0);
        *clock = (*clock).max(time_ns.min(now_ns));
        match self.owned.get_mut(service) {
            Some(o) => {
                o.last_mined = at;
                o.partition = partition;
            }
            None => {
                self.owned.insert(service.to_string(), Owned { last_mined: at, partition, restored: false });
            }
        }
    }

    /// Drops the services not mined within `window` before `at`, and returns them: they
    /// are owned again once they log again.
    pub fn expire(&mut self, window: Duration, at: Instant) -> Vec<String> {
        let mut expired: Vec<String> = self
            .owned
            .iter()
            .filter(|(_, o)| at.saturating_duration_since(o.last_mined) > window)
            .map(|(s, _)| s.clone())
            .collect();
        expired.sort();
        for service in &expired {
            self.owned.remove(service);
        }
        expired
    }

    /// The owned services, sorted: the filter of every alert-raising query.
    pub fn services(&self) -> Vec<String> {
        let mut s: Vec<String> = self.owned.keys().cloned().collect();
        s.sort();
        s
    }

    pub fn owned_count(&self) -> usize {
        self.owned.len()
    }

    /// The data clock of an owned service: its partition's.
    pub fn clock_of(&self, service: &str) -> Option<u64> {
        let o = self.owned.get(service)?;
        self.clocks.get(&o.partition).copied()
    }

    /// Services taken over whose active spikes are not restored yet, sorted.
    pub fn unrestored(&self) -> Vec<String> {
        let mut s: Vec<String> = self.owned.iter().filter(|(_, o)| !o.restored).map(|(s, _)| s.clone()).collect();
        s.sort();
        s
    }

    pub fn mark_restored(&mut self, services: &[String]) {
        for service in services {
            if let Some(o) = self.owned.get_mut(service) {
                o.restored = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn a_service_is_owned_from_its_first_mined_log_on_its_partitions_clock() {
        let mut o = Ownership::default();
        assert_eq!(o.assign(&[3, 1]), vec![1, 3]);
        let t0 = Instant::now();
        o.mined("web", 1, 500, 1_000, t0);
        o.mined("web", 1, 300, 1_000, t0);
        o.mined("db", 3, 5_000, 1_000, t0);
        assert_eq!(o.services(), vec!["db", "web"]);
        assert_eq!(o.clock_of("web"), Some(500), "the newest log time");
        assert_eq!(o.clock_of("db"), Some(1_000), "never past the wall clock");
        assert_eq!(o.clock_of("api"), None);
    }

    #[test]
    fn a_service_not_mined_within_the_window_drops_out_until_it_logs_again() {
        let mut o = Ownership::default();
        o.assign(&[0]);
        let t0 = Instant::now();
        o.mined("quiet", 0, 1, 10, t0);
        o.mined("busy", 0, 2, 10, t0);
        o.mined("busy", 0, 3, 10, t0 + 50 * MIN);
        assert!(o.expire(60 * MIN, t0 + 60 * MIN).is_empty(), "exactly the window is still owned");
        assert_eq!(o.expire(60 * MIN, t0 + 61 * MIN), vec!["quiet"]);
        assert_eq!(o.services(), vec!["busy"]);
        o.mined("quiet", 0, 4, 10, t0 + 62 * MIN);
        assert_eq!(o.services(), vec!["busy", "quiet"]);
    }

    #[test]
    fn a_revoke_takes_the_partitions_services_and_clocks() {
        let mut o = Ownership::default();
        o.assign(&[0, 1]);
        let t0 = Instant::now();
        o.mined("web", 0, 10, 100, t0);
        o.mined("db", 1, 20, 100, t0);
        o.revoke(&[0]);
        assert_eq!(o.partitions(), vec![1]);
        assert_eq!(o.services(), vec!["db"]);
        assert_eq!(o.clock_of("db"), Some(20));
    }

    #[test]
    fn a_service_that_moved_partition_follows_its_newest_one() {
        let mut o = Ownership::default();
        o.assign(&[0, 1]);
        let t0 = Instant::now();
        o.mined("web", 0, 10, 100, t0);
        o.mined("web", 1, 50, 100, t0);
        o.revoke(&[0]);
        assert_eq!(o.services(), vec!["web"]);
        assert_eq!(o.clock_of("web"), Some(50));
    }

    #[test]
    fn an_assignment_starts_services_and_clocks_afresh() {
        let mut o = Ownership::default();
        o.assign(&[0]);
        o.mined("web", 0, 10, 100, Instant::now());
        assert_eq!(o.assign(&[1]), vec![0, 1]);
        assert!(o.services().is_empty());
        assert_eq!(o.owned_count(), 0);
    }

    #[test]
    fn a_key_is_held_by_the_replica_assigned_its_partition_only() {
        let partition = crate::bus::packed::plan::partition_for(b"checkout", 12);
        let (mut mine, mut other) = (Ownership::default(), Ownership::default());
        mine.assign(&[partition]);
        other.assign(&(0..12).filter(|p| *p != partition).collect::<Vec<_>>());
        assert!(mine.holds_key("checkout", 12));
        assert!(!other.holds_key("checkout", 12));
        assert!(!mine.holds_key("checkout", 0), "no partition count known: nothing is held");
    }

    #[test]
    fn spikes_are_restored_once_per_takeover() {
        let mut o = Ownership::default();
        o.assign(&[0]);
        let t0 = Instant::now();
        o.mined("web", 0, 10, 100, t0);
        o.mined("db", 0, 10, 100, t0);
        assert_eq!(o.unrestored(), vec!["db", "web"]);
        o.mark_restored(&["db".to_string(), "gone".to_string()]);
        assert_eq!(o.unrestored(), vec!["web"]);
        o.mined("db", 0, 11, 100, t0);
        assert_eq!(o.unrestored(), vec!["web"], "still the same takeover");
        o.assign(&[1]);
        o.mined("db", 1, 12, 100, t0);
        assert_eq!(o.unrestored(), vec!["db"], "a new assignment is a new takeover");
    }
}
