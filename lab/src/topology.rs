//! The fabric as data, for tools outside turbonet: every node with its
//! role, AS, loopback and ports (interface, address, the link and the node
//! at the other end), every link with its ends and parameters. What a
//! snapshot's `topology` holds and what `turbonet export` writes, as JSON
//! or as a Graphviz graph.

use std::fmt::Write as _;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::Serialize;
use turbonet_topo::{Lab, LinkParams, Role};

/// The fabric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Topology {
    /// Every node, in node order.
    pub nodes: Vec<NodeView>,
    /// Every link, in link order.
    pub links: Vec<LinkView>,
}

/// A node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeView {
    /// Its name.
    pub name: String,
    /// `host`, `edge`, `agg`, `core`, `leaf`, `spine`, `tor`, `switch`.
    pub role: String,
    /// Its AS (switches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asn: Option<u32>,
    /// Its loopback, the BGP router id (switches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loopback: Option<Ipv4Addr>,
    /// Who routes it under BGP: `builtin`, `frr`, `bird` (switches of BGP
    /// labs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Its pod (fat-tree, HPN).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<u32>,
    /// Its HPN segment (ToRs and hosts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment: Option<u32>,
    /// Its HPN plane.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plane: Option<u32>,
    /// Its ports, in port order.
    pub ports: Vec<PortView>,
}

/// A port of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortView {
    /// The interface in the node.
    pub ifname: String,
    /// Its address.
    pub address: Ipv4Net,
    /// The link.
    pub link: String,
    /// The node at the other end.
    pub peer: String,
    /// Its interface there.
    pub peer_port: String,
}

/// A link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkView {
    /// `a--b`.
    pub name: String,
    /// `host-edge`, `edge-agg`, ...
    pub class: String,
    /// Its ends, the lower tier's first.
    pub ends: [EndView; 2],
    /// Its parameters (scenario syntax; those not set are left out).
    pub params: LinkParams,
}

/// One end of a link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndView {
    /// The node.
    pub node: String,
    /// Its interface.
    pub port: String,
    /// Its address.
    pub address: Ipv4Net,
}

/// The fabric of `lab`, with `params` in force (by link id; `None`: the
/// scenario's).
pub fn topology(lab: &Lab, params: Option<&[LinkParams]>) -> Topology {
    let fabric = &lab.fabric;
    let bgp = lab.routing.mode == turbonet_topo::RoutingMode::Bgp;
    let nodes = fabric
        .nodes
        .iter()
        .map(|n| NodeView {
            name: n.name.clone(),
            role: n.role.to_string(),
            asn: n.asn.map(|a| a.0),
            loopback: n.loopback,
            agent: (bgp && n.role.is_switch()).then(|| lab.routing.agent_of(n.id).to_string()),
            pod: n.pod,
            segment: n.segment,
            plane: n.plane,
            ports: fabric
                .ports(n.id)
                .map(|(link, local, remote)| PortView {
                    ifname: local.ifname.clone(),
                    address: local.addr,
                    link: link.name.clone(),
                    peer: fabric.node(remote.node).name.clone(),
                    peer_port: remote.ifname.clone(),
                })
                .collect(),
        })
        .collect();
    let links = fabric
        .links
        .iter()
        .map(|l| LinkView {
            name: l.name.clone(),
            class: l.class.to_string(),
            ends: l.ends.each_ref().map(|e| EndView {
                node: fabric.node(e.node).name.clone(),
                port: e.ifname.clone(),
                address: e.addr,
            }),
            params: params
                .and_then(|p| p.get(l.id.0 as usize))
                .unwrap_or(&l.params)
                .clone(),
        })
        .collect();
    Topology { nodes, links }
}

