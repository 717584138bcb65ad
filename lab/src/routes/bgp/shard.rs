//! The built-in speakers of a fabric too large for one process, run in
//! several: each *shard* is a process of its own (`turbonet daemon
//! --bgp-shard K/N LAB`, started by the daemon) running a share of the
//! switches' speakers, as the daemon would run them all.
//!
//! Why: every session holds a socket at each end, and a process may hold
//! only so many (its hard `nofile` limit, which root without
//! `CAP_SYS_RESOURCE` cannot raise): the HPN pod's 15,360 sessions need
//! about 32,000 descriptors. Shards also spread the speakers' work over
//! the machine's cores: a large fabric runs a shard a core whatever its
//! open files ([`count`]).
//!
//! The daemon keeps its view of every speaker as if they ran inside it:
//! each sharded speaker has a control sender and a status receiver there,
//! fed through the shard's stdin and stdout, one JSON message a line
//! ([`Down`], [`Up`]): port changes and RIB dumps go down; statuses
//! (every 500 ms, those that changed: whole when a session changed state,
//! else the FIB's progress), session events and dumps come up.
//! Each shard computes the same plan and the same partition from the lab's
//! saved scenario, so nothing but a speaker's position crosses the pipe.
//! A shard that dies is started again (its speakers start from the routes
//! left in the kernel, and hear again of every port that changed); one
//! whose stdin closes (the daemon stopped or died) stops its speakers and
//! exits.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use turbonet_routing::bgp::dump::RibDump;
use turbonet_routing::bgp::plan::{self, Speaker};
use turbonet_routing::bgp::speaker::{Counters, PeerState, Status};
use turbonet_routing::bgp::speaker_driver::Control;
use turbonet_topo::{Agent as AgentKind, Lab, RoutingMode};

use super::{Connections, Launch, Launched, Note};
use crate::error::{Context, Result};
use crate::events::Events;
use crate::limits;
use crate::state::LabDir;
use turbonet_host::process;

/// Sets the number of shards, overriding the choice by open files (`1`:
/// every speaker in the daemon).
pub const ENV: &str = "TURBONET_BGP_SHARDS";

/// How often a shard sends the statuses that changed...
const PUBLISH_EVERY: Duration = Duration::from_millis(500);
/// ... and a changed status whole, at least (see [`publish`]).
const WHOLE_EVERY: Duration = Duration::from_secs(5);

/// Shards that die this soon after starting count towards giving up...
const CRASH_WINDOW: Duration = Duration::from_secs(10);
/// ... after this many.
const CRASHES: usize = 5;

/// The open files a built-in speaker holds: its namespace, its listener,
/// its FIB's two netlink sockets, and a socket per session.
fn speaker_fds(sessions: usize) -> usize {
    4 + sessions
}

/// The open files of each built-in speaker of `lab`, in the fabric's
/// order of switches (empty: no built-in speakers).
fn loads(lab: &Lab) -> Vec<usize> {
    // On a P4 target the speakers' routes go to the pipeline, from the
    // daemon.
    if lab.routing.mode != RoutingMode::Bgp || lab.target != turbonet_topo::Target::Netns {
        return Vec::new();
    }
    let builtin =
        |id| lab.fabric.node(id).role.is_switch() && lab.routing.agent_of(id) == AgentKind::Builtin;
    let mut sessions: HashMap<turbonet_topo::NodeId, usize> = lab
        .fabric
        .switches()
        .filter(|n| builtin(n.id))
        .map(|n| (n.id, 0))
        .collect();
    for link in &lab.fabric.links {
        let [a, b] = [link.ends[0].node, link.ends[1].node];
        if builtin(a) && builtin(b) {
            for end in [a, b] {
                *sessions.entry(end).or_default() += 1;
            }
        }
    }
    lab.fabric
        .switches()
        .filter_map(|n| sessions.get(&n.id))
        .map(|s| speaker_fds(*s))
        .collect()
}

/// The open files of all of `lab`'s built-in speakers.
pub fn fds(lab: &Lab) -> usize {
    loads(lab).iter().sum()
}

