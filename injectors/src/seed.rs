//! Per-direction seeds, derived from the scenario seed.
//!
//! The mixing is written out here (FNV-1a over the link name, then
//! SplitMix64) rather than taken from `std::hash`, whose output may change
//! between Rust versions: a scenario seed must reproduce the same run with
//! every build of turbonet.

/// FNV-1a, 64-bit (offset basis and prime from the reference
/// implementation).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64's finalizer applied to `x + golden gamma` (Steele, Lea and
/// Flood, "Fast splittable pseudorandom number generators", 2014).
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Derives the seed of one direction of a link (0: `ends[0]` -> `ends[1]`,
/// 1: the reverse) from the scenario seed and the link's name.
///
/// Stable across versions: the value depends only on the three arguments
/// and the fixed mixing above. Different links, directions and scenario
/// seeds give unrelated seeds.
pub fn direction_seed(scenario_seed: u64, link: &str, direction: u8) -> u64 {
    let name = fnv1a64(link.as_bytes());
    let mut x = splitmix64(scenario_seed);
    x = splitmix64(x ^ name);
    splitmix64(x ^ u64::from(direction))
}

/// Expands a 64-bit seed into the 256-bit key of ChaCha8. Done here rather
/// than with `SeedableRng::seed_from_u64` so that the expansion is fixed by
/// this crate, not by a dependency's version.
pub(crate) fn chacha_key(seed: u64) -> [u8; 32] {
    let mut key = [0u8; 32];
    let mut x = seed;
    for chunk in key.chunks_exact_mut(8) {
        x = splitmix64(x);
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_reference_values() {
        // Test vectors of the FNV reference code.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn splitmix_reference_values() {
        // First outputs of SplitMix64 seeded with 0 (state advanced by the
        // gamma before each output, as in the reference).
        let mut state = 0u64;
        let mut next = || {
            let out = splitmix64(state);
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            out
        };
        assert_eq!(next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(next(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn seeds_differ() {
        let a = direction_seed(1, "h0--s0", 0);
        assert_ne!(a, direction_seed(1, "h0--s0", 1));
        assert_ne!(a, direction_seed(2, "h0--s0", 0));
        assert_ne!(a, direction_seed(1, "h0--s1", 0));
        assert_eq!(a, direction_seed(1, "h0--s0", 0));
    }
}
