//! Port mapper and queue mapper: places a lab's virtual fabric onto physical
//! programmable switches (targets `p4rt` and `soft`) and says what a person
//! must cable, or refuses with the exact shortage. Pure: no I/O.
//!
//! # Model
//!
//! - A **physical switch** is `NAME=PORTSxSPEED` ([`PhysicalSwitch`], e.g.
//!   `s1=64x100G`). Every physical port has [`MapConfig::queues`] egress
//!   queues (default [`DEFAULT_QUEUES`]).
//! - Every **virtual switch** runs inside one physical switch; the
//!   pipeline's port mapper turns (physical ingress port, tag) into
//!   (virtual switch, virtual port). Hosts stay outside the switches
//!   (servers or namespaces).
//! - Every **virtual port** (a switch end of a virtual link) gets one egress
//!   queue on one physical port of the physical switch its virtual switch
//!   runs on, shaped to the virtual link's rate (the queue mapper), and a
//!   tag. The tag is the frame's tag on that physical port (e.g. an 802.1Q
//!   VLAN id): `queue + 1`, unique per physical port, the same at both ends
//!   of a virtual link.
//! - A virtual link between two virtual switches on the **same** physical
//!   switch rides a **loopback cable**: a pair of ports of that switch
//!   cabled to each other. One virtual link uses one queue on each of the
//!   two ports (one per direction); many virtual links share a pair.
//! - A virtual link between virtual switches on **different** physical
//!   switches rides an **inter-switch cable** (one port on each switch),
//!   shared the same way.
//! - A **host link** uses a host-facing port of the physical switch of its
//!   virtual switch; host links share host ports, one queue each.
//! - **Capacity rules**, per physical port: at most `queues` virtual links,
//!   and the sum of their rates at most the port speed. A link without a
//!   `rate` counts as [`MapConfig::default_rate`] (default
//!   [`DEFAULT_RATE`]). A virtual link is never split across ports, so a
//!   link faster than the port is refused. MTU is not a constraint.
//!
//! # Packing
//!
//! The virtual links of each resource class (loopback pairs of a switch,
//! cables of a switch pair, host ports of a switch) are packed first-fit
//! decreasing by rate (ties in link order) up to both limits. Ports are
//! numbered from 1 on each switch: loopback pairs first, then inter-switch
//! cables (by peer switch), then host ports.
//!
//! # Partition across several physical switches
//!
//! Virtual switches are grouped into atoms that stay together: a fat-tree
//! pod or an HPN segment (nodes with the same `pod`); every other switch
//! (cores, spines, aggregation switches of HPN planes, leaves) is an atom of
//! its own. A virtual switch weighs the physical ports its virtual ports
//! need (`max(1 / queues, rate / speed)` each, with the slowest physical
//! speed). The partitioner ([`crate::partition`], which also places a lab
//! on machines) places atoms heaviest first, on the physical switch they
//! have the most links to, among those that stay within 5% above their
//! share of the total weight (shares in proportion to port counts), ties
//! to the least loaded switch: pods spread round-robin, cores and spines
//! fill in next to the pods they connect to and spread once a switch is at
//! its share. Then single virtual switches move, one at a time, to a
//! switch where more of their links end whenever that keeps the balance
//! (Kernighan-Lin style refinement, until nothing moves). Everything is
//! ordered by ids: the same input gives the same mapping.
//!
//! # Table estimates
//!
//! Per physical switch: port-mapper entries, one per virtual port; LPM
//! entries, for each virtual switch one route per fabric prefix plus one
//! host /32 per host link (an estimate that does not run the routing
//! computation); ECMP groups, one per virtual switch with two or more links
//! to a higher tier (one per custom switch with two or more switch links),
//! plus one per neighbour reached over parallel links.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::model::{Fabric, LinkId, Role};
use crate::partition::{self, Atom, Problem};
use crate::units::Rate;

/// Egress queues per physical port when none is given.
pub const DEFAULT_QUEUES: u32 = 32;

/// Most queues per port: tags are `queue + 1` and must stay valid VLAN ids.
pub const MAX_QUEUES: u32 = 4094;

/// Most ports of one physical switch.
pub const MAX_PORTS: u32 = 4096;

/// Rate of a virtual link that declares none.
pub const DEFAULT_RATE: Rate = Rate::from_gbit(1);

/// Extra switches tried when looking for a configuration that fits.
const MAX_EXTRA_SWITCHES: usize = 32;

