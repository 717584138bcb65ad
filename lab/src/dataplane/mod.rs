//! Data planes: what carries a lab's frames. The `netns` target builds the
//! fabric out of namespaces and veth links in this machine's kernel
//! ([`netns`]); the P4 targets run it in the turbonet pipeline on P4
//! switches, turbonet's soft switch, BMv2 or remote P4Runtime servers
//! ([`p4`]).

pub mod agent_routes;
pub mod carrier;
pub mod kernel_routes;
pub mod mgmt;
pub mod netns;
pub mod p4;
pub mod plane;
pub mod taps;

pub use carrier::Carrier;
pub use plane::{Applied, DataPlane, Desired};

use std::sync::Arc;

use turbonet_topo::{Lab, Node, Target};

use crate::error::Result;
use crate::events::Events;
use crate::names;
use crate::state::LabDir;

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

/// Takes over the data plane `up` built for `lab` (the one place that
/// picks the implementation by target): on `netns` the link engine starts;
/// on the P4 targets the daemon becomes primary controller of the switches
/// under `election_id`. The fabric holds what `up` built with `routes`
/// (`None`: not known, after a daemon died; it is read back or written
/// again).
pub async fn open(
    lab: &Arc<Lab>,
    dir: &LabDir,
    routes: Option<&[Vec<turbonet_routing::Route>]>,
    election_id: u128,
    events: &Events,
) -> Result<Box<dyn DataPlane>> {
    Ok(match lab.target {
        Target::Netns => Box::new(netns::NetnsPlane::open(
            lab.clone(),
            routes.map(<[_]>::to_vec),
            events,
        )?),
        Target::Soft | Target::P4rt => {
            Box::new(p4::P4Plane::open(lab.clone(), dir, routes, election_id, events).await?)
        }
    })
}
