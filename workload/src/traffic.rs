//! Traffic matrices and flow schedules drawn from the scenario seed.
//!
//! A workload's flows are pairs of hosts (indices into its host list) that
//! a [`Pattern`] chooses, starting at times an [`Arrivals`] process
//! draws, each with its own source port (so the ECMP hash of a flow, and
//! the path it takes, is the same in every run with the same seed). Every
//! draw comes from one ChaCha8 stream seeded from the workload's seed, in
//! a fixed order: the same seed gives the same schedule with every build.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::Serialize;

use crate::error::{Error, Result};

pub use turbonet_topo::experiment::{Arrivals, OnOff, Pattern, Periods};

/// One flow of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Flow {
    /// Its number in the workload.
    pub id: usize,
    /// The sending host (index into the workload's hosts).
    pub src: usize,
    /// The receiving host.
    pub dst: usize,
    /// When it starts, after the workload starts.
    pub start: Duration,
    /// Its source port, from the dynamic range (RFC 6335: 49152-65535),
    /// distinct within the workload.
    pub sport: u16,
    /// Its destination port.
    pub dport: u16,
}

/// The first port of the dynamic range (RFC 6335 section 6).
const DYNAMIC: u16 = 49152;

/// Flows among `hosts` hosts that `pattern` chooses, starting as
/// `arrivals` says, seeded by `seed`; every flow goes to `dport`.
pub fn schedule(
    hosts: usize,
    pattern: &Pattern,
    arrivals: Arrivals,
    dport: u16,
    seed: u64,
) -> Result<Vec<Flow>> {
    let mut rng = ChaCha8Rng::from_seed(turbonet_topo::seed::chacha_key(seed));
    let need = match pattern {
        Pattern::Pairs(pairs) => pairs
            .iter()
            .map(|&(s, d)| s.max(d) + 1)
            .max()
            .unwrap_or(0)
            .max(2),
        // The receiver is one of the hosts.
        Pattern::Incast { to } => (to + 1).max(2),
        _ => 2,
    };
    if hosts < need {
        return Err(Error::TooFewHosts {
            pattern: pattern.name(),
            need,
            have: hosts,
        });
    }
    let pairs: Vec<(usize, usize)> = match *pattern {
        Pattern::Pairs(ref pairs) => pairs.clone(),
        Pattern::Incast { to } => (0..hosts).filter(|&h| h != to).map(|h| (h, to)).collect(),
        Pattern::Permutation => {
            let perm = derangement(hosts, &mut rng);
            (0..hosts).map(|h| (h, perm[h])).collect()
        }
        Pattern::AllToAll => (0..hosts)
            .flat_map(|s| (0..hosts).filter(move |&d| d != s).map(move |d| (s, d)))
            .collect(),
        Pattern::Random { count } => (0..count)
            .map(|_| {
                let s = below(&mut rng, hosts);
                let d = (s + 1 + below(&mut rng, hosts - 1)) % hosts;
                (s, d)
            })
            .collect(),
    };
    let ports = distinct_ports(pairs.len(), &mut rng);
    let mut clock = 0.0_f64;
    Ok(pairs
        .into_iter()
        .zip(ports)
        .enumerate()
        .map(|(id, ((src, dst), sport))| {
            let start = match arrivals {
                Arrivals::At(t) => t,
                Arrivals::Poisson { per_second } => {
                    clock += exponential(&mut rng, per_second);
                    Duration::from_secs_f64(clock)
                }
            };
            Flow {
                id,
                src,
                dst,
                start,
                sport,
                dport,
            }
        })
        .collect())
}

/// The periods in which an on/off flow sends, as offsets from its start:
/// `[begin, end)`, on first, without end. Exponential lengths are drawn
/// from `seed` (the flow's: the same seed, the same bursts).
#[derive(Debug, Clone)]
pub struct OnPeriods {
    on_off: OnOff,
    rng: ChaCha8Rng,
    /// Where the next on period begins, seconds.
    next: f64,
}

