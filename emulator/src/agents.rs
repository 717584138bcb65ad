//! The built-in BGP agents of a lab (`routing.mode = "bgp"`), run by the
//! lab daemon: one agent per switch, all on the daemon's event loop.
//!
//! An agent is a task that owns its switch's [`Rib`] and [`Fib`]; each of
//! its sessions is a task running [`run_session`] over a TCP connection
//! whose socket was created inside the switch's namespace (listening on
//! port 179 there, or connecting from its address on the link). Sessions
//! report to their agent through its inbox; the agent applies a whole batch
//! of reports to the RIB, installs the Loc-RIB changes in the FIB, then
//! advertises them, so a burst of UPDATEs costs one FIB pass and one round
//! of UPDATEs out.
//!
//! Which end of a session connects is the plan's choice (one passive end
//! per link, [`Neighbour::passive`]), so no connection ever collides. A
//! port that goes down (`fail`, a flap, the timeline) takes its sessions
//! down at once and withdraws what it originated (a dual-homed host's /32);
//! sessions come back when it does (fast external failover, as FRR does).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ipnet::Ipv4Net;
use rtnetlink::packet_route::route::RouteProtocol;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use turbonet_routing::bgp::driver::{DriverCommand, DriverEvent, run_session};
use turbonet_routing::bgp::plan::{self, Neighbour, Speaker};
use turbonet_routing::bgp::rib::{Multipath, PeerId, PeerSummary, Rib};
use turbonet_routing::bgp::session::{Session, SessionConfig};
use turbonet_routing::bgp::{Message, PORT};
use turbonet_routing::{NextHop, Route, RouteOrigin};
use turbonet_topo::{Agent as AgentKind, BgpTimers, Lab, NodeId};

use crate::daemon::EventLog;
use crate::{fabric, netns};

/// Metric of the routes BGP installs: above the static routes `up`
/// installs on host and external ports (metric 0), which therefore win
/// while their port is up, and the same as FRR's zebra.
pub const BGP_METRIC: u32 = 20;

/// A switch's forwarding table, as a BGP agent drives it. The netns target
/// implements it with rtnetlink ([`NetlinkFib`]); a P4 target writes table
/// entries instead.
pub trait Fib {
    /// Makes each prefix reach through its next hops, replacing what was
    /// there; an empty list removes the prefix.
    fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> impl Future<Output = Result<()>>;
}

/// A namespace's main table through rtnetlink: routes as protocol `bgp`
/// with metric [`BGP_METRIC`].
#[derive(Debug)]
pub struct NetlinkFib {
    handle: rtnetlink::Handle,
    ifindex: HashMap<String, u32>,
}

impl Fib for NetlinkFib {
    async fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> Result<()> {
        let ifindex: HashMap<&str, u32> =
            self.ifindex.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let handle = &self.handle;
        let ifindex = &ifindex;
        fabric::pipelined(routes.into_iter().map(|(prefix, nexthops)| async move {
            if nexthops.is_empty() {
                return fabric::delete_route_with(
                    handle,
                    prefix,
                    RouteProtocol::Bgp,
                    Some(BGP_METRIC),
                )
                .await;
            }
            let route = Route {
                prefix,
                nexthops,
                origin: RouteOrigin::Fabric,
            };
            let message =
                fabric::route_message(&route, ifindex, RouteProtocol::Bgp, Some(BGP_METRIC))?;
            match handle.route().add(message).replace().execute().await {
                Ok(()) => Ok(()),
                // The port went down between the decision and the request:
                // the session's Down follows and withdraws the route.
                Err(rtnetlink::Error::NetlinkError(e))
                    if e.raw_code() == -libc::ENETDOWN || e.raw_code() == -libc::ENETUNREACH =>
                {
                    Ok(())
                }
                Err(e) => Err(e).with_context(|| format!("route {prefix}")),
            }
        }))
        .await
    }
}

/// One session as `show bgp` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionStatus {
    /// The peer switch.
    pub peer: String,
    /// Its address on the link.
    pub peer_addr: Ipv4Addr,
    /// Its AS.
    pub peer_asn: u32,
    /// The local interface.
    pub ifname: String,
    /// `established`, `open` (connected, OPEN exchange under way),
    /// `connect`, `idle` or `port down`.
    pub state: String,
    /// Seconds in that state.
    pub since: f64,
    /// Prefixes received from the peer and kept.
    pub received: usize,
    /// Why the session last went down.
    pub last_error: Option<String>,
}

