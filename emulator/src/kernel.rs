//! What turbonet asks of the kernel, as one trait: create namespaces with
//! their sysctls, veth pairs with each end in its namespace, addresses,
//! links up, offloads off, netem, routes, and wait for carrier.
//!
//! Builders compute every request of a phase (pure, from the lab) and hand
//! the whole batch to a [`Kernel`]; [`Netlink`] carries batches out through
//! rtnetlink, concurrently across namespaces and pipelined within one, and
//! [`Recorder`] writes them down, one line a request, so that what `up`
//! asks for each bundled scenario is a golden file checked without root.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures::TryStreamExt;
use ipnet::Ipv4Net;
use rtnetlink::packet_route::link::{InfoData, InfoVeth, LinkFlags};
use rtnetlink::packet_route::route::{RouteProtocol, RouteScope};
use rtnetlink::{Handle, LinkUnspec, LinkVeth, RouteMessageBuilder, RouteNextHopBuilder};
use turbonet_injectors::Impairment;

use crate::fabric::{NodeNs, per_node, pipelined};
use crate::netns;

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
    /// Creates the named namespaces (with `threads` dedicated threads) and
    /// sets each one's sysctls inside it; returns them in order.
    fn create_namespaces(&mut self, specs: &[NamespaceSpec], threads: usize) -> Result<Vec<Ns>>;

    /// Creates veth pairs.
    fn add_veths(&self, veths: Vec<Veth>) -> impl Future<Output = Result<()>>;

    /// Brings interfaces up, per namespace.
    fn set_up(&self, links: PerNs<u32>) -> impl Future<Output = Result<()>>;

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

/// The kernel through rtnetlink: a namespace's requests go over a netlink
/// socket created inside it.
#[derive(Debug, Default)]
pub struct Netlink {
    namespaces: Vec<NodeNs>,
}

impl Netlink {
    /// No namespaces yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A namespace created here.
    pub fn namespace(&self, ns: Ns) -> Result<&NodeNs> {
        self.namespaces
            .get(ns.0)
            .ok_or_else(|| anyhow!("namespace #{} was not created here", ns.0))
    }
}

impl Kernel for Netlink {
    fn create_namespaces(&mut self, specs: &[NamespaceSpec], threads: usize) -> Result<Vec<Ns>> {
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let by_name: std::collections::HashMap<&str, &NamespaceSpec> =
            specs.iter().map(|s| (s.name.as_str(), s)).collect();
        let results = netns::create_batch(&names, threads, &|name: &str| {
            for (key, value) in &by_name[name].sysctls {
                netns::write_sysctl(key, value)?;
            }
            Ok((netns::open_current()?, netns::route_socket()?))
        });
        let first = self.namespaces.len();
        for (name, result) in names.iter().zip(results) {
            let (ns, socket) = result.with_context(|| format!("creating namespace {name}"))?;
            self.namespaces.push(NodeNs::new(ns, socket));
        }
        Ok((first..self.namespaces.len()).map(Ns).collect())
    }

