//! Equal lists shared rather than copied.
//!
//! A converged ToR of the HPN pod reaches its sixteen thousand prefixes
//! through the same sixty next hops: the RIB's ECMP sets, the FIB a speaker
//! installed, the change sets waiting for the kernel and the table a
//! watcher mirrors each hold that list once per prefix unless equal lists
//! are one allocation. An [`Interner`] hands out one `Arc<[T]>` per
//! distinct list; cloning it is a reference count.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// Lists below which an interner does not look for unused entries.
const PRUNE_FROM: usize = 64;

/// One shared allocation per distinct list. Lists nobody else holds any
/// more are dropped when the interner has doubled since it last looked, so
/// it stays within twice what is in use.
#[derive(Debug, Clone)]
pub struct Interner<T> {
    lists: HashSet<Arc<[T]>>,
    prune_at: usize,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            lists: HashSet::new(),
            prune_at: PRUNE_FROM,
        }
    }
}

impl<T: Hash + Eq + Clone> Interner<T> {
    /// The shared list equal to `items` (allocated only the first time).
    pub fn intern(&mut self, items: &[T]) -> Arc<[T]> {
        if let Some(shared) = self.lists.get(items) {
            return Arc::clone(shared);
        }
        if self.lists.len() >= self.prune_at {
            self.lists.retain(|l| Arc::strong_count(l) > 1);
            self.prune_at = (self.lists.len() * 2).max(PRUNE_FROM);
        }
        let shared: Arc<[T]> = items.into();
        self.lists.insert(Arc::clone(&shared));
        shared
    }

    /// Distinct lists held (some perhaps unused since the last look).
    pub fn len(&self) -> usize {
        self.lists.len()
    }

    /// Whether it holds no list.
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_lists_share_one_allocation() {
        let mut i = Interner::default();
        let a = i.intern(&[1, 2, 3]);
        let b = i.intern(&Vec::from([1, 2, 3]));
        let c = i.intern(&[1, 2]);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(i.len(), 2);
    }

    #[test]
    fn unused_lists_go_once_it_has_doubled() {
        let mut i = Interner::default();
        let kept: Vec<Arc<[u32]>> = (0..10).map(|n| i.intern(&[n])).collect();
        for n in 10..PRUNE_FROM as u32 {
            i.intern(&[n]);
        }
        assert_eq!(i.len(), PRUNE_FROM);
        // The next new list finds the unused ones and drops them.
        i.intern(&[1000]);
        assert_eq!(i.len(), kept.len() + 1);
        assert!(Arc::ptr_eq(&kept[3], &i.intern(&[3])));
    }
}
