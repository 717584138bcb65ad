//! The FIB a BGP agent drives: a trait, and its rtnetlink implementation
//! for the netns target.

use std::collections::HashMap;

use anyhow::{Context, Result};
use ipnet::Ipv4Net;
use rtnetlink::packet_route::route::RouteProtocol;
use turbonet_routing::bgp::config::KERNEL_METRIC;
use turbonet_routing::{NextHop, Route, RouteOrigin};

use crate::fabric;

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
        fabric::pipelined(routes.into_iter().map(|(prefix, nexthops)| async move {
            if nexthops.is_empty() {
                return fabric::delete_route_with(
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
            let message =
                fabric::route_message(&route, ifindex, RouteProtocol::Bgp, Some(KERNEL_METRIC))?;
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
