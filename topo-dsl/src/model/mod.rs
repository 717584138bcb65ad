//! The validated model of a lab: what a scenario file means once it has been
//! parsed, resolved and checked. A value of these types exists only if it is
//! valid: every name is unique, every address comes from its pool, every link
//! joins two existing nodes.

pub mod course;
pub mod experiment;

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use ipnet::Ipv4Net;
use serde::de::{self, Deserializer, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use crate::units::{Delay, LossProb, Mtu, QueueLimit, Rate, UnitError};

/// A whole lab: one scenario file, validated.
#[derive(Debug, Clone, Serialize)]
pub struct Lab {
    /// Lab name: 1-32 bytes of `[a-z0-9-]`, starting with a letter or digit.
    /// Namespaces are named `tn-<lab>-<node>`.
    pub name: String,
    /// Seed from which every per-switch and per-link random choice derives.
    pub seed: u64,
    /// Where the fabric is mapped.
    pub target: Target,
    /// Which impairment engine carries impaired links.
    pub engine: EngineChoice,
    /// How routes are computed and installed.
    pub routing: RoutingConfig,
    /// Nodes, links and prefixes.
    pub fabric: Fabric,
    /// Events the lab daemon executes once the fabric is ready, sorted by
    /// [`Event::at`]; events at the same time keep their file order.
    pub timeline: Vec<Event>,
    /// Target `p4rt`: the P4 switches (present exactly on that target).
    pub p4rt: Option<P4rtConfig>,
    /// `[[job]]`: hosts in rank order.
    pub jobs: Vec<crate::experiment::Job>,
    /// `[[workload]]`: what runs once the fabric is ready, in file order.
    pub workloads: Vec<crate::experiment::Workload>,
    /// `[[expect]]`: what `turbonet run` checks, in file order.
    pub expects: Vec<crate::experiment::Expect>,
    /// `[mgmt]`: the out-of-band management network (`None`: off).
    pub mgmt: Option<Mgmt>,
    /// `[metrics]`: the daemon's OpenMetrics endpoint (`None`: off).
    pub metrics: Option<Metrics>,
    /// `[[capture]]`: links captured into pcapng files while the lab runs.
    pub captures: Vec<Capture>,
    /// `[[mirror]]`: links whose traffic is copied to a node's port.
    pub mirrors: Vec<Mirror>,
    /// `[[filter]]`: packet filters at ports.
    pub filters: Vec<Filter>,
    /// `[[task]]`: what a student is asked to do, graded by `turbonet lab
    /// check` (a graded lab's scenario).
    pub tasks: Vec<course::Task>,
    /// `[faults]`: what a troubleshooting lab breaks before the student
    /// starts (`turbonet lab start --seed`).
    pub faults: Option<course::Faults>,
}

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
/// Index 0 is `a-b`, as in [`Link::ends`].
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

    /// `node`'s address on the network, with its prefix length.
    pub fn address(&self, node: NodeId) -> Ipv4Net {
        self.at(u64::from(node.0) + 2)
    }

    /// How many nodes a pool of prefix length `len` holds (without the
    /// network, hub and broadcast addresses).
    pub fn capacity(len: u8) -> u64 {
        (1u64 << (32 - u32::from(len))).saturating_sub(3)
    }

    fn at(&self, offset: u64) -> Ipv4Net {
        let addr = Ipv4Addr::from((u64::from(u32::from(self.pool.network())) + offset) as u32);
        Ipv4Net::new(addr, self.pool.prefix_len()).expect("the pool's prefix length")
    }
}

/// `[p4rt]`: the programmable switches a `p4rt` lab runs on, and the
/// pipeline they get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct P4rtConfig {
    /// The switches, in file order (at least one).
    pub switches: Vec<P4rtSwitch>,
    /// Text-format P4Info of the compiled pipeline, as written (relative
    /// paths are relative to the scenario file); `None`: turbonet's own.
    pub p4info: Option<String>,
    /// The target's compiled artifact (BMv2 JSON, Tofino binary), as
    /// written; `None`: empty.
    pub device_config: Option<String>,
    /// Egress queues per physical port (default 8: v1model's priority
    /// queues, which the pipeline's 3-bit queue addresses).
    pub queues: u32,
}

