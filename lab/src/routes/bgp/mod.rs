//! The BGP agents of a lab (`routing.mode = "bgp"`), run by the lab
//! daemon: a built-in speaker per switch whose agent is `builtin`, and the
//! switches FRR or BIRD run, watched.
//!
//! A built-in speaker is [`turbonet_routing::bgp::speaker::Speaker`] (the
//! sessions, the RIB, the batching: sans-I/O, tested on a virtual clock)
//! driven by [`run_speaker`] on the speakers' own thread (see
//! [`Agents::start`]); the lab supplies only what lives in the switch's
//! namespace ([`switch`]: the listener on port 179, connections opened
//! from its addresses, the FIB, [`fib`]).
//! Which end of a session connects is the plan's choice (one passive end
//! per link), so no connection ever collides. A port that goes down (`fail`,
//! a flap, the timeline) takes its sessions down at once and withdraws what
//! it originated; they come back when it does.
//!
//! What `show bgp` sees is a [`BgpView`]: every speaker publishes its
//! status after each batch, and the view reads those snapshots (and asks
//! FRR's and BIRD's kernels and daemons) on any thread, without waiting on
//! the speakers: a thousand speakers converging do not delay a report.
//!
//! Modules: [`switch`] (a switch's sockets), [`fib`] (the FIBs a speaker
//! drives), [`groups`] (the kernel nexthop groups its routes share),
//! [`kernel`] (FRR and BIRD switches, read from their kernel
//! tables), [`status`] (what `show bgp` prints), [`shard`] (the speakers
//! of a large fabric in several processes).

pub mod fib;
mod groups;
mod kernel;
pub mod shard;
mod switch;

pub use turbonet_api::bgp::{BgpReport, SessionStatus, SpeakerStatus};

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use tokio::sync::{mpsc, oneshot, watch};
use turbonet_routing::bgp::dump::RibDump;
use turbonet_routing::bgp::plan::{self, Speaker};
use turbonet_routing::bgp::speaker::{self, Event, Status, Timers};
use turbonet_routing::bgp::speaker_driver::{Control, Report, SpeakerIo, accept_loop, run_speaker};
use turbonet_topo::{Agent as AgentKind, Lab, NodeId};

use kernel::{kernel_fib, watch_routers};
use switch::{NamespaceConnector, SwitchSockets};

use crate::error::{Context, Result};
use crate::events::{About, Events};

/// The lab's BGP agents, as the daemon drives them (on its event loop).
#[derive(Debug)]
pub struct Agents {
    view: Arc<BgpView>,
    /// Into each built-in speaker, by node.
    controls: HashMap<NodeId, mpsc::UnboundedSender<Control>>,
    /// Stops the current watcher of FRR and BIRD when the plan changes.
    watcher: RefCell<Option<tokio::task::JoinHandle<()>>>,
    /// The plan with every link up, until it has been computed.
    plan: RefCell<Option<oneshot::Receiver<Vec<plan::FibDigest>>>>,
    /// Where the built-in speakers' connections run (none without them).
    _connections: Option<Connections>,
}

/// The runtimes of the built-in speakers' connections (their reading,
/// writing and keepalives) and of their kernel FIBs' writes, on threads of
/// their own: however long the speakers' thread is busy, their sessions'
/// KEEPALIVEs go out on time, and installing routes is done beside the
/// speakers' work rather than in its turn.
///
/// The FIBs' writes have a thread apart from the connections': a route or
/// nexthop request waits for the kernel's routing lock (RTNL, one for
/// every namespace), and while the HPN pod converges both connection
/// threads were found waiting there at once, with sessions' KEEPALIVEs
/// neither sent nor read. The kernel takes one such request at a time
/// whatever the threads, so one thread writes every FIB of the process.
#[derive(Debug)]
struct Connections {
    io: Option<tokio::runtime::Runtime>,
    fib: Option<tokio::runtime::Runtime>,
}

impl Connections {
    fn start() -> Result<Connections> {
        let runtime = |threads, name: &str| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name(name)
                .enable_all()
                .build()
                .with_context(|| format!("starting the {name} threads"))
        };
        Ok(Connections {
            io: Some(runtime(2, "bgp-io")?),
            fib: Some(runtime(1, "bgp-fib")?),
        })
    }

    /// The connections' runtime.
    fn handle(&self) -> tokio::runtime::Handle {
        Self::of(&self.io)
    }

    /// The FIBs' writes' runtime.
    fn fib(&self) -> tokio::runtime::Handle {
        Self::of(&self.fib)
    }

    fn of(runtime: &Option<tokio::runtime::Runtime>) -> tokio::runtime::Handle {
        runtime
            .as_ref()
            .expect("running until dropped")
            .handle()
            .clone()
    }
}

