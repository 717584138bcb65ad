//! The recorder of `softswitch/tests/bmv2/*.json`: every case run on real
//! BMv2 (`simple_switch_grpc` started as `up` starts it, p4c's JSON and
//! P4Info of `p4/build/`), its writes sent over P4Runtime, its frames sent
//! into veth ports one at a time, and what left every host port, the
//! PacketIns and the counters written down. `softswitch/tests/bmv2_replay.rs`
//! holds the soft switch to them in CI.
//!
//! Ignored by default: it needs root and `simple_switch_grpc` on `PATH`.
//! Refresh the recordings with `scripts/record-bmv2` (docs/p4.md).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::process::Command;
use std::time::{Duration, Instant};

use tokio_stream::StreamExt;
use turbonet_lab::dataplane::p4::switches;
use turbonet_p4::p4::v1::{
    PacketOut, StreamMessageRequest, entity, stream_message_request, stream_message_response,
    update,
};
use turbonet_p4::{Schema, turbonet_p4info};
use turbonet_packetio::checksum::internet_checksum;
use turbonet_packetio::socket::{PacketSocket, RxBatch};
use turbonet_softswitch::recording::{
    COUNTERS, CounterCell, FrameIn, FrameOut, Packet, PortRef, RecordedSwitch, Recording, Step,
    Write, counter_read, hex, mac, packet_metadata,
};

// ------------------------------------------------------------ the fabric

fn smac(n: u8) -> [u8; 6] {
    [0x02, 0x74, 0x6e, 0, 0, n]
}

fn hmac(n: u8) -> [u8; 6] {
    [0x02, 0x74, 0x68, 0, 0, n]
}

