//! What a namespace's main table holds, read back through netlink: its
//! routes with their next hops, a route lookup, interface names.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd};

use rtnetlink::Handle;
use rtnetlink::packet_route::route::RouteProtocol;

use super::nexthop::{Described, RTNH_F_DEAD, RTNH_F_LINKDOWN};
use super::raw::{
    RTM_DELLINK, RTM_DELNEXTHOP, RTM_DELROUTE, RTM_NEWLINK, RTM_NEWNEXTHOP, RTM_NEWROUTE,
};
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
    /// The nexthop object it points at, if any (`RTA_NH_ID`). With
    /// `nexthop_compat_mode` off the kernel names only the object, and
    /// [`Nexthops::resolve`] fills in the next hops.
    pub object: Option<u32>,
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
        let (mut gateway, mut oif, mut metric, mut object) = (None, None, 0, None);
        let mut hops = Vec::new();
        for attribute in &route.attributes {
            match attribute {
                RouteAttribute::Destination(RouteAddress::Inet(d)) => destination = *d,
                RouteAttribute::Gateway(RouteAddress::Inet(g)) => gateway = Some(*g),
                RouteAttribute::Oif(i) => oif = Some(*i),
                RouteAttribute::Priority(p) => metric = *p,
                RouteAttribute::NhId(id) => object = Some(*id),
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
        // A route to an object carries its next hops only in compat mode;
        // without them it has none until resolved.
        if hops.is_empty() && (object.is_none() || gateway.is_some() || oif.is_some()) {
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
            object,
        })
    }

    /// It names an object and carries none of its next hops.
    pub fn unresolved(&self) -> bool {
        self.object.is_some() && self.hops.is_empty()
    }
}

/// A namespace's nexthop objects, of every protocol, as the routes that
/// point at them forward: single next hops and groups of them, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nexthops {
    hops: HashMap<u32, TableHop>,
    groups: HashMap<u32, Vec<u32>>,
}

/// What a nexthop notification did to a [`Nexthops`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectChange {
    /// Object `id` is new: no route pointed at it before.
    Made(u32),
    /// Object `id` now forwards otherwise (replaced in place, or a member
    /// of its group changed): the routes that point at it changed with it,
    /// and the kernel names none of them.
    Altered(u32),
    /// Object `id` is gone, and any route that pointed at it with it.
    Removed(u32),
}

impl Nexthops {
    /// The objects of the calling thread's namespace.
    pub fn read() -> std::io::Result<Nexthops> {
        Nexthops::read_on(&super::nexthop::reading_socket()?)
    }

    /// The objects of namespace `ns` (its socket made there, read from
    /// here).
    pub fn read_in(ns: &impl AsFd) -> std::io::Result<Nexthops> {
        let socket = crate::namespaces::here_in_namespace(ns, super::nexthop::reading_socket)?;
        Nexthops::read_on(&socket)
    }

    fn read_on(socket: &rtnetlink::sys::Socket) -> std::io::Result<Nexthops> {
        let mut nexthops = Nexthops::default();
        for (id, described) in super::nexthop::describe_every(socket)? {
            nexthops.put(id, described);
        }
        Ok(nexthops)
    }

    fn put(&mut self, id: u32, described: Described) {
        self.hops.remove(&id);
        self.groups.remove(&id);
        match described {
            Described::Hop {
                via,
                ifindex,
                flags,
            } => {
                let down = flags & (RTNH_F_DEAD | RTNH_F_LINKDOWN) != 0;
                self.hops.insert(id, TableHop { via, ifindex, down });
            }
            Described::Group(members) => {
                self.groups.insert(id, members);
            }
            Described::Nothing => {}
        }
    }

    /// Knows next hop `id` as `hop` (as a notification or a read would
    /// tell it).
    pub fn put_hop(&mut self, id: u32, hop: TableHop) {
        self.groups.remove(&id);
        self.hops.insert(id, hop);
    }

