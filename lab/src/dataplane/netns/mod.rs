//! The `netns` target: a fabric of network namespaces and veth links, as
//! the requests [`turbonet_host::kernel::Kernel`] carries out, phase by phase.
//!
//! Every node is a namespace `tn-<lab>-<node>`. Every link is a veth pair
//! created with each end already in its namespace, in one request, sent from
//! the namespace of its first end. Port `i` of a node (its i-th link) gets
//! ifindex `i + 2` (1 is `lo`), so no lookups are needed to address it.
//!
//! [`engine`] is the userspace link engine impaired links are spliced
//! through; [`externals`] attaches interfaces of the machine to nodes.

pub(crate) mod build;
pub mod engine;
pub mod externals;
pub mod fibwatch;
pub mod filters;
pub mod kernel_engine;
pub mod mirrors;
mod notes;
mod plane;
pub mod tapping;

pub use plane::{NetnsPlane, Tapper};

use ipnet::Ipv4Net;
use turbonet_injectors::Impairment;
use turbonet_routing::Route;
use turbonet_topo::machines::Reach;
use turbonet_topo::{Lab, Node, NodeId};

use crate::carrier::Carrier;
use crate::dataplane::kernel_routes::node_kernel_routes;
use crate::err;
use crate::error::Result;
use crate::names::{self, port_ifindex, port_index};
use crate::span::Span;
use turbonet_host::kernel::{Address, KernelRoute, NamespaceSpec, Ns, PerNs, Veth, VethEnd, Vxlan};

/// The nodes that run on this machine, each with its namespace, and where
/// every link is ([`Span`]): what each phase of the build reads.
#[derive(Debug)]
pub struct Here<'a> {
    span: &'a Span,
    /// Each node's namespace, by node id; `None` for another machine's.
    ns: Vec<Option<Ns>>,
}

impl<'a> Here<'a> {
    /// The nodes of `lab` that `span` runs, in the first of the namespaces
    /// `created` (in node order, as [`namespace_specs`] lists them); and
    /// the namespaces created after them.
    pub fn split(lab: &Lab, span: &'a Span, created: &'a [Ns]) -> (Here<'a>, &'a [Ns]) {
        let mut taken = 0;
        let ns = (lab.fabric.nodes.iter())
            .map(|n| {
                let ns = span.runs(n.id).then(|| created.get(taken)).flatten();
                taken += usize::from(ns.is_some());
                ns.copied()
            })
            .collect();
        (Here { span, ns }, &created[taken..])
    }

    /// How many nodes run here.
    pub fn count(&self) -> usize {
        self.ns.iter().flatten().count()
    }

    /// Node `node`'s namespace, if it runs here.
    pub fn ns(&self, node: NodeId) -> Option<Ns> {
        self.ns.get(node.0 as usize).copied().flatten()
    }

    /// The nodes of `lab` that run here, with their namespaces, in node
    /// order.
    pub fn nodes<'l>(&self, lab: &'l Lab) -> impl Iterator<Item = (&'l Node, Ns)> {
        (lab.fabric.nodes.iter()).filter_map(|n| Some((n, self.ns(n.id)?)))
    }

    /// Where this machine is in the lab.
    pub fn span(&self) -> &'a Span {
        self.span
    }

    /// The namespace of node `node`, which runs here.
    fn of(&self, node: NodeId) -> Ns {
        self.ns(node).expect("a node of this machine")
    }
}

/// The per-switch ECMP hash seed, derived from the scenario seed and the
/// switch name (never 0: the kernel reads 0 as "random").
pub fn hash_seed(seed: u64, node: &str) -> u32 {
    (turbonet_topo::seed::for_name(seed, node) as u32).max(1)
}

