//! `[[external]]`: ports of fabric switches attached to interfaces of the
//! host (or of a named network namespace), with their address, the routes
//! behind them and an optional eBGP neighbour. Read once the fabric is
//! built: an external port names one of its switches, and its networks
//! are routed by the fabric.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::ops::Range;

use ipnet::Ipv4Net;
use serde::Deserialize;
use serde::de::IgnoredAny;
use toml::Spanned;
use toml::de::DeValue;

use super::addressing::{overlaps, parse_net};
use super::reader::{Keys, array_items, fields_of, key_span, missing, read_table};
use super::routing::RoutingRead;
use crate::diag::Diags;
use crate::model::{Asn, ExternalPeer, ExternalPort, Fabric, Prefix, PrefixKind};
use crate::plan::{IFNAMSIZ, Pools};
use crate::suggest;

/// `[[external]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExternal {
    node: Option<Spanned<String>>,
    interface: Option<Spanned<String>>,
    netns: Option<Spanned<String>>,
    name: Option<Spanned<String>>,
    address: Option<Spanned<String>>,
    gateway: Option<Spanned<String>>,
    routes: Option<Vec<Spanned<String>>>,
    /// Listed for the key checks; its value is read from
    /// [`Section::extra`](super::reader::Section::extra) (a table, whose
    /// keys need spans).
    #[allow(dead_code)]
    bgp: Option<IgnoredAny>,
}

/// `bgp = { peer = "192.0.2.2", asn = 65010 }` in `[[external]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExternalPeer {
    peer: Option<Spanned<String>>,
    asn: Option<Spanned<toml::Value>>,
}

