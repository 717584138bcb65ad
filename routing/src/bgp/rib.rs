//! The BGP routing information bases and route selection (RFC 4271 §3.2,
//! §9), sans-I/O.
//!
//! [`Rib`] keeps, for every prefix it has seen, each peer's route (the
//! Adj-RIBs-In, after the loop check of RFC 4271 §9.1.2), whether it is
//! originated here, and the Loc-RIB entry: the selected route and, with
//! [`Multipath`], the set of equal-cost next hops (RFC 7938 §6). Every
//! input returns the Loc-RIB [`Change`]s it caused, which the agent installs
//! in the FIB. Each reachable prefix also has its [`Outgoing`]
//! advertisement, computed when its selected route changes, with a version
//! a speaker's Adj-RIBs-Out refer to; [`Rib::export`] gives the UPDATEs for
//! one peer without one.

//! The decision process is the one of RFC 4271 §9.1.2.2, as an elimination
//! over all candidate routes of a prefix. Because each step removes routes
//! by comparing against the whole remaining set (rather than comparing
//! routes pairwise in arrival order), the result does not depend on the
//! order in which routes arrived, even with the non-transitive MED rule.
//!
//! Not implemented: import/export policy, IGP cost to the next hop (step
//! e; every next hop of an eBGP fabric is directly connected), route
//! reflection and confederations, iBGP export rules (the fabric is eBGP
//! only, RFC 7938 §5.1), MP-BGP (IPv6) routes, ADD-PATH.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use ipnet::Ipv4Net;

use crate::intern::{ByAddress, Interner};

use super::prefix::order_key;
use super::{
    AsPath, AsSegment, Context, HEADER_LEN, MAX_MESSAGE_LEN, Origin, PathAttributes, SegmentType,
    Update,
};

/// Opaque identifier the agent gives each session.
pub type PeerId = u32;

/// LOCAL_PREF assumed for routes that carry none, and for all routes
/// learned over eBGP, where a received LOCAL_PREF is ignored
/// (RFC 4271 §5.1.5).
pub const DEFAULT_LOCAL_PREF: u32 = 100;

/// What route selection needs to know about the peer a route came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerSummary {
    /// The peer's AS; equal to the local AS for an iBGP peer.
    pub peer_as: u32,
    /// The peer's address on the session (tie-breaker, RFC 4271
    /// §9.1.2.2 g).
    pub peer_addr: Ipv4Addr,
    /// The peer's BGP Identifier (tie-breaker, RFC 4271 §9.1.2.2 f).
    pub peer_id: Ipv4Addr,
}

/// Equal-cost multipath (RFC 7938 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Multipath {
    /// One next hop per prefix: the best route's.
    #[default]
    Off,
    /// ECMP across the routes that tie with the best one through the MED
    /// step and come from the same neighbour AS (in an RFC 7938 leaf-spine
    /// the spines share an AS, so a leaf spreads over all of them).
    SameAs,
    /// "bestpath as-path multipath-relax" (RFC 7938 §6.3): ECMP across
    /// the routes that tie through the MED step, from any neighbour AS,
    /// so AS_PATHs of equal length but different ASes are combined.
    Relax,
}

/// A Loc-RIB entry as the FIB sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Best {
    /// The ECMP set: session and NEXT_HOP of each route used, sorted.
    /// Empty for a locally originated prefix. Equal sets are one
    /// allocation ([`Interner`]): a ToR's thousands of prefixes mostly
    /// share one set of sixty.
    pub nexthops: Arc<[(PeerId, Ipv4Addr)]>,
    /// AS_PATH length of the selected route (RFC 4271 §9.1.2.2 a);
    /// 0 for a locally originated prefix.
    pub as_path_len: usize,
    /// Originated by this speaker ([`Rib::originate`]).
    pub local: bool,
}

/// A change of the Loc-RIB.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Change {
    /// The prefix is now reachable as `best` (new entry or replacement).
    Installed {
        /// Destination.
        prefix: Ipv4Net,
        /// The new entry.
        best: Best,
    },
    /// The prefix is no longer reachable.
    Removed {
        /// Destination.
        prefix: Ipv4Net,
    },
}

impl Change {
    /// The prefix that changed.
    pub fn prefix(&self) -> Ipv4Net {
        match self {
            Change::Installed { prefix, .. } | Change::Removed { prefix } => *prefix,
        }
    }
}

/// What the RIB keeps of a peer besides its routes.
#[derive(Debug, Clone)]
struct Peer {
    info: PeerSummary,
    /// Routes in its Adj-RIB-In.
    routes: usize,
}

