//! The soft switch's data plane, programmed through its P4Runtime service
//! with entries like the lab's controller's, on frames.
//!
//! The fabric of most tests: host A (port 1, untagged) on virtual switch 1,
//! host B (port 2, untagged) on virtual switch 2, the two switches joined
//! by a virtual link on the loopback cable 3 <-> 4 with tag 10 (or, to see
//! the tags, ports 3 and 4 as interfaces).
//!
//! ```text
//! A 10.0.1.2 -- p1 [vs1 vport1 | vport2] p3 =tag 10= p4 [vport3 vs2 | vport4] p2 -- B 10.0.2.2
//! ```

mod support;

use std::time::Instant;

use support::*;
use turbonet_p4::p4::v1::{PacketMetadata, PacketOut};
use turbonet_p4::turbonet_p4info;
use turbonet_softswitch::{Attach, DeviceConfig, PortConfig, QueueConfig, Switch, SwitchStats};

const A: u8 = 1;
const B: u8 = 2;

fn iface(port: u32, queues: Vec<QueueConfig>) -> PortConfig {
    PortConfig {
        port,
        attach: Attach::Interface(format!("p{port}")),
        queues,
        line_rate_bps: None,
        line_limit_bytes: None,
    }
}

fn cable(port: u32, peer: u32) -> PortConfig {
    PortConfig {
        port,
        attach: Attach::Cable(peer),
        queues: vec![],
        line_rate_bps: None,
        line_limit_bytes: None,
    }
}

/// Ports 1 and 2 for the hosts (port 2's queue 0 shaped as given), 3 and
/// 4 a cable or two interfaces, 5..=8 spare interfaces.
fn config(with_cable: bool, port2: Vec<QueueConfig>) -> DeviceConfig {
    let mut ports = vec![iface(1, vec![]), iface(2, port2)];
    if with_cable {
        ports.extend([cable(3, 4), cable(4, 3)]);
    } else {
        ports.extend([iface(3, vec![]), iface(4, vec![])]);
    }
    ports.extend((5..=8).map(|p| iface(p, vec![])));
    DeviceConfig { ports, seed: 42 }
}

/// Delays (ns) of the virtual link's two directions, vs1 -> vs2 (vport 2)
/// and vs2 -> host B (vport 4).
async fn program(b: &mut Bench, delay_link: u64, delay_host_b: u64) {
    let e = &b.e;
    let entities = vec![
        e.member(1, 1, hmac(A), smac(1)),
        e.member(2, 2, smac(2), smac(1)),
        e.member(3, 4, hmac(B), smac(2)),
        e.member(4, 3, smac(1), smac(2)),
        e.port_map(1, 0, 1, 1),
        e.port_map(3, 10, 1, 2),
        e.port_map(4, 10, 2, 3),
        e.port_map(2, 0, 2, 4),
        e.egress(1, 1, 0, 0, 0, 0),
        e.egress(2, 3, 10, 0, delay_link, 0),
        e.egress(3, 4, 10, 0, delay_link, 0),
        e.egress(4, 2, 0, 0, delay_host_b, 0),
        e.arp(1, ip("10.0.1.1"), smac(1)),
        e.arp(1, ip("10.1.0.0"), smac(1)),
        e.arp(2, ip("10.1.0.1"), smac(2)),
        e.arp(2, ip("10.0.2.1"), smac(2)),
        e.local(1, ip("10.0.1.1")),
        e.local(1, ip("10.1.0.0")),
        e.local(2, ip("10.1.0.1")),
        e.local(2, ip("10.0.2.1")),
        e.route_member(1, "10.0.1.2", 32, 1),
        e.route_member(1, "10.0.2.0", 24, 2),
        e.route_member(1, "10.1.0.0", 31, 2),
        e.route_member(2, "10.0.2.2", 32, 3),
        e.route_member(2, "10.0.1.0", 24, 4),
    ];
    b.insert(entities).await;
}

async fn fabric(with_cable: bool) -> (Bench, Switch) {
    let mut b = Bench::start(&config(with_cable, vec![])).await;
    program(&mut b, 0, 0).await;
    let sw = Switch::new(b.device.clone());
    (b, sw)
}

/// Everything due up to `now`.
fn poll(sw: &mut Switch, now: u64) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    sw.poll_transmit(now, &mut out);
    out
}

/// A ping from host A to host B.
fn ping_a_to_b(ttl: u8) -> Vec<u8> {
    Ip::new(smac(1), hmac(A), "10.0.1.2", "10.0.2.2", ttl).ping()
}

#[tokio::test]
async fn arp_requests_on_an_untagged_host_port_are_answered_in_place() {
    let (b, mut sw) = fabric(true).await;
    assert_eq!(
        sw.interfaces(),
        (1..=8)
            .filter(|p| ![3, 4].contains(p))
            .map(|p| (p, format!("p{p}")))
            .collect::<Vec<_>>()
    );
    let request = arp_request(hmac(A), ip("10.0.1.2"), ip("10.0.1.1"));
    sw.receive(10, 1, &request);
    let out = poll(&mut sw, 10);
    let mut reply = Vec::new();
    reply.extend_from_slice(&hmac(A)); // back to the requester
    reply.extend_from_slice(&smac(1));
    reply.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
    reply.extend_from_slice(&smac(1));
    reply.extend_from_slice(&[10, 0, 1, 1]);
    reply.extend_from_slice(&hmac(A));
    reply.extend_from_slice(&[10, 0, 1, 2]);
    reply.resize(60, 0);
    assert_eq!(out, vec![(1, reply.clone())]);

    // Not our address, or a reply (no answering answers): dropped.
    sw.receive(20, 1, &arp_request(hmac(A), ip("10.0.1.2"), ip("10.0.1.9")));
    let mut not_a_request = request.clone();
    not_a_request[21] = 2;
    sw.receive(20, 1, &not_a_request);
    // Truncated.
    sw.receive(20, 1, &request[..30]);
    assert!(poll(&mut sw, 100).is_empty());
    let s = sw.stats();
    assert_eq!(
        (s.arp_replies, s.dropped_arp, s.dropped_malformed),
        (1, 2, 1)
    );
    b.stop().await;
}

