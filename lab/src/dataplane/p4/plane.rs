//! The P4 data plane at run time: the daemon is the primary controller of
//! every switch the lab runs on (the soft switch, BMv2, or remote
//! P4Runtime servers) and keeps each holding exactly what the fabric's
//! state asks (routes, link parameters, what is down), writing only the
//! difference. With BGP it also carries the agents' traffic through the
//! switches' CPU ports and writes their routes into the pipeline.

use std::rc::Rc;
use std::sync::Arc;

use futures::future::LocalBoxFuture;
use turbonet_injectors::Counters;
use turbonet_topo::mapper::Mapping;
use turbonet_topo::{Lab, Link, LinkParams, RoutingMode, Target};

use super::control::P4Lab;
use super::entries::FabricState;
use super::{soft, switches};
use crate::dataplane::agent_routes::PipelineRoutes;
use crate::dataplane::plane::LinkCounters;
use crate::dataplane::plane::{Applied, DataPlane, Desired};
use crate::error::{Context, Error, Result};
use crate::events::Events;
use crate::state::{LabDir, LabState};

/// A lab's P4 data plane: a session with each of its switches.
#[derive(Debug)]
pub struct P4Plane {
    lab: Arc<Lab>,
    dir: LabDir,
    switches: Vec<P4Lab>,
    /// The link parameters the switches hold, by link id.
    params: Vec<LinkParams>,
    /// BGP: the routes the built-in agents hold, for the pipeline.
    agent_routes: Option<Rc<PipelineRoutes>>,
}

impl P4Plane {
    /// Takes over the lab's switches from `up` (or from a daemon before
    /// this one): primary on each under election id `election_id` (above
    /// `up`'s and every earlier daemon's), knowing they hold what `up`
    /// wrote with `routes` (`None`: read back what they hold). With BGP, the agents'
    /// traffic goes through each switch's CPU port (tasks on the current
    /// `LocalSet`, failures logged to `events`).
    pub async fn open(
        lab: Arc<Lab>,
        dir: &LabDir,
        state: &LabState,
        routes: Option<&[Vec<turbonet_routing::Route>]>,
        election_id: u128,
        events: &Events,
    ) -> Result<P4Plane> {
        // As `up` mapped it (mapped again only for a state without it).
        let mapping = match &state.mapping {
            Some(mapping) => mapping.clone(),
            None if lab.target == Target::Soft => soft::map(&lab).map_err(Error::Invalid)?,
            None => switches::map(&lab).map_err(Error::Invalid)?,
        };
        let switches = match lab.target {
            Target::Soft => vec![connect_soft(&lab, mapping, dir, routes, election_id).await?],
            _ => connect_p4rt(&lab, mapping, state, routes, election_id).await?,
        };
        let mut plane = P4Plane {
            params: lab.fabric.links.iter().map(|l| l.params.clone()).collect(),
            agent_routes: (lab.routing.mode == RoutingMode::Bgp)
                .then(|| PipelineRoutes::new(lab.fabric.nodes.len())),
            dir: dir.clone(),
            switches,
            lab,
        };
        if plane.agent_routes.is_some() {
            for sw in &mut plane.switches {
                let cpu = super::cpu::CpuPorts::open(
                    &plane.lab,
                    &sw.mapping,
                    &sw.switch,
                    sw.session.pipeline(),
                )
                .await?;
                let io = sw
                    .session
                    .packet_io()
                    .context("the switch's stream is taken")?;
                let events = events.clone();
                tokio::task::spawn_local(async move {
                    if let Err(e) = cpu.run(io).await {
                        events.write("bgp", "cpu-port", "CPU port", Err(&e.to_string()));
                    }
                });
            }
        }
        Ok(plane)
    }

    /// What to say when writing to switch `name` failed: on `soft`,
    /// whether the soft switch is still running, and where its log is.
    fn switch_gone(&self, name: &str) -> String {
        if self.lab.target != Target::Soft {
            return format!("switch {name} (is its P4Runtime server still up?)");
        }
        let pid = self
            .dir
            .load()
            .ok()
            .flatten()
            .and_then(|st| st.routers.iter().find(|r| r.node == name).map(|r| r.pid));
        match pid {
            Some(pid) if !turbonet_host::process::alive(pid, "turbonet") => format!(
                "the soft switch (pid {pid}) is no longer running (its log: {}); `turbonet down \
                 {lab}` and `up` again",
                self.dir.path().join("softswitch.log").display(),
                lab = self.lab.name
            ),
            _ => format!("the soft switch of lab {}", self.lab.name),
        }
    }
}

impl DataPlane for P4Plane {
    fn describe(&self) -> String {
        match self.lab.target {
            Target::Soft => "primary controller of the soft switch".to_owned(),
            _ => "primary controller of the switches".to_owned(),
        }
    }

