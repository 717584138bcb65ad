//! BGP RIB and route selection (RFC 4271 §9, RFC 7938 §6): leaf-spine and
//! fat-tree ECMP, loop prevention, the decision process tie-breakers,
//! export rules, and a seeded randomized run checked against a brute-force
//! recomputation from the Adj-RIBs-In.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use turbonet_routing::bgp::rib::{Best, Change, Multipath, PeerId, PeerSummary, Rib};
use turbonet_routing::bgp::{
    AsPath, AsSegment, Context, MAX_MESSAGE_LEN, Message, Origin, PathAttributes, RawAttribute,
    SegmentType, Update,
};

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
    best_of(rib, prefix)
        .map(|b| b.nexthops.to_vec())
        .unwrap_or_default()
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
                    nexthops: vec![(1, s1.peer_addr)].into(),
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
                nexthops: vec![(2, s2.peer_addr)].into(),
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
                    nexthops: vec![(1, s1.peer_addr)].into(),
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
        nexthops: Vec::new().into(),
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

fn encode_decode(u: &Update) -> Update {
    let bytes = Message::Update(u.clone()).encode(&Context::FOUR_OCTET_AS);
    assert!(bytes.len() <= MAX_MESSAGE_LEN, "{} octets", bytes.len());
    match Message::decode(&bytes, &Context::FOUR_OCTET_AS).unwrap() {
        Message::Update(d) => d,
        m => panic!("{m:?}"),
    }
}

#[test]
fn export_leaf_routes() {
    let s1 = peer(SPINE_AS, 1);
    let s2 = peer(SPINE_AS, 2);
    let mut rib = leaf(Multipath::SameAs);
    rib.originate(net("10.0.0.101/32"));
    rib.update(
        1,
        &s1,
        &announce(
            &["10.1.2.0/24"],
            attrs(&[SPINE_AS, OTHER_LEAF_AS], s1.peer_addr),
        ),
    );
    let me = ip(10, 0, 2, 1);
    let out = rib.export(
        2,
        &s2,
        me,
        &[
            net("10.0.0.101/32"),
            net("10.1.2.0/24"),
            net("10.99.0.0/16"),
        ],
    );
    // The spine route is not sent to spine 2 (same AS as spine 1) and the
    // unknown prefix is withdrawn: one withdrawal, then the loopback.
    assert_eq!(
        out,
        vec![
            withdraw(&["10.1.2.0/24", "10.99.0.0/16"]),
            announce(&["10.0.0.101/32"], attrs(&[LEAF_AS], me)),
        ]
    );
    for u in &out {
        assert_eq!(&encode_decode(u), u);
    }
    // Nor back to spine 1 itself.
    let out = rib.export(1, &s1, ip(10, 0, 1, 1), &[net("10.1.2.0/24")]);
    assert_eq!(out, vec![withdraw(&["10.1.2.0/24"])]);
}

#[test]
fn export_from_a_spine_rewrites_attributes() {
    let mut spine = Rib::new(SPINE_AS, ip(192, 0, 2, 1), Multipath::SameAs);
    let l1 = peer(LEAF_AS, 11);
    let l2 = peer(OTHER_LEAF_AS, 12);
    let unknown_transitive = RawAttribute {
        flags: 0xc0,
        type_code: 99,
        value: vec![1, 2, 3],
    };
    let unknown_local = RawAttribute {
        flags: 0x80,
        type_code: 98,
        value: vec![4],
    };
    let received = PathAttributes {
        origin: Some(Origin::Egp),
        med: Some(7),
        local_pref: Some(300),
        unknown: vec![unknown_transitive.clone(), unknown_local],
        ..attrs(&[LEAF_AS, 65010], l1.peer_addr)
    };
    spine.update(11, &l1, &announce(&["10.1.1.0/24"], received));
    let me = ip(10, 0, 12, 1);
    let out = spine.export(12, &l2, me, &[net("10.1.1.0/24")]);
    let want = PathAttributes {
        origin: Some(Origin::Egp),
        unknown: vec![RawAttribute {
            flags: 0xe0,
            ..unknown_transitive
        }],
        ..attrs(&[SPINE_AS, LEAF_AS, 65010], me)
    };
    assert_eq!(out, vec![announce(&["10.1.1.0/24"], want)]);
    assert_eq!(encode_decode(&out[0]), out[0]);

    // A leading AS_SET gets a new AS_SEQUENCE in front.
    let mut set_first = attrs(&[], l1.peer_addr);
    set_first.as_path = Some(AsPath {
        segments: vec![AsSegment {
            kind: SegmentType::AsSet,
            asns: vec![LEAF_AS, 65011],
        }],
    });
    spine.update(11, &l1, &announce(&["10.1.1.0/24"], set_first));
    let out = spine.export(12, &l2, me, &[net("10.1.1.0/24")]);
    let segs = &out[0].attributes.as_path.as_ref().unwrap().segments;
    assert_eq!(segs.len(), 2);
    assert_eq!(segs[0].asns, vec![SPINE_AS]);
    assert_eq!(segs[0].kind, SegmentType::AsSequence);
}

