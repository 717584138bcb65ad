//! The `netns` target: a fabric of network namespaces and veth links, built
//! through rtnetlink.
//!
//! Every node is a namespace `tn-<lab>-<node>`. Every link is a veth pair
//! created with each end already in its namespace, in one request, sent from
//! the lower-tier end's namespace. Port `i` of a node (its i-th link) gets
//! ifindex `i + 2` (1 is `lo`), so no lookups are needed to address it.

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use futures::stream::{self, StreamExt, TryStreamExt};
use rtnetlink::packet_route::link::{InfoData, InfoVeth};
use rtnetlink::packet_route::route::{RouteProtocol, RouteScope};
use rtnetlink::{Handle, LinkUnspec, LinkVeth, RouteMessageBuilder, RouteNextHopBuilder};
use turbonet_injectors::Impairment;
use turbonet_routing::Route;
use turbonet_topo::{Lab, Link, LinkId, Node, NodeId, Role};

use crate::{engine, netns};

/// Requests in flight per netlink connection. Bounded so that the kernel's
/// ACKs never overflow the socket's receive buffer.
const IN_FLIGHT: usize = 128;

/// Namespace name of a node.
pub fn ns_name(lab: &str, node: &str) -> String {
    format!("tn-{lab}-{node}")
}

/// Interface alias that marks a kernel object as the lab's.
pub fn alias(lab: &str, what: &str) -> String {
    format!("turbonet:{lab}:{what}")
}

/// Nodes whose netlink connections are open at once. Each connection holds
/// read and write buffers; opening them for a few dozen nodes at a time
/// keeps a 1,344-node fabric's memory flat.
const NODES_IN_FLIGHT: usize = 32;

/// A node's namespace, held open, with a route-netlink socket inside it.
#[derive(Debug)]
pub struct NodeNs {
    /// The namespace.
    pub ns: OwnedFd,
    /// A route-netlink socket created inside the namespace.
    socket: OwnedFd,
}

impl NodeNs {
    /// A namespace and a route-netlink socket created inside it.
    pub(crate) fn new(ns: OwnedFd, socket: OwnedFd) -> Self {
        NodeNs { ns, socket }
    }

    /// An rtnetlink handle on a duplicate of the node's socket; the
    /// connection closes when the handle (and its clones) are dropped.
    pub fn handle(&self) -> Result<Handle> {
        connect(self.socket.try_clone()?)
    }
}

/// Runs `f` for every item with at most [`NODES_IN_FLIGHT`] at once,
/// collecting results in order and failing on the first error.
pub(crate) async fn per_node<I, T, F, Fut>(items: I, f: F) -> Result<Vec<T>>
where
    I: IntoIterator,
    F: Fn(I::Item) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    stream::iter(items)
        .map(f)
        .buffered(NODES_IN_FLIGHT)
        .try_collect()
        .await
}

/// ifindex of port `port` (position in `Node::links`).
pub(crate) fn port_ifindex(port: usize) -> u32 {
    port as u32 + 2
}

/// The per-switch ECMP hash seed, derived from the scenario seed and the
/// switch name (never 0: the kernel reads 0 as "random").
pub fn hash_seed(seed: u64, node: &str) -> u32 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in node.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = seed ^ h;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z as u32).max(1)
}

/// Sysctls for a node, set inside its namespace right after creation.
pub(crate) fn node_sysctls(lab: &Lab, node: &Node, has_seed: bool) -> Vec<(&'static str, String)> {
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
    if node.role.is_switch() {
        s.push(("net/ipv4/ip_forward", "1".to_owned()));
        // L4 hash, so flows spread over equal-cost paths (and polarize, or
        // not, depending on the seed).
        s.push(("net/ipv4/fib_multipath_hash_policy", "1".to_owned()));
        if has_seed {
            s.push((
                "net/ipv4/fib_multipath_hash_seed",
                hash_seed(lab.seed, &node.name).to_string(),
            ));
        }
    } else {
        // Hosts spread their own flows over their ports (dual-ToR) too.
        s.push(("net/ipv4/fib_multipath_hash_policy", "1".to_owned()));
    }
    s
}

