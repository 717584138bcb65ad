//! One switch's speaker on a virtual clock: two speakers talking through
//! an in-memory wire, a port going down, a burst of UPDATEs from a bare
//! session costing one FIB change set, a restarted speaker starting from
//! the FIB it left behind.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use ipnet::Ipv4Net;
use turbonet_routing::NextHop;
use turbonet_routing::bgp::plan::{self, Neighbour, Origination};
use turbonet_routing::bgp::session::{self, Reason, Session, SessionConfig, State};
use turbonet_routing::bgp::speaker::{
    Cause, Event, Input, NextHops, Output, PeerState, Settle, Speaker, Timers,
};
use turbonet_routing::bgp::{AsPath, Context, Message, Origin, PathAttributes, Update, frame};
use turbonet_topo::NodeId;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn net(s: &str) -> Ipv4Net {
    s.parse().unwrap()
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// The lab's timers: hold 3 s, keepalive 1 s, retry 1 s, restart 100 ms;
/// no settle wait (each flush takes what changed), except where a test
/// says otherwise.
fn timers() -> Timers {
    Timers {
        settle: Settle::NONE,
        ..Timers::from(&turbonet_topo::BgpTimers::default())
    }
}

fn neighbour(
    peer: u32,
    name: &str,
    ifname: &str,
    local: &str,
    remote: &str,
    asn: u32,
) -> Neighbour {
    Neighbour {
        link: None,
        peer: Some(NodeId(peer)),
        peer_name: name.to_owned(),
        ifname: ifname.to_owned(),
        local_addr: ip(local),
        peer_addr: ip(remote),
        peer_asn: asn,
        // As the plan decides: the end with the higher address waits.
        passive: ip(local) > ip(remote),
    }
}

fn origination(prefix: &str, port: Option<&str>) -> Origination {
    Origination {
        prefix: net(prefix),
        port: port.map(str::to_owned),
    }
}

/// Leaf A (AS 65001) and spine B (AS 65002) on one link; A is the active
/// end. A originates its loopback and a dual-homed host's /32 on port
/// `host0`; B its loopback and a subnet.
fn pair() -> (plan::Speaker, plan::Speaker) {
    let a = plan::Speaker {
        node: NodeId(0),
        name: "a".to_owned(),
        asn: 65001,
        router_id: ip("10.0.0.1"),
        neighbours: vec![neighbour(1, "b", "eth0", "10.1.0.0", "10.1.0.1", 65002)],
        originate: vec![
            origination("10.0.0.1/32", None),
            origination("192.168.0.5/32", Some("host0")),
        ],
        host_ports: vec![],
    };
    let b = plan::Speaker {
        node: NodeId(1),
        name: "b".to_owned(),
        asn: 65002,
        router_id: ip("10.0.0.2"),
        neighbours: vec![neighbour(0, "a", "eth0", "10.1.0.1", "10.1.0.0", 65001)],
        originate: vec![
            origination("10.0.0.2/32", None),
            origination("172.16.0.0/24", None),
        ],
        host_ports: vec![],
    };
    (a, b)
}

/// Speakers wired back to back with no latency; connections open at once
/// (a connect is refused when the far end has one already).
#[derive(Debug)]
struct Wire {
    now: Duration,
    s: Vec<Speaker>,
    far: BTreeMap<(usize, usize), (usize, usize)>,
    up: BTreeSet<(usize, usize)>,
    queue: VecDeque<(usize, Input)>,
    log: Vec<(Duration, usize, Output)>,
}

impl Wire {
    fn new(plans: Vec<plan::Speaker>) -> Wire {
        let mut far = BTreeMap::new();
        for (i, p) in plans.iter().enumerate() {
            for (n, nb) in p.neighbours.iter().enumerate() {
                for (j, q) in plans.iter().enumerate() {
                    if let Some(m) = q
                        .neighbours
                        .iter()
                        .position(|b| b.local_addr == nb.peer_addr && b.peer_addr == nb.local_addr)
                    {
                        far.insert((i, n), (j, m));
                    }
                }
            }
        }
        Wire {
            now: Duration::ZERO,
            s: plans
                .into_iter()
                .map(|p| Speaker::new(p, timers()))
                .collect(),
            far,
            up: BTreeSet::new(),
            queue: VecDeque::new(),
            log: Vec::new(),
        }
    }

    fn apply(&mut self, i: usize, outs: Vec<Output>) {
        for o in outs {
            match &o {
                Output::Connect { peer, .. } => {
                    let end = (i, *peer);
                    match self.far.get(&end).copied() {
                        Some(far) if !self.up.contains(&far) => {
                            self.up.insert(end);
                            self.up.insert(far);
                            self.queue
                                .push_back((far.0, Input::Connected { peer: far.1 }));
                            self.queue.push_back((i, Input::Connected { peer: *peer }));
                        }
                        _ => self
                            .queue
                            .push_back((i, Input::ConnectFailed { peer: *peer })),
                    }
                }
                Output::Send { peer, bytes } => {
                    assert!(
                        self.up.contains(&(i, *peer)),
                        "{i} sent without a connection at {:?}: {:?}",
                        self.now,
                        messages(bytes)
                    );
                    let far = self.far[&(i, *peer)];
                    if self.up.contains(&far) {
                        self.queue.push_back((
                            far.0,
                            Input::Bytes {
                                peer: far.1,
                                data: bytes.clone(),
                            },
                        ));
                    }
                }
                Output::Close { peer } => {
                    if self.up.remove(&(i, *peer)) {
                        let far = self.far[&(i, *peer)];
                        if self.up.remove(&far) {
                            self.queue.push_back((far.0, Input::Closed { peer: far.1 }));
                        }
                    }
                }
                Output::Fib(_) | Output::Keepalives { .. } | Output::Event(_) => {}
            }
            self.log.push((self.now, i, o));
        }
    }

    /// Handles everything queued, flushing the speakers that have changes
    /// whenever the queue runs dry, until nothing is left.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            while let Some((i, input)) = self.queue.pop_front() {
                let outs = self.s[i].handle(self.now, input);
                self.apply(i, outs);
            }
            let mut flushed = false;
            for i in 0..self.s.len() {
                if self.s[i].pending() {
                    let outs = self.s[i].flush(self.now);
                    self.apply(i, outs);
                    flushed = true;
                }
            }
            if !flushed && self.queue.is_empty() {
                return;
            }
        }
        panic!("does not settle");
    }

    fn input(&mut self, i: usize, input: Input) {
        self.queue.push_back((i, input));
        self.settle();
    }

    fn run_until(&mut self, until: Duration) {
        for _ in 0..100_000 {
            match self.s.iter().filter_map(Speaker::next_deadline).min() {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    for i in 0..self.s.len() {
                        if self.s[i].next_deadline().is_some_and(|d| d <= self.now) {
                            self.queue.push_back((i, Input::Tick));
                        }
                    }
                    self.settle();
                }
                _ => {
                    self.now = until;
                    return;
                }
            }
        }
        panic!("timers do not advance");
    }

    fn outputs(&self, i: usize, from: usize) -> Vec<&Output> {
        self.log[from..]
            .iter()
            .filter(|(_, s, _)| *s == i)
            .map(|(_, _, o)| o)
            .collect()
    }

    fn fib_sets(&self, i: usize, from: usize) -> Vec<&Vec<(Ipv4Net, NextHops)>> {
        self.outputs(i, from)
            .into_iter()
            .filter_map(|o| match o {
                Output::Fib(routes) => Some(routes),
                _ => None,
            })
            .collect()
    }
}

