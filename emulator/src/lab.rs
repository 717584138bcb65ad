//! Lab lifecycle: validate, up, down, clean.

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use turbonet_topo::{Lab, RoutingMode, Target};

use crate::cli::{EXIT_INVALID, UpArgs};
use crate::fabric::{self, Stopwatch};
use crate::kernel::{Kernel, Netlink};
use crate::p4rt::{build as local_build, soft, switches};
use crate::state::{self, LabDir, LabState, Phase, Timing};
use crate::{daemon, engine, externals, limits, netns, render};

/// A scenario that could not be used; the diagnostics have been printed.
#[derive(Debug)]
pub struct Invalid;

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid scenario")
    }
}

impl std::error::Error for Invalid {}

/// Reads and parses a scenario file, printing located diagnostics on error.
pub fn load(path: &Path) -> Result<(Lab, String), Invalid> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", path.display());
            return Err(Invalid);
        }
    };
    let origin = path.display().to_string();
    match turbonet_topo::parse(&origin, &text) {
        Ok(lab) => Ok((lab, text)),
        Err(errors) => {
            let count = errors.len();
            eprintln!("{:?}", miette::Report::new(errors));
            eprintln!(
                "{}: {count} error{} found; nothing was created",
                origin,
                if count == 1 { "" } else { "s" }
            );
            Err(Invalid)
        }
    }
}

