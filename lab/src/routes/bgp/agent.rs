//! One switch's built-in agent: its RIB, its FIB, and its sessions' state.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use tokio::sync::{mpsc, watch};
use turbonet_routing::NextHop;
use turbonet_routing::bgp::Message;
use turbonet_routing::bgp::driver::{DriverCommand, DriverEvent};
use turbonet_routing::bgp::plan::{self, Speaker};
use turbonet_routing::bgp::rib::{Multipath, PeerId, PeerSummary, Rib};
use turbonet_topo::Agent as AgentKind;

use super::fib::{AnyFib, Fib};
use super::status::{SessionStatus, SpeakerStatus};
use super::{AgentEvent, Peer, PeerState};
use crate::events::EventLog;

/// One switch's agent.
pub(super) struct Agent {
    speaker: Speaker,
    rib: Rib,
    peers: Vec<Peer>,
    /// Port state watchers of the sessions, by interface.
    ports: HashMap<String, Vec<watch::Sender<bool>>>,
    /// Ports known to be down (absent: up).
    port_up: HashMap<String, bool>,
    fib: AnyFib,
    /// What the FIB holds: next hops by prefix.
    installed: BTreeMap<Ipv4Net, BTreeSet<Ipv4Addr>>,
    /// Its FIB once converged (`None` until the plan is computed).
    expected: Option<plan::FibDigest>,
    /// Every prefix of the plan.
    known: Rc<BTreeSet<Ipv4Net>>,
    epoch: Instant,
    converged_at: Option<Duration>,
    /// The last change of the FIB or of a session's state: when the agent
    /// converges, it converged then (a plan that arrives later, as after a
    /// `fail`, may find it converged already).
    last_change: Instant,
    log: EventLog,
}

impl Agent {
    pub(super) fn new(
        speaker: Speaker,
        fib: AnyFib,
        ports: HashMap<String, Vec<watch::Sender<bool>>>,
        known: Rc<BTreeSet<Ipv4Net>>,
        log: EventLog,
        started: Instant,
    ) -> Agent {
        Agent {
            rib: Rib::new(speaker.asn, speaker.router_id, Multipath::Relax),
            peers: speaker
                .neighbours
                .iter()
                .map(|_| Peer {
                    state: PeerState::Idle,
                    since: started,
                    info: None,
                    commands: None,
                    last_error: None,
                })
                .collect(),
            ports,
            port_up: HashMap::new(),
            fib,
            installed: BTreeMap::new(),
            expected: None,
            known,
            epoch: started,
            converged_at: None,
            last_change: started,
            log,
            speaker,
        }
    }

