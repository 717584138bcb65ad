//! How `up` builds a lab on its target: the context every target's build
//! reads and records into ([`Build`]), what a target does to be built
//! ([`TargetBuild`]: the namespaces it will create, what it asks of the
//! kernel, what it starts), and the phases every target shares: timed
//! phases, the namespaces, the management network, and carrier then
//! routes. `dataplane::Builder` picks a lab's.

use std::future::Future;

use turbonet_host::kernel::{Kernel, NamespaceSpec, Ns};
use turbonet_routing::Route;
use turbonet_topo::Lab;
use turbonet_topo::mapper::Mapping;

use crate::carrier::Carrier;
use crate::dataplane::mgmt;
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::span::Span;
use crate::state::{LabDir, LabState, Stopwatch, Timing};
use crate::{bail, err};

/// What the machine brings to a build: threads that create namespaces,
/// and whether its kernel has `fib_multipath_hash_seed`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Host {
    /// Threads that create namespaces.
    pub(crate) threads: usize,
    /// The kernel has per-namespace ECMP hash seeds.
    pub(crate) hash_seed: bool,
}

/// What a target's build reads, and the lab's state it records into
/// (every process it starts, every phase's time), saved as it goes so that
/// a failure half way can be rolled back.
pub(crate) struct Build<'a> {
    /// The lab.
    pub(crate) lab: &'a Lab,
    /// The part of the lab this machine runs.
    pub(crate) span: &'a Span,
    /// How each link is carried here ([`Span::carriers`]).
    pub(crate) carriers: &'a [Carrier],
    /// Every node's routes (`up`'s: with BGP, only those outside the
    /// fabric).
    pub(crate) routes: &'a [Vec<Route>],
    /// What the machine brings.
    pub(crate) host: Host,
    /// Where phases are reported.
    pub(crate) progress: &'a dyn Progress,
    /// The lab's directory.
    pub(crate) dir: &'a LabDir,
    /// The lab's state.
    pub(crate) state: &'a mut LabState,
}

/// What a target does to be built. A new target is one implementation
/// here and one of `DataPlane` (which runs it).
pub(crate) trait TargetBuild {
    /// The namespaces its build creates (beside the management network's),
    /// recorded before any is, so that `down` finds them whatever happens.
    /// `span`: the part of the lab this machine runs.
    fn namespaces(&self, lab: &Lab, span: &Span, carriers: &[Carrier]) -> Vec<String>;

    /// Everything it asks of the kernel, phase by phase, through `kernel`.
    async fn kernel<K: Kernel>(&self, kernel: &mut K, cx: &mut Build<'_>) -> Result<()>;

    /// What it starts once the kernel side is built (switches, routers).
    async fn start(&self, cx: &mut Build<'_>) -> Result<()>;

    /// What the daemon is the primary controller of, if anything.
    fn controls(&self) -> Option<&'static str> {
        None
    }

    /// How it mapped the lab onto physical switches, if it did.
    fn mapping(&self) -> Option<&Mapping> {
        None
    }
}

/// The namespaces phase every target starts with: `specs` and the
/// management network's, created through `kernel`; returns the target's
/// (in `specs`' order) and the management network's hub, if the lab has one.
pub(crate) async fn create_namespaces<K: Kernel>(
    kernel: &mut K,
    cx: &mut Build<'_>,
    mut specs: Vec<NamespaceSpec>,
) -> Result<(Vec<Ns>, Option<Ns>)> {
    specs.extend(mgmt::namespace_spec(cx.lab));
    let threads = cx.host.threads;
    let mut created = timed(
        cx.progress,
        cx.state,
        "namespaces",
        async { kernel.create_namespaces(&specs, threads) },
        |ns| format!("{} namespaces", ns.len()),
    )
    .await?;
    let hub = cx.lab.mgmt.and_then(|_| created.pop());
    Ok((created, hub))
}

/// Records a finished phase and prints it.
pub(crate) fn phase(
    progress: &dyn Progress,
    name: &str,
    detail: String,
    state: &mut LabState,
    seconds: f64,
) {
    let t = Timing {
        phase: name.to_owned(),
        detail,
        seconds,
    };
    progress.done(&t);
    state.timings.push(t);
}

/// Runs one phase of `up`: announces it, times it, and records and prints
/// what `detail` says of its result.
pub(crate) async fn timed<T, E: Into<Error>>(
    progress: &dyn Progress,
    state: &mut LabState,
    name: &str,
    work: impl Future<Output = Result<T, E>>,
    detail: impl FnOnce(&T) -> String,
) -> Result<T> {
    progress.start(name);
    let watch = Stopwatch::start();
    let out = work.await.map_err(Into::into)?;
    phase(progress, name, detail(&out), state, watch.seconds());
    Ok(out)
}

/// [`timed`] for a phase that works namespace by namespace: once it has
/// run a second, progress says every second how many of its `units`
/// namespaces are done (as `finished` counts them) and about how long is
/// left.
pub(crate) async fn timed_counted<T, E: Into<Error>>(
    progress: &dyn Progress,
    state: &mut LabState,
    name: &str,
    (units, finished): (usize, &dyn Fn() -> usize),
    work: impl Future<Output = Result<T, E>>,
    detail: impl FnOnce(&T) -> String,
) -> Result<T> {
    progress.start(name);
    let watch = Stopwatch::start();
    let base = finished();
    let mut work = std::pin::pin!(work);
    let second = std::time::Duration::from_secs(1);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + second, second);
    let out = loop {
        tokio::select! {
            out = &mut work => break out.map_err(Into::into)?,
            _ = tick.tick() => {
                let done = finished().saturating_sub(base).min(units);
                let seconds = watch.seconds();
                let left = match done {
                    0 => String::new(),
                    d => format!(
                        ", about {:.0} s left",
                        seconds * (units - d) as f64 / d as f64
                    ),
                };
                progress.update(name, &format!("{done} of {units} namespaces{left}"));
            }
        }
    };
    phase(progress, name, detail(&out), state, watch.seconds());
    Ok(out)
}

