//! The logminer's ledger around a [`Miner`]: what each template looked like when last
//! stored, when it was first and last seen, and which template and hit rows are waiting
//! to be stored. Pure (no I/O): the daemon and `tayga remine` feed it logs and store what
//! [`TemplateLedger::pending`] shows them.
//!
//! Rows leave the ledger only when the caller says their insert succeeded
//! ([`TemplateLedger::stored`]), so an insert that fails, or is abandoned at a timeout, leaves them
//! pending, and the offsets of their records uncommitted (docs/design.md#identity: offsets are
//! committed only for records whose hits and templates are stored).
//!
//! A sibling merge ([`crate::mine::Change::Merged`], docs/mining.md "Merging and
//! identity") retires templates: their first and last seen fold into the survivor's,
//! their pending rows are dropped, and a merge row per absorbed template is queued with
//! the rows of the same flush. The ledger remembers the merges in force for the services it
//! holds (restored with the templates), so that a chain is resolved when it is written:
//! when a survivor is absorbed in turn, every template it had absorbed is re-pointed at
//! the new survivor, and every stored merge row names a live template. An absorbed
//! template born again (after its survivor was evicted) gets a row naming itself: live.
//!
//! A service whose tree the miner forgets at `drain.max_services` loses nothing unstored:
//! the rows of its templates touched since they were last stored are kept aside (`detached`)
//! until stored, and its merges in force stay, so a template absorbed before the eviction
//! and born again after it still gets its row naming itself.
//!
//! It lives with the logminer, above `store`, because its pending rows are the store's
//! rows; `src/mine` stays a pure core that imports nothing above it.

use std::collections::{BTreeMap, HashMap};

use crate::mine::{EvictedService, MaskingError, Miner, MiningConfig, StoredTemplate};
use crate::store::{HitRow, TemplateMergeRow, TemplateRow};

#[derive(Debug, Clone, Copy)]
struct Seen {
    first_ns: u64,
    last_ns: u64,
}

/// A merge row in force: where an absorbed template's lines go (itself once it was born
/// again), and the row's version.
#[derive(Debug, Clone, Copy)]
struct Merge {
    survivor: u64,
    merged_ns: u64,
}

/// Templates per service with their timestamps, plus the rows not yet stored.
#[derive(Debug)]
pub struct TemplateLedger {
    miner: Miner,
    seen: HashMap<(String, u64), Seen>,
    /// Templates touched since they were last stored, with the number of the mining that
    /// touched them last.
    dirty: BTreeMap<(String, u64), u64>,
    /// Lines mined so far: numbers the touches in `dirty` and `queued`.
    minings: u64,
    hits: Vec<HitRow>,
    /// The merge rows in force for the services held, by (service, absorbed id): loaded
    /// with the templates, then kept up to date. One entry per template ever absorbed.
    merges: HashMap<(String, u64), Merge>,
    /// Merge rows not yet stored, one per absorbed template (a newer version replaces the
    /// older, so the queue is bounded by `merges`), with the mining that queued it.
    queued: BTreeMap<(String, u64), (TemplateMergeRow, u64)>,
    /// Template rows of services the miner forgot (`max_services`) that were not stored yet,
    /// each with the mining that touched it last (`updated_ns` is set when shown).
    detached: Vec<(TemplateRow, u64)>,
}

/// What one mined log did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mined {
    pub template_id: u64,
    /// The template was born with this log.
    pub new: bool,
    /// Templates this log's template absorbed (a sibling merge), 0 mostly.
    pub absorbed: usize,
    /// A template of this service was evicted to make room (`drain.max_clusters`).
    pub evicted_template: bool,
    /// Another service's tree was forgotten to make room (`drain.max_services`), with
    /// this many templates.
    pub evicted_service: Option<usize>,
}

/// The rows waiting at one moment: every template touched since it was last stored (at
/// its current text and count), every merge row, and every hit. They stay in the ledger
/// until [`TemplateLedger::stored`] is given this view's [`Receipt`]. Store them together, merges
/// before templates ([`crate::store::logminer::store_mined`]).
#[derive(Debug)]
pub struct Pending<'a> {
    pub templates: Vec<TemplateRow>,
    pub merges: Vec<TemplateMergeRow>,
    pub hits: &'a [HitRow],
    receipt: Receipt,
}

