//! `turbonet validate` and `turbonet up`: a scenario checked, then built
//! phase by phase (each timed and reported through [`Progress`]), its
//! daemon started, and on any failure, or Ctrl-C, everything taken back.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use turbonet_topo::{Lab, RoutingMode, Target};

use crate::bail;
use crate::carrier::Carrier;
use crate::daemon;
use crate::dataplane::Builder;
use crate::dataplane::build::{Build, Host, phase};
use crate::dataplane::netns::externals;
use crate::dataplane::p4::{soft, switches};
use crate::error::{Context, Error, Result};
use crate::limits;
use crate::progress::Progress;
use crate::routes::bgp;
use crate::span::Span;
use crate::state::{LabDir, LabState, Phase, Stopwatch, Timing};
use turbonet_host::kernel::{Kernel, Netlink};
use turbonet_host::{namespaces, process};

/// Reads and parses a scenario file: the lab and the file's text, or its
/// located diagnostics ([`Error::Scenario`]).
pub fn load(path: &Path) -> Result<(Lab, String)> {
    let text = fs::read_to_string(path)
        .map_err(|e| Error::Invalid(format!("cannot read {}: {e}", path.display())))?;
    let origin = path.display().to_string();
    match turbonet_topo::parse(&origin, &text) {
        Ok(lab) => Ok((lab, text)),
        Err(errors) => Err(Error::Scenario {
            origin,
            errors: Box::new(errors),
        }),
    }
}

/// A valid scenario, as `turbonet validate` describes it.
#[derive(Debug)]
pub struct Validated {
    /// The lab it describes.
    pub lab: Lab,
    /// Its counts, ranges and oversubscription.
    pub summary: turbonet_topo::summary::Summary,
    /// Why `up` cannot bring it up on this machine, if it cannot.
    pub not_here: Option<String>,
}

/// `turbonet validate FILE`: the scenario checked (no root needed).
pub fn validate(path: &Path) -> Result<Validated> {
    let (lab, _) = load(path)?;
    Ok(Validated {
        summary: turbonet_topo::summary(&lab),
        not_here: runnable(&lab).err(),
        lab,
    })
}

/// How every link of a lab would be carried on this machine, or why this
/// build cannot bring the (valid) lab up here.
pub fn runnable(lab: &Lab) -> Result<Vec<Carrier>, String> {
    runnable_for(lab, false)
}

/// [`runnable`], for a lab run on a student's behalf when `student`: its
/// links never go to the kernel engine, which bounds what a link holds in
/// frames (`fq`'s limit), not in bytes as the userspace engine does (256
/// MiB a direction), and a student's link must not hold the machine's
/// memory.
fn runnable_for(lab: &Lab, student: bool) -> Result<Vec<Carrier>, String> {
    match lab.target {
        Target::Netns => {}
        Target::Soft => {
            if let Some(why) = soft::unsupported(lab) {
                return Err(why);
            }
            soft::map(lab)?;
            return crate::carrier::carriers(lab, &crate::carrier::Qdiscs::none());
        }
        Target::P4rt => {
            if let Some(why) = switches::unsupported(lab) {
                return Err(why);
            }
            if lab.mgmt.is_some() && !switches::local(lab) {
                return Err("`[mgmt]` joins nodes that run on this machine, and every switch of this lab is remote (its hosts are too)".to_owned());
            }
            switches::map(lab)?;
            return crate::carrier::carriers(lab, &crate::carrier::Qdiscs::none());
        }
    }
    if let Some(err) = agents_missing(lab) {
        return Err(err);
    }
    let mut qdiscs = crate::carrier::Qdiscs::of_this_machine();
    if student {
        qdiscs = qdiscs.without_kernel_engine(
            "a lab run for a student: the kernel engine bounds what a link holds in frames, not \
             in bytes",
        );
    }
    crate::carrier::carriers(lab, &qdiscs)
}

/// Why the lab's routing agents cannot run on this machine, if they cannot.
fn agents_missing(lab: &Lab) -> Option<String> {
    if lab.routing.mode != RoutingMode::Bgp {
        return None;
    }
    let mut kinds: Vec<turbonet_topo::Agent> = lab
        .fabric
        .switches()
        .map(|n| lab.routing.agent_of(n.id))
        .collect();
    kinds.sort_by_key(|k| k.as_str());
    kinds.dedup();
    kinds.into_iter().find_map(crate::routes::routers::missing)
}

/// The open files `up` and its daemon need for `lab`, and what needs most
/// (see [`limits::fds_needed`]); the built-in BGP speakers count only when
/// the daemon runs them itself (see [`bgp::shard::count`]).
fn fds_needed(lab: &Lab, carriers: &[Carrier]) -> (usize, &'static str) {
    let daemon = limits::daemon_fds(
        lab.fabric.switches().count(),
        carriers.iter().filter(|c| c.is_userspace()).count(),
    );
    let speakers = if bgp::shard::count(lab, daemon) == 1 {
        bgp::shard::fds(lab)
    } else {
        0
    };
    limits::fds_needed(lab.fabric.nodes.len() + 2, daemon, speakers)
}

