//! One service's Drain parse tree (He et al., ICWS 2017) with the changes described in
//! the module docs of [`crate::mine`]. Pure data structure: tokens in, cluster out.

use super::config::DrainConfig;
use std::collections::HashMap;

const NONE: u32 = u32::MAX;
const WILD: &str = "<*>";

/// One template token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// A constant: the line must repeat it exactly.
    Lit(Box<str>),
    /// `<*>`: anything.
    Wild,
    /// `pre<*>suf`: a variable that keeps the punctuation around it, e.g. `(<*>)` or
    /// `user=<*>`, so the template still says what the variable is.
    Part(Box<str>, Box<str>),
}

impl Tok {
    fn parse(s: &str) -> Tok {
        if s == WILD {
            return Tok::Wild;
        }
        match (s.find(WILD), s.rfind(WILD)) {
            (Some(first), Some(last)) => Tok::Part(s[..first].into(), s[last + WILD.len()..].into()),
            _ => Tok::Lit(s.into()),
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Tok::Lit(s) => out.push_str(s),
            Tok::Wild => out.push_str(WILD),
            Tok::Part(p, s) => {
                out.push_str(p);
                out.push_str(WILD);
                out.push_str(s);
            }
        }
    }

    /// How the token routes through the tree: `None` is the `<*>` branch.
    fn route(&self, numeric: bool) -> Option<&str> {
        match self {
            Tok::Lit(s) => route_str(s, numeric),
            _ => None,
        }
    }
}

fn route_str(s: &str, numeric: bool) -> Option<&str> {
    if numeric && s.bytes().any(|c| c.is_ascii_digit()) {
        None
    } else {
        Some(s)
    }
}

/// A masked line split into tokens, as spans into one buffer so that the hot loop
/// allocates nothing per token.
#[derive(Clone, Copy)]
pub(crate) struct Line<'a> {
    pub text: &'a str,
    pub spans: &'a [(u32, u32)],
}

impl<'a> Line<'a> {
    #[inline]
    fn get(&self, i: usize) -> &'a str {
        let (s, e) = self.spans[i];
        &self.text[s as usize..e as usize]
    }
    #[inline]
    fn len(&self) -> usize {
        self.spans.len()
    }
}

