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
}

impl Placement {
    /// The span it places this machine's part of `lab` in.
    pub fn span(&self, lab: &Lab) -> Result<Span> {
        let plan = turbonet_topo::machines::plan(lab, self.machines)
            .map_err(|e| crate::Error::Invalid(e.to_string()))?;
        Span::of(&plan, self.machine, self.underlay.clone(), self.port)
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
}

impl Span {
    /// The whole of `lab` on this machine.
    pub fn whole(lab: &Lab) -> Span {
        Span {
            share: Share::whole(&lab.fabric),
            underlay: Vec::new(),
            port: turbonet_host::kernel::VXLAN_PORT,
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
