//! Static ECMP routes over generated fabrics.

use std::net::Ipv4Addr;

use turbonet_routing::{Route, RouteOrigin, static_routes};
use turbonet_topo::{Lab, Role};

fn lab(text: &str) -> Lab {
    turbonet_topo::parse("test.toml", text).expect("valid scenario")
}

fn routes_of<'a>(lab: &Lab, all: &'a [Vec<Route>], node: &str) -> &'a [Route] {
    &all[lab.fabric.node_by_name(node).unwrap().id.0 as usize]
}

fn route_to(routes: &[Route], addr: Ipv4Addr) -> &Route {
    routes
        .iter()
        .filter(|r| r.prefix.contains(&addr))
        .max_by_key(|r| r.prefix.prefix_len())
        .unwrap_or_else(|| panic!("no route to {addr}"))
}

fn host_addr(lab: &Lab, host: &str) -> Ipv4Addr {
    let h = lab.fabric.node_by_name(host).unwrap();
    lab.fabric.ports(h.id).next().unwrap().1.addr.addr()
}

const K4: &str = "[lab]\nname = \"k4\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n";

#[test]
fn fat_tree_edge_spreads_over_both_aggs_and_agg_over_both_cores() {
    let lab = lab(K4);
    let all = static_routes(&lab.fabric);
    let far = host_addr(&lab, "h3-1-1");
    let edge = route_to(routes_of(&lab, &all, "edge0-0"), far);
    assert_eq!(edge.origin, RouteOrigin::Fabric);
    let ifs: Vec<&str> = edge.nexthops.iter().map(|h| h.ifname.as_str()).collect();
    assert_eq!(ifs, ["agg0-0", "agg0-1"]);
    let agg = route_to(routes_of(&lab, &all, "agg0-0"), far);
    assert_eq!(agg.nexthops.len(), 2, "k/2 cores above each agg");
    assert!(agg.nexthops.iter().all(|h| h.ifname.starts_with("core")));
    // Same pod: no core.
    let near = host_addr(&lab, "h0-1-0");
    let agg_near = route_to(routes_of(&lab, &all, "agg0-0"), near);
    assert_eq!(agg_near.nexthops.len(), 1);
    assert_eq!(agg_near.nexthops[0].ifname, "edge0-1");
}

#[test]
fn every_switch_routes_every_prefix_and_hosts_have_defaults() {
    let lab = lab(K4);
    let all = static_routes(&lab.fabric);
    for node in &lab.fabric.nodes {
        let routes = &all[node.id.0 as usize];
        if node.role == Role::Host {
            assert_eq!(routes.len(), 1);
            assert_eq!(routes[0].origin, RouteOrigin::Default);
            assert!(routes[0].nexthops.iter().all(|h| h.onlink));
            continue;
        }
        for prefix in &lab.fabric.prefixes {
            if prefix.attached.contains(&node.id) {
                continue;
            }
            assert!(
                routes.iter().any(|r| r.prefix == prefix.net),
                "{} has no route to {}",
                node.name,
                prefix.net
            );
        }
        for route in routes {
            assert!(!route.nexthops.is_empty());
        }
    }
}

#[test]
fn hpn_planes_stay_separate_and_dual_tor_hosts_use_every_port() {
    let lab = lab(
        "[lab]\nname = \"hpn\"\n[topology]\nkind = \"hpn\"\nsegments = 2\nhosts_per_segment = 2\n\
         rails = 2\nplanes = 2\naggs_per_plane = 2\n",
    );
    let all = static_routes(&lab.fabric);
    let host = routes_of(&lab, &all, "h0-0");
    assert_eq!(host[0].nexthops.len(), 4, "2 rails x 2 planes");
    // A plane-0 ToR reaches the other segment only through plane-0 aggs.
    let far = host_addr(&lab, "h1-1");
    let tor = route_to(routes_of(&lab, &all, "tor0-r0p0"), far);
    assert_eq!(tor.nexthops.len(), 2);
    for hop in &tor.nexthops {
        let agg = lab
            .fabric
            .node_by_name(&hop.ifname)
            .expect("port named after its agg");
        assert_eq!(agg.plane, Some(0));
    }
    // The ToR holds a /32 per host on its routed host ports.
    let h = host_addr(&lab, "h0-1");
    let r = route_to(routes_of(&lab, &all, "tor0-r0p0"), h);
    assert_eq!(r.origin, RouteOrigin::HostPort);
    assert_eq!(r.prefix.prefix_len(), 32);
}