/// Sessions from which the built-in speakers are spread over the
/// machine's cores, a shard a core. Measured on two cores: the pod cut to
/// six segments (6,720 sessions) converged in 22 s as two shards, 30 s in
/// the daemon alone; the 1,000-agent leaf-spine (3,984) in 25.5 s as two,
/// 26.4 s as one; fat-tree k=16 (2,048) in 2.3 s as two, 1.7 s as one,
/// and at steady state each shard's own keepalives and statuses cost it
/// more of a core.
const SPREAD_FROM_SESSIONS: usize = 5_000;

/// How many shards run `lab`'s built-in speakers when the daemon's other
/// open files (the link engine's sockets, its namespaces) are `others`
/// and a process may hold `hard` at most: one (the daemon itself) for a
/// small fabric whose speakers all fit, else as many as the machine has
/// cores ([`SPREAD_FROM_SESSIONS`]), or more if their open files need
/// more. [`ENV`] overrides.
pub fn count(lab: &Lab, others: usize) -> usize {
    if let Some(n) = std::env::var(ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        return n.max(1);
    }
    let loads = loads(lab);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    count_for(&loads, others, limits::hard_fd_limit()).max(by_cores(&loads, cores))
}

/// The shards that spread speakers holding `loads` open files over
/// `cores` (one when there are few sessions).
fn by_cores(loads: &[usize], cores: usize) -> usize {
    // Each session is a socket at both ends.
    let sessions = loads.iter().map(|l| l - speaker_fds(0)).sum::<usize>() / 2;
    if sessions < SPREAD_FROM_SESSIONS {
        1
    } else {
        cores.clamp(1, loads.len())
    }
}

/// [`count`] for speakers holding `loads` open files each.
fn count_for(loads: &[usize], others: usize, hard: usize) -> usize {
    let fits = |need: usize| need + limits::SPARE_FDS <= hard;
    if loads.is_empty() || fits(others + loads.iter().sum::<usize>()) {
        return 1;
    }
    (2..loads.len())
        .find(|&n| {
            let shards = partition(loads.iter().map(|l| Some(*l)), n);
            fits(worst(loads, &shards, n))
        })
        .unwrap_or(loads.len().max(1))
}

/// The open files of the fullest of `n` shards.
fn worst(loads: &[usize], shards: &[Option<usize>], n: usize) -> usize {
    let mut per = vec![0; n];
    for (load, shard) in loads.iter().zip(shards) {
        if let Some(s) = shard {
            per[*s] += load;
        }
    }
    per.into_iter().max().unwrap_or(0)
}

/// Which of `n` shards runs each speaker (`None`: not a built-in one),
/// given its open files: the largest first, each to the emptiest shard
/// (the lowest on a tie), so every process that computes it agrees.
fn partition(loads: impl IntoIterator<Item = Option<usize>>, n: usize) -> Vec<Option<usize>> {
    let loads: Vec<Option<usize>> = loads.into_iter().collect();
    let mut order: Vec<usize> = (0..loads.len()).filter(|&i| loads[i].is_some()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(loads[i]), i));
    let mut filled = vec![0usize; n.max(1)];
    let mut shard = vec![None; loads.len()];
    for i in order {
        let (emptiest, _) = filled
            .iter()
            .enumerate()
            .min_by_key(|(s, f)| (**f, *s))
            .expect("at least one shard");
        filled[emptiest] += loads[i].unwrap_or(0);
        shard[i] = Some(emptiest);
    }
    shard
}

/// The shard of each of the plan's `speakers` (`run`: those built in).
fn partition_speakers(speakers: &[Speaker], run: &[bool], n: usize) -> Vec<Option<usize>> {
    partition(
        speakers
            .iter()
            .zip(run)
            .map(|(s, run)| run.then(|| speaker_fds(s.neighbours.len()))),
        n,
    )
}

/// Down the pipe: from the daemon to a shard.
#[derive(Debug, Serialize, Deserialize)]
enum Down {
    /// A port of the speaker at this position went up or down.
    Port {
        speaker: usize,
        ifname: String,
        up: bool,
    },
    /// Send that speaker's RIBs, answering `id`.
    Dump { id: u64, speaker: usize },
}

