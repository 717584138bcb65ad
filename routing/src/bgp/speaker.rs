//! One switch's BGP speaker, sans-I/O: every session of the switch, its
//! RIB, what it originates, its ports, and what its FIB holds.
//!
//! A [`Speaker`] owns one [`Session`] per planned neighbour
//! ([`plan::Speaker::neighbours`], indexed by position: the `peer` of every
//! [`Input`] and [`Output`]) and one [`Rib`] with [`Multipath::Relax`]
//! (RFC 7938 §6.3). Like the session it reads no clock and owns no socket:
//! the driver feeds it [`Input`]s with the time (a [`Duration`] since an
//! epoch of the driver's choosing, monotonic) and carries out its
//! [`Output`]s. [`run_speaker`](super::speaker_driver::run_speaker) is the
//! tokio driver; tests wire speakers through an in-memory network on a
//! virtual clock.
//!
//! Batching: inputs only record what changed in the Loc-RIB.
//! [`Speaker::flush`] then emits every changed prefix for the FIB with one
//! [`Output::Fib`], before the UPDATEs that advertise the changes (the
//! whole Loc-RIB to peers that just came up or asked for a ROUTE-REFRESH),
//! one write per peer. A driver that applies the FIB change before sending
//! never advertises a route it cannot forward; the tokio driver writes the
//! FIB beside its loop instead (see
//! [`speaker_driver`](super::speaker_driver)), so its peers may hear of a
//! route a moment before its kernel holds it. A driver calls
//! [`Speaker::handle`] for every input that is ready, then `flush` once, so
//! a burst of UPDATEs costs one FIB pass.
//!
//! Connections, as the driver must keep them:
//! - one TCP connection per neighbour at most. [`Output::Connect`] (the
//!   active end only; the plan makes one end of every fabric session
//!   passive, [`plan::Neighbour::passive`]) starts an attempt, answered by
//!   [`Input::Connected`] or [`Input::ConnectFailed`]; an accepted
//!   connection from the neighbour's address is [`Input::Connected`] too,
//!   and replaces an attempt in flight. While a connection is up, a newer
//!   one from the same neighbour is dropped by the driver without telling
//!   the speaker (RFC 4271 §6.8 keeps the existing connection when it is
//!   Established; collision detection in the earlier states is future
//!   work, see [`session`]).
//! - [`Output::Close`] drops the connection (after writing what was sent on
//!   it) or abandons the attempt; nothing more is reported for it.
//!   [`Input::Closed`] reports a connection the peer or the network ended.
//!
//! Ports: a port that goes down stops its sessions at once (as FRR's fast
//! external failover does, instead of waiting for the Hold Time) and
//! withdraws the prefixes originated on it (a dual-homed host's /32); when
//! it comes back up its sessions start again and its prefixes are
//! originated again. Ports are up until said otherwise.
//!
//! Each session keeps an Adj-RIB-Out (RFC 4271 §3.2): whether it holds
//! each prefix's current advertisement ([`Outgoing::version`](super::rib::Outgoing::version)), or an
//! older one, or none, so a flush sends only what changed for that peer.
//!
//! Not implemented (future work): End-of-RIB markers and the graceful
//! restart capability (RFC 4724; a restarted speaker keeps the stale FIB
//! entries of [`Speaker::assume_installed`] on its own, without its peers'
//! help), connection collision detection.

use std::collections::{BTreeSet, btree_map};
use std::fmt;
use std::mem;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::adj_out::AdjRibsOut;
use super::plan::{self, FibDigest};
use super::rib::{
    AttributeGroups, Change, Multipath, PeerId, PeerSummary, Rib, goes_to, pack_updates,
};
use super::session::{self, PeerInfo, Reason, Session, SessionConfig, State};
use super::{HEADER_LEN, Message, PORT, frame, msg_type};
use crate::NextHop;
use crate::intern::ByAddress;

/// The timers of every session of a speaker (RFC 4271 §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    /// Hold Time proposed in OPEN, in seconds (see
    /// [`SessionConfig::hold_time`]).
    pub hold_time: u16,
    /// KEEPALIVE interval in seconds; `None`: a third of the negotiated
    /// Hold Time.
    pub keepalive: Option<u16>,
    /// ConnectRetry timer: how long a connection attempt may take, and the
    /// wait before an active session whose connection failed in OpenSent
    /// connects again.
    pub connect_retry: Duration,
    /// Delay before a session that went down starts again
    /// (IdleHoldTimer, RFC 4271 §8.1.1).
    pub idle_hold: Duration,
    /// How long route changes settle before a flush installs and
    /// advertises them.
    pub settle: Settle,
}

/// How long a speaker lets route changes settle before a flush installs
/// them in the FIB and advertises them: a flush waits until no change has
/// come for [`Settle::quiet`], but no longer than the window after the
/// first change it covers. The window starts at [`Settle::least`] and
/// doubles, up to [`Settle::most`], each time it ran out while changes kept
/// coming (a converging fabric), and falls back to `least` after a flush
/// that found the changes settled. While a fabric converges, a prefix's
/// ECMP set grows a neighbour at a time as their UPDATEs arrive; within
/// one window the growth is decided, installed and advertised once. This
/// is BIRD's export settle time (1 ms / 100 ms by default) with the upper
/// bound adapting to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    /// Quiet time that ends the wait.
    pub quiet: Duration,
    /// The window when changes are rare.
    pub least: Duration,
    /// The widest window, while changes keep coming.
    pub most: Duration,
}

impl Settle {
    /// No wait: every flush installs and advertises what changed.
    pub const NONE: Settle = Settle {
        quiet: Duration::ZERO,
        least: Duration::ZERO,
        most: Duration::ZERO,
    };

    /// The lab's agents: 2 ms quiet, a window of 10 ms to 400 ms.
    pub const LAB: Settle = Settle {
        quiet: Duration::from_millis(2),
        least: Duration::from_millis(10),
        most: Duration::from_millis(400),
    };
}

impl Default for Timers {
    /// The session defaults of [`SessionConfig::new`].
    fn default() -> Self {
        let c = SessionConfig::new(0, Ipv4Addr::UNSPECIFIED);
        Timers {
            hold_time: c.hold_time,
            keepalive: c.keepalive,
            connect_retry: c.connect_retry,
            idle_hold: c.idle_hold,
            settle: Settle::NONE,
        }
    }
}