/// A Loc-RIB entry: what the FIB sees, the selected route, and how it is
/// advertised. `selected` is `None` for a locally originated prefix.
/// Prefixes with equal entries share one ([`Rib`] interns them): a ToR's
/// thirty thousand prefixes have a few hundred distinct entries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Entry {
    best: Best,
    selected: Option<(PeerId, Arc<PathAttributes>)>,
    /// The attributes advertised, NEXT_HOP unset ([`Outgoing::attributes`]).
    attributes: Arc<PathAttributes>,
    /// The peer of `selected` and its AS ([`Outgoing::from`]).
    from: Option<(PeerId, u32)>,
}

/// How a prefix is advertised over eBGP (RFC 4271 §5.1, §9.2), before the
/// rules of each session: the same for every peer but for NEXT_HOP, which
/// is the speaker's address on the session, and split horizon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The attributes sent, NEXT_HOP unset.
    pub attributes: Arc<PathAttributes>,
    /// The peer the route was learned from and its AS (`None`: originated
    /// here): it is not sent to that peer nor to another peer of that AS.
    pub from: Option<(PeerId, u32)>,
    /// Changes (from 1) whenever `attributes` do, and only then: a peer
    /// that holds this version needs no UPDATE.
    pub version: u32,
}

/// Whether a route learned from `from` (a peer and its AS; `None`:
/// originated here) is advertised to `to`, a peer in `to_as`: not back to
/// where it came from, nor to another peer of that AS (split horizon by
/// AS, see [`Rib::export`]).
pub fn goes_to(from: Option<(PeerId, u32)>, to: PeerId, to_as: u32) -> bool {
    from.is_none_or(|(from, from_as)| from != to && from_as != to_as)
}

/// One peer's route to a prefix. Its attributes are interned
/// ([`Rib`] keeps one allocation per distinct set), so two routes are the
/// same when their peers and their attributes' addresses are: a route set
/// hashes sixty pointers, not sixty AS_PATHs.
#[derive(Debug, Clone)]
struct Route {
    peer: PeerId,
    attrs: Arc<PathAttributes>,
}

impl PartialEq for Route {
    fn eq(&self, other: &Route) -> bool {
        self.peer == other.peer && Arc::ptr_eq(&self.attrs, &other.attrs)
    }
}

impl Eq for Route {}

impl std::hash::Hash for Route {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.peer.hash(state);
        Arc::as_ptr(&self.attrs).hash(state);
    }
}

/// Every peer's route to one prefix, sorted by peer: one allocation per
/// distinct set. A ToR of the HPN pod hears each of its thirty thousand
/// prefixes from sixty aggregation switches, but the prefixes of one
/// remote switch come with the same sixty routes: a prefix holds a
/// pointer, not sixty routes.
type Routes = Arc<[Route]>;

/// Everything the RIB holds of one prefix, at its slot ([`Rib::slot`]).
#[derive(Debug, Clone)]
struct Prefix {
    prefix: Ipv4Net,
    /// The version of its advertisement ([`Outgoing::version`]) while
    /// `entry` is there.
    version: u32,
    /// Originated here.
    local: bool,
    /// The Adj-RIBs-In's routes for it.
    routes: Routes,
    /// The Loc-RIB entry.
    entry: Option<Arc<Entry>>,
}

/// The RIBs of one BGP speaker (RFC 4271 §3.2).
///
/// Every prefix ever seen has one record, holding every peer's route for
/// it (the Adj-RIBs-In, by prefix, as a shared [`Routes`] set), its
/// Loc-RIB entry and how it is advertised: an UPDATE costs one lookup per
/// prefix (the records lie in a vector by slot, so what follows, the
/// decision and the advertisements, finds them without another), and a
/// peer's routes are found by walking the prefixes (only when its session
/// goes down). The prefixes of one UPDATE mostly share
/// their route set before it, so each distinct set is changed, and
/// decided, once.
#[derive(Debug, Clone)]
pub struct Rib {
    local_as: u32,
    router_id: Ipv4Addr,
    multipath: Multipath,
    peers: BTreeMap<PeerId, Peer>,
    /// Every prefix's slot in `records`.
    index: BTreeMap<Ipv4Net, u32>,
    records: Vec<Prefix>,
    /// Prefixes whose advertisement may have changed since
    /// [`Rib::take_exports`] was last called.
    exports: BTreeSet<Ipv4Net>,
    /// The last [`Outgoing::version`] given.
    version: u32,
    /// Counts the changes of any prefix's advertisement ([`Rib::generation`]).
    generation: u64,
    /// The Loc-RIB's ECMP sets.
    nexthop_sets: Interner<[(PeerId, Ipv4Addr)]>,
    /// Received attributes, by value.
    attributes: Interner<PathAttributes>,
    /// The prefixes' route sets.
    route_sets: Interner<[Route]>,
    /// The Loc-RIB's entries.
    entries: Interner<Entry>,
    /// The entry of every prefix originated here.
    local_entry: Arc<Entry>,
}