impl Drop for Connections {
    fn drop(&mut self) {
        // Not waiting for the connections: dropped from the daemon's event
        // loop, where a runtime may not block.
        for runtime in [self.io.take(), self.fib.take()].into_iter().flatten() {
            runtime.shutdown_background();
        }
    }
}

/// What the fabric's routing looks like, readable from any thread.
#[derive(Debug)]
pub struct BgpView {
    lab: String,
    speakers: Vec<Speaker>,
    kinds: Vec<AgentKind>,
    /// Which speakers run on this machine (all, unless the lab spans
    /// machines): what reports and convergence are of.
    here: Vec<bool>,
    /// The status each built-in speaker published last, by speaker
    /// position (`None`: FRR or BIRD).
    statuses: Vec<Option<watch::Receiver<Status>>>,
    /// The speakers' clock starts here.
    started: Instant,
    /// Every prefix of the plan: FIBs are compared on these only (routes
    /// learned from outside the fabric are extra).
    known: Arc<BTreeSet<Ipv4Net>>,
    plan: Mutex<Plan>,
    /// Into each built-in speaker, by node, without keeping it running
    /// (the speakers stop when the daemon drops their controls).
    dumps: HashMap<NodeId, mpsc::WeakUnboundedSender<Control>>,
    /// Whether a report found every switch converged yet.
    converged_once: watch::Sender<bool>,
    /// False while a route watcher that joins at convergence has not
    /// ([`BgpView::watcher_joins`]).
    watcher_joined: Arc<watch::Sender<bool>>,
}

/// How long a converged report waits for the route watcher to join.
const WATCHER_JOINS_WITHIN: Duration = Duration::from_secs(60);

/// What the speakers converge to, since when.
#[derive(Debug, Default)]
struct Plan {
    /// Every speaker's FIB once converged (empty until computed).
    expected: Vec<plan::FibDigest>,
    /// The last fail or restore.
    epoch: Option<Instant>,
    /// Bumped with every new plan (a watcher of an older one records
    /// nothing).
    generation: u64,
    /// When each FRR or BIRD switch was first seen converged since the
    /// epoch (seconds after it), by speaker position.
    observed: HashMap<usize, f64>,
}

/// How long a restarted speaker keeps the routes its predecessor left in
/// the kernel that it has not learned again (as a graceful restart keeps
/// stale routes), at least.
const STALE_AT_LEAST: Duration = Duration::from_secs(5);

