//! The sibling merge: a would-be template that differs from several existing ones in the
//! same one or two positions, and only there, shows a variable there; they become one
//! template instead of a new one being born.

use super::generalise::{generalise, unify};
use super::similarity::compatible;
use super::token::{Line, Tok};
use super::{Outcome, Tree};
use crate::mine::Change;

/// Most positions in which siblings may differ to be merged.
pub(super) const MAX_MERGE_POSITIONS: usize = 2;

/// Where a sibling differs from a line's would-be template: up to
/// [`MAX_MERGE_POSITIONS`] positions, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Diff {
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

impl Tree {
    /// The templates a would-be template should be merged with instead of being born:
    /// at least `merge_siblings - 1` templates of its length that, like it, agree on
    /// every token but the same one or two positions. One template that differs from a
    /// line in a word is as likely another event as the same event with another value;
    /// several that differ in the same place, and only there, show a variable there.
    /// This is what Drain's fixed threshold cannot see on short lines, where one unmasked
    /// value (`user alice`, `user=root`, `node dn228`) is too large a share of the words.
    /// Looked for only when a template would be born, so it costs nothing per line.
    pub(super) fn siblings(&self, tokens: &[Tok]) -> Option<Vec<u32>> {
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
    pub(super) fn absorb(&mut self, mut members: Vec<u32>, line: Line<'_>) -> Outcome {
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
        Outcome { slot: survivor, change: Change::Merged { previous, absorbed }, evicted: None }
    }
}
