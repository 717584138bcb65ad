//! What a lab attaches to its ports and links besides the fabric: packet
//! filters, captures, mirrors, the metrics endpoint and the management
//! network.

use std::fmt;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::Serialize;

use super::fabric::{LinkId, NodeId};

/// `[[filter]]`: a packet filter at a port of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Filter {
    /// Its name (counters, events).
    pub name: String,
    /// The node.
    pub node: NodeId,
    /// Its port (interface).
    pub port: String,
    /// The link of that port.
    pub link: LinkId,
    /// Frames arriving at the port, or leaving it.
    pub hook: Hook,
    /// What filters.
    pub kind: FilterKind,
}

/// Where at a port a filter sees frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hook {
    /// Frames arriving at the port.
    Ingress,
    /// Frames leaving it.
    Egress,
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hook::Ingress => "ingress",
            Hook::Egress => "egress",
        })
    }
}

/// What a filter is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilterKind {
    /// The rules of an nftables chain (nft syntax), at the port's netdev
    /// hook.
    Nft {
        /// The rules.
        rules: String,
    },
    /// A compiled eBPF program.
    Ebpf {
        /// The object file, as the scenario names it (relative to the
        /// scenario file).
        object: String,
        /// The program's name in the object (`None`: its only program).
        program: Option<String>,
        /// Where it runs.
        attach: Attach,
    },
}

/// Where an eBPF filter runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attach {
    /// tc's clsact hook (ingress or egress), a classifier in
    /// direct-action mode.
    Tc,
    /// XDP, at the port's ingress (driver mode on veth).
    Xdp,
}

/// The directions of a link a tap names: `a-b` (frames from the link's
/// first node to its second), `b-a`, or `both`; `None` for anything else.
/// Index 0 is `a-b`, as in [`Link::ends`](super::fabric::Link::ends).
pub fn link_directions(text: &str) -> Option<[bool; 2]> {
    match text {
        "both" => Some([true, true]),
        "a-b" => Some([true, false]),
        "b-a" => Some([false, true]),
        _ => None,
    }
}

/// `[[capture]]`: a link's frames written to a pcapng file while the lab
/// runs (what its receiving ends get, and the frames the link drops).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capture {
    /// The link.
    pub link: LinkId,
    /// Directions captured: 0 from its first end to its second.
    pub directions: [bool; 2],
    /// The file, relative to where `turbonet up` (or `run`'s reports) write.
    pub file: String,
    /// Bytes kept of each frame.
    pub snaplen: u32,
}

/// `[[mirror]]`: a link's frames copied, live, out of a port of a node,
/// like a switch's SPAN port, for a monitor running there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mirror {
    /// The link.
    pub link: LinkId,
    /// Directions copied: 0 from its first end to its second.
    pub directions: [bool; 2],
    /// The node that receives the copies.
    pub to: NodeId,
    /// Its interface that receives them.
    pub port: String,
    /// Bytes kept of each copy (`None`: whole frames).
    pub truncate: Option<u32>,
}

/// `[metrics]`: the lab daemon serves OpenMetrics (Prometheus' text
/// format) at `http://ADDRESS:PORT/metrics`, and on the management network
/// at `http://mgmt:PORT/metrics` when the lab has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Metrics {
    /// Its TCP port.
    pub port: u16,
    /// Where it listens on this machine.
    pub address: std::net::Ipv4Addr,
}

impl Metrics {
    /// Where it listens by default: this machine only.
    pub const DEFAULT_ADDRESS: &str = "127.0.0.1";
}

/// `[mgmt]`: an out-of-band network every node with a namespace joins
/// through its own `mgmt0`, for the control traffic of experiments (MPI's
/// launcher and control channel, exporters, ssh), so that it never crosses
/// the fabric nor is impaired by it. No route points at it: only its own
/// subnet is reachable through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mgmt {
    /// Its network: the first address is the lab's side of it (where the
    /// control traffic of `turbonet mpirun` starts), node `i` has address
    /// `i + 2`.
    pub pool: Ipv4Net,
}

impl Mgmt {
    /// The default pool.
    pub const DEFAULT_POOL: &str = "172.31.0.0/16";

    /// The lab's own address on the network, with its prefix length.
    pub fn hub(&self) -> Ipv4Net {
        self.at(1)
    }

    /// The address of machine `machine`'s part of a lab over several: the
    /// lab's own on machine 0, then down from the top of the pool (the
    /// broadcast address's predecessor is machine 1's).
    pub fn hub_of(&self, machine: u32) -> Ipv4Net {
        match machine {
            0 => self.hub(),
            m => self.at(self.size() - 1 - u64::from(m)),
        }
    }

    /// Whether the pool holds `nodes` nodes and the hubs of `machines`
    /// machines ([`Mgmt::hub_of`]) without one address given twice.
    pub fn holds(&self, nodes: usize, machines: u32) -> bool {
        // Nodes take 2..nodes+1; machines 1.. take size-2 downwards.
        nodes as u64 + 1 < self.size().saturating_sub(u64::from(machines))
    }

    /// `node`'s address on the network, with its prefix length.
    pub fn address(&self, node: NodeId) -> Ipv4Net {
        self.at(u64::from(node.0) + 2)
    }

    /// How many nodes a pool of prefix length `len` holds (without the
    /// network, hub and broadcast addresses).
    pub fn capacity(len: u8) -> u64 {
        (1u64 << (32 - u32::from(len))).saturating_sub(3)
    }

    fn size(&self) -> u64 {
        1 << (32 - u32::from(self.pool.prefix_len()))
    }

    fn at(&self, offset: u64) -> Ipv4Net {
        let addr = Ipv4Addr::from((u64::from(u32::from(self.pool.network())) + offset) as u32);
        Ipv4Net::new(addr, self.pool.prefix_len()).expect("the pool's prefix length")
    }
}