impl Agents {
    /// Starts a built-in speaker on every switch whose agent is `builtin`
    /// (on a thread of their own, in `shards` processes of their own
    /// when more than one (see [`shard`]), or with `pipeline` on the
    /// current `LocalSet`). Their routes go to the switches' kernel
    /// tables, or with `pipeline` to the P4 pipeline's. A
    /// `restarted` daemon's speakers start from the routes their
    /// predecessors left in the kernel, so forwarding goes on while the
    /// sessions come back.
    pub async fn start(
        lab: &Arc<Lab>,
        events: Events,
        pipeline: Option<&Rc<crate::dataplane::agent_routes::PipelineRoutes>>,
        restarted: bool,
        shards: usize,
        share: &turbonet_topo::machines::Share,
    ) -> Result<Agents> {
        let speakers = plan::speakers(&lab.fabric);
        let kinds: Vec<AgentKind> = speakers
            .iter()
            .map(|s| lab.routing.agent_of(s.node))
            .collect();
        // What every FIB will hold: computed on another thread while the
        // speakers start; a speaker is not converged until the plan is
        // known.
        let (plan_tx, plan_rx) = oneshot::channel();
        let planned = speakers.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let digests = plan::converged_digests(&planned, &turbonet_routing::Failures::default());
            tracing::info!(
                "BGP plan: {} FIB entries for {} switches in {:.3} s",
                digests.iter().map(|d| d.routes).sum::<usize>(),
                planned.len(),
                t.elapsed().as_secs_f64()
            );
            let _ = plan_tx.send(digests);
        });
        let known = Arc::new(plan::known_prefixes(&speakers));
        // On one machine of several, the speakers of the switches here.
        let here: Vec<bool> = speakers.iter().map(|s| share.runs(s.node)).collect();
        let run: Vec<bool> = (kinds.iter().zip(&here))
            .map(|(k, here)| *here && *k == AgentKind::Builtin)
            .collect();
        // No threads for connections when FRR or BIRD run every switch.
        let connections = run.contains(&true).then(Connections::start).transpose()?;
        let handle = connections
            .as_ref()
            .map_or_else(tokio::runtime::Handle::current, Connections::handle);
        let fib = connections
            .as_ref()
            .map_or_else(tokio::runtime::Handle::current, Connections::fib);
        let Launched {
            started,
            statuses,
            controls,
        } = if pipeline.is_none() && shards > 1 {
            shard::launch(lab, &speakers, &run, shards, restarted, events, &handle).await?
        } else {
            let launch = Launch {
                connections: handle,
                fib,
                lab: Arc::clone(lab),
                speakers: speakers.clone(),
                run,
                known: known.clone(),
                note: Arc::new(move |note: Note| note.write(&events)),
                restarted,
                started: Instant::now(),
            };
            match pipeline {
                // The pipeline's routes are the data plane's, on this thread.
                Some(table) => launch.run(Some(table)).await?.0,
                None => launch.on_own_thread().await?,
            }
        };
        Ok(Agents {
            view: Arc::new(BgpView {
                lab: lab.name.clone(),
                speakers,
                kinds,
                here,
                statuses,
                started,
                known,
                plan: Mutex::new(Plan::default()),
                dumps: controls.iter().map(|(n, c)| (*n, c.downgrade())).collect(),
                converged_once: watch::Sender::new(false),
                watcher_joined: Arc::new(watch::Sender::new(true)),
            }),
            controls,
            watcher: RefCell::new(None),
            plan: RefCell::new(Some(plan_rx)),
            _connections: connections,
        })
    }

    /// What `show bgp` reads (from any thread).
    pub fn view(&self) -> Arc<BgpView> {
        self.view.clone()
    }

    /// Waits for the plan with every link up and makes it the speakers'
    /// goal (unless a `fail` or `restore` brought a newer one meanwhile).
    /// Run it as a task once the agents are started.
    pub async fn plan_ready(&self) {
        let Some(rx) = self.plan.borrow_mut().take() else {
            return;
        };
        if let Ok(expected) = rx.await
            && self.view.plan().epoch.is_none()
        {
            self.set_plan(expected, None);
        }
    }

    /// The plan the agents follow.
    pub fn speakers(&self) -> &[Speaker] {
        &self.view.speakers
    }

    /// Tells the speaker of `node` (if built in) that port `ifname` went
    /// up or down.
    pub fn port_changed(&self, node: NodeId, ifname: &str, up: bool) {
        if let Some(control) = self.controls.get(&node) {
            let _ = control.send(Control::Port {
                ifname: ifname.to_owned(),
                up,
            });
        }
    }

    /// Ports went down or up (`(node, interface, up)`) with `failures`
    /// down now: each built-in speaker of such a node hears of its ports
    /// at once, and every speaker converges from now on to the FIB the
    /// plan gives around `failures` (computed on a blocking thread while
    /// they re-converge).
    pub async fn ports_changed(
        &self,
        changes: &[(NodeId, String, bool)],
        failures: &turbonet_routing::Failures,
    ) {
        let epoch = Instant::now();
        for (node, ifname, up) in changes {
            self.port_changed(*node, ifname, *up);
        }
        let (speakers, failures) = (self.view.speakers.clone(), failures.clone());
        if let Ok(expected) =
            tokio::task::spawn_blocking(move || plan::converged_digests(&speakers, &failures)).await
        {
            self.set_plan(expected, Some(epoch));
        }
    }

    /// From `epoch` (`None`: the start) on, every speaker converges to
    /// its FIB in `expected` (see [`plan::converged`]); FRR and BIRD are
    /// watched until they hold theirs.
    fn set_plan(&self, expected: Vec<plan::FibDigest>, epoch: Option<Instant>) {
        let generation = {
            let mut plan = self.view.plan();
            plan.expected = expected.clone();
            plan.epoch = epoch.or(plan.epoch);
            plan.generation += 1;
            plan.observed.clear();
            plan.generation
        };
        let view = &self.view;
        let routers: Vec<(usize, String, plan::FibDigest)> = view
            .speakers
            .iter()
            .zip(&view.kinds)
            .zip(expected)
            .enumerate()
            .filter(|(_, ((_, kind), _))| **kind != AgentKind::Builtin)
            .map(|(i, ((s, _), fib))| (i, crate::names::node_namespace(&view.lab, &s.name), fib))
            .collect();
        if routers.is_empty() {
            return;
        }
        let task = tokio::task::spawn_local(watch_routers(
            routers,
            view.clone(),
            generation,
            epoch.unwrap_or(view.started),
        ));
        if let Some(old) = self.watcher.replace(Some(task)) {
            old.abort();
        }
    }
}

