//! Per-direction seeds, derived from the scenario seed.
//!
//! FNV-1a over the link name, then SplitMix64 ([`turbonet_topo::seed`]):
//! a scenario seed reproduces the same run with every build of turbonet.

use turbonet_topo::seed::{fnv1a64, splitmix64};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ() {
        let a = direction_seed(1, "h0--s0", 0);
        assert_ne!(a, direction_seed(1, "h0--s0", 1));
        assert_ne!(a, direction_seed(2, "h0--s0", 0));
        assert_ne!(a, direction_seed(1, "h0--s1", 0));
        assert_eq!(a, direction_seed(1, "h0--s0", 0));
    }
}
