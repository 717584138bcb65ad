//! A lab over several machines: which nodes each machine runs, the links
//! that cross machines (cut links), how each is carried, the kernel memory
//! each machine needs, and a hash every machine recomputes to check that
//! it runs the same plan. Pure: the same lab and machine count give the
//! same plan on every machine.
//!
//! # Atoms
//!
//! Nodes are placed in atoms, by [`crate::partition`] (the partitioner the
//! P4 mapper uses too):
//!
//! - the smallest atoms never split: an HPN segment (its ToRs and their
//!   dual-homed hosts), and every other switch with the hosts whose first
//!   link goes to it; so no host link is cut but the other links of a
//!   custom topology's host linked to switches of different atoms;
//! - a pod (nodes sharing `pod`: a fat-tree or Clos pod with its hosts, an
//!   HPN pod with its segments and aggregation switches) is an atom of
//!   those; it stays whole on one machine when one has room, and otherwise
//!   spreads over the fewest machines that hold it;
//! - what belongs to no pod (cores, spines, a custom topology's switches)
//!   is placed on its own, next to what it links to.
//!
//! A machine the greedy step leaves empty takes the smallest atom whose
//! move cuts the fewest more links; refinement then moves the smallest
//! atoms one at a time, never a machine's last one.
//!
//! # Balance
//!
//! Every machine stays within 5% ([`crate::partition::BALANCE_SLACK`])
//! above its equal share in three dimensions, or one smallest atom above it
//! where atoms are too coarse to do better: network namespaces (one per
//! node), network devices (one per link end, and one more per end of a
//! link the link engine carries, in its namespace), and engine load (links
//! a link engine carries, half to each end). Links the engine does not
//! carry weigh nothing there; a lab without any leaves that dimension out.
//!
//! # Cut links
//!
//! A cut link is a kernel VXLAN tunnel: one device per end, one VNI per
//! link, numbered from [`FIRST_VNI`] in link order. Its **owner** is the
//! machine whose link engine carries both directions of an impaired cut
//! link (the far end is a plain VXLAN device): of the two ends' machines,
//! the one whose engine carries fewer links so far (its own links first,
//! then cut links in link order), ties to the lower index. A cut link the
//! engine does not carry is owned by the lower index, which does nothing
//! more than the other end.
//!
//! # Mirrors
//!
//! A `[[mirror]]`'s link is tapped on the machine that carries it: its
//! own, or a cut link's owner. When its monitor node runs on another
//! machine, the copies cross the underlay on a VXLAN tunnel of their own
//! (a [`MirrorTunnel`]), numbered after the cut links' VNIs in mirror
//! order: the tapping machine's end in its link engine's namespace, the
//! monitor's end its mirror port.
//!
//! # Management network
//!
//! A lab's `[mgmt]` over several machines is one network: every machine
//! has its bridge, its nodes' `mgmt0` on it and an address of its own
//! ([`crate::Mgmt::hub_of`]), and machine `i > 0`'s bridge reaches
//! machine 0's over a VXLAN tunnel (a [`MgmtTunnel`], numbered after the
//! mirror tunnels): a star, so that no frame loops between bridges.
//!
//! # Memory
//!
//! Kernel memory per machine: [`NAMESPACE_KIB`] per namespace and
//! [`DEVICE_KIB`] per device (a veth end, a VXLAN device, an engine port);
//! what the worker process holds (routes, BGP speakers) comes on top.
//!
//! # Hash
//!
//! FNV-1a (64 bits, [`crate::seed::fnv1a64`]) over the plan's canonical
//! text, which lists every line in order: `turbonet partition 1`,
//! `machines M`, `node NAME MACHINE` for every node in node order, and
//! `cut LINK VNI OWNER` for every cut link in link order, then
//! `mirror INDEX VNI FROM TO` for every mirror tunnel in mirror order, then
//! `mgmt MACHINE VNI` for every management tunnel.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::model::{
    EngineChoice, Fabric, Lab, Link, LinkId, LinkParams, NodeId, Role, Shaping, Target,
};
use crate::partition::{self, Atom, Problem};
use crate::summary::RoleCount;
use crate::units::{Bytes, Mtu};

/// The VNI of the first cut link; the others follow in link order.
pub const FIRST_VNI: u32 = 1;

/// Kernel memory of a node's network namespace, as turbonet configures it
/// (IPv6 off, forwarding on), in KiB: slab and per-CPU memory measured on
/// a 2-core Linux 6.18 machine over 400, 600 and 1,000 namespaces
/// (179-205 KiB each).
pub const NAMESPACE_KIB: u64 = 200;

/// Kernel memory of a network device, in KiB. A veth end takes 44 KiB of
/// slab and per-CPU memory (measured with 8,000 to 12,000 ends, up, with an
/// address); the real HPN pod, 2,416 namespaces and 96,000 veth ends, took
/// 5.6 GiB in all, 56 KiB a device once its namespaces are counted, which
/// is the figure used (it includes what is allocated outside the slab).
/// A VXLAN device is counted as one veth end.
pub const DEVICE_KIB: u64 = 56;

