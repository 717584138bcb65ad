//! How `up` builds a P4 lab: the kernel side of switches that run here
//! (hosts, their ports, switch namespaces, cables as veths for BMv2), then
//! the switches started (the soft switch, BMv2) and programmed over
//! P4Runtime with the pipeline and the lab's share of each.

use turbonet_host::kernel::Kernel;
use turbonet_p4::pipeline::Target;
use turbonet_topo::Lab;
use turbonet_topo::mapper::Mapping;

use crate::carrier::Carrier;
use crate::dataplane::build::{
    Build, TargetBuild, build_mgmt, carrier_then_routes, create_namespaces, fail_point, phase,
    timed,
};
use crate::dataplane::p4::{local as local_build, soft, switches};
use crate::error::{Context, Error, Result};
use crate::span::Span;
use crate::state::Stopwatch;

/// Builds a `soft` lab: the fabric on one soft switch.
#[derive(Debug)]
pub(crate) struct SoftBuild {
    /// The lab mapped onto the soft switch.
    mapping: Mapping,
}

impl SoftBuild {
    /// Maps `lab` onto the soft switch.
    pub(crate) fn of(lab: &Lab) -> Result<SoftBuild> {
        Ok(SoftBuild {
            mapping: soft::map(lab).map_err(Error::Invalid)?,
        })
    }
}

impl TargetBuild for SoftBuild {
    fn namespaces(&self, lab: &Lab, _: &Span, _: &[Carrier]) -> Vec<String> {
        local_build::namespace_names(lab)
    }

    async fn kernel<K: Kernel>(&self, kernel: &mut K, cx: &mut Build<'_>) -> Result<()> {
        build_local(kernel, cx, &self.mapping, false).await
    }

    async fn start(&self, cx: &mut Build<'_>) -> Result<()> {
        start_soft(cx, &self.mapping).await
    }

    fn controls(&self) -> Option<&'static str> {
        Some("the soft switch")
    }

    fn mapping(&self) -> Option<&Mapping> {
        Some(&self.mapping)
    }
}

/// Builds a `p4rt` lab: the fabric on the `[p4rt]` switches, BMv2 started
/// here or remote P4Runtime servers.
#[derive(Debug)]
pub(crate) struct P4rtBuild {
    /// The lab mapped onto the switches.
    mapping: Mapping,
    /// The switches run here (BMv2), with the hosts' namespaces.
    local: bool,
}

impl P4rtBuild {
    /// Maps `lab` onto its `[p4rt]` switches.
    pub(crate) fn of(lab: &Lab) -> Result<P4rtBuild> {
        Ok(P4rtBuild {
            mapping: switches::map(lab).map_err(Error::Invalid)?,
            local: switches::local(lab),
        })
    }
}

impl TargetBuild for P4rtBuild {
    fn namespaces(&self, lab: &Lab, _: &Span, _: &[Carrier]) -> Vec<String> {
        if self.local {
            local_build::namespace_names(lab)
        } else {
            Vec::new()
        }
    }

    async fn kernel<K: Kernel>(&self, kernel: &mut K, cx: &mut Build<'_>) -> Result<()> {
        if self.local {
            build_local(kernel, cx, &self.mapping, true).await
        } else {
            Ok(())
        }
    }

    async fn start(&self, cx: &mut Build<'_>) -> Result<()> {
        start_p4rt(cx, &self.mapping).await
    }

    fn controls(&self) -> Option<&'static str> {
        Some("the switches")
    }

    fn mapping(&self) -> Option<&Mapping> {
        Some(&self.mapping)
    }
}

