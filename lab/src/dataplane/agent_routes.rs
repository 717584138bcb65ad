//! The routes BGP agents hold for virtual switches that run in a P4
//! pipeline ([`PipelineRoutes`]): each agent's FIB writes its share, the
//! daemon writes the whole table to the switch and says when it has.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use ipnet::Ipv4Net;
use tokio::sync::{Notify, watch};
use turbonet_routing::bgp::speaker::NextHops;
use turbonet_routing::{Route, RouteOrigin};

use crate::error::Result;

/// The routes built-in agents hold for virtual switches that run in a P4
/// pipeline, by node: the daemon's controller writes them to the switch
/// (with the routes `up` would have put in a kernel) and says when it has.
#[derive(Debug)]
pub struct PipelineRoutes {
    routes: RefCell<Vec<BTreeMap<Ipv4Net, NextHops>>>,
    requested: Cell<u64>,
    wake: Notify,
    synced: watch::Sender<u64>,
}

impl PipelineRoutes {
    /// An empty table for `nodes` nodes.
    pub fn new(nodes: usize) -> Rc<PipelineRoutes> {
        Rc::new(PipelineRoutes {
            routes: RefCell::new(vec![BTreeMap::new(); nodes]),
            requested: Cell::new(0),
            wake: Notify::new(),
            synced: watch::Sender::new(0),
        })
    }

    /// Every node's routes as the agents hold them.
    pub fn routes(&self) -> Vec<Vec<Route>> {
        self.routes
            .borrow()
            .iter()
            .map(|node| {
                node.iter()
                    .map(|(prefix, nexthops)| Route {
                        prefix: *prefix,
                        nexthops: nexthops.to_vec(),
                        origin: RouteOrigin::Fabric,
                    })
                    .collect()
            })
            .collect()
    }

    /// Waits until an agent changed its routes.
    pub async fn changed(&self) {
        self.wake.notified().await;
    }

    /// The number of the last change, for [`PipelineRoutes::written`].
    pub fn latest(&self) -> u64 {
        self.requested.get()
    }

    /// The switch holds every change up to `change`.
    pub fn written(&self, change: u64) {
        self.synced.send_replace(change);
    }

    /// Node `node`'s routes change: each prefix now reaches through its
    /// next hops (none: removed). Returns once the switch holds them.
    pub async fn apply(&self, node: usize, routes: Vec<(Ipv4Net, NextHops)>) -> Result<()> {
        {
            let mut table = self.routes.borrow_mut();
            let mine = &mut table[node];
            for (prefix, nexthops) in routes {
                if nexthops.is_empty() {
                    mine.remove(&prefix);
                } else {
                    mine.insert(prefix, nexthops);
                }
            }
        }
        let change = self.requested.get() + 1;
        self.requested.set(change);
        self.wake.notify_one();
        let mut synced = self.synced.subscribe();
        synced
            .wait_for(|&written| written >= change)
            .await
            .map(|_| ())
            .map_err(|_| crate::err!("the controller stopped"))
    }
}