/// A FIB entry's next hops: ascending, without repeats.
fn hops(addrs: &[&str]) -> Arc<[Ipv4Addr]> {
    let set: BTreeSet<Ipv4Addr> = addrs.iter().map(|a| ip(a)).collect();
    set.into_iter().collect()
}

#[test]
fn two_speakers_establish_exchange_routes_and_stay_up() {
    let (a, b) = pair();
    let mut w = Wire::new(vec![a, b]);
    w.input(1, Input::Start);
    w.input(0, Input::Start);

    // Only the active end connects; the passive one waits.
    let connects = |i| {
        w.log
            .iter()
            .filter(|(_, s, o)| *s == i && matches!(o, Output::Connect { .. }))
            .count()
    };
    assert_eq!((connects(0), connects(1)), (1, 0));
    let Some(Output::Connect { local, remote, .. }) = w
        .outputs(0, 0)
        .into_iter()
        .find(|o| matches!(o, Output::Connect { .. }))
    else {
        unreachable!()
    };
    assert_eq!(
        (*local, remote.to_string().as_str()),
        (ip("10.1.0.0"), "10.1.0.1:179")
    );

    for s in &w.s {
        assert_eq!(s.peer_state(0), Some(PeerState::Established));
    }
    let established: Vec<usize> = w
        .log
        .iter()
        .filter_map(|(_, s, o)| matches!(o, Output::Event(Event::Established { .. })).then_some(*s))
        .collect();
    assert_eq!(established, [1, 0]);

    // Each installed the other's prefixes (not its own), through the link.
    let a_fib: plan::Fib = [
        (net("10.0.0.2/32"), hops(&["10.1.0.1"])),
        (net("172.16.0.0/24"), hops(&["10.1.0.1"])),
    ]
    .into();
    assert_eq!(w.s[0].installed(), &a_fib);
    let b_fib: plan::Fib = [
        (net("10.0.0.1/32"), hops(&["10.1.0.0"])),
        (net("192.168.0.5/32"), hops(&["10.1.0.0"])),
    ]
    .into();
    assert_eq!(w.s[1].installed(), &b_fib);
    let sets = w.fib_sets(0, 0);
    assert_eq!(sets.len(), 1, "one FIB change set: {sets:?}");
    assert_eq!(
        sets[0][0],
        (
            net("10.0.0.2/32"),
            Arc::from([NextHop {
                via: Some(ip("10.1.0.1")),
                ifname: "eth0".to_owned(),
                onlink: true,
            }])
        )
    );

    // Status: established, two prefixes received, two routes.
    let status = w.s[0].status(w.now);
    assert_eq!(status.routes, 2);
    assert_eq!(status.neighbours[0].state, PeerState::Established);
    assert_eq!(status.neighbours[0].session, State::Established);
    assert_eq!(status.neighbours[0].received, 2);
    assert!(status.sessions_up());
    assert!(status.converged(&plan::FibDigest::of(&a_fib)));

    // Keepalives keep it up for minutes; nothing else moves.
    let mark = w.log.len();
    w.run_until(secs(300));
    assert!(
        w.s.iter()
            .all(|s| s.peer_state(0) == Some(PeerState::Established))
    );
    assert!(w.fib_sets(0, mark).is_empty() && w.fib_sets(1, mark).is_empty());
    assert!(w.s[0].last_change() < secs(1));
}