/// How every link is carried on this machine (see [`engine::carriers`]).
/// A lab whose `engine = "kernel"` this machine cannot honour was refused
/// by `up`; should one get here anyway, its impaired links go to the
/// userspace engine, which honours everything.
pub fn link_carriers(lab: &Lab) -> Vec<engine::Carrier> {
    let netem = engine::kernel_has_netem();
    engine::carriers(lab, netem).unwrap_or_else(|why| {
        lab.fabric
            .links
            .iter()
            .map(|l| {
                if Impairment::from_params(&l.params).is_noop() {
                    engine::Carrier::Veth
                } else {
                    engine::Carrier::Userspace(why.clone())
                }
            })
            .collect()
    })
}

/// Installs netem on both ends of every link the kernel engine carries and
/// turns segmentation offloads off there (netem would count a 64 KiB
/// super-frame as one packet). Returns how many links.
pub fn configure_kernel_engine(
    lab: &Lab,
    nodes: &[NodeNs],
    carriers: &[engine::Carrier],
) -> Result<usize> {
    let mut count = 0;
    for (link, carrier) in lab.fabric.links.iter().zip(carriers) {
        if *carrier != engine::Carrier::Kernel {
            continue;
        }
        let imp = Impairment::from_params(&link.params);
        for (direction, end) in link.ends.iter().enumerate() {
            let ns = &nodes[end.node.0 as usize].ns;
            let index = port_index(lab, end.node, link.id).expect("link's end is a port");
            netns::in_namespace(ns, || engine::packet::disable_offloads(&end.ifname))
                .with_context(|| format!("{}: turning offloads off", link.name))?;
            let seed = turbonet_injectors::direction_seed(lab.seed, &link.name, direction as u8);
            engine::kernel::apply(ns, index, &imp, seed)
                .with_context(|| format!("{}: netem on {}", link.name, end.ifname))?;
        }
        count += 1;
    }
    Ok(count)
}

/// Sysctls of the hidden engine namespace: its interfaces must stay silent
/// (no IPv6 router solicitations or MLD reports leaking into the links).
pub(crate) const ENGINE_SYSCTLS: [(&str, &str); 2] = [
    ("net/ipv6/conf/all/disable_ipv6", "1"),
    ("net/ipv6/conf/default/disable_ipv6", "1"),
];

/// Creates every node's namespace (and, when some link is impaired, the
/// lab's hidden engine namespace, returned last), sets its sysctls and
/// opens a netlink socket inside it. Namespaces are created by `threads`
/// dedicated threads.
pub fn create_namespaces(
    lab: &Lab,
    threads: usize,
    engine: bool,
) -> Result<(Vec<NodeNs>, Option<NodeNs>)> {
    let mut names: Vec<String> = lab
        .fabric
        .nodes
        .iter()
        .map(|n| ns_name(&lab.name, &n.name))
        .collect();
    let engine_name = engine::namespace(&lab.name);
    if engine {
        names.push(engine_name.clone());
    }
    let has_seed = netns::has_sysctl("net/ipv4/fib_multipath_hash_seed");
    let by_name: std::collections::HashMap<&str, &Node> = names
        .iter()
        .map(String::as_str)
        .zip(lab.fabric.nodes.iter())
        .collect();
    let results = netns::create_batch(&names, threads, &|name: &str| {
        match by_name.get(name) {
            Some(node) => {
                for (key, value) in node_sysctls(lab, node, has_seed) {
                    netns::write_sysctl(key, &value)?;
                }
            }
            None => {
                for (key, value) in ENGINE_SYSCTLS {
                    netns::write_sysctl(key, value)?;
                }
            }
        }
        Ok((netns::open_current()?, netns::route_socket()?))
    });
    let mut nodes = Vec::with_capacity(results.len());
    for (name, result) in names.iter().zip(results) {
        let (ns, socket) = result.with_context(|| format!("creating namespace {name}"))?;
        nodes.push(NodeNs { ns, socket });
    }
    let engine_ns = if engine { nodes.pop() } else { None };
    Ok((nodes, engine_ns))
}

