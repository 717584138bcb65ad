//! Kernel nexthop objects (`ip nexthop`, Linux 5.3 and later): next hops
//! and ECMP groups that routes point at by id (`RTA_NH_ID`) instead of
//! carrying their next hops in every route.
//!
//! A route with sixty next hops makes the kernel check all sixty gateways
//! whenever it is written (`fib_create_info`); a route to a group is
//! checked once, when the group is made. Replacing 6,554 routes of a
//! 60-way ECMP switch takes the kernel 0.65 s with their next hops inline
//! and 0.07 s with a group (`ip -batch`, this machine).
//!
//! netlink-packet-route has no nexthop messages, so they are encoded here
//! from `linux/nexthop.h` (a `struct nhmsg` header and `NHA_*`
//! attributes), byte for byte as iproute2's `ip nexthop` sends them
//! (checked against its captured requests), and exchanged on a
//! `NETLINK_ROUTE` socket of the namespace ([`NexthopSocket`]), together
//! with the routes that point at them: many requests to one `sendmsg`,
//! answered only when they fail. The kernel itself removes a next hop
//! whose device goes down, takes it out of its groups and removes a group
//! left empty (with the routes using it), so callers read what exists
//! ([`NexthopSocket::dump`]) rather than remember it.

use std::collections::HashMap;
use std::io;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use rtnetlink::sys::protocols::NETLINK_ROUTE;
use rtnetlink::sys::{Socket, SocketAddr};

use rtnetlink::packet_route::route::RouteProtocol;

use super::KernelRoute;
use super::raw::{
    NLMSG_DONE, NLMSG_ERROR, RTM_DELNEXTHOP, RTM_DELROUTE, RTM_GETNEXTHOP, RTM_NEWNEXTHOP,
    RTM_NEWROUTE, error_code, messages, put,
};

const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;

const RTA_DST: u16 = 1;
const RTA_PRIORITY: u16 = 6;
const RTA_NH_ID: u16 = 30;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_DUMP: u16 = 0x300;

const AF_UNSPEC: u8 = 0;
const AF_INET: u8 = 2;
/// `RT_TABLE_MAIN`.
const RT_TABLE_MAIN: u8 = 254;
/// `RT_SCOPE_NOWHERE`: a removal matches routes of any scope.
const RT_SCOPE_NOWHERE: u8 = 255;
/// `RTN_UNICAST`.
const RTN_UNICAST: u8 = 1;
/// Who makes objects and the routes to them (a route's `proto`, shown by
/// `ip route` and `ip nexthop`). A [`NexthopSocket`] speaks for one: what
/// it makes carries it, and it reads only objects that carry it, so the
/// BGP agents and the static routes of one namespace keep apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `RTPROT_STATIC`: `up`'s routes.
    Static,
    /// `RTPROT_BGP`: the built-in BGP agents'.
    Bgp,
}

impl Protocol {
    /// Its `RTPROT_*` number.
    const fn number(self) -> u8 {
        match self {
            Protocol::Static => 4,
            Protocol::Bgp => 186,
        }
    }
}
/// `RTNH_F_DEAD`: the kernel marked the next hop dead.
pub(super) const RTNH_F_DEAD: u32 = 1;
/// `RTNH_F_ONLINK`.
const RTNH_F_ONLINK: u32 = 4;
/// `RTNH_F_LINKDOWN`: the next hop's port has no carrier.
pub(super) const RTNH_F_LINKDOWN: u32 = 16;

/// One next hop: a gateway on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hop {
    /// The gateway.
    pub via: Ipv4Addr,
    /// The interface.
    pub ifindex: u32,
    /// The gateway is on the link although no connected route covers it.
    pub onlink: bool,
}

/// The nexthop objects of a namespace, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Objects {
    /// Single next hops.
    pub hops: HashMap<u32, Hop>,
    /// Groups: their members' ids, ascending.
    pub groups: HashMap<u32, Vec<u32>>,
    /// The highest id of the namespace's objects of any protocol (ids are
    /// the namespace's: a new object of one protocol must not take
    /// another's).
    pub highest: u32,
}

