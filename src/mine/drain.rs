//! One service's Drain parse tree (He et al., ICWS 2017) with the changes described in
//! the module docs of [`crate::mine`]. Pure data structure: tokens in, cluster out.

use super::config::DrainConfig;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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
const WILD: &str = "<*>";

/// One template item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// A constant token; `word` says it has letters outside placeholders (`closed`,
    /// `blk_<ID>`), as opposed to a value (`<NUM>`, `<IP>:<NUM>`, `-`), which must still
    /// match but is no evidence that two lines say the same thing.
    Lit(Box<str>, bool),
    /// `<*>`: any one token.
    Wild,
    /// `pre<*>suf`: a variable that keeps the punctuation around it, e.g. `(<*>)` or
    /// `user=<*>`, so the template still says what the variable is.
    Part(Box<str>, Box<str>),
    /// `<...>`: any number of tokens, zero included: a variable whose width varies
    /// (`<1 sec` / `00:05`) or that is sometimes absent (`(1.2 KB)`).
    Gap,
}

const GAP: &str = "<...>";

impl Tok {
    fn lit(s: &str) -> Tok {
        Tok::Lit(s.into(), is_word(s))
    }

    fn parse(s: &str) -> Tok {
        if s == WILD {
            return Tok::Wild;
        }
        if s == GAP {
            return Tok::Gap;
        }
        match (s.find(WILD), s.rfind(WILD)) {
            (Some(first), Some(last)) => Tok::Part(s[..first].into(), s[last + WILD.len()..].into()),
            _ => Tok::lit(s),
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Tok::Lit(s, _) => out.push_str(s),
            Tok::Wild => out.push_str(WILD),
            Tok::Part(p, s) => {
                out.push_str(p);
                out.push_str(WILD);
                out.push_str(s);
            }
            Tok::Gap => out.push_str(GAP),
        }
    }

    /// How the item routes through the tree: `None` is the `<*>` branch. Values route
    /// there too: a token that is only placeholders says nothing about which event this
    /// is, and a list `<IP>,<IP>` must meet a single `<IP>`.
    fn route(&self, numeric: bool) -> Option<&str> {
        match self {
            Tok::Lit(s, true) => route_str(s, numeric),
            _ => None,
        }
    }

    fn fits(&self, l: &str) -> bool {
        match self {
            Tok::Lit(s, _) => **s == *l,
            Tok::Wild => true,
            Tok::Part(p, s) => part_matches(p, s, l),
            Tok::Gap => false,
        }
    }

    /// Could this item be (part of) a variable? Used to decide whether a span may change
    /// width.
    fn variable_like(&self) -> bool {
        !matches!(self, Tok::Lit(_, true))
    }
}

/// Has the token letters outside its placeholders?
fn is_word(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'<' {
            let close = b[i + 1..].iter().position(|&c| !(c.is_ascii_alphabetic() || c == b'*' || c == b'.'));
            if let Some(k) = close {
                if k > 0 && b[i + 1 + k] == b'>' {
                    i += k + 2;
                    continue;
                }
            }
        }
        if b[i].is_ascii_alphabetic() || b[i] >= 0x80 {
            return true;
        }
        i += 1;
    }
    false
}

/// Do two differing tokens say the same thing about different values? Then they are no
/// evidence against a match. That is so when they differ only in their placeholders
/// (`rhost=<IP>`, `rhost=<HOST>`) or in the digits glued to their letters (`dn228` and
/// `dn31`, `R02-M1` and `R17-M0`: the masker leaves such names alone because digits inside
/// a word are as often part of it, `tty2`, `x86_64`). Quoted words are not taken for
/// values here (`service 'sparkDriver'` and `service 'BlockManager'` may be two events);
/// the sibling merge finds the quoted positions that do vary.
fn same_shape(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    let mut swapped = false;
    loop {
        match (a.get(i), b.get(j)) {
            (None, None) => return swapped,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let ei = i + a[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                let ej = j + b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
                swapped |= a[i..ei] != b[j..ej];
                i = ei;
                j = ej;
            }
            (Some(b'<'), Some(b'<')) => {
                let (Some(ei), Some(ej)) = (placeholder_end(a, i), placeholder_end(b, j)) else {
                    return false;
                };
                swapped |= a[i..ei] != b[j..ej];
                i = ei;
                j = ej;
            }
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            _ => return false,
        }
    }
}