/// One programmable switch of a `p4rt` lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct P4rtSwitch {
    /// Name in the mapping (`s1`).
    pub name: String,
    /// Physical ports.
    pub ports: u32,
    /// Port speed.
    pub speed: Rate,
    /// Where its P4Runtime server is.
    pub device: P4rtDevice,
    /// P4Runtime device id.
    pub device_id: u64,
    /// Election id turbonet's controller uses (the daemon uses the next).
    pub election_id: u64,
    /// The file holding the token its P4Runtime server requires (sent as
    /// `authorization: Bearer TOKEN`), relative to the scenario.
    pub token_file: Option<String>,
}

/// Where a `p4rt` switch's P4Runtime server is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum P4rtDevice {
    /// A running server at `host:port` (a Tofino's, a BMv2 someone started).
    Address(String),
    /// BMv2's `simple_switch_grpc`, started by `up` on this machine.
    Bmv2,
}

/// One entry of the scenario's `[[timeline]]`: an action at a time after
/// the fabric is ready.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Its name, for expectations to refer to (`after = "core-fails"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Time after the fabric is ready (all links up, routes installed).
    pub at: Delay,
    /// What happens then.
    #[serde(flatten)]
    pub action: Action,
}

/// What an event or a CLI verb acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventTarget {
    /// A link: both ends go down (or come back up).
    Link(LinkId),
    /// A node: every link of the node goes down (or comes back up).
    Node(NodeId),
}

/// A change to a running fabric.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Change some parameters of a link; the others keep their current
    /// values. `params` is the patch: only the keys given are set (never
    /// `mtu`), to be applied with [`LinkParams::merged`] over the link's
    /// current parameters.
    Set {
        /// The link.
        link: LinkId,
        /// The keys to change.
        params: LinkParams,
    },
    /// Put a link's parameters back to the scenario's ([`Link::params`]).
    Reset {
        /// The link.
        link: LinkId,
    },
    /// Take a link or a node down.
    Fail(EventTarget),
    /// Bring a failed link or node back up.
    Restore(EventTarget),
    /// Take a link down for `period / 2`, then up for `period / 2`, `count`
    /// times.
    Flap {
        /// The link.
        link: LinkId,
        /// One down/up cycle; the link is down for the first half (rounded
        /// down to the nanosecond) and up for the rest.
        period: Delay,
        /// Number of cycles, at least 1.
        count: u32,
    },
}

impl Action {
    /// The name of the action in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Set { .. } => "set",
            Action::Reset { .. } => "reset",
            Action::Fail(_) => "fail",
            Action::Restore(_) => "restore",
            Action::Flap { .. } => "flap",
        }
    }

    /// The names of the actions, as written in scenario files.
    pub const NAMES: [&'static str; 5] = ["set", "reset", "fail", "restore", "flap"];

    /// What the action acts on.
    pub fn target(&self) -> EventTarget {
        match *self {
            Action::Set { link, .. } | Action::Reset { link } | Action::Flap { link, .. } => {
                EventTarget::Link(link)
            }
            Action::Fail(t) | Action::Restore(t) => t,
        }
    }

    /// A log line with the names of the links and nodes of `fabric`:
    /// `fail link edge0-0--agg0-0`, `set edge0-0--agg0-0 delay=10ms loss=1%`,
    /// `flap agg0-0--core0 period 2s x3`. ([`fmt::Display`] on the action
    /// alone prints ids: `fail link #3`.)
    pub fn display<'a>(&'a self, fabric: &'a Fabric) -> ActionDisplay<'a> {
        ActionDisplay {
            action: self,
            fabric: Some(fabric),
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, fabric: Option<&Fabric>) -> fmt::Result {
        let link = |id: LinkId| -> String {
            match fabric.and_then(|fb| fb.links.get(id.0 as usize)) {
                Some(l) => l.name.clone(),
                None => format!("#{}", id.0),
            }
        };
        let target = |t: EventTarget| -> String {
            match t {
                EventTarget::Link(id) => format!("link {}", link(id)),
                EventTarget::Node(id) => match fabric.and_then(|fb| fb.nodes.get(id.0 as usize)) {
                    Some(n) => format!("node {}", n.name),
                    None => format!("node #{}", id.0),
                },
            }
        };
        match self {
            Action::Set { link: l, params } => write!(f, "set {} {params}", link(*l)),
            Action::Reset { link: l } => write!(f, "reset {}", link(*l)),
            Action::Fail(t) => write!(f, "fail {}", target(*t)),
            Action::Restore(t) => write!(f, "restore {}", target(*t)),
            Action::Flap {
                link: l,
                period,
                count,
            } => write!(f, "flap {} period {period} x{count}", link(*l)),
        }
    }
}

/// Prints an action with ids for names (`fail link #3`, `set #0 delay=10ms`);
/// use [`Action::display`] for link and node names.
impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, None)
    }
}