/// Up the pipe: from a shard to the daemon.
#[derive(Debug, Serialize, Deserialize)]
enum Up {
    /// Every speaker of the shard has started.
    Ready,
    /// A speaker's status, changed.
    Status { speaker: usize, status: Box<Status> },
    /// A speaker's FIB changed, and none of its sessions' states.
    Progress { speaker: usize, progress: Progress },
    /// A session event or a FIB failure.
    Note(Box<Note>),
    /// The answer to a [`Down::Dump`].
    Dump { id: u64, rib: Box<RibDump> },
}

/// The part of a [`Status`] that changes as a speaker's FIB converges.
#[derive(Debug, Serialize, Deserialize)]
struct Progress {
    at: Duration,
    routes: usize,
    fib: plan::FibDigest,
    last_change: Duration,
    fib_pending: bool,
    counters: Counters,
}

impl Progress {
    fn of(status: &Status) -> Progress {
        Progress {
            at: status.at,
            routes: status.routes,
            fib: status.fib,
            last_change: status.last_change,
            fib_pending: status.fib_pending,
            counters: status.counters,
        }
    }

    fn apply(self, status: &mut Status) {
        status.at = self.at;
        status.routes = self.routes;
        status.fib = self.fib;
        status.last_change = self.last_change;
        status.fib_pending = self.fib_pending;
        status.counters = self.counters;
    }
}

/// What a sharded speaker's control sender carries to its shard.
enum Request {
    Port {
        speaker: usize,
        ifname: String,
        up: bool,
    },
    Dump {
        speaker: usize,
        reply: oneshot::Sender<RibDump>,
    },
}

/// The monotonic clock, in nanoseconds: the same in every process, so a
/// shard's speakers keep the daemon's clock.
fn monotonic_ns() -> u128 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| Duration::from(t).as_nanos())
}

/// What starts one shard.
#[derive(Debug, Clone)]
struct Shard {
    lab: String,
    index: usize,
    count: usize,
    /// The speakers' clock starts here (monotonic nanoseconds).
    epoch_ns: u128,
    /// Of the daemon's speakers at its start: restarted.
    restarted: bool,
}

impl Shard {
    fn spawn(&self, restarted: bool) -> Result<tokio::process::Child> {
        let mut command = tokio::process::Command::new(process::self_exe()?);
        command
            .arg("daemon")
            .arg("--bgp-shard")
            .arg(format!("{}/{}", self.index, self.count))
            .arg("--epoch-ns")
            .arg(self.epoch_ns.to_string());
        if restarted {
            command.arg("--restarts").arg("1");
        }
        command
            .arg(&self.lab)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        command
            .spawn()
            .with_context(|| format!("starting BGP shard {}", self.index))
    }
}

/// Starts `lab`'s built-in speakers (`run`, by plan position) in `count`
/// shards, their pipes served on `runtime`; returns what the daemon holds
/// of them once every shard has started its speakers.
pub(super) async fn launch(
    lab: &Lab,
    speakers: &[Speaker],
    run: &[bool],
    count: usize,
    restarted: bool,
    events: Events,
    runtime: &tokio::runtime::Handle,
) -> Result<Launched> {
    let started = Instant::now();
    let epoch_ns = monotonic_ns().saturating_sub(started.elapsed().as_nanos());
    let shard_of = partition_speakers(speakers, run, count);
    let mut statuses = vec![None; speakers.len()];
    let mut controls = HashMap::new();
    let mut ready = Vec::new();
    for index in 0..count {
        let (requests, requests_rx) = mpsc::unbounded_channel();
        let mut senders = HashMap::new();
        for (i, speaker) in speakers.iter().enumerate() {
            if shard_of[i] != Some(index) {
                continue;
            }
            let (status, status_rx) = watch::channel(Status::default());
            senders.insert(i, status);
            statuses[i] = Some(status_rx);
            let (control, control_rx) = mpsc::unbounded_channel();
            controls.insert(speaker.node, control);
            runtime.spawn(forward(i, control_rx, requests.clone()));
        }
        let (ready_tx, ready_rx) = oneshot::channel();
        let shard = Shard {
            lab: lab.name.clone(),
            index,
            count,
            epoch_ns,
            restarted,
        };
        runtime.spawn(serve_shard(
            shard,
            requests_rx,
            senders,
            events.clone(),
            ready_tx,
        ));
        ready.push(ready_rx);
    }
    for (index, ready) in ready.into_iter().enumerate() {
        ready
            .await
            .map_err(|_| crate::err!("BGP shard {index} stopped while starting"))??;
    }
    Ok(Launched {
        started,
        statuses,
        controls,
    })
}

