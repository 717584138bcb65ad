//! Everything random in a lab derives from the scenario seed (`[lab]
//! seed`) through these fixed mixing functions, so the same seed gives the
//! same run with every build of turbonet: per link direction (the
//! impairment pipelines), per switch (the ECMP hash seed), per group of
//! next hops (the P4 controller's group ids). They are written out here
//! rather than taken from `std::hash`, whose output may change between
//! Rust versions.

/// FNV-1a, 64-bit (offset basis and prime from the reference
/// implementation).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_extend(0xcbf2_9ce4_8422_2325, bytes)
}

/// Continues an FNV-1a hash `h` over more `bytes`.
pub fn fnv1a64_extend(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64's output function (the "mix" of Steele, Lea and Flood,
/// "Fast splittable pseudorandom number generators", 2014): a bijection
/// that spreads every input bit over every output bit.
pub fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64: [`mix64`] of `x` plus the golden gamma, the generator's
/// output for state `x`.
pub fn splitmix64(x: u64) -> u64 {
    mix64(x.wrapping_add(0x9e37_79b9_7f4a_7c15))
}

/// A seed for the thing named `name` (a switch, a flow), from the
/// scenario seed `seed`: unrelated values for different names and seeds.
pub fn for_name(seed: u64, name: &str) -> u64 {
    mix64(seed ^ fnv1a64(name.as_bytes()))
}

/// Expands a 64-bit seed into the 256-bit key of a ChaCha generator
/// (`ChaCha8Rng::from_seed`), by [`splitmix64`]: done here rather than with
/// `SeedableRng::seed_from_u64` so that the expansion is fixed by turbonet,
/// not by a dependency's version.
pub fn chacha_key(seed: u64) -> [u8; 32] {
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
        assert_eq!(fnv1a64_extend(fnv1a64(b"foo"), b"bar"), fnv1a64(b"foobar"));
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
    fn names_and_seeds_give_unrelated_values() {
        assert_ne!(for_name(1, "agg0-0"), for_name(1, "agg0-1"));
        assert_ne!(for_name(1, "agg0-0"), for_name(2, "agg0-0"));
        assert_eq!(for_name(1, "agg0-0"), for_name(1, "agg0-0"));
    }
}