/// Sysctls for a node, set inside its namespace right after creation.
/// `spelled_out`: the lab's kernels spell out the next hops of routes to
/// nexthop groups ([`turbonet_topo::RoutingConfig::spells_out_next_hops`]).
pub(crate) fn node_sysctls(
    lab: &Lab,
    node: &Node,
    has_seed: bool,
    spelled_out: bool,
) -> Vec<(&'static str, String)> {
    let mut s = vec![
        ("net/ipv4/conf/all/rp_filter", "0".to_owned()),
        ("net/ipv4/conf/default/rp_filter", "0".to_owned()),
        // The fabric is IPv4 for now. IPv6 off keeps router solicitations
        // and MLD reports, sent at random times, off the links: traffic
        // through an impaired link is then exactly what the user sends, so
        // a seed reproduces its drops.
        ("net/ipv6/conf/default/disable_ipv6", "1".to_owned()),
        ("net/ipv6/conf/all/disable_ipv6", "1".to_owned()),
    ];
    if !spelled_out {
        // Routes to nexthop groups as `nhid N` alone, in `ip route` and in
        // the kernel's notifications (the route watcher resolves them).
        s.push(("net/ipv4/nexthop_compat_mode", "0".to_owned()));
    }
    if node.role.is_switch() {
        s.push(("net/ipv4/ip_forward", "1".to_owned()));
        if has_seed {
            // The 5-tuple, hashed by the switch itself with its own seed,
            // so flows spread over equal-cost paths and polarize only
            // where switches share a seed. (Policy 1 would not do: it
            // reuses the L4 hash a packet carries from its sender's socket,
            // which crosses veths unchanged, so every switch on the path
            // would choose alike whatever its seed.) Custom policy 3 with
            // source and destination address, protocol and ports (0x37).
            s.push(("net/ipv4/fib_multipath_hash_policy", "3".to_owned()));
            s.push(("net/ipv4/fib_multipath_hash_fields", "0x0037".to_owned()));
            s.push((
                "net/ipv4/fib_multipath_hash_seed",
                hash_seed(lab.seed, &node.name).to_string(),
            ));
        } else {
            // An older kernel: the L4 hash, without a seed of its own.
            s.push(("net/ipv4/fib_multipath_hash_policy", "1".to_owned()));
        }
    } else {
        // Hosts spread their own flows over their ports (dual-ToR) too.
        s.push(("net/ipv4/fib_multipath_hash_policy", "1".to_owned()));
    }
    s
}

/// True when the lab has a hidden engine namespace: the link engines
/// splice impaired links there, and mirrors' near ends live there.
pub fn has_engine_namespace(lab: &Lab, carriers: &[crate::carrier::Carrier]) -> bool {
    carriers.iter().any(crate::carrier::Carrier::is_spliced) || !lab.mirrors.is_empty()
}

/// The namespace of every node that runs here (`span`), in node order
/// (and, with `engine`, the lab's hidden engine namespace last), each with
/// its sysctls. `has_seed`: the kernel has `fib_multipath_hash_seed`.
pub fn namespace_specs(lab: &Lab, span: &Span, engine: bool, has_seed: bool) -> Vec<NamespaceSpec> {
    let spelled_out = lab
        .routing
        .spells_out_next_hops(lab.fabric.switches().count());
    let mut specs: Vec<NamespaceSpec> = lab
        .fabric
        .nodes
        .iter()
        .filter(|n| span.runs(n.id))
        .map(|n| NamespaceSpec {
            name: names::node_namespace(&lab.name, &n.name),
            sysctls: node_sysctls(lab, n, has_seed, spelled_out),
            for_user: true,
        })
        .collect();
    if engine {
        specs.push(NamespaceSpec {
            name: names::engine_namespace(&lab.name),
            sysctls: crate::dataplane::SILENT_SYSCTLS
                .iter()
                .map(|(k, v)| (*k, (*v).to_owned()))
                .collect(),
            for_user: false,
        });
    }
    specs
}

/// The devices of every link with an end here: veth pairs and, for cut
/// links, VXLAN devices.
#[derive(Debug, Default)]
pub struct LinkDevices {
    /// Veth pairs, grouped by the namespace that sends the request.
    pub veths: Vec<Veth>,
    /// Cut links' ends.
    pub vxlans: Vec<Vxlan>,
}