/// Passes what the daemon tells speaker `speaker` on to its shard, until
/// the daemon drops its control sender.
async fn forward(
    speaker: usize,
    mut control: mpsc::UnboundedReceiver<Control>,
    shard: mpsc::UnboundedSender<Request>,
) {
    while let Some(c) = control.recv().await {
        let request = match c {
            Control::Port { ifname, up } => Request::Port {
                speaker,
                ifname,
                up,
            },
            Control::Dump(reply) => Request::Dump { speaker, reply },
            Control::Stop => break,
        };
        if shard.send(request).is_err() {
            break;
        }
    }
}

/// Writes one message, a line of JSON.
async fn send<T: Serialize>(
    to: &mut (impl AsyncWrite + Unpin),
    message: &T,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    to.write_all(&line).await?;
    to.flush().await
}

/// Runs shard `shard` for the daemon: starts it, passes `requests` down,
/// its statuses (into `statuses`, by speaker position), events and dumps
/// up; starts it again should it die; ends it (closing its stdin) when
/// every speaker's control sender is gone. `ready` hears whether its
/// first start succeeded.
async fn serve_shard(
    shard: Shard,
    mut requests: mpsc::UnboundedReceiver<Request>,
    statuses: HashMap<usize, watch::Sender<Status>>,
    events: Events,
    ready: oneshot::Sender<Result<()>>,
) {
    let mut ready = Some(ready);
    // Every port that changed, to tell a restarted shard.
    let mut ports: BTreeMap<(usize, String), bool> = BTreeMap::new();
    let mut crashes: Vec<Instant> = Vec::new();
    let mut restarts = 0u32;
    loop {
        let mut child = match shard.spawn(shard.restarted || restarts > 0) {
            Ok(child) => child,
            Err(e) => {
                match ready.take() {
                    Some(ready) => drop(ready.send(Err(e))),
                    None => events.write(
                        "bgp",
                        "shard",
                        "restarting a BGP shard",
                        Err(&e.to_string()),
                    ),
                }
                return;
            }
        };
        let started = Instant::now();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            unreachable!("both piped");
        };
        let mut stdin = tokio::io::BufWriter::new(stdin);
        let mut lines = BufReader::new(stdout).lines();
        let mut pending: HashMap<u64, oneshot::Sender<RibDump>> = HashMap::new();
        let mut next_id = 0u64;
        let mut alive = true;
        for ((speaker, ifname), up) in &ports {
            let port = Down::Port {
                speaker: *speaker,
                ifname: ifname.clone(),
                up: *up,
            };
            alive &= send(&mut stdin, &port).await.is_ok();
        }
        while alive {
            tokio::select! {
                request = requests.recv() => {
                    let down = match request {
                        // The daemon is done with the speakers: the shard
                        // stops them when its stdin closes.
                        None => {
                            drop(stdin);
                            if tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err() {
                                let _ = child.kill().await;
                            }
                            return;
                        }
                        Some(Request::Port { speaker, ifname, up }) => {
                            ports.insert((speaker, ifname.clone()), up);
                            Down::Port { speaker, ifname, up }
                        }
                        Some(Request::Dump { speaker, reply }) => {
                            next_id += 1;
                            pending.insert(next_id, reply);
                            Down::Dump { id: next_id, speaker }
                        }
                    };
                    alive = send(&mut stdin, &down).await.is_ok();
                }
                line = lines.next_line() => match line {
                    Ok(Some(line)) => match serde_json::from_str::<Up>(&line) {
                        Ok(Up::Ready) => {
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(Ok(()));
                            }
                        }
                        Ok(Up::Status { speaker, status }) => {
                            if let Some(tx) = statuses.get(&speaker) {
                                tx.send_replace(*status);
                            }
                        }
                        Ok(Up::Progress { speaker, progress }) => {
                            if let Some(tx) = statuses.get(&speaker) {
                                tx.send_modify(|status| progress.apply(status));
                            }
                        }
                        Ok(Up::Note(note)) => note.write(&events),
                        Ok(Up::Dump { id, rib }) => {
                            if let Some(reply) = pending.remove(&id) {
                                let _ = reply.send(*rib);
                            }
                        }
                        Err(e) => tracing::warn!("BGP shard {}: {e}: {line}", shard.index),
                    },
                    Ok(None) | Err(_) => alive = false,
                },
            }
        }
        // The shard is gone (or no longer talks): say how, and start it
        // again.
        let _ = child.start_kill();
        let how = match child.wait().await {
            Ok(status) => process::describe_exit(status),
            Err(e) => e.to_string(),
        };
        if let Some(ready) = ready.take() {
            let _ = ready.send(Err(crate::err!(
                "BGP shard {} of {} {how} while starting its speakers (the lab daemon's log says why)",
                shard.index,
                shard.count
            )));
            return;
        }
        crashes.retain(|t| t.elapsed() < CRASH_WINDOW);
        if started.elapsed() < CRASH_WINDOW {
            crashes.push(Instant::now());
        }
        let giving_up = crashes.len() >= CRASHES;
        events.write(
            "bgp",
            "shard-died",
            &format!(
                "BGP shard {} of {} ({} speakers) {how}{}",
                shard.index,
                shard.count,
                statuses.len(),
                if giving_up { "" } else { "; starting it again" }
            ),
            if giving_up {
                Err("it died 5 times within 10 s: its speakers stay down")
            } else {
                Ok(())
            },
        );
        if giving_up {
            return;
        }
        restarts += 1;
    }
}