impl Pending<'_> {
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.merges.is_empty() && self.hits.is_empty()
    }

    /// The view as the store takes it.
    pub fn rows(&self) -> crate::store::logminer::MinedRows<'_> {
        crate::store::logminer::MinedRows { hits: self.hits, merges: &self.merges, templates: &self.templates }
    }

    pub fn receipt(&self) -> Receipt {
        self.receipt
    }
}

/// Names the rows of one [`Pending`] view, to be forgotten once stored. Rows mined after
/// the view stay pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    hits: usize,
    minings: u64,
}

impl TemplateLedger {
    pub fn new(config: MiningConfig) -> Result<TemplateLedger, MaskingError> {
        Ok(TemplateLedger {
            miner: Miner::new(config)?,
            seen: HashMap::new(),
            dirty: BTreeMap::new(),
            minings: 0,
            hits: Vec::new(),
            merges: HashMap::new(),
            queued: BTreeMap::new(),
            detached: Vec::new(),
        })
    }

    /// `masking_version` of the rows this ledger writes.
    pub fn masking_version(&self) -> &str {
        self.miner.masking_version()
    }

    /// Loads stored templates (of this masking version), least recently seen first, as
    /// [`crate::store::logminer::load_templates`] returns them (the live ones), and the
    /// merges in force, as [`crate::store::logminer::load_merges`] returns them.
    pub fn restore(&mut self, rows: Vec<TemplateRow>, merges: Vec<TemplateMergeRow>) {
        for m in merges {
            self.merges.insert((m.service, m.absorbed_id), Merge { survivor: m.survivor_id, merged_ns: m.merged_ns });
        }
        for row in rows {
            let stored = StoredTemplate { id: row.template_id, template: row.template, count: row.count };
            if let Some(evicted) = self.miner.restore(&row.service, stored) {
                self.seen.remove(&(row.service.clone(), evicted));
            }
            self.seen.insert(
                (row.service, row.template_id),
                Seen { first_ns: row.first_seen_ns, last_ns: row.last_seen_ns },
            );
        }
        // Services beyond `max_services` were forgotten as they were restored.
        let miner = &self.miner;
        self.seen.retain(|(service, _), _| miner.holds(service));
    }

    /// Mines one log of `service` whose body is `line`. `seen_ns` is when the template
    /// counts as seen: the daemon passes the time it mined the log (the new-template
    /// watermark is on that clock), `remine` the log's own time.
    pub fn mine(&mut self, service: &str, log_id: u64, time_ns: u64, line: &str, seen_ns: u64) -> Mined {
        let result = self.miner.add(service, line);
        let template_id = result.template_id;
        let new = result.is_new();
        let absorbed = result.absorbed().to_vec();
        let evicted_template = result.evicted_template.clone();
        let evicted_service = result.evicted_service.clone();
        self.minings += 1;
        if let Some(gone) = &evicted_service {
            self.detach(gone);
        }
        // Its stored row stays (and an unstored one is kept until stored): a later line of
        // that shape is born again with the same id.
        if let Some(t) = &evicted_template {
            self.detach(&EvictedService { service: service.to_string(), templates: vec![t.clone()] });
        }
        if new {
            self.born(service, template_id, seen_ns);
        }
        // The survivor never looks newer than what it absorbed.
        let (mut first_ns, mut last_ns) = (seen_ns, seen_ns);
        for &id in &absorbed {
            let key = (service.to_string(), id);
            if let Some(s) = self.seen.remove(&key) {
                first_ns = first_ns.min(s.first_ns);
                last_ns = last_ns.max(s.last_ns);
            }
            self.dirty.remove(&key);
            self.absorb(service, id, template_id, seen_ns);
        }
        let key = (service.to_string(), template_id);
        let seen = self.seen.entry(key.clone()).or_insert(Seen { first_ns, last_ns });
        seen.first_ns = seen.first_ns.min(first_ns);
        seen.last_ns = seen.last_ns.max(last_ns);
        self.dirty.insert(key, self.minings);
        self.hits.push(HitRow { service: service.to_string(), log_id, template_id, time_ns });
        Mined {
            template_id,
            new,
            absorbed: absorbed.len(),
            evicted_template: evicted_template.is_some(),
            evicted_service: evicted_service.map(|g| g.templates.len()),
        }
    }

