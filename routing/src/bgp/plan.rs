//! The BGP plan of a fabric: who peers with whom, and who originates what.
//!
//! One [`Speaker`] per switch, computed from the fabric alone, so the
//! built-in agents, the generated FRR and BIRD configurations and the
//! readiness check all follow the same plan (RFC 7938: eBGP on every
//! switch-switch link, one session per link, ASNs from the scenario's plan).
//!
//! What a switch originates:
//! - its loopback /32;
//! - every host subnet attached to it;
//! - for a subnet attached to more than one switch (HPN dual-ToR), each
//!   host's /32 as well, but only while the port to that host is up: when a
//!   host link fails, its ToR withdraws the /32 and the fabric reaches the
//!   host through the other ToR (longest prefix wins over the subnet both
//!   still announce);
//! - the networks behind its external ports.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::Serialize;
use turbonet_topo::{Fabric, LinkId, NodeId, PrefixKind};

use crate::Failures;

use super::rib::{Change, Multipath, PeerId, PeerSummary, Rib};

/// One switch's BGP speaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Speaker {
    /// The switch.
    pub node: NodeId,
    /// Its name.
    pub name: String,
    /// Its AS number.
    pub asn: u32,
    /// Its BGP Identifier: the loopback.
    pub router_id: Ipv4Addr,
    /// One session per switch-switch link, in port order, then one per
    /// external port with a BGP neighbour.
    pub neighbours: Vec<Neighbour>,
    /// Prefixes it announces.
    pub originate: Vec<Origination>,
    /// Its ports to hosts: interface and link.
    pub host_ports: Vec<(String, LinkId)>,
}

/// One session of a speaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Neighbour {
    /// The link the session runs over; `None` on an external port.
    pub link: Option<LinkId>,
    /// The switch at the other end; `None` for a router outside the
    /// fabric.
    pub peer: Option<NodeId>,
    /// Its name (`external <interface>` outside the fabric).
    pub peer_name: String,
    /// The local interface.
    pub ifname: String,
    /// Our address on the link (the session's source and our NEXT_HOP).
    pub local_addr: Ipv4Addr,
    /// The peer's address on the link.
    pub peer_addr: Ipv4Addr,
    /// The AS the peer must announce.
    pub peer_asn: u32,
    /// Wait for the peer to connect. Exactly one end of every session in
    /// the fabric is passive (the one with the higher address), so the two
    /// ends never open colliding connections (RFC 4271 §6.8), whatever
    /// implementation runs at either end. Sessions to external routers
    /// are active (and accept the router's connection too).
    pub passive: bool,
}

/// A prefix a speaker announces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origination {
    /// The prefix.
    pub prefix: Ipv4Net,
    /// Announced only while this local interface is up (a dual-homed
    /// host's /32); `None`: always.
    pub port: Option<String>,
}

/// The plan for every switch of `fabric`, in node order. Switches without
/// an ASN or a loopback (none in a validated fabric) are skipped.
pub fn speakers(fabric: &Fabric) -> Vec<Speaker> {
    fabric
        .nodes
        .iter()
        .filter(|n| n.role.is_switch())
        .filter_map(|node| {
            let (asn, router_id) = (node.asn?.0, node.loopback?);
            let mut neighbours = Vec::new();
            let mut host_ports = Vec::new();
            let mut originate = vec![Origination {
                prefix: Ipv4Net::from(router_id),
                port: None,
            }];
            for (link, local, remote) in fabric.ports(node.id) {
                let peer = fabric.node(remote.node);
                if peer.role.is_switch() {
                    let peer_asn = peer.asn.map_or(0, |a| a.0);
                    neighbours.push(Neighbour {
                        link: Some(link.id),
                        peer: Some(peer.id),
                        peer_name: peer.name.clone(),
                        ifname: local.ifname.clone(),
                        local_addr: local.addr.addr(),
                        peer_addr: remote.addr.addr(),
                        peer_asn,
                        passive: local.addr.addr() > remote.addr.addr(),
                    });
                } else {
                    host_ports.push((local.ifname.clone(), link.id));
                    if dual_homed(fabric, remote.addr.addr()) {
                        originate.push(Origination {
                            prefix: Ipv4Net::from(remote.addr.addr()),
                            port: Some(local.ifname.clone()),
                        });
                    }
                }
            }
            for ext in fabric.externals.iter().filter(|e| e.node == node.id) {
                if let Some(bgp) = &ext.bgp {
                    neighbours.push(Neighbour {
                        link: None,
                        peer: None,
                        peer_name: format!("external {}", ext.interface),
                        ifname: ext.ifname.clone(),
                        local_addr: ext.addr.addr(),
                        peer_addr: bgp.addr,
                        peer_asn: bgp.asn.0,
                        passive: false,
                    });
                }
            }
            for prefix in &fabric.prefixes {
                if prefix.kind != PrefixKind::Loopback && prefix.attached.contains(&node.id) {
                    originate.push(Origination {
                        prefix: prefix.net,
                        port: None,
                    });
                }
            }
            originate.sort_by_key(|o| (o.prefix.network(), o.prefix.prefix_len()));
            originate.dedup_by(|a, b| a.prefix == b.prefix);
            Some(Speaker {
                node: node.id,
                name: node.name.clone(),
                asn,
                router_id,
                neighbours,
                originate,
                host_ports,
            })
        })
        .collect()
}

