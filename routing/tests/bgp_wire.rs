//! BGP-4 wire format: hand-written fixtures both directions (bytes ->
//! Message -> the same bytes), every RFC 4271 §6 error with its
//! NOTIFICATION, and a deterministic no-panic mutation run.
//!
//! The fixtures were cross-checked by wrapping them in TCP/179 frames in a
//! pcap file and reading it with `tcpdump -nn -vvv` (4.99): every field
//! decodes as annotated here.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use turbonet_routing::bgp::{
    AfiSafi, AsPath, AsSegment, Capability, Context, DecodeError, Message, MpReach, Notification,
    Open, Origin, PathAttributes, RawAttribute, RouteRefresh, SegmentType, Update, frame,
};

const M: [u8; 16] = [0xff; 16];

/// Marker followed by `rest`.
fn msg(rest: &[u8]) -> Vec<u8> {
    let mut v = M.to_vec();
    v.extend_from_slice(rest);
    v
}

fn net(s: &str) -> Ipv4Net {
    s.parse().unwrap()
}

/// Decodes `bytes`, compares with `expected`, and encodes it back to the
/// very same bytes.
fn both_ways(bytes: &[u8], ctx: &Context, expected: &Message) {
    assert_eq!(frame(bytes), Ok(Some(bytes.len())));
    let decoded = Message::decode(bytes, ctx).expect("fixture decodes");
    assert_eq!(&decoded, expected);
    assert_eq!(expected.encode(ctx), bytes, "encoding differs from fixture");
}

fn open_fixture() -> Vec<u8> {
    msg(&[
        0x00, 0x2d, // length 45
        0x01, // type OPEN
        0x04, // version 4
        0x5b, 0xa0, // My AS: AS_TRANS (23456)
        0x00, 0x5a, // hold time 90 s
        10, 0, 0, 1,  // BGP identifier 10.0.0.1
        16, // optional parameters length
        2, 14, // parameter: capabilities, 14 octets
        1, 4, 0x00, 0x01, 0x00, 0x01, // multiprotocol: AFI 1, reserved, SAFI 1
        2, 0, // route refresh
        65, 4, 0xfa, 0x56, 0xed, 0xe8, // 4-octet AS 4200001000
    ])
}

fn open_message() -> Message {
    Message::Open(Open {
        version: 4,
        my_as: 4_200_001_000,
        hold_time: 90,
        bgp_id: Ipv4Addr::new(10, 0, 0, 1),
        capabilities: vec![
            Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
            Capability::RouteRefresh,
            Capability::FourOctetAs(4_200_001_000),
        ],
    })
}

fn announce_fixture() -> Vec<u8> {
    msg(&[
        0x00, 0x42, // length 66
        0x02, // type UPDATE
        0x00, 0x00, // withdrawn routes length 0
        0x00, 0x23, // total path attribute length 35
        0x40, 0x01, 0x01, 0x00, // ORIGIN (well-known transitive), IGP
        0x40, 0x02, 0x0e, // AS_PATH, 14 octets
        0x02, 0x03, // AS_SEQUENCE of 3
        0xfa, 0x56, 0xed, 0xe8, // 4200001000
        0x00, 0x00, 0xfd, 0xea, // 65002
        0x00, 0x00, 0xfd, 0xeb, // 65003
        0x40, 0x03, 0x04, 192, 0, 2, 1, // NEXT_HOP 192.0.2.1
        0x80, 0x04, 0x04, 0x00, 0x00, 0x00, 0x64, // MULTI_EXIT_DISC (optional) 100
        24, 10, 1, 1, // NLRI 10.1.1.0/24
        24, 10, 1, 2, // NLRI 10.1.2.0/24
    ])
}

fn announce_message() -> Message {
    Message::Update(Update {
        withdrawn: vec![],
        attributes: PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence([4_200_001_000, 65002, 65003])),
            next_hop: Some(Ipv4Addr::new(192, 0, 2, 1)),
            med: Some(100),
            ..Default::default()
        },
        nlri: vec![net("10.1.1.0/24"), net("10.1.2.0/24")],
    })
}

fn withdraw_fixture() -> Vec<u8> {
    msg(&[
        0x00, 0x1b, // length 27
        0x02, // type UPDATE
        0x00, 0x04, // withdrawn routes length 4
        24, 10, 1, 2, // 10.1.2.0/24
        0x00, 0x00, // total path attribute length 0
    ])
}