#[tokio::test]
async fn a_ping_crosses_the_cable_between_two_virtual_switches() {
    let (b, mut sw) = fabric(true).await;
    let frame = ping_a_to_b(64);
    sw.receive(1_000, 1, &frame);
    let out = poll(&mut sw, 1_000);
    assert_eq!(out.len(), 1);
    let (port, got) = &out[0];
    assert_eq!(*port, 2);
    assert_eq!(got.len(), frame.len(), "untagged on the host port");
    assert_eq!(&got[0..6], &hmac(B));
    assert_eq!(&got[6..12], &smac(2));
    assert_eq!(&got[12..14], &[0x08, 0x00]);
    assert_eq!(ttl(got), 62);
    assert!(checksum_ok(got));
    assert_eq!(
        &got[14 + 12..],
        &frame[14 + 12..],
        "addresses and payload intact"
    );
    let s = sw.stats();
    assert_eq!((s.received, s.cable_crossings, s.transmitted), (1, 1, 1));
    assert_eq!(s.dropped(), 0);

    // And back: B pings A.
    sw.receive(
        2_000,
        2,
        &Ip::new(smac(2), hmac(B), "10.0.2.2", "10.0.1.2", 3).ping(),
    );
    let out = poll(&mut sw, 2_000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1);
    assert_eq!(&out[0].1[0..12], &[hmac(A), smac(1)].concat()[..]);
    assert_eq!(ttl(&out[0].1), 1);
    assert!(checksum_ok(&out[0].1));
    b.stop().await;
}

#[tokio::test]
async fn cable_ports_push_the_tag_and_the_peer_port_matches_it() {
    let (b, mut sw) = fabric(false).await;
    let frame = ping_a_to_b(64);
    sw.receive(0, 1, &frame);
    let out = poll(&mut sw, 0);
    assert_eq!(out.len(), 1);
    let (port, on_wire) = out[0].clone();
    assert_eq!(port, 3);
    assert_eq!(on_wire.len(), frame.len() + 4);
    assert_eq!(
        &on_wire[12..16],
        &[0x81, 0x00, 0x00, 10],
        "tag 10, priority 0"
    );
    assert_eq!(&on_wire[0..12], &[smac(2), smac(1)].concat()[..]);
    let untagged: Vec<u8> = [&on_wire[..12], &on_wire[16..]].concat();
    assert_eq!(ttl(&untagged), 63);
    assert!(checksum_ok(&untagged));

    // The tagged frame entering port 4 belongs to virtual switch 2.
    sw.receive(5, 4, &on_wire);
    let out = poll(&mut sw, 5);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 2);
    assert_eq!(ttl(&out[0].1), 62);
    assert_eq!(out[0].1.len(), frame.len());

    // Untagged, or with another tag, it maps to nothing.
    sw.receive(6, 4, &untagged);
    sw.receive(6, 4, &tagged(&untagged, 11));
    assert!(poll(&mut sw, 6).is_empty());
    assert_eq!(sw.stats().dropped_no_port_mapping, 2);
    b.stop().await;
}

/// Virtual switch 1 with next hops out of the spare ports 5..=8 (vports
/// 5..=8, members 5..=8).
async fn spare_next_hops(b: &mut Bench) {
    let mut entities = Vec::new();
    for p in 5..=8u16 {
        entities.push(b.e.member(u32::from(p), p, hmac(p as u8), smac(1)));
        entities.push(b.e.egress(p, u32::from(p), 0, 0, 0, 0));
    }
    b.insert(entities).await;
}

fn out_port(sw: &mut Switch, now: u64, frame: &[u8]) -> Option<u32> {
    sw.receive(now, 1, frame);
    let out = poll(sw, now);
    assert!(out.len() <= 1);
    out.first().map(|(p, _)| *p)
}

#[tokio::test]
async fn the_longest_prefix_wins_and_zero_is_the_default() {
    let (mut b, mut sw) = fabric(true).await;
    spare_next_hops(&mut b).await;
    let e = &b.e;
    let routes = vec![
        e.route_member(1, "0.0.0.0", 0, 5),
        e.route_member(1, "10.0.0.0", 8, 6),
        e.route_member(1, "10.0.3.0", 24, 7),
        e.route_member(1, "10.0.3.128", 25, 8),
    ];
    b.insert(routes).await;
    let to = |dst: &str| Ip::new(smac(1), hmac(A), "10.0.1.2", dst, 64).udp(1000, 2000, 10);
    assert_eq!(out_port(&mut sw, 1, &to("10.0.3.200")), Some(8));
    assert_eq!(out_port(&mut sw, 1, &to("10.0.3.5")), Some(7));
    assert_eq!(out_port(&mut sw, 1, &to("10.0.3.128")), Some(8));
    assert_eq!(out_port(&mut sw, 1, &to("10.9.9.9")), Some(6));
    assert_eq!(out_port(&mut sw, 1, &to("192.168.1.1")), Some(5));
    // The fabric's /24 and /32 still win over the /8: 10.0.2.7 crosses
    // the cable to vs2 (which has no route for it), 10.0.1.2 is host A.
    assert_eq!(out_port(&mut sw, 1, &to("10.0.2.7")), None);
    assert_eq!(sw.stats().cable_crossings, 1);
    assert_eq!(out_port(&mut sw, 1, &to("10.0.1.2")), Some(1));
    b.stop().await;
}

#[tokio::test]
async fn routes_without_an_entry_drop_and_members_may_punt_or_drop() {
    let (mut b, mut sw) = fabric(false).await;
    let to = |dst: &str| Ip::new(smac(1), hmac(A), "10.0.1.2", dst, 64).udp(1000, 2000, 10);
    assert_eq!(out_port(&mut sw, 1, &to("192.168.1.1")), None);
    assert_eq!(sw.stats().dropped_no_route, 1);
    let cpu = b.e.action("to_cpu", &[]);
    let drop = b.e.action("drop", &[]);
    let entities = vec![b.e.member_action(20, cpu), b.e.member_action(21, drop)];
    b.insert(entities).await;
    let routes = vec![
        b.e.route_member(1, "192.168.0.0", 16, 20),
        b.e.route_member(1, "172.16.0.0", 12, 21),
    ];
    b.insert(routes).await;
    let frame = to("192.168.1.1");
    assert_eq!(out_port(&mut sw, 2, &frame), None);
    let p = b.packet_in().await;
    assert_eq!(p.payload, frame);
    assert_eq!(out_port(&mut sw, 3, &to("172.16.1.1")), None);
    assert_eq!(sw.stats().dropped_no_route, 2);
    // The default action applies on a miss.
    let default = b.e.lpm_default(b.e.action(
        "set_next_hop",
        &[
            ("vport", 2),
            ("dmac", 0x0274_6e00_0002),
            ("smac", 0x0274_6e00_0001),
        ],
    ));
    b.modify(vec![default]).await;
    assert_eq!(out_port(&mut sw, 4, &to("8.8.8.8")), Some(3));
    b.stop().await;
}

