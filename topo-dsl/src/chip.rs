//! Switch chips: what a switch could be built from (`[topology] switch =
//! "51.2t"` or `"128x400g"`), and what each switch of a fabric needs of
//! one — its ports, counted the way a chip's ports break out into slower
//! ones, and its bandwidth.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::model::{Fabric, NodeId};
use crate::units::Rate;

/// The port speed a chip given only by its capacity has (`51.2t` is
/// 128 x 400G, the chip of HPN's ToRs and aggregation switches).
pub const DEFAULT_PORT_SPEED_BPS: u64 = 400_000_000_000;

/// Most ports a chip may declare.
const MAX_PORTS: u32 = 4096;

/// A switch chip: `ports` ports of `speed`. A port breaks out into
/// several slower ports whose speeds add up to its own (a 400G port
/// carries two 200G or four 100G links).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Chip {
    /// Its ports.
    pub ports: u32,
    /// The speed of each.
    pub speed: Rate,
}

impl Chip {
    /// Its switching capacity, bit/s.
    pub fn capacity(&self) -> u64 {
        u64::from(self.ports).saturating_mul(self.speed.bits_per_sec())
    }
}

/// Scenario syntax: `128x400gbit`.
impl fmt::Display for Chip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.ports, self.speed)
    }
}

/// Parses a rate, taking a one-letter unit in either case (`400g`,
/// `51.2T`) as that many bits per second, as chips are named.
fn rate(s: &str) -> Result<Rate, String> {
    let s = s.trim();
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &s[digits.len()..];
    let spelled = match unit.to_ascii_lowercase().as_str() {
        u @ ("k" | "m" | "g" | "t") => format!("{digits}{u}bit"),
        _ => s.to_owned(),
    };
    spelled
        .parse()
        .map_err(|e: crate::units::UnitError| e.message().to_owned())
}

impl FromStr for Chip {
    type Err = String;

    /// `PORTSxSPEED` (`128x400g`, `64x800gbit`), or a capacity alone
    /// (`51.2t`, `12.8tbit`), which means ports of 400G.
    fn from_str(s: &str) -> Result<Chip, String> {
        let s = s.trim();
        if let Some((ports, speed)) = s.split_once(['x', 'X']) {
            let ports: u32 = ports
                .trim()
                .parse()
                .map_err(|_| format!("port count `{ports}` is not a whole number"))?;
            if ports == 0 || ports > MAX_PORTS {
                return Err(format!("{ports} ports: give 1 to {MAX_PORTS}"));
            }
            let speed = rate(speed).map_err(|e| format!("port speed: {e}"))?;
            if speed.bits_per_sec() == 0 {
                return Err("a port speed of 0".to_owned());
            }
            return Ok(Chip { ports, speed });
        }
        let capacity = rate(s)?;
        let bps = capacity.bits_per_sec();
        if bps == 0 || !bps.is_multiple_of(DEFAULT_PORT_SPEED_BPS) {
            return Err(format!(
                "a capacity alone means 400G ports, and {capacity} is not a whole number of them; \
                 write PORTSxSPEED, e.g. 64x800g"
            ));
        }
        let ports = bps / DEFAULT_PORT_SPEED_BPS;
        if ports > u64::from(MAX_PORTS) {
            return Err(format!("{capacity} is more than {MAX_PORTS} ports of 400G"));
        }
        Ok(Chip {
            ports: ports as u32,
            speed: Rate::from_bits_per_sec(DEFAULT_PORT_SPEED_BPS),
        })
    }
}

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