/// `turbonet daemon --bgp-shard INDEX/COUNT LAB`: runs shard `index` of
/// `count` of the lab's built-in speakers for the daemon that started it
/// (on its stdin and stdout), with the speakers' clock started at
/// monotonic `epoch_ns`, until its stdin closes.
pub fn serve(
    lab_name: &str,
    index: usize,
    count: usize,
    epoch_ns: u128,
    restarted: bool,
) -> Result<()> {
    process::name_self();
    // Gone with the daemon, even if it is killed.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM);
    let t = Instant::now();
    let dir = LabDir::of(lab_name);
    let lab = Arc::new(dir.saved_lab()?);
    let speakers = plan::speakers(&lab.fabric);
    tracing::info!(
        "BGP shard {index} of {count}: {} switches planned in {:.3} s",
        speakers.len(),
        t.elapsed().as_secs_f64()
    );
    let builtin: Vec<bool> = speakers
        .iter()
        .map(|s| lab.routing.agent_of(s.node) == AgentKind::Builtin)
        .collect();
    let shard_of = partition_speakers(&speakers, &builtin, count);
    let run: Vec<bool> = shard_of.iter().map(|s| *s == Some(index)).collect();
    let nodes: Vec<turbonet_topo::NodeId> = speakers.iter().map(|s| s.node).collect();
    let need = (speakers.iter().zip(&run))
        .filter(|(_, run)| **run)
        .map(|(s, _)| speaker_fds(s.neighbours.len()))
        .sum::<usize>();
    limits::raise_fd_limit(
        need + limits::SPARE_FDS,
        &format!("lab {lab_name}: BGP shard {index} of {count}"),
    )?;
    let started = Instant::now()
        .checked_sub(Duration::from_nanos(
            u64::try_from(monotonic_ns().saturating_sub(epoch_ns)).unwrap_or(0),
        ))
        .unwrap_or_else(Instant::now);
    let connections = Connections::start()?;
    let handle = connections.handle();
    let (up, up_rx) = mpsc::unbounded_channel::<Up>();
    std::thread::Builder::new()
        .name("shard-out".into())
        .spawn(move || {
            if let Err(e) = write_up(up_rx) {
                tracing::warn!("BGP shard: writing to the daemon: {e}");
            }
        })
        .context("starting the shard's writer")?;
    let known = Arc::new(plan::known_prefixes(&speakers));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let notes = up.clone();
    let launch = Launch {
        lab,
        speakers,
        run,
        known,
        note: Arc::new(move |note| {
            let _ = notes.send(Up::Note(Box::new(note)));
        }),
        restarted,
        connections: handle.clone(),
        fib: connections.fib(),
        started,
    };
    let served = tokio::task::LocalSet::new().block_on(&runtime, async move {
        let (launched, running) = launch.run(None).await?;
        let mut statuses: Vec<(usize, watch::Receiver<Status>)> = (launched.statuses)
            .into_iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i, s)))
            .collect();
        for (speaker, status) in &mut statuses {
            let status = Box::new(status.borrow_and_update().clone());
            let _ = up.send(Up::Status {
                speaker: *speaker,
                status,
            });
        }
        let controls = by_position(&nodes, launched.controls);
        let started = controls.len();
        handle.spawn(publish(statuses, up.clone()));
        let (down_up, down_runtime) = (up.clone(), handle.clone());
        std::thread::Builder::new()
            .name("shard-in".into())
            .spawn(move || read_down(controls, down_up, down_runtime))
            .context("starting the shard's reader")?;
        let _ = up.send(Up::Ready);
        tracing::info!(
            "BGP shard {index} of {count}: {started} speakers started in {:.3} s",
            t.elapsed().as_secs_f64()
        );
        drop(up);
        for (node, speaker) in running {
            if let Err(e) = speaker.await {
                tracing::error!("the BGP speaker of {node} failed: {e}");
            }
        }
        Ok(())
    });
    runtime.shutdown_background();
    drop(connections);
    served
}