impl Rib {
    /// An empty RIB for a speaker in `local_as`.
    pub fn new(local_as: u32, router_id: Ipv4Addr, multipath: Multipath) -> Self {
        let originated = Arc::new(PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence([local_as])),
            ..PathAttributes::default()
        });
        let mut nexthop_sets = Interner::default();
        let local_entry = Arc::new(Entry {
            best: Best {
                nexthops: nexthop_sets.intern(&[]),
                as_path_len: 0,
                local: true,
            },
            selected: None,
            attributes: originated,
            from: None,
        });
        Rib {
            local_as,
            router_id,
            multipath,
            peers: BTreeMap::new(),
            index: BTreeMap::new(),
            records: Vec::new(),
            exports: BTreeSet::new(),
            version: 0,
            generation: 0,
            nexthop_sets,
            attributes: Interner::default(),
            route_sets: Interner::default(),
            entries: Interner::default(),
            local_entry,
        }
    }

    /// The prefixes whose advertisement may have changed since the last
    /// call: those whose selected route appeared, went or changed. A
    /// change of the ECMP set alone changes the FIB, not what is exported.
    pub fn take_exports(&mut self) -> BTreeSet<Ipv4Net> {
        std::mem::take(&mut self.exports)
    }

    /// Makes room for `prefixes` in all, so that a RIB that will hold
    /// that many does not grow by doubling (a vector that doubles holds a
    /// quarter more than it needs, on average: for the 376 RIBs of the HPN
    /// pod, a hundred megabytes).
    pub fn reserve(&mut self, prefixes: usize) {
        self.records
            .reserve_exact(prefixes.saturating_sub(self.records.len()));
    }

    /// This speaker's AS.
    pub fn local_as(&self) -> u32 {
        self.local_as
    }

    /// This speaker's BGP Identifier.
    pub fn router_id(&self) -> Ipv4Addr {
        self.router_id
    }

    /// Applies an UPDATE received from `peer` (RFC 4271 §9): withdrawn
    /// routes first, then the NLRI with the attributes, each replacing the
    /// peer's previous route for the prefix (implicit withdraw, §3.1).
    ///
    /// A route whose AS_PATH contains the local AS is a loop and is not
    /// kept (RFC 4271 §9.1.2); it still replaces the peer's previous route.
    /// `peer_info` is recorded for the peer; if it changed, all the peer's
    /// routes are reconsidered. Returns the Loc-RIB changes.
    pub fn update(
        &mut self,
        peer: PeerId,
        peer_info: &PeerSummary,
        update: &Update,
    ) -> Vec<Change> {
        let mut touched = Vec::with_capacity(update.withdrawn.len() + update.nlri.len());
        let state = self.peers.entry(peer).or_insert_with(|| Peer {
            info: *peer_info,
            routes: 0,
        });
        if state.info != *peer_info {
            state.info = *peer_info;
            // Selection and split horizon depend on it: every entry with a
            // route of the peer is decided (and advertised) again.
            for (slot, record) in self.records.iter_mut().enumerate() {
                if record.route_of(peer).is_some() {
                    record.entry = None;
                    touched.push(slot as u32);
                }
            }
        }
        let mut remove = Edit::new(peer, None);
        for p in &update.withdrawn {
            if let Some(&slot) = self.index.get(&p.trunc())
                && remove.apply(&mut self.route_sets, &mut self.records[slot as usize])
            {
                state.routes -= 1;
                touched.push(slot);
            }
        }
        if !update.nlri.is_empty() {
            let looped = update
                .attributes
                .as_path
                .as_ref()
                .is_some_and(|path| path.contains(self.local_as));
            // Multiprotocol attributes describe other NLRI; not kept with
            // the IPv4 routes.
            let mut insert = (!looped).then(|| {
                Edit::new(
                    peer,
                    Some(self.attributes.share(Arc::new(PathAttributes {
                        mp_reach: None,
                        mp_unreach: None,
                        ..update.attributes.clone()
                    }))),
                )
            });
            for p in &update.nlri {
                let p = p.trunc();
                match &mut insert {
                    // A looped route still replaces the peer's last one.
                    None => {
                        if let Some(&slot) = self.index.get(&p) {
                            touched.push(slot);
                            if remove.apply(&mut self.route_sets, &mut self.records[slot as usize])
                            {
                                state.routes -= 1;
                            }
                        }
                    }
                    Some(insert) => {
                        let slot =
                            record(&mut self.index, &mut self.records, p, &mut self.route_sets);
                        touched.push(slot);
                        if !insert.apply(&mut self.route_sets, &mut self.records[slot as usize]) {
                            state.routes += 1;
                        }
                    }
                }
            }
        }
        // In prefix order, each once.
        touched.sort_unstable_by_key(|&slot| order_key(&self.records[slot as usize].prefix));
        touched.dedup();
        self.recompute(touched)
    }

    /// The session with `peer` went down: all its routes are withdrawn
    /// (RFC 4271 §8.2.2, the Adj-RIB-In of a closed session is deleted).
    pub fn peer_down(&mut self, peer: PeerId) -> Vec<Change> {
        let Some(state) = self.peers.remove(&peer) else {
            return Vec::new();
        };
        if state.routes == 0 {
            return Vec::new();
        }
        let mut remove = Edit::new(peer, None);
        let (sets, records) = (&mut self.route_sets, &mut self.records);
        let touched: Vec<u32> = self
            .index
            .values()
            .filter(|&&slot| remove.apply(sets, &mut records[slot as usize]))
            .copied()
            .collect();
        self.recompute(touched)
    }

    /// Originates `prefix` (a loopback, a host subnet). A locally
    /// originated prefix is always preferred over learned routes.
    pub fn originate(&mut self, prefix: Ipv4Net) -> Vec<Change> {
        self.set_local(prefix, true)
    }

    /// Stops originating `prefix`; learned routes, if any, take over.
    pub fn withdraw_local(&mut self, prefix: Ipv4Net) -> Vec<Change> {
        self.set_local(prefix, false)
    }

    fn set_local(&mut self, prefix: Ipv4Net, local: bool) -> Vec<Change> {
        let slot = record(
            &mut self.index,
            &mut self.records,
            prefix.trunc(),
            &mut self.route_sets,
        );
        self.records[slot as usize].local = local;
        self.recompute([slot])
    }

    /// The Loc-RIB entry of `prefix`, if it is reachable.
    pub fn best(&self, prefix: &Ipv4Net) -> Option<&Best> {
        self.entry(prefix).map(|e| &e.best)
    }

    /// How `prefix` is advertised, if it is reachable.
    pub fn outgoing(&self, prefix: &Ipv4Net) -> Option<Outgoing> {
        self.outgoing_at(self.slot(prefix)?)
    }

    /// How the prefix at `slot` ([`Rib::slot`]) is advertised, if it is
    /// reachable (and the slot is one).
    pub fn outgoing_at(&self, slot: u32) -> Option<Outgoing> {
        let record = self.records.get(slot as usize)?;
        let entry = record.entry.as_ref()?;
        Some(Outgoing {
            attributes: entry.attributes.clone(),
            from: entry.from,
            version: record.version,
        })
    }

    /// Moves whenever the advertisement of some prefix ([`Rib::outgoing`])
    /// may have changed: a copy taken earlier that still matches says
    /// nothing changed since.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The dense index of `prefix` (from 0, one per prefix the RIB has
    /// ever seen, never reused), for tables kept per prefix beside the
    /// RIB such as an Adj-RIB-Out.
    pub fn slot(&self, prefix: &Ipv4Net) -> Option<u32> {
        self.index.get(prefix).copied()
    }

    /// The Loc-RIB, in prefix order.
    pub fn loc_rib(&self) -> impl Iterator<Item = (&Ipv4Net, &Best)> {
        self.in_order()
            .filter_map(|(p, r)| Some((p, &r.entry.as_ref()?.best)))
    }

    /// Every record, in prefix order.
    fn in_order(&self) -> impl Iterator<Item = (&Ipv4Net, &Prefix)> {
        self.index
            .iter()
            .map(|(p, &slot)| (p, &self.records[slot as usize]))
    }

    /// One peer's Adj-RIB-In (routes that passed the loop check), in
    /// prefix order.
    pub fn adj_rib_in(&self, peer: PeerId) -> impl Iterator<Item = (&Ipv4Net, &PathAttributes)> {
        self.in_order()
            .filter_map(move |(p, r)| Some((p, &**r.route_of(peer)?)))
    }

    /// How many routes `peer`'s Adj-RIB-In holds; the count of
    /// [`Rib::adj_rib_in`] without walking it (a status report asks for it
    /// after every batch).
    pub fn received(&self, peer: PeerId) -> usize {
        self.peers.get(&peer).map_or(0, |s| s.routes)
    }

    /// The UPDATE messages that bring peer `to` up to date with the Loc-RIB
    /// for `prefixes` (typically those of the last [`Change`]s, or the whole
    /// Loc-RIB when the session comes up), following the eBGP rules of
    /// RFC 4271 §5.1 and §9.2:
    ///
    /// - the selected route is advertised with the local AS prepended to
    ///   its AS_PATH (§5.1.2) and NEXT_HOP set to `local_addr`, this
    ///   speaker's address on the session (§5.1.3); ORIGIN, ATOMIC_AGGREGATE,
    ///   AGGREGATOR and unrecognized transitive attributes (with the Partial
    ///   bit, §5) are kept; MED (§5.1.4) and LOCAL_PREF (§5.1.5) are not
    ///   sent to another AS;
    /// - a locally originated prefix is advertised with ORIGIN IGP and
    ///   AS_PATH = [local AS];
    /// - a route is not sent back to the peer it was learned from, nor to
    ///   a peer in the same AS as that peer (split horizon by AS: the
    ///   receiver would discard it as a loop, RFC 4271 §9.1.2; in an
    ///   RFC 7938 fabric this keeps spines' routes from being sent to the
    ///   other spines);
    /// - a prefix with no route to advertise to `to` is withdrawn
    ///   (withdrawing a prefix the peer never received is harmless,
    ///   RFC 4271 §9.1.3 with §3.1).
    ///
    /// Prefixes with identical outgoing attributes share UPDATEs; every
    /// message encodes within [`MAX_MESSAGE_LEN`] octets, sized for
    /// 4-octet AS numbers (RFC 6793), which is the larger encoding.
    /// Withdrawals come first. (A speaker keeping an Adj-RIB-Out uses
    /// [`Rib::outgoing`] and [`pack_updates`] instead, to send only what
    /// changed.)
    pub fn export(
        &self,
        to: PeerId,
        to_info: &PeerSummary,
        local_addr: Ipv4Addr,
        prefixes: &[Ipv4Net],
    ) -> Vec<Update> {
        let mut seen = BTreeSet::new();
        let mut withdrawn = Vec::new();
        let mut groups = AttributeGroups::default();
        let mut nlri: Vec<Vec<Ipv4Net>> = Vec::new();
        for p in prefixes {
            let p = p.trunc();
            if !seen.insert(p) {
                continue;
            }
            match self.outgoing(&p) {
                Some(out) if goes_to(out.from, to, to_info.peer_as) => {
                    let group = groups.of(&out.attributes);
                    if group == nlri.len() {
                        nlri.push(Vec::new());
                    }
                    nlri[group].push(p);
                }
                _ => withdrawn.push(p),
            }
        }
        pack_updates(
            withdrawn,
            groups.groups.iter().map(|a| &**a).zip(nlri),
            local_addr,
        )
    }

    fn entry(&self, prefix: &Ipv4Net) -> Option<&Entry> {
        self.records[*self.index.get(prefix)? as usize]
            .entry
            .as_deref()
    }

    /// Reruns the decision process for the prefixes at `slots` and returns
    /// what changed.
    fn recompute(&mut self, slots: impl IntoIterator<Item = u32>) -> Vec<Change> {
        let mut changes = Vec::new();
        // Prefixes with the same routes have the same entry: decided once.
        let mut decided: ByAddress<[Route], Option<Arc<Entry>>> = ByAddress::default();
        for slot in slots {
            let record = &mut self.records[slot as usize];
            let prefix = record.prefix;
            let new = if record.local {
                Some(self.local_entry.clone())
            } else {
                let decide = Decide {
                    local_as: self.local_as,
                    multipath: self.multipath,
                    peers: &self.peers,
                    nexthop_sets: &mut self.nexthop_sets,
                    attributes: &mut self.attributes,
                    entries: &mut self.entries,
                };
                decided
                    .get_or_insert_with(&record.routes, |routes| decide.entry(routes))
                    .clone()
            };
            if record.entry == new {
                continue;
            }
            // What is advertised follows the selected route (its
            // attributes, and the peer it came from for split horizon),
            // not the rest of the ECMP set.
            let old = record.entry.take();
            if old.as_ref().map(|o| &o.selected) != new.as_ref().map(|n| &n.selected) {
                self.exports.insert(prefix);
                self.generation += 1;
                // Peers that hold the advertisement need no UPDATE if its
                // attributes are the same.
                record.version = match (&old, &new) {
                    (Some(old), Some(new)) if old.attributes == new.attributes => record.version,
                    (_, Some(_)) => {
                        self.version += 1;
                        self.version
                    }
                    (_, None) => 0,
                };
            }
            match &new {
                // The FIB only needs a change when the ECMP set or the
                // locality changed; a new selected route with the same
                // next hops is still reported so that it is exported.
                Some(entry) => changes.push(Change::Installed {
                    prefix,
                    best: entry.best.clone(),
                }),
                None => changes.push(Change::Removed { prefix }),
            }
            record.entry = new;
        }
        changes
    }
}