/// `turbonet validate FILE`.
pub fn validate(path: &Path, json: bool) -> Result<ExitCode> {
    let Ok((lab, _)) = load(path) else {
        return Ok(ExitCode::from(EXIT_INVALID));
    };
    let summary = turbonet_topo::summary(&lab);
    if json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("{}", render::summary(&lab, &summary));
        if let Err(reason) = runnable(&lab) {
            println!("note: valid, but `up` cannot run it on this machine: {reason}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How every link of a lab would be carried on this machine, or why this
/// build cannot bring the (valid) lab up here.
fn runnable(lab: &Lab) -> Result<Vec<engine::Carrier>, String> {
    match lab.target {
        Target::Netns => {}
        Target::Soft => {
            if let Some(why) = soft::unsupported(lab) {
                return Err(why);
            }
            soft::map(lab)?;
            return engine::carriers(lab, false);
        }
        Target::P4rt => {
            if let Some(why) = switches::unsupported(lab) {
                return Err(why);
            }
            switches::map(lab)?;
            return engine::carriers(lab, false);
        }
    }
    if let Some(err) = agents_missing(lab) {
        return Err(err);
    }
    engine::carriers(lab, engine::kernel_has_netem())
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
    kinds.into_iter().find_map(crate::routers::missing)
}

/// Progress lines on stderr.
pub struct Progress {
    quiet: bool,
    live: bool,
}

impl Progress {
    /// Prints progress unless quiet.
    pub fn new(quiet: bool) -> Self {
        use std::io::IsTerminal;
        Progress {
            quiet,
            live: io::stderr().is_terminal(),
        }
    }

    /// Announces a phase that is starting.
    pub fn start(&self, what: &str) {
        if !self.quiet && self.live {
            eprint!("  {what:<12} ...");
            let _ = io::stderr().flush();
        }
    }

    /// Shows how far a long phase has come (on a terminal).
    pub fn update(&self, what: &str, detail: &str) {
        if !self.quiet && self.live {
            eprint!("\r\x1b[K  {what:<12} ... {detail}");
            let _ = io::stderr().flush();
        }
    }

    /// Finishes the announced phase.
    pub fn done(&self, timing: &Timing) {
        if !self.quiet {
            let clear = if self.live { "\r\x1b[K" } else { "" };
            eprintln!(
                "{clear}  {:<12} {:>7.2} s  {}",
                timing.phase, timing.seconds, timing.detail
            );
        }
    }
}

/// Checks what `up` needs from the machine before touching anything.
fn check_capabilities(lab: &Lab) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("`up` needs root (network namespaces and links); run it with sudo");
    }
    if !Path::new("/proc/self/ns/net").exists() {
        bail!("this kernel has no network namespaces (CONFIG_NET_NS)");
    }
    raise_fd_limit(lab.fabric.nodes.len() * 3 + 256)?;
    let taken: Vec<String> = lab
        .fabric
        .nodes
        .iter()
        .map(|n| fabric::ns_name(&lab.name, &n.name))
        .filter(|ns| netns::exists(ns))
        .collect();
    if let Some(first) = taken.first() {
        bail!(
            "{} namespace(s) of lab {} already exist (first: {first}) but the lab has no \
             state; they were not created by this turbonet. Remove them or rename the lab",
            taken.len(),
            lab.name
        );
    }
    externals::check(lab)?;
    Ok(())
}

/// Makes sure we may hold `need` file descriptors (a namespace fd and a
/// netlink socket per node).
fn raise_fd_limit(need: usize) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let need = need as u64;
    if soft < need {
        if hard < need {
            bail!("this fabric needs {need} open files but the hard limit is {hard}");
        }
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(())
}

/// `turbonet up FILE`.
pub fn up(args: &UpArgs) -> Result<ExitCode> {
    let Ok((lab, text)) = load(&args.file) else {
        return Ok(ExitCode::from(EXIT_INVALID));
    };
    let carriers = match runnable(&lab) {
        Ok(carriers) => carriers,
        Err(reason) => {
            eprintln!("error: {}: {reason}", args.file.display());
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let dir = LabDir::of(&lab.name);
    if dir.exists() {
        match dir.load().ok().flatten() {
            Some(st) if st.phase == Phase::Building && !state::pid_alive(st.pid) => bail!(
                "lab {} was interrupted while being built; `turbonet down {}` removes what it created",
                lab.name,
                lab.name
            ),
            Some(st) => bail!(
                "lab {} is already up (from {}, phase {}); `turbonet down {}` first, or rename the lab",
                lab.name,
                st.scenario.display(),
                st.phase,
                lab.name
            ),
            None => bail!(
                "lab {} has a state directory but no state; `turbonet down {}` removes it",
                lab.name,
                lab.name
            ),
        }
    }
    check_capabilities(&lab)?;
    let progress = Progress::new(args.quiet);
    let total = Stopwatch::start();
    let neighbours =
        limits::neighbours_needed(lab.fabric.links.len() * 2 + lab.fabric.externals.len());
    if let Some(note) = limits::raise_neighbour_limits(neighbours)?
        && !args.quiet
    {
        eprintln!("note: {note}");
    }

    let watch = Stopwatch::start();
    let routes = up_routes(&lab);
    let route_count: usize = routes.iter().map(Vec::len).sum();
    let plan_timing = Timing {
        phase: "plan".into(),
        detail: format!(
            "{}, {} links, {} routes",
            fabric::describe_nodes(&lab),
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
            bail!(
                "lab {} is already up (another `up` just claimed it)",
                lab.name
            )
        }
        Err(e) => return Err(e).context(format!("creating {}", dir.path().display())),
    }
    let engine_needed = carriers.iter().any(engine::Carrier::is_userspace);
    let mut namespaces: Vec<String> = match lab.target {
        Target::Soft => local_build::namespace_names(&lab),
        Target::P4rt if switches::local(&lab) => local_build::namespace_names(&lab),
        Target::P4rt => Vec::new(),
        Target::Netns => lab
            .fabric
            .nodes
            .iter()
            .map(|n| fabric::ns_name(&lab.name, &n.name))
            .collect(),
    };
    if engine_needed {
        namespaces.push(engine::namespace(&lab.name));
    }
    let scenario = fs::canonicalize(&args.file).unwrap_or_else(|_| args.file.clone());
    let mut state = LabState::new(&lab.name, scenario, namespaces);
    state.neighbours = neighbours;
    state.externals = externals::plan(&lab)?;
    let saved = dir.save_scenario(&text).and_then(|()| dir.save(&state));
    if let Err(e) = saved {
        let _ = dir.remove();
        return Err(e).context("writing lab state");
    }
    progress.done(&plan_timing);
    state.timings.push(plan_timing);

    let threads = args
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
            built = build(&lab, &carriers, &routes, threads, &progress, &dir, &mut state) => built,
            _ = interrupt.recv() => Err(anyhow::anyhow!("interrupted")),
            _ = terminate.recv() => Err(anyhow::anyhow!("terminated")),
        }
    });
    drop(runtime);
    if let Err(e) = built {
        eprintln!("error: {e:#}");
        eprintln!("rolling back lab {} ...", lab.name);
        match teardown(&dir, &mut state) {
            Ok(()) => eprintln!("rolled back: nothing of lab {} is left", lab.name),
            Err(e2) => eprintln!(
                "error: rollback incomplete: {e2:#}; run `turbonet down {}`",
                lab.name
            ),
        }
        return Ok(ExitCode::FAILURE);
    }
    state.phase = Phase::Ready;
    state.timings.push(Timing {
        phase: "total".into(),
        detail: "up and routed".into(),
        seconds: total.seconds(),
    });
    dir.save(&state)?;
    if !args.quiet {
        println!("{}", render::up_summary(&lab, &state));
    }
    Ok(ExitCode::SUCCESS)
}