/// A physical programmable switch: `NAME=PORTSxSPEED`, e.g. `s1=64x100G`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhysicalSwitch {
    /// Its name: 1-32 bytes of `[A-Za-z0-9_-]`.
    pub name: String,
    /// Number of physical ports, 1 to [`MAX_PORTS`].
    pub ports: u32,
    /// Speed of every port.
    pub speed: Rate,
}

impl PhysicalSwitch {
    /// A switch named `name` with `ports` ports of `speed`.
    pub fn new(name: impl Into<String>, ports: u32, speed: Rate) -> Self {
        PhysicalSwitch {
            name: name.into(),
            ports,
            speed,
        }
    }
}

/// Speed in the `--switch` syntax: `100G`, `2500M`.
fn short_speed(speed: Rate) -> String {
    let bps = speed.bits_per_sec();
    if bps.is_multiple_of(1_000_000_000) {
        format!("{}G", bps / 1_000_000_000)
    } else if bps.is_multiple_of(1_000_000) {
        format!("{}M", bps / 1_000_000)
    } else {
        speed.to_string()
    }
}

/// Prints the `--switch` syntax: `s1=64x100G`.
impl fmt::Display for PhysicalSwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={}x{}",
            self.name,
            self.ports,
            short_speed(self.speed)
        )
    }
}

impl FromStr for PhysicalSwitch {
    type Err = MapError;

    /// Parses `NAME=PORTSxSPEED`; the speed unit is `G` or `M`
    /// (case-insensitive): `s1=64x100G`, `tofino2=32x400g`, `lab=48x25000M`.
    fn from_str(s: &str) -> Result<Self, MapError> {
        let bad = |reason: String| MapError::BadSwitch {
            spec: s.to_owned(),
            reason,
        };
        let (name, rest) = s
            .split_once('=')
            .ok_or_else(|| bad("no `=` between the name and the ports".into()))?;
        if name.is_empty() || name.len() > 32 {
            return Err(bad("the name must be 1-32 bytes".into()));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(bad(format!(
                "`{c}` in the name: use letters, digits, `-` and `_`"
            )));
        }
        let (ports, speed) = rest
            .split_once(['x', 'X'])
            .ok_or_else(|| bad("no `x` between the port count and the speed".into()))?;
        let ports: u32 = ports
            .parse()
            .map_err(|_| bad(format!("port count `{ports}` is not a whole number")))?;
        if ports == 0 || ports > MAX_PORTS {
            return Err(bad(format!(
                "{ports} ports is out of range: give 1 to {MAX_PORTS}"
            )));
        }
        let digits = speed.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let unit = &speed[digits.len()..];
        let factor = match unit {
            "G" | "g" => 1_000_000_000u64,
            "M" | "m" => 1_000_000,
            "" => return Err(bad(format!("speed `{speed}` has no unit: write G or M"))),
            _ => return Err(bad(format!("unknown speed unit `{unit}`: write G or M"))),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| bad(format!("speed `{speed}` is not a whole number of G or M")))?;
        let bps = n
            .checked_mul(factor)
            .filter(|&b| b > 0)
            .ok_or_else(|| bad(format!("speed `{speed}` is out of range")))?;
        Ok(PhysicalSwitch::new(
            name,
            ports,
            Rate::from_bits_per_sec(bps),
        ))
    }
}

/// What the mapper maps onto.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapConfig {
    /// The physical switches, in the order given.
    pub switches: Vec<PhysicalSwitch>,
    /// Egress queues per physical port, 1 to [`MAX_QUEUES`].
    pub queues: u32,
    /// Rate of virtual links that declare none.
    pub default_rate: Rate,
    /// Every host link gets a host port of its own, untagged (tag 0), for
    /// hosts that know nothing of tags (namespaces on the `soft` target,
    /// servers cabled straight to the switch).
    pub untagged_hosts: bool,
}

impl MapConfig {
    /// These switches with [`DEFAULT_QUEUES`] and [`DEFAULT_RATE`].
    pub fn new(switches: Vec<PhysicalSwitch>) -> Self {
        MapConfig {
            switches,
            queues: DEFAULT_QUEUES,
            default_rate: DEFAULT_RATE,
            untagged_hosts: false,
        }
    }

    fn check(&self) -> Result<(), MapError> {
        if self.switches.is_empty() {
            return Err(MapError::NoSwitch);
        }
        for (i, s) in self.switches.iter().enumerate() {
            if self.switches[..i].iter().any(|o| o.name == s.name) {
                return Err(MapError::DuplicateSwitch(s.name.clone()));
            }
            if s.ports == 0 || s.speed.bits_per_sec() == 0 {
                return Err(MapError::BadSwitch {
                    spec: s.to_string(),
                    reason: "a switch needs at least one port and a speed above zero".into(),
                });
            }
        }
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(MapError::BadQueues {
                queues: self.queues,
            });
        }
        if self.default_rate.bits_per_sec() == 0 {
            return Err(MapError::ZeroDefaultRate);
        }
        Ok(())
    }
}

