//! The per-lab daemon: the same binary, detached (`turbonet daemon LAB`).
//! It owns what must keep running after `up` returns — the data plane's
//! run-time side (the link engine, or the controller's sessions with the
//! P4 switches), the BGP agents, the timeline — and serves the lab's
//! control API.
//!
//! Processes: a small supervisor ([`supervise`]) runs the daemon proper
//! ([`work`]) as its child and, if it dies, starts it again; the new one
//! re-adopts the lab from its state and its input log (what is down, link
//! parameters, flaps in progress), reopens the engine's sockets, restarts
//! the agents, and brings the fabric back to that state, so traffic flows
//! again within a second. `status` and the events say it restarted.
//!
//! Inside the daemon, threads: the actor ([`actor`]) with the timers on one
//! thread (a tokio `LocalSet`), the built-in BGP speakers on another (on a
//! P4 target, with the actor), the control API's server ([`service`]) on
//! another, so reads never wait on a change in progress, and the link engine
//! on its own.

pub mod actor;
#[cfg(test)]
mod characterisation;
pub mod command;
pub mod inputs;
pub mod metrics;
pub mod service;
pub mod shared;
pub mod snapshot;

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use turbonet_topo::RoutingMode;

use crate::dataplane::netns::fibwatch::FibWatch;
use crate::dataplane::plane::Counted;
use crate::error::{Context, Error, Result};
use crate::events::{Events, unix_now};
use crate::routes::bgp::Agents;
use crate::state::{LabDir, LabState};
use actor::{Actor, StartRoutes};
use command::{Command, Envelope, Source};
use inputs::InputLog;
use shared::Shared;
use turbonet_api as api;
use turbonet_host::process;

/// `turbonet daemon --bgp-shard INDEX/COUNT LAB`: a share of the lab's
/// built-in BGP speakers, for the daemon that started it.
pub use crate::routes::bgp::shard::serve as bgp_shard;

/// Where the supervisor records the daemon it runs.
fn worker_path(dir: &LabDir) -> PathBuf {
    dir.path().join("daemon.pid")
}

/// Daemons that die this soon after starting count towards giving up.
const CRASH_WINDOW: Duration = Duration::from_secs(10);
/// Restarts within [`CRASH_WINDOW`] after which the supervisor gives up.
const CRASHES: usize = 5;

/// Starts the daemon of `lab` (its supervisor), detached (a session of its
/// own, output to `daemon.log` in the lab directory); returns the
/// supervisor's pid.
pub fn spawn(lab: &str, dir: &LabDir) -> Result<u32> {
    let child = process::spawn_self(
        &["daemon".as_ref(), lab.as_ref()],
        &dir.path().join("daemon.log"),
    )
    .context("starting the lab daemon")?;
    Ok(child.id())
}