/// The on periods of a flow, drawn from `seed`.
pub fn on_periods(on_off: OnOff, seed: u64) -> OnPeriods {
    OnPeriods {
        on_off,
        rng: ChaCha8Rng::from_seed(turbonet_topo::seed::chacha_key(seed)),
        next: 0.0,
    }
}

impl Iterator for OnPeriods {
    type Item = (Duration, Duration);

    fn next(&mut self) -> Option<(Duration, Duration)> {
        let mean = |d: turbonet_topo::units::Delay| d.as_duration().as_secs_f64();
        let (on, off) = (mean(self.on_off.on), mean(self.on_off.off));
        let (on, off) = match self.on_off.periods {
            Periods::Fixed => (on, off),
            Periods::Exponential => (
                exponential(&mut self.rng, 1.0 / on),
                if off > 0.0 {
                    exponential(&mut self.rng, 1.0 / off)
                } else {
                    0.0
                },
            ),
        };
        let begin = self.next;
        self.next = begin + on + off;
        Some((
            Duration::from_secs_f64(begin),
            Duration::from_secs_f64(begin + on),
        ))
    }
}

/// How long a flow with `on_off` (drawn from `seed`) sends within its
/// first `span`.
pub fn on_time(on_off: OnOff, seed: u64, span: Duration) -> Duration {
    on_periods(on_off, seed)
        .take_while(|(begin, _)| *begin < span)
        .map(|(begin, end)| end.min(span) - begin)
        .sum()
}

/// A uniform draw in `0..n` (Lemire's multiply-and-reject, unbiased).
pub fn below(rng: &mut ChaCha8Rng, n: usize) -> usize {
    let n = n as u64;
    let threshold = n.wrapping_neg() % n;
    loop {
        let m = u128::from(rng.next_u64()) * u128::from(n);
        if (m as u64) >= threshold {
            return (m >> 64) as usize;
        }
    }
}

/// A uniform draw in [0, 1) with 53 bits.
pub fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// An exponential draw with this rate (mean `1 / rate`).
fn exponential(rng: &mut ChaCha8Rng, rate: f64) -> f64 {
    -(1.0 - unit(rng)).ln() / rate
}

/// A random permutation of `0..n` with no fixed point (Sattolo's
/// algorithm: a uniformly random single cycle).
fn derangement(n: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = below(rng, i);
        p.swap(i, j);
    }
    p
}