/// The fabric as a Graphviz graph: nodes in tiers (hosts at the bottom),
/// each link labelled with its class and its parameters.
pub fn dot(lab: &Lab) -> String {
    let fabric = &lab.fabric;
    let mut out = String::new();
    let _ = writeln!(out, "graph \"{}\" {{", lab.name);
    let _ = writeln!(out, "  rankdir=BT;");
    let _ = writeln!(out, "  node [fontname=\"sans-serif\", fontsize=10];");
    let _ = writeln!(out, "  edge [fontname=\"sans-serif\", fontsize=8];");
    let tiers = [
        Role::Host,
        Role::Tor,
        Role::Edge,
        Role::Leaf,
        Role::Switch,
        Role::Agg,
        Role::Spine,
        Role::Core,
    ];
    for role in tiers {
        let members: Vec<_> = fabric.nodes.iter().filter(|n| n.role == role).collect();
        if members.is_empty() {
            continue;
        }
        let _ = writeln!(out, "  {{ rank=same; // {role}");
        for n in members {
            let (shape, detail) = match (n.asn, n.loopback) {
                (Some(asn), Some(lo)) => ("box", format!("\\nAS{} {lo}", asn.0)),
                _ => (
                    "ellipse",
                    fabric
                        .ports(n.id)
                        .next()
                        .map(|(_, local, _)| format!("\\n{}", local.addr.addr()))
                        .unwrap_or_default(),
                ),
            };
            let _ = writeln!(
                out,
                "    \"{}\" [shape={shape}, label=\"{}{detail}\"];",
                n.name, n.name
            );
        }
        let _ = writeln!(out, "  }}");
    }
    for l in &fabric.links {
        let [a, b] = &l.ends;
        let params = l.params.to_string();
        let label = if params.is_empty() {
            l.class.to_string()
        } else {
            format!("{}\\n{params}", l.class)
        };
        let _ = writeln!(
            out,
            "  \"{}\" -- \"{}\" [label=\"{}\", taillabel=\"{}\", headlabel=\"{}\"];",
            fabric.node(a.node).name,
            fabric.node(b.node).name,
            label.replace('"', "\\\""),
            a.ifname,
            b.ifname
        );
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab() -> Lab {
        turbonet_topo::parse(
            "t.toml",
            "[lab]\nname = \"t\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n\
             [routing]\nmode = \"bgp\"\n[links.agg-core]\ndelay = \"10us\"\n",
        )
        .unwrap()
    }

    #[test]
    fn every_port_names_its_link_and_the_port_at_the_other_end() {
        let lab = lab();
        let t = topology(&lab, None);
        assert_eq!((t.nodes.len(), t.links.len()), (36, 48));
        let edge = t.nodes.iter().find(|n| n.name == "edge0-0").unwrap();
        assert_eq!(edge.role, "edge");
        assert_eq!(edge.agent.as_deref(), Some("builtin"));
        assert!(edge.asn.is_some() && edge.loopback.is_some());
        for p in &edge.ports {
            let peer = t.nodes.iter().find(|n| n.name == p.peer).unwrap();
            let back = peer.ports.iter().find(|q| q.link == p.link).unwrap();
            assert_eq!(
                (back.peer.as_str(), back.ifname.as_str()),
                ("edge0-0", p.peer_port.as_str())
            );
        }
        let core = t.links.iter().find(|l| l.class == "agg-core").unwrap();
        assert_eq!(serde_json::to_value(&core.params).unwrap()["delay"], "10us");
        let host = t.nodes.iter().find(|n| n.role == "host").unwrap();
        assert!(host.asn.is_none() && host.agent.is_none());
    }

    #[test]
    fn the_graph_has_every_node_once_and_every_link() {
        let lab = lab();
        let g = dot(&lab);
        assert!(g.starts_with("graph \"t\" {") && g.ends_with("}\n"), "{g}");
        assert_eq!(g.matches(" -- ").count(), 48);
        assert_eq!(g.matches("[shape=box").count(), 20);
        assert_eq!(g.matches("[shape=ellipse").count(), 16);
        assert!(g.contains("agg-core\\ndelay=10us"), "{g}");
    }
}