/// Every link's devices here. A plain link is one veth pair with an end in
/// each node; an impaired (spliced) link is two, each node's port paired
/// with an interface in the engine namespace. A cut link's end here is a
/// VXLAN device where the far end's veth would be (see [`crate::span`]).
/// Every port gets its deterministic ifindex; each veth request goes from
/// the namespace of the end it creates first (where that ifindex is known
/// to be free), so link creation also spreads over all connections.
pub fn links(
    lab: &Lab,
    here: &Here<'_>,
    engine: Option<Ns>,
    carriers: &[Carrier],
) -> Result<LinkDevices> {
    let port_of = port_positions(lab);
    let impaired = engine::spliced(carriers);
    let mut out = LinkDevices::default();
    for link in &lab.fabric.links {
        let reach = here.span().reach(link);
        let mtu = link.params.mtu.map(|m| u32::from(m.0));
        let end = |ns, name: &str, ifindex| VethEnd {
            ns,
            name: name.to_owned(),
            ifindex,
            mac: None,
        };
        // A node's end `side`: its port.
        let port = |side: usize| {
            let e = &link.ends[side];
            end(
                here.of(e.node),
                &e.ifname,
                port_ifindex(port_of[link.id.0 as usize][side]),
            )
        };
        let veth = |local, peer, peer_up| Veth {
            what: format!("link {}", link.name),
            local,
            peer,
            mtu,
            peer_up,
        };
        match (reach, impaired[link.id.0 as usize]) {
            (Reach::Away, _) => {}
            (Reach::Local, None) => out.veths.push(veth(port(0), port(1), true)),
            (Reach::Cut(cut), None) => out.vxlans.push(here.span().vxlan(link, cut, port(cut.end))),
            (Reach::Local | Reach::Cut(_), Some(k)) => {
                let engine =
                    engine.ok_or_else(|| err!("impaired link {} without an engine", link.name))?;
                for side in 0..2 {
                    let (name, ifindex) = engine::port(link.id.0, k, side);
                    match reach {
                        // The far node's side of the engine: the tunnel.
                        Reach::Cut(cut) if cut.end != side => {
                            out.vxlans.push(here.span().vxlan(
                                link,
                                cut,
                                end(engine, &name, ifindex),
                            ));
                        }
                        _ => out
                            .veths
                            .push(veth(port(side), end(engine, &name, ifindex), false)),
                    }
                }
            }
        }
    }
    out.veths.sort_by_key(|v| v.local.ns);
    Ok(out)
}

/// The far ends of cut links another machine's link engine carries: the
/// node's port here is a plain VXLAN device, whose frames that engine
/// reads and writes as they are, so its offloads (checksum, segmentation)
/// go off as a spliced veth's would. A frame sent with its checksum left
/// to the device would otherwise reach the far node still without one.
pub fn far_engine_ends(lab: &Lab, here: &Here<'_>) -> PerNs<String> {
    let machine = here.span().share.machine;
    let mut ports: Vec<Vec<String>> = vec![Vec::new(); lab.fabric.nodes.len()];
    for link in &lab.fabric.links {
        if let turbonet_topo::machines::Reach::Cut(cut) = here.span().reach(link)
            && cut.engine
            && cut.owner != machine
        {
            let end = &link.ends[cut.end];
            ports[end.node.0 as usize].push(end.ifname.clone());
        }
    }
    (ports.into_iter().enumerate())
        .filter(|(_, p)| !p.is_empty())
        .map(|(node, ports)| (here.of(NodeId(node as u32)), ports))
        .collect()
}

/// The engine's side of impaired links: the engine-side interfaces to
/// bring up, and the interfaces on both sides of every spliced veth whose
/// offloads (segmentation, checksum) go off, so the engine reads and
/// writes plain, complete frames.
pub fn engine_ports(
    lab: &Lab,
    here: &Here<'_>,
    engine: Ns,
    carriers: &[Carrier],
) -> (PerNs<u32>, PerNs<String>) {
    let impaired = engine::spliced(carriers);
    let mut engine_ports = Vec::new();
    let mut node_ports: Vec<Vec<String>> = vec![Vec::new(); lab.fabric.nodes.len()];
    for link in &lab.fabric.links {
        let Some(k) = impaired[link.id.0 as usize] else {
            continue;
        };
        for (side, end) in link.ends.iter().enumerate() {
            engine_ports.push(engine::port(link.id.0, k, side));
            if here.ns(end.node).is_some() {
                node_ports[end.node.0 as usize].push(end.ifname.clone());
            }
        }
    }
    let up = vec![(engine, engine_ports.iter().map(|(_, i)| *i).collect())];
    let mut offloads = vec![(engine, engine_ports.into_iter().map(|(n, _)| n).collect())];
    offloads.extend(
        node_ports
            .into_iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .map(|(node, ports)| (here.of(NodeId(node as u32)), ports)),
    );
    (up, offloads)
}

/// Every link the kernel engine carries: netem on both ends (each end
/// shapes its own egress, one direction), with segmentation offloads off
/// there (netem would count a 64 KiB super-frame as one packet).
#[derive(Debug)]
pub struct KernelEngine {
    /// Interfaces whose offloads go off.
    pub offloads: PerNs<String>,
    /// `(namespace, ifindex, impairment, seed)` per link end.
    pub netem: Vec<(Ns, u32, Impairment, u64)>,
    /// How many links.
    pub links: usize,
}

