//! Data planes: what carries a lab's frames. The `netns` target builds the
//! fabric out of namespaces and veth links in this machine's kernel
//! ([`netns`]); the P4 targets run it in the turbonet pipeline on P4
//! switches, turbonet's soft switch, BMv2 or remote P4Runtime servers
//! ([`p4`]).

pub mod agent_routes;
pub(crate) mod build;
pub mod kernel_routes;
pub mod mgmt;
pub mod netns;
pub mod p4;
pub mod plane;
pub mod taps;

pub use plane::{Applied, DataPlane, Desired};

/// Sysctls of turbonet's hidden namespaces (the link engine's, the
/// management network's, a soft switch's): their interfaces must stay
/// silent (no IPv6 router solicitations or MLD reports leaking into the
/// links).
pub(crate) const SILENT_SYSCTLS: [(&str, &str); 2] = [
    ("net/ipv6/conf/all/disable_ipv6", "1"),
    ("net/ipv6/conf/default/disable_ipv6", "1"),
];

use std::sync::Arc;

use turbonet_topo::{Lab, Node, Target};

use turbonet_host::kernel::Kernel;
use turbonet_topo::mapper::Mapping;

use crate::carrier::Carrier;
use crate::error::Result;
use crate::events::Events;
use crate::names;
use crate::state::{LabDir, LabState};
use build::{Build, TargetBuild};

/// What namespace a node has: on `netns` every node is one; on the P4
/// targets hosts are, and a switch has at most a control-plane namespace
/// (its BGP agent's, on `soft`), its forwarding being the pipeline's.
/// `true` marks a control-plane namespace.
pub fn namespace_of(lab: &Lab, node: &Node) -> Option<(String, bool)> {
    let name = names::node_namespace(&lab.name, &node.name);
    if lab.target == turbonet_topo::Target::Netns || !node.role.is_switch() {
        Some((name, false))
    } else if lab.target == turbonet_topo::Target::Soft
        && lab.routing.mode == turbonet_topo::RoutingMode::Bgp
    {
        Some((name, true))
    } else {
        None
    }
}

/// The same call on whichever target's builder `$self` is: the one
/// place that switches on the target.
macro_rules! each {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            Builder::Netns($b) => $call,
            Builder::Soft($b) => $call,
            Builder::P4rt($b) => $call,
        }
    };
}

/// The builder of a lab's target.
#[derive(Debug)]
pub(crate) enum Builder {
    /// `netns`.
    Netns(netns::build::NetnsBuild),
    /// `soft`.
    Soft(p4::build::SoftBuild),
    /// `p4rt`.
    P4rt(p4::build::P4rtBuild),
}

impl Builder {
    /// The builder of `lab`'s target; a P4 lab mapped onto its switches
    /// (an `Error::Invalid` when it does not fit).
    pub(crate) fn of(lab: &Lab) -> Result<Builder> {
        Ok(match lab.target {
            turbonet_topo::Target::Netns => Builder::Netns(netns::build::NetnsBuild),
            turbonet_topo::Target::Soft => Builder::Soft(p4::build::SoftBuild::of(lab)?),
            turbonet_topo::Target::P4rt => Builder::P4rt(p4::build::P4rtBuild::of(lab)?),
        })
    }

    /// Every namespace the build creates, the management network's too.
    pub(crate) fn namespaces(
        &self,
        lab: &Lab,
        span: &crate::span::Span,
        carriers: &[Carrier],
    ) -> Vec<String> {
        let mut names = each!(self, b => b.namespaces(lab, span, carriers));
        names.extend(mgmt::namespace_spec(lab).map(|s| s.name));
        names
    }

    /// See [`build::TargetBuild::kernel`].
    pub(crate) async fn kernel<K: Kernel>(&self, kernel: &mut K, cx: &mut Build<'_>) -> Result<()> {
        each!(self, b => b.kernel(kernel, cx).await)
    }

    /// See [`build::TargetBuild::start`].
    pub(crate) async fn start(&self, cx: &mut Build<'_>) -> Result<()> {
        each!(self, b => b.start(cx).await)
    }

    /// See [`build::TargetBuild::controls`].
    pub(crate) fn controls(&self) -> Option<&'static str> {
        each!(self, b => b.controls())
    }

    /// See [`build::TargetBuild::mapping`].
    pub(crate) fn mapping(&self) -> Option<&Mapping> {
        each!(self, b => b.mapping())
    }
}

/// Takes over the data plane `up` built for `lab` (the one place that
/// picks the implementation by target), as its `state` records it (how
/// each link is carried, how a P4 lab is mapped): on `netns` the link
/// engine starts; on the P4 targets the daemon becomes primary controller
/// of the switches under `election_id`. The fabric holds what `up` built
/// with `routes` (`None`: not known, after a daemon died; it is read back
/// or written again). A `netns` plane keeps to `share`'s nodes (this
/// machine's part of a lab over several).
pub async fn open(
    lab: &Arc<Lab>,
    share: &turbonet_topo::machines::Share,
    dir: &LabDir,
    state: &LabState,
    routes: Option<&[Vec<turbonet_routing::Route>]>,
    election_id: u128,
    events: &Events,
) -> Result<Box<dyn DataPlane>> {
    Ok(match lab.target {
        Target::Netns => Box::new(netns::NetnsPlane::open(
            lab.clone(),
            share.clone(),
            &crate::carrier::recorded(lab, &state.carriers),
            crate::span::Placement::span_of(state.placement.as_ref(), lab)?.engine_allowance(lab),
            routes.map(<[_]>::to_vec),
            events,
        )?),
        Target::Soft | Target::P4rt => {
            Box::new(p4::P4Plane::open(lab.clone(), dir, state, routes, election_id, events).await?)
        }
    })
}
