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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use turbonet_topo::{Fabric, LinkId, NodeId, PrefixKind};

use crate::Failures;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FibDigest {
    /// Prefixes.
    pub routes: usize,
    /// Sum of a hash of each prefix with its next hops.
    pub hash: u64,
}

impl FibDigest {
    /// The digest of a FIB, in any order.
    pub fn of<'a, H: AsRef<[Ipv4Addr]>>(fib: impl IntoIterator<Item = (&'a Ipv4Net, H)>) -> Self {
        let mut digest = FibDigest::default();
        for (prefix, hops) in fib {
            digest.add(prefix, hops.as_ref());
        }
        digest
    }

    /// The digest with one more entry (one whose prefix it does not
    /// cover yet); `hops` ascending, without repeats.
    pub fn add(&mut self, prefix: &Ipv4Net, hops: &[Ipv4Addr]) {
        self.add_hashed(prefix, hops_hash(hops));
    }

    /// [`FibDigest::add`] with the next hops' [`hops_hash`], which the
    /// entries that share a set compute once.
    pub fn add_hashed(&mut self, prefix: &Ipv4Net, hops: u64) {
        self.routes += 1;
        self.hash = self.hash.wrapping_add(entry_hash(prefix, hops));
    }

    /// The digest without an entry it covers.
    pub fn remove(&mut self, prefix: &Ipv4Net, hops: &[Ipv4Addr]) {
        self.remove_hashed(prefix, hops_hash(hops));
    }

    /// [`FibDigest::remove`] with the next hops' [`hops_hash`].
    pub fn remove_hashed(&mut self, prefix: &Ipv4Net, hops: u64) {
        self.routes -= 1;
        self.hash = self.hash.wrapping_sub(entry_hash(prefix, hops));
    }
}

/// A FIB entry's next hops (ascending, without repeats) as they enter its
/// share of a [`FibDigest`].
pub fn hops_hash(hops: &[Ipv4Addr]) -> u64 {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same on every run.
    let mut hasher = std::hash::DefaultHasher::new();
    hops.hash(&mut hasher);
    hasher.finish()
}

/// One FIB entry's share of a [`FibDigest`]: a sum of these is the same
/// whatever the order, and is kept up to date one entry at a time.
fn entry_hash(prefix: &Ipv4Net, hops: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    prefix.hash(&mut hasher);
    hops.hash(&mut hasher);
    hasher.finish()
}

/// What a speaker's FIB holds: for every prefix it learned, the next hops
/// (peer addresses) of its equal-cost routes, ascending, without repeats.
/// Shared: most prefixes of a switch have the same set.
pub type Fib = BTreeMap<Ipv4Net, Arc<[Ipv4Addr]>>;

/// The FIB of every speaker once the fabric has converged around
/// `failures`, in `speakers` order (a failed switch's FIB is empty): every
/// prefix it learns from another switch, with its ECMP next hops (its own
/// originations are not in its FIB). See [`routes`] for how.
pub fn converged(speakers: &[Speaker], failures: &Failures) -> Vec<Fib> {
    let mut fibs = vec![Fib::new(); speakers.len()];
    routes(speakers, failures, |i, prefix, hops| {
        fibs[i].insert(*prefix, hops.into());
    });
    fibs
}

/// The digest of each FIB of [`converged`], without building the FIBs
/// (two million entries for a thousand switches).
pub fn converged_digests(speakers: &[Speaker], failures: &Failures) -> Vec<FibDigest> {
    let mut digests = vec![FibDigest::default(); speakers.len()];
    routes(speakers, failures, |i, prefix, hops| {
        digests[i].add(prefix, hops);
    });
    digests
}