/// The management network's phase: its bridge, every member's `mgmt0`
/// and their addresses.
pub(crate) async fn build_mgmt<K: Kernel>(
    kernel: &mut K,
    lab: &Lab,
    span: &Span,
    ns_of: impl Fn(turbonet_topo::NodeId) -> Option<turbonet_host::kernel::Ns>,
    hub: turbonet_host::kernel::Ns,
    progress: &dyn Progress,
    state: &mut LabState,
) -> Result<()> {
    let Some(net) = &lab.mgmt else {
        return Ok(());
    };
    // The nodes here the hosts file names on it, each from its namespace.
    let members: Vec<_> = (lab.fabric.nodes.iter())
        .filter(|n| span.runs(n.id) && crate::hostnames::joins_mgmt(lab, n))
        .map(|n| {
            ns_of(n.id).map(|ns| (n.id, ns)).ok_or_else(|| {
                err!(
                    "{} joins the management network but has no namespace",
                    n.name
                )
            })
        })
        .collect::<Result<_>>()?;
    let plan = mgmt::plan(lab, net, &members, hub, span);
    let tunnels = plan.tunnels.len();
    timed(
        progress,
        state,
        "mgmt",
        async {
            let (ns, name, ifindex) = plan.bridge;
            kernel.add_bridge(ns, name, ifindex).await?;
            kernel.add_veths(plan.veths).await?;
            kernel.add_vxlans(plan.tunnels).await?;
            kernel.set_bridge_ports(plan.ports).await?;
            kernel.set_up(plan.up).await?;
            kernel.add_addresses(plan.addresses).await
        },
        |()| match tunnels {
            0 => format!(
                "{} nodes on the management network {} (mgmt0)",
                members.len(),
                net.pool
            ),
            _ => format!(
                "{} nodes on the management network {} (mgmt0), joined to {tunnels} other \
                 machine{}'s",
                members.len(),
                net.pool,
                if tunnels == 1 { "" } else { "s" }
            ),
        },
    )
    .await
}

/// The last two phases of a build: waits until `ports` have carrier, then
/// installs `routes` (`what` qualifies them in the messages: "host ").
pub(crate) async fn carrier_then_routes<K: Kernel>(
    kernel: &mut K,
    progress: &dyn Progress,
    state: &mut LabState,
    ports: Vec<(turbonet_host::kernel::Ns, String, usize)>,
    routes: turbonet_host::kernel::PerNs<turbonet_host::kernel::KernelRoute>,
    what: &str,
) -> Result<()> {
    let count: usize = ports.iter().map(|(_, _, n)| n).sum();
    timed(
        progress,
        state,
        "links up",
        kernel.wait_carrier(ports, std::time::Duration::from_secs(30)),
        |()| format!("{count} {what}ports with carrier"),
    )
    .await?;
    let count: usize = routes.iter().map(|(_, r)| r.len()).sum();
    let k = &*kernel;
    timed_counted(
        progress,
        state,
        "routes",
        (routes.len(), &|| k.finished()),
        k.add_routes(routes, false),
        |()| format!("{count} {what}routes installed"),
    )
    .await?;
    Ok(())
}

/// Fails on purpose after `phase` when `TURBONET_FAIL_AFTER=<phase>` is set,
/// so tests can check that a failure half way rolls back.
pub(crate) fn fail_point(phase: &str) -> Result<()> {
    if std::env::var("TURBONET_FAIL_AFTER").is_ok_and(|p| p == phase) {
        bail!("failing after {phase} (TURBONET_FAIL_AFTER)");
    }
    Ok(())
}