/// Turns a route-netlink socket into an rtnetlink handle on the current
/// tokio runtime.
pub fn connect(socket: OwnedFd) -> Result<Handle> {
    let fd = socket.as_raw_fd();
    std::mem::forget(socket);
    // SAFETY: ownership of `fd` moves from the OwnedFd into the TokioSocket.
    let socket = unsafe { rtnetlink::sys::TokioSocket::from_raw_fd(fd) };
    let (connection, handle, _) = rtnetlink::from_socket(socket);
    tokio::spawn(connection);
    Ok(handle)
}

/// Runs `requests` with at most [`IN_FLIGHT`] in flight, failing on the first
/// error.
pub(crate) async fn pipelined<F>(requests: impl IntoIterator<Item = F>) -> Result<()>
where
    F: Future<Output = Result<()>>,
{
    stream::iter(requests)
        .map(Ok)
        .try_for_each_concurrent(IN_FLIGHT, |f| f)
        .await
}

/// One veth pair to create: `local` in the requesting node's namespace,
/// `peer` in another (a node's, or the engine's).
struct Veth<'a> {
    link: &'a Link,
    local: (&'a str, u32),
    peer: (String, u32),
    peer_ns: i32,
}

/// Creates every link: a plain link is one veth pair with an end in each
/// node; an impaired link is two pairs, each node's port paired with an
/// interface in the engine namespace. Both ends get their deterministic
/// ifindex; each request is sent from the namespace of the end it creates
/// first (where that ifindex is known to be free), so link creation also
/// spreads over all connections.
pub async fn create_links(
    lab: &Lab,
    nodes: &[NodeNs],
    engine: Option<&NodeNs>,
    carriers: &[engine::Carrier],
) -> Result<()> {
    let port_of = port_positions(lab);
    let impaired = engine::spliced(carriers);
    let mut jobs: Vec<Vec<Veth>> = (0..lab.fabric.nodes.len()).map(|_| Vec::new()).collect();
    for link in &lab.fabric.links {
        let [a, b] = &link.ends;
        let [ia, ib] = port_of[link.id.0 as usize];
        match impaired[link.id.0 as usize] {
            None => jobs[a.node.0 as usize].push(Veth {
                link,
                local: (&a.ifname, port_ifindex(ia)),
                peer: (b.ifname.clone(), port_ifindex(ib)),
                peer_ns: nodes[b.node.0 as usize].ns.as_raw_fd(),
            }),
            Some(k) => {
                let engine = engine
                    .ok_or_else(|| anyhow!("impaired link {} without an engine", link.name))?;
                for (side, (end, index)) in [(a, ia), (b, ib)].into_iter().enumerate() {
                    jobs[end.node.0 as usize].push(Veth {
                        link,
                        local: (&end.ifname, port_ifindex(index)),
                        peer: engine::port(link.id.0, k, side),
                        peer_ns: engine.ns.as_raw_fd(),
                    });
                }
            }
        }
    }
    per_node(jobs.into_iter().enumerate(), |(node, veths)| async move {
        if veths.is_empty() {
            return Ok(());
        }
        let handle = nodes[node].handle()?;
        pipelined(veths.into_iter().map(|v| {
            // The peer cannot be brought up in the same request (the kernel
            // answers ENOTCONN); `configure_addresses` and `configure_engine`
            // do it.
            let mut peer = LinkUnspec::new_with_index(v.peer.1)
                .name(v.peer.0.clone())
                .setns_by_fd(v.peer_ns);
            let mut veth = LinkVeth::new(v.local.0, &v.peer.0).index(v.local.1).up();
            if let Some(mtu) = v.link.params.mtu {
                peer = peer.mtu(u32::from(mtu.0));
                veth = veth.mtu(u32::from(mtu.0));
            }
            let veth = veth
                .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
                .build();
            let request = handle.link().add(veth);
            let name = &v.link.name;
            async move {
                request
                    .execute()
                    .await
                    .with_context(|| format!("creating link {name}"))
            }
        }))
        .await
    })
    .await?;
    Ok(())
}