// Every cut link has a VNI of its own among the 2^24 - 1 there are.
const _: () = assert!(crate::generate::MAX_LINKS < (1 << 24) - FIRST_VNI as u64);

/// Why a lab cannot be planned over machines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachinesError {
    /// No machine.
    #[error("a lab needs at least one machine")]
    NoMachine,
    /// More machines than atoms: some would run nothing.
    #[error(
        "{machines} machines, but the fabric splits into {atoms} part{s} at most (every HPN \
         segment, and every other switch with its hosts, stays on one machine): use at most \
         {atoms} machine{s}",
        s = if *.atoms == 1 { "" } else { "s" }
    )]
    TooManyMachines {
        /// Machines asked for.
        machines: u32,
        /// The smallest atoms of the fabric.
        atoms: usize,
    },
    /// A workload whose ranks would run on several machines.
    #[error(
        "workload {workload} has ranks on machines {first} ({first_host}) and {second} \
         ({second_host}): a workload's ranks (its job's hosts) run on one machine, and this \
         partition puts them on several (give it a [[job]] of one machine's hosts, or run the \
         lab on fewer machines)"
    )]
    WorkloadAcross {
        /// The workload.
        workload: String,
        /// Its first rank's machine.
        first: u32,
        /// That rank's host.
        first_host: String,
        /// The machine of its first rank elsewhere.
        second: u32,
        /// That rank's host.
        second_host: String,
    },
    /// The management network's pool has no address left for a machine.
    #[error(
        "the management network's pool {pool} holds the lab's {nodes} nodes, but not also an \
         address for each of {machines} machines (taken from the top of the pool): give `[mgmt] \
         pool` a larger network"
    )]
    MgmtPoolTooSmall {
        /// The pool.
        pool: String,
        /// The lab's nodes.
        nodes: usize,
        /// The machines asked for.
        machines: u32,
    },
    /// Only `netns` labs run over machines.
    #[error(
        "the lab's target is {0}: its switches run the fabric; only a netns lab runs over \
         several machines"
    )]
    NotNetns(Target),
}

/// A lab planned over machines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachinePlan {
    /// Machines.
    pub machines: u32,
    /// The lab's nodes.
    pub nodes: usize,
    /// The lab's links.
    pub links: usize,
    /// What each machine runs, by machine index.
    pub parts: Vec<Part>,
    /// Links per class, and how many are cut, in tier order.
    pub cut_by_class: Vec<ClassCut>,
    /// Cut links per pair of machines, by pair.
    pub cut_by_pair: Vec<PairCut>,
    /// The most loaded machine against the mean, per balance dimension.
    pub balance: Vec<Balance>,
    /// The cut of a random placement, for comparison.
    pub random: RandomCut,
    /// Every cut link, in link order.
    pub cut_links: Vec<CutLink>,
    /// Every mirror whose copies cross machines, in mirror order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirror_tunnels: Vec<MirrorTunnel>,
    /// The management network's tunnels, machine 1's first (none without
    /// `[mgmt]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mgmt_tunnels: Vec<MgmtTunnel>,
    /// The plan's hash: 16 hex digits (see the module docs).
    pub hash: String,
    /// Each node's machine, by node id.
    #[serde(skip)]
    pub place: Vec<u32>,
}

impl MachinePlan {
    /// Links between machines.
    pub fn cut(&self) -> usize {
        self.cut_links.len()
    }

    /// Whether every cut link's frames, every mirror tunnel's copies and
    /// the management network's frames cross an underlay of MTU `underlay`
    /// whole (the MTU plus [`VXLAN_OVERHEAD`]); the first that would not, in
    /// link order, then mirror order, then the management network,
    /// otherwise.
    pub fn fits_underlay(&self, underlay: u32) -> Result<(), UnderlayTooSmall> {
        let links = self.cut_links.iter().map(|c| (Some(&c.link), c.mtu));
        let mirrors = self.mirror_tunnels.iter().map(|t| (Some(&t.link), t.mtu));
        let mgmt = (self.mgmt_tunnels.first()).map(|_| (None, Mtu::ETHERNET.bytes()));
        match links
            .chain(mirrors)
            .chain(mgmt)
            .find(|(_, mtu)| u32::from(*mtu) + VXLAN_OVERHEAD > underlay)
        {
            None => Ok(()),
            Some((link, mtu)) => Err(UnderlayTooSmall {
                link: link.cloned(),
                mtu,
                needed: u32::from(mtu) + VXLAN_OVERHEAD,
                underlay,
                fits: underlay.saturating_sub(VXLAN_OVERHEAD),
            }),
        }
    }
}

/// What one machine runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// Its index, from 0 (worker 0 coordinates).
    pub machine: u32,
    /// Its nodes' names, in node order.
    pub nodes: Vec<String>,
    /// Switches per role, in tier order.
    pub switches: Vec<RoleCount>,
    /// Hosts.
    pub hosts: usize,
    /// Pods it holds whole.
    pub pods: Vec<u32>,
    /// HPN segments it holds, outside the pods it holds whole.
    pub segments: Vec<u32>,
    /// Network namespaces: one per node.
    pub namespaces: usize,
    /// Network devices: veth ends, VXLAN devices and engine ports.
    pub devices: usize,
    /// Links with both ends here.
    pub local_links: usize,
    /// VXLAN devices: cut links with an end here, and the mirror and
    /// management tunnels' ends.
    pub vxlan: usize,
    /// Links its link engine carries: its own and the cut links it owns.
    pub engine_links: usize,
    /// Estimated kernel memory (see [`NAMESPACE_KIB`], [`DEVICE_KIB`]).
    pub memory: Bytes,
}