#[tokio::test]
async fn ecmp_spreads_flows_over_every_member_and_keeps_each_flow_on_one() {
    let (mut b, mut sw) = fabric(true).await;
    spare_next_hops(&mut b).await;
    let entities = vec![
        b.e.group(1, &[(5, 1), (6, 1), (7, 1), (8, 1)]),
        b.e.group(2, &[(5, 3), (6, 1)]),
    ];
    b.insert(entities).await;
    let routes = vec![
        b.e.route_group(1, "10.7.0.0", 16, 1),
        b.e.route_group(1, "10.8.0.0", 16, 2),
    ];
    b.insert(routes).await;
    let flow =
        |dst: &str, sport: u16| Ip::new(smac(1), hmac(A), "10.0.1.2", dst, 64).udp(sport, 443, 20);
    let mut counts = [0u32; 9];
    let mut chosen = Vec::new();
    for sport in 0..4000u16 {
        let port = out_port(&mut sw, 1, &flow("10.7.1.1", 10_000 + sport)).unwrap();
        counts[port as usize] += 1;
        chosen.push(port);
    }
    // 1000 expected each; sigma is about 27.
    for p in 5..=8 {
        assert!((850..1150).contains(&counts[p]), "{counts:?}");
    }
    for (sport, port) in chosen.iter().enumerate().take(500) {
        assert_eq!(
            out_port(&mut sw, 2, &flow("10.7.1.1", 10_000 + sport as u16)),
            Some(*port),
            "a flow keeps its path"
        );
    }
    // Weights 3:1.
    let mut counts = [0u32; 9];
    for sport in 0..4000u16 {
        counts[out_port(&mut sw, 3, &flow("10.8.1.1", sport)).unwrap() as usize] += 1;
    }
    assert!((2850..3150).contains(&counts[5]), "{counts:?}");
    assert_eq!(counts[5] + counts[6], 4000);
    b.stop().await;
}

fn metadata(p: &turbonet_p4::p4::v1::PacketIn) -> Vec<(u32, Vec<u8>)> {
    let mut m: Vec<(u32, Vec<u8>)> = p
        .metadata
        .iter()
        .map(|m| (m.metadata_id, m.value.clone()))
        .collect();
    m.sort();
    m
}

#[tokio::test]
async fn local_addresses_and_ttl_expiry_go_to_the_controller() {
    let (mut b, mut sw) = fabric(true).await;
    // To vs1's gateway address, from host A: vswitch 1, vport 1.
    let frame = Ip::new(smac(1), hmac(A), "10.0.1.2", "10.0.1.1", 64).ping();
    sw.receive(0, 1, &frame);
    assert!(poll(&mut sw, 0).is_empty());
    let p = b.packet_in().await;
    assert_eq!(p.payload, frame, "the frame as received");
    assert_eq!(metadata(&p), vec![(1, vec![1]), (2, vec![1])]);

    // To vs2's end of the virtual link: routed by vs1, across the cable,
    // punted by vs2 untagged with vport 3.
    let frame = Ip::new(smac(1), hmac(A), "10.0.1.2", "10.1.0.1", 64).ping();
    sw.receive(1, 1, &frame);
    assert!(poll(&mut sw, 1).is_empty());
    let p = b.packet_in().await;
    assert_eq!(metadata(&p), vec![(1, vec![2]), (2, vec![3])]);
    assert_eq!(p.payload.len(), frame.len(), "untagged");
    assert_eq!(&p.payload[0..12], &[smac(2), smac(1)].concat()[..]);
    assert_eq!(ttl(&p.payload), 63);
    assert!(checksum_ok(&p.payload));

    // TTL 1 at vs1; TTL 2 expires at vs2.
    sw.receive(2, 1, &ping_a_to_b(1));
    let p = b.packet_in().await;
    assert_eq!(metadata(&p), vec![(1, vec![1]), (2, vec![1])]);
    assert_eq!(ttl(&p.payload), 1);
    sw.receive(3, 1, &ping_a_to_b(2));
    assert!(poll(&mut sw, 3).is_empty());
    let p = b.packet_in().await;
    assert_eq!(metadata(&p), vec![(1, vec![2]), (2, vec![3])]);
    let s = sw.stats();
    assert_eq!((s.to_cpu, s.ttl_expired, s.to_cpu_unheard), (4, 2, 0));
    b.stop().await;
}

#[tokio::test]
async fn packet_outs_leave_through_the_queue_mapper_of_their_vport() {
    let (mut b, mut sw) = fabric(false).await;
    let mut from_controller = b.device.take_packet_out_receiver().unwrap();
    let frame = Ip::new(hmac(B), smac(2), "10.0.2.1", "10.0.2.2", 64).ping();
    let packet = |vswitch: u8, vport: u8, payload: Vec<u8>| PacketOut {
        payload,
        metadata: vec![
            PacketMetadata {
                metadata_id: 1,
                value: vec![vswitch],
            },
            PacketMetadata {
                metadata_id: 2,
                value: vec![vport],
            },
        ],
    };
    b.send_packet_out(packet(2, 4, frame.clone())).await;
    let got = from_controller.recv().await.unwrap();
    sw.packet_out(100, got);
    assert_eq!(poll(&mut sw, 100), vec![(2, frame.clone())]);

    // Out of vport 2: tagged 10 on port 3; a tag the controller put on
    // is replaced.
    sw.packet_out(200, packet(1, 2, tagged(&frame, 99)));
    assert_eq!(poll(&mut sw, 200), vec![(3, tagged(&frame, 10))]);
    // Unknown vport: no queue mapping.
    sw.packet_out(300, packet(1, 77, frame.clone()));
    assert!(poll(&mut sw, 300).is_empty());
    let s = sw.stats();
    assert_eq!((s.packet_outs, s.dropped_link_cut), (3, 1));
    // Controller packets are not counted as the vport's traffic.
    assert_eq!(b.counter("vport_tx", 4).packets, 0);
    b.stop().await;
}

#[tokio::test]
async fn a_queue_mapper_drop_cuts_the_link_and_a_modify_restores_it() {
    let (mut b, mut sw) = fabric(true).await;
    sw.receive(0, 1, &ping_a_to_b(64));
    assert_eq!(poll(&mut sw, 0).len(), 1);
    let g = sw.generation();
    let cut = b.e.egress_drop(2);
    b.modify(vec![cut]).await;
    sw.receive(1, 1, &ping_a_to_b(64));
    assert!(poll(&mut sw, 1).is_empty());
    assert!(sw.generation() > g, "recompiled after the MODIFY");
    assert_eq!(sw.stats().dropped_link_cut, 1);
    let restore = b.e.egress(2, 3, 10, 0, 0, 0);
    b.modify(vec![restore]).await;
    sw.receive(2, 1, &ping_a_to_b(64));
    assert_eq!(poll(&mut sw, 2).len(), 1);
    b.stop().await;
}

#[tokio::test]
async fn a_route_modify_is_seen_after_the_generation_moves() {
    let (mut b, mut sw) = fabric(true).await;
    spare_next_hops(&mut b).await;
    assert_eq!(out_port(&mut sw, 0, &ping_a_to_b(64)), Some(2));
    let g = b.device.generation();
    let moved = b.e.route_member(1, "10.0.2.0", 24, 6);
    b.modify(vec![moved]).await;
    assert!(b.device.generation() > g);
    assert_eq!(out_port(&mut sw, 1, &ping_a_to_b(64)), Some(6));
    assert_eq!(sw.generation(), b.device.generation());
    b.stop().await;
}