/// The control senders by node, by the position of the node's speaker in
/// `nodes`.
fn by_position(
    nodes: &[turbonet_topo::NodeId],
    mut by_node: HashMap<turbonet_topo::NodeId, mpsc::UnboundedSender<Control>>,
) -> HashMap<usize, mpsc::UnboundedSender<Control>> {
    nodes
        .iter()
        .enumerate()
        .filter_map(|(i, node)| by_node.remove(node).map(|c| (i, c)))
        .collect()
}

/// Writes what goes up to stdout, on a thread of its own (the messages
/// are serialized there, not on the speakers' threads), flushing whenever
/// nothing more waits; until every sender is gone.
fn write_up(mut up: mpsc::UnboundedReceiver<Up>) -> std::io::Result<()> {
    // The descriptor itself: `Stdout` would write a line at a time.
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let mut stdout = std::io::BufWriter::with_capacity(1 << 20, stdout);
    while let Some(message) = up.blocking_recv() {
        write_line(&mut stdout, &message)?;
        while let Ok(message) = up.try_recv() {
            write_line(&mut stdout, &message)?;
        }
        std::io::Write::flush(&mut stdout)?;
    }
    Ok(())
}

/// Writes one message, a line of JSON.
fn write_line(to: &mut impl std::io::Write, message: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *to, message)?;
    to.write_all(b"\n")
}

/// Every [`PUBLISH_EVERY`], sends what changed of each speaker's status:
/// all of it when a session changed state (or every [`WHOLE_EVERY`], for
/// the prefixes received), else its FIB's progress only (a pod's
/// aggregation switch has hundreds of sessions, and converging changes its
/// FIB a hundred times).
async fn publish(statuses: Vec<(usize, watch::Receiver<Status>)>, up: mpsc::UnboundedSender<Up>) {
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What was sent whole last, and when.
    let mut sent: Vec<(usize, watch::Receiver<Status>, Vec<PeerState>, Instant)> = statuses
        .into_iter()
        .map(|(i, mut rx)| {
            let states = rx
                .borrow_and_update()
                .neighbours
                .iter()
                .map(|n| n.state)
                .collect();
            (i, rx, states, Instant::now())
        })
        .collect();
    loop {
        tick.tick().await;
        for (speaker, rx, states, at) in &mut sent {
            if !rx.has_changed().unwrap_or(false) {
                continue;
            }
            let status = rx.borrow_and_update();
            let changed = status.neighbours.len() != states.len()
                || status
                    .neighbours
                    .iter()
                    .zip(states.iter())
                    .any(|(n, s)| n.state != *s);
            let message = if changed || at.elapsed() >= WHOLE_EVERY {
                *states = status.neighbours.iter().map(|n| n.state).collect();
                *at = Instant::now();
                Up::Status {
                    speaker: *speaker,
                    status: Box::new(status.clone()),
                }
            } else {
                Up::Progress {
                    speaker: *speaker,
                    progress: Progress::of(&status),
                }
            };
            drop(status);
            if up.send(message).is_err() {
                return;
            }
        }
    }
}