/// Why a fabric cannot be mapped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MapError {
    /// A malformed physical switch.
    #[error(
        "invalid switch `{spec}`: {reason}; write NAME=PORTSxSPEED, e.g. s1=64x100G or s2=32x400G"
    )]
    BadSwitch {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No physical switch at all.
    #[error("no physical switch given: pass at least one, e.g. --switch s1=64x100G")]
    NoSwitch,
    /// Two switches with one name.
    #[error("physical switch `{0}` is given twice: give every switch its own name")]
    DuplicateSwitch(String),
    /// Queues per port out of range.
    #[error("{queues} queues per port is out of range: give 1 to {MAX_QUEUES}")]
    BadQueues {
        /// The number given.
        queues: u32,
    },
    /// A zero default rate.
    #[error("the default rate must be above zero, e.g. 1gbit")]
    ZeroDefaultRate,
    /// A virtual link faster than the physical ports it would ride.
    #[error(
        "link `{link}` runs at {rate} but the ports of {switch} run at {speed}: a virtual link \
         is never split across physical ports; lower its rate or use faster switches"
    )]
    LinkTooFast {
        /// The virtual link.
        link: String,
        /// Its rate.
        rate: Rate,
        /// The physical switch (the slower one of a cable).
        switch: String,
        /// Its port speed.
        speed: Rate,
    },
    /// The fabric needs more than the switches have.
    #[error("{0}")]
    DoesNotFit(Refusal),
}

/// Which limit fills a switch's ports first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// The sum of the rates.
    Bandwidth,
    /// The number of queues per port.
    Queues,
}

/// A physical switch that would need more ports than it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shortage {
    /// The physical switch.
    pub switch: String,
    /// Ports the mapping needs on it.
    pub needed: u32,
    /// Ports it has.
    pub available: u32,
    /// Loopback pairs (two ports each).
    pub loopback_pairs: u32,
    /// Host-facing ports.
    pub host_ports: u32,
    /// Inter-switch cable ends.
    pub inter_switch_ports: u32,
    /// What fills the ports first.
    pub bound: Bound,
}

impl fmt::Display for Shortage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "needs {} physical ports on {} ({} available): {} for {} loopback pairs, {} host \
             ports, {} inter-switch cables",
            self.needed,
            self.switch,
            self.available,
            self.loopback_pairs * 2,
            self.loopback_pairs,
            self.host_ports,
            self.inter_switch_ports
        )
    }
}

/// A refusal: every switch that is short, and switches that would make the
/// fabric fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The switches that are short, in the order given.
    pub shortages: Vec<Shortage>,
    /// Switches to add, copies of the largest one given, with which the
    /// fabric fits (`None`: not within 32 more switches).
    pub add: Option<Vec<PhysicalSwitch>>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the fabric does not fit: ")?;
        for (i, s) in self.shortages.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{s}")?;
        }
        match &self.add {
            Some(add) => {
                let flags: Vec<String> = add.iter().map(|s| format!("--switch {s}")).collect();
                if add.len() == 1 {
                    write!(f, "; add a switch ({})", flags[0])?;
                } else {
                    write!(f, "; add {} switches ({})", add.len(), flags.join(" "))?;
                }
            }
            None => {
                f.write_str("; add larger switches (32 more of the largest given are not enough)")?;
            }
        }
        let bandwidth = self.shortages.iter().any(|s| s.bound == Bound::Bandwidth);
        let queues = self.shortages.iter().any(|s| s.bound == Bound::Queues);
        if bandwidth {
            f.write_str(" or lower link rates")?;
        }
        if queues {
            f.write_str(if bandwidth { ", or" } else { " or" })?;
            f.write_str(" give more queues per port (--queues) if the switches have them")?;
        }
        Ok(())
    }
}

/// What a physical port carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortKind {
    /// One end of a loopback cable (both ends on one switch).
    Loopback,
    /// One end of a cable between two physical switches.
    InterSwitch,
    /// A port facing hosts.
    Host,
}

impl PortKind {
    /// The name used in tables.
    pub fn as_str(self) -> &'static str {
        match self {
            PortKind::Loopback => "loopback",
            PortKind::InterSwitch => "inter-switch",
            PortKind::Host => "host",
        }
    }
}

impl fmt::Display for PortKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A physical port: switch name and port number (from 1).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PortRef {
    /// Physical switch.
    pub switch: String,
    /// Port number, from 1.
    pub port: u32,
}