/// Sends `n` frames A -> B out of interface port 3 with loss threshold
/// `threshold` on vport 2; returns how many got through.
async fn through_lossy_link(threshold: u32, n: u32) -> (u32, SwitchStats, Bench) {
    let (mut b, mut sw) = fabric(false).await;
    let lossy = b.e.egress(2, 3, 10, 0, 0, threshold);
    b.modify(vec![lossy]).await;
    let mut passed = 0;
    for i in 0..n {
        sw.receive(u64::from(i), 1, &ping_a_to_b(64));
        passed += poll(&mut sw, u64::from(i)).len() as u32;
    }
    (passed, sw.stats(), b)
}

#[tokio::test]
async fn loss_follows_the_threshold_and_is_counted() {
    let (passed, s, b) = through_lossy_link(0, 2000).await;
    assert_eq!((passed, s.dropped_loss), (2000, 0));
    b.stop().await;

    let (passed, s, b) = through_lossy_link(u32::MAX, 2000).await;
    assert_eq!((passed, s.dropped_loss), (0, 2000));
    assert_eq!(b.counter("vport_lost", 2).packets, 2000);
    assert_eq!(b.counter("vport_tx", 2).packets, 0);
    b.stop().await;

    // 2^30 / 2^32 = 1/4; sigma of 10000 draws is about 43.
    let (passed, s, b) = through_lossy_link(1 << 30, 10_000).await;
    let lost = 10_000 - passed;
    assert!((2350..2650).contains(&lost), "lost {lost}");
    assert_eq!(s.dropped_loss, u64::from(lost));
    assert_eq!(b.counter("vport_lost", 2).packets, u64::from(lost));
    assert_eq!(b.counter("vport_tx", 2).packets, u64::from(passed));
    b.stop().await;

    // The same seed loses the same frames.
    let (again, _, b) = through_lossy_link(1 << 30, 10_000).await;
    assert_eq!(again, passed);
    b.stop().await;
}

#[tokio::test]
async fn delay_holds_a_frame_until_it_is_due_on_every_hop() {
    let mut b = Bench::start(&config(true, vec![])).await;
    program(&mut b, 3_000, 2_000).await;
    let mut sw = Switch::new(b.device.clone());
    sw.receive(1_000, 1, &ping_a_to_b(64));
    assert_eq!(sw.next_wakeup(), Some(4_000));
    assert!(poll(&mut sw, 3_999).is_empty());
    // At 4000 it crosses the cable, then waits for vport 4's delay.
    assert!(poll(&mut sw, 4_000).is_empty());
    assert_eq!(sw.next_wakeup(), Some(6_000));
    assert!(poll(&mut sw, 5_999).is_empty());
    assert_eq!(poll(&mut sw, 6_000).len(), 1);
    assert_eq!(sw.next_wakeup(), None);
    // Polled late, the crossing still happens at its due time: the frame
    // is due at 4000 + 2000 whatever the poll.
    sw.receive(10_000, 1, &ping_a_to_b(64));
    assert_eq!(poll(&mut sw, 100_000).len(), 1);
    sw.receive(20_000, 1, &ping_a_to_b(64));
    sw.poll_transmit(23_000, &mut Vec::new());
    assert_eq!(sw.next_wakeup(), Some(25_000));
    b.stop().await;
}

fn shaped(rate_bps: u64, limit_bytes: Option<u64>) -> Vec<QueueConfig> {
    vec![QueueConfig {
        queue: 0,
        rate_bps,
        limit_bytes,
    }]
}

/// A 1000-byte frame A -> B.
fn kilobyte() -> Vec<u8> {
    let f = Ip::new(smac(1), hmac(A), "10.0.1.2", "10.0.2.2", 64).udp(5, 6, 958);
    assert_eq!(f.len(), 1000);
    f
}

#[tokio::test]
async fn a_shaped_queue_spaces_frames_by_their_serialization_time() {
    let mut b = Bench::start(&config(true, shaped(1_000_000_000, None))).await;
    program(&mut b, 0, 500).await;
    let mut sw = Switch::new(b.device.clone());
    for _ in 0..10 {
        sw.receive(0, 1, &kilobyte());
    }
    // 1000 bytes at 1 Gbit/s: 8 us each, then 500 ns of delay.
    let mut times = Vec::new();
    while let Some(t) = sw.next_wakeup() {
        if t > 0 {
            assert!(poll(&mut sw, t - 1).is_empty());
        }
        let out = poll(&mut sw, t);
        if !out.is_empty() {
            assert_eq!(out.len(), 1);
            times.push(t);
        }
    }
    let expected: Vec<u64> = (1..=10).map(|i| i * 8_000 + 500).collect();
    assert_eq!(times, expected);

    // RECONCILE_AND_COMMIT with a new rate keeps the tables and shapes
    // the next frames at it.
    let g = sw.generation();
    b.reconcile(&config(true, shaped(2_000_000_000, None)))
        .await;
    for _ in 0..3 {
        sw.receive(1_000_000, 1, &kilobyte());
    }
    assert!(sw.generation() > g);
    let out: Vec<u64> = std::iter::from_fn(|| {
        let t = sw.next_wakeup()?;
        poll(&mut sw, t);
        Some(t)
    })
    .collect();
    // The cable crossing at 1_000_000 is due first, then three frames.
    assert_eq!(&out[out.len() - 3..], &[1_004_500, 1_008_500, 1_012_500]);
    b.stop().await;
}

#[tokio::test]
async fn a_new_device_config_changes_the_interfaces_and_keeps_forwarding() {
    let (mut b, mut sw) = fabric(true).await;
    let g = sw.generation();
    let mut more = config(true, vec![]);
    more.ports.push(PortConfig {
        port: 9,
        attach: Attach::Interface("extra".into()),
        queues: vec![],
        line_rate_bps: None,
        line_limit_bytes: None,
    });
    b.reconcile(&more).await;
    sw.refresh();
    assert!(sw.generation() > g);
    assert_eq!(sw.interfaces().last(), Some(&(9, "extra".to_owned())));
    assert_eq!(out_port(&mut sw, 0, &ping_a_to_b(64)), Some(2));
    b.stop().await;
}

#[tokio::test]
async fn a_full_queue_tail_drops() {
    let mut b = Bench::start(&config(true, shaped(1_000_000_000, Some(3_000)))).await;
    program(&mut b, 0, 0).await;
    let mut sw = Switch::new(b.device.clone());
    for _ in 0..10 {
        sw.receive(0, 1, &kilobyte());
    }
    let out = poll(&mut sw, u64::MAX);
    assert_eq!(out.len(), 3);
    let s = sw.stats();
    assert_eq!((s.dropped_queue_full, s.transmitted, s.queued), (7, 3, 0));
    // vport_tx counts before the traffic manager, as in the program.
    assert_eq!(b.counter("vport_tx", 4).packets, 10);
    b.stop().await;
}