/// What deciding a prefix's entry needs of the [`Rib`].
struct Decide<'a> {
    local_as: u32,
    multipath: Multipath,
    peers: &'a BTreeMap<PeerId, Peer>,
    nexthop_sets: &'a mut Interner<[(PeerId, Ipv4Addr)]>,
    attributes: &'a mut Interner<PathAttributes>,
    entries: &'a mut Interner<Entry>,
}

impl Decide<'_> {
    /// The Loc-RIB entry of a prefix not originated here that has
    /// `routes`, shared with every prefix that has an equal one.
    fn entry(self, routes: &[Route]) -> Option<Arc<Entry>> {
        let (peer, selected, best) = select(
            self.local_as,
            self.multipath,
            self.peers,
            routes,
            self.nexthop_sets,
        )?;
        let from_as = self.peers.get(&peer)?.info.peer_as;
        let attributes = self
            .attributes
            .share(Arc::new(advertised(&selected, self.local_as)));
        let entry = Entry {
            best,
            selected: Some((peer, selected)),
            attributes,
            from: Some((peer, from_as)),
        };
        Some(self.entries.intern_with(&entry, |e| Arc::new(e.clone())))
    }
}

/// The route selected among `routes` (RFC 4271 §9.1.2), for a speaker in
/// `local_as`: its peer, its attributes, and what the FIB sees of the
/// prefix (its ECMP set shared through `sets`).
fn select(
    local_as: u32,
    multipath: Multipath,
    peers: &BTreeMap<PeerId, Peer>,
    routes: &[Route],
    sets: &mut Interner<[(PeerId, Ipv4Addr)]>,
) -> Option<(PeerId, Arc<PathAttributes>, Best)> {
    let candidates: Vec<Candidate<'_>> = routes
        .iter()
        .filter_map(|route| {
            Some(Candidate {
                peer: route.peer,
                info: peers.get(&route.peer)?.info,
                attrs: &route.attrs,
            })
        })
        .collect();
    let (best, ecmp) = decide(local_as, multipath, &candidates)?;
    let mut nexthops: Vec<(PeerId, Ipv4Addr)> =
        ecmp.iter().map(|&i| candidates[i].next_hop()).collect();
    nexthops.sort_unstable();
    let best = &candidates[best];
    Some((
        best.peer,
        best.attrs.clone(),
        Best {
            nexthops: sets.intern(&nexthops),
            as_path_len: best.path_len(),
            local: false,
        },
    ))
}