/// Prepares the engine's side of impaired links: brings the engine-side
/// interfaces up and turns off the offloads (segmentation, checksum) on
/// both sides of every spliced veth, so the engine reads and writes plain,
/// complete frames.
pub async fn configure_engine(
    lab: &Lab,
    nodes: &[NodeNs],
    engine: &NodeNs,
    carriers: &[engine::Carrier],
) -> Result<usize> {
    let impaired = engine::spliced(carriers);
    let mut engine_ports = Vec::new();
    let mut node_ports: Vec<Vec<String>> = vec![Vec::new(); lab.fabric.nodes.len()];
    for link in &lab.fabric.links {
        let Some(k) = impaired[link.id.0 as usize] else {
            continue;
        };
        for (side, end) in link.ends.iter().enumerate() {
            engine_ports.push(engine::port(link.id.0, k, side));
            node_ports[end.node.0 as usize].push(end.ifname.clone());
        }
    }
    let handle = engine.handle()?;
    pipelined(engine_ports.iter().map(|(name, index)| {
        let request = handle
            .link()
            .set(LinkUnspec::new_with_index(*index).up().build());
        async move {
            request
                .execute()
                .await
                .with_context(|| format!("engine: bringing {name} up"))
        }
    }))
    .await?;
    let names: Vec<String> = engine_ports.iter().map(|(n, _)| n.clone()).collect();
    netns::in_namespace(&engine.ns, || {
        names
            .iter()
            .try_for_each(|n| engine::packet::disable_offloads(n))
    })
    .context("engine: turning offloads off")?;
    for (node, ports) in node_ports.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
        netns::in_namespace(&nodes[node].ns, || {
            ports
                .iter()
                .try_for_each(|n| engine::packet::disable_offloads(n))
        })
        .with_context(|| format!("{}: turning offloads off", lab.fabric.nodes[node].name))?;
    }
    Ok(engine_ports.len() / 2)
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

/// Brings `lo` and the peer ends of veths up, puts switch loopbacks on `lo`
/// and addresses every port.
pub async fn configure_addresses(lab: &Lab, nodes: &[NodeNs]) -> Result<usize> {
    let counts = per_node(&lab.fabric.nodes, |node| async move {
        let handle = &nodes[node.id.0 as usize].handle()?;
        handle
            .link()
            .set(LinkUnspec::new_with_index(1).up().build())
            .execute()
            .await
            .with_context(|| format!("{}: bringing lo up", node.name))?;
        let peer_ends: Vec<u32> = lab
            .fabric
            .ports(node.id)
            .enumerate()
            .filter(|(_, (link, local, _))| {
                link.ends[1].node == local.node && link.ends[0].node != local.node
            })
            .map(|(port, _)| port_ifindex(port))
            .collect();
        bring_up(handle, peer_ends, &node.name).await?;
        add_addresses(lab, node, handle).await
    })
    .await?;
    Ok(counts.into_iter().sum())
}

/// Brings the interfaces `indices` of `who` up.
pub(crate) async fn bring_up(
    handle: &Handle,
    indices: impl IntoIterator<Item = u32>,
    who: &str,
) -> Result<()> {
    pipelined(indices.into_iter().map(|index| {
        let request = handle
            .link()
            .set(LinkUnspec::new_with_index(index).up().build());
        async move {
            request
                .execute()
                .await
                .with_context(|| format!("{who}: bringing interface {index} up"))
        }
    }))
    .await
}