#[tokio::test]
async fn counters_read_back_through_the_device() {
    let (b, mut sw) = fabric(true).await;
    let frame = ping_a_to_b(64);
    let len = frame.len() as u64;
    for i in 0..5 {
        sw.receive(i, 1, &frame);
    }
    assert_eq!(poll(&mut sw, 10).len(), 5);
    let rx1 = b.counter("vport_rx", 1);
    assert_eq!((rx1.packets, rx1.bytes), (5, 5 * len));
    // Tagged on the cable: 4 bytes more.
    let tx2 = b.counter("vport_tx", 2);
    assert_eq!((tx2.packets, tx2.bytes), (5, 5 * (len + 4)));
    let rx3 = b.counter("vport_rx", 3);
    assert_eq!((rx3.packets, rx3.bytes), (5, 5 * (len + 4)));
    let tx4 = b.counter("vport_tx", 4);
    assert_eq!((tx4.packets, tx4.bytes), (5, 5 * len));
    assert_eq!(b.counter("vport_lost", 2).packets, 0);
    b.stop().await;
}

#[tokio::test]
async fn ipv4_options_are_skipped_and_stay_covered_by_the_checksum() {
    let (b, mut sw) = fabric(true).await;
    let mut l4 = vec![0x30, 0x39, 0x01, 0xbb, 0, 12, 0, 0];
    l4.extend_from_slice(b"data");
    let frame = Ip::new(smac(1), hmac(A), "10.0.1.2", "10.0.2.2", 9).packet(17, 8, &l4);
    sw.receive(0, 1, &frame);
    let out = poll(&mut sw, 0);
    assert_eq!(out.len(), 1);
    let got = &out[0].1;
    assert_eq!(got[14], 0x47);
    assert_eq!(ttl(got), 7);
    assert!(checksum_ok(got));
    assert_eq!(&got[34..], &frame[34..]);
    // A header shorter than its IHL, or an IHL below 5: malformed.
    let mut short = frame.clone();
    short.truncate(14 + 24);
    sw.receive(1, 1, &short);
    let mut bad_ihl = frame.clone();
    bad_ihl[14] = 0x44;
    sw.receive(1, 1, &bad_ihl);
    sw.receive(1, 1, &frame[..10]);
    // Not ARP or IPv4.
    let mut ipv6 = frame.clone();
    ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
    sw.receive(1, 1, &ipv6);
    assert!(poll(&mut sw, 1).is_empty());
    let s = sw.stats();
    assert_eq!((s.dropped_malformed, s.dropped_not_ip), (3, 1));
    b.stop().await;
}

#[tokio::test]
async fn egress_to_a_port_the_config_lacks_is_dropped() {
    let (mut b, mut sw) = fabric(true).await;
    let nowhere = b.e.egress(2, 99, 10, 0, 0, 0);
    b.modify(vec![nowhere]).await;
    sw.receive(0, 1, &ping_a_to_b(64));
    assert!(poll(&mut sw, 0).is_empty());
    assert_eq!(sw.stats().dropped_no_egress_port, 1);
    b.stop().await;
}

/// Sends `n` pings from host A, whose port 1 maps with inbound loss
/// threshold `threshold`; returns how many reached host B.
async fn through_lossy_host_port(threshold: u32, n: u32) -> (u32, SwitchStats, Bench) {
    let (mut b, mut sw) = fabric(true).await;
    let lossy = b.e.port_map_in(1, 0, 1, 1, 0, threshold);
    b.modify(vec![lossy]).await;
    let mut passed = 0;
    for i in 0..n {
        sw.receive(u64::from(i), 1, &ping_a_to_b(64));
        passed += poll(&mut sw, u64::from(i)).len() as u32;
    }
    (passed, sw.stats(), b)
}

#[tokio::test]
async fn a_host_ports_inbound_loss_follows_its_threshold_and_is_counted() {
    // 2^30 / 2^32 = 1/4; sigma of 10000 draws is about 43.
    let (passed, s, b) = through_lossy_host_port(1 << 30, 10_000).await;
    let lost = 10_000 - passed;
    assert!((2350..2650).contains(&lost), "lost {lost}");
    assert_eq!(s.dropped_inbound_loss, u64::from(lost));
    assert_eq!(s.dropped_loss, 0, "not the egress draw");
    assert_eq!(s.dropped(), u64::from(lost));
    // As in the program: vport_rx counts before the draw, vport_rx_lost
    // what it took; both read back through the device.
    assert_eq!(b.counter("vport_rx_lost", 1).packets, u64::from(lost));
    assert_eq!(b.counter("vport_rx", 1).packets, 10_000);
    assert_eq!(b.counter("vport_tx", 2).packets, u64::from(passed));
    assert_eq!(b.counter("vport_lost", 2).packets, 0);
    b.stop().await;

    // The same seed loses the same frames; threshold 0 loses none.
    let (again, _, b) = through_lossy_host_port(1 << 30, 10_000).await;
    assert_eq!(again, passed);
    b.stop().await;
    let (all, s, b) = through_lossy_host_port(0, 1_000).await;
    assert_eq!((all, s.dropped_inbound_loss), (1_000, 0));
    assert_eq!(b.counter("vport_rx_lost", 1).packets, 0);
    b.stop().await;
}

#[tokio::test]
async fn inbound_and_egress_delays_add_up_on_a_forwarded_frame() {
    let mut b = Bench::start(&config(true, vec![])).await;
    program(&mut b, 3_000, 2_000).await;
    let inbound = b.e.port_map_in(1, 0, 1, 1, 5_000, 0);
    b.modify(vec![inbound]).await;
    let mut sw = Switch::new(b.device.clone());
    sw.receive(1_000, 1, &ping_a_to_b(64));
    // Host A's inbound 5 us plus the virtual link's 3 us to the cable ...
    assert_eq!(sw.next_wakeup(), Some(9_000));
    assert!(poll(&mut sw, 8_999).is_empty());
    assert!(poll(&mut sw, 9_000).is_empty());
    // ... then vs2's 2 us to host B; the cable's port mapping adds none.
    assert_eq!(sw.next_wakeup(), Some(11_000));
    assert!(poll(&mut sw, 10_999).is_empty());
    assert_eq!(poll(&mut sw, 11_000).len(), 1);
    // Host B's port has no inbound delay: B -> A takes the link's 3 us
    // and vport 1's 0.
    sw.receive(
        20_000,
        2,
        &Ip::new(smac(2), hmac(B), "10.0.2.2", "10.0.1.2", 64).ping(),
    );
    assert!(poll(&mut sw, 20_000).is_empty());
    assert_eq!(sw.next_wakeup(), Some(23_000));
    assert_eq!(poll(&mut sw, 23_000).len(), 1);
    b.stop().await;
}

