//! The controller of a lab on a P4 switch: what the switch must hold for
//! the fabric's current state (routes, link parameters, failures), kept
//! there by writing only the difference, and the pipeline's per-port
//! counters turned into per-link counters.

use std::collections::HashMap;

use anyhow::Result;
use p4runtime_proto::p4::v1::Entity;
use turbonet_injectors::Counters;
use turbonet_routing::{Failures, Route};
use turbonet_topo::mapper::Mapping;
use turbonet_topo::{Lab, LinkParams, RoutingMode};

use super::entries::{self, FabricState};
use super::session::{Changes, SwitchSession, VportCounters};
use crate::engine::LinkCounters;

/// The routes the virtual switches forward by around `failures`. The
/// controller recomputes them over what is left; static routing only stops
/// using next hops over what is down, as a kernel does when a port goes
/// down.
pub fn routes(lab: &Lab, failures: &Failures) -> Vec<Vec<Route>> {
    if lab.routing.mode == RoutingMode::Controller {
        return turbonet_routing::routes_avoiding(&lab.fabric, failures);
    }
    let mut routes = turbonet_routing::static_routes(&lab.fabric);
    if failures.links.is_empty() && failures.nodes.is_empty() {
        return routes;
    }
    for node in &lab.fabric.nodes {
        let down: Vec<&str> = lab
            .fabric
            .ports(node.id)
            .filter(|(link, _, _)| failures.blocks(link))
            .map(|(_, local, _)| local.ifname.as_str())
            .collect();
        routes[node.id.0 as usize].retain_mut(|r| {
            r.nexthops
                .retain(|hop| !down.contains(&hop.ifname.as_str()));
            !r.nexthops.is_empty()
        });
    }
    routes
}

/// A lab on one P4 switch, as its controller holds it.
#[derive(Debug)]
pub struct P4Lab {
    /// The lab's mapping onto the switch.
    pub mapping: Mapping,
    /// The physical switch's name in the mapping.
    pub switch: String,
    /// The session with it.
    pub session: SwitchSession,
}

impl P4Lab {
    /// Every entity the switch holds when the links have `params` and
    /// `failures` are down.
    pub fn entities(
        lab: &Lab,
        mapping: &Mapping,
        switch: &str,
        schema: &turbonet_softswitch::Schema,
        params: &[LinkParams],
        failures: &Failures,
    ) -> Result<Vec<Entity>> {
        let routes = routes(lab, failures);
        let state = FabricState {
            routes: &routes,
            params,
            failures,
        };
        entries::switch_entries(lab, mapping, state, schema, switch)
    }

    /// Rewrites what changed for `params` and `failures`.
    pub async fn update(
        &mut self,
        lab: &Lab,
        params: &[LinkParams],
        failures: &Failures,
    ) -> Result<Changes> {
        let desired = Self::entities(
            lab,
            &self.mapping,
            &self.switch,
            self.session.schema(),
            params,
            failures,
        )?;
        self.session.sync(desired).await
    }

    /// Per-link counters from the pipeline's per-virtual-port counters.
    /// Direction `d` runs from `ends[d]`: a switch end counts what it sent
    /// and what the link's loss took; a host end is counted where the
    /// switch received it.
    pub async fn link_counters(&mut self, lab: &Lab) -> Result<Vec<LinkCounters>> {
        let vports = entries::vports(&self.mapping, &self.switch);
        let counters = self.session.vport_counters(vports.len() as u32).await?;
        let by_port: HashMap<(&str, &str), VportCounters> = vports
            .iter()
            .map(|(id, vp)| {
                (
                    (vp.virtual_switch.as_str(), vp.virtual_port.as_str()),
                    counters.get(*id as usize).copied().unwrap_or_default(),
                )
            })
            .collect();
        let fabric = &lab.fabric;
        Ok(fabric
            .links
            .iter()
            .map(|link| {
                let at = |d: usize| {
                    let end = &link.ends[d];
                    by_port
                        .get(&(fabric.node(end.node).name.as_str(), end.ifname.as_str()))
                        .copied()
                };
                let direction = |d: usize| match (at(d), at(1 - d)) {
                    (Some(from), _) => Counters {
                        rx_packets: from.tx.packets + from.lost.packets,
                        rx_bytes: from.tx.bytes + from.lost.bytes,
                        tx_packets: from.tx.packets,
                        tx_bytes: from.tx.bytes,
                        dropped_loss: from.lost.packets,
                        ..Counters::default()
                    },
                    (None, Some(to)) => Counters {
                        rx_packets: to.rx.packets,
                        rx_bytes: to.rx.bytes,
                        tx_packets: to.rx.packets,
                        tx_bytes: to.rx.bytes,
                        ..Counters::default()
                    },
                    (None, None) => Counters::default(),
                };
                LinkCounters {
                    link: link.name.clone(),
                    directions: [direction(0), direction(1)],
                    tx_errors: [0, 0],
                }
            })
            .collect())
    }
}
