//! The management network (`[mgmt]`): a bridge in the lab's hidden
//! namespace `tn-<lab>.mgmt`, and every member node's `mgmt0`, a veth whose
//! other end is a port of that bridge. Each node has its address from the
//! pool, the hidden namespace the pool's first one (where `turbonet mpirun`
//! starts Open MPI, whose control channel then never crosses the fabric).
//! No route points at it: a node reaches only the pool's subnet through
//! `mgmt0`, and nothing of the fabric is forwarded onto it.
//!
//! Over several machines each has its bridge, with its own nodes and an
//! address of its own ([`turbonet_topo::Mgmt::hub_of`]), and the bridges
//! are one network: each other machine's joined to machine 0's by a VXLAN
//! tunnel ([`turbonet_topo::machines::MgmtTunnel`]), a port of both.
//!
//! This module computes the requests ([`plan`]); `up` hands them to the
//! [`Kernel`](turbonet_host::kernel::Kernel).

use turbonet_topo::{Lab, Mgmt, NodeId};

use turbonet_host::kernel::{Address, NamespaceSpec, Ns, PerNs, Veth, VethEnd, Vxlan};

use crate::span::Span;

/// Every member's interface on the management network, and the bridge's
/// in the hidden namespace: one name for it everywhere, so programs can
/// be told "the management network is `mgmt0`" (Open MPI's
/// `oob_tcp_if_include`).
pub const INTERFACE: &str = "mgmt0";

/// `mgmt0`'s ifindex in `node`: the one after its ports' (`2..`), free when
/// the network is built, before externals move in. (Small on purpose: Open
/// MPI keeps interface indices in 16 bits.)
pub fn ifindex(lab: &Lab, node: NodeId) -> u32 {
    crate::names::port_ifindex(lab.fabric.node(node).links.len())
}

/// The bridge's ifindex in the hidden namespace; member `i`'s port on it is
/// `BRIDGE_IFINDEX + 1 + i`.
pub const BRIDGE_IFINDEX: u32 = 2;

/// The hidden namespace to create when the lab has a management network.
pub fn namespace_spec(lab: &Lab) -> Option<NamespaceSpec> {
    lab.mgmt.map(|_| NamespaceSpec {
        name: crate::names::mgmt_namespace(&lab.name),
        sysctls: crate::dataplane::SILENT_SYSCTLS
            .iter()
            .map(|(k, v)| (*k, (*v).to_owned()))
            .collect(),
        for_user: false,
    })
}

/// Every request that builds the management network.
#[derive(Debug)]
pub struct Plan {
    /// The bridge, in the hidden namespace.
    pub bridge: (Ns, &'static str, u32),
    /// Each member's `mgmt0`, with its other end in the hidden namespace.
    pub veths: Vec<Veth>,
    /// The tunnels to the bridges of other machines (created up).
    pub tunnels: Vec<Vxlan>,
    /// The bridge ports: enslaved to the bridge and brought up.
    pub ports: PerNs<(u32, u32)>,
    /// Interfaces to bring up: the hidden namespace's `lo`.
    pub up: PerNs<u32>,
    /// Every address: the lab's on the bridge, each member's on `mgmt0`.
    pub addresses: PerNs<Address>,
}

/// The requests for `mgmt`, joining `members` (a node and its namespace)
/// to a bridge in namespace `hub`, and that bridge to the other machines'
/// of `span`.
pub fn plan(lab: &Lab, mgmt: &Mgmt, members: &[(NodeId, Ns)], hub: Ns, span: &Span) -> Plan {
    let mut veths = Vec::with_capacity(members.len());
    let mut ports = Vec::with_capacity(members.len());
    let mut addresses = vec![(
        hub,
        vec![Address {
            ifindex: BRIDGE_IFINDEX,
            addr: mgmt.hub_of(span.share.machine),
        }],
    )];
    for (i, &(node, ns)) in members.iter().enumerate() {
        let port = BRIDGE_IFINDEX + 1 + i as u32;
        let ifindex = ifindex(lab, node);
        veths.push(Veth {
            what: format!("{INTERFACE} of {}", lab.fabric.node(node).name),
            local: VethEnd {
                ns,
                name: INTERFACE.to_owned(),
                ifindex,
                mac: None,
            },
            peer: VethEnd {
                ns: hub,
                name: format!("m{}", node.0),
                ifindex: port,
                mac: None,
            },
            mtu: None,
            peer_up: false,
        });
        ports.push((port, BRIDGE_IFINDEX));
        addresses.push((
            ns,
            vec![Address {
                ifindex,
                addr: mgmt.address(node),
            }],
        ));
    }
    let mut tunnels = Vec::new();
    for (j, tunnel) in span.share.mgmt_tunnels().enumerate() {
        let port = BRIDGE_IFINDEX + 1 + (members.len() + j) as u32;
        tunnels.push(span.mgmt_vxlan(
            tunnel,
            VethEnd {
                ns: hub,
                name: format!("to{}", tunnel.far(span.share.machine)),
                ifindex: port,
                mac: None,
            },
        ));
        ports.push((port, BRIDGE_IFINDEX));
    }
    Plan {
        bridge: (hub, INTERFACE, BRIDGE_IFINDEX),
        veths,
        tunnels,
        ports: vec![(hub, ports)],
        up: vec![(hub, vec![1])],
        addresses,
    }
}