/// `s1 port 3`.
impl fmt::Display for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} port {}", self.switch, self.port)
    }
}

/// A cable a person must connect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cable {
    /// [`PortKind::Loopback`] or [`PortKind::InterSwitch`].
    pub kind: PortKind,
    /// One end.
    pub a: PortRef,
    /// The other end.
    pub b: PortRef,
    /// Virtual links it carries.
    pub virtual_links: u32,
    /// Sum of their rates (per direction).
    pub load: Rate,
}

/// A host-facing port and the host links it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPort {
    /// The port.
    pub port: PortRef,
    /// Host links it carries.
    pub host_links: u32,
    /// Sum of their rates (switch to hosts).
    pub load: Rate,
    /// The hosts, in link order.
    pub hosts: Vec<String>,
}

/// Where one virtual port runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualPort {
    /// Virtual switch.
    pub virtual_switch: String,
    /// Virtual port: its interface name in the virtual switch.
    pub virtual_port: String,
    /// Virtual link.
    pub link: String,
    /// What the physical port carries.
    pub kind: PortKind,
    /// Physical switch.
    pub switch: String,
    /// Physical port, from 1.
    pub port: u32,
    /// Tag on the physical port: `queue + 1`, or 0 (untagged) on host ports
    /// of [`MapConfig::untagged_hosts`].
    pub tag: u32,
    /// Egress queue on the physical port, from 0.
    pub queue: u32,
    /// Shaping rate of the queue: the link's rate.
    pub rate: Rate,
    /// True when the link declares no rate ([`MapConfig::default_rate`]).
    pub default_rate: bool,
}

/// Estimated table entries of a physical switch's pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableEstimate {
    /// Port-mapper entries: one per virtual port.
    pub port_mapper: u32,
    /// LPM entries: per virtual switch, one per fabric prefix plus one per
    /// host link.
    pub lpm: u64,
    /// ECMP groups.
    pub ecmp_groups: u32,
}

/// What one physical switch carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchUsage {
    /// The physical switch.
    pub name: String,
    /// Its ports.
    pub ports: u32,
    /// Its port speed.
    pub speed: Rate,
    /// Virtual switches running on it.
    pub virtual_switches: u32,
    /// Ports used: `2 * loopback_pairs + inter_switch_ports + host_ports`.
    pub ports_used: u32,
    /// Ports left.
    pub ports_free: u32,
    /// Loopback pairs.
    pub loopback_pairs: u32,
    /// Inter-switch cable ends.
    pub inter_switch_ports: u32,
    /// Host-facing ports.
    pub host_ports: u32,
    /// Queues used, over all ports (one per virtual port).
    pub queues_used: u32,
    /// Queues used on the busiest port.
    pub max_port_queues: u32,
    /// Egress load of the busiest port.
    pub max_port_load: Rate,
    /// Egress load over all ports.
    pub total_load: Rate,
    /// Estimated table entries.
    pub tables: TableEstimate,
}

/// Which physical switch a virtual switch runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Virtual switch.
    pub virtual_switch: String,
    /// Physical switch.
    pub switch: String,
}

/// A virtual fabric mapped onto physical switches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// Egress queues per physical port.
    pub queues: u32,
    /// Rate of links that declare none.
    pub default_rate: Rate,
    /// Per physical switch, in the order given.
    pub switches: Vec<SwitchUsage>,
    /// Virtual links between different physical switches.
    pub inter_switch_links: u32,
    /// Cables to connect: loopback pairs, then inter-switch cables.
    pub cables: Vec<Cable>,
    /// Host-facing ports.
    pub host_ports: Vec<HostPort>,
    /// Every virtual switch's physical switch, in node order.
    pub placement: Vec<Placement>,
    /// Every virtual port, by virtual switch (node order) and port order.
    pub ports: Vec<VirtualPort>,
}

/// Maps `fabric` onto `config`'s physical switches, or says exactly what is
/// short. Deterministic: the same input gives the same mapping.
pub fn map(fabric: &Fabric, config: &MapConfig) -> Result<Mapping, MapError> {
    config.check()?;
    let rates: Vec<(Rate, bool)> = fabric
        .links
        .iter()
        .map(|l| match l.params.rate {
            Some(r) => (r, false),
            None => (config.default_rate, true),
        })
        .collect();
    let fastest = config
        .switches
        .iter()
        .max_by_key(|s| s.speed)
        .expect("checked: at least one switch");
    for (link, &(rate, _)) in fabric.links.iter().zip(&rates) {
        if rate > fastest.speed {
            return Err(MapError::LinkTooFast {
                link: link.name.clone(),
                rate,
                switch: fastest.name.clone(),
                speed: fastest.speed,
            });
        }
    }
    let layout = layout(fabric, config, &rates)?;
    let shortages = layout.shortages(fabric, config, &rates);
    if !shortages.is_empty() {
        return Err(MapError::DoesNotFit(Refusal {
            shortages,
            add: suggest(fabric, config, &rates),
        }));
    }
    Ok(layout.mapping(fabric, config, &rates))
}