#[test]
fn export_batches_within_message_size() {
    let mut rib = leaf(Multipath::Off);
    let s1 = peer(SPINE_AS, 1);
    let mut all = Vec::new();
    for i in 0..3000u32 {
        let p = Ipv4Net::new(Ipv4Addr::from(0x0a80_0000 + i), 32).unwrap();
        rib.originate(p);
        all.push(p);
    }
    // A second attribute set: routes learned from another AS.
    let other = peer(4_200_000_500, 5);
    let learned: Vec<String> = (0..250).map(|i| format!("10.200.{i}.0/24")).collect();
    let learned_refs: Vec<&str> = learned.iter().map(String::as_str).collect();
    rib.update(
        5,
        &other,
        &announce(&learned_refs, attrs(&[other.peer_as], other.peer_addr)),
    );
    let learned_nets: BTreeSet<Ipv4Net> = learned_refs.iter().map(|p| net(p)).collect();
    all.extend(learned_nets.iter().copied());
    let out = rib.export(1, &s1, ip(10, 0, 1, 1), &all);
    assert!(out.len() > 2);
    let mut announced = BTreeSet::new();
    let mut attr_sets = BTreeSet::new();
    for u in &out {
        assert_eq!(&encode_decode(u), u);
        assert!(u.withdrawn.is_empty());
        attr_sets.insert(
            u.attributes.as_path.clone().unwrap().segments[0]
                .asns
                .clone(),
        );
        for p in &u.nlri {
            assert!(announced.insert(*p), "{p} twice");
        }
    }
    assert_eq!(attr_sets.len(), 2);
    assert_eq!(announced, all.iter().copied().collect());
}

/// xorshift64*: a fixed-seed PRNG so the run is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The Adj-RIBs-In as the test tracks them.
#[derive(Default)]
struct Model {
    peers: BTreeMap<PeerId, (PeerSummary, BTreeMap<Ipv4Net, PathAttributes>)>,
    local: BTreeSet<Ipv4Net>,
}