/// One switch's routing as `show bgp` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpeakerStatus {
    /// The switch.
    pub node: String,
    /// `builtin`, `frr` or `bird`.
    pub agent: String,
    /// Its AS.
    pub asn: u32,
    /// Its BGP Identifier.
    pub router_id: Ipv4Addr,
    /// Prefixes in its FIB from BGP.
    pub routes: usize,
    /// Prefixes its FIB holds once converged.
    pub expected: usize,
    /// Its FIB is what the plan says (every prefix, every ECMP next hop).
    pub converged: bool,
    /// Seconds after the agents started (or after the last fail/restore)
    /// at which its FIB became what the plan says.
    pub converged_at: Option<f64>,
    /// Its sessions (built-in agents only).
    pub sessions: Vec<SessionStatus>,
}

/// The fabric's routing as `show bgp` and `up` see it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BgpReport {
    /// Seconds since the agents started.
    pub elapsed: f64,
    /// Seconds since the last fail or restore, if any.
    pub since_change: Option<f64>,
    /// Every switch (or the one asked for).
    pub speakers: Vec<SpeakerStatus>,
}

impl BgpReport {
    /// Every switch converged.
    pub fn converged(&self) -> bool {
        self.speakers.iter().all(|s| s.converged)
    }

    /// When the last switch converged, if all have.
    pub fn convergence_time(&self) -> Option<f64> {
        self.speakers
            .iter()
            .map(|s| s.converged_at)
            .try_fold(0.0f64, |max, t| t.map(|t| max.max(t)))
    }

    /// Sessions up, of all sessions.
    pub fn sessions(&self) -> (usize, usize) {
        let all = self.speakers.iter().flat_map(|s| &s.sessions);
        let up = all.clone().filter(|s| s.state == "established").count();
        (up, all.count())
    }
}

/// What reaches an agent.
#[derive(Debug)]
enum AgentEvent {
    /// Neighbour `n` has a connection; commands go there.
    Connected(usize, mpsc::UnboundedSender<DriverCommand>),
    /// A report from neighbour `n`'s session.
    Driver(usize, DriverEvent),
    /// A port went up or down.
    Port { ifname: String, up: bool },
    /// The FIB the plan expects from now on (after a fail or restore);
    /// `epoch` is when that change happened.
    Expect {
        fib: plan::FibDigest,
        epoch: Instant,
    },
    /// Report the status.
    Report(oneshot::Sender<SpeakerStatus>),
}

/// A session's state as the agent tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerState {
    Idle,
    Open,
    Established,
    PortDown,
}

#[derive(Debug)]
struct Peer {
    state: PeerState,
    since: Instant,
    info: Option<PeerSummary>,
    commands: Option<mpsc::UnboundedSender<DriverCommand>>,
    last_error: Option<String>,
}

/// The built-in agents of a lab and the switches run by FRR or BIRD, as
/// the daemon drives them.
#[derive(Debug)]
pub struct Agents {
    speakers: Vec<Speaker>,
    kinds: Vec<AgentKind>,
    inboxes: HashMap<NodeId, mpsc::UnboundedSender<AgentEvent>>,
    started: Instant,
    /// The last fail/restore.
    epoch: Cell<Option<Instant>>,
    /// Lab name (namespace names).
    lab: String,
    /// What every FIB holds once converged (read for FRR and BIRD switches;
    /// built-in agents keep their own copy).
    expected: RefCell<Vec<plan::FibDigest>>,
    /// When each FRR or BIRD switch was first seen converged since the
    /// epoch, by speaker position (kept by [`watch_routers`]).
    observed: Rc<RefCell<HashMap<usize, f64>>>,
    /// Stops the current watcher when the plan changes.
    watcher: RefCell<Option<tokio::task::JoinHandle<()>>>,
    /// The plan with every link up, until it has been computed.
    plan: RefCell<Option<oneshot::Receiver<Vec<plan::FibDigest>>>>,
}