/// The slot of `prefix`'s record, made (with no routes) if it has none.
/// Records are never removed, so the next slot is the number of records.
fn record(
    index: &mut BTreeMap<Ipv4Net, u32>,
    records: &mut Vec<Prefix>,
    prefix: Ipv4Net,
    sets: &mut Interner<[Route]>,
) -> u32 {
    *index.entry(prefix).or_insert_with(|| {
        records.push(Prefix {
            prefix,
            version: 0,
            local: false,
            routes: sets.intern(&[]),
            entry: None,
        });
        (records.len() - 1) as u32
    })
}

impl Prefix {
    fn route_of(&self, peer: PeerId) -> Option<&Arc<PathAttributes>> {
        let i = self.routes.binary_search_by_key(&peer, |r| r.peer).ok()?;
        Some(&self.routes[i].attrs)
    }
}

/// One peer's route set in many prefixes' route sets, replaced or
/// removed: each distinct set before is changed once, and the prefixes
/// that shared it share the set after.
struct Edit {
    peer: PeerId,
    /// The peer's new route's attributes; `None`: its route goes.
    attrs: Option<Arc<PathAttributes>>,
    /// By the set before: the set after, and whether the peer had a route
    /// in it.
    done: ByAddress<[Route], (Routes, bool)>,
}