/// The kernel side of a lab whose switches run here (the soft switch,
/// BMv2): host and switch namespaces, host ports, addresses and host
/// routes; with `veth_cables` (switches that cannot emulate cables) the
/// cables as veth pairs between switch ports.
async fn build_local<K: Kernel>(
    kernel: &mut K,
    cx: &mut Build<'_>,
    mapping: &Mapping,
    veth_cables: bool,
) -> Result<()> {
    let (lab, routes, progress) = (cx.lab, cx.routes, cx.progress);
    let (created, hub) = create_namespaces(kernel, cx, local_build::namespace_specs(lab)).await?;
    let state = &mut *cx.state;
    let ns = local_build::local_namespaces(lab, &created);
    if let Some(hub) = hub {
        let ns_of = |id| ns.hosts.iter().find(|&&(h, _)| h == id).map(|&(_, ns)| ns);
        build_mgmt(kernel, lab, cx.span, ns_of, hub, progress, state).await?;
    }
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
    let host_routes = local_build::host_routes(lab, &ns, routes)?;
    carrier_then_routes(kernel, progress, state, ports, host_routes, "host ").await
}

/// The `soft` target once its kernel side is built: `up` starts the soft
/// switch and programs it over P4Runtime.
async fn start_soft(cx: &mut Build<'_>, mapping: &Mapping) -> Result<()> {
    let (lab, routes, progress, dir) = (cx.lab, cx.routes, cx.progress, cx.dir);
    let state = &mut *cx.state;
    progress.start("soft switch");
    let watch = Stopwatch::start();
    let pid = local_build::start_switch(lab, dir)?;
    // Recorded at once: a failure from here on stops it.
    state.routers.push(crate::state::RouterProcess {
        node: soft::SWITCH.to_owned(),
        program: "turbonet".to_owned(),
        pid,
    });
    dir.save(state)?;
    phase(
        progress,
        "soft switch",
        format!(
            "pid {pid}: P4Runtime at unix:{}, device {}",
            local_build::socket_path(dir).display(),
            soft::DEVICE_ID
        ),
        state,
        watch.seconds(),
    );

    let usage = &mapping.switches[0];
    timed(
        progress,
        state,
        "pipeline",
        async {
            let client = local_build::connect_switch(dir, soft::UP_ELECTION_ID).await?;
            let params: Vec<_> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
            let device_config = soft::device_config(lab, mapping, &params).to_bytes();
            let p4info = turbonet_p4::turbonet_p4info();
            crate::dataplane::p4::control::P4Lab::program(
                lab,
                mapping.clone(),
                soft::SWITCH,
                client,
                (p4info, Target::Soft),
                device_config,
                routes,
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
async fn start_p4rt(cx: &mut Build<'_>, mapping: &Mapping) -> Result<()> {
    let (lab, routes, progress, dir) = (cx.lab, cx.routes, cx.progress, cx.dir);
    let state = &mut *cx.state;
    let (p4info, device_config) = switches::pipeline(lab, &state.scenario)?;
    let queues = switches::queues(&p4info)?;
    let scenario = state.scenario.clone();
    for (sw, usage) in switches::config(lab)?
        .switches
        .iter()
        .zip(&mapping.switches)
    {
        if sw.device == turbonet_topo::P4rtDevice::Bmv2 {
            let ns = crate::names::bmv2_namespace(&lab.name, &sw.name);
            let pid = timed(
                progress,
                state,
                &format!("bmv2 {}", sw.name),
                switches::start_bmv2(
                    &sw.name,
                    &ns,
                    (sw.device_id, &switch_ports(mapping, &sw.name), queues),
                    &dir.path().join(format!("bmv2-{}.log", sw.name)),
                ),
                |pid| format!("pid {pid}: {} in {ns}", switches::BMV2),
            )
            .await?;
            // Recorded at once: a failure from here on stops it.
            state.routers.push(crate::state::RouterProcess {
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
                let (client, at) =
                    switches::connect(lab, &scenario, sw, u128::from(sw.election_id)).await?;
                let p4 = crate::dataplane::p4::control::P4Lab::program(
                    lab,
                    mapping.clone(),
                    &sw.name,
                    client,
                    (p4info.clone(), switches::target(sw, &p4info)),
                    device_config.clone(),
                    routes,
                )
                .await
                .with_context(|| format!("switch {} at {at}", sw.name))?;
                Ok::<_, Error>((p4, at))
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
