//! Address and ASN plans: turns a generated [`Graph`] into a [`Fabric`] with
//! interface names, addresses, ASNs and prefixes.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::ops::Range;

use ipnet::Ipv4Net;

use crate::diag::Diags;
use crate::generate::{AsnSlot, Graph};
use crate::model::*;

/// Longest Linux interface name.
pub(crate) const IFNAMSIZ: usize = 15;

/// An address pool and where the scenario set it.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    pub net: Ipv4Net,
    pub key: &'static str,
    /// Span of the value, `None` when the default is used.
    pub span: Option<Range<usize>>,
}

/// The three pools of `[addressing]`.
#[derive(Debug, Clone)]
pub(crate) struct Pools {
    pub loopbacks: Pool,
    pub fabric: Pool,
    pub hosts: Pool,
}

/// `[routing.asn] base` and where it was set.
#[derive(Debug, Clone)]
pub(crate) struct AsnBase {
    pub base: u32,
    pub span: Option<Range<usize>>,
}

/// Default pools and ASN base.
pub(crate) const DEFAULT_LOOPBACKS: &str = "10.0.0.0/16";
pub(crate) const DEFAULT_FABRIC: &str = "10.1.0.0/16";
pub(crate) const DEFAULT_HOSTS: &str = "10.128.0.0/9";
pub(crate) const DEFAULT_ASN_BASE: u32 = 4_200_000_000;

fn pool_error(d: &mut Diags<'_>, pool: &Pool, fallback: &Range<usize>, what: String, need: String) {
    let (span, help) = match &pool.span {
        Some(s) => (
            s.clone(),
            format!("use a larger pool in `[addressing] {}`; {need}", pool.key),
        ),
        None => (
            fallback.clone(),
            format!(
                "the default `{}` pool {} is too small for this topology; set a larger one in `[addressing] {}`; {need}",
                pool.key, pool.net, pool.key
            ),
        ),
    };
    d.error(
        Some(span),
        format!(
            "address pool `{}` = {} is too small: {what}",
            pool.key, pool.net
        ),
    )
    .label("pool too small")
    .help(help);
}

/// Addresses available in a pool when its first address is skipped.
fn pool_size(net: &Ipv4Net) -> u64 {
    1u64 << (32 - u32::from(net.prefix_len()))
}

fn addr_at(net: &Ipv4Net, offset: u64) -> Ipv4Addr {
    Ipv4Addr::from((u64::from(u32::from(net.network())) + offset) as u32)
}

/// Prefix length of the smallest subnet holding `hosts` hosts plus gateway,
/// network and broadcast addresses.
pub(crate) fn host_subnet_len(hosts: usize) -> u8 {
    let need = (hosts as u64 + 3).next_power_of_two();
    (32 - need.trailing_zeros()) as u8
}

