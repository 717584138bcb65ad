//! The lab daemon as one actor: every input — a client's request, a
//! timeline step, a flap tick, the agents' routes changing — is a
//! [`Command`] on one queue, run to completion against one state before
//! the next starts, so concurrent `fail`, `restore` and `flap` requests
//! apply one after the other and never diff against a half-changed fabric.
//!
//! The state is what the fabric must be: what is down, every link's
//! parameters, the routes turbonet installs; the [`DataPlane`] brings the
//! fabric there by difference, the [`RouteSource`] says what the routes
//! are. Heavy work (recomputing a large fabric's routes, the BGP plan
//! around a failure) runs on blocking threads while the actor waits, so
//! the daemon's other tasks (the BGP agents, the API's readers, which
//! never wait on the queue) keep running.
//!
//! Every command run is appended to the lab's input log ([`InputLog`]),
//! so a restarted daemon rebuilds the same state ([`Actor::replay`]) and a
//! run can be replayed.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use turbonet_routing::{Failures, Route};
use turbonet_topo::units::Delay;
use turbonet_topo::{Lab, Link, LinkId, LinkParams, NodeId, RoutingMode};

use super::command::{Command, Envelope, Queue, Source, timeline_command};
use super::inputs::{InputLog, Logged};
use crate::dataplane::plane::{Applied, DataPlane, Desired};
use crate::error::{Context, Error, Result};
use crate::events::{Events, unix_now};
use crate::lookup;
use crate::routes::RouteSource;
use crate::routes::bgp::Agents;
use crate::workload::Workloads;
use turbonet_api::Target;

/// What readers see of the actor's state, published after every command.
#[derive(Debug, Clone, Default)]
pub struct Published {
    /// What is down.
    pub failures: Failures,
    /// Every link's parameters in force, by link id.
    pub params: Vec<LinkParams>,
    /// Commands run so far.
    pub commands: u64,
    /// On a P4 target, the routes turbonet wrote to the pipeline, by node
    /// (on `netns` the kernel tables say).
    pub routes: Option<Arc<Vec<Vec<Route>>>>,
}

/// A flap in progress.
#[derive(Debug, Clone)]
struct Flap {
    link: LinkId,
    half: Duration,
    /// Ticks still to come (a down and an up per cycle).
    ticks: u32,
    /// When the next tick is due (Unix seconds): at once after the flap
    /// starts, then every half period (for a replay to keep time).
    due: f64,
}

/// The routes of the intact fabric an actor starts from.
#[derive(Debug)]
pub enum StartRoutes {
    /// Known.
    Known(Vec<Vec<Route>>),
    /// Being computed (seconds on a large fabric: the daemon answers
    /// meanwhile); with `installed`, they are what the fabric holds, for the
    /// plane to learn.
    Computing {
        /// The computation.
        routes: tokio::task::JoinHandle<Vec<Vec<Route>>>,
        /// They are installed.
        installed: bool,
    },
}

/// The daemon's state, and what it drives.
pub struct Actor {
    lab: Arc<Lab>,
    plane: Box<dyn DataPlane>,
    source: Arc<dyn RouteSource>,
    agents: Option<Rc<Agents>>,
    failures: Failures,
    params: Vec<LinkParams>,
    /// The routes turbonet installs for `failures` (shared with the
    /// published view on P4 targets).
    routes: Arc<Vec<Vec<Route>>>,
    /// The routes of the intact fabric while they are being computed at
    /// the start, and whether the plane is to learn they are installed.
    computing: Option<(tokio::task::JoinHandle<Vec<Vec<Route>>>, bool)>,
    flaps: BTreeMap<u64, Flap>,
    next_flap: u64,
    /// Timeline events already run.
    timeline_done: BTreeSet<usize>,
    inputs: InputLog,
    events: Events,
    published: watch::Sender<Published>,
    /// Into our own queue (flap ticks).
    queue: Queue,
    /// The lab's workloads.
    workloads: Option<Arc<Workloads>>,
}