/// Waits until the daemon answers on the control API, failing early with
/// its log if its supervisor exits.
pub fn wait_ready(
    dir: &LabDir,
    supervisor: u32,
    timeout: Duration,
) -> Result<api::proto::LabStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(status) = api::Client::connect(dir).and_then(|mut c| c.status()) {
            return Ok(status);
        }
        if !process::spawned_alive(supervisor) {
            let log = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
            return Err(Error::Failed(format!(
                "the lab daemon exited before it was ready:\n{}",
                log.trim_end()
            )));
        }
        if Instant::now() >= deadline {
            // Quoted: a failed `up` rolls the lab directory back.
            let log = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            return Err(Error::Failed(format!(
                "the lab daemon was not ready after {timeout:.1?}; the end of its log:\n{}",
                lines[lines.len().saturating_sub(20)..].join("\n")
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops the daemon recorded in `state` (its supervisor, then the daemon
/// itself should the supervisor be gone): SIGTERM, then SIGKILL after 5 s.
/// What is gone already is fine.
pub fn stop(state: &LabState) {
    let dir = LabDir::of(&state.lab);
    if let Some(pid) = state.daemon_pid {
        process::stop(&[(pid, "turbonet")], Duration::from_secs(5));
    }
    if let Some(worker) = std::fs::read_to_string(worker_path(&dir))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    {
        process::stop(&[(worker, "turbonet")], Duration::from_secs(5));
    }
}

/// `turbonet daemon LAB`: the supervisor. Runs the daemon (`turbonet
/// daemon --worker`) and starts it again whenever it dies, until SIGTERM
/// (which it passes on), or until it dies too often.
pub fn supervise(lab_name: &str) -> Result<()> {
    process::name_self();
    let dir = LabDir::of(lab_name);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut crashes: Vec<Instant> = Vec::new();
        let mut restarts = 0u32;
        loop {
            let exe = process::self_exe()?;
            let mut child = tokio::process::Command::new(exe)
                .args(["daemon", "--worker", "--restarts", &restarts.to_string(), lab_name])
                .stdin(std::process::Stdio::null())
                .kill_on_drop(false)
                .spawn()
                .context("starting the daemon")?;
            let pid = child.id().unwrap_or(0);
            std::fs::write(worker_path(&dir), pid.to_string())?;
            let started = Instant::now();
            let status = tokio::select! {
                status = child.wait() => status?,
                _ = terminate.recv() => return stop_child(&mut child).await,
                _ = interrupt.recv() => return stop_child(&mut child).await,
            };
            if status.success() {
                return Ok(());
            }
            // Exit code 2: what the lab asks cannot be done (a filter the
            // kernel refuses): starting again would only fail again.
            if status.code() == Some(2) && restarts == 0 {
                return Err(Error::Failed(format!(
                    "the lab daemon could not start (its log: {})",
                    dir.path().join("daemon.log").display()
                )));
            }
            // It died: say so in the lab's events, and start it again.
            let how = process::describe_exit(status);
            tracing::warn!("the daemon (pid {pid}) {how}; restarting it");
            if let Some(state) = dir.load().ok().flatten()
                && let Ok(events) = Events::open(&dir, state.epoch_unix.unwrap_or_else(unix_now))
            {
                events.write(
                    "daemon",
                    "daemon-died",
                    &format!("the daemon (pid {pid}) {how}"),
                    Ok(()),
                );
            }
            crashes.retain(|t| t.elapsed() < CRASH_WINDOW);
            if started.elapsed() < CRASH_WINDOW {
                crashes.push(Instant::now());
            }
            if crashes.len() >= CRASHES {
                return Err(Error::Failed(format!(
                    "the daemon died {CRASHES} times within {CRASH_WINDOW:?}; giving up (its log: {})",
                    dir.path().join("daemon.log").display()
                )));
            }
            restarts += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// Passes SIGTERM on to the daemon and waits for it.
async fn stop_child(child: &mut tokio::process::Child) -> Result<()> {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
        Ok(_) => Ok(()),
        Err(_) => {
            let _ = child.kill().await;
            Ok(())
        }
    }
}

/// The route watcher that started, or none, the failure said as an event.
fn watching(started: Result<FibWatch>, events: &Events) -> Option<FibWatch> {
    started
        .map_err(|e| {
            events.write(
                "daemon",
                "route-watch",
                "watching the switches' routes",
                Err(&e.to_string()),
            );
        })
        .ok()
}

/// A fresh BGP fabric's route watcher joins when the fabric first
/// converged, or after this long.
const WATCH_AT_THE_LATEST: Duration = Duration::from_secs(600);

/// `turbonet daemon --worker LAB`: the daemon proper, the `restarts`-th
/// since `up` (0: the first, which takes over from `up`; later ones
/// re-adopt the lab from its input log).
pub fn work(lab_name: &str, restarts: u32) -> Result<()> {
    process::name_self();
    let begun = Instant::now();
    let dir = LabDir::of(lab_name);
    let lab = Arc::new(dir.saved_lab()?);
    let state = dir.load()?.context("the lab has no state")?;
    let epoch = state.epoch_unix.unwrap_or_else(unix_now);
    let logged = inputs::read(&dir)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // A LocalSet: the actor and the timers (and on a P4 target the BGP
    // speakers) share one thread and need not be Send.
    let worked = tokio::task::LocalSet::new().block_on(&runtime, async move {
        let events = Events::open(&dir, epoch)?;
        let source = crate::routes::for_lab(lab.clone());
        // The routes `up` installed, computed meanwhile (seconds on a large
        // fabric): the daemon is ready before, and its first change waits.
        // Through the source, whose cache then serves the first `fail`.
        let intact = {
            let source = source.clone();
            tokio::task::spawn_blocking(move || {
                source.routes(&turbonet_routing::Failures::default())
            })
        };
        // A restarted daemon does not know what its predecessor left:
        // the plane reads it back or writes it again. A fresh P4 plane
        // adopts its switches knowing what `up` wrote (small labs).
        let fresh = restarts == 0;
        // This machine's nodes (all of them but in a lab over machines).
        let share = crate::span::Placement::span_of(state.placement.as_ref(), &lab)?.share;
        let nodes_here = Arc::new(share.clone());
        let (plane, start_routes) = if fresh && lab.target != turbonet_topo::Target::Netns {
            let intact = intact.await?;
            let plane =
                crate::dataplane::open(&lab, &share, &dir, &state, Some(&intact[..]), 1, &events)
                    .await?;
            (plane, StartRoutes::Known(intact))
        } else {
            let plane = crate::dataplane::open(
                &lab,
                &share,
                &dir,
                &state,
                None,
                1 + u128::from(restarts),
                &events,
            )
            .await?;
            (
                plane,
                StartRoutes::Computing {
                    routes: intact,
                    installed: fresh,
                },
            )
        };
        let carriers = Arc::new(crate::carrier::recorded(&lab, &state.carriers));
        let took = |what: &str| {
            tracing::info!(
                "daemon start: {what} after {:.3} s",
                begun.elapsed().as_secs_f64()
            );
        };
        took("data plane open");
        // Every switch's table, watched before the agents start, so that
        // their first routes are events too; but a fresh BGP fabric's
        // table is watched from when it first converged (see
        // `FibWatch::start_when`).
        let watch_later = fresh && lab.routing.mode == RoutingMode::Bgp;
        let fib_watch = if lab.target == turbonet_topo::Target::Netns && !watch_later {
            watching(
                FibWatch::start(lab.clone(), share.clone(), events.clone()),
                &events,
            )
        } else {
            None
        };
        took("route watch started");
        let agents = if lab.routing.mode == RoutingMode::Bgp {
            Some(Rc::new(
                Agents::start(
                    &lab,
                    events.clone(),
                    plane.pipeline_routes().as_ref(),
                    !fresh,
                    crate::routes::bgp::shard::count(
                        &lab,
                        crate::limits::daemon_fds(
                            lab.fabric.switches().count(),
                            carriers.iter().filter(|c| c.is_userspace()).count(),
                        ),
                    ),
                    &share,
                )
                .await?,
            ))
        } else {
            None
        };
        let _fib_watch = match (&agents, fib_watch) {
            (Some(agents), None) if lab.target == turbonet_topo::Target::Netns && watch_later => {
                let mut converged = agents.view().converged_once();
                let join = async move {
                    // At the latest when `up` would have given up.
                    let _ =
                        tokio::time::timeout(WATCH_AT_THE_LATEST, converged.wait_for(|c| *c)).await;
                };
                let joined = agents.view().watcher_joins();
                watching(
                    FibWatch::start_when(lab.clone(), share, events.clone(), join, joined),
                    &events,
                )
            }
            (_, watch) => watch,
        };
        if let Some(agents) = &agents {
            took("BGP agents started");
            let agents = agents.clone();
            tokio::task::spawn_local(async move { agents.plan_ready().await });
        }
        let describe = plane.describe();
        let tapper = plane.tapper();
        // The scenario's filters: one that cannot attach fails the start
        // (and `up`, which waits for it), saying why.
        let filter_counters = Arc::new(Mutex::new(Vec::new()));
        if lab.target == turbonet_topo::Target::Netns && !lab.filters.is_empty() {
            let filters = crate::dataplane::netns::filters::Filters::attach(&lab, &dir)?;
            events.write(
                "daemon",
                "filters",
                &format!("{} filter(s) attached", lab.filters.len()),
                Ok(()),
            );
            tokio::task::spawn_local(crate::dataplane::netns::filters::poll(
                filters,
                filter_counters.clone(),
                events.clone(),
            ));
        }
        let writers = match &tapper {
            Some(tapper) => crate::dataplane::netns::tapping::start_scenario(
                &lab,
                &nodes_here,
                &carriers,
                &state,
                tapper.as_ref(),
                &events,
                fresh,
            ),
            None => Vec::new(),
        };
        let pipeline = plane.pipeline_routes();
        let (queue, commands) = mpsc::unbounded_channel::<Envelope>();
        let mut actor = Actor::new(
            lab.clone(),
            plane,
            source,
            agents.clone(),
            start_routes,
            InputLog::open(&dir, logged.len())?,
            events.clone(),
            queue.clone(),
        );
        if fresh {
            events.write(
                "daemon",
                "daemon-started",
                &format!("daemon started: {describe}"),
                Ok(()),
            );
        } else {
            let applied = actor.replay(&logged).await?;
            events.write(
                "daemon",
                "daemon-restarted",
                &format!(
                    "daemon restarted (restart {restarts}): {describe}; {} command(s) replayed, \
                     {} link(s), {} impairment(s), {} route(s), {} entities reapplied",
                    logged.len(),
                    applied.links,
                    applied.impairments,
                    applied.routes,
                    applied.entities
                ),
                Ok(()),
            );
        }

        // The agents' routes for a P4 pipeline: each burst is one command.
        if let Some(table) = pipeline {
            let queue = queue.clone();
            tokio::task::spawn_local(async move {
                loop {
                    table.changed().await;
                    // Let the other agents' changes of this burst arrive.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let sent = queue.send(Envelope {
                        source: Source::Bgp,
                        command: Command::AgentRoutes,
                        reply: None,
                    });
                    if sent.is_err() {
                        return;
                    }
                }
            });
        }
        // The timeline: each event still to come, at its time.
        for index in actor.timeline_left() {
            let due = epoch + lab.timeline[index].at.as_duration().as_secs_f64();
            let queue = queue.clone();
            tokio::task::spawn_local(async move {
                let wait = (due - unix_now()).max(0.0);
                tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                let _ = queue.send(Envelope {
                    source: Source::Timeline,
                    command: Command::Timeline { index },
                    reply: None,
                });
            });
        }
        // The workloads: the scenario's start at their time after the
        // fabric was ready (a restarted daemon does not run them again),
        // but for a graded lab's, which `lab check` starts.
        let workloads = Arc::new(crate::workload::Workloads::new(
            lab.clone(),
            nodes_here.clone(),
            dir.clone(),
            events.clone(),
        ));
        if fresh {
            // On a lab over several machines, each runs those on its hosts.
            for w in (lab.workloads.iter()).filter(|w| !w.graded && workloads.here(w)) {
                workloads.start(w.clone(), w.start.as_duration().as_secs_f64())?;
            }
        } else if lab.workloads.iter().any(|w| !w.graded) {
            events.write(
                "daemon",
                "workloads-lost",
                "the daemon restarted: workloads that were running are lost",
                Err("not run again"),
            );
        }
        actor.set_workloads(workloads.clone());
        let counters = Arc::new(shared::CounterCache::default());
        let shared = Shared {
            lab: lab.clone(),
            share: nodes_here,
            carriers,
            queue: queue.clone(),
            published: actor.subscribe(),
            counters: counters.clone(),
            events: events.clone(),
            bgp: agents.as_ref().map(|a| a.view()),
            workloads: workloads.clone(),
            tapper,
            filters: filter_counters,
            pid: std::process::id(),
            restarts,
        };
        let metrics = metrics_listeners(&lab, shared.share.machine)?;
        let (stop_api, api_stopped) = oneshot::channel();
        let socket = api::socket_path(&dir);
        let api_thread = std::thread::Builder::new()
            .name("control-api".into())
            .spawn(move || service::serve(shared, &socket, metrics, api_stopped))?;
        tracing::info!(
            "turbonet daemon for lab {}: control API at {}, {describe}",
            lab.name,
            api::socket_path(&dir).display()
        );

        let served = run_actor(&mut actor, commands, &counters).await;
        workloads.stop_all();
        let _ = stop_api.send(());
        let api = api_thread
            .join()
            .map_err(|_| Error::Failed("the control API's thread panicked".to_owned()))?;
        actor.plane().stop()?;
        // The engine is gone, and with it the captures' senders: their
        // files end.
        for writer in writers {
            let _ = writer.join();
        }
        served.and(api)
    });
    // Not waiting for a route computation still running (right after
    // `up`, k=16 takes half a second): its result is not needed.
    runtime.shutdown_background();
    worked
}

/// The listeners of the lab's metrics endpoint (`[metrics]`): on this
/// machine, and on the address of machine `machine`'s part on the lab's
/// management network, if it has one.
fn metrics_listeners(lab: &turbonet_topo::Lab, machine: u32) -> Result<Vec<std::net::TcpListener>> {
    let Some(m) = lab.metrics else {
        return Ok(Vec::new());
    };
    let bind = |address: std::net::Ipv4Addr| {
        let listener = std::net::TcpListener::bind((address, m.port))?;
        listener.set_nonblocking(true)?;
        Ok::<_, std::io::Error>(listener)
    };
    let mut listeners = vec![bind(m.address).with_context(|| {
        format!(
            "serving the metrics on {}:{} (`[metrics]`; is the port taken?)",
            m.address, m.port
        )
    })?];
    if let Some(mgmt) = lab.mgmt {
        let name = crate::names::mgmt_namespace(&lab.name);
        let ns =
            turbonet_host::namespaces::open(&name).with_context(|| format!("opening {name}"))?;
        let hub = mgmt.hub_of(machine).addr();
        listeners.push(
            turbonet_host::namespaces::in_namespace(&ns, || bind(hub))
                .with_context(|| format!("serving the metrics on {hub}:{} in {name}", m.port))?,
        );
    }
    Ok(listeners)
}

/// Runs the actor's commands until SIGTERM, SIGINT or SIGHUP, refreshing
/// the counters readers see between commands while they are wanted.
async fn run_actor(
    actor: &mut Actor,
    mut commands: mpsc::UnboundedReceiver<Envelope>,
    counters: &shared::CounterCache,
) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut tick = tokio::time::interval(shared::CounterCache::EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = terminate.recv() => return Ok(()),
            _ = interrupt.recv() => return Ok(()),
            _ = hangup.recv() => return Ok(()),
            envelope = commands.recv() => match envelope {
                Some(envelope) => actor.handle(envelope).await,
                None => return Ok(()),
            },
            _ = tick.tick() => {
                if !counters.wanted() {
                    continue;
                }
                let at_unix = unix_now();
                if let Ok(links) = actor.plane().counters().await {
                    counters.store(Counted { at_unix, links });
                }
            }
        }
    }
}
