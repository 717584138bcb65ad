//! Where a lab runs: all of it on this machine, or this machine's share of
//! a lab over several ([`turbonet_topo::machines`]), with the underlay that
//! carries the links between machines.
//!
//! A link with both ends here is built as on one machine. A cut link has
//! one end here, a VXLAN device to the far machine in place of the veth
//! end that would be there. When a link engine carries it (the link is
//! spliced), its owner's engine carries both directions, so its seeded
//! model decides every frame whatever the partition: there the node's
//! port is paired with an engine port as on one machine, and the engine's
//! other port is the VXLAN device; at the far machine the node's port is
//! the VXLAN device itself. Other cut links (plain, shaped, netem) have a
//! VXLAN device for a port at both ends, each end shaping its own egress
//! as on one machine.
//!
//! A mirror's copies and the management network cross machines on VXLAN
//! tunnels of their own ([`Span::mirror_vxlan`], [`Span::mgmt_vxlan`]); an
//! `[[external]]` interface is the machine's that runs its node.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use turbonet_host::kernel::{VethEnd, Vxlan};
use turbonet_topo::machines::{CutEnd, MachinePlan, MgmtTunnel, MirrorTunnel, Reach, Share};
use turbonet_topo::units::Delay;
use turbonet_topo::{Lab, Link, NodeId};

use crate::bail;
use crate::carrier::Carrier;
use crate::error::Result;

/// Which part of a lab this machine runs, as `up` is asked and the lab's
/// state records it (the plan itself is computed again from the scenario:
/// the same on every machine).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// This machine's index.
    pub machine: u32,
    /// How many machines the lab spans.
    pub machines: u32,
    /// Every machine's underlay address, by index.
    pub underlay: Vec<Ipv4Addr>,
    /// The UDP port of the lab's tunnels.
    pub port: u16,
    /// The underlay's one-way delay to each machine in nanoseconds, by
    /// index, as this machine's worker measured it when it placed the
    /// part (half an echo's median round trip; zero for itself, and for a
    /// machine it could not measure). See [`Span::engine_allowance`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub underlay_delay_ns: Vec<u64>,
}

impl Placement {
    /// Whether `other` places this machine's part as this one does (the
    /// same part, machines, addresses and port), whatever either measured
    /// of the underlay.
    pub fn places_as(&self, other: &Placement) -> bool {
        (self.machine, self.machines, &self.underlay, self.port)
            == (other.machine, other.machines, &other.underlay, other.port)
    }

    /// The span it places this machine's part of `lab` in.
    pub fn span(&self, lab: &Lab) -> Result<Span> {
        let plan = turbonet_topo::machines::plan(lab, self.machines)
            .map_err(|e| crate::Error::Invalid(e.to_string()))?;
        let mut span = Span::of(&plan, self.machine, self.underlay.clone(), self.port)?;
        span.underlay_delay = (self.underlay_delay_ns.iter())
            .map(|&ns| Delay::from_nanos(ns))
            .collect();
        Ok(span)
    }

    /// The span of a lab whose state records `placement` (none: the whole
    /// lab here).
    pub fn span_of(placement: Option<&Placement>, lab: &Lab) -> Result<Span> {
        placement.map_or_else(|| Ok(Span::whole(lab)), |p| p.span(lab))
    }
}

/// This machine's part of a lab, and how it reaches the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The nodes that run here and where each link is.
    pub share: Share,
    /// Every machine's underlay address, by machine index (none when the
    /// lab is whole here).
    pub underlay: Vec<Ipv4Addr>,
    /// The UDP port of the lab's tunnels on every machine.
    pub port: u16,
    /// The underlay's measured one-way delay to each machine, by index
    /// (none: not measured).
    pub underlay_delay: Vec<Delay>,
}

impl Span {
    /// The whole of `lab` on this machine.
    pub fn whole(lab: &Lab) -> Span {
        Span {
            share: Share::whole(&lab.fabric),
            underlay: Vec::new(),
            port: turbonet_host::kernel::VXLAN_PORT,
            underlay_delay: Vec::new(),
        }
    }

    /// Machine `machine`'s part of the lab `plan` places, the machines
    /// reached at `underlay` (by index) on UDP port `port`.
    pub fn of(
        plan: &MachinePlan,
        machine: u32,
        underlay: Vec<Ipv4Addr>,
        port: u16,
    ) -> Result<Span> {
        if machine >= plan.machines || underlay.len() != plan.machines as usize {
            bail!(
                "machine {machine} of {} with {} underlay addresses",
                plan.machines,
                underlay.len()
            );
        }
        Ok(Span {
            share: Share::of(plan, machine),
            underlay,
            port,
            underlay_delay: Vec::new(),
        })
    }

    /// Node `node` runs here.
    pub fn runs(&self, node: NodeId) -> bool {
        self.share.runs(node)
    }

    /// Where `link` is, seen from here.
    pub fn reach(&self, link: &Link) -> Reach {
        self.share.reach(link)
    }

    /// How each link is carried here, from how `up` decided it for the
    /// lab: a spliced cut link is the engine's at its owner only (the far
    /// end is a plain VXLAN device), and links with no end here are
    /// nothing's (plain, never built).
    pub fn carriers(&self, lab: &Lab, carriers: &[Carrier]) -> Vec<Carrier> {
        lab.fabric
            .links
            .iter()
            .zip(carriers)
            .map(|(link, carrier)| match self.reach(link) {
                Reach::Local => carrier.clone(),
                Reach::Cut(cut) if cut.owner == self.share.machine => carrier.clone(),
                Reach::Cut(_) if !carrier.is_spliced() => carrier.clone(),
                Reach::Cut(_) | Reach::Away => Carrier::Veth,
            })
            .collect()
    }

