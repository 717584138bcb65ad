//! The `netns` data plane at run time: ports taken down and up through
//! netlink in the nodes' namespaces, impairments changed in the link
//! engine (or netem), and the routes turbonet owns kept in the kernel
//! tables by difference.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use futures::future::LocalBoxFuture;
use ipnet::Ipv4Net;

use turbonet_injectors::{Impairment, direction_seed};
use turbonet_packetio::{Clock, PacketSocket};
use turbonet_routing::Route;
use turbonet_topo::machines::{Reach, Share};
use turbonet_topo::units::Delay;
use turbonet_topo::{Lab, Link, LinkId, LinkParams, NodeId};

use super::engine::{self, EngineLink, TapAt};
use super::kernel_engine::{KernelEngine, PortStats};
use crate::carrier::Carrier;
use crate::dataplane::kernel_routes::node_kernel_routes;
use crate::dataplane::plane::LinkCounters;
use crate::dataplane::plane::{Applied, DataPlane, Desired, Tapping};
use crate::dataplane::taps::{Sink, Tap};
use crate::error::{Context, Error, Result};
use crate::events::Events;
use crate::names;
use turbonet_host::kernel::{Kernel, Netlink, Ns};
use turbonet_host::namespaces;

/// The link engine running impaired links on its own thread.
#[derive(Debug)]
struct Engine {
    control: engine::Control,
    /// Engine position of every impaired link, by link id.
    position: HashMap<LinkId, usize>,
    counters: engine::Snapshot,
    running: engine::Running,
}

/// What the plane last applied.
#[derive(Debug, Default)]
struct Current {
    /// Links whose ports are down.
    down: BTreeSet<LinkId>,
    /// Every link's parameters.
    params: Vec<LinkParams>,
    /// The routes turbonet installed, by node (`None`: not known, e.g.
    /// after a restart: everything is written once).
    routes: Option<Vec<Vec<Route>>>,
}

/// A lab's `netns` data plane, which writes to the kernel through `K`
/// (rtnetlink; recorded in the tests of what `fail`, `restore` and `link
/// set` ask).
#[derive(Debug)]
pub struct NetnsPlane<K: Kernel = Netlink> {
    lab: Arc<Lab>,
    carriers: Vec<Carrier>,
    engine: Engine,
    /// The kernel engine, when it carries links.
    kernel_engine: Option<KernelEngine>,
    /// A handle in the engine namespace, to read its ports' counters.
    engine_handle: Option<rtnetlink::Handle>,
    /// What writes to the kernel.
    kernel: K,
    /// The nodes' namespaces it has opened, as `kernel` knows them.
    opened: HashMap<NodeId, Ns>,
    /// Handles in nodes' namespaces, to read their ports' counters.
    handles: HashMap<NodeId, rtnetlink::Handle>,
    /// Where the counters of the links outside the engine are read: per
    /// node, its ports (link, ifindex, which end of the link it is).
    veth_reads: BTreeMap<NodeId, Vec<(LinkId, u32, usize)>>,
    /// The nodes that run on this machine.
    share: Share,
    /// How much sooner than its model the link engine releases each link's
    /// frames, by link id ([`crate::span::Span::engine_allowance`]; none:
    /// no sooner).
    allowance: Vec<Delay>,
    applied: Current,
}

/// The link engine's impairment of link `link` with `params`: the model,
/// its delay less the link's `allowance` (the underlay a cut link's frames
/// cross besides), down to none.
fn engine_impairment(allowance: &[Delay], link: LinkId, params: &LinkParams) -> Impairment {
    let mut impairment = Impairment::from_params(params);
    let sooner = allowance
        .get(link.0 as usize)
        .copied()
        .unwrap_or(Delay::ZERO);
    impairment.delay = Delay::from_nanos(
        impairment
            .delay
            .as_nanos()
            .saturating_sub(sooner.as_nanos()),
    );
    impairment
}