/// Links of one class and how many are cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassCut {
    /// The class, as in `[links.<class>]`: `tor-agg`.
    pub class: String,
    /// Its links.
    pub links: usize,
    /// Those cut.
    pub cut: usize,
}

/// Cut links between two machines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PairCut {
    /// The machines, lower index first.
    pub machines: [u32; 2],
    /// Links between them.
    pub cut: usize,
    /// Those a link engine carries.
    pub engine: usize,
}

/// How evenly one dimension is spread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Balance {
    /// `namespaces`, `devices` or `engine links`.
    pub dimension: &'static str,
    /// The largest machine's count.
    pub max: usize,
    /// The mean over machines.
    pub mean: f64,
}

/// The cut of the same nodes placed at random.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RandomCut {
    /// The seed: the lab's.
    pub seed: u64,
    /// Links cut when the nodes are shuffled and dealt to the machines in
    /// the plan's sizes (each machine as many nodes as the plan gives it).
    pub cut: usize,
}

/// A link between two machines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CutLink {
    /// The link.
    #[serde(skip)]
    pub id: LinkId,
    /// The link's name.
    pub link: String,
    /// Its class: `tor-agg`.
    pub class: String,
    /// The machine of each end, in the link's end order.
    pub machines: [u32; 2],
    /// Its VXLAN network identifier.
    pub vni: u32,
    /// Its owner (see the module docs): the machine whose link engine
    /// carries it when one does, else the lower of its machines.
    pub owner: u32,
    /// True when a link engine carries it (it is impaired beyond a rate).
    pub engine: bool,
    /// Its MTU (the link's; Ethernet's when it sets none).
    pub mtu: u16,
}

/// A mirror whose copies cross machines (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MirrorTunnel {
    /// The mirror's index among the scenario's `[[mirror]]`s.
    pub mirror: usize,
    /// The mirrored link's name.
    pub link: String,
    /// The machine that taps the link.
    pub from: u32,
    /// The machine of the monitor node.
    pub to: u32,
    /// Its VXLAN network identifier.
    pub vni: u32,
    /// The copies' largest size: the link's MTU.
    pub mtu: u16,
}

/// Machine `machine`'s bridge of the management network, joined to
/// machine 0's (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MgmtTunnel {
    /// The machine (not 0).
    pub machine: u32,
    /// Its VXLAN network identifier.
    pub vni: u32,
}

impl MgmtTunnel {
    /// The machine at its other end, seen from machine `here`.
    pub fn far(&self, here: u32) -> u32 {
        if here == 0 { self.machine } else { 0 }
    }
}

/// What one machine builds of a lab: the nodes it runs, and for each
/// link, whether both its ends are here, one (a cut link), or none. The
/// whole lab on one machine is [`Share::whole`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// The machine.
    pub machine: u32,
    /// How many machines the lab spans.
    pub machines: u32,
    /// Each node's machine, by node id.
    place: Vec<u32>,
    /// Each cut link with an end here, by link id.
    cut: BTreeMap<u32, CutEnd>,
    /// Every mirror tunnel, by mirror index.
    mirrors: BTreeMap<usize, MirrorTunnel>,
    /// The management network's tunnels, machine 1's first.
    mgmt: Vec<MgmtTunnel>,
}

/// A cut link's end on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutEnd {
    /// Which of the link's ends is here (0 or 1, as in `Link::ends`).
    pub end: usize,
    /// The machine of the other end.
    pub far: u32,
    /// The link's VNI.
    pub vni: u32,
    /// The machine whose link engine carries it, if one does; else the
    /// lower of its machines.
    pub owner: u32,
    /// A link engine carries it.
    pub engine: bool,
    /// Its MTU (the link's; Ethernet's when it sets none).
    pub mtu: u16,
}

/// Where a link is, seen from one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Both ends are here: a veth pair (or two, through the engine).
    Local,
    /// One end is here: a VXLAN device to the other machine.
    Cut(CutEnd),
    /// Neither end is here.
    Away,
}

impl Share {
    /// The whole of `fabric` on one machine.
    pub fn whole(fabric: &Fabric) -> Share {
        Share {
            machine: 0,
            machines: 1,
            place: vec![0; fabric.nodes.len()],
            cut: BTreeMap::new(),
            mirrors: BTreeMap::new(),
            mgmt: Vec::new(),
        }
    }

