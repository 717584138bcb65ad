//! The FIBs a built-in speaker drives ([`Fib`], the driver's trait): a
//! namespace's kernel table through rtnetlink ([`NetlinkFib`], the netns
//! target), or a virtual switch's share of a P4 pipeline's routes
//! ([`PipelineFib`]).

use std::collections::HashMap;
use std::rc::Rc;

use crate::dataplane::agent_routes::PipelineRoutes;
use crate::error::{Context, Result};
use ipnet::Ipv4Net;
use rtnetlink::packet_route::route::RouteProtocol;
use turbonet_routing::bgp::config::KERNEL_METRIC;
use turbonet_routing::bgp::speaker_driver::Fib;
use turbonet_routing::{NextHop, Route, RouteOrigin};

/// A namespace's main table through rtnetlink: routes as protocol `bgp`
/// with metric [`KERNEL_METRIC`].
///
/// The writes run on `runtime`, with the connection's task: a thousand
/// switches install millions of routes while they converge, half the work
/// of their speakers' thread if it were done there, so it is done on
/// other cores, one task per change set.
#[derive(Debug)]
pub struct NetlinkFib {
    writer: Option<Writer>,
    runtime: tokio::runtime::Handle,
}

/// What a change set is written with; it goes to the write's task and
/// comes back.
#[derive(Debug)]
struct Writer {
    handle: rtnetlink::Handle,
    ifindex: HashMap<String, u32>,
}

impl NetlinkFib {
    /// The FIB behind `handle` (a namespace's rtnetlink connection, whose
    /// task runs on `runtime`), whose fabric ports are named by `ifindex`;
    /// other interfaces (external ports, whose index the kernel chose)
    /// are looked up when first used.
    pub fn new(
        handle: rtnetlink::Handle,
        ifindex: HashMap<String, u32>,
        runtime: tokio::runtime::Handle,
    ) -> NetlinkFib {
        NetlinkFib {
            writer: Some(Writer { handle, ifindex }),
            runtime,
        }
    }
}

impl Fib for NetlinkFib {
    type Error = crate::Error;

    async fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> Result<()> {
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
        self.writer = Some(writer);
        result
    }
}

impl Writer {
    /// Learns the index of every interface `routes` names that it does not
    /// know yet.
    async fn resolve(&mut self, routes: &[(Ipv4Net, Vec<NextHop>)]) -> Result<()> {
        let unknown: std::collections::BTreeSet<&str> = routes
            .iter()
            .flat_map(|(_, hops)| hops)
            .map(|hop| hop.ifname.as_str())
            .filter(|name| !self.ifindex.contains_key(*name))
            .collect();
        for name in unknown {
            let link = crate::kernel::interfaces::link_by_name(&self.handle, name)
                .await?
                .ok_or_else(|| crate::err!("no interface {name}"))?;
            self.ifindex.insert(name.to_owned(), link.header.index);
        }
        Ok(())
    }

    /// Writes `routes`, the change set of [`Fib::apply`].
    async fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> Result<()> {
        self.resolve(&routes).await?;
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
    type Error = crate::Error;

    async fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> Result<()> {
        self.table.apply(self.node, routes).await
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

    async fn apply(&mut self, routes: Vec<(Ipv4Net, Vec<NextHop>)>) -> Result<()> {
        match self {
            AnyFib::Netlink(fib) => fib.apply(routes).await,
            AnyFib::Pipeline(fib) => fib.apply(routes).await,
        }
    }
}
