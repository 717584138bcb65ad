//! The kernel through rtnetlink: every request over a netlink socket
//! created inside its namespace, concurrently across namespaces and
//! pipelined within one.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use futures::TryStreamExt;
use futures::stream::{self, StreamExt};
use rtnetlink::packet_route::link::{InfoData, InfoVeth, LinkFlags, VxlanDf};
use rtnetlink::packet_route::route::{RouteProtocol, RouteScope};
use rtnetlink::{
    Handle, LinkBridge, LinkUnspec, LinkVeth, LinkVxlan, RouteMessageBuilder, RouteNextHopBuilder,
};
use turbonet_injectors::Impairment;

use super::nexthop::{
    GroupRoute, NexthopSocket, Protocol, Request, point_at_groups, split_grouped,
};
use super::{
    Address, External, Kernel, KernelRoute, NamespaceSpec, Ns, PerNs, SourceRule, Veth, Vxlan,
};
use crate::error::{Context, Result};
use crate::namespaces;
use crate::{bail, err};

/// Requests in flight per netlink connection. Bounded so that the kernel's
/// ACKs never overflow the socket's receive buffer.
const IN_FLIGHT: usize = 128;

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
pub(crate) async fn per_node<I, T, F, Fut>(
    finished: &std::sync::atomic::AtomicUsize,
    items: I,
    f: F,
) -> Result<Vec<T>>
where
    I: IntoIterator,
    F: Fn(I::Item) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    stream::iter(items)
        .map(|item| {
            let work = f(item);
            async move {
                let out = work.await;
                finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                out
            }
        })
        .buffered(NODES_IN_FLIGHT)
        .try_collect()
        .await
}

/// Turns a route-netlink socket into an rtnetlink handle on the current
/// tokio runtime.
pub fn connect(socket: OwnedFd) -> Result<Handle> {
    Ok(namespaces::route_handle(socket)?)
}

/// Runs `requests` with at most [`IN_FLIGHT`] in flight, failing on the first
/// error.
pub async fn pipelined<F>(requests: impl IntoIterator<Item = F>) -> Result<()>
where
    F: Future<Output = Result<()>>,
{
    stream::iter(requests)
        .map(Ok)
        .try_for_each_concurrent(IN_FLIGHT, |f| f)
        .await
}

/// Deletes the route to `prefix` from a node's main table; a route the
/// kernel already removed (its port went down) is not an error.
pub async fn delete_route(handle: &Handle, prefix: ipnet::Ipv4Net) -> Result<()> {
    delete_route_with(handle, prefix, RouteProtocol::Static, None).await
}

/// The priority of the rules that send a host's NIC addresses to their
/// tables: before the main table's rule (32766).
pub const RULE_PRIORITY: u32 = 1000;