    fn check_params(&self, link: &Link, params: &LinkParams) -> Result<()> {
        if let Some(what) = soft::pipeline_lacks(params) {
            return Err(Error::Invalid(format!(
                "the turbonet pipeline has no {what}; on target \"{}\" a link takes rate, delay, \
                 loss (independent), queue and mtu",
                self.lab.target
            )));
        }
        let before = &self.params[link.id.0 as usize];
        if (before.rate, before.queue) != (params.rate, params.queue)
            && self.lab.target != Target::Soft
        {
            // Rates live in the traffic manager, outside P4Runtime.
            return Err(Error::Invalid(
                "a link's rate and queue are the switch's traffic manager's (BMv2: \
                 set_queue_rate; Tofino: its port shaping), not P4Runtime's; turbonet changes \
                 them on target \"soft\" only (delay and loss work here)"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    fn apply<'a>(&'a mut self, desired: Desired<'a>) -> LocalBoxFuture<'a, Result<Applied>> {
        Box::pin(async move {
            let lab = self.lab.clone();
            let mut applied = Applied::default();
            let rates_changed = self
                .params
                .iter()
                .zip(desired.params)
                .any(|(a, b)| (a.rate, a.queue) != (b.rate, b.queue));
            if rates_changed {
                // The soft switch takes rates in its device config (checked
                // before: other switches refuse).
                for sw in &mut self.switches {
                    let config = soft::device_config(&lab, &sw.mapping, desired.params).to_bytes();
                    sw.session.set_device_config(config).await?;
                }
            }
            applied.impairments = self
                .params
                .iter()
                .zip(desired.params)
                .filter(|(a, b)| a != b)
                .count();
            self.params = desired.params.to_vec();
            let agents = self
                .agent_routes
                .as_ref()
                .map(|table| table.routes())
                .unwrap_or_default();
            let routes = super::control::with_agent_routes(desired.routes, &agents);
            let state = FabricState {
                routes: &routes,
                params: desired.params,
                failures: desired.failures,
            };
            for i in 0..self.switches.len() {
                let changes = self.switches[i].update(&lab, state).await;
                let name = self.switches[i].switch.clone();
                applied.entities += changes.with_context(|| self.switch_gone(&name))?.total();
            }
            Ok(applied)
        })
    }

    fn counters(&mut self) -> LocalBoxFuture<'_, Result<Vec<LinkCounters>>> {
        Box::pin(async move {
            // Each direction is counted by the switch its sending end (or,
            // from a host, its receiving end) runs on: the sum is the link's.
            let mut total: Vec<LinkCounters> = Vec::new();
            for sw in &mut self.switches {
                let counters = sw.link_counters(&self.lab).await?;
                if total.is_empty() {
                    total = counters;
                    continue;
                }
                for (sum, c) in total.iter_mut().zip(counters) {
                    for (s, c) in sum.directions.iter_mut().zip(c.directions) {
                        add(s, &c);
                    }
                }
            }
            Ok(total)
        })
    }

    fn pipeline_routes(&self) -> Option<Rc<PipelineRoutes>> {
        self.agent_routes.clone()
    }
}

fn add(sum: &mut Counters, c: &Counters) {
    sum.rx_packets += c.rx_packets;
    sum.rx_bytes += c.rx_bytes;
    sum.tx_packets += c.tx_packets;
    sum.tx_bytes += c.tx_bytes;
    sum.dropped_loss += c.dropped_loss;
}

/// Takes over the lab's soft switch: primary under `election_id`, with the
/// entities `up` wrote.
async fn connect_soft(
    lab: &Lab,
    mapping: Mapping,
    dir: &LabDir,
    routes: Option<&[Vec<turbonet_routing::Route>]>,
    election_id: u128,
) -> Result<P4Lab> {
    let client = super::local::connect_switch(dir, election_id).await?;
    P4Lab::adopt(
        lab,
        mapping,
        soft::SWITCH,
        client,
        (
            turbonet_p4::turbonet_p4info(),
            turbonet_p4::pipeline::Target::Soft,
        ),
        routes,
    )
    .await
}

/// Takes over the lab's `[p4rt]` switches: on each, primary under
/// `election_id`, with the entities `up` wrote.
async fn connect_p4rt(
    lab: &Lab,
    mapping: Mapping,
    state: &LabState,
    routes: Option<&[Vec<turbonet_routing::Route>]>,
    election_id: u128,
) -> Result<Vec<P4Lab>> {
    let (p4info, _) = switches::pipeline(lab, &state.scenario)?;
    let mut out = Vec::new();
    for sw in &switches::config(lab)?.switches {
        let id = u128::from(sw.election_id) + election_id;
        let (client, _) = switches::connect(lab, &state.scenario, sw, id).await?;
        out.push(
            P4Lab::adopt(
                lab,
                mapping.clone(),
                &sw.name,
                client,
                (p4info.clone(), switches::target(sw, &p4info)),
                routes,
            )
            .await?,
        );
    }
    Ok(out)
}
