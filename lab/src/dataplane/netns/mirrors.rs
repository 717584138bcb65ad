//! The ports of `[[mirror]]`s: a veth per mirror, its far end the port
//! `port` of the monitor's node (no address: frames arrive there as on a
//! switch's SPAN port), its near end `m<i>` in the lab's hidden engine
//! namespace, where the link engine sends the copies.

use turbonet_topo::Lab;

use super::Here;
use crate::carrier::Carrier;
use turbonet_host::kernel::{Ns, PerNs, Veth, VethEnd};

/// The near end of mirror `i`: its name and ifindex in the engine
/// namespace (after the engine's own ports).
pub fn near_end(carriers: &[Carrier], i: usize) -> (String, u32) {
    let spliced = carriers.iter().filter(|c| c.is_spliced()).count();
    (format!("m{i}"), 2 + 2 * spliced as u32 + i as u32)
}

/// Every mirror's veth (created from the monitor's namespace), and the
/// near ends to bring up.
pub fn veths(
    lab: &Lab,
    here: &Here<'_>,
    engine: Ns,
    carriers: &[Carrier],
) -> (Vec<Veth>, PerNs<u32>) {
    let mut at_node = vec![0u32; lab.fabric.nodes.len()];
    let mut veths = Vec::new();
    let mut up = Vec::new();
    for (i, m) in lab.mirrors.iter().enumerate() {
        // A lab with mirrors runs on one machine (`Span::of`).
        let Some(ns) = here.ns(m.to) else {
            continue;
        };
        let node = lab.fabric.node(m.to);
        // After the node's ports and the management port's slot.
        let ifindex = crate::names::port_ifindex(node.links.len() + 1) + at_node[m.to.0 as usize];
        at_node[m.to.0 as usize] += 1;
        let (name, near) = near_end(carriers, i);
        veths.push(Veth {
            what: format!(
                "mirror of {} to {}",
                lab.fabric.link(m.link).name,
                node.name
            ),
            local: VethEnd {
                ns,
                name: m.port.clone(),
                ifindex,
                mac: None,
            },
            peer: VethEnd {
                ns: engine,
                name,
                ifindex: near,
                mac: None,
            },
            mtu: None,
            peer_up: false,
        });
        up.push(near);
    }
    (
        veths,
        if up.is_empty() {
            Vec::new()
        } else {
            vec![(engine, up)]
        },
    )
}