/// An [`Action`] printed with the names of its links and nodes; see
/// [`Action::display`].
#[derive(Debug, Clone, Copy)]
pub struct ActionDisplay<'a> {
    action: &'a Action,
    fabric: Option<&'a Fabric>,
}

impl fmt::Display for ActionDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.action.write(f, self.fabric)
    }
}

/// Which impairment engine carries the impaired links of a lab.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineChoice {
    /// Per link: the kernel (`tc netem`) when it can honour every
    /// parameter of the link, else the userspace link engine.
    #[default]
    Auto,
    /// The userspace link engine for every impaired link (works on every
    /// kernel).
    Userspace,
    /// The kernel for every impaired link; refused when the kernel has no
    /// `sch_netem` or a link declares what netem cannot do.
    Kernel,
}

impl EngineChoice {
    /// Every choice, as written in scenarios.
    pub const NAMES: &'static [&'static str] = &["auto", "userspace", "kernel"];

    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineChoice::Auto => "auto",
            EngineChoice::Userspace => "userspace",
            EngineChoice::Kernel => "kernel",
        }
    }
}

impl fmt::Display for EngineChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The target a fabric is mapped onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// One Linux network namespace per node, veth links.
    Netns,
    /// P4 switches over P4Runtime.
    P4rt,
    /// turbonet's own userspace P4Runtime switch.
    Soft,
}

/// Routing configuration: the scenario's `[routing]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoutingConfig {
    /// Control-plane mode.
    pub mode: RoutingMode,
    /// Agent of every switch not listed in `agents` (BGP mode; the default,
    /// [`Agent::Builtin`], in the other modes).
    pub agent: Agent,
    /// Per-switch overrides, by node id (switches only; empty outside BGP
    /// mode).
    pub agents: BTreeMap<NodeId, Agent>,
    /// BGP timers for the fabric's sessions ([`BgpTimers::default`]
    /// outside BGP mode).
    pub timers: BgpTimers,
}

impl RoutingConfig {
    /// The agent `node` runs: its override in `agents`, else `agent`.
    pub fn agent_of(&self, node: NodeId) -> Agent {
        self.agents.get(&node).copied().unwrap_or(self.agent)
    }
}

/// The BGP speaker a switch runs in BGP mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Agent {
    /// turbonet's own BGP speaker.
    #[default]
    Builtin,
    /// FRRouting's `bgpd`.
    Frr,
    /// BIRD.
    Bird,
}

impl Agent {
    /// Every agent, as written in scenarios.
    pub const NAMES: &'static [&'static str] = &["builtin", "frr", "bird"];

    /// Every agent, in the order of [`Agent::NAMES`].
    pub const ALL: [Agent; 3] = [Agent::Builtin, Agent::Frr, Agent::Bird];

    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Builtin => "builtin",
            Agent::Frr => "frr",
            Agent::Bird => "bird",
        }
    }

    /// The agent with this scenario name.
    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Timers of the fabric's BGP sessions, in seconds (RFC 4271 section 10).
/// The parser guarantees `hold_time` is 0 or at least 3 (section 4.2),
/// `keepalive` and `connect_retry` at least 1, and `3 * keepalive <=
/// hold_time` when `hold_time` is not 0 (section 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BgpTimers {
    /// Hold time proposed in OPEN: 0 (no keepalives, the session never
    /// times out) or at least 3.
    pub hold_time: u16,
    /// Interval between KEEPALIVEs, at least 1; at most a third of
    /// `hold_time` when `hold_time` is not 0.
    pub keepalive: u16,
    /// ConnectRetry interval between connection attempts, at least 1.
    pub connect_retry: u16,
}

/// Fast lab timers: hold 3 s, keepalive 1 s, connect retry 1 s, so that a
/// failure is noticed within seconds rather than RFC 4271's suggested 90 s.
impl Default for BgpTimers {
    fn default() -> Self {
        BgpTimers {
            hold_time: 3,
            keepalive: 1,
            connect_retry: 1,
        }
    }
}

/// Control-plane modes (TurboNet vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingMode {
    /// Routes computed once, centrally, and installed.
    Static,
    /// A central controller that recomputes on failures.
    Controller,
    /// Only the routes to a node's own neighbours (hosts' default routes,
    /// routed host ports): the routes through the fabric are the user's
    /// to install (a static-routing lab).
    Manual,
    /// One BGP agent per switch.
    Bgp,
}

