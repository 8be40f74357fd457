//! The logminer's ledger around a [`Miner`]: what each template looked like when last
//! stored, when it was first and last seen, and which template and hit rows are waiting
//! to be stored. Pure (no I/O): the daemon and `tayga remine` feed it logs and store what
//! [`Book::pending`] shows them.
//!
//! Rows leave the book only when the caller says their insert succeeded
//! ([`Book::stored`]), so an insert that fails, or is abandoned at a timeout, leaves them
//! pending, and the offsets of their records uncommitted (seed 000: offsets are committed
//! only for records whose hits and templates are stored).
//!
//! It lives with the logminer, above `store`, because its pending rows are the store's
//! rows; `src/mine` stays a pure core that imports nothing above it.

use std::collections::{BTreeMap, HashMap};

use crate::mine::{MaskingError, Miner, MiningConfig, StoredTemplate};
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
    /// Templates touched since they were last stored, with the number of the mining that
    /// touched them last.
    dirty: BTreeMap<(String, u64), u64>,
    /// Lines mined so far: numbers the touches in `dirty`.
    minings: u64,
    hits: Vec<HitRow>,
}

/// What one mined log did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mined {
    pub template_id: u64,
    /// The template was born with this log.
    pub new: bool,
}

/// The rows waiting at one moment: every template touched since it was last stored (at
/// its current text and count), and every hit. They stay in the book until
/// [`Book::stored`] is given this view's [`Receipt`].
#[derive(Debug)]
pub struct Pending<'a> {
    pub templates: Vec<TemplateRow>,
    pub hits: &'a [HitRow],
    receipt: Receipt,
}

impl Pending<'_> {
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.hits.is_empty()
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

