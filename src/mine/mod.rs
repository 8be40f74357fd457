//! Log template mining: masking, then Drain, one template tree per service.
//!
//! Pure code, no I/O: the logminer feeds lines in and persists what comes out; `tayga
//! mine` does the same over a file. Everything here is deterministic: the same lines in
//! the same order give the same templates and ids on any machine and in any process.
//!
//! # Pipeline
//!
//! 1. [`Masker`] replaces variables it can recognise by shape (numbers, IPs, host:port,
//!    ids, hex, UUIDs, paths, URLs, e-mails, durations, sizes, `key=value` values) with
//!    placeholders such as `<NUM>` and `<IP>`, inside tokens as well as whole ones.
//! 2. The masked line is split on whitespace and mined by a Drain tree (He et al., ICWS
//!    2017): routed by token count and its first `depth - 2` tokens to a leaf, compared
//!    with the leaf's templates, joined to the most similar one at or above `sim_th`, or
//!    made a new template.
//!
//! # Where this differs from Drain / Drain3
//!
//! - **Similarity ignores wildcards.** Drain3 scores a line by the share of *all*
//!   template tokens it repeats, so each `<*>` a template learns makes it harder to join
//!   and a mature template starts rejecting its own lines. Here the ratio is over the
//!   template's constant tokens.
//! - **Both branches are searched.** At every tree level a line looks in the branch of its
//!   own token and in the `<*>` branch.
//! - **Values are no evidence.** Tokens that are only placeholders and punctuation
//!   (`<NUM>`, `<IP>:<NUM>`) must match but do not count towards similarity, and two
//!   values that differ (`<NUM>` / `<HEX>`, `rhost=<IP>` / `rhost=<HOST>`) count neither
//!   way; such tokens also route through the `<*>` branch. Short lines of numbers no
//!   longer merge whatever their words say.
//! - **Settings split.** A `key=word` token (`user=root`, `status=FAILED`) that differs
//!   rejects the template: the masker leaves such values alone because they name the
//!   event, and Drain would otherwise wildcard them.
//! - **Gaps.** A template may hold `<...>`: any number of tokens, made only of values and
//!   units. It is learnt when a line of another length aligns with a template except for
//!   such a stretch (`bytes sent` / `bytes (1.36 KB) sent`, `lifetime 00:05` /
//!   `lifetime <1 sec`); a stretch holding a word never becomes a gap.
//! - **Partial wildcards.** When two tokens differ, the punctuation they share at either
//!   end stays: `(alpha)` and `(beta)` generalise to `(<*>)`, `user=root` and
//!   `user=guest` to `user=<*>`.
//! - **The tree is a function of the templates.** A token that finds its tree node full
//!   (`max_children`) becomes a wildcard in the template it creates, instead of only being
//!   routed through the `<*>` branch; together with id-based tie-breaking this is what
//!   makes [`Miner::restore`] exact.
//!
//! - **Sibling merge.** Drain's fixed threshold cannot see a variable in a short line:
//!   in `Invalid user alice from <IP>` one unmasked name is a quarter of the words. So
//!   when a line would be born as a new template, the templates of its length that agree
//!   with it on every token but the same one or two positions are looked at: enough of
//!   them, with the counts of a variable, and they become one template with a wildcard
//!   there (see *Merging*). Words that differ only in their digits (`dn228`, `dn31`) are
//!   no evidence against a match to begin with.
//!
//! # Merging
//!
//! A line that finds no template, and would be born, first looks for siblings: templates
//! of its length (without gaps) that differ from it in the same one position (two
//! positions need one sibling more), never in the first word or a value before it
//! (Drain's premise: that is the message's subject, `cupsd startup succeeded`, also when
//! a time comes first). They merge when they are at least
//! `merge_siblings` (the line included) and either
//!
//! - most of their lines came with a value seen once (Good-Turing: the share of lines
//!   whose template holds one line, the line included, is at least `merge_ratio`): a
//!   variable keeps bringing new values, while a few events that differ in one word
//!   (`VM Started`, `VM Stopped`; `GET`, `POST`) soon repeat; or
//! - they are at least `merge_values`, whatever their counts: events that differ in one
//!   word come in handfuls, hosts and users by the dozen.
//!
//! The sibling with the most lines (then the smaller id) **survives**: it keeps its id,
//! its text generalises over the others and the line, and its count becomes the sum of
//! theirs plus one. The others are **absorbed**: removed, their ids listed in
//! [`Change::Merged`]. The line's own template is never born, so a merge announces
//! nothing and loses no count. The decision reads only template texts, counts and ids,
//! so a restored miner merges exactly as the original would, and replaying the same
//! lines (remine) gives the same merges and ids. The caller retires the absorbed ids
//! (docs/mining.md, *Merging and identity*, says what the logminer stores).
//!
//! A template whose text generalises the ordinary way also absorbs the templates of its
//! length it now covers (every token of theirs matches its item), reported the same way
//! with it as the survivor: otherwise templates born earlier with the values that came
//! first would keep catching those values for good (docs/mining.md, *Covered templates*).
//!
//! An online method cannot make this independent of the order of lines: which value a
//! template is born with, and when the evidence for a merge is complete, depend on what
//! came first. Five states of a life cycle that first appear one after another, each
//! once, look like five values of a variable and merge.
//!
//! # Template identity and generalisation
//!
//! A template's id is [`crate::identity::template_id`]`(service, text)` of the text it
//! was *born* with, and it keeps that id for life while its text generalises (`user alice
//! logged in` → `user <*> logged in`). So:
//!
//! - a generalisation is reported as [`Change::Generalised`] (with the previous text), not
//!   as a new template: the logminer updates the row with that id, and the template's
//!   count and alerts carry on;
//! - ids are stable across processes and restarts, and two replicas that mine the same
//!   lines agree on them;
//! - two live templates never share an id: a line whose own template text is the birth
//!   text of a live template joins that template even if it falls below the threshold.
//!
//! An evicted template that comes back is born again with the same text, so with the same
//! id. The count a miner reports is the number of lines it has seen for the template
//! (plus the restored count); after an eviction it starts again from 1.
//!
//! # Restore
//!
//! The stored form is [`StoredTemplate`]: id, current text, count. A miner given the
//! stored templates of a service (in the order [`Miner::templates`] lists them: least
//! recently used first) matches new lines exactly as the original did, because routing,
//! similarity and tie-breaking depend only on the template texts and ids.
//!
//! # Memory
//!
//! Each service keeps at most `max_clusters` templates (least recently used evicted
//! first), and tree nodes are freed with the last template under them, so a service's
//! memory is bounded by `max_clusters` times the size of a template, plus the masked
//! lines it remembers when asked to ([`Miner::remember_lines`]). At most `max_services`
//! services have a tree: a line of one more service forgets the tree of the service mined
//! least recently, and hands its templates to the caller ([`MineResult::evicted_service`]),
//! which may still have to store them. The logminer also drops services it no longer owns
//! with [`Miner::remove_service`].
//!
//! # Input that spells a wildcard
//!
//! A log line that contains `<*>` or `<...>` literally has it escaped (`<\\*>`,
//! `<\\...>`) by the masker, so a stored template's `<*>` is always a learned wildcard.

