//! The optional memo of masked lines that matched a template unchanged: the same masked line
//! again skips the search while no template has changed since.

use super::{FastMap, Outcome, Tree};
use crate::mine::Change;

/// Masked lines longer than this are never remembered (see [`Tree::set_memo`]): with
/// `entries` lines the memo holds at most `entries` × 1 KiB of text.
pub(super) const MEMO_MAX_LINE: usize = 1024;

impl Tree {
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
        Some(Outcome { slot, change: Change::Unchanged, evicted: None })
    }

    pub(super) fn remember(&mut self, text: &str, slot: u32) {
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
}