    /// Knows group `id` of `members`.
    pub fn put_group(&mut self, id: u32, members: Vec<u32>) {
        self.hops.remove(&id);
        self.groups.insert(id, members);
    }

    /// The next hops object `id` forwards by (`None`: no such object).
    pub fn hops(&self, id: u32) -> Option<Vec<TableHop>> {
        if let Some(hop) = self.hops.get(&id) {
            return Some(vec![*hop]);
        }
        let members = self.groups.get(&id)?;
        Some(
            members
                .iter()
                .filter_map(|m| self.hops.get(m).copied())
                .collect(),
        )
    }

    /// Gives `route` the next hops of the object it names, if it carries
    /// none (a route to an object unknown here keeps none:
    /// [`TableRoute::unresolved`]).
    pub fn resolve(&self, route: &mut TableRoute) {
        if route.unresolved()
            && let Some(hops) = route.object.and_then(|id| self.hops(id))
        {
            route.hops = hops.into();
        }
    }

    /// Applies an `RTM_NEWNEXTHOP` or `RTM_DELNEXTHOP` notification's
    /// payload; what it changed: the object, and the groups it is a
    /// member of (they forward otherwise with it).
    fn learn(&mut self, removed: bool, payload: &[u8]) -> Vec<ObjectChange> {
        let Some((id, _, described)) = super::nexthop::describe(payload) else {
            return Vec::new();
        };
        let before = self.hops(id);
        let change = if removed {
            self.hops.remove(&id);
            self.groups.remove(&id);
            before.is_some().then_some(ObjectChange::Removed(id))
        } else {
            self.put(id, described);
            match before {
                None => Some(ObjectChange::Made(id)),
                Some(before) => {
                    (Some(before) != self.hops(id)).then_some(ObjectChange::Altered(id))
                }
            }
        };
        let Some(change) = change else {
            return Vec::new();
        };
        let mut changes = vec![change];
        if !matches!(change, ObjectChange::Made(_)) {
            changes.extend(
                self.groups
                    .iter()
                    .filter(|(_, members)| members.contains(&id))
                    .map(|(group, _)| ObjectChange::Altered(*group)),
            );
        }
        changes
    }
}

/// What the kernel of a namespace tells a [`Listener`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A route of the main table was added or replaced: as it is now,
    /// resolved against the objects the listener knows.
    Route(TableRoute),
    /// A route of the main table was removed.
    Removed(TableRoute),
    /// A link changed: the kernel may have changed routes without saying
    /// (IPv4 says nothing when it flushes a down port's routes).
    Link,
    /// A nexthop object changed.
    Object(ObjectChange),
    /// Notifications were lost (the socket's buffer overran): only a read
    /// of the table says what it holds.
    Overrun,
}

/// `RTNLGRP_LINK`, `RTNLGRP_IPV4_ROUTE` and `RTNLGRP_NEXTHOP` (32, the
/// last a bind's bitmask can name).
const LISTENED: u32 = 0x1 | 0x40 | (1 << 31);

/// The kernel's route, link and nexthop notifications of one namespace,
/// read off the socket as they come and parsed here (netlink-packet-route
/// has no nexthop messages). It keeps the namespace's objects, so a route
/// that names only its object is told with its next hops.
#[derive(Debug)]
pub struct Listener {
    socket: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    nexthops: Nexthops,
    buf: Vec<u8>,
}

impl Listener {
    /// A socket listening in the calling thread's namespace (no tokio
    /// runtime needed): open it in the namespace, hand it to
    /// [`Listener::new`] on a runtime.
    pub fn socket() -> std::io::Result<std::os::fd::OwnedFd> {
        crate::namespaces::route_socket_listening(LISTENED)
    }

