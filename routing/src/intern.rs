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
//!
//! Their tables hash with foldhash rather than the standard library's
//! SipHash: a converging speaker interns an entry (its attributes hashed
//! whole) per prefix it decides, and SipHash was a fifth of the speakers'
//! thread.

use foldhash::{HashMap, HashSet};
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
            values: HashSet::default(),
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

/// What is computed once per distinct shared value, found by the value's
/// address rather than by hashing it: a route set of sixty routes, an ECMP
/// set of sixty next hops. Each key is held, so its address is not reused
/// while its entry is there.
#[derive(Debug)]
pub struct ByAddress<K: ?Sized, V> {
    map: HashMap<usize, (Arc<K>, V)>,
}

impl<K: ?Sized, V> Default for ByAddress<K, V> {
    fn default() -> Self {
        ByAddress {
            map: HashMap::default(),
        }
    }
}

impl<K: ?Sized, V: Clone> Clone for ByAddress<K, V> {
    fn clone(&self) -> Self {
        ByAddress {
            map: self.map.clone(),
        }
    }
}

impl<K: ?Sized, V> ByAddress<K, V> {
    fn address(key: &Arc<K>) -> usize {
        Arc::as_ptr(key).cast::<()>() as usize
    }

    /// The value of `key`, made by `make` the first time.
    pub fn get_or_insert_with(&mut self, key: &Arc<K>, make: impl FnOnce(&K) -> V) -> &mut V {
        &mut self
            .map
            .entry(Self::address(key))
            .or_insert_with(|| (Arc::clone(key), make(key)))
            .1
    }

    /// Keeps the entries whose value `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        self.map.retain(|_, (_, v)| keep(v));
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
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
    fn by_address_tells_equal_values_apart_and_computes_each_once() {
        let (a, b): (Arc<[u32]>, Arc<[u32]>) = (Arc::from([1, 2]), Arc::from([1, 2]));
        let mut made = 0;
        let mut by = ByAddress::default();
        for key in [&a, &b, &a] {
            by.get_or_insert_with(key, |k| {
                made += 1;
                k.len()
            });
        }
        assert_eq!((made, by.len()), (2, 2));
        by.retain(|_| false);
        assert!(by.is_empty());
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