/// Route selection written out independently of the library: the
/// RFC 4271 §9.1.2.2 steps as filters, then multipath.
fn brute_force(model: &Model, local_as: u32, mp: Multipath) -> BTreeMap<Ipv4Net, Best> {
    let mut prefixes: BTreeSet<Ipv4Net> = model.local.clone();
    for (_, routes) in model.peers.values() {
        prefixes.extend(routes.keys().copied());
    }
    let mut out = BTreeMap::new();
    for p in prefixes {
        if model.local.contains(&p) {
            let best = Best {
                nexthops: vec![].into(),
                as_path_len: 0,
                local: true,
            };
            out.insert(p, best);
            continue;
        }
        struct R<'a> {
            id: PeerId,
            info: PeerSummary,
            a: &'a PathAttributes,
        }
        let ebgp = |r: &R<'_>| r.info.peer_as != local_as;
        let lp = |r: &R<'_>| {
            if ebgp(r) {
                100
            } else {
                r.a.local_pref.unwrap_or(100)
            }
        };
        let len = |r: &R<'_>| r.a.as_path.as_ref().unwrap().path_len();
        let nas = |r: &R<'_>| {
            r.a.as_path
                .as_ref()
                .unwrap()
                .first_as()
                .unwrap_or(if ebgp(r) { r.info.peer_as } else { local_as })
        };
        let med = |r: &R<'_>| r.a.med.unwrap_or(0);
        let all: Vec<R<'_>> = model
            .peers
            .iter()
            .filter_map(|(&id, (info, routes))| routes.get(&p).map(|a| R { id, info: *info, a }))
            .collect();
        let top_lp = all.iter().map(lp).max().unwrap();
        let c: Vec<&R<'_>> = all.iter().filter(|r| lp(r) == top_lp).collect();
        let min_len = c.iter().map(|r| len(r)).min().unwrap();
        let c: Vec<&R<'_>> = c.into_iter().filter(|r| len(r) == min_len).collect();
        let min_origin = c.iter().map(|r| r.a.origin.unwrap()).min().unwrap();
        let c: Vec<&R<'_>> = c
            .into_iter()
            .filter(|r| r.a.origin.unwrap() == min_origin)
            .collect();
        let c: Vec<&R<'_>> = c
            .iter()
            .filter(|r| {
                c.iter()
                    .filter(|o| nas(o) == nas(r))
                    .all(|o| med(o) >= med(r))
            })
            .copied()
            .collect();
        let any_ebgp = c.iter().any(|r| ebgp(r));
        let pool: Vec<&R<'_>> = c.into_iter().filter(|r| ebgp(r) == any_ebgp).collect();
        let best = pool
            .iter()
            .min_by_key(|r| (r.info.peer_id, r.info.peer_addr, r.id))
            .unwrap();
        let mut nexthops: Vec<(PeerId, Ipv4Addr)> = pool
            .iter()
            .filter(|r| match mp {
                Multipath::Off => r.id == best.id,
                Multipath::SameAs => nas(r) == nas(best),
                Multipath::Relax => true,
            })
            .map(|r| (r.id, r.a.next_hop.unwrap()))
            .collect();
        nexthops.sort();
        out.insert(
            p,
            Best {
                nexthops: nexthops.into(),
                as_path_len: len(best),
                local: false,
            },
        );
    }
    out
}