    /// Machine `machine`'s share of `plan`.
    pub fn of(plan: &MachinePlan, machine: u32) -> Share {
        let cut = plan
            .cut_links
            .iter()
            .filter_map(|c| {
                let end = c.machines.iter().position(|m| *m == machine)?;
                Some((
                    c.id.0,
                    CutEnd {
                        end,
                        far: c.machines[1 - end],
                        vni: c.vni,
                        owner: c.owner,
                        engine: c.engine,
                        mtu: c.mtu,
                    },
                ))
            })
            .collect();
        Share {
            machine,
            machines: plan.machines,
            place: plan.place.clone(),
            cut,
            mirrors: (plan.mirror_tunnels.iter())
                .map(|t| (t.mirror, t.clone()))
                .collect(),
            mgmt: plan.mgmt_tunnels.clone(),
        }
    }

    /// The lab is all here.
    pub fn is_whole(&self) -> bool {
        self.machines == 1
    }

    /// Node `node` runs here.
    pub fn runs(&self, node: NodeId) -> bool {
        self.place.get(node.0 as usize) == Some(&self.machine)
    }

    /// The machine node `node` runs on.
    pub fn machine_of(&self, node: NodeId) -> u32 {
        self.place[node.0 as usize]
    }

    /// Where `link` is, seen from here.
    pub fn reach(&self, link: &Link) -> Reach {
        match (self.runs(link.ends[0].node), self.runs(link.ends[1].node)) {
            (true, true) => Reach::Local,
            (false, false) => Reach::Away,
            _ => self
                .cut
                .get(&link.id.0)
                .map_or(Reach::Away, |c| Reach::Cut(*c)),
        }
    }

    /// The tunnel of mirror `mirror` (its index among the lab's), if its
    /// copies cross machines.
    pub fn mirror_tunnel(&self, mirror: usize) -> Option<&MirrorTunnel> {
        self.mirrors.get(&mirror)
    }

    /// The management network's tunnels with an end here: machine 0 has
    /// one to every other machine, every other machine one to machine 0.
    pub fn mgmt_tunnels(&self) -> impl Iterator<Item = MgmtTunnel> + '_ {
        (self.mgmt.iter().copied()).filter(|t| self.machine == 0 || t.machine == self.machine)
    }

    /// This machine taps `link` for the lab's mirrors and captures: the
    /// link is all here, or cut and owned here (see the module docs).
    pub fn taps(&self, link: &Link) -> bool {
        match self.reach(link) {
            Reach::Local => true,
            Reach::Cut(cut) => cut.owner == self.machine,
            Reach::Away => false,
        }
    }
}

/// Bytes VXLAN adds to a frame on an IPv4 underlay: the outer IPv4 (20),
/// UDP (8) and VXLAN (8) headers, and the inner frame's Ethernet header
/// (14).
pub const VXLAN_OVERHEAD: u32 = 50;

/// A cut link (or mirror, or the management network) whose frames would
/// not cross the underlay whole (the kernel would fragment them silently
/// and cache a smaller path MTU).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} crosses machines with MTU {mtu}: its VXLAN tunnel needs an underlay MTU of at least \
     {needed}, and the underlay's is {underlay} (raise the underlay's MTU{or})",
    what = .link.as_ref().map_or("the management network".to_owned(), |l| format!("link {l}")),
    or = if .link.is_some() {
        format!(", or set the link's `mtu` to at most {}", .fits)
    } else {
        String::new()
    },
)]
pub struct UnderlayTooSmall {
    /// The link (none: the management network).
    pub link: Option<String>,
    /// Its MTU.
    pub mtu: u16,
    /// The underlay MTU it needs.
    pub needed: u32,
    /// The underlay's MTU.
    pub underlay: u32,
    /// The largest link MTU the underlay carries whole.
    pub fits: u32,
}

/// True when a link engine (userspace, or the kernel's BPF engine) carries
/// the link, as `up` decides from the scenario ([`LinkParams::shaping`]):
/// with `engine = "userspace"` every link that asks for something; with
/// `"kernel"` none (netem on both ends); otherwise those impaired beyond a
/// rate and a queue (the kernel's token bucket shapes those on both ends).
fn engine_carries(params: &LinkParams, engine: EngineChoice) -> bool {
    match (params.shaping(), engine) {
        (Shaping::None, _) | (_, EngineChoice::Kernel) => false,
        (Shaping::Rate, choice) => choice == EngineChoice::Userspace,
        (Shaping::Engine, _) => true,
    }
}

/// The balance dimensions, in the order of [`Problem::weights`].
const DIMENSIONS: [&str; 3] = ["namespaces", "devices", "engine links"];