impl From<&turbonet_topo::BgpTimers> for Timers {
    /// A scenario's timers; sessions restart 100 ms after going down, as
    /// the lab's agents always did; changes settle as [`Settle::LAB`].
    fn from(t: &turbonet_topo::BgpTimers) -> Self {
        Timers {
            hold_time: t.hold_time,
            keepalive: Some(t.keepalive),
            connect_retry: Duration::from_secs(t.connect_retry.into()),
            idle_hold: Duration::from_millis(100),
            settle: Settle::LAB,
        }
    }
}

/// What happens to a speaker. `peer` is a neighbour's position in
/// [`plan::Speaker::neighbours`]; an out-of-range one is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Start: originate the prefixes and start every session whose port is
    /// up. Inputs before it only record port states; connections offered
    /// before it are refused.
    Start,
    /// Stop every session (a Cease NOTIFICATION on each connection,
    /// RFC 4486 §4) until the next [`Input::Start`].
    Stop,
    /// A TCP connection with `peer` is up, whichever side opened it.
    Connected {
        /// The neighbour.
        peer: usize,
    },
    /// The attempt of [`Output::Connect`] failed.
    ConnectFailed {
        /// The neighbour.
        peer: usize,
    },
    /// Bytes received on `peer`'s connection, cut anywhere.
    Bytes {
        /// The neighbour.
        peer: usize,
        /// The bytes.
        data: Vec<u8>,
    },
    /// `peer`'s KEEPALIVEs were read at `at` and kept by the driver: an
    /// Established session's, whose only effect is to restart the Hold
    /// timer ([`session::Input::Heard`]), so a driver may read them off the
    /// connection and tell the speaker once, when the timer is due
    /// ([`Speaker::due`]), rather than wake it for each.
    Heard {
        /// The neighbour.
        peer: usize,
        /// When the last was read.
        at: Duration,
    },
    /// `peer`'s connection was closed by the peer or failed.
    Closed {
        /// The neighbour.
        peer: usize,
    },
    /// A local port went up or down.
    Port {
        /// The interface.
        ifname: String,
        /// Its new state.
        up: bool,
    },
    /// Time advanced: expired timers fire (feed it at
    /// [`Speaker::next_deadline`]).
    Tick,
}

/// What the driver must do, or what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Open a TCP connection from `local` to `remote` (the neighbour's BGP
    /// port); answer with [`Input::Connected`] or [`Input::ConnectFailed`].
    Connect {
        /// The neighbour.
        peer: usize,
        /// Our address on the link: the connection's source.
        local: Ipv4Addr,
        /// The neighbour's address and port 179.
        remote: SocketAddrV4,
    },
    /// Write these bytes (whole messages) on `peer`'s connection.
    Send {
        /// The neighbour.
        peer: usize,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Drop `peer`'s connection once what was sent on it is written, or
    /// abandon the attempt in flight.
    Close {
        /// The neighbour.
        peer: usize,
    },
    /// `peer`'s session answered the neighbour's OPEN (OpenConfirm): a
    /// driver that writes KEEPALIVEs ([`Speaker::set_keepalives_by_driver`])
    /// writes them every `every` from now on. The neighbour may be
    /// Established already and timing our silence, and a speaker that
    /// waits long for its turn would otherwise confirm late.
    Keepalives {
        /// The neighbour.
        peer: usize,
        /// The negotiated interval.
        every: Duration,
    },
    /// Replace each prefix's next hops in the FIB; an empty list removes
    /// the prefix. Comes before the UPDATEs that advertise these routes:
    /// apply it first.
    Fib(Vec<(Ipv4Net, NextHops)>),
    /// Something to log.
    Event(Event),
}

/// A session event, for logs; [`Event::Established`] also tells a driver
/// that sends KEEPALIVEs ([`Speaker::set_keepalives_by_driver`]) that the
/// session's KEEPALIVEs only restart its Hold timer from now on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The session with `peer` reached Established.
    Established {
        /// The neighbour.
        peer: usize,
        /// What the OPEN exchange negotiated.
        info: PeerInfo,
    },
    /// A session that had a connection went down (failed connection
    /// attempts are not reported: the status shows them as `connect`).
    Down {
        /// The neighbour.
        peer: usize,
        /// It had been Established (its routes are withdrawn).
        established: bool,
        /// Why.
        cause: Cause,
    },
}

/// Why a session went down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// Its port went down.
    PortDown,
    /// The session's own reason.
    Session(Reason),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::PortDown => f.write_str("port down"),
            Cause::Session(r) => r.fmt(f),
        }
    }
}

/// A neighbour's state as `show bgp` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PeerState {
    /// Not started, or waiting to restart after going down.
    Idle,
    /// Passive: waiting for the peer to connect.
    Passive,
    /// Connecting, or waiting to connect again.
    Connect,
    /// Connected; the OPEN exchange is under way.
    Open,
    /// Established.
    Established,
    /// Its port is down.
    PortDown,
}

impl fmt::Display for PeerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PeerState::Idle => "idle",
            PeerState::Passive => "idle (passive)",
            PeerState::Connect => "connect",
            PeerState::Open => "open",
            PeerState::Established => "established",
            PeerState::PortDown => "port down",
        })
    }
}

/// One neighbour in a [`Status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighbourStatus {
    /// Its state.
    pub state: PeerState,
    /// Its session's FSM state.
    pub session: State,
    /// When it entered `state` (the speaker's clock).
    pub since: Duration,
    /// Prefixes received from it and kept (its Adj-RIB-In).
    pub received: usize,
    /// Why its session last went down.
    pub last_error: Option<String>,
    /// A router outside the fabric (its session does not count for
    /// [`Status::sessions_up`]).
    pub external: bool,
}

/// What a speaker reports of itself.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Status {
    /// When the report was made (the speaker's clock).
    pub at: Duration,
    /// Prefixes in its FIB.
    pub routes: usize,
    /// Digest of its FIB over the prefixes of the plan
    /// ([`Speaker::set_known`]); compare with
    /// [`plan::converged`]'s.
    pub fib: FibDigest,
    /// The last change of its FIB or of a session's state.
    pub last_change: Duration,
    /// Changes of the FIB are decided but not yet written (a driver that
    /// writes the FIB beside its loop says so): `fib` is what it will be.
    pub fib_pending: bool,
    /// Its neighbours, in plan order.
    pub neighbours: Vec<NeighbourStatus>,
    /// What it did since it started.
    #[serde(default)]
    pub counters: Counters,
}

