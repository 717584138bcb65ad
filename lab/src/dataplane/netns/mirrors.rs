//! The ports of `[[mirror]]`s: the port `port` of the monitor's node (no
//! address: frames arrive there as on a switch's SPAN port), and its near
//! end `m<i>` in the lab's hidden engine namespace, where the link engine
//! sends the copies. When the monitor runs on the machine that taps the
//! link the two are a veth pair; when it runs on another, each is a VXLAN
//! device on its own machine
//! ([`turbonet_topo::machines::MirrorTunnel`]).

use turbonet_topo::Lab;

use super::Here;
use crate::carrier::Carrier;
use turbonet_host::kernel::{Ns, PerNs, Veth, VethEnd, Vxlan};

/// The near end of mirror `i`: its name and ifindex in the engine
/// namespace (after the engine's own ports).
pub fn near_end(carriers: &[Carrier], i: usize) -> (String, u32) {
    let spliced = carriers.iter().filter(|c| c.is_spliced()).count();
    (format!("m{i}"), 2 + 2 * spliced as u32 + i as u32)
}

/// The mirrors' ports on this machine.
#[derive(Debug, Default)]
pub struct Ports {
    /// Mirrors whose link and monitor are both here (created from the
    /// monitor's namespace).
    pub veths: Vec<Veth>,
    /// Ends here of mirrors whose copies cross machines (created up).
    pub vxlans: Vec<Vxlan>,
    /// The veths' near ends, to bring up.
    pub up: PerNs<u32>,
}

/// Every mirror's ports on this machine.
pub fn ports(lab: &Lab, here: &Here<'_>, engine: Ns, carriers: &[Carrier]) -> Ports {
    let share = &here.span().share;
    let mut at_node = vec![0u32; lab.fabric.nodes.len()];
    let mut ports = Ports::default();
    let mut up = Vec::new();
    for (i, m) in lab.mirrors.iter().enumerate() {
        let node = lab.fabric.node(m.to);
        // The monitor's port, after the node's ports and the management
        // port's slot.
        let monitor = here.ns(m.to).map(|ns| {
            let ifindex =
                crate::names::port_ifindex(node.links.len() + 1) + at_node[m.to.0 as usize];
            at_node[m.to.0 as usize] += 1;
            VethEnd {
                ns,
                name: m.port.clone(),
                ifindex,
                mac: None,
            }
        });
        let (name, ifindex) = near_end(carriers, i);
        let near = VethEnd {
            ns: engine,
            name,
            ifindex,
            mac: None,
        };
        match (share.mirror_tunnel(i), monitor) {
            (None, Some(monitor)) => {
                ports.veths.push(Veth {
                    what: format!(
                        "mirror of {} to {}",
                        lab.fabric.link(m.link).name,
                        node.name
                    ),
                    local: monitor,
                    peer: near,
                    mtu: None,
                    peer_up: false,
                });
                up.push(ifindex);
            }
            (Some(tunnel), Some(monitor)) => {
                ports.vxlans.push(here.span().mirror_vxlan(tunnel, monitor));
            }
            (Some(tunnel), None) if tunnel.from == share.machine => {
                ports.vxlans.push(here.span().mirror_vxlan(tunnel, near));
            }
            (Some(_) | None, None) => {}
        }
    }
    if !up.is_empty() {
        ports.up = vec![(engine, up)];
    }
    ports
}