/// The fabric as a partition problem: atoms (see the module docs), the
/// smallest atoms as pieces, and every node's weight.
fn problem(fabric: &Fabric, engine: &[bool]) -> Problem {
    // The smallest atoms: a segment, or a switch, with their hosts; keyed
    // (0, segment) or (1, node id).
    let mut smallest: BTreeMap<(u8, u32), Vec<usize>> = BTreeMap::new();
    for node in &fabric.nodes {
        let anchor = if node.role.is_switch() {
            node
        } else {
            node.links
                .first()
                .and_then(|&l| fabric.link(l).ends_from(node.id))
                .map_or(node, |(_, remote)| fabric.node(remote.node))
        };
        let key = anchor.segment.map_or((1, anchor.id.0), |s| (0, s));
        smallest.entry(key).or_default().push(node.id.0 as usize);
    }
    let pieces: Vec<Vec<usize>> = smallest.into_values().collect();
    let mut pods: BTreeMap<u32, Vec<Atom>> = BTreeMap::new();
    let mut atoms = Vec::new();
    for piece in &pieces {
        let atom = Atom::whole(piece.clone());
        match piece.iter().find_map(|&v| fabric.nodes[v].pod) {
            Some(pod) => pods.entry(pod).or_default().push(atom),
            None => atoms.push(atom),
        }
    }
    let pods = pods.into_values().map(|mut children| {
        if children.len() == 1 {
            children.remove(0)
        } else {
            Atom::of(children)
        }
    });
    let atoms = pods.chain(atoms).collect();

    let mut weights = Vec::with_capacity(fabric.nodes.len() * DIMENSIONS.len());
    for node in &fabric.nodes {
        let carried = node.links.iter().filter(|l| engine[l.0 as usize]).count();
        weights.extend([
            1.0,
            (node.links.len() + carried) as f64,
            carried as f64 / 2.0,
        ]);
    }
    let neighbours = fabric
        .nodes
        .iter()
        .map(|node| {
            fabric
                .ports(node.id)
                .map(|(_, _, remote)| remote.node.0 as usize)
                .collect()
        })
        .collect();
    Problem {
        dimensions: DIMENSIONS.len(),
        weights,
        neighbours,
        atoms,
        pieces,
        // Every machine runs a worker: give each some of the fabric.
        keep_parts: true,
    }
}

/// Plans `lab` over `machines` machines (see the module docs).
pub fn plan(lab: &Lab, machines: u32) -> Result<MachinePlan, MachinesError> {
    if lab.target != Target::Netns {
        return Err(MachinesError::NotNetns(lab.target));
    }
    if machines == 0 {
        return Err(MachinesError::NoMachine);
    }
    let fabric = &lab.fabric;
    if let Some(mgmt) = lab.mgmt
        && !mgmt.holds(fabric.nodes.len(), machines)
    {
        return Err(MachinesError::MgmtPoolTooSmall {
            pool: mgmt.pool.to_string(),
            nodes: fabric.nodes.len(),
            machines,
        });
    }
    let engine: Vec<bool> = fabric
        .links
        .iter()
        .map(|l| engine_carries(&l.params, lab.engine))
        .collect();
    let problem = problem(fabric, &engine);
    if machines as usize > problem.pieces.len() {
        return Err(MachinesError::TooManyMachines {
            machines,
            atoms: problem.pieces.len(),
        });
    }
    let place: Vec<u32> = partition::partition(&problem, &vec![1.0; machines as usize])
        .into_iter()
        .map(|p| p.expect("every node is in an atom") as u32)
        .collect();
    for w in &lab.workloads {
        let machine = |r: &crate::experiment::Rank| place[r.host.0 as usize];
        if let Some((first, other)) = w.ranks.first().and_then(|first| {
            let other = w.ranks.iter().find(|r| machine(r) != machine(first))?;
            Some((first, other))
        }) {
            return Err(MachinesError::WorkloadAcross {
                workload: w.name.clone(),
                first: machine(first),
                first_host: fabric.node(first.host).name.clone(),
                second: machine(other),
                second_host: fabric.node(other.host).name.clone(),
            });
        }
    }
    Ok(describe(lab, machines, &place, &engine))
}

/// The plan of `lab` with every node on machine `place[node]`.
fn describe(lab: &Lab, machines: u32, place: &[u32], engine: &[bool]) -> MachinePlan {
    let fabric = &lab.fabric;
    let mut parts = parts(fabric, machines, place);
    let (cut_by_class, cut_by_pair, cut_links) = links(fabric, place, engine, &mut parts);
    let mirror_tunnels = mirror_tunnels(lab, place, &cut_links, &mut parts);
    let first_vni = FIRST_VNI + (cut_links.len() + mirror_tunnels.len()) as u32;
    let mgmt_tunnels = mgmt_tunnels(lab, machines, first_vni, &mut parts);
    for part in &mut parts {
        let kib = part.namespaces as u64 * NAMESPACE_KIB + part.devices as u64 * DEVICE_KIB;
        part.memory = Bytes(kib << 10);
    }
    let counts: [fn(&Part) -> usize; 3] = [|p| p.namespaces, |p| p.devices, |p| p.engine_links];
    let balance = DIMENSIONS
        .iter()
        .zip(counts)
        .filter_map(|(&dimension, count)| {
            let total: usize = parts.iter().map(count).sum();
            (total > 0).then(|| Balance {
                dimension,
                max: parts.iter().map(count).max().unwrap_or(0),
                mean: total as f64 / f64::from(machines),
            })
        })
        .collect();
    let sizes: Vec<usize> = parts.iter().map(|p| p.namespaces).collect();
    MachinePlan {
        machines,
        nodes: fabric.nodes.len(),
        links: fabric.links.len(),
        hash: hash(
            machines,
            fabric,
            place,
            &cut_links,
            &mirror_tunnels,
            &mgmt_tunnels,
        ),
        parts,
        cut_by_class,
        cut_by_pair,
        balance,
        random: RandomCut {
            seed: lab.seed,
            cut: cut_size(fabric, &random_placement(&sizes, lab.seed)),
        },
        cut_links,
        mirror_tunnels,
        mgmt_tunnels,
        place: place.to_vec(),
    }
}