/// Deletes turbonet's route to `prefix` in `table`, if any.
pub async fn delete_route_in(handle: &Handle, prefix: ipnet::Ipv4Net, table: u32) -> Result<()> {
    let message = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(prefix.network(), prefix.prefix_len())
        .protocol(RouteProtocol::Static)
        .table_id(table)
        .build();
    match handle.route().del(message).execute().await {
        Ok(()) => Ok(()),
        Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::ESRCH => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting route {prefix} in table {table}")),
    }
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

/// The kernel through rtnetlink: a namespace's requests go over a netlink
/// socket created inside it.
#[derive(Debug, Default)]
pub struct Netlink {
    namespaces: Vec<NodeNs>,
    /// The user namespace that owns the nodes' namespaces, if not root's
    /// ([`NamespaceSpec::for_user`]).
    owner: Option<OwnedFd>,
    /// Namespaces whose share of a request is done, counted across
    /// requests (progress of a long phase).
    finished: std::sync::atomic::AtomicUsize,
}

impl Netlink {
    /// No namespaces yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// No namespaces yet; the nodes' namespaces it creates will belong to
    /// the user namespace `owner` ([`namespaces::new_user_namespace`]).
    pub fn owned_by(owner: OwnedFd) -> Self {
        Self {
            owner: Some(owner),
            ..Self::default()
        }
    }

    /// A namespace created here.
    pub fn namespace(&self, ns: Ns) -> Result<&NodeNs> {
        self.namespaces
            .get(ns.0)
            .ok_or_else(|| err!("namespace #{} was not created here", ns.0))
    }
}

impl Kernel for Netlink {
    fn finished(&self) -> usize {
        self.finished.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn create_namespaces(&mut self, specs: &[NamespaceSpec], threads: usize) -> Result<Vec<Ns>> {
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let by_name: std::collections::HashMap<&str, &NamespaceSpec> =
            specs.iter().map(|s| (s.name.as_str(), s)).collect();
        let setup = |name: &str| {
            for (key, value) in &by_name[name].sysctls {
                namespaces::write_sysctl(key, value)?;
            }
            Ok((namespaces::open_current()?, namespaces::route_socket()?))
        };
        let results = match &self.owner {
            None => namespaces::create_batch(&names, threads, &setup),
            Some(owner) => {
                // The users' and root's apart, then back in order.
                let (theirs, ours): (Vec<String>, Vec<String>) = specs
                    .iter()
                    .map(|s| s.name.clone())
                    .partition(|n| by_name[n.as_str()].for_user);
                let mut theirs =
                    namespaces::create_owned(&theirs, owner, threads, &setup).into_iter();
                let mut ours = namespaces::create_batch(&ours, threads, &setup).into_iter();
                specs
                    .iter()
                    .map(|s| {
                        let next = if s.for_user {
                            theirs.next()
                        } else {
                            ours.next()
                        };
                        next.expect("a result per namespace")
                    })
                    .collect()
            }
        };
        let first = self.namespaces.len();
        for (name, result) in names.iter().zip(results) {
            let (ns, socket) = result.with_context(|| format!("creating namespace {name}"))?;
            self.namespaces.push(NodeNs::new(ns, socket));
        }
        Ok((first..self.namespaces.len()).map(Ns).collect())
    }

    fn open_namespaces(&mut self, names: &[String]) -> Result<Vec<Ns>> {
        let first = self.namespaces.len();
        for name in names {
            let ns = namespaces::open(name).with_context(|| format!("opening namespace {name}"))?;
            let socket = namespaces::in_namespace(&ns, namespaces::route_socket)
                .with_context(|| format!("a netlink socket in {name}"))?;
            self.namespaces.push(NodeNs::new(ns, socket));
        }
        Ok((first..self.namespaces.len()).map(Ns).collect())
    }

    async fn add_veths(&self, veths: Vec<Veth>) -> Result<()> {
        let mut by_ns: BTreeMap<Ns, Vec<Veth>> = BTreeMap::new();
        // One connection per namespace, shared by the requests that create
        // pairs from it and those that bring peers up in it (two connections
        // on one socket would read each other's answers).
        let mut handles: BTreeMap<Ns, Handle> = BTreeMap::new();
        for veth in veths {
            for ns in [Some(veth.local.ns), veth.peer_up.then_some(veth.peer.ns)]
                .into_iter()
                .flatten()
            {
                if let std::collections::btree_map::Entry::Vacant(e) = handles.entry(ns) {
                    e.insert(self.namespace(ns)?.handle()?);
                }
            }
            by_ns.entry(veth.local.ns).or_default().push(veth);
        }
        let handles = &handles;
        let handle_of = move |ns: Ns| handles.get(&ns).cloned().expect("a handle per namespace");
        per_node(&self.finished, by_ns, |(ns, veths)| async move {
            let handle = handle_of(ns);
            let requests = veths
                .into_iter()
                .map(|v| {
                    let peer_fd = self.namespace(v.peer.ns)?.ns.as_raw_fd();
                    let mut peer = LinkUnspec::new_with_index(v.peer.ifindex)
                        .name(v.peer.name.clone())
                        .setns_by_fd(peer_fd);
                    let mut veth = LinkVeth::new(&v.local.name, &v.peer.name)
                        .index(v.local.ifindex)
                        .up();
                    if let Some(mac) = v.local.mac {
                        veth = veth.address(mac.to_vec());
                    }
                    if let Some(mac) = v.peer.mac {
                        peer = peer.address(mac.to_vec());
                    }
                    if let Some(mtu) = v.mtu {
                        peer = peer.mtu(mtu);
                        veth = veth.mtu(mtu);
                    }
                    let message = veth
                        .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
                        .build();
                    let peer_up = v.peer_up.then(|| {
                        handle_of(v.peer.ns)
                            .link()
                            .set(LinkUnspec::new_with_index(v.peer.ifindex).up().build())
                    });
                    Ok((v.what, handle.link().add(message), peer_up))
                })
                .collect::<Result<Vec<_>>>()?;
            pipelined(
                requests
                    .into_iter()
                    .map(|(what, request, peer_up)| async move {
                        request
                            .execute()
                            .await
                            .with_context(|| format!("creating {what}"))?;
                        if let Some(up) = peer_up {
                            up.execute()
                                .await
                                .with_context(|| format!("bringing {what} up"))?;
                        }
                        Ok(())
                    }),
            )
            .await
        })
        .await?;
        Ok(())
    }

    async fn add_vxlans(&self, vxlans: Vec<Vxlan>) -> Result<()> {
        if vxlans.is_empty() {
            return Ok(());
        }
        // The machine's own namespace: each device's UDP socket lives where
        // the device is created, and the underlay is here.
        let handle = connect(namespaces::route_socket()?)?;
        let requests = vxlans
            .into_iter()
            .map(|v| {
                let into = self.namespace(v.end.ns)?.ns.as_raw_fd();
                let mut link = LinkVxlan::new(&v.end.name, v.vni)
                    .index(v.end.ifindex)
                    .local(v.local)
                    .remote(v.remote)
                    .port(v.port)
                    .learning(false)
                    .df(VxlanDf::Set)
                    .setns_by_fd(into)
                    .up();
                if let Some(mac) = v.end.mac {
                    link = link.address(mac.to_vec());
                }
                if let Some(mtu) = v.mtu {
                    link = link.mtu(mtu);
                }
                Ok((v.what, handle.link().add(link.build())))
            })
            .collect::<Result<Vec<_>>>()?;
        let done = requests.len();
        pipelined(requests.into_iter().map(|(what, request)| async move {
            request
                .execute()
                .await
                .with_context(|| format!("creating {what}"))
        }))
        .await?;
        self.finished
            .fetch_add(done, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    async fn add_bridge(&self, ns: Ns, name: &str, ifindex: u32) -> Result<()> {
        let handle = self.namespace(ns)?.handle()?;
        handle
            .link()
            .add(LinkBridge::new(name).index(ifindex).build())
            .execute()
            .await
            .with_context(|| format!("creating bridge {name}"))
    }

    async fn set_bridge_ports(&self, ports: PerNs<(u32, u32)>) -> Result<()> {
        per_node(&self.finished, ports, |(ns, ports)| async move {
            let handle = self.namespace(ns)?.handle()?;
            pipelined(ports.into_iter().map(|(port, bridge)| {
                let request = handle.link().set(
                    LinkUnspec::new_with_index(port)
                        .controller(bridge)
                        .up()
                        .build(),
                );
                async move {
                    request
                        .execute()
                        .await
                        .with_context(|| format!("adding interface {port} to bridge {bridge}"))
                }
            }))
            .await
        })
        .await?;
        Ok(())
    }

    async fn set_up(&self, links: PerNs<u32>) -> Result<()> {
        per_node(&self.finished, links, |(ns, indices)| async move {
            let handle = self.namespace(ns)?.handle()?;
            pipelined(indices.into_iter().map(|index| {
                let request = handle
                    .link()
                    .set(LinkUnspec::new_with_index(index).up().build());
                async move {
                    request
                        .execute()
                        .await
                        .with_context(|| format!("bringing interface {index} up"))
                }
            }))
            .await
        })
        .await?;
        Ok(())
    }

    async fn set_down(&self, links: PerNs<u32>) -> Result<()> {
        per_node(&self.finished, links, |(ns, indices)| async move {
            let handle = self.namespace(ns)?.handle()?;
            pipelined(indices.into_iter().map(|index| {
                let request = handle
                    .link()
                    .set(LinkUnspec::new_with_index(index).down().build());
                async move {
                    request
                        .execute()
                        .await
                        .with_context(|| format!("taking interface {index} down"))
                }
            }))
            .await
        })
        .await?;
        Ok(())
    }

    fn disable_offloads(&self, links: PerNs<String>) -> Result<()> {
        for (ns, names) in links {
            namespaces::in_namespace(&self.namespace(ns)?.ns, || {
                names
                    .iter()
                    .try_for_each(|n| turbonet_packetio::offloads::disable(n))
            })
            .context("turning offloads off")?;
        }
        Ok(())
    }

    async fn add_addresses(&self, addrs: PerNs<Address>) -> Result<()> {
        per_node(&self.finished, addrs, |(ns, addrs)| async move {
            let handle = self.namespace(ns)?.handle()?;
            pipelined(addrs.into_iter().map(|a| {
                let request =
                    handle
                        .address()
                        .add(a.ifindex, IpAddr::V4(a.addr.addr()), a.addr.prefix_len());
                async move {
                    request
                        .execute()
                        .await
                        .with_context(|| format!("address {} on interface {}", a.addr, a.ifindex))
                }
            }))
            .await
        })
        .await?;
        Ok(())
    }

    fn set_netem(&self, ns: Ns, ifindex: u32, impairment: &Impairment, seed: u64) -> Result<()> {
        super::netem::apply(&self.namespace(ns)?.ns, ifindex, impairment, seed)
            .with_context(|| format!("netem on interface {ifindex}"))
    }

    fn set_shapers(&self, shapers: PerNs<(u32, super::tbf::Tbf)>) -> Result<()> {
        for (ns, shapers) in shapers {
            let requests: Vec<Vec<u8>> = shapers
                .iter()
                .map(|(ifindex, tbf)| tbf.new_qdisc(*ifindex))
                .collect();
            super::netem::send_all(&self.namespace(ns)?.ns, &requests)
                .with_context(|| format!("tbf shapers in namespace {}", ns.0))?;
        }
        Ok(())
    }

    async fn add_routes(&self, routes: PerNs<KernelRoute>, replace: bool) -> Result<()> {
        per_node(&self.finished, routes, |(ns, routes)| async move {
            let node = self.namespace(ns)?;
            let (grouped, inline) = split_grouped(routes);
            if !grouped.is_empty() {
                write_groups(node, &grouped)?;
            }
            install(&node.handle()?, inline, replace).await
        })
        .await?;
        Ok(())
    }

    async fn delete_routes(&self, routes: PerNs<(ipnet::Ipv4Net, Option<u32>)>) -> Result<()> {
        per_node(&self.finished, routes, |(ns, routes)| async move {
            let handle = self.namespace(ns)?.handle()?;
            for (prefix, table) in routes {
                match table {
                    None => delete_route(&handle, prefix).await?,
                    Some(table) => delete_route_in(&handle, prefix, table).await?,
                }
            }
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn add_rules(&self, rules: PerNs<SourceRule>) -> Result<()> {
        per_node(&self.finished, rules, |(ns, rules)| async move {
            let handle = self.namespace(ns)?.handle()?;
            pipelined(rules.into_iter().map(|rule| {
                let request = handle
                    .rule()
                    .add()
                    .v4()
                    .source_prefix(rule.from, 32)
                    .table_id(rule.table)
                    .priority(RULE_PRIORITY)
                    .action(rtnetlink::packet_route::rule::RuleAction::ToTable);
                async move {
                    match request.execute().await {
                        Ok(()) => Ok(()),
                        // Already there (a restarted `up` of the same lab).
                        Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::EEXIST => {
                            Ok(())
                        }
                        Err(e) => Err(e).with_context(|| {
                            format!("rule from {} lookup {}", rule.from, rule.table)
                        }),
                    }
                }
            }))
            .await
        })
        .await?;
        Ok(())
    }

    async fn attach_external(&self, external: &External) -> Result<()> {
        super::interfaces::attach(external, self.namespace(external.into)?).await
    }

    async fn wait_carrier(&self, ports: Vec<(Ns, String, usize)>, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut pending = ports;
        loop {
            let checks = per_node(&self.finished, &pending, |(ns, _, ports)| async move {
                let handle = self.namespace(*ns)?.handle()?;
                let links: Vec<_> = handle.link().get().execute().try_collect().await?;
                let up = links
                    .iter()
                    .filter(|l| l.header.index >= 2 && (l.header.index as usize) < ports + 2)
                    .filter(|l| l.header.flags.contains(LinkFlags::LowerUp))
                    .count();
                Ok::<_, crate::Error>(up == *ports)
            })
            .await?;
            pending = pending
                .into_iter()
                .zip(checks)
                .filter(|(_, ready)| !ready)
                .map(|(p, _)| p)
                .collect();
            let Some((_, first, _)) = pending.first() else {
                return Ok(());
            };
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "{} node(s) still have ports without carrier after {timeout:?} (first: {first})",
                    pending.len(),
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Installs `routes` through `handle`, pipelined.
pub async fn install(handle: &Handle, routes: Vec<KernelRoute>, replace: bool) -> Result<()> {
    pipelined(routes.into_iter().map(|route| {
        let prefix = route.prefix;
        let message = route_message(&route);
        async move {
            let mut request = handle.route().add(message?);
            if replace {
                request = request.replace();
            }
            request
                .execute()
                .await
                .with_context(|| format!("route {prefix}"))
        }
    }))
    .await
}

/// Writes `routes` to groups in `node`'s namespace, with its static
/// objects: those it has are used again (a route replaced at run time),
/// new ones numbered past every id in use. Objects no route uses any more
/// stay until the namespace goes.
fn write_groups(node: &NodeNs, routes: &[GroupRoute]) -> Result<()> {
    let mut socket =
        namespaces::here_in_namespace(&node.ns, || NexthopSocket::new(Protocol::Static))
            .context("a nexthop socket")?;
    let existing = socket.dump().context("reading nexthop objects")?;
    let requests = point_at_groups(&existing, routes);
    let outcomes = socket
        .execute(&requests)
        .context("writing routes to nexthop groups")?;
    match requests.iter().zip(outcomes).find(|(_, o)| o.is_err()) {
        Some((request, Err(errno))) => {
            // What `point_at_groups` asks: next hops, groups, routes.
            let what = match request {
                Request::Route { prefix, .. } => format!("route {prefix}"),
                Request::Hop { id, hop } => format!("next hop {} (object {id})", hop.via),
                Request::Group { id, .. } => format!("nexthop group {id}"),
                other => format!("{other:?}"),
            };
            bail!("{what}: {}", std::io::Error::from_raw_os_error(errno))
        }
        _ => Ok(()),
    }
}

/// The netlink message that installs `route`.
pub fn route_message(route: &KernelRoute) -> Result<rtnetlink::packet_route::route::RouteMessage> {
    let mut builder = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(route.prefix.network(), route.prefix.prefix_len())
        .protocol(route.protocol);
    if let Some(metric) = route.metric {
        builder = builder.priority(metric);
    }
    if let Some(table) = route.table {
        builder = builder.table_id(table);
    }
    match route.hops.as_slice() {
        [] => bail!("route {} has no next hop", route.prefix),
        [hop] => {
            builder = builder.output_interface(hop.ifindex);
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
                    let mut nh = RouteNextHopBuilder::new_ipv4().interface(hop.ifindex);
                    if let Some(via) = hop.via {
                        nh = nh.via(IpAddr::V4(via)).map_err(|e| err!("{e:?}"))?;
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
