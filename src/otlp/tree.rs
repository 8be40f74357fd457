//! A trace's spans in tree order, for every waterfall (the app's and the terminal's). Pure.

use std::collections::{BTreeMap, HashMap};

/// The order to draw `count` spans in: each parent before its children, siblings by
/// `(start, span id)`, as (depth, index) pairs. `span(i)` gives span `i`'s (span id, parent
/// span id, start). A span whose parent is not among them is a root; spans caught in a cycle
/// of parents come last, at the top level. Every span comes once.
pub fn tree_order<'a>(count: usize, span: impl Fn(usize) -> (&'a str, &'a str, u64)) -> Vec<(usize, usize)> {
    let ids: HashMap<&str, usize> = (0..count).map(|i| (span(i).0, i)).collect();
    let mut children: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
    for i in 0..count {
        let parent = ids.get(span(i).1).copied().filter(|p| *p != i);
        children.entry(parent).or_default().push(i);
    }
    for list in children.values_mut() {
        list.sort_by_key(|i| (span(*i).2, span(*i).0));
    }
    let mut order = Vec::with_capacity(count);
    let mut seen = vec![false; count];
    let mut stack: Vec<(usize, usize)> =
        children.get(&None).map(|r| r.iter().rev().map(|i| (0, *i)).collect()).unwrap_or_default();
    while let Some((depth, i)) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        order.push((depth, i));
        if let Some(kids) = children.get(&Some(i)) {
            stack.extend(kids.iter().rev().map(|k| (depth + 1, *k)));
        }
    }
    order.extend((0..count).filter(|i| !seen[*i]).map(|i| (0, i)));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_come_first_and_orphans_and_cycles_are_kept() {
        let spans = [
            ("c", "a", 30),
            ("a", "", 0),
            ("b", "a", 10),
            ("d", "b", 12),
            ("o", "missing", 50),
            ("x", "y", 1),
            ("y", "x", 1),
        ];
        let order: Vec<(usize, &str)> =
            tree_order(spans.len(), |i| spans[i]).into_iter().map(|(d, i)| (d, spans[i].0)).collect();
        assert_eq!(order, [(0, "a"), (1, "b"), (2, "d"), (1, "c"), (0, "o"), (0, "x"), (0, "y")]);
    }
}