#[test]
fn randomized_matches_brute_force() {
    const LOCAL_AS: u32 = 65100;
    // Two peers per AS for ECMP, one iBGP peer, shared router ids to reach
    // the address tie-breaker.
    let infos: Vec<PeerSummary> = [
        (65001, 1, 1),
        (65001, 2, 2),
        (65002, 3, 3),
        (65002, 4, 3),
        (65003, 5, 1),
        (LOCAL_AS, 6, 6),
    ]
    .iter()
    .map(|&(peer_as, a, id)| PeerSummary {
        peer_as,
        peer_addr: ip(10, 0, a, 0),
        peer_id: ip(192, 0, 2, id),
    })
    .collect();
    let prefixes: Vec<Ipv4Net> = (0..10)
        .map(|i| Ipv4Net::new(ip(10, 50, i, 0), 24).unwrap())
        .collect();

    for (seed, mp) in [
        (1u64, Multipath::Off),
        (2, Multipath::SameAs),
        (3, Multipath::Relax),
        (4, Multipath::Relax),
    ] {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let mut rib = Rib::new(LOCAL_AS, ip(192, 0, 2, 100), mp);
        let mut model = Model::default();
        let mut mirror: BTreeMap<Ipv4Net, Best> = BTreeMap::new();
        let mut widest = 0;
        for step in 0..3000 {
            let pick = |rng: &mut Rng| -> Vec<Ipv4Net> {
                let n = 1 + rng.below(4) as usize;
                (0..n)
                    .map(|_| prefixes[rng.below(prefixes.len() as u64) as usize])
                    .collect()
            };
            let changes = match rng.below(100) {
                0..=69 => {
                    let id = rng.below(infos.len() as u64) as usize;
                    let info = infos[id];
                    let id = id as PeerId;
                    let withdrawn = if rng.chance(30) {
                        pick(&mut rng)
                    } else {
                        vec![]
                    };
                    let nlri = if rng.chance(80) {
                        pick(&mut rng)
                    } else {
                        vec![]
                    };
                    let mut path = Vec::new();
                    if info.peer_as != LOCAL_AS {
                        path.push(info.peer_as);
                    }
                    for _ in 0..rng.below(3) {
                        path.push(if rng.chance(10) {
                            LOCAL_AS
                        } else {
                            65001 + rng.below(5) as u32
                        });
                    }
                    let a = PathAttributes {
                        origin: Some(match rng.below(5) {
                            0 => Origin::Incomplete,
                            1 => Origin::Egp,
                            _ => Origin::Igp,
                        }),
                        med: rng.chance(40).then(|| rng.below(3) as u32),
                        local_pref: rng.chance(30).then(|| 90 + rng.below(3) as u32 * 10),
                        ..attrs(&path, ip(10, 0, id as u8 + 1, 1 + rng.below(2) as u8))
                    };
                    let update = Update {
                        withdrawn: withdrawn.clone(),
                        attributes: if nlri.is_empty() {
                            PathAttributes::default()
                        } else {
                            a.clone()
                        },
                        nlri: nlri.clone(),
                    };
                    let routes = &mut model.peers.entry(id).or_insert((info, BTreeMap::new())).1;
                    for p in &withdrawn {
                        routes.remove(p);
                    }
                    for p in &nlri {
                        if path.contains(&LOCAL_AS) {
                            routes.remove(p);
                        } else {
                            routes.insert(*p, a.clone());
                        }
                    }
                    rib.update(id, &info, &update)
                }
                70..=79 => {
                    let id = rng.below(infos.len() as u64) as PeerId;
                    model.peers.remove(&id);
                    rib.peer_down(id)
                }
                80..=89 => {
                    let p = pick(&mut rng)[0];
                    model.local.insert(p);
                    rib.originate(p)
                }
                _ => {
                    let p = pick(&mut rng)[0];
                    model.local.remove(&p);
                    rib.withdraw_local(p)
                }
            };
            let mut seen = BTreeSet::new();
            for c in changes {
                assert!(seen.insert(c.prefix()), "step {step}: {c:?} twice");
                match c {
                    Change::Installed { prefix, best } => {
                        mirror.insert(prefix, best);
                    }
                    Change::Removed { prefix } => {
                        assert!(mirror.remove(&prefix).is_some(), "step {step}");
                    }
                }
            }
            let loc: BTreeMap<Ipv4Net, Best> =
                rib.loc_rib().map(|(p, b)| (*p, b.clone())).collect();
            assert_eq!(loc, mirror, "seed {seed} step {step}: changes vs Loc-RIB");
            widest = loc
                .values()
                .map(|b| b.nexthops.len())
                .max()
                .unwrap_or(0)
                .max(widest);
            assert_eq!(
                loc,
                brute_force(&model, LOCAL_AS, mp),
                "seed {seed} step {step}: Loc-RIB vs brute force"
            );
            for (id, (_, routes)) in &model.peers {
                let adj: BTreeMap<Ipv4Net, PathAttributes> =
                    rib.adj_rib_in(*id).map(|(p, a)| (*p, a.clone())).collect();
                assert_eq!(&adj, routes, "seed {seed} step {step}: Adj-RIB-In {id}");
            }
            // Export never panics and always fits.
            if step % 100 == 0 {
                for (id, info) in infos.iter().enumerate() {
                    for u in rib.export(id as PeerId, info, ip(10, 0, 0, 1), &prefixes) {
                        encode_decode(&u);
                    }
                }
            }
        }
        assert!(
            loc_nonempty(&rib),
            "seed {seed}: the run should end with routes"
        );
    }
}

fn loc_nonempty(rib: &Rib) -> bool {
    rib.loc_rib().next().is_some()
}
