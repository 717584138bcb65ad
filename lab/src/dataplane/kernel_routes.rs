//! A node's routes (`turbonet-routing`'s, by interface name) as the kernel
//! takes them (by ifindex).

use rtnetlink::packet_route::route::RouteProtocol;
use turbonet_routing::Route;
use turbonet_topo::{Lab, Node};

use turbonet_host::kernel::{KernelHop, KernelRoute};

use crate::err;
use crate::error::{Context, Result};
use crate::names::port_ifindex;

/// One node's `routes` as kernel routes (interfaces by ifindex).
pub fn node_kernel_routes(
    lab: &Lab,
    node: &Node,
    routes: &[Route],
    protocol: RouteProtocol,
    metric: Option<u32>,
) -> Result<Vec<KernelRoute>> {
    let ifindex = ifindex_by_name(lab, node);
    routes
        .iter()
        .map(|r| kernel_route(r, &ifindex, protocol, metric))
        .collect::<Result<_>>()
        .with_context(|| format!("{}: building routes", node.name))
}

/// `route` as a kernel route; `ifindex` maps its interfaces.
pub fn kernel_route(
    route: &Route,
    ifindex: &std::collections::HashMap<&str, u32>,
    protocol: RouteProtocol,
    metric: Option<u32>,
) -> Result<KernelRoute> {
    let hops = route
        .nexthops
        .iter()
        .map(|hop| {
            Ok(KernelHop {
                via: hop.via,
                ifindex: ifindex
                    .get(hop.ifname.as_str())
                    .copied()
                    .ok_or_else(|| err!("no interface {}", hop.ifname))?,
                onlink: hop.onlink,
            })
        })
        .collect::<Result<_>>()?;
    Ok(KernelRoute {
        prefix: route.prefix,
        hops,
        protocol,
        metric,
        table: None,
    })
}

/// Interface name to ifindex for a node's ports.
pub fn ifindex_by_name<'a>(lab: &'a Lab, node: &Node) -> std::collections::HashMap<&'a str, u32> {
    lab.fabric
        .ports(node.id)
        .enumerate()
        .map(|(port, (_, local, _))| (local.ifname.as_str(), port_ifindex(port)))
        .collect()
}
