//! The BGP plan of generated fabrics: sessions, originations, and what
//! every switch learns once the fabric has converged.

use std::collections::{BTreeSet, HashMap, VecDeque};

use ipnet::Ipv4Net;
use turbonet_routing::Failures;
use turbonet_routing::bgp::plan::{self, Fib, Neighbour, Speaker};
use turbonet_routing::bgp::rib::{Change, Multipath, PeerId, PeerSummary, Rib};
use turbonet_topo::{Lab, LinkId, NodeId, Role};

fn lab(path: &str) -> Lab {
    let text = std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR")))
        .expect("bundled scenario");
    turbonet_topo::parse(path, &text).expect("valid scenario")
}

/// The links between two switches.
fn switch_links(lab: &Lab) -> Vec<LinkId> {
    lab.fabric
        .links
        .iter()
        .filter(|l| {
            l.ends
                .iter()
                .all(|e| lab.fabric.node(e.node).role.is_switch())
        })
        .map(|l| l.id)
        .collect()
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
    assert_eq!(sessions, 2 * switch_links(&lab).len());
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
fn a_failed_host_link_moves_the_host_through_the_core_only_when_it_is_shared() {
    let text = std::fs::read_to_string(format!(
        "{}/../scenarios/hpn.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("bundled scenario");
    for shared in [false, true] {
        let text = if shared {
            text.replace(
                "core_uplinks = 1\n",
                "core_uplinks = 1\ncore = \"shared\"\n",
            )
        } else {
            text.clone()
        };
        let lab = turbonet_topo::parse("hpn.toml", &text).expect("valid scenario");
        failed_host_link(&lab, shared);
    }
}

/// Fails the first host link of the first ToR (plane 0) of `lab`.
fn failed_host_link(lab: &Lab, shared: bool) {
    let speakers = plan::speakers(&lab.fabric);
    let healthy = plan::converged(&speakers, &Failures::default());
    let tor = &speakers[0];
    let plane = |s: &Speaker| lab.fabric.node(s.node).plane;
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
    // ToR; now the ToR withdrew the /32. With a shared core the host is
    // reached through its other ToR (via the cores); with the planes apart
    // the ToR's plane no longer reaches it at all, and the other plane
    // still does.
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
        if shared || plane(s) != plane(tor) {
            assert!(
                after.is_some(),
                "{} lost {host} (shared core: {shared})",
                s.name
            );
        } else {
            assert!(
                after.is_none(),
                "{} reaches {host} across the planes",
                s.name
            );
        }
    }
    // With a shared core the ToR itself now learns the host's /32 from the
    // fabric; with the planes apart nothing in its plane can tell it.
    assert_eq!(failed[0].contains_key(&host), shared);
    assert!(!healthy[0].contains_key(&host));
}

/// The reference for [`plan::converged`]: the fabric's BGP run to
/// quiescence in memory, with the [`Rib`] the agents use (UPDATEs exported
/// and received), each speaker queued once with all its changed prefixes.
fn simulated(speakers: &[Speaker], failures: &Failures) -> Vec<Fib> {
    let index: HashMap<NodeId, usize> = speakers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.node, i))
        .collect();
    let down = |s: &Speaker| failures.nodes.contains(&s.node);
    let link_down = |n: &Neighbour| n.link.is_some_and(|l| failures.links.contains(&l));
    // For neighbour `n` of speaker `i`: the peer speaker and the position
    // of the session in the peer's list, when the session can come up.
    let reverse: Vec<Vec<Option<(usize, PeerId)>>> = speakers
        .iter()
        .map(|s| {
            s.neighbours
                .iter()
                .map(|n| {
                    let p = *index.get(&n.peer?)?;
                    if down(s) || down(&speakers[p]) || link_down(n) {
                        return None;
                    }
                    let back = speakers[p]
                        .neighbours
                        .iter()
                        .position(|b| b.link == n.link)?;
                    Some((p, back as PeerId))
                })
                .collect()
        })
        .collect();
    let summary = |n: &Neighbour, peer: &Speaker| PeerSummary {
        peer_as: n.peer_asn,
        peer_addr: n.peer_addr,
        peer_id: peer.router_id,
    };
    let mut ribs: Vec<Rib> = speakers
        .iter()
        .map(|s| Rib::new(s.asn, s.router_id, Multipath::Relax))
        .collect();
    // Speakers with changes to advertise, each queued once with all its
    // changed prefixes: a spine hears from every leaf before it advertises
    // the lot, instead of once per leaf.
    let mut pending: Vec<BTreeSet<Ipv4Net>> = vec![BTreeSet::new(); speakers.len()];
    let mut queue: VecDeque<usize> = VecDeque::new();
    for (i, s) in speakers.iter().enumerate() {
        if down(s) {
            continue;
        }
        let port_up = |port: &Option<String>| match port {
            None => true,
            Some(ifname) => !s
                .host_ports
                .iter()
                .any(|(name, link)| name == ifname && failures.links.contains(link)),
        };
        let changed: Vec<Ipv4Net> = s
            .originate
            .iter()
            .filter(|o| port_up(&o.port))
            .flat_map(|o| ribs[i].originate(o.prefix))
            .map(|c| c.prefix())
            .collect();
        push(&mut queue, &mut pending[i], i, changed);
    }
    while let Some(i) = queue.pop_front() {
        let prefixes: Vec<Ipv4Net> = std::mem::take(&mut pending[i]).into_iter().collect();
        for (n, neighbour) in speakers[i].neighbours.iter().enumerate() {
            let Some((p, back)) = reverse[i][n] else {
                continue;
            };
            let to = summary(neighbour, &speakers[p]);
            let from = summary(&speakers[p].neighbours[back as usize], &speakers[i]);
            let updates = ribs[i].export(n as PeerId, &to, neighbour.local_addr, &prefixes);
            for update in &updates {
                let changes = ribs[p].update(back, &from, update);
                push(
                    &mut queue,
                    &mut pending[p],
                    p,
                    changes.iter().map(Change::prefix),
                );
            }
        }
    }
    ribs.iter()
        .map(|rib| {
            rib.loc_rib()
                .filter(|(_, best)| !best.local)
                .map(|(p, best)| (*p, best.nexthops.iter().map(|&(_, nh)| nh).collect()))
                .collect()
        })
        .collect()
}