impl std::fmt::Debug for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actor")
            .field("lab", &self.lab.name)
            .field("failures", &self.failures)
            .field("flaps", &self.flaps.len())
            .finish_non_exhaustive()
    }
}

impl Actor {
    /// An actor for `lab` over `plane`, with routes from `source` (with
    /// nothing down, as `up` installed them, `routes`), logging its inputs
    /// to `inputs` and what happened to `events`; `queue` is its own
    /// queue's sender.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        lab: Arc<Lab>,
        plane: Box<dyn DataPlane>,
        source: Arc<dyn RouteSource>,
        agents: Option<Rc<Agents>>,
        routes: StartRoutes,
        inputs: InputLog,
        events: Events,
        queue: Queue,
    ) -> Actor {
        let params: Vec<LinkParams> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
        let (published, _) = watch::channel(Published {
            failures: Failures::default(),
            params: params.clone(),
            commands: 0,
            routes: None,
        });
        let (routes, computing) = match routes {
            StartRoutes::Known(routes) => (Arc::new(routes), None),
            StartRoutes::Computing { routes, installed } => {
                (Arc::default(), Some((routes, installed)))
            }
        };
        Actor {
            lab,
            plane,
            source,
            agents,
            failures: Failures::default(),
            params,
            routes,
            computing,
            flaps: BTreeMap::new(),
            next_flap: 0,
            timeline_done: BTreeSet::new(),
            inputs,
            events,
            published,
            queue,
            workloads: None,
        }
    }

    /// What readers see; updated after every command.
    pub fn subscribe(&self) -> watch::Receiver<Published> {
        self.published.subscribe()
    }

    /// The data plane (for counters between commands).
    pub fn plane(&mut self) -> &mut dyn DataPlane {
        &mut *self.plane
    }

    /// The timeline events not run yet, by index.
    pub fn timeline_left(&self) -> Vec<usize> {
        (0..self.lab.timeline.len())
            .filter(|i| !self.timeline_done.contains(i))
            .collect()
    }

    /// Rebuilds the state the commands of a previous daemon left (what is
    /// down, link parameters, flaps and timeline steps in progress) without
    /// touching the fabric, then brings the fabric there in one pass.
    /// Flaps carry on from their next tick.
    pub async fn replay(&mut self, logged: &[Logged]) -> Result<Applied> {
        self.settle().await?;
        for entry in logged.iter().filter(|e| e.ok) {
            if let Err(e) = self.change_state(&entry.command, entry.unix) {
                tracing::warn!("replaying {:?}: {e}", entry.command);
            }
        }
        self.routes = self.compute_routes().await?;
        let applied = self.apply().await?;
        let now = unix_now();
        for (&id, flap) in &self.flaps {
            let down = flap.ticks % 2 == 0;
            self.schedule_tick(id, down, Duration::from_secs_f64((flap.due - now).max(0.0)));
        }
        self.publish();
        Ok(applied)
    }

    /// Runs commands from `queue` until every sender is gone.
    pub async fn run(mut self, mut queue: mpsc::UnboundedReceiver<Envelope>) -> Actor {
        while let Some(envelope) = queue.recv().await {
            self.handle(envelope).await;
        }
        self
    }

    /// Runs one command to completion, logs it and answers.
    pub async fn handle(&mut self, envelope: Envelope) {
        let Envelope {
            source,
            command,
            reply,
        } = envelope;
        // When it began to change the fabric (after the routes `up`
        // installed are known): what its event is stamped with.
        let mut started = unix_now();
        let result = match self.settle().await {
            Ok(()) => {
                started = unix_now();
                self.execute(source, &command).await
            }
            Err(e) => Err(e),
        };
        if command != Command::AgentRoutes {
            let (kind, event, about) = command.describe(&self.lab);
            self.inputs.append(source, &command, result.is_ok());
            let error = result.as_ref().err().map(ToString::to_string);
            self.events.write_at(
                started,
                source.name(),
                kind,
                &event,
                error.as_deref().map_or(Ok(()), Err),
                about,
            );
        }
        self.publish();
        if let Some(reply) = reply {
            let _ = reply.send(result);
        }
    }

    fn publish(&mut self) {
        let (failures, params) = (self.failures.clone(), self.params.clone());
        let routes = (self.lab.target != turbonet_topo::Target::Netns).then(|| self.routes.clone());
        self.published.send_modify(|p| {
            p.failures = failures;
            p.params = params;
            p.commands += 1;
            p.routes = routes;
        });
    }

    async fn execute(&mut self, source: Source, command: &Command) -> Result<String> {
        match command {
            Command::SetLink { link, params } => self.set_link(link, Some(params)).await,
            Command::ResetLink { link } => self.set_link(link, None).await,
            Command::Fail { target } => self.set_state(target, false).await,
            Command::Restore { target } => self.set_state(target, true).await,
            Command::Flap {
                link,
                period_ns,
                count,
            } => self.start_flap(link, Delay(*period_ns), *count),
            Command::FlapTick { flap, down, .. } => self.flap_tick(*flap, *down).await,
            Command::Timeline { index } => {
                let event = self
                    .lab
                    .timeline
                    .get(*index)
                    .ok_or_else(|| Error::Invalid(format!("no timeline event {index}")))?;
                self.timeline_done.insert(*index);
                let command = timeline_command(&self.lab, &event.action);
                Box::pin(self.execute(source, &command)).await
            }
            Command::StartWorkload { name, text, origin } => {
                self.start_workloads(name.as_deref(), text, origin)
            }
            Command::StopWorkload { name } => {
                self.workloads()?.stop(name)?;
                Ok(format!("workload {name} stopped"))
            }
            Command::AgentRoutes => {
                // Every change up to here is in what this pass writes.
                let table = self.plane.pipeline_routes();
                let change = table.as_ref().map(|t| t.latest());
                let applied = self.apply().await?;
                if let (Some(table), Some(change)) = (table, change) {
                    table.written(change);
                }
                Ok(format!("{} entries rewritten", applied.entities))
            }
        }
    }

    /// The state change a command makes, without touching the fabric
    /// (replay); checks what the fabric's engine would refuse no further.
    fn change_state(&mut self, command: &Command, at: f64) -> Result<()> {
        match command {
            Command::SetLink { link, params } => {
                let id = lookup::link(&self.lab, link)?.id;
                let merged = self.params[id.0 as usize].merged(params);
                self.params[id.0 as usize] = merged;
            }
            Command::ResetLink { link } => {
                let link = lookup::link(&self.lab, link)?;
                self.params[link.id.0 as usize] = link.params.clone();
            }
            Command::Fail { target } => {
                self.record(target, false)?;
            }
            Command::Restore { target } => {
                self.record(target, true)?;
            }
            Command::Flap {
                link,
                period_ns,
                count,
            } => {
                self.register_flap(link, Delay(*period_ns), *count, at)?;
            }
            Command::FlapTick { flap, down, .. } => {
                if let Some(f) = self.flaps.get_mut(flap) {
                    let link = f.link;
                    f.ticks = f.ticks.saturating_sub(1);
                    f.due = at + f.half.as_secs_f64();
                    if f.ticks == 0 {
                        self.flaps.remove(flap);
                    }
                    if *down {
                        self.failures.links.insert(link);
                    } else {
                        self.failures.links.remove(&link);
                    }
                }
            }
            Command::Timeline { index } => {
                self.timeline_done.insert(*index);
                if let Some(event) = self.lab.timeline.get(*index) {
                    let command = timeline_command(&self.lab, &event.action);
                    self.change_state(&command, at)?;
                }
            }
            // A restarted daemon does not run again what its predecessor
            // ran: a workload's figures would not be one run's.
            Command::AgentRoutes | Command::StartWorkload { .. } | Command::StopWorkload { .. } => {
            }
        }
        Ok(())
    }

    /// Runs the lab's workloads from now on.
    pub fn set_workloads(&mut self, workloads: Arc<Workloads>) {
        self.workloads = Some(workloads);
    }

    fn workloads(&self) -> Result<&Workloads> {
        self.workloads
            .as_deref()
            .ok_or_else(|| Error::Refused("this daemon runs no workloads".to_owned()))
    }

    /// Starts the scenario's workload `name`, or those `text` declares.
    fn start_workloads(&self, name: Option<&str>, text: &str, origin: &str) -> Result<String> {
        let workloads = self.workloads()?;
        let list = match name {
            Some(name) => {
                let w = self
                    .lab
                    .workloads
                    .iter()
                    .find(|w| w.name == name)
                    .ok_or_else(|| {
                        let names: Vec<&str> =
                            self.lab.workloads.iter().map(|w| w.name.as_str()).collect();
                        Error::NotFound(format!(
                            "the scenario has no workload {name} (it has: {})",
                            if names.is_empty() {
                                "none".to_owned()
                            } else {
                                names.join(", ")
                            }
                        ))
                    })?;
                vec![w.clone()]
            }
            None => turbonet_topo::parse_workloads(origin, text, &self.lab)
                .map_err(|e| Error::Invalid(e.render_plain(100)))?,
        };
        let now = self.events.now();
        let names: Vec<String> = list.iter().map(|w| w.name.clone()).collect();
        for w in list {
            let at = now + w.start.as_duration().as_secs_f64();
            workloads.start(w, at)?;
        }
        Ok(format!("started {}", names.join(", ")))
    }

    /// Waits for the routes of the intact fabric if they are still being
    /// computed (the daemon answers before they are), and tells the plane
    /// they are installed.
    async fn settle(&mut self) -> Result<()> {
        if let Some((routes, installed)) = self.computing.take() {
            self.routes = match routes.await {
                Ok(routes) => Arc::new(routes),
                // The computation died (it panicked): once more, here, so
                // the plane is never handed a fabric without routes.
                Err(e) => {
                    tracing::warn!("computing the fabric's routes failed ({e}); again");
                    self.compute_routes()
                        .await
                        .context("computing the fabric's routes")?
                }
            };
            if installed {
                self.plane.installed(&self.routes);
            }
        }
        Ok(())
    }

    /// The routes for what is down now, computed on a blocking thread.
    async fn compute_routes(&self) -> Result<Arc<Vec<Vec<Route>>>> {
        let (source, failures) = (self.source.clone(), self.failures.clone());
        Ok(Arc::new(
            tokio::task::spawn_blocking(move || source.routes(&failures)).await?,
        ))
    }

    /// Brings the fabric to the state.
    async fn apply(&mut self) -> Result<Applied> {
        let desired = Desired {
            failures: &self.failures,
            params: &self.params,
            routes: &self.routes,
        };
        self.plane.apply(desired).await
    }

    /// `link set` (with a patch) or `link reset` (without).
    async fn set_link(&mut self, name: &str, patch: Option<&LinkParams>) -> Result<String> {
        let lab = self.lab.clone();
        let link = lookup::link(&lab, name)?;
        let params = match patch {
            Some(patch) if patch.mtu.is_some() => {
                return Err(Error::Invalid(
                    "mtu cannot change at run time; set it in the scenario".to_owned(),
                ));
            }
            Some(patch) => {
                // Given in the scenario's units, like its rates.
                let patch = patch.scaled(lab.fabric.rate_scale);
                let merged = self.params[link.id.0 as usize].merged(&patch);
                merged
                    .check()
                    .map_err(|problems| Error::Invalid(problems.join("; ")))?;
                merged
            }
            None => link.params.clone(),
        };
        self.plane.check_params(link, &params)?;
        let before = std::mem::replace(&mut self.params[link.id.0 as usize], params.clone());
        if let Err(e) = self.apply().await {
            self.params[link.id.0 as usize] = before;
            return Err(e);
        }
        let summary = if params.is_empty() {
            "no impairment".to_owned()
        } else {
            params.to_string()
        };
        Ok(match patch {
            Some(_) => format!("{}: {summary}", link.name),
            None => format!("{}: the scenario's parameters again ({summary})", link.name),
        })
    }

    /// The links `target` names.
    fn links_of(&self, target: &Target) -> Result<Vec<LinkId>> {
        Ok(match target {
            Target::Link(name) => vec![lookup::link(&self.lab, name)?.id],
            Target::Node(name) => lookup::node(&self.lab, name)?.links.clone(),
        })
    }

    /// Records that `target` failed (`up == false`) or came back; returns
    /// its links.
    fn record(&mut self, target: &Target, up: bool) -> Result<Vec<LinkId>> {
        let links = self.links_of(target)?;
        match target {
            Target::Node(name) => {
                let id = lookup::node(&self.lab, name)?.id;
                if up {
                    self.failures.nodes.remove(&id);
                } else {
                    self.failures.nodes.insert(id);
                }
            }
            Target::Link(_) => {
                for id in &links {
                    if up {
                        self.failures.links.remove(id);
                    } else {
                        self.failures.links.insert(*id);
                    }
                }
            }
        }
        Ok(links)
    }

    /// Takes `target` down (`up == false`) or brings it back, reroutes as
    /// the routing mode does, and tells the agents.
    async fn set_state(&mut self, target: &Target, up: bool) -> Result<String> {
        let lab = self.lab.clone();
        let blocked = |failures: &Failures| -> BTreeSet<LinkId> {
            lab.fabric
                .links
                .iter()
                .filter(|l| failures.blocks(l))
                .map(|l| l.id)
                .collect()
        };
        let before = blocked(&self.failures);
        let links = self.record(target, up)?;
        let after = blocked(&self.failures);
        self.routes = self.compute_routes().await?;
        let applied = self.apply().await?;
        // The ports whose state changed, for the agents.
        let changed: Vec<(NodeId, String, bool)> = before
            .symmetric_difference(&after)
            .flat_map(|&id| {
                let link: &Link = lab.fabric.link(id);
                let now_up = !after.contains(&id);
                link.ends
                    .iter()
                    .map(move |e| (e.node, e.ifname.clone(), now_up))
            })
            .collect();
        if let Some(agents) = &self.agents {
            agents.ports_changed(&changed, &self.failures).await;
        }
        let mut message = format!(
            "{} {target}: {} link(s) {}",
            if up { "restored" } else { "failed" },
            links.len(),
            if up { "up" } else { "down" }
        );
        message.push_str(&routing_summary(self.source.mode(), &applied));
        Ok(message)
    }

    /// Checks and records a flap; returns its id and half period.
    fn register_flap(
        &mut self,
        link: &str,
        period: Delay,
        count: u32,
        at: f64,
    ) -> Result<(u64, Duration)> {
        if period.as_nanos() == 0 || count == 0 {
            return Err(Error::Invalid(
                "a flap needs a period above 0 and at least one cycle".to_owned(),
            ));
        }
        let link = lookup::link(&self.lab, link)?.id;
        let half = Duration::from_nanos(period.as_nanos() / 2);
        let id = self.next_flap;
        self.next_flap += 1;
        self.flaps.insert(
            id,
            Flap {
                link,
                half,
                ticks: count * 2,
                due: at,
            },
        );
        Ok((id, half))
    }

    /// Starts flapping a link: its first tick (down) comes at once.
    fn start_flap(&mut self, link: &str, period: Delay, count: u32) -> Result<String> {
        let (id, half) = self.register_flap(link, period, count, unix_now())?;
        self.schedule_tick(id, true, Duration::ZERO);
        let name = &self.lab.fabric.link(self.flaps[&id].link).name;
        Ok(format!(
            "flapping {name}: {count} cycle(s) of {period} (down {half:?}, up {half:?})"
        ))
    }

    /// Sends flap `flap`'s next tick into the queue after `after`.
    fn schedule_tick(&self, flap: u64, down: bool, after: Duration) {
        let queue = self.queue.clone();
        let link = self
            .flaps
            .get(&flap)
            .map_or_else(String::new, |f| self.lab.fabric.link(f.link).name.clone());
        tokio::task::spawn_local(async move {
            tokio::time::sleep(after).await;
            let _ = queue.send(Envelope {
                source: Source::Flap,
                command: Command::FlapTick { flap, link, down },
                reply: None,
            });
        });
    }

    /// One tick of a flap: the link down or up, and the next tick.
    async fn flap_tick(&mut self, flap: u64, down: bool) -> Result<String> {
        let Some(f) = self.flaps.get_mut(&flap) else {
            return Err(Error::Invalid(format!("no flap {flap} is running")));
        };
        f.ticks = f.ticks.saturating_sub(1);
        f.due = unix_now() + f.half.as_secs_f64();
        let (link, half, left) = (f.link, f.half, f.ticks);
        if left == 0 {
            self.flaps.remove(&flap);
        } else {
            self.schedule_tick(flap, !down, half);
        }
        let target = Target::Link(self.lab.fabric.link(link).name.clone());
        self.set_state(&target, !down).await
    }
}

