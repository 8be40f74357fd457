//! Recency: the templates as a least-recently-used list, so a tree at its cap evicts the
//! template unused the longest, and a restore in this order rebuilds the same list.

use super::{Cluster, Tree, NONE};

impl Tree {
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

    /// The template evicted to make room for one more, as it was (its caller may still
    /// have to store it).
    pub(super) fn make_room(&mut self) -> Option<crate::mine::StoredTemplate> {
        if self.by_id.len() < self.max_clusters {
            return None;
        }
        let victim = self.oldest;
        let c = self.cluster(victim);
        let gone = crate::mine::StoredTemplate { id: c.id, template: c.text.clone(), count: c.count };
        self.remove(victim);
        Some(gone)
    }

    pub(super) fn touch(&mut self, slot: u32) {
        if self.newest == slot {
            return;
        }
        self.unlink(slot);
        self.push_newest(slot);
    }

    pub(super) fn push_newest(&mut self, slot: u32) {
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

    pub(super) fn unlink(&mut self, slot: u32) {
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
}