/// What a speaker did since it started: the redundant work a converging
/// fabric does shows as set changes (and FIB writes) per route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Flushes that installed or advertised changes.
    pub flushes: u64,
    /// Prefixes whose next hops a flush changed in the FIB (each
    /// [`Output::Fib`] entry).
    pub set_changes: u64,
    /// Prefixes the FIB was asked to write (a driver that merges change
    /// sets while a write is in flight writes fewer than `set_changes`).
    pub fib_writes: u64,
    /// Requests the FIB made of what holds its routes to write them: a
    /// kernel's route writes and removals and its nexthop objects and
    /// groups made, changed or removed (a group changed in place is one
    /// request for all its routes); a pipeline's routes.
    #[serde(default)]
    pub fib_requests: u64,
    /// UPDATE messages sent.
    pub updates_sent: u64,
    /// Established sessions whose Hold timer expired here: a neighbour
    /// silent for the Hold time, which on a loaded machine means a speaker
    /// or connection that could not keep up (the neighbour sees our
    /// NOTIFICATION; each such loss is counted once, by this side).
    #[serde(default)]
    pub hold_expiries: u64,
}

impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.flushes += o.flushes;
        self.set_changes += o.set_changes;
        self.fib_writes += o.fib_writes;
        self.fib_requests += o.fib_requests;
        self.updates_sent += o.updates_sent;
        self.hold_expiries += o.hold_expiries;
    }
}

impl Status {
    /// Every session in the fabric whose port is up is Established.
    pub fn sessions_up(&self) -> bool {
        self.neighbours
            .iter()
            .all(|n| n.external || matches!(n.state, PeerState::Established | PeerState::PortDown))
    }

    /// The speaker is converged to `expected`: its FIB is what the plan
    /// says and every fabric session whose port is up is Established. It
    /// converged at [`Status::last_change`].
    pub fn converged(&self, expected: &FibDigest) -> bool {
        self.fib == *expected && !self.fib_pending && self.sessions_up()
    }
}

/// One neighbour's session and what the speaker knows of it.
#[derive(Debug, Clone)]
struct Peer {
    session: Session,
    /// For route selection and export, while Established.
    summary: Option<PeerSummary>,
    state: PeerState,
    since: Duration,
    last_error: Option<String>,
}

/// One switch's BGP speaker.
#[derive(Debug, Clone)]
pub struct Speaker {
    plan: plan::Speaker,
    rib: Rib,
    peers: Vec<Peer>,
    /// Each peer's next timer, in order.
    deadlines: Deadlines,
    /// What each session was sent of each prefix. A prefix whose outgoing
    /// attributes did not change is not sent again, and one never
    /// advertised is not withdrawn: while a fabric converges a prefix's
    /// Loc-RIB entry changes many times (its ECMP set grows a neighbour at
    /// a time) without changing what is advertised.
    adj_out: AdjRibsOut,
    /// Ports known to be down; every other port is up.
    ports_down: BTreeSet<String>,
    started: bool,
    /// Loc-RIB prefixes changed since the last flush.
    changed: Changed,
    /// Peers owed the whole Loc-RIB at the next flush.
    fresh: BTreeSet<usize>,
    /// Advertisements decided and not yet sent to every peer, oldest
    /// first.
    rounds: std::collections::VecDeque<Round>,
    /// What the FIB holds: next-hop addresses by prefix.
    installed: plan::Fib,
    /// What the RIB's ECMP sets are in the FIB.
    fib_sets: FibSets,
    /// The prefixes the FIB digest covers; `None`: all.
    known: Option<Arc<BTreeSet<Ipv4Net>>>,
    digest: FibDigest,
    /// Entries of [`Speaker::assume_installed`] not learned again yet.
    stale: BTreeSet<Ipv4Net>,
    stale_until: Option<Duration>,
    last_change: Duration,
    settle: Settle,
    /// The settle window now (see [`Settle`]).
    window: Duration,
    /// When the oldest change not yet flushed came.
    pending_since: Option<Duration>,
    /// When the latest change not yet flushed came.
    last_pending: Duration,
    counters: Counters,
}

impl Speaker {
    /// A stopped speaker for `plan`; [`Input::Start`] starts it.
    pub fn new(plan: plan::Speaker, timers: Timers) -> Speaker {
        let peers: Vec<Peer> = plan
            .neighbours
            .iter()
            .map(|n| {
                let mut config = SessionConfig::new(plan.asn, plan.router_id);
                config.peer_as = Some(n.peer_asn);
                config.hold_time = timers.hold_time;
                config.keepalive = timers.keepalive;
                config.connect_retry = timers.connect_retry;
                config.idle_hold = timers.idle_hold;
                config.passive = n.passive;
                Peer {
                    session: Session::new(config),
                    summary: None,
                    state: PeerState::Idle,
                    since: Duration::ZERO,
                    last_error: None,
                }
            })
            .collect();
        Speaker {
            rib: Rib::new(plan.asn, plan.router_id, Multipath::Relax),
            adj_out: AdjRibsOut::new(peers.len()),
            peers,
            // A new session times nothing until it starts.
            deadlines: Deadlines::default(),
            ports_down: BTreeSet::new(),
            started: false,
            changed: Changed::default(),
            fresh: BTreeSet::new(),
            rounds: std::collections::VecDeque::new(),
            installed: plan::Fib::new(),
            fib_sets: FibSets::default(),
            known: None,
            digest: FibDigest::default(),
            stale: BTreeSet::new(),
            stale_until: None,
            last_change: Duration::ZERO,
            settle: timers.settle,
            window: timers.settle.least,
            pending_since: None,
            last_pending: Duration::ZERO,
            counters: Counters::default(),
            plan,
        }
    }

    /// The plan it follows.
    pub fn plan(&self) -> &plan::Speaker {
        &self.plan
    }

    /// Its RIBs.
    pub fn rib(&self) -> &Rib {
        &self.rib
    }

    /// What its FIB holds: the next-hop addresses of every prefix it
    /// installed (its own originations are not in it), as
    /// [`plan::converged`] computes them.
    pub fn installed(&self) -> &plan::Fib {
        &self.installed
    }

    /// Digest of [`Speaker::installed`] over the known prefixes.
    pub fn digest(&self) -> FibDigest {
        self.digest
    }

    /// When its FIB or a session's state last changed.
    pub fn last_change(&self) -> Duration {
        self.last_change
    }

    /// Restricts [`Speaker::digest`] (and [`Status::fib`]) to the prefixes
    /// of the plan ([`plan::known_prefixes`]): routes learned from routers
    /// outside the fabric are not in the plan's FIBs.
    /// Every speaker of a fabric learns about every prefix of the plan: its
    /// RIB makes room for them once.
    pub fn set_known(&mut self, known: Arc<BTreeSet<Ipv4Net>>) {
        self.rib.reserve(known.len());
        self.known = Some(known);
        self.digest = self.compute_digest();
    }

