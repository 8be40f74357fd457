//! A template learning from a line that joined it: each differing token generalised (keeping
//! the punctuation around a value), the new text routed to its leaf, and the templates the
//! more general one now covers absorbed into it.

use super::similarity::{Plan, Step};
use super::token::part_matches;
use super::token::{render, Line, Tok};
use super::{Tree, NONE};
use crate::mine::Change;

/// Does template item `general` match every token item `specific` matches?
pub(super) fn covers(general: &Tok, specific: &Tok) -> bool {
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
pub(super) fn unify(a: &Tok, b: &Tok) -> Tok {
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
pub(super) fn generalise(t: &Tok, l: &str) -> Tok {
    match t {
        Tok::Lit(s, _) if **s == *l => t.clone(),
        Tok::Lit(s, _) => affix_merge(s, s, l, true),
        Tok::Part(p, s) if part_matches(p, s, l) => t.clone(),
        Tok::Part(p, s) => affix_merge(p, s, l, false),
        Tok::Wild | Tok::Gap => t.clone(),
    }
}

/// Can an affix end (prefix) or start (suffix) at this character? Punctuation, but not
/// the brackets of placeholders, so `<NUM>` is never cut in half, nor `_`, which joins the
/// parts of one identifier (`rdd_<ID>` and `broadcast_<ID>` have nothing in common).
#[inline]
pub(super) fn affix_delim(c: u8) -> bool {
    c.is_ascii_punctuation() && !matches!(c, b'<' | b'>' | b'*' | b'_')
}

/// Generalises a token (`pre…suf`, `pre == suf == whole` for a literal) against a
/// differing line token: keeps the longest common prefix ending in punctuation and the
/// longest common suffix starting with punctuation, so `(alpha)` and `(beta)` give
/// `(<*>)` and `user=root`, `user=guest` give `user=<*>`; with nothing in common the
/// token becomes `<*>`.
/// `literal` says `pre` and `suf` are one string, whose prefix and suffix must not overlap.
pub(super) fn affix_merge(pre: &str, suf: &str, line: &str, literal: bool) -> Tok {
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

impl Tree {
    /// Generalises the template where the line differs; reports whether the text changed.
    pub(super) fn merge(&mut self, slot: u32, line: Line<'_>, plan: Plan) -> Change {
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
            return Change::Unchanged;
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
            return Change::Unchanged;
        }
        let previous = self.retemplate(slot, merged);
        let mut absorbed = Vec::new();
        let count = self.take_covered(slot, &mut absorbed);
        if absorbed.is_empty() {
            return Change::Generalised { previous };
        }
        self.cluster_mut(slot).count += count;
        absorbed.sort_unstable();
        Change::Merged { previous, absorbed }
    }

    /// Removes the templates `slot` now [covers](Tree::covered), adding their ids to
    /// `absorbed`; returns their lines, for `slot` to take.
    pub(super) fn take_covered(&mut self, slot: u32, absorbed: &mut Vec<u64>) -> u64 {
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
    pub(super) fn covered(&self, slot: u32) -> Vec<u32> {
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
    pub(super) fn slots_of_length(&self, len: usize) -> Vec<u32> {
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
    pub(super) fn retemplate(&mut self, slot: u32, mut merged: Vec<Tok>) -> String {
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
}