/// The topology family a fabric was generated from, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TopologyKind {
    /// k-ary fat-tree (Al-Fares).
    FatTree {
        /// Switch radix, even, >= 2.
        k: u32,
    },
    /// Two-tier Clos.
    LeafSpine {
        /// Spine switches.
        spines: u32,
        /// Leaf switches.
        leaves: u32,
        /// Hosts under each leaf.
        hosts_per_leaf: u32,
        /// Parallel links between every leaf and every spine.
        uplinks: u32,
    },
    /// Alibaba HPN (SIGCOMM 2024): pods of dual-ToR segments on separate
    /// planes, joined by a core layer.
    Hpn(HpnParams),
    /// A folded Clos of 3 or 5 stages, sized from its switches' radix.
    Clos(ClosParams),
    /// Explicit nodes and links.
    Custom,
}

/// A folded Clos built from switches of a given radix: 3 stages (leaves
/// and spines) or 5 (leaves and spines in pods, and a core tier in planes,
/// as RFC 7938 describes). Every switch below the top splits its ports
/// into downlinks and uplinks by its tier's oversubscription; a top-tier
/// switch has only downlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClosParams {
    /// 3 or 5.
    pub stages: u32,
    /// Ports per switch, bottom tier first (`stages / 2 + 1` tiers).
    pub radix: [u32; 3],
    /// Downlinks and uplinks of each tier below the top, e.g. `[3, 1]` for
    /// 3:1 (`[1, 1]` when not oversubscribed).
    pub oversubscription: [[u32; 2]; 2],
    /// Pods (5 stages), at most the core tier's radix.
    pub pods: u32,
}

impl ClosParams {
    /// Switch tiers: 2 or 3.
    pub fn tiers(&self) -> usize {
        (self.stages / 2 + 1) as usize
    }

    /// Downlinks and uplinks of a switch of tier `t` (0: leaves).
    pub fn split(&self, t: usize) -> (u32, u32) {
        if t + 1 >= self.tiers() {
            return (self.radix[t], 0);
        }
        let [down, up] = self.oversubscription[t];
        let unit = self.radix[t] / (down + up);
        (unit * down, unit * up)
    }

    /// Hosts per leaf, leaves and spines per pod (the whole fabric with 3
    /// stages), core switches per plane (one plane per spine of a pod).
    pub fn shape(&self) -> ClosShape {
        let (hosts_per_leaf, leaf_up) = self.split(0);
        match self.stages {
            3 => ClosShape {
                hosts_per_leaf,
                leaves: self.split(1).0,
                spines: leaf_up,
                cores_per_plane: 0,
                pods: 1,
            },
            _ => {
                let (spine_down, spine_up) = self.split(1);
                ClosShape {
                    hosts_per_leaf,
                    leaves: spine_down,
                    spines: leaf_up,
                    cores_per_plane: spine_up,
                    pods: self.pods,
                }
            }
        }
    }
}

/// The counts that follow from [`ClosParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClosShape {
    /// Hosts under each leaf.
    pub hosts_per_leaf: u32,
    /// Leaves per pod (all of them with 3 stages).
    pub leaves: u32,
    /// Spines per pod (all of them with 3 stages); also the planes of the
    /// core tier.
    pub spines: u32,
    /// Core switches per plane (5 stages; 0 with 3).
    pub cores_per_plane: u32,
    /// Pods (1 with 3 stages).
    pub pods: u32,
}

/// The parameters of an HPN fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HpnParams {
    /// Pods, joined by the core layer.
    pub pods: u32,
    /// Segments in each pod.
    pub segments: u32,
    /// Active hosts per segment.
    pub hosts_per_segment: u32,
    /// Backup hosts per segment (connected, not counted in oversubscription).
    pub backup_hosts: u32,
    /// Rail NICs per host.
    pub rails: u32,
    /// Physically separate planes (ports per NIC).
    pub planes: u32,
    /// Aggregation switches in each plane of each pod.
    pub aggs_per_plane: u32,
    /// Core switches, all planes together.
    pub cores: u32,
    /// Uplinks from every aggregation switch to the core layer.
    pub core_uplinks: u32,
    /// Whether the planes stay apart in the core layer.
    pub core: CoreLayer,
}