/// Checks what `up` needs from the machine before touching anything.
fn check_capabilities(lab: &Lab, span: &Span, carriers: &[Carrier]) -> Result<()> {
    if !process::is_root() {
        return Err(Error::Refused(
            "`up` needs root (network namespaces and links); run it with sudo".to_owned(),
        ));
    }
    if !Path::new("/proc/self/ns/net").exists() {
        return Err(Error::Refused(
            "this kernel has no network namespaces (CONFIG_NET_NS)".to_owned(),
        ));
    }
    let (need, why) = fds_needed(lab, carriers);
    limits::raise_fd_limit(need, &format!("lab {}: {why}", lab.name))?;
    let taken: Vec<String> = lab
        .fabric
        .nodes
        .iter()
        .map(|n| crate::names::node_namespace(&lab.name, &n.name))
        .filter(|ns| namespaces::exists(ns))
        .collect();
    if let Some(first) = taken.first() {
        return Err(Error::Refused(format!(
            "{} namespace(s) of lab {} already exist (first: {first}) but the lab has no \
             state; they were not created by this turbonet. Remove them or rename the lab",
            taken.len(),
            lab.name
        )));
    }
    externals::check(lab, span)?;
    Ok(())
}

/// The eBPF objects of the scenario's filters (relative to the scenario
/// file), by filter name; each must be a readable file.
fn filter_objects(lab: &Lab, scenario: &Path) -> Result<Vec<(String, PathBuf)>> {
    let base = scenario.parent().unwrap_or(Path::new("."));
    lab.filters
        .iter()
        .filter_map(|f| match &f.kind {
            turbonet_topo::FilterKind::Ebpf { object, .. } => Some((f, base.join(object))),
            turbonet_topo::FilterKind::Nft { .. } => None,
        })
        .map(|(f, path)| {
            if path.is_file() {
                Ok((f.name.clone(), path))
            } else {
                Err(Error::Invalid(format!(
                    "{}: filter {}: no eBPF object {} (`ebpf` is relative to the scenario file)",
                    scenario.display(),
                    f.name,
                    path.display()
                )))
            }
        })
        .collect()
}

/// Copies the filters' eBPF objects into the lab's directory, where the
/// daemon loads them (also after a restart, whatever became of the files
/// the scenario named).
fn copy_filter_objects(dir: &LabDir, objects: &[(String, PathBuf)]) -> io::Result<()> {
    for (name, path) in objects {
        let to = crate::dataplane::netns::filters::object_path(dir, name);
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(path, &to)?;
    }
    Ok(())
}

/// What `up` is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The scenario file.
    pub file: PathBuf,
    /// Threads that create namespaces (default: one per core).
    pub threads: Option<usize>,
    /// Where `[[capture]]` files with relative names go (default: the
    /// current directory).
    pub captures_in: Option<PathBuf>,
    /// The user the lab is started for (by `turbonet serve`), if not
    /// root: recorded before anything is created, and the owner of a user
    /// namespace of the lab's that owns its nodes' namespaces.
    pub owner: Option<Owner>,
    /// The part of a lab over several machines to build here (none: all
    /// of it).
    pub placement: Option<crate::span::Placement>,
}

/// A user a lab is started for, and their primary group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// Their user id.
    pub uid: u32,
    /// Their primary group's id.
    pub gid: u32,
}

/// A lab `up` brought up.
#[derive(Debug)]
pub struct Up {
    /// The lab.
    pub lab: Lab,
    /// Its state, with the time of every phase.
    pub state: LabState,
}