    /// From now on the driver writes the periodic KEEPALIVEs of every
    /// session from OpenConfirm on ([`SessionConfig::keepalives_by_driver`]):
    /// one on a connection that had nothing written for the interval
    /// [`Output::Keepalives`] gives when the session answers the OPEN.
    /// Call it before [`Input::Start`].
    pub fn set_keepalives_by_driver(&mut self) {
        for n in 0..self.peers.len() {
            self.peers[n].session.set_keepalives_by_driver();
            self.timed(n);
        }
    }

    /// Peer `n`'s session may have set its timers otherwise.
    fn timed(&mut self, n: usize) {
        self.deadlines.set(n, self.peers[n].session.next_deadline());
    }

    /// The neighbour whose address on the link is `addr`: where a
    /// connection accepted from `addr` belongs.
    pub fn neighbour_at(&self, addr: Ipv4Addr) -> Option<usize> {
        self.plan
            .neighbours
            .iter()
            .position(|n| n.peer_addr == addr)
    }

    /// The state of neighbour `peer`, if there is one.
    pub fn peer_state(&self, peer: usize) -> Option<PeerState> {
        self.peers.get(peer).map(|p| p.state)
    }

    /// Route changes or advertisements wait for [`Speaker::flush`] (see
    /// [`Speaker::flush_at`] for when it will take them).
    pub fn pending(&self) -> bool {
        self.changes_pending() || !self.rounds.is_empty()
    }

    /// When [`Speaker::flush`] has work: now (the speaker's clock is the
    /// caller's; [`Duration::ZERO`]) for advertisements a flush left over,
    /// the end of the settle wait for route changes ([`Settle`]), or never.
    pub fn flush_at(&self) -> Option<Duration> {
        if !self.rounds.is_empty() {
            return Some(Duration::ZERO);
        }
        self.settled_at()
    }

    /// When the changes waiting are settled, if any wait.
    fn settled_at(&self) -> Option<Duration> {
        let since = self.pending_since?;
        Some((self.last_pending + self.settle.quiet).min(since + self.window))
    }

    fn changes_pending(&self) -> bool {
        !self.changed.is_empty() || !self.fresh.is_empty()
    }

    /// Notes that route changes may have been recorded at `now`: the
    /// settle wait starts or goes on.
    fn note_changes(&mut self, now: Duration, fresh_before: usize) {
        let touched = mem::take(&mut self.changed.touched);
        if (touched || self.fresh.len() != fresh_before) && self.changes_pending() {
            self.pending_since.get_or_insert(now);
            self.last_pending = now;
        }
    }

    /// The FIB already holds `fib` (a restarted speaker, the kernel table
    /// it left behind): from now on only differences are emitted. Entries
    /// the speaker does not learn again are kept until `until` (as a
    /// graceful restart keeps stale routes, RFC 4724 §4.2, so that
    /// forwarding goes on while the sessions come back), then removed;
    /// entries the Loc-RIB has are replaced at the next flush if they
    /// differ.
    pub fn assume_installed(&mut self, fib: plan::Fib, until: Duration) {
        self.pending_since.get_or_insert(Duration::ZERO);
        self.changed.extend(fib.keys().copied());
        self.changed.extend(self.rib.loc_rib().map(|(p, _)| *p));
        self.stale = fib.keys().copied().collect();
        self.stale_until = (!self.stale.is_empty()).then_some(until);
        self.installed = fib;
        self.digest = self.compute_digest();
    }

    /// When the next timer expires; feed [`Input::Tick`] then (and call
    /// [`Speaker::flush`] at [`Speaker::flush_at`]).
    pub fn next_deadline(&self) -> Option<Duration> {
        self.deadlines
            .first()
            .into_iter()
            .chain(self.stale_until)
            .min()
    }

    /// The peers whose session's timer expires by `by`, in order of
    /// expiry.
    pub fn due(&self, by: Duration) -> Vec<usize> {
        self.deadlines.due(by)
    }

    /// Its status at `now`.
    pub fn status(&self, now: Duration) -> Status {
        Status {
            at: now,
            routes: self.installed.len(),
            fib: self.digest,
            last_change: self.last_change,
            // What waits to settle may change the FIB.
            fib_pending: self.changes_pending(),
            neighbours: self
                .peers
                .iter()
                .zip(&self.plan.neighbours)
                .enumerate()
                .map(|(n, (p, neighbour))| NeighbourStatus {
                    state: p.state,
                    session: p.session.state(),
                    since: p.since,
                    received: self.rib.received(n as PeerId),
                    last_error: p.last_error.clone(),
                    external: neighbour.peer.is_none(),
                })
                .collect(),
            counters: self.counters,
        }
    }

    /// Handles one input at `now`. Route changes are only recorded: see
    /// [`Speaker::flush`].
    pub fn handle(&mut self, now: Duration, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        let fresh_before = self.fresh.len();
        match input {
            Input::Start => self.start(now, &mut out),
            Input::Stop => self.stop(now, &mut out),
            Input::Connected { peer } => {
                self.feed(now, peer, session::Input::TcpConnected, false, &mut out);
            }
            Input::ConnectFailed { peer } | Input::Closed { peer } => {
                self.feed(now, peer, session::Input::TcpFailed, false, &mut out);
            }
            Input::Bytes { peer, data } => {
                self.feed(now, peer, session::Input::Bytes(data), false, &mut out);
            }
            Input::Heard { peer, at } => {
                self.feed(now, peer, session::Input::Heard(at), false, &mut out);
            }
            Input::Port { ifname, up } => self.port(now, &ifname, up, &mut out),
            Input::Tick => self.tick(now, &mut out),
        }
        self.note_changes(now, fresh_before);
        self.count_updates(&out);
        out
    }

    fn count_updates(&mut self, out: &[Output]) {
        for o in out {
            if let Output::Send { bytes, .. } = o {
                self.counters.updates_sent += count_updates(bytes);
            }
        }
    }