    /// How much sooner than its model this machine's link engine releases
    /// each link's frames, by link id: for a cut link it carries whole
    /// (it owns it), the measured one-way delay of the underlay to the far
    /// machine, which every frame crosses once, after the engine or
    /// before it; for every other link nothing. So the link's delay end to
    /// end is its model's, where the model asks for at least the
    /// underlay's.
    pub fn engine_allowance(&self, lab: &Lab) -> Vec<Delay> {
        let mut allowance = vec![Delay::ZERO; lab.fabric.links.len()];
        for (link, far) in self.engine_cut_links(lab) {
            allowance[link.id.0 as usize] =
                (self.underlay_delay.get(far as usize).copied()).unwrap_or(Delay::ZERO);
        }
        allowance
    }

    /// The cut links this machine's link engine carries whole (it owns
    /// them), each with the machine of its far end.
    pub fn engine_cut_links<'a>(&'a self, lab: &'a Lab) -> impl Iterator<Item = (&'a Link, u32)> {
        (lab.fabric.links.iter()).filter_map(|link| match self.reach(link) {
            Reach::Cut(cut) if cut.engine && cut.owner == self.share.machine => {
                Some((link, cut.far))
            }
            Reach::Cut(_) | Reach::Local | Reach::Away => None,
        })
    }

    /// The VXLAN device `end` of cut link `link` (its end `cut.end` is
    /// here), to the far machine, with the link's MTU (said always: the
    /// kernel's default would be the underlay's less 50).
    pub fn vxlan(&self, link: &Link, cut: CutEnd, end: VethEnd) -> Vxlan {
        Vxlan {
            what: format!("cut link {}", link.name),
            end,
            vni: cut.vni,
            local: self.underlay[self.share.machine as usize],
            remote: self.underlay[cut.far as usize],
            port: self.port,
            mtu: Some(u32::from(cut.mtu)),
        }
    }

    /// The VXLAN device `end` of management tunnel `tunnel` (between
    /// machine 0 and `tunnel.machine`, one of them this one).
    pub fn mgmt_vxlan(&self, tunnel: MgmtTunnel, end: VethEnd) -> Vxlan {
        let here = self.share.machine;
        let far = tunnel.far(here);
        Vxlan {
            what: format!("the management network's tunnel to machine {far}"),
            end,
            vni: tunnel.vni,
            local: self.underlay[here as usize],
            remote: self.underlay[far as usize],
            port: self.port,
            // `mgmt0`'s: Ethernet's.
            mtu: Some(1500),
        }
    }

    /// The VXLAN device `end` of mirror tunnel `tunnel` (one of its
    /// machines is this one), to the other machine.
    pub fn mirror_vxlan(&self, tunnel: &MirrorTunnel, end: VethEnd) -> Vxlan {
        let here = self.share.machine;
        let far = if tunnel.from == here {
            tunnel.to
        } else {
            tunnel.from
        };
        Vxlan {
            what: format!("mirror of {}", tunnel.link),
            end,
            vni: tunnel.vni,
            local: self.underlay[here as usize],
            remote: self.underlay[far as usize],
            port: self.port,
            mtu: Some(u32::from(tunnel.mtu)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The triangle over three machines, r1--r2 impaired (its owner's
    /// engine carries it), r2--r3 rate-shaped (each end shapes its own).
    fn triangle() -> Lab {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scenarios/custom-triangle.toml"
        );
        let text = std::fs::read_to_string(path)
            .unwrap()
            .replace(
                "a = \"r1\"\nb = \"r2\"",
                "a = \"r1\"\nb = \"r2\"\ndelay = \"1ms\"",
            )
            .replace(
                "a = \"r2\"\nb = \"r3\"",
                "a = \"r2\"\nb = \"r3\"\nrate = \"1gbit\"",
            );
        turbonet_topo::parse("triangle", &text).unwrap()
    }

    #[test]
    fn the_owner_s_engine_releases_a_cut_link_sooner_by_the_underlay_to_its_far_machine() {
        let lab = triangle();
        let plan = turbonet_topo::machines::plan(&lab, 3).unwrap();
        let r1r2 = plan.cut_links.iter().find(|c| c.link == "r1--r2").unwrap();
        assert!(r1r2.engine);
        let far = r1r2.machines[0] + r1r2.machines[1] - r1r2.owner;
        for machine in 0..3 {
            let underlay_delay_ns = (0..3u64).map(|m| 1_000 * (m + 7)).collect();
            let placement = Placement {
                machine,
                machines: 3,
                underlay: (1..=3).map(|i| Ipv4Addr::new(198, 18, 0, i)).collect(),
                port: 14789,
                underlay_delay_ns,
            };
            let allowance = placement.span(&lab).unwrap().engine_allowance(&lab);
            for (link, sooner) in lab.fabric.links.iter().zip(&allowance) {
                let expected = if link.name == "r1--r2" && machine == r1r2.owner {
                    Delay::from_micros(u64::from(far) + 7)
                } else {
                    Delay::ZERO
                };
                assert_eq!(*sooner, expected, "{} on machine {machine}", link.name);
            }
            // Measured or not, the part is placed the same.
            let unmeasured = Placement {
                underlay_delay_ns: Vec::new(),
                ..placement.clone()
            };
            assert!(placement.places_as(&unmeasured) && placement != unmeasured);
        }
        assert!(
            Span::whole(&lab)
                .engine_allowance(&lab)
                .iter()
                .all(|d| d.is_zero())
        );
    }
}
