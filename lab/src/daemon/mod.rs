//! The per-lab daemon: the same binary, detached (`turbonet daemon LAB`).
//! It owns what must keep running after `up` returns: the userspace link
//! engine, the BGP agents, the timeline, and on the `soft` target the
//! primary P4Runtime session with the soft switch. `up` starts it and
//! waits until it is ready; `down` stops it before removing the
//! namespaces.

use std::fs;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::collections::{BTreeMap, HashMap};

use crate::bail;
use crate::err;
use crate::error::{Context, Result};
use rtnetlink::LinkUnspec;
use turbonet_injectors::{Direction, Impairment, direction_seed};
use turbonet_routing::{Route, RouteOrigin};
use turbonet_topo::units::Delay;
use turbonet_topo::{Action, EventTarget, Lab, Link, LinkParams, NodeId};

use crate::api::{self, Request, Response, Target};
use crate::dataplane::netns::engine::{self, EngineLink, LinkCounters};
use crate::dataplane::p4::control::P4Lab;
use crate::dataplane::p4::entries::FabricState;
use crate::events::EventLog;
use crate::routes::bgp::Agents;
use crate::routes::bgp::fib::PipelineRoutes;
use crate::state::{LabDir, LabState};
use crate::system::namespaces;
use turbonet_packetio::PacketSocket;

fn ready_path(dir: &LabDir) -> PathBuf {
    dir.path().join("daemon.ready")
}

/// Where the daemon publishes link counters (read by `link show`).
pub fn counters_path(dir: &LabDir) -> PathBuf {
    dir.path().join("engine.json")
}

/// Starts the daemon of `lab`, detached (new session, output to
/// `daemon.log` in the lab directory), and returns its pid.
pub fn spawn(lab: &str, dir: &LabDir) -> Result<u32> {
    let child = crate::system::process::spawn_self(
        &["daemon".as_ref(), lab.as_ref()],
        &dir.path().join("daemon.log"),
    )
    .context("starting the lab daemon")?;
    Ok(child.id())
}