    pub(super) async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<AgentEvent>) {
        let mut changed: BTreeSet<Ipv4Net> = BTreeSet::new();
        for o in self.speaker.originate.clone() {
            changed.extend(
                self.rib
                    .originate(o.prefix)
                    .iter()
                    .map(turbonet_routing::bgp::rib::Change::prefix),
            );
        }
        let mut fresh: Vec<usize> = Vec::new();
        loop {
            self.sync(&changed, &fresh).await;
            changed.clear();
            fresh.clear();
            let Some(event) = inbox.recv().await else {
                return;
            };
            self.handle(event, &mut changed, &mut fresh);
            // Let every other runnable task (the other agents, the
            // sessions) take its turn first, for as long as that brings
            // more: what they send meanwhile joins this batch, so a burst
            // costs one FIB pass and one round of UPDATEs, not one per
            // UPDATE received.
            for _ in 0..8 {
                tokio::task::yield_now().await;
                let mut more = false;
                while let Ok(event) = inbox.try_recv() {
                    self.handle(event, &mut changed, &mut fresh);
                    more = true;
                }
                if !more {
                    break;
                }
            }
        }
    }

    fn handle(
        &mut self,
        event: AgentEvent,
        changed: &mut BTreeSet<Ipv4Net>,
        fresh: &mut Vec<usize>,
    ) {
        match event {
            AgentEvent::Connected(n, commands) => {
                let peer = &mut self.peers[n];
                peer.commands = Some(commands);
                peer.state = PeerState::Open;
                peer.since = Instant::now();
            }
            AgentEvent::Driver(n, DriverEvent::Established(info)) => {
                let neighbour = &self.speaker.neighbours[n];
                let peer = &mut self.peers[n];
                peer.info = Some(PeerSummary {
                    peer_as: info.peer_as,
                    peer_addr: neighbour.peer_addr,
                    peer_id: info.peer_id,
                });
                peer.state = PeerState::Established;
                peer.since = Instant::now();
                self.last_change = peer.since;
                fresh.push(n);
                self.log.write(
                    "bgp",
                    &format!(
                        "{}: session with {} ({}) established",
                        self.speaker.name, neighbour.peer_name, neighbour.peer_addr
                    ),
                    None,
                );
            }
            AgentEvent::Driver(n, DriverEvent::Received(message)) => match message {
                Message::Update(update) => {
                    if let Some(info) = self.peers[n].info {
                        let changes = self.rib.update(n as PeerId, &info, &update);
                        changed.extend(
                            changes
                                .iter()
                                .map(turbonet_routing::bgp::rib::Change::prefix),
                        );
                    }
                }
                // ROUTE-REFRESH: send everything again.
                _ => fresh.push(n),
            },
            AgentEvent::Driver(n, DriverEvent::Down(reason)) => {
                let neighbour = &self.speaker.neighbours[n];
                let port_up = self.port_up.get(&neighbour.ifname).copied().unwrap_or(true);
                let peer = &mut self.peers[n];
                let was_up = peer.state == PeerState::Established;
                peer.state = if port_up {
                    PeerState::Idle
                } else {
                    PeerState::PortDown
                };
                peer.since = Instant::now();
                self.last_change = peer.since;
                peer.info = None;
                peer.commands = None;
                peer.last_error = Some(reason.to_string());
                let changes = self.rib.peer_down(n as PeerId);
                changed.extend(
                    changes
                        .iter()
                        .map(turbonet_routing::bgp::rib::Change::prefix),
                );
                if was_up {
                    self.log.write(
                        "bgp",
                        &format!(
                            "{}: session with {} ({}) down: {reason}",
                            self.speaker.name, neighbour.peer_name, neighbour.peer_addr
                        ),
                        None,
                    );
                }
            }
            AgentEvent::Port { ifname, up } => {
                self.port_up.insert(ifname.clone(), up);
                for watcher in self.ports.get(&ifname).into_iter().flatten() {
                    let _ = watcher.send(up);
                }
                for (n, neighbour) in self.speaker.neighbours.iter().enumerate() {
                    if neighbour.ifname != ifname {
                        continue;
                    }
                    let peer = &mut self.peers[n];
                    if up {
                        if peer.state == PeerState::PortDown {
                            peer.state = PeerState::Idle;
                            peer.since = Instant::now();
                        }
                    } else if let Some(commands) = &peer.commands {
                        let _ = commands.send(DriverCommand::Stop);
                    } else {
                        peer.state = PeerState::PortDown;
                        peer.since = Instant::now();
                    }
                }
                for o in &self.speaker.originate {
                    if o.port.as_deref() == Some(ifname.as_str()) {
                        let changes = if up {
                            self.rib.originate(o.prefix)
                        } else {
                            self.rib.withdraw_local(o.prefix)
                        };
                        changed.extend(
                            changes
                                .iter()
                                .map(turbonet_routing::bgp::rib::Change::prefix),
                        );
                    }
                }
            }
            AgentEvent::Expect { fib, epoch } => {
                self.expected = Some(fib);
                self.epoch = epoch;
                self.converged_at = None;
            }
            AgentEvent::Report(reply) => {
                let _ = reply.send(self.status());
            }
        }
    }

    /// Installs the Loc-RIB's `changed` prefixes in the FIB, then
    /// advertises them to every established peer (the whole Loc-RIB to the
    /// peers in `fresh`, which just came up or asked for a refresh).
    async fn sync(&mut self, changed: &BTreeSet<Ipv4Net>, fresh: &[usize]) {
        let mut routes = Vec::new();
        for prefix in changed {
            let best = self
                .rib
                .best(prefix)
                .filter(|best| !best.local)
                .map(|best| {
                    best.nexthops
                        .iter()
                        .map(|&(_, nh)| nh)
                        .collect::<BTreeSet<_>>()
                })
                .unwrap_or_default();
            if self
                .installed
                .get(prefix)
                .map_or(best.is_empty(), |hops| *hops == best)
            {
                continue;
            }
            let hops = best
                .iter()
                .filter_map(|nh| {
                    let neighbour = self
                        .speaker
                        .neighbours
                        .iter()
                        .find(|n| n.peer_addr == *nh)?;
                    Some(NextHop {
                        via: Some(*nh),
                        ifname: neighbour.ifname.clone(),
                        onlink: false,
                    })
                })
                .collect();
            if best.is_empty() {
                self.installed.remove(prefix);
            } else {
                self.installed.insert(*prefix, best);
            }
            routes.push((*prefix, hops));
        }
        if !routes.is_empty() {
            let applied = self.fib.apply(routes).await;
            self.last_change = Instant::now();
            if let Err(e) = applied {
                self.log.write(
                    "bgp",
                    &format!("{}: installing routes", self.speaker.name),
                    Some(&format!("{e:#}")),
                );
            }
        }
        let all: Vec<Ipv4Net>;
        let changed: Vec<Ipv4Net> = changed.iter().copied().collect();
        let full = if fresh.is_empty() {
            &[][..]
        } else {
            all = self.rib.loc_rib().map(|(p, _)| *p).collect();
            &all[..]
        };
        let mut work = 0;
        for (n, peer) in self.peers.iter().enumerate() {
            let (Some(info), Some(commands)) = (&peer.info, &peer.commands) else {
                continue;
            };
            let prefixes = if fresh.contains(&n) {
                full
            } else {
                &changed[..]
            };
            if prefixes.is_empty() {
                continue;
            }
            let local = self.speaker.neighbours[n].local_addr;
            for update in self.rib.export(n as PeerId, info, local, prefixes) {
                let _ = commands.send(DriverCommand::SendUpdate(Box::new(update)));
            }
            // A spine advertising a whole table to hundreds of peers must
            // not starve the other sessions' keepalives.
            work += prefixes.len();
            if work >= 4096 {
                work = 0;
                tokio::task::yield_now().await;
            }
        }
        if self.converged_at.is_none() && self.converged() {
            self.converged_at = Some(self.last_change.saturating_duration_since(self.epoch));
        }
    }

    /// The FIB is what the plan says (for the prefixes the plan knows of:
    /// not those learned from outside the fabric), and every session in
    /// the fabric whose port is up is established.
    fn converged(&self) -> bool {
        let Some(expected) = self.expected else {
            return false;
        };
        plan::FibDigest::of(
            self.installed
                .iter()
                .filter(|(p, _)| self.known.contains(p)),
        ) == expected
            && self
                .speaker
                .neighbours
                .iter()
                .zip(&self.peers)
                .all(|(n, p)| {
                    n.peer.is_none()
                        || p.state == PeerState::Established
                        || !self.port_up.get(&n.ifname).copied().unwrap_or(true)
                })
    }

    fn status(&self) -> SpeakerStatus {
        let now = Instant::now();
        SpeakerStatus {
            node: self.speaker.name.clone(),
            agent: AgentKind::Builtin.to_string(),
            asn: self.speaker.asn,
            router_id: self.speaker.router_id,
            routes: self.installed.len(),
            expected: self.expected.map_or(0, |d| d.routes),
            converged: self.converged(),
            converged_at: self
                .converged_at
                .filter(|_| self.converged())
                .map(|d| d.as_secs_f64()),
            sessions: self
                .speaker
                .neighbours
                .iter()
                .zip(&self.peers)
                .enumerate()
                .map(|(n, (neighbour, peer))| SessionStatus {
                    peer: neighbour.peer_name.clone(),
                    peer_addr: neighbour.peer_addr,
                    peer_asn: neighbour.peer_asn,
                    ifname: neighbour.ifname.clone(),
                    state: match peer.state {
                        PeerState::Idle if neighbour.passive => "idle (passive)",
                        PeerState::Idle => "connect",
                        PeerState::Open => "open",
                        PeerState::Established => "established",
                        PeerState::PortDown => "port down",
                    }
                    .to_owned(),
                    since: Some(now.duration_since(peer.since).as_secs_f64()),
                    received: Some(self.rib.adj_rib_in(n as PeerId).count()),
                    last_error: peer.last_error.clone(),
                })
                .collect(),
        }
    }
}
