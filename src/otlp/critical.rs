//! Where a trace's time went: each span's self time and the trace's critical path, for both
//! waterfalls and the API's trace (docs/stories.md, "Critical path and self time"). Pure.
//! The shape diff's self time (`store::query::stories::edge_profile`, a layer below, which
//! cannot call this) is held equal to [`self_times`] by a property test here.
//!
//! Spans are given as `tree::tree_order` takes them, by index: `span(i)` is span `i`'s
//! (span id, parent span id, start, end). A span whose parent is not among them (or is
//! itself) is a root; an end before the start is read as a zero-length span. Timestamps
//! come from different hosts, so a child may start before or end after its parent (clock
//! skew): it counts only where it overlaps its parent.

use std::collections::HashMap;

/// A span's (id, parent id, start ns, end ns).
pub type Timing<'a> = (&'a str, &'a str, u64, u64);

/// One stretch of the critical path: the span that was doing the work the trace waited on
/// over `[from_ns, to_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub span: usize,
    pub from_ns: u64,
    pub to_ns: u64,
}

/// The chain of spans that set the trace's end-to-end duration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CriticalPath {
    /// The spans on it, each once: the root first, every other one after its parent.
    pub spans: Vec<usize>,
    /// Disjoint, in time order, within the root: who the trace waited on, when. A span
    /// whose children cover all of its stretch is on the path without a segment.
    pub segments: Vec<Segment>,
}

impl CriticalPath {
    /// Per span: whether it is on the path.
    pub fn marks(&self, count: usize) -> Vec<bool> {
        let mut marks = vec![false; count];
        for i in &self.spans {
            marks[*i] = true;
        }
        marks
    }
}

/// Each span's parent index (none for a root) and children's indices.
struct Links {
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
}

fn links<'a>(count: usize, span: &impl Fn(usize) -> Timing<'a>) -> Links {
    let ids: HashMap<&str, usize> = (0..count).map(|i| (span(i).0, i)).collect();
    let parent: Vec<Option<usize>> = (0..count).map(|i| ids.get(span(i).1).copied().filter(|p| *p != i)).collect();
    let mut children = vec![Vec::new(); count];
    for (i, p) in parent.iter().enumerate() {
        if let Some(p) = p {
            children[*p].push(i);
        }
    }
    Links { parent, children }
}

/// `[start, end)`, an end before the start read as the start.
fn interval(t: Timing<'_>) -> (u64, u64) {
    (t.2, t.3.max(t.2))
}

/// Each span's self time: its duration less the union of its children's intervals, each
/// clipped to the span (overlapping children count once; a child outside it, nothing).
pub fn self_times<'a>(count: usize, span: impl Fn(usize) -> Timing<'a>) -> Vec<u64> {
    let links = links(count, &span);
    (0..count)
        .map(|i| {
            let (from, to) = interval(span(i));
            let kids: Vec<(u64, u64)> = links.children[i].iter().map(|k| interval(span(*k))).collect();
            (to - from) - crate::time::covered_ns(&kids, from, to)
        })
        .collect()
}