fn map(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// port_mapper: (port, tag: 0 untagged) -> set_vport, with a host link's
/// inbound delay (BMv2 ticks: us) and loss threshold.
fn port_map(port: u32, tag: u16, vswitch: u16, vport: u16, delay: u64, loss: u32) -> Write {
    Write::Entry {
        table: "port_mapper".into(),
        matches: map(&[
            ("standard_metadata.ingress_port", port.to_string()),
            ("hdr.vlan.$valid$", u8::from(tag != 0).to_string()),
            ("meta.vid", tag.to_string()),
        ]),
        action: Some("set_vport".into()),
        params: map(&[
            ("vswitch", vswitch.to_string()),
            ("vport", vport.to_string()),
            ("delay", delay.to_string()),
            ("loss_threshold", format!("{loss:#x}")),
        ]),
        member: None,
        group: None,
    }
}

/// queue_mapper: vport -> set_egress(port, tag, queue, delay, loss).
fn egress(vport: u16, port: u32, tag: u16, queue: u8, delay: u64, loss: u32) -> Write {
    Write::Entry {
        table: "queue_mapper".into(),
        matches: map(&[("meta.vport_out", vport.to_string())]),
        action: Some("set_egress".into()),
        params: map(&[
            ("port", port.to_string()),
            ("tag", tag.to_string()),
            ("queue", queue.to_string()),
            ("delay", delay.to_string()),
            ("loss_threshold", format!("{loss:#x}")),
        ]),
        member: None,
        group: None,
    }
}

fn member(id: u32, vport: u16, dmac: [u8; 6], src: [u8; 6]) -> Write {
    Write::Member {
        id,
        action: "set_next_hop".into(),
        params: map(&[
            ("vport", vport.to_string()),
            ("dmac", mac(dmac)),
            ("smac", mac(src)),
        ]),
    }
}

fn route(vswitch: u16, prefix: &str, member: Option<u32>, group: Option<u32>) -> Write {
    Write::Entry {
        table: "ipv4_lpm".into(),
        matches: map(&[
            ("meta.vswitch", vswitch.to_string()),
            ("hdr.ipv4.dst", prefix.to_owned()),
        ]),
        action: None,
        params: BTreeMap::new(),
        member,
        group,
    }
}

fn arp_entry(vswitch: u16, addr: &str, m: [u8; 6]) -> Write {
    Write::Entry {
        table: "arp_responder".into(),
        matches: map(&[
            ("meta.vswitch", vswitch.to_string()),
            ("hdr.arp.tpa", addr.to_owned()),
        ]),
        action: Some("arp_reply".into()),
        params: map(&[("mac", mac(m))]),
        member: None,
        group: None,
    }
}

fn local(vswitch: u16, addr: &str) -> Write {
    Write::Entry {
        table: "local".into(),
        matches: map(&[
            ("meta.vswitch", vswitch.to_string()),
            ("hdr.ipv4.dst", addr.to_owned()),
        ]),
        action: Some("to_cpu".into()),
        params: BTreeMap::new(),
        member: None,
        group: None,
    }
}

/// Virtual switch 1 with host A (10.0.1.2) on port 1 and host B
/// (10.0.2.2) on port 2, both untagged, gateways .1 answered and local;
/// the links' delay and loss as given (B's link: `b_link`).
fn two_hosts(b_link: (u64, u32), queue_b: u8) -> Vec<Write> {
    vec![
        member(1, 1, hmac(1), smac(1)),
        member(2, 2, hmac(2), smac(1)),
        port_map(1, 0, 1, 1, 0, 0),
        port_map(2, 0, 1, 2, b_link.0, b_link.1),
        egress(1, 1, 0, 0, 0, 0),
        egress(2, 2, 0, queue_b, b_link.0, b_link.1),
        route(1, "10.0.1.0/24", Some(1), None),
        route(1, "10.0.2.0/24", Some(2), None),
        arp_entry(1, "10.0.1.1", smac(1)),
        arp_entry(1, "10.0.2.1", smac(1)),
        local(1, "10.0.1.1"),
        local(1, "10.0.2.1"),
    ]
}

// ------------------------------------------------------------ frames

/// An IPv4 datagram (UDP, or ICMP echo when `sport` is `None`) from host
/// `from` to `dst` with `ttl`, to the switch's MAC.
fn ipv4(from: u8, src: &str, dst: &str, ttl: u8, ports: Option<(u16, u16)>) -> Vec<u8> {
    let src: Ipv4Addr = src.parse().unwrap();
    let dst: Ipv4Addr = dst.parse().unwrap();
    let (proto, mut l4) = match ports {
        Some((s, d)) => {
            let mut u = Vec::new();
            u.extend(s.to_be_bytes());
            u.extend(d.to_be_bytes());
            u.extend(26u16.to_be_bytes());
            u.extend([0, 0]);
            (17, u)
        }
        None => (1, vec![8, 0, 0, 0, 0, 1, 0, 1]),
    };
    l4.extend(b"turbonet bmv2 rec");
    l4.push(from);
    if proto == 1 {
        let c = internet_checksum(&l4);
        l4[2..4].copy_from_slice(&c.to_be_bytes());
    }
    let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, ttl, proto, 0, 0];
    ip.extend(src.octets());
    ip.extend(dst.octets());
    let total = (20 + l4.len()) as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let c = internet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = smac(1).to_vec();
    f.extend(hmac(from));
    f.extend([0x08, 0x00]);
    f.extend(ip);
    f.extend(l4);
    f
}

fn udp(from: u8, src: &str, dst: &str, ttl: u8, sport: u16) -> Vec<u8> {
    ipv4(from, src, dst, ttl, Some((sport, 5001)))
}