/// The routes `up` installs: every static route, but with BGP only those
/// outside the fabric (host ports, defaults, externals): the fabric's are
/// the agents' to install.
fn up_routes(lab: &Lab) -> Vec<Vec<turbonet_routing::Route>> {
    let mut routes = turbonet_routing::static_routes(&lab.fabric);
    if lab.routing.mode == RoutingMode::Bgp {
        for node_routes in &mut routes {
            node_routes.retain(|r| r.origin != turbonet_routing::RouteOrigin::Fabric);
        }
    }
    routes
}

/// Records a finished phase and prints it.
fn phase(progress: &Progress, name: &str, detail: String, state: &mut LabState, seconds: f64) {
    let t = Timing {
        phase: name.to_owned(),
        detail,
        seconds,
    };
    progress.done(&t);
    state.timings.push(t);
}

/// The building phases of `up`, each timed.
async fn build(
    lab: &Lab,
    carriers: &[engine::Carrier],
    routes: &[Vec<turbonet_routing::Route>],
    threads: usize,
    progress: &Progress,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    let mut kernel = Netlink::new();
    let host = Host {
        threads,
        hash_seed: netns::has_sysctl("net/ipv4/fib_multipath_hash_seed"),
    };
    build_kernel(
        &mut kernel,
        lab,
        carriers,
        routes,
        host,
        progress,
        dir,
        state,
    )
    .await?;
    match lab.target {
        Target::Soft => start_soft(lab, progress, dir, state).await?,
        Target::P4rt => start_p4rt(lab, progress, dir, state).await?,
        Target::Netns => start_routers(lab, progress, dir, state)?,
    }
    let phase = |name: &str, detail: String, state: &mut LabState, seconds: f64| {
        phase(progress, name, detail, state, seconds);
    };

    // The daemon owns what keeps running: the control API, the link
    // engine, the timeline, the agents, the P4Runtime session.
    progress.start("daemon");
    let watch = Stopwatch::start();
    let pid = daemon::spawn(&lab.name, dir)?;
    state.daemon_pid = Some(pid);
    dir.save(state)?;
    daemon::wait_ready(dir, pid, std::time::Duration::from_secs(15))?;
    let impaired = carriers.iter().filter(|c| c.is_userspace()).count();
    phase(
        "daemon",
        if impaired > 0 {
            format!("pid {pid}: control API, link engine for {impaired} impaired links")
        } else if lab.target == Target::Soft {
            format!("pid {pid}: control API, primary controller of the soft switch")
        } else if lab.target == Target::P4rt {
            format!("pid {pid}: control API, primary controller of the switches")
        } else {
            format!("pid {pid}: control API")
        },
        state,
        watch.seconds(),
    );

    if lab.routing.mode == RoutingMode::Bgp {
        progress.start("bgp");
        let watch = Stopwatch::start();
        let report = wait_converged(lab, dir, progress).await?;
        let (up, sessions) = report.sessions();
        let routes: usize = report.speakers.iter().map(|s| s.routes).sum();
        let established = if sessions > 0 {
            format!(", {up}/{sessions} sessions established")
        } else {
            String::new()
        };
        phase(
            "bgp",
            format!(
                "converged in {:.2} s: {routes} routes in {} switches{established}",
                report.convergence_time().unwrap_or(report.elapsed),
                report.speakers.len()
            ),
            state,
            watch.seconds(),
        );
    }
    Ok(())
}