/// `turbonet up FILE`: builds the scenario's fabric and starts its daemon;
/// returns once it is routed. A failure half way (or Ctrl-C, SIGTERM)
/// removes everything created so far ([`Error::RolledBack`]).
pub fn up(options: &Options, progress: &dyn Progress) -> Result<Up> {
    let (lab, text) = load(&options.file)?;
    let span = crate::span::Placement::span_of(options.placement.as_ref(), &lab)
        .map_err(|e| Error::Invalid(format!("{}: {e}", options.file.display())))?;
    let carriers = runnable_for(&lab, options.owner.is_some())
        .map(|c| span.carriers(&lab, &c))
        .map_err(|reason| Error::Invalid(format!("{}: {reason}", options.file.display())))?;
    let dir = LabDir::of(&lab.name);
    if dir.exists() {
        return Err(Error::Refused(match dir.load().ok().flatten() {
            Some(st) if st.phase == Phase::Building && !process::turbonet_alive(st.pid) => format!(
                "lab {} was interrupted while being built; `turbonet down {}` removes what it created",
                lab.name, lab.name
            ),
            Some(st) => format!(
                "lab {} is already up (from {}, phase {}); `turbonet down {}` first, or rename the lab",
                lab.name,
                st.scenario.display(),
                st.phase,
                lab.name
            ),
            None => format!(
                "lab {} has a state directory but no state; `turbonet down {}` removes it",
                lab.name, lab.name
            ),
        }));
    }
    check_capabilities(&lab, &span, &carriers)?;
    let objects = filter_objects(&lab, &options.file)?;
    let total = Stopwatch::start();
    let neighbours =
        limits::neighbours_needed(lab.fabric.links.len() * 2 + lab.fabric.externals.len());
    if let Some(note) = limits::raise_neighbour_limits(neighbours)? {
        progress.note(&note);
    }

    let watch = Stopwatch::start();
    let routes = up_routes(&lab);
    let route_count: usize = routes.iter().map(Vec::len).sum();
    let plan_timing = Timing {
        phase: "plan".into(),
        detail: format!(
            "{}, {} links, {} routes",
            describe_nodes(&lab),
            lab.fabric.links.len(),
            route_count
        ),
        seconds: watch.seconds(),
    };

    // Claim the name and record everything we are about to create before
    // creating any of it.
    match dir.claim() {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(Error::Refused(format!(
                "lab {} is already up (another `up` just claimed it)",
                lab.name
            )));
        }
        Err(e) => return Err(e).context(format!("creating {}", dir.path().display())),
    }
    // Theirs from the start: their node limit counts it at once.
    let userns = match options.owner {
        None => None,
        Some(owner) => {
            let made = dir
                .save_owner(owner.uid)
                .and_then(|()| namespaces::new_user_namespace(owner.uid, owner.gid));
            match made {
                Ok(ns) => Some(ns),
                Err(e) => {
                    let _ = dir.remove();
                    return Err(e).context("creating the lab's user namespace");
                }
            }
        }
    };
    let builder = Builder::of(&lab)?;
    let namespaces = builder.namespaces(&lab, &span, &carriers);
    let scenario = fs::canonicalize(&options.file).unwrap_or_else(|_| options.file.clone());
    let mut state = LabState::new(&lab.name, scenario, namespaces);
    state.neighbours = neighbours;
    state.carriers = carriers.clone();
    state.placement = options.placement.clone();
    state.mapping = builder.mapping().cloned();
    state.externals = externals::plan(&lab, &span)?;
    let base = match &options.captures_in {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    state.captures = lab.captures.iter().map(|c| base.join(&c.file)).collect();
    let saved = dir
        .save_scenario(&text)
        .and_then(|()| copy_filter_objects(&dir, &objects))
        .and_then(|()| dir.save_hosts(&crate::hostnames::hosts_file(&lab, span.share.machine)))
        .and_then(|()| dir.save(&state));
    if let Err(e) = saved {
        let _ = dir.remove();
        return Err(e).context("writing lab state");
    }
    progress.done(&plan_timing);
    state.timings.push(plan_timing);

    let threads = options
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, std::num::NonZero::get));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let built = runtime.block_on(async {
        // Installed before building starts, so Ctrl-C or SIGTERM at any
        // point rolls back instead of leaving the fabric half built. (A
        // signal during the namespace phase takes effect when it ends.)
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        tokio::select! {
            built = build(&builder, &lab, &span, &carriers, &routes, threads, userns, progress, &dir, &mut state) => built,
            _ = interrupt.recv() => Err(Error::Failed("interrupted".to_owned())),
            _ = terminate.recv() => Err(Error::Failed("terminated".to_owned())),
        }
    });
    drop(runtime);
    if let Err(e) = built {
        progress.note(&format!("rolling back lab {} ...", lab.name));
        let rollback = crate::down::teardown(&dir, &mut state).err();
        return Err(Error::RolledBack {
            lab: lab.name.clone(),
            source: Box::new(e),
            rollback: rollback.map(Box::new),
        });
    }
    state.phase = Phase::Ready;
    state.timings.push(Timing {
        phase: "total".into(),
        detail: "up and routed".into(),
        seconds: total.seconds(),
    });
    dir.save(&state)?;
    Ok(Up { lab, state })
}

/// Role counts for messages ("80 switches, 128 hosts").
pub fn describe_nodes(lab: &Lab) -> String {
    let hosts = lab.fabric.hosts().count();
    let switches = lab.fabric.nodes.len() - hosts;
    format!("{switches} switches, {hosts} hosts")
}

/// The routes `up` installs: every static route, but with BGP only those
/// outside the fabric (host ports, defaults, externals): the fabric's are
/// the agents' to install.
fn up_routes(lab: &Lab) -> Vec<Vec<turbonet_routing::Route>> {
    crate::routes::compute(lab, &turbonet_routing::Failures::default())
}