    /// Installs every prefix changed since the last flush in the FIB (one
    /// [`Output::Fib`]), then advertises the changes to every Established
    /// peer, and the whole Loc-RIB to those that just came up or asked for
    /// a ROUTE-REFRESH (RFC 2918 §4: re-advertise the Adj-RIB-Out).
    ///
    /// A flush stops advertising once it has covered [`ADVERTISE_BUDGET`]
    /// prefixes times peers (one peer's share is never split; a spine of a
    /// thousand leaves hearing from each of them owes a million): what is
    /// left waits for the next flush, in order, and
    /// [`Speaker::pending`] stays true meanwhile, so a driver that flushes
    /// again after its other work never stops its sessions for seconds.
    pub fn flush(&mut self, now: Duration) -> Vec<Output> {
        let mut out = Vec::new();
        let mut budget = ADVERTISE_BUDGET;
        let settled = self.settled_at().is_some_and(|t| t <= now);
        if settled {
            // A window that ran out while changes kept coming widens; one
            // that found them settled narrows back.
            let quiet = self.last_pending + self.settle.quiet <= now;
            self.window = if quiet {
                self.settle.least
            } else {
                (self.window * 2).min(self.settle.most)
            };
            self.pending_since = None;
        }
        // Sending can fire a session's timers (a Hold Time expired that the
        // driver had not ticked yet), which takes it down and changes the
        // Loc-RIB again: another round, at most one per session.
        for round in 0..=self.peers.len() {
            if (settled || round > 0) && self.changes_pending() {
                let changed = self.changed.take();
                let exports = self.rib.take_exports();
                let fresh = mem::take(&mut self.fresh);
                self.counters.flushes += 1;
                self.sync_fib(now, &changed, &mut out);
                if !exports.is_empty() || !fresh.is_empty() {
                    self.queue_round(exports, fresh);
                }
            }
            budget = self.advertise(now, budget, &mut out);
            if budget == 0 || !self.changes_pending() || !settled {
                break;
            }
        }
        // What came in while flushing (a session taken down) waits anew.
        if settled && self.changes_pending() {
            self.pending_since = Some(now);
            self.last_pending = now;
        }
        self.changed.touched = false;
        self.count_updates(&out);
        out
    }

    fn port_up(&self, ifname: &str) -> bool {
        !self.ports_down.contains(ifname)
    }

    fn start(&mut self, now: Duration, out: &mut Vec<Output>) {
        if self.started {
            return;
        }
        self.started = true;
        for i in 0..self.plan.originate.len() {
            let o = &self.plan.originate[i];
            if o.port.as_deref().is_none_or(|p| self.port_up(p)) {
                let changes = self.rib.originate(o.prefix);
                self.changed.extend(changes.iter().map(Change::prefix));
            }
        }
        for n in 0..self.peers.len() {
            if self.port_up(&self.plan.neighbours[n].ifname) {
                self.feed(now, n, session::Input::Start, false, out);
            }
        }
    }

    fn stop(&mut self, now: Duration, out: &mut Vec<Output>) {
        self.started = false;
        for n in 0..self.peers.len() {
            self.feed(now, n, session::Input::Stop, false, out);
        }
    }

    fn port(&mut self, now: Duration, ifname: &str, up: bool, out: &mut Vec<Output>) {
        if self.port_up(ifname) == up {
            return;
        }
        if up {
            self.ports_down.remove(ifname);
        } else {
            self.ports_down.insert(ifname.to_owned());
        }
        if self.started {
            for i in 0..self.plan.originate.len() {
                let o = &self.plan.originate[i];
                if o.port.as_deref() != Some(ifname) {
                    continue;
                }
                let changes = if up {
                    self.rib.originate(o.prefix)
                } else {
                    self.rib.withdraw_local(o.prefix)
                };
                self.changed.extend(changes.iter().map(Change::prefix));
            }
        }
        for n in 0..self.peers.len() {
            if self.plan.neighbours[n].ifname != ifname {
                continue;
            }
            if !self.started {
                self.refresh_state(now, n);
            } else if up {
                self.feed(now, n, session::Input::Start, false, out);
            } else {
                // Stop, not a connection failure: the session must not
                // restart until the port is back.
                self.feed(now, n, session::Input::Stop, true, out);
            }
        }
    }

    fn tick(&mut self, now: Duration, out: &mut Vec<Output>) {
        // In the peers' order, each still due when its turn comes.
        let mut due = self.deadlines.due(now);
        due.sort_unstable();
        for n in due {
            if self.peers[n]
                .session
                .next_deadline()
                .is_some_and(|d| d <= now)
            {
                self.feed(now, n, session::Input::Tick, false, out);
            }
        }
        if self.stale_until.is_some_and(|t| t <= now) {
            self.stale_until = None;
            // No longer stale: the next flush removes what the Loc-RIB
            // still lacks.
            let stale = mem::take(&mut self.stale);
            self.changed.extend(stale);
        }
    }

    /// Feeds `input` to `peer`'s session and handles what comes out;
    /// `port_down` when the port going down is the cause.
    fn feed(
        &mut self,
        now: Duration,
        peer: usize,
        input: session::Input,
        port_down: bool,
        out: &mut Vec<Output>,
    ) {
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        let before = p.session.state();
        let outs = p.session.handle(now, input);
        self.timed(peer);
        self.session_outputs(now, peer, before, outs, port_down, out);
    }

    /// Carries out what session `n` (in state `before` until now) asked for.
    fn session_outputs(
        &mut self,
        now: Duration,
        n: usize,
        before: State,
        outs: Vec<session::Output>,
        port_down: bool,
        out: &mut Vec<Output>,
    ) {
        let had_connection = matches!(
            before,
            State::OpenSent | State::OpenConfirm | State::Established
        );
        let neighbour = &self.plan.neighbours[n];
        let peer = &mut self.peers[n];
        for o in outs {
            match o {
                session::Output::Connect => out.push(Output::Connect {
                    peer: n,
                    local: neighbour.local_addr,
                    remote: SocketAddrV4::new(neighbour.peer_addr, PORT),
                }),
                session::Output::Send(bytes) => out.push(Output::Send { peer: n, bytes }),
                session::Output::Close => out.push(Output::Close { peer: n }),
                session::Output::StateChanged {
                    to: State::OpenConfirm,
                    ..
                } if peer.session.config().keepalives_by_driver => {
                    if let Some(info) = peer.session.peer() {
                        let every = Duration::from_secs(info.keepalive.into());
                        out.push(Output::Keepalives { peer: n, every });
                    }
                }
                session::Output::StateChanged { .. } => {}
                session::Output::Established(info) => {
                    peer.summary = Some(PeerSummary {
                        peer_as: info.peer_as,
                        peer_addr: neighbour.peer_addr,
                        peer_id: info.peer_id,
                    });
                    self.fresh.insert(n);
                    self.last_change = now;
                    out.push(Output::Event(Event::Established { peer: n, info }));
                }
                session::Output::Received(Message::Update(update)) => {
                    if let Some(summary) = &peer.summary {
                        let changes = self.rib.update(n as PeerId, summary, &update);
                        self.changed.extend(changes.iter().map(Change::prefix));
                    }
                }
                // RFC 2918 §4: re-advertise the Adj-RIB-Out to the peer.
                session::Output::Received(Message::RouteRefresh(_)) => {
                    if peer.summary.is_some() {
                        self.fresh.insert(n);
                    }
                }
                // The session hands over UPDATEs and ROUTE-REFRESHes only.
                session::Output::Received(_) => {}
                session::Output::Down(reason) => {
                    let established = peer.summary.take().is_some();
                    if established && matches!(reason, Reason::HoldTimerExpired) {
                        self.counters.hold_expiries += 1;
                    }
                    self.adj_out.clear(n);
                    self.fresh.remove(&n);
                    // RFC 4271 §8.2.2: the routes of a closed session go.
                    let changes = self.rib.peer_down(n as PeerId);
                    self.changed.extend(changes.iter().map(Change::prefix));
                    if had_connection || port_down {
                        let cause = if port_down {
                            Cause::PortDown
                        } else {
                            Cause::Session(reason)
                        };
                        peer.last_error = Some(cause.to_string());
                        self.last_change = now;
                        out.push(Output::Event(Event::Down {
                            peer: n,
                            established,
                            cause,
                        }));
                    }
                }
            }
        }
        self.refresh_state(now, n);
    }