/// Runs one phase of `up`: announces it, times it, and records and prints
/// what `detail` says of its result.
async fn timed<T>(
    progress: &Progress,
    state: &mut LabState,
    name: &str,
    work: impl Future<Output = Result<T>>,
    detail: impl FnOnce(&T) -> String,
) -> Result<T> {
    progress.start(name);
    let watch = Stopwatch::start();
    let out = work.await?;
    phase(progress, name, detail(&out), state, watch.seconds());
    Ok(out)
}

/// The `soft` target once its kernel side is built: `up` starts the soft
/// switch and programs it over P4Runtime.
async fn start_soft(
    lab: &Lab,
    progress: &Progress,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    let mapping = soft::map(lab).map_err(|e| anyhow::anyhow!(e))?;

    progress.start("soft switch");
    let watch = Stopwatch::start();
    let (pid, addr) = local_build::start_switch(lab, dir)?;
    // Recorded at once: a failure from here on stops it.
    state.routers.push(state::RouterProcess {
        node: soft::SWITCH.to_owned(),
        program: "turbonet".to_owned(),
        pid,
    });
    dir.save(state)?;
    phase(
        progress,
        "soft switch",
        format!("pid {pid}: P4Runtime at {addr}, device {}", soft::DEVICE_ID),
        state,
        watch.seconds(),
    );

    let usage = &mapping.switches[0];
    timed(
        progress,
        state,
        "pipeline",
        async {
            let client =
                turbonet_p4::Client::connect(&addr, soft::DEVICE_ID, soft::UP_ELECTION_ID).await?;
            let params: Vec<_> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
            let device_config = soft::device_config(lab, &mapping, &params).to_bytes();
            let p4info = turbonet_p4::turbonet_p4info();
            crate::p4rt::control::P4Lab::program(
                lab,
                mapping.clone(),
                soft::SWITCH,
                client,
                p4info,
                device_config,
            )
            .await
        },
        |p4| {
            format!(
                "{} entities: {} virtual switches, {} ports ({} loopback pairs, {} host ports)",
                p4.session.installed(),
                usage.virtual_switches,
                usage.ports_used,
                usage.loopback_pairs,
                usage.host_ports
            )
        },
    )
    .await?;
    Ok(())
}

/// The `p4rt` target once its kernel side (if it runs here) is built:
/// every switch of `[p4rt]` gets the pipeline and its share of the fabric
/// over P4Runtime (BMv2 switches started first).
async fn start_p4rt(
    lab: &Lab,
    progress: &Progress,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    let mapping = switches::map(lab).map_err(|e| anyhow::anyhow!(e))?;
    let (p4info, device_config) = switches::pipeline(lab, &state.scenario)?;
    for (sw, usage) in switches::config(lab)?
        .switches
        .iter()
        .zip(&mapping.switches)
    {
        if sw.device == turbonet_topo::P4rtDevice::Bmv2 {
            let ns = switches::namespace(&lab.name, &sw.name);
            let pid = timed(
                progress,
                state,
                &format!("bmv2 {}", sw.name),
                switches::start_bmv2(
                    &sw.name,
                    &ns,
                    sw.device_id,
                    &switch_ports(&mapping, &sw.name),
                    &dir.path().join(format!("bmv2-{}.log", sw.name)),
                ),
                |pid| format!("pid {pid}: {} in {ns}", switches::BMV2),
            )
            .await?;
            // Recorded at once: a failure from here on stops it.
            state.routers.push(state::RouterProcess {
                node: sw.name.clone(),
                program: switches::bmv2_comm(),
                pid,
            });
            dir.save(state)?;
        }
        timed(
            progress,
            state,
            &format!("pipeline {}", sw.name),
            async {
                let (client, at) = switches::connect(lab, sw, u128::from(sw.election_id)).await?;
                let p4 = crate::p4rt::control::P4Lab::program(
                    lab,
                    mapping.clone(),
                    &sw.name,
                    client,
                    p4info.clone(),
                    device_config.clone(),
                )
                .await
                .with_context(|| format!("switch {} at {at}", sw.name))?;
                Ok((p4, at))
            },
            |(p4, at)| {
                format!(
                    "{} entities at {at} (device {}): {} virtual switches, {} of {} ports",
                    p4.session.installed(),
                    sw.device_id,
                    usage.virtual_switches,
                    usage.ports_used,
                    usage.ports
                )
            },
        )
        .await?;
    }
    Ok(())
}