/// Splits on ASCII whitespace into `spans` (cleared first).
pub(crate) fn tokenize(text: &str, spans: &mut Vec<(u32, u32)>) {
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
    children: HashMap<Box<str>, u32>,
    wild: u32,
    clusters: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct Cluster {
    pub id: u64,
    pub tokens: Vec<Tok>,
    pub text: String,
    pub count: u64,
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
    pub evicted: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct Tree {
    levels: usize,
    sim_th: f64,
    max_children: usize,
    max_clusters: usize,
    numeric: bool,
    roots: HashMap<usize, u32>,
    nodes: Vec<Option<Node>>,
    free_nodes: Vec<u32>,
    clusters: Vec<Option<Cluster>>,
    free_clusters: Vec<u32>,
    by_id: HashMap<u64, u32>,
    newest: u32,
    oldest: u32,
    // Scratch space reused across lines.
    frontier: Vec<u32>,
    next: Vec<u32>,
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
            roots: HashMap::new(),
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            clusters: Vec::new(),
            free_clusters: Vec::new(),
            by_id: HashMap::new(),
            newest: NONE,
            oldest: NONE,
            frontier: Vec::new(),
            next: Vec::new(),
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

    /// Clusters from least to most recently used: restoring them in this order rebuilds
    /// the same LRU state.
    pub fn iter_lru(&self) -> impl Iterator<Item = &Cluster> + '_ {
        let mut slot = self.oldest;
        std::iter::from_fn(move || {
            if slot == NONE {
                return None;
            }
            let c = self.cluster(slot);
            slot = c.newer;
            Some(c)
        })
    }

    /// Mines one tokenised line. `birth_id` names a cluster this line would create, from
    /// its template text (only called when a cluster is born, so ids cost nothing on the
    /// hot path).
    pub fn add(&mut self, line: Line<'_>, birth_id: &mut dyn FnMut(&str) -> u64) -> Outcome {
        if let Some(slot) = self.best_match(line) {
            let change = self.merge(slot, line);
            self.touch(slot);
            let c = self.cluster_mut(slot);
            c.count += 1;
            return Outcome { slot, change, evicted: None };
        }

        let mut tokens: Vec<Tok> = (0..line.len()).map(|i| Tok::Lit(line.get(i).into())).collect();
        let path = self.path_for(&mut tokens, false);
        let text = render(&tokens);
        let id = birth_id(&text);
        if let Some(&slot) = self.by_id.get(&id) {
            // The line's template is the birth template of a live cluster that no longer
            // reaches the threshold for it (its text generalised too far). Two clusters
            // must never share an id, and this line is that template's, so it joins it.
            let change = self.merge(slot, line);
            self.touch(slot);
            self.cluster_mut(slot).count += 1;
            return Outcome { slot, change, evicted: None };
        }
        let evicted = self.make_room();
        let slot = self.insert(id, tokens, text, 1, path);
        Outcome { slot, change: super::Change::New, evicted }
    }

    /// Rebuilds a cluster from its stored form. A stored id that is already live is
    /// replaced, so restoring twice is harmless.
    pub fn restore(&mut self, id: u64, template: &str, count: u64) -> Option<u64> {
        if let Some(&slot) = self.by_id.get(&id) {
            self.remove(slot);
        }
        let mut tokens: Vec<Tok> = template.split_ascii_whitespace().map(Tok::parse).collect();
        let path = self.path_for(&mut tokens, true);
        let text = render(&tokens);
        let evicted = self.make_room();
        self.insert(id, tokens, text, count, path);
        evicted
    }

    fn make_room(&mut self) -> Option<u64> {
        if self.by_id.len() < self.max_clusters {
            return None;
        }
        let victim = self.oldest;
        let id = self.cluster(victim).id;
        self.remove(victim);
        Some(id)
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
        for tok in tokens.iter_mut().take(self.levels) {
            let key = tok.route(self.numeric).map(Box::<str>::from);
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
        let node = Node { link, children: HashMap::new(), wild: NONE, clusters: Vec::new() };
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
        let cluster = Cluster { id, tokens, text, count, leaf, newer: NONE, older: NONE };
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
        self.by_id.insert(id, slot);
        self.push_newest(slot);
        slot
    }

    /// Drops a cluster and the tree nodes only it kept alive, so memory follows the
    /// number of live clusters.
    fn remove(&mut self, slot: u32) {
        self.unlink(slot);
        let c = self.clusters[slot as usize].take().expect("live cluster");
        self.free_clusters.push(slot);
        self.by_id.remove(&c.id);
        let leaf = self.node_mut(c.leaf);
        if let Some(pos) = leaf.clusters.iter().position(|&s| s == slot) {
            leaf.clusters.swap_remove(pos);
        }
        let mut n = c.leaf;
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

    /// The most similar cluster at or above the threshold. A line searches both the
    /// branch of its own token and the `<*>` branch at every level (Drain follows only
    /// one), so a template that generalised a routing token still catches the lines whose
    /// token has a branch of its own.
    fn best_match(&mut self, line: Line<'_>) -> Option<u32> {
        let &root = self.roots.get(&line.len())?;
        let mut frontier = std::mem::take(&mut self.frontier);
        let mut next = std::mem::take(&mut self.next);
        frontier.clear();
        frontier.push(root);
        for level in 0..self.levels.min(line.len()) {
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

        let mut best: Option<(f64, usize, u64, u32)> = None;
        for &n in &frontier {
            for &slot in &self.node(n).clusters {
                let c = self.cluster(slot);
                let Some((sim, params)) = similarity(&c.tokens, line, self.sim_th) else {
                    continue;
                };
                // Ties go to the more specific template (a general one would swallow the
                // lines a specific one was made for), then to the smaller id, so the
                // choice never depends on the order clusters were created or restored in.
                let better = match best {
                    None => true,
                    Some((bs, bp, bid, _)) => {
                        sim > bs || sim == bs && (params < bp || params == bp && c.id < bid)
                    }
                };
                if better {
                    best = Some((sim, params, c.id, slot));
                }
            }
        }
        self.frontier = frontier;
        self.next = next;
        best.map(|(_, _, _, slot)| slot)
    }

    /// Generalises the template where the line differs; reports whether the text changed.
    fn merge(&mut self, slot: u32, line: Line<'_>) -> super::Change {
        let c = self.cluster_mut(slot);
        let mut changed = false;
        for (i, tok) in c.tokens.iter_mut().enumerate() {
            let l = line.get(i);
            let merged = match tok {
                Tok::Wild => continue,
                Tok::Lit(s) if **s == *l => continue,
                Tok::Lit(s) => affix_merge(s, s, l, true),
                Tok::Part(p, s) if part_matches(p, s, l) => continue,
                Tok::Part(p, s) => affix_merge(p, s, l, false),
            };
            *tok = merged;
            changed = true;
        }
        if !changed {
            return super::Change::Unchanged;
        }
        let previous = std::mem::replace(&mut c.text, render(&c.tokens));
        super::Change::Generalised { previous }
    }

    fn touch(&mut self, slot: u32) {
        if self.newest == slot {
            return;
        }
        self.unlink(slot);
        self.push_newest(slot);
    }

    fn push_newest(&mut self, slot: u32) {
        let old_newest = self.newest;
        {
            let c = self.cluster_mut(slot);
            c.older = old_newest;
            c.newer = NONE;
        }
        if old_newest != NONE {
            self.cluster_mut(old_newest).newer = slot;
        }
        self.newest = slot;
        if self.oldest == NONE {
            self.oldest = slot;
        }
    }

    fn unlink(&mut self, slot: u32) {
        let (newer, older) = {
            let c = self.cluster(slot);
            (c.newer, c.older)
        };
        if newer != NONE {
            self.cluster_mut(newer).older = older;
        } else {
            self.newest = older;
        }
        if older != NONE {
            self.cluster_mut(older).newer = newer;
        } else {
            self.oldest = newer;
        }
        let c = self.cluster_mut(slot);
        c.newer = NONE;
        c.older = NONE;
    }

    #[cfg(test)]
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_some()).count()
    }
}

pub(crate) fn render(tokens: &[Tok]) -> String {
    let mut out = String::new();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        t.write(&mut out);
    }
    out
}

#[inline]
fn part_matches(p: &str, s: &str, l: &str) -> bool {
    l.len() >= p.len() + s.len() && l.starts_with(p) && l.ends_with(s)
}

/// Similarity of a line to a template: the share of the template's constant tokens the
/// line repeats exactly. Drain divides by all tokens, so every wildcard a template learns
/// makes it harder to join, and a well-learned template ends up rejecting its own lines;
/// leaving wildcards out of the ratio keeps the threshold's meaning as the template
/// generalises. Returns `None` below the threshold (with an early exit once it cannot be
/// reached), else the similarity and the number of wildcard positions.
#[inline]
fn similarity(tokens: &[Tok], line: Line<'_>, th: f64) -> Option<(f64, usize)> {
    let mut params = 0usize;
    let mut constants = 0usize;
    for t in tokens {
        if !matches!(t, Tok::Lit(_)) {
            params += 1;
        } else {
            constants += 1;
        }
    }
    if constants == 0 {
        return Some((1.0, params));
    }
    let allowed_misses = constants - (th * constants as f64).ceil().max(0.0) as usize;
    let mut misses = 0usize;
    for (i, t) in tokens.iter().enumerate() {
        let l = line.get(i);
        match t {
            Tok::Lit(s) => {
                if **s != *l {
                    misses += 1;
                    if misses > allowed_misses {
                        return None;
                    }
                }
            }
            Tok::Wild => {}
            Tok::Part(p, s) => {
                // A partial wildcard the line does not fit is as good as a miss.
                if !part_matches(p, s, l) {
                    misses += 1;
                    if misses > allowed_misses {
                        return None;
                    }
                }
            }
        }
    }
    let sim = (constants - misses.min(constants)) as f64 / constants as f64;
    (sim >= th).then_some((sim, params))
}

/// Can an affix end (prefix) or start (suffix) at this character? Punctuation, but not
/// the brackets of placeholders, so `<NUM>` is never cut in half.
#[inline]
fn affix_delim(c: u8) -> bool {
    c.is_ascii_punctuation() && !matches!(c, b'<' | b'>' | b'*')
}

/// Generalises a token (`pre…suf`, `pre == suf == whole` for a literal) against a
/// differing line token: keeps the longest common prefix ending in punctuation and the
/// longest common suffix starting with punctuation, so `(alpha)` and `(beta)` give
/// `(<*>)` and `user=root`, `user=guest` give `user=<*>`; with nothing in common the
/// token becomes `<*>`.
/// `literal` says `pre` and `suf` are one string, whose prefix and suffix must not overlap.
fn affix_merge(pre: &str, suf: &str, line: &str, literal: bool) -> Tok {
    let (p, l) = (pre.as_bytes(), line.as_bytes());
    let common = p.iter().zip(l).take_while(|(a, b)| a == b).count();
    let mut plen = common;
    while plen > 0 && !affix_delim(p[plen - 1]) {
        plen -= 1;
    }
    let s = suf.as_bytes();
    let common = s.iter().rev().zip(l.iter().rev()).take_while(|(a, b)| a == b).count();
    let room = if literal { s.len() - plen } else { s.len() };
    let mut slen = common.min(l.len() - plen).min(room);
    while slen > 0 && !affix_delim(s[s.len() - slen]) {
        slen -= 1;
    }
    if plen == 0 && slen == 0 {
        Tok::Wild
    } else {
        Tok::Part(pre[..plen].into(), suf[suf.len() - slen..].into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affixes() {
        assert_eq!(affix_merge("(alpha)", "(alpha)", "(beta)", true), Tok::Part("(".into(), ")".into()));
        assert_eq!(affix_merge("user=root", "user=root", "user=guest", true), Tok::Part("user=".into(), "".into()));
        assert_eq!(affix_merge("alpha", "alpha", "beta", true), Tok::Wild);
        assert_eq!(affix_merge("(<NUM>)", "(<NUM>)", "(<HOST>)", true), Tok::Part("(".into(), ")".into()));
        assert_eq!(affix_merge("<NUM>", "<NUM>", "<IP>", true), Tok::Wild);
        // Prefix and suffix never overlap in the line token.
        assert_eq!(affix_merge("a=)", "a=)", "a=", true), Tok::Part("a=".into(), "".into()));
        assert_eq!(affix_merge("(", "", "()", false), Tok::Part("(".into(), "".into()));
        assert_eq!(affix_merge("(", "(", "((", true), Tok::Part("(".into(), "".into()));
    }

    #[test]
    fn token_parse_round_trips() {
        for t in ["<*>", "(<*>)", "user=<*>", "plain", "<NUM>", ""] {
            let mut s = String::new();
            Tok::parse(t).write(&mut s);
            assert_eq!(s, t);
        }
    }
}
