//! One service's Drain parse tree (He et al., ICWS 2017) with the changes described in
//! the module docs of [`crate::mine`]. Pure data structure: tokens in, cluster out.
//!
//! This file is the tree itself: its nodes, how a template is routed to its leaf, and
//! templates born, restored and removed. The rest is by concern: `token` (lines and
//! template items, and the judgements on one token), `similarity` (which template a line
//! joins), `generalise` (a template learning from a line), `siblings` (the sibling merge),
//! `lru` (recency and eviction), `memo` (the memo of repeated masked lines).

mod generalise;
mod lru;
mod memo;
mod siblings;
mod similarity;
mod token;

use super::config::DrainConfig;
use siblings::MAX_MERGE_POSITIONS;
use similarity::{align, Plan};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
pub(crate) use token::Line;
use token::Tok;
use token::{render, route_str};

/// The tree's maps are looked up once or twice per token level per line, with short
/// keys: SipHash's per-call cost showed in profiles. This is the multiply-rotate hash
/// rustc uses (FxHash): fast, deterministic, and only ever used for lookups, never for
/// an order anyone can see.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

const NONE: u32 = u32::MAX;

#[derive(Debug)]
enum Link {
    /// A first-level node, keyed by the token count.
    Root(usize),
    Child(u32, Box<str>),
    Wild(u32),
}

#[derive(Debug)]
struct Node {
    link: Link,
    children: FastMap<Box<str>, u32>,
    wild: u32,
    clusters: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct Cluster {
    pub id: u64,
    pub tokens: Vec<Tok>,
    pub text: String,
    pub count: u64,
    /// Word tokens in `tokens`: the denominator of the similarity.
    words: usize,
    /// Whether `tokens` holds a [`Tok::Gap`], so lines must be aligned, not compared
    /// position by position.
    gap: bool,
    leaf: u32,
    /// Towards the more recently used end of the LRU list.
    newer: u32,
    /// Towards the least recently used end.
    older: u32,
}

/// What [`Tree::add`] did with a line.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub slot: u32,
    pub change: super::Change,
    /// The template evicted to make room, as it was.
    pub evicted: Option<super::StoredTemplate>,
}

/// One service's templates and the prefix tree that finds them.
///
/// Invariant: every change to a template's text, to the set of templates, or to the tree
/// goes through [`Tree::insert`], [`Tree::remove`] or [`Tree::retemplate`], which bump
/// `generation`; the memo of remembered lines ([`Tree::add_seen`]) is only exact while
/// that holds. Counts and recency may change anywhere: no match depends on them.
#[derive(Debug)]
pub(crate) struct Tree {
    levels: usize,
    sim_th: f64,
    max_children: usize,
    max_clusters: usize,
    numeric: bool,
    merge_siblings: usize,
    merge_positions: usize,
    merge_ratio: f64,
    merge_values: usize,
    roots: FastMap<usize, u32>,
    nodes: Vec<Option<Node>>,
    free_nodes: Vec<u32>,
    clusters: Vec<Option<Cluster>>,
    free_clusters: Vec<u32>,
    by_id: FastMap<u64, u32>,
    newest: u32,
    oldest: u32,
    /// Clusters whose template has a gap, in no particular order.
    gapped: Vec<u32>,
    /// Masked lines that matched a template and left it as it was, with the cluster and
    /// the [`Tree::generation`] they matched in (see [`Tree::add_seen`]). Off (`memo_cap`
    /// 0) unless the caller asks for it: it costs memory per tree.
    memo: FastMap<Box<str>, (u32, u64)>,
    memo_cap: usize,
    /// Lines [`Tree::add_seen`] mined, for the tests.
    #[cfg(test)]
    pub(crate) memo_hits: u64,
    /// Bumped whenever a template is born, removed or changes its text: what a line
    /// matches depends on nothing else.
    generation: u64,
    // Scratch space reused across lines.
    frontier: Vec<u32>,
    next: Vec<u32>,
    dp: Vec<u16>,
}

