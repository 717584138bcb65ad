//! The validated model of a lab: what a scenario file means once it has been
//! parsed, resolved and checked. A value of these types exists only if it is
//! valid: every name is unique, every address comes from its pool, every link
//! joins two existing nodes.

pub mod check;
pub mod course;
pub mod experiment;
mod fabric;
mod instruments;
mod p4rt;
mod params;
mod routing;
mod target;
mod timeline;
mod topology;

use serde::Serialize;

pub use fabric::{
    Asn, Endpoint, ExternalPeer, ExternalPort, Fabric, Link, LinkClass, LinkId, Node, NodeId,
    Prefix, PrefixKind, Role,
};
pub use instruments::{
    Attach, Capture, Filter, FilterKind, Hook, Metrics, Mgmt, Mirror, link_directions,
};
pub use p4rt::{P4rtConfig, P4rtDevice, P4rtSwitch};
pub(crate) use params::GE_KEYS;
pub use params::{JitterDistribution, LinkParams, Loss, ParamProblem, Shaping};
pub use routing::{Agent, BGP_ONLY_KEYS, BgpTimers, RoutingConfig, RoutingMode};
pub use target::{EngineChoice, Target};
pub use timeline::{Action, ActionDisplay, Event, EventTarget};
pub use topology::{ClosParams, ClosShape, CoreLayer, HpnParams, TopologyKind};

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
    /// `[lab] engine_shards`: threads of the userspace link engine
    /// (`None`: one per core of the machine the lab runs on).
    pub engine_shards: Option<u16>,
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