fn keepalive_fixture() -> Vec<u8> {
    msg(&[0x00, 0x13, 0x04]) // length 19, type KEEPALIVE
}

fn hold_timer_fixture() -> Vec<u8> {
    msg(&[
        0x00, 0x15, // length 21
        0x03, // type NOTIFICATION
        0x04, 0x00, // Hold Timer Expired / 0
    ])
}

fn cease_fixture() -> Vec<u8> {
    msg(&[
        0x00, 0x16, // length 22
        0x03, // type NOTIFICATION
        0x06, 0x02, // Cease / Administrative Shutdown (RFC 4486 §4)
        0x00, // data: empty shutdown communication (RFC 9003 §2)
    ])
}

fn route_refresh_fixture() -> Vec<u8> {
    msg(&[
        0x00, 0x17, // length 23
        0x05, // type ROUTE-REFRESH
        0x00, 0x01, 0x00, 0x01, // AFI 1, reserved, SAFI 1
    ])
}

#[test]
fn open_with_four_octet_as_mp_and_route_refresh() {
    both_ways(&open_fixture(), &Context::TWO_OCTET_AS, &open_message());
    let Message::Open(open) = open_message() else {
        unreachable!()
    };
    assert_eq!(open.four_octet_as(), Some(4_200_001_000));
    assert!(open.route_refresh());
    assert_eq!(
        open.multiprotocol().collect::<Vec<_>>(),
        [AfiSafi::IPV4_UNICAST]
    );
}

#[test]
fn open_from_a_two_octet_speaker_keeps_unknown_capabilities() {
    let bytes = msg(&[
        0x00, 0x24, // length 36
        0x01, // OPEN
        0x04, 0xfd, 0xe9, // version 4, AS 65001
        0x00, 0x03, // hold time 3 s
        192, 0, 2, 9, // BGP identifier
        7, // optional parameters length
        2, 5, // capabilities, 5 octets
        70, 3, 0xaa, 0xbb, 0xcc, // unknown capability 70, 3 octets
    ]);
    let expected = Message::Open(Open {
        version: 4,
        my_as: 65001,
        hold_time: 3,
        bgp_id: Ipv4Addr::new(192, 0, 2, 9),
        capabilities: vec![Capability::Unknown {
            code: 70,
            value: vec![0xaa, 0xbb, 0xcc],
        }],
    });
    both_ways(&bytes, &Context::TWO_OCTET_AS, &expected);
}

#[test]
fn keepalive() {
    both_ways(
        &keepalive_fixture(),
        &Context::FOUR_OCTET_AS,
        &Message::Keepalive,
    );
}

#[test]
fn update_announcing_two_prefixes() {
    both_ways(
        &announce_fixture(),
        &Context::FOUR_OCTET_AS,
        &announce_message(),
    );
}

#[test]
fn update_with_two_octet_as_path() {
    let bytes = msg(&[
        0x00, 0x2d, // length 45
        0x02, // UPDATE
        0x00, 0x00, // no withdrawn routes
        0x00, 0x14, // attributes: 20 octets
        0x40, 0x01, 0x01, 0x02, // ORIGIN INCOMPLETE
        0x40, 0x02, 0x06, 0x01, 0x02, 0xfd, 0xe9, 0xfd, 0xea, // AS_SET {65001, 65002}
        0x40, 0x03, 0x04, 10, 0, 0, 2, // NEXT_HOP 10.0.0.2
        8, 10, // NLRI 10.0.0.0/8
    ]);
    let expected = Message::Update(Update {
        withdrawn: vec![],
        attributes: PathAttributes {
            origin: Some(Origin::Incomplete),
            as_path: Some(AsPath {
                segments: vec![AsSegment {
                    kind: SegmentType::AsSet,
                    asns: vec![65001, 65002],
                }],
            }),
            next_hop: Some(Ipv4Addr::new(10, 0, 0, 2)),
            ..Default::default()
        },
        nlri: vec![net("10.0.0.0/8")],
    });
    both_ways(&bytes, &Context::TWO_OCTET_AS, &expected);
}

