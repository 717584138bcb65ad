//! What turbonet asks of the kernel, as one trait: create namespaces with
//! their sysctls, veth pairs with each end in its namespace, addresses,
//! links up, offloads off, netem, routes, and wait for carrier.
//!
//! Builders compute every request of a phase (pure, from the lab) and hand
//! the whole batch to a [`Kernel`]; [`Netlink`] carries batches out through
//! rtnetlink, concurrently across namespaces and pipelined within one, and
//! [`Recorder`] writes them down, one line a request, so that what `up`
//! asks for each bundled scenario is a golden file checked without root.

use std::net::Ipv4Addr;
use std::time::Duration;

use ipnet::Ipv4Net;
use rtnetlink::packet_route::route::RouteProtocol;
use turbonet_injectors::Impairment;

use crate::error::Result;

pub mod fq;
pub mod interfaces;
pub mod netem;
mod netlink;
pub mod nexthop;
mod raw;
mod recorder;
pub mod table;
pub mod tbf;

pub use netlink::{
    Netlink, NodeNs, connect, delete_route, delete_route_in, delete_route_with, install,
    route_message,
};
pub use netlink::{RULE_PRIORITY, pipelined};

/// True when this kernel has the module `name` (`sch_netem`, `sch_fq`):
/// loaded, built in, or on disk to be loaded on first use.
pub fn kernel_has_module(name: &str) -> bool {
    if std::path::Path::new("/sys/module").join(name).exists() {
        return true;
    }
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = format!("{name}.ko");
    ["modules.dep", "modules.builtin"].iter().any(|f| {
        std::fs::read_to_string(format!("/lib/modules/{release}/{f}"))
            .is_ok_and(|text| text.contains(&file))
    })
}

/// A namespace the kernel side created, by its position in creation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ns(pub usize);

/// A namespace to create, with the sysctls set inside it right away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceSpec {
    /// Its name under `/run/netns`.
    pub name: String,
    /// `(key, value)` under `/proc/sys`, e.g. `net/ipv4/ip_forward`.
    pub sysctls: Vec<(&'static str, String)>,
    /// A node's: owned by the lab's user namespace when the lab has one
    /// (a member's lab), so what they run in it holds its network
    /// capabilities there and nowhere else. Namespaces of turbonet's own
    /// (the link engine's, management) stay root's.
    pub for_user: bool,
}

/// One end of a veth pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VethEnd {
    /// Its namespace.
    pub ns: Ns,
    /// Its interface name.
    pub name: String,
    /// Its ifindex (free in its namespace).
    pub ifindex: u32,
    /// Its MAC address (default: the kernel's random one).
    pub mac: Option<[u8; 6]>,
}

/// A veth pair, created in one request sent from `local`'s namespace with
/// `peer` moved into its own; `local` comes up with it (the peer cannot in
/// the same request: the kernel answers ENOTCONN).
///
/// With `peer_up` the peer comes up right after, from its own namespace.
/// A veth end that is down keeps the kernel's link-watch event of its
/// creation queued; every carrier change then walks that queue under the
/// RTNL lock, so bringing 48,000 peers up in a later phase costs time
/// quadratic in the fabric's size, and bringing each up as its pair is made
/// keeps the queue short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Veth {
    /// What the request is for, for errors ("link edge0-0--agg0-0").
    pub what: String,
    /// The end the request creates first.
    pub local: VethEnd,
    /// The other end.
    pub peer: VethEnd,
    /// Both ends' MTU (default: the kernel's).
    pub mtu: Option<u32>,
    /// Bring `peer` up once the pair exists.
    pub peer_up: bool,
}

/// The UDP port of turbonet's cut links (not VXLAN's 4789, which a
/// machine's own overlay may hold).
pub const VXLAN_PORT: u16 = 14789;

/// One end of a link cut between machines: a VXLAN device, point to point
/// (`remote`, no learning, the don't-fragment bit set on the underlay),
/// created in one request from the namespace the process runs in (the
/// machine's, where its UDP socket stays, on the underlay) straight into
/// `end`'s namespace, and brought up there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vxlan {
    /// What the request is for, for errors ("cut link tor0--agg0").
    pub what: String,
    /// The device in the node's (or the link engine's) namespace.
    pub end: VethEnd,
    /// The cut link's VXLAN network identifier (24 bits).
    pub vni: u32,
    /// This machine's underlay address.
    pub local: Ipv4Addr,
    /// The far machine's underlay address.
    pub remote: Ipv4Addr,
    /// The UDP port, both ends ([`VXLAN_PORT`]).
    pub port: u16,
    /// The link's MTU (default: the kernel's, underlay MTU less 50).
    pub mtu: Option<u32>,
}

/// An IPv4 address on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Address {
    /// The interface.
    pub ifindex: u32,
    /// Address and prefix length.
    pub addr: Ipv4Net,
}

/// One next hop of a kernel route.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelHop {
    /// The gateway; `None`: the destination is on the link.
    pub via: Option<Ipv4Addr>,
    /// The outgoing interface.
    pub ifindex: u32,
    /// The gateway is on the link although no connected route covers it.
    pub onlink: bool,
}

