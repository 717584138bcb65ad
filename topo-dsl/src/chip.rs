//! Switch chips: what a switch could be built from (`[topology] switch =
//! "51.2t"` or `"128x400g"`), and what each switch of a fabric needs of
//! one — its ports, counted the way a chip's ports break out into slower
//! ones, and its bandwidth.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{Fabric, NodeId};
use crate::units::Rate;

pub use crate::units::Chip;

/// What one switch needs of a chip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Demand {
    /// The chip's ports its links take, after break-out.
    pub ports: u32,
    /// The sum of its links' rates (a link without a rate counts as a
    /// whole port of the chip's speed).
    pub bandwidth: u64,
    /// Its links by rate (`None`: no rate), with how many chip ports each
    /// group takes.
    pub links: Vec<LinkGroup>,
    /// The fastest link, when faster than the chip's ports.
    pub too_fast: Option<Rate>,
}

/// Links of one rate at a switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkGroup {
    /// Their rate.
    pub rate: Option<Rate>,
    /// How many.
    pub count: u32,
    /// The chip ports they take.
    pub ports: u32,
}

impl Demand {
    /// True when a switch with this demand fits on `chip`.
    pub fn fits(&self, chip: &Chip) -> bool {
        self.too_fast.is_none() && self.ports <= chip.ports && self.bandwidth <= chip.capacity()
    }
}

/// What `node` needs of `chip`: links of a rate that divides the port
/// speed share ports (`speed / rate` links per port); any other link takes
/// a port of its own.
pub fn demand(fabric: &Fabric, node: NodeId, chip: &Chip) -> Demand {
    let speed = chip.speed.bits_per_sec();
    // The rates as the scenario declares them, before `rate_scale`.
    let scale = u64::from(fabric.rate_scale.max(1));
    let mut by_rate: BTreeMap<Option<Rate>, u32> = BTreeMap::new();
    for &l in &fabric.node(node).links {
        let declared = fabric
            .link(l)
            .params
            .rate
            .map(|r| Rate::from_bits_per_sec(r.bits_per_sec().saturating_mul(scale)));
        *by_rate.entry(declared).or_insert(0) += 1;
    }
    let mut demand = Demand {
        ports: 0,
        bandwidth: 0,
        links: Vec::new(),
        too_fast: None,
    };
    for (rate, count) in by_rate {
        let bps = rate.map_or(speed, Rate::bits_per_sec);
        let ports = if bps > speed {
            demand.too_fast = rate;
            count
        } else if bps > 0 && speed.is_multiple_of(bps) {
            let per_port = speed / bps;
            u64::from(count).div_ceil(per_port) as u32
        } else {
            count
        };
        demand.ports = demand.ports.saturating_add(ports);
        demand.bandwidth = demand
            .bandwidth
            .saturating_add(bps.saturating_mul(u64::from(count)));
        demand.links.push(LinkGroup { rate, count, ports });
    }
    demand
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chips_parse_from_ports_and_speed_or_a_capacity() {
        let c: Chip = "128x400g".parse().unwrap();
        assert_eq!((c.ports, c.speed.bits_per_sec()), (128, 400_000_000_000));
        assert_eq!(c.capacity(), 51_200_000_000_000);
        assert_eq!("51.2t".parse::<Chip>().unwrap(), c);
        assert_eq!("51.2tbit".parse::<Chip>().unwrap(), c);
        assert_eq!(c.to_string().parse::<Chip>().unwrap(), c);
        let wide: Chip = "64X800gbit".parse().unwrap();
        assert_eq!(wide.capacity(), c.capacity());
        for bad in [
            "0x400g", "128x", "x400g", "12.9t", "fast", "128x0g", "9999x1g",
        ] {
            assert!(bad.parse::<Chip>().is_err(), "{bad}");
        }
    }
}