#[test]
fn update_with_all_rfc4271_attributes_and_an_unknown_one() {
    let bytes = msg(&[
        0x00, 0x4c, // length 76
        0x02, // UPDATE
        0x00, 0x00, // no withdrawn routes
        0x00, 0x30, // attributes: 48 octets
        0x40, 0x01, 0x01, 0x01, // ORIGIN EGP
        0x40, 0x02, 0x00, // AS_PATH, empty (iBGP-originated)
        0x40, 0x03, 0x04, 10, 0, 0, 3, // NEXT_HOP 10.0.0.3
        0x80, 0x04, 0x04, 0, 0, 0, 0, // MED 0
        0x40, 0x05, 0x04, 0, 0, 0, 200, // LOCAL_PREF 200
        0x40, 0x06, 0x00, // ATOMIC_AGGREGATE
        0xc0, 0x07, 0x08, 0xfa, 0x56, 0xed, 0xe8, 10, 9, 9, 9, // AGGREGATOR
        0xe0, 0x20, 0x03, 1, 2, 3, // unknown optional transitive partial (type 32)
        32, 10, 0, 0, 4, // NLRI 10.0.0.4/32
    ]);
    let expected = Message::Update(Update {
        withdrawn: vec![],
        attributes: PathAttributes {
            origin: Some(Origin::Egp),
            as_path: Some(AsPath::default()),
            next_hop: Some(Ipv4Addr::new(10, 0, 0, 3)),
            med: Some(0),
            local_pref: Some(200),
            atomic_aggregate: true,
            aggregator: Some(turbonet_routing::bgp::Aggregator {
                asn: 4_200_001_000,
                address: Ipv4Addr::new(10, 9, 9, 9),
            }),
            unknown: vec![RawAttribute {
                flags: 0xe0,
                type_code: 32,
                value: vec![1, 2, 3],
            }],
            ..Default::default()
        },
        nlri: vec![net("10.0.0.4/32")],
    });
    both_ways(&bytes, &Context::FOUR_OCTET_AS, &expected);
}

#[test]
fn update_with_mp_reach_ipv6_needs_no_next_hop() {
    let bytes = msg(&[
        0x00, 0x41, // length 65
        0x02, // UPDATE
        0x00, 0x00, // no withdrawn routes
        0x00, 0x2a, // attributes: 42 octets
        0x40, 0x01, 0x01, 0x00, // ORIGIN IGP
        0x40, 0x02, 0x06, 0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE 65001
        0x80, 0x0e, 0x1a, // MP_REACH_NLRI, 26 octets
        0x00, 0x02, 0x01, // AFI 2, SAFI 1
        16,   // next hop length
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // 2001:db8::1
        0, // reserved
        32, 0x20, 0x01, 0x0d, 0xb8, // 2001:db8::/32
    ]);
    let expected = Message::Update(Update {
        withdrawn: vec![],
        attributes: PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence([65001])),
            mp_reach: Some(MpReach {
                family: AfiSafi::IPV6_UNICAST,
                next_hops: vec!["2001:db8::1".parse().unwrap()],
                nlri: vec!["2001:db8::/32".parse().unwrap()],
            }),
            ..Default::default()
        },
        nlri: vec![],
    });
    both_ways(&bytes, &Context::FOUR_OCTET_AS, &expected);
}

#[test]
fn update_withdrawing_one_prefix() {
    both_ways(
        &withdraw_fixture(),
        &Context::FOUR_OCTET_AS,
        &Message::Update(Update {
            withdrawn: vec![net("10.1.2.0/24")],
            ..Default::default()
        }),
    );
}

#[test]
fn end_of_rib() {
    let bytes = msg(&[0x00, 0x17, 0x02, 0, 0, 0, 0]);
    let m = Message::decode(&bytes, &Context::default()).unwrap();
    let Message::Update(u) = &m else { panic!() };
    assert!(u.is_end_of_rib());
    assert_eq!(m.encode(&Context::default()), bytes);
}

#[test]
fn notifications() {
    both_ways(
        &hold_timer_fixture(),
        &Context::default(),
        &Message::Notification(Notification::new(Notification::HOLD_TIMER_EXPIRED, 0)),
    );
    both_ways(
        &cease_fixture(),
        &Context::default(),
        &Message::Notification(Notification {
            code: Notification::CEASE,
            subcode: Notification::CEASE_ADMINISTRATIVE_SHUTDOWN,
            data: vec![0],
        }),
    );
    assert_eq!(
        Notification::new(6, 2).to_string(),
        "cease (6/2)".to_owned()
    );
}