/// The critical path. It starts at the root (the longest, when orphans make several; the
/// longest span when a cycle of parents leaves none) and walks back from its end: the child
/// that finished last, no later than the point reached, is on the path and is walked the
/// same way within its own interval; the point then moves to that child's start, and the
/// next child must have ended by then. The time no child covers is the parent's own.
/// Children are clipped to their parent's stretch on the path; one with nothing left (zero
/// length, or wholly outside by clock skew) never joins. Concurrent children that end
/// earlier than the one taken are off the path: the trace was waiting on the other.
pub fn critical_path<'a>(count: usize, span: impl Fn(usize) -> Timing<'a>) -> CriticalPath {
    let links = links(count, &span);
    let length = |i: usize| {
        let (s, e) = interval(span(i));
        e - s
    };
    // The longest, then the earliest start, then the first given.
    let best = |candidates: &mut dyn Iterator<Item = usize>| {
        candidates.min_by_key(|i| (std::cmp::Reverse(length(*i)), span(*i).2, *i))
    };
    let root = match best(&mut (0..count).filter(|i| links.parent[*i].is_none())) {
        Some(r) => r,
        None => match best(&mut (0..count)) {
            Some(r) => r,
            None => return CriticalPath::default(),
        },
    };

    struct Frame {
        span: usize,
        from: u64,
        cursor: u64,
        /// Children clipped to this stretch: (end, start, index), the latest end first.
        kids: Vec<(u64, u64, usize)>,
        next: usize,
    }
    let frame = |i: usize, from: u64, to: u64| {
        let mut kids: Vec<(u64, u64, usize)> = links.children[i]
            .iter()
            .map(|k| {
                let (s, e) = interval(span(*k));
                (e.min(to), s.max(from), *k)
            })
            .filter(|(e, s, _)| s < e)
            .collect();
        // The latest end first; of those, the earliest start (it explains more), then order.
        kids.sort_unstable_by_key(|(e, s, k)| (std::cmp::Reverse(*e), *s, *k));
        Frame { span: i, from, cursor: to, kids, next: 0 }
    };

    let mut path = CriticalPath::default();
    let mut on_path = vec![false; count];
    on_path[root] = true;
    path.spans.push(root);
    let (from, to) = interval(span(root));
    let mut stack = vec![frame(root, from, to)];
    let mut backwards = Vec::new();
    while let Some(top) = stack.last_mut() {
        let mut taken = None;
        while let Some(&(end, start, k)) = top.kids.get(top.next) {
            top.next += 1;
            if on_path[k] || end > top.cursor {
                continue;
            }
            if end < top.cursor {
                backwards.push(Segment { span: top.span, from_ns: end, to_ns: top.cursor });
            }
            top.cursor = start;
            taken = Some((k, start, end));
            break;
        }
        match taken {
            Some((k, start, end)) => {
                on_path[k] = true;
                path.spans.push(k);
                stack.push(frame(k, start, end));
            }
            None => {
                if top.from < top.cursor {
                    backwards.push(Segment { span: top.span, from_ns: top.from, to_ns: top.cursor });
                }
                stack.pop();
            }
        }
    }
    backwards.reverse();
    path.segments = backwards;
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Row = (&'static str, &'static str, u64, u64);

    fn path_of(spans: &[Row]) -> Vec<&'static str> {
        critical_path(spans.len(), |i| spans[i]).spans.iter().map(|i| spans[*i].0).collect()
    }

    #[test]
    fn a_fan_out_waits_on_its_longest_branch_then_what_came_before() {
        // root 0..100: a parallel fan-out (b 10..40, c 10..80 with its own child), then d.
        let spans = [
            ("root", "", 0, 100),
            ("b", "root", 10, 40),
            ("c", "root", 10, 80),
            ("c1", "c", 20, 70),
            ("b1", "b", 15, 35),
            ("d", "root", 82, 95),
            ("a", "root", 2, 8),
        ];
        assert_eq!(path_of(&spans), ["root", "d", "c", "c1", "a"]);
        let p = critical_path(spans.len(), |i| spans[i]);
        let segments: Vec<(&str, u64, u64)> =
            p.segments.iter().map(|s| (spans[s.span].0, s.from_ns, s.to_ns)).collect();
        assert_eq!(
            segments,
            [
                ("root", 0, 2),
                ("a", 2, 8),
                ("root", 8, 10),
                ("c", 10, 20),
                ("c1", 20, 70),
                ("c", 70, 80),
                ("root", 80, 82),
                ("d", 82, 95),
                ("root", 95, 100)
            ]
        );
        assert_eq!(p.marks(spans.len()), [true, false, true, true, false, true, true]);
    }

    #[test]
    fn overlapping_children_leave_the_earlier_one_off_the_path() {
        // b ends after a started: the trace waited on b; a ended after b began, so it is off.
        let spans = [("r", "", 0, 100), ("a", "r", 0, 50), ("b", "r", 40, 100)];
        assert_eq!(path_of(&spans), ["r", "b"]);
    }

    #[test]
    fn orphans_skew_zero_lengths_and_cycles_are_survived() {
        // The longest root wins over an orphan; a child past its parent's end is clipped
        // (and still on the path); one wholly outside, or of zero length, is not.
        let spans = [
            ("o", "gone", 0, 10),
            ("r", "", 0, 50),
            ("late", "r", 30, 70),
            ("outside", "r", 60, 90),
            ("zero", "r", 20, 20),
            ("backwards", "r", 25, 5),
            ("self", "self", 0, 1),
        ];
        assert_eq!(path_of(&spans), ["r", "late"]);
        let p = critical_path(spans.len(), |i| spans[i]);
        assert_eq!(p.segments.iter().map(|s| s.to_ns - s.from_ns).sum::<u64>(), 50);

        let cycle = [("x", "y", 0, 10), ("y", "x", 2, 8)];
        assert_eq!(path_of(&cycle), ["x", "y"], "no root: the longest span starts it, each once");
        assert_eq!(path_of(&[]), Vec::<&str>::new());
    }

    #[test]
    fn self_time_is_the_duration_less_the_children_clipped_and_merged() {
        let spans = [
            ("r", "", 0, 100),
            ("a", "r", 10, 30),
            ("b", "r", 20, 50),
            ("c", "r", 60, 90),
            ("d", "c", 65, 95),
            ("e", "r", 120, 130),
            ("s", "s", 0, 7),
        ];
        assert_eq!(self_times(spans.len(), |i| spans[i]), [100 - 40 - 30, 20, 30, 5, 30, 10, 7]);
    }

    /// A trace of up to 12 spans: ids "0".."11", each parent an earlier span, a missing one
    /// or a later one (a cycle), at any times (ends before starts included).
    fn traces() -> impl Strategy<Value = Vec<(String, String, u64, u64)>> {
        prop::collection::vec((0u64..1000, 0u64..400, 0usize..16), 0..12).prop_map(|raw| {
            raw.iter()
                .enumerate()
                .map(|(i, (start, length, parent))| {
                    let parent = if *parent >= 14 { String::new() } else { parent.to_string() };
                    let end = if length % 17 == 0 { start.saturating_sub(*length) } else { start + length };
                    (i.to_string(), parent, *start, end)
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn the_path_is_a_chain_from_the_root_and_accounts_for_its_duration(spans in traces()) {
            let get = |i: usize| (spans[i].0.as_str(), spans[i].1.as_str(), spans[i].2, spans[i].3);
            let p = critical_path(spans.len(), get);
            let links = links(spans.len(), &get);
            if spans.is_empty() {
                prop_assert!(p.spans.is_empty());
                return Ok(());
            }
            let root = p.spans[0];
            let (from, to) = interval(get(root));
            let mut seen = std::collections::HashSet::new();
            for (n, i) in p.spans.iter().enumerate() {
                prop_assert!(seen.insert(*i), "each span once");
                if n > 0 {
                    let parent = links.parent[*i].expect("a span on the path below the root has a parent");
                    prop_assert!(p.spans[..n].contains(&parent), "its parent came before it");
                }
            }
            let mut reach = from;
            for s in &p.segments {
                prop_assert!(s.from_ns < s.to_ns && s.from_ns >= reach && s.to_ns <= to);
                prop_assert!(p.spans.contains(&s.span));
                let (ss, se) = interval(get(s.span));
                prop_assert!(ss <= s.from_ns && s.to_ns <= se, "a segment lies within its span");
                reach = s.to_ns;
            }
            let total: u64 = p.segments.iter().map(|s| s.to_ns - s.from_ns).sum();
            prop_assert_eq!(total, to - from, "the segments tile the root");
            // The root's child that ended last (within the root) is on the path.
            let last = links.children[root]
                .iter()
                .map(|k| { let (s, e) = interval(get(*k)); (e.min(to), s.max(from), *k) })
                .filter(|(e, s, _)| s < e)
                .max_by_key(|(e, s, k)| (*e, std::cmp::Reverse(*s), std::cmp::Reverse(*k)));
            if let Some((_, _, k)) = last {
                prop_assert!(p.spans.contains(&k));
            }
        }

        #[test]
        fn the_shape_diffs_self_time_is_this_one(spans in traces()) {
            // `store::query::stories::edge_profile` sits a layer below and keeps its own copy.
            let rows: Vec<crate::model::SpanRow> = spans
                .iter()
                .map(|(id, parent, start, end)| crate::model::SpanRow {
                    span_id: id.clone(),
                    parent_span_id: parent.clone(),
                    service: "s".into(),
                    name: id.clone(),
                    start_ns: *start,
                    end_ns: *end,
                    ..Default::default()
                })
                .collect();
            let get = |i: usize| (spans[i].0.as_str(), spans[i].1.as_str(), spans[i].2, spans[i].3);
            let ours = self_times(spans.len(), get);
            let profile = crate::store::query::stories::edge_profile(&rows);
            for (i, s) in spans.iter().enumerate() {
                // Each span's operation is its id, so each edge holds one span.
                let edge = profile.iter().find(|(e, _)| e.ends_with(&format!("-> s/{}", s.0))).unwrap();
                prop_assert_eq!(edge.1 .1, ours[i], "span {}", s.0);
            }
        }

        #[test]
        fn self_time_never_exceeds_the_duration_and_children_inside_share_it_out(spans in traces()) {
            let get = |i: usize| (spans[i].0.as_str(), spans[i].1.as_str(), spans[i].2, spans[i].3);
            let times = self_times(spans.len(), get);
            let links = links(spans.len(), &get);
            for (i, t) in times.iter().enumerate() {
                let (s, e) = interval(get(i));
                prop_assert!(*t <= e - s);
                // Children wholly inside and apart from one another leave exactly the rest.
                let kids: Vec<(u64, u64)> = links.children[i].iter().map(|k| interval(get(*k))).collect();
                let mut sorted = kids.clone();
                sorted.sort_unstable();
                let inside = kids.iter().all(|(ks, ke)| s <= *ks && *ke <= e);
                let apart = sorted.windows(2).all(|w| w[0].1 <= w[1].0);
                if inside && apart {
                    prop_assert_eq!(*t, (e - s) - kids.iter().map(|(a, b)| b - a).sum::<u64>());
                }
            }
        }
    }
}