/// For every link no engine carries, the end whose veth counts it: a
/// switch's, the upper one where both are, so that few namespaces are
/// asked; of a link to another machine, the end here.
fn veth_reads(
    lab: &Lab,
    share: &Share,
    carriers: &[Carrier],
) -> BTreeMap<NodeId, Vec<(LinkId, u32, usize)>> {
    let fabric = &lab.fabric;
    let mut read: BTreeMap<NodeId, Vec<(LinkId, u32, usize)>> = BTreeMap::new();
    for (link, carrier) in fabric.links.iter().zip(carriers) {
        if carrier.is_spliced() || share.reach(link) == Reach::Away {
            continue;
        }
        let side = tapped_end(lab, share, link);
        let node = link.ends[side].node;
        let index = names::port_index(lab, node, link.id).expect("link's end is a port");
        read.entry(node).or_default().push((link.id, index, side));
    }
    read
}

/// Starts and stops taps (captures, mirrors) on the running engine, from
/// any thread.
#[derive(Debug)]
pub struct Tapper {
    lab: Arc<Lab>,
    /// What runs here: a cut link is tapped at its end here.
    share: Share,
    /// Engine position of every impaired link.
    position: HashMap<LinkId, usize>,
    control: engine::Control,
}

/// Tap ids, unique in the daemon.
static NEXT_TAP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Tapping for Tapper {
    fn start(&self, link: &Link, directions: [bool; 2], sink: Sink) -> Result<u64> {
        let at = match self.position.get(&link.id) {
            Some(&k) => TapAt::Engine(k),
            None => {
                let side = tapped_end(&self.lab, &self.share, link);
                let node = self.lab.fabric.node(link.ends[side].node);
                let ns_name = names::node_namespace(&self.lab.name, &node.name);
                let ns =
                    namespaces::open(&ns_name).with_context(|| format!("opening {ns_name}"))?;
                let index =
                    names::port_index(&self.lab, node.id, link.id).expect("link's end is a port");
                let socket = namespaces::in_namespace(&ns, || PacketSocket::tap(index))
                    .with_context(|| format!("tapping {} in {ns_name}", link.ends[side].ifname))?;
                TapAt::Port {
                    link: link.name.clone(),
                    socket,
                    side,
                }
            }
        };
        let id = NEXT_TAP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.send(engine::Command::Tap {
            at,
            tap: Tap {
                id,
                directions,
                sink,
            },
        })?;
        Ok(id)
    }

    fn stop(&self, id: u64) {
        let _ = self.send(engine::Command::Untap { id });
    }
}

impl Tapper {
    fn send(&self, command: engine::Command) -> Result<()> {
        Ok(self.control.send(command)?)
    }
}

/// The end of a plain link whose port counts and taps it here: of a link
/// to another machine, the end here; else [`watched_end`].
fn tapped_end(lab: &Lab, share: &Share, link: &Link) -> usize {
    match share.reach(link) {
        Reach::Cut(cut) => cut.end,
        Reach::Local | Reach::Away => watched_end(lab, link),
    }
}

/// The end of a plain link whose port counts and taps it: a switch's, the
/// upper one where both are.
fn watched_end(lab: &Lab, link: &Link) -> usize {
    let fabric = &lab.fabric;
    usize::from(
        fabric.node(link.ends[1].node).role.is_switch()
            || !fabric.node(link.ends[0].node).role.is_switch(),
    )
}

impl NetnsPlane<Netlink> {
    /// Takes over a lab `up` built, writing to the kernel through
    /// rtnetlink (see [`NetnsPlane::with_kernel`]).
    pub fn open(
        lab: Arc<Lab>,
        share: Share,
        carriers: &[Carrier],
        allowance: Vec<Delay>,
        routes: Option<Vec<Vec<Route>>>,
        events: &Events,
    ) -> Result<NetnsPlane> {
        NetnsPlane::with_kernel(
            Netlink::new(),
            lab,
            share,
            carriers,
            allowance,
            routes,
            events,
        )
    }
}