/// The kernel engine's share of the lab (see [`KernelEngine`]).
pub fn kernel_engine(lab: &Lab, here: &Here<'_>, carriers: &[Carrier]) -> KernelEngine {
    let mut plan = KernelEngine {
        offloads: Vec::new(),
        netem: Vec::new(),
        links: 0,
    };
    for (link, carrier) in lab.fabric.links.iter().zip(carriers) {
        if *carrier != Carrier::Kernel {
            continue;
        }
        let imp = Impairment::from_params(&link.params);
        // Each end here shapes its own direction (a cut link's other end
        // is the far machine's).
        for (direction, end) in link.ends.iter().enumerate() {
            let Some(ns) = here.ns(end.node) else {
                continue;
            };
            let index = port_index(lab, end.node, link.id).expect("link's end is a port");
            plan.offloads.push((ns, vec![end.ifname.clone()]));
            let seed = turbonet_injectors::direction_seed(lab.seed, &link.name, direction as u8);
            plan.netem.push((ns, index, imp.clone(), seed));
        }
        plan.links += 1;
    }
    plan
}

/// Every shaped link's token buckets, one per end (the sending side of
/// each direction), by namespace: `(ifindex, tbf)`; and how many links.
pub fn kernel_shapers(
    lab: &Lab,
    here: &Here<'_>,
    carriers: &[Carrier],
) -> (PerNs<(u32, turbonet_host::kernel::tbf::Tbf)>, usize) {
    let mut by_ns: std::collections::BTreeMap<Ns, Vec<(u32, turbonet_host::kernel::tbf::Tbf)>> =
        std::collections::BTreeMap::new();
    let mut links = 0;
    for (link, carrier) in lab.fabric.links.iter().zip(carriers) {
        if *carrier != Carrier::Shaper {
            continue;
        }
        let Ok(tbf) = shaper_for(&link.params) else {
            continue;
        };
        for end in &link.ends {
            let Some(ns) = here.ns(end.node) else {
                continue;
            };
            let index = port_index(lab, end.node, link.id).expect("link's end is a port");
            by_ns.entry(ns).or_default().push((index, tbf));
        }
        links += 1;
    }
    (by_ns.into_iter().collect(), links)
}

/// The token bucket of a link with `params`, for its MTU.
pub fn shaper_for(
    params: &turbonet_topo::LinkParams,
) -> std::result::Result<turbonet_host::kernel::tbf::Tbf, turbonet_host::kernel::tbf::Unsupported> {
    let mtu = params.mtu.map_or(1500, |m| u32::from(m.0));
    turbonet_host::kernel::tbf::Tbf::for_link(&Impairment::from_params(params), mtu)
}

/// What comes up before addresses go on: every `lo` (a port comes up with
/// its veth pair, [`Veth::peer_up`]).
pub fn loopbacks(lab: &Lab, here: &Here<'_>) -> PerNs<u32> {
    here.nodes(lab).map(|(_, ns)| (ns, vec![1])).collect()
}

/// A node's addresses: its loopback on `lo` (switches) and every port's.
pub fn node_addresses(lab: &Lab, node: &Node) -> Vec<Address> {
    let mut addrs = Vec::new();
    if let Some(lo) = node.loopback {
        addrs.push(Address {
            ifindex: 1,
            addr: Ipv4Net::new(lo, 32).expect("a /32"),
        });
    }
    for (port, (_, local, _)) in lab.fabric.ports(node.id).enumerate() {
        addrs.push(Address {
            ifindex: port_ifindex(port),
            addr: local.addr,
        });
    }
    addrs
}

/// The table of a host's first NIC; NIC `i` (in address order) looks its
/// routes up in `NIC_TABLE_BASE + i`.
pub const NIC_TABLE_BASE: u32 = 100;

/// A multi-port host's NICs: every distinct address of its ports (in
/// address order: rail 0 first), with its table and its ports. A host
/// with one port has none: the main table is its NIC's.
pub fn nics(lab: &Lab, node: &Node) -> Vec<(std::net::Ipv4Addr, u32, Vec<String>)> {
    if node.role.is_switch() || node.links.len() < 2 {
        return Vec::new();
    }
    let mut by_addr: std::collections::BTreeMap<std::net::Ipv4Addr, Vec<String>> =
        std::collections::BTreeMap::new();
    for (_, local, _) in lab.fabric.ports(node.id) {
        by_addr
            .entry(local.addr.addr())
            .or_default()
            .push(local.ifname.clone());
    }
    by_addr
        .into_iter()
        .zip(NIC_TABLE_BASE..)
        .map(|((addr, ports), table)| (addr, table, ports))
        .collect()
}