#[test]
fn a_driver_that_writes_keepalives_is_told_to_from_openconfirm_on() {
    let (a, b) = pair();
    let mut w = Wire::new(vec![a, b]);
    for s in &mut w.s {
        s.set_keepalives_by_driver();
    }
    w.input(1, Input::Start);
    w.input(0, Input::Start);
    let every = secs(turbonet_topo::BgpTimers::default().keepalive.into());
    for i in 0..2 {
        // Told when the session answered the OPEN, before Established:
        // the neighbour may be Established already, timing our silence.
        let told: Vec<&Output> = (w.log.iter())
            .filter(|(_, s, o)| {
                *s == i
                    && matches!(
                        o,
                        Output::Keepalives { .. } | Output::Event(Event::Established { .. })
                    )
            })
            .map(|(_, _, o)| o)
            .collect();
        assert!(
            matches!(
                told[..],
                [
                    Output::Keepalives { peer: 0, every: e },
                    Output::Event(Event::Established { peer: 0, .. })
                ] if *e == every
            ),
            "speaker {i}: {told:?}"
        );
    }
    // A speaker that writes its own is never told.
    let (a, b) = pair();
    let mut w = Wire::new(vec![a, b]);
    w.input(1, Input::Start);
    w.input(0, Input::Start);
    assert!(
        w.s.iter()
            .all(|s| s.peer_state(0) == Some(PeerState::Established))
    );
    assert!(!(w.log.iter()).any(|(_, _, o)| matches!(o, Output::Keepalives { .. })));
}

#[test]
fn a_port_down_withdraws_what_it_originated_and_stops_its_sessions() {
    let (a, b) = pair();
    let mut w = Wire::new(vec![a, b]);
    w.input(1, Input::Start);
    w.input(0, Input::Start);
    let host = net("192.168.0.5/32");
    assert!(w.s[1].installed().contains_key(&host));

    // The host port goes down: A withdraws the /32, B removes it.
    w.run_until(secs(10));
    let mark = w.log.len();
    w.input(
        0,
        Input::Port {
            ifname: "host0".to_owned(),
            up: false,
        },
    );
    assert_eq!(w.fib_sets(1, mark), [&vec![(host, Arc::from([]))]]);
    assert!(!w.s[1].installed().contains_key(&host));
    assert_eq!(w.s[0].peer_state(0), Some(PeerState::Established));
    // Back up: announced again.
    w.input(
        0,
        Input::Port {
            ifname: "host0".to_owned(),
            up: true,
        },
    );
    assert!(w.s[1].installed().contains_key(&host));

    // The session's port goes down: at once (no flush needed) a Cease and
    // a Close, the session reported down for that cause.
    w.run_until(secs(20));
    let outs = w.s[0].handle(
        w.now,
        Input::Port {
            ifname: "eth0".to_owned(),
            up: false,
        },
    );
    assert!(outs.contains(&Output::Close { peer: 0 }));
    assert!(outs.contains(&Output::Event(Event::Down {
        peer: 0,
        established: true,
        cause: Cause::PortDown,
    })));
    let mark = w.log.len();
    w.apply(0, outs);
    w.settle();
    // Both FIBs lose the other's routes; B saw the Cease.
    assert!(w.s[0].installed().is_empty());
    assert!(w.s[1].installed().is_empty());
    assert!(w.outputs(1, mark).iter().any(|o| matches!(
        o,
        Output::Event(Event::Down {
            cause: Cause::Session(Reason::PeerNotification(_)),
            ..
        })
    )));
    let status = w.s[0].status(w.now);
    assert_eq!(status.neighbours[0].state, PeerState::PortDown);
    assert_eq!(status.neighbours[0].since, secs(20));
    assert_eq!(
        status.neighbours[0].last_error.as_deref(),
        Some("port down")
    );
    assert!(
        status.sessions_up(),
        "a session whose port is down counts as settled"
    );

    // It stays down while the port is (no reconnect attempts), even when
    // the peer connects.
    let mark = w.log.len();
    w.run_until(secs(40));
    assert!(
        !w.outputs(0, mark)
            .iter()
            .any(|o| matches!(o, Output::Connect { .. }))
    );
    assert_eq!(
        w.s[0].handle(w.now, Input::Connected { peer: 0 }),
        [Output::Close { peer: 0 }]
    );

    // Port up: A connects again and everything comes back.
    w.input(
        0,
        Input::Port {
            ifname: "eth0".to_owned(),
            up: true,
        },
    );
    assert_eq!(w.s[0].peer_state(0), Some(PeerState::Established));
    assert_eq!(w.s[0].installed().len(), 2);
    assert_eq!(w.s[1].installed().len(), 2);
}