/// The physical ports of `switch` in use: host ports and cable ends.
fn switch_ports(mapping: &turbonet_topo::mapper::Mapping, switch: &str) -> Vec<u32> {
    let mut ports: Vec<u32> = mapping
        .host_ports
        .iter()
        .map(|h| &h.port)
        .chain(mapping.cables.iter().flat_map(|c| [&c.a, &c.b]))
        .filter(|p| p.switch == switch)
        .map(|p| p.port)
        .collect();
    ports.sort_unstable();
    ports
}

/// What the machine brings to a build: threads that create namespaces,
/// and whether its kernel has `fib_multipath_hash_seed`.
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// Threads that create namespaces.
    pub threads: usize,
    /// The kernel has per-namespace ECMP hash seeds.
    pub hash_seed: bool,
}

/// Everything `up` asks of the kernel for `lab`, phase by phase, through
/// `kernel` (on the P4 targets, the hosts' side and, for switches that run
/// here, theirs; a `p4rt` lab of remote switches asks nothing).
#[allow(clippy::too_many_arguments)]
pub async fn build_kernel<K: Kernel>(
    kernel: &mut K,
    lab: &Lab,
    carriers: &[engine::Carrier],
    routes: &[Vec<turbonet_routing::Route>],
    host: Host,
    progress: &Progress,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    match lab.target {
        Target::Netns => {
            build_netns(kernel, lab, carriers, routes, host, progress, dir, state).await
        }
        Target::Soft => {
            let mapping = soft::map(lab).map_err(|e| anyhow::anyhow!(e))?;
            build_local(kernel, lab, &mapping, routes, host, progress, state, false).await
        }
        Target::P4rt if switches::local(lab) => {
            let mapping = switches::map(lab).map_err(|e| anyhow::anyhow!(e))?;
            build_local(kernel, lab, &mapping, routes, host, progress, state, true).await
        }
        Target::P4rt => Ok(()),
    }
}

/// The kernel side of a lab whose switches run here (the soft switch,
/// BMv2): host and switch namespaces, host ports, addresses and host
/// routes; with `veth_cables` (switches that cannot emulate cables) the
/// cables as veth pairs between switch ports.
#[allow(clippy::too_many_arguments)]
async fn build_local<K: Kernel>(
    kernel: &mut K,
    lab: &Lab,
    mapping: &turbonet_topo::mapper::Mapping,
    routes: &[Vec<turbonet_routing::Route>],
    host: Host,
    progress: &Progress,
    state: &mut LabState,
    veth_cables: bool,
) -> Result<()> {
    let specs = local_build::namespace_specs(lab);
    let created = timed(
        progress,
        state,
        "namespaces",
        async { kernel.create_namespaces(&specs, host.threads) },
        |ns| format!("{} namespaces", ns.len()),
    )
    .await?;
    let ns = local_build::local_namespaces(lab, &created);
    let veths = local_build::host_veths(lab, mapping, &ns)?;
    let count = veths.len();
    timed(progress, state, "links", kernel.add_veths(veths), |()| {
        format!("{count} host ports (veth to their switch)")
    })
    .await?;
    fail_point("links")?;
    if veth_cables {
        let cables = local_build::cable_veths(mapping, &ns)?;
        let count = cables.len();
        timed(progress, state, "cables", kernel.add_veths(cables), |()| {
            format!("{count} cables (veth pairs between switch ports)")
        })
        .await?;
    }
    let plan = local_build::configure(lab, mapping, &ns, veth_cables)?;
    let addrs: usize = plan.addresses.iter().map(|(_, a)| a.len()).sum();
    timed(
        progress,
        state,
        "addresses",
        async {
            kernel.set_up(plan.up).await?;
            kernel.disable_offloads(plan.offloads)?;
            kernel.add_addresses(plan.addresses).await
        },
        |()| format!("{addrs} addresses"),
    )
    .await?;
    fail_point("addresses")?;
    let ports = local_build::carrier_ports(lab, &ns);
    let count: usize = ports.iter().map(|(_, _, n)| n).sum();
    timed(
        progress,
        state,
        "links up",
        kernel.wait_carrier(ports, std::time::Duration::from_secs(30)),
        |()| format!("{count} host ports with carrier"),
    )
    .await?;
    let host_routes = local_build::host_routes(lab, &ns, routes)?;
    let count: usize = host_routes.iter().map(|(_, r)| r.len()).sum();
    timed(
        progress,
        state,
        "routes",
        kernel.add_routes(host_routes, false),
        |()| format!("{count} host routes installed"),
    )
    .await?;
    Ok(())
}

