//! The fabric graph: node and link ids, ASNs, roles, nodes, links and
//! their endpoints, routed prefixes, external ports, and [`Fabric`].

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::Serialize;

use super::params::LinkParams;
use super::topology::TopologyKind;

/// Index of a node in [`Fabric::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NodeId(pub u32);

/// Index of a link in [`Fabric::links`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct LinkId(pub u32);

/// A 4-byte autonomous system number (RFC 6793).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Asn(pub u32);

impl fmt::Display for Asn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a node is in the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// An end host (server).
    Host,
    /// Top-of-rack switch (HPN).
    Tor,
    /// Edge switch (fat-tree).
    Edge,
    /// Leaf switch (leaf-spine).
    Leaf,
    /// Aggregation switch (fat-tree, HPN).
    Agg,
    /// Spine switch (leaf-spine).
    Spine,
    /// Core switch (fat-tree, HPN).
    Core,
    /// A switch of a custom topology.
    Switch,
}

impl Role {
    /// True for every role but [`Role::Host`].
    pub fn is_switch(self) -> bool {
        self != Role::Host
    }

    /// The name used in scenario files and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Host => "host",
            Role::Tor => "tor",
            Role::Edge => "edge",
            Role::Leaf => "leaf",
            Role::Agg => "agg",
            Role::Spine => "spine",
            Role::Core => "core",
            Role::Switch => "switch",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A switch or host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// Its index in [`Fabric::nodes`].
    pub id: NodeId,
    /// Unique name, at most 40 bytes of `[a-z0-9-]`; short in generated fabrics
    /// (`edge0-1`, `tor3-r1p0`, `h0-1-0`).
    pub name: String,
    /// Role in the fabric.
    pub role: Role,
    /// Switches: ASN from the ASN plan. Hosts: `None`.
    pub asn: Option<Asn>,
    /// Switches: loopback /32 (also the BGP router id). Hosts: `None`.
    pub loopback: Option<Ipv4Addr>,
    /// Pod (fat-tree, HPN) the node belongs to.
    pub pod: Option<u32>,
    /// HPN segment of a ToR or host, numbered across pods.
    pub segment: Option<u32>,
    /// HPN rail of a ToR.
    pub rail: Option<u32>,
    /// HPN plane of a ToR or aggregation switch.
    pub plane: Option<u32>,
    /// HPN backup host (connected but idle; not counted in oversubscription).
    pub backup: bool,
    /// Links of this node, in port order.
    pub links: Vec<LinkId>,
}

/// The class of a link, used for per-tier defaults (`[links.<class>]`) and
/// in summaries. Named after the roles it joins, lower tier first:
/// `host-edge`, `edge-agg`, `agg-core`, `host-leaf`, `leaf-spine`,
/// `host-tor`, `tor-agg`, `host-switch`, `switch-switch`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct LinkClass {
    /// Lower-tier end.
    pub lower: Role,
    /// Upper-tier end.
    pub upper: Role,
}

impl fmt::Display for LinkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.lower, self.upper)
    }
}

/// One end of a link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    /// The node this end belongs to.
    pub node: NodeId,
    /// Interface name inside the node: at most 15 bytes, unique in the node.
    /// The peer's node name when it fits (`agg0-1`), with `_2`, `_3`, ...
    /// for parallel links, else `eth<port>`.
    pub ifname: String,
    /// Address on the interface: a /31 on switch-switch links; on host links
    /// the host end has its address as a /32 and the switch end the host
    /// subnet's gateway as a /32 (routed host ports, see [`Prefix`]).
    pub addr: Ipv4Net,
}

/// A point-to-point link between two nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// Its index in [`Fabric::links`].
    pub id: LinkId,
    /// Unique readable name: `<a>--<b>`, plus `:<n>` for the n-th parallel
    /// link (n >= 1). This is the LINK argument of the CLI.
    pub name: String,
    /// Tier class, for defaults.
    pub class: LinkClass,
    /// `ends[0]` is the lower-tier end (the host on host links).
    pub ends: [Endpoint; 2],
    /// Emulated link properties, after defaults and overrides.
    pub params: LinkParams,
}

