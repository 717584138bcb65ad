//! How programs inside a lab find nodes by name: the lab's hosts file
//! (`hosts(5)` syntax) maps every node's name to its fabric address — a
//! host's first port address, a switch's loopback — and `exec`, workloads
//! and launchers bind-mount it over `/etc/hosts` in their private mount
//! namespace, so `turbonet exec h1 -- ping h2` resolves as on a cluster.
//! With a management network (`[mgmt]`), `<node>.mgmt` names each node's
//! address on it, and `mgmt` the lab's own (on a lab over several
//! machines, this machine's part's).

use std::fmt::Write;
use std::net::Ipv4Addr;

use turbonet_topo::Lab;

/// The address a node's name resolves to: a host's first port address, a
/// switch's loopback (`None` for a switch without one).
pub fn address(lab: &Lab, node: turbonet_topo::NodeId) -> Option<Ipv4Addr> {
    let n = lab.fabric.node(node);
    match n.loopback {
        Some(lo) => Some(lo),
        None => lab
            .fabric
            .ports(node)
            .map(|(_, local, _)| local.addr.addr())
            .next(),
    }
}

/// Whether `node` joins the lab's management network (when it has one):
/// on `netns` every node does, on the P4 targets every host (a switch there
/// has no namespace of its own to join it from).
pub fn joins_mgmt(lab: &Lab, node: &turbonet_topo::Node) -> bool {
    lab.target == turbonet_topo::Target::Netns || !node.role.is_switch()
}

/// The text of `lab`'s hosts file on machine `machine` (0 when the lab is
/// whole here): localhost, then every node with an address, in node order.
pub fn hosts_file(lab: &Lab, machine: u32) -> String {
    let mut text = format!(
        "# turbonet lab {}: every node by name, on its fabric address\n\
         127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        lab.name
    );
    for node in &lab.fabric.nodes {
        if let Some(addr) = address(lab, node.id) {
            let _ = writeln!(text, "{addr}\t{}", node.name);
        }
    }
    if let Some(mgmt) = &lab.mgmt {
        let _ = writeln!(text, "# the management network [mgmt]");
        let _ = writeln!(text, "{}\tmgmt", mgmt.hub_of(machine).addr());
        for node in lab.fabric.nodes.iter().filter(|n| joins_mgmt(lab, n)) {
            let _ = writeln!(text, "{}\t{}.mgmt", mgmt.address(node.id).addr(), node.name);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_resolves_hosts_to_their_port_switches_to_their_loopback() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scenarios/fat-tree-k4.toml"
        ))
        .unwrap();
        let lab = turbonet_topo::parse("fat-tree-k4.toml", &text).unwrap();
        let hosts = hosts_file(&lab, 0);
        let lines: Vec<&str> = hosts.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(lines.len(), 2 + lab.fabric.nodes.len());
        for node in &lab.fabric.nodes {
            let addr = address(&lab, node.id).unwrap();
            assert!(lines.contains(&format!("{addr}\t{}", node.name).as_str()));
            if let Some(lo) = node.loopback {
                assert_eq!(addr, lo);
            }
        }
        // Names are unique, so are the addresses.
        let mut addrs: Vec<&str> = lines[2..]
            .iter()
            .map(|l| l.split('\t').next().unwrap())
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        assert_eq!(addrs.len(), lab.fabric.nodes.len());
    }
}