impl<K: Kernel> NetnsPlane<K> {
    /// Takes over a lab `up` built: starts the link engine on the impaired
    /// links (their sockets opened in the engine's namespace) with the
    /// scenario's parameters, and the kernel engine on the links it
    /// carries, and knows the fabric as `up` left it: every
    /// link up, `routes` installed (`None`: not known; the first
    /// [`DataPlane::apply`] writes them all). Of a lab over several
    /// machines it runs `share`'s nodes and their ends of links, `carriers`
    /// as they are here ([`crate::span::Span::carriers`]), its engine
    /// releasing each link's frames sooner by its `allowance`.
    pub(crate) fn with_kernel(
        kernel: K,
        lab: Arc<Lab>,
        share: Share,
        carriers: &[Carrier],
        allowance: Vec<Delay>,
        routes: Option<Vec<Vec<Route>>>,
        events: &Events,
    ) -> Result<NetnsPlane<K>> {
        let impaired: Vec<&Link> = lab
            .fabric
            .links
            .iter()
            .zip(carriers)
            .filter(|(_, c)| c.is_userspace())
            .map(|(l, _)| l)
            .collect();
        // Where each spliced link's ports are in the engine namespace.
        let spliced = engine::spliced(carriers);
        // The engine always runs: it carries the impaired links, and taps
        // (captures, mirrors) any link.
        let engine = {
            let sockets = if impaired.is_empty() {
                Vec::new()
            } else {
                let ns = namespaces::open(&names::engine_namespace(&lab.name))
                    .context("opening the engine namespace")?;
                namespaces::in_namespace(&ns, || {
                    impaired
                        .iter()
                        .map(|link| {
                            let k =
                                spliced[link.id.0 as usize].expect("an impaired link is spliced");
                            let (_, a) = engine::port(link.id.0, k, 0);
                            let (_, b) = engine::port(link.id.0, k, 1);
                            Ok([PacketSocket::bind(a)?, PacketSocket::bind(b)?])
                        })
                        .collect::<std::io::Result<Vec<_>>>()
                })
                .context("opening packet sockets in the engine namespace")?
            };
            let links: Vec<EngineLink> = impaired
                .iter()
                .zip(sockets)
                .map(|(link, sockets)| {
                    EngineLink::new(
                        link.name.clone(),
                        sockets,
                        &engine_impairment(&allowance, link.id, &link.params),
                        [0u8, 1].map(|d| direction_seed(lab.seed, &link.name, d)),
                    )
                })
                .collect();
            let counters: engine::Snapshot = Arc::default();
            let (notes, noted) = std::sync::mpsc::channel();
            let ends: Vec<(String, [String; 2])> = impaired
                .iter()
                .map(|l| {
                    (
                        l.name.clone(),
                        l.ends
                            .each_ref()
                            .map(|e| lab.fabric.node(e.node).name.clone()),
                    )
                })
                .collect();
            let events = events.clone();
            // The engine's clock, which its notes are stamped on.
            let clock = Clock::new();
            std::thread::Builder::new()
                .name("engine-events".into())
                .spawn(move || {
                    // Until the engine stops (its shards hold the senders).
                    for note in noted {
                        super::notes::write(&events, &ends, clock, &note);
                    }
                })?;
            let shards = engine::shard_count(lab.engine_shards, links.len());
            let (control, running) = engine::start(links, shards, clock, &counters, &notes)?;
            Engine {
                control,
                position: impaired
                    .iter()
                    .enumerate()
                    .map(|(k, l)| (l.id, k))
                    .collect(),
                counters,
                running,
            }
        };
        let kernel_engine = KernelEngine::start(&lab, carriers)?;
        Ok(NetnsPlane {
            kernel_engine,
            engine_handle: None,
            applied: Current {
                down: BTreeSet::new(),
                params: lab.fabric.links.iter().map(|l| l.params.clone()).collect(),
                routes,
            },
            veth_reads: veth_reads(&lab, &share, carriers),
            share,
            allowance,
            carriers: carriers.to_vec(),
            engine,
            kernel,
            opened: HashMap::new(),
            handles: HashMap::new(),
            lab,
        })
    }