    /// Records neighbour `n`'s state after a change of its session or port.
    fn refresh_state(&mut self, now: Duration, n: usize) {
        let neighbour = &self.plan.neighbours[n];
        let state = if !self.port_up(&neighbour.ifname) {
            PeerState::PortDown
        } else {
            match self.peers[n].session.state() {
                State::Idle => PeerState::Idle,
                State::Active if neighbour.passive => PeerState::Passive,
                State::Connect | State::Active => PeerState::Connect,
                State::OpenSent | State::OpenConfirm => PeerState::Open,
                State::Established => PeerState::Established,
            }
        };
        let peer = &mut self.peers[n];
        if peer.state != state {
            peer.state = state;
            peer.since = now;
        }
    }

    /// The FIB part of a flush: one [`Output::Fib`] with every prefix of
    /// `changed` whose next hops differ from what the FIB holds.
    fn sync_fib(&mut self, now: Duration, changed: &[Ipv4Net], out: &mut Vec<Output>) {
        let mut routes = Vec::new();
        let mut hashes = HopsHashes::default();
        for prefix in changed {
            let best = self.rib.best(prefix);
            let set = best
                .filter(|b| !b.local)
                .map(|b| self.fib_sets.of(&b.nexthops, &self.plan.neighbours))
                .filter(|set| !set.addrs.is_empty());
            let Some(set) = set else {
                // Nothing known of it yet: a stale entry stays until its
                // time is up (a locally originated prefix is known).
                if best.is_none() && self.stale.contains(prefix) {
                    continue;
                }
                self.stale.remove(prefix);
                if let Some(old) = self.installed.remove(prefix) {
                    digest_change(
                        &mut self.digest,
                        self.known.as_deref(),
                        &mut hashes,
                        prefix,
                        Some(&old),
                        None,
                    );
                    routes.push((*prefix, self.fib_sets.none.clone()));
                }
                continue;
            };
            self.stale.remove(prefix);
            let old = match self.installed.entry(*prefix) {
                btree_map::Entry::Occupied(held) if *held.get() == set.addrs => continue,
                btree_map::Entry::Occupied(mut held) => Some(held.insert(set.addrs.clone())),
                btree_map::Entry::Vacant(room) => {
                    room.insert(set.addrs.clone());
                    None
                }
            };
            digest_change(
                &mut self.digest,
                self.known.as_deref(),
                &mut hashes,
                prefix,
                old.as_ref(),
                Some(&set.addrs),
            );
            routes.push((*prefix, set.hops));
        }
        if self.stale.is_empty() {
            self.stale_until = None;
        }
        if !routes.is_empty() {
            self.last_change = now;
            self.counters.set_changes += routes.len() as u64;
            out.push(Output::Fib(routes));
        }
    }

    /// Rounds of advertisements not yet sent to every peer: one in
    /// progress and one waiting at most (see [`Speaker::flush`]).
    pub fn rounds_waiting(&self) -> usize {
        self.rounds.len()
    }

    /// Queues a flush's advertisements: what changed (`exports`) for
    /// every Established peer, the whole Loc-RIB for the peers of `fresh`.
    /// A round that no peer has been served from yet takes them in
    /// instead, made anew from the RIB as it is now (what it held of the
    /// RIB before would only be skipped as changed): a speaker whose RIB
    /// changes faster than it advertises keeps one round in progress and
    /// one waiting, not one a flush (a converging switch of the HPN pod
    /// queued hundreds, each holding a copy of its Loc-RIB's adverts).
    fn queue_round(&mut self, mut exports: BTreeSet<Ipv4Net>, mut fresh: BTreeSet<usize>) {
        if self.rounds.back().is_some_and(|r| r.next == 0)
            && let Some(waiting) = self.rounds.pop_back()
        {
            exports.extend(waiting.changed.prefixes.iter().map(|e| e.prefix));
            fresh.extend(waiting.fresh);
        }
        let full = (!fresh.is_empty())
            .then(|| Exports::new(&self.rib, self.rib.loc_rib().map(|(p, _)| *p)));
        self.rounds.push_back(Round {
            changed: Exports::new(&self.rib, exports),
            full,
            fresh,
            next: 0,
        });
    }

    /// The UPDATE part of flushes (RFC 4271 §9.2): each round's changes
    /// to every Established peer, the whole Loc-RIB to those of its
    /// `fresh`; to each peer only what differs from its Adj-RIB-Out, in one
    /// write. Stops when `budget` (prefixes times peers) is spent; returns
    /// what is left of it.
    fn advertise(&mut self, now: Duration, mut budget: usize, out: &mut Vec<Output>) -> usize {
        while let Some(mut round) = self.rounds.pop_front() {
            while round.next < self.peers.len() {
                if budget == 0 {
                    self.rounds.push_front(round);
                    return 0;
                }
                let n = round.next;
                round.next += 1;
                // An advertisement that changed since the round was made is
                // in a later round: sending this one would be wasted.
                round.changed.recheck(&self.rib);
                let full = match &mut round.full {
                    Some(full) if round.fresh.contains(&n) => {
                        full.recheck(&self.rib);
                        Some(&*full)
                    }
                    _ => None,
                };
                let cost = self.advertise_to(now, n, &round.changed, full, out);
                budget = budget.saturating_sub(cost);
            }
        }
        budget
    }