/// What starting the built-in speakers needs.
struct Launch {
    lab: Arc<Lab>,
    /// Every switch's plan.
    speakers: Vec<Speaker>,
    /// Which of them to run here, by position.
    run: Vec<bool>,
    known: Arc<BTreeSet<Ipv4Net>>,
    /// Where session events and FIB failures go.
    note: Arc<dyn Fn(Note) + Send + Sync>,
    restarted: bool,
    /// The runtime of their connections.
    connections: tokio::runtime::Handle,
    /// The runtime of their kernel FIBs' writes.
    fib: tokio::runtime::Handle,
    /// Their clock starts here.
    started: Instant,
}

/// The built-in speakers, started.
struct Launched {
    /// Their clock starts here.
    started: Instant,
    /// Their statuses, by speaker position (`None`: FRR or BIRD).
    statuses: Vec<Option<watch::Receiver<Status>>>,
    /// Into each, by node.
    controls: HashMap<NodeId, mpsc::UnboundedSender<Control>>,
}

impl Launch {
    /// Starts the speakers on a thread of their own, with its own event
    /// loop: a thousand speakers converging keep that thread busy for
    /// seconds at a time, and the daemon's actor (status, show, fail)
    /// must answer meanwhile. The thread ends when every speaker has
    /// stopped (their control senders dropped).
    async fn on_own_thread(self) -> Result<Launched> {
        let (tx, rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("bgp".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = tx.send(Err(e.into()));
                        return;
                    }
                };
                tokio::task::LocalSet::new().block_on(&runtime, async move {
                    match self.run(None).await {
                        Ok((launched, running)) => {
                            let _ = tx.send(Ok(launched));
                            for (node, speaker) in running {
                                if let Err(e) = speaker.await {
                                    tracing::error!("the BGP speaker of {node} failed: {e}");
                                }
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
                // What a stopping speaker left to the runtime (connections
                // lingering to write a NOTIFICATION) is not waited for.
                runtime.shutdown_background();
            })
            .context("starting the BGP thread")?;
        rx.await
            .map_err(|_| crate::err!("the BGP thread ended while starting its speakers"))?
    }

    /// Opens every switch's sockets and starts its speaker on the current
    /// `LocalSet`; the speakers' tasks are handed back.
    async fn run(
        self,
        pipeline: Option<&Rc<crate::dataplane::agent_routes::PipelineRoutes>>,
    ) -> Result<(Launched, Vec<(String, tokio::task::JoinHandle<()>)>)> {
        let Launch {
            lab,
            speakers,
            run,
            known,
            note,
            restarted,
            connections,
            fib,
            started,
        } = self;
        let timers = Timers::from(&lab.routing.timers);
        let stale = Duration::from_secs(timers.hold_time.into()).max(STALE_AT_LEAST);
        // Every listener first, so that every connection finds its peer
        // listening; then the speakers.
        let mut opened = Vec::new();
        for (i, (plan, run)) in speakers.iter().zip(&run).enumerate() {
            if *run {
                opened.push((
                    i,
                    SwitchSockets::open(&lab, plan, pipeline, &connections, &fib)?,
                ));
            }
        }
        let started = tokio::time::Instant::from_std(started);
        let mut statuses = vec![None; speakers.len()];
        let mut controls = HashMap::new();
        let mut running = Vec::new();
        for (i, sockets) in opened {
            let plan = &speakers[i];
            let mut speaker = speaker::Speaker::new(plan.clone(), timers);
            speaker.set_known(known.clone());
            if restarted && pipeline.is_none() {
                let ns = crate::names::node_namespace(&lab.name, &plan.name);
                if let Ok(left) = kernel_fib(&ns).await {
                    speaker.assume_installed(left, started.elapsed() + stale);
                }
            }
            let (control, control_rx) = mpsc::unbounded_channel();
            let (status, status_rx) = watch::channel(speaker.status(started.elapsed()));
            let (accepted, accepted_rx) = mpsc::unbounded_channel();
            connections.spawn(accept_loop(sockets.listener, accepted));
            let io = SpeakerIo {
                connector: NamespaceConnector(sockets.ns),
                accepted: accepted_rx,
                fib: sockets.fib,
                control: control_rx,
                status,
                epoch: started,
                runtime: connections.clone(),
            };
            let report = reporter(plan.clone(), note.clone());
            let task = tokio::task::spawn_local(async move {
                run_speaker(speaker, io, report).await;
            });
            running.push((plan.name.clone(), task));
            controls.insert(plan.node, control);
            statuses[i] = Some(status_rx);
        }
        Ok((
            Launched {
                started: started.into_std(),
                statuses,
                controls,
            },
            running,
        ))
    }
}

/// A speaker's session change or FIB failure, as the lab's events record
/// it (source `bgp`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Note {
    /// When (Unix seconds).
    unix: f64,
    kind: String,
    event: String,
    /// What went wrong, if anything.
    error: Option<String>,
    about: About,
}

impl Note {
    fn new(kind: &str, event: String, error: Option<String>, about: About) -> Note {
        Note {
            unix: crate::events::unix_now(),
            kind: kind.to_owned(),
            event,
            error,
            about,
        }
    }

    /// Records it in `events`.
    fn write(self, events: &Events) {
        events.write_at(
            self.unix,
            "bgp",
            &self.kind,
            &self.event,
            self.error.as_deref().map_or(Ok(()), Err),
            self.about,
        );
    }
}

/// Passes a speaker's session changes and FIB failures to `note`.
fn reporter(plan: Speaker, note: Arc<dyn Fn(Note) + Send + Sync>) -> impl FnMut(Report) {
    move |report| match report {
        Report::Event(Event::Established { peer, .. }) => {
            let n = &plan.neighbours[peer];
            note(Note::new(
                "session-up",
                format!(
                    "{}: session with {} ({}) established",
                    plan.name, n.peer_name, n.peer_addr
                ),
                None,
                About {
                    peer: Some(n.peer_name.clone()),
                    ..About::node(&plan.name)
                },
            ));
        }
        Report::Event(Event::Down {
            peer,
            established: true,
            cause,
        }) => {
            let n = &plan.neighbours[peer];
            note(Note::new(
                "session-down",
                format!(
                    "{}: session with {} ({}) down: {cause}",
                    plan.name, n.peer_name, n.peer_addr
                ),
                None,
                About {
                    peer: Some(n.peer_name.clone()),
                    cause: Some(cause.to_string()),
                    ..About::node(&plan.name)
                },
            ));
        }
        Report::Event(Event::Down { .. }) => {}
        Report::FibFailed(why) => note(Note::new(
            "fib",
            format!("{}: installing routes", plan.name),
            Some(why),
            About::node(&plan.name),
        )),
    }
}

impl BgpView {
    fn plan(&self) -> std::sync::MutexGuard<'_, Plan> {
        self.plan
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that FRR or BIRD switch `i` holds the FIB of plan
    /// `generation`, `at` seconds after its epoch (the first time only).
    fn observe(&self, i: usize, generation: u64, at: f64) {
        let mut plan = self.plan();
        if plan.generation == generation {
            plan.observed.entry(i).or_insert(at);
        }
    }

    /// The RIBs of every built-in speaker (or of `node` only), in the
    /// plan's order; a speaker that does not answer within 10 s (it is
    /// stopping) is left out.
    pub async fn ribs(&self, node: Option<NodeId>) -> Vec<RibDump> {
        let mut asked = Vec::new();
        for speaker in &self.speakers {
            if node.is_some_and(|n| n != speaker.node) {
                continue;
            }
            let Some(control) = self
                .dumps
                .get(&speaker.node)
                .and_then(mpsc::WeakUnboundedSender::upgrade)
            else {
                continue;
            };
            let (reply, answer) = oneshot::channel();
            if control.send(Control::Dump(reply)).is_ok() {
                asked.push(answer);
            }
        }
        let mut ribs = Vec::new();
        for answer in asked {
            if let Ok(Ok(rib)) = tokio::time::timeout(Duration::from_secs(10), answer).await {
                ribs.push(rib);
            }
        }
        ribs
    }

    /// The status of every switch, or of `node` only: built-in speakers
    /// from what they published last; for switches run by FRR or BIRD the
    /// routes come from their namespace's kernel table and the sessions
    /// from the daemons. A `summary` counts sessions without listing them.
    pub async fn report(&self, node: Option<NodeId>, summary: bool) -> BgpReport {
        let (expected, epoch) = {
            let plan = self.plan();
            (plan.expected.clone(), plan.epoch)
        };
        let since_epoch = epoch.map_or(Duration::ZERO, |e| e.duration_since(self.started));
        let now = self.started.elapsed();
        let asked = |i: usize| self.here[i] && node.is_none_or(|n| n == self.speakers[i].node);
        // FRR and BIRD switches: their tables and daemons read all at once
        // (each daemon is given a second to answer).
        let mut read: HashMap<usize, (plan::Fib, Vec<SessionStatus>)> = futures::future::join_all(
            (0..self.speakers.len())
                .filter(|&i| asked(i) && self.statuses[i].is_none())
                .map(|i| async move {
                    let speaker = &self.speakers[i];
                    let ns = crate::names::node_namespace(&self.lab, &speaker.name);
                    let (fib, sessions) = futures::join!(
                        kernel_fib(&ns),
                        kernel::router_sessions(&self.lab, speaker, self.kinds[i])
                    );
                    (i, (fib.unwrap_or_default(), sessions))
                }),
        )
        .await
        .into_iter()
        .collect();
        let mut speakers = Vec::new();
        for (i, (speaker, kind)) in self.speakers.iter().zip(&self.kinds).enumerate() {
            if !asked(i) {
                continue;
            }
            // No plan yet: not converged.
            let expected = expected.get(i).copied();
            if let Some(status) = &self.statuses[i] {
                speakers.push(turbonet_api::bgp::builtin_status(
                    speaker,
                    &status.borrow(),
                    expected,
                    since_epoch,
                    now,
                    summary,
                ));
                continue;
            }
            let Some((mut fib, mut sessions)) = read.remove(&i) else {
                continue;
            };
            let routes = fib.len();
            fib.retain(|p, _| self.known.contains(p));
            let converged = expected == Some(plan::FibDigest::of(&fib));
            let converged_at = if converged {
                let at = epoch.unwrap_or(self.started).elapsed().as_secs_f64();
                Some(*self.plan().observed.entry(i).or_insert(at))
            } else {
                None
            };
            let sessions_up = sessions.iter().filter(|s| s.state == "established").count();
            let sessions_total = sessions.len();
            if summary {
                sessions.clear();
            }
            speakers.push(SpeakerStatus {
                node: speaker.name.clone(),
                agent: kind.to_string(),
                asn: speaker.asn,
                router_id: speaker.router_id,
                routes,
                expected: expected.map_or(0, |d| d.routes),
                converged,
                converged_at,
                sessions,
                sessions_up,
                sessions_total,
                counters: None,
            });
        }
        let report = BgpReport {
            elapsed: now.as_secs_f64(),
            since_change: epoch.map(|e| e.elapsed().as_secs_f64()),
            speakers,
        };
        if node.is_none() && report.converged() {
            self.converged_once
                .send_if_modified(|once| !std::mem::replace(once, true));
            // Not said converged before the route watcher that joins then
            // holds the tables: a change made after is an event.
            let mut joined = self.watcher_joined.subscribe();
            let _ = tokio::time::timeout(WATCHER_JOINS_WITHIN, joined.wait_for(|j| *j)).await;
        }
        report
    }

    /// Becomes true when a report of every switch first finds the fabric
    /// converged (`up` asks until it does).
    pub fn converged_once(&self) -> watch::Receiver<bool> {
        self.converged_once.subscribe()
    }

    /// A route watcher joins when the fabric first converged: the report
    /// that first says so waits until the returned call says it joined (or
    /// gave up).
    pub fn watcher_joins(&self) -> impl FnOnce() + Send + 'static {
        self.watcher_joined.send_replace(false);
        let joined = self.watcher_joined.clone();
        move || {
            joined.send_replace(true);
        }
    }
}