    /// What writes to the kernel (the tests read a recorder's requests).
    #[cfg(test)]
    pub(crate) fn kernel(&self) -> &K {
        &self.kernel
    }

    /// `node`'s namespace as the kernel side knows it (opened once).
    fn namespace(&mut self, node: NodeId) -> Result<Ns> {
        if let Some(&ns) = self.opened.get(&node) {
            return Ok(ns);
        }
        let name = names::node_namespace(&self.lab.name, &self.lab.fabric.node(node).name);
        let ns = self.kernel.open_namespaces(&[name])?[0];
        self.opened.insert(node, ns);
        Ok(ns)
    }

    /// An rtnetlink handle inside `node`'s namespace (opened once), to read
    /// its ports' counters.
    fn handle(&mut self, node: NodeId) -> Result<rtnetlink::Handle> {
        if let Some(h) = self.handles.get(&node) {
            return Ok(h.clone());
        }
        let name = names::node_namespace(&self.lab.name, &self.lab.fabric.node(node).name);
        let handle = route_handle(&name)?;
        self.handles.insert(node, handle.clone());
        Ok(handle)
    }

    /// Counters of the engine namespace's ports (opened once).
    async fn engine_port_stats(&mut self) -> Result<PortStats> {
        let handle = match &self.engine_handle {
            Some(h) => h.clone(),
            None => {
                let handle = route_handle(&names::engine_namespace(&self.lab.name))?;
                self.engine_handle = Some(handle.clone());
                handle
            }
        };
        port_stats(&handle).await
    }

    /// Takes the ports of `link` down or brings them up.
    async fn set_link(&mut self, link: LinkId, up: bool) -> Result<()> {
        let lab = self.lab.clone();
        let link = lab.fabric.link(link);
        let here: Vec<_> = (link.ends.iter())
            .filter(|e| self.share.runs(e.node))
            .collect();
        for end in here {
            let index = names::port_index(&lab, end.node, link.id).expect("link's end is a port");
            let port = vec![(self.namespace(end.node)?, vec![index])];
            let done = if up {
                self.kernel.set_up(port).await
            } else {
                self.kernel.set_down(port).await
            };
            done.with_context(|| {
                format!(
                    "{} port {} {}",
                    lab.fabric.node(end.node).name,
                    end.ifname,
                    if up { "up" } else { "down" }
                )
            })?;
        }
        Ok(())
    }

    /// The namespace of `end` of `link`, its port's ifindex there, and the
    /// node's name.
    fn end_port(
        &mut self,
        link: &Link,
        end: &turbonet_topo::Endpoint,
    ) -> Result<(Ns, u32, String)> {
        let ns = self.namespace(end.node)?;
        let index = names::port_index(&self.lab, end.node, link.id).expect("link's end is a port");
        Ok((ns, index, self.lab.fabric.node(end.node).name.clone()))
    }

    /// Gives `link` `params` in the engine that carries it.
    fn set_params(&mut self, link: &Link, params: &LinkParams) -> Result<()> {
        let impairment = Impairment::from_params(params);
        match &self.carriers[link.id.0 as usize] {
            Carrier::Kernel => {
                let here: Vec<_> = (link.ends.iter().enumerate())
                    .filter(|(_, e)| self.share.runs(e.node))
                    .collect();
                for (direction, end) in here {
                    let (ns, index, node) = self.end_port(link, end)?;
                    let seed = direction_seed(self.lab.seed, &link.name, direction as u8);
                    self.kernel
                        .set_netem(ns, index, &impairment, seed)
                        .with_context(|| format!("netem on {} of {node}", end.ifname))?;
                }
                Ok(())
            }
            Carrier::Shaper => {
                let tbf = super::shaper_for(params).map_err(|e| Error::Invalid(e.to_string()))?;
                let here: Vec<_> = (link.ends.iter())
                    .filter(|e| self.share.runs(e.node))
                    .collect();
                for end in here {
                    let (ns, index, node) = self.end_port(link, end)?;
                    self.kernel
                        .set_shapers(vec![(ns, vec![(index, tbf)])])
                        .with_context(|| format!("tbf on {} of {node}", end.ifname))?;
                }
                Ok(())
            }
            Carrier::Bpf => self
                .kernel_engine
                .as_mut()
                .ok_or_else(|| {
                    Error::Failed(format!("link {} is not on the kernel engine", link.name))
                })?
                .set(link, &impairment),
            Carrier::Userspace(_) => {
                let engine = &self.engine;
                let position = engine.position.get(&link.id).copied().ok_or_else(|| {
                    Error::Failed(format!("link {} is not in the link engine", link.name))
                })?;
                engine.control.send(engine::Command::Set {
                    link: position,
                    impairment: engine_impairment(&self.allowance, link.id, params),
                })?;
                Ok(())
            }
            Carrier::Veth | Carrier::Pipeline => Ok(()),
        }
    }