#[test]
fn route_refresh() {
    both_ways(
        &route_refresh_fixture(),
        &Context::default(),
        &Message::RouteRefresh(RouteRefresh {
            family: AfiSafi::IPV4_UNICAST,
        }),
    );
}

#[test]
fn a_stream_is_framed_message_by_message() {
    let mut stream = open_fixture();
    stream.extend(keepalive_fixture());
    stream.extend(announce_fixture());
    let mut at = 0;
    let mut types = Vec::new();
    while let Some(n) = frame(&stream[at..]).unwrap() {
        types.push(
            Message::decode(&stream[at..at + n], &Context::FOUR_OCTET_AS)
                .unwrap()
                .msg_type(),
        );
        at += n;
    }
    assert_eq!(types, [1, 4, 2]);
    assert_eq!(at, stream.len());
    // A partial message waits for more bytes.
    assert_eq!(frame(&announce_fixture()[..40]), Ok(None));
}

// ---- errors (RFC 4271 §6) ---------------------------------------------

/// Decodes and returns the NOTIFICATION triple of the error.
fn notify(bytes: &[u8], ctx: &Context) -> (u8, u8, Vec<u8>) {
    let err = Message::decode(bytes, ctx).expect_err("must be rejected");
    let n = err.to_notification();
    assert_eq!((n.code, n.subcode), (err.code(), err.subcode()));
    (n.code, n.subcode, n.data)
}

/// An UPDATE around the given attribute and NLRI fields (lengths computed).
fn update(attrs: &[u8], nlri: &[u8]) -> Vec<u8> {
    let len = 23 + attrs.len() + nlri.len();
    let mut v = msg(&(len as u16).to_be_bytes());
    v.push(2);
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    v.extend_from_slice(attrs);
    v.extend_from_slice(nlri);
    v
}

/// An OPEN from AS 65001 with the given hold time, identifier and
/// optional parameters (lengths computed).
fn open(version: u8, my_as: u16, hold: u16, id: [u8; 4], params: &[u8]) -> Vec<u8> {
    let len = 29 + params.len();
    let mut v = msg(&(len as u16).to_be_bytes());
    v.push(1);
    v.push(version);
    v.extend_from_slice(&my_as.to_be_bytes());
    v.extend_from_slice(&hold.to_be_bytes());
    v.extend_from_slice(&id);
    v.push(params.len() as u8);
    v.extend_from_slice(params);
    v
}

const ORIGIN_IGP: [u8; 4] = [0x40, 1, 1, 0];
const AS_PATH_65001: [u8; 7] = [0x40, 2, 4, 2, 1, 0xfd, 0xe9];
const NEXT_HOP: [u8; 7] = [0x40, 3, 4, 10, 0, 0, 1];
const NLRI: [u8; 4] = [24, 10, 1, 1];
const C2: Context = Context::TWO_OCTET_AS;

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn message_header_errors() {
    let mut bad_marker = keepalive_fixture();
    bad_marker[3] = 0xfe;
    assert_eq!(notify(&bad_marker, &C2), (1, 1, vec![]));
    assert_eq!(
        frame(&bad_marker),
        Err(DecodeError::ConnectionNotSynchronized)
    );

    // Length below 19 and above 4096: frame and decode both refuse.
    let short = msg(&[0x00, 0x12, 0x04]);
    assert_eq!(notify(&short, &C2), (1, 2, vec![0x00, 0x12]));
    assert_eq!(
        frame(&short),
        Err(DecodeError::BadMessageLength { length: 18 })
    );
    let mut long = msg(&[0x10, 0x01, 0x02]);
    long.resize(4097, 0);
    assert_eq!(notify(&long, &C2), (1, 2, vec![0x10, 0x01]));
    // KEEPALIVE must be exactly 19; OPEN at least 29; NOTIFICATION 21.
    assert_eq!(
        notify(&msg(&[0x00, 0x14, 0x04, 0]), &C2),
        (1, 2, vec![0x00, 0x14])
    );
    let mut short_open = open_fixture();
    short_open.truncate(28);
    short_open[17] = 28;
    assert_eq!(notify(&short_open, &C2), (1, 2, vec![0x00, 28]));
    assert_eq!(
        notify(&msg(&[0x00, 0x14, 0x03, 6]), &C2),
        (1, 2, vec![0x00, 0x14])
    );
    // UPDATE at least 23.
    assert_eq!(
        notify(&msg(&[0x00, 0x16, 0x02, 0, 0, 0]), &C2),
        (1, 2, vec![0x00, 0x16])
    );
    // The buffer is not the length the header says.
    let mut trailing = keepalive_fixture();
    trailing.push(0);
    assert_eq!(notify(&trailing, &C2), (1, 2, vec![0x00, 0x13]));

    assert_eq!(notify(&msg(&[0x00, 0x13, 0x09]), &C2), (1, 3, vec![9]));
}

