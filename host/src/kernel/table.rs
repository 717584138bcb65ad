//! What a namespace's main table holds, read back through netlink: its
//! routes with their next hops, a route lookup, interface names.

use rtnetlink::Handle;
use rtnetlink::packet_route::route::RouteProtocol;

use crate::error::Result;

/// A route as read from a namespace's main table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRoute {
    /// Destination.
    pub prefix: ipnet::Ipv4Net,
    /// Next hops (shareable: a watcher keeps one list per distinct set).
    pub hops: std::sync::Arc<[TableHop]>,
    /// Who installed it.
    pub protocol: RouteProtocol,
    /// Its metric (the kernel prefers the lowest).
    pub metric: u32,
}

/// One next hop of a [`TableRoute`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableHop {
    /// The gateway (`None`: the destination is on the link).
    pub via: Option<std::net::Ipv4Addr>,
    /// The outgoing interface.
    pub ifindex: u32,
    /// The kernel marked it dead (its port is down) or its port has no
    /// carrier: no packet leaves by it.
    pub down: bool,
}

impl TableRoute {
    /// The next hops packets can take.
    pub fn usable(&self) -> impl Iterator<Item = &TableHop> {
        self.hops.iter().filter(|h| !h.down)
    }

    /// An IPv4 unicast route of the main table, from a dump or a
    /// notification (`None` for any other).
    pub fn from_message(
        route: &rtnetlink::packet_route::route::RouteMessage,
    ) -> Option<TableRoute> {
        use rtnetlink::packet_route::AddressFamily;
        use rtnetlink::packet_route::route::{RouteAttribute, RouteType};
        let header = &route.header;
        if header.address_family != AddressFamily::Inet
            || header.kind != RouteType::Unicast
            || (header.table != 254
                && !route
                    .attributes
                    .iter()
                    .any(|a| matches!(a, RouteAttribute::Table(254))))
        {
            return None;
        }
        Self::parse(route)
    }

    /// Any route's prefix, next hops, protocol and metric, whatever its
    /// table and type.
    fn parse(route: &rtnetlink::packet_route::route::RouteMessage) -> Option<TableRoute> {
        use rtnetlink::packet_route::route::{
            RouteAddress, RouteAttribute, RouteFlags, RouteNextHopFlags,
        };
        let header = &route.header;
        let mut destination = std::net::Ipv4Addr::UNSPECIFIED;
        let (mut gateway, mut oif, mut metric) = (None, None, 0);
        let mut hops = Vec::new();
        for attribute in &route.attributes {
            match attribute {
                RouteAttribute::Destination(RouteAddress::Inet(d)) => destination = *d,
                RouteAttribute::Gateway(RouteAddress::Inet(g)) => gateway = Some(*g),
                RouteAttribute::Oif(i) => oif = Some(*i),
                RouteAttribute::Priority(p) => metric = *p,
                RouteAttribute::MultiPath(nexthops) => {
                    for nh in nexthops {
                        let via = nh.attributes.iter().find_map(|a| match a {
                            RouteAttribute::Gateway(RouteAddress::Inet(g)) => Some(*g),
                            _ => None,
                        });
                        hops.push(TableHop {
                            via,
                            ifindex: nh.interface_index,
                            down: nh
                                .flags
                                .intersects(RouteNextHopFlags::Dead | RouteNextHopFlags::Linkdown),
                        });
                    }
                }
                _ => {}
            }
        }
        if hops.is_empty() {
            hops.push(TableHop {
                via: gateway,
                ifindex: oif.unwrap_or(0),
                down: header
                    .flags
                    .intersects(RouteFlags::Dead | RouteFlags::Linkdown),
            });
        }
        let prefix = ipnet::Ipv4Net::new(destination, header.destination_prefix_length).ok()?;
        Some(TableRoute {
            prefix,
            hops: hops.into(),
            protocol: header.protocol,
            metric,
        })
    }
}

/// Where the kernel behind `handle` sends a packet for an address: what
/// `ip route get fibmatch ADDRESS` says.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// The route it matches (in whichever table the rules chose), with
    /// every next hop.
    Route(TableRoute),
    /// No route matches.
    NoRoute,
    /// A route that discards the packet: `blackhole`, `unreachable` or
    /// `prohibit`.
    Discard(&'static str),
}

/// Asks the kernel behind `handle` for the route a packet to `to` takes
/// (RTM_GETROUTE with RTM_F_FIB_MATCH: its rules, then the longest match,
/// as forwarding does).
pub async fn lookup(handle: &Handle, to: std::net::Ipv4Addr) -> Result<Lookup> {
    use futures::TryStreamExt;
    use nix::errno::Errno;
    use rtnetlink::packet_route::route::{RouteFlags, RouteType};
    let mut message = rtnetlink::RouteMessageBuilder::<std::net::Ipv4Addr>::new()
        .destination_prefix(to, 32)
        .build();
    message.header.flags |= RouteFlags::FibMatch;
    match handle.route().get(message).execute().try_next().await {
        Ok(Some(route)) => Ok(match route.header.kind {
            RouteType::BlackHole => Lookup::Discard("blackhole"),
            RouteType::Unreachable => Lookup::Discard("unreachable"),
            RouteType::Prohibit => Lookup::Discard("prohibit"),
            _ => TableRoute::parse(&route).map_or(Lookup::NoRoute, Lookup::Route),
        }),
        Ok(None) => Ok(Lookup::NoRoute),
        Err(rtnetlink::Error::NetlinkError(e)) => {
            // The kernel refuses the lookup itself for routes that discard.
            let code = e.raw_code();
            match Errno::from_raw(-code) {
                Errno::ENETUNREACH => Ok(Lookup::NoRoute),
                Errno::EINVAL => Ok(Lookup::Discard("blackhole")),
                Errno::EHOSTUNREACH => Ok(Lookup::Discard("unreachable")),
                Errno::EACCES => Ok(Lookup::Discard("prohibit")),
                _ => Err(rtnetlink::Error::NetlinkError(e).into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// The IPv4 routes of the main table behind `handle`, in prefix order.
pub async fn read_table(handle: &Handle) -> Result<Vec<TableRoute>> {
    use futures::TryStreamExt;
    let message = rtnetlink::RouteMessageBuilder::<std::net::Ipv4Addr>::new().build();
    let mut routes = handle.route().get(message).execute();
    let mut table = Vec::new();
    while let Some(route) = routes.try_next().await? {
        table.extend(TableRoute::from_message(&route));
    }
    table.sort_by_key(|r| {
        (
            u32::from(r.prefix.network()),
            r.prefix.prefix_len(),
            r.metric,
        )
    });
    Ok(table)
}

/// Interface names by ifindex, in the namespace behind `handle`.
pub async fn link_names(handle: &Handle) -> Result<std::collections::HashMap<u32, String>> {
    use futures::TryStreamExt;
    let mut names = std::collections::HashMap::new();
    let mut links = handle.link().get().execute();
    while let Some(link) = links.try_next().await? {
        for attr in &link.attributes {
            if let rtnetlink::packet_route::link::LinkAttribute::IfName(n) = attr {
                names.insert(link.header.index, n.clone());
            }
        }
    }
    Ok(names)
}
