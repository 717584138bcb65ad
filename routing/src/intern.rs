//! Equal values shared rather than copied.
//!
//! A converged ToR of the HPN pod reaches its thirty thousand prefixes
//! through the same sixty next hops, and hears each of them from sixty
//! peers with a handful of distinct attribute sets: the RIB's route sets
//! and ECMP sets, the FIB a speaker installed, the change sets waiting for
//! the kernel and the table a watcher mirrors each hold those once per
//! prefix unless equal values are one allocation. An [`Interner`] hands
//! out one `Arc` per distinct value (a list, or one value); cloning it is a
//! reference count.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// Values below which an interner does not look for unused entries.
const PRUNE_FROM: usize = 64;

/// One shared allocation per distinct value. Values nobody else holds any
/// more are dropped when the interner has doubled since it last looked, so
/// it stays within twice what is in use.
#[derive(Debug)]
pub struct Interner<U: ?Sized> {
    values: HashSet<Arc<U>>,
    prune_at: usize,
}

impl<U: ?Sized> Clone for Interner<U> {
    fn clone(&self) -> Self {
        Interner {
            values: self.values.clone(),
            prune_at: self.prune_at,
        }
    }
}

impl<U: ?Sized> Default for Interner<U> {
    fn default() -> Self {
        Interner {
            values: HashSet::new(),
            prune_at: PRUNE_FROM,
        }
    }
}

impl<U: ?Sized + Hash + Eq> Interner<U> {
    /// The shared value equal to `value`, made with `make` only the first
    /// time.
    pub fn intern_with(&mut self, value: &U, make: impl FnOnce(&U) -> Arc<U>) -> Arc<U> {
        if let Some(shared) = self.values.get(value) {
            return Arc::clone(shared);
        }
        self.insert(make(value))
    }

    /// The shared value equal to `value`: `value` itself the first time.
    pub fn share(&mut self, value: Arc<U>) -> Arc<U> {
        if let Some(shared) = self.values.get(&*value) {
            return Arc::clone(shared);
        }
        self.insert(value)
    }

    fn insert(&mut self, value: Arc<U>) -> Arc<U> {
        if self.values.len() >= self.prune_at {
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.prune_at = (self.values.len() * 2).max(PRUNE_FROM);
        }
        self.values.insert(Arc::clone(&value));
        value
    }

    /// Distinct values held (some perhaps unused since the last look).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl<T: Hash + Eq + Clone> Interner<[T]> {
    /// The shared list equal to `items` (allocated only the first time).
    pub fn intern(&mut self, items: &[T]) -> Arc<[T]> {
        self.intern_with(items, |items| Arc::from(items))
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
    fn equal_values_share_the_first_allocation() {
        let mut i: Interner<String> = Interner::default();
        let a = i.share(Arc::new("65001 65002".to_owned()));
        let b = i.share(Arc::new("65001 65002".to_owned()));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(i.len(), 1);
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