#[test]
fn open_message_errors() {
    let id = [10, 0, 0, 1];
    assert_eq!(
        notify(&open(3, 65001, 90, id, &[]), &C2),
        (2, 1, vec![0, 4])
    );
    // AS 0 (RFC 7607), and a 4-octet AS capability that disagrees with My AS.
    assert_eq!(notify(&open(4, 0, 90, id, &[]), &C2), (2, 2, vec![]));
    let as4 = [2, 6, 65, 4, 0xfa, 0x56, 0xed, 0xe8];
    assert_eq!(notify(&open(4, 65001, 90, id, &as4), &C2), (2, 2, vec![]));
    let as4_small = [2, 6, 65, 4, 0, 0, 0xfd, 0xe9];
    assert_eq!(
        notify(&open(4, 23456, 90, id, &as4_small), &C2),
        (2, 2, vec![])
    );
    // The session's configured peer AS.
    let Ok(Message::Open(o)) = Message::decode(&open(4, 65001, 90, id, &[]), &C2) else {
        panic!()
    };
    assert_eq!(o.check_peer_as(65001), Ok(()));
    assert_eq!(
        o.check_peer_as(65002).unwrap_err().to_notification(),
        Notification::new(2, 2)
    );

    assert_eq!(
        notify(&open(4, 65001, 90, [0; 4], &[]), &C2),
        (2, 3, vec![])
    );
    // Optional parameter type 1 (authentication) is not supported.
    assert_eq!(
        notify(&open(4, 65001, 90, id, &[1, 1, 0]), &C2),
        (2, 4, vec![])
    );
    // A recognized capability that is malformed, a parameter that
    // overruns: "Unspecific" (RFC 4271 §6.2).
    assert_eq!(
        notify(&open(4, 65001, 90, id, &[2, 4, 65, 2, 0, 1]), &C2),
        (2, 0, vec![])
    );
    assert_eq!(
        notify(&open(4, 65001, 90, id, &[2, 9, 2, 0]), &C2),
        (2, 0, vec![])
    );
    // Hold time 1 and 2 are unacceptable; 0 only by local policy.
    assert_eq!(notify(&open(4, 65001, 1, id, &[]), &C2), (2, 6, vec![]));
    assert_eq!(notify(&open(4, 65001, 2, id, &[]), &C2), (2, 6, vec![]));
    assert!(Message::decode(&open(4, 65001, 0, id, &[]), &C2).is_ok());
    let strict = Context {
        allow_zero_hold_time: false,
        ..C2
    };
    assert_eq!(notify(&open(4, 65001, 0, id, &[]), &strict), (2, 6, vec![]));
    // Unsupported capability: raised by the session, data = capabilities.
    let e = DecodeError::UnsupportedCapability {
        capabilities: vec![70, 0],
    };
    assert_eq!(
        e.to_notification(),
        Notification {
            code: 2,
            subcode: 7,
            data: vec![70, 0]
        }
    );
}

#[test]
fn update_malformed_attribute_list() {
    // Withdrawn routes length runs past the message.
    let mut v = withdraw_fixture();
    v[20] = 0x20;
    assert_eq!(notify(&v, &C2), (3, 1, vec![]));
    // Total attribute length runs past the message.
    let mut v = announce_fixture();
    v[22] = 0x40;
    assert_eq!(notify(&v, &C2), (3, 1, vec![]));
    // ORIGIN twice.
    let v = update(
        &cat(&[&ORIGIN_IGP, &ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP]),
        &NLRI,
    );
    assert_eq!(notify(&v, &C2), (3, 1, vec![]));
    // A lone flags octet.
    assert_eq!(notify(&update(&[0x40], &[]), &C2), (3, 1, vec![]));
}