    /// Listens on `socket` (from [`Listener::socket`]), knowing
    /// `nexthops` (read after it was opened, so no change is missed).
    pub fn new(socket: std::os::fd::OwnedFd, nexthops: Nexthops) -> std::io::Result<Listener> {
        nix::fcntl::fcntl(
            &socket,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        Ok(Listener {
            socket: crate::async_fd(socket)?,
            nexthops,
            buf: vec![0; 1 << 16],
        })
    }

    /// Takes `nexthops` as the namespace's objects (read again with its
    /// table).
    pub fn relearn(&mut self, nexthops: Nexthops) {
        self.nexthops = nexthops;
    }

    /// The namespace's objects as the notifications read so far left them.
    pub fn nexthops(&self) -> &Nexthops {
        &self.nexthops
    }

    /// The next notifications (one read's worth, in order; cancel-safe).
    pub async fn next(&mut self) -> std::io::Result<Vec<Notice>> {
        loop {
            let mut ready = self.socket.readable().await?;
            let read = ready.try_io(|fd| {
                nix::sys::socket::recv(
                    fd.as_raw_fd(),
                    &mut self.buf,
                    nix::sys::socket::MsgFlags::empty(),
                )
                .map_err(std::io::Error::from)
            });
            match read {
                Err(_would_block) => continue,
                Ok(Err(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(vec![Notice::Overrun]);
                }
                Ok(Err(e)) => return Err(e),
                Ok(Ok(n)) => {
                    let mut notices = Vec::new();
                    for m in super::raw::messages(&self.buf[..n]) {
                        notices.extend(notice(&mut self.nexthops, m.kind, m.payload));
                    }
                    return Ok(notices);
                }
            }
        }
    }
}

/// What one notification says, with routes resolved against `nexthops`
/// (which learns the objects' changes).
fn notice(nexthops: &mut Nexthops, kind: u16, payload: &[u8]) -> Vec<Notice> {
    use rtnetlink::packet_core::Parseable;
    use rtnetlink::packet_route::route::RouteMessage;
    match kind {
        RTM_NEWLINK | RTM_DELLINK => vec![Notice::Link],
        RTM_NEWROUTE | RTM_DELROUTE => {
            let Some(mut route) = RouteMessage::parse(payload)
                .ok()
                .and_then(|m| TableRoute::from_message(&m))
            else {
                return Vec::new();
            };
            if kind == RTM_DELROUTE {
                return vec![Notice::Removed(route)];
            }
            nexthops.resolve(&mut route);
            vec![Notice::Route(route)]
        }
        RTM_NEWNEXTHOP | RTM_DELNEXTHOP => nexthops
            .learn(kind == RTM_DELNEXTHOP, payload)
            .into_iter()
            .map(Notice::Object)
            .collect(),
        _ => Vec::new(),
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

/// Asks the kernel behind `handle` (in namespace `ns`) for the route a
/// packet to `to` takes (RTM_GETROUTE with RTM_F_FIB_MATCH: its rules, then
/// the longest match, as forwarding does).
pub async fn lookup(handle: &Handle, ns: &impl AsFd, to: std::net::Ipv4Addr) -> Result<Lookup> {
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
            _ => match TableRoute::parse(&route) {
                Some(mut route) => {
                    if route.unresolved() {
                        Nexthops::read_in(ns)?.resolve(&mut route);
                    }
                    Lookup::Route(route)
                }
                None => Lookup::NoRoute,
            },
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

/// The IPv4 routes of the main table behind `handle`, in prefix order,
/// each with its next hops (those of the object it points at, read from
/// `ns`, the namespace behind `handle`, when the kernel names only the
/// object).
pub async fn read_table(handle: &Handle, ns: &impl AsFd) -> Result<Vec<TableRoute>> {
    let mut table = read_routes(handle).await?;
    if table.iter().any(TableRoute::unresolved) {
        let nexthops = Nexthops::read_in(ns)?;
        for route in &mut table {
            nexthops.resolve(route);
        }
    }
    Ok(table)
}

/// [`read_table`] with objects read already: a route that names one
/// `nexthops` does not know keeps no next hop.
pub async fn read_table_with(handle: &Handle, nexthops: &Nexthops) -> Result<Vec<TableRoute>> {
    let mut table = read_routes(handle).await?;
    for route in &mut table {
        nexthops.resolve(route);
    }
    Ok(table)
}

/// The IPv4 routes of the main table behind `handle`, as the kernel
/// tells them, in prefix order.
async fn read_routes(handle: &Handle) -> Result<Vec<TableRoute>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::nexthop::{Hop, Protocol, Request};
    use std::net::Ipv4Addr;

    /// The payload of a notification that tells of `request`'s object (a
    /// request to make one carries what the kernel's notification does).
    fn told(request: &Request) -> Vec<u8> {
        let mut out = Vec::new();
        request.encode(1, Protocol::Bgp, &mut out);
        out.split_off(16)
    }

    fn hop(id: u32, last: u8) -> Request {
        Request::Hop {
            id,
            hop: Hop {
                via: Ipv4Addr::new(10, 0, 0, last),
                ifindex: 3,
                onlink: false,
            },
        }
    }

    fn table_hop(last: u8) -> TableHop {
        TableHop {
            via: Some(Ipv4Addr::new(10, 0, 0, last)),
            ifindex: 3,
            down: false,
        }
    }

    #[test]
    fn objects_are_learnt_and_a_members_change_alters_its_groups() {
        let mut nexthops = Nexthops::default();
        let group = |members: Vec<u32>| Request::Group { id: 9, members };
        for (request, change) in [
            (hop(1, 1), ObjectChange::Made(1)),
            (hop(2, 2), ObjectChange::Made(2)),
            (group(vec![1, 2]), ObjectChange::Made(9)),
        ] {
            assert_eq!(nexthops.learn(false, &told(&request)), vec![change]);
        }
        assert_eq!(nexthops.hops(9), Some(vec![table_hop(1), table_hop(2)]));
        // Told again as it is: nothing changed.
        assert_eq!(nexthops.learn(false, &told(&hop(2, 2))), vec![]);
        // A member moves: it and its group forward otherwise.
        assert_eq!(
            nexthops.learn(false, &told(&hop(2, 4))),
            vec![ObjectChange::Altered(2), ObjectChange::Altered(9)]
        );
        // A member goes.
        assert_eq!(
            nexthops.learn(true, &told(&hop(1, 1))),
            vec![ObjectChange::Removed(1), ObjectChange::Altered(9)]
        );
        assert_eq!(nexthops.hops(9), Some(vec![table_hop(4)]));
        assert_eq!(
            nexthops.learn(true, &told(&group(vec![2]))),
            vec![ObjectChange::Removed(9)]
        );
        assert_eq!(nexthops.learn(true, &told(&group(vec![2]))), vec![]);
        assert_eq!(nexthops.hops(9), None);
    }

    #[test]
    fn a_route_told_by_its_object_alone_gets_the_objects_hops() {
        let mut nexthops = Nexthops::default();
        for request in [
            hop(1, 1),
            hop(2, 2),
            Request::Group {
                id: 9,
                members: vec![1, 2],
            },
        ] {
            nexthops.learn(false, &told(&request));
        }
        let prefix: ipnet::Ipv4Net = "10.8.0.0/24".parse().unwrap();
        let route = |id| {
            told(&Request::Route {
                prefix,
                id,
                metric: 20,
            })
        };
        let [Notice::Route(known)] = &notice(&mut nexthops, RTM_NEWROUTE, &route(9))[..] else {
            panic!("a route");
        };
        assert_eq!(
            (known.prefix, known.metric, known.object, known.protocol),
            (prefix, 20, Some(9), RouteProtocol::Bgp)
        );
        assert_eq!(&known.hops[..], &[table_hop(1), table_hop(2)]);
        assert!(!known.unresolved());
        let [Notice::Route(unknown)] = &notice(&mut nexthops, RTM_NEWROUTE, &route(10))[..] else {
            panic!("a route");
        };
        assert!(unknown.unresolved());
        assert_eq!(
            notice(&mut nexthops, RTM_NEWLINK, &[0; 16]),
            vec![Notice::Link],
            "a link's notification"
        );
    }
}