    /// Advertises to peer `n` what of `changed` differs from its
    /// Adj-RIB-Out, and with `full` (a new session, or a ROUTE-REFRESH) the
    /// whole Loc-RIB again whatever it holds; entries whose advertisement
    /// changed since they were made ([`Exports::recheck`]) are skipped.
    /// What it cost, in prefixes.
    fn advertise_to(
        &mut self,
        now: Duration,
        n: usize,
        changed: &Exports,
        full: Option<&Exports>,
        out: &mut Vec<Output>,
    ) -> usize {
        let Some(summary) = self.peers[n].summary else {
            return 0;
        };
        let adj_out = &mut self.adj_out;
        let mut withdrawn = Vec::new();
        let mut announced: Vec<(&Exports, usize, Ipv4Net)> = Vec::new();
        // The whole table first: a prefix of both is then sent once.
        let lists = full
            .map(|f| (f, true))
            .into_iter()
            .chain([(changed, false)]);
        for (exports, force) in lists {
            adj_out.reserve(exports.slots);
            for (e, _) in exports
                .prefixes
                .iter()
                .zip(&exports.current)
                .filter(|e| *e.1)
            {
                let want = e
                    .outgoing
                    .filter(|a| goes_to(a.from, n as PeerId, summary.peer_as));
                match want {
                    Some(a) if !force && adj_out.holds(e.slot, n, a.version) => {}
                    Some(a) => {
                        adj_out.announce(e.slot, n, a.version);
                        announced.push((exports, a.group, e.prefix));
                    }
                    None => {
                        if adj_out.withdraw(e.slot, n) {
                            withdrawn.push(e.prefix);
                        }
                    }
                }
            }
        }
        let cost = full.map_or(0, |f| f.prefixes.len()) + changed.prefixes.len();
        if withdrawn.is_empty() && announced.is_empty() {
            return cost;
        }
        // Prefixes of a group together, in the order they came.
        announced.sort_by_key(|&(exports, group, _)| (std::ptr::from_ref(exports), group));
        let groups = announced
            .chunk_by(|a, b| std::ptr::eq(a.0, b.0) && a.1 == b.1)
            .map(|run| {
                (
                    &*run[0].0.groups.groups[run[0].1],
                    run.iter().map(|&(_, _, p)| p).collect(),
                )
            });
        let updates = pack_updates(withdrawn, groups, self.plan.neighbours[n].local_addr);
        let before = self.peers[n].session.state();
        let outs = self.peers[n].session.send_updates(now, updates);
        self.timed(n);
        self.session_outputs(now, n, before, outs, false, out);
        cost
    }

    fn compute_digest(&self) -> FibDigest {
        let known = self.known.as_deref();
        FibDigest::of(
            self.installed
                .iter()
                .filter(|(p, _)| known.is_none_or(|k| k.contains(p))),
        )
    }
}

/// Each peer's next timer, kept in order: the driver asks for the
/// earliest after every event it hands the speaker, and a spine of a
/// thousand sessions walked them all each time (at steady state a
/// thousand keepalives a second, each a walk of a thousand timers).
#[derive(Debug, Clone, Default)]
struct Deadlines {
    of: Vec<Option<Duration>>,
    ordered: BTreeSet<(Duration, usize)>,
}

impl Deadlines {
    /// Peer `peer`'s next timer is `at` (none: no timer runs).
    fn set(&mut self, peer: usize, at: Option<Duration>) {
        if self.of.len() <= peer {
            self.of.resize(peer + 1, None);
        }
        if self.of[peer] == at {
            return;
        }
        if let Some(old) = self.of[peer] {
            self.ordered.remove(&(old, peer));
        }
        if let Some(new) = at {
            self.ordered.insert((new, peer));
        }
        self.of[peer] = at;
    }

    /// The earliest timer.
    fn first(&self) -> Option<Duration> {
        self.ordered.first().map(|(at, _)| *at)
    }

    /// The peers whose timer is due at `now`.
    fn due(&self, now: Duration) -> Vec<usize> {
        self.ordered
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, peer)| *peer)
            .collect()
    }
}

/// Prefixes times peers after which a flush stops advertising (see
/// [`Speaker::flush`]): a few milliseconds of work.
pub const ADVERTISE_BUDGET: usize = 5_000;

/// One flush's advertisements, sent to peers `next..` so far.
#[derive(Debug, Clone)]
struct Round {
    /// What changed, for every Established peer.
    changed: Exports,
    /// The whole Loc-RIB, for the peers in `fresh`.
    full: Option<Exports>,
    fresh: BTreeSet<usize>,
    next: usize,
}

/// The prefixes of one flush's advertisements, each looked up in the RIB
/// once for all peers, their attributes grouped (equal attributes, one
/// UPDATE).
#[derive(Debug, Clone, Default)]
struct Exports {
    prefixes: Vec<Export>,
    /// Whether each prefix's advertisement is still the RIB's.
    current: Vec<bool>,
    /// [`Rib::generation`] when `current` was last checked.
    checked: u64,
    groups: AttributeGroups,
    /// One past the largest slot.
    slots: usize,
}

#[derive(Debug, Clone)]
struct Export {
    prefix: Ipv4Net,
    slot: usize,
    /// Its advertisement; `None`: withdrawn.
    outgoing: Option<Advert>,
}

impl Export {
    fn version(&self) -> Option<u32> {
        self.outgoing.map(|a| a.version)
    }
}

/// What [`Export`] keeps of an [`Outgoing`](super::rib::Outgoing).
#[derive(Debug, Clone, Copy)]
struct Advert {
    version: u32,
    /// Its attributes' group in [`Exports::groups`].
    group: usize,
    /// Where the route came from, for split horizon.
    from: Option<(PeerId, u32)>,
}

impl Exports {
    fn new(rib: &Rib, prefixes: impl IntoIterator<Item = Ipv4Net>) -> Exports {
        let mut exports = Exports::default();
        for prefix in prefixes {
            // A prefix the RIB never saw was never advertised.
            let Some(slot) = rib.slot(&prefix) else {
                continue;
            };
            let outgoing = rib.outgoing_at(slot).map(|o| Advert {
                version: o.version,
                group: exports.groups.of(&o.attributes),
                from: o.from,
            });
            let slot = slot as usize;
            exports.slots = exports.slots.max(slot + 1);
            exports.prefixes.push(Export {
                prefix,
                slot,
                outgoing,
            });
        }
        exports.current = vec![true; exports.prefixes.len()];
        exports.checked = rib.generation();
        exports
    }

    /// Marks the prefixes whose advertisement changed since the exports
    /// were made: once per change of the RIB, not once per peer.
    fn recheck(&mut self, rib: &Rib) {
        if self.checked == rib.generation() {
            return;
        }
        self.checked = rib.generation();
        for (e, current) in self.prefixes.iter().zip(&mut self.current) {
            *current = rib.outgoing_at(e.slot as u32).map(|o| o.version) == e.version();
        }
    }
}

