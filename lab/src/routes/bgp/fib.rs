//! The FIBs a built-in speaker drives ([`Fib`], the driver's trait): a
//! namespace's kernel table through rtnetlink ([`NetlinkFib`], the netns
//! target), or a virtual switch's share of a P4 pipeline's routes
//! ([`PipelineFib`]).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use ipnet::Ipv4Net;
use rtnetlink::packet_route::route::RouteProtocol;
use turbonet_routing::bgp::config::KERNEL_METRIC;
use turbonet_routing::bgp::speaker::NextHops;
use turbonet_routing::bgp::speaker_driver::Fib;

use super::groups::{Groups, Target};
use crate::dataplane::agent_routes::PipelineRoutes;
use crate::error::{Context, Result};
use turbonet_host::kernel::nexthop::{NexthopSocket, Request};
use turbonet_host::kernel::{KernelHop, KernelRoute};

/// A namespace's main table: routes as protocol `bgp` with metric
/// [`KERNEL_METRIC`], pointing at kernel nexthop objects (one group per
/// distinct set of next hops, [`Groups`]), written in batches on a
/// [`NexthopSocket`] (rtnetlink only for the rare inline route).
///
/// The writes run on `runtime`, with the rtnetlink connection's task: a
/// thousand switches install millions of routes while they converge, half
/// the work of their speakers' thread if it were done there, so it is done
/// on another core, one task per change set, yielding between batches so
/// that change sets of several switches take turns.
#[derive(Debug)]
pub struct NetlinkFib {
    writer: Option<Box<Writer>>,
    runtime: tokio::runtime::Handle,
    /// The writer's requests, as of its last write.
    requests: u64,
}

/// What a change set is written with; it goes to the write's task and
/// comes back.
#[derive(Debug)]
struct Writer {
    handle: rtnetlink::Handle,
    /// The namespace's nexthop objects (read and made between the route
    /// writes, a few requests a change set).
    nexthops: NexthopSocket,
    groups: Groups,
    ifindex: HashMap<String, u32>,
    /// Requests made of the kernel ([`Fib::requests`]).
    requests: u64,
}

impl NetlinkFib {
    /// The FIB behind `handle` (a namespace's rtnetlink connection, whose
    /// task runs on `runtime`) and `nexthops` (a socket of the same
    /// namespace), whose fabric ports are named by `ifindex`; other
    /// interfaces (external ports, whose index the kernel chose) are
    /// looked up when first used. `quiet_groups`: the namespace's kernel
    /// tells nothing of the routes of a group given new members
    /// (`nexthop_compat_mode` off), so sets that grow or shrink are
    /// changed in place ([`Groups::in_place`]).
    pub fn new(
        handle: rtnetlink::Handle,
        nexthops: NexthopSocket,
        ifindex: HashMap<String, u32>,
        runtime: tokio::runtime::Handle,
        quiet_groups: bool,
    ) -> NetlinkFib {
        NetlinkFib {
            writer: Some(Box::new(Writer {
                handle,
                nexthops,
                groups: if quiet_groups {
                    Groups::in_place()
                } else {
                    Groups::default()
                },
                ifindex,
                requests: 0,
            })),
            runtime,
            requests: 0,
        }
    }
}

impl Fib for NetlinkFib {
    type Error = crate::Error;

    async fn apply(&mut self, routes: Vec<(Ipv4Net, NextHops)>) -> Result<()> {
        let mut writer = self
            .writer
            .take()
            .ok_or_else(|| crate::err!("an earlier write of this FIB did not end"))?;
        let (writer, result) = self
            .runtime
            .spawn(async move {
                let result = writer.apply(routes).await;
                (writer, result)
            })
            .await
            .map_err(|e| crate::err!("writing routes: {e}"))?;
        self.requests = writer.requests;
        self.writer = Some(writer);
        result
    }

    fn requests(&self) -> u64 {
        self.requests
    }
}

impl Writer {
    /// Learns the index of every interface `routes` names that it does not
    /// know yet.
    async fn resolve(&mut self, routes: &[(Ipv4Net, NextHops)]) -> Result<()> {
        // Each distinct list once (by its address: shared lists are one).
        let sets: HashMap<usize, &NextHops> = routes
            .iter()
            .map(|(_, hops)| (hops.as_ptr() as usize, hops))
            .collect();
        let unknown: std::collections::BTreeSet<&str> = sets
            .values()
            .flat_map(|hops| hops.iter())
            .map(|hop| hop.ifname.as_str())
            .filter(|name| !self.ifindex.contains_key(*name))
            .collect();
        for name in unknown {
            let link = turbonet_host::kernel::interfaces::link_by_name(&self.handle, name)
                .await?
                .ok_or_else(|| crate::err!("no interface {name}"))?;
            self.ifindex.insert(name.to_owned(), link.header.index);
        }
        Ok(())
    }

