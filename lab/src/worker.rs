//! `turbonet worker`: this machine's part of a lab over several.
//!
//! Every machine runs one worker of the lab with the same scenario, its
//! index and the number of machines. Each computes the partition itself
//! ([`turbonet_topo::machines::plan`]) and says its hash in its hello;
//! worker 0 coordinates ([`crate::workers::coordinate`]), the others
//! attend it ([`crate::workers::attend`]), retrying until it answers.
//! Once all are there, each is told to build its part ([`crate::up::up`]
//! with a [`Placement`]), says so, and then says it is alive each second.
//! It mirrors the loss of another machine by taking its cut links to that
//! machine down through its lab's daemon (VXLAN has no carrier), points
//! them at a machine that moved, and on SIGTERM or Ctrl-C takes its part
//! down. A worker started again over a part that is still up (the same
//! scenario, placement and a live daemon) keeps it.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use turbonet_cluster::{Change, Hello, Phase, Settings};
use turbonet_host::process;
use turbonet_topo::Lab;
use turbonet_topo::machines::{MachinePlan, Reach};

use crate::error::{Context, Error, Result};
use crate::progress::Progress;
use crate::span::Placement;
use crate::state::{self, LabDir};
use crate::workers::{Attendance, Tell, Told};

/// What `turbonet worker` is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The scenario file (the same on every machine).
    pub file: PathBuf,
    /// This machine's index, from 0 (the coordinator).
    pub index: u32,
    /// How many machines the lab spans.
    pub of: u32,
    /// Where worker 0 listens for the others (`HOST:PORT`).
    pub coordinator: String,
    /// Where worker 0 listens (default: every address, the coordinator's
    /// port).
    pub listen: Option<SocketAddr>,
    /// The file holding the lab's token, which every worker presents.
    pub token_file: PathBuf,
    /// This machine's underlay address (default: the address it reaches
    /// the coordinator from).
    pub underlay: Option<Ipv4Addr>,
    /// Threads that create namespaces (as `up`'s).
    pub threads: Option<usize>,
    /// How long worker 0 waits for every worker to connect, and the
    /// others to reach worker 0.
    pub rendezvous: Duration,
}

/// The largest token file read.
const TOKEN_MAX: u64 = 4096;

/// Runs worker `options.index` of a lab over `options.of` machines until
/// SIGTERM or Ctrl-C (then its part is taken down), or until the lab
/// fails or the coordinator refuses it (an error saying why).
pub fn work(options: &Options, progress: &(dyn Progress + Sync)) -> Result<()> {
    let (lab, text) = crate::up::load(&options.file)?;
    let file = options.file.display().to_string();
    if options.of == 0 || options.index >= options.of {
        return Err(Error::Invalid(format!(
            "--index {} --of {}: the index is from 0 to {}",
            options.index,
            options.of,
            options.of.max(1) - 1
        )));
    }
    let plan = turbonet_topo::machines::plan(&lab, options.of)
        .map_err(|e| Error::Invalid(format!("{file}: {e}")))?;
    let token = read_token(&options.token_file)?;
    let coordinator = resolve(&options.coordinator, options.rendezvous)?;
    let underlay = match options.underlay {
        Some(u) => u,
        None => source_toward(coordinator)?,
    };
    if underlay.is_loopback() && options.of > 1 {
        return Err(Error::Invalid(format!(
            "underlay address {underlay} is this machine's loopback, which no other machine \
             reaches: --coordinator names worker 0 by an address of the network between the \
             machines (or say --underlay)"
        )));
    }
    check_underlay(&plan, underlay)?;
    let hello = Hello {
        lab: lab.name.clone(),
        index: options.index as usize,
        of: options.of as usize,
        version: VERSION.to_owned(),
        partition: u64::from_str_radix(&plan.hash, 16).unwrap_or_default(),
        underlay: IpAddr::V4(underlay),
        busy_ports: busy_ports(&lab.name),
    };
    progress.note(&format!(
        "worker {} of {} of lab {}: partition {}, {} of its {} nodes here, underlay {underlay}",
        options.index,
        options.of,
        lab.name,
        plan.hash,
        plan.parts[options.index as usize].nodes.len(),
        plan.nodes,
    ));
    let worker = Worker {
        options,
        lab: &lab,
        text: &text,
        hello,
        token,
        coordinator,
        progress,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    std::thread::scope(|scope| runtime.block_on(worker.run(scope)))
}

/// The turbonet a worker runs, as it says in its hello: workers of
/// different builds do not mix.
const VERSION: &str = concat!("turbonet ", env!("CARGO_PKG_VERSION"));

/// One worker, running.
struct Worker<'a> {
    options: &'a Options,
    lab: &'a Lab,
    text: &'a str,
    hello: Hello,
    token: String,
    coordinator: SocketAddr,
    progress: &'a (dyn Progress + Sync),
}