/// Are two differing tokens, each with a placeholder inside, the same variable? The
/// masker found a value in both at the same place; when what comes before it is the
/// same, the rest is the value's own spelling, not another event: a version
/// `<NUM>:<NUM>.<NUM>-<NUM>+deb12u1` against `<NUM>.<NUM>-<NUM>`, `(<NUM>.<NUM>+dfsg)`
/// against `(<NUM>:<NUM>)`. A different prefix (`blk_<ID>`, `rdd_<ID>`) says what the
/// value is. With no prefix, two words whose letters differ are taken for one variable
/// too (`<NUM>/tcp` and `<NUM>/udp`): versions, the case that asked for this, are most
/// often words on both sides (`+deb12u1`, `.dfsg`), and a port's protocol is a value to
/// an annotator as well.
fn same_variable(a: &str, b: &str) -> bool {
    let (Some(i), Some(j)) = (a.find('<'), b.find('<')) else { return false };
    i == j
        && a[..i] == b[..j]
        && placeholder_end(a.as_bytes(), i).is_some()
        && placeholder_end(b.as_bytes(), j).is_some()
}

/// The end of a `<NAME>` placeholder starting at `i`.
fn placeholder_end(b: &[u8], i: usize) -> Option<usize> {
    let k = b[i + 1..].iter().position(|&c| !(c.is_ascii_alphabetic() || c == b'*' || c == b'.'))?;
    (k > 0 && b[i + 1 + k] == b'>').then_some(i + k + 2)
}

/// A `key=word` token (`user=root`, `mode=strict`, `status=FAILED`): a setting, which
/// the masker leaves alone because it usually says which event this is. A line that
/// differs from a template in a setting never joins it, however similar the rest.
fn is_setting(s: &str) -> bool {
    let Some(eq) = s.find('=') else { return false };
    let key = &s[..eq];
    let value = s[eq + 1..].trim_matches(|c| matches!(c, '"' | '\'' | ',' | ';'));
    key.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && key.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        && value.bytes().any(|c| c.is_ascii_alphabetic())
        && !value.contains('<')
        && !value.contains('=')
}

/// Units written after a number (`1.36 KB`, `<1 sec`): part of the quantity when a span
/// changes width.
fn is_unit(s: &str) -> bool {
    let t = s.trim_matches(|c: char| c.is_ascii_punctuation());
    matches!(
        t,
        "B" | "KB"
            | "kB"
            | "MB"
            | "GB"
            | "TB"
            | "KiB"
            | "MiB"
            | "GiB"
            | "TiB"
            | "bytes"
            | "ns"
            | "us"
            | "ms"
            | "s"
            | "sec"
            | "secs"
            | "second"
            | "seconds"
            | "min"
            | "mins"
            | "minute"
            | "minutes"
            | "h"
            | "hr"
            | "hrs"
            | "hour"
            | "hours"
            | "d"
            | "day"
            | "days"
    )
}

/// Values, tokens holding a placeholder (`rdd_<ID>`) and, like Drain's numeric rule,
/// tokens with digits take the `<*>` branch: they are or contain variables, and routing on
/// them would put lines of one event in different leaves.
fn route_str(s: &str, numeric: bool) -> Option<&str> {
    // One pass: a letter makes it a word; `<` (a placeholder) or, with the numeric rule,
    // a digit sends it down the `<*>` branch.
    let mut letter = false;
    for &c in s.as_bytes() {
        if c == b'<' || numeric && c.is_ascii_digit() {
            return None;
        }
        letter |= c.is_ascii_alphabetic() || c >= 0x80;
    }
    letter.then_some(s)
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
    pub evicted: Option<u64>,
}

/// How a line lines up with a template.
#[derive(Debug)]
enum Plan {
    /// The line fits the template as it is.
    Fits,
    /// Same length, no gap: token `i` of the line against item `i`.
    Positional,
    /// The result of [`align`].
    Aligned(Vec<Step>),
}

#[derive(Debug, Clone)]
enum Step {
    /// Item `.0` against token `.1`.
    Pair(usize, usize),
    /// Items and tokens that become one [`Tok::Gap`].
    Flex,
}

/// Longest token sequence aligned with dynamic programming; longer lines only meet
/// templates of their own length.
const MAX_ALIGN: usize = 64;
/// How far apart in length a line and a template may be to be aligned.
const MAX_DELTA: usize = 6;
/// Most positions in which siblings may differ to be merged.
const MAX_MERGE_POSITIONS: usize = 2;

/// Where a sibling differs from a line's would-be template: up to
/// [`MAX_MERGE_POSITIONS`] positions, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Diff {
    n: usize,
    at: [usize; MAX_MERGE_POSITIONS],
}

impl Diff {
    fn positions(&self) -> &[usize] {
        &self.at[..self.n]
    }
    fn within(&self, other: &Diff) -> bool {
        self.positions().iter().all(|p| other.positions().contains(p))
    }
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

/// Masked lines longer than this are never remembered (see [`Tree::set_memo`]): with
/// `entries` lines the memo holds at most `entries` × 1 KiB of text.
const MEMO_MAX_LINE: usize = 1024;

/// The best candidate so far: similarity, wildcard count, id, slot, plan.
type Best = Option<(f64, usize, u64, u32, Plan)>;

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