/// Calls `route(i, prefix, hops)` for every FIB entry of the fabric once
/// converged around `failures`: speaker `i` reaches `prefix` through the
/// peer addresses `hops` (ascending).
///
/// This is the one stable state of the fabric's BGP, built rather than
/// simulated. Every session is eBGP without policy, so the decision
/// process of [`Rib`](super::rib::Rib) comes down to the shortest AS_PATH
/// (RFC 4271 §9.1.2.2 a), then the lowest BGP Identifier, peer address and
/// session (f, g); multipath takes every route of the shortest length
/// (RFC 7938 §6.3). With lengths growing by one per hop, BGP has exactly
/// one stable state, and a breadth-first search from the prefix's
/// originators builds it hop by hop: a switch's route is as long as its
/// nearest neighbours' whose own selected route does not contain its AS
/// (the loop check of §9.1.2); those neighbours are its ECMP set, and the
/// route it selects (and advertises, with its AS prepended) is the one
/// the tie-break picks. The split horizon of
/// [`goes_to`](super::rib::goes_to) only keeps back routes the receiver
/// would drop as loops. Prefixes with the same originators share one
/// search: a thousand switches take milliseconds, where running their
/// BGP in memory took a minute. The tests check it against that run.
pub fn routes(
    speakers: &[Speaker],
    failures: &Failures,
    mut route: impl FnMut(usize, &Ipv4Net, &[Ipv4Addr]),
) {
    let index: HashMap<NodeId, usize> = speakers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.node, i))
        .collect();
    let down = |i: usize| failures.nodes.contains(&speakers[i].node);
    // What each speaker advertises to: (the receiver, the receiver's
    // session with it), for every session that can come up.
    let mut adverts: Vec<Vec<(usize, usize)>> = vec![Vec::new(); speakers.len()];
    for (i, s) in speakers.iter().enumerate() {
        for (n, neighbour) in s.neighbours.iter().enumerate() {
            let Some(&p) = neighbour.peer.and_then(|peer| index.get(&peer)) else {
                continue;
            };
            let link_down = neighbour.link.is_some_and(|l| failures.links.contains(&l));
            let back = speakers[p]
                .neighbours
                .iter()
                .any(|b| b.link == neighbour.link);
            if down(i) || down(p) || link_down || !back {
                continue;
            }
            adverts[p].push((i, n));
        }
    }
    // Prefixes by the speakers originating them, then grouped by those.
    let mut origins: BTreeMap<Ipv4Net, Vec<usize>> = BTreeMap::new();
    for (i, s) in speakers.iter().enumerate() {
        if down(i) {
            continue;
        }
        for o in &s.originate {
            let port_up = o.port.as_ref().is_none_or(|ifname| {
                !s.host_ports
                    .iter()
                    .any(|(name, link)| name == ifname && failures.links.contains(link))
            });
            if port_up {
                let at = origins.entry(o.prefix.trunc()).or_default();
                if at.last() != Some(&i) {
                    at.push(i);
                }
            }
        }
    }
    let mut groups: BTreeMap<Vec<usize>, Vec<Ipv4Net>> = BTreeMap::new();
    for (prefix, at) in origins {
        groups.entry(at).or_default().push(prefix);
    }

    let mut search = Search {
        speakers,
        adverts: &adverts,
        reached: vec![false; speakers.len()],
        via: vec![None; speakers.len()],
        offers: vec![Vec::new(); speakers.len()],
    };
    let mut hops = Vec::new();
    for (originators, prefixes) in &groups {
        search.run(originators, |i, offers| {
            hops.clear();
            hops.extend(
                offers
                    .iter()
                    .map(|&(n, _)| speakers[i].neighbours[n].peer_addr),
            );
            hops.sort_unstable();
            hops.dedup();
            for prefix in prefixes {
                route(i, prefix, &hops);
            }
        });
    }
}

/// The breadth-first search of [`routes`] for one set of originators; its
/// buffers serve every search.
struct Search<'a> {
    speakers: &'a [Speaker],
    adverts: &'a [Vec<(usize, usize)>],
    /// Has a route (or originates).
    reached: Vec<bool>,
    /// The neighbour whose route it selected (`None`: it originates).
    via: Vec<Option<usize>>,
    /// The routes offered in the current hop: (our session, the
    /// neighbour).
    offers: Vec<Vec<(usize, usize)>>,
}

impl Search<'_> {
    /// Reaches every speaker it can from `originators`, calling
    /// `reached(i, offers)` with each one's ECMP set (its sessions and the
    /// neighbours at their other end).
    fn run(&mut self, originators: &[usize], mut reached: impl FnMut(usize, &[(usize, usize)])) {
        self.reached.fill(false);
        let mut frontier = originators.to_vec();
        for &i in &frontier {
            self.reached[i] = true;
            self.via[i] = None;
        }
        let mut next = Vec::new();
        while !frontier.is_empty() {
            for &from in &frontier {
                for &(to, session) in &self.adverts[from] {
                    if self.reached[to] || self.path_contains(from, self.speakers[to].asn) {
                        continue;
                    }
                    if self.offers[to].is_empty() {
                        next.push(to);
                    }
                    self.offers[to].push((session, from));
                }
            }
            for &i in &next {
                let speaker = &self.speakers[i];
                let offers = &self.offers[i];
                let selected = offers
                    .iter()
                    .min_by_key(|&&(session, from)| {
                        (
                            self.speakers[from].router_id,
                            speaker.neighbours[session].peer_addr,
                            session,
                        )
                    })
                    .map(|&(_, from)| from);
                self.reached[i] = true;
                self.via[i] = selected;
                reached(i, offers);
            }
            for &i in &next {
                self.offers[i].clear();
            }
            frontier.clear();
            std::mem::swap(&mut frontier, &mut next);
        }
    }

    /// Whether the AS_PATH `from` advertises (its AS, then those of its
    /// selected route, back to the originator) contains `asn`.
    fn path_contains(&self, from: usize, asn: u32) -> bool {
        let mut at = Some(from);
        while let Some(i) = at {
            if self.speakers[i].asn == asn {
                return true;
            }
            at = self.via[i];
        }
        false
    }
}