impl Agents {
    /// Starts a built-in agent on every switch whose agent is `builtin`
    /// (on the current `LocalSet`): listeners first, so every connection
    /// finds its peer listening.
    pub fn start(lab: &Lab, log: EventLog) -> Result<Agents> {
        let speakers = plan::speakers(&lab.fabric);
        let kinds: Vec<AgentKind> = speakers
            .iter()
            .map(|s| lab.routing.agent_of(s.node))
            .collect();
        // What every FIB will hold: computed on another thread (seconds
        // for a thousand switches) while the agents start; an agent is not
        // converged until it has the plan.
        let (plan_tx, plan_rx) = oneshot::channel();
        let planned = speakers.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let digests = digests(&planned, &turbonet_routing::Failures::default());
            eprintln!(
                "BGP plan: {} FIB entries for {} switches in {:.2} s",
                digests.iter().map(|d| d.routes).sum::<usize>(),
                planned.len(),
                t.elapsed().as_secs_f64()
            );
            let _ = plan_tx.send(digests);
        });
        let known = Rc::new(plan::known_prefixes(&speakers));
        let started = Instant::now();
        let mut inboxes = HashMap::new();
        let mut pending = Vec::new();
        for (speaker, kind) in speakers.iter().zip(&kinds) {
            if *kind != AgentKind::Builtin {
                continue;
            }
            let ns_name = fabric::ns_name(&lab.name, &speaker.name);
            let ns = Rc::new(netns::open(&ns_name).with_context(|| format!("opening {ns_name}"))?);
            let listener = netns::in_namespace(&*ns, || {
                let socket = socket2::Socket::new(
                    socket2::Domain::IPV4,
                    socket2::Type::STREAM,
                    Some(socket2::Protocol::TCP),
                )?;
                socket.set_reuse_address(true)?;
                socket.set_nonblocking(true)?;
                socket.bind(&SocketAddr::from(([0, 0, 0, 0], PORT)).into())?;
                socket.listen(1024)?;
                Ok(std::net::TcpListener::from(socket))
            })
            .with_context(|| format!("{}: listening on port {PORT}", speaker.name))?;
            let listener = TcpListener::from_std(listener)?;
            let socket = netns::in_namespace(&*ns, netns::route_socket)?;
            let fib = NetlinkFib {
                handle: fabric::connect(socket)?,
                ifindex: lab
                    .fabric
                    .ports(speaker.node)
                    .enumerate()
                    .map(|(port, (_, local, _))| (local.ifname.clone(), fabric::port_ifindex(port)))
                    .collect(),
            };
            let (tx, rx) = mpsc::unbounded_channel();
            inboxes.insert(speaker.node, tx.clone());
            pending.push((speaker.clone(), ns, listener, fib, tx, rx));
        }
        let timers = lab.routing.timers;
        for (speaker, ns, listener, fib, tx, rx) in pending {
            let mut accepted = Vec::new();
            let mut ports = HashMap::new();
            for (n, neighbour) in speaker.neighbours.iter().enumerate() {
                let (accept_tx, accept_rx) = mpsc::unbounded_channel();
                accepted.push((neighbour.peer_addr, accept_tx));
                let (port_tx, port_rx) = watch::channel(true);
                ports
                    .entry(neighbour.ifname.clone())
                    .or_insert_with(Vec::new)
                    .push(port_tx);
                tokio::task::spawn_local(run_neighbour(
                    ns.clone(),
                    n,
                    session_config(&speaker, neighbour, &timers),
                    neighbour.clone(),
                    Duration::from_secs(timers.connect_retry.into()),
                    tx.clone(),
                    accept_rx,
                    port_rx,
                ));
            }
            tokio::task::spawn_local(accept(listener, accepted));
            let agent = Agent {
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
                known: known.clone(),
                epoch: started,
                converged_at: None,
                last_change: started,
                log: log.clone(),
                speaker,
            };
            tokio::task::spawn_local(agent.run(rx));
        }
        Ok(Agents {
            speakers,
            kinds,
            inboxes,
            started,
            epoch: Cell::new(None),
            lab: lab.name.clone(),
            expected: RefCell::new(Vec::new()),
            observed: Rc::new(RefCell::new(HashMap::new())),
            watcher: RefCell::new(None),
            plan: RefCell::new(Some(plan_rx)),
        })
    }

    /// Waits for the plan with every link up and hands it to the agents
    /// (unless a `fail` or `restore` brought a newer one meanwhile). Run it
    /// as a task once the agents are started.
    pub async fn plan_ready(&self) {
        let Some(rx) = self.plan.borrow_mut().take() else {
            return;
        };
        if let Ok(expected) = rx.await {
            if self.epoch.get().is_none() {
                self.send_plan(expected, self.started);
            }
        }
    }

    /// (Re)starts the task that records when each FRR or BIRD switch's
    /// kernel table becomes `expected`.
    fn watch_routers(&self, expected: Vec<plan::FibDigest>, epoch: Instant) {
        self.observed.borrow_mut().clear();
        let known = plan::known_prefixes(&self.speakers);
        let routers: Vec<(usize, String, plan::FibDigest)> = self
            .speakers
            .iter()
            .zip(&self.kinds)
            .zip(expected)
            .enumerate()
            .filter(|(_, ((_, kind), _))| **kind != AgentKind::Builtin)
            .map(|(i, ((s, _), fib))| (i, fabric::ns_name(&self.lab, &s.name), fib))
            .collect();
        if routers.is_empty() {
            return;
        }
        let task =
            tokio::task::spawn_local(watch_routers(routers, known, epoch, self.observed.clone()));
        if let Some(old) = self.watcher.replace(Some(task)) {
            old.abort();
        }
    }

    /// The plan the agents follow.
    pub fn speakers(&self) -> &[Speaker] {
        &self.speakers
    }

    /// Tells the agent of `node` (if built in) that ports went up or down.
    pub fn ports_changed(&self, node: NodeId, ifnames: &[String], up: bool) {
        if let Some(inbox) = self.inboxes.get(&node) {
            for ifname in ifnames {
                let _ = inbox.send(AgentEvent::Port {
                    ifname: ifname.clone(),
                    up,
                });
            }
        }
    }

    /// The fabric changed at `epoch`: from now on every agent converges to
    /// the FIBs in `expected` (one per speaker, see [`plan::converged`]).
    pub fn expect(&self, expected: Vec<plan::FibDigest>, epoch: Instant) {
        self.epoch.set(Some(epoch));
        self.send_plan(expected, epoch);
    }

    /// Sends every agent its FIB to converge to, and watches FRR and BIRD.
    fn send_plan(&self, expected: Vec<plan::FibDigest>, epoch: Instant) {
        for (speaker, fib) in self.speakers.iter().zip(&expected) {
            if let Some(inbox) = self.inboxes.get(&speaker.node) {
                let _ = inbox.send(AgentEvent::Expect { fib: *fib, epoch });
            }
        }
        *self.expected.borrow_mut() = expected.clone();
        self.watch_routers(expected, epoch);
    }

    /// The status of every switch, or of `node` only. Switches run by FRR
    /// or BIRD are read from their namespace's kernel table (their
    /// sessions are theirs to show: `turbonet exec NODE vtysh` or `birdc`).
    pub async fn report(&self, node: Option<NodeId>) -> BgpReport {
        let epoch = self.epoch.get().unwrap_or(self.started);
        let known = plan::known_prefixes(&self.speakers);
        let mut speakers = Vec::new();
        for (i, (speaker, kind)) in self.speakers.iter().zip(&self.kinds).enumerate() {
            if node.is_some_and(|n| n != speaker.node) {
                continue;
            }
            if let Some(inbox) = self.inboxes.get(&speaker.node) {
                let (tx, rx) = oneshot::channel();
                let _ = inbox.send(AgentEvent::Report(tx));
                if let Ok(status) = rx.await {
                    speakers.push(status);
                    continue;
                }
            }
            let ns = fabric::ns_name(&self.lab, &speaker.name);
            let mut fib = kernel_fib(&ns).await.unwrap_or_default();
            // No plan yet: not converged.
            let expected = self.expected.borrow().get(i).copied();
            let routes = fib.len();
            fib.retain(|p, _| known.contains(p));
            let converged = expected == Some(plan::FibDigest::of(&fib));
            let converged_at = if converged {
                Some(
                    *self
                        .observed
                        .borrow_mut()
                        .entry(i)
                        .or_insert_with(|| epoch.elapsed().as_secs_f64()),
                )
            } else {
                None
            };
            speakers.push(SpeakerStatus {
                node: speaker.name.clone(),
                agent: kind.to_string(),
                asn: speaker.asn,
                router_id: speaker.router_id,
                routes,
                expected: expected.map_or(0, |d| d.routes),
                converged,
                converged_at,
                sessions: Vec::new(),
            });
        }
        BgpReport {
            elapsed: self.started.elapsed().as_secs_f64(),
            since_change: self.epoch.get().map(|e| e.elapsed().as_secs_f64()),
            speakers,
        }
    }
}