/// Splits a byte stream into messages.
fn messages(bytes: &[u8]) -> Vec<Message> {
    let mut rest = bytes;
    let mut out = Vec::new();
    while let Some(len) = frame(rest).expect("framed") {
        out.push(Message::decode(&rest[..len], &Context::FOUR_OCTET_AS).expect("valid"));
        rest = &rest[len..];
    }
    out
}

/// Speaker S (AS 65000) with two neighbours played by bare sessions: X
/// (AS 65101) on `eth0` and Y (AS 65102) on `eth1`. S is the passive end of
/// both. S proposes Hold Time 0 (RFC 4271 §4.2: no KEEPALIVEs, no Hold
/// timer), so the bare sessions need no ticking.
struct Hub {
    s: Speaker,
    peers: [Session; 2],
}

const X_ADDR: &str = "10.2.0.0";
const Y_ADDR: &str = "10.2.0.2";

impl Hub {
    fn new() -> Hub {
        Hub::settling(Settle::NONE)
    }

    /// A hub whose speaker lets changes settle as `settle` says.
    fn settling(settle: Settle) -> Hub {
        let plan = plan::Speaker {
            node: NodeId(0),
            name: "s".to_owned(),
            asn: 65000,
            router_id: ip("10.0.0.100"),
            neighbours: vec![
                neighbour(1, "x", "eth0", "10.2.0.1", X_ADDR, 65101),
                neighbour(2, "y", "eth1", "10.2.0.3", Y_ADDR, 65102),
            ],
            originate: vec![origination("10.0.0.100/32", None)],
            host_ports: vec![],
        };
        let peer = |asn, id: &str| {
            Session::new(SessionConfig {
                peer_as: Some(65000),
                ..SessionConfig::new(asn, ip(id))
            })
        };
        let timers = Timers {
            hold_time: 0,
            settle,
            ..timers()
        };
        Hub {
            s: Speaker::new(plan, timers),
            peers: [peer(65101, "10.0.0.101"), peer(65102, "10.0.0.102")],
        }
    }

    /// Moves messages between S and the bare sessions until both sides are
    /// quiet (no flush of S); returns S's outputs.
    fn exchange(&mut self, now: Duration, mut to_s: Vec<(usize, Vec<u8>)>) -> Vec<Output> {
        let mut outs = Vec::new();
        while !to_s.is_empty() {
            for (peer, data) in std::mem::take(&mut to_s) {
                for o in self.s.handle(now, Input::Bytes { peer, data }) {
                    if let Output::Send { peer, bytes } = &o {
                        for po in
                            self.peers[*peer].handle(now, session::Input::Bytes(bytes.clone()))
                        {
                            if let session::Output::Send(b) = po {
                                to_s.push((*peer, b));
                            }
                        }
                    }
                    outs.push(o);
                }
            }
        }
        outs
    }