/// Keeps a speaker's FIB digest (over the `known` prefixes) up to date as
/// `prefix`'s entry goes from `old` to `new`.
fn digest_change(
    digest: &mut FibDigest,
    known: Option<&BTreeSet<Ipv4Net>>,
    hashes: &mut HopsHashes,
    prefix: &Ipv4Net,
    old: Option<&Arc<[Ipv4Addr]>>,
    new: Option<&Arc<[Ipv4Addr]>>,
) {
    if known.is_some_and(|k| !k.contains(prefix)) {
        return;
    }
    if let Some(old) = old {
        digest.remove_hashed(prefix, *hashes.get_or_insert_with(old, plan::hops_hash));
    }
    if let Some(new) = new {
        digest.add_hashed(prefix, *hashes.get_or_insert_with(new, plan::hops_hash));
    }
}

/// The digest's hash of each set of next hops a FIB pass meets
/// ([`plan::hops_hash`]), computed once: the entries of a pass mostly go
/// from one shared set to another.
type HopsHashes = ByAddress<[Ipv4Addr], u64>;

/// The kernel next hops of one FIB entry, shared by every entry with the
/// same ([`crate::intern`]).
pub type NextHops = Arc<[NextHop]>;

/// An ECMP set of the RIB as the FIB has it: the peer addresses (what the
/// digest covers) and the kernel next hops (ports named), each shared.
#[derive(Debug, Clone)]
struct FibSet {
    addrs: Arc<[Ipv4Addr]>,
    hops: NextHops,
}

/// An ECMP set of the RIB: session and next hop of each route used.
type EcmpSet = Arc<[(PeerId, Ipv4Addr)]>;

/// Every ECMP set the FIB has had, computed once each: the same sixty next
/// hops for thousands of prefixes are one allocation, however often the
/// prefixes are written. The RIB shares equal sets ([`Best::nexthops`](super::rib::Best::nexthops)), so
/// a set is known by its address, not by hashing sixty next hops.
#[derive(Debug, Clone)]
struct FibSets {
    /// What each of the RIB's sets is in the FIB.
    by_set: ByAddress<[(PeerId, Ipv4Addr)], FibSet>,
    prune_at: usize,
    /// No next hop: the prefix is removed.
    none: NextHops,
}

impl Default for FibSets {
    fn default() -> Self {
        FibSets {
            by_set: ByAddress::default(),
            prune_at: 64,
            none: Arc::from([]),
        }
    }
}

impl FibSets {
    /// What `set` (sorted, as the RIB has it) is in the FIB: its sessions'
    /// peer addresses, ascending, without repeats, and the next hops
    /// through their ports. Sessions the plan does not have are left out.
    fn of(&mut self, set: &EcmpSet, neighbours: &[plan::Neighbour]) -> FibSet {
        if self.by_set.len() >= self.prune_at {
            // Sets neither installed nor waiting to be written.
            self.by_set
                .retain(|s| Arc::strong_count(&s.addrs) > 1 || Arc::strong_count(&s.hops) > 1);
            self.prune_at = (self.by_set.len() * 2).max(64);
        }
        self.by_set
            .get_or_insert_with(set, |set| fib_set(set, neighbours))
            .clone()
    }
}

/// What `set` is in the FIB (see [`FibSets::of`]).
fn fib_set(set: &[(PeerId, Ipv4Addr)], neighbours: &[plan::Neighbour]) -> FibSet {
    let mut addrs: Vec<Ipv4Addr> = Vec::with_capacity(set.len());
    let mut hops: Vec<NextHop> = Vec::with_capacity(set.len());
    for &(peer, addr) in set {
        let Some(neighbour) = neighbours.get(peer as usize) else {
            continue;
        };
        addrs.push(addr);
        hops.push(NextHop {
            via: Some(addr),
            ifname: neighbour.ifname.clone(),
            // The peer's own address is on the link: the kernel need not
            // look the gateway up.
            onlink: addr == neighbour.peer_addr,
        });
    }
    addrs.sort_unstable();
    addrs.dedup();
    hops.sort();
    hops.dedup();
    FibSet {
        addrs: addrs.into(),
        hops: hops.into(),
    }
}

/// Loc-RIB prefixes changed since the last flush: gathered as they come
/// (a ToR hears thousands in an UPDATE round; a set would be searched for
/// each), put in order once, when taken.
#[derive(Debug, Clone, Default)]
struct Changed {
    prefixes: Vec<Ipv4Net>,
    /// How many distinct prefixes it held when last put in order.
    tidy: usize,
    /// Some prefix was recorded since the speaker last looked (one that
    /// changes again still restarts the settle wait).
    touched: bool,
}

impl Changed {
    fn extend(&mut self, prefixes: impl IntoIterator<Item = Ipv4Net>) {
        let before = self.prefixes.len();
        self.prefixes.extend(prefixes);
        self.touched |= self.prefixes.len() > before;
        // A prefix that changes again and again between two flushes is
        // kept once: the list stays within twice its distinct prefixes.
        if self.prefixes.len() > 2 * self.tidy.max(1024) {
            self.tidy_up();
        }
    }

    fn tidy_up(&mut self) {
        super::prefix::sort_dedup(&mut self.prefixes);
        self.tidy = self.prefixes.len();
    }

    fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Every prefix, in order, each once, leaving none.
    fn take(&mut self) -> Vec<Ipv4Net> {
        self.tidy_up();
        self.tidy = 0;
        mem::take(&mut self.prefixes)
    }
}

/// UPDATE messages in one write of whole messages.
fn count_updates(mut bytes: &[u8]) -> u64 {
    let mut n = 0;
    while let Ok(Some(len)) = frame(bytes) {
        n += u64::from(bytes[HEADER_LEN - 1] == msg_type::UPDATE);
        bytes = &bytes[len..];
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_keep_each_peers_latest_timer_in_order() {
        let ms = Duration::from_millis;
        let mut d = Deadlines::default();
        assert_eq!(d.first(), None);
        d.set(2, Some(ms(30)));
        d.set(0, Some(ms(10)));
        d.set(1, Some(ms(20)));
        assert_eq!(d.first(), Some(ms(10)));
        assert_eq!(d.due(ms(20)), vec![0, 1]);
        // A peer's timer moves: its old one is forgotten.
        d.set(0, Some(ms(40)));
        assert_eq!(d.first(), Some(ms(20)));
        assert_eq!(d.due(ms(35)), vec![1, 2]);
        d.set(1, None);
        d.set(2, Some(ms(30)));
        assert_eq!(d.due(ms(100)), vec![2, 0]);
        assert_eq!(d.ordered.len(), 2);
    }
}