/// True when `host` sits in a host subnet attached to more than one switch.
fn dual_homed(fabric: &Fabric, host: Ipv4Addr) -> bool {
    fabric.prefixes.iter().any(|p| {
        matches!(p.kind, PrefixKind::Hosts { .. }) && p.attached.len() > 1 && p.net.contains(&host)
    })
}

/// Adds `changed` to speaker `i`'s pending prefixes, queueing it if it had
/// none.
fn push(
    queue: &mut VecDeque<usize>,
    pending: &mut BTreeSet<Ipv4Net>,
    i: usize,
    changed: impl IntoIterator<Item = Ipv4Net>,
) {
    let was_empty = pending.is_empty();
    pending.extend(changed);
    if was_empty && !pending.is_empty() {
        queue.push_back(i);
    }
}

/// Every prefix some speaker originates: what the plan knows of (routes
/// learned from routers outside the fabric are not in it).
pub fn known_prefixes(speakers: &[Speaker]) -> BTreeSet<Ipv4Net> {
    speakers
        .iter()
        .flat_map(|s| s.originate.iter().map(|o| o.prefix))
        .collect()
}

/// A FIB in a few bytes: its size and a hash of its content, to compare a
/// switch's FIB with the plan's without keeping the plan's (two million
/// entries for a thousand switches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FibDigest {
    /// Prefixes.
    pub routes: usize,
    /// Sum of a hash of each prefix with its next hops.
    pub hash: u64,
}

impl FibDigest {
    /// The digest of a FIB, in any order.
    pub fn of<'a>(fib: impl IntoIterator<Item = (&'a Ipv4Net, &'a BTreeSet<Ipv4Addr>)>) -> Self {
        let mut digest = FibDigest::default();
        for (prefix, hops) in fib {
            digest.add(prefix, hops);
        }
        digest
    }

    /// The digest with one more entry (one whose prefix it does not
    /// cover yet).
    pub fn add(&mut self, prefix: &Ipv4Net, hops: &BTreeSet<Ipv4Addr>) {
        self.routes += 1;
        self.hash = self.hash.wrapping_add(entry_hash(prefix, hops));
    }

    /// The digest without an entry it covers.
    pub fn remove(&mut self, prefix: &Ipv4Net, hops: &BTreeSet<Ipv4Addr>) {
        self.routes -= 1;
        self.hash = self.hash.wrapping_sub(entry_hash(prefix, hops));
    }
}

/// One FIB entry's share of a [`FibDigest`]: a sum of these is the same
/// whatever the order, and is kept up to date one entry at a time.
fn entry_hash(prefix: &Ipv4Net, hops: &BTreeSet<Ipv4Addr>) -> u64 {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same on every run.
    let mut hasher = std::hash::DefaultHasher::new();
    prefix.hash(&mut hasher);
    hops.hash(&mut hasher);
    hasher.finish()
}