impl HpnParams {
    /// Core switches an aggregation switch can reach: its plane's, or
    /// every core when the core layer is shared.
    pub fn cores_per_plane(&self) -> u32 {
        match self.core {
            CoreLayer::PerPlane => self.cores / self.planes.max(1),
            CoreLayer::Shared => self.cores,
        }
    }
}

/// How an HPN core layer meets the planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CoreLayer {
    /// The planes continue through the core (HPN's design): the core
    /// switches are split into one group per plane, and a plane's
    /// aggregation switches link only to its group.
    #[default]
    PerPlane,
    /// Every core switch serves every plane (traffic can change planes at
    /// the core).
    Shared,
}

impl CoreLayer {
    /// The name in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            CoreLayer::PerPlane => "per-plane",
            CoreLayer::Shared => "shared",
        }
    }
}

impl fmt::Display for CoreLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

/// Emulated properties of a link, the same in both directions.
/// `None` means "not emulated" (or, for the modifiers `jitter_distribution`
/// and `reorder`, "the default"): the veth's native behaviour.
///
/// Every field is an `Option` so that the levels of a scenario
/// (`[links.default]`, `[links.<class>]`, inline, `[[links.override]]`)
/// overlay key by key. In JSON (the daemon's input log, `--json`) each
/// value is written in scenario syntax (`"delay": "5ms"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkParams {
    /// Bandwidth.
    pub rate: Option<Rate>,
    /// One-way propagation delay.
    pub delay: Option<Delay>,
    /// Delay jitter: the spread of the per-packet delay variation.
    pub jitter: Option<Delay>,
    /// Shape of the jitter (default [`JitterDistribution::Uniform`]).
    pub jitter_distribution: Option<JitterDistribution>,
    /// Whether jitter may reorder packets (default `false`: frames leave in
    /// the order they arrived).
    pub reorder: Option<bool>,
    /// Packet loss: independent (Bernoulli) or bursty (Gilbert-Elliott).
    pub loss: Option<Loss>,
    /// Probability that a frame gets one bit flipped.
    pub corrupt: Option<LossProb>,
    /// Probability that a frame is sent twice.
    pub duplicate: Option<LossProb>,
    /// Finite queue drained at `rate` (needs `rate`).
    pub queue: Option<QueueLimit>,
    /// Queue depth at or above which ECN-capable packets are marked CE
    /// (needs `rate`; at most `queue`).
    pub ecn: Option<QueueLimit>,
    /// Interface MTU (both ends).
    pub mtu: Option<Mtu>,
}

impl LinkParams {
    /// The queue of a rate-limited link that sets none (Linux's default
    /// `txqueuelen`); `ecn` is checked against it.
    pub const DEFAULT_QUEUE: QueueLimit = QueueLimit::Packets(1000);

    /// The keys of a link in scenario files and on the command line, in
    /// field order.
    pub const KEYS: [&'static str; 11] = [
        "rate",
        "delay",
        "jitter",
        "jitter_distribution",
        "reorder",
        "loss",
        "corrupt",
        "duplicate",
        "queue",
        "ecn",
        "mtu",
    ];

    /// `self` run `scale` times slower: its rate, queue and ECN threshold
    /// divided by `scale` (a queue or threshold rounded up, at least one
    /// packet or byte), so queueing delays and the ratios between links
    /// stay as they were. Delays, jitter and probabilities do not change.
    pub fn scaled(&self, scale: u32) -> LinkParams {
        if scale <= 1 {
            return self.clone();
        }
        let s = u64::from(scale);
        let limit = |q: QueueLimit| match q {
            QueueLimit::Packets(n) => QueueLimit::Packets(u64::from(n).div_ceil(s).max(1) as u32),
            QueueLimit::Bytes(b) => QueueLimit::Bytes(b.div_ceil(s).max(1)),
        };
        LinkParams {
            rate: self
                .rate
                .map(|r| Rate::from_bits_per_sec((r.bits_per_sec() / s).max(1))),
            queue: self.queue.map(limit),
            ecn: self.ecn.map(limit),
            ..self.clone()
        }
    }

    /// `self` with every field that `patch` sets replaced (key by key, like
    /// an override); the fields `patch` leaves `None` keep their value.
    pub fn merged(&self, patch: &LinkParams) -> LinkParams {
        let mut out = self.clone();
        out.overlay(patch);
        out
    }

