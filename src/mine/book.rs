//! The logminer's ledger around a [`Miner`]: what each template looked like when last
//! stored, when it was first and last seen, and which template and hit rows are waiting
//! to be stored. Pure (no I/O): the daemon and `tayga remine` feed it logs and store what
//! [`Book::take_pending`] hands them.

use std::collections::{BTreeSet, HashMap};

use super::{MaskingError, Miner, MiningConfig, StoredTemplate};
use crate::store::{HitRow, TemplateRow};

#[derive(Debug, Clone, Copy)]
struct Seen {
    first_ns: u64,
    last_ns: u64,
}

/// Templates per service with their timestamps, plus the rows not yet stored.
#[derive(Debug)]
pub struct Book {
    miner: Miner,
    seen: HashMap<(String, u64), Seen>,
    dirty: BTreeSet<(String, u64)>,
    hits: Vec<HitRow>,
    merges: Vec<Merge>,
}

/// Most merges kept waiting for [`Book::take_merges`].
const MAX_PENDING_MERGES: usize = 10_000;

/// Templates found to be one (see [`crate::mine::Change::Merged`]): `absorbed` no longer
/// exist, their lines and counts are `survivor`'s from now on. What the store must do
/// with it is in docs/mining.md, *Merging and identity*.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    pub service: String,
    pub survivor: u64,
    pub absorbed: Vec<u64>,
    /// The `seen_ns` of the log that merged them.
    pub merged_ns: u64,
}

/// What one mined log did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mined {
    pub template_id: u64,
    /// The template was born with this log.
    pub new: bool,
}

impl Book {
    pub fn new(config: MiningConfig) -> Result<Book, MaskingError> {
        Ok(Book {
            miner: Miner::new(config)?,
            seen: HashMap::new(),
            dirty: BTreeSet::new(),
            hits: Vec::new(),
            merges: Vec::new(),
        })
    }

    /// `masking_version` of the rows this book writes.
    pub fn masking_version(&self) -> &str {
        self.miner.masking_version()
    }

    /// Loads stored templates (of this masking version), least recently seen first, as
    /// [`crate::store::logminer::load_templates`] returns them.
    pub fn restore(&mut self, rows: Vec<TemplateRow>) {
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
    }

    /// Mines one log of `service` whose body is `line`. `seen_ns` is when the template
    /// counts as seen: the daemon passes the time it mined the log (the new-template
    /// watermark is on that clock), `remine` the log's own time.
    pub fn mine(&mut self, service: &str, log_id: u64, time_ns: u64, line: &str, seen_ns: u64) -> Mined {
        let result = self.miner.add(service, line);
        let template_id = result.template_id;
        let new = result.is_new();
        let evicted = result.evicted;
        if let Some(evicted) = evicted {
            let key = (service.to_string(), evicted);
            self.seen.remove(&key);
            // Its stored row stays: a later line of that shape is born again with the same id.
            self.dirty.remove(&key);
        }
        let absorbed = result.absorbed().to_vec();
        let key = (service.to_string(), template_id);
        let seen = self.seen.entry(key.clone()).or_insert(Seen { first_ns: seen_ns, last_ns: seen_ns });
        seen.first_ns = seen.first_ns.min(seen_ns);
        seen.last_ns = seen.last_ns.max(seen_ns);
        if !absorbed.is_empty() {
            // The survivor was first seen when the first of them was.
            let mut folded = *seen;
            for id in &absorbed {
                let gone = (service.to_string(), *id);
                if let Some(s) = self.seen.remove(&gone) {
                    folded.first_ns = folded.first_ns.min(s.first_ns);
                    folded.last_ns = folded.last_ns.max(s.last_ns);
                }
                self.dirty.remove(&gone);
            }
            self.seen.insert(key.clone(), folded);
            if self.merges.len() >= MAX_PENDING_MERGES {
                // Until a caller takes them (today's logminer does not), the oldest go:
                // memory stays bounded, and a lost merge only leaves absorbed rows live.
                self.merges.drain(..MAX_PENDING_MERGES / 10);
            }
            self.merges.push(Merge {
                service: service.to_string(),
                survivor: template_id,
                absorbed,
                merged_ns: seen_ns,
            });
        }
        self.dirty.insert(key);
        self.hits.push(HitRow { service: service.to_string(), log_id, template_id, time_ns });
        Mined { template_id, new }
    }

    /// The merges since the last call, oldest first: store them with (before) the
    /// template rows of the same [`Book::take_pending`]. Put them back with
    /// [`Book::restore_merges`] if storing fails.
    pub fn take_merges(&mut self) -> Vec<Merge> {
        std::mem::take(&mut self.merges)
    }

    /// Returns merges from a failed [`Book::take_merges`], ahead of newer ones.
    pub fn restore_merges(&mut self, merges: Vec<Merge>) {
        let newer = std::mem::replace(&mut self.merges, merges);
        self.merges.extend(newer);
    }

    /// Hits waiting to be stored.
    pub fn pending_hits(&self) -> usize {
        self.hits.len()
    }