    /// The miner forgot `gone`'s tree: its unstored template rows are kept aside until
    /// stored, and what the ledger knew of its templates goes (its merges stay).
    fn detach(&mut self, gone: &EvictedService) {
        for t in &gone.templates {
            let key = (gone.service.clone(), t.id);
            let (Some(touched), Some(seen)) = (self.dirty.remove(&key), self.seen.remove(&key)) else {
                continue;
            };
            let row = TemplateRow {
                service: gone.service.clone(),
                template_id: t.id,
                template: t.template.clone(),
                count: t.count,
                first_seen_ns: seen.first_ns,
                last_seen_ns: seen.last_ns,
                masking_version: self.miner.masking_version().to_string(),
                updated_ns: 0,
            };
            self.detached.push((row, touched));
        }
    }

    /// `survivor` absorbed `absorbed`: so did it everything `absorbed` had absorbed (a
    /// chain is resolved here, so a reader needs one lookup).
    fn absorb(&mut self, service: &str, absorbed: u64, survivor: u64, at_ns: u64) {
        let mut chain: Vec<u64> = self
            .merges
            .iter()
            .filter(|((s, id), m)| s == service && m.survivor == absorbed && *id != absorbed)
            .map(|((_, id), _)| *id)
            .collect();
        chain.sort_unstable();
        chain.push(absorbed);
        for id in chain {
            self.point(service, id, survivor, at_ns);
        }
    }

    /// A template was born: if a merge had absorbed it (its survivor was evicted since), it
    /// is live again.
    fn born(&mut self, service: &str, id: u64, at_ns: u64) {
        let key = (service.to_string(), id);
        if self.merges.get(&key).is_some_and(|m| m.survivor != id) {
            self.point(service, id, id, at_ns);
        }
    }

    /// Queues the merge row `id → survivor`, a newer version than any before it.
    fn point(&mut self, service: &str, id: u64, survivor: u64, at_ns: u64) {
        let key = (service.to_string(), id);
        let merged_ns = match self.merges.get(&key) {
            Some(m) => at_ns.max(m.merged_ns.saturating_add(1)),
            None => at_ns,
        };
        self.merges.insert(key.clone(), Merge { survivor, merged_ns });
        let row = TemplateMergeRow {
            service: service.to_string(),
            absorbed_id: id,
            survivor_id: survivor,
            merged_ns,
            masking_version: self.miner.masking_version().to_string(),
        };
        self.queued.insert(key, (row, self.minings));
    }

    /// Hits waiting to be stored.
    pub fn pending_hits(&self) -> usize {
        self.hits.len()
    }