#[test]
fn routes_are_deterministic() {
    let a = static_routes(&lab(K4).fabric);
    let b = static_routes(&lab(K4).fabric);
    assert_eq!(a, b);
}

#[test]
fn routes_avoid_failed_links_and_nodes() {
    use turbonet_routing::{Failures, routes_avoiding};
    let lab = lab(K4);
    let fabric = &lab.fabric;
    let failed = fabric.link_by_name("edge0-0--agg0-0").unwrap();
    let mut failures = Failures::default();
    failures.links.insert(failed.id);
    let all = routes_avoiding(fabric, &failures);
    let subnet_host = host_addr(&lab, "h0-0-0");
    for switch in fabric.switches() {
        let routes = &all[switch.id.0 as usize];
        for route in routes {
            for hop in &route.nexthops {
                let dead = failed
                    .ends_from(switch.id)
                    .is_some_and(|(local, _)| local.ifname == hop.ifname);
                assert!(
                    !dead,
                    "{} routes {} over the failed link",
                    switch.name, route.prefix
                );
            }
        }
        if switch.name != "edge0-0" {
            // Everyone still reaches edge0-0's hosts, agg0-0 through edge0-1.
            route_to(routes, subnet_host);
        }
    }
    let agg = route_to(routes_of(&lab, &all, "agg0-0"), subnet_host);
    assert_eq!(agg.nexthops.len(), 1);
    assert_eq!(agg.nexthops[0].ifname, "edge0-1");

    // A failed core takes itself out of every other switch's next hops.
    let mut failures = Failures::default();
    let core0 = fabric.node_by_name("core0").unwrap().id;
    failures.nodes.insert(core0);
    let all = routes_avoiding(fabric, &failures);
    let far = host_addr(&lab, "h3-1-1");
    let agg = route_to(routes_of(&lab, &all, "agg0-0"), far);
    assert_eq!(agg.nexthops.len(), 1, "one core left above agg0-0");
    assert!(all[core0.0 as usize].is_empty());
}

#[test]
fn pruning_keeps_what_a_kernel_keeps_when_a_port_goes_down() {
    let lab = lab(K4);
    let fabric = &lab.fabric;
    let edge = fabric.node_by_name("edge0-0").unwrap().id;
    let agg = fabric.node_by_name("agg0-0").unwrap().id;
    let all = static_routes(fabric);
    let mut failures = turbonet_routing::Failures::default();
    failures
        .links
        .insert(fabric.link_by_name("edge0-0--agg0-0").unwrap().id);

    // edge0-0 keeps the routes it had over agg0-1 too, over agg0-1 only;
    // those it had through agg0-0 alone are gone.
    let before = &all[edge.0 as usize];
    let mut at_edge = before.clone();
    failures.prune(fabric, edge, &mut at_edge);
    let only_via = |r: &Route, port: &str| r.nexthops.iter().all(|h| h.ifname == port);
    let lost = before.iter().filter(|r| only_via(r, "agg0-0")).count();
    assert!(lost > 0);
    assert_eq!(at_edge.len(), before.len() - lost);
    assert!(
        at_edge
            .iter()
            .all(|r| !r.nexthops.is_empty() && r.nexthops.iter().all(|h| h.ifname != "agg0-0"))
    );
    assert!(at_edge.iter().any(|r| only_via(r, "agg0-1")));

    // agg0-0 loses what it reached only through edge0-0, its hosts among
    // them.
    let before = &all[agg.0 as usize];
    let mut at_agg = before.clone();
    failures.prune(fabric, agg, &mut at_agg);
    let lost = before.iter().filter(|r| only_via(r, "edge0-0")).count();
    assert_eq!(at_agg.len(), before.len() - lost);
    let h = host_addr(&lab, "h0-0-0");
    assert!(at_agg.iter().all(|r| !r.prefix.contains(&h)));
}