/// Waits until the daemon reports ready, failing early if it dies.
pub fn wait_ready(dir: &LabDir, pid: u32, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready_path(dir).exists() {
            return Ok(());
        }
        if !crate::system::process::turbonet_alive(pid) {
            let log = fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
            bail!(
                "the lab daemon exited before it was ready:\n{}",
                log.trim_end()
            );
        }
        if Instant::now() >= deadline {
            bail!("the lab daemon was not ready after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Stops the daemon recorded in `state`: SIGTERM, then SIGKILL if it has
/// not exited within 5 s. A daemon that is gone already is fine.
pub fn stop(state: &LabState) {
    if let Some(pid) = state.daemon_pid {
        crate::system::process::stop(&[(pid, "turbonet")], Duration::from_secs(5));
    }
}

/// Everything the daemon's tasks share.
struct Daemon {
    lab: Lab,
    dir: LabDir,
    /// The static routes, computed on the first restore (a k=16 fat-tree
    /// has 145,000 of them: no reason to hold them while nothing fails).
    routes: std::sync::OnceLock<Vec<Vec<Route>>>,
    /// Controller mode: what is down, and the routes installed around it.
    failures: Mutex<turbonet_routing::Failures>,
    installed: Mutex<Option<Vec<Vec<Route>>>>,
    /// Engine position of every impaired link, by name.
    engine_links: HashMap<String, usize>,
    /// Parameters `link set` changed, by link (the others run with the
    /// scenario's).
    current: Mutex<HashMap<String, LinkParams>>,
    /// How each link is carried (indexed by link id).
    carriers: Vec<crate::dataplane::Carrier>,
    control: Option<engine::Control>,
    snapshot: engine::Snapshot,
    log: EventLog,
    /// BGP mode: the built-in agents (started on the event loop).
    agents: std::cell::OnceCell<Agents>,
    /// P4 targets: the controller's hold on each switch (connected on the
    /// event loop).
    p4: std::cell::OnceCell<tokio::sync::Mutex<Vec<P4Lab>>>,
    /// BGP on a P4 target: the routes the built-in agents hold, which the
    /// controller writes to the pipeline.
    pipeline_routes: Option<Rc<PipelineRoutes>>,
}

impl Daemon {
    fn log(&self, source: &str, event: &str, result: &Result<String>) {
        let error = result.as_ref().err().map(|e| format!("{e:#}"));
        self.log.write(source, event, error.as_deref());
    }

    /// Executes a request from the CLI and logs it.
    async fn execute(self: &Rc<Self>, source: &str, request: Request) -> Response {
        let event = describe(&request);
        let result = match request {
            // A question, not an event: answered, not logged.
            Request::Bgp { node } => return self.bgp_report(node.as_deref()).await,
            Request::LinkSet { link, params } => match api::parse_patch(&params) {
                Ok(patch) => self.link_set(&link, Some(&patch)).await,
                Err(e) => Err(crate::Error::from(e)),
            },
            Request::LinkReset { link } => self.link_set(&link, None).await,
            Request::Fail { target } => self.set_state(&target, false).await,
            Request::Restore { target } => self.set_state(&target, true).await,
            Request::Flap {
                link,
                period,
                count,
            } => match period.parse::<Delay>() {
                Ok(period) => self.flap(source, &link, period, count),
                Err(e) => Err(err!("--period {period}: {e}")),
            },
        };
        self.log(source, &event, &result);
        match result {
            Ok(message) => Response::Ok { message },
            Err(e) => Response::Error {
                message: format!("{e:#}"),
            },
        }
    }

    /// Runs the scenario's timeline: each event at its time after the
    /// fabric was ready.
    async fn run_timeline(self: Rc<Self>) {
        for event in &self.lab.timeline {
            let due = self.log.ready() + event.at.as_duration();
            tokio::time::sleep_until(due.into()).await;
            let fabric = &self.lab.fabric;
            let target = |t: &EventTarget| match t {
                EventTarget::Link(l) => Target::Link(fabric.link(*l).name.clone()),
                EventTarget::Node(n) => Target::Node(fabric.node(*n).name.clone()),
            };
            let result = match &event.action {
                Action::Set { link, params } => {
                    self.link_set(&fabric.link(*link).name, Some(params)).await
                }
                Action::Reset { link } => self.link_set(&fabric.link(*link).name, None).await,
                Action::Fail(t) => self.set_state(&target(t), false).await,
                Action::Restore(t) => self.set_state(&target(t), true).await,
                Action::Flap {
                    link,
                    period,
                    count,
                } => self.flap("timeline", &fabric.link(*link).name, *period, *count),
            };
            self.log(
                "timeline",
                &event.action.display(fabric).to_string(),
                &result,
            );
        }
    }

    /// A link by name; `b--a` finds `a--b`.
    fn find_link(&self, name: &str) -> Result<&Link> {
        crate::lookup::link(&self.lab, name)
    }

    /// Every link's parameters now: the scenario's, or what `link set`
    /// made them, by link id.
    fn params(&self) -> Result<Vec<LinkParams>> {
        let current = self.current.lock().map_err(|_| err!("state poisoned"))?;
        Ok(self
            .lab
            .fabric
            .links
            .iter()
            .map(|l| current.get(&l.name).unwrap_or(&l.params).clone())
            .collect())
    }

    /// The routes a P4 target's virtual switches forward by around
    /// `failures`: the controller's or static routing's, or with BGP the
    /// agents' (see [`crate::dataplane::p4::control::lab_routes`]).
    fn p4_routes(&self, failures: &turbonet_routing::Failures) -> Vec<Vec<Route>> {
        let agents = self
            .pipeline_routes
            .as_ref()
            .map(|table| table.routes())
            .unwrap_or_default();
        crate::dataplane::p4::control::lab_routes(&self.lab, failures, &agents)
    }

    /// What to say when writing to switch `name` failed: on `soft`, whether
    /// the soft switch is still running, and where its log is.
    fn switch_gone(&self, name: &str) -> String {
        if self.lab.target != turbonet_topo::Target::Soft {
            return format!("switch {name} (is its P4Runtime server still up?)");
        }
        let pid = self
            .dir
            .load()
            .ok()
            .flatten()
            .and_then(|st| st.routers.iter().find(|r| r.node == name).map(|r| r.pid));
        match pid {
            Some(pid) if !crate::system::process::alive(pid, "turbonet") => format!(
                "the soft switch (pid {pid}) is no longer running (its log: {}); `turbonet down \
                 {lab}` and `up` again",
                self.dir.path().join("softswitch.log").display(),
                lab = self.lab.name
            ),
            _ => format!("the soft switch of lab {}", self.lab.name),
        }
    }

    /// Writes what the switches must hold now; returns how many entities
    /// changed.
    async fn p4_sync(&self, p4: &tokio::sync::Mutex<Vec<P4Lab>>) -> Result<usize> {
        let params = self.params()?;
        self.p4_write(&mut p4.lock().await, &params).await
    }

    /// Writes what `switches` must hold with links of `params`, around what
    /// is down; returns how many entities changed.
    async fn p4_write(&self, switches: &mut [P4Lab], params: &[LinkParams]) -> Result<usize> {
        let failures = self
            .failures
            .lock()
            .map_err(|_| err!("state poisoned"))?
            .clone();
        let routes = self.p4_routes(&failures);
        let state = FabricState {
            routes: &routes,
            params,
            failures: &failures,
        };
        let mut changed = 0;
        for sw in switches.iter_mut() {
            changed += sw
                .update(&self.lab, state)
                .await
                .with_context(|| self.switch_gone(&sw.switch))?
                .total();
        }
        Ok(changed)
    }

    /// BGP on a P4 target: writes the agents' routes to the switch each
    /// time they change (changes that arrive meanwhile go in one pass),
    /// and tells the agents when they are in.
    async fn write_agent_routes(self: Rc<Self>, table: Rc<PipelineRoutes>) {
        loop {
            table.changed().await;
            // Let the other agents' changes of this burst arrive.
            tokio::time::sleep(Duration::from_millis(2)).await;
            let change = table.latest();
            if let Some(p4) = self.p4.get()
                && let Err(e) = self.p4_sync(p4).await
            {
                self.log.write(
                    "bgp",
                    "writing routes to the switch",
                    Some(&format!("{e:#}")),
                );
            }
            table.written(change);
        }
    }

    /// `link set` on a P4 target: the queue mapper's delay and loss, and
    /// (through the device config) the queue's rate.
    async fn p4_link_set(
        &self,
        p4: &tokio::sync::Mutex<Vec<P4Lab>>,
        link: &Link,
        params: LinkParams,
    ) -> Result<()> {
        if let Some(what) = crate::dataplane::p4::soft::pipeline_lacks(&params) {
            bail!(
                "the turbonet pipeline has no {what}; on target \"{}\" a link takes rate, delay, \
                 loss (independent), queue and mtu",
                self.lab.target
            );
        }
        let old = self.params()?;
        let mut new = old.clone();
        new[link.id.0 as usize] = params;
        let mut p4 = p4.lock().await;
        let (before, after) = (&old[link.id.0 as usize], &new[link.id.0 as usize]);
        if (before.rate, before.queue) != (after.rate, after.queue) {
            // Rates live in the traffic manager, outside P4Runtime: the soft
            // switch takes them in its device config.
            if self.lab.target != turbonet_topo::Target::Soft {
                bail!(
                    "a link's rate and queue are the switch's traffic manager's (BMv2: \
                     set_queue_rate; Tofino: its port shaping), not P4Runtime's; turbonet \
                     changes them on target \"soft\" only (delay and loss work here)"
                );
            }
            for sw in p4.iter_mut() {
                let config =
                    crate::dataplane::p4::soft::device_config(&self.lab, &sw.mapping, &new)
                        .to_bytes();
                sw.session.set_device_config(config).await?;
            }
        }
        self.p4_write(&mut p4, &new).await?;
        Ok(())
    }

    /// `link set` (with a patch) or `link reset` (without).
    async fn link_set(&self, name: &str, patch: Option<&LinkParams>) -> Result<String> {
        let link = self.find_link(name)?;
        let name = link.name.as_str();
        let carrier = &self.carriers[link.id.0 as usize];
        if *carrier == crate::dataplane::Carrier::Veth {
            bail!(
                "link {name} is a plain veth: only links that declare an impairment in the scenario \
                 run through an impairment engine and can change at run time"
            );
        }
        let params = match patch {
            Some(patch) => {
                let current = self.current.lock().map_err(|_| err!("state poisoned"))?;
                let merged = current.get(name).unwrap_or(&link.params).merged(patch);
                merged
                    .check()
                    .map_err(|problems| err!("{}", problems.join("; ")))?;
                merged
            }
            None => link.params.clone(),
        };
        let impairment = Impairment::from_params(&params);
        match carrier {
            crate::dataplane::Carrier::Pipeline => {
                let p4 = self
                    .p4
                    .get()
                    .ok_or_else(|| err!("the daemon is not connected to the switch"))?;
                self.p4_link_set(p4, link, params.clone()).await?;
            }
            crate::dataplane::Carrier::Kernel => {
                crate::kernel::netem::netem_supports(&impairment).map_err(|e| {
                    err!(
                        "{e}; link {name} runs on the kernel engine (engine = \"userspace\" in the \
                         scenario would splice it through the userspace engine instead)"
                    )
                })?;
                for (direction, end) in link.ends.iter().enumerate() {
                    let ns_name = crate::names::node_namespace(
                        &self.lab.name,
                        &self.lab.fabric.node(end.node).name,
                    );
                    let ns =
                        namespaces::open(&ns_name).with_context(|| format!("opening {ns_name}"))?;
                    let index = crate::names::port_index(&self.lab, end.node, link.id)
                        .expect("link's end is a port");
                    let seed = direction_seed(self.lab.seed, name, direction as u8);
                    crate::kernel::netem::apply(&ns, index, &impairment, seed)
                        .with_context(|| format!("netem on {} in {ns_name}", end.ifname))?;
                }
            }
            _ => {
                let (Some(&position), Some(control)) = (self.engine_links.get(name), &self.control)
                else {
                    bail!("link {name} is not in the link engine");
                };
                control.send(engine::Command::Set {
                    link: position,
                    impairment,
                })?;
            }
        }
        let summary = if params.is_empty() {
            "no impairment".to_owned()
        } else {
            params.to_string()
        };
        self.current
            .lock()
            .map_err(|_| err!("state poisoned"))?
            .insert(name.to_owned(), params);
        Ok(format!("{name}: {summary}"))
    }

    /// Takes links down (`up == false`) or brings them back and reinstalls
    /// the routes of the nodes at their ends.
    async fn set_state(&self, target: &Target, up: bool) -> Result<String> {
        let fabric = &self.lab.fabric;
        let links: Vec<&Link> = match target {
            Target::Link(name) => vec![self.find_link(name)?],
            Target::Node(name) => {
                let node = crate::lookup::node(&self.lab, name)?;
                node.links.iter().map(|&l| fabric.link(l)).collect()
            }
        };
        let failures = self.record_failure(&links, target, up)?;
        let p4 = self.p4.get();
        if let Some(p4) = p4 {
            let changed = self.p4_sync(p4).await?;
            if self.agents.get().is_none() {
                return Ok(format!(
                    "{} {}: {} link(s) {}; {changed} entries of the switch rewritten",
                    if up { "restored" } else { "failed" },
                    target,
                    links.len(),
                    if up { "up" } else { "down" },
                ));
            }
        }
        // Per node, its ports on those links: ifindex and interface name.
        let mut ports: BTreeMap<NodeId, Vec<(u32, &str)>> = BTreeMap::new();
        for link in &links {
            for end in &link.ends {
                let index = crate::names::port_index(&self.lab, end.node, link.id)
                    .expect("link's end is a port");
                ports
                    .entry(end.node)
                    .or_default()
                    .push((index, end.ifname.as_str()));
            }
        }
        // On a P4 target the pipeline cut the links (above).
        if p4.is_none() {
            for (&node, indices) in &ports {
                let handle = node_handle(&self.lab, node)?;
                for &(index, _) in indices {
                    let message = if up {
                        LinkUnspec::new_with_index(index).up().build()
                    } else {
                        LinkUnspec::new_with_index(index).down().build()
                    };
                    handle.link().set(message).execute().await?;
                }
                if up && !self.controller() {
                    // Taking a port down flushed the routes through it. With
                    // BGP, only those `up` installed (host ports, externals).
                    let n = fabric.node(node);
                    let routes = self
                        .routes
                        .get_or_init(|| turbonet_routing::static_routes(&self.lab.fabric));
                    let mut routes: Vec<Route> = routes[node.0 as usize]
                        .iter()
                        .filter(|r| !self.bgp() || r.origin != RouteOrigin::Fabric)
                        .cloned()
                        .collect();
                    // Not through a port that is still down.
                    failures.prune(fabric, node, &mut routes);
                    crate::kernel::routes::install_node_routes(
                        &self.lab, &handle, n, &routes, true,
                    )
                    .await?;
                }
            }
        }
        if let Some(agents) = self.agents.get() {
            let epoch = Instant::now();
            for (&node, node_ports) in &ports {
                for &(_, ifname) in node_ports {
                    agents.port_changed(node, ifname, up);
                }
            }
            let speakers = agents.speakers().to_vec();
            // Off the event loop: the agents are converging meanwhile.
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                let _ = tx.send(crate::routes::bgp::digests(&speakers, &failures));
            });
            agents.expect(rx.await?, epoch);
            return Ok(format!(
                "{} {}: {} link(s) {}; BGP re-converges (`turbonet show bgp`)",
                if up { "restored" } else { "failed" },
                target,
                links.len(),
                if up { "up" } else { "down" }
            ));
        }
        if self.controller() {
            let changed = self.recompute(&failures).await?;
            return Ok(format!(
                "{} {}: {} link(s) {}; the controller changed {changed} route(s) across the fabric",
                if up { "restored" } else { "failed" },
                target,
                links.len(),
                if up { "up" } else { "down" }
            ));
        }
        Ok(format!(
            "{} {}: {} link(s) {}",
            if up { "restored" } else { "failed" },
            target,
            links.len(),
            if up { "up, routes reinstalled" } else { "down" }
        ))
    }

    /// True in `routing.mode = "bgp"`.
    fn bgp(&self) -> bool {
        self.lab.routing.mode == turbonet_topo::RoutingMode::Bgp
    }

    /// `show bgp [NODE]`.
    async fn bgp_report(&self, node: Option<&str>) -> Response {
        let Some(agents) = self.agents.get() else {
            return Response::Error {
                message: format!(
                    "lab {} runs routing mode \"{}\", not BGP",
                    self.lab.name, self.lab.routing.mode
                ),
            };
        };
        let id = match node {
            None => None,
            Some(name) => match self.lab.fabric.node_by_name(name) {
                Some(n) if n.role.is_switch() => Some(n.id),
                Some(_) => {
                    return Response::Error {
                        message: format!("{name} is a host: hosts run no BGP"),
                    };
                }
                None => {
                    return Response::Error {
                        message: crate::lookup::node(&self.lab, name)
                            .err()
                            .map(|e| e.to_string())
                            .unwrap_or_default(),
                    };
                }
            },
        };
        Response::Bgp {
            report: agents.report(id).await,
        }
    }

    /// Records that `links` (or the node `target`) failed or came back,
    /// and returns everything that is down now.
    fn record_failure(
        &self,
        links: &[&Link],
        target: &Target,
        up: bool,
    ) -> Result<turbonet_routing::Failures> {
        let mut failures = self.failures.lock().map_err(|_| err!("state poisoned"))?;
        match target {
            Target::Node(name) => {
                let id = self
                    .lab
                    .fabric
                    .node_by_name(name)
                    .expect("checked by set_state")
                    .id;
                if up {
                    failures.nodes.remove(&id);
                } else {
                    failures.nodes.insert(id);
                }
            }
            Target::Link(_) => {
                for link in links {
                    if up {
                        failures.links.remove(&link.id);
                    } else {
                        failures.links.insert(link.id);
                    }
                }
            }
        }
        Ok(failures.clone())
    }

    /// True in `routing.mode = "controller"`.
    fn controller(&self) -> bool {
        self.lab.routing.mode == turbonet_topo::RoutingMode::Controller
    }

    /// The central controller: computes the whole fabric's routes around
    /// `failures` and pushes the difference to every node whose routes
    /// changed.
    async fn recompute(&self, failures: &turbonet_routing::Failures) -> Result<usize> {
        let new = turbonet_routing::routes_avoiding(&self.lab.fabric, failures);
        // Before the first failure, the routes `up` installed.
        let old = self
            .installed
            .lock()
            .map_err(|_| err!("state poisoned"))?
            .take()
            .unwrap_or_else(|| turbonet_routing::static_routes(&self.lab.fabric));
        let mut changed = 0;
        for node in &self.lab.fabric.nodes {
            let (before, after) = (&old[node.id.0 as usize], &new[node.id.0 as usize]);
            if before == after {
                continue;
            }
            let gone: Vec<ipnet::Ipv4Net> = before
                .iter()
                .filter(|r| !after.iter().any(|n| n.prefix == r.prefix))
                .map(|r| r.prefix)
                .collect();
            let updated: Vec<Route> = after
                .iter()
                .filter(|r| !before.contains(r))
                .cloned()
                .collect();
            let handle = node_handle(&self.lab, node.id)?;
            for prefix in &gone {
                crate::kernel::delete_route(&handle, *prefix).await?;
            }
            crate::kernel::routes::install_node_routes(&self.lab, &handle, node, &updated, true)
                .await?;
            changed += gone.len() + updated.len();
        }
        *self.installed.lock().map_err(|_| err!("state poisoned"))? = Some(new);
        Ok(changed)
    }

    /// Starts flapping a link in the background.
    fn flap(
        self: &Rc<Self>,
        source: &str,
        link: &str,
        period: Delay,
        count: u32,
    ) -> Result<String> {
        if period.as_nanos() == 0 || count == 0 {
            bail!("a flap needs a period above 0 and at least one cycle");
        }
        let link = self.find_link(link)?.name.as_str();
        let half = Duration::from_nanos(period.as_nanos() / 2);
        let daemon = self.clone();
        let target = Target::Link(link.to_owned());
        let source = source.to_owned();
        tokio::task::spawn_local(async move {
            for _ in 0..count {
                let r = daemon.set_state(&target, false).await;
                daemon.log(&source, &format!("flap: fail {target}"), &r);
                tokio::time::sleep(half).await;
                let r = daemon.set_state(&target, true).await;
                daemon.log(&source, &format!("flap: restore {target}"), &r);
                tokio::time::sleep(half).await;
            }
        });
        Ok(format!(
            "flapping {link}: {count} cycle(s) of {period} (down {half:?}, up {half:?})"
        ))
    }
}

/// An rtnetlink handle inside a node's namespace.
fn node_handle(lab: &Lab, node: NodeId) -> Result<rtnetlink::Handle> {
    let name = crate::names::node_namespace(&lab.name, &lab.fabric.node(node).name);
    let ns = namespaces::open(&name).with_context(|| format!("opening {name}"))?;
    let socket = namespaces::in_namespace(&ns, namespaces::route_socket)?;
    crate::kernel::connect(socket)
}

/// A request as a log line.
fn describe(request: &Request) -> String {
    match request {
        Request::LinkSet { link, params } => format!(
            "set {link} {}",
            params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Request::LinkReset { link } => format!("reset {link}"),
        Request::Bgp { node } => format!("show bgp {}", node.as_deref().unwrap_or("")),
        Request::Fail { target } => format!("fail {target}"),
        Request::Restore { target } => format!("restore {target}"),
        Request::Flap {
            link,
            period,
            count,
        } => format!("flap {link} period {period} x{count}"),
    }
}

/// `turbonet daemon LAB`: runs the lab's link engine and control API until
/// SIGTERM.
pub fn run(lab_name: &str) -> Result<()> {
    let dir = LabDir::of(lab_name);
    let lab = dir.saved_lab()?;
    let carriers = crate::dataplane::carrier::link_carriers(&lab);
    let impaired: Vec<&Link> = lab
        .fabric
        .links
        .iter()
        .zip(&carriers)
        .filter(|(_, c)| c.is_userspace())
        .map(|(l, _)| l)
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let snapshot: engine::Snapshot = Arc::new(Mutex::new(Vec::new()));
    let mut engine_thread = None;
    let mut control_end = None;
    if !impaired.is_empty() {
        let ns = namespaces::open(&crate::names::engine_namespace(lab_name))
            .context("opening the engine namespace")?;
        let sockets = namespaces::in_namespace(&ns, || {
            impaired
                .iter()
                .enumerate()
                .map(|(k, link)| {
                    let (_, a) = engine::port(link.id.0, k, 0);
                    let (_, b) = engine::port(link.id.0, k, 1);
                    Ok([PacketSocket::bind(a)?, PacketSocket::bind(b)?])
                })
                .collect::<std::io::Result<Vec<_>>>()
        })
        .context("opening packet sockets in the engine namespace")?;
        let links: Vec<EngineLink> = impaired
            .iter()
            .zip(sockets)
            .map(|(link, sockets)| EngineLink {
                name: link.name.clone(),
                sockets,
                directions: [0u8, 1].map(|d| {
                    Direction::new(
                        Impairment::from_params(&link.params),
                        direction_seed(lab.seed, &link.name, d),
                    )
                }),
            })
            .collect();
        let (control, inbox) = engine::channel()?;
        control_end = Some(control);
        let stop = stop.clone();
        let snapshot = snapshot.clone();
        engine_thread = Some(
            std::thread::Builder::new()
                .name("link-engine".into())
                .spawn(move || engine::run(links, &stop, &snapshot, &inbox))?,
        );
    }

    let daemon = Rc::new(Daemon {
        routes: std::sync::OnceLock::new(),
        failures: Mutex::new(turbonet_routing::Failures::default()),
        installed: Mutex::new(None),
        engine_links: impaired
            .iter()
            .enumerate()
            .map(|(k, l)| (l.name.clone(), k))
            .collect(),
        current: Mutex::new(HashMap::new()),
        carriers,
        control: control_end,
        snapshot: snapshot.clone(),
        log: EventLog::open(&dir)?,
        agents: std::cell::OnceCell::new(),
        p4: std::cell::OnceCell::new(),
        pipeline_routes: (lab.target != turbonet_topo::Target::Netns
            && lab.routing.mode == turbonet_topo::RoutingMode::Bgp)
            .then(|| PipelineRoutes::new(lab.fabric.nodes.len())),
        dir: dir.clone(),
        lab,
    });

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // A LocalSet: the daemon's tasks share one thread and need not be Send.
    let served = tokio::task::LocalSet::new().block_on(&runtime, serve(daemon.clone()));
    stop.store(true, Ordering::Relaxed);
    let engine_result = engine_thread.map(|t| t.join().expect("engine thread panicked"));
    write_counters(&counters_path(&dir), &snapshot);
    served?;
    if let Some(Err(e)) = engine_result {
        return Err(e).context("the link engine failed");
    }
    Ok(())
}

/// The daemon's event loop: control socket, counters, signals.
async fn serve(daemon: Rc<Daemon>) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let counters = counters_path(&daemon.dir);
    let path = api::socket_path(&daemon.dir);
    let _ = fs::remove_file(&path);
    let listener = tokio::net::UnixListener::bind(&path)
        .with_context(|| format!("binding {}", path.display()))?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let p4 = match daemon.lab.target {
        turbonet_topo::Target::Soft => Some(vec![connect_soft(&daemon.lab, &daemon.dir).await?]),
        turbonet_topo::Target::P4rt => Some(connect_p4rt(&daemon.lab, &daemon.dir).await?),
        turbonet_topo::Target::Netns => None,
    };
    if let Some(p4) = p4 {
        let _ = daemon.p4.set(tokio::sync::Mutex::new(p4));
    }
    if let (Some(p4), Some(table)) = (daemon.p4.get(), &daemon.pipeline_routes) {
        // The agents' traffic goes through the switch's CPU port.
        let mut switches = p4.lock().await;
        for sw in switches.iter_mut() {
            let cpu = crate::dataplane::p4::cpu::CpuPorts::open(
                &daemon.lab,
                &sw.mapping,
                &sw.switch,
                sw.session.pipeline(),
            )
            .await?;
            let io = sw
                .session
                .packet_io()
                .context("the switch's stream is taken")?;
            let log = daemon.log.clone();
            tokio::task::spawn_local(async move {
                if let Err(e) = cpu.run(io).await {
                    log.write("bgp", "CPU port", Some(&format!("{e:#}")));
                }
            });
        }
        tokio::task::spawn_local(daemon.clone().write_agent_routes(table.clone()));
    }
    if daemon.bgp() {
        let agents = Agents::start(
            &daemon.lab,
            daemon.log.clone(),
            daemon.pipeline_routes.as_ref(),
        )?;
        let _ = daemon.agents.set(agents);
        let planner = daemon.clone();
        tokio::task::spawn_local(async move {
            if let Some(agents) = planner.agents.get() {
                agents.plan_ready().await;
            }
        });
    }
    fs::write(ready_path(&daemon.dir), std::process::id().to_string())?;
    tokio::task::spawn_local(daemon.clone().run_timeline());
    tracing::info!(
        "turbonet daemon for lab {}: control API at {}, link engine running {} impaired link(s)",
        daemon.lab.name,
        path.display(),
        daemon.engine_links.len()
    );
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            _ = hangup.recv() => break,
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let daemon = daemon.clone();
                    tokio::task::spawn_local(async move { let _ = answer(daemon, stream).await; });
                }
            }
            _ = tick.tick() => {
                if let Some(p4) = daemon.p4.get() {
                    // Taken only if free: a rewrite in progress goes first.
                    if let Ok(mut p4) = p4.try_lock()
                        && let Ok(links) = p4_counters(&daemon.lab, &mut p4).await
                            && let Ok(mut s) = daemon.snapshot.lock() {
                                *s = links;
                            }
                }
                write_counters(&counters, &daemon.snapshot);
            }
        }
    }
    Ok(())
}

