//! What `turbonet validate` prints about a lab: counts, address ranges, ASN
//! ranges and oversubscription per switch tier.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::Serialize;

use crate::model::*;
use crate::units::Rate;

/// Summary of a validated lab.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Lab name.
    pub lab: String,
    /// Topology kind and parameters.
    pub topology: TopologyKind,
    /// Target.
    pub target: Target,
    /// Routing mode.
    pub routing: RoutingMode,
    /// All nodes.
    pub nodes: usize,
    /// Switches (every role but host).
    pub switches: usize,
    /// Hosts, including backup hosts.
    pub hosts: usize,
    /// HPN backup hosts.
    pub backup_hosts: usize,
    /// All links.
    pub links: usize,
    /// Links with a host end.
    pub host_links: usize,
    /// Switch-to-switch links.
    pub fabric_links: usize,
    /// Links that need an impairment engine (rate, delay, jitter, loss or
    /// queue set).
    pub impaired_links: usize,
    /// Nodes per role, in tier order (host, tor, edge, leaf, agg, spine,
    /// core, switch); roles without nodes are left out.
    pub nodes_by_role: Vec<RoleCount>,
    /// Links per class, in tier order.
    pub links_by_class: Vec<ClassCount>,
    /// Switch loopbacks.
    pub loopbacks: Option<AddrRange>,
    /// Addresses used on switch-to-switch links (/31s).
    pub fabric_addrs: Option<AddrRange>,
    /// Host subnets.
    pub host_subnets: Option<SubnetRange>,
    /// ASNs per switch role.
    pub asns: Vec<AsnRange>,
    /// Oversubscription of every switch tier that has both downlinks and
    /// uplinks, bottom up.
    pub oversubscription: Vec<Oversubscription>,
    /// Every pod, in order (fabrics with pods: fat-tree, HPN).
    pub pods: Vec<PodSummary>,
    /// How full the busiest switch of each role with a declared chip is.
    pub chips: Vec<ChipUse>,
    /// What the scenario's rates, queues and ECN thresholds are divided by
    /// (`[lab] rate_scale`; 1: as declared).
    pub rate_scale: u32,
    /// Every prefix routing must make reachable.
    pub prefixes: usize,
    /// External (hardware-in-the-loop) ports.
    pub externals: usize,
}

/// One pod of a fabric: its switches (the core layer belongs to no pod),
/// hosts, host subnets and ASNs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodSummary {
    /// The pod's number.
    pub pod: u32,
    /// Its switches.
    pub switches: usize,
    /// Its hosts, backups included.
    pub hosts: usize,
    /// Its host subnets.
    pub host_subnets: Option<SubnetRange>,
    /// Lowest and highest ASN of its switches.
    pub asns: Option<[Asn; 2]>,
}

/// The busiest switch of a role on its declared chip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChipUse {
    /// The role.
    pub role: Role,
    /// Its chip.
    pub chip: crate::chip::Chip,
    /// Switches of the role.
    pub switches: usize,
    /// The most chip ports a switch of the role takes.
    pub ports: u32,
    /// The most bandwidth a switch of the role needs, bit/s.
    pub bandwidth: u64,
}

/// How many nodes have a role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoleCount {
    /// The role.
    pub role: Role,
    /// Nodes with it.
    pub count: usize,
}

/// How many links are in a class, and their rates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassCount {
    /// Class name as in `[links.<class>]`, e.g. `tor-agg`.
    pub class: String,
    /// Links in the class.
    pub count: usize,
    /// The rate when every link of the class has the same one.
    pub rate: Option<Rate>,
}

/// A range of addresses handed out from a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddrRange {
    /// Lowest address used.
    pub first: Ipv4Addr,
    /// Highest address used.
    pub last: Ipv4Addr,
    /// Addresses used.
    pub count: usize,
}

/// A range of host subnets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubnetRange {
    /// Lowest subnet.
    pub first: Ipv4Net,
    /// Highest subnet.
    pub last: Ipv4Net,
    /// Number of subnets.
    pub count: usize,
}

/// ASNs used by the switches of one role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AsnRange {
    /// The role.
    pub role: Role,
    /// Lowest ASN.
    pub first: Asn,
    /// Highest ASN.
    pub last: Asn,
    /// Distinct ASNs.
    pub distinct: usize,
    /// Switches of the role.
    pub switches: usize,
}

/// What oversubscription capacities are measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityBasis {
    /// Link rates (bit/s): every link counted has a rate.
    Rate,
    /// Port counts: some link has no rate.
    Ports,
}