impl Objects {
    /// Adds object `id` as the kernel described it (a blackhole or a next
    /// hop without a gateway is left out: this module makes neither).
    fn add(&mut self, id: u32, described: Described) {
        match described {
            Described::Group(members) => {
                self.groups.insert(id, members);
            }
            Described::Hop {
                via: Some(via),
                ifindex,
                flags,
            } => {
                let onlink = flags & RTNH_F_ONLINK != 0;
                self.hops.insert(
                    id,
                    Hop {
                        via,
                        ifindex,
                        onlink,
                    },
                );
            }
            Described::Hop { via: None, .. } | Described::Nothing => {}
        }
    }

    /// The highest id in use, by any protocol (0: none).
    pub fn max_id(&self) -> u32 {
        self.hops
            .keys()
            .chain(self.groups.keys())
            .copied()
            .max()
            .unwrap_or(0)
            .max(self.highest)
    }
}

/// A main-table route through several next hops, to be pointed at a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRoute {
    /// Where it leads.
    pub prefix: Ipv4Net,
    /// Its metric (0: none).
    pub metric: u32,
    /// Its next hops.
    pub hops: Vec<Hop>,
}

impl GroupRoute {
    /// A static route of the main table through several gateways, as a
    /// route to a group: the kernel checks a group's gateways once, when
    /// it is made, where a route carrying them is checked whole at every
    /// write (sixty gateways a route on an HPN ToR). `None` for any other
    /// route, which stays inline.
    pub fn of(route: &KernelRoute) -> Option<GroupRoute> {
        if route.protocol != RouteProtocol::Static || route.table.is_some() || route.hops.len() < 2
        {
            return None;
        }
        let hops = route
            .hops
            .iter()
            .map(|h| {
                Some(Hop {
                    via: h.via?,
                    ifindex: h.ifindex,
                    onlink: h.onlink,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(GroupRoute {
            prefix: route.prefix,
            metric: route.metric.unwrap_or(0),
            hops,
        })
    }
}

/// `routes` apart: those that go to groups ([`GroupRoute::of`]), and the
/// rest, inline, in order.
pub fn split_grouped(routes: Vec<KernelRoute>) -> (Vec<GroupRoute>, Vec<KernelRoute>) {
    let mut grouped = Vec::new();
    let mut inline = Vec::with_capacity(routes.len());
    for route in routes {
        match GroupRoute::of(&route) {
            Some(g) => grouped.push(g),
            None => inline.push(route),
        }
    }
    (grouped, inline)
}

/// The requests that point `routes` at groups: the objects `existing` has
/// are used again (a next hop, or a group of the same members), new ones
/// are numbered past the highest id in use; each object is made before
/// the first route that needs it.
pub fn point_at_groups(existing: &Objects, routes: &[GroupRoute]) -> Vec<Request> {
    let mut hops: HashMap<Hop, u32> = existing.hops.iter().map(|(id, h)| (*h, *id)).collect();
    let mut groups: HashMap<Vec<u32>, u32> = existing
        .groups
        .iter()
        .map(|(id, members)| (members.clone(), *id))
        .collect();
    let mut next = existing.max_id() + 1;
    let mut requests = Vec::new();
    for route in routes {
        let mut members: Vec<u32> = route
            .hops
            .iter()
            .map(|hop| {
                *hops.entry(*hop).or_insert_with(|| {
                    let id = next;
                    next += 1;
                    requests.push(Request::Hop { id, hop: *hop });
                    id
                })
            })
            .collect();
        members.sort_unstable();
        members.dedup();
        let group = match groups.get(&members) {
            Some(id) => *id,
            None => {
                let id = next;
                next += 1;
                requests.push(Request::Group {
                    id,
                    members: members.clone(),
                });
                groups.insert(members, id);
                id
            }
        };
        requests.push(Request::Route {
            prefix: route.prefix,
            id: group,
            metric: route.metric,
        });
    }
    requests
}

/// A change to the objects, or to a route of the main table that points at
/// one (with the protocol of the socket that sends it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Make next hop `id` (`ip nexthop add id ID via VIA dev DEV [onlink]`).
    Hop {
        /// Its id.
        id: u32,
        /// What it is.
        hop: Hop,
    },
    /// Make group `id` of `members`, equal weights (`ip nexthop add id ID
    /// group A/B/...`).
    Group {
        /// Its id.
        id: u32,
        /// Its next hops' ids.
        members: Vec<u32>,
    },
    /// Give group `id` other `members`, equal weights, in place (`ip
    /// nexthop replace id ID group A/B/...`): every route that points at
    /// it forwards by them at once. With `nexthop_compat_mode` off the
    /// kernel tells nothing of those routes; on, it tells each again.
    Regroup {
        /// Its id.
        id: u32,
        /// Its next hops' ids.
        members: Vec<u32>,
    },
    /// Remove object `id` (`ip nexthop del id ID`); routes using it go too.
    Delete {
        /// Its id.
        id: u32,
    },
    /// Point the route to `prefix` with `metric` at object `id`, made or
    /// replaced (`ip route replace PREFIX nhid ID metric METRIC proto
    /// bgp`).
    Route {
        /// Where it leads.
        prefix: Ipv4Net,
        /// The object it points at.
        id: u32,
        /// Its metric.
        metric: u32,
    },
    /// Remove the route to `prefix` with `metric` (`ip route del PREFIX
    /// metric METRIC proto bgp`).
    Unroute {
        /// Where it led.
        prefix: Ipv4Net,
        /// Its metric.
        metric: u32,
    },
}

impl Request {
    /// Appends the request as a netlink message with sequence number
    /// `seq` to `out`, to be answered only if refused ([`ask_answer`]
    /// asks for more).
    pub(crate) fn encode(&self, seq: u32, protocol: Protocol, out: &mut Vec<u8>) {
        let protocol = protocol.number();
        let start = out.len();
        let (kind, flags) = match self {
            Request::Hop { .. } | Request::Group { .. } => {
                (RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_EXCL)
            }
            Request::Regroup { .. } => (RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_REPLACE),
            Request::Delete { .. } => (RTM_DELNEXTHOP, 0),
            Request::Route { .. } => (RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE),
            Request::Unroute { .. } => (RTM_DELROUTE, 0),
        };
        nlmsghdr(out, kind, NLM_F_REQUEST | flags, seq);
        match self {
            Request::Hop { id, hop } => {
                let onlink = if hop.onlink { RTNH_F_ONLINK } else { 0 };
                nhmsg(out, AF_INET, protocol, onlink);
                put(out, NHA_ID, &id.to_ne_bytes());
                put(out, NHA_OIF, &hop.ifindex.to_ne_bytes());
                put(out, NHA_GATEWAY, &hop.via.octets());
            }
            Request::Group { id, members } | Request::Regroup { id, members } => {
                nhmsg(out, AF_UNSPEC, protocol, 0);
                put(out, NHA_ID, &id.to_ne_bytes());
                // struct nexthop_grp: id, weight - 1, two reserved fields.
                let entries: Vec<u8> = members
                    .iter()
                    .flat_map(|m| {
                        let mut e = [0u8; 8];
                        e[..4].copy_from_slice(&m.to_ne_bytes());
                        e
                    })
                    .collect();
                put(out, NHA_GROUP, &entries);
            }
            Request::Delete { id } => {
                // The kernel refuses a removal whose header is not zeros.
                nhmsg(out, AF_UNSPEC, 0, 0);
                put(out, NHA_ID, &id.to_ne_bytes());
            }
            Request::Route { prefix, id, metric } => {
                rtmsg(out, *prefix, protocol, 0, RTN_UNICAST);
                put(out, RTA_DST, &prefix.network().octets());
                put(out, RTA_NH_ID, &id.to_ne_bytes());
                put(out, RTA_PRIORITY, &metric.to_ne_bytes());
            }
            Request::Unroute { prefix, metric } => {
                rtmsg(out, *prefix, protocol, RT_SCOPE_NOWHERE, 0);
                put(out, RTA_DST, &prefix.network().octets());
                put(out, RTA_PRIORITY, &metric.to_ne_bytes());
            }
        }
        finish(out, start);
    }
}

/// Appends a `struct nlmsghdr` whose length [`finish`] writes once the
/// message is whole.
fn nlmsghdr(out: &mut Vec<u8>, kind: u16, flags: u16, seq: u32) {
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
}

/// Writes the length of the message that starts at `start` of `out`.
fn finish(out: &mut [u8], start: usize) {
    let len = u32::try_from(out.len() - start).expect("small");
    out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

/// Makes the request `message` starts with ask to be answered when it
/// succeeds too (`NLM_F_ACK`).
fn ask_answer(message: &mut [u8]) {
    let flags = u16::from_ne_bytes([message[6], message[7]]) | NLM_F_ACK;
    message[6..8].copy_from_slice(&flags.to_ne_bytes());
}

/// Appends a `struct nhmsg`: family, scope (set by the kernel), protocol,
/// reserved, flags.
fn nhmsg(out: &mut Vec<u8>, family: u8, protocol: u8, flags: u32) {
    out.extend_from_slice(&[family, 0, protocol, 0]);
    out.extend_from_slice(&flags.to_ne_bytes());
}

/// Appends the `struct rtmsg` of a main-table `bgp` route to `prefix`:
/// family, destination and source lengths, tos, table, protocol, scope,
/// type, flags.
fn rtmsg(out: &mut Vec<u8>, prefix: Ipv4Net, protocol: u8, scope: u8, kind: u8) {
    out.extend_from_slice(&[
        AF_INET,
        prefix.prefix_len(),
        0,
        0,
        RT_TABLE_MAIN,
        protocol,
        scope,
        kind,
    ]);
    out.extend_from_slice(&0u32.to_ne_bytes());
}

/// The attributes of a payload, as (type, value).
fn attributes(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes(buf[0..2].try_into().expect("2 bytes")) as usize;
        let kind = u16::from_ne_bytes(buf[2..4].try_into().expect("2 bytes")) & 0x3fff;
        if len < 4 || len > buf.len() {
            return None;
        }
        let value = &buf[4..len];
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
        Some((kind, value))
    })
}

/// An object as the kernel describes it, whoever made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Described {
    /// A single next hop.
    Hop {
        /// Its gateway (`None`: the destination is on the link).
        via: Option<Ipv4Addr>,
        /// Its device.
        ifindex: u32,
        /// Its `RTNH_F_*` flags.
        flags: u32,
    },
    /// A group: its members' ids, ascending.
    Group(Vec<u32>),
    /// A blackhole, or an object without a device: it forwards nothing.
    Nothing,
}

/// The id, protocol and description of the object an `RTM_NEWNEXTHOP`
/// payload (a dump's answer or a notification) describes.
pub(crate) fn describe(payload: &[u8]) -> Option<(u32, u8, Described)> {
    let protocol = *payload.get(2)?;
    let flags = u32::from_ne_bytes(payload.get(4..8)?.try_into().expect("4 bytes"));
    let (mut id, mut oif, mut via, mut group) = (None, None, None, None);
    for (kind, value) in attributes(payload.get(8..)?) {
        match (kind, value.len()) {
            (NHA_ID, 4) => id = Some(u32::from_ne_bytes(value.try_into().expect("4 bytes"))),
            (NHA_OIF, 4) => oif = Some(u32::from_ne_bytes(value.try_into().expect("4 bytes"))),
            (NHA_GATEWAY, 4) => via = Some(Ipv4Addr::from(<[u8; 4]>::try_from(value).expect("4"))),
            (NHA_GROUP, _) => {
                let mut members: Vec<u32> = value
                    .chunks_exact(8)
                    .map(|e| u32::from_ne_bytes(e[..4].try_into().expect("4 bytes")))
                    .collect();
                members.sort_unstable();
                group = Some(members);
            }
            _ => {}
        }
    }
    let described = match (group, oif) {
        (Some(members), _) => Described::Group(members),
        (None, Some(ifindex)) => Described::Hop {
            via,
            ifindex,
            flags,
        },
        (None, None) => Described::Nothing,
    };
    Some((id?, protocol, described))
}

/// A socket for [`describe_every`], of the calling thread's namespace.
pub(crate) fn reading_socket() -> io::Result<Socket> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    Ok(socket)
}

