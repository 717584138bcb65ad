//! The built-in BGP agents of a lab (`routing.mode = "bgp"`), run by the
//! lab daemon: one agent per switch, all on the daemon's event loop.
//!
//! An agent is a task that owns its switch's [`Rib`](turbonet_routing::bgp::rib::Rib) and [`Fib`](fib::Fib); each of
//! its sessions is a task running
//! [`run_session`](turbonet_routing::bgp::driver::run_session) over a TCP connection
//! whose socket was created inside the switch's namespace (listening on
//! port 179 there, or connecting from its address on the link). Sessions
//! report to their agent through its inbox; the agent applies a whole batch
//! of reports to the RIB, installs the Loc-RIB changes in the FIB, then
//! advertises them, so a burst of UPDATEs costs one FIB pass and one round
//! of UPDATEs out.
//!
//! Which end of a session connects is the plan's choice (one passive end
//! per link, [`Neighbour::passive`](turbonet_routing::bgp::plan::Neighbour::passive)), so no connection ever collides. A
//! port that goes down (`fail`, a flap, the timeline) takes its sessions
//! down at once and withdraws what it originated (a dual-homed host's /32);
//! sessions come back when it does (fast external failover, as FRR does).
//!
//! Modules: [`agent`] (one switch's agent), [`sessions`] (its sockets and
//! session tasks), [`fib`] (the FIB it drives), [`kernel`] (FRR and BIRD
//! switches, read from their kernel tables), [`status`] (what `show bgp`
//! prints).

mod agent;
pub mod fib;
mod kernel;
mod sessions;
mod status;

pub use status::BgpReport;
use status::SpeakerStatus;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::time::Instant;

use crate::error::Result;
use ipnet::Ipv4Net;
use tokio::sync::{mpsc, oneshot};
use turbonet_routing::bgp::driver::DriverCommand;
use turbonet_routing::bgp::driver::DriverEvent;
use turbonet_routing::bgp::plan::{self, Speaker};
use turbonet_routing::bgp::rib::PeerSummary;
use turbonet_topo::{Agent as AgentKind, Lab, NodeId};

use agent::Agent;
use kernel::{kernel_fib, watch_routers};
use sessions::{SwitchSockets, spawn_sessions};

use crate::events::EventLog;

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
    /// Every prefix of the plan: FIBs are compared on these only (routes
    /// learned from outside the fabric are extra).
    known: Rc<BTreeSet<Ipv4Net>>,
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
    /// (on the current `LocalSet`). Their routes go to the switches'
    /// kernel tables, or with `pipeline` to the P4 pipeline's.
    pub fn start(
        lab: &Lab,
        log: EventLog,
        pipeline: Option<&Rc<fib::PipelineRoutes>>,
    ) -> Result<Agents> {
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
            tracing::info!(
                "BGP plan: {} FIB entries for {} switches in {:.2} s",
                digests.iter().map(|d| d.routes).sum::<usize>(),
                planned.len(),
                t.elapsed().as_secs_f64()
            );
            let _ = plan_tx.send(digests);
        });
        let known = Rc::new(plan::known_prefixes(&speakers));
        let started = Instant::now();
        // Every listener first, so that every connection finds its peer
        // listening; then the agents and their sessions.
        let mut opened = Vec::new();
        for (speaker, kind) in speakers.iter().zip(&kinds) {
            if *kind == AgentKind::Builtin {
                opened.push((speaker, SwitchSockets::open(lab, speaker, pipeline)?));
            }
        }
        let mut inboxes = HashMap::new();
        for (speaker, sockets) in opened {
            let (tx, rx) = mpsc::unbounded_channel();
            inboxes.insert(speaker.node, tx.clone());
            let ports = spawn_sessions(
                speaker,
                sockets.ns,
                sockets.listener,
                &lab.routing.timers,
                &tx,
            );
            let agent = Agent::new(
                speaker.clone(),
                sockets.fib,
                ports,
                known.clone(),
                log.clone(),
                started,
            );
            tokio::task::spawn_local(agent.run(rx));
        }
        Ok(Agents {
            speakers,
            kinds,
            inboxes,
            started,
            epoch: Cell::new(None),
            lab: lab.name.clone(),
            known,
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
        if let Ok(expected) = rx.await
            && self.epoch.get().is_none()
        {
            self.send_plan(expected, self.started);
        }
    }

    /// (Re)starts the task that records when each FRR or BIRD switch's
    /// kernel table becomes `expected`.
    fn watch_routers(&self, expected: Vec<plan::FibDigest>, epoch: Instant) {
        self.observed.borrow_mut().clear();
        let routers: Vec<(usize, String, plan::FibDigest)> = self
            .speakers
            .iter()
            .zip(&self.kinds)
            .zip(expected)
            .enumerate()
            .filter(|(_, ((_, kind), _))| **kind != AgentKind::Builtin)
            .map(|(i, ((s, _), fib))| (i, crate::names::node_namespace(&self.lab, &s.name), fib))
            .collect();
        if routers.is_empty() {
            return;
        }
        let task = tokio::task::spawn_local(watch_routers(
            routers,
            self.known.clone(),
            epoch,
            self.observed.clone(),
        ));
        if let Some(old) = self.watcher.replace(Some(task)) {
            old.abort();
        }
    }

    /// The plan the agents follow.
    pub fn speakers(&self) -> &[Speaker] {
        &self.speakers
    }

    /// Tells the agent of `node` (if built in) that port `ifname` went up
    /// or down.
    pub fn port_changed(&self, node: NodeId, ifname: &str, up: bool) {
        if let Some(inbox) = self.inboxes.get(&node) {
            let _ = inbox.send(AgentEvent::Port {
                ifname: ifname.to_owned(),
                up,
            });
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

    /// The status of every switch, or of `node` only. Built-in agents
    /// report themselves; for switches run by FRR or BIRD the routes come
    /// from their namespace's kernel table and the sessions from the
    /// daemons.
    pub async fn report(&self, node: Option<NodeId>) -> BgpReport {
        let epoch = self.epoch.get().unwrap_or(self.started);
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
            let ns = crate::names::node_namespace(&self.lab, &speaker.name);
            let mut fib = kernel_fib(&ns).await.unwrap_or_default();
            // No plan yet: not converged.
            let expected = self.expected.borrow().get(i).copied();
            let routes = fib.len();
            fib.retain(|p, _| self.known.contains(p));
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
                sessions: kernel::router_sessions(&self.lab, speaker, *kind).await,
            });
        }
        BgpReport {
            elapsed: self.started.elapsed().as_secs_f64(),
            since_change: self.epoch.get().map(|e| e.elapsed().as_secs_f64()),
            speakers,
        }
    }
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
    crate::system::process::trim_heap();
    digests
}