/// Every multi-port host's rules: a flow from a NIC's address looks its
/// route up in that NIC's table, so it hashes over that NIC's ports only
/// (as HPN's NICs hash their connections over their two ports).
pub fn host_rules(lab: &Lab, here: &Here<'_>) -> PerNs<turbonet_host::kernel::SourceRule> {
    here.nodes(lab)
        .filter(|(n, _)| n.role == turbonet_topo::Role::Host)
        .map(|(n, ns)| {
            let rules = nics(lab, n)
                .into_iter()
                .map(|(from, table, _)| turbonet_host::kernel::SourceRule { from, table })
                .collect::<Vec<_>>();
            (ns, rules)
        })
        .filter(|(_, rules)| !rules.is_empty())
        .collect()
}

/// A multi-port host's routes in its NICs' tables: each NIC's share of the
/// host's default route (the next hops through its own ports). A NIC none
/// of whose ports is up has none.
pub fn nic_routes(lab: &Lab, node: &Node, routes: &[Route]) -> Result<Vec<KernelRoute>> {
    let nics = nics(lab, node);
    let mut out = Vec::new();
    for route in routes
        .iter()
        .filter(|r| r.origin == turbonet_routing::RouteOrigin::Default)
    {
        for (_, table, ports) in &nics {
            let mine = Route {
                nexthops: route
                    .nexthops
                    .iter()
                    .filter(|h| ports.contains(&h.ifname))
                    .cloned()
                    .collect(),
                ..route.clone()
            };
            if mine.nexthops.is_empty() {
                continue;
            }
            let mut kernel = node_kernel_routes(
                lab,
                node,
                std::slice::from_ref(&mine),
                rtnetlink::packet_route::route::RouteProtocol::Static,
                None,
            )?;
            for k in &mut kernel {
                k.table = Some(*table);
            }
            out.extend(kernel);
        }
    }
    Ok(out)
}

/// Every node's addresses.
pub fn addresses(lab: &Lab, here: &Here<'_>) -> PerNs<Address> {
    here.nodes(lab)
        .map(|(n, ns)| (ns, node_addresses(lab, n)))
        .collect()
}

/// Every node's ports, to wait for carrier on.
pub fn carrier_ports(lab: &Lab, here: &Here<'_>) -> Vec<(Ns, String, usize)> {
    here.nodes(lab)
        .map(|(n, ns)| (ns, n.name.clone(), n.links.len()))
        .collect()
}

/// `routes` (by node) as kernel routes of `protocol` with metric
/// `metric`, in the namespaces `nodes`; nodes without routes are left out.
pub fn kernel_routes(
    lab: &Lab,
    here: &Here<'_>,
    routes: &[Vec<Route>],
) -> Result<PerNs<KernelRoute>> {
    here.nodes(lab)
        .filter(|(n, _)| !routes[n.id.0 as usize].is_empty())
        .map(|(n, ns)| {
            let mut mine = node_kernel_routes(
                lab,
                n,
                &routes[n.id.0 as usize],
                rtnetlink::packet_route::route::RouteProtocol::Static,
                None,
            )?;
            mine.extend(nic_routes(lab, n, &routes[n.id.0 as usize])?);
            Ok((ns, mine))
        })
        .collect()
}

/// For every link, the port position of each end in its node.
fn port_positions(lab: &Lab) -> Vec<[usize; 2]> {
    let mut pos = vec![[0usize; 2]; lab.fabric.links.len()];
    for node in &lab.fabric.nodes {
        for (port, &l) in node.links.iter().enumerate() {
            let link = lab.fabric.link(l);
            let side = usize::from(link.ends[0].node != node.id);
            pos[l.0 as usize][side] = port;
        }
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_seeds_are_stable_per_seed_and_differ_between_switches() {
        assert_eq!(hash_seed(42, "agg0-0"), hash_seed(42, "agg0-0"));
        assert_ne!(hash_seed(42, "agg0-0"), hash_seed(42, "agg0-1"));
        assert_ne!(hash_seed(42, "agg0-0"), hash_seed(43, "agg0-0"));
        for seed in 0..1000 {
            assert_ne!(hash_seed(seed, "core0"), 0, "0 means random to the kernel");
        }
    }
}