impl Tree {
    pub fn new(cfg: &DrainConfig) -> Tree {
        Tree {
            // Drain3 counts the root and the leaf in `depth`: depth 4 means two token levels.
            levels: cfg.depth.max(3) - 2,
            sim_th: cfg.sim_th,
            max_children: cfg.max_children.max(2),
            max_clusters: cfg.max_clusters.max(1),
            numeric: cfg.parametrize_numeric_tokens,
            merge_siblings: cfg.merge_siblings,
            merge_positions: cfg.merge_positions.clamp(1, MAX_MERGE_POSITIONS),
            merge_ratio: cfg.merge_ratio,
            merge_values: cfg.merge_values,
            roots: FastMap::default(),
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            clusters: Vec::new(),
            free_clusters: Vec::new(),
            by_id: FastMap::default(),
            newest: NONE,
            oldest: NONE,
            gapped: Vec::new(),
            memo: FastMap::default(),
            memo_cap: 0,
            #[cfg(test)]
            memo_hits: 0,
            generation: 0,
            frontier: Vec::new(),
            next: Vec::new(),
            dp: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn cluster(&self, slot: u32) -> &Cluster {
        self.clusters[slot as usize].as_ref().expect("live cluster")
    }

    fn cluster_mut(&mut self, slot: u32) -> &mut Cluster {
        self.clusters[slot as usize].as_mut().expect("live cluster")
    }

    fn node(&self, n: u32) -> &Node {
        self.nodes[n as usize].as_ref().expect("live node")
    }

    fn node_mut(&mut self, n: u32) -> &mut Node {
        self.nodes[n as usize].as_mut().expect("live node")
    }

    /// Mines one tokenised line. `birth_id` names a cluster this line would create, from
    /// its template text (only called when a cluster is born, so ids cost nothing on the
    /// hot path).
    pub fn add(&mut self, line: Line<'_>, birth_id: &mut dyn FnMut(&str) -> u64) -> Outcome {
        if let Some((slot, plan)) = self.best_match(line) {
            let change = self.merge(slot, line, plan);
            self.touch(slot);
            self.cluster_mut(slot).count += 1;
            if change == super::Change::Unchanged {
                self.remember(line.text, slot);
            }
            return Outcome { slot, change, evicted: None };
        }

        let mut tokens: Vec<Tok> = (0..line.len()).map(|i| Tok::lit(line.get(i))).collect();
        let path = self.path_for(&mut tokens, false);
        let text = render(&tokens);
        let id = birth_id(&text);
        if let Some(&slot) = self.by_id.get(&id) {
            // The line's template is the birth template of a live cluster that no longer
            // reaches the threshold for it (its text generalised too far). Two clusters
            // must never share an id, and this line is that template's, so it joins it.
            self.prune(path);
            let c = self.cluster(slot);
            let plan = if !c.gap && c.tokens.len() == line.len() {
                Some(Plan::Positional)
            } else {
                align(&c.tokens, line, 0.0, &mut Vec::new()).map(|(_, _, steps)| Plan::Aligned(steps))
            };
            let change = match plan {
                Some(plan) => self.merge(slot, line, plan),
                None => super::Change::Unchanged,
            };
            self.touch(slot);
            self.cluster_mut(slot).count += 1;
            return Outcome { slot, change, evicted: None };
        }
        if let Some(members) = self.siblings(&tokens) {
            self.prune(path);
            return self.absorb(members, line);
        }
        let evicted = self.make_room();
        // Eviction may have pruned the nodes of the path just made.
        let path = if evicted.is_some() { self.path_for(&mut tokens, false) } else { path };
        let slot = self.insert(id, tokens, text, 1, path);
        Outcome { slot, change: super::Change::New, evicted }
    }

    /// Rebuilds a cluster from its stored form. A stored id that is already live is
    /// replaced, so restoring twice is harmless.
    pub fn restore(&mut self, id: u64, template: &str, count: u64) -> Option<u64> {
        if let Some(&slot) = self.by_id.get(&id) {
            self.remove(slot);
        }
        let evicted = self.make_room().map(|t| t.id);
        let mut tokens: Vec<Tok> = template.split_ascii_whitespace().map(Tok::parse).collect();
        let path = self.path_for(&mut tokens, true);
        let text = render(&tokens);
        self.insert(id, tokens, text, count, path);
        evicted
    }

    /// The leaf a template lives in, creating nodes on the way. When a node is full the
    /// token goes down the `<*>` branch and becomes a wildcard in the template, so the
    /// tree stays a function of the templates alone: that is what lets a restored miner
    /// route lines exactly as the original did. `force` (restore) always follows the
    /// template's own routing.
    fn path_for(&mut self, tokens: &mut [Tok], force: bool) -> u32 {
        let len = tokens.len();
        let mut node = match self.roots.get(&len) {
            Some(&n) => n,
            None => {
                let n = self.new_node(Link::Root(len));
                self.roots.insert(len, n);
                n
            }
        };
        let mut after_gap = false;
        for tok in tokens.iter_mut().take(self.levels) {
            // Past a gap, positions no longer line up with the line's tokens.
            after_gap |= *tok == Tok::Gap;
            let key = if after_gap { None } else { tok.route(self.numeric).map(Box::<str>::from) };
            node = match key {
                Some(key) => match self.node(node).children.get(&key) {
                    Some(&child) => child,
                    None if force || self.node(node).children.len() + 1 < self.max_children => {
                        let child = self.new_node(Link::Child(node, key.clone()));
                        self.node_mut(node).children.insert(key, child);
                        child
                    }
                    None => {
                        *tok = Tok::Wild;
                        self.wild_child(node)
                    }
                },
                None => self.wild_child(node),
            };
        }
        node
    }

    fn wild_child(&mut self, node: u32) -> u32 {
        let w = self.node(node).wild;
        if w != NONE {
            return w;
        }
        let child = self.new_node(Link::Wild(node));
        self.node_mut(node).wild = child;
        child
    }

    fn new_node(&mut self, link: Link) -> u32 {
        let node = Node { link, children: FastMap::default(), wild: NONE, clusters: Vec::new() };
        match self.free_nodes.pop() {
            Some(n) => {
                self.nodes[n as usize] = Some(node);
                n
            }
            None => {
                self.nodes.push(Some(node));
                (self.nodes.len() - 1) as u32
            }
        }
    }

    fn insert(&mut self, id: u64, tokens: Vec<Tok>, text: String, count: u64, leaf: u32) -> u32 {
        self.generation += 1;
        let words = tokens.iter().filter(|t| matches!(t, Tok::Lit(_, true))).count();
        let gap = tokens.contains(&Tok::Gap);
        let cluster = Cluster { id, tokens, text, count, words, gap, leaf, newer: NONE, older: NONE };
        let slot = match self.free_clusters.pop() {
            Some(s) => {
                self.clusters[s as usize] = Some(cluster);
                s
            }
            None => {
                self.clusters.push(Some(cluster));
                (self.clusters.len() - 1) as u32
            }
        };
        self.node_mut(leaf).clusters.push(slot);
        if self.cluster(slot).gap {
            self.gapped.push(slot);
        }
        self.by_id.insert(id, slot);
        self.push_newest(slot);
        slot
    }

    /// Drops a cluster and the tree nodes only it kept alive, so memory follows the
    /// number of live clusters.
    fn remove(&mut self, slot: u32) {
        self.generation += 1;
        self.unlink(slot);
        self.detach(slot);
        let c = self.clusters[slot as usize].take().expect("live cluster");
        if c.gap {
            self.gapped.retain(|&s| s != slot);
        }
        self.free_clusters.push(slot);
        self.by_id.remove(&c.id);
    }

    /// Takes a cluster out of its leaf.
    fn detach(&mut self, slot: u32) {
        let leaf_idx = self.cluster(slot).leaf;
        let leaf = self.node_mut(leaf_idx);
        if let Some(pos) = leaf.clusters.iter().position(|&s| s == slot) {
            leaf.clusters.swap_remove(pos);
        }
        self.prune(leaf_idx);
    }

    /// Frees a node left empty, and its ancestors that only it kept alive.
    fn prune(&mut self, mut n: u32) {
        loop {
            let node = self.node(n);
            if !node.clusters.is_empty() || !node.children.is_empty() || node.wild != NONE {
                break;
            }
            let node = self.nodes[n as usize].take().expect("live node");
            self.free_nodes.push(n);
            match node.link {
                Link::Root(len) => {
                    self.roots.remove(&len);
                    break;
                }
                Link::Child(parent, key) => {
                    self.node_mut(parent).children.remove(&key);
                    n = parent;
                }
                Link::Wild(parent) => {
                    self.node_mut(parent).wild = NONE;
                    n = parent;
                }
            }
        }
    }

    /// The leaves a line of `len` tokens routed by `line`'s first tokens can reach. A
    /// line searches both the branch of its own token and the `<*>` branch at every level
    /// (Drain follows only one), so a template that generalised a routing token still
    /// catches the lines whose token has a branch of its own.
    fn leaves(&mut self, len: usize, line: Line<'_>) -> Vec<u32> {
        let mut frontier = std::mem::take(&mut self.frontier);
        let mut next = std::mem::take(&mut self.next);
        frontier.clear();
        if let Some(&root) = self.roots.get(&len) {
            frontier.push(root);
        }
        for level in 0..self.levels.min(len).min(line.len()) {
            next.clear();
            let key = route_str(line.get(level), self.numeric);
            for &n in &frontier {
                let node = self.node(n);
                if let Some(key) = key {
                    if let Some(&child) = node.children.get(key) {
                        next.push(child);
                    }
                }
                if node.wild != NONE {
                    next.push(node.wild);
                }
            }
            std::mem::swap(&mut frontier, &mut next);
        }
        self.next = next;
        frontier
    }

    #[cfg(test)]
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_some()).count()
    }
}

impl Cluster {
    fn params(&self) -> usize {
        self.tokens.iter().filter(|x| !matches!(x, Tok::Lit(..))).count()
    }
}