/// A resource class whose links share ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    /// Loopback pairs of a switch.
    Loop(usize),
    /// Cables between two switches (lower index first).
    Cable(usize, usize),
    /// Host ports of a switch.
    Host(usize),
}

/// Links sharing one port (or one pair / one cable), in slot order.
#[derive(Debug, Clone, Default)]
struct Bin {
    links: Vec<LinkId>,
    load: u64,
}

#[derive(Debug)]
struct Layout {
    /// Physical switch of each node (`usize::MAX` for hosts).
    place: Vec<usize>,
    /// Bins of each group.
    groups: BTreeMap<Group, Vec<Bin>>,
}

/// Partitions and packs; errors only on a link faster than its ports.
fn layout(fabric: &Fabric, config: &MapConfig, rates: &[(Rate, bool)]) -> Result<Layout, MapError> {
    let place = partition(fabric, config, rates);
    let mut members: BTreeMap<Group, Vec<LinkId>> = BTreeMap::new();
    for link in &fabric.links {
        let [a, b] = &link.ends;
        let (pa, pb) = (place[a.node.0 as usize], place[b.node.0 as usize]);
        let group = match (pa == usize::MAX, pb == usize::MAX) {
            // The parser refuses links between two hosts.
            (true, true) => continue,
            (true, false) => Group::Host(pb),
            (false, true) => Group::Host(pa),
            (false, false) if pa == pb => Group::Loop(pa),
            (false, false) => Group::Cable(pa.min(pb), pa.max(pb)),
        };
        members.entry(group).or_default().push(link.id);
    }
    let mut groups = BTreeMap::new();
    for (group, mut links) in members {
        let (speed, slowest) = match group {
            Group::Loop(p) | Group::Host(p) => (config.switches[p].speed, p),
            Group::Cable(p, q) => {
                let (sp, sq) = (config.switches[p].speed, config.switches[q].speed);
                if sq < sp { (sq, q) } else { (sp, p) }
            }
        };
        // First-fit decreasing by rate; the sort is stable, so equal rates
        // keep link order.
        links.sort_by_key(|l| Reverse(rates[l.0 as usize].0));
        let per_port = match group {
            Group::Host(_) if config.untagged_hosts => 1,
            _ => config.queues,
        };
        let mut bins: Vec<Bin> = Vec::new();
        for l in links {
            let rate = rates[l.0 as usize].0;
            if rate > speed {
                return Err(MapError::LinkTooFast {
                    link: fabric.link(l).name.clone(),
                    rate,
                    switch: config.switches[slowest].name.clone(),
                    speed,
                });
            }
            let fits = |b: &Bin| {
                (b.links.len() as u32) < per_port
                    && b.load + rate.bits_per_sec() <= speed.bits_per_sec()
            };
            match bins.iter_mut().find(|b| fits(b)) {
                Some(b) => {
                    b.links.push(l);
                    b.load += rate.bits_per_sec();
                }
                None => bins.push(Bin {
                    links: vec![l],
                    load: rate.bits_per_sec(),
                }),
            }
        }
        // Slots (queues, tags) in link order inside each port.
        for b in &mut bins {
            b.links.sort();
        }
        groups.insert(group, bins);
    }
    Ok(Layout { place, groups })
}

impl Layout {
    /// Ports of switch `p`: (loopback pairs, cable ends, host ports).
    fn port_counts(&self, p: usize) -> (u32, u32, u32) {
        let mut counts = (0, 0, 0);
        for (group, bins) in &self.groups {
            let n = bins.len() as u32;
            match *group {
                Group::Loop(q) if q == p => counts.0 += n,
                Group::Cable(q, r) if q == p || r == p => counts.1 += n,
                Group::Host(q) if q == p => counts.2 += n,
                _ => {}
            }
        }
        counts
    }

