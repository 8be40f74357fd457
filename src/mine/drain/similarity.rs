//! How a line lines up with a template, and which template it joins: the search over the
//! leaves a line can reach (and, failing that, templates a few tokens longer or shorter),
//! position-by-position similarity, alignment through gaps, and the tie-breaking that keeps
//! the choice independent of the order templates were made in.

use super::token::{is_setting, is_unit, is_word, part_matches, same_shape, same_variable, Line, Tok};
use super::{Cluster, Tree};

/// How a line lines up with a template.
#[derive(Debug)]
pub(super) enum Plan {
    /// The line fits the template as it is.
    Fits,
    /// Same length, no gap: token `i` of the line against item `i`.
    Positional,
    /// The result of [`align`].
    Aligned(Vec<Step>),
}

#[derive(Debug, Clone)]
pub(super) enum Step {
    /// Item `.0` against token `.1`.
    Pair(usize, usize),
    /// Items and tokens that become one [`Tok::Gap`].
    Flex,
}

/// Longest token sequence aligned with dynamic programming; longer lines only meet
/// templates of their own length.
pub(super) const MAX_ALIGN: usize = 64;

/// How far apart in length a line and a template may be to be aligned.
pub(super) const MAX_DELTA: usize = 6;

/// The best candidate so far: similarity, wildcard count, id, slot, plan.
pub(super) type Best = Option<(f64, usize, u64, u32, Plan)>;

/// Does a line fit a template with gaps as it is, each gap absorbing only values and
/// units? Matched like a glob, leftmost first: linear, where [`align`] is quadratic, and
/// it settles the common case of a line of an established template.
pub(super) fn fits_gapped(t: &[Tok], line: Line<'_>) -> bool {
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
pub(super) fn consider(best: &mut Best, id: u64, slot: u32, scored: Option<(f64, usize, Plan)>) {
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
/// Could a template item and a would-be template's token be the same part of one
/// event? Equal, or a wildcard, or two values, or two words of the same shape.
pub(super) fn compatible(t: &Tok, l: &Tok) -> bool {
    match (t, l) {
        (Tok::Gap, _) | (_, Tok::Gap) => false,
        (Tok::Wild, _) | (_, Tok::Wild) => true,
        (Tok::Part(p, s), Tok::Lit(l, _)) => part_matches(p, s, l) || !is_word(l),
        (Tok::Lit(a, wa), Tok::Lit(b, wb)) => a == b || !wa && !wb || *wa && same_shape(a, b) || same_variable(a, b),
        (Tok::Part(..), Tok::Part(..)) | (Tok::Lit(..), Tok::Part(..)) => false,
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
pub(super) fn positional(c: &Cluster, line: Line<'_>, th: f64) -> Option<(f64, usize, bool)> {
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
pub(super) fn align(t: &[Tok], line: Line<'_>, th: f64, dp: &mut Vec<u16>) -> Option<(f64, usize, Vec<Step>)> {
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
pub(super) fn flex_ok(items: impl Iterator<Item = (bool, bool)>) -> bool {
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

impl Tree {
    /// The most similar cluster at or above the threshold: among templates of the line's
    /// length first, and only when none qualifies among templates a few tokens longer or
    /// shorter, which can only be joined through a gap.
    pub(super) fn best_match(&mut self, line: Line<'_>) -> Option<(u32, Plan)> {
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
}