    /// In place [`LinkParams::merged`].
    pub(crate) fn overlay(&mut self, top: &LinkParams) {
        // Destructure so that a new field cannot be forgotten here.
        let LinkParams {
            rate,
            delay,
            jitter,
            jitter_distribution,
            reorder,
            loss,
            corrupt,
            duplicate,
            queue,
            ecn,
            mtu,
        } = top;
        fn set<T: Clone>(base: &mut Option<T>, top: &Option<T>) {
            if top.is_some() {
                base.clone_from(top);
            }
        }
        set(&mut self.rate, rate);
        set(&mut self.delay, delay);
        set(&mut self.jitter, jitter);
        set(&mut self.jitter_distribution, jitter_distribution);
        set(&mut self.reorder, reorder);
        set(&mut self.loss, loss);
        set(&mut self.corrupt, corrupt);
        set(&mut self.duplicate, duplicate);
        set(&mut self.queue, queue);
        set(&mut self.ecn, ecn);
        set(&mut self.mtu, mtu);
    }

    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        *self == LinkParams::default()
    }

    /// The rules across fields that every link must satisfy (the scenario
    /// parser enforces them on the merged `[links]` levels, and `turbonet
    /// link set` on the patched parameters of a running link):
    ///
    /// - `queue` needs `rate`: only the rate drains a queue;
    /// - `ecn` needs `rate`: it marks from that queue;
    /// - `ecn` is at most `queue`, or at most [`LinkParams::DEFAULT_QUEUE`]
    ///   when no queue is set (a packet threshold is not compared with a
    ///   byte limit, nor the reverse: that needs the frame sizes).
    ///
    /// On failure, one message per violated rule, each saying what to
    /// change.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.iter().map(ParamProblem::to_string).collect())
        }
    }

    /// The violated rules of [`LinkParams::check`], in the order listed
    /// there.
    pub fn problems(&self) -> Vec<ParamProblem> {
        let mut out = Vec::new();
        if self.rate.is_none() {
            if self.queue.is_some() {
                out.push(ParamProblem::QueueWithoutRate);
            }
            if self.ecn.is_some() {
                out.push(ParamProblem::EcnWithoutRate);
            }
        } else if let Some(ecn) = self.ecn {
            let queue = self.queue.unwrap_or(Self::DEFAULT_QUEUE);
            let above = match (ecn, queue) {
                (QueueLimit::Packets(e), QueueLimit::Packets(q)) => e > q,
                (QueueLimit::Bytes(e), QueueLimit::Bytes(q)) => e > q,
                _ => false,
            };
            if above {
                out.push(ParamProblem::EcnAboveQueue {
                    ecn,
                    queue,
                    default_queue: self.queue.is_none(),
                });
            }
        }
        out
    }

    /// True when some property needs an impairment engine (everything but
    /// MTU; `jitter_distribution` and `reorder` only qualify `jitter`).
    pub fn has_impairments(&self) -> bool {
        self.rate.is_some()
            || self.delay.is_some()
            || self.jitter.is_some()
            || self.loss.is_some()
            || self.corrupt.is_some()
            || self.duplicate.is_some()
            || self.queue.is_some()
            || self.ecn.is_some()
    }
}

/// Prints the fields that are set as `key=value` pairs in field order,
/// separated by spaces, values in scenario syntax (`delay=10ms loss=1%`);
/// nothing when no field is set.
impl LinkParams {
    /// Every parameter set, as `(key, value)` in scenario syntax and field
    /// order (`[("delay", "5ms"), ("loss", "0.1%")]`).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let LinkParams {
            rate,
            delay,
            jitter,
            jitter_distribution,
            reorder,
            loss,
            corrupt,
            duplicate,
            queue,
            ecn,
            mtu,
        } = self;
        let values: [Option<String>; 11] = [
            rate.map(|v| v.to_string()),
            delay.map(|v| v.to_string()),
            jitter.map(|v| v.to_string()),
            jitter_distribution.map(|v| v.to_string()),
            reorder.map(|v| v.to_string()),
            loss.map(|v| v.to_string()),
            corrupt.map(|v| v.to_string()),
            duplicate.map(|v| v.to_string()),
            queue.map(|v| v.to_string()),
            ecn.map(|v| v.to_string()),
            mtu.map(|v| v.to_string()),
        ];
        LinkParams::KEYS
            .into_iter()
            .zip(values)
            .filter_map(|(key, value)| value.map(|v| (key, v)))
            .collect()
    }
}