    /// Starts S and brings both sessions up.
    fn start(&mut self) {
        let now = Duration::ZERO;
        assert!(
            !self
                .s
                .handle(now, Input::Start)
                .iter()
                .any(|o| matches!(o, Output::Connect { .. })),
            "passive on both"
        );
        for peer in 0..2 {
            self.peers[peer].handle(now, session::Input::Start);
            let opens: Vec<(usize, Vec<u8>)> = self.peers[peer]
                .handle(now, session::Input::TcpConnected)
                .into_iter()
                .filter_map(|o| match o {
                    session::Output::Send(b) => Some((peer, b)),
                    _ => None,
                })
                .collect();
            let outs = self.s.handle(now, Input::Connected { peer });
            let mut to_peer: Vec<Vec<u8>> = outs
                .into_iter()
                .filter_map(|o| match o {
                    Output::Send { bytes, .. } => Some(bytes),
                    _ => None,
                })
                .collect();
            let mut to_s = opens;
            for b in to_peer.drain(..) {
                for po in self.peers[peer].handle(now, session::Input::Bytes(b)) {
                    if let session::Output::Send(b) = po {
                        to_s.push((peer, b));
                    }
                }
            }
            self.exchange(now, to_s);
            assert_eq!(self.peers[peer].state(), State::Established);
            assert_eq!(self.s.peer_state(peer), Some(PeerState::Established));
        }
        // The first flush sends S's loopback to both.
        self.s.flush(now);
    }