    fn shortages(
        &self,
        fabric: &Fabric,
        config: &MapConfig,
        rates: &[(Rate, bool)],
    ) -> Vec<Shortage> {
        let mut out = Vec::new();
        for (p, sw) in config.switches.iter().enumerate() {
            let (pairs, cables, hosts) = self.port_counts(p);
            let needed = 2 * pairs + cables + hosts;
            if needed <= sw.ports {
                continue;
            }
            // Which limit fills ports first: ports by queue count against
            // ports by bandwidth, over the virtual ports on this switch.
            let (mut vports, mut bits) = (0u128, 0u128);
            for link in &fabric.links {
                for end in &link.ends {
                    if self.place[end.node.0 as usize] == p {
                        vports += 1;
                        bits += u128::from(rates[link.id.0 as usize].0.bits_per_sec());
                    }
                }
            }
            let bound = if bits * u128::from(config.queues)
                >= vports * u128::from(sw.speed.bits_per_sec())
            {
                Bound::Bandwidth
            } else {
                Bound::Queues
            };
            out.push(Shortage {
                switch: sw.name.clone(),
                needed,
                available: sw.ports,
                loopback_pairs: pairs,
                host_ports: hosts,
                inter_switch_ports: cables,
                bound,
            });
        }
        out
    }

    fn mapping(&self, fabric: &Fabric, config: &MapConfig, rates: &[(Rate, bool)]) -> Mapping {
        let n = config.switches.len();
        let name = |p: usize| config.switches[p].name.clone();
        let mut next_port = vec![1u32; n];
        let mut take = |p: usize| {
            let port = next_port[p];
            next_port[p] += 1;
            port
        };
        // Per link end (link, end index): (kind, switch, port, slot).
        let mut at: BTreeMap<(LinkId, usize), (PortKind, usize, u32, u32)> = BTreeMap::new();
        let mut cables = Vec::new();
        let mut host_ports = Vec::new();
        // (switch, port) -> (queues, load) for per-port maxima.
        let mut port_use: BTreeMap<(usize, u32), (u32, u64)> = BTreeMap::new();
        for (group, bins) in &self.groups {
            for bin in bins {
                let count = bin.links.len() as u32;
                match *group {
                    Group::Loop(p) => {
                        let (a, b) = (take(p), take(p));
                        for (slot, &l) in bin.links.iter().enumerate() {
                            at.insert((l, 0), (PortKind::Loopback, p, a, slot as u32));
                            at.insert((l, 1), (PortKind::Loopback, p, b, slot as u32));
                        }
                        port_use.insert((p, a), (count, bin.load));
                        port_use.insert((p, b), (count, bin.load));
                        cables.push(Cable {
                            kind: PortKind::Loopback,
                            a: PortRef {
                                switch: name(p),
                                port: a,
                            },
                            b: PortRef {
                                switch: name(p),
                                port: b,
                            },
                            virtual_links: count,
                            load: Rate::from_bits_per_sec(bin.load),
                        });
                    }
                    Group::Cable(p, q) => {
                        let (a, b) = (take(p), take(q));
                        for (slot, &l) in bin.links.iter().enumerate() {
                            let link = fabric.link(l);
                            for (i, end) in link.ends.iter().enumerate() {
                                let (sw, port) = if self.place[end.node.0 as usize] == p {
                                    (p, a)
                                } else {
                                    (q, b)
                                };
                                at.insert((l, i), (PortKind::InterSwitch, sw, port, slot as u32));
                            }
                        }
                        port_use.insert((p, a), (count, bin.load));
                        port_use.insert((q, b), (count, bin.load));
                        cables.push(Cable {
                            kind: PortKind::InterSwitch,
                            a: PortRef {
                                switch: name(p),
                                port: a,
                            },
                            b: PortRef {
                                switch: name(q),
                                port: b,
                            },
                            virtual_links: count,
                            load: Rate::from_bits_per_sec(bin.load),
                        });
                    }
                    Group::Host(p) => {
                        let port = take(p);
                        let mut hosts = Vec::new();
                        for (slot, &l) in bin.links.iter().enumerate() {
                            let link = fabric.link(l);
                            for (i, end) in link.ends.iter().enumerate() {
                                if self.place[end.node.0 as usize] == p {
                                    at.insert((l, i), (PortKind::Host, p, port, slot as u32));
                                } else {
                                    hosts.push(fabric.node(end.node).name.clone());
                                }
                            }
                        }
                        port_use.insert((p, port), (count, bin.load));
                        host_ports.push(HostPort {
                            port: PortRef {
                                switch: name(p),
                                port,
                            },
                            host_links: count,
                            load: Rate::from_bits_per_sec(bin.load),
                            hosts,
                        });
                    }
                }
            }
        }
        // Loopback cables first, then inter-switch cables, each by port.
        cables.sort_by(|x, y| (x.kind, &x.a, &x.b).cmp(&(y.kind, &y.a, &y.b)));
        host_ports.sort_by(|x, y| x.port.cmp(&y.port));

        let mut ports = Vec::new();
        let mut placement = Vec::new();
        for node in fabric.switches() {
            placement.push(Placement {
                virtual_switch: node.name.clone(),
                switch: name(self.place[node.id.0 as usize]),
            });
            for &l in &node.links {
                let link = fabric.link(l);
                for (i, end) in link.ends.iter().enumerate() {
                    if end.node != node.id {
                        continue;
                    }
                    let Some(&(kind, sw, port, slot)) = at.get(&(l, i)) else {
                        continue;
                    };
                    let (rate, default_rate) = rates[l.0 as usize];
                    ports.push(VirtualPort {
                        virtual_switch: node.name.clone(),
                        virtual_port: end.ifname.clone(),
                        link: link.name.clone(),
                        kind,
                        switch: name(sw),
                        port,
                        tag: if kind == PortKind::Host && config.untagged_hosts {
                            0
                        } else {
                            slot + 1
                        },
                        queue: slot,
                        rate,
                        default_rate,
                    });
                }
            }
        }

        let mut switches = Vec::new();
        for (p, sw) in config.switches.iter().enumerate() {
            let (pairs, cable_ends, hosts) = self.port_counts(p);
            let used = 2 * pairs + cable_ends + hosts;
            let mut queues_used = 0;
            let (mut max_q, mut max_load, mut total) = (0, 0, 0);
            for (_, &(q, load)) in port_use.range((p, 0)..(p + 1, 0)) {
                queues_used += q;
                max_q = max_q.max(q);
                max_load = max_load.max(load);
                total += load;
            }
            let mut tables = TableEstimate {
                port_mapper: queues_used,
                lpm: 0,
                ecmp_groups: 0,
            };
            let mut vswitches = 0;
            for node in fabric.switches() {
                if self.place[node.id.0 as usize] != p {
                    continue;
                }
                vswitches += 1;
                let (lpm, ecmp) = estimate(fabric, node.id.0 as usize);
                tables.lpm += lpm;
                tables.ecmp_groups += ecmp;
            }
            switches.push(SwitchUsage {
                name: sw.name.clone(),
                ports: sw.ports,
                speed: sw.speed,
                virtual_switches: vswitches,
                ports_used: used,
                ports_free: sw.ports - used,
                loopback_pairs: pairs,
                inter_switch_ports: cable_ends,
                host_ports: hosts,
                queues_used,
                max_port_queues: max_q,
                max_port_load: Rate::from_bits_per_sec(max_load),
                total_load: Rate::from_bits_per_sec(total),
                tables,
            });
        }
        let inter_switch_links = self
            .groups
            .iter()
            .filter(|(g, _)| matches!(g, Group::Cable(..)))
            .flat_map(|(_, bins)| bins)
            .map(|b| b.links.len() as u32)
            .sum();
        Mapping {
            queues: config.queues,
            default_rate: config.default_rate,
            switches,
            inter_switch_links,
            cables,
            host_ports,
            placement,
            ports,
        }
    }
}

