//! How `up` builds a `netns` lab: a namespace per node (and the link
//! engine's), veth links, the link engine's side of impaired links, netem
//! and tbf, addresses, kernel routes.

use turbonet_host::kernel::Kernel;
use turbonet_topo::Lab;

use crate::carrier::Carrier;
use crate::dataplane::build::{
    Build, TargetBuild, build_mgmt, carrier_then_routes, create_namespaces, fail_point, phase,
    timed, timed_counted,
};
use crate::dataplane::netns::{self, externals};
use crate::error::Result;
use crate::span::Span;
use crate::state::Stopwatch;

/// Builds a `netns` lab.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NetnsBuild;

impl TargetBuild for NetnsBuild {
    fn namespaces(&self, lab: &Lab, span: &Span, carriers: &[Carrier]) -> Vec<String> {
        let mut names: Vec<String> = (lab.fabric.nodes.iter())
            .filter(|n| span.runs(n.id))
            .map(|n| crate::names::node_namespace(&lab.name, &n.name))
            .collect();
        if netns::has_engine_namespace(lab, carriers) {
            names.push(crate::names::engine_namespace(&lab.name));
        }
        names
    }

    async fn kernel<K: Kernel>(&self, kernel: &mut K, cx: &mut Build<'_>) -> Result<()> {
        build(kernel, cx).await
    }

    async fn start(&self, _: &mut Build<'_>) -> Result<()> {
        // Its switches are the kernel's: nothing to start.
        Ok(())
    }
}

/// The `netns` target: a namespace per node that runs here, veth links
/// (VXLAN tunnels for links to other machines), the link engine's side of
/// impaired links (or netem), addresses, kernel routes.
async fn build<K: Kernel>(kernel: &mut K, cx: &mut Build<'_>) -> Result<()> {
    let (lab, span, carriers, routes, host, progress, dir) = (
        cx.lab,
        cx.span,
        cx.carriers,
        cx.routes,
        cx.host,
        cx.progress,
        cx.dir,
    );
    let specs = netns::namespace_specs(
        lab,
        span,
        netns::has_engine_namespace(lab, carriers),
        host.hash_seed,
    );
    let (created, hub) = create_namespaces(kernel, cx, specs).await?;
    let state = &mut *cx.state;
    let (here, engine) = netns::Here::split(lab, span, &created);
    let engine = engine.first().copied();
    let links = netns::links(lab, &here, engine, carriers)?;
    let senders = (links.veths.iter())
        .map(|v| v.local.ns)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        + usize::from(!links.vxlans.is_empty());
    let (pairs, tunnels) = (links.veths.len(), links.vxlans.len());
    let k = &*kernel;
    timed_counted(
        progress,
        state,
        "links",
        (senders, &|| k.finished()),
        async {
            k.add_veths(links.veths).await?;
            k.add_vxlans(links.vxlans).await
        },
        |()| match tunnels {
            0 => format!("{} veth pairs", lab.fabric.links.len()),
            _ => format!("{pairs} veth pairs, {tunnels} VXLAN tunnels to other machines"),
        },
    )
    .await?;
    fail_point("links")?;
    if let Some(hub) = hub {
        build_mgmt(kernel, lab, span, |id| here.ns(id), hub, progress, state).await?;
    }

    if !state.externals.is_empty() {
        progress.start("externals");
        let watch = Stopwatch::start();
        externals::attach(kernel, lab, span, &here, dir, state).await?;
        phase(
            progress,
            "externals",
            format!("{} interfaces attached", state.externals.len()),
            state,
            watch.seconds(),
        );
    }

    let mirrors = engine.map(|engine| netns::mirrors::ports(lab, &here, engine, carriers));
    if let Some(ports) = mirrors.filter(|p| !p.veths.is_empty() || !p.vxlans.is_empty()) {
        let (local, tunnels) = (ports.veths.len(), ports.vxlans.len());
        timed(
            progress,
            state,
            "mirrors",
            async {
                kernel.add_veths(ports.veths).await?;
                kernel.add_vxlans(ports.vxlans).await?;
                kernel.set_up(ports.up).await
            },
            |()| match tunnels {
                0 => format!("{local} mirror ports"),
                _ => format!("{local} mirror ports, {tunnels} mirror tunnel ends"),
            },
        )
        .await?;
    }

    if let Some(engine) = engine
        && carriers.iter().any(crate::carrier::Carrier::is_spliced)
    {
        let (up, offloads) = netns::engine_ports(lab, &here, engine, carriers);
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

    let far = netns::far_engine_ends(lab, &here);
    if !far.is_empty() {
        let ends = far.iter().map(|(_, p)| p.len()).sum::<usize>();
        timed(
            progress,
            state,
            "far ends",
            async { kernel.disable_offloads(far) },
            |()| {
                format!(
                    "{ends} cut link{} another machine's link engine carries",
                    if ends == 1 { "" } else { "s" }
                )
            },
        )
        .await?;
    }

    let netem = netns::kernel_engine(lab, &here, carriers);
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
                Ok::<_, turbonet_host::Error>(())
            },
            |()| format!("{links} impaired links on the kernel engine"),
        )
        .await?;
    }
    let (shapers, shaped) = netns::kernel_shapers(lab, &here, carriers);
    if shaped > 0 {
        timed(
            progress,
            state,
            "shapers",
            async { kernel.set_shapers(shapers) },
            |()| format!("{shaped} rated links shaped by the kernel (tbf)"),
        )
        .await?;
    }
    let addresses = netns::addresses(lab, &here);
    let count: usize = addresses.iter().map(|(_, a)| a.len()).sum();
    let rules = netns::host_rules(lab, &here);
    let k = &*kernel;
    timed_counted(
        progress,
        state,
        "addresses",
        (2 * here.count() + rules.len(), &|| k.finished()),
        async {
            k.set_up(netns::loopbacks(lab, &here)).await?;
            k.add_addresses(addresses).await?;
            k.add_rules(rules).await
        },
        |()| format!("{count} addresses"),
    )
    .await?;
    fail_point("addresses")?;
    let ports = netns::carrier_ports(lab, &here);
    let kernel_routes = netns::kernel_routes(lab, &here, routes)?;
    carrier_then_routes(kernel, progress, state, ports, kernel_routes, "").await
}
