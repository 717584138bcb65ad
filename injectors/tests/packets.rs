//! What the pipeline does to frame contents: ECN marking, corruption,
//! duplication.

mod common;

use common::{drain, frame, index_of, ipv4_frame, ipv6_frame, l3_offset};
use turbonet_injectors::packet::{Ecn, ecn, mark_ce};
use turbonet_injectors::units::{LossProb, QueueLimit, Rate};
use turbonet_injectors::{Direction, Impairment};
use turbonet_packetio::checksum::internet_checksum;

const NOT_ECT: u8 = 0b00;
const ECT1: u8 = 0b01;
const ECT0: u8 = 0b10;
const CE: u8 = 0b11;

fn ecn_link(threshold: u32) -> Direction {
    Direction::new(
        Impairment {
            rate: Some(Rate::from_mbit(10)),
            queue: QueueLimit::Packets(100),
            ecn: Some(QueueLimit::Packets(threshold)),
            ..Impairment::default()
        },
        1,
    )
}

fn ipv4_header_ok(f: &[u8]) -> bool {
    let o = l3_offset(f);
    internet_checksum(&f[o..o + 20]) == 0
}

#[test]
fn ect_frames_are_marked_above_the_threshold() {
    for (bits, vlan) in [(ECT0, false), (ECT1, false), (ECT0, true)] {
        let mut dir = ecn_link(5);
        let original = ipv4_frame(bits, vlan);
        assert!(ipv4_header_ok(&original));
        for _ in 0..20 {
            dir.offer(0, original.clone());
        }
        let out = drain(&mut dir);
        assert_eq!(out.len(), 20);
        for (i, (_, f)) in out.iter().enumerate() {
            // Depth before frame i is i: frames 0..=4 pass, 5.. are marked.
            let want = if i < 5 { bits } else { CE };
            let o = l3_offset(f);
            assert_eq!(f[o + 1] & 0b11, want, "frame {i} (vlan {vlan})");
            assert_eq!(f[o + 1] >> 2, 0xb8 >> 2, "DSCP kept");
            assert!(ipv4_header_ok(f), "frame {i}: bad checksum after marking");
            // Nothing else changed.
            let mut same = f.clone();
            same[o + 1] = original[o + 1];
            same[o + 10..o + 12].copy_from_slice(&original[o + 10..o + 12]);
            assert_eq!(same, original);
        }
        assert_eq!(dir.counters().ecn_marked, 15);
        assert_eq!(dir.counters().dropped_queue, 0);
    }
}

#[test]
fn not_ect_and_non_ip_frames_are_untouched_and_not_dropped() {
    let mut dir = ecn_link(1);
    let v4 = ipv4_frame(NOT_ECT, false);
    let other = frame(100, 7);
    for _ in 0..50 {
        dir.offer(0, v4.clone());
        dir.offer(0, other.clone());
    }
    // 100 frames fit the 100-packet queue exactly: no drop for ECN.
    assert_eq!(dir.counters().dropped_queue, 0);
    assert_eq!(dir.counters().ecn_marked, 0);
    for (i, (_, f)) in drain(&mut dir).into_iter().enumerate() {
        assert_eq!(&f, if i % 2 == 0 { &v4 } else { &other });
    }
}

#[test]
fn ipv6_traffic_class_is_marked() {
    let mut dir = ecn_link(1);
    let original = ipv6_frame(ECT0);
    assert_eq!(ecn(&original), Some(Ecn::Ect0));
    dir.offer(0, original.clone());
    dir.offer(0, original.clone());
    let out = drain(&mut dir);
    assert_eq!(out[0].1, original);
    let marked = &out[1].1;
    assert_eq!(ecn(marked), Some(Ecn::Ce));
    // Traffic class 0xb8 | CE, version and flow label kept.
    assert_eq!(marked[14] >> 4, 6);
    assert_eq!(((marked[14] & 0x0f) << 4) | (marked[15] >> 4), 0xbb);
    assert_eq!(marked[15] & 0x0f, original[15] & 0x0f);
    assert_eq!(marked[16..], original[16..]);
    assert_eq!(dir.counters().ecn_marked, 1);
}

#[test]
fn mark_ce_directly() {
    let mut f = ipv4_frame(CE, false);
    let before = f.clone();
    assert!(mark_ce(&mut f), "already CE counts as marked");
    assert_eq!(f, before);
    let mut f = ipv6_frame(NOT_ECT);
    assert!(!mark_ce(&mut f));
    assert_eq!(ecn(&f), Some(Ecn::NotEct));
    let mut f = ipv4_frame(ECT1, true);
    assert!(mark_ce(&mut f));
    assert_eq!(ecn(&f), Some(Ecn::Ce));
    assert!(ipv4_header_ok(&f));
    assert_eq!(ecn(&frame(64, 0)), None);
}