/// `count` distinct ports of the dynamic range, drawn without replacement
/// (wrapping around once the range is used up).
fn distinct_ports(count: usize, rng: &mut ChaCha8Rng) -> Vec<u16> {
    let range = usize::from(u16::MAX - DYNAMIC) + 1;
    let mut pool: Vec<u16> = (DYNAMIC..=u16::MAX).collect();
    (0..count)
        .map(|i| {
            let left = range - i % range;
            if left == range && i > 0 {
                pool = (DYNAMIC..=u16::MAX).collect();
            }
            let j = below(rng, left);
            pool.swap_remove(j)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Arrivals = Arrivals::At(Duration::ZERO);

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_another() {
        let p = Arrivals::Poisson { per_second: 100.0 };
        let a = schedule(16, &Pattern::Permutation, p, 5201, 7).unwrap();
        assert_eq!(a, schedule(16, &Pattern::Permutation, p, 5201, 7).unwrap());
        assert_ne!(a, schedule(16, &Pattern::Permutation, p, 5201, 8).unwrap());
    }

    #[test]
    fn a_permutation_sends_and_receives_once_per_host_never_to_itself() {
        for seed in 0..20 {
            let flows = schedule(9, &Pattern::Permutation, NOW, 5201, seed).unwrap();
            let mut dsts: Vec<usize> = flows.iter().map(|f| f.dst).collect();
            assert!(flows.iter().all(|f| f.src != f.dst));
            dsts.sort_unstable();
            assert_eq!(dsts, (0..9).collect::<Vec<_>>());
        }
    }

    #[test]
    fn incast_and_all_to_all_cover_their_pairs() {
        let incast = schedule(5, &Pattern::Incast { to: 2 }, NOW, 1, 0).unwrap();
        assert_eq!(incast.len(), 4);
        assert!(incast.iter().all(|f| f.dst == 2 && f.src != 2));
        // A receiver that is not one of the hosts.
        assert!(matches!(
            schedule(3, &Pattern::Incast { to: 5 }, NOW, 1, 0),
            Err(Error::TooFewHosts { need: 6, .. })
        ));
        let all = schedule(4, &Pattern::AllToAll, NOW, 1, 0).unwrap();
        assert_eq!(all.len(), 12);
        let random = schedule(3, &Pattern::Random { count: 200 }, NOW, 1, 0).unwrap();
        assert!(
            random
                .iter()
                .all(|f| f.src != f.dst && f.src < 3 && f.dst < 3)
        );
    }

    #[test]
    fn source_ports_are_distinct_and_dynamic() {
        let flows = schedule(40, &Pattern::AllToAll, NOW, 5201, 3).unwrap();
        let mut ports: Vec<u16> = flows.iter().map(|f| f.sport).collect();
        assert!(ports.iter().all(|&p| p >= DYNAMIC));
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), flows.len());
    }

    #[test]
    fn poisson_starts_grow_at_the_rate_asked() {
        let p = Arrivals::Poisson { per_second: 1000.0 };
        let flows = schedule(2, &Pattern::Random { count: 5000 }, p, 1, 11).unwrap();
        assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
        // 5000 arrivals at 1000/s end near 5 s (sd of the sum: sqrt(5000)/1000).
        let end = flows.last().unwrap().start.as_secs_f64();
        assert!((end - 5.0).abs() < 0.4, "{end}");
    }

    #[test]
    fn on_periods_alternate_and_exponential_ones_keep_their_means() {
        use turbonet_topo::units::Delay;
        let fixed = OnOff {
            on: Delay(100_000_000),
            off: Delay(300_000_000),
            periods: Periods::Fixed,
        };
        let ms = |d: Duration| d.as_millis();
        let first: Vec<_> = on_periods(fixed, 1)
            .take(3)
            .map(|(a, b)| (ms(a), ms(b)))
            .collect();
        assert_eq!(first, [(0, 100), (400, 500), (800, 900)]);
        assert_eq!(
            on_time(fixed, 1, Duration::from_millis(1_050)).as_millis(),
            300
        );
        let exp = OnOff {
            periods: Periods::Exponential,
            ..fixed
        };
        let periods: Vec<_> = on_periods(exp, 9).take(20_000).collect();
        assert!(periods.windows(2).all(|w| w[0].1 <= w[1].0));
        let on: f64 = periods.iter().map(|(a, b)| (*b - *a).as_secs_f64()).sum();
        let mean_on = on / periods.len() as f64;
        assert!((mean_on - 0.1).abs() < 0.005, "{mean_on}");
        let span = periods.last().unwrap().1.as_secs_f64();
        // A quarter of the time on, as the means say.
        assert!((on / span - 0.25).abs() < 0.01, "{}", on / span);
        let again: Vec<_> = on_periods(exp, 9).take(5).collect();
        assert_eq!(again, periods[..5]);
    }

    #[test]
    fn too_few_hosts_is_an_error() {
        assert_eq!(
            schedule(1, &Pattern::Permutation, NOW, 1, 0),
            Err(Error::TooFewHosts {
                pattern: "permutation",
                need: 2,
                have: 1
            })
        );
        assert!(schedule(3, &Pattern::Pairs(vec![(0, 5)]), NOW, 1, 0).is_err());
    }

    #[test]
    fn draws_below_n_are_uniform_enough() {
        let mut rng = ChaCha8Rng::from_seed(turbonet_topo::seed::chacha_key(1));
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[below(&mut rng, 3)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }
}