#[tokio::test]
async fn an_arp_reply_gets_the_host_links_delay_both_ways() {
    let (mut b, mut sw) = fabric(true).await;
    let entities = vec![
        b.e.port_map_in(1, 0, 1, 1, 5_000, 0),
        b.e.egress(1, 1, 0, 0, 4_000, 0),
    ];
    b.modify(entities).await;
    sw.receive(
        1_000,
        1,
        &arp_request(hmac(A), ip("10.0.1.2"), ip("10.0.1.1")),
    );
    assert_eq!(sw.next_wakeup(), Some(10_000));
    assert!(poll(&mut sw, 9_999).is_empty());
    let out = poll(&mut sw, 10_000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1);
    assert_eq!(sw.stats().arp_replies, 1);
    // A controller's packet out of vport 1 has no inbound part.
    let packet = PacketOut {
        payload: ping_a_to_b(64),
        metadata: vec![
            PacketMetadata {
                metadata_id: 1,
                value: vec![1],
            },
            PacketMetadata {
                metadata_id: 2,
                value: vec![1],
            },
        ],
    };
    sw.packet_out(20_000, packet);
    assert_eq!(sw.next_wakeup(), Some(24_000));
    b.stop().await;
}

/// Ports as [`config`] (with the cable, no queue shaping), host A's port 1
/// received at `rate_bps` with limit `limit_bytes`.
fn rated(rate_bps: Option<u64>, limit_bytes: Option<u64>) -> DeviceConfig {
    let mut c = config(true, vec![]);
    c.ports[0].line_rate_bps = rate_bps;
    c.ports[0].line_limit_bytes = limit_bytes;
    c
}

/// Every time a frame leaves, polling at each wakeup until none is left.
fn departures(sw: &mut Switch) -> Vec<(u64, u32)> {
    let mut times = Vec::new();
    while let Some(t) = sw.next_wakeup() {
        if t > 0 {
            assert!(poll(sw, t - 1).is_empty(), "nothing leaves before {t}");
        }
        times.extend(poll(sw, t).into_iter().map(|(port, _)| (t, port)));
    }
    times
}

#[tokio::test]
async fn a_line_rate_spaces_received_frames_and_tail_drops_beyond_its_limit() {
    let mut b = Bench::start(&rated(Some(1_000_000_000), Some(3_000))).await;
    program(&mut b, 0, 0).await;
    let mut sw = Switch::new(b.device.clone());
    for _ in 0..10 {
        sw.receive(0, 1, &kilobyte());
    }
    // Nothing enters the pipeline before its last bit has arrived.
    assert!(poll(&mut sw, 7_999).is_empty());
    assert_eq!(b.counter("vport_rx", 1).packets, 0);
    let s = sw.stats();
    assert_eq!((s.received, s.queued), (10, 3));
    assert_eq!((s.dropped_queue_full, s.line_rate_full), (7, 7));
    // 1000 bytes at 1 Gbit/s: one every 8 us, forwarded at once to B.
    assert_eq!(departures(&mut sw), [(8_000, 2), (16_000, 2), (24_000, 2)]);
    assert_eq!(b.counter("vport_rx", 1).packets, 3);
    assert_eq!(sw.stats().queued, 0);

    // Host B's port has no line rate: its frames go straight in.
    sw.receive(
        30_000,
        2,
        &Ip::new(smac(2), hmac(B), "10.0.2.2", "10.0.1.2", 64).ping(),
    );
    assert_eq!(poll(&mut sw, 30_000).len(), 1);

    // A new device config's line rate applies from the next frame on.
    b.reconcile(&rated(Some(2_000_000_000), None)).await;
    for _ in 0..3 {
        sw.receive(100_000, 1, &kilobyte());
    }
    assert_eq!(
        departures(&mut sw),
        [(104_000, 2), (108_000, 2), (112_000, 2)]
    );
    // Without one, the port receives at once again.
    b.reconcile(&rated(None, None)).await;
    sw.receive(200_000, 1, &kilobyte());
    assert_eq!(poll(&mut sw, 200_000).len(), 1);
    b.stop().await;
}

#[tokio::test]
async fn frames_a_line_rate_held_enter_the_pipeline_at_their_admission_time() {
    // Port 1 received at 1 Gbit/s, port 2 (host B) shaped at 1 Gbit/s too,
    // 3 us on the virtual link between the two virtual switches.
    let mut c = config(true, shaped(1_000_000_000, None));
    c.ports[0].line_rate_bps = Some(1_000_000_000);
    let mut b = Bench::start(&c).await;
    program(&mut b, 3_000, 0).await;
    let mut sw = Switch::new(b.device.clone());
    sw.receive(0, 1, &kilobyte());
    sw.receive(0, 1, &kilobyte());
    assert_eq!(sw.next_wakeup(), Some(8_000));
    // Admitted at 8 and 16 us, across the cable at 11 and 19 us, then
    // 8 us each on port 2's queue.
    assert_eq!(departures(&mut sw), [(19_000, 2), (27_000, 2)]);

    // Polled late, once: each frame still entered at its admission time
    // and crossed at its due time, in time order with the queue's
    // departures (entering at the poll's time, they would leave later).
    sw.receive(100_000, 1, &kilobyte());
    sw.receive(100_000, 1, &kilobyte());
    assert_eq!(poll(&mut sw, 126_999).len(), 1);
    assert_eq!(poll(&mut sw, 127_000).len(), 1);
    assert_eq!(sw.stats().cable_crossings, 4);
    assert_eq!(sw.next_wakeup(), None);
    b.stop().await;
}

/// The P4Info of before host links were impaired at ingress: set_vport
/// with two parameters, no vport_rx_lost.
fn two_param_set_vport() -> turbonet_p4::p4::config::v1::P4Info {
    let mut p = turbonet_p4info();
    p.counters
        .retain(|c| c.preamble.as_ref().unwrap().alias != "vport_rx_lost");
    let set_vport = p
        .actions
        .iter_mut()
        .find(|a| a.preamble.as_ref().unwrap().alias == "set_vport")
        .unwrap();
    set_vport.params.truncate(2);
    p
}

#[tokio::test]
async fn a_p4info_with_the_two_parameter_set_vport_still_forwards() {
    let mut b = Bench::start_with(two_param_set_vport(), &config(true, vec![])).await;
    program(&mut b, 0, 1_000).await;
    let mut sw = Switch::new(b.device.clone());
    assert_eq!(sw.down(), None);
    sw.receive(0, 1, &ping_a_to_b(64));
    assert!(poll(&mut sw, 999).is_empty(), "vs2's egress delay only");
    let out = poll(&mut sw, 1_000);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, ttl(&out[0].1)), (2, 62));
    assert_eq!(b.counter("vport_rx", 1).packets, 1);
    b.stop().await;
}