pub mod batches;
pub mod config;
mod drain;
pub mod masking;

pub use config::{CustomRule, DrainConfig, MaskingConfig, MiningConfig};
pub use masking::{Masker, MaskingError, MASKING_VERSION};

pub(crate) use drain::FastMap;
use drain::{Line, Tree};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What adding a line did to its template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The line matched the template as it was.
    Unchanged,
    /// A template was born with this line: announce it.
    New,
    /// The line joined the template and generalised its text (same id): update the
    /// stored text, do not announce.
    Generalised { previous: String },
    /// The line showed that this template and others are one (see the module docs,
    /// *Merging*): this template survives with its id and its text generalised, and has
    /// taken over the lines of the `absorbed` templates, which no longer exist. Update
    /// the row, retire the absorbed ones, announce nothing.
    Merged { previous: String, absorbed: Vec<u64> },
}

/// The result of [`Miner::add`]. Borrows the miner, so copy what must outlive the next
/// call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MineResult<'a> {
    pub template_id: u64,
    /// The template's text after this line.
    pub template: &'a str,
    pub change: Change,
    /// Lines seen for the template, including a restored count.
    pub count: u64,
    /// A template evicted (least recently used) to make room for a new one.
    pub evicted: Option<u64>,
    /// The same template as it was when evicted.
    pub evicted_template: Option<StoredTemplate>,
    /// A service whose tree was forgotten (mined least recently) to make room for this
    /// line's, with the templates it held.
    pub evicted_service: Option<EvictedService>,
}

