//! The rate queue: serialization, tail drop, queueing delay.

mod common;

use common::{drain, frame, index_of};
use turbonet_injectors::units::{Delay, QueueLimit, Rate};
use turbonet_injectors::{Direction, Impairment};

const SECOND: u64 = 1_000_000_000;

#[test]
fn twice_the_rate_for_one_second() {
    let rate = Rate::from_mbit(100);
    let len = 1500u64;
    let queue = 100u64;
    let imp = Impairment {
        rate: Some(rate),
        queue: QueueLimit::Packets(queue as u32),
        ..Impairment::default()
    };
    let mut dir = Direction::new(imp, 1);
    // A 1500-byte frame takes 120 us at 100 Mbit/s; offer one every 60 us.
    let tx = 120_000u64;
    let gap = tx / 2;
    let offered = SECOND / gap;
    let mut delivered_bytes = 0u64;
    let mut last_accepted = None;
    for i in 0..offered {
        let now = i * gap;
        while let Some(f) = dir.pop_due(now) {
            delivered_bytes += f.len() as u64;
        }
        let before = dir.counters().dropped_queue;
        dir.offer(now, frame(len as usize, i));
        if dir.counters().dropped_queue == before {
            last_accepted = Some((now, i));
        }
        assert!(dir.counters().queue_packets <= queue);
    }
    while let Some(f) = dir.pop_due(SECOND) {
        delivered_bytes += f.len() as u64;
    }
    // Delivered by t = 1 s: the rate times 1 s, within one frame.
    let expected = rate.bytes_per_sec();
    assert!(
        delivered_bytes.abs_diff(expected) <= len,
        "delivered {delivered_bytes} B by 1 s, expected {expected}"
    );
    // About half the frames are dropped: what the link cannot carry, less
    // what is still queued at the end.
    let c = dir.counters().clone();
    let expected_drops = offered / 2 - queue;
    assert!(
        c.dropped_queue.abs_diff(expected_drops) <= 2,
        "{} drops of {offered}, expected about {expected_drops}",
        c.dropped_queue
    );
    assert_eq!(c.rx_packets, offered);
    // The last accepted frame waits behind a full queue: queue size / rate.
    let (at, index) = last_accepted.unwrap();
    let rest = drain(&mut dir);
    let (due, f) = rest.last().unwrap();
    assert_eq!(index_of(f), index);
    let waited = due - at;
    let full = queue * tx;
    assert!(
        waited.abs_diff(full) <= tx,
        "last frame waited {waited} ns, expected about {full}"
    );
    assert_eq!(dir.counters().queue_packets, 0);
    assert_eq!(dir.counters().queue_bytes, 0);
    assert_eq!(
        dir.counters().tx_packets + dir.counters().dropped_queue,
        offered
    );
}

#[test]
fn serialization_times_are_exact_and_rounded_up() {
    // 1 Gbit/s: 1500 B take exactly 12 us; 3 bit/ns rates round up.
    let imp = Impairment {
        rate: Some(Rate::from_gbit(1)),
        delay: Delay::from_micros(10),
        ..Impairment::default()
    };
    let mut dir = Direction::new(imp, 1);
    for i in 0..3 {
        dir.offer(0, frame(1500, i));
    }
    assert_eq!(dir.counters().queue_packets, 3);
    assert_eq!(dir.counters().queue_bytes, 4500);
    let dues: Vec<u64> = drain(&mut dir).into_iter().map(|(d, _)| d).collect();
    assert_eq!(dues, vec![22_000, 34_000, 46_000]);

    let imp = Impairment {
        rate: Some(Rate(3_000_000_000)),
        ..Impairment::default()
    };
    let mut dir = Direction::new(imp, 1);
    dir.offer(5, frame(100, 0)); // 800 bits / 3 bit/ns = 266.67 ns
    assert_eq!(dir.next_due(), Some(5 + 267));
}

#[test]
fn byte_limits_tail_drop() {
    let imp = Impairment {
        rate: Some(Rate::from_mbit(1)),
        queue: QueueLimit::Bytes(3000),
        ..Impairment::default()
    };
    let mut dir = Direction::new(imp, 1);
    dir.offer(0, frame(1000, 0));
    dir.offer(0, frame(1000, 1));
    dir.offer(0, frame(1001, 2)); // 3001 > 3000
    dir.offer(0, frame(1000, 3)); // exactly 3000
    dir.offer(0, frame(22, 4));
    let c = dir.counters();
    assert_eq!(c.dropped_queue, 2);
    assert_eq!(c.queue_bytes, 3000);
    let order: Vec<u64> = drain(&mut dir).iter().map(|(_, f)| index_of(f)).collect();
    assert_eq!(order, vec![0, 1, 3]);
}

#[test]
fn the_queue_drains_with_time() {
    let imp = Impairment {
        rate: Some(Rate::from_gbit(1)),
        queue: QueueLimit::Packets(2),
        ..Impairment::default()
    };
    let mut dir = Direction::new(imp, 1);
    dir.offer(0, frame(1500, 0)); // on the wire until 12 us
    dir.offer(0, frame(1500, 1)); // waits, ends at 24 us
    dir.offer(0, frame(1500, 2)); // full: dropped
    assert_eq!(dir.counters().dropped_queue, 1);
    dir.offer(12_000, frame(1500, 3)); // the first has left: accepted
    assert_eq!(dir.counters().dropped_queue, 1);
    assert_eq!(dir.counters().queue_packets, 2);
    let dues: Vec<u64> = drain(&mut dir).into_iter().map(|(d, _)| d).collect();
    assert_eq!(dues, vec![12_000, 24_000, 36_000]);
}

#[test]
fn without_a_rate_nothing_queues() {
    let imp = Impairment {
        queue: QueueLimit::Packets(1),
        delay: Delay::from_micros(1),
        ..Impairment::default()
    };
    let mut dir = Direction::new(imp, 1);
    for i in 0..10_000 {
        dir.offer(7, frame(9000, i));
        assert_eq!(dir.counters().queue_packets, 0);
        assert_eq!(dir.counters().queue_bytes, 0);
    }
    assert_eq!(dir.counters().dropped_queue, 0);
    let out = drain(&mut dir);
    assert_eq!(out.len(), 10_000);
    assert!(out.iter().all(|(d, _)| *d == 1_007));
    // Ties leave in offer order.
    assert!(
        out.iter()
            .enumerate()
            .all(|(i, (_, f))| index_of(f) == i as u64)
    );
}

#[test]
fn a_long_delay_holds_no_more_than_a_direction_may() {
    // 10 Gbit/s and 30 s of delay would be 37 GB on the wire.
    let imp = Impairment {
        rate: Some(Rate::from_mbit(10_000)),
        queue: QueueLimit::Packets(1000),
        delay: Delay::from_millis(30_000),
        ..Impairment::default()
    };
    let mut dir = Direction::new(imp, 1);
    let len = 1500usize;
    // Offered at the link's rate (1.2 us a frame), for long enough to
    // fill the bound twice over.
    let frames = 2 * turbonet_injectors::direction::IN_FLIGHT_MAX / len as u64;
    for i in 0..frames {
        dir.offer(i * 1_200, frame(len, i));
    }
    let held = dir.pending() as u64 * len as u64;
    assert!(
        held <= turbonet_injectors::direction::IN_FLIGHT_MAX,
        "{held} bytes held"
    );
    assert_eq!(
        dir.counters().dropped_queue,
        frames - dir.pending() as u64,
        "every frame past the bound is counted as dropped"
    );
    assert!(dir.pending() > 0);
}