/// The building phases of `up`, each timed, by `builder`; the nodes'
/// namespaces owned by `userns` if given.
#[allow(clippy::too_many_arguments)]
async fn build(
    builder: &Builder,
    lab: &Lab,
    span: &Span,
    carriers: &[Carrier],
    routes: &[Vec<turbonet_routing::Route>],
    threads: usize,
    userns: Option<std::os::fd::OwnedFd>,
    progress: &dyn Progress,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    let mut kernel = userns.map_or_else(Netlink::new, Netlink::owned_by);
    let host = Host {
        threads,
        hash_seed: namespaces::has_sysctl("net/ipv4/fib_multipath_hash_seed"),
    };
    let mut cx = Build {
        lab,
        span,
        carriers,
        routes,
        host,
        progress,
        dir,
        state,
    };
    builder.kernel(&mut kernel, &mut cx).await?;
    builder.start(&mut cx).await?;
    start_routers(lab, progress, dir, state)?;
    let phase = |name: &str, detail: String, state: &mut LabState, seconds: f64| {
        phase(progress, name, detail, state, seconds);
    };

    // The daemon owns what keeps running: the control API, the link
    // engine, the timeline, the agents, the P4Runtime session.
    progress.start("daemon");
    let watch = Stopwatch::start();
    state.epoch_unix = Some(crate::events::unix_now());
    dir.save(state)?;
    let pid = daemon::spawn(&lab.name, dir)?;
    state.daemon_pid = Some(pid);
    dir.save(state)?;
    let impaired = carriers.iter().filter(|c| c.is_userspace()).count();
    let in_kernel = carriers.iter().filter(|c| **c == Carrier::Bpf).count();
    let ready = {
        let (dir, timeout) = (dir.clone(), ready_timeout(lab, impaired));
        tokio::task::spawn_blocking(move || daemon::wait_ready(&dir, pid, timeout)).await??
    };
    phase(
        "daemon",
        if impaired + in_kernel > 0 {
            let mut engines = Vec::new();
            if impaired > 0 {
                engines.push(format!("link engine for {impaired} impaired links"));
            }
            if in_kernel > 0 {
                engines.push(format!("kernel engine (bpf+fq) for {in_kernel}"));
            }
            format!(
                "pid {}: control API, {}",
                ready.daemon_pid,
                engines.join(", ")
            )
        } else if let Some(what) = builder.controls() {
            format!(
                "pid {}: control API, primary controller of {what}",
                ready.daemon_pid
            )
        } else {
            format!("pid {}: control API", ready.daemon_pid)
        },
        state,
        watch.seconds(),
    );

    if lab.routing.mode == RoutingMode::Bgp {
        progress.start("bgp");
        let watch = Stopwatch::start();
        let report = wait_converged(lab, dir, progress).await?;
        let (up, sessions) = report.sessions();
        let routes = report.routes();
        let established = if sessions > 0 {
            format!(", {up}/{sessions} sessions established")
        } else {
            String::new()
        };
        // What the built-in agents wrote to reach it, and what that cost
        // where the routes are kept.
        let writes = report
            .per_route(|c| c.fib_writes)
            .zip(report.per_route(|c| c.fib_requests))
            .map(|(w, r)| format!(", {w:.2} FIB writes ({r:.2} requests) a route"))
            .unwrap_or_default();
        // Sessions lost on the way: a machine too loaded for the timers.
        let expired = match report.total(|c| c.hold_expiries) {
            Some(0) | None => String::new(),
            Some(1) => ", 1 session lost to its Hold timer".to_owned(),
            Some(n) => format!(", {n} sessions lost to their Hold timer"),
        };
        phase(
            "bgp",
            format!(
                "converged in {:.2} s: {routes} routes in {} switches{established}{writes}{expired}",
                report.convergence_time().unwrap_or(report.elapsed),
                report.speakers.len()
            ),
            state,
            watch.seconds(),
        );
    }
    Ok(())
}

/// How long the daemon may take to answer: it opens a route watcher per
/// switch, two packet sockets per impaired link and the agents, so the
/// wait grows with the fabric (30 s for a small one; it ends early if the
/// daemon exits).
fn ready_timeout(lab: &Lab, impaired: usize) -> std::time::Duration {
    let switches = lab.fabric.switches().count() as u64;
    std::time::Duration::from_secs(30)
        + std::time::Duration::from_millis(20 * switches + 5 * impaired as u64)
}