impl Edit {
    fn new(peer: PeerId, attrs: Option<Arc<PathAttributes>>) -> Edit {
        Edit {
            peer,
            attrs,
            done: ByAddress::default(),
        }
    }

    /// Applies the edit to `record`'s routes; true if the peer had a route
    /// there before.
    fn apply(&mut self, sets: &mut Interner<[Route]>, record: &mut Prefix) -> bool {
        let (peer, attrs) = (self.peer, &self.attrs);
        let (after, had) = self.done.get_or_insert_with(&record.routes, |before| {
            let at = before.binary_search_by_key(&peer, |r| r.peer);
            let mut routes: Vec<Route> = before.to_vec();
            match (at, attrs) {
                (Ok(i), Some(attrs)) => routes[i].attrs = attrs.clone(),
                (Err(i), Some(attrs)) => routes.insert(
                    i,
                    Route {
                        peer,
                        attrs: attrs.clone(),
                    },
                ),
                (Ok(i), None) => {
                    routes.remove(i);
                }
                (Err(_), None) => {}
            }
            (sets.intern(&routes), at.is_ok())
        });
        record.routes = after.clone();
        *had
    }
}

/// The attributes a route learned with `attrs` is advertised with over
/// eBGP (RFC 4271 §5.1): the local AS prepended, MED and LOCAL_PREF
/// dropped, unrecognized transitive attributes kept with the Partial bit,
/// NEXT_HOP left for the session to set.
fn advertised(attrs: &PathAttributes, local_as: u32) -> PathAttributes {
    let mut as_path = attrs.as_path.clone().unwrap_or_default();
    prepend(&mut as_path, local_as);
    PathAttributes {
        origin: attrs.origin,
        as_path: Some(as_path),
        next_hop: None,
        med: None,
        local_pref: None,
        atomic_aggregate: attrs.atomic_aggregate,
        aggregator: attrs.aggregator,
        mp_reach: None,
        mp_unreach: None,
        unknown: attrs
            .unknown
            .iter()
            .filter_map(super::attribute::RawAttribute::for_propagation)
            .collect(),
    }
}