/// Takes over the lab's soft switch from `up`: primary under a higher
/// election id, with the entities `up` wrote.
async fn connect_soft(lab: &Lab, dir: &LabDir) -> Result<P4Lab> {
    use crate::dataplane::p4::{local as build, soft};
    use turbonet_p4::Client;
    let mapping = soft::map(lab).map_err(crate::Error::Invalid)?;
    let addr = build::address(dir)?;
    let client = Client::connect(&addr, soft::DEVICE_ID, soft::DAEMON_ELECTION_ID).await?;
    P4Lab::adopt(
        lab,
        mapping,
        soft::SWITCH,
        client,
        turbonet_p4::turbonet_p4info(),
    )
}

/// Takes over the lab's switches from `up`: on each, primary under the
/// election id after `up`'s, with the entities `up` wrote.
async fn connect_p4rt(lab: &Lab, dir: &LabDir) -> Result<Vec<P4Lab>> {
    use crate::dataplane::p4::switches;
    let state = dir.load()?.context("the lab has no state")?;
    let mapping = switches::map(lab).map_err(crate::Error::Invalid)?;
    let (p4info, _) = switches::pipeline(lab, &state.scenario)?;
    let mut out = Vec::new();
    for sw in &switches::config(lab)?.switches {
        let (client, _) = switches::connect(lab, sw, u128::from(sw.election_id) + 1).await?;
        out.push(P4Lab::adopt(
            lab,
            mapping.clone(),
            &sw.name,
            client,
            p4info.clone(),
        )?);
    }
    Ok(out)
}