    /// Writes node `node`'s routes so the kernel holds `want` where it held
    /// `have`: routes gone deleted, new or changed ones replaced.
    async fn sync_routes(&mut self, node: NodeId, have: &[Route], want: &[Route]) -> Result<usize> {
        let lab = self.lab.clone();
        let n = lab.fabric.node(node);
        let by_prefix: BTreeMap<Ipv4Net, &Route> = want.iter().map(|r| (r.prefix, r)).collect();
        let gone: Vec<Ipv4Net> = have
            .iter()
            .filter(|r| !by_prefix.contains_key(&r.prefix))
            .map(|r| r.prefix)
            .collect();
        let changed: Vec<Route> = want.iter().filter(|r| !have.contains(r)).cloned().collect();
        if gone.is_empty() && changed.is_empty() {
            return Ok(0);
        }
        let ns = self.namespace(node)?;
        let mut deleted: Vec<(Ipv4Net, Option<u32>)> = gone.iter().map(|&p| (p, None)).collect();
        let mut kernel = node_kernel_routes(
            &lab,
            n,
            &changed,
            rtnetlink::packet_route::route::RouteProtocol::Static,
            None,
        )?;
        // A multi-port host's NIC tables follow its default route; a NIC
        // left without a port up loses its route.
        let nic_routes = super::nic_routes(&lab, n, want)?;
        let had = super::nic_routes(&lab, n, have)?;
        deleted.extend(
            had.iter()
                .filter(|o| !nic_routes.iter().any(|r| r.table == o.table))
                .map(|old| (old.prefix, Some(old.table.unwrap_or(254)))),
        );
        kernel.extend(nic_routes.into_iter().filter(|r| !had.contains(r)));
        self.kernel
            .delete_routes(vec![(ns, deleted)])
            .await
            .with_context(|| n.name.clone())?;
        self.kernel
            .add_routes(vec![(ns, kernel)], true)
            .await
            .with_context(|| n.name.clone())?;
        Ok(gone.len() + changed.len())
    }
}