impl Book {
    pub fn new(config: MiningConfig) -> Result<Book, MaskingError> {
        Ok(Book {
            miner: Miner::new(config)?,
            seen: HashMap::new(),
            dirty: BTreeMap::new(),
            minings: 0,
            hits: Vec::new(),
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
        if let Some(evicted) = result.evicted {
            let key = (service.to_string(), evicted);
            self.seen.remove(&key);
            // Its stored row stays: a later line of that shape is born again with the same id.
            self.dirty.remove(&key);
        }
        let key = (service.to_string(), template_id);
        let seen = self.seen.entry(key.clone()).or_insert(Seen { first_ns: seen_ns, last_ns: seen_ns });
        seen.first_ns = seen.first_ns.min(seen_ns);
        seen.last_ns = seen.last_ns.max(seen_ns);
        self.minings += 1;
        self.dirty.insert(key, self.minings);
        self.hits.push(HitRow { service: service.to_string(), log_id, template_id, time_ns });
        Mined { template_id, new }
    }

    /// Hits waiting to be stored.
    pub fn pending_hits(&self) -> usize {
        self.hits.len()
    }

    /// The rows to store now, stamped `updated_ns = now_ns`. Nothing leaves the book: once
    /// they are stored, pass [`Pending::receipt`] to [`Book::stored`].
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
        Pending { templates, hits: &self.hits, receipt: Receipt { hits: self.hits.len(), minings: self.minings } }
    }

    /// Forgets the rows of the [`Pending`] view `receipt` came from: they are stored. A
    /// template mined again since that view stays pending, at its newer count.
    pub fn stored(&mut self, receipt: Receipt) {
        self.hits.drain(..receipt.hits.min(self.hits.len()));
        self.dirty.retain(|_, touched| *touched > receipt.minings);
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
        self.dirty.retain(|(s, _), _| s != service);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn book() -> Book {
        Book::new(MiningConfig::default()).unwrap()
    }

    fn hit_ids(p: &Pending<'_>) -> Vec<u64> {
        p.hits.iter().map(|h| h.log_id).collect()
    }

    #[test]
    fn new_templates_generalisations_and_hits_become_rows() {
        let mut book = book();
        let a = book.mine("web", 1, 10, "login failed for user alice from host one", 100);
        assert!(a.new);
        let b = book.mine("web", 2, 20, "login failed for user bob from host one", 200);
        assert!(!b.new);
        assert_eq!(a.template_id, b.template_id, "a template keeps its birth id while it generalises");
        let pending = book.pending(300);
        assert_eq!(pending.hits.len(), 2);
        assert_eq!(pending.templates.len(), 1);
        let t = &pending.templates[0];
        assert_eq!((t.count, t.first_seen_ns, t.last_seen_ns), (2, 100, 200));
        assert_eq!(t.template, "login failed for user <*> from host one");
        let receipt = pending.receipt();
        book.stored(receipt);
        assert!(book.pending(400).is_empty(), "nothing is stored twice");
    }

    #[test]
    fn rows_whose_insert_did_not_succeed_stay_pending() {
        let mut book = book();
        book.mine("web", 1, 10, "cache miss for key 17 in 3 ms", 1);
        // An insert that failed or was abandoned: no receipt reaches the book.
        let abandoned = book.pending(2).receipt();
        book.mine("web", 2, 20, "cache miss for key 18 in 4 ms", 3);
        let pending = book.pending(4);
        assert_eq!(hit_ids(&pending), vec![1, 2], "the first hit is offered again, ahead of the newer one");
        assert_eq!(pending.templates[0].count, 2);
        assert_ne!(pending.receipt(), abandoned);
        let receipt = pending.receipt();
        book.stored(receipt);
        assert!(book.pending(5).is_empty());
    }

    #[test]
    fn rows_mined_after_a_view_stay_pending_when_it_is_stored() {
        let mut book = book();
        let first = book.mine("web", 1, 10, "export job finished in 5 s", 1);
        let other = book.mine("db", 2, 20, "vacuum done on table 3", 2);
        let receipt = book.pending(3).receipt();
        book.mine("web", 3, 30, "export job finished in 9 s", 4);
        book.stored(receipt);
        let pending = book.pending(5);
        assert_eq!(hit_ids(&pending), vec![3]);
        let ids: Vec<(&str, u64)> = pending.templates.iter().map(|t| (t.service.as_str(), t.template_id)).collect();
        assert_eq!(ids, vec![("web", first.template_id)], "the db template was stored; the web one was touched again");
        assert_ne!(first.template_id, other.template_id);
        assert_eq!(pending.templates[0].count, 2, "at its newer count");
    }

    #[test]
    fn a_restored_book_mines_like_the_original() {
        let mut original = book();
        original.mine("web", 1, 1, "cache miss for key 17 in 3 ms", 1);
        original.mine("web", 2, 2, "cache miss for key 18 in 4 ms", 2);
        let rows = original.pending(3).templates;
        let mut restored = book();
        restored.restore(rows.clone());
        let m = restored.mine("web", 3, 3, "cache miss for key 99 in 7 ms", 4);
        assert!(!m.new);
        assert_eq!(m.template_id, rows[0].template_id);
        let rows = restored.pending(5).templates;
        assert_eq!((rows[0].count, rows[0].first_seen_ns, rows[0].last_seen_ns), (3, 1, 4));
        restored.remove_service("web");
        assert_eq!(restored.template_count(), 0);
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

    fn flush(book: &mut Book, hits: &mut Vec<u64>, templates: &mut HashMap<(String, u64), u64>, succeeds: bool) {
        let pending = book.pending(0);
        if succeeds {
            hits.extend(pending.hits.iter().map(|h| h.log_id));
            for t in &pending.templates {
                templates.insert((t.service.clone(), t.template_id), t.count);
            }
            let receipt = pending.receipt();
            book.stored(receipt);
        }
    }

    proptest! {
        /// Whatever fails: every hit is stored exactly once after a final successful flush,
        /// in mining order, and the last stored row of each template has its final count.
        #[test]
        fn every_hit_is_stored_once_and_templates_end_at_their_count(steps in prop::collection::vec(step(), 0..60)) {
            let mut book = book();
            let mut stored_hits = Vec::new();
            let mut stored_templates: HashMap<(String, u64), u64> = HashMap::new();
            let mut next_log = 0u64;
            for s in steps {
                match s {
                    Step::Mine { service, shape, n } => {
                        let line = format!("shape{shape} request {n} done");
                        book.mine(&format!("svc{service}"), next_log, next_log, &line, next_log);
                        next_log += 1;
                    }
                    Step::Flush { succeeds } => flush(&mut book, &mut stored_hits, &mut stored_templates, succeeds),
                }
            }
            flush(&mut book, &mut stored_hits, &mut stored_templates, true);
            prop_assert_eq!(stored_hits, (0..next_log).collect::<Vec<_>>());
            for ((service, id), count) in &stored_templates {
                let held = book.miner.templates(service).find(|t| t.id == *id).map(|t| t.count);
                prop_assert_eq!(held, Some(*count));
            }
            prop_assert!(book.pending(0).is_empty());
        }
    }
}