/// BGP with FRR or BIRD switches (`netns` only: the P4 targets run the
/// built-in agents): their daemons start once the fabric is routed.
fn start_routers(
    lab: &Lab,
    progress: &dyn Progress,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    if lab.routing.mode == RoutingMode::Bgp
        && lab
            .fabric
            .switches()
            .any(|n| lab.routing.agent_of(n.id) != turbonet_topo::Agent::Builtin)
    {
        progress.start("routers");
        let watch = Stopwatch::start();
        let (frr, bird) = crate::routes::routers::start(lab, dir, state)?;
        phase(
            progress,
            "routers",
            format!("FRR on {frr} switch(es), BIRD on {bird}"),
            state,
            watch.seconds(),
        );
    }
    Ok(())
}

/// A rate, in routes taken in by session ends per second, that the
/// built-in agents beat on a 2-core machine while the fabric converges
/// (their FIB writes, not their decisions, take most of the time).
const RIB_ENTRIES_PER_SECOND: f64 = 200_000.0;

/// Waits until every switch's FIB is what the BGP plan says, showing how
/// many have converged; fails with the switches that have not after a
/// time that grows with the fabric: a minute, a second per four switches,
/// and a second per [`RIB_ENTRIES_PER_SECOND`] routes its sessions carry.
async fn wait_converged(
    lab: &Lab,
    dir: &LabDir,
    progress: &dyn Progress,
) -> Result<crate::routes::bgp::BgpReport> {
    let switches = lab.fabric.switches().count();
    let mut timeout = std::time::Duration::from_secs(60 + switches as u64 / 4);
    let mut sized = false;
    let started = std::time::Instant::now();
    let mut rpc = turbonet_api::client::connect(dir).await?;
    loop {
        let report = rpc
            .show_bgp(turbonet_api::proto::ShowBgpRequest {
                node: String::new(),
                summary: true,
            })
            .await
            .map_err(Error::from)
            .context("asking the lab daemon how far BGP has come")?;
        let report = turbonet_api::bgp_from_proto(report.get_ref());
        if report.converged() {
            return Ok(report);
        }
        if !sized && report.speakers.iter().all(|s| s.expected > 0) {
            // Each session end takes in a route per prefix at least once.
            let entries = report
                .speakers
                .iter()
                .map(|s| s.sessions_total * s.expected)
                .sum::<usize>();
            timeout += std::time::Duration::from_secs_f64(entries as f64 / RIB_ENTRIES_PER_SECOND);
            sized = true;
        }
        let done = report.speakers.iter().filter(|s| s.converged).count();
        progress.update(
            "bgp",
            &format!("{done}/{} switches converged", report.speakers.len()),
        );
        if started.elapsed() >= timeout {
            let stuck: Vec<String> = report
                .speakers
                .iter()
                .filter(|s| !s.converged)
                .take(5)
                .map(|s| {
                    format!(
                        "{} ({}): {}/{} routes, {}/{} sessions established",
                        s.node, s.agent, s.routes, s.expected, s.sessions_up, s.sessions_total
                    )
                })
                .collect();
            bail!(
                "BGP did not converge within {timeout:?}: {done}/{} switches converged; not yet: {}{} \
                 (the lab daemon's log, {}, has details)",
                report.speakers.len(),
                stuck.join("; "),
                if report.speakers.len() - done > stuck.len() {
                    "; ..."
                } else {
                    ""
                },
                dir.path().join("daemon.log").display()
            );
        }
        tokio::time::sleep(poll_interval(started.elapsed())).await;
    }
}

/// How long to wait between two questions of how far BGP has come, after
/// `waited`: 50 ms at first, then a twentieth of the wait so far (at most
/// 500 ms), so that a thousand switches converging for minutes are not
/// kept busy answering. The convergence time is the daemon's measure and
/// does not depend on it.
pub fn poll_interval(waited: std::time::Duration) -> std::time::Duration {
    (waited / 20).clamp(
        std::time::Duration::from_millis(50),
        std::time::Duration::from_millis(500),
    )
}

/// Runs the kernel side of `up` for `span`'s part of `lab` through
/// `kernel`, on one thread, with a scratch lab directory standing in for
/// the lab's and no daemon: a recorder writes the requests down (nothing
/// is created); a real kernel makes them (the tests of shares build so).
/// `carriers`: the lab's ([`Span::carriers`] makes them this machine's).
pub fn dry_build<K: Kernel>(
    kernel: &mut K,
    lab: &Lab,
    span: &Span,
    carriers: &[Carrier],
    hash_seed: bool,
    progress: &dyn Progress,
) -> Result<()> {
    if !lab.fabric.externals.is_empty() {
        bail!("a dry build attaches no interface of the machine");
    }
    let routes = up_routes(lab);
    // Tests run in parallel: each build has a directory of its own.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = std::env::temp_dir().join(format!("turbonet-dry-{}-{n}", std::process::id()));
    let dir = LabDir::new(&root, &lab.name);
    dir.claim()?;
    let mut state = LabState::new(&lab.name, PathBuf::new(), Vec::new());
    let carriers = span.carriers(lab, carriers);
    let mut cx = Build {
        lab,
        span,
        carriers: &carriers,
        routes: &routes,
        host: Host {
            threads: 1,
            hash_seed,
        },
        progress,
        dir: &dir,
        state: &mut state,
    };
    let built = Builder::of(lab).and_then(|builder| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(builder.kernel(kernel, &mut cx))
    });
    let _ = fs::remove_dir_all(&root);
    built
}