/// Puts a node's loopback address on `lo` and addresses its ports.
/// Returns how many addresses it added.
pub(crate) async fn add_addresses(lab: &Lab, node: &Node, handle: &Handle) -> Result<usize> {
    let mut addrs: Vec<(u32, Ipv4Addr, u8, String)> = Vec::new();
    if let Some(lo) = node.loopback {
        addrs.push((1, lo, 32, "lo".to_owned()));
    }
    for (port, (_, local, _)) in lab.fabric.ports(node.id).enumerate() {
        addrs.push((
            port_ifindex(port),
            local.addr.addr(),
            local.addr.prefix_len(),
            local.ifname.clone(),
        ));
    }
    let count = addrs.len();
    pipelined(addrs.into_iter().map(|(index, addr, len, ifname)| {
        let request = handle.address().add(index, IpAddr::V4(addr), len);
        let node = &node.name;
        async move {
            request
                .execute()
                .await
                .with_context(|| format!("{node}: address {addr}/{len} on {ifname}"))
        }
    }))
    .await?;
    Ok(count)
}

/// Installs every node's routes. Returns how many were installed.
pub async fn install_routes(lab: &Lab, nodes: &[NodeNs], routes: &[Vec<Route>]) -> Result<usize> {
    let counts = per_node(&lab.fabric.nodes, |node| async move {
        let handle = nodes[node.id.0 as usize].handle()?;
        install_node_routes(lab, &handle, node, &routes[node.id.0 as usize], false).await
    })
    .await?;
    Ok(counts.into_iter().sum())
}

/// Installs one node's routes through `handle`; with `replace`, existing
/// routes to the same prefixes are replaced (restoring after a failure).
pub async fn install_node_routes(
    lab: &Lab,
    handle: &Handle,
    node: &Node,
    routes: &[Route],
    replace: bool,
) -> Result<usize> {
    let ifindex = ifindex_by_name(lab, node);
    let messages = routes
        .iter()
        .map(|route| {
            route_message(route, &ifindex, RouteProtocol::Static, None).map(|m| (route, m))
        })
        .collect::<Result<Vec<_>>>()
        .with_context(|| format!("{}: building routes", node.name))?;
    pipelined(messages.into_iter().map(|(route, message)| {
        let mut request = handle.route().add(message);
        if replace {
            request = request.replace();
        }
        let node = &node.name;
        async move {
            request
                .execute()
                .await
                .with_context(|| format!("{node}: route {}", route.prefix))
        }
    }))
    .await?;
    Ok(routes.len())
}

/// Deletes the route to `prefix` from a node's main table; a route the
/// kernel already removed (its port went down) is not an error.
pub async fn delete_route(handle: &Handle, prefix: ipnet::Ipv4Net) -> Result<()> {
    delete_route_with(handle, prefix, RouteProtocol::Static, None).await
}

/// [`delete_route`] for the route of one protocol and metric.
pub async fn delete_route_with(
    handle: &Handle,
    prefix: ipnet::Ipv4Net,
    protocol: RouteProtocol,
    priority: Option<u32>,
) -> Result<()> {
    let mut builder = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(prefix.network(), prefix.prefix_len())
        .protocol(protocol);
    if let Some(priority) = priority {
        builder = builder.priority(priority);
    }
    let message = builder.build();
    match handle.route().del(message).execute().await {
        Ok(()) => Ok(()),
        Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::ESRCH => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting route {prefix}")),
    }
}

/// The ifindex of `link`'s port on `node` (its position among the node's
/// links, plus 2).
pub fn port_index(lab: &Lab, node: NodeId, link: LinkId) -> Option<u32> {
    lab.fabric
        .node(node)
        .links
        .iter()
        .position(|&l| l == link)
        .map(port_ifindex)
}

/// Interface name to ifindex for a node's ports.
fn ifindex_by_name<'a>(lab: &'a Lab, node: &Node) -> std::collections::HashMap<&'a str, u32> {
    lab.fabric
        .ports(node.id)
        .enumerate()
        .map(|(port, (_, local, _))| (local.ifname.as_str(), port_ifindex(port)))
        .collect()
}