/// Tier of a role, for "upward" links in the ECMP estimate.
fn tier(role: Role) -> u8 {
    match role {
        Role::Host => 0,
        Role::Tor | Role::Edge | Role::Leaf | Role::Switch => 1,
        Role::Agg | Role::Spine => 2,
        Role::Core => 3,
    }
}

/// (LPM entries, ECMP groups) of one virtual switch (see the module docs).
fn estimate(fabric: &Fabric, node: usize) -> (u64, u32) {
    let me = &fabric.nodes[node];
    let mut host_links = 0u64;
    let mut up = 0u32;
    let mut switch_links = 0u32;
    let mut per_peer: BTreeMap<u32, u32> = BTreeMap::new();
    for (_, _, remote) in fabric.ports(me.id) {
        let peer = fabric.node(remote.node);
        if peer.role == Role::Host {
            host_links += 1;
            continue;
        }
        switch_links += 1;
        if tier(peer.role) > tier(me.role) {
            up += 1;
        }
        *per_peer.entry(peer.id.0).or_default() += 1;
    }
    let spread = if me.role == Role::Switch {
        switch_links
    } else {
        up
    };
    let parallel = per_peer.values().filter(|&&n| n >= 2).count() as u32;
    let lpm = fabric.prefixes.len() as u64 + host_links;
    (lpm, u32::from(spread >= 2) + parallel)
}