/// The mirrors whose monitor runs on another machine than the one that
/// carries their link (see the module docs), each a VXLAN device at both
/// machines.
fn mirror_tunnels(
    lab: &Lab,
    place: &[u32],
    cut_links: &[CutLink],
    parts: &mut [Part],
) -> Vec<MirrorTunnel> {
    let mut tunnels = Vec::new();
    for (i, m) in lab.mirrors.iter().enumerate() {
        let link = lab.fabric.link(m.link);
        let from = cut_links
            .iter()
            .find(|c| c.id == link.id)
            .map_or(place[link.ends[0].node.0 as usize], |c| c.owner);
        let to = place[m.to.0 as usize];
        if from == to {
            continue;
        }
        tunnel_ends(parts, [from, to]);
        tunnels.push(MirrorTunnel {
            mirror: i,
            link: link.name.clone(),
            from,
            to,
            vni: FIRST_VNI + (cut_links.len() + tunnels.len()) as u32,
            mtu: link.params.mtu.unwrap_or(Mtu::ETHERNET).bytes(),
        });
    }
    tunnels
}

/// The management network's tunnels, numbered from `first_vni` (see the
/// module docs): none without `[mgmt]`.
fn mgmt_tunnels(lab: &Lab, machines: u32, first_vni: u32, parts: &mut [Part]) -> Vec<MgmtTunnel> {
    if lab.mgmt.is_none() {
        return Vec::new();
    }
    (1..machines)
        .map(|machine| {
            tunnel_ends(parts, [0, machine]);
            MgmtTunnel {
                machine,
                vni: first_vni + machine - 1,
            }
        })
        .collect()
}

/// Counts a VXLAN tunnel's two ends, a device on each of `machines`.
fn tunnel_ends(parts: &mut [Part], machines: [u32; 2]) {
    for m in machines {
        parts[m as usize].vxlan += 1;
        parts[m as usize].devices += 1;
    }
}

/// Every machine's nodes, with what they hold; links, devices and memory
/// still at zero.
fn parts(fabric: &Fabric, machines: u32, place: &[u32]) -> Vec<Part> {
    let mut parts: Vec<Part> = (0..machines)
        .map(|machine| Part {
            machine,
            nodes: Vec::new(),
            switches: Vec::new(),
            hosts: 0,
            pods: Vec::new(),
            segments: Vec::new(),
            namespaces: 0,
            devices: 0,
            local_links: 0,
            vxlan: 0,
            engine_links: 0,
            memory: Bytes(0),
        })
        .collect();
    let mut roles: Vec<BTreeMap<Role, usize>> = vec![BTreeMap::new(); parts.len()];
    // The machines of every pod's and every segment's nodes.
    let mut pods: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut segments: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut segment_pod: BTreeMap<u32, Option<u32>> = BTreeMap::new();
    for node in &fabric.nodes {
        let at = place[node.id.0 as usize];
        let part = &mut parts[at as usize];
        part.nodes.push(node.name.clone());
        part.namespaces += 1;
        if node.role.is_switch() {
            *roles[at as usize].entry(node.role).or_default() += 1;
        } else {
            part.hosts += 1;
        }
        if let Some(pod) = node.pod {
            pods.entry(pod).or_default().push(at);
        }
        if let Some(segment) = node.segment {
            segments.entry(segment).or_default().push(at);
            segment_pod.insert(segment, node.pod);
        }
    }
    let whole = |map: BTreeMap<u32, Vec<u32>>| {
        map.into_iter()
            .filter(|(_, at)| at.iter().all(|&x| x == at[0]))
            .map(|(k, at)| (k, at[0]))
    };
    for (pod, at) in whole(pods) {
        parts[at as usize].pods.push(pod);
    }
    for (segment, at) in whole(segments) {
        let part = &mut parts[at as usize];
        if !segment_pod[&segment].is_some_and(|p| part.pods.contains(&p)) {
            part.segments.push(segment);
        }
    }
    for (part, roles) in parts.iter_mut().zip(roles) {
        part.switches = roles
            .into_iter()
            .map(|(role, count)| RoleCount { role, count })
            .collect();
    }
    parts
}