    /// The UPDATE bytes bare session `peer` sends for `prefix` with
    /// AS_PATH `path`.
    fn update(&mut self, peer: usize, path: &[u32], prefixes: &[&str]) -> Vec<u8> {
        let next_hop = ip([X_ADDR, Y_ADDR][peer]);
        let update = Update {
            withdrawn: vec![],
            attributes: PathAttributes {
                origin: Some(Origin::Igp),
                as_path: Some(AsPath::sequence(path.iter().copied())),
                next_hop: Some(next_hop),
                ..PathAttributes::default()
            },
            nlri: prefixes.iter().map(|p| net(p)).collect(),
        };
        // The last message out (a KEEPALIVE may be due first).
        match self.peers[peer].send_update(secs(1), update).pop() {
            Some(session::Output::Send(bytes)) => bytes,
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_burst_of_updates_is_one_fib_change_set_before_one_round_of_updates() {
    let mut hub = Hub::new();
    hub.start();
    // X sends ten UPDATEs, each with an AS_PATH of its own (so they cannot
    // share a message), each handled as an input of its own.
    let now = secs(1);
    let prefixes: Vec<String> = (0..10).map(|i| format!("198.51.100.{i}/32")).collect();
    for (i, p) in prefixes.iter().enumerate() {
        let bytes = hub.update(0, &[65101, 64512 + i as u32], &[p]);
        let outs = hub.s.handle(
            now,
            Input::Bytes {
                peer: 0,
                data: bytes,
            },
        );
        assert!(outs.is_empty(), "nothing before the flush: {outs:?}");
        assert!(hub.s.pending());
    }
    let outs = hub.s.flush(now);
    assert!(!hub.s.pending());
    let fibs: Vec<usize> = outs
        .iter()
        .enumerate()
        .filter_map(|(i, o)| matches!(o, Output::Fib(_)).then_some(i))
        .collect();
    assert_eq!(fibs, [0], "one FIB change set, first: {outs:?}");
    let Output::Fib(routes) = &outs[0] else {
        unreachable!()
    };
    assert_eq!(routes.len(), 10);
    for (prefix, hops) in routes {
        assert!(prefixes.contains(&prefix.to_string()));
        assert_eq!(hops[0].via, Some(ip(X_ADDR)));
        assert_eq!(hops[0].ifname, "eth0");
    }
    // Then the UPDATEs, in one write: to Y with S's AS prepended and S's
    // address as NEXT_HOP; to X nothing (they cannot be sent back, and its
    // Adj-RIB-Out says it was never sent them, so nothing is withdrawn).
    assert_eq!(outs.len(), 2, "one write to Y only: {outs:?}");
    let mut announced = BTreeSet::new();
    for o in &outs[1..] {
        let Output::Send { peer, bytes } = o else {
            panic!("{o:?}");
        };
        assert_eq!(*peer, 1);
        for m in messages(bytes) {
            let Message::Update(u) = m else { panic!() };
            assert_eq!(u.attributes.next_hop, Some(ip("10.2.0.3")));
            assert_eq!(u.attributes.as_path.unwrap().first_as(), Some(65000));
            announced.extend(u.nlri);
        }
    }
    assert_eq!(announced.len(), 10);
    // Y hears them.
    for o in &outs[1..] {
        if let Output::Send { peer: 1, bytes } = o {
            let got = hub.peers[1].handle(now, session::Input::Bytes(bytes.clone()));
            assert_eq!(
                got.iter()
                    .filter(|o| matches!(o, session::Output::Received(Message::Update(_))))
                    .count(),
                messages(bytes).len()
            );
        }
    }

    // A ROUTE-REFRESH from Y is answered at the next flush with the whole
    // Loc-RIB: S's loopback and X's ten routes.
    let rr = Message::RouteRefresh(turbonet_routing::bgp::RouteRefresh {
        family: turbonet_routing::bgp::AfiSafi::IPV4_UNICAST,
    })
    .encode(&Context::FOUR_OCTET_AS);
    assert!(
        hub.s
            .handle(now, Input::Bytes { peer: 1, data: rr })
            .is_empty()
    );
    let resent: usize = hub
        .s
        .flush(now)
        .iter()
        .filter_map(|o| match o {
            Output::Send { peer: 1, bytes } => Some(messages(bytes)),
            Output::Fib(_) => panic!("nothing changed in the FIB"),
            _ => None,
        })
        .flatten()
        .map(|m| match m {
            Message::Update(u) => u.nlri.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(resent, 11);

    // X withdraws one route while Y asks for a refresh in the same batch:
    // Y gets the whole table again and the withdrawal.
    let gone = net(&prefixes[0]);
    let withdraw = match hub.peers[0]
        .send_update(
            secs(1),
            Update {
                withdrawn: vec![gone],
                ..Update::default()
            },
        )
        .pop()
    {
        Some(session::Output::Send(bytes)) => bytes,
        other => panic!("{other:?}"),
    };
    hub.s.handle(
        now,
        Input::Bytes {
            peer: 0,
            data: withdraw,
        },
    );
    let rr = Message::RouteRefresh(turbonet_routing::bgp::RouteRefresh {
        family: turbonet_routing::bgp::AfiSafi::IPV4_UNICAST,
    })
    .encode(&Context::FOUR_OCTET_AS);
    hub.s.handle(now, Input::Bytes { peer: 1, data: rr });
    let (mut withdrawn, mut announced) = (Vec::new(), 0);
    for o in hub.s.flush(now) {
        if let Output::Send { peer: 1, bytes } = o {
            for m in messages(&bytes) {
                if let Message::Update(u) = m {
                    withdrawn.extend(u.withdrawn);
                    announced += u.nlri.len();
                }
            }
        }
    }
    assert_eq!(withdrawn, [gone]);
    assert_eq!(announced, 10);
}

/// A flush advertises a slice at a time: a table larger than the budget
/// goes out over several flushes, `pending` until the last, and nothing is
/// sent twice.
#[test]
fn a_large_table_is_advertised_over_several_flushes() {
    use turbonet_routing::bgp::speaker::ADVERTISE_BUDGET;
    let mut hub = Hub::new();
    hub.start();
    let now = secs(1);
    // Distinct AS paths: one UPDATE per prefix, none shared.
    let count = ADVERTISE_BUDGET * 2 + 10;
    for i in 0..count {
        let p = format!("10.{}.{}.0/24", 64 + i / 256, i % 256);
        let bytes = hub.update(0, &[65101, 100_000 + i as u32], &[&p]);
        hub.s.handle(
            now,
            Input::Bytes {
                peer: 0,
                data: bytes,
            },
        );
    }
    let mut flushes = 0;
    let mut announced = BTreeSet::new();
    while hub.s.pending() {
        flushes += 1;
        assert!(flushes < 100, "the flushes never end");
        for o in hub.s.flush(now) {
            if let Output::Send { peer: 1, bytes } = o {
                for m in messages(&bytes) {
                    if let Message::Update(u) = m {
                        for p in u.nlri {
                            assert!(announced.insert(p), "{p} sent twice");
                        }
                    }
                }
            }
        }
    }
    assert!(flushes > 1, "one flush sent it all");
    assert_eq!(announced.len(), count);
}

#[test]
fn advertisements_that_wait_are_one_round_however_many_flushes_queue_them() {
    use turbonet_routing::bgp::speaker::ADVERTISE_BUDGET;
    let mut hub = Hub::new();
    hub.start();
    let now = secs(1);
    let prefix = |i: usize| format!("10.{}.{}.0/24", 64 + i / 256, i % 256);
    // Each flush has a budget's worth of new routes and a new path for
    // every route before: the speaker learns faster than it advertises.
    let batches = 6;
    let mut path = 100_000;
    let mut sent = 0;
    for batch in 1..=batches {
        for i in 0..ADVERTISE_BUDGET * batch {
            path += 1;
            let bytes = hub.update(0, &[65101, path], &[&prefix(i)]);
            hub.s.handle(
                now,
                Input::Bytes {
                    peer: 0,
                    data: bytes,
                },
            );
        }
        sent += announced_to_y(&hub.s.flush(now));
        assert!(
            hub.s.rounds_waiting() <= 2,
            "{} rounds wait after flush {batch}",
            hub.s.rounds_waiting()
        );
    }
    let mut flushes = 0;
    while hub.s.pending() {
        flushes += 1;
        assert!(flushes < 100, "the flushes never end");
        sent += announced_to_y(&hub.s.flush(now));
    }
    // Every route reached Y at least once, and a route that changed while
    // it waited was not sent once per path it had.
    let routes = ADVERTISE_BUDGET * batches;
    assert!(
        (routes..routes + ADVERTISE_BUDGET * 3).contains(&sent),
        "{sent} prefixes sent for {routes} routes"
    );
}

/// How many prefixes `outs` announce to peer 1 (Y).
fn announced_to_y(outs: &[Output]) -> usize {
    outs.iter()
        .filter_map(|o| match o {
            Output::Send { peer: 1, bytes } => Some(messages(bytes)),
            _ => None,
        })
        .flatten()
        .map(|m| match m {
            Message::Update(u) => u.nlri.len(),
            _ => 0,
        })
        .sum()
}

#[test]
fn a_restarted_speaker_emits_only_differences_from_the_fib_it_finds() {
    let mut hub = Hub::new();
    // What the kernel still holds from the previous run.
    let kept = net("203.0.113.1/32"); // learned again, unchanged
    let moved = net("203.0.113.2/32"); // now through Y instead of X
    let stale = net("203.0.113.3/32"); // nobody announces it any more
    let fib: plan::Fib = [
        (kept, hops(&[X_ADDR])),
        (moved, hops(&[X_ADDR])),
        (stale, hops(&[X_ADDR])),
    ]
    .into();
    hub.s.assume_installed(fib.clone(), secs(10));
    assert_eq!(hub.s.installed(), &fib);
    assert_eq!(hub.s.next_deadline(), Some(secs(10)));
    hub.start();
    assert_eq!(
        hub.s.installed(),
        &fib,
        "nothing removed before the deadline"
    );

    let now = secs(2);
    let x = hub.update(0, &[65101], &["203.0.113.1/32"]);
    let y = hub.update(1, &[65102], &["203.0.113.2/32"]);
    hub.s.handle(now, Input::Bytes { peer: 0, data: x });
    hub.s.handle(now, Input::Bytes { peer: 1, data: y });
    let fibs: Vec<Vec<(Ipv4Net, NextHops)>> = hub
        .s
        .flush(now)
        .into_iter()
        .filter_map(|o| match o {
            Output::Fib(routes) => Some(routes),
            _ => None,
        })
        .collect();
    assert_eq!(
        fibs,
        [vec![(
            moved,
            Arc::from([NextHop {
                via: Some(ip(Y_ADDR)),
                ifname: "eth1".to_owned(),
                onlink: true,
            }])
        )]]
    );
    assert_eq!(hub.s.installed()[&stale], hops(&[X_ADDR]));

    // At the deadline the stale entry goes.
    let tick = hub.s.handle(secs(10), Input::Tick);
    assert!(!tick.iter().any(|o| matches!(o, Output::Fib(_))));
    let fibs: Vec<Output> = hub
        .s
        .flush(secs(10))
        .into_iter()
        .filter(|o| matches!(o, Output::Fib(_)))
        .collect();
    assert_eq!(fibs, [Output::Fib(vec![(stale, Arc::from([]))])]);
    let expected: plan::Fib = [(kept, hops(&[X_ADDR])), (moved, hops(&[Y_ADDR]))].into();
    assert_eq!(hub.s.installed(), &expected);
    assert_eq!(hub.s.last_change(), secs(10));
    // No stale deadline left (and Hold Time 0: no other timer).
    assert_eq!(hub.s.next_deadline(), None);
}

#[test]
fn connections_before_start_or_from_nowhere_are_refused_and_bad_peers_ignored() {
    let mut hub = Hub::new();
    assert_eq!(
        hub.s.handle(Duration::ZERO, Input::Connected { peer: 0 }),
        [Output::Close { peer: 0 }]
    );
    // Out-of-range neighbours and bytes without a connection: nothing.
    assert!(
        hub.s
            .handle(Duration::ZERO, Input::Connected { peer: 9 })
            .is_empty()
    );
    assert!(
        hub.s
            .handle(
                Duration::ZERO,
                Input::Bytes {
                    peer: 1,
                    data: vec![0xff; 40]
                }
            )
            .is_empty()
    );
    assert_eq!(hub.s.neighbour_at(ip(Y_ADDR)), Some(1));
    assert_eq!(hub.s.neighbour_at(ip("10.9.9.9")), None);
    hub.start();
    // Garbage on an established session: NOTIFICATION, Close, Down.
    let outs = hub.s.handle(
        secs(1),
        Input::Bytes {
            peer: 0,
            data: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        },
    );
    assert!(outs.contains(&Output::Close { peer: 0 }));
    assert!(outs.iter().any(|o| matches!(
        o,
        Output::Event(Event::Down {
            peer: 0,
            established: true,
            cause: Cause::Session(Reason::Error(_))
        })
    )));
    assert_eq!(hub.s.peer_state(0), Some(PeerState::Idle));
    // It restarts after the idle hold time, passive: listening again.
    hub.s.handle(secs(2), Input::Tick);
    assert_eq!(hub.s.peer_state(0), Some(PeerState::Passive));
}

/// The FIB change sets among `outs`.
fn fib_sets(outs: &[Output]) -> Vec<Vec<(Ipv4Net, NextHops)>> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Fib(routes) => Some(routes.clone()),
            _ => None,
        })
        .collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_prefix_heard_from_two_neighbours_within_the_settle_wait_is_installed_once() {
    let mut hub = Hub::settling(Settle::LAB);
    hub.start();
    // The loopback's first flush is due 2 ms after the start.
    assert_eq!(hub.s.flush_at(), Some(ms(2)));
    hub.s.flush(ms(2));
    assert_eq!(hub.s.flush_at(), None);
    let t = secs(1);
    let from_x = hub.update(0, &[65101, 64512], &["198.51.100.0/24"]);
    hub.exchange(t, vec![(0, from_x)]);
    // Not yet settled: nothing installed, nothing advertised.
    assert_eq!(hub.s.flush_at(), Some(t + ms(2)));
    assert!(hub.s.flush(t + ms(1)).is_empty());
    assert!(hub.s.status(t + ms(1)).fib_pending);
    // Y's path comes 1 ms later: the wait starts again.
    let from_y = hub.update(1, &[65102, 64512], &["198.51.100.0/24"]);
    hub.exchange(t + ms(1), vec![(1, from_y)]);
    assert!(hub.s.flush(t + ms(2)).is_empty());
    assert_eq!(hub.s.flush_at(), Some(t + ms(3)));
    let outs = hub.s.flush(t + ms(3));
    let sets = fib_sets(&outs);
    assert_eq!(sets.len(), 1, "{outs:?}");
    assert_eq!(sets[0].len(), 1);
    assert_eq!(sets[0][0].1.len(), 2, "both next hops at once");
    let counters = hub.s.status(t + ms(3)).counters;
    assert_eq!(counters.set_changes, 1);
    assert!(!hub.s.status(t + ms(3)).fib_pending);
}

#[test]
fn the_settle_window_widens_while_changes_keep_coming_and_narrows_when_they_stop() {
    let mut hub = Hub::settling(Settle::LAB);
    hub.start();
    hub.s.flush(ms(2));
    // A change every millisecond, for ever: each flush comes when the
    // window runs out, and the window doubles up to 400 ms.
    let mut now = secs(1);
    let mut flushed_after = Vec::new();
    let mut since = now;
    for i in 0..3_000u32 {
        let prefix = format!("198.51.{}.{}/32", 100 + i / 256, i % 256);
        let bytes = hub.update(0, &[65101, 64512 + i], &[&prefix]);
        hub.exchange(now, vec![(0, bytes)]);
        if hub.s.flush_at().is_some_and(|t| t <= now) {
            assert!(!fib_sets(&hub.s.flush(now)).is_empty());
            flushed_after.push((now - since).as_millis());
            since = now + ms(1);
        }
        now += ms(1);
    }
    assert_eq!(
        flushed_after[..7],
        [10, 20, 40, 80, 160, 320, 400],
        "{flushed_after:?}"
    );
    assert!(flushed_after[7..].iter().all(|&w| w == 400));
    // Then quiet: the last changes go after 2 ms of quiet, and the next
    // change waits the narrow window again.
    let last = now - ms(1);
    assert_eq!(hub.s.flush_at(), Some(last + ms(2)));
    assert!(!fib_sets(&hub.s.flush(last + ms(2))).is_empty());
    let t = secs(10);
    for i in 0..5u32 {
        let bytes = hub.update(0, &[65101, 64600 + i], &[&format!("203.0.113.{i}/32")]);
        hub.exchange(t + ms(i.into()), vec![(0, bytes)]);
    }
    assert_eq!(hub.s.flush_at(), Some(t + ms(6)), "2 ms after the last");
    for i in 5..12u32 {
        let bytes = hub.update(0, &[65101, 64600 + i], &[&format!("203.0.113.{i}/32")]);
        hub.exchange(t + ms(i.into()), vec![(0, bytes)]);
    }
    assert_eq!(hub.s.flush_at(), Some(t + ms(10)), "the narrow window");
}