/// Every object of `socket`'s namespace, of any protocol, as the kernel
/// describes it.
pub(crate) fn describe_every(socket: &Socket) -> io::Result<Vec<(u32, Described)>> {
    let mut every = Vec::new();
    dump(socket, &mut vec![0; 1 << 16], 1, |payload| {
        if let Some((id, _, described)) = describe(payload) {
            every.push((id, described));
        }
    })?;
    Ok(every)
}

/// Dumps the nexthop objects of `socket`'s namespace, each answer's
/// payload to `each`.
fn dump(socket: &Socket, buf: &mut [u8], seq: u32, mut each: impl FnMut(&[u8])) -> io::Result<()> {
    // A dump request's header must be all zeros (the kernel refuses
    // a filter it does not know).
    let mut request = Vec::with_capacity(24);
    nlmsghdr(
        &mut request,
        RTM_GETNEXTHOP,
        NLM_F_REQUEST | NLM_F_DUMP,
        seq,
    );
    nhmsg(&mut request, AF_UNSPEC, 0, 0);
    finish(&mut request, 0);
    socket.send_to(&request, &SocketAddr::new(0, 0), 0)?;
    loop {
        let n = socket.recv(&mut &mut buf[..], 0)?;
        for m in messages(&buf[..n]) {
            if m.seq != seq {
                continue;
            }
            match m.kind {
                NLMSG_ERROR | NLMSG_DONE => {
                    let code = error_code(m.payload);
                    if code != 0 {
                        return Err(io::Error::from_raw_os_error(code));
                    }
                    return Ok(());
                }
                RTM_NEWNEXTHOP => each(m.payload),
                _ => {}
            }
        }
    }
}