/// What the worker's part is doing.
#[derive(Debug, Default)]
struct Part {
    /// Built here, as placed.
    built: Option<Placement>,
    /// The machines whose cut links are down (the coordinator said they
    /// are lost).
    lost: BTreeSet<usize>,
    /// The links this worker took down for lost machines, to bring back.
    downed: BTreeSet<String>,
}

impl<'a> Worker<'a> {
    async fn run<'s>(self, scope: &'s std::thread::Scope<'s, '_>) -> Result<()>
    where
        'a: 's,
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        // Every worker serves its part to the others (and to the lab's
        // commands on any machine); worker 0 coordinates on the same port,
        // its own attendance in-process.
        let listen = self.listen();
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening for the workers on {listen}"))?;
        let parts = crate::workers::parts(
            PartService {
                lab: self.lab.name.clone(),
            },
            self.token.clone(),
        )
        .add_service(crate::workers::LabProxy::new(
            &LabDir::of(&self.lab.name),
            self.token.clone(),
        ));
        let (_coordinating, _serving, mut attendance) = if self.hello.index == 0 {
            let (c, a) = crate::workers::coordinate(
                listener,
                self.token.clone(),
                self.hello.clone(),
                self.settings(),
                Some(parts),
            )?;
            (Some(c), None, a)
        } else {
            let serving = crate::workers::serve_parts(listener, parts);
            tokio::select! {
                a = self.attend(self.options.rendezvous) => (None, Some(serving), a?),
                _ = interrupt.recv() => return Ok(()),
                _ = terminate.recv() => return Ok(()),
            }
        };

        let mut part = Part::default();
        let mut building: Option<oneshot::Receiver<Result<Placement>>> = None;
        // Failures and restores made here (by a client, a flap).
        let (changed, mut changes) = mpsc::channel::<Change>(256);
        let mut following: Option<tokio::task::JoinHandle<()>> = None;
        let mut phase: Option<Phase> = None;
        let mut heartbeat = tokio::time::interval(self.settings().heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let ended: Result<()> = loop {
            tokio::select! {
                _ = interrupt.recv() => break Ok(()),
                _ = terminate.recv() => break Ok(()),
                _ = heartbeat.tick() => {
                    let _ = attendance.tell.try_send(Tell::Heartbeat);
                }
                built = async { building.as_mut().expect("guarded").await }, if building.is_some() => {
                    building = None;
                    let tell = match built.unwrap_or_else(|_| Err(Error::Failed("the build thread ended".to_owned()))) {
                        Ok(placement) => {
                            let reach = crate::workers::Reach {
                                port: self.listen().port(),
                                token: self.token.clone(),
                            };
                            if let Err(e) = reach.save(&LabDir::of(&self.lab.name)) {
                                self.progress.note(&format!(
                                    "could not record how the lab's commands here reach the other machines: {e}"
                                ));
                            }
                            if let Some(f) = following.take() {
                                f.abort();
                            }
                            following =
                                Some(tokio::spawn(follow(self.lab.name.clone(), changed.clone())));
                            part.built = Some(placement);
                            let lost: Vec<usize> = part.lost.iter().copied().collect();
                            for peer in lost {
                                self.carrier(&mut part, peer, false).await;
                            }
                            Tell::Built
                        }
                        Err(e) => {
                            self.progress.note(&format!("could not build this machine's part: {e}"));
                            Tell::BuildFailed(e.to_string())
                        }
                    };
                    let _ = attendance.tell.send(tell).await;
                }
                Some(change) = changes.recv() => {
                    let _ = attendance.tell.send(Tell::Change(change)).await;
                }
                told = attendance.told.recv() => match told {
                    Some(Told::Build { underlays, port }) => {
                        if building.is_some() {
                            continue;
                        }
                        match self.placement(&underlays, port) {
                            Ok(placement) => building = Some(self.build(scope, placement)),
                            Err(e) => {
                                let _ = attendance.tell.send(Tell::BuildFailed(e.to_string())).await;
                            }
                        }
                    }
                    Some(Told::Carrier { peer, up }) => {
                        if up {
                            part.lost.remove(&peer);
                        } else {
                            part.lost.insert(peer);
                        }
                        if part.built.is_some() {
                            self.carrier(&mut part, peer, up).await;
                        }
                    }
                    Some(Told::Change(change)) => {
                        if part.built.is_some() {
                            self.mirror(change).await;
                        }
                    }
                    Some(Told::Repoint { peer, underlay }) => {
                        self.repoint(&mut part, peer, underlay).await;
                    }
                    Some(Told::Phase(now)) => {
                        if let Phase::Failed { reason } = &now {
                            break Err(Error::Failed(format!("the lab failed: {reason}")));
                        }
                        if phase.as_ref() != Some(&now) {
                            self.progress.note(&describe(&now, self.hello.of));
                            phase = Some(now);
                        }
                    }
                    Some(Told::Refused(reason)) => {
                        break Err(Error::Refused(format!("the coordinator refused this worker: {reason}")));
                    }
                    None if self.hello.index == 0 => {
                        break Err(Error::Failed("the coordinator stopped".to_owned()));
                    }
                    None => {
                        // The coordinator went: the part stays up while
                        // this worker finds it again.
                        self.progress.note(&format!(
                            "lost the coordinator at {}; the part here keeps running while this \
                             worker reconnects",
                            self.coordinator
                        ));
                        tokio::select! {
                            a = self.attend(Duration::MAX) => attendance = a?,
                            _ = interrupt.recv() => break Ok(()),
                            _ = terminate.recv() => break Ok(()),
                        }
                    }
                },
            }
        };
        // A build under way rolls itself back on the signal; wait for it.
        if let Some(build) = building
            && let Ok(Ok(placement)) = build.await
        {
            part.built = Some(placement);
        }
        if let Some(f) = following.take() {
            f.abort();
        }
        let down = self.take_down().await;
        match (ended, down) {
            (Err(e), _) | (Ok(()), Err(e)) => Err(e),
            (Ok(()), Ok(())) => Ok(()),
        }
    }

    /// Where this worker listens: `--listen`, else every address on the
    /// coordinator's port (every worker on the same port, each on its own
    /// machine).
    fn listen(&self) -> SocketAddr {
        (self.options.listen)
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], self.coordinator.port())))
    }

    /// The coordinator's patience: the defaults, and this rendezvous.
    fn settings(&self) -> Settings {
        Settings {
            rendezvous: self.options.rendezvous,
            ..Settings::default()
        }
    }

    /// Attends the coordinator, trying again each second for `patience`
    /// while it cannot be reached (a refusal is final).
    async fn attend(&self, patience: Duration) -> Result<Attendance> {
        let endpoint = format!("http://{}", self.coordinator);
        let start = Instant::now();
        let mut said = false;
        loop {
            match crate::workers::attend(&endpoint, &self.token, &self.hello).await {
                Ok(a) => return Ok(a),
                Err(Error::Failed(e)) if start.elapsed() < patience => {
                    if !said {
                        self.progress
                            .note(&format!("waiting for the coordinator ({e})"));
                        said = true;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// This machine's placement, from what the coordinator said.
    fn placement(&self, underlays: &[IpAddr], port: u16) -> Result<Placement> {
        let underlay = underlays
            .iter()
            .map(|u| match u {
                IpAddr::V4(v4) => Ok(*v4),
                IpAddr::V6(_) => Err(Error::Invalid(format!(
                    "underlay address {u}: cut links cross an IPv4 underlay"
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Placement {
            machine: self.hello.index as u32,
            machines: self.hello.of as u32,
            underlay,
            port,
            underlay_delay_ns: Vec::new(),
        })
    }

    /// Builds this machine's part on a thread of its own (`up` runs its
    /// own runtime), keeping one that is up already as placed.
    fn build<'s>(
        &self,
        scope: &'s std::thread::Scope<'s, '_>,
        placement: Placement,
    ) -> oneshot::Receiver<Result<Placement>>
    where
        'a: 's,
    {
        let (done, result) = oneshot::channel();
        let (options, lab, text, progress) = (self.options, self.lab, self.text, self.progress);
        scope.spawn(move || {
            let _ = done.send(build_part(options, lab, text, &placement, progress));
        });
        result
    }

    /// Takes this machine's cut links to machine `peer` down (`up`: back
    /// up) through the lab's daemon: the far ends' carrier.
    async fn carrier(&self, part: &mut Part, peer: usize, up: bool) {
        let Some(placement) = &part.built else { return };
        let links: Vec<String> = match placement.span(self.lab) {
            Ok(span) => (self.lab.fabric.links.iter())
                .filter(|l| matches!(span.reach(l), Reach::Cut(c) if c.far as usize == peer))
                .map(|l| l.name.clone())
                .collect(),
            Err(_) => return,
        };
        let links: Vec<String> = if up {
            links
                .into_iter()
                .filter(|l| part.downed.contains(l))
                .collect()
        } else {
            links
        };
        if links.is_empty() {
            return;
        }
        let dir = LabDir::of(&self.lab.name);
        match off_runtime(move || set_links(&dir, &links, up)).await {
            Ok(changed) => {
                let n = changed.len();
                for l in changed {
                    if up {
                        part.downed.remove(&l);
                    } else {
                        part.downed.insert(l);
                    }
                }
                self.progress.note(&format!(
                    "machine {peer} {}: its {n} cut link{} {}",
                    if up { "is back" } else { "is lost" },
                    if n == 1 { "" } else { "s" },
                    if up { "up again" } else { "down" }
                ));
            }
            Err(e) => self.progress.note(&format!(
                "could not take the cut links to machine {peer} {}: {e}",
                if up { "up" } else { "down" }
            )),
        }
    }

    /// Makes a failure or restore made at another machine here too, so
    /// that every part knows the same failures (a cut link's end here goes
    /// down or up with the far one; routes avoid what failed).
    async fn mirror(&self, change: Change) {
        let dir = LabDir::of(&self.lab.name);
        let what = describe_change(&change);
        let done = off_runtime(move || {
            let mut client = turbonet_api::Client::connect(&dir)?;
            let target = if change.node {
                turbonet_api::Target::Node(change.name)
            } else {
                turbonet_api::Target::Link(change.name)
            };
            if change.up {
                client.restore_as(&target, true)?;
            } else {
                client.fail_as(&target, true)?;
            }
            Ok(())
        })
        .await;
        if let Err(e) = done {
            self.progress
                .note(&format!("could not follow another machine's {what}: {e}"));
        }
    }

    /// Points the cut links to machine `peer` at its new address.
    async fn repoint(&self, part: &mut Part, peer: usize, underlay: IpAddr) {
        let IpAddr::V4(to) = underlay else { return };
        let Some(placement) = &mut part.built else {
            return;
        };
        let Some(from) = placement.underlay.get(peer).copied() else {
            return;
        };
        if from == to {
            return;
        }
        placement.underlay[peer] = to;
        let dir = LabDir::of(&self.lab.name);
        let placed = placement.clone();
        let moved = off_runtime(move || repoint_here(&dir, &placed, from, to)).await;
        match moved {
            Ok(n) => self.progress.note(&format!(
                "machine {peer} moved from {from} to {to}: {n} cut link end{} repointed",
                if n == 1 { "" } else { "s" }
            )),
            Err(e) => self.progress.note(&format!(
                "could not repoint the cut links to machine {peer}: {e}"
            )),
        }
    }

    /// Takes this machine's part down, if one is up.
    async fn take_down(&self) -> Result<()> {
        let name = self.lab.name.clone();
        if !LabDir::of(&name).exists() {
            return Ok(());
        }
        self.progress
            .note(&format!("taking lab {name}'s part here down ..."));
        let down = off_runtime(move || crate::down::down(Some(&name))).await?;
        if let crate::down::Down::Removed {
            namespaces,
            seconds,
            ..
        } = down
        {
            self.progress.note(&format!(
                "lab {}'s part here is down: {namespaces} namespaces removed in {seconds:.2} s",
                self.lab.name
            ));
        }
        Ok(())
    }
}

/// Builds this machine's part of `lab` as `placement` places it: keeps a
/// part already up as placed (the same scenario, a live daemon), takes
/// down one that is stale, refuses a lab of the same name that runs here
/// on its own. A part built anew measures the underlay first
/// ([`underlay_delay`]). The placement the part runs with.
fn build_part(
    options: &Options,
    lab: &Lab,
    text: &str,
    placement: &Placement,
    progress: &dyn Progress,
) -> Result<Placement> {
    let dir = LabDir::of(&lab.name);
    if let Some(st) = dir.load().ok().flatten() {
        let Some(placed) = &st.placement else {
            return Err(Error::Refused(format!(
                "lab {} runs on this machine on its own, not as a part of a lab over machines; \
                 `turbonet down {}` first, or rename the lab",
                lab.name, lab.name
            )));
        };
        let same_scenario = std::fs::read_to_string(dir.scenario_path()).is_ok_and(|t| t == text);
        let alive = st.daemon_pid.is_some_and(process::turbonet_alive);
        if placed.places_as(placement) && same_scenario && alive && st.phase == state::Phase::Ready
        {
            progress.note(&format!(
                "lab {}'s part here is up already, as placed: kept",
                lab.name
            ));
            return Ok(placed.clone());
        }
        progress.note(&format!(
            "lab {}'s part here is stale ({}): taking it down first",
            lab.name,
            if !alive {
                "its daemon is gone"
            } else if !same_scenario {
                "another scenario"
            } else {
                "placed otherwise"
            }
        ));
        crate::down::down(Some(&lab.name))?;
    }
    let placement = Placement {
        underlay_delay_ns: underlay_delay(lab, placement, progress)?,
        ..placement.clone()
    };
    crate::up::up(
        &crate::up::Options {
            file: options.file.clone(),
            threads: options.threads,
            captures_in: None,
            owner: None,
            placement: Some(placement.clone()),
        },
        progress,
    )?;
    Ok(placement)
}

/// A worker's part of the lab, to the others and the lab's commands on any
/// machine.
struct PartService {
    lab: String,
}

impl PartService {
    /// What `read` says of this worker's lab, as JSON, read off the
    /// runtime; refused for another lab.
    async fn read<T: serde::Serialize + Send + 'static>(
        &self,
        lab: &str,
        read: impl FnOnce(&crate::inspect::Running) -> Result<T> + Send + 'static,
    ) -> std::result::Result<String, tonic::Status> {
        if lab != self.lab {
            return Err(tonic::Status::not_found(format!(
                "this worker runs lab {}, not {lab}",
                self.lab
            )));
        }
        let lab = self.lab.clone();
        let value =
            tokio::task::spawn_blocking(move || read(&crate::inspect::running(Some(&lab))?))
                .await
                .map_err(|e| tonic::Status::internal(e.to_string()))?
                .map_err(|e| tonic::Status::new(e.kind().code(), e.to_string()))?;
        serde_json::to_string(&value).map_err(|e| tonic::Status::internal(e.to_string()))
    }
}

#[tonic::async_trait]
impl turbonet_api::proto::parts_server::Parts for PartService {
    async fn check(
        &self,
        request: tonic::Request<turbonet_api::proto::PartCheckRequest>,
    ) -> std::result::Result<tonic::Response<turbonet_api::proto::PartCheckReport>, tonic::Status>
    {
        let r = request.into_inner();
        let sample = (r.sample > 0).then_some(r.sample as usize);
        let timeout = r.timeout.clamp(0.1, 60.0);
        let json = self
            .read(&r.lab, move |running| {
                crate::check::check_sampled(running, timeout, sample)
            })
            .await?;
        Ok(tonic::Response::new(turbonet_api::proto::PartCheckReport {
            json,
        }))
    }

    async fn routes(
        &self,
        request: tonic::Request<turbonet_api::proto::PartRoutesRequest>,
    ) -> std::result::Result<tonic::Response<turbonet_api::proto::PartRoutesReport>, tonic::Status>
    {
        let r = request.into_inner();
        let json = self
            .read(&r.lab, move |running| {
                crate::inspect::routes(&running.lab, &r.node)
            })
            .await?;
        Ok(tonic::Response::new(
            turbonet_api::proto::PartRoutesReport { json },
        ))
    }
}

/// A change as `turbonet` says it (`fail link a--b`).
fn describe_change(change: &Change) -> String {
    format!(
        "{} {} {}",
        if change.up { "restore" } else { "fail" },
        if change.node { "node" } else { "link" },
        change.name
    )
}

/// Follows the daemon of lab `lab` here and sends the failures and
/// restores made here from now on (by a client, a flap; not the timeline,
/// which every machine's daemon runs, nor those mirrored from another
/// machine) to `changed`; follows a restarted daemon again.
async fn follow(lab: String, changed: mpsc::Sender<Change>) {
    let dir = LabDir::of(&lab);
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    loop {
        if let Ok(mut rpc) = turbonet_api::client::connect(&dir).await
            && let Ok(stream) = rpc
                .events(turbonet_api::proto::EventsRequest { follow: true })
                .await
        {
            let mut stream = stream.into_inner();
            while let Ok(Some(event)) = stream.message().await {
                if let Some(change) = made_here(&event, since)
                    && changed.send(change).await.is_err()
                {
                    return;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The failure or restore `event` says was made on this machine since
/// `since` (Unix seconds), if it does.
fn made_here(event: &turbonet_api::proto::Event, since: f64) -> Option<Change> {
    if event.unix < since
        || event.result != "ok"
        || !matches!(event.source.as_str(), "api" | "flap")
    {
        return None;
    }
    let up = match event.kind.as_str() {
        "fail" => false,
        "restore" => true,
        _ => return None,
    };
    let (node, name) = match (event.link.is_empty(), event.node.is_empty()) {
        (false, _) => (false, event.link.clone()),
        (true, false) => (true, event.node.clone()),
        (true, true) => return None,
    };
    Some(Change { node, name, up })
}

/// Fails (`up`: restores) `links` through the lab's daemon; the links it
/// changed. Only links that are up are failed: one down already (a user
/// failed it) is not this worker's to bring back later. Marked as
/// mirrored: each machine follows a lost machine itself, and these are
/// not the lab's failures to tell the others (nor to tell a worker back).
fn set_links(dir: &LabDir, links: &[String], up: bool) -> Result<Vec<String>> {
    let mut client = turbonet_api::Client::connect(dir)?;
    let down: BTreeSet<String> = if up {
        BTreeSet::new()
    } else {
        (client.links(None)?.into_iter())
            .filter(|l| l.down)
            .map(|l| l.name)
            .collect()
    };
    let mut changed = Vec::new();
    for link in links.iter().filter(|l| !down.contains(*l)) {
        let target = turbonet_api::Target::Link(link.clone());
        if up {
            client.restore_as(&target, true)?;
        } else {
            client.fail_as(&target, true)?;
        }
        changed.push(link.clone());
    }
    Ok(changed)
}

/// Points this machine's cut-link ends that send to `from` at `to`, in
/// every namespace of the lab here, and records `placed` as its placement.
fn repoint_here(dir: &LabDir, placed: &Placement, from: Ipv4Addr, to: Ipv4Addr) -> Result<usize> {
    let Some(mut st) = dir.load()? else {
        return Ok(0);
    };
    let mut moved = 0;
    for name in &st.namespaces {
        let Ok(ns) = turbonet_host::namespaces::open(name) else {
            continue;
        };
        moved += turbonet_host::kernel::interfaces::with_handle(&ns, async |h| {
            turbonet_host::kernel::interfaces::repoint_vxlans(&h, from, to).await
        })?;
    }
    st.placement = Some(placed.clone());
    dir.save(&st)?;
    Ok(moved)
}

/// Echo requests to each other machine's underlay address, from which the
/// underlay's one-way delay to it is taken.
const UNDERLAY_ECHOES: u16 = 200;

/// The underlay's one-way delay to every machine of `placement` in
/// nanoseconds, by index: half the median round trip of
/// [`UNDERLAY_ECHOES`] echo requests to its underlay address, 1 ms apart;
/// zero for this machine and for one that does not answer (said). Only
/// machines this one's link engine carries cut links to are asked.
fn underlay_delay(lab: &Lab, placement: &Placement, progress: &dyn Progress) -> Result<Vec<u64>> {
    let mut delay = vec![0; placement.underlay.len()];
    let mut carried = vec![0usize; delay.len()];
    for (_, far) in placement.span(lab)?.engine_cut_links(lab) {
        carried[far as usize] += 1;
    }
    for (m, &links) in carried.iter().enumerate().filter(|(_, n)| **n > 0) {
        let to = placement.underlay[m];
        let times = turbonet_packetio::icmp::round_trips(
            to,
            UNDERLAY_ECHOES,
            Duration::from_millis(1),
            Duration::from_millis(200),
        );
        match times {
            Ok(mut times) if !times.is_empty() => {
                times.sort_unstable();
                let one_way = times[times.len() / 2] / 2;
                delay[m] = one_way.as_nanos() as u64;
                progress.note(&format!(
                    "underlay to machine {m} ({to}): {:.1} us one way (half the median round \
                     trip of {} echoes), taken off the delay of the {links} cut link{} this \
                     machine's engine carries to it",
                    one_way.as_secs_f64() * 1e6,
                    times.len(),
                    if links == 1 { "" } else { "s" }
                ));
            }
            Ok(_) => progress.note(&format!(
                "underlay to machine {m} ({to}): no echo answered, so the delay of the {links} \
                 cut link{} this machine's engine carries to it is the model's plus the \
                 underlay's",
                if links == 1 { "" } else { "s" }
            )),
            Err(e) => progress.note(&format!(
                "underlay to machine {m} ({to}) not measured ({e}): the delay of its cut links \
                 is the model's plus the underlay's"
            )),
        }
    }
    Ok(delay)
}

/// Runs blocking `f` (which may run a runtime of its own) on a thread.
async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let (done, result) = oneshot::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    result
        .await
        .unwrap_or_else(|_| Err(Error::Failed("a worker thread ended".to_owned())))
}

/// A line on the lab's phase.
fn describe(phase: &Phase, of: usize) -> String {
    let list = |v: &[usize]| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match phase {
        Phase::Gathering { missing } => format!("waiting for worker(s) {}", list(missing)),
        Phase::Building { waiting } => {
            format!("building: worker(s) {} not done yet", list(waiting))
        }
        Phase::Running => format!("the lab runs on all {of} machines"),
        Phase::Degraded { lost } => format!(
            "degraded: machine(s) {} lost, their cut links down",
            list(lost)
        ),
        Phase::Failed { reason } => format!("the lab failed: {reason}"),
    }
}

/// Reads the lab's token: one line of printable ASCII, in a file no one
/// but its owner may read (as ssh asks of a key).
fn read_token(path: &Path) -> Result<String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let file = std::fs::File::open(path).with_context(|| format!("--token-file {shown}"))?;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(Error::Refused(format!(
            "--token-file {shown}: others may read it (mode {:o}); `chmod 600 {shown}`",
            mode & 0o777
        )));
    }
    let mut text = String::new();
    file.take(TOKEN_MAX + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("--token-file {shown}: not text"))?;
    let token = text.trim();
    if text.len() as u64 > TOKEN_MAX
        || token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(Error::Invalid(format!(
            "--token-file {shown}: a token is one word of printable ASCII, at most {TOKEN_MAX} \
             bytes (e.g. `head -c 32 /dev/urandom | base64 > {shown}`)"
        )));
    }
    Ok(token.to_owned())
}

/// The coordinator's address, resolving `HOST:PORT` until it resolves
/// (a Kubernetes Service publishes a pod's name only once it exists) or
/// `patience` runs out.
fn resolve(coordinator: &str, patience: Duration) -> Result<SocketAddr> {
    let start = Instant::now();
    loop {
        let error = match coordinator.to_socket_addrs() {
            Ok(mut addrs) => match addrs.find(SocketAddr::is_ipv4) {
                Some(a) => return Ok(a),
                None => "no IPv4 address".to_owned(),
            },
            Err(e) => e.to_string(),
        };
        if !coordinator.contains(':') || start.elapsed() >= patience {
            return Err(Error::Invalid(format!(
                "--coordinator {coordinator}: {error} (HOST:PORT, e.g. 198.18.0.1:7789)"
            )));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The address this machine reaches `to` from: its underlay address.
fn source_toward(to: SocketAddr) -> Result<Ipv4Addr> {
    let socket = UdpSocket::bind(("0.0.0.0", 0))?;
    socket
        .connect(to)
        .with_context(|| format!("finding a route to the coordinator at {to}"))?;
    match socket.local_addr()?.ip() {
        IpAddr::V4(a) if !a.is_unspecified() => Ok(a),
        other => Err(Error::Failed(format!(
            "no IPv4 source address toward {to} ({other}); say --underlay"
        ))),
    }
}

/// Refuses an underlay whose MTU some cut link's frames would not cross
/// whole (the kernel would fragment them silently).
fn check_underlay(plan: &MachinePlan, underlay: Ipv4Addr) -> Result<()> {
    let ns = turbonet_host::namespaces::open_current()?;
    let holding = turbonet_host::kernel::interfaces::with_handle(&ns, async |h| {
        turbonet_host::kernel::interfaces::holding(&h, underlay).await
    })?;
    let Some((device, mtu)) = holding else {
        return Err(Error::Invalid(format!(
            "underlay address {underlay} is on no interface of this machine"
        )));
    };
    plan.fits_underlay(mtu)
        .map_err(|e| Error::Refused(format!("the underlay ({device}, MTU {mtu}): {e}")))
}

/// The UDP ports this machine's other labs' cut links use.
fn busy_ports(lab: &str) -> Vec<u16> {
    let mut ports: Vec<u16> = state::labs(Path::new(state::RUN_DIR))
        .unwrap_or_default()
        .iter()
        .filter(|name| name.as_str() != lab)
        .filter_map(|name| LabDir::of(name).load().ok().flatten())
        .filter_map(|st| st.placement.map(|p| p.port))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_others_may_read_is_refused_naming_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("tn-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "s3cret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let open = read_token(&path).unwrap_err().to_string();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let read = read_token(&path);
        std::fs::write(&path, "two words").unwrap();
        let spaced = read_token(&path).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(open.contains("chmod 600"), "{open}");
        assert_eq!(read.unwrap(), "s3cret");
        assert!(spaced.contains("one word"), "{spaced}");
    }

    #[test]
    fn phases_read_as_sentences() {
        assert_eq!(
            describe(&Phase::Degraded { lost: vec![1, 2] }, 3),
            "degraded: machine(s) 1, 2 lost, their cut links down"
        );
        assert_eq!(
            describe(&Phase::Running, 3),
            "the lab runs on all 3 machines"
        );
    }
}
