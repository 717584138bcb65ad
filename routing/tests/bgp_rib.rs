//! BGP RIB and route selection (RFC 4271 §9, RFC 7938 §6): leaf-spine and
//! fat-tree ECMP, loop prevention, the decision process tie-breakers,
//! export rules, and a seeded randomized run checked against a brute-force
//! recomputation from the Adj-RIBs-In.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use turbonet_routing::bgp::rib::{Best, Change, Multipath, PeerId, PeerSummary, Rib};
use turbonet_routing::bgp::{AsPath, AsSegment, Origin, PathAttributes, SegmentType, Update};

/// RFC 7938 §5.2 style private 4-octet ASNs.
const SPINE_AS: u32 = 4_200_000_000;
const LEAF_AS: u32 = 4_200_000_101;
const OTHER_LEAF_AS: u32 = 4_200_000_102;

fn net(s: &str) -> Ipv4Net {
    s.parse().unwrap()
}

fn ip(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

fn peer(peer_as: u32, n: u8) -> PeerSummary {
    PeerSummary {
        peer_as,
        peer_addr: ip(10, 0, n, 0),
        peer_id: ip(192, 0, 2, n),
    }
}

fn attrs(path: &[u32], next_hop: Ipv4Addr) -> PathAttributes {
    PathAttributes {
        origin: Some(Origin::Igp),
        as_path: Some(AsPath::sequence(path.iter().copied())),
        next_hop: Some(next_hop),
        ..PathAttributes::default()
    }
}

fn announce(prefixes: &[&str], attributes: PathAttributes) -> Update {
    Update {
        withdrawn: Vec::new(),
        attributes,
        nlri: prefixes.iter().map(|p| net(p)).collect(),
    }
}

fn withdraw(prefixes: &[&str]) -> Update {
    Update {
        withdrawn: prefixes.iter().map(|p| net(p)).collect(),
        ..Update::default()
    }
}

fn leaf(multipath: Multipath) -> Rib {
    Rib::new(LEAF_AS, ip(192, 0, 2, 101), multipath)
}

fn best_of(rib: &Rib, prefix: &str) -> Option<Best> {
    let prefix = net(prefix);
    rib.loc_rib()
        .find(|(p, _)| **p == prefix)
        .map(|(_, b)| b.clone())
}

fn nexthops(rib: &Rib, prefix: &str) -> Vec<(PeerId, Ipv4Addr)> {
    best_of(rib, prefix).map(|b| b.nexthops).unwrap_or_default()
}

/// A leaf with two spines (one shared AS) hearing the other leaf's prefix
/// over both: equal paths, ECMP of 2 unless multipath is off.
#[test]
fn leaf_spine_ecmp_over_both_spines() {
    let s1 = peer(SPINE_AS, 1);
    let s2 = peer(SPINE_AS, 2);
    for (mp, want) in [
        (Multipath::Off, 1),
        (Multipath::SameAs, 2),
        (Multipath::Relax, 2),
    ] {
        let mut rib = leaf(mp);
        let c1 = rib.update(
            1,
            &s1,
            &announce(
                &["10.1.2.0/24"],
                attrs(&[SPINE_AS, OTHER_LEAF_AS], s1.peer_addr),
            ),
        );
        assert_eq!(
            c1,
            vec![Change::Installed {
                prefix: net("10.1.2.0/24"),
                best: Best {
                    nexthops: vec![(1, s1.peer_addr)],
                    as_path_len: 2,
                    local: false
                }
            }]
        );
        let c2 = rib.update(
            2,
            &s2,
            &announce(
                &["10.1.2.0/24"],
                attrs(&[SPINE_AS, OTHER_LEAF_AS], s2.peer_addr),
            ),
        );
        let hops = nexthops(&rib, "10.1.2.0/24");
        assert_eq!(hops.len(), want, "{mp:?}");
        if want == 1 {
            // The lower router id (spine 1) stays best: nothing changed.
            assert!(c2.is_empty());
            assert_eq!(hops, vec![(1, s1.peer_addr)]);
        } else {
            assert_eq!(hops, vec![(1, s1.peer_addr), (2, s2.peer_addr)]);
            assert_eq!(c2.len(), 1);
        }
    }
}

/// Fat-tree-like: the same prefix from two neighbour ASes with paths of
/// equal length. Only multipath-relax combines them (RFC 7938 §6.3).
#[test]
fn different_neighbour_as_needs_relax() {
    let a = peer(4_200_000_201, 1);
    let b = peer(4_200_000_202, 2);
    for (mp, want) in [
        (Multipath::Off, 1),
        (Multipath::SameAs, 1),
        (Multipath::Relax, 2),
    ] {
        let mut rib = leaf(mp);
        rib.update(
            1,
            &a,
            &announce(&["10.9.0.0/16"], attrs(&[a.peer_as, 65000], a.peer_addr)),
        );
        rib.update(
            2,
            &b,
            &announce(&["10.9.0.0/16"], attrs(&[b.peer_as, 65000], b.peer_addr)),
        );
        assert_eq!(nexthops(&rib, "10.9.0.0/16").len(), want, "{mp:?}");
    }
}

#[test]
fn route_with_our_as_is_ignored() {
    let s1 = peer(SPINE_AS, 1);
    let mut rib = leaf(Multipath::SameAs);
    let c = rib.update(
        1,
        &s1,
        &announce(&["10.1.1.0/24"], attrs(&[SPINE_AS, LEAF_AS], s1.peer_addr)),
    );
    assert!(c.is_empty());
    assert_eq!(rib.loc_rib().count(), 0);
    assert_eq!(rib.adj_rib_in(1).count(), 0);

    // A looped route also replaces (implicitly withdraws) a good one, and
    // a loop inside an AS_SET counts too.
    rib.update(
        1,
        &s1,
        &announce(&["10.1.1.0/24"], attrs(&[SPINE_AS, 65000], s1.peer_addr)),
    );
    assert_eq!(rib.loc_rib().count(), 1);
    let mut looped = attrs(&[SPINE_AS], s1.peer_addr);
    looped.as_path.as_mut().unwrap().segments.push(AsSegment {
        kind: SegmentType::AsSet,
        asns: vec![65000, LEAF_AS],
    });
    let c = rib.update(1, &s1, &announce(&["10.1.1.0/24"], looped));
    assert_eq!(
        c,
        vec![Change::Removed {
            prefix: net("10.1.1.0/24")
        }]
    );
}

#[test]
fn withdrawals_and_peer_down_shrink_then_remove() {
    let s1 = peer(SPINE_AS, 1);
    let s2 = peer(SPINE_AS, 2);
    let mut rib = leaf(Multipath::SameAs);
    for (id, s) in [(1, &s1), (2, &s2)] {
        rib.update(
            id,
            s,
            &announce(
                &["10.1.2.0/24", "10.1.3.0/24"],
                attrs(&[SPINE_AS, OTHER_LEAF_AS], s.peer_addr),
            ),
        );
    }
    assert_eq!(nexthops(&rib, "10.1.2.0/24").len(), 2);

    let c = rib.update(1, &s1, &withdraw(&["10.1.2.0/24"]));
    assert_eq!(
        c,
        vec![Change::Installed {
            prefix: net("10.1.2.0/24"),
            best: Best {
                nexthops: vec![(2, s2.peer_addr)],
                as_path_len: 2,
                local: false
            }
        }]
    );
    // Withdrawing what is not there changes nothing.
    assert!(rib.update(1, &s1, &withdraw(&["10.1.2.0/24"])).is_empty());

    let c = rib.peer_down(2);
    assert_eq!(
        c,
        vec![
            Change::Removed {
                prefix: net("10.1.2.0/24")
            },
            Change::Installed {
                prefix: net("10.1.3.0/24"),
                best: Best {
                    nexthops: vec![(1, s1.peer_addr)],
                    as_path_len: 2,
                    local: false
                }
            },
        ]
    );
    let c = rib.peer_down(1);
    assert_eq!(
        c,
        vec![Change::Removed {
            prefix: net("10.1.3.0/24")
        }]
    );
    assert_eq!(rib.loc_rib().count(), 0);
    assert!(rib.peer_down(1).is_empty());
}

#[test]
fn shorter_path_wins_and_as_set_counts_one() {
    let s1 = peer(SPINE_AS, 1);
    let s2 = peer(SPINE_AS, 2);
    let mut rib = leaf(Multipath::Relax);
    rib.update(
        1,
        &s1,
        &announce(&["10.5.0.0/16"], attrs(&[SPINE_AS, 1, 2], s1.peer_addr)),
    );
    rib.update(
        2,
        &s2,
        &announce(&["10.5.0.0/16"], attrs(&[SPINE_AS, 1], s2.peer_addr)),
    );
    assert_eq!(nexthops(&rib, "10.5.0.0/16"), vec![(2, s2.peer_addr)]);
    assert_eq!(best_of(&rib, "10.5.0.0/16").unwrap().as_path_len, 2);

    // [SPINE_AS, {1, 2, 3}] has length 2: ties with spine 2's path.
    let mut with_set = attrs(&[SPINE_AS], s1.peer_addr);
    with_set.as_path.as_mut().unwrap().segments.push(AsSegment {
        kind: SegmentType::AsSet,
        asns: vec![1, 2, 3],
    });
    rib.update(1, &s1, &announce(&["10.5.0.0/16"], with_set));
    assert_eq!(nexthops(&rib, "10.5.0.0/16").len(), 2);

    // Lower ORIGIN wins next.
    let mut incomplete = attrs(&[SPINE_AS, 1], s2.peer_addr);
    incomplete.origin = Some(Origin::Incomplete);
    rib.update(2, &s2, &announce(&["10.5.0.0/16"], incomplete));
    assert_eq!(nexthops(&rib, "10.5.0.0/16"), vec![(1, s1.peer_addr)]);
}

#[test]
fn med_only_within_the_same_neighbour_as() {
    let s1 = peer(SPINE_AS, 1);
    let s2 = peer(SPINE_AS, 2);
    let other = peer(4_200_000_300, 3);
    let with_med = |path: &[u32], nh, med| PathAttributes {
        med: Some(med),
        ..attrs(path, nh)
    };
    let mut rib = leaf(Multipath::Relax);
    // Same neighbour AS: the lower MED wins.
    rib.update(
        1,
        &s1,
        &announce(&["10.7.0.0/16"], with_med(&[SPINE_AS, 9], s1.peer_addr, 50)),
    );
    rib.update(
        2,
        &s2,
        &announce(&["10.7.0.0/16"], with_med(&[SPINE_AS, 9], s2.peer_addr, 10)),
    );
    assert_eq!(nexthops(&rib, "10.7.0.0/16"), vec![(2, s2.peer_addr)]);
    // A route from another AS with a higher MED is not beaten by MED; with
    // relax it joins the ECMP set, and it is not the best (router id).
    rib.update(
        3,
        &other,
        &announce(
            &["10.7.0.0/16"],
            with_med(&[other.peer_as, 9], other.peer_addr, 99),
        ),
    );
    assert_eq!(
        nexthops(&rib, "10.7.0.0/16"),
        vec![(2, s2.peer_addr), (3, other.peer_addr)]
    );

    let mut rib = leaf(Multipath::Off);
    rib.update(
        3,
        &other,
        &announce(
            &["10.7.0.0/16"],
            with_med(&[other.peer_as, 9], ip(10, 0, 3, 0), 0),
        ),
    );
    rib.update(
        1,
        &s1,
        &announce(
            &["10.7.0.0/16"],
            with_med(&[SPINE_AS, 9], s1.peer_addr, 500),
        ),
    );
    // The MED of 0 from another AS does not beat spine 1; the lower router
    // id decides.
    assert_eq!(nexthops(&rib, "10.7.0.0/16"), vec![(1, s1.peer_addr)]);
}

#[test]
fn tie_breakers_router_id_then_address() {
    let a = PeerSummary {
        peer_as: SPINE_AS,
        peer_addr: ip(10, 0, 0, 9),
        peer_id: ip(192, 0, 2, 2),
    };
    let b = PeerSummary {
        peer_as: SPINE_AS,
        peer_addr: ip(10, 0, 0, 1),
        peer_id: ip(192, 0, 2, 3),
    };
    let mut rib = leaf(Multipath::Off);
    rib.update(
        2,
        &b,
        &announce(&["10.8.0.0/16"], attrs(&[SPINE_AS], b.peer_addr)),
    );
    rib.update(
        1,
        &a,
        &announce(&["10.8.0.0/16"], attrs(&[SPINE_AS], a.peer_addr)),
    );
    // Lower BGP Identifier first, though its address is higher.
    assert_eq!(nexthops(&rib, "10.8.0.0/16"), vec![(1, a.peer_addr)]);

    // Same BGP Identifier (e.g. two sessions to one router): lower address.
    let c = PeerSummary {
        peer_id: a.peer_id,
        peer_addr: ip(10, 0, 0, 5),
        ..a
    };
    rib.update(
        3,
        &c,
        &announce(&["10.8.0.0/16"], attrs(&[SPINE_AS], c.peer_addr)),
    );
    assert_eq!(nexthops(&rib, "10.8.0.0/16"), vec![(3, c.peer_addr)]);
}

#[test]
fn local_routes_are_preferred() {
    let s1 = peer(SPINE_AS, 1);
    let mut rib = leaf(Multipath::SameAs);
    rib.update(
        1,
        &s1,
        &announce(&["10.1.1.0/24"], attrs(&[SPINE_AS, 65000], s1.peer_addr)),
    );
    let local = Best {
        nexthops: Vec::new(),
        as_path_len: 0,
        local: true,
    };
    assert_eq!(
        rib.originate(net("10.1.1.0/24")),
        vec![Change::Installed {
            prefix: net("10.1.1.0/24"),
            best: local.clone()
        }]
    );
    assert!(rib.originate(net("10.1.1.0/24")).is_empty());
    // Still local when the learned route goes away.
    assert!(rib.peer_down(1).is_empty());
    assert_eq!(
        rib.withdraw_local(net("10.1.1.0/24")),
        vec![Change::Removed {
            prefix: net("10.1.1.0/24")
        }]
    );
}
