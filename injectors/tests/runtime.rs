//! Changing parameters at run time (`turbonet link set`).

mod common;

use common::{drain, frame, index_of};
use turbonet_injectors::units::{Delay, LossProb, QueueLimit, Rate};
use turbonet_injectors::{Direction, Impairment, Loss};

#[test]
fn set_impairment_changes_only_what_follows() {
    let slow = Impairment {
        delay: Delay::from_millis(1),
        ..Impairment::default()
    };
    let mut dir = Direction::new(slow.clone(), 1);
    for i in 0..10 {
        dir.offer(i * 1_000, frame(64, i));
    }
    assert_eq!(dir.impairment(), &slow);
    let fast = Impairment {
        delay: Delay::from_millis(5),
        ..Impairment::default()
    };
    dir.set_impairment(fast.clone());
    assert_eq!(dir.impairment(), &fast);
    for i in 10..20 {
        dir.offer(i * 1_000, frame(64, i));
    }
    for (due, f) in drain(&mut dir) {
        let i = index_of(&f);
        let delay = if i < 10 { 1_000_000 } else { 5_000_000 };
        assert_eq!(due, i * 1_000 + delay, "frame {i}");
    }

    // Total loss from now on: queued frames still leave.
    dir.offer(100_000_000, frame(64, 100));
    dir.set_impairment(Impairment {
        loss: Some(Loss::Bernoulli(LossProb(1.0))),
        ..fast
    });
    for i in 101..200 {
        dir.offer(100_000_000, frame(64, i));
    }
    let out = drain(&mut dir);
    assert_eq!(out.len(), 1);
    assert_eq!(index_of(&out[0].1), 100);
    assert_eq!(dir.counters().dropped_loss, 99);
}

#[test]
fn a_shorter_delay_does_not_overtake_queued_frames() {
    // Without `reorder`, frames keep their order across a change.
    let mut dir = Direction::new(
        Impairment {
            delay: Delay::from_millis(5),
            ..Impairment::default()
        },
        1,
    );
    dir.offer(0, frame(64, 0));
    dir.set_impairment(Impairment {
        delay: Delay::from_millis(1),
        ..Impairment::default()
    });
    dir.offer(1, frame(64, 1));
    let out = drain(&mut dir);
    assert_eq!(out[0], (5_000_000, frame(64, 0)));
    assert_eq!(out[1], (5_000_000, frame(64, 1)));
}

#[test]
fn a_new_rate_applies_after_the_frames_already_queued() {
    let mut dir = Direction::new(
        Impairment {
            rate: Some(Rate::from_gbit(1)),
            ..Impairment::default()
        },
        1,
    );
    dir.offer(0, frame(1500, 0)); // ends at 12 us
    dir.offer(0, frame(1500, 1)); // ends at 24 us
    dir.set_impairment(Impairment {
        rate: Some(Rate::from_mbit(100)),
        queue: QueueLimit::Packets(3),
        ..Impairment::default()
    });
    dir.offer(0, frame(1500, 2)); // starts at 24 us, 120 us on the wire
    dir.offer(0, frame(1500, 3)); // the queue of 3 is full
    assert_eq!(dir.counters().dropped_queue, 1);
    let dues: Vec<u64> = drain(&mut dir).into_iter().map(|(d, _)| d).collect();
    assert_eq!(dues, vec![12_000, 24_000, 144_000]);
}

#[test]
fn from_params_to_direction() {
    let text = r#"
[lab]
name = "rt"
seed = 9
[topology]
kind = "fat-tree"
k = 2
[links.default]
rate = "1gbit"
delay = "10us"
ecn = "20p"
loss = { p = "1%", r = "50%" }
"#;
    let lab = turbonet_topo::parse("rt.toml", text).unwrap();
    let link = &lab.fabric.links[0];
    let imp = Impairment::from_params(&link.params);
    assert_eq!(imp.rate, Some(Rate::from_gbit(1)));
    assert_eq!(imp.queue, QueueLimit::Packets(1000));
    assert_eq!(imp.ecn, Some(QueueLimit::Packets(20)));
    assert!(!imp.is_noop());
    let seed = turbonet_injectors::direction_seed(lab.seed, &link.name, 0);
    let mut dir = Direction::new(imp, seed);
    for i in 0..1000 {
        dir.offer(i * 100_000, frame(64, i));
    }
    let delivered = drain(&mut dir).len() as u64;
    assert_eq!(delivered + dir.counters().dropped_loss, 1000);
}