#[test]
fn update_attribute_errors_carry_the_attribute() {
    let body = |attr: &[u8]| update(&cat(&[attr, &AS_PATH_65001, &NEXT_HOP]), &NLRI);
    // Unrecognized well-known (type 99 without the Optional bit).
    let unknown = [0x40, 99, 1, 7];
    assert_eq!(notify(&body(&unknown), &C2), (3, 2, unknown.to_vec()));
    // ORIGIN marked optional, or partial.
    let flagged = [0xc0, 1, 1, 0];
    assert_eq!(notify(&body(&flagged), &C2), (3, 4, flagged.to_vec()));
    let partial = [0x60, 1, 1, 0];
    assert_eq!(notify(&body(&partial), &C2), (3, 4, partial.to_vec()));
    // MED marked transitive.
    let med = [0xc0, 4, 4, 0, 0, 0, 1];
    let v = update(&cat(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &med]), &NLRI);
    assert_eq!(notify(&v, &C2), (3, 4, med.to_vec()));
    // ORIGIN with two octets; NEXT_HOP with three; AGGREGATOR 4-octet
    // sized on a 2-octet session.
    let long_origin = [0x40, 1, 2, 0, 0];
    assert_eq!(
        notify(&body(&long_origin), &C2),
        (3, 5, long_origin.to_vec())
    );
    let short_nh = [0x40, 3, 3, 10, 0, 0];
    let v = update(&cat(&[&ORIGIN_IGP, &AS_PATH_65001, &short_nh]), &NLRI);
    assert_eq!(notify(&v, &C2), (3, 5, short_nh.to_vec()));
    let aggr = [0xc0, 7, 8, 0, 0, 0xfd, 0xe9, 10, 0, 0, 1];
    let v = update(
        &cat(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &aggr]),
        &NLRI,
    );
    assert_eq!(notify(&v, &C2), (3, 5, aggr.to_vec()));
    // An attribute whose length runs past the attribute list.
    let overrun = [0x40, 1, 9, 0];
    assert_eq!(
        notify(&update(&overrun, &[]), &C2),
        (3, 5, overrun.to_vec())
    );
    // ORIGIN value 3.
    let bad_origin = [0x40, 1, 1, 3];
    assert_eq!(notify(&body(&bad_origin), &C2), (3, 6, bad_origin.to_vec()));
    // NEXT_HOP 0.0.0.0 and a multicast address.
    for nh in [[0x40, 3, 4, 0, 0, 0, 0], [0x40, 3, 4, 224, 0, 0, 5]] {
        let v = update(&cat(&[&ORIGIN_IGP, &AS_PATH_65001, &nh]), &NLRI);
        assert_eq!(notify(&v, &C2), (3, 8, nh.to_vec()));
    }
    // MP_REACH_NLRI with a 5-octet next hop.
    let mp = [0x80, 14, 10, 0, 1, 1, 5, 1, 2, 3, 4, 5, 0];
    let v = update(&cat(&[&ORIGIN_IGP, &AS_PATH_65001, &mp]), &[]);
    assert_eq!(notify(&v, &C2), (3, 9, mp.to_vec()));
}

#[test]
fn update_missing_well_known_attributes() {
    let v = update(&cat(&[&AS_PATH_65001, &NEXT_HOP]), &NLRI);
    assert_eq!(notify(&v, &C2), (3, 3, vec![1]));
    let v = update(&cat(&[&ORIGIN_IGP, &NEXT_HOP]), &NLRI);
    assert_eq!(notify(&v, &C2), (3, 3, vec![2]));
    let v = update(&cat(&[&ORIGIN_IGP, &AS_PATH_65001]), &NLRI);
    assert_eq!(notify(&v, &C2), (3, 3, vec![3]));
    // Without NLRI nothing is mandatory.
    assert!(Message::decode(&update(&NEXT_HOP, &[]), &C2).is_ok());
}

