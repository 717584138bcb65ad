//! Static routing: equal-cost shortest paths computed centrally.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use turbonet_topo::{Fabric, Link, LinkId, NodeId, PrefixKind};

use crate::{NextHop, Route, RouteOrigin};

const UNREACHED: u32 = u32::MAX;

/// Computes every node's routes for the `static` mode, indexed by node id.
///
/// - Hosts get a default route over all their ports, through the gateway of
///   each port's switch (on-link: host ports are routed /32 ports).
/// - Switches get a /32 per host on each routed host port, the networks
///   behind their external ports, and, for every prefix attached elsewhere,
///   an ECMP route over every neighbour one hop closer to the nearest
///   attached switch (hop count over switch-switch links; hosts never
///   transit).
///
/// Routes within a node are sorted by prefix so the output is deterministic.
pub fn static_routes(fabric: &Fabric) -> Vec<Vec<Route>> {
    routes_avoiding(fabric, &Failures::default())
}

/// What is down in the fabric: the central controller computes routes
/// around it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failures {
    /// Links that are down.
    pub links: HashSet<LinkId>,
    /// Nodes that are down (all their links with them).
    pub nodes: HashSet<NodeId>,
}

impl Failures {
    /// True when `link` carries no traffic: it is down, or an end is.
    pub fn blocks(&self, link: &Link) -> bool {
        self.links.contains(&link.id) || link.ends.iter().any(|e| self.nodes.contains(&e.node))
    }

    /// Drops the next hops of `node`'s `routes` that leave through a port
    /// that is down, and the routes left without any: what a kernel keeps
    /// of static routes when ports go down.
    pub fn prune(&self, fabric: &Fabric, node: NodeId, routes: &mut Vec<Route>) {
        let down: Vec<&str> = fabric
            .ports(node)
            .filter(|(link, _, _)| self.blocks(link))
            .map(|(_, local, _)| local.ifname.as_str())
            .collect();
        if down.is_empty() {
            return;
        }
        routes.retain_mut(|r| {
            r.nexthops
                .retain(|hop| !down.contains(&hop.ifname.as_str()));
            !r.nexthops.is_empty()
        });
    }
}

/// [`static_routes`] over the fabric without what `failures` takes down:
/// no next hop over a failed link or into a failed node, no host default
/// through a dead port, and prefixes whose every attached switch is down
/// are not routed at all.
pub fn routes_avoiding(fabric: &Fabric, failures: &Failures) -> Vec<Vec<Route>> {
    let mut routes: Vec<Vec<Route>> = vec![Vec::new(); fabric.nodes.len()];
    attached_routes(fabric, failures, &mut routes);
    fabric_routes(fabric, failures, &mut routes);
    for node_routes in &mut routes {
        node_routes.sort_by_key(|r| (r.prefix.network(), r.prefix.prefix_len()));
    }
    routes
}

/// Routes that follow from a node's own ports: host defaults, host /32s,
/// external networks.
fn attached_routes(fabric: &Fabric, failures: &Failures, routes: &mut [Vec<Route>]) {
    for host in fabric.hosts() {
        let nexthops = fabric
            .ports(host.id)
            .filter(|(link, _, _)| !failures.blocks(link))
            .map(|(_, _, remote)| NextHop {
                via: Some(remote.addr.addr()),
                ifname: local_ifname(fabric, host.id, remote.node, remote.addr.addr()),
                onlink: true,
            })
            .collect::<Vec<_>>();
        if !nexthops.is_empty() {
            routes[host.id.0 as usize].push(Route {
                prefix: Ipv4Net::new(Ipv4Addr::UNSPECIFIED, 0).expect("/0 is valid"),
                nexthops,
                origin: RouteOrigin::Default,
            });
        }
    }
    for link in fabric
        .links
        .iter()
        .filter(|l| l.is_host_link() && !failures.blocks(l))
    {
        let [host_end, switch_end] = &link.ends;
        routes[switch_end.node.0 as usize].push(Route {
            prefix: Ipv4Net::new(host_end.addr.addr(), 32).expect("/32 is valid"),
            nexthops: vec![NextHop {
                via: None,
                ifname: switch_end.ifname.clone(),
                onlink: false,
            }],
            origin: RouteOrigin::HostPort,
        });
    }
    for prefix in &fabric.prefixes {
        if let PrefixKind::External {
            gateway: Some(gateway),
            ifname,
        } = &prefix.kind
        {
            for node in prefix
                .attached
                .iter()
                .filter(|n| !failures.nodes.contains(n))
            {
                routes[node.0 as usize].push(Route {
                    prefix: prefix.net,
                    nexthops: vec![NextHop {
                        via: Some(*gateway),
                        ifname: ifname.clone(),
                        onlink: false,
                    }],
                    origin: RouteOrigin::External,
                });
            }
        }
    }
}