/// Reads what the daemon sends down and passes it to the speakers (on a
/// thread of its own; dumps are awaited on `runtime`); when stdin closes,
/// drops their controls, which stops them.
fn read_down(
    controls: HashMap<usize, mpsc::UnboundedSender<Control>>,
    up: mpsc::UnboundedSender<Up>,
    runtime: tokio::runtime::Handle,
) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<Down>(&line) {
            Ok(Down::Port {
                speaker,
                ifname,
                up,
            }) => {
                if let Some(control) = controls.get(&speaker) {
                    let _ = control.send(Control::Port { ifname, up });
                }
            }
            Ok(Down::Dump { id, speaker }) => {
                let Some(control) = controls.get(&speaker) else {
                    continue;
                };
                let (reply, answer) = oneshot::channel();
                if control.send(Control::Dump(reply)).is_ok() {
                    let up = up.clone();
                    runtime.spawn(async move {
                        if let Ok(rib) = answer.await {
                            let _ = up.send(Up::Dump {
                                id,
                                rib: Box::new(rib),
                            });
                        }
                    });
                }
            }
            Err(e) => tracing::warn!("BGP shard: {e}: {line}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_while_everything_fits() {
        assert_eq!(count_for(&[], 100, 1024), 1);
        assert_eq!(count_for(&[100; 4], 100, 1024), 1);
    }

    #[test]
    fn the_fewest_shards_whose_every_share_fits() {
        // The HPN pod: 240 ToRs of 68 sessions (64 up, 4 rails' worth
        // more would not change it), 120 aggregation switches of 128 and
        // more, against 20,000 open files.
        let mut loads = vec![speaker_fds(64); 240];
        loads.extend(vec![speaker_fds(128 + 8); 120]);
        let total: usize = loads.iter().sum();
        assert!(total > 20_000);
        let n = count_for(&loads, 3_000, 20_000);
        assert_eq!(n, 2);
        let shards = partition(loads.iter().map(|l| Some(*l)), n);
        assert!(worst(&loads, &shards, n) + limits::SPARE_FDS <= 20_000);
        // Balanced: the fullest within one speaker of the mean.
        assert!(worst(&loads, &shards, n) <= total / n + speaker_fds(136));
    }

    #[test]
    fn a_large_fabric_is_spread_over_the_cores_a_small_one_is_not() {
        // Fat-tree k=8: 80 speakers, 256 sessions.
        let k8 = [vec![speaker_fds(8); 48], vec![speaker_fds(4); 32]].concat();
        assert_eq!(by_cores(&k8, 2), 1);
        // 4 spines and 996 leaves: 3,984 sessions.
        let leaf_spine = [vec![speaker_fds(996); 4], vec![speaker_fds(4); 996]].concat();
        assert_eq!(by_cores(&leaf_spine, 2), 1);
        // The pod cut to six segments: 96 ToRs of 60 uplinks, 120
        // aggregation switches of 48 ToRs and 8 cores, 16 cores of 60.
        let pod6 = [
            vec![speaker_fds(60); 96],
            vec![speaker_fds(56); 120],
            vec![speaker_fds(60); 16],
        ]
        .concat();
        assert_eq!(by_cores(&pod6, 2), 2);
        assert_eq!(by_cores(&pod6, 64), 64);
        assert_eq!(by_cores(&pod6, 1), 1);
        let three = [speaker_fds(4_000); 3];
        assert_eq!(by_cores(&three, 64), 3, "a shard has a speaker");
    }

    #[test]
    fn the_partition_is_the_same_everywhere_and_skips_other_agents() {
        let loads = [Some(10), None, Some(30), Some(20), None, Some(10)];
        let a = partition(loads, 2);
        assert_eq!(a, partition(loads, 2));
        assert_eq!(a[1], None);
        assert_eq!(a[4], None);
        // 30 to shard 0, 20 to 1, 10 to 1, 10 to 0: 40 each.
        assert_eq!(a, vec![Some(1), None, Some(0), Some(1), None, Some(0)]);
    }
}