/// The `netns` target: a namespace per node, veth links, the link engine's
/// side of impaired links (or netem), addresses, kernel routes.
#[allow(clippy::too_many_arguments)]
async fn build_netns<K: Kernel>(
    kernel: &mut K,
    lab: &Lab,
    carriers: &[engine::Carrier],
    routes: &[Vec<turbonet_routing::Route>],
    host: Host,
    progress: &Progress,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    let engine_needed = carriers.iter().any(engine::Carrier::is_userspace);
    let specs = fabric::namespace_specs(lab, engine_needed, host.hash_seed);
    let created = timed(
        progress,
        state,
        "namespaces",
        async { kernel.create_namespaces(&specs, host.threads) },
        |ns| format!("{} namespaces", ns.len()),
    )
    .await?;
    let (nodes, engine) = created.split_at(lab.fabric.nodes.len());
    let engine = engine.first().copied();
    timed(
        progress,
        state,
        "links",
        kernel.add_veths(fabric::veths(lab, nodes, engine, carriers)?),
        |()| format!("{} veth pairs", lab.fabric.links.len()),
    )
    .await?;
    fail_point("links")?;

    if !state.externals.is_empty() {
        progress.start("externals");
        let watch = Stopwatch::start();
        externals::attach(kernel, lab, nodes, dir, state).await?;
        phase(
            progress,
            "externals",
            format!("{} interfaces attached", state.externals.len()),
            state,
            watch.seconds(),
        );
    }

    if let Some(engine) = engine {
        let (up, offloads) = fabric::engine_ports(lab, nodes, engine, carriers);
        let spliced = up.iter().map(|(_, p)| p.len()).sum::<usize>() / 2;
        timed(
            progress,
            state,
            "engine",
            async {
                kernel.set_up(up).await?;
                kernel.disable_offloads(offloads)
            },
            |()| format!("{spliced} impaired links spliced through the link engine"),
        )
        .await?;
    }

    let netem = fabric::kernel_engine(lab, nodes, carriers);
    if netem.links > 0 {
        let links = netem.links;
        timed(
            progress,
            state,
            "netem",
            async {
                kernel.disable_offloads(netem.offloads)?;
                for (ns, ifindex, impairment, seed) in &netem.netem {
                    kernel.set_netem(*ns, *ifindex, impairment, *seed)?;
                }
                Ok(())
            },
            |()| format!("{links} impaired links on the kernel engine"),
        )
        .await?;
    }
    let addresses = fabric::addresses(lab, nodes);
    let count: usize = addresses.iter().map(|(_, a)| a.len()).sum();
    timed(
        progress,
        state,
        "addresses",
        async {
            kernel.set_up(fabric::ports_to_bring_up(lab, nodes)).await?;
            kernel.add_addresses(addresses).await
        },
        |()| format!("{count} addresses"),
    )
    .await?;
    fail_point("addresses")?;
    let ports = fabric::carrier_ports(lab, nodes);
    let count: usize = ports.iter().map(|(_, _, n)| n).sum();
    timed(
        progress,
        state,
        "links up",
        kernel.wait_carrier(ports, std::time::Duration::from_secs(30)),
        |()| format!("{count} ports with carrier"),
    )
    .await?;
    let kernel_routes = fabric::kernel_routes(lab, nodes, routes)?;
    let count: usize = kernel_routes.iter().map(|(_, r)| r.len()).sum();
    timed(
        progress,
        state,
        "routes",
        kernel.add_routes(kernel_routes, false),
        |()| format!("{count} routes installed"),
    )
    .await?;
    Ok(())
}