    /// The rows to store now, stamped `updated_ns = now_ns`. Nothing leaves the ledger: once
    /// they are stored, pass [`Pending::receipt`] to [`TemplateLedger::stored`].
    pub fn pending(&self, now_ns: u64) -> Pending<'_> {
        let mut templates = Vec::with_capacity(self.dirty.len());
        for (service, id) in self.dirty.keys() {
            let Some(seen) = self.seen.get(&(service.clone(), *id)) else {
                continue;
            };
            let Some(t) = self.miner.templates(service).find(|t| t.id == *id) else {
                continue;
            };
            templates.push(TemplateRow {
                service: service.clone(),
                template_id: *id,
                template: t.template.to_string(),
                count: t.count,
                first_seen_ns: seen.first_ns,
                last_seen_ns: seen.last_ns,
                masking_version: self.miner.masking_version().to_string(),
                updated_ns: now_ns,
            });
        }
        // A detached row whose template lives again (its service came back) is older than
        // the live one: only the live one is shown.
        for (row, _) in &self.detached {
            if !self.dirty.contains_key(&(row.service.clone(), row.template_id)) {
                templates.push(TemplateRow { updated_ns: now_ns, ..row.clone() });
            }
        }
        let merges = self.queued.values().map(|(row, _)| row.clone()).collect();
        Pending {
            templates,
            merges,
            hits: &self.hits,
            receipt: Receipt { hits: self.hits.len(), minings: self.minings },
        }
    }

    /// Forgets the rows of the [`Pending`] view `receipt` came from: they are stored. A
    /// template mined again since that view stays pending, at its newer count.
    pub fn stored(&mut self, receipt: Receipt) {
        self.hits.drain(..receipt.hits.min(self.hits.len()));
        self.dirty.retain(|_, touched| *touched > receipt.minings);
        self.queued.retain(|_, (_, touched)| *touched > receipt.minings);
        self.detached.retain(|(_, touched)| *touched > receipt.minings);
    }

    /// The current text of a template held for `service`.
    pub fn template_text(&self, service: &str, template_id: u64) -> Option<&str> {
        self.miner.templates(service).find(|t| t.id == template_id).map(|t| t.template)
    }

    /// Templates held for all services.
    pub fn template_count(&self) -> usize {
        self.seen.len()
    }

    /// Services with a tree.
    pub fn service_count(&self) -> usize {
        self.miner.service_count()
    }

    /// Forgets a service (one this replica no longer owns), so memory follows ownership.
    pub fn remove_service(&mut self, service: &str) {
        self.miner.remove_service(service);
        self.seen.retain(|(s, _), _| s != service);
        self.dirty.retain(|(s, _), _| s != service);
        self.merges.retain(|(s, _), _| s != service);
        self.queued.retain(|(s, _), _| s != service);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ledger() -> TemplateLedger {
        TemplateLedger::new(MiningConfig::default()).unwrap()
    }

    fn hit_ids(p: &Pending<'_>) -> Vec<u64> {
        p.hits.iter().map(|h| h.log_id).collect()
    }

    #[test]
    fn evicted_services_and_templates_keep_their_unstored_rows_until_stored() {
        let mut config = MiningConfig::default();
        config.drain.max_services = 2;
        config.drain.max_clusters = 2;
        let mut l = TemplateLedger::new(config).unwrap();
        let mut log = 0;
        let mut mine = |l: &mut TemplateLedger, service: &str, line: &str| {
            log += 1;
            l.mine(service, log, 10, line, 100)
        };
        mine(&mut l, "a", "alpha one");
        mine(&mut l, "a", "beta two three");
        let third = mine(&mut l, "a", "gamma four five six");
        assert!(third.evicted_template, "max_clusters: alpha goes");
        mine(&mut l, "b", "delta seven");
        let c = mine(&mut l, "c", "epsilon eight");
        assert_eq!(c.evicted_service, Some(2), "max_services: a goes with its two templates");
        assert_eq!((l.service_count(), l.template_count()), (2, 2));
        // Nothing was stored yet: every template born has its row, every line its hit.
        let p = l.pending(500);
        let mut texts: Vec<&str> = p.templates.iter().map(|t| t.template.as_str()).collect();
        texts.sort_unstable();
        assert_eq!(texts, ["alpha one", "beta two three", "delta seven", "epsilon eight", "gamma four five six"]);
        assert!(p.templates.iter().all(|t| t.updated_ns == 500));
        assert_eq!(p.hits.len(), 5);
        let receipt = p.receipt();
        l.stored(receipt);
        assert!(l.pending(600).is_empty(), "the kept rows leave once stored");
        // a comes back: born again with the same id, shown once at its new count.
        let again = mine(&mut l, "a", "alpha one");
        assert!(again.new);
        let p = l.pending(700);
        assert_eq!(p.templates.len(), 1);
        assert_eq!((p.templates[0].template.as_str(), p.templates[0].count), ("alpha one", 1));
    }

    #[test]
    fn new_templates_generalisations_and_hits_become_rows() {
        let mut ledger = ledger();
        let a = ledger.mine("web", 1, 10, "login failed for user alice from host one", 100);
        assert!(a.new);
        let b = ledger.mine("web", 2, 20, "login failed for user bob from host one", 200);
        assert!(!b.new);
        assert_eq!(a.template_id, b.template_id, "a template keeps its birth id while it generalises");
        let pending = ledger.pending(300);
        assert_eq!(pending.hits.len(), 2);
        assert_eq!(pending.templates.len(), 1);
        let t = &pending.templates[0];
        assert_eq!((t.count, t.first_seen_ns, t.last_seen_ns), (2, 100, 200));
        assert_eq!(t.template, "login failed for user <*> from host one");
        let receipt = pending.receipt();
        ledger.stored(receipt);
        assert!(ledger.pending(400).is_empty(), "nothing is stored twice");
    }

    #[test]
    fn rows_whose_insert_did_not_succeed_stay_pending() {
        let mut ledger = ledger();
        ledger.mine("web", 1, 10, "cache miss for key 17 in 3 ms", 1);
        // An insert that failed or was abandoned: no receipt reaches the ledger.
        let abandoned = ledger.pending(2).receipt();
        ledger.mine("web", 2, 20, "cache miss for key 18 in 4 ms", 3);
        let pending = ledger.pending(4);
        assert_eq!(hit_ids(&pending), vec![1, 2], "the first hit is offered again, ahead of the newer one");
        assert_eq!(pending.templates[0].count, 2);
        assert_ne!(pending.receipt(), abandoned);
        let receipt = pending.receipt();
        ledger.stored(receipt);
        assert!(ledger.pending(5).is_empty());
    }

    #[test]
    fn rows_mined_after_a_view_stay_pending_when_it_is_stored() {
        let mut ledger = ledger();
        let first = ledger.mine("web", 1, 10, "export job finished in 5 s", 1);
        let other = ledger.mine("db", 2, 20, "vacuum done on table 3", 2);
        let receipt = ledger.pending(3).receipt();
        ledger.mine("web", 3, 30, "export job finished in 9 s", 4);
        ledger.stored(receipt);
        let pending = ledger.pending(5);
        assert_eq!(hit_ids(&pending), vec![3]);
        let ids: Vec<(&str, u64)> = pending.templates.iter().map(|t| (t.service.as_str(), t.template_id)).collect();
        assert_eq!(ids, vec![("web", first.template_id)], "the db template was stored; the web one was touched again");
        assert_ne!(first.template_id, other.template_id);
        assert_eq!(pending.templates[0].count, 2, "at its newer count");
    }

    #[test]
    fn a_restored_book_mines_like_the_original() {
        let mut original = ledger();
        original.mine("web", 1, 1, "cache miss for key 17 in 3 ms", 1);
        original.mine("web", 2, 2, "cache miss for key 18 in 4 ms", 2);
        let rows = original.pending(3).templates;
        let mut restored = ledger();
        restored.restore(rows.clone(), Vec::new());
        let m = restored.mine("web", 3, 3, "cache miss for key 99 in 7 ms", 4);
        assert!(!m.new);
        assert_eq!(m.template_id, rows[0].template_id);
        let rows = restored.pending(5).templates;
        assert_eq!((rows[0].count, rows[0].first_seen_ns, rows[0].last_seen_ns), (3, 1, 4));
        restored.remove_service("web");
        assert_eq!(restored.template_count(), 0);
    }

    fn merging_book(max_clusters: usize) -> TemplateLedger {
        let mut config = MiningConfig::default();
        config.drain.merge_siblings = 5;
        config.drain.max_clusters = max_clusters;
        TemplateLedger::new(config).unwrap()
    }

    fn invalid_user(ledger: &mut TemplateLedger, log_id: u64, user: &str, at: u64) -> Mined {
        ledger.mine("sshd", log_id, at, &format!("Invalid user {user} from 10.0.0.{log_id}"), at)
    }

    fn merge_rows(p: &Pending<'_>) -> Vec<(u64, u64)> {
        p.merges.iter().map(|m| (m.absorbed_id, m.survivor_id)).collect()
    }

    fn store_all(ledger: &mut TemplateLedger) {
        let receipt = ledger.pending(0).receipt();
        ledger.stored(receipt);
    }

    /// Four users, each a template (one name is a quarter of the words), then a fifth: the
    /// merge. Returns the four ids and what the fifth line did.
    fn four_users_then_a_merge(ledger: &mut TemplateLedger, flush_between: bool) -> (Vec<u64>, Mined) {
        let ids: Vec<u64> = ["alice", "bob", "carol", "dave"]
            .iter()
            .enumerate()
            .map(|(i, user)| invalid_user(ledger, i as u64, user, 10 * (i as u64 + 1)).template_id)
            .collect();
        if flush_between {
            store_all(ledger);
        }
        let merged = invalid_user(ledger, 4, "erin", 50);
        (ids, merged)
    }

    #[test]
    fn a_merge_retires_the_absorbed_folds_their_times_and_queues_their_rows() {
        let mut ledger = merging_book(5000);
        let (ids, merged) = four_users_then_a_merge(&mut ledger, true);
        let survivor = *ids.iter().min().unwrap();
        assert_eq!((merged.template_id, merged.new, merged.absorbed), (survivor, false, 3));
        let pending = ledger.pending(60);
        assert_eq!(pending.templates.len(), 1, "only the survivor's row: {:?}", pending.templates);
        let t = &pending.templates[0];
        assert_eq!((t.template_id, t.template.as_str(), t.count), (survivor, "Invalid user <*> from <IP>", 5));
        assert_eq!((t.first_seen_ns, t.last_seen_ns), (10, 50), "the earliest sighting of any of them");
        let mut want: Vec<(u64, u64)> = ids.iter().filter(|&&i| i != survivor).map(|&i| (i, survivor)).collect();
        want.sort_unstable();
        assert_eq!(merge_rows(&pending), want);
        assert!(pending.merges.iter().all(|m| m.merged_ns == 50 && m.masking_version == ledger.masking_version()));
        assert_eq!(ledger.template_count(), 1);
        let receipt = pending.receipt();
        ledger.stored(receipt);
        assert!(ledger.pending(70).is_empty(), "merges leave with the rows they were stored with");
        // An absorbed user's own line joins the survivor.
        let again = invalid_user(&mut ledger, 5, "bob", 80);
        assert_eq!((again.template_id, again.new, again.absorbed), (survivor, false, 0));
        assert!(ledger.pending(90).merges.is_empty());
    }

    #[test]
    fn templates_born_and_absorbed_between_two_flushes_leave_no_row() {
        let mut ledger = merging_book(5000);
        let (ids, merged) = four_users_then_a_merge(&mut ledger, false);
        let pending = ledger.pending(60);
        assert_eq!(pending.templates.iter().map(|t| t.template_id).collect::<Vec<_>>(), vec![merged.template_id]);
        assert_eq!(pending.merges.len(), 3, "their merge rows are stored all the same (harmless)");
        assert_eq!(pending.hits.iter().map(|h| h.template_id).collect::<Vec<_>>()[..4], ids[..], "hits keep their ids");
    }

    #[test]
    fn a_survivor_absorbed_in_turn_takes_its_absorbed_along() {
        let mut ledger = merging_book(5000);
        let (ids, first) = four_users_then_a_merge(&mut ledger, true);
        let s = first.template_id;
        store_all(&mut ledger);
        // Six roles at 10 lines each (more than the survivor's 5), then a seventh: eight
        // siblings that differ in the second word merge whatever their counts, into a role.
        let roles = ["admin", "guest", "root", "oper", "staff", "owner", "tester"];
        let mut log = 100;
        let mut role_ids = Vec::new();
        for role in &roles[..6] {
            for _ in 0..10 {
                log += 1;
                let m = ledger.mine("sshd", log, log, &format!("Invalid {role} zed from 10.0.0.1"), log);
                assert_eq!(m.absorbed, 0, "{role}");
                role_ids.push(m.template_id);
            }
        }
        role_ids.dedup();
        let second = ledger.mine("sshd", 999, 999, "Invalid tester zed from 10.0.0.1", 999);
        assert_eq!(second.absorbed, 6, "the first survivor and five roles");
        let k = second.template_id;
        assert_eq!(k, *role_ids.iter().min().unwrap());
        let pending = ledger.pending(1_000);
        let mut want: Vec<(u64, u64)> = ids.iter().chain(&role_ids).filter(|&&i| i != k).map(|&i| (i, k)).collect();
        want.sort_unstable();
        assert_eq!(merge_rows(&pending), want, "the users absorbed by {s} now point at {k}");
        let users: Vec<u64> = ids.iter().copied().filter(|&i| i != s).collect();
        let repointed: Vec<u64> =
            pending.merges.iter().filter(|m| users.contains(&m.absorbed_id)).map(|m| m.merged_ns).collect();
        assert_eq!(repointed, vec![999; 3], "a newer version than the rows that pointed at {s} (50)");
        assert_eq!(pending.templates.len(), 1);
        assert_eq!(pending.templates[0].count, 5 + 60 + 1);
    }

    #[test]
    fn a_restored_book_resolves_a_later_chain_and_lets_an_absorbed_template_be_born_again() {
        let mut original = merging_book(5000);
        let (ids, merged) = four_users_then_a_merge(&mut original, true);
        let s = merged.template_id;
        let pending = original.pending(60);
        let (rows, merges) = (pending.templates.clone(), pending.merges.clone());
        let mut restored = merging_book(2);
        restored.restore(rows, merges);
        assert_eq!(invalid_user(&mut restored, 5, "bob", 70).template_id, s, "absorbed lines go to the survivor");
        // Two other templates evict the survivor (2 kept); then bob's line is born again
        // under its old id, which is live again.
        restored.mine("sshd", 6, 80, "session opened for root", 80);
        restored.mine("sshd", 7, 90, "connection closed by peer", 90);
        assert!(restored.template_text("sshd", s).is_none(), "evicted");
        let bob = ids[1];
        let again = invalid_user(&mut restored, 8, "bob", 100);
        assert!(again.new);
        assert_eq!(again.template_id, bob);
        let pending = restored.pending(110);
        let row = pending.merges.iter().find(|m| m.absorbed_id == bob).expect("a row for bob");
        assert_eq!((row.survivor_id, row.merged_ns), (bob, 100), "bob names itself: live");
        assert_eq!(pending.merges.len(), 1);
    }

    /// Stored rows as ClickHouse would keep them: the newest version of each key.
    #[derive(Default)]
    struct Stored {
        templates: BTreeMap<(String, u64), TemplateRow>,
        merges: BTreeMap<(String, u64), TemplateMergeRow>,
        hits: Vec<u64>,
    }

    impl Stored {
        fn store(&mut self, p: &Pending<'_>) {
            self.hits.extend(p.hits.iter().map(|h| h.log_id));
            for m in &p.merges {
                let key = (m.service.clone(), m.absorbed_id);
                if self.merges.get(&key).is_none_or(|old| old.merged_ns < m.merged_ns) {
                    self.merges.insert(key, m.clone());
                }
            }
            for t in &p.templates {
                self.templates.insert((t.service.clone(), t.template_id), t.clone());
            }
        }

        /// What a restart loads: live templates (least recently seen first) and merges in force.
        fn load(&self) -> (Vec<TemplateRow>, Vec<TemplateMergeRow>) {
            let retired = |key: &(String, u64)| self.merges.get(key).is_some_and(|m| m.survivor_id != m.absorbed_id);
            let mut live: Vec<TemplateRow> =
                self.templates.iter().filter(|(k, _)| !retired(k)).map(|(_, t)| t.clone()).collect();
            live.sort_by_key(|t| (t.last_seen_ns, t.template_id));
            let merges = self.merges.values().filter(|m| m.survivor_id != m.absorbed_id).cloned().collect();
            (live, merges)
        }
    }

    fn user_line(user: u8, n: u8) -> String {
        const USERS: [&str; 12] =
            ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar"];
        format!("Invalid user {} from 10.0.{n}.1", USERS[user as usize % USERS.len()])
    }

    proptest! {
        /// With merges in the corpus, whatever fails: after a final flush, what is stored
        /// restores a ledger that holds the same live templates and mines every later line as
        /// the original (same ids); every hit is stored once.
        #[test]
        fn what_is_stored_restores_a_book_that_mines_like_the_original(
            steps in prop::collection::vec((0u8..12, any::<u8>(), prop::option::weighted(0.2, any::<bool>())), 1..80),
            later in prop::collection::vec((0u8..12, any::<u8>()), 1..20),
        ) {
            let mut ledger = merging_book(5000);
            let mut stored = Stored::default();
            for (i, (user, n, flush)) in steps.iter().enumerate() {
                ledger.mine("sshd", i as u64, i as u64, &user_line(*user, *n), i as u64);
                if let Some(succeeds) = flush {
                    let pending = ledger.pending(i as u64);
                    if *succeeds {
                        stored.store(&pending);
                        let receipt = pending.receipt();
                        ledger.stored(receipt);
                    }
                }
            }
            let pending = ledger.pending(1_000);
            stored.store(&pending);
            let receipt = pending.receipt();
            ledger.stored(receipt);
            prop_assert_eq!(&stored.hits, &(0..steps.len() as u64).collect::<Vec<_>>());
            let (rows, merges) = stored.load();
            let mut restored = merging_book(5000);
            restored.restore(rows, merges);
            let held = |b: &TemplateLedger| {
                let mut t: Vec<(u64, String, u64)> =
                    b.miner.templates("sshd").map(|t| (t.id, t.template.to_string(), t.count)).collect();
                t.sort();
                t
            };
            prop_assert_eq!(held(&restored), held(&ledger));
            for (j, (user, n)) in later.iter().enumerate() {
                let line = user_line(*user, *n);
                let at = 2_000 + j as u64;
                let a = ledger.mine("sshd", at, at, &line, at);
                let b = restored.mine("sshd", at, at, &line, at);
                prop_assert_eq!(a, b, "{}", line);
            }
        }
    }

    /// A flush as the daemon runs it: a view of what is pending, and its receipt back only
    /// when the insert succeeded.
    #[derive(Debug, Clone)]
    enum Step {
        Mine { service: u8, shape: u8, n: u8 },
        Flush { succeeds: bool },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0u8..3, 0u8..4, any::<u8>()).prop_map(|(service, shape, n)| Step::Mine { service, shape, n }),
            1 => any::<bool>().prop_map(|succeeds| Step::Flush { succeeds }),
        ]
    }

    fn flush(
        ledger: &mut TemplateLedger,
        hits: &mut Vec<u64>,
        templates: &mut HashMap<(String, u64), u64>,
        succeeds: bool,
    ) {
        let pending = ledger.pending(0);
        if succeeds {
            hits.extend(pending.hits.iter().map(|h| h.log_id));
            for t in &pending.templates {
                templates.insert((t.service.clone(), t.template_id), t.count);
            }
            let receipt = pending.receipt();
            ledger.stored(receipt);
        }
    }

    proptest! {
        /// Whatever fails: every hit is stored exactly once after a final successful flush,
        /// in mining order, and the last stored row of each template has its final count.
        #[test]
        fn every_hit_is_stored_once_and_templates_end_at_their_count(steps in prop::collection::vec(step(), 0..60)) {
            let mut ledger = ledger();
            let mut stored_hits = Vec::new();
            let mut stored_templates: HashMap<(String, u64), u64> = HashMap::new();
            let mut next_log = 0u64;
            for s in steps {
                match s {
                    Step::Mine { service, shape, n } => {
                        let line = format!("shape{shape} request {n} done");
                        ledger.mine(&format!("svc{service}"), next_log, next_log, &line, next_log);
                        next_log += 1;
                    }
                    Step::Flush { succeeds } => flush(&mut ledger, &mut stored_hits, &mut stored_templates, succeeds),
                }
            }
            flush(&mut ledger, &mut stored_hits, &mut stored_templates, true);
            prop_assert_eq!(stored_hits, (0..next_log).collect::<Vec<_>>());
            for ((service, id), count) in &stored_templates {
                let held = ledger.miner.templates(service).find(|t| t.id == *id).map(|t| t.count);
                prop_assert_eq!(held, Some(*count));
            }
            prop_assert!(ledger.pending(0).is_empty());
        }
    }
}