/// A `NETLINK_ROUTE` socket of one namespace, for its nexthop objects and
/// the routes that point at them. Requests are answered while they are
/// sent (the kernel handles them in the sender's call), so reads never
/// wait long.
#[derive(Debug)]
pub struct NexthopSocket {
    socket: Socket,
    buf: Vec<u8>,
    seq: u32,
    protocol: Protocol,
}

impl NexthopSocket {
    /// Requests a batch of [`NexthopSocket::execute`], one `sendmsg`: even
    /// if all are refused, their answers fit the socket's default receive
    /// buffer.
    pub const BATCH: usize = 128;

    /// A socket in the calling thread's namespace, for `protocol`'s
    /// objects and routes.
    pub fn new(protocol: Protocol) -> io::Result<NexthopSocket> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        // A refusal is answered with its error alone, not the request
        // echoed back: a batch's refusals all fit the receive buffer.
        socket.set_cap_ack(true)?;
        Ok(NexthopSocket {
            socket,
            buf: vec![0; 1 << 16],
            seq: 0,
            protocol,
        })
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1).max(1);
        self.seq
    }

    /// The namespace's nexthop objects of the socket's protocol.
    pub fn dump(&mut self) -> io::Result<Objects> {
        let seq = self.next_seq();
        let protocol = self.protocol.number();
        let mut objects = Objects::default();
        dump(&self.socket, &mut self.buf, seq, |payload| {
            match describe(payload) {
                Some((id, of, described)) if of == protocol => objects.add(id, described),
                Some((id, ..)) => objects.highest = objects.highest.max(id),
                None => {}
            }
        })?;
        Ok(objects)
    }

    /// Carries out `requests` in order; each one's outcome: `Ok`, or the
    /// kernel's error number.
    ///
    /// They go in batches, each one `sendmsg`, as zebra writes its routes:
    /// only a batch's last request asks to be answered when it succeeds,
    /// the others are answered only when refused, and since the kernel
    /// handles a batch in order, the last one's answer means every refusal
    /// before it was read.
    pub fn execute(&mut self, requests: &[Request]) -> io::Result<Vec<Result<(), i32>>> {
        /// A batch's bytes at most (sixty-way groups are 516 each).
        const BATCH_BYTES: usize = 48 << 10;
        let mut outcomes = Vec::with_capacity(requests.len());
        let mut out = Vec::with_capacity(BATCH_BYTES + 1024);
        let mut rest = requests;
        while !rest.is_empty() {
            out.clear();
            let first = self.seq.wrapping_add(1).max(1);
            let (mut sent, mut last) = (0, 0);
            while sent < rest.len() && sent < Self::BATCH && out.len() < BATCH_BYTES {
                last = out.len();
                let seq = self.next_seq();
                rest[sent].encode(seq, self.protocol, &mut out);
                sent += 1;
            }
            ask_answer(&mut out[last..]);
            let fence = self.seq;
            self.socket.send_to(&out, &SocketAddr::new(0, 0), 0)?;
            let mut answers: Vec<Result<(), i32>> = vec![Ok(()); sent];
            'read: loop {
                let n = self.socket.recv(&mut &mut self.buf[..], 0)?;
                for m in messages(&self.buf[..n]) {
                    let at = m.seq.wrapping_sub(first) as usize;
                    if m.kind != NLMSG_ERROR || at >= sent {
                        continue;
                    }
                    let code = error_code(m.payload);
                    if code != 0 {
                        answers[at] = Err(code);
                    }
                    if m.seq == fence {
                        break 'read;
                    }
                }
            }
            outcomes.extend(answers);
            rest = &rest[sent..];
        }
        Ok(outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request as iproute2 sends it: answered when it succeeds too.
    fn acked(request: &Request, protocol: Protocol, seq: u32) -> Vec<u8> {
        let mut out = Vec::new();
        request.encode(seq, protocol, &mut out);
        ask_answer(&mut out);
        out
    }

    /// The requests iproute2 sent, by command (testdata/ip-nexthop.txt,
    /// written by scripts/capture-nexthop-requests), with the sequence
    /// number zeroed, and the index of the device they name.
    fn iproute2() -> (u32, Vec<(String, Vec<u8>)>) {
        let text = include_str!("testdata/ip-nexthop.txt");
        let mut ifindex = None;
        let mut requests: Vec<(String, Vec<u8>)> = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            if let Some(index) = line.strip_prefix("ifindex d0 ") {
                ifindex = Some(index.parse().expect("an index"));
            } else if let Some(command) = line.strip_prefix("$ ") {
                requests.push((command.to_owned(), Vec::new()));
            } else {
                let (_, bytes) = requests.last_mut().expect("a command first");
                bytes.extend(
                    line.split(' ')
                        .map(|b| u8::from_str_radix(b, 16).expect("hex")),
                );
            }
        }
        for (_, bytes) in &mut requests {
            bytes[8..12].fill(0);
        }
        (ifindex.expect("the device's index"), requests)
    }

    /// Each captured command, as a request of ours.
    fn ours(command: &str, ifindex: u32) -> Request {
        let hop = |via, onlink| Hop {
            via,
            ifindex,
            onlink,
        };
        let prefix: Ipv4Net = "10.9.0.0/24".parse().unwrap();
        match command {
            "ip nexthop add id 1 dev d0 via 10.0.0.1 onlink proto bgp" => Request::Hop {
                id: 1,
                hop: hop(Ipv4Addr::new(10, 0, 0, 1), true),
            },
            "ip nexthop add id 2 dev d0 via 10.0.0.3 proto bgp" => Request::Hop {
                id: 2,
                hop: hop(Ipv4Addr::new(10, 0, 0, 3), false),
            },
            "ip nexthop add id 10 group 1 proto bgp" => Request::Group {
                id: 10,
                members: vec![1],
            },
            "ip nexthop add id 11 group 1/2 proto bgp" => Request::Group {
                id: 11,
                members: vec![1, 2],
            },
            c if c.starts_with("ip nexthop add id 300 group 201/202/") => Request::Group {
                id: 300,
                members: (201..=260).collect(),
            },
            "ip nexthop replace id 11 group 1/2/201 proto bgp" => Request::Regroup {
                id: 11,
                members: vec![1, 2, 201],
            },
            "ip route replace 10.9.0.0/24 nhid 11 metric 20 proto bgp" => Request::Route {
                prefix,
                id: 11,
                metric: 20,
            },
            "ip route del 10.9.0.0/24 metric 20 proto bgp" => {
                Request::Unroute { prefix, metric: 20 }
            }
            "ip nexthop del id 10" => Request::Delete { id: 10 },
            "ip nexthop add id 3 dev d0 via 10.0.0.4 proto static" => Request::Hop {
                id: 3,
                hop: hop(Ipv4Addr::new(10, 0, 0, 4), false),
            },
            "ip nexthop add id 12 group 2/3 proto static" => Request::Group {
                id: 12,
                members: vec![2, 3],
            },
            "ip route replace 10.9.1.0/24 nhid 12 metric 0 proto static" => Request::Route {
                prefix: "10.9.1.0/24".parse().unwrap(),
                id: 12,
                metric: 0,
            },
            other => panic!("no request of ours for `{other}`"),
        }
    }

    /// The protocol a captured command names (`bgp` when it names none:
    /// a removal by id).
    fn protocol(command: &str) -> Protocol {
        if command.ends_with("proto static") {
            Protocol::Static
        } else {
            Protocol::Bgp
        }
    }

    #[test]
    fn requests_match_iproute2_byte_for_byte() {
        let (ifindex, captured) = iproute2();
        assert_eq!(captured.len(), 12, "every capture read");
        for (command, theirs) in captured {
            let ours = acked(&ours(&command, ifindex), protocol(&command), 0);
            assert_eq!(ours, theirs, "`{command}`");
        }
    }

    #[test]
    fn routes_share_groups_and_reuse_what_exists() {
        let hop = |last| Hop {
            via: Ipv4Addr::new(10, 0, 0, last),
            ifindex: 2,
            onlink: false,
        };
        let route = |prefix: &str, hops: Vec<Hop>| GroupRoute {
            prefix: prefix.parse().unwrap(),
            metric: 20,
            hops,
        };
        // Hop .1 exists as object 7; another protocol's objects go up to 99.
        let existing = Objects {
            hops: HashMap::from([(7, hop(1))]),
            groups: HashMap::new(),
            highest: 99,
        };
        let requests = point_at_groups(
            &existing,
            &[
                route("10.1.0.0/24", vec![hop(2), hop(1)]),
                route("10.2.0.0/24", vec![hop(1), hop(2)]),
                route("10.3.0.0/24", vec![hop(2), hop(3)]),
            ],
        );
        let routed = |prefix: &str, id| Request::Route {
            prefix: prefix.parse().unwrap(),
            id,
            metric: 20,
        };
        assert_eq!(
            requests,
            vec![
                Request::Hop {
                    id: 100,
                    hop: hop(2)
                },
                Request::Group {
                    id: 101,
                    members: vec![7, 100],
                },
                routed("10.1.0.0/24", 101),
                routed("10.2.0.0/24", 101),
                Request::Hop {
                    id: 102,
                    hop: hop(3)
                },
                Request::Group {
                    id: 103,
                    members: vec![100, 102],
                },
                routed("10.3.0.0/24", 103),
            ]
        );
        // Past the highest of the protocol's own when no other is higher.
        let own = Objects {
            hops: HashMap::from([(500, hop(1))]),
            groups: HashMap::new(),
            highest: 20,
        };
        let requests = point_at_groups(&own, &[route("10.1.0.0/24", vec![hop(2)])]);
        assert_eq!(
            requests[0],
            Request::Hop {
                id: 501,
                hop: hop(2)
            }
        );
    }

    #[test]
    fn objects_read_back_as_made() {
        let hop = Hop {
            via: Ipv4Addr::new(10, 0, 0, 1),
            ifindex: 3,
            onlink: true,
        };
        let mut objects = Objects::default();
        for request in [
            Request::Hop { id: 7, hop },
            Request::Group {
                id: 9,
                members: vec![3, 1, 2],
            },
        ] {
            let msg = acked(&request, Protocol::Bgp, 1);
            let m = messages(&msg).next().expect("one message");
            assert_eq!(m.kind, RTM_NEWNEXTHOP);
            let (id, _, described) = describe(m.payload).expect("an object");
            objects.add(id, described);
        }
        assert_eq!(objects.hops, HashMap::from([(7, hop)]));
        assert_eq!(objects.groups, HashMap::from([(9, vec![1, 2, 3])]));
        assert_eq!(objects.max_id(), 9);
    }

    #[test]
    fn a_request_asks_to_be_answered_only_when_told() {
        let mut out = Vec::new();
        Request::Delete { id: 1 }.encode(5, Protocol::Bgp, &mut out);
        let flags = |msg: &[u8]| u16::from_ne_bytes([msg[6], msg[7]]);
        assert_eq!(flags(&out), NLM_F_REQUEST);
        ask_answer(&mut out);
        assert_eq!(flags(&out), NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(messages(&out).next().expect("one message").seq, 5);
    }

    #[test]
    fn errors_are_read_back() {
        assert_eq!(error_code(&(-libc::ENOENT).to_ne_bytes()), libc::ENOENT);
        assert_eq!(error_code(&0i32.to_ne_bytes()), 0);
    }

    #[test]
    fn truncated_buffers_end_the_walk() {
        let msg = acked(&Request::Delete { id: 1 }, Protocol::Bgp, 1);
        assert_eq!(messages(&msg[..msg.len() - 1]).count(), 0);
        assert_eq!(messages(&msg).count(), 1);
    }
}