    /// Remembers up to `entries` masked lines that matched a template unchanged, so the
    /// same masked line again skips the search (0, the default, remembers none).
    pub fn set_memo(&mut self, entries: usize) {
        self.memo_cap = entries;
        self.memo = FastMap::default();
    }

    /// The outcome of [`Tree::add`] for a masked line seen before, without splitting or
    /// searching, or `None` to mine it the long way. Which template a line matches, and
    /// whether it changes it, depend only on the line and on the templates' texts and ids
    /// (never on counts or recency: ties go by id); so while no template was born,
    /// removed or changed since the line last matched one unchanged, it matches that one
    /// unchanged again. Most masked lines repeat one of a few texts: this is most lines.
    #[inline]
    pub fn add_seen(&mut self, text: &str) -> Option<Outcome> {
        let &(slot, generation) = self.memo.get(text)?;
        if generation != self.generation {
            return None;
        }
        self.touch(slot);
        self.cluster_mut(slot).count += 1;
        #[cfg(test)]
        {
            self.memo_hits += 1;
        }
        Some(Outcome { slot, change: super::Change::Unchanged, evicted: None })
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
        let evicted = self.make_room();
        let mut tokens: Vec<Tok> = template.split_ascii_whitespace().map(Tok::parse).collect();
        let path = self.path_for(&mut tokens, true);
        let text = render(&tokens);
        self.insert(id, tokens, text, count, path);
        evicted
    }