/// The ifname on `node` of its port whose remote end is `peer` at `peer_addr`.
fn local_ifname(fabric: &Fabric, node: NodeId, peer: NodeId, peer_addr: Ipv4Addr) -> String {
    fabric
        .ports(node)
        .find(|(_, _, remote)| remote.node == peer && remote.addr.addr() == peer_addr)
        .map(|(_, local, _)| local.ifname.clone())
        .expect("port exists")
}

/// ECMP shortest-path routes for every prefix, from every switch it is not
/// attached to. One breadth-first search per distinct set of attached
/// switches (a loopback has one, a dual-ToR host subnet two).
fn fabric_routes(fabric: &Fabric, failures: &Failures, routes: &mut [Vec<Route>]) {
    let adjacency = switch_adjacency(fabric, failures);
    let mut by_attachment: HashMap<Vec<NodeId>, Vec<Ipv4Net>> = HashMap::new();
    for prefix in &fabric.prefixes {
        let mut attached: Vec<NodeId> = prefix
            .attached
            .iter()
            .copied()
            .filter(|n| !failures.nodes.contains(n))
            .collect();
        if attached.is_empty() {
            continue;
        }
        attached.sort();
        by_attachment.entry(attached).or_default().push(prefix.net);
    }
    let mut by_attachment: Vec<_> = by_attachment.into_iter().collect();
    by_attachment.sort();

    let mut distance = vec![UNREACHED; fabric.nodes.len()];
    let mut queue = VecDeque::new();
    for (attached, nets) in by_attachment {
        distance.fill(UNREACHED);
        queue.clear();
        for &node in &attached {
            distance[node.0 as usize] = 0;
            queue.push_back(node);
        }
        while let Some(node) = queue.pop_front() {
            let next = distance[node.0 as usize] + 1;
            for hop in &adjacency[node.0 as usize] {
                let d = &mut distance[hop.peer.0 as usize];
                if *d == UNREACHED {
                    *d = next;
                    queue.push_back(hop.peer);
                }
            }
        }
        for switch in fabric
            .switches()
            .filter(|s| !failures.nodes.contains(&s.id))
        {
            let own = distance[switch.id.0 as usize];
            if own == 0 || own == UNREACHED {
                continue;
            }
            let nexthops: Vec<NextHop> = adjacency[switch.id.0 as usize]
                .iter()
                .filter(|hop| distance[hop.peer.0 as usize] == own - 1)
                .map(|hop| NextHop {
                    via: Some(hop.via),
                    ifname: hop.ifname.clone(),
                    onlink: false,
                })
                .collect();
            for &net in &nets {
                routes[switch.id.0 as usize].push(Route {
                    prefix: net,
                    nexthops: nexthops.clone(),
                    origin: RouteOrigin::Fabric,
                });
            }
        }
    }
}

/// A switch-switch adjacency: one per link, so parallel links are separate
/// next hops.
struct Hop {
    peer: NodeId,
    via: Ipv4Addr,
    ifname: String,
}

fn switch_adjacency(fabric: &Fabric, failures: &Failures) -> Vec<Vec<Hop>> {
    let mut adjacency: Vec<Vec<Hop>> = (0..fabric.nodes.len()).map(|_| Vec::new()).collect();
    for link in fabric
        .links
        .iter()
        .filter(|l| !l.is_host_link() && !failures.blocks(l))
    {
        for (local, remote) in [
            (&link.ends[0], &link.ends[1]),
            (&link.ends[1], &link.ends[0]),
        ] {
            adjacency[local.node.0 as usize].push(Hop {
                peer: remote.node,
                via: remote.addr.addr(),
                ifname: local.ifname.clone(),
            });
        }
    }
    adjacency
}
