//! The BGP plan of generated fabrics: sessions, originations, and what
//! every switch learns once the fabric has converged.

use ipnet::Ipv4Net;
use turbonet_routing::Failures;
use turbonet_routing::bgp::plan::{self, Speaker};
use turbonet_topo::{Lab, Role};

fn lab(path: &str) -> Lab {
    let text = std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR")))
        .expect("bundled scenario");
    turbonet_topo::parse(path, &text).expect("valid scenario")
}

fn speaker<'a>(speakers: &'a [Speaker], name: &str) -> (usize, &'a Speaker) {
    speakers
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == name)
        .unwrap_or_else(|| panic!("no speaker {name}"))
}

#[test]
fn fat_tree_sessions_are_one_per_link_with_one_passive_end() {
    let lab = lab("scenarios/fat-tree-k4.toml");
    let speakers = plan::speakers(&lab.fabric);
    assert_eq!(speakers.len(), 20);
    let sessions: usize = speakers.iter().map(|s| s.neighbours.len()).sum();
    let switch_links = lab
        .fabric
        .links
        .iter()
        .filter(|l| {
            l.ends
                .iter()
                .all(|e| lab.fabric.node(e.node).role != Role::Host)
        })
        .count();
    assert_eq!(sessions, 2 * switch_links);
    for s in &speakers {
        for n in &s.neighbours {
            let (_, peer) = speaker(&speakers, &n.peer_name);
            let back = peer
                .neighbours
                .iter()
                .find(|b| b.link == n.link)
                .expect("the peer has the session too");
            assert_eq!(
                (back.local_addr, back.peer_addr),
                (n.peer_addr, n.local_addr)
            );
            assert_eq!(back.peer_asn, s.asn);
            assert_ne!(back.passive, n.passive, "{} -- {}", s.name, peer.name);
        }
    }
}

#[test]
fn fat_tree_converges_to_every_prefix_the_asn_plan_allows() {
    let lab = lab("scenarios/fat-tree-k4.toml");
    let speakers = plan::speakers(&lab.fabric);
    let fibs = plan::converged(&speakers, &Failures::default());
    let loopbacks = |i: usize| fibs[i].keys().filter(|p| p.prefix_len() == 32).count();
    // An edge switch (its own AS) learns all 19 other loopbacks and the 7
    // other edges' host subnets.
    let (edge, _) = speaker(&speakers, "edge0-0");
    assert_eq!((loopbacks(edge), fibs[edge].len()), (19, 26));
    // An aggregation switch cannot learn its pod twin's loopback (same AS),
    // the two cores it has no link to, nor the other pods' aggregation
    // switches that attach to those cores: every path to them comes back
    // through its own pod's AS. 19 - 1 - 2 - 3.
    let (agg, _) = speaker(&speakers, "agg0-0");
    assert_eq!((loopbacks(agg), fibs[agg].len()), (13, 21));
    // Cores share one AS: none learns another's loopback, nor those of the
    // aggregation switches attached to the other cores (their paths cross
    // a core or repeat a pod's AS). 19 - 3 - 4. Every host subnet is
    // learned everywhere.
    let (core, _) = speaker(&speakers, "core0");
    assert_eq!((loopbacks(core), fibs[core].len()), (12, 20));
}

#[test]
fn hpn_tors_announce_dual_homed_hosts_per_port() {
    let lab = lab("scenarios/hpn.toml");
    let speakers = plan::speakers(&lab.fabric);
    let tor = &speakers[0];
    let host_routes: Vec<_> = tor.originate.iter().filter(|o| o.port.is_some()).collect();
    // Every host port of the ToR (active and backup hosts) gets a /32 tied
    // to that port.
    let host_ports = lab
        .fabric
        .ports(tor.node)
        .filter(|(_, _, remote)| lab.fabric.node(remote.node).role == Role::Host)
        .count();
    assert!(host_ports > 0);
    assert_eq!(host_routes.len(), host_ports);
    for o in &host_routes {
        assert_eq!(o.prefix.prefix_len(), 32);
    }
    // Once converged, every switch of the other plane reaches those hosts
    // by their /32 (through the cores).
    let fibs = plan::converged(&speakers, &Failures::default());
    for (i, s) in speakers.iter().enumerate() {
        for o in &host_routes {
            if s.originate.iter().any(|own| own.prefix == o.prefix) {
                continue; // the host's other ToR
            }
            assert!(
                fibs[i].contains_key(&o.prefix),
                "{} lacks {}",
                s.name,
                o.prefix
            );
        }
    }
    let loopback = Ipv4Net::from(tor.router_id);
    assert!(
        tor.originate
            .iter()
            .any(|o| o.prefix == loopback && o.port.is_none())
    );
}

#[test]
fn a_failed_link_shrinks_ecmp_and_a_failed_host_link_moves_the_host() {
    let lab = lab("scenarios/hpn.toml");
    let speakers = plan::speakers(&lab.fabric);
    let healthy = plan::converged(&speakers, &Failures::default());
    let tor = &speakers[0];
    let (host_if, host_link) = tor.host_ports[0].clone();
    let host = tor
        .originate
        .iter()
        .find(|o| o.port.as_deref() == Some(host_if.as_str()))
        .expect("a dual-homed host")
        .prefix;
    let mut failures = Failures::default();
    failures.links.insert(host_link);
    let failed = plan::converged(&speakers, &failures);
    // Every other switch of the ToR's plane reached the host through the
    // ToR; now the ToR withdrew the /32 and the host is reached through
    // its other ToR only (via the cores), or through the subnet.
    for (i, s) in speakers.iter().enumerate().skip(1) {
        if s.originate.iter().any(|o| o.prefix == host) {
            continue;
        }
        let before = healthy[i].get(&host);
        let after = failed[i].get(&host);
        assert!(before.is_some(), "{} had {host}", s.name);
        if s.neighbours.iter().any(|n| n.peer == Some(tor.node)) {
            let tor_addr = s
                .neighbours
                .iter()
                .find(|n| n.peer == Some(tor.node))
                .unwrap()
                .peer_addr;
            assert!(before.unwrap().contains(&tor_addr));
            assert!(
                !after.is_some_and(|hops| hops.contains(&tor_addr)),
                "{}",
                s.name
            );
        }
    }
    // The ToR itself now learns the host's /32 from the fabric.
    assert!(failed[0].contains_key(&host));
    assert!(!healthy[0].contains_key(&host));
}