/// Downlink versus uplink capacity of one switch tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Oversubscription {
    /// The tier.
    pub role: Role,
    /// Switches in the tier.
    pub switches: usize,
    /// Downlink ports (towards the hosts; backup hosts excluded).
    pub down_ports: usize,
    /// Uplink ports.
    pub up_ports: usize,
    /// Downlink capacity (bit/s or ports, see `basis`).
    pub down: u64,
    /// Uplink capacity.
    pub up: u64,
    /// `Rate` when every counted link has a rate, else `Ports`.
    pub basis: CapacityBasis,
    /// `down / up`, e.g. 15.0 for 15:1; `None` without uplinks.
    pub ratio: Option<f64>,
}

/// Summarizes a lab.
pub fn summary(lab: &Lab) -> Summary {
    let f = &lab.fabric;
    let mut by_role: BTreeMap<Role, usize> = BTreeMap::new();
    for n in &f.nodes {
        *by_role.entry(n.role).or_default() += 1;
    }
    let mut by_class: BTreeMap<LinkClass, (usize, Option<Option<Rate>>)> = BTreeMap::new();
    for l in &f.links {
        let e = by_class.entry(l.class).or_insert((0, None));
        e.0 += 1;
        e.1 = match e.1 {
            None => Some(l.params.rate),
            Some(r) if r == l.params.rate => Some(r),
            Some(_) => Some(None),
        };
    }

    let loopbacks = range(f.nodes.iter().filter_map(|n| n.loopback));
    let fabric_addrs = range(
        f.links
            .iter()
            .filter(|l| !l.is_host_link())
            .flat_map(|l| l.ends.iter().map(|e| e.addr.addr())),
    );
    let mut host_nets: Vec<Ipv4Net> = f
        .prefixes
        .iter()
        .filter(|p| matches!(p.kind, PrefixKind::Hosts { .. }))
        .map(|p| p.net)
        .collect();
    host_nets.sort();
    let host_subnets = match (host_nets.first(), host_nets.last()) {
        (Some(first), Some(last)) => Some(SubnetRange {
            first: *first,
            last: *last,
            count: host_nets.len(),
        }),
        _ => None,
    };

    let mut asns: BTreeMap<Role, Vec<Asn>> = BTreeMap::new();
    for n in f.switches() {
        if let Some(a) = n.asn {
            asns.entry(n.role).or_default().push(a);
        }
    }
    let asns = asns
        .into_iter()
        .map(|(role, mut list)| {
            let switches = list.len();
            list.sort();
            let first = list[0];
            let last = list[list.len() - 1];
            list.dedup();
            AsnRange {
                role,
                first,
                last,
                distinct: list.len(),
                switches,
            }
        })
        .collect();

    Summary {
        lab: lab.name.clone(),
        topology: f.kind.clone(),
        target: lab.target,
        routing: lab.routing.mode,
        nodes: f.nodes.len(),
        switches: f.switches().count(),
        hosts: f.hosts().count(),
        backup_hosts: f.hosts().filter(|h| h.backup).count(),
        links: f.links.len(),
        host_links: f.links.iter().filter(|l| l.is_host_link()).count(),
        fabric_links: f.links.iter().filter(|l| !l.is_host_link()).count(),
        impaired_links: f
            .links
            .iter()
            .filter(|l| l.params.has_impairments())
            .count(),
        nodes_by_role: by_role
            .into_iter()
            .map(|(role, count)| RoleCount { role, count })
            .collect(),
        links_by_class: by_class
            .into_iter()
            .map(|(class, (count, rate))| ClassCount {
                class: class.to_string(),
                count,
                rate: rate.flatten(),
            })
            .collect(),
        loopbacks,
        fabric_addrs,
        host_subnets,
        asns,
        oversubscription: oversubscription(f),
        pods: pods(f),
        rate_scale: f.rate_scale,
        chips: f
            .chips
            .iter()
            .map(|(&role, chip)| {
                let demands: Vec<_> = f
                    .switches()
                    .filter(|n| n.role == role)
                    .map(|n| crate::chip::demand(f, n.id, chip))
                    .collect();
                ChipUse {
                    role,
                    chip: *chip,
                    switches: demands.len(),
                    ports: demands.iter().map(|d| d.ports).max().unwrap_or(0),
                    bandwidth: demands.iter().map(|d| d.bandwidth).max().unwrap_or(0),
                }
            })
            .collect(),
        prefixes: f.prefixes.len(),
        externals: f.externals.len(),
    }
}