    fn remember(&mut self, text: &str, slot: u32) {
        // A long line is rare enough to search again, and would make the memo's memory
        // follow the input's longest lines.
        if self.memo_cap == 0 || text.len() > MEMO_MAX_LINE {
            return;
        }
        let entry = (slot, self.generation);
        if let Some(e) = self.memo.get_mut(text) {
            *e = entry;
            return;
        }
        // Bounded by forgetting everything at once: lines that repeat are soon back, and
        // stale entries (of an older generation) are dropped with the rest.
        if self.memo.len() >= self.memo_cap {
            self.memo.clear();
        }
        self.memo.insert(text.into(), entry);
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

    /// The most similar cluster at or above the threshold: among templates of the line's
    /// length first, and only when none qualifies among templates a few tokens longer or
    /// shorter, which can only be joined through a gap.
    fn best_match(&mut self, line: Line<'_>) -> Option<(u32, Plan)> {
        let mut best: Best = None;
        let th = self.sim_th;
        let leaves = self.leaves(line.len(), line);
        {
            let (nodes, clusters, dp) = (&self.nodes, &self.clusters, &mut self.dp);
            for &n in &leaves {
                for &slot in &nodes[n as usize].as_ref().expect("live node").clusters {
                    let c = clusters[slot as usize].as_ref().expect("live cluster");
                    let scored = if !c.gap {
                        positional(c, line, th)
                            .map(|(s, p, exact)| (s, p, if exact { Plan::Fits } else { Plan::Positional }))
                    } else if fits_gapped(&c.tokens, line) {
                        Some((1.0, c.params(), Plan::Fits))
                    } else {
                        align(&c.tokens, line, th, dp).map(|(s, p, steps)| (s, p, Plan::Aligned(steps)))
                    };
                    consider(&mut best, c.id, slot, scored);
                }
            }
            // A template with a gap fits lines of many lengths: check the ones that fit it
            // as it is before aligning with anything.
            if best.is_none() {
                for &slot in &self.gapped {
                    let c = clusters[slot as usize].as_ref().expect("live cluster");
                    if fits_gapped(&c.tokens, line) {
                        consider(&mut best, c.id, slot, Some((1.0, c.params(), Plan::Fits)));
                    }
                }
            }
        }
        self.frontier = leaves;
        if best.is_none() && line.len() <= MAX_ALIGN {
            let n = line.len();
            for delta in 1..=MAX_DELTA {
                for len in [n.checked_sub(delta), Some(n + delta)].into_iter().flatten() {
                    let leaves = self.leaves(len, line);
                    let (nodes, clusters, dp) = (&self.nodes, &self.clusters, &mut self.dp);
                    for &leaf in &leaves {
                        for &slot in &nodes[leaf as usize].as_ref().expect("live node").clusters {
                            let c = clusters[slot as usize].as_ref().expect("live cluster");
                            let scored =
                                align(&c.tokens, line, th, dp).map(|(s, p, steps)| (s, p, Plan::Aligned(steps)));
                            consider(&mut best, c.id, slot, scored);
                        }
                    }
                    self.frontier = leaves;
                }
            }
        }
        best.map(|(_, _, _, slot, plan)| (slot, plan))
    }

    /// Generalises the template where the line differs; reports whether the text changed.
    fn merge(&mut self, slot: u32, line: Line<'_>, plan: Plan) -> super::Change {
        let c = self.cluster(slot);
        // The common case, a line that fits its template as it is, allocates nothing.
        let fits = match &plan {
            Plan::Fits => true,
            Plan::Positional => c.tokens.iter().enumerate().all(|(i, t)| t.fits(line.get(i))),
            Plan::Aligned(steps) => {
                steps.iter().all(|s| matches!(*s, Step::Pair(i, j) if c.tokens[i].fits(line.get(j))))
            }
        };
        if fits {
            return super::Change::Unchanged;
        }
        let merged: Vec<Tok> = match &plan {
            Plan::Fits => unreachable!("a fitting line changes nothing"),
            Plan::Positional => c.tokens.iter().enumerate().map(|(i, t)| generalise(t, line.get(i))).collect(),
            Plan::Aligned(steps) => {
                let mut out = Vec::with_capacity(c.tokens.len());
                for step in steps {
                    match *step {
                        Step::Pair(i, j) => out.push(generalise(&c.tokens[i], line.get(j))),
                        Step::Flex => {
                            if out.last() != Some(&Tok::Gap) {
                                out.push(Tok::Gap);
                            }
                        }
                    }
                }
                out
            }
        };
        if merged == c.tokens {
            return super::Change::Unchanged;
        }
        let previous = self.retemplate(slot, merged);
        let mut absorbed = Vec::new();
        let count = self.take_covered(slot, &mut absorbed);
        if absorbed.is_empty() {
            return super::Change::Generalised { previous };
        }
        self.cluster_mut(slot).count += count;
        absorbed.sort_unstable();
        super::Change::Merged { previous, absorbed }
    }

    /// Removes the templates `slot` now [covers](Tree::covered), adding their ids to
    /// `absorbed`; returns their lines, for `slot` to take.
    fn take_covered(&mut self, slot: u32, absorbed: &mut Vec<u64>) -> u64 {
        let mut count = 0;
        for other in self.covered(slot) {
            let c = self.cluster(other);
            absorbed.push(c.id);
            count += c.count;
            self.remove(other);
        }
        count
    }

    /// The other templates a template now covers: same length, and every token of
    /// theirs is one the template's item at that position matches. A template that
    /// generalised (`job jo77h finished` → `job <*> finished`) is then the same event as
    /// the ones it covers (`job h80pu finished`, born earlier with a value that came
    /// first), and would otherwise leave them catching their own value for good, since
    /// an exact template scores above a general one. Like the sibling merge, this reads
    /// only template texts, so a restored miner and a replay decide the same; it is part
    /// of the merge and off with it.
    fn covered(&self, slot: u32) -> Vec<u32> {
        let general = self.cluster(slot);
        if self.merge_siblings < 2 || general.gap {
            return Vec::new();
        }
        let mut out = self.slots_of_length(general.tokens.len());
        out.retain(|&other| {
            let c = self.cluster(other);
            other != slot && !c.gap && general.tokens.iter().zip(&c.tokens).all(|(g, t)| covers(g, t))
        });
        out
    }

    /// Every template of `len` tokens, gapped ones included: the whole subtree of that
    /// length, for the merges, which are rare enough to walk it.
    fn slots_of_length(&self, len: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack: Vec<u32> = self.roots.get(&len).copied().into_iter().collect();
        while let Some(n) = stack.pop() {
            let node = self.node(n);
            stack.extend(node.children.values().copied());
            if node.wild != NONE {
                stack.push(node.wild);
            }
            out.extend_from_slice(&node.clusters);
        }
        out
    }

    /// Gives a cluster new tokens (and the leaf they route to); returns its old text.
    fn retemplate(&mut self, slot: u32, mut merged: Vec<Tok>) -> String {
        self.generation += 1;
        // A new length or routing means a new leaf.
        self.detach(slot);
        let leaf = self.path_for(&mut merged, false);
        let c = self.cluster_mut(slot);
        c.words = merged.iter().filter(|t| matches!(t, Tok::Lit(_, true))).count();
        let had_gap = std::mem::replace(&mut c.gap, merged.contains(&Tok::Gap));
        let gained_gap = c.gap && !had_gap;
        c.tokens = merged;
        c.leaf = leaf;
        let previous = std::mem::replace(&mut c.text, render(&c.tokens));
        self.node_mut(leaf).clusters.push(slot);
        if gained_gap {
            self.gapped.push(slot);
        }
        previous
    }

    /// The templates a would-be template should be merged with instead of being born:
    /// at least `merge_siblings - 1` templates of its length that, like it, agree on
    /// every token but the same one or two positions. One template that differs from a
    /// line in a word is as likely another event as the same event with another value;
    /// several that differ in the same place, and only there, show a variable there.
    /// This is what Drain's fixed threshold cannot see on short lines, where one unmasked
    /// value (`user alice`, `user=root`, `node dn228`) is too large a share of the words.
    /// Looked for only when a template would be born, so it costs nothing per line.
    fn siblings(&self, tokens: &[Tok]) -> Option<Vec<u32>> {
        if self.merge_siblings < 2 {
            return None;
        }
        // Drain's own premise: a message's first word is its subject (`cupsd startup
        // succeeded`, `DMA zone: …`), not a value; values before it (a time, a pid) do
        // not count.
        let subject = tokens.iter().position(|t| matches!(t, Tok::Lit(_, true))).unwrap_or(0);
        let mut found: Vec<(u32, Diff)> = Vec::new();
        'cluster: for slot in self.slots_of_length(tokens.len()) {
            let c = self.cluster(slot);
            if c.gap {
                continue;
            }
            let mut diff = Diff { n: 0, at: [0; MAX_MERGE_POSITIONS] };
            for (q, (t, l)) in c.tokens.iter().zip(tokens).enumerate() {
                if !compatible(t, l) {
                    if q <= subject || diff.n == self.merge_positions {
                        continue 'cluster;
                    }
                    diff.at[diff.n] = q;
                    diff.n += 1;
                }
            }
            if diff.n > 0 {
                found.push((slot, diff));
            }
        }
        if found.is_empty() {
            return None;
        }
        let words = tokens.iter().filter(|t| matches!(t, Tok::Lit(_, true))).count();
        let mut diffs: Vec<Diff> = found.iter().map(|&(_, d)| d).collect();
        diffs.sort_unstable();
        diffs.dedup();
        let mut best: Option<(usize, Diff)> = None;
        for d in diffs {
            // What the merged templates still agree on must be most of the line's words,
            // and at least two of them: `<*> bar` says little.
            let kept = tokens
                .iter()
                .enumerate()
                .filter(|(q, t)| matches!(t, Tok::Lit(_, true)) && !d.positions().contains(q))
                .count();
            if kept < 2 || 2 * kept < words {
                continue;
            }
            let counts = found.iter().filter(|(_, e)| e.within(&d)).map(|&(slot, _)| self.cluster(slot).count);
            let (members, lines, singles) =
                counts.fold((0usize, 0u64, 0u64), |(m, l, s), c| (m + 1, l + c, s + u64::from(c == 1)));
            if members + 1 < self.merge_siblings + d.n - 1 {
                continue;
            }
            // A variable keeps bringing new values: most of its templates hold one line
            // each. Good-Turing: the share of lines whose value was seen once estimates
            // the chance that the next line brings an unseen value (the line itself is
            // one more). A few events that differ in one word soon repeat (`VM Started`,
            // `VM Paused`; `GET`, `POST`; `user=root`, `user=guest`) and score low.
            // Many values settle it whatever their frequencies (twenty hosts that each
            // send a heartbeat a minute): events that differ in one word come in handfuls.
            let many = self.merge_values > 0 && members + 1 >= self.merge_values + d.n - 1;
            if !many && ((singles + 1) as f64) < self.merge_ratio * (lines + 1) as f64 {
                continue;
            }
            let better = match best {
                None => true,
                Some((bm, bd)) => members > bm || members == bm && (d.n < bd.n || d.n == bd.n && d < bd),
            };
            if better {
                best = Some((members, d));
            }
        }
        let (_, d) = best?;
        Some(found.iter().filter(|(_, e)| e.within(&d)).map(|&(slot, _)| slot).collect())
    }