/// Every id of the P4Info moved (as another compiler might number them),
/// references kept consistent.
fn renumbered() -> turbonet_p4::p4::config::v1::P4Info {
    let mut p = turbonet_p4info();
    let shift = |id: &mut u32| *id += 1000;
    for t in &mut p.tables {
        shift(&mut t.preamble.as_mut().unwrap().id);
        for f in &mut t.match_fields {
            f.id += 10;
        }
        for a in &mut t.action_refs {
            shift(&mut a.id);
        }
        if t.implementation_id != 0 {
            shift(&mut t.implementation_id);
        }
    }
    for a in &mut p.actions {
        shift(&mut a.preamble.as_mut().unwrap().id);
        for param in &mut a.params {
            param.id += 20;
        }
    }
    for ap in &mut p.action_profiles {
        shift(&mut ap.preamble.as_mut().unwrap().id);
        for t in &mut ap.table_ids {
            shift(t);
        }
    }
    for c in &mut p.counters {
        shift(&mut c.preamble.as_mut().unwrap().id);
    }
    for h in &mut p.controller_packet_metadata {
        shift(&mut h.preamble.as_mut().unwrap().id);
        for m in &mut h.metadata {
            m.id += 30;
        }
    }
    p
}

#[tokio::test]
async fn a_p4info_with_other_ids_runs_the_same_pipeline() {
    let mut b = Bench::start_with(renumbered(), &config(true, vec![])).await;
    program(&mut b, 0, 0).await;
    let mut sw = Switch::new(b.device.clone());
    sw.receive(0, 1, &ping_a_to_b(64));
    let out = poll(&mut sw, 0);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, ttl(&out[0].1)), (2, 62));
    sw.receive(
        1,
        1,
        &Ip::new(smac(1), hmac(A), "10.0.1.2", "10.0.1.1", 64).ping(),
    );
    let p = b.packet_in().await;
    assert_eq!(metadata(&p), vec![(31, vec![1]), (32, vec![1])]);
    // Counts reach the device at the next poll.
    assert_eq!(b.counter("vport_rx", 1).packets, 1);
    poll(&mut sw, 1);
    assert_eq!(b.counter("vport_rx", 1).packets, 2);
    b.stop().await;
}

#[tokio::test]
async fn a_p4info_lacking_the_pipeline_drops_every_frame_but_the_control_plane_works() {
    let mut p4info = turbonet_p4info();
    p4info
        .tables
        .retain(|t| t.preamble.as_ref().unwrap().alias != "local");
    let mut b = Bench::start_with(p4info, &config(true, vec![])).await;
    let e = &b.e;
    // Writes work; the entry is one the full program below does not write.
    let entries = vec![e.port_map(9, 0, 1, 9), e.egress(9, 9, 0, 0, 0, 0)];
    b.insert(entries).await;
    let mut sw = Switch::new(b.device.clone());
    assert_eq!(
        sw.down(),
        Some("the P4Info has no table TurbonetIngress.local")
    );
    assert_eq!(sw.interfaces().len(), 6, "the ports are still the config's");
    sw.receive(0, 1, &arp_request(hmac(A), ip("10.0.1.2"), ip("10.0.1.1")));
    assert!(poll(&mut sw, 0).is_empty());
    assert_eq!(sw.stats().dropped_no_pipeline, 1);

    // Committing the full pipeline brings the data plane up.
    b.p4info = turbonet_p4info();
    b.e = Entities::new(&b.p4info);
    b.reconcile(&config(true, vec![])).await;
    program(&mut b, 0, 0).await;
    sw.receive(1, 1, &ping_a_to_b(64));
    assert_eq!(poll(&mut sw, 1).len(), 1);
    assert_eq!(sw.down(), None);
    b.stop().await;
}

#[tokio::test]
async fn without_a_pipeline_nothing_is_forwarded() {
    let device = turbonet_softswitch::Device::new(1);
    let mut sw = Switch::new(device);
    assert!(sw.interfaces().is_empty());
    assert_eq!(sw.down(), Some("no forwarding pipeline is set"));
    sw.receive(0, 1, &ping_a_to_b(64));
    sw.packet_out(0, PacketOut::default());
    assert!(poll(&mut sw, 0).is_empty());
    assert_eq!(sw.stats().dropped_no_pipeline, 2);
}

/// Five virtual switches in a row, joined by four loopback cables:
/// host A (port 1) -> vs1 -> cable -> vs2 -> ... -> vs5 -> host B (port 2).
async fn five_hops() -> (Bench, Switch) {
    let mut ports = vec![iface(1, vec![]), iface(2, vec![])];
    for c in 0..4u32 {
        let (a, z) = (10 + 2 * c, 11 + 2 * c);
        ports.extend([cable(a, z), cable(z, a)]);
    }
    let mut b = Bench::start(&DeviceConfig { ports, seed: 1 }).await;
    let e = &b.e;
    let mut entities = Vec::new();
    let mut routes = Vec::new();
    // vs n: vport 10n+1 towards A (in), 10n+2 towards B (out).
    for n in 1..=5u16 {
        let (inward, outward) = (10 * n + 1, 10 * n + 2);
        let in_port = if n == 1 { 1 } else { 9 + 2 * u32::from(n - 1) };
        let out_port = if n == 5 { 2 } else { 10 + 2 * u32::from(n - 1) };
        let tag = |port: u32| if port <= 2 { 0 } else { 100 + port as u16 / 2 };
        entities.push(e.port_map(in_port, tag(in_port), n, inward));
        entities.push(e.egress(outward, out_port, tag(out_port), 0, 0, 0));
        let dmac = if n == 5 { hmac(B) } else { smac(n as u8 + 1) };
        entities.push(e.member(u32::from(n), outward, dmac, smac(n as u8)));
        routes.push(e.route_member(n, "10.0.2.0", 24, u32::from(n)));
    }
    entities.extend(routes);
    b.insert(entities).await;
    let sw = Switch::new(b.device.clone());
    (b, sw)
}

#[tokio::test]
async fn five_hops_deliver_with_ttl_minus_five() {
    let (b, mut sw) = five_hops().await;
    sw.receive(0, 1, &ping_a_to_b(64));
    let out = poll(&mut sw, 0);
    assert_eq!(out.len(), 1, "{:?}", sw.stats());
    assert_eq!(out[0].0, 2);
    assert_eq!(ttl(&out[0].1), 59);
    assert!(checksum_ok(&out[0].1));
    assert_eq!(sw.stats().cable_crossings, 4);
    b.stop().await;
}