/// BGP on `netns` with FRR or BIRD switches: their daemons start once the
/// fabric is routed.
fn start_routers(lab: &Lab, progress: &Progress, dir: &LabDir, state: &mut LabState) -> Result<()> {
    if lab.routing.mode == RoutingMode::Bgp
        && lab
            .fabric
            .switches()
            .any(|n| lab.routing.agent_of(n.id) != turbonet_topo::Agent::Builtin)
    {
        progress.start("routers");
        let watch = Stopwatch::start();
        let (frr, bird) = crate::routers::start(lab, dir, state)?;
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

/// Waits until every switch's FIB is what the BGP plan says, showing how
/// many have converged; fails with the switches that have not after a
/// time that grows with the fabric.
async fn wait_converged(
    lab: &Lab,
    dir: &LabDir,
    progress: &Progress,
) -> Result<crate::agents::BgpReport> {
    use crate::control::{Request, Response};
    let switches = lab.fabric.switches().count();
    let timeout = std::time::Duration::from_secs(60 + switches as u64 / 4);
    let started = std::time::Instant::now();
    loop {
        // A daemon busy converging a large fabric answers late.
        let left = timeout
            .saturating_sub(started.elapsed())
            .max(std::time::Duration::from_secs(1));
        let report = match crate::control::call_within(dir, &Request::Bgp { node: None }, left)
            .context("asking the lab daemon how far BGP has come")?
        {
            Response::Bgp { report } => report,
            Response::Error { message } | Response::Ok { message } => bail!("{message}"),
        };
        if report.converged() {
            return Ok(report);
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
                    let (up, all) = (
                        s.sessions
                            .iter()
                            .filter(|x| x.state == "established")
                            .count(),
                        s.sessions.len(),
                    );
                    format!(
                        "{} ({}): {}/{} routes, {up}/{all} sessions established",
                        s.node, s.agent, s.routes, s.expected
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
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Fails on purpose after `phase` when `TURBONET_FAIL_AFTER=<phase>` is set,
/// so tests can check that a failure half way rolls back.
fn fail_point(phase: &str) -> Result<()> {
    if std::env::var("TURBONET_FAIL_AFTER").is_ok_and(|p| p == phase) {
        bail!("failing after {phase} (TURBONET_FAIL_AFTER)");
    }
    Ok(())
}

/// Removes everything recorded in a lab's state, then the state itself.
pub fn teardown(dir: &LabDir, state: &mut LabState) -> Result<()> {
    state.phase = Phase::Removing;
    let _ = dir.save(state);
    let mut failures = Vec::new();
    if let Err(e) = daemon::stop(state) {
        failures.push(format!("stopping the daemon: {e:#}"));
    }
    crate::routers::stop(state);
    if let Err(e) = externals::release(state) {
        failures.push(format!("{e:#}"));
    }
    for ns in &state.namespaces {
        if let Err(e) = netns::delete(ns) {
            failures.push(format!("deleting namespace {ns}: {e}"));
        }
    }
    if !failures.is_empty() {
        let _ = dir.save(state);
        bail!("{}", failures.join("; "));
    }
    dir.remove()
        .with_context(|| format!("removing {}", dir.path().display()))?;
    limits::restore_neighbour_limits()
}

/// Picks the lab a command is about: the one named, or the only one up.
pub fn resolve(name: Option<&str>) -> Result<(LabDir, LabState)> {
    let labs = state::labs(Path::new(state::RUN_DIR))?;
    let name = match (name, labs.as_slice()) {
        (Some(name), _) => name.to_owned(),
        (None, [only]) => only.clone(),
        (None, []) => bail!("no lab is up; start one with `turbonet up FILE`"),
        (None, many) => bail!(
            "several labs are up ({}); pick one with --lab",
            many.join(", ")
        ),
    };
    let dir = LabDir::of(&name);
    match dir.load()? {
        Some(state) => Ok((dir, state)),
        None if labs.contains(&name) => {
            bail!("lab {name} has no state file (interrupted?); `turbonet down {name}` removes it")
        }
        None => bail!(
            "no lab named {name} is up{}",
            if labs.is_empty() {
                String::new()
            } else {
                format!(" (up: {})", labs.join(", "))
            }
        ),
    }
}

/// Loads the scenario saved with a lab.
pub fn saved_lab(dir: &LabDir) -> Result<Lab> {
    let text = fs::read_to_string(dir.scenario_path())
        .with_context(|| format!("reading {}", dir.scenario_path().display()))?;
    turbonet_topo::parse(&dir.scenario_path().display().to_string(), &text).map_err(|e| {
        anyhow::anyhow!(
            "saved scenario no longer parses: {:?}",
            miette::Report::new(e)
        )
    })
}

/// `turbonet down [LAB]`.
pub fn down(name: Option<&str>) -> Result<ExitCode> {
    let labs = state::labs(Path::new(state::RUN_DIR))?;
    let name = match (name, labs.as_slice()) {
        (Some(name), _) => name.to_owned(),
        (None, [only]) => only.clone(),
        (None, []) => {
            println!("no lab is up");
            return Ok(ExitCode::SUCCESS);
        }
        (None, many) => bail!(
            "several labs are up ({}); name one, or `turbonet clean` removes all",
            many.join(", ")
        ),
    };
    down_one(&name)
}

fn down_one(name: &str) -> Result<ExitCode> {
    let dir = LabDir::of(name);
    if !dir.exists() {
        println!("lab {name} is not up");
        return Ok(ExitCode::SUCCESS);
    }
    let watch = Stopwatch::start();
    let Some(mut state) = dir.load()? else {
        // Killed between claiming the name and writing the state: nothing
        // was created yet.
        dir.remove()?;
        println!("lab {name}: removed an empty lab directory");
        return Ok(ExitCode::SUCCESS);
    };
    if state.phase == Phase::Building
        && state.pid != std::process::id()
        && state::pid_alive(state.pid)
    {
        bail!(
            "lab {name} is still being built by process {}; stop it first (Ctrl-C rolls back)",
            state.pid
        );
    }
    if !nix::unistd::geteuid().is_root() {
        bail!("`down` needs root; run it with sudo");
    }
    let count = state.namespaces.len();
    teardown(&dir, &mut state)?;
    println!(
        "lab {name} is down: {count} namespaces removed in {:.2} s",
        watch.seconds()
    );
    Ok(ExitCode::SUCCESS)
}

/// `turbonet clean`: down every lab that has state on this machine.
pub fn clean() -> Result<ExitCode> {
    let labs = state::labs(Path::new(state::RUN_DIR))?;
    if labs.is_empty() {
        limits::restore_neighbour_limits()?;
        println!("nothing to clean");
    }
    let mut failed = false;
    for lab in labs {
        if let Err(e) = down_one(&lab) {
            eprintln!("error: {lab}: {e:#}");
            failed = true;
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod characterisation {
    //! What `up` asks of the kernel for every bundled scenario, recorded
    //! and compared with `emulator/tests/golden/up/<scenario>.txt`, so a
    //! change of how the fabric is built shows without root. Large fabrics
    //! are recorded as counts per request and a digest of every request.
    //! Regenerate with `UPDATE_GOLDEN=1 cargo test -p turbonet-emulator
    //! characterisation`.

    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::kernel::Recorder;

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
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for line in lines {
            for b in line.bytes().chain([b'\n']) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    /// The requests `up` makes of the kernel for the scenario at `path`.
    fn record(path: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        let lab = turbonet_topo::parse(&path.display().to_string(), &text).unwrap();
        assert!(
            lab.fabric.externals.is_empty(),
            "bundled scenarios attach no interface of the machine"
        );
        // As on a machine without netem, with per-namespace hash seeds.
        let carriers = engine::carriers(&lab, false).unwrap();
        let routes = up_routes(&lab);
        let root = std::env::temp_dir().join(format!("tn-golden-{}", std::process::id()));
        let dir = LabDir::new(&root, &lab.name);
        dir.claim().unwrap();
        let mut state = LabState::new(&lab.name, path.to_owned(), Vec::new());
        let mut kernel = Recorder::new();
        let host = Host {
            threads: 1,
            hash_seed: true,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(build_kernel(
                &mut kernel,
                &lab,
                &carriers,
                &routes,
                host,
                &Progress::new(true),
                &dir,
                &mut state,
            ))
            .unwrap();
        let _ = std::fs::remove_dir_all(&root);
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