/// The netlink message that installs `route` (`ifindex` maps its
/// interfaces), as `protocol`, with metric `priority` (`None`: 0).
pub(crate) fn route_message(
    route: &Route,
    ifindex: &std::collections::HashMap<&str, u32>,
    protocol: RouteProtocol,
    priority: Option<u32>,
) -> Result<rtnetlink::packet_route::route::RouteMessage> {
    let index = |name: &str| {
        ifindex
            .get(name)
            .copied()
            .ok_or_else(|| anyhow!("no interface {name}"))
    };
    let mut builder = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(route.prefix.network(), route.prefix.prefix_len())
        .protocol(protocol);
    if let Some(priority) = priority {
        builder = builder.priority(priority);
    }
    match route.nexthops.as_slice() {
        [] => bail!("route {} has no next hop", route.prefix),
        [hop] => {
            builder = builder.output_interface(index(&hop.ifname)?);
            match hop.via {
                Some(via) => {
                    builder = builder.gateway(via);
                    if hop.onlink {
                        builder = builder.onlink();
                    }
                }
                None => builder = builder.scope(RouteScope::Link),
            }
        }
        hops => {
            let nexthops = hops
                .iter()
                .map(|hop| {
                    let mut nh = RouteNextHopBuilder::new_ipv4().interface(index(&hop.ifname)?);
                    if let Some(via) = hop.via {
                        nh = nh.via(IpAddr::V4(via)).map_err(|e| anyhow!("{e:?}"))?;
                    }
                    if hop.onlink {
                        nh = nh.onlink();
                    }
                    Ok(nh.build())
                })
                .collect::<Result<Vec<_>>>()?;
            builder = builder.multipath(nexthops);
        }
    }
    Ok(builder.build())
}

/// Times a phase.
pub struct Stopwatch(Instant);

impl Stopwatch {
    /// Starts now.
    pub fn start() -> Self {
        Stopwatch(Instant::now())
    }

    /// Seconds since start.
    pub fn seconds(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// Role counts for messages ("80 switches, 128 hosts").
pub fn describe_nodes(lab: &Lab) -> String {
    let hosts = lab
        .fabric
        .nodes
        .iter()
        .filter(|n| n.role == Role::Host)
        .count();
    let switches = lab.fabric.nodes.len() - hosts;
    format!("{switches} switches, {hosts} hosts")
}

/// Waits until every port of every node has carrier (`LOWER_UP`), polling
/// each namespace's link table. Returns the number of ports checked.
pub async fn wait_links_up(
    lab: &Lab,
    nodes: &[NodeNs],
    timeout: std::time::Duration,
) -> Result<usize> {
    use rtnetlink::packet_route::link::LinkFlags;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pending: Vec<&Node> = lab.fabric.nodes.iter().collect();
    let total: usize = lab.fabric.nodes.iter().map(|n| n.links.len()).sum();
    loop {
        let checks = per_node(&pending, |node| async move {
            let handle = &nodes[node.id.0 as usize].handle()?;
            let links: Vec<_> = handle.link().get().execute().try_collect().await?;
            let up = links
                .iter()
                .filter(|l| l.header.index >= 2 && (l.header.index as usize) < node.links.len() + 2)
                .filter(|l| l.header.flags.contains(LinkFlags::LowerUp))
                .count();
            Ok::<_, anyhow::Error>(up == node.links.len())
        })
        .await?;
        pending = pending
            .into_iter()
            .zip(checks)
            .filter(|(_, ready)| !ready)
            .map(|(node, _)| node)
            .collect();
        if pending.is_empty() {
            return Ok(total);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{} node(s) still have ports without carrier after {:?} (first: {})",
                pending.len(),
                timeout,
                pending[0].name
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
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

    #[test]
    fn namespace_names_carry_the_lab() {
        assert_eq!(ns_name("k4", "edge0-1"), "tn-k4-edge0-1");
    }
}