impl fmt::Display for LinkParams {
    /// `key=value` for every parameter set, space-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, value)) in self.pairs().into_iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

/// A rule of [`LinkParams::check`] that a set of link parameters breaks.
/// `Display` says what is wrong and what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamProblem {
    /// `queue` without `rate`.
    QueueWithoutRate,
    /// `ecn` without `rate`.
    EcnWithoutRate,
    /// `ecn` deeper than the queue can get.
    EcnAboveQueue {
        /// The ECN threshold.
        ecn: QueueLimit,
        /// The queue limit it exceeds.
        queue: QueueLimit,
        /// True when `queue` is [`LinkParams::DEFAULT_QUEUE`] because none
        /// is set.
        default_queue: bool,
    },
}

impl ParamProblem {
    /// The key whose value is wrong (`queue` or `ecn`).
    pub fn key(&self) -> &'static str {
        match self {
            ParamProblem::QueueWithoutRate => "queue",
            ParamProblem::EcnWithoutRate | ParamProblem::EcnAboveQueue { .. } => "ecn",
        }
    }
}

impl fmt::Display for ParamProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamProblem::QueueWithoutRate => f.write_str(
                "`queue` is set but `rate` is not: a queue is drained at the link's rate; \
                 set a `rate` (e.g. 10gbit) or remove `queue`",
            ),
            ParamProblem::EcnWithoutRate => f.write_str(
                "`ecn` is set but `rate` is not: ECN marks packets when the queue drained at \
                 `rate` is at least this deep; set a `rate` (e.g. 10gbit) or remove `ecn`",
            ),
            ParamProblem::EcnAboveQueue {
                ecn,
                queue,
                default_queue,
            } => {
                let which = if *default_queue {
                    "the default queue limit"
                } else {
                    "the queue limit"
                };
                write!(
                    f,
                    "`ecn` threshold {ecn} is above {which} {queue}: nothing would ever be \
                     marked; set `ecn` to at most {queue} (e.g. a fifth of it) or raise `queue`"
                )
            }
        }
    }
}

/// Shape of the delay jitter. The jitter amount is the distribution's
/// spread: the half-width of the uniform distribution, the standard
/// deviation of the others (as in netem).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum JitterDistribution {
    /// Uniform in `[-jitter, +jitter]`.
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Pareto (heavy tail), scaled to standard deviation `jitter`.
    Pareto,
    /// netem's blend of a normal and a Pareto value (iproute2's
    /// `paretonormal` table).
    ParetoNormal,
}

impl JitterDistribution {
    /// Every distribution, as written in scenarios.
    pub const ALL: [JitterDistribution; 4] = [
        JitterDistribution::Uniform,
        JitterDistribution::Normal,
        JitterDistribution::Pareto,
        JitterDistribution::ParetoNormal,
    ];

    /// The name used in scenario files.
    pub const fn as_str(self) -> &'static str {
        match self {
            JitterDistribution::Uniform => "uniform",
            JitterDistribution::Normal => "normal",
            JitterDistribution::Pareto => "pareto",
            JitterDistribution::ParetoNormal => "paretonormal",
        }
    }
}

impl fmt::Display for JitterDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JitterDistribution {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        JitterDistribution::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = JitterDistribution::ALL.iter().map(|d| d.as_str()).collect();
                UnitError::new(format!("unknown jitter distribution `{s}`"))
                    .help(crate::diag::choices_help(s, "distributions", &names))
            })
    }
}

impl Serialize for JitterDistribution {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for JitterDistribution {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e: UnitError| de::Error::custom(e.full()))
    }
}

/// Packet loss model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// Every frame is lost independently with this probability.
    /// Scenario syntax: `loss = "0.1%"`.
    Bernoulli(LossProb),
    /// Gilbert-Elliott two-state Markov chain (bursty loss). Before each
    /// frame the chain moves good->bad with probability `p` or bad->good
    /// with probability `r`; the frame is then lost with the probability of
    /// the state it is in. Scenario syntax:
    /// `loss = { p = "1%", r = "25%", bad = "100%", good = "0%" }`.
    GilbertElliott {
        /// Good -> bad transition probability, per frame.
        p: LossProb,
        /// Bad -> good transition probability, per frame (mean burst
        /// length `1/r` frames).
        r: LossProb,
        /// Loss probability in the bad state (default 100%).
        bad: LossProb,
        /// Loss probability in the good state (default 0%).
        good: LossProb,
    },
}