/// Reads `[[external]]` (`v`, if present) and adds its ports, prefixes
/// and routes to `fabric`. Without a fabric (it had errors) or pools, only
/// what does not depend on them is checked.
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    mut fabric: Option<&mut Fabric>,
    pools: Option<&Pools>,
    routing: &RoutingRead,
) {
    let Some(v) = v else { return };
    let Some(items) = array_items(d, v, "`external`", "[[external]]") else {
        return;
    };
    let mut seen_interfaces: HashMap<(Option<String>, String), Range<usize>> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        let keys = Keys::new(fields_of::<RawExternal>()).extra(&["bgp"]);
        let Some(s) = read_table::<RawExternal>(d, item, "`[[external]]`", keys) else {
            continue;
        };
        let e = s.raw;
        let mut ok = true;
        let mut needs = |d: &mut Diags<'_>, key: &str, example: &str| {
            ok = false;
            missing(d, s.span.clone(), key, "`[[external]]`")
                .label(format!("needs `{key}`"))
                .help(format!("add e.g. `{key} = {example}`"));
        };
        if e.node.is_none() {
            needs(d, "node", "\"edge0-0\"");
        }
        if e.interface.is_none() {
            needs(d, "interface", "\"enp3s0\"");
        }
        if e.address.is_none() {
            needs(d, "address", "\"192.0.2.1/24\"");
        }
        // Interface names.
        let check_ifname = |d: &mut Diags<'_>, v: &Spanned<String>, key: &str| -> bool {
            let name = v.get_ref();
            let why = if name.is_empty() {
                Some("it is empty".to_owned())
            } else if name.len() > IFNAMSIZ {
                Some(format!(
                    "it is {} bytes long, the limit is {IFNAMSIZ}",
                    name.len()
                ))
            } else if name == "." || name == ".." {
                Some("`.` and `..` are not interface names".to_owned())
            } else {
                name.chars()
                    .find(|c| *c == '/' || *c == ':' || c.is_whitespace() || c.is_control())
                    .map(|c| format!("{c:?} is not allowed"))
            };
            if let Some(why) = why {
                d.error(
                    Some(v.span()),
                    format!("invalid interface name `{name}` in `{key}`: {why}"),
                )
                .label("invalid interface name")
                .help("Linux interface names are 1-15 bytes without `/`, `:` or spaces");
                return false;
            }
            true
        };
        if let Some(i) = &e.interface {
            ok &= check_ifname(d, i, "interface");
        }
        if let Some(n) = &e.name {
            ok &= check_ifname(d, n, "name");
        }
        if let Some(ns) = &e.netns {
            let name = ns.get_ref();
            if name.is_empty()
                || name.contains('/')
                || name == "."
                || name == ".."
                || name.len() > 255
            {
                ok = false;
                d.error(Some(ns.span()), format!("invalid namespace name `{name}`"))
                    .label("invalid namespace")
                    .help("a named network namespace as listed by `ip netns list` (a file name under /run/netns)");
            }
        }
        if let (Some(i), true) = (&e.interface, ok) {
            let key = (
                e.netns.as_ref().map(|n| n.get_ref().clone()),
                i.get_ref().clone(),
            );
            if let Some(first) = seen_interfaces.get(&key) {
                ok = false;
                let (line, _) = d.line_col(first.start);
                d.error(
                    Some(i.span()),
                    format!("interface `{}` is attached twice", i.get_ref()),
                )
                .label("already attached")
                .help(format!(
                    "it is already used by the `[[external]]` at line {line}"
                ));
            } else {
                seen_interfaces.insert(key, i.span());
            }
        }
        // Addresses.
        let address = e.address.as_ref().and_then(|a| {
            let text = a.get_ref().trim();
            let parsed: Result<Ipv4Net, _> = text.parse();
            match parsed {
                Ok(net) if net.prefix_len() <= 31 && (net.prefix_len() == 31 || (net.addr() != net.network() && net.addr() != net.broadcast())) => Some((net, a.span())),
                Ok(net) if net.prefix_len() == 32 => {
                    d.error(Some(a.span()), format!("external address `{text}` has no subnet"))
                        .label("/32 has no on-link network")
                        .help(format!("give the node's address with the subnet's length, e.g. \"{}/24\"", net.addr()));
                    None
                }
                Ok(net) => {
                    d.error(Some(a.span()), format!("`{text}` is the network or broadcast address of {}", net.trunc()))
                        .label("not a host address")
                        .help("use a host address of the subnet, e.g. the first usable one");
                    None
                }
                Err(_) => {
                    d.error(Some(a.span()), format!("invalid external address `{text}`"))
                        .label("invalid address")
                        .help("write the node's IPv4 address with its prefix length, e.g. \"192.0.2.1/24\"");
                    None
                }
            }
        });
        if address.is_none() {
            ok = false;
        }
        let gateway = match &e.gateway {
            None => None,
            Some(g) => match g.get_ref().trim().parse::<Ipv4Addr>() {
                Ok(gw) => {
                    if let Some((net, _)) = &address
                        && (!net.contains(&gw) || gw == net.addr())
                    {
                        ok = false;
                        d.error(
                            Some(g.span()),
                            format!("gateway {gw} is not a neighbor on {}", net.trunc()),
                        )
                        .label("not on the external subnet")
                        .help(format!(
                            "the gateway must be another address in {}",
                            net.trunc()
                        ));
                    }
                    Some(gw)
                }
                Err(_) => {
                    ok = false;
                    d.error(Some(g.span()), format!("invalid gateway `{}`", g.get_ref()))
                        .label("invalid address")
                        .help("write an IPv4 address, e.g. \"192.0.2.2\"");
                    None
                }
            },
        };
        let mut routes = Vec::new();
        for r in e.routes.iter().flatten() {
            match parse_net(r.get_ref().trim()) {
                Ok(net) => {
                    if gateway.is_none() && e.gateway.is_none() {
                        ok = false;
                        d.error(Some(r.span()), "`routes` need a `gateway`")
                            .label("no next hop")
                            .help("add `gateway = \"<next hop on the external subnet>\"`");
                    }
                    routes.push((net, r.span()));
                }
                Err((why, help)) => {
                    ok = false;
                    d.error(
                        Some(r.span()),
                        format!("invalid route `{}`: {why}", r.get_ref()),
                    )
                    .label("invalid network")
                    .help(help);
                }
            }
        }
        // The eBGP neighbour; its ASN is checked once the node is known.
        let mut peer = (None, None);
        if let Some(bgp) = s.extra.get("bgp") {
            if let Some(span) = key_span(item, "bgp") {
                ok &= routing.check_bgp_only(d, span, "bgp", "`[[external]]`");
            }
            peer = read_external_peer(d, bgp, address.as_ref().map(|(net, _)| *net));
            ok &= peer.0.is_some() && peer.1.is_some();
        }
        // External networks must not collide with the fabric's pools.
        if let Some(pools) = pools {
            let nets = address
                .iter()
                .map(|(n, s)| (n.trunc(), s.clone()))
                .chain(routes.iter().cloned());
            for (net, span) in nets {
                for pool in [&pools.loopbacks, &pools.fabric, &pools.hosts] {
                    if overlaps(&net, &pool.net) {
                        ok = false;
                        d.error(Some(span.clone()), format!("{net} overlaps the `{}` pool {}", pool.key, pool.net))
                            .label("overlaps a fabric pool")
                            .help("external networks must be outside the loopbacks, fabric and hosts pools of `[addressing]`; pick another network or move the pool");
                    }
                }
            }
        }
        let Some(fabric) = fabric.as_deref_mut() else {
            continue;
        };
        let Some(node_v) = &e.node else { continue };
        let node_name = node_v.get_ref();
        let node = match fabric.node_by_name(node_name) {
            Some(n) if n.role.is_switch() => n.id,
            Some(_) => {
                d.error(
                    Some(node_v.span()),
                    format!("`{node_name}` is a host; external ports attach to switches"),
                )
                .label("not a switch")
                .help("pick a switch, e.g. the host's ToR/edge/leaf");
                continue;
            }
            None => {
                let names = fabric.switches().map(|n| n.name.as_str());
                let help = match suggest::best_guess(node_name, names) {
                    Some(g) => format!(
                        "did you mean `{g}`? external ports attach to any switch of the fabric"
                    ),
                    None => {
                        let first = fabric
                            .switches()
                            .next()
                            .map(|n| n.name.clone())
                            .unwrap_or_default();
                        format!("external ports attach to any switch of the fabric, e.g. `{first}`")
                    }
                };
                d.error(
                    Some(node_v.span()),
                    format!("external port on unknown node `{node_name}`"),
                )
                .label("no such switch")
                .help(help);
                continue;
            }
        };
        let ifname = e
            .name
            .as_ref()
            .map_or_else(|| format!("ext{index}"), |n| n.get_ref().clone());
        let clash = fabric
            .ports(node)
            .any(|(_, local, _)| local.ifname == ifname)
            || fabric
                .externals
                .iter()
                .any(|x| x.node == node && x.ifname == ifname);
        if clash {
            let span = e.name.as_ref().map_or(s.span.clone(), toml::Spanned::span);
            d.error(
                Some(span),
                format!("interface name `{ifname}` is already used in `{node_name}`"),
            )
            .label("name taken")
            .help("set `name` to an interface name not used by the node's links");
            continue;
        }
        if let (_, Some((asn, asn_span))) = &peer
            && fabric.node(node).asn == Some(*asn)
        {
            d.error(
                Some(asn_span.clone()),
                format!("the BGP peer's ASN {asn} is the ASN of `{node_name}`"),
            )
            .label("same ASN as the node")
            .help(format!(
                "an external neighbour is an eBGP peer: give it an ASN other than {asn} \
                     (e.g. a private ASN from 64512 to 65534)"
            ));
            continue;
        }
        if !ok {
            continue;
        }
        let Some((addr, _)) = address else { continue };
        let Some(interface) = e.interface else {
            continue;
        };
        fabric.prefixes.push(Prefix {
            net: addr.trunc(),
            attached: vec![node],
            kind: PrefixKind::External {
                gateway: None,
                ifname: ifname.clone(),
            },
        });
        for (net, _) in &routes {
            fabric.prefixes.push(Prefix {
                net: *net,
                attached: vec![node],
                kind: PrefixKind::External {
                    gateway,
                    ifname: ifname.clone(),
                },
            });
        }
        fabric.externals.push(ExternalPort {
            node,
            interface: interface.into_inner(),
            netns: e.netns.map(toml::Spanned::into_inner),
            ifname,
            addr,
            routes: routes.into_iter().map(|(n, _)| n).collect(),
            gateway,
            bgp: match peer {
                (Some(addr), Some((asn, _))) => Some(ExternalPeer { addr, asn }),
                _ => None,
            },
        });
    }
}