/// Counts every link on its machines (local links, devices, engine links)
/// and lists the cut ones, with their VNIs and owners (see the module
/// docs): (cut per class, cut per pair, cut links).
fn links(
    fabric: &Fabric,
    place: &[u32],
    engine: &[bool],
    parts: &mut [Part],
) -> (Vec<ClassCut>, Vec<PairCut>, Vec<CutLink>) {
    let mut classes: BTreeMap<_, ClassCut> = BTreeMap::new();
    let mut cut = Vec::new();
    // Local links first, so that owners even out the engines' load.
    for link in &fabric.links {
        let [a, b] = link.ends.each_ref().map(|e| place[e.node.0 as usize]);
        let class = classes.entry(link.class).or_insert_with(|| ClassCut {
            class: link.class.to_string(),
            links: 0,
            cut: 0,
        });
        class.links += 1;
        if a == b {
            let part = &mut parts[a as usize];
            part.local_links += 1;
            part.devices += 2;
            if engine[link.id.0 as usize] {
                // Each end's peer in the engine's namespace.
                part.engine_links += 1;
                part.devices += 2;
            }
        } else {
            class.cut += 1;
            cut.push((link, [a, b]));
        }
    }
    let mut pairs: BTreeMap<[u32; 2], PairCut> = BTreeMap::new();
    let mut cut_links = Vec::with_capacity(cut.len());
    for (i, (link, [a, b])) in cut.into_iter().enumerate() {
        let carried = engine[link.id.0 as usize];
        let pair = [a.min(b), a.max(b)];
        let load = |x: u32| parts[x as usize].engine_links;
        let owner = if carried && load(pair[1]) < load(pair[0]) {
            pair[1]
        } else {
            pair[0]
        };
        // The VXLAN device of each end.
        tunnel_ends(parts, pair);
        if carried {
            // The owner's node end and the engine's port, spliced as on one
            // machine; the VXLAN device sits in the engine's namespace.
            let part = &mut parts[owner as usize];
            part.engine_links += 1;
            part.devices += 2;
        }
        let count = pairs.entry(pair).or_insert_with(|| PairCut {
            machines: pair,
            cut: 0,
            engine: 0,
        });
        count.cut += 1;
        count.engine += usize::from(carried);
        cut_links.push(CutLink {
            id: link.id,
            link: link.name.clone(),
            class: link.class.to_string(),
            machines: [a, b],
            vni: FIRST_VNI + i as u32,
            owner,
            engine: carried,
            mtu: link.params.mtu.unwrap_or(Mtu::ETHERNET).bytes(),
        });
    }
    (
        classes.into_values().collect(),
        pairs.into_values().collect(),
        cut_links,
    )
}

/// The plan's hash over its canonical text (see the module docs).
fn hash(
    machines: u32,
    fabric: &Fabric,
    place: &[u32],
    cut: &[CutLink],
    mirrors: &[MirrorTunnel],
    mgmt: &[MgmtTunnel],
) -> String {
    let mut text = format!("turbonet partition 1\nmachines {machines}\n");
    for node in &fabric.nodes {
        writeln!(text, "node {} {}", node.name, place[node.id.0 as usize])
            .expect("writing to a String");
    }
    for c in cut {
        writeln!(text, "cut {} {} {}", c.link, c.vni, c.owner).expect("writing to a String");
    }
    for t in mirrors {
        writeln!(text, "mirror {} {} {} {}", t.mirror, t.vni, t.from, t.to)
            .expect("writing to a String");
    }
    for t in mgmt {
        writeln!(text, "mgmt {} {}", t.machine, t.vni).expect("writing to a String");
    }
    format!("{:016x}", crate::seed::fnv1a64(text.as_bytes()))
}

/// Items `0..n` in a seeded random order (Fisher-Yates over SplitMix64).
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = crate::seed::for_name(seed, "random placement");
    for i in (1..n).rev() {
        state = crate::seed::splitmix64(state);
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}

/// Machine of every node when the nodes, shuffled with `seed`, are dealt
/// `sizes[m]` to machine `m`.
fn random_placement(sizes: &[usize], seed: u64) -> Vec<u32> {
    let mut place = vec![0; sizes.iter().sum()];
    let mut order = shuffled(place.len(), seed).into_iter();
    for (machine, &size) in sizes.iter().enumerate() {
        for node in order.by_ref().take(size) {
            place[node] = machine as u32;
        }
    }
    place
}