/// What a `fail` or `restore` that changed `applied` did to routing under
/// `mode`, for its message (`; ...`, or nothing).
fn routing_summary(mode: RoutingMode, applied: &Applied) -> String {
    let mut text = match mode {
        RoutingMode::Bgp => "; BGP re-converges (`turbonet show bgp`)".to_owned(),
        RoutingMode::Controller if applied.entities == 0 => format!(
            "; the controller changed {} route(s) across the fabric",
            applied.routes
        ),
        RoutingMode::Static if applied.routes > 0 => {
            "; routes through it adjusted at its ends".to_owned()
        }
        RoutingMode::Controller | RoutingMode::Static | RoutingMode::Manual => String::new(),
    };
    if applied.entities > 0 {
        text.push_str(&format!(
            "; {} entries of the switch rewritten",
            applied.entities
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use futures::future::LocalBoxFuture;
    use tokio::sync::oneshot;
    use turbonet_topo::Link;

    use super::*;
    use crate::dataplane::plane::LinkCounters;
    use crate::state::LabDir;

    /// What a data plane was told to be, each time.
    type Applies = Rc<RefCell<Vec<(Failures, Vec<LinkParams>, Vec<Vec<Route>>)>>>;

    /// A data plane that records every state it is told to bring the
    /// fabric to, taking a few turns of the event loop each time (as
    /// netlink round trips do), so that other requests arrive meanwhile.
    struct Recording(Applies);

    impl DataPlane for Recording {
        fn describe(&self) -> String {
            "recording".to_owned()
        }

        fn check_params(&self, _: &Link, _: &LinkParams) -> Result<()> {
            Ok(())
        }

        fn apply<'a>(&'a mut self, desired: Desired<'a>) -> LocalBoxFuture<'a, Result<Applied>> {
            let state = (
                desired.failures.clone(),
                desired.params.to_vec(),
                desired.routes.to_vec(),
            );
            Box::pin(async move {
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                self.0.borrow_mut().push(state);
                Ok(Applied::default())
            })
        }

        fn counters(&mut self) -> LocalBoxFuture<'_, Result<Vec<LinkCounters>>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    fn lab() -> Arc<Lab> {
        Arc::new(
            turbonet_topo::parse(
                "t.toml",
                "[lab]\nname = \"t\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n\
                 [routing]\nmode = \"controller\"\n",
            )
            .unwrap(),
        )
    }

    /// A scratch lab directory (events and input log), removed on drop.
    struct Scratch(std::path::PathBuf, LabDir);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let root =
                std::env::temp_dir().join(format!("tn-actor-test-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            let dir = LabDir::new(&root, "t");
            dir.claim().unwrap();
            Scratch(root, dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// An actor over a [`Recording`] plane, its queue, and what the plane
    /// saw.
    fn actor(lab: &Arc<Lab>, dir: &LabDir) -> (Actor, mpsc::UnboundedReceiver<Envelope>, Applies) {
        let applies = Applies::default();
        let source = crate::routes::for_lab(lab.clone());
        let intact = {
            let source = source.clone();
            tokio::task::spawn_blocking(move || source.routes(&Failures::default()))
        };
        let (queue, commands) = mpsc::unbounded_channel();
        let actor = Actor::new(
            lab.clone(),
            Box::new(Recording(applies.clone())),
            source,
            None,
            StartRoutes::Computing {
                routes: intact,
                installed: true,
            },
            InputLog::open(dir, 0).unwrap(),
            Events::open(dir, crate::events::unix_now()).unwrap(),
            queue,
        );
        (actor, commands, applies)
    }

    fn fail(target: Target) -> Command {
        Command::Fail { target }
    }

    fn restore(target: Target) -> Command {
        Command::Restore { target }
    }

    fn link(name: &str) -> Target {
        Target::Link(name.to_owned())
    }

    /// Requests sent all at once by many clients: each runs to completion
    /// before the next starts, so what the fabric ends with is exactly the
    /// routes of what is down at the end, and the same commands applied one
    /// by one (in the order the input log recorded) end in the same state.
    #[test]
    fn concurrent_requests_end_as_the_same_requests_one_by_one() {
        let lab = lab();
        let scratch = Scratch::new("concurrent");
        let requests = vec![
            fail(link("edge0-0--agg0-0")),
            fail(Target::Node("core0".to_owned())),
            Command::Flap {
                link: "agg1-0--core1".to_owned(),
                period_ns: 20_000_000,
                count: 2,
            },
            restore(link("edge0-0--agg0-0")),
            fail(link("edge1-1--agg1-1")),
            Command::SetLink {
                link: "edge2-0--agg2-0".to_owned(),
                params: LinkParams {
                    delay: Some(Delay::from_millis(3)),
                    ..LinkParams::default()
                },
            },
            fail(link("agg3-0--core0")),
            restore(Target::Node("core0".to_owned())),
            fail(link("edge0-0--agg0-1")),
            restore(link("edge1-1--agg1-1")),
            fail(Target::Node("agg2-1".to_owned())),
        ];
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let (concurrent, final_failures, final_params) = local.block_on(&runtime, async {
            let (mut actor, mut commands, applies) = actor(&lab, &scratch.1);
            // Every client at once, each waiting for its answer.
            let answered = Rc::new(std::cell::Cell::new(0));
            for command in requests.iter().cloned() {
                let (queue, answered) = (actor.queue.clone(), answered.clone());
                tokio::task::spawn_local(async move {
                    let (reply, answer) = oneshot::channel();
                    queue
                        .send(Envelope {
                            source: Source::Api,
                            command,
                            reply: Some(reply),
                        })
                        .unwrap();
                    answer.await.unwrap().unwrap();
                    answered.set(answered.get() + 1);
                });
            }
            // The actor's loop, until every client has its answer and the
            // flap's four ticks (on the actor's own timers) ran: one pass
            // over the fabric each (starting the flap changes nothing yet).
            let passes = requests.len() - 1 + 4;
            while answered.get() < requests.len() || applies.borrow().len() < passes {
                let envelope = tokio::time::timeout(Duration::from_secs(10), commands.recv())
                    .await
                    .expect("a command within 10 s")
                    .unwrap();
                actor.handle(envelope).await;
                tokio::task::yield_now().await;
            }
            let last = applies.borrow().last().cloned().unwrap();
            (last, actor.failures.clone(), actor.params.clone())
        });
        // The fabric ends with the routes of what is down at the end.
        assert_eq!(concurrent.0, final_failures);
        assert_eq!(concurrent.1, final_params);
        let source = crate::routes::for_lab(lab.clone());
        assert_eq!(concurrent.2, source.routes(&final_failures));

        // The same commands, one by one in the logged order, on a fresh
        // actor, end the same.
        let logged = super::super::inputs::read(&scratch.1).unwrap();
        assert_eq!(logged.len(), requests.len() + 4, "{logged:?}");
        let other = Scratch::new("sequential");
        let sequential = local.block_on(&runtime, async {
            let (mut actor, mut commands, applies) = actor(&lab, &other.1);
            // Flap ticks are the flap's own: it schedules them again.
            for entry in logged
                .iter()
                .filter(|e| !matches!(e.command, Command::FlapTick { .. }))
            {
                let (reply, answer) = oneshot::channel();
                actor
                    .handle(Envelope {
                        source: entry.source,
                        command: entry.command.clone(),
                        reply: Some(reply),
                    })
                    .await;
                assert_eq!(answer.await.unwrap().is_ok(), entry.ok, "{entry:?}");
            }
            while !actor.flaps.is_empty() {
                let tick = tokio::time::timeout(Duration::from_secs(10), commands.recv())
                    .await
                    .expect("a flap tick within 10 s")
                    .unwrap();
                actor.handle(tick).await;
            }
            let last = applies.borrow().last().cloned().unwrap();
            (last, actor.failures.clone(), actor.params.clone())
        });
        assert_eq!(sequential.0, concurrent);
        assert_eq!(sequential.1, final_failures);
        assert_eq!(sequential.2, final_params);
    }

    /// A restarted daemon's actor replays the input log: it ends in the
    /// state the log's commands left, in one pass over the fabric, and a
    /// flap in progress carries on.
    #[test]
    fn a_replayed_input_log_rebuilds_the_state_in_one_pass() {
        let lab = lab();
        let scratch = Scratch::new("replay");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let before = local.block_on(&runtime, async {
            let (mut actor, _commands, _) = actor(&lab, &scratch.1);
            for command in [
                fail(link("edge0-0--agg0-0")),
                Command::SetLink {
                    link: "edge2-0--agg2-0".to_owned(),
                    params: LinkParams {
                        loss: Some("1%".parse().unwrap()),
                        ..LinkParams::default()
                    },
                },
                fail(Target::Node("core3".to_owned())),
                // Refused: changes nothing, replays as nothing.
                fail(link("no-such--link")),
                restore(link("edge0-0--agg0-0")),
                Command::Flap {
                    link: "agg1-0--core1".to_owned(),
                    period_ns: 60_000_000_000,
                    count: 1,
                },
            ] {
                actor
                    .handle(Envelope {
                        source: Source::Api,
                        command,
                        reply: None,
                    })
                    .await;
            }
            (
                actor.failures.clone(),
                actor.params.clone(),
                actor.routes.clone(),
            )
        });
        let logged = super::super::inputs::read(&scratch.1).unwrap();
        assert_eq!(logged.iter().filter(|e| !e.ok).count(), 1, "{logged:?}");
        let again = Scratch::new("replayed");
        local.block_on(&runtime, async {
            let (mut actor, mut commands, applies) = actor(&lab, &again.1);
            actor.replay(&logged).await.unwrap();
            assert_eq!(applies.borrow().len(), 1, "one pass over the fabric");
            assert_eq!(actor.params, before.1);
            assert_eq!(actor.routes, before.2);
            // The flap's first tick (down) had not come: it comes now.
            assert_eq!(actor.failures, before.0);
            assert_eq!(actor.flaps.len(), 1);
            let tick = tokio::time::timeout(Duration::from_secs(5), commands.recv())
                .await
                .expect("the flap goes on")
                .unwrap();
            assert!(
                matches!(tick.command, Command::FlapTick { down: true, .. }),
                "{tick:?}"
            );
        });
    }
}