/// Reads `bgp = { peer, asn }` of an `[[external]]` whose address is
/// `address` (`None` when it is missing or invalid). Returns the peer's
/// address and its ASN with where it was written, each `None` when it is
/// missing or invalid (reported), so that the ASN can still be checked
/// against the node's when the address is wrong.
fn read_external_peer(
    d: &mut Diags<'_>,
    v: &Spanned<DeValue<'_>>,
    address: Option<Ipv4Net>,
) -> (Option<Ipv4Addr>, Option<(Asn, Range<usize>)>) {
    const WHAT: &str = "`bgp` of `[[external]]`";
    let keys = Keys::new(fields_of::<RawExternalPeer>());
    let Some(s) = read_table::<RawExternalPeer>(d, v, WHAT, keys) else {
        return (None, None);
    };
    // An example neighbour: the first host address of the subnet that is
    // not the node's.
    let example = address
        .and_then(|net| net.hosts().find(|h| *h != net.addr()))
        .unwrap_or(Ipv4Addr::new(192, 0, 2, 2));
    let peer = match &s.raw.peer {
        None => {
            missing(d, s.span.clone(), "peer", WHAT)
                .label("needs `peer`")
                .help(format!(
                    "add the neighbour's address on the external subnet, e.g. `peer = \"{example}\"`"
                ));
            None
        }
        Some(p) => match p.get_ref().trim().parse::<Ipv4Addr>() {
            Err(_) => {
                d.error(
                    Some(p.span()),
                    format!("invalid BGP peer address `{}`", p.get_ref()),
                )
                .label("invalid address")
                .help(format!(
                    "write the neighbour's IPv4 address on the external subnet, e.g. \"{example}\""
                ));
                None
            }
            Ok(addr) => match address {
                // The port's address is wrong and already reported.
                None => None,
                Some(net) => {
                    let subnet = net.trunc();
                    let problem = if !subnet.contains(&addr) {
                        Some((
                            format!("BGP peer {addr} is not on the external subnet {subnet}"),
                            "not on the external subnet",
                        ))
                    } else if addr == net.addr() {
                        Some((
                            format!("BGP peer {addr} is the node's own address on this port"),
                            "the node's own address",
                        ))
                    } else if net.prefix_len() < 31
                        && (addr == net.network() || addr == net.broadcast())
                    {
                        Some((
                            format!(
                                "BGP peer {addr} is the network or broadcast address of {subnet}"
                            ),
                            "not a host address",
                        ))
                    } else {
                        None
                    };
                    match problem {
                        Some((message, label)) => {
                            d.error(Some(p.span()), message).label(label).help(format!(
                                "the neighbour is directly connected: give another host address \
                                 of {subnet} than the node's {}, e.g. \"{example}\"",
                                net.addr()
                            ));
                            None
                        }
                        None => Some(addr),
                    }
                }
            },
        },
    };
    let asn = match &s.raw.asn {
        None => {
            missing(d, s.span.clone(), "asn", WHAT)
                .label("needs `asn`")
                .help("add the neighbour's ASN, e.g. `asn = 65010`");
            None
        }
        Some(a) => match a.get_ref() {
            toml::Value::Integer(n) => match u32::try_from(*n) {
                Ok(n) if n >= 1 => Some((Asn(n), a.span())),
                _ => {
                    let help = if *n == 0 {
                        "ASN 0 is reserved and never used by a BGP speaker (RFC 7607)"
                    } else {
                        "4-byte ASNs (RFC 6793) are from 1 to 4294967295; private ones are \
                         64512-65534 and 4200000000-4294967294"
                    };
                    d.error(
                        Some(a.span()),
                        format!("`asn` in {WHAT} must be from 1 to 4294967295, found {n}"),
                    )
                    .label("invalid ASN")
                    .help(help);
                    None
                }
            },
            other => {
                d.error(
                    Some(a.span()),
                    format!(
                        "`asn` in {WHAT} must be an integer, found {} {other}",
                        other.type_str()
                    ),
                )
                .label("expected an integer")
                .help("write the ASN as a plain integer without quotes, e.g. `asn = 65010`");
                None
            }
        },
    };
    (peer, asn)
}