impl<K: Kernel + std::fmt::Debug + 'static> DataPlane for NetnsPlane<K> {
    fn installed(&mut self, routes: &[Vec<Route>]) {
        if self.applied.routes.is_none() {
            self.applied.routes = Some(routes.to_vec());
        }
    }

    fn describe(&self) -> String {
        let mut engines = Vec::new();
        match self.engine.position.len() {
            0 => {}
            n => engines.push(format!("link engine for {n} impaired links")),
        }
        if let Some(k) = &self.kernel_engine {
            engines.push(format!("kernel engine (bpf+fq) for {}", k.links()));
        }
        if engines.is_empty() {
            "no impaired link".to_owned()
        } else {
            engines.join(", ")
        }
    }

    fn tapper(&self) -> Option<Arc<dyn Tapping>> {
        let engine = &self.engine;
        Some(Arc::new(Tapper {
            lab: self.lab.clone(),
            share: self.share.clone(),
            position: engine.position.clone(),
            control: engine.control.try_clone().ok()?,
        }))
    }

    fn check_params(&self, link: &Link, params: &LinkParams) -> Result<()> {
        match &self.carriers[link.id.0 as usize] {
            Carrier::Veth => Err(Error::Invalid(format!(
                "link {} is a plain veth: only links that declare an impairment in the scenario \
                 run through an impairment engine and can change at run time",
                link.name
            ))),
            Carrier::Kernel => {
                turbonet_host::kernel::netem::netem_supports(&Impairment::from_params(params))
                    .map_err(|e| {
                        Error::Invalid(format!(
                            "{e}; link {} runs on the kernel engine (engine = \"userspace\" in the \
                         scenario would splice it through the userspace engine instead)",
                            link.name
                        ))
                    })
            }
            Carrier::Shaper => {
                turbonet_host::kernel::tbf::shaper_supports(&Impairment::from_params(params))
                    .map_err(|e| {
                        Error::Invalid(format!(
                            "{e}; link {} is shaped by the kernel (it declares only a rate in the \
                     scenario; engine = \"userspace\" would splice it through the userspace \
                     engine, which applies every parameter)",
                            link.name
                        ))
                    })
            }
            Carrier::Bpf => turbonet_kernel_engine::honours(&Impairment::from_params(params))
                .map_err(|e| {
                    Error::Invalid(format!(
                        "the kernel engine cannot take this: {e}; link {} runs on it \
                             (engine = \"userspace\" in the scenario would splice it through \
                             the userspace engine instead)",
                        link.name
                    ))
                }),
            Carrier::Userspace(_) | Carrier::Pipeline => Ok(()),
        }
    }

    fn apply<'a>(&'a mut self, desired: Desired<'a>) -> LocalBoxFuture<'a, Result<Applied>> {
        Box::pin(async move {
            let lab = self.lab.clone();
            let mut applied = Applied::default();
            // Ports first: a route through a port that comes back needs it up.
            let down: BTreeSet<LinkId> = lab
                .fabric
                .links
                .iter()
                .filter(|l| desired.failures.blocks(l))
                .map(|l| l.id)
                .collect();
            let changed: Vec<(LinkId, bool)> = lab
                .fabric
                .links
                .iter()
                .filter(|l| down.contains(&l.id) != self.applied.down.contains(&l.id))
                .map(|l| (l.id, !down.contains(&l.id)))
                .collect();
            for &(link, up) in &changed {
                self.set_link(link, up).await?;
                if up {
                    self.applied.down.remove(&link);
                } else {
                    self.applied.down.insert(link);
                }
            }
            applied.links = changed.len();
            for link in &lab.fabric.links {
                let want = &desired.params[link.id.0 as usize];
                if *want != self.applied.params[link.id.0 as usize] {
                    self.set_params(link, want)?;
                    self.applied.params[link.id.0 as usize] = want.clone();
                    applied.impairments += 1;
                }
            }
            // Not known what the kernel holds (after a restart): every
            // route is written once.
            let known = self.applied.routes.take();
            let here: Vec<_> = (lab.fabric.nodes.iter())
                .filter(|n| self.share.runs(n.id))
                .collect();
            for node in here {
                let i = node.id.0 as usize;
                let before: &[Route] = known.as_ref().map_or(&[][..], |h| &h[i]);
                // On a failure what was written is unknown: start over.
                applied.routes += self
                    .sync_routes(node.id, before, &desired.routes[i])
                    .await?;
            }
            self.applied.routes = Some(desired.routes.to_vec());
            Ok(applied)
        })
    }

    /// Every link's counters: the engine's for the links it carries, and
    /// for every other link the statistics of its veth at one end (a
    /// switch's, so that few namespaces are asked), where frames sent are
    /// one direction and frames received the other.
    fn counters(&mut self) -> LocalBoxFuture<'_, Result<Vec<LinkCounters>>> {
        Box::pin(async move {
            let engine = self
                .engine
                .counters
                .lock()
                .map(|c| c.clone())
                .unwrap_or_default();
            let lab = self.lab.clone();
            let fabric = &lab.fabric;
            let mut veth: BTreeMap<LinkId, LinkCounters> = BTreeMap::new();
            let nodes: Vec<NodeId> = self.veth_reads.keys().copied().collect();
            for node in nodes {
                // A node being failed or restored is counted next time.
                let Ok(handle) = self.handle(node) else {
                    continue;
                };
                let Ok(stats) = port_stats(&handle).await else {
                    continue;
                };
                for &(link, index, side) in &self.veth_reads[&node] {
                    let Some(&(sent, received)) = stats.get(&index) else {
                        continue;
                    };
                    let mut c = LinkCounters {
                        link: fabric.link(link).name.clone(),
                        ..LinkCounters::default()
                    };
                    c.directions[side] = passed(sent);
                    c.directions[1 - side] = passed(received);
                    veth.insert(link, c);
                }
            }
            let mut kernel = HashMap::new();
            if self.kernel_engine.is_some() {
                // Frames that left each direction: its far port's.
                // Counted next time when they cannot be read, as the veths.
                if let Ok(sent) = self.engine_port_stats().await
                    && let Some(k) = &self.kernel_engine
                {
                    kernel = k.counters(&lab, &sent);
                }
            }
            let mut engine = engine.into_iter();
            Ok(fabric
                .links
                .iter()
                .zip(&self.carriers)
                .filter_map(|(link, carrier)| match carrier {
                    Carrier::Userspace(_) => engine.next(),
                    Carrier::Bpf => kernel.remove(&link.id),
                    _ => veth.remove(&link.id),
                })
                .collect())
        })
    }

    fn stop(&mut self) -> Result<()> {
        self.engine.running.stop().map_err(Error::Failed)
    }
}