/// Distinct outgoing attributes, numbered from 0 in the order first
/// seen: prefixes of one group share UPDATEs. Equal attributes are
/// usually one allocation (the routes of one UPDATE), so they are told
/// apart by address first and compared by value only once per address.
#[derive(Debug, Clone, Default)]
pub struct AttributeGroups {
    /// By address, with the `Arc` kept so that the address is not reused.
    by_address: foldhash::HashMap<usize, (Arc<PathAttributes>, usize)>,
    by_value: foldhash::HashMap<Arc<PathAttributes>, usize>,
    /// The attributes of each group.
    pub groups: Vec<Arc<PathAttributes>>,
}

impl AttributeGroups {
    /// The group of `attributes`, a new one if they are new.
    pub fn of(&mut self, attributes: &Arc<PathAttributes>) -> usize {
        let next = self.groups.len();
        let by_value = &mut self.by_value;
        let groups = &mut self.groups;
        self.by_address
            .entry(Arc::as_ptr(attributes) as usize)
            .or_insert_with(|| {
                let group = *by_value.entry(attributes.clone()).or_insert(next);
                if group == next {
                    groups.push(attributes.clone());
                }
                (attributes.clone(), group)
            })
            .1
    }
}

/// UPDATE messages for `withdrawn` prefixes and for groups of prefixes
/// sharing attributes (NEXT_HOP set to `next_hop`), every one within
/// [`MAX_MESSAGE_LEN`] octets as encoded with 4-octet AS numbers
/// (RFC 6793, the larger encoding); withdrawals first. A prefix whose
/// attributes fit no message (an AS_PATH too long) is withdrawn.
pub fn pack_updates<'a>(
    mut withdrawn: Vec<Ipv4Net>,
    groups: impl IntoIterator<Item = (&'a PathAttributes, Vec<Ipv4Net>)>,
    next_hop: Ipv4Addr,
) -> Vec<Update> {
    // Room for withdrawn routes, attributes and NLRI after the header
    // and the two length fields (RFC 4271 §4.3).
    const ROOM: usize = MAX_MESSAGE_LEN - HEADER_LEN - 4;
    let mut announced = Vec::new();
    let mut key = Vec::new();
    for (attrs, nlri) in groups {
        let attributes = PathAttributes {
            next_hop: Some(next_hop),
            ..attrs.clone()
        };
        key.clear();
        attributes.encode(&mut key, &Context::FOUR_OCTET_AS);
        let fits = |p: &Ipv4Net| key.len() + prefix_octets(p) <= ROOM;
        let nlri = if nlri.iter().all(fits) {
            nlri
        } else {
            let (fit, too_long): (Vec<Ipv4Net>, Vec<Ipv4Net>) = nlri.into_iter().partition(fits);
            withdrawn.extend(too_long);
            fit
        };
        if !nlri.is_empty() {
            announced.push((attributes, ROOM - key.len(), nlri));
        }
    }
    let mut out = Vec::new();
    for chunk in pack(&withdrawn, ROOM) {
        out.push(Update {
            withdrawn: chunk,
            ..Update::default()
        });
    }
    for (attributes, room, nlri) in announced {
        for chunk in pack(&nlri, room) {
            out.push(Update {
                withdrawn: Vec::new(),
                attributes: attributes.clone(),
                nlri: chunk,
            });
        }
    }
    out
}

/// One route for a prefix, as the decision process sees it.
#[derive(Debug, Clone)]
struct Candidate<'a> {
    peer: PeerId,
    info: PeerSummary,
    attrs: &'a Arc<PathAttributes>,
}

impl Candidate<'_> {
    fn ebgp(&self, local_as: u32) -> bool {
        self.info.peer_as != local_as
    }

    /// LOCAL_PREF, ignored when received over eBGP (RFC 4271 §5.1.5).
    fn local_pref(&self, local_as: u32) -> u32 {
        match self.attrs.local_pref {
            Some(lp) if !self.ebgp(local_as) => lp,
            _ => DEFAULT_LOCAL_PREF,
        }
    }

    fn path_len(&self) -> usize {
        self.attrs.as_path.as_ref().map_or(0, AsPath::path_len)
    }

    fn origin(&self) -> Origin {
        // Mandatory with NLRI (the codec checks); the worst value otherwise.
        self.attrs.origin.unwrap_or(Origin::Incomplete)
    }

    /// A missing MED is the lowest value (RFC 4271 §9.1.2.2 c).
    fn med(&self) -> u32 {
        self.attrs.med.unwrap_or(0)
    }

    /// The neighbour AS of RFC 4271 §9.1.2.2 c: the first AS of the path,
    /// or the local AS for a route an iBGP peer originated.
    fn neighbour_as(&self, local_as: u32) -> u32 {
        self.attrs
            .as_path
            .as_ref()
            .and_then(AsPath::first_as)
            .unwrap_or(if self.ebgp(local_as) {
                self.info.peer_as
            } else {
                local_as
            })
    }

    fn next_hop(&self) -> (PeerId, Ipv4Addr) {
        (
            self.peer,
            self.attrs.next_hop.unwrap_or(self.info.peer_addr),
        )
    }
}