impl Link {
    /// The end of this link that belongs to `node`, and the other end.
    pub fn ends_from(&self, node: NodeId) -> Option<(&Endpoint, &Endpoint)> {
        match (&self.ends[0], &self.ends[1]) {
            (a, b) if a.node == node => Some((a, b)),
            (a, b) if b.node == node => Some((b, a)),
            _ => None,
        }
    }

    /// True when one end is a host.
    pub fn is_host_link(&self) -> bool {
        self.class.lower == Role::Host
    }
}

/// What a routed prefix is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PrefixKind {
    /// A switch loopback /32.
    Loopback,
    /// A host subnet: the hosts of one ToR (or one dual-ToR set / rail).
    /// Each attached switch has the gateway (first usable address) as a /32
    /// on every host-facing port and a /32 route per host.
    Hosts {
        /// Gateway address the hosts route through.
        gateway: Ipv4Addr,
    },
    /// A network behind an external port, reached through `gateway`.
    External {
        /// Next hop on the external port's subnet (`None`: on-link).
        gateway: Option<Ipv4Addr>,
        /// Interface of the external port inside the attached node.
        ifname: String,
    },
}

/// A prefix the fabric routes, and the switches it is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Prefix {
    /// The network.
    pub net: Ipv4Net,
    /// Switches that originate it (two for a dual-ToR host subnet).
    pub attached: Vec<NodeId>,
    /// What it is.
    pub kind: PrefixKind,
}

/// An existing interface of the machine attached to a node's port
/// (hardware in the loop).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExternalPort {
    /// The node it is attached to.
    pub node: NodeId,
    /// The interface as it is named on the machine now.
    pub interface: String,
    /// Named network namespace (`/run/netns/<name>`) the interface lives in
    /// now; `None` for the root namespace.
    pub netns: Option<String>,
    /// Its name inside the node (at most 15 bytes).
    pub ifname: String,
    /// Address (with prefix length) the node gets on it.
    pub addr: Ipv4Net,
    /// Networks reachable through it (each also a [`Prefix`]).
    pub routes: Vec<Ipv4Net>,
    /// Next hop for `routes`.
    pub gateway: Option<Ipv4Addr>,
    /// eBGP neighbour on the port's subnet (BGP mode only); `routes` stay
    /// static routes next to it.
    pub bgp: Option<ExternalPeer>,
}

/// An eBGP neighbour outside the fabric, reached through an
/// [`ExternalPort`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExternalPeer {
    /// Its address: a host address on the port's subnet other than the
    /// node's own.
    pub addr: Ipv4Addr,
    /// Its ASN: not 0 and not the attached node's (an eBGP session).
    pub asn: Asn,
}

/// Nodes, links and prefixes of a lab.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fabric {
    /// The generator and its parameters.
    pub kind: TopologyKind,
    /// All nodes; `nodes[i].id == NodeId(i)`.
    pub nodes: Vec<Node>,
    /// All links; `links[i].id == LinkId(i)`.
    pub links: Vec<Link>,
    /// Every prefix routing must make reachable: loopbacks, host subnets,
    /// external networks.
    pub prefixes: Vec<Prefix>,
    /// Interfaces of the machine attached to nodes.
    pub externals: Vec<ExternalPort>,
    /// The chip each switch role is declared to be built from
    /// (`[topology] switch`); every switch of a role fits on its chip.
    pub chips: BTreeMap<Role, crate::units::Chip>,
    /// What the scenario's rates, queues and ECN thresholds were divided
    /// by (`[lab] rate_scale`, 1: as declared): links' `params` are in
    /// force, the scenario's own values are these times `rate_scale`.
    pub rate_scale: u32,
}

impl Fabric {
    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// The link with this id.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0 as usize]
    }

    /// Looks a node up by name.
    pub fn node_by_name(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Looks a link up by name.
    pub fn link_by_name(&self, name: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The ports of a node: for each of its links, (link, local end, remote end).
    pub fn ports(&self, node: NodeId) -> impl Iterator<Item = (&Link, &Endpoint, &Endpoint)> {
        self.node(node).links.iter().map(move |&l| {
            let link = self.link(l);
            let (local, remote) = link
                .ends_from(node)
                .expect("node's link has the node as an end");
            (link, local, remote)
        })
    }

    /// All switches.
    pub fn switches(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.role.is_switch())
    }

    /// All hosts.
    pub fn hosts(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.role == Role::Host)
    }
}