/// An rtnetlink handle inside namespace `name`.
fn route_handle(name: &str) -> Result<rtnetlink::Handle> {
    let ns = namespaces::open(name).with_context(|| format!("opening {name}"))?;
    let socket = namespaces::in_namespace(&ns, namespaces::route_socket)?;
    Ok(turbonet_host::kernel::connect(socket)?)
}

/// Frames and bytes, sent and received, of every interface in the
/// namespace behind `handle`, by ifindex.
async fn port_stats(handle: &rtnetlink::Handle) -> Result<PortStats> {
    use futures::TryStreamExt;
    use rtnetlink::packet_route::link::LinkAttribute;
    let mut stats = HashMap::new();
    let mut links = handle.link().get().execute();
    while let Some(link) = links.try_next().await? {
        for attr in &link.attributes {
            if let LinkAttribute::Stats64(s) = attr {
                stats.insert(
                    link.header.index,
                    ((s.tx_packets, s.tx_bytes), (s.rx_packets, s.rx_bytes)),
                );
            }
        }
    }
    Ok(stats)
}

/// Counters of a direction that passes everything it is offered (a veth).
fn passed((packets, bytes): (u64, u64)) -> turbonet_injectors::Counters {
    turbonet_injectors::Counters {
        rx_packets: packets,
        rx_bytes: bytes,
        tx_packets: packets,
        tx_bytes: bytes,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_releases_a_link_sooner_by_its_allowance_down_to_no_delay() {
        let params = |delay: &str| LinkParams {
            delay: Some(delay.parse().unwrap()),
            loss: Some(turbonet_topo::Loss::Bernoulli("1%".parse().unwrap())),
            ..LinkParams::default()
        };
        let allowance = [Delay::from_micros(5), Delay::ZERO];
        let delay = |link: u32, p: &LinkParams| engine_impairment(&allowance, LinkId(link), p);
        assert_eq!(delay(0, &params("1ms")).delay, Delay::from_micros(995));
        assert_eq!(delay(0, &params("3us")).delay, Delay::ZERO);
        assert_eq!(delay(1, &params("1ms")).delay, Delay::from_millis(1));
        assert_eq!(
            delay(7, &params("1ms")).delay,
            Delay::from_millis(1),
            "none given"
        );
        // Only the delay: the rest of the model is the link's.
        let model = Impairment::from_params(&params("1ms"));
        assert_eq!(delay(0, &params("1ms")).loss, model.loss);
    }
}
