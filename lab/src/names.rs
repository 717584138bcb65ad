//! How turbonet names what it creates, so that names are deterministic,
//! readable, fit the kernel's limits and never collide with what others
//! created: `tn-<lab>-<node>` for a node's namespace (lab and node names
//! are `[a-z0-9-]`), a dot for the lab's own hidden namespaces
//! (`tn-<lab>.engine`, `tn-<lab>.mgmt`, `tn-<lab>.soft`,
//! `tn-<lab>.<switch>`), and an
//! interface alias `turbonet:<lab>:<what>` on interfaces of the machine a
//! lab borrows.

use turbonet_topo::{Lab, LinkId, NodeId};

/// Namespace name of a node: `tn-<lab>-<node>`, so `ip netns exec` works
/// for users.
pub fn node_namespace(lab: &str, node: &str) -> String {
    format!("tn-{lab}-{node}")
}

/// Name of a lab's hidden link-engine namespace.
pub fn engine_namespace(lab: &str) -> String {
    format!("tn-{lab}.engine")
}

/// Name of a lab's hidden management namespace (its `[mgmt]` bridge).
pub fn mgmt_namespace(lab: &str) -> String {
    format!("tn-{lab}.mgmt")
}

/// Name of a lab's soft-switch namespace.
pub fn soft_namespace(lab: &str) -> String {
    format!("tn-{lab}.soft")
}

/// Name of the namespace of a BMv2 switch turbonet runs.
pub fn bmv2_namespace(lab: &str, switch: &str) -> String {
    format!("tn-{lab}.{switch}")
}

/// Interface alias that marks a kernel object as the lab's.
pub fn alias(lab: &str, what: &str) -> String {
    format!("turbonet:{lab}:{what}")
}

/// The ifindex of port `port` (position in `Node::links`) of a node: port
/// `i` is ifindex `i + 2` (1 is `lo`), so no lookups are needed to
/// address it.
pub fn port_ifindex(port: usize) -> u32 {
    port as u32 + 2
}

/// The ifindex of `link`'s port on `node`.
pub fn port_index(lab: &Lab, node: NodeId, link: LinkId) -> Option<u32> {
    lab.fabric
        .node(node)
        .links
        .iter()
        .position(|&l| l == link)
        .map(port_ifindex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_namespace_carries_the_lab_and_hidden_ones_a_dot() {
        assert_eq!(node_namespace("k4", "edge0-1"), "tn-k4-edge0-1");
        assert_eq!(engine_namespace("k4"), "tn-k4.engine");
        assert_eq!(soft_namespace("k4"), "tn-k4.soft");
        assert_eq!(bmv2_namespace("k4", "s1"), "tn-k4.s1");
    }
}
