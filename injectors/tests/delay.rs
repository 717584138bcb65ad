//! Propagation delay, jitter shapes and (no) reordering.

mod common;

use common::{drain, frame, index_of};
use turbonet_injectors::units::{Delay, Rate};
use turbonet_injectors::{Direction, Distribution, Impairment, Jitter};

fn jittered(amount: Delay, distribution: Distribution, reorder: bool) -> Impairment {
    Impairment {
        delay: Delay::from_millis(10),
        jitter: Some(Jitter {
            amount,
            distribution,
            reorder,
        }),
        ..Impairment::default()
    }
}

#[test]
fn fixed_delay_is_exact() {
    let delay = Delay::from_micros(250);
    let mut dir = Direction::new(
        Impairment {
            delay,
            ..Impairment::default()
        },
        1,
    );
    let mut arrivals = Vec::new();
    let mut now = 1_000u64;
    for i in 0..1000u64 {
        now += 1 + (i * 7919) % 977; // uneven gaps
        arrivals.push(now);
        dir.offer(now, frame(64, i));
    }
    for (i, (due, f)) in drain(&mut dir).into_iter().enumerate() {
        assert_eq!(index_of(&f), i as u64);
        assert_eq!(due, arrivals[i] + delay.as_nanos());
    }
}

#[test]
fn pop_due_respects_now() {
    let mut dir = Direction::new(
        Impairment {
            delay: Delay::from_micros(5),
            ..Impairment::default()
        },
        1,
    );
    assert_eq!(dir.next_due(), None);
    assert!(dir.pop_due(u64::MAX).is_none());
    dir.offer(0, frame(64, 0));
    dir.offer(1_000, frame(64, 1));
    assert_eq!(dir.next_due(), Some(5_000));
    assert!(dir.pop_due(4_999).is_none());
    assert_eq!(dir.pop_due(100_000).map(|f| index_of(&f)), Some(0));
    assert_eq!(dir.pop_due(100_000).map(|f| index_of(&f)), Some(1));
    assert!(dir.pop_due(100_000).is_none());
    assert_eq!(dir.counters().tx_packets, 2);
}

/// Offers `n` frames `gap` ns apart and returns the indices in pop order.
fn order(imp: Impairment, n: u64, gap: u64) -> Vec<u64> {
    let mut dir = Direction::new(imp, 99);
    for i in 0..n {
        dir.offer(i * gap, frame(64, i));
    }
    let out = drain(&mut dir);
    // Pop order is due order.
    assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    out.iter().map(|(_, f)| index_of(f)).collect()
}

#[test]
fn jitter_without_reorder_keeps_order() {
    for d in Distribution::ALL {
        let got = order(jittered(Delay::from_millis(1), d, false), 20_000, 1_000);
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{d} reordered without `reorder`"
        );
    }
}

#[test]
fn jitter_with_reorder_reorders() {
    for d in Distribution::ALL {
        let got = order(jittered(Delay::from_millis(1), d, true), 20_000, 1_000);
        let inversions = got.windows(2).filter(|w| w[0] > w[1]).count();
        assert!(inversions > 100, "{d}: only {inversions} inversions");
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, (0..20_000).collect::<Vec<_>>());
    }
}

/// Per-frame delays (due - arrival) of `n` frames offered alone.
fn samples(imp: Impairment, n: u64) -> Vec<i64> {
    let mut dir = Direction::new(imp, 5);
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let now = i * 1_000_000_000;
        dir.offer(now, frame(64, i));
        let due = dir.next_due().unwrap();
        assert!(dir.pop_due(due).is_some());
        out.push(due as i64 - now as i64);
    }
    out
}

fn mean_sd(x: &[i64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[test]
fn jitter_shapes() {
    let delay = 10_000_000.0;
    let j = Delay::from_micros(100);
    let sigma = j.as_nanos() as f64;
    let n = 200_000;

    // Uniform within +-jitter: sd = jitter / sqrt(3).
    let u = samples(jittered(j, Distribution::Uniform, true), n);
    assert!(u.iter().all(|&d| (d as f64 - delay).abs() <= sigma));
    let (m, sd) = mean_sd(&u);
    assert!((m - delay).abs() < 0.01 * sigma, "uniform mean {m}");
    assert!(
        (sd / (sigma / 3f64.sqrt()) - 1.0).abs() < 0.01,
        "uniform sd {sd}"
    );

    // Normal: sd = jitter, about 0.27% beyond 3 sd.
    let g = samples(jittered(j, Distribution::Normal, true), n);
    let (m, sd) = mean_sd(&g);
    assert!((m - delay).abs() < 0.01 * sigma, "normal mean {m}");
    assert!((sd / sigma - 1.0).abs() < 0.01, "normal sd {sd}");
    let beyond = g
        .iter()
        .filter(|&&d| (d as f64 - delay).abs() > 3.0 * sigma)
        .count() as f64
        / n as f64;
    assert!((beyond - 0.0027).abs() < 0.0008, "normal tail {beyond}");

    // Pareto (netem's table): mean 0, at least -1.5 jitter, heavy right
    // tail, sd about 0.87 jitter.
    let p = samples(jittered(j, Distribution::Pareto, true), n);
    assert!(p.iter().all(|&d| d as f64 >= delay - 1.5 * sigma - 1.0));
    let (m, sd) = mean_sd(&p);
    assert!((m - delay).abs() < 0.03 * sigma, "pareto mean {m}");
    assert!(sd > 0.6 * sigma && sd < 1.2 * sigma, "pareto sd {sd}");
    let max = *p.iter().max().unwrap() as f64;
    assert!(max > delay + 10.0 * sigma, "pareto max {max}");

    // Pareto-normal: mean 0, skewed right, spread between the two.
    let pn = samples(jittered(j, Distribution::ParetoNormal, true), n);
    let (m, sd) = mean_sd(&pn);
    assert!((m - delay).abs() < 0.03 * sigma, "paretonormal mean {m}");
    assert!(sd > 0.5 * sigma && sd < 1.3 * sigma, "paretonormal sd {sd}");
}

#[test]
fn jitter_never_delivers_before_transmission() {
    // Jitter 10x the delay: negative samples are clamped at tx_end.
    let imp = Impairment {
        rate: Some(Rate::from_gbit(10)),
        delay: Delay::from_micros(1),
        jitter: Some(Jitter {
            amount: Delay::from_micros(10),
            distribution: Distribution::Normal,
            reorder: true,
        }),
        ..Impairment::default()
    };
    let mut dir = Direction::new(imp, 3);
    let mut clamped = 0;
    for i in 0..10_000u64 {
        let now = i * 1_000_000;
        dir.offer(now, frame(1250, i)); // 1 us on the wire
        let due = dir.next_due().unwrap();
        assert!(due >= now + 1_000, "frame {i} due {due} before its tx end");
        clamped += usize::from(due == now + 1_000);
        dir.pop_due(due).unwrap();
    }
    // P(N(1us, 10us) < 0) is about 46%.
    assert!((4_000..5_200).contains(&clamped), "{clamped}");
}

#[test]
fn due_times_are_reproducible() {
    let run = |seed| {
        let mut dir = Direction::new(
            Impairment {
                rate: Some(Rate::from_mbit(500)),
                ..jittered(Delay::from_micros(50), Distribution::ParetoNormal, true)
            },
            seed,
        );
        for i in 0..5_000 {
            dir.offer(i * 3_000, frame(200 + (i as usize % 1000), i));
        }
        drain(&mut dir)
    };
    assert_eq!(run(8), run(8));
    assert_ne!(run(8), run(9));
}