fn arp_request(from: u8, spa: &str, tpa: &str) -> Vec<u8> {
    let spa: Ipv4Addr = spa.parse().unwrap();
    let tpa: Ipv4Addr = tpa.parse().unwrap();
    let mut f = vec![0xff; 6];
    f.extend(hmac(from));
    f.extend([0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend(hmac(from));
    f.extend(spa.octets());
    f.extend([0; 6]);
    f.extend(tpa.octets());
    f
}

fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend([0x81, 0x00]);
    f.extend(vid.to_be_bytes());
    f.extend(&frame[12..]);
    f
}

// ------------------------------------------------------------ cases

enum Input {
    /// A frame into (switch, port).
    Frame(usize, u32, Vec<u8>),
    /// A PacketOut of switch 0 as (vswitch, vport).
    Out(u16, u16, Vec<u8>),
}

struct StepDef {
    note: &'static str,
    input: Input,
    /// Frames out plus PacketIns the step must cause on BMv2.
    expect: usize,
}

fn step(note: &'static str, input: Input, expect: usize) -> StepDef {
    StepDef {
        note,
        input,
        expect,
    }
}

struct Case {
    name: &'static str,
    about: &'static str,
    switches: Vec<RecordedSwitch>,
    cables: Vec<[PortRef; 2]>,
    steps: Vec<StepDef>,
}

fn one(ports: &[u32], loopbacks: &[[u32; 2]], writes: Vec<Write>) -> RecordedSwitch {
    RecordedSwitch {
        ports: ports.to_vec(),
        loopbacks: loopbacks.to_vec(),
        writes,
    }
}

/// The delays of the delay case, BMv2 ticks (us).
const LINK_DELAY_US: u64 = 20_000;
const IN_DELAY_US: u64 = 10_000;

fn cases() -> Vec<Case> {
    use Input::{Frame, Out};
    let a_to_b = || udp(1, "10.0.1.2", "10.0.2.2", 64, 1000);
    let b_to_a = || udp(2, "10.0.2.2", "10.0.1.2", 64, 2000);
    let mut cases = vec![Case {
        name: "untagged_host_ports",
        about: "two hosts on untagged ports of one virtual switch, routed both ways",
        switches: vec![one(&[1, 2], &[], two_hosts((0, 0), 0))],
        cables: vec![],
        steps: vec![
            step(
                "A to B leaves port 2, MACs rewritten, TTL 63",
                Frame(0, 1, a_to_b()),
                1,
            ),
            step("B to A leaves port 1", Frame(0, 2, b_to_a()), 1),
            step(
                "ICMP A to B",
                Frame(0, 1, ipv4(1, "10.0.1.2", "10.0.2.2", 9, None)),
                1,
            ),
        ],
    }];
    // Hosts C (vport 3, tag 20) and D (vport 4, tag 21) share port 5.
    let mut trunk = two_hosts((0, 0), 0);
    trunk.extend([
        member(3, 3, hmac(3), smac(1)),
        member(4, 4, hmac(4), smac(1)),
        port_map(5, 20, 1, 3, 0, 0),
        port_map(5, 21, 1, 4, 0, 0),
        egress(3, 5, 20, 0, 0, 0),
        egress(4, 5, 21, 0, 0, 0),
        route(1, "10.0.3.0/24", Some(3), None),
        route(1, "10.0.4.0/24", Some(4), None),
    ]);
    cases.push(Case {
        name: "tagged_host_ports",
        about: "two host links share port 5, told apart by tags 20 and 21",
        switches: vec![one(&[1, 2, 5], &[], trunk)],
        cables: vec![],
        steps: vec![
            step(
                "C (tag 20) to D leaves port 5 tagged 21",
                Frame(0, 5, tagged(&udp(3, "10.0.3.2", "10.0.4.2", 64, 3000), 20)),
                1,
            ),
            step(
                "A (untagged) to C leaves port 5 tagged 20",
                Frame(0, 1, udp(1, "10.0.1.2", "10.0.3.2", 64, 1001)),
                1,
            ),
            step(
                "C to A leaves port 1 untagged",
                Frame(0, 5, tagged(&udp(3, "10.0.3.2", "10.0.1.2", 64, 3001), 20)),
                1,
            ),
        ],
    });
    // vs1 (host A, port 1) and vs2 (host B, port 2) joined over the
    // loopback cable 3 <-> 4, tag 10.
    let cable_writes = vec![
        member(1, 1, hmac(1), smac(1)),
        member(2, 2, smac(2), smac(1)),
        member(3, 4, hmac(2), smac(2)),
        member(4, 3, smac(1), smac(2)),
        port_map(1, 0, 1, 1, 0, 0),
        port_map(3, 10, 1, 2, 0, 0),
        port_map(4, 10, 2, 3, 0, 0),
        port_map(2, 0, 2, 4, 0, 0),
        egress(1, 1, 0, 0, 0, 0),
        egress(2, 3, 10, 0, 0, 0),
        egress(3, 4, 10, 0, 0, 0),
        egress(4, 2, 0, 0, 0, 0),
        route(1, "10.0.1.0/24", Some(1), None),
        route(1, "10.0.2.0/24", Some(2), None),
        route(2, "10.0.2.0/24", Some(3), None),
        route(2, "10.0.1.0/24", Some(4), None),
    ];
    cases.push(Case {
        name: "loopback_cable",
        about: "two virtual switches of one BMv2 joined by a loopback cable (ports 3 <-> 4, tag 10)",
        switches: vec![one(&[1, 2], &[[3, 4]], cable_writes)],
        cables: vec![],
        steps: vec![
            step("A to B: two hops, TTL 62", Frame(0, 1, a_to_b()), 1),
            step("B to A", Frame(0, 2, b_to_a()), 1),
        ],
    });
    // The same two virtual switches on two BMv2s, cabled port 3 to port 3.
    let sw0 = vec![
        member(1, 1, hmac(1), smac(1)),
        member(2, 2, smac(2), smac(1)),
        port_map(1, 0, 1, 1, 0, 0),
        port_map(3, 10, 1, 2, 0, 0),
        egress(1, 1, 0, 0, 0, 0),
        egress(2, 3, 10, 0, 0, 0),
        route(1, "10.0.1.0/24", Some(1), None),
        route(1, "10.0.2.0/24", Some(2), None),
    ];
    let sw1 = vec![
        member(3, 4, hmac(2), smac(2)),
        member(4, 3, smac(1), smac(2)),
        port_map(3, 10, 2, 3, 0, 0),
        port_map(2, 0, 2, 4, 0, 0),
        egress(3, 3, 10, 0, 0, 0),
        egress(4, 2, 0, 0, 0, 0),
        route(2, "10.0.2.0/24", Some(3), None),
        route(2, "10.0.1.0/24", Some(4), None),
    ];
    cases.push(Case {
        name: "two_switches",
        about: "virtual switch 1 on BMv2 0, virtual switch 2 on BMv2 1, a cable between their ports 3 (tag 10)",
        switches: vec![one(&[1], &[], sw0), one(&[2], &[], sw1)],
        cables: vec![[PortRef { switch: 0, port: 3 }, PortRef { switch: 1, port: 3 }]],
        steps: vec![
            step("A (BMv2 0) to B (BMv2 1)", Frame(0, 1, a_to_b()), 1),
            step("B to A", Frame(1, 2, b_to_a()), 1),
        ],
    });
    cases.push(Case {
        name: "arp",
        about: "ARP requests for the gateway answered in the data plane; others dropped",
        switches: vec![one(&[1, 2], &[], two_hosts((0, 0), 0))],
        cables: vec![],
        steps: vec![
            step(
                "who-has 10.0.1.1: answered out of port 1",
                Frame(0, 1, arp_request(1, "10.0.1.2", "10.0.1.1")),
                1,
            ),
            step(
                "who-has 10.0.1.9: no answer",
                Frame(0, 1, arp_request(1, "10.0.1.2", "10.0.1.9")),
                0,
            ),
        ],
    });
    cases.push(Case {
        name: "punt_to_cpu",
        about: "IPv4 for the virtual switch's own addresses goes to the controller as PacketIn",
        switches: vec![one(&[1, 2], &[], two_hosts((0, 0), 0))],
        cables: vec![],
        steps: vec![
            step(
                "ping 10.0.1.1 from A",
                Frame(0, 1, ipv4(1, "10.0.1.2", "10.0.1.1", 64, None)),
                1,
            ),
            step(
                "UDP to 10.0.2.1 from B",
                Frame(0, 2, udp(2, "10.0.2.2", "10.0.2.1", 64, 179)),
                1,
            ),
        ],
    });
    cases.push(Case {
        name: "ttl_one",
        about: "TTL 1 is punted (the controller answers with ICMP); TTL 2 is forwarded with TTL 1",
        switches: vec![one(&[1, 2], &[], two_hosts((0, 0), 0))],
        cables: vec![],
        steps: vec![
            step(
                "TTL 1: PacketIn",
                Frame(0, 1, udp(1, "10.0.1.2", "10.0.2.2", 1, 1000)),
                1,
            ),
            step(
                "TTL 0: PacketIn",
                Frame(0, 1, udp(1, "10.0.1.2", "10.0.2.2", 0, 1000)),
                1,
            ),
            step(
                "TTL 2: forwarded",
                Frame(0, 1, udp(1, "10.0.1.2", "10.0.2.2", 2, 1000)),
                1,
            ),
        ],
    });
    let mut out_writes = two_hosts((0, 0), 0);
    out_writes.extend([port_map(5, 20, 1, 3, 0, 0), egress(3, 5, 20, 0, 0, 0)]);
    cases.push(Case {
        name: "packet_out",
        about: "the controller's packets leave by the virtual port their metadata names, not counted",
        switches: vec![one(&[1, 2, 5], &[], out_writes)],
        cables: vec![],
        steps: vec![
            step("PacketOut to vport 2: port 2", Out(1, 2, udp(9, "10.0.2.1", "10.0.2.2", 64, 179)), 1),
            step("PacketOut to vport 3: port 5 tagged 20", Out(1, 3, udp(9, "10.0.3.1", "10.0.3.2", 64, 179)), 1),
            step("PacketOut to vport 9 (no queue_mapper entry): dropped", Out(1, 9, udp(9, "10.0.3.1", "10.0.3.2", 64, 179)), 0),
        ],
    });
    let mut queues = two_hosts((0, 0), 7);
    queues.extend([
        member(3, 3, hmac(3), smac(1)),
        egress(3, 5, 0, 3, 0, 0),
        port_map(5, 0, 1, 3, 0, 0),
        route(1, "10.0.3.0/24", Some(3), None),
    ]);
    cases.push(Case {
        name: "queue_mapping",
        about: "frames mapped to queues 7 and 3 leave (BMv2 with 8 priority queues)",
        switches: vec![one(&[1, 2, 5], &[], queues)],
        cables: vec![],
        steps: vec![
            step("to B through queue 7", Frame(0, 1, a_to_b()), 1),
            step(
                "to C through queue 3",
                Frame(0, 1, udp(1, "10.0.1.2", "10.0.3.2", 64, 1002)),
                1,
            ),
            step("to A through queue 0", Frame(0, 2, b_to_a()), 1),
        ],
    });
    cases.push(Case {
        name: "port_mapper_miss",
        about: "frames on a (port, tag) with no port_mapper entry are dropped",
        switches: vec![one(&[1, 2, 5], &[], two_hosts((0, 0), 0))],
        cables: vec![],
        steps: vec![
            step("untagged on port 5", Frame(0, 5, a_to_b()), 0),
            step(
                "tagged 7 on port 1 (untagged port)",
                Frame(0, 1, tagged(&a_to_b(), 7)),
                0,
            ),
            step(
                "tagged 0 on port 1 is tagged",
                Frame(0, 1, tagged(&a_to_b(), 0)),
                0,
            ),
            step("untagged on port 1 still routed", Frame(0, 1, a_to_b()), 1),
        ],
    });
    // ECMP: 10.0.9.0/24 over four next hops on ports 2, 6, 7, 8.
    let mut ecmp = two_hosts((0, 0), 0);
    for (i, port) in [(3u16, 6u32), (4, 7), (5, 8)] {
        ecmp.extend([
            member(u32::from(i), i, hmac(i as u8), smac(1)),
            egress(i, port, 0, 0, 0, 0),
            port_map(port, 0, 1, i, 0, 0),
        ]);
    }
    ecmp.extend([
        Write::Group {
            id: 100,
            members: vec![2, 3, 4, 5],
        },
        route(1, "10.0.9.0/24", None, Some(100)),
    ]);
    let mut ecmp_steps = Vec::new();
    for sport in 0..16u16 {
        ecmp_steps.push(step(
            "a flow to 10.0.9.9: one member by the 5-tuple hash",
            Frame(0, 1, udp(1, "10.0.1.2", "10.0.9.9", 64, 40000 + sport * 7)),
            1,
        ));
    }
    ecmp_steps.push(step(
        "ICMP to 10.0.9.9 (no ports)",
        Frame(0, 1, ipv4(1, "10.0.1.2", "10.0.9.9", 64, None)),
        1,
    ));
    cases.push(Case {
        name: "ecmp_group",
        about: "a group of four members (action selector, crc16 of the 5-tuple): 16 flows spread",
        switches: vec![one(&[1, 2, 6, 7, 8], &[], ecmp)],
        cables: vec![],
        steps: ecmp_steps,
    });
    let mut delay = two_hosts((IN_DELAY_US, 0), 0);
    // A's link delays too: B -> A crosses both host links.
    delay[4] = egress(1, 1, 0, 0, LINK_DELAY_US, 0);
    cases.push(Case {
        name: "delay",
        about: "host link delays: B's 10 ms both ways, A's 20 ms towards A (recirculation on BMv2)",
        switches: vec![one(&[1, 2], &[], delay)],
        cables: vec![],
        steps: vec![
            step("A to B: B's link, 10 ms", Frame(0, 1, a_to_b()), 1),
            step(
                "B to A: B's inbound 10 ms + A's 20 ms",
                Frame(0, 2, b_to_a()),
                1,
            ),
            step(
                "PacketOut to A: A's 20 ms",
                Out(1, 1, udp(9, "10.0.1.1", "10.0.1.2", 64, 179)),
                1,
            ),
            step(
                "ARP from B: answered over B's link both ways, 20 ms",
                Frame(0, 2, arp_request(2, "10.0.2.2", "10.0.2.1")),
                1,
            ),
        ],
    });
    // Loss: every frame B's link carries is lost (threshold 2^32 - 1).
    let mut loss = two_hosts((0, u32::MAX), 0);
    loss.extend([
        member(3, 3, hmac(3), smac(1)),
        egress(3, 5, 0, 0, 0, 0),
        port_map(5, 0, 1, 3, 0, 0),
        route(1, "10.0.3.0/24", Some(3), None),
    ]);
    cases.push(Case {
        name: "loss",
        about: "a host link that loses everything both ways (threshold 0xffffffff), beside one that loses nothing",
        switches: vec![one(&[1, 2, 5], &[], loss)],
        cables: vec![],
        steps: vec![
            step("A to B: lost on B's link (vport_lost)", Frame(0, 1, a_to_b()), 0),
            step("B to A: lost entering (vport_rx_lost)", Frame(0, 2, b_to_a()), 0),
            step("A to C: no loss", Frame(0, 1, udp(1, "10.0.1.2", "10.0.3.2", 64, 1003)), 1),
            step("A to B again: lost", Frame(0, 1, udp(1, "10.0.1.2", "10.0.2.2", 64, 1004)), 0),
        ],
    });
    cases
}

// ------------------------------------------------------------ the rig

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One namespace per switch with its veths, and the BMv2s in them; all
/// go when dropped.
struct Rig {
    namespaces: Vec<String>,
    pids: Vec<u32>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        for &pid in &self.pids {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
            let base = std::env::temp_dir().join(ns);
            for extension in ["log", "ipc"] {
                let _ = std::fs::remove_file(base.with_extension(extension));
            }
        }
    }
}