#[test]
fn byte_thresholds() {
    let mut dir = Direction::new(
        Impairment {
            rate: Some(Rate::from_mbit(10)),
            ecn: Some(QueueLimit::Bytes(300)),
            ..Impairment::default()
        },
        1,
    );
    let f = ipv4_frame(ECT0, false); // 74 bytes
    assert_eq!(f.len(), 74);
    for _ in 0..6 {
        dir.offer(0, f.clone());
    }
    // Depths before: 0, 74, 148, 222, 296, 370 -> only the last is >= 300.
    assert_eq!(dir.counters().ecn_marked, 1);
}

#[test]
fn corruption_flips_exactly_one_bit_after_the_ethernet_header() {
    let mut dir = Direction::new(
        Impairment {
            corrupt: Some(LossProb(1.0)),
            ..Impairment::default()
        },
        4,
    );
    let n = 20_000u64;
    let len = 64;
    let mut hit = vec![0u32; len];
    for i in 0..n {
        let original = frame(len, i);
        dir.offer(i, original.clone());
        let got = dir.pop_due(i).unwrap();
        assert_eq!(got.len(), len);
        let diff: Vec<(usize, u8)> = got
            .iter()
            .zip(&original)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(k, (a, b))| (k, a ^ b))
            .collect();
        assert_eq!(diff.len(), 1, "frame {i}: {diff:?}");
        let (at, x) = diff[0];
        assert!(
            at >= 14,
            "frame {i}: byte {at} of the Ethernet header changed"
        );
        assert_eq!(x.count_ones(), 1, "frame {i}: {x:#010b}");
        hit[at] += 1;
    }
    // Every byte after the header is hit, about evenly (400 per byte).
    assert!(hit[..14].iter().all(|&h| h == 0));
    assert!(
        hit[14..].iter().all(|&h| (250..550).contains(&h)),
        "{hit:?}"
    );
    assert_eq!(dir.counters().corrupted, n);

    // A probability in between, and the rest untouched.
    let mut dir = Direction::new(
        Impairment {
            corrupt: Some(LossProb(0.01)),
            ..Impairment::default()
        },
        4,
    );
    let mut changed = 0u64;
    for i in 0..100_000 {
        let original = frame(100, i);
        dir.offer(i, original.clone());
        changed += u64::from(dir.pop_due(i).unwrap() != original);
    }
    assert_eq!(changed, dir.counters().corrupted);
    let (lo, hi) = common::binomial_99(100_000, 0.01);
    assert!((lo..=hi).contains(&changed), "{changed}");
}

#[test]
fn duplication_makes_copies() {
    let mut dir = Direction::new(
        Impairment {
            duplicate: Some(LossProb(1.0)),
            ..Impairment::default()
        },
        2,
    );
    for i in 0..100 {
        dir.offer(i, frame(80, i));
    }
    let out = drain(&mut dir);
    assert_eq!(out.len(), 200);
    for (k, (_, f)) in out.iter().enumerate() {
        assert_eq!(*f, frame(80, k as u64 / 2));
    }
    let c = dir.counters();
    assert_eq!((c.rx_packets, c.duplicated, c.tx_packets), (100, 100, 200));
    assert_eq!(c.tx_bytes, 200 * 80);

    let mut dir = Direction::new(
        Impairment {
            duplicate: Some(LossProb(0.1)),
            ..Impairment::default()
        },
        2,
    );
    for i in 0..100_000 {
        dir.offer(i, frame(64, i));
    }
    let dups = dir.counters().duplicated;
    let (lo, hi) = common::binomial_99(100_000, 0.1);
    assert!((lo..=hi).contains(&dups), "{dups}");
    let out = drain(&mut dir);
    assert_eq!(out.len() as u64, 100_000 + dups);
    // Copies follow their original.
    assert!(
        out.windows(2)
            .all(|w| index_of(&w[0].1) <= index_of(&w[1].1))
    );
}

#[test]
fn duplicates_take_queue_space() {
    let mut dir = Direction::new(
        Impairment {
            rate: Some(Rate::from_mbit(1)),
            queue: QueueLimit::Packets(3),
            duplicate: Some(LossProb(1.0)),
            ..Impairment::default()
        },
        2,
    );
    dir.offer(0, frame(100, 0));
    dir.offer(0, frame(100, 1)); // its copy does not fit
    let c = dir.counters();
    assert_eq!((c.duplicated, c.dropped_queue, c.queue_packets), (2, 1, 3));
}