    /// Merges sibling templates and the line into one: the template with the most lines
    /// (then the smaller id) survives with its id, takes the others' counts, and the
    /// others are removed. No template is born, so nothing is announced.
    fn absorb(&mut self, mut members: Vec<u32>, line: Line<'_>) -> Outcome {
        // By id, so the merged text does not depend on the order the tree was walked in.
        members.sort_by_key(|&s| self.cluster(s).id);
        let survivor = *members
            .iter()
            .max_by(|&&a, &&b| {
                let (a, b) = (self.cluster(a), self.cluster(b));
                a.count.cmp(&b.count).then(b.id.cmp(&a.id))
            })
            .expect("siblings are never empty");
        let mut merged = self.cluster(survivor).tokens.clone();
        let mut absorbed = Vec::with_capacity(members.len() - 1);
        let mut count = 0;
        for &slot in &members {
            if slot == survivor {
                continue;
            }
            let c = self.cluster(slot);
            for (m, t) in merged.iter_mut().zip(&c.tokens) {
                *m = unify(m, t);
            }
            absorbed.push(c.id);
            count += c.count;
        }
        for (i, m) in merged.iter_mut().enumerate() {
            *m = generalise(m, line.get(i));
        }
        for &slot in &members {
            if slot != survivor {
                self.remove(slot);
            }
        }
        let previous = self.retemplate(survivor, merged);
        // The merged template may cover others too, as after a generalisation.
        count += self.take_covered(survivor, &mut absorbed);
        self.touch(survivor);
        self.cluster_mut(survivor).count += count + 1;
        absorbed.sort_unstable();
        Outcome { slot: survivor, change: super::Change::Merged { previous, absorbed }, evicted: None }
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

impl Cluster {
    fn params(&self) -> usize {
        self.tokens.iter().filter(|x| !matches!(x, Tok::Lit(..))).count()
    }
}

/// Does a line fit a template with gaps as it is, each gap absorbing only values and
/// units? Matched like a glob, leftmost first: linear, where [`align`] is quadratic, and
/// it settles the common case of a line of an established template.
fn fits_gapped(t: &[Tok], line: Line<'_>) -> bool {
    let n = line.len();
    let absorbable =
        |from: usize, to: usize| flex_ok((from..to).map(|k| (!is_word(line.get(k)), is_unit(line.get(k)))));
    let segment_at =
        |seg: &[Tok], at: usize| at + seg.len() <= n && seg.iter().enumerate().all(|(k, x)| x.fits(line.get(at + k)));
    let mut segments = t.split(|x| *x == Tok::Gap);
    let first = segments.next().unwrap_or(&[]);
    if !segment_at(first, 0) {
        return false;
    }
    let mut j = first.len();
    let rest: Vec<&[Tok]> = segments.collect();
    for (k, seg) in rest.iter().enumerate() {
        if k + 1 == rest.len() {
            // The last segment is anchored at the end of the line.
            let Some(at) = n.checked_sub(seg.len()) else {
                return false;
            };
            return at >= j && segment_at(seg, at) && absorbable(j, at);
        }
        let mut at = j;
        loop {
            if segment_at(seg, at) && absorbable(j, at) {
                break;
            }
            // Once the gap would have to swallow a word, no later position can work.
            if at >= n || !absorbable(j, at + 1) {
                return false;
            }
            at += 1;
        }
        j = at + seg.len();
    }
    j == n
}

/// Keeps the better of two candidates. Ties go to the more specific template (a general
/// one would swallow the lines a specific one was made for), then to the smaller id, so
/// the choice never depends on the order clusters were created or restored in.
fn consider(best: &mut Best, id: u64, slot: u32, scored: Option<(f64, usize, Plan)>) {
    let Some((sim, params, plan)) = scored else {
        return;
    };
    let better = match best {
        None => true,
        Some((bs, bp, bid, _, _)) => sim > *bs || sim == *bs && (params < *bp || params == *bp && id < *bid),
    };
    if better {
        *best = Some((sim, params, id, slot, plan));
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

/// Could a template item and a would-be template's token be the same part of one
/// event? Equal, or a wildcard, or two values, or two words of the same shape.
fn compatible(t: &Tok, l: &Tok) -> bool {
    match (t, l) {
        (Tok::Gap, _) | (_, Tok::Gap) => false,
        (Tok::Wild, _) | (_, Tok::Wild) => true,
        (Tok::Part(p, s), Tok::Lit(l, _)) => part_matches(p, s, l) || !is_word(l),
        (Tok::Lit(a, wa), Tok::Lit(b, wb)) => a == b || !wa && !wb || *wa && same_shape(a, b) || same_variable(a, b),
        (Tok::Part(..), Tok::Part(..)) | (Tok::Lit(..), Tok::Part(..)) => false,
    }
}

/// Does template item `general` match every token item `specific` matches?
fn covers(general: &Tok, specific: &Tok) -> bool {
    match (general, specific) {
        (_, Tok::Gap) | (Tok::Gap, _) => false,
        (Tok::Wild, _) => true,
        (Tok::Part(p, s), Tok::Lit(l, _)) => part_matches(p, s, l),
        (Tok::Part(p, s), Tok::Part(q, t)) => q.starts_with(&**p) && t.ends_with(&**s),
        (Tok::Lit(a, _), Tok::Lit(b, _)) => a == b,
        (Tok::Part(..), Tok::Wild) | (Tok::Lit(..), _) => false,
    }
}

/// The item that covers two template items.
fn unify(a: &Tok, b: &Tok) -> Tok {
    match (a, b) {
        _ if a == b => a.clone(),
        (Tok::Wild, _) | (_, Tok::Wild) | (Tok::Gap, _) | (_, Tok::Gap) => Tok::Wild,
        (_, Tok::Lit(l, _)) => generalise(a, l),
        (Tok::Lit(l, _), _) => generalise(b, l),
        (Tok::Part(p, s), Tok::Part(q, t)) => {
            let pre = affix_merge(p, "", q, false);
            let suf = affix_merge("", s, t, false);
            match (pre, suf) {
                (Tok::Part(p, _), Tok::Part(_, s)) => Tok::Part(p, s),
                (Tok::Part(p, _), Tok::Wild) => Tok::Part(p, "".into()),
                (Tok::Wild, Tok::Part(_, s)) => Tok::Part("".into(), s),
                _ => Tok::Wild,
            }
        }
    }
}

/// The item that covers both the template item and the line token.
fn generalise(t: &Tok, l: &str) -> Tok {
    match t {
        Tok::Lit(s, _) if **s == *l => t.clone(),
        Tok::Lit(s, _) => affix_merge(s, s, l, true),
        Tok::Part(p, s) if part_matches(p, s, l) => t.clone(),
        Tok::Part(p, s) => affix_merge(p, s, l, false),
        Tok::Wild | Tok::Gap => t.clone(),
    }
}

/// Similarity of a line to a same-length template, position by position: the share of
/// the template's words the line repeats. Drain divides by all tokens, so every wildcard
/// a template learns makes it harder to join, and a well-learned template ends up
/// rejecting its own lines; and it counts matching placeholders (`<NUM>` = `<NUM>`) as
/// evidence, so short lines of numbers merge whatever they say. Here wildcards and values
/// are left out of the ratio, except that a word where the template has a value counts
/// against it. Returns `None` below the threshold (exiting as soon as it cannot be
/// reached), else the similarity and the number of wildcards.
#[inline]
fn positional(c: &Cluster, line: Line<'_>, th: f64) -> Option<(f64, usize, bool)> {
    let words = c.words;
    let mut word_misses = 0usize;
    let mut value_misses = 0usize;
    let mut params = 0usize;
    // Whether every token fits as it is, so the merge has nothing to do.
    let mut exact = true;
    for (i, t) in c.tokens.iter().enumerate() {
        let l = line.get(i);
        let miss = match t {
            Tok::Lit(s, w) => {
                if **s == *l {
                    continue;
                }
                exact = false;
                if same_variable(s, l) || if *w { same_shape(s, l) } else { !is_word(l) } {
                    continue;
                }
                if *w && is_setting(s) {
                    return None;
                }
                *w
            }
            Tok::Wild => {
                params += 1;
                continue;
            }
            Tok::Part(p, s) => {
                params += 1;
                if part_matches(p, s, l) {
                    continue;
                }
                exact = false;
                if !is_word(l) {
                    continue;
                }
                false
            }
            Tok::Gap => unreachable!("gap templates are aligned"),
        };
        if miss {
            word_misses += 1;
        } else {
            value_misses += 1;
        }
        if ((words - word_misses) as f64) < th * (words + value_misses) as f64 {
            return None;
        }
    }
    let denom = words + value_misses;
    let sim = if denom == 0 { 1.0 } else { (words - word_misses) as f64 / denom as f64 };
    (sim >= th).then_some((sim, params, exact))
}

/// Aligns a line with a template of another length, or one with gaps: a weighted longest
/// common subsequence, then every stretch between aligned tokens is either the same width
/// on both sides (compared position by position) or made only of values and units on
/// both sides (it becomes a gap). A stretch that changes width and holds a word rejects
/// the template: `rhost=<IP>` never joins `rhost=<IP> user=root`, but `bytes sent` joins
/// `bytes (<NUM>.<NUM> KB) sent`. Scored like [`positional`].
fn align(t: &[Tok], line: Line<'_>, th: f64, dp: &mut Vec<u16>) -> Option<(f64, usize, Vec<Step>)> {
    let (m, n) = (t.len(), line.len());
    if m > MAX_ALIGN || n > MAX_ALIGN {
        return None;
    }
    let w = n + 1;
    let score = |i: usize, j: usize| -> u16 {
        match &t[i] {
            Tok::Lit(s, word) if **s == *line.get(j) => {
                if *word {
                    3
                } else {
                    2
                }
            }
            Tok::Wild => 1,
            Tok::Part(p, s) if part_matches(p, s, line.get(j)) => 1,
            _ => 0,
        }
    };
    // Suffix table, so the trace runs forwards and prefers the earliest pairing.
    dp.clear();
    dp.resize((m + 1) * w, 0);
    for i in (0..m).rev() {
        for j in (0..n).rev() {
            let mut best = dp[(i + 1) * w + j].max(dp[i * w + j + 1]);
            let s = score(i, j);
            if s > 0 {
                best = best.max(dp[(i + 1) * w + j + 1] + s);
            }
            dp[i * w + j] = best;
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < m && j < n {
        let s = score(i, j);
        if s > 0 && dp[i * w + j] == dp[(i + 1) * w + j + 1] + s {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if dp[i * w + j] == dp[(i + 1) * w + j] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs.push((m, n));

    let mut steps = Vec::with_capacity(m.max(n));
    let (mut words, mut word_misses, mut value_misses) = (0usize, 0usize, 0usize);
    let (mut ti, mut lj) = (0, 0);
    for &(pi, pj) in &pairs {
        let (items, toks) = (ti..pi, lj..pj);
        let has_gap = t[items.clone()].contains(&Tok::Gap);
        if !has_gap && items.len() == toks.len() {
            for (a, b) in items.zip(toks) {
                steps.push(Step::Pair(a, b));
                match &t[a] {
                    Tok::Lit(s, true) => {
                        words += 1;
                        let miss = **s != *line.get(b) && !same_shape(s, line.get(b)) && !same_variable(s, line.get(b));
                        if miss && is_setting(s) {
                            return None;
                        }
                        word_misses += usize::from(miss);
                    }
                    // Two values differing is no evidence either way (`<NUM>`, `<HEX>`);
                    // as in `positional`, nor is one variable spelt two ways.
                    other => {
                        let l = line.get(b);
                        let same = matches!(other, Tok::Lit(s, false) if same_variable(s, l));
                        value_misses += usize::from(!other.fits(l) && is_word(l) && !same);
                    }
                }
            }
        } else if !items.is_empty() || !toks.is_empty() {
            let items_ok =
                flex_ok(t[items].iter().map(|x| (x.variable_like(), matches!(x, Tok::Lit(s, true) if is_unit(s)))));
            let toks_ok = flex_ok(toks.map(|k| {
                let s = line.get(k);
                (!is_word(s), is_unit(s))
            }));
            if !(items_ok && toks_ok) {
                return None;
            }
            steps.push(Step::Flex);
        }
        if pi < m {
            steps.push(Step::Pair(pi, pj));
            if matches!(t[pi], Tok::Lit(_, true)) {
                words += 1;
            }
        }
        ti = pi + 1;
        lj = pj + 1;
    }
    let denom = words + value_misses;
    let sim = if denom == 0 { 1.0 } else { (words - word_misses) as f64 / denom as f64 };
    let params = t.iter().filter(|x| !matches!(x, Tok::Lit(..))).count();
    (sim >= th).then_some((sim, params, steps))
}

/// A stretch may change width when it is only values, each optionally followed by units
/// (`<NUM>.<NUM> KB)`, `<<NUM> sec`).
fn flex_ok(items: impl Iterator<Item = (bool, bool)>) -> bool {
    let mut after_value = false;
    for (variable, unit) in items {
        if variable {
            after_value = true;
        } else if !(unit && after_value) {
            return false;
        }
    }
    true
}

/// Can an affix end (prefix) or start (suffix) at this character? Punctuation, but not
/// the brackets of placeholders, so `<NUM>` is never cut in half, nor `_`, which joins the
/// parts of one identifier (`rdd_<ID>` and `broadcast_<ID>` have nothing in common).
#[inline]
fn affix_delim(c: u8) -> bool {
    c.is_ascii_punctuation() && !matches!(c, b'<' | b'>' | b'*' | b'_')
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
    fn shapes() {
        assert!(same_shape("rhost=<IP>", "rhost=<HOST>"));
        assert!(!same_shape("rhost=<IP>", "rhost=<IP>"));
        assert!(!same_shape("rhost=<IP>", "lhost=<HOST>"));
        assert!(!same_shape("a<b", "a<c"));
        assert!(same_variable("(<NUM>.<NUM>)", "(<NUM>:<NUM>-<NUM>+deb12u1)"));
        assert!(same_variable("<NUM>.<NUM>+dfsg", "<NUM>"));
        assert!(!same_variable("blk_<ID>", "rdd_<ID>"), "the prefix says what the value is");
        assert!(!same_variable("(<NUM>)", "(x<NUM>)"));
        assert!(!same_variable("a<b", "a<c"), "not placeholders");
        assert!(!same_variable("<NUM>", "word"));
        assert!(is_word("blk_<ID>") && !is_word("<IP>:<NUM>") && !is_word("(<*>)") && !is_word("<...>"));
        assert!(is_setting("user=root") && is_setting("tty=NODEVssh,") && is_setting("mode=\"strict\""));
        assert!(!is_setting("uid=<NUM>") && !is_setting("logname=") && !is_setting("=x") && !is_setting("a=1"));
    }

    #[test]
    fn token_parse_round_trips() {
        for t in ["<*>", "(<*>)", "user=<*>", "plain", "<NUM>", "", "<...>"] {
            let mut s = String::new();
            Tok::parse(t).write(&mut s);
            assert_eq!(s, t);
        }
    }
}