impl Rig {
    fn new(case: &Case) -> Self {
        let mut rig = Rig {
            namespaces: Vec::new(),
            pids: Vec::new(),
        };
        for i in 0..case.switches.len() {
            let ns = format!("tnrec{}s{i}", std::process::id());
            ip(&["netns", "add", &ns]);
            rig.namespaces.push(ns.clone());
            // No IPv6 on the veths: no router solicitations or MLD reports
            // into the switch while recording.
            for key in ["all", "default"] {
                let out = Command::new("ip")
                    .args(["netns", "exec", &ns, "sysctl", "-qw"])
                    .arg(format!("net.ipv6.conf.{key}.disable_ipv6=1"))
                    .status()
                    .expect("sysctl");
                assert!(out.success());
            }
        }
        for (i, sw) in case.switches.iter().enumerate() {
            let ns = rig.namespaces[i].clone();
            for p in &sw.ports {
                ip(&[
                    "-n",
                    &ns,
                    "link",
                    "add",
                    &format!("p{p}"),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &format!("h{p}"),
                ]);
            }
            for [a, b] in &sw.loopbacks {
                ip(&[
                    "-n",
                    &ns,
                    "link",
                    "add",
                    &format!("p{a}"),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &format!("p{b}"),
                ]);
            }
        }
        for [a, b] in &case.cables {
            let (na, nb) = (&rig.namespaces[a.switch], &rig.namespaces[b.switch]);
            ip(&[
                "-n",
                na,
                "link",
                "add",
                &format!("p{}", a.port),
                "type",
                "veth",
                "peer",
                "name",
                &format!("p{}", b.port),
                "netns",
                nb,
            ]);
        }
        for ns in &rig.namespaces {
            let out = Command::new("ip")
                .args(["-n", ns, "-o", "link"])
                .output()
                .unwrap();
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let name = line
                    .split(": ")
                    .nth(1)
                    .unwrap_or("")
                    .split('@')
                    .next()
                    .unwrap_or("");
                ip(&["-n", ns, "link", "set", name, "up"]);
            }
        }
        rig
    }

    /// Every port of switch `i` BMv2 runs.
    fn bmv2_ports(case: &Case, i: usize) -> Vec<u32> {
        let sw = &case.switches[i];
        let mut ports = sw.ports.clone();
        ports.extend(sw.loopbacks.iter().flatten());
        ports.extend(
            case.cables
                .iter()
                .flatten()
                .filter(|p| p.switch == i)
                .map(|p| p.port),
        );
        ports.sort_unstable();
        ports
    }

    fn socket(&self, switch: usize, name: &str) -> PacketSocket {
        let ns: OwnedFd = turbonet_host::namespaces::open(&self.namespaces[switch]).unwrap();
        turbonet_host::namespaces::in_namespace(&ns, || {
            let index = nix::net::if_::if_nametoindex(name)?;
            PacketSocket::bind(index)
        })
        .unwrap()
    }
}