/// Physical switch of every node (`usize::MAX` for hosts): the
/// partitioner ([`crate::partition`]) with one dimension, the physical
/// ports a virtual switch needs, and shares in proportion to port counts.
fn partition(fabric: &Fabric, config: &MapConfig, rates: &[(Rate, bool)]) -> Vec<usize> {
    let q = f64::from(config.queues);
    let speed = config
        .switches
        .iter()
        .map(|s| s.speed.bits_per_sec())
        .min()
        .expect("checked: at least one switch") as f64;
    // Weight: physical ports the node's virtual ports need.
    let mut weights = vec![0.0f64; fabric.nodes.len()];
    for node in fabric.switches() {
        weights[node.id.0 as usize] = node
            .links
            .iter()
            .map(|&l| {
                let to_host = fabric
                    .link(l)
                    .ends_from(node.id)
                    .is_some_and(|(_, remote)| !fabric.node(remote.node).role.is_switch());
                if to_host && config.untagged_hosts {
                    1.0
                } else {
                    (1.0 / q).max(rates[l.0 as usize].0.bits_per_sec() as f64 / speed)
                }
            })
            .sum();
    }
    // Switch neighbours of every node, one entry per link.
    let neighbours = fabric
        .nodes
        .iter()
        .map(|me| {
            me.links
                .iter()
                .filter_map(|&l| {
                    let (_, remote) = fabric.link(l).ends_from(me.id)?;
                    let peer = fabric.node(remote.node);
                    peer.role.is_switch().then_some(peer.id.0 as usize)
                })
                .collect()
        })
        .collect();
    let mut atoms: BTreeMap<(u8, u32), Vec<usize>> = BTreeMap::new();
    for node in fabric.switches() {
        // An HPN segment's ToRs, or a fat-tree pod's switches, stay
        // together; an HPN pod's aggregation switches (on planes) do not.
        let key = match (node.segment, node.pod, node.plane) {
            (Some(segment), _, _) => (0, segment),
            (None, Some(pod), None) => (1, pod),
            _ => (2, node.id.0),
        };
        atoms.entry(key).or_default().push(node.id.0 as usize);
    }
    let problem = Problem {
        dimensions: 1,
        weights,
        neighbours,
        atoms: atoms.into_values().map(Atom::whole).collect(),
        // Refinement moves single virtual switches.
        pieces: fabric.switches().map(|n| vec![n.id.0 as usize]).collect(),
        keep_parts: false,
    };
    let shares: Vec<f64> = config.switches.iter().map(|s| f64::from(s.ports)).collect();
    partition::partition(&problem, &shares)
        .into_iter()
        .map(|p| p.unwrap_or(usize::MAX))
        .collect()
}

/// Copies of the largest switch that make the fabric fit, if within
/// [`MAX_EXTRA_SWITCHES`].
fn suggest(
    fabric: &Fabric,
    config: &MapConfig,
    rates: &[(Rate, bool)],
) -> Option<Vec<PhysicalSwitch>> {
    let largest = config
        .switches
        .iter()
        .max_by_key(|s| {
            (
                u128::from(s.ports) * u128::from(s.speed.bits_per_sec()),
                Reverse(&s.name),
            )
        })?
        .clone();
    let mut add = Vec::new();
    let mut i = 1u32;
    for _ in 0..MAX_EXTRA_SWITCHES {
        let name = loop {
            let name = format!("s{i}");
            i += 1;
            if !config.switches.iter().any(|s| s.name == name) {
                break name;
            }
        };
        add.push(PhysicalSwitch::new(name, largest.ports, largest.speed));
        let mut bigger = config.clone();
        bigger.switches.extend(add.iter().cloned());
        if let Ok(layout) = layout(fabric, &bigger, rates)
            && layout.shortages(fabric, &bigger, rates).is_empty()
        {
            return Some(add);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_switches() {
        let s: PhysicalSwitch = "s1=64x100G".parse().unwrap();
        assert_eq!(s, PhysicalSwitch::new("s1", 64, Rate::from_gbit(100)));
        assert_eq!(s.to_string(), "s1=64x100G");
        let s: PhysicalSwitch = "tof_2=32X400g".parse().unwrap();
        assert_eq!(s.speed, Rate::from_gbit(400));
        let s: PhysicalSwitch = "lab=48x2500M".parse().unwrap();
        assert_eq!(s.to_string(), "lab=48x2500M");
        for bad in [
            "s1",
            "=64x100G",
            "s1=64",
            "s1=x100G",
            "s1=0x100G",
            "s1=64x100",
            "s1=64x100T",
            "s 1=64x100G",
            "s1=64x0G",
            "s1=64x1.5G",
        ] {
            let e = bad.parse::<PhysicalSwitch>().unwrap_err();
            assert!(e.to_string().contains("e.g. s1=64x100G"), "{bad}: {e}");
        }
    }
}