    /// Writes `routes`, the change set of [`Fib::apply`]: first the
    /// nexthop objects they need, then the routes, then the groups no
    /// route uses any more.
    async fn apply(&mut self, routes: Vec<(Ipv4Net, NextHops)>) -> Result<()> {
        self.resolve(&routes).await?;
        // Each distinct list of next hops resolved once, and shared as it
        // came.
        let mut resolved: HashMap<usize, Arc<[KernelHop]>> = HashMap::new();
        let routes: Vec<(Ipv4Net, Arc<[KernelHop]>)> = routes
            .into_iter()
            .map(|(prefix, hops)| {
                let kernel = resolved.entry(hops.as_ptr() as usize).or_insert_with(|| {
                    hops.iter()
                        .map(|hop| KernelHop {
                            via: hop.via,
                            ifindex: self.ifindex[hop.ifname.as_str()],
                            onlink: hop.onlink,
                        })
                        .collect()
                });
                (prefix, kernel.clone())
            })
            .collect();
        let plan = match self.nexthops.dump() {
            Ok(objects) => self.groups.plan(&objects, &routes),
            // A kernel before 5.3 has no nexthop objects.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Groups::inline(&routes),
            Err(e) => return Err(e).context("reading the nexthop objects"),
        };
        self.requests += plan.setup.len() as u64;
        let outcomes = self
            .nexthops
            .execute(&plan.setup)
            .context("making nexthop objects")?;
        let targets = self.groups.commit(&routes, plan, &outcomes);
        // Routes to objects in batches on the nexthop socket; inline ones
        // (rare: no objects, or a next hop without a gateway) through
        // rtnetlink.
        let mut requests = Vec::new();
        let mut inline = Vec::new();
        for ((prefix, hops), target) in routes.into_iter().zip(targets) {
            let metric = KERNEL_METRIC;
            match target {
                Target::Kept(_) => {}
                Target::Remove => requests.push(Request::Unroute { prefix, metric }),
                Target::Object(id) => requests.push(Request::Route { prefix, id, metric }),
                Target::Inline => inline.push(KernelRoute {
                    prefix,
                    hops: hops.to_vec(),
                    protocol: RouteProtocol::Bgp,
                    metric: Some(metric),
                    table: None,
                }),
            }
        }
        self.requests += (requests.len() + inline.len()) as u64;
        let mut outcomes = Vec::with_capacity(requests.len());
        for batch in requests.chunks(NexthopSocket::BATCH) {
            outcomes.extend(self.nexthops.execute(batch).context("writing routes")?);
            tokio::task::yield_now().await;
        }
        let mut unwritten = Vec::new();
        for (request, outcome) in requests.iter().zip(outcomes) {
            match (request, outcome) {
                (_, Ok(())) => {}
                // Removed already (with its group, when a port went down).
                (Request::Unroute { .. }, Err(libc::ESRCH)) => {}
                // The port went down between the decision and the request
                // (the kernel then removed its next hop object, so a route
                // to it is invalid): the session's Down follows and
                // withdraws the route.
                (
                    Request::Route { prefix, .. },
                    Err(libc::ENETDOWN | libc::ENETUNREACH | libc::EINVAL),
                ) => unwritten.push(*prefix),
                (Request::Route { prefix, .. } | Request::Unroute { prefix, .. }, Err(code)) => {
                    return Err(std::io::Error::from_raw_os_error(code))
                        .with_context(|| format!("route {prefix}"));
                }
                (other, Err(code)) => unreachable!("{other:?} refused ({code}) among routes"),
            }
        }
        let handle = &self.handle;
        let refused = std::sync::Mutex::new(Vec::new());
        let refused = &refused;
        turbonet_host::kernel::pipelined(inline.into_iter().map(|route| async move {
            let prefix = route.prefix;
            let message = turbonet_host::kernel::route_message(&route)?;
            match handle.route().add(message).replace().execute().await {
                Ok(()) => Ok(()),
                Err(rtnetlink::Error::NetlinkError(e))
                    if [libc::ENETDOWN, libc::ENETUNREACH].contains(&-e.raw_code()) =>
                {
                    refused
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(prefix);
                    Ok(())
                }
                Err(e) => turbonet_host::error::Context::with_context(Err(e), || {
                    format!("route {prefix}")
                }),
            }
        }))
        .await?;
        unwritten.extend(
            refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .drain(..),
        );
        // A route not written may still point at a group thought unused.
        if unwritten.is_empty() {
            let unused = self.groups.unused();
            self.requests += unused.len() as u64;
            self.nexthops
                .execute(&unused)
                .context("removing unused nexthop groups")?;
        } else {
            self.groups.forget(&unwritten);
        }
        Ok(())
    }
}

/// One virtual switch's FIB in a P4 pipeline (see [`PipelineRoutes`]).
#[derive(Debug)]
pub struct PipelineFib {
    node: usize,
    table: Rc<PipelineRoutes>,
    /// Routes handed to the pipeline.
    requests: u64,
}

impl PipelineFib {
    /// Node `node`'s share of `table`.
    pub fn new(node: usize, table: Rc<PipelineRoutes>) -> PipelineFib {
        PipelineFib {
            node,
            table,
            requests: 0,
        }
    }
}

impl Fib for PipelineFib {
    type Error = crate::Error;

    async fn apply(&mut self, routes: Vec<(Ipv4Net, NextHops)>) -> Result<()> {
        self.requests += routes.len() as u64;
        self.table.apply(self.node, routes).await
    }

    /// A route each: the controller writes the pipeline's tables in bulk,
    /// for every switch at once.
    fn requests(&self) -> u64 {
        self.requests
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
    type Error = crate::Error;

    async fn apply(&mut self, routes: Vec<(Ipv4Net, NextHops)>) -> Result<()> {
        match self {
            AnyFib::Netlink(fib) => fib.apply(routes).await,
            AnyFib::Pipeline(fib) => fib.apply(routes).await,
        }
    }

    fn requests(&self) -> u64 {
        match self {
            AnyFib::Netlink(fib) => fib.requests(),
            AnyFib::Pipeline(fib) => fib.requests(),
        }
    }
}