/// The tree of a service forgotten at `max_services`: its templates as they were.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictedService {
    pub service: String,
    pub templates: Vec<StoredTemplate>,
}

impl MineResult<'_> {
    pub fn is_new(&self) -> bool {
        self.change == Change::New
    }
    pub fn is_generalised(&self) -> bool {
        matches!(self.change, Change::Generalised { .. } | Change::Merged { .. })
    }
    /// The templates this line's template absorbed, if it merged.
    pub fn absorbed(&self) -> &[u64] {
        match &self.change {
            Change::Merged { absorbed, .. } => absorbed,
            _ => &[],
        }
    }
}

/// A template as the logminer stores it and hands it back to [`Miner::restore`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct StoredTemplate {
    pub id: u64,
    pub template: String,
    pub count: u64,
}

/// A template as [`Miner::templates`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemplateRef<'a> {
    pub id: u64,
    pub template: &'a str,
    pub count: u64,
}

impl TemplateRef<'_> {
    pub fn to_stored(&self) -> StoredTemplate {
        StoredTemplate { id: self.id, template: self.template.to_string(), count: self.count }
    }
}

/// A service's tree and when it was last mined (the miner's count of lines), so the
/// service mined least recently is the one forgotten at `max_services`.
#[derive(Debug)]
struct Service {
    tree: Tree,
    used: u64,
}

/// Templates for many services: one Drain tree per service, one masker for all.
#[derive(Debug)]
pub struct Miner {
    config: MiningConfig,
    masker: Masker,
    services: BTreeMap<String, Service>,
    /// Lines mined and templates restored: the clock of [`Service::used`].
    clock: u64,
    masked: String,
    spans: Vec<(u32, u32)>,
    /// Masked lines each tree remembers (see [`Miner::remember_lines`]).
    memo: usize,
}

impl Miner {
    /// Fails only on a masking configuration it cannot use (an unknown rule name, a
    /// malformed custom rule).
    pub fn new(config: MiningConfig) -> Result<Miner, MaskingError> {
        let masker = Masker::new(&config.masking)?;
        Ok(Miner {
            config,
            masker,
            services: BTreeMap::new(),
            clock: 0,
            masked: String::new(),
            spans: Vec::new(),
            memo: 0,
        })
    }

    pub fn config(&self) -> &MiningConfig {
        &self.config
    }

    pub fn masker(&self) -> &Masker {
        &self.masker
    }

    /// Lets each service's tree remember up to `entries` masked lines that matched a
    /// template unchanged, so that the same masked line again is not split and searched:
    /// most masked lines repeat a few texts, and this makes Drain's share of a line
    /// small. Results are exactly those without it (a template that is born, removed or
    /// changed forgets every line remembered before). It costs up to `entries` lines of
    /// memory per service, so it is off unless asked for (`tayga mine` asks; one service).
    pub fn remember_lines(&mut self, entries: usize) {
        self.memo = entries;
        for s in self.services.values_mut() {
            s.tree.set_memo(entries);
        }
    }

    /// The value to record as `masking_version`.
    pub fn masking_version(&self) -> &str {
        self.masker.version()
    }