fn pods(f: &Fabric) -> Vec<PodSummary> {
    let mut pods: BTreeMap<u32, (PodSummary, Vec<Ipv4Net>)> = BTreeMap::new();
    fn pod(
        pods: &mut BTreeMap<u32, (PodSummary, Vec<Ipv4Net>)>,
        p: u32,
    ) -> &mut (PodSummary, Vec<Ipv4Net>) {
        pods.entry(p).or_insert_with(|| {
            let summary = PodSummary {
                pod: p,
                switches: 0,
                hosts: 0,
                host_subnets: None,
                asns: None,
            };
            (summary, Vec::new())
        })
    }
    for n in &f.nodes {
        let Some(p) = n.pod else { continue };
        let (summary, _) = pod(&mut pods, p);
        if n.role.is_switch() {
            summary.switches += 1;
        } else {
            summary.hosts += 1;
        }
        if let Some(a) = n.asn {
            summary.asns = Some(
                summary
                    .asns
                    .map_or([a, a], |[lo, hi]| [lo.min(a), hi.max(a)]),
            );
        }
    }
    for prefix in &f.prefixes {
        if let (PrefixKind::Hosts { .. }, Some(&first)) = (&prefix.kind, prefix.attached.first())
            && let Some(p) = f.node(first).pod
        {
            pod(&mut pods, p).1.push(prefix.net);
        }
    }
    pods.into_values()
        .map(|(mut summary, mut nets)| {
            nets.sort();
            if let (Some(first), Some(last)) = (nets.first(), nets.last()) {
                summary.host_subnets = Some(SubnetRange {
                    first: *first,
                    last: *last,
                    count: nets.len(),
                });
            }
            summary
        })
        .collect()
}

fn range(addrs: impl Iterator<Item = Ipv4Addr>) -> Option<AddrRange> {
    let mut first: Option<Ipv4Addr> = None;
    let mut last: Option<Ipv4Addr> = None;
    let mut count = 0;
    for a in addrs {
        count += 1;
        first = Some(first.map_or(a, |f| f.min(a)));
        last = Some(last.map_or(a, |l| l.max(a)));
    }
    Some(AddrRange {
        first: first?,
        last: last?,
        count,
    })
}

/// Downlinks of a switch are the links where it is the upper end; uplinks
/// those where it is the lower end. Links to backup hosts are left out.
fn oversubscription(f: &Fabric) -> Vec<Oversubscription> {
    #[derive(Default)]
    struct Tier {
        switches: usize,
        down_ports: usize,
        up_ports: usize,
        down_bps: u64,
        up_bps: u64,
        all_rated: bool,
    }
    let mut tiers: BTreeMap<Role, Tier> = BTreeMap::new();
    for n in f.switches() {
        tiers
            .entry(n.role)
            .or_insert_with(|| Tier {
                all_rated: true,
                ..Tier::default()
            })
            .switches += 1;
    }
    for l in &f.links {
        let [lower, upper] = &l.ends;
        let lower_node = f.node(lower.node);
        let bps = l.params.rate.map_or(0, super::units::Rate::bits_per_sec);
        if !(lower_node.role == Role::Host && lower_node.backup) {
            let t = tiers
                .get_mut(&f.node(upper.node).role)
                .expect("switch tier");
            t.down_ports += 1;
            t.down_bps = t.down_bps.saturating_add(bps);
            t.all_rated &= l.params.rate.is_some();
        }
        if lower_node.role.is_switch() {
            let t = tiers.get_mut(&lower_node.role).expect("switch tier");
            t.up_ports += 1;
            t.up_bps = t.up_bps.saturating_add(bps);
            t.all_rated &= l.params.rate.is_some();
        }
    }
    tiers
        .into_iter()
        .filter(|(_, t)| t.down_ports > 0 && t.up_ports > 0)
        .map(|(role, t)| {
            let (down, up, basis) = if t.all_rated {
                (t.down_bps, t.up_bps, CapacityBasis::Rate)
            } else {
                (t.down_ports as u64, t.up_ports as u64, CapacityBasis::Ports)
            };
            Oversubscription {
                role,
                switches: t.switches,
                down_ports: t.down_ports,
                up_ports: t.up_ports,
                down,
                up,
                basis,
                ratio: (up > 0).then(|| down as f64 / up as f64),
            }
        })
        .collect()
}