/// How long after an input the recorder waits for what it causes.
fn window(case: &Case) -> Duration {
    if case.name == "delay" {
        Duration::from_micros(2 * (LINK_DELAY_US + IN_DELAY_US)) + Duration::from_millis(300)
    } else {
        Duration::from_millis(300)
    }
}

async fn record(case: &Case, recorded_with: &str) -> Recording {
    let mut rig = Rig::new(case);
    let p4info = turbonet_p4info();
    let schema = Schema::new(&p4info).unwrap();
    let in_ids = packet_metadata(&p4info, "packet_in");
    let out_ids = packet_metadata(&p4info, "packet_out");
    let queues = switches::queues(&p4info).unwrap();
    let (pin_tx, mut pin_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut clients = Vec::new();
    let mut outs = Vec::new();
    for i in 0..case.switches.len() {
        let ns = rig.namespaces[i].clone();
        let log = std::env::temp_dir().join(format!("{ns}.log"));
        let ports = Rig::bmv2_ports(case, i);
        let device = i as u64 + 1;
        let pid = switches::start_bmv2("rec", &ns, (device, &ports, queues), &log)
            .await
            .unwrap();
        rig.pids.push(pid);
        let mut client = switches::connect_in(&ns, switches::BMV2_GRPC, device, 1)
            .await
            .unwrap();
        client
            .set_pipeline(p4info.clone(), turbonet_p4::TURBONET_BMV2_JSON.to_vec())
            .await
            .unwrap();
        let entities = case.switches[i]
            .writes
            .iter()
            .map(|w| w.entity(&schema).unwrap())
            .collect();
        client.write(update::Type::Insert, entities).await.unwrap();
        let (tx, mut rx) = client.packet_io().unwrap();
        let pin_tx = pin_tx.clone();
        tokio::spawn(async move {
            while let Some(Ok(msg)) = rx.next().await {
                if let Some(stream_message_response::Update::Packet(p)) = msg.update {
                    let _ = pin_tx.send((i, Instant::now(), p));
                }
            }
        });
        outs.push(tx);
        clients.push(client);
    }
    // Give BMv2 a moment after the writes (its ports come up).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sockets: Vec<(usize, u32, PacketSocket)> = case
        .switches
        .iter()
        .enumerate()
        .flat_map(|(i, sw)| sw.ports.iter().map(move |&p| (i, p)))
        .map(|(i, p)| (i, p, rig.socket(i, &format!("h{p}"))))
        .collect();
    let mut batch = RxBatch::new(64, 2048);
    let mut steps = Vec::new();
    for def in &case.steps {
        for (_, _, s) in &sockets {
            while s.recv_batch(&mut batch).unwrap_or(0) > 0 {}
        }
        while pin_rx.try_recv().is_ok() {}
        let (frame_in, packet_out) = match &def.input {
            Input::Frame(sw, port, frame) => (
                Some(FrameIn {
                    switch: *sw,
                    port: *port,
                    frame: hex(frame),
                }),
                None,
            ),
            Input::Out(vswitch, vport, payload) => (
                None,
                Some(Packet {
                    switch: 0,
                    metadata: [
                        ("vswitch".to_owned(), u64::from(*vswitch)),
                        ("vport".to_owned(), u64::from(*vport)),
                    ]
                    .into(),
                    payload: hex(payload),
                }),
            ),
        };
        let sent = Instant::now();
        match &def.input {
            Input::Frame(sw, port, frame) => {
                let (_, _, s) = sockets
                    .iter()
                    .find(|(i, p, _)| i == sw && p == port)
                    .unwrap();
                assert_eq!(
                    s.send_batch(std::slice::from_ref(frame)).unwrap(),
                    0,
                    "sent"
                );
            }
            Input::Out(..) => {
                let p = packet_out.as_ref().unwrap();
                outs[0]
                    .send(StreamMessageRequest {
                        update: Some(stream_message_request::Update::Packet(PacketOut {
                            payload: turbonet_softswitch::recording::unhex(&p.payload).unwrap(),
                            metadata: p.metadata(&out_ids).unwrap(),
                        })),
                    })
                    .await
                    .unwrap();
            }
        }
        let mut out = Vec::new();
        let mut packet_ins = Vec::new();
        let until = sent + window(case);
        while Instant::now() < until {
            for (i, port, s) in &sockets {
                let n = s.recv_batch(&mut batch).unwrap_or(0);
                for k in 0..n {
                    out.push(FrameOut {
                        switch: *i,
                        port: *port,
                        frame: hex(batch.frame(k)),
                        delay_us: sent.elapsed().as_micros() as u64,
                    });
                }
            }
            while let Ok((i, at, p)) = pin_rx.try_recv() {
                let _ = at;
                packet_ins.push(Packet::from_p4rt(i, &p.metadata, &p.payload, &in_ids));
            }
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
        out.sort();
        packet_ins.sort();
        assert_eq!(
            out.len() + packet_ins.len(),
            def.expect,
            "{}: {}: frames out {out:?}, PacketIns {packet_ins:?}",
            case.name,
            def.note
        );
        steps.push(Step {
            note: def.note.to_owned(),
            frame_in,
            packet_out,
            out,
            packet_ins,
        });
    }
    let mut counters = Vec::new();
    for (i, client) in clients.iter_mut().enumerate() {
        for name in COUNTERS {
            for e in client
                .read(counter_read(&schema, name).unwrap())
                .await
                .unwrap()
            {
                let Some(entity::Entity::CounterEntry(c)) = e.entity else {
                    continue;
                };
                let data = c.data.unwrap_or_default();
                if data.packet_count == 0 && data.byte_count == 0 {
                    continue;
                }
                counters.push(CounterCell {
                    switch: i,
                    counter: name.to_owned(),
                    index: c.index.map_or(0, |x| x.index as u64),
                    packets: data.packet_count as u64,
                    bytes: data.byte_count as u64,
                });
            }
        }
    }
    counters.sort();
    drop(outs);
    drop(rig);
    Recording {
        case: case.name.to_owned(),
        about: case.about.to_owned(),
        recorded_with: recorded_with.to_owned(),
        switches: case.switches.clone(),
        cables: case.cables.clone(),
        steps,
        counters,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "records softswitch/tests/bmv2/*.json: needs root and simple_switch_grpc on PATH (scripts/record-bmv2)"]
async fn record_bmv2() {
    // Run only when asked (`--ignored`): what it needs missing is a failure.
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (network namespaces, veths, BMv2's ports)"
    );
    let bmv2 = switches::find_bmv2().unwrap_or_else(|| {
        panic!(
            "{} is not on PATH (scripts/build-p4-tools builds it)",
            switches::BMV2
        )
    });
    let version = Command::new(&bmv2).arg("--version").output().unwrap();
    let recorded_with = format!(
        "simple_switch_grpc {} --priority-queues 8, p4/build/turbonet.json",
        String::from_utf8_lossy(&version.stdout).trim()
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../softswitch/tests/bmv2");
    std::fs::create_dir_all(&dir).unwrap();
    let only = std::env::var("TN_RECORD_CASE").ok();
    if let Some(o) = &only {
        let names: Vec<&str> = cases().iter().map(|c| c.name).collect();
        assert!(
            names.contains(&o.as_str()),
            "TN_RECORD_CASE={o} is no case; the cases: {}",
            names.join(", ")
        );
    }
    for case in cases() {
        if only.as_deref().is_some_and(|o| o != case.name) {
            continue;
        }
        let recording = record(&case, &recorded_with).await;
        let mut json = serde_json::to_string_pretty(&recording).unwrap();
        json.push('\n');
        std::fs::write(dir.join(format!("{}.json", case.name)), json).unwrap();
        println!("recorded {}: {} steps", case.name, recording.steps.len());
    }
}