    /// The rows to store: every template touched since the last call (at its current text
    /// and count) and every hit. Put them back with [`Book::restore_pending`] if storing
    /// fails.
    pub fn take_pending(&mut self, now_ns: u64) -> (Vec<TemplateRow>, Vec<HitRow>) {
        let dirty = std::mem::take(&mut self.dirty);
        let mut rows = Vec::with_capacity(dirty.len());
        for (service, id) in &dirty {
            let Some(seen) = self.seen.get(&(service.clone(), *id)) else {
                continue;
            };
            let Some(t) = self.miner.templates(service).find(|t| t.id == *id) else {
                continue;
            };
            rows.push(TemplateRow {
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
        (rows, std::mem::take(&mut self.hits))
    }

    /// Returns rows from a failed [`Book::take_pending`], to be taken again.
    pub fn restore_pending(&mut self, templates: Vec<TemplateRow>, hits: Vec<HitRow>) {
        for t in templates {
            self.dirty.insert((t.service, t.template_id));
        }
        let newer = std::mem::replace(&mut self.hits, hits);
        self.hits.extend(newer);
    }

    /// The current text of a template held for `service`.
    pub fn template_text(&self, service: &str, template_id: u64) -> Option<&str> {
        self.miner.templates(service).find(|t| t.id == template_id).map(|t| t.template)
    }

    /// Templates held for all services.
    pub fn template_count(&self) -> usize {
        self.seen.len()
    }

    /// Forgets a service (one this replica no longer owns), so memory follows ownership.
    pub fn remove_service(&mut self, service: &str) {
        self.miner.remove_service(service);
        self.seen.retain(|(s, _), _| s != service);
        self.dirty.retain(|(s, _)| s != service);
        self.merges.retain(|m| m.service != service);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_templates_generalisations_and_hits_become_rows() {
        let mut book = Book::new(MiningConfig::default()).unwrap();
        let a = book.mine("web", 1, 10, "login failed for user alice from host one", 100);
        assert!(a.new);
        let b = book.mine("web", 2, 20, "login failed for user bob from host one", 200);
        assert!(!b.new);
        assert_eq!(a.template_id, b.template_id, "a template keeps its birth id while it generalises");
        let (templates, hits) = book.take_pending(300);
        assert_eq!(hits.len(), 2);
        assert_eq!(templates.len(), 1);
        let t = &templates[0];
        assert_eq!((t.count, t.first_seen_ns, t.last_seen_ns), (2, 100, 200));
        assert_eq!(t.template, "login failed for user <*> from host one");
        assert_eq!(book.take_pending(400), (Vec::new(), Vec::new()), "nothing is stored twice");

        // A failed store puts the rows back, ahead of newer hits.
        let c = book.mine("web", 3, 30, "login failed for user carol from host one", 300);
        let (templates, hits) = book.take_pending(500);
        book.mine("web", 4, 40, "login failed for user dave from host one", 400);
        book.restore_pending(templates, hits);
        let (templates, hits) = book.take_pending(600);
        assert_eq!(hits.iter().map(|h| h.log_id).collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(templates.len(), 1);
        assert_eq!(templates[0].template_id, c.template_id);
        assert_eq!(templates[0].count, 4);
    }

    #[test]
    fn a_merge_folds_the_absorbed_into_the_survivor_and_is_handed_over() {
        let mut book = Book::new(MiningConfig::default()).unwrap();
        let users = ["alice", "bob", "carol", "dave"];
        let ids: Vec<u64> = users
            .iter()
            .enumerate()
            .map(|(i, u)| {
                book.mine("web", i as u64, 0, &format!("Invalid user {u} from 10.0.0.1"), 100 + i as u64).template_id
            })
            .collect();
        // Stored once before the merge, as a flush between lines would.
        let (rows, _) = book.take_pending(200);
        assert_eq!(rows.len(), 4);
        let m = book.mine("web", 9, 0, "Invalid user erin from 10.0.0.1", 300);
        assert!(!m.new, "a merge is never announced");
        let merges = book.take_merges();
        assert_eq!(merges.len(), 1);
        let merge = &merges[0];
        assert_eq!((merge.service.as_str(), merge.survivor, merge.merged_ns), ("web", m.template_id, 300));
        let mut absorbed: Vec<u64> = ids.iter().copied().filter(|&i| i != m.template_id).collect();
        absorbed.sort_unstable();
        assert_eq!(merge.absorbed, absorbed);
        let (rows, hits) = book.take_pending(400);
        assert_eq!(hits.len(), 1);
        assert_eq!(rows.len(), 1, "only the survivor's row: {rows:?}");
        let t = &rows[0];
        assert_eq!((t.template_id, t.count, t.first_seen_ns, t.last_seen_ns), (m.template_id, 5, 100, 300));
        assert_eq!(t.template, "Invalid user <*> from <IP>");
        assert_eq!(book.template_count(), 1);
        // A failed store puts the merges back ahead of newer ones.
        book.restore_merges(merges.clone());
        assert_eq!(book.take_merges(), merges);
    }

    #[test]
    fn a_restored_book_mines_like_the_original() {
        let mut original = Book::new(MiningConfig::default()).unwrap();
        original.mine("web", 1, 1, "cache miss for key 17 in 3 ms", 1);
        original.mine("web", 2, 2, "cache miss for key 18 in 4 ms", 2);
        let (rows, _) = original.take_pending(3);
        let mut restored = Book::new(MiningConfig::default()).unwrap();
        restored.restore(rows.clone());
        let m = restored.mine("web", 3, 3, "cache miss for key 99 in 7 ms", 4);
        assert!(!m.new);
        assert_eq!(m.template_id, rows[0].template_id);
        let (rows, _) = restored.take_pending(5);
        assert_eq!((rows[0].count, rows[0].first_seen_ns, rows[0].last_seen_ns), (3, 1, 4));
        restored.remove_service("web");
        assert_eq!(restored.template_count(), 0);
    }
}