    /// Mines one log message of `service`.
    pub fn add(&mut self, service: &str, line: &str) -> MineResult<'_> {
        self.masker.mask_tokens(line, &mut self.masked, Some(&mut self.spans));
        let evicted_service = self.make_room(service);
        let (drain, memo) = (&self.config.drain, self.memo);
        let mut result = mine_line(&mut self.services, drain, memo, service, &self.masked, &mut self.spans, true);
        result.evicted_service = evicted_service;
        result
    }

    /// Mines a line that was already masked with this miner's masker (a clone of
    /// [`Miner::masker`], [`Masker::mask_into`]): masking is most of the work and needs no
    /// state, so it can run on other threads while lines are mined here, in order.
    pub fn add_masked(&mut self, service: &str, masked: &str) -> MineResult<'_> {
        let evicted_service = self.make_room(service);
        let (drain, memo) = (&self.config.drain, self.memo);
        let mut result = mine_line(&mut self.services, drain, memo, service, masked, &mut self.spans, false);
        result.evicted_service = evicted_service;
        result
    }

    /// Before a line of `service`: stamps it the most recent, and gives it a tree if it has
    /// none, first forgetting (and returning) the tree of the service mined least recently
    /// when `max_services` trees exist. That takes a scan of the services, only when a new
    /// one comes at the bound.
    fn make_room(&mut self, service: &str) -> Option<EvictedService> {
        self.clock += 1;
        if let Some(s) = self.services.get_mut(service) {
            s.used = self.clock;
            return None;
        }
        let mut evicted = None;
        if self.services.len() >= self.config.drain.max_services.max(1) {
            let victim = self.services.iter().min_by_key(|(_, s)| s.used).map(|(name, _)| name.clone());
            if let Some((victim, gone)) = victim.and_then(|v| self.services.remove_entry(&v)) {
                let templates =
                    gone.tree.iter_lru().map(|c| StoredTemplate { id: c.id, template: c.text.clone(), count: c.count });
                evicted = Some(EvictedService { templates: templates.collect(), service: victim });
            }
        }
        let tree = new_tree(&self.config.drain, self.memo);
        self.services.insert(service.to_string(), Service { tree, used: self.clock });
        evicted
    }

    /// Puts a stored template back. Returns the id of a template evicted to make room, if
    /// any (only when more templates are restored than `max_clusters`).
    /// Restoring more services than `max_services` forgets the least recently restored
    /// ones (restores come least recently seen first); [`Miner::holds`] tells which stayed.
    pub fn restore(&mut self, service: &str, stored: StoredTemplate) -> Option<u64> {
        self.make_room(service);
        let s = self.services.get_mut(service).expect("make_room gives it a tree");
        s.tree.restore(stored.id, &stored.template, stored.count)
    }

    /// A service's templates, least recently used first (the order to restore them in).
    pub fn templates(&self, service: &str) -> impl Iterator<Item = TemplateRef<'_>> + '_ {
        self.services.get(service).into_iter().flat_map(|s| s.tree.iter_lru()).map(|c| TemplateRef {
            id: c.id,
            template: &c.text,
            count: c.count,
        })
    }

    /// Number of templates held for a service.
    pub fn template_count(&self, service: &str) -> usize {
        self.services.get(service).map_or(0, |s| s.tree.len())
    }

    /// Whether `service` has a tree.
    pub fn holds(&self, service: &str) -> bool {
        self.services.contains_key(service)
    }

    /// Services with a tree.
    pub fn service_count(&self) -> usize {
        self.services.len()
    }

    /// Services with templates, in name order.
    pub fn services(&self) -> impl Iterator<Item = &str> + '_ {
        self.services.keys().map(String::as_str)
    }

    /// Forgets a service (e.g. after a rebalance took it elsewhere).
    pub fn remove_service(&mut self, service: &str) {
        self.services.remove(service);
    }

    /// Forgets every service (e.g. before reloading after a rebalance assignment).
    pub fn clear(&mut self) {
        self.services.clear();
    }
}

fn new_tree(drain: &DrainConfig, memo: usize) -> Tree {
    let mut tree = Tree::new(drain);
    tree.set_memo(memo);
    tree
}

/// Mines a masked line; `spans` holds its tokens when `split`, else it is scratch space
/// for them (a line the tree remembers is never split).
fn mine_line<'a>(
    services: &'a mut BTreeMap<String, Service>,
    drain: &DrainConfig,
    memo: usize,
    service: &str,
    text: &str,
    spans: &mut Vec<(u32, u32)>,
    split: bool,
) -> MineResult<'a> {
    // A lookup by &str first: the owned key is only allocated for a new service.
    if !services.contains_key(service) {
        services.insert(service.to_string(), Service { tree: new_tree(drain, memo), used: 0 });
    }
    let tree = &mut services.get_mut(service).expect("inserted above").tree;
    let outcome = match tree.add_seen(text) {
        Some(outcome) => outcome,
        None => {
            if !split {
                split_tokens(text, spans);
            }
            tree.add(Line { text, spans }, &mut |t| crate::identity::template_id(service, t))
        }
    };
    let c = tree.cluster(outcome.slot);
    MineResult {
        template_id: c.id,
        template: &c.text,
        change: outcome.change,
        count: c.count,
        evicted: outcome.evicted.as_ref().map(|t| t.id),
        evicted_template: outcome.evicted,
        evicted_service: None,
    }
}

/// The tokens of an already masked line: runs of non-whitespace, as the masker wrote them.
fn split_tokens(text: &str, spans: &mut Vec<(u32, u32)>) {
    spans.clear();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i > start {
            spans.push((start as u32, i as u32));
        }
    }
}

#[cfg(test)]
mod synthetic;
#[cfg(test)]
mod tests;