/// Keeps the candidates whose `key` is minimal.
fn keep_min<K: Ord>(set: &mut Vec<usize>, key: impl Fn(usize) -> K) {
    if let Some(min) = set.iter().map(|&i| key(i)).min() {
        set.retain(|&i| key(i) == min);
    }
}

/// The decision process of RFC 4271 §9.1.2.2 over `cands`: the index of the
/// best route and the indices of the ECMP set (RFC 7938 §6), which contains
/// the best route. Multipath takes the routes still in the running after
/// step d (equal LOCAL_PREF, AS_PATH length, ORIGIN, not beaten on MED by
/// a route from the same neighbour AS, and of the same kind, eBGP or iBGP,
/// as the best); [`Multipath::SameAs`] also requires the best route's
/// neighbour AS.
fn decide(
    local_as: u32,
    multipath: Multipath,
    cands: &[Candidate<'_>],
) -> Option<(usize, Vec<usize>)> {
    let mut set: Vec<usize> = (0..cands.len()).collect();
    // Degree of preference (§9.1.1): LOCAL_PREF, highest first.
    keep_min(&mut set, |i| {
        std::cmp::Reverse(cands[i].local_pref(local_as))
    });
    // a) shortest AS_PATH.
    keep_min(&mut set, |i| cands[i].path_len());
    // b) lowest ORIGIN.
    keep_min(&mut set, |i| cands[i].origin());
    // c) lowest MED among routes from the same neighbour AS (nothing to do
    // when every MED is the same, as in a fabric without policy).
    let first_med = set.first().map(|&i| cands[i].med());
    if set.iter().any(|&i| Some(cands[i].med()) != first_med) {
        let mut lowest: Vec<(u32, u32)> = Vec::new();
        for &i in &set {
            let (nas, med) = (cands[i].neighbour_as(local_as), cands[i].med());
            match lowest.iter_mut().find(|(a, _)| *a == nas) {
                Some((_, low)) => *low = (*low).min(med),
                None => lowest.push((nas, med)),
            }
        }
        set.retain(|&i| {
            let (nas, med) = (cands[i].neighbour_as(local_as), cands[i].med());
            lowest.iter().any(|&(a, low)| a == nas && low == med)
        });
    }
    // d) eBGP over iBGP.
    if set.iter().any(|&i| cands[i].ebgp(local_as)) {
        set.retain(|&i| cands[i].ebgp(local_as));
    }
    let pool = set.clone();
    // f) lowest BGP Identifier, g) lowest peer address; the session id
    // settles two sessions to the same peer address.
    keep_min(&mut set, |i| {
        let c = &cands[i];
        (c.info.peer_id, c.info.peer_addr, c.peer)
    });
    let best = *set.first()?;
    let ecmp = match multipath {
        Multipath::Off => vec![best],
        Multipath::SameAs => {
            let nas = cands[best].neighbour_as(local_as);
            pool.into_iter()
                .filter(|&i| cands[i].neighbour_as(local_as) == nas)
                .collect()
        }
        Multipath::Relax => pool,
    };
    Some((best, ecmp))
}

/// Prepends `asn` to the path (RFC 4271 §5.1.2: to the leading
/// AS_SEQUENCE, or as a new one).
fn prepend(path: &mut AsPath, asn: u32) {
    match path.segments.first_mut() {
        Some(seg) if seg.kind == SegmentType::AsSequence => seg.asns.insert(0, asn),
        _ => path.segments.insert(
            0,
            AsSegment {
                kind: SegmentType::AsSequence,
                asns: vec![asn],
            },
        ),
    }
}

/// Octets of a prefix in Withdrawn Routes or NLRI (RFC 4271 §4.3).
fn prefix_octets(p: &Ipv4Net) -> usize {
    1 + usize::from(p.prefix_len()).div_ceil(8)
}

/// Splits `prefixes` into runs that encode within `room` octets.
fn pack(prefixes: &[Ipv4Net], room: usize) -> Vec<Vec<Ipv4Net>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut used = 0;
    for p in prefixes {
        let n = prefix_octets(p);
        if used + n > room && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
            used = 0;
        }
        cur.push(*p);
        used += n;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}