#[cfg(test)]
mod characterisation {
    //! What `up` asks of the kernel for every bundled scenario, recorded
    //! and compared with `lab/tests/golden/up/<scenario>.txt`, so a
    //! change of how the fabric is built shows without root. Large fabrics
    //! are recorded as counts per request and a digest of every request.
    //! Regenerate with `UPDATE_GOLDEN=1 cargo test -p turbonet-lab
    //! characterisation`.

    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::*;
    use turbonet_host::kernel::Recorder;

    /// Above this many requests a scenario's golden file is a summary.
    const FULL_UP_TO: usize = 6_000;

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("in the workspace")
            .to_path_buf()
    }

    /// FNV-1a, 64 bits: a stable digest of the requests.
    fn digest(lines: &[String]) -> u64 {
        use turbonet_topo::seed::{fnv1a64, fnv1a64_extend};
        lines.iter().fold(fnv1a64(b""), |h, line| {
            fnv1a64_extend(fnv1a64_extend(h, line.as_bytes()), b"\n")
        })
    }

    /// The requests `up` makes of the kernel for the scenario at `path`.
    fn record(path: &Path) -> Vec<String> {
        record_text(path, &std::fs::read_to_string(path).unwrap())
    }

    /// The requests `up` makes of the kernel for scenario `text`, read
    /// from `path`.
    fn record_text(path: &Path, text: &str) -> Vec<String> {
        let lab = turbonet_topo::parse(&path.display().to_string(), text).unwrap();
        // As on a machine without netem, with per-namespace hash seeds.
        let carriers = crate::carrier::carriers(&lab, &crate::carrier::Qdiscs::none()).unwrap();
        let mut kernel = Recorder::new();
        dry_build(
            &mut kernel,
            &lab,
            &Span::whole(&lab),
            &carriers,
            true,
            &crate::progress::Quiet,
        )
        .unwrap();
        kernel.lines()
    }

    /// The golden text: every request, or for a large fabric the count of
    /// each kind of request and the digest of all.
    fn golden_text(lines: &[String]) -> String {
        if lines.len() <= FULL_UP_TO {
            return lines.join("\n") + "\n";
        }
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for line in lines {
            *kinds
                .entry(line.split(' ').next().unwrap_or(""))
                .or_default() += 1;
        }
        let mut out = format!(
            "# {} requests, digest {:016x} (FNV-1a of every line)\n",
            lines.len(),
            digest(lines)
        );
        for (kind, n) in kinds {
            out.push_str(&format!("{kind} {n}\n"));
        }
        out.push_str("# the first requests of each kind:\n");
        let mut shown: BTreeMap<&str, usize> = BTreeMap::new();
        for line in lines {
            let kind = line.split(' ').next().unwrap_or("");
            let n = shown.entry(kind).or_default();
            if *n < 3 {
                *n += 1;
                let cut = line.char_indices().nth(160).map_or(line.len(), |(i, _)| i);
                out.push_str(&line[..cut]);
                out.push_str(if cut < line.len() { " ...\n" } else { "\n" });
            }
        }
        out
    }

    /// Machine `i`'s underlay address in these tests.
    fn underlay(i: u32) -> std::net::Ipv4Addr {
        std::net::Ipv4Addr::new(198, 18, 0, 1 + i as u8)
    }

    /// The requests of each machine's part of scenario `text` (read from
    /// `path`) over `machines` machines, the plan and the lab.
    fn record_parts(
        path: &Path,
        text: &str,
        machines: u32,
    ) -> (Vec<Vec<String>>, turbonet_topo::machines::MachinePlan, Lab) {
        let lab = turbonet_topo::parse(&path.display().to_string(), text).unwrap();
        let carriers = crate::carrier::carriers(&lab, &crate::carrier::Qdiscs::none()).unwrap();
        let plan = turbonet_topo::machines::plan(&lab, machines).unwrap();
        let parts = (0..machines)
            .map(|i| {
                let span =
                    Span::of(&plan, i, (0..machines).map(underlay).collect(), 14790).unwrap();
                let mut kernel = Recorder::new();
                let quiet = &crate::progress::Quiet;
                dry_build(&mut kernel, &lab, &span, &carriers, true, quiet).unwrap();
                kernel.lines()
            })
            .collect();
        (parts, plan, lab)
    }

    /// The lines of `lines` of kind `kind` (their first word), sorted.
    fn of_kind<'a>(lines: impl IntoIterator<Item = &'a String>, kind: &str) -> Vec<&'a str> {
        let prefix = format!("{kind} ");
        let mut out: Vec<&str> = (lines.into_iter())
            .map(String::as_str)
            .filter(|l| l.starts_with(&prefix))
            .collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn a_lab_over_machines_builds_each_node_once_with_the_addresses_and_routes_of_one_machine() {
        for (file, machines) in [
            ("fat-tree-k4", 2),
            ("fat-tree-k4", 3),
            ("hpn", 2),
            ("custom-triangle", 3),
        ] {
            let path = workspace().join(format!("scenarios/{file}.toml"));
            let text = std::fs::read_to_string(&path).unwrap();
            let whole = record(&path);
            let (parts, plan, lab) = record_parts(&path, &text, machines);
            let all: Vec<&String> = parts.iter().flatten().collect();
            let at = format!("{file} over {machines}");
            // Every node's namespace once, with its sysctls; every address,
            // loopback, carrier wait and route as on one machine.
            for kind in ["netns", "addr", "up", "carrier", "route", "rule"] {
                assert_eq!(
                    of_kind(all.iter().copied(), kind),
                    of_kind(&whole, kind),
                    "{at}: {kind}"
                );
            }
            // A link within a machine is its veth pair there; a cut link
            // is a VXLAN device at each end instead.
            let cut: Vec<&str> = plan.cut_links.iter().map(|c| c.link.as_str()).collect();
            assert!(!cut.is_empty(), "{at}");
            let veths = of_kind(all.iter().copied(), "veth");
            let whole_veths = of_kind(&whole, "veth");
            assert_eq!(veths.len() + cut.len(), whole_veths.len(), "{at}");
            assert!(veths.iter().all(|v| whole_veths.contains(v)), "{at}");
            assert!(veths.windows(2).all(|w| w[0] != w[1]), "{at}: a veth twice");
            for c in &plan.cut_links {
                let link = lab.fabric.links.iter().find(|l| l.name == c.link).unwrap();
                for side in 0..2 {
                    let near = &link.ends[side];
                    let node = &lab.fabric.node(near.node).name;
                    let port = crate::names::port_index(&lab, near.node, link.id).unwrap();
                    let [m, f] = [c.machines[side], c.machines[1 - side]];
                    let line = format!(
                        "vxlan tn-{}-{node} {}#{port} vni {} {} -> {} port 14790 mtu {}",
                        lab.name,
                        near.ifname,
                        c.vni,
                        underlay(m),
                        underlay(f),
                        c.mtu
                    );
                    assert!(parts[m as usize].contains(&line), "{at}: {line}");
                    assert!(!parts[f as usize].contains(&line), "{at}: {line}");
                }
            }
            assert_eq!(
                of_kind(all.iter().copied(), "vxlan").len(),
                2 * cut.len(),
                "{at}"
            );
        }
    }

    #[test]
    fn an_impaired_cut_link_is_carried_by_its_owner_s_engine_and_is_a_plain_tunnel_at_the_far_end()
    {
        let path = workspace().join("scenarios/custom-triangle.toml");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("mtu = 1500", "mtu = 1500\ndelay = \"1ms\"");
        let (parts, plan, lab) = record_parts(&path, &text, 3);
        assert_eq!(plan.cut_links.len(), 3, "every switch link is cut");
        for c in &plan.cut_links {
            assert!(c.engine, "{c:?}");
            let link = lab.fabric.links.iter().find(|l| l.name == c.link).unwrap();
            let owner_end = c.machines.iter().position(|m| *m == c.owner).unwrap();
            let (own, far) = (&link.ends[owner_end], &link.ends[1 - owner_end]);
            let (owner, other) = (
                &parts[c.owner as usize],
                &parts[c.machines[1 - owner_end] as usize],
            );
            let node = |e: &turbonet_topo::Endpoint| lab.fabric.node(e.node).name.clone();
            // At the owner: the node's port paired with an engine port, and
            // the engine's other port the tunnel.
            let veth = format!("veth tn-tri-{} {}#", node(own), own.ifname);
            let paired = owner.iter().find(|l| l.starts_with(&veth)).unwrap();
            assert!(paired.contains("<-> tn-tri.engine e"), "{paired}");
            let tunnel = format!("vxlan tn-tri.engine e{}", link.id.0);
            let tunnel = owner.iter().find(|l| l.starts_with(&tunnel)).unwrap();
            assert!(tunnel.contains(&format!("vni {}", c.vni)), "{tunnel}");
            // At the far machine: the node's port is the tunnel, and no
            // engine carries the link.
            let plain = format!("vxlan tn-tri-{} {}#", node(far), far.ifname);
            assert!(other.iter().any(|l| l.starts_with(&plain)), "{other:#?}");
            // Its offloads off: the owner's engine reads its frames as sent.
            let off = format!("offloads-off tn-tri-{} ", node(far));
            assert!(
                (other.iter()).any(|l| l.starts_with(&off) && l.contains(&far.ifname)),
                "{other:#?}"
            );
            assert!(
                !other
                    .iter()
                    .any(|l| l.contains(&format!(" e{}", link.id.0))),
                "{other:#?}"
            );
        }
        // Every host link stays within its machine, through the engine.
        for part in &parts {
            assert!(part.iter().any(|l| l.starts_with("netns tn-tri.engine")));
            assert!(
                part.iter()
                    .any(|l| l.starts_with("offloads-off tn-tri.engine"))
            );
        }
    }

    #[test]
    fn the_management_network_is_a_bridge_in_its_own_namespace_with_every_node_s_mgmt0() {
        let path = workspace().join("scenarios/two-hosts.toml");
        let text =
            std::fs::read_to_string(&path).unwrap() + "\n[mgmt]\npool = \"192.168.7.0/24\"\n";
        let lines = record_text(&path, &text);
        let mgmt: Vec<&str> = lines
            .iter()
            .map(String::as_str)
            .filter(|l| l.contains("tn-duo.mgmt"))
            .collect();
        let at = |prefix: &str| lines.iter().position(|l| l.starts_with(prefix)).unwrap();
        assert!(at("netns tn-duo.mgmt") < at("bridge "));
        assert_eq!(
            mgmt[1..],
            [
                "bridge tn-duo.mgmt mgmt0#2",
                "veth tn-duo-s1 mgmt0#4 <-> tn-duo.mgmt m0#3",
                "veth tn-duo-h1 mgmt0#3 <-> tn-duo.mgmt m1#4",
                "veth tn-duo-h2 mgmt0#3 <-> tn-duo.mgmt m2#5",
                "bridge-port tn-duo.mgmt #3 -> #2",
                "bridge-port tn-duo.mgmt #4 -> #2",
                "bridge-port tn-duo.mgmt #5 -> #2",
                "up tn-duo.mgmt #1",
                "addr tn-duo.mgmt #2 192.168.7.1/24",
            ],
            "{lines:#?}"
        );
        for (node, ifindex, addr) in [
            ("s1", 4, "192.168.7.2/24"),
            ("h1", 3, "192.168.7.3/24"),
            ("h2", 3, "192.168.7.4/24"),
        ] {
            let line = format!("addr tn-duo-{node} #{ifindex} {addr}");
            assert!(lines.contains(&line), "{lines:#?}");
        }
        // Built right after the fabric's links, before externals move in.
        assert!(at("veth tn-duo-s1 h2") < at("bridge "));
        // No route of any node points at it.
        for (node, ifindex) in [("s1", 4), ("h1", 3), ("h2", 3)] {
            let ns = format!("route tn-duo-{node} ");
            let dev = format!("#{ifindex} ");
            let via_mgmt =
                |l: &&String| l.starts_with(&ns) && (l.contains(&dev) || l.contains("192.168.7."));
            assert!(!lines.iter().any(|l| via_mgmt(&l)), "{lines:#?}");
        }
    }

    #[test]
    fn up_asks_the_kernel_what_the_golden_files_say() {
        let scenarios = workspace().join("scenarios");
        let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/up");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&scenarios)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        assert!(files.len() >= 10, "every bundled scenario is recorded");
        let update = std::env::var_os("UPDATE_GOLDEN").is_some();
        let mut differ = Vec::new();
        for file in files {
            let name = file.file_stem().unwrap().to_string_lossy().into_owned();
            let text = golden_text(&record(&file));
            let path = golden.join(format!("{name}.txt"));
            if update {
                std::fs::create_dir_all(&golden).unwrap();
                std::fs::write(&path, &text).unwrap();
                continue;
            }
            let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
                panic!(
                    "no golden file {}; run with UPDATE_GOLDEN=1",
                    path.display()
                )
            });
            if expected != text {
                let line = expected
                    .lines()
                    .zip(text.lines())
                    .position(|(e, a)| e != a)
                    .map_or_else(
                        || {
                            format!(
                                "lengths differ ({} vs {} lines)",
                                expected.lines().count(),
                                text.lines().count()
                            )
                        },
                        |i| {
                            format!(
                                "line {}:\n  expected: {}\n  actual:   {}",
                                i + 1,
                                expected.lines().nth(i).unwrap_or(""),
                                text.lines().nth(i).unwrap_or("")
                            )
                        },
                    );
                differ.push(format!("{name}: {line}"));
            }
        }
        assert!(
            differ.is_empty(),
            "up asks the kernel for something else than before (UPDATE_GOLDEN=1 accepts it):\n{}",
            differ.join("\n")
        );
    }
}