    async fn add_veths(&self, veths: Vec<Veth>) -> Result<()> {
        let mut by_ns: BTreeMap<Ns, Vec<Veth>> = BTreeMap::new();
        for veth in veths {
            by_ns.entry(veth.local.ns).or_default().push(veth);
        }
        per_node(by_ns, |(ns, veths)| async move {
            let handle = self.namespace(ns)?.handle()?;
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
                    Ok((v.what, handle.link().add(message)))
                })
                .collect::<Result<Vec<_>>>()?;
            pipelined(requests.into_iter().map(|(what, request)| async move {
                request
                    .execute()
                    .await
                    .with_context(|| format!("creating {what}"))
            }))
            .await
        })
        .await?;
        Ok(())
    }

    async fn set_up(&self, links: PerNs<u32>) -> Result<()> {
        per_node(links, |(ns, indices)| async move {
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

    fn disable_offloads(&self, links: PerNs<String>) -> Result<()> {
        for (ns, names) in links {
            netns::in_namespace(&self.namespace(ns)?.ns, || {
                names
                    .iter()
                    .try_for_each(|n| turbonet_packetio::offloads::disable(n))
            })
            .context("turning offloads off")?;
        }
        Ok(())
    }

    async fn add_addresses(&self, addrs: PerNs<Address>) -> Result<()> {
        per_node(addrs, |(ns, addrs)| async move {
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
        crate::engine::kernel::apply(&self.namespace(ns)?.ns, ifindex, impairment, seed)
            .with_context(|| format!("netem on interface {ifindex}"))
    }

    async fn add_routes(&self, routes: PerNs<KernelRoute>, replace: bool) -> Result<()> {
        per_node(routes, |(ns, routes)| async move {
            let handle = self.namespace(ns)?.handle()?;
            install(&handle, routes, replace).await
        })
        .await?;
        Ok(())
    }

    async fn attach_external(&self, external: &External) -> Result<()> {
        crate::externals::attach_one(external, self.namespace(external.into)?).await
    }

    async fn wait_carrier(&self, ports: Vec<(Ns, String, usize)>, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut pending = ports;
        loop {
            let checks = per_node(&pending, |(ns, _, ports)| async move {
                let handle = self.namespace(*ns)?.handle()?;
                let links: Vec<_> = handle.link().get().execute().try_collect().await?;
                let up = links
                    .iter()
                    .filter(|l| l.header.index >= 2 && (l.header.index as usize) < ports + 2)
                    .filter(|l| l.header.flags.contains(LinkFlags::LowerUp))
                    .count();
                Ok::<_, anyhow::Error>(up == *ports)
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

/// The netlink message that installs `route`.
pub fn route_message(route: &KernelRoute) -> Result<rtnetlink::packet_route::route::RouteMessage> {
    let mut builder = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(route.prefix.network(), route.prefix.prefix_len())
        .protocol(route.protocol);
    if let Some(metric) = route.metric {
        builder = builder.priority(metric);
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

/// Requests of one kind, grouped by namespace.
pub type PerNs<T> = Vec<(Ns, Vec<T>)>;

/// Writes down every request instead of making it: one line each, in the
/// order asked, namespaces by name. Nothing is created.
#[cfg_attr(not(test), allow(dead_code))] // the characterisation test records `up`
#[derive(Debug, Default)]
pub struct Recorder {
    names: Vec<String>,
    lines: Mutex<Vec<String>>,
}

#[cfg_attr(not(test), allow(dead_code))]
impl Recorder {
    /// Nothing recorded yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything recorded, one request a line.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn push(&self, line: String) {
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(line);
        }
    }

    fn name(&self, ns: Ns) -> &str {
        self.names.get(ns.0).map_or("?", String::as_str)
    }
}

#[cfg_attr(not(test), allow(dead_code))]
fn mac_text(mac: Option<[u8; 6]>) -> String {
    mac.map(|m| {
        let hex: Vec<String> = m.iter().map(|b| format!("{b:02x}")).collect();
        format!(" mac {}", hex.join(":"))
    })
    .unwrap_or_default()
}

impl Kernel for Recorder {
    fn create_namespaces(&mut self, specs: &[NamespaceSpec], _threads: usize) -> Result<Vec<Ns>> {
        let first = self.names.len();
        for spec in specs {
            let mut line = format!("netns {}", spec.name);
            for (key, value) in &spec.sysctls {
                let _ = write!(line, " {key}={value}");
            }
            self.push(line);
            self.names.push(spec.name.clone());
        }
        Ok((first..self.names.len()).map(Ns).collect())
    }

    async fn add_veths(&self, veths: Vec<Veth>) -> Result<()> {
        for v in veths {
            let mtu = v.mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
            self.push(format!(
                "veth {} {}#{}{} <-> {} {}#{}{}{mtu}",
                self.name(v.local.ns),
                v.local.name,
                v.local.ifindex,
                mac_text(v.local.mac),
                self.name(v.peer.ns),
                v.peer.name,
                v.peer.ifindex,
                mac_text(v.peer.mac),
            ));
        }
        Ok(())
    }

    async fn set_up(&self, links: PerNs<u32>) -> Result<()> {
        for (ns, indices) in links {
            let list: Vec<String> = indices.iter().map(|i| format!("#{i}")).collect();
            self.push(format!("up {} {}", self.name(ns), list.join(" ")));
        }
        Ok(())
    }

    fn disable_offloads(&self, links: PerNs<String>) -> Result<()> {
        for (ns, names) in links {
            self.push(format!(
                "offloads-off {} {}",
                self.name(ns),
                names.join(" ")
            ));
        }
        Ok(())
    }

    async fn add_addresses(&self, addrs: PerNs<Address>) -> Result<()> {
        for (ns, addrs) in addrs {
            for a in addrs {
                self.push(format!("addr {} #{} {}", self.name(ns), a.ifindex, a.addr));
            }
        }
        Ok(())
    }

    fn set_netem(&self, ns: Ns, ifindex: u32, impairment: &Impairment, seed: u64) -> Result<()> {
        self.push(format!(
            "netem {} #{ifindex} seed {seed:#x} {impairment:?}",
            self.name(ns)
        ));
        Ok(())
    }

    async fn add_routes(&self, routes: PerNs<KernelRoute>, replace: bool) -> Result<()> {
        for (ns, routes) in routes {
            for r in routes {
                let mut line = format!(
                    "{} {} {}",
                    if replace { "route-replace" } else { "route" },
                    self.name(ns),
                    r.prefix
                );
                for hop in &r.hops {
                    match hop.via {
                        Some(via) => {
                            let _ = write!(line, " via {via} #{}", hop.ifindex);
                        }
                        None => {
                            let _ = write!(line, " dev #{}", hop.ifindex);
                        }
                    }
                    if hop.onlink {
                        line.push_str(" onlink");
                    }
                }
                let _ = write!(line, " proto {:?}", r.protocol);
                if let Some(metric) = r.metric {
                    let _ = write!(line, " metric {metric}");
                }
                self.push(line.to_lowercase());
            }
        }
        Ok(())
    }

    async fn attach_external(&self, e: &External) -> Result<()> {
        self.push(format!(
            "external {}{} -> {} {} {} alias {}",
            e.interface,
            e.from
                .as_deref()
                .map(|n| format!(" in {n}"))
                .unwrap_or_default(),
            self.name(e.into),
            e.ifname,
            e.addr,
            e.alias
        ));
        Ok(())
    }

    async fn wait_carrier(
        &self,
        ports: Vec<(Ns, String, usize)>,
        _timeout: Duration,
    ) -> Result<()> {
        for (ns, _, count) in ports {
            self.push(format!("carrier {} {count}", self.name(ns)));
        }
        Ok(())
    }
}