/// Links whose ends are on different machines.
fn cut_size(fabric: &Fabric, place: &[u32]) -> usize {
    fabric
        .links
        .iter()
        .filter(|l| place[l.ends[0].node.0 as usize] != place[l.ends[1].node.0 as usize])
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(name: &str) -> Lab {
        let path = format!("{}/../scenarios/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("a bundled scenario");
        crate::parse(name, &text).unwrap_or_else(|e| panic!("{}", e.render_plain(100)))
    }

    /// The cut when the smallest atoms are placed flat, without pods.
    fn flat_cut(lab: &Lab, machines: u32) -> usize {
        let mut problem = problem(&lab.fabric, &vec![false; lab.fabric.links.len()]);
        problem.atoms = problem.pieces.iter().cloned().map(Atom::whole).collect();
        let place: Vec<u32> = partition::partition(&problem, &vec![1.0; machines as usize])
            .into_iter()
            .map(|p| p.expect("placed") as u32)
            .collect();
        cut_size(&lab.fabric, &place)
    }

    /// The cut when the smallest atoms, shuffled, each go to the machine
    /// with the fewest nodes so far.
    fn random_atoms_cut(lab: &Lab, machines: u32) -> usize {
        let problem = problem(&lab.fabric, &vec![false; lab.fabric.links.len()]);
        let mut load = vec![0usize; machines as usize];
        let mut place = vec![0u32; lab.fabric.nodes.len()];
        for i in shuffled(problem.pieces.len(), lab.seed) {
            let m = (0..load.len()).min_by_key(|&m| load[m]).expect("machines");
            for &v in &problem.pieces[i] {
                place[v] = m as u32;
            }
            load[m] += problem.pieces[i].len();
        }
        cut_size(&lab.fabric, &place)
    }

    #[test]
    fn the_pod_is_cut_less_than_at_random() {
        // Nodes at random cut three times as many links; even the pod's
        // segments and switches whole but at random cut more.
        let lab = scenario("hpn-pod.toml");
        for m in 2..=5 {
            let plan = plan(&lab, m).expect("the pod spreads");
            let atoms = random_atoms_cut(&lab, m);
            assert!(plan.random.cut >= 3 * plan.cut(), "{m}: {plan:?}");
            assert!(atoms > plan.cut(), "{m}: {atoms} vs {}", plan.cut());
        }
        // Over two machines, the model's 7,680 of 48,000.
        assert_eq!(plan(&lab, 2).expect("the pod spreads").cut(), 7680);
    }

    #[test]
    fn random_placement_is_seeded() {
        assert_eq!(shuffled(10, 1), shuffled(10, 1));
        assert_ne!(shuffled(10, 1), shuffled(10, 2));
        let mut sorted = shuffled(100, 7);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        let place = random_placement(&[3, 1], 5);
        assert_eq!(place.iter().filter(|&&m| m == 0).count(), 3);
    }

    /// Four real HPN pods joined by their cores, over eight machines: a
    /// pod per two machines cuts about 17% of the links, the segments
    /// placed flat about 27%.
    #[test]
    fn four_pods_are_cut_less_hierarchically_than_flat() {
        let text = std::fs::read_to_string(format!(
            "{}/../scenarios/hpn-pod.toml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("the bundled pod")
        // Four pods' cores have more ports than a 51.2T chip, and their
        // links more /31s than the default pool.
        .replace(
            "switch = \"51.2t\"",
            "pods = 4\n[addressing]\nfabric = \"10.64.0.0/14\"",
        );
        let lab = crate::parse("four-pods.toml", &text).expect("four pods");
        let plan = plan(&lab, 8).expect("four pods spread");
        let share = |cut: usize| cut as f64 / plan.links as f64;
        let (hierarchical, flat) = (share(plan.cut()), share(flat_cut(&lab, 8)));
        assert!((0.16..0.18).contains(&hierarchical), "{hierarchical}");
        assert!((0.26..0.28).contains(&flat), "{flat}");
    }

    /// The triangle with two mirrors: one of a switch link, to the host of
    /// the third switch (on a third machine), one of a host's link to its
    /// own switch.
    fn mirrored_triangle() -> Lab {
        let path = format!(
            "{}/../scenarios/custom-triangle.toml",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("the triangle")
            + "\n[[mirror]]\nlink = \"r1--r2\"\nto = \"h3\"\n\n[[mirror]]\nlink = \"h1--r1\"\nto = \"r1\"\n";
        crate::parse("triangle", &text).unwrap_or_else(|e| panic!("{}", e.render_plain(100)))
    }

    #[test]
    fn a_mirror_whose_monitor_runs_elsewhere_has_a_tunnel_from_its_link_carrier() {
        let lab = mirrored_triangle();
        let plan = plan(&lab, 3).unwrap();
        let machine = |name: &str| plan.place[lab.fabric.node_by_name(name).unwrap().id.0 as usize];
        assert_eq!(plan.cut(), 3, "every switch link is cut");
        let r1r2 = plan.cut_links.iter().find(|c| c.link == "r1--r2").unwrap();
        assert_eq!(
            plan.mirror_tunnels,
            vec![MirrorTunnel {
                mirror: 0,
                link: "r1--r2".into(),
                from: r1r2.owner,
                to: machine("h3"),
                vni: FIRST_VNI + 3,
                mtu: 1500,
            }],
            "the host link's mirror stays on its machine"
        );
        let share = |m: u32| Share::of(&plan, m);
        let link = |name: &str| lab.fabric.links.iter().find(|l| l.name == name).unwrap();
        for m in 0..3 {
            assert_eq!(
                share(m).taps(link("r1--r2")),
                m == r1r2.owner,
                "machine {m}"
            );
            assert_eq!(share(m).taps(link("h1--r1")), m == machine("r1"));
            assert!(share(m).mirror_tunnel(0).is_some() && share(m).mirror_tunnel(1).is_none());
        }
        // Each end of the tunnel is a VXLAN device on its machine.
        let tunnels = |m: u32| plan.parts[m as usize].vxlan;
        let without = super::plan(&scenario("custom-triangle.toml"), 3).unwrap();
        for m in 0..3u32 {
            let more = usize::from(m == r1r2.owner || m == machine("h3"));
            assert_eq!(tunnels(m), without.parts[m as usize].vxlan + more);
        }
        assert_ne!(plan.hash, without.hash, "the tunnel is in the plan's hash");
    }
}