/// A route in a namespace's main table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    /// Destination.
    pub prefix: Ipv4Net,
    /// Next hops; several: ECMP.
    pub hops: Vec<KernelHop>,
    /// Who installed it (`static`: turbonet, `bgp`: the agents).
    pub protocol: RouteProtocol,
    /// Its metric (`None`: 0).
    pub metric: Option<u32>,
    /// The routing table it goes in (`None`: main).
    pub table: Option<u32>,
}

/// A routing rule: packets from `from` look their route up in `table`
/// (a host's NIC, whose flows hash over that NIC's ports only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRule {
    /// The source address.
    pub from: Ipv4Addr,
    /// The table.
    pub table: u32,
}

/// An interface of the machine that joins a node: moved from namespace
/// `from` (`None`: the root namespace) into `into`, renamed `ifname`,
/// marked with `alias`, brought up and given `addr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct External {
    /// Its name on the machine.
    pub interface: String,
    /// The named namespace it is in (`None`: the root namespace).
    pub from: Option<String>,
    /// The node's namespace.
    pub into: Ns,
    /// Its name in the node.
    pub ifname: String,
    /// The alias that marks it as the lab's.
    pub alias: String,
    /// Its address in the fabric.
    pub addr: Ipv4Net,
}

/// What turbonet asks of the kernel. Every request of a batch may run
/// concurrently with the others; a batch fails on its first error.
pub trait Kernel {
    /// How many namespaces' shares of requests are done so far, counted
    /// across requests (a long phase's progress); 0 when not counted.
    fn finished(&self) -> usize {
        0
    }

    /// Creates the named namespaces (with `threads` dedicated threads) and
    /// sets each one's sysctls inside it; returns them in order.
    fn create_namespaces(&mut self, specs: &[NamespaceSpec], threads: usize) -> Result<Vec<Ns>>;

    /// Opens namespaces that exist already (a running lab's), by name, for
    /// the requests that follow.
    fn open_namespaces(&mut self, names: &[String]) -> Result<Vec<Ns>>;

    /// Creates veth pairs.
    fn add_veths(&self, veths: Vec<Veth>) -> impl Future<Output = Result<()>>;

    /// Creates the VXLAN ends of cut links (see [`Vxlan`]).
    fn add_vxlans(&self, vxlans: Vec<Vxlan>) -> impl Future<Output = Result<()>>;

    /// Creates a bridge `name` with ifindex `ifindex` in `ns`, up.
    fn add_bridge(&self, ns: Ns, name: &str, ifindex: u32) -> impl Future<Output = Result<()>>;

    /// Makes interfaces ports of a bridge and brings them up, per
    /// namespace: `(interface, bridge)` ifindices.
    fn set_bridge_ports(&self, ports: PerNs<(u32, u32)>) -> impl Future<Output = Result<()>>;

    /// Brings interfaces up, per namespace.
    fn set_up(&self, links: PerNs<u32>) -> impl Future<Output = Result<()>>;

    /// Takes interfaces (by ifindex) administratively down.
    fn set_down(&self, links: PerNs<u32>) -> impl Future<Output = Result<()>>;

    /// Turns segmentation and checksum offloads off on interfaces, per
    /// namespace (where turbonet reads and writes whole frames).
    fn disable_offloads(&self, links: PerNs<String>) -> Result<()>;

    /// Adds addresses, per namespace.
    fn add_addresses(&self, addrs: PerNs<Address>) -> impl Future<Output = Result<()>>;

    /// Installs netem with `impairment` (its PRNG seeded with `seed`) as
    /// the root qdisc of interface `ifindex`.
    fn set_netem(&self, ns: Ns, ifindex: u32, impairment: &Impairment, seed: u64) -> Result<()>;

    /// Installs routes, per namespace; with `replace`, over existing routes
    /// to the same prefixes.
    fn add_routes(
        &self,
        routes: PerNs<KernelRoute>,
        replace: bool,
    ) -> impl Future<Output = Result<()>>;

    /// Installs token-bucket shapers as root qdiscs, per namespace:
    /// `(ifindex, tbf)`.
    fn set_shapers(&self, shapers: PerNs<(u32, tbf::Tbf)>) -> Result<()>;

    /// Deletes turbonet's routes to these prefixes, in a table (`None`:
    /// the main one); a route already gone is fine.
    fn delete_routes(
        &self,
        routes: PerNs<(Ipv4Net, Option<u32>)>,
    ) -> impl Future<Output = Result<()>>;

    /// Adds source rules, per namespace.
    fn add_rules(&self, rules: PerNs<SourceRule>) -> impl Future<Output = Result<()>>;

    /// Moves an interface of the machine into a node (see [`External`]).
    fn attach_external(&self, external: &External) -> impl Future<Output = Result<()>>;

    /// Waits until interfaces `2..2 + ports` of every namespace listed have
    /// carrier, polling; fails naming the first that has not after
    /// `timeout`.
    fn wait_carrier(
        &self,
        ports: Vec<(Ns, String, usize)>,
        timeout: Duration,
    ) -> impl Future<Output = Result<()>>;
}

/// Requests of one kind, grouped by namespace.
pub type PerNs<T> = Vec<(Ns, Vec<T>)>;

pub use recorder::Recorder;
