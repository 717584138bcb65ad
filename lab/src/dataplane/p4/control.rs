//! The controller of a lab on a P4 switch: what the switch must hold for
//! the fabric's current state (routes, link parameters, failures), kept
//! there by writing only the difference, and the pipeline's per-port
//! counters turned into per-link counters.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::error::Result;
use turbonet_injectors::Counters;
use turbonet_p4::p4::v1::Entity;
use turbonet_routing::{Failures, Route};
use turbonet_topo::Lab;
use turbonet_topo::mapper::Mapping;

use turbonet_p4::p4::config::v1::P4Info;
use turbonet_p4::pipeline::Target;
use turbonet_p4::{Pipeline, Schema};

use super::entries::{self, FabricState};
use super::session::{Changes, Count, SwitchSession, VportCounters};
use crate::dataplane::plane::LinkCounters;
use turbonet_p4::Client;

/// The bytes of the `lost` frames among `seen`. `vport_rx_lost` counts
/// packets only (its bytes read 0), so they are taken at the mean size of
/// the frames seen: the draw does not depend on size.
fn lost_bytes(seen: Count, lost: Count) -> u64 {
    if lost.bytes > 0 || seen.packets == 0 {
        return lost.bytes;
    }
    let share = u128::from(seen.bytes) * u128::from(lost.packets) / u128::from(seen.packets);
    u64::try_from(share).unwrap_or(u64::MAX)
}

/// The routes virtual switches forward by: `routes` (what turbonet
/// installs: on `bgp` the host ports and externals, otherwise every route),
/// and with BGP for other prefixes what the agents hold (`agents`, by
/// node), as a kernel prefers the static route (metric 0) over BGP's.
pub fn with_agent_routes<'a>(
    routes: &'a [Vec<Route>],
    agents: &[Vec<Route>],
) -> Cow<'a, [Vec<Route>]> {
    if agents.iter().all(Vec::is_empty) {
        return Cow::Borrowed(routes);
    }
    let mut all = routes.to_vec();
    for (mine, learned) in all.iter_mut().zip(agents) {
        let have: HashSet<ipnet::Ipv4Net> = mine.iter().map(|r| r.prefix).collect();
        mine.extend(
            learned
                .iter()
                .filter(|r| !have.contains(&r.prefix))
                .cloned(),
        );
    }
    Cow::Owned(all)
}

/// Every entity of physical switch `switch` as `up` programs it: the
/// scenario's link parameters, nothing down, no route learned yet.
fn at_start(
    lab: &Lab,
    mapping: &Mapping,
    switch: &str,
    pipeline: &Pipeline,
    routes: &[Vec<Route>],
) -> Result<Vec<Entity>> {
    let failures = Failures::default();
    let params: Vec<_> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
    let state = FabricState {
        routes,
        params: &params,
        failures: &failures,
    };
    entries::switch_entries(lab, mapping, state, pipeline, switch)
}

/// The turbonet pipeline's ids in `p4info`, run by `target`.
fn resolve(p4info: &P4Info, target: Target) -> Result<Pipeline> {
    Ok(Pipeline::resolve(&Schema::new(p4info)?, p4info, target)?)
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
    /// Sets the pipeline of the switch behind `client` (physical switch
    /// `switch` of `mapping`, a `target`) and writes its share of the lab
    /// as `up` leaves it.
    pub async fn program(
        lab: &Lab,
        mapping: Mapping,
        switch: &str,
        client: Client,
        (p4info, target): (P4Info, Target),
        device_config: Vec<u8>,
        routes: &[Vec<Route>],
    ) -> Result<P4Lab> {
        let entities = at_start(lab, &mapping, switch, &resolve(&p4info, target)?, routes)?;
        Ok(P4Lab {
            session: SwitchSession::program(client, p4info, target, device_config, entities)
                .await?,
            mapping,
            switch: switch.to_owned(),
        })
    }

    /// Takes over a switch another controller wrote (under a lower
    /// election id). With `routes`, it holds what [`P4Lab::program`] wrote
    /// with them, known without reading it back; without (a controller
    /// before us changed it, then died), what it holds is read back.
    pub async fn adopt(
        lab: &Lab,
        mapping: Mapping,
        switch: &str,
        client: Client,
        (p4info, target): (P4Info, Target),
        routes: Option<&[Vec<Route>]>,
    ) -> Result<P4Lab> {
        let session = match routes {
            Some(routes) => {
                let pipeline = resolve(&p4info, target)?;
                let entities = at_start(lab, &mapping, switch, &pipeline, routes)?;
                SwitchSession::adopt(client, p4info, target, entities)?
            }
            None => SwitchSession::adopt_reading(client, p4info, target).await?,
        };
        Ok(P4Lab {
            session,
            mapping,
            switch: switch.to_owned(),
        })
    }

    /// Rewrites what changed for `state`.
    pub async fn update(&mut self, lab: &Lab, state: FabricState<'_>) -> Result<Changes> {
        let desired = entries::switch_entries(
            lab,
            &self.mapping,
            state,
            self.session.pipeline(),
            &self.switch,
        )?;
        self.session.sync(desired).await
    }

    /// Per-link counters from the pipeline's per-virtual-port counters.
    /// Direction `d` runs from `ends[d]`: a switch end counts what it sent
    /// and what the link's loss took; a host end is counted where the
    /// switch received it, where that direction's loss is drawn too.
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
                // A switch end on another physical switch counts there.
                let from_host = |d: usize| !fabric.node(link.ends[d].node).role.is_switch();
                let direction = |d: usize| match (at(d), at(1 - d)) {
                    (Some(from), _) => Counters {
                        rx_packets: from.tx.packets + from.lost.packets,
                        rx_bytes: from.tx.bytes + from.lost.bytes,
                        tx_packets: from.tx.packets,
                        tx_bytes: from.tx.bytes,
                        dropped_loss: from.lost.packets,
                        ..Counters::default()
                    },
                    // The program counts vport_rx before the inbound loss
                    // draw: rx is what the host offered, of which rx_lost
                    // was lost.
                    (None, Some(to)) if from_host(d) => Counters {
                        rx_packets: to.rx.packets,
                        rx_bytes: to.rx.bytes,
                        tx_packets: to.rx.packets.saturating_sub(to.rx_lost.packets),
                        tx_bytes: to.rx.bytes.saturating_sub(lost_bytes(to.rx, to.rx_lost)),
                        dropped_loss: to.rx_lost.packets,
                        ..Counters::default()
                    },
                    (None, _) => Counters::default(),
                };
                LinkCounters {
                    link: link.name.clone(),
                    directions: [direction(0), direction(1)],
                    shortfall: Default::default(),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_bytes_are_counted_or_taken_at_the_mean_frame_size() {
        let count = |packets, bytes| Count { packets, bytes };
        // A packets-only counter: 1 of 4 frames of 100 bytes on average.
        assert_eq!(lost_bytes(count(4, 400), count(1, 0)), 100);
        // A counter with bytes is taken as it is.
        assert_eq!(lost_bytes(count(4, 400), count(1, 64)), 64);
        assert_eq!(lost_bytes(count(0, 0), count(0, 0)), 0);
        assert_eq!(lost_bytes(count(3, 300), count(0, 0)), 0);
    }
}