#[test]
fn update_invalid_network_field() {
    let attrs = cat(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP]);
    assert_eq!(
        notify(&update(&attrs, &[33, 10, 0, 0, 0, 0]), &C2),
        (3, 10, vec![])
    );
    assert_eq!(notify(&update(&attrs, &[24, 10, 0]), &C2), (3, 10, vec![]));
    // In the withdrawn routes too.
    let mut v = withdraw_fixture();
    v[21] = 40;
    assert_eq!(notify(&v, &C2), (3, 10, vec![]));
}

#[test]
fn update_malformed_as_path() {
    let body = |path: &[u8]| update(&cat(&[&ORIGIN_IGP, path, &NEXT_HOP]), &NLRI);
    // Segment type 5; count that overruns; empty segment; odd length.
    for path in [
        &[0x40, 2, 4, 5, 1, 0xfd, 0xe9][..],
        &[0x40, 2, 4, 2, 2, 0xfd, 0xe9],
        &[0x40, 2, 2, 2, 0],
        &[0x40, 2, 1, 2],
    ] {
        assert_eq!(notify(&body(path), &C2), (3, 11, vec![]), "{path:?}");
    }
    // Two-octet ASNs read on a 4-octet session do not fit.
    assert_eq!(
        notify(&body(&AS_PATH_65001), &Context::FOUR_OCTET_AS),
        (3, 11, vec![])
    );
}

#[test]
fn route_refresh_with_a_bad_length() {
    let v = msg(&[0x00, 0x18, 0x05, 0, 1, 0, 1, 0]);
    assert_eq!(notify(&v, &C2), (7, 1, v.clone()));
}

// ---- robustness ----------------------------------------------------------

/// SplitMix64: a tiny deterministic generator, so the run is the same on
/// every machine and needs no dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

#[test]
fn mutated_fixtures_never_panic() {
    let fixtures = [
        open_fixture(),
        keepalive_fixture(),
        announce_fixture(),
        withdraw_fixture(),
        hold_timer_fixture(),
        cease_fixture(),
        route_refresh_fixture(),
    ];
    let contexts = [Context::TWO_OCTET_AS, Context::FOUR_OCTET_AS];
    let mut rng = SplitMix(0x0075_7262_6f6e_6574);
    let mut decoded = 0;
    for i in 0..100_000 {
        let mut v = fixtures[i % fixtures.len()].clone();
        for _ in 0..=rng.below(4) {
            match rng.below(6) {
                // Truncate.
                0 => v.truncate(rng.below(v.len() + 1)),
                // Flip one byte past the marker.
                1 if v.len() > 19 => {
                    let at = 19 + rng.below(v.len() - 19);
                    v[at] = rng.byte();
                }
                // A random length octet inside the body (lengths live there).
                2 if v.len() > 19 => {
                    let at = 19 + rng.below(v.len() - 19);
                    v[at] = rng.below(40) as u8;
                }
                // Insert random bytes.
                3 => {
                    let at = rng.below(v.len() + 1).max(19.min(v.len()));
                    let n = rng.below(8);
                    let bytes: Vec<u8> = (0..n).map(|_| rng.byte()).collect();
                    v.splice(at..at, bytes);
                }
                // Any byte at all, header included.
                4 if !v.is_empty() => {
                    let at = rng.below(v.len());
                    v[at] ^= 1 << rng.below(8);
                }
                _ => {}
            }
        }
        // Mostly keep the header length consistent so the body parsers see
        // the mutations; sometimes leave it wrong.
        if v.len() >= 19 && rng.below(8) != 0 {
            let len = v.len() as u16;
            v[16..18].copy_from_slice(&len.to_be_bytes());
        }
        let ctx = &contexts[rng.below(2)];
        let _ = frame(&v);
        match Message::decode(&v, ctx) {
            Ok(m) => {
                decoded += 1;
                // Whatever decodes re-encodes to something that decodes to
                // the same message.
                let again = m.encode(ctx);
                assert_eq!(Message::decode(&again, ctx).as_ref(), Ok(&m), "{v:02x?}");
            }
            Err(e) => {
                let n = e.to_notification();
                assert!((1..=7).contains(&n.code));
            }
        }
    }
    // The run exercises the success paths too, not only early rejections.
    assert!(decoded > 1_000, "only {decoded} variants decoded");
}