/// Assigns names, addresses and ASNs. `params` gives each link's parameters
/// (defaults and class settings); inline parameters are laid over them.
/// Reports pool and ASN exhaustion at the pool's (or `fallback`) span.
pub(crate) fn build(
    d: &mut Diags<'_>,
    graph: Graph,
    kind: TopologyKind,
    pools: &Pools,
    asn: &AsnBase,
    fallback: Range<usize>,
    params: &dyn Fn(LinkClass) -> LinkParams,
) -> Option<Fabric> {
    let errors_before = d.count();
    let Graph {
        nodes: gnodes,
        links: glinks,
        groups,
    } = graph;

    // ASNs (RFC 7938: private 4-byte ASNs from the base).
    let max_offset = gnodes
        .iter()
        .filter_map(|n| match n.asn {
            AsnSlot::Offset(o) => Some(o),
            _ => None,
        })
        .max();
    if let Some(max) = max_offset
        && u64::from(asn.base) + max > u64::from(u32::MAX)
    {
        let span = asn.span.clone().unwrap_or_else(|| fallback.clone());
        d.error(
                Some(span),
                format!(
                    "ASN plan overflows: base {} + {} is above 4294967295",
                    asn.base, max
                ),
            )
            .label("ASN base too high")
            .help(format!(
                "this topology needs ASNs base..=base+{max}; use a base of at most {} in `[routing.asn] base`",
                u64::from(u32::MAX) - max
            ));
    }

    // Loopbacks, in node order; the pool's first address is skipped.
    let switches = gnodes.iter().filter(|n| n.role.is_switch()).count() as u64;
    let lo_capacity = pool_size(&pools.loopbacks.net).saturating_sub(1);
    if switches > lo_capacity {
        pool_error(
            d,
            &pools.loopbacks,
            &fallback,
            format!("{switches} switches need {switches} loopback addresses, it has {lo_capacity}"),
            format!(
                "a /{} or larger holds them",
                32 - (switches + 1).next_power_of_two().trailing_zeros()
            ),
        );
    }

    // /31 per switch-switch link, in link order.
    let fabric_links = glinks.iter().filter(|l| l.class.lower.is_switch()).count() as u64;
    let fabric_capacity = pool_size(&pools.fabric.net) / 2;
    if fabric_links > fabric_capacity {
        pool_error(
            d,
            &pools.fabric,
            &fallback,
            format!(
                "{fabric_links} switch-to-switch links need {fabric_links} /31s, it has {fabric_capacity}"
            ),
            format!(
                "a /{} or larger holds them",
                32 - (fabric_links * 2).next_power_of_two().trailing_zeros()
            ),
        );
    }

    // Host subnets, in group (ToR/edge/leaf) order, each aligned to its size.
    let mut subnets = Vec::with_capacity(groups.len());
    let mut cursor = 0u64;
    let host_pool = pool_size(&pools.hosts.net);
    for group in &groups {
        let len = host_subnet_len(group.hosts.len());
        let size = 1u64 << (32 - u32::from(len));
        cursor = cursor.div_ceil(size) * size;
        subnets.push((cursor, len));
        cursor += size;
    }
    if cursor > host_pool {
        pool_error(
            d,
            &pools.hosts,
            &fallback,
            format!(
                "{} host subnets need {} addresses, it has {}",
                groups.len(),
                cursor,
                host_pool
            ),
            format!(
                "a /{} or larger holds them",
                32 - cursor.next_power_of_two().trailing_zeros()
            ),
        );
    }
    if d.count() > errors_before {
        return None;
    }

    // Nodes.
    let mut nodes: Vec<Node> = Vec::with_capacity(gnodes.len());
    let mut lo_index = 0u64;
    for (i, g) in gnodes.into_iter().enumerate() {
        let (asn, loopback) = if g.role.is_switch() {
            lo_index += 1;
            let asn = match g.asn {
                AsnSlot::Offset(o) => Some(Asn((u64::from(asn.base) + o) as u32)),
                AsnSlot::Explicit(a) => Some(Asn(a)),
                AsnSlot::None => None,
            };
            (asn, Some(addr_at(&pools.loopbacks.net, lo_index)))
        } else {
            (None, None)
        };
        nodes.push(Node {
            id: NodeId(i as u32),
            name: g.name,
            role: g.role,
            asn,
            loopback,
            pod: g.pod,
            segment: g.segment,
            rail: g.rail,
            plane: g.plane,
            backup: g.backup,
            links: Vec::new(),
        });
    }
    for (i, l) in glinks.iter().enumerate() {
        nodes[l.a as usize].links.push(LinkId(i as u32));
        nodes[l.b as usize].links.push(LinkId(i as u32));
    }

    // Interface names: the peer's name, `_2`, `_3` for parallel links, else
    // `eth<port>`.
    let mut ifnames: Vec<[String; 2]> = vec![Default::default(); glinks.len()];
    for node in &nodes {
        let mut used: HashSet<String> = HashSet::with_capacity(node.links.len());
        let mut per_peer: HashMap<u32, u32> = HashMap::new();
        for (port, lid) in node.links.iter().enumerate() {
            let l = &glinks[lid.0 as usize];
            let (end, peer) = if l.a == node.id.0 { (0, l.b) } else { (1, l.a) };
            let n = per_peer.entry(peer).or_insert(0);
            *n += 1;
            let peer_name = &nodes[peer as usize].name;
            let mut name = if *n == 1 {
                peer_name.clone()
            } else {
                format!("{peer_name}_{n}")
            };
            if name.len() > IFNAMSIZ || used.contains(&name) {
                name = format!("eth{port}");
                let mut m = 2;
                while used.contains(&name) {
                    name = format!("eth{port}_{m}");
                    m += 1;
                }
            }
            used.insert(name.clone());
            ifnames[lid.0 as usize][end] = name;
        }
    }

    // Host addresses: one per (group, host); gateway is the first usable.
    let mut switch_groups: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut host_addr: HashMap<(usize, u32), Ipv4Addr> = HashMap::new();
    let mut prefixes: Vec<Prefix> = Vec::new();
    for n in nodes.iter().filter(|n| n.role.is_switch()) {
        prefixes.push(Prefix {
            net: Ipv4Net::new(n.loopback.expect("switch has a loopback"), 32)
                .expect("32 is a valid prefix length"),
            attached: vec![n.id],
            kind: PrefixKind::Loopback,
        });
    }
    let mut gateways = Vec::with_capacity(groups.len());
    for (gi, group) in groups.iter().enumerate() {
        let (offset, len) = subnets[gi];
        let net = Ipv4Net::new(addr_at(&pools.hosts.net, offset), len).expect("valid length");
        let gateway = addr_at(&pools.hosts.net, offset + 1);
        gateways.push(gateway);
        for (hi, &h) in group.hosts.iter().enumerate() {
            host_addr.insert((gi, h), addr_at(&pools.hosts.net, offset + 2 + hi as u64));
        }
        for &s in &group.switches {
            switch_groups.entry(s).or_default().push(gi);
        }
        prefixes.push(Prefix {
            net,
            attached: group.switches.iter().map(|&s| NodeId(s)).collect(),
            kind: PrefixKind::Hosts { gateway },
        });
    }

    // Links.
    let mut links = Vec::with_capacity(glinks.len());
    let mut parallel: HashMap<(u32, u32), u32> = HashMap::new();
    let mut fabric_index = 0u64;
    for (i, (g, [if_a, if_b])) in glinks.into_iter().zip(ifnames).enumerate() {
        let (addr_a, addr_b) = if g.class.lower.is_switch() {
            let a = addr_at(&pools.fabric.net, 2 * fabric_index);
            let b = addr_at(&pools.fabric.net, 2 * fabric_index + 1);
            fabric_index += 1;
            (
                Ipv4Net::new(a, 31).expect("valid"),
                Ipv4Net::new(b, 31).expect("valid"),
            )
        } else {
            // Host end `a`, switch end `b`: find the group of this switch
            // that holds the host.
            let group = switch_groups
                .get(&g.b)
                .and_then(|gs| {
                    gs.iter()
                        .copied()
                        .find(|gi| host_addr.contains_key(&(*gi, g.a)))
                })
                .expect("every host link belongs to a host group");
            (
                Ipv4Net::new(host_addr[&(group, g.a)], 32).expect("valid"),
                Ipv4Net::new(gateways[group], 32).expect("valid"),
            )
        };
        let n = parallel.entry((g.a, g.b)).or_insert(0);
        let name_a = &nodes[g.a as usize].name;
        let name_b = &nodes[g.b as usize].name;
        let name = if *n == 0 {
            format!("{name_a}--{name_b}")
        } else {
            format!("{name_a}--{name_b}:{n}")
        };
        *n += 1;
        let mut p = params(g.class);
        if let Some(inline) = &g.inline {
            p.overlay(inline);
        }
        links.push(Link {
            id: LinkId(i as u32),
            name,
            class: g.class,
            ends: [
                Endpoint {
                    node: NodeId(g.a),
                    ifname: if_a,
                    addr: addr_a,
                },
                Endpoint {
                    node: NodeId(g.b),
                    ifname: if_b,
                    addr: addr_b,
                },
            ],
            params: p,
        });
    }

    Some(Fabric {
        kind,
        nodes,
        links,
        prefixes,
        externals: Vec::new(),
        chips: std::collections::BTreeMap::new(),
        rate_scale: 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnet_sizes() {
        assert_eq!(host_subnet_len(1), 30);
        assert_eq!(host_subnet_len(2), 29);
        assert_eq!(host_subnet_len(5), 29);
        assert_eq!(host_subnet_len(6), 28);
        assert_eq!(host_subnet_len(136), 24);
        assert_eq!(host_subnet_len(253), 24);
        assert_eq!(host_subnet_len(254), 23);
    }
}
