//! turbonet-routing: route computation for turbonet fabrics.
//!
//! Pure: computes which routes every node needs; the lab installs them
//! (kernel FIB through rtnetlink). Today this is the `static` control-plane
//! mode ([`static_routes`]): equal-cost shortest paths over the whole fabric,
//! computed once. The BGP agents ([`bgp`]: the message codec, the session
//! FSM, the RIB with route selection, one switch's speaker, and tokio
//! drivers for a session and for a speaker) and the central controller plug
//! in beside it.

pub mod bgp;
mod ecmp;
mod error;
pub mod intern;

pub use ecmp::{Failures, routes_avoiding, static_routes};
pub use error::DecodeError;

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::Serialize;

/// One next hop of a route.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NextHop {
    /// Gateway address; `None` for a directly attached destination.
    pub via: Option<Ipv4Addr>,
    /// Outgoing interface inside the node.
    pub ifname: String,
    /// The gateway is reachable on the interface although no connected
    /// route covers it (routed host ports), or is known to be on the link
    /// (a BGP peer's address), so the kernel does not look it up.
    pub onlink: bool,
}

/// Why a route exists; shown by `turbonet show routes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RouteOrigin {
    /// A host's default route towards its ToR(s).
    Default,
    /// A switch's /32 towards a host on one of its routed host ports.
    HostPort,
    /// A prefix behind an external port.
    External,
    /// An equal-cost shortest path through the fabric.
    Fabric,
}

/// A route to install in one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// Destination.
    pub prefix: Ipv4Net,
    /// Next hops; more than one means ECMP.
    pub nexthops: Vec<NextHop>,
    /// Why it exists.
    pub origin: RouteOrigin,
}