/// Every link's counters over all the lab's switches: each direction is
/// counted by the switch its sending end (or, from a host, its receiving
/// end) runs on, so the sum is the link's.
async fn p4_counters(lab: &Lab, switches: &mut [P4Lab]) -> Result<Vec<LinkCounters>> {
    let mut total: Vec<LinkCounters> = Vec::new();
    for sw in switches {
        let counters = sw.link_counters(lab).await?;
        if total.is_empty() {
            total = counters;
            continue;
        }
        for (sum, c) in total.iter_mut().zip(counters) {
            for (s, c) in sum.directions.iter_mut().zip(c.directions) {
                s.rx_packets += c.rx_packets;
                s.rx_bytes += c.rx_bytes;
                s.tx_packets += c.tx_packets;
                s.tx_bytes += c.tx_bytes;
                s.dropped_loss += c.dropped_loss;
            }
        }
    }
    Ok(total)
}

/// Reads one request from a control connection and answers it.
async fn answer(daemon: Rc<Daemon>, stream: tokio::net::UnixStream) -> Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let response = match serde_json::from_str::<Request>(&line) {
        Ok(request) => daemon.execute("cli", request).await,
        Err(e) => Response::Error {
            message: format!("malformed request: {e}"),
        },
    };
    let mut out = serde_json::to_string(&response)?;
    out.push('\n');
    write.write_all(out.as_bytes()).await?;
    Ok(())
}

fn write_counters(path: &PathBuf, snapshot: &engine::Snapshot) {
    let counters: Vec<LinkCounters> = snapshot.lock().map(|s| s.clone()).unwrap_or_default();
    if let Ok(json) = serde_json::to_vec(&counters) {
        let tmp = path.with_extension("tmp");
        if fs::write(&tmp, json).is_ok() {
            let _ = fs::rename(&tmp, path);
        }
    }
}