/// What a speaker's FIB holds: for every prefix it learned, the next hops
/// (peer addresses) of its equal-cost routes.
pub type Fib = BTreeMap<Ipv4Net, BTreeSet<Ipv4Addr>>;

/// The FIB of every speaker once the fabric has converged around
/// `failures`, in `speakers` order (a failed switch's FIB is empty): every
/// prefix it learns from another switch, with its ECMP next hops (its own
/// originations are not in its FIB).
///
/// Computed by running the fabric's BGP to quiescence in memory, with the
/// same [`Rib`] the agents use: an RFC 7938 fabric does not deliver every
/// prefix everywhere (a switch drops paths through its own AS, so two
/// fat-tree aggregation switches of a pod never learn each other's
/// loopbacks), and only the protocol itself says exactly which. With
/// deterministic tie-breaking and no policy, the outcome does not depend on
/// message order.
pub fn converged(speakers: &[Speaker], failures: &Failures) -> Vec<Fib> {
    let index: HashMap<NodeId, usize> = speakers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.node, i))
        .collect();
    let down = |s: &Speaker| failures.nodes.contains(&s.node);
    let link_down = |n: &Neighbour| n.link.is_some_and(|l| failures.links.contains(&l));
    // For neighbour `n` of speaker `i`: the peer speaker and the position
    // of the session in the peer's list, when the session can come up.
    let reverse: Vec<Vec<Option<(usize, PeerId)>>> = speakers
        .iter()
        .map(|s| {
            s.neighbours
                .iter()
                .map(|n| {
                    let p = *index.get(&n.peer?)?;
                    if down(s) || down(&speakers[p]) || link_down(n) {
                        return None;
                    }
                    let back = speakers[p]
                        .neighbours
                        .iter()
                        .position(|b| b.link == n.link)?;
                    Some((p, back as PeerId))
                })
                .collect()
        })
        .collect();
    let summary = |n: &Neighbour, peer: &Speaker| PeerSummary {
        peer_as: n.peer_asn,
        peer_addr: n.peer_addr,
        peer_id: peer.router_id,
    };
    let mut ribs: Vec<Rib> = speakers
        .iter()
        .map(|s| Rib::new(s.asn, s.router_id, Multipath::Relax))
        .collect();
    // Speakers with changes to advertise, each queued once with all its
    // changed prefixes: a spine hears from every leaf before it advertises
    // the lot, instead of once per leaf.
    let mut pending: Vec<BTreeSet<Ipv4Net>> = vec![BTreeSet::new(); speakers.len()];
    let mut queue: VecDeque<usize> = VecDeque::new();
    for (i, s) in speakers.iter().enumerate() {
        if down(s) {
            continue;
        }
        let port_up = |port: &Option<String>| match port {
            None => true,
            Some(ifname) => !s
                .host_ports
                .iter()
                .any(|(name, link)| name == ifname && failures.links.contains(link)),
        };
        let changed: Vec<Ipv4Net> = s
            .originate
            .iter()
            .filter(|o| port_up(&o.port))
            .flat_map(|o| ribs[i].originate(o.prefix))
            .map(|c| c.prefix())
            .collect();
        push(&mut queue, &mut pending[i], i, changed);
    }
    while let Some(i) = queue.pop_front() {
        let prefixes: Vec<Ipv4Net> = std::mem::take(&mut pending[i]).into_iter().collect();
        for (n, neighbour) in speakers[i].neighbours.iter().enumerate() {
            let Some((p, back)) = reverse[i][n] else {
                continue;
            };
            let to = summary(neighbour, &speakers[p]);
            let from = summary(&speakers[p].neighbours[back as usize], &speakers[i]);
            let updates = ribs[i].export(n as PeerId, &to, neighbour.local_addr, &prefixes);
            for update in &updates {
                let changes = ribs[p].update(back, &from, update);
                push(
                    &mut queue,
                    &mut pending[p],
                    p,
                    changes.iter().map(Change::prefix),
                );
            }
        }
    }
    ribs.iter()
        .map(|rib| {
            rib.loc_rib()
                .filter(|(_, best)| !best.local)
                .map(|(p, best)| (*p, best.nexthops.iter().map(|&(_, nh)| nh).collect()))
                .collect()
        })
        .collect()
}