/// Polls the kernel tables of FRR and BIRD switches every 10 ms until
/// each matches its expected FIB, recording when it first did (seconds
/// after `epoch`), for at most two minutes.
async fn watch_routers(
    mut routers: Vec<(usize, String, plan::FibDigest)>,
    known: BTreeSet<Ipv4Net>,
    epoch: Instant,
    observed: Rc<RefCell<HashMap<usize, f64>>>,
) {
    let deadline = epoch + Duration::from_secs(120);
    let mut handles = HashMap::new();
    while !routers.is_empty() && Instant::now() < deadline {
        let mut waiting = Vec::new();
        for (i, ns, expected) in routers {
            let handle = match handles.entry(i) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => match namespace_handle(&ns) {
                    Ok(h) => e.insert(h),
                    Err(_) => return,
                },
            };
            let fib = kernel_fib_of(handle).await;
            if fib.is_ok_and(|fib| {
                plan::FibDigest::of(fib.iter().filter(|(p, _)| known.contains(p))) == expected
            }) {
                observed
                    .borrow_mut()
                    .insert(i, epoch.elapsed().as_secs_f64());
            } else {
                waiting.push((i, ns, expected));
            }
        }
        routers = waiting;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The routes routing daemons installed in a namespace's main table
/// (protocol bgp, as FRR's zebra and the built-in agents install them, or
/// bird): next hops by prefix.
async fn kernel_fib(ns_name: &str) -> Result<plan::Fib> {
    kernel_fib_of(&namespace_handle(ns_name)?).await
}

/// An rtnetlink handle inside a namespace.
fn namespace_handle(ns_name: &str) -> Result<rtnetlink::Handle> {
    let ns = netns::open(ns_name).with_context(|| format!("opening {ns_name}"))?;
    fabric::connect(netns::in_namespace(&ns, netns::route_socket)?)
}

/// [`kernel_fib`] through an open handle.
async fn kernel_fib_of(handle: &rtnetlink::Handle) -> Result<plan::Fib> {
    use futures::TryStreamExt;
    use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute};
    let mut routes = handle
        .route()
        .get(rtnetlink::RouteMessageBuilder::<Ipv4Addr>::new().build())
        .execute();
    let mut fib = plan::Fib::new();
    while let Some(route) = routes.try_next().await? {
        if !matches!(
            route.header.protocol,
            RouteProtocol::Bgp | RouteProtocol::Bird
        ) {
            continue;
        }
        let mut destination = Ipv4Addr::UNSPECIFIED;
        let mut hops = BTreeSet::new();
        for attribute in &route.attributes {
            match attribute {
                RouteAttribute::Destination(RouteAddress::Inet(d)) => destination = *d,
                RouteAttribute::Gateway(RouteAddress::Inet(g)) => {
                    hops.insert(*g);
                }
                RouteAttribute::MultiPath(nexthops) => {
                    for nh in nexthops {
                        for a in &nh.attributes {
                            if let RouteAttribute::Gateway(RouteAddress::Inet(g)) = a {
                                hops.insert(*g);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if let Ok(prefix) = Ipv4Net::new(destination, route.header.destination_prefix_length) {
            fib.entry(prefix).or_default().extend(hops);
        }
    }
    Ok(fib)
}

/// The digest of every speaker's FIB once converged around `failures`.
/// Blocking (seconds for a thousand switches): run it on its own thread.
pub fn digests(
    speakers: &[Speaker],
    failures: &turbonet_routing::Failures,
) -> Vec<plan::FibDigest> {
    let digests = plan::converged(speakers, failures)
        .iter()
        .map(plan::FibDigest::of)
        .collect();
    // The simulation's RIBs are gone: give their memory back.
    // SAFETY: malloc_trim only releases free heap memory.
    unsafe {
        libc::malloc_trim(0);
    }
    digests
}

/// The session configuration of one neighbour, with the lab's timers.
fn session_config(speaker: &Speaker, neighbour: &Neighbour, timers: &BgpTimers) -> SessionConfig {
    let mut config = SessionConfig::new(speaker.asn, speaker.router_id);
    config.peer_as = Some(neighbour.peer_asn);
    config.hold_time = timers.hold_time;
    config.keepalive = Some(timers.keepalive);
    config.connect_retry = Duration::from_secs(timers.connect_retry.into());
    config.passive = neighbour.passive;
    config.idle_hold = Duration::from_millis(100);
    config
}

/// Hands each accepted connection to the session of the neighbour it
/// comes from; connections from anyone else are closed.
async fn accept(
    listener: TcpListener,
    neighbours: Vec<(Ipv4Addr, mpsc::UnboundedSender<TcpStream>)>,
) {
    loop {
        let Ok((stream, from)) = listener.accept().await else {
            continue;
        };
        let SocketAddr::V4(from) = from else { continue };
        if let Some((_, tx)) = neighbours.iter().find(|(addr, _)| addr == from.ip()) {
            let _ = tx.send(stream);
        }
    }
}

/// One neighbour's connections, one after the other: wait until the port
/// is up, connect (the active end) or take the connection the peer opened
/// (the passive end), run the session until it ends, start again.
#[allow(clippy::too_many_arguments)]
async fn run_neighbour(
    ns: Rc<OwnedFd>,
    n: usize,
    config: SessionConfig,
    neighbour: Neighbour,
    retry: Duration,
    events: mpsc::UnboundedSender<AgentEvent>,
    mut accepted: mpsc::UnboundedReceiver<TcpStream>,
    mut port: watch::Receiver<bool>,
) {
    let peer = SocketAddrV4::new(neighbour.peer_addr, PORT);
    loop {
        while !*port.borrow_and_update() {
            if port.changed().await.is_err() {
                return;
            }
        }
        // Connections that arrived while the port was down are stale.
        while accepted.try_recv().is_ok() {}
        let stream = if neighbour.passive {
            tokio::select! {
                s = accepted.recv() => match s { Some(s) => s, None => return },
                _ = port.changed() => continue,
            }
        } else {
            // Active, but a router outside the fabric may connect first.
            tokio::select! {
                s = accepted.recv() => match s { Some(s) => s, None => return },
                c = connect(&ns, neighbour.local_addr, peer, retry) => match c {
                    Ok(s) => s,
                    Err(_) => {
                        tokio::time::sleep(retry).await;
                        continue;
                    }
                },
            }
        };
        let _ = stream.set_nodelay(true);
        let (tx, rx) = mpsc::unbounded_channel();
        if events.send(AgentEvent::Connected(n, tx)).is_err() {
            return;
        }
        let reports = events.clone();
        run_session(
            Session::new(config.clone()),
            stream,
            move |e| drop(reports.send(AgentEvent::Driver(n, e))),
            rx,
        )
        .await;
        tokio::time::sleep(config.idle_hold).await;
    }
}

/// Opens a connection from `local` (inside the switch's namespace) to
/// `peer`, giving up after `timeout`.
async fn connect(
    ns: &OwnedFd,
    local: Ipv4Addr,
    peer: SocketAddrV4,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let socket = netns::in_namespace(ns, || {
        let socket = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_nonblocking(true)?;
        socket.bind(&SocketAddr::from(SocketAddrV4::new(local, 0)).into())?;
        Ok(std::net::TcpStream::from(socket))
    })?;
    let socket = TcpSocket::from_std_stream(socket);
    tokio::time::timeout(timeout, socket.connect(peer.into()))
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// One switch's agent.
struct Agent {
    speaker: Speaker,
    rib: Rib,
    peers: Vec<Peer>,
    /// Port state watchers of the sessions, by interface.
    ports: HashMap<String, Vec<watch::Sender<bool>>>,
    /// Ports known to be down (absent: up).
    port_up: HashMap<String, bool>,
    fib: NetlinkFib,
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
    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<AgentEvent>) {
        let mut changed: BTreeSet<Ipv4Net> = BTreeSet::new();
        for o in self.speaker.originate.clone() {
            changed.extend(self.rib.originate(o.prefix).iter().map(|c| c.prefix()));
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
                        changed.extend(changes.iter().map(|c| c.prefix()));
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
                changed.extend(changes.iter().map(|c| c.prefix()));
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
                        changed.extend(changes.iter().map(|c| c.prefix()));
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
                    since: now.duration_since(peer.since).as_secs_f64(),
                    received: self.rib.adj_rib_in(n as PeerId).count(),
                    last_error: peer.last_error.clone(),
                })
                .collect(),
        }
    }
}