/// Micro-benchmark: ns per frame through the five-hop path (run with
/// `cargo test --release -p turbonet-softswitch --test dataplane -- --ignored --nocapture`).
#[tokio::test]
#[ignore = "a benchmark; prints ns per frame"]
async fn bench_five_hops() {
    let (b, mut sw) = five_hops().await;
    let mut out = Vec::with_capacity(64);
    let mut now = 0u64;
    // 60 bytes: the minimum frame; 1514: a full one.
    for (label, payload, rounds) in [
        ("warm-up", 18, 2_000u64),
        ("measured", 18, 20_000),
        ("measured", 1_472, 5_000),
    ] {
        let frames: Vec<Vec<u8>> = (0..64u16)
            .map(|i| {
                Ip::new(smac(1), hmac(A), "10.0.1.2", "10.0.2.2", 64).udp(1000 + i, 80, payload)
            })
            .collect();
        let start = Instant::now();
        let mut sent = 0u64;
        for _ in 0..rounds {
            for f in &frames {
                sw.receive(now, 1, f);
            }
            sw.poll_transmit(now, &mut out);
            sent += out.len() as u64;
            out.clear();
            now += 1_000;
        }
        let elapsed = start.elapsed();
        let n = rounds * frames.len() as u64;
        assert_eq!(sent, n);
        println!(
            "{label}: {n} frames of {} bytes through 5 virtual switches and 4 cables: {:.0} \
             ns/frame ({:.0} ns per hop), {:.2} Mfps",
            frames[0].len(),
            elapsed.as_nanos() as f64 / n as f64,
            elapsed.as_nanos() as f64 / n as f64 / 5.0,
            n as f64 / elapsed.as_secs_f64() / 1e6
        );
    }
    b.stop().await;
}

/// Micro-benchmark: a full recompile after a one-entry MODIFY, with many
/// routes installed.
#[tokio::test]
#[ignore = "a benchmark; prints the recompile time"]
async fn bench_recompile() {
    let (mut b, mut sw) = fabric(true).await;
    let routes: u32 = 50_000;
    let mut entities: Vec<_> = (0..routes)
        .map(|i| {
            let prefix = std::net::Ipv4Addr::from(0x1400_0000 + (i << 8)).to_string();
            b.e.route_member(1 + (i % 2) as u16, &prefix, 24, 2 + 2 * (i % 2))
        })
        .collect();
    while !entities.is_empty() {
        let rest = entities.split_off(entities.len().saturating_sub(10_000));
        b.insert(rest).await;
    }
    sw.refresh();
    for _ in 0..3 {
        let moved = b.e.route_member(1, "10.0.2.0", 24, 1);
        b.modify(vec![moved]).await;
        let start = Instant::now();
        sw.refresh();
        println!(
            "recompile with {} routes: {:.1} ms",
            routes + 4,
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    b.stop().await;
}

#[test]
fn a_switch_moves_to_its_driver_thread() {
    fn send<T: Send>() {}
    send::<Switch>();
}

#[test]
fn the_stats_total_every_drop_reason() {
    let s = SwitchStats {
        dropped_loss: 2,
        dropped_link_cut: 3,
        transmitted: 9,
        ..Default::default()
    };
    assert_eq!(s.dropped(), 5);
    assert!(s.drops().contains(&("link cut", 3)));
}

#[tokio::test]
async fn ports_given_at_start_serve_a_pipeline_without_a_device_config() {
    // As BMv2's `-i 1@p1 -i 2@p2`: the pipeline's device config is empty.
    let b = Bench::start(&DeviceConfig::default()).await;
    let base = DeviceConfig {
        ports: vec![iface(1, vec![]), iface(2, vec![])],
        seed: 0,
    };
    let sw = Switch::with_ports(b.device.clone(), base.clone());
    assert_eq!(
        sw.interfaces(),
        vec![(1, "p1".to_owned()), (2, "p2".to_owned())]
    );
    // A device config with ports takes over.
    let own = DeviceConfig {
        ports: vec![iface(7, vec![])],
        seed: 0,
    };
    let mut b = b;
    b.reconcile(&own).await;
    let mut sw = sw;
    sw.refresh();
    assert_eq!(sw.interfaces(), vec![(7, "p7".to_owned())]);
    b.stop().await;
}

/// A frame tagged with VLAN id 0 on host port 1 (whose entry is for
/// untagged frames): the program matches whether the frame is tagged, not
/// a tag of 0 (BMv2 leaves the tag field of an untagged frame as it was),
/// so the tagged frame finds no entry.
#[tokio::test]
async fn the_port_mapper_tells_a_tag_of_0_from_no_tag() {
    let (b, mut sw) = fabric(true).await;
    let untagged = ping_a_to_b(64);
    let mut tagged = untagged[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x00]);
    tagged.extend_from_slice(&untagged[12..]);
    sw.receive(0, 1, &tagged);
    assert!(poll(&mut sw, 0).is_empty());
    assert_eq!(sw.stats().dropped_no_port_mapping, 1);
    sw.receive(1, 1, &untagged);
    let out = poll(&mut sw, 1);
    assert_eq!(out.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [2]);
    b.stop().await;
}

/// The delay header (EtherType 0x88b5) is the pipeline's own, carried
/// through recirculation: a host that sends one does not choose the
/// physical port and queue its frame leaves by.
#[tokio::test]
async fn a_delay_header_from_a_host_port_does_not_choose_the_egress() {
    let (b, mut sw) = fabric(false).await;
    let ping = ping_a_to_b(64);
    let mut forged = ping[..12].to_vec();
    forged.extend_from_slice(&[0x88, 0xb5]);
    // due 0 (long past), port 3 (the 9 bits), queue 0, vport 2, then IPv4.
    forged.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0b0000_0001, 0b1000_0000, 0, 2, 0x08, 0x00]);
    forged.extend_from_slice(&ping[14..]);
    sw.receive(0, 1, &forged);
    assert!(poll(&mut sw, 1_000_000_000).is_empty());
    let s = sw.stats();
    assert_eq!((s.transmitted, s.dropped_not_ip), (0, 1));
    // The same ping without it is routed (out of port 3, to vs2).
    sw.receive(2_000_000_000, 1, &ping);
    let out = poll(&mut sw, 2_000_000_000);
    assert_eq!(out.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [3]);
    b.stop().await;
}

/// Programmed as BMv2 is (p4c's BMv2 JSON of turbonet.p4 as the device
/// config, the controller's delays in BMv2's microseconds), the soft
/// switch stands in for BMv2: its ports are those it was started with and
/// a delay of 1,000 holds a frame 1 ms.
#[tokio::test]
async fn with_bmv2s_json_the_switch_keeps_bmv2s_clock() {
    use turbonet_p4::p4::v1::set_forwarding_pipeline_config_request::Action;
    let mut b = Bench::start(&DeviceConfig::default()).await;
    let mut request = pipeline(&b.p4info, &DeviceConfig::default(), Action::VerifyAndCommit);
    request.config.as_mut().unwrap().p4_device_config = turbonet_p4::TURBONET_BMV2_JSON.to_vec();
    b.client
        .set_forwarding_pipeline_config(request)
        .await
        .unwrap();
    program(&mut b, 0, 1_000).await;
    let mut sw = Switch::with_ports(b.device.clone(), config(true, vec![]));
    assert_eq!(sw.down(), None);
    sw.receive(0, 1, &ping_a_to_b(64));
    assert!(poll(&mut sw, 999_999).is_empty(), "1,000 us, not 1,000 ns");
    let out = poll(&mut sw, 1_000_000);
    assert_eq!(out.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [2]);
    b.stop().await;
}
