//! Hash maps for the data plane's integer keys: a fast hasher, and the
//! map type every table and the traffic manager use.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for integer keys (packed table keys): one multiply-xorshift
/// round of murmur3's finalizer. Keys come from the controller's entries,
/// not from packets an attacker chooses, so a keyed SipHash buys nothing
/// here and costs a third of a lookup.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u16(&mut self, n: u16) {
        self.write_u64(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = mix(self.0 ^ n);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// murmur3's 64-bit finalizer: every input bit reaches every output bit.
pub(crate) fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;