/// Adds `changed` to speaker `i`'s pending prefixes, queueing it if it had
/// none.
fn push(
    queue: &mut VecDeque<usize>,
    pending: &mut BTreeSet<Ipv4Net>,
    i: usize,
    changed: impl IntoIterator<Item = Ipv4Net>,
) {
    let was_empty = pending.is_empty();
    pending.extend(changed);
    if was_empty && !pending.is_empty() {
        queue.push_back(i);
    }
}

/// A few failure sets for `speakers`: none, single links and switches
/// (some of each, picked by a fixed generator), a host port, and several
/// links together.
fn failure_sets(lab: &Lab, speakers: &[Speaker]) -> Vec<Failures> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut below = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let switch_links = switch_links(lab);
    let mut sets = vec![Failures::default()];
    if switch_links.is_empty() {
        return sets;
    }
    for _ in 0..6 {
        let mut f = Failures::default();
        f.links.insert(switch_links[below(switch_links.len())]);
        sets.push(f);
    }
    for _ in 0..3 {
        let mut f = Failures::default();
        f.nodes.insert(speakers[below(speakers.len())].node);
        sets.push(f);
    }
    if let Some(s) = speakers.iter().find(|s| !s.host_ports.is_empty()) {
        let mut f = Failures::default();
        f.links.insert(s.host_ports[0].1);
        sets.push(f);
    }
    let mut f = Failures::default();
    for _ in 0..switch_links.len().div_ceil(4) {
        f.links.insert(switch_links[below(switch_links.len())]);
    }
    sets.push(f);
    sets
}

/// A fabric where the tie-break decides who is reached: `c` has two routes
/// of one length to `o`'s prefixes, through `a` and through `b`, and
/// advertises the one of the lower BGP Identifier to `d`, which drops it
/// as a loop if it went through `a` (`d` shares `a`'s AS, or `b`'s when
/// `twin` is "b").
fn tie_break_lab(twin: &str) -> Lab {
    let asn = |name: &str| match name {
        "o" => 65001,
        "a" => 65002,
        "b" => 65003,
        "c" => 65004,
        _ => 0,
    };
    let mut text = String::from("[lab]\nname = \"tie\"\n\n[topology]\nkind = \"custom\"\n");
    for (name, asn) in [
        ("o", asn("o")),
        ("a", asn("a")),
        ("b", asn("b")),
        ("c", asn("c")),
        ("d", asn(twin)),
    ] {
        text +=
            &format!("\n[[topology.nodes]]\nname = \"{name}\"\nrole = \"switch\"\nasn = {asn}\n");
    }
    text += "\n[[topology.nodes]]\nname = \"h\"\nrole = \"host\"\n";
    for (a, b) in [
        ("o", "a"),
        ("o", "b"),
        ("a", "c"),
        ("b", "c"),
        ("c", "d"),
        ("h", "o"),
    ] {
        text += &format!("\n[[topology.links]]\na = \"{a}\"\nb = \"{b}\"\n");
    }
    turbonet_topo::parse("tie.toml", &text).expect("valid scenario")
}

#[test]
fn the_search_builds_what_running_bgp_converges_to() {
    for twin in ["a", "b"] {
        let lab = tie_break_lab(twin);
        let speakers = plan::speakers(&lab.fabric);
        let (built, run) = (
            plan::converged(&speakers, &Failures::default()),
            simulated(&speakers, &Failures::default()),
        );
        assert_eq!(built, run, "d shares the AS of {twin}");
    }
    // One of the two has d without o's prefixes: the tie-break counted.
    let reached = |twin| {
        let lab = tie_break_lab(twin);
        let speakers = plan::speakers(&lab.fabric);
        plan::converged(&speakers, &Failures::default())[4].len()
    };
    assert_ne!(reached("a"), reached("b"));
    for path in [
        "scenarios/two-hosts.toml",
        "scenarios/custom-triangle.toml",
        "scenarios/leaf-spine.toml",
        "scenarios/fat-tree-k4.toml",
        "scenarios/fat-tree-k8.toml",
        "scenarios/hpn.toml",
        "scenarios/hpn-bgp.toml",
    ] {
        let lab = lab(path);
        let speakers = plan::speakers(&lab.fabric);
        for failures in failure_sets(&lab, &speakers) {
            let built = plan::converged(&speakers, &failures);
            let run = simulated(&speakers, &failures);
            for (i, s) in speakers.iter().enumerate() {
                assert_eq!(built[i], run[i], "{path}: {} around {failures:?}", s.name);
            }
            let digests: Vec<_> = run.iter().map(plan::FibDigest::of).collect();
            assert_eq!(
                plan::converged_digests(&speakers, &failures),
                digests,
                "{path}"
            );
        }
    }
}