impl Loss {
    /// A Gilbert-Elliott chain with the default state losses (bad state
    /// loses everything, good state nothing): Gilbert's original model.
    pub const fn gilbert(p: LossProb, r: LossProb) -> Loss {
        Loss::GilbertElliott {
            p,
            r,
            bad: LossProb(1.0),
            good: LossProb::ZERO,
        }
    }

    /// Long-run fraction of frames lost.
    pub fn mean(&self) -> f64 {
        match *self {
            Loss::Bernoulli(p) => p.0,
            Loss::GilbertElliott { p, r, bad, good } => {
                if p.0 + r.0 == 0.0 {
                    // The chain never leaves the good state it starts in.
                    good.0
                } else {
                    let pi_bad = p.0 / (p.0 + r.0);
                    pi_bad * bad.0 + (1.0 - pi_bad) * good.0
                }
            }
        }
    }

    /// True when no frame can ever be lost.
    pub fn is_zero(&self) -> bool {
        match *self {
            Loss::Bernoulli(p) => p.0 == 0.0,
            Loss::GilbertElliott { p, bad, good, .. } => {
                good.0 == 0.0 && (p.0 == 0.0 || bad.0 == 0.0)
            }
        }
    }
}

impl From<LossProb> for Loss {
    fn from(p: LossProb) -> Loss {
        Loss::Bernoulli(p)
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loss::Bernoulli(p) => write!(f, "{p}"),
            Loss::GilbertElliott { p, r, bad, good } => write!(
                f,
                "{{ p = \"{p}\", r = \"{r}\", bad = \"{bad}\", good = \"{good}\" }}"
            ),
        }
    }
}

/// Keys of the Gilbert-Elliott `loss` table.
pub(crate) const GE_KEYS: &[&str] = &["p", "r", "bad", "good"];

impl FromStr for Loss {
    type Err = UnitError;

    /// A probability (`0.1%`) or a Gilbert-Elliott inline table
    /// (`{ p = "1%", r = "25%" }`), as [`fmt::Display`] prints them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if !t.starts_with('{') {
            return t.parse::<LossProb>().map(Loss::Bernoulli);
        }
        #[derive(Deserialize)]
        struct Wrap {
            v: Loss,
        }
        toml::from_str::<Wrap>(&format!("v = {t}"))
            .map(|w| w.v)
            .map_err(|e| {
                UnitError::new(format!("invalid loss `{t}`: {}", e.message().trim_end())).help(
                    "write a probability such as `0.1%` or a Gilbert-Elliott table such as \
                     `{ p = \"1%\", r = \"25%\", bad = \"100%\", good = \"0%\" }`",
                )
            })
    }
}

impl Serialize for Loss {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Loss::Bernoulli(p) => p.serialize(s),
            Loss::GilbertElliott { p, r, bad, good } => {
                let mut m = s.serialize_struct("GilbertElliott", 4)?;
                m.serialize_field("p", p)?;
                m.serialize_field("r", r)?;
                m.serialize_field("bad", bad)?;
                m.serialize_field("good", good)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Loss {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loss;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a probability or a Gilbert-Elliott table { p, r, bad, good }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Loss, E> {
                v.parse::<LossProb>()
                    .map(Loss::Bernoulli)
                    .map_err(|e| E::custom(e.full()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Loss, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Loss, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Loss, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Loss, A::Error> {
                let (mut p, mut r, mut bad, mut good) = (None, None, None, None);
                while let Some(key) = map.next_key::<String>()? {
                    let slot = match key.as_str() {
                        "p" => &mut p,
                        "r" => &mut r,
                        "bad" => &mut bad,
                        "good" => &mut good,
                        other => return Err(de::Error::unknown_field(other, GE_KEYS)),
                    };
                    if slot.is_some() {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    *slot = Some(map.next_value::<LossProb>()?);
                }
                Ok(Loss::GilbertElliott {
                    p: p.ok_or_else(|| de::Error::missing_field("p"))?,
                    r: r.ok_or_else(|| de::Error::missing_field("r"))?,
                    bad: bad.unwrap_or(LossProb(1.0)),
                    good: good.unwrap_or(LossProb::ZERO),
                })
            }
        }
        d.deserialize_any(V)
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

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Netns => "netns",
            Target::P4rt => "p4rt",
            Target::Soft => "soft",
        })
    }
}

impl fmt::Display for RoutingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RoutingMode::Static => "static",
            RoutingMode::Controller => "controller",
            RoutingMode::Bgp => "bgp",
            RoutingMode::Manual => "manual",
        })
    }
}
