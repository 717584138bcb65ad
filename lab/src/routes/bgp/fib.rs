//! The FIB a BGP agent drives: a trait, and its rtnetlink implementation
//! for the netns target.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use crate::error::{Context, Result};
use ipnet::Ipv4Net;
use rtnetlink::packet_route::route::RouteProtocol;
use tokio::sync::{Notify, watch};
use turbonet_routing::bgp::config::KERNEL_METRIC;
use turbonet_routing::{NextHop, Route, RouteOrigin};

/// A switch's forwarding table, as a BGP agent drives it. The netns target
/// implements it with rtnetlink ([`NetlinkFib`]); a P4 target writes table
/// entries instead.
pub trait Fib {
    /// Makes each prefix reach through its next hops, replacing what was
    /// there; an empty list removes the prefix.
    fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> impl Future<Output = Result<()>>;
}

/// A namespace's main table through rtnetlink: routes as protocol `bgp`
/// with metric [`KERNEL_METRIC`].
#[derive(Debug)]
pub struct NetlinkFib {
    handle: rtnetlink::Handle,
    ifindex: HashMap<String, u32>,
}

impl NetlinkFib {
    /// The FIB behind `handle` (a namespace's rtnetlink connection), whose
    /// interfaces are named by `ifindex`.
    pub fn new(handle: rtnetlink::Handle, ifindex: HashMap<String, u32>) -> NetlinkFib {
        NetlinkFib { handle, ifindex }
    }
}

impl Fib for NetlinkFib {
    async fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> Result<()> {
        let ifindex: HashMap<&str, u32> =
            self.ifindex.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let handle = &self.handle;
        let ifindex = &ifindex;
        crate::kernel::pipelined(routes.into_iter().map(|(prefix, nexthops)| async move {
            if nexthops.is_empty() {
                return crate::kernel::delete_route_with(
                    handle,
                    prefix,
                    RouteProtocol::Bgp,
                    Some(KERNEL_METRIC),
                )
                .await;
            }
            let route = Route {
                prefix,
                nexthops,
                origin: RouteOrigin::Fabric,
            };
            let message = crate::kernel::route_message(&crate::kernel::routes::kernel_route(
                &route,
                ifindex,
                RouteProtocol::Bgp,
                Some(KERNEL_METRIC),
            )?)?;
            match handle.route().add(message).replace().execute().await {
                Ok(()) => Ok(()),
                // The port went down between the decision and the request:
                // the session's Down follows and withdraws the route.
                Err(rtnetlink::Error::NetlinkError(e))
                    if e.raw_code() == -libc::ENETDOWN || e.raw_code() == -libc::ENETUNREACH =>
                {
                    Ok(())
                }
                Err(e) => Err(e).with_context(|| format!("route {prefix}")),
            }
        }))
        .await
    }
}

/// The routes built-in agents hold for virtual switches that run in a P4
/// pipeline, by node: the daemon's controller writes them to the switch
/// (with the routes `up` would have put in a kernel) and says when it has.
#[derive(Debug)]
pub struct PipelineRoutes {
    routes: RefCell<Vec<BTreeMap<Ipv4Net, Vec<NextHop>>>>,
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
                        nexthops: nexthops.clone(),
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
}

/// One virtual switch's FIB in a P4 pipeline (see [`PipelineRoutes`]).
#[derive(Debug)]
pub struct PipelineFib {
    node: usize,
    table: Rc<PipelineRoutes>,
}

impl PipelineFib {
    /// Node `node`'s share of `table`.
    pub fn new(node: usize, table: Rc<PipelineRoutes>) -> PipelineFib {
        PipelineFib { node, table }
    }
}

impl Fib for PipelineFib {
    async fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> Result<()> {
        {
            let mut table = self.table.routes.borrow_mut();
            let mine = &mut table[self.node];
            for (prefix, nexthops) in routes {
                if nexthops.is_empty() {
                    mine.remove(&prefix);
                } else {
                    mine.insert(prefix, nexthops);
                }
            }
        }
        let change = self.table.requested.get() + 1;
        self.table.requested.set(change);
        self.table.wake.notify_one();
        let mut synced = self.table.synced.subscribe();
        synced
            .wait_for(|&written| written >= change)
            .await
            .map(|_| ())
            .map_err(|_| crate::err!("the controller stopped"))
    }
}

/// The FIB of a built-in agent: the switch's kernel table, or its tables
/// in a P4 pipeline.
#[derive(Debug)]
pub enum AnyFib {
    /// `netns`.
    Netlink(NetlinkFib),
    /// `soft`.
    Pipeline(PipelineFib),
}

impl Fib for AnyFib {
    async fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> Result<()> {
        match self {
            AnyFib::Netlink(fib) => fib.apply(routes).await,
            AnyFib::Pipeline(fib) => fib.apply(routes).await,
        }
    }
}
