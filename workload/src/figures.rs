//! The figures nccl-tests reports for a collective, with its definitions
//! (nccl-tests `doc/PERFORMANCE.md`): the algorithm bandwidth is the
//! operation's size over its time; the bus bandwidth scales it by what
//! each rank must move over its link at best, so that it is comparable
//! with the link rate whatever the rank count:
//!
//! - AllReduce: `busbw = algbw x 2(n-1)/n`
//! - ReduceScatter, AllGather, AllToAll: `busbw = algbw x (n-1)/n`
//! - Broadcast: `busbw = algbw`

use serde::Serialize;

use crate::collective::Op;

/// What bus bandwidth multiplies the algorithm bandwidth by, for `op` over
/// `ranks` ranks.
pub fn bus_factor(op: Op, ranks: usize) -> f64 {
    let n = ranks as f64;
    match op {
        Op::AllReduce => 2.0 * (n - 1.0) / n,
        Op::ReduceScatter | Op::AllGather | Op::AllToAll => (n - 1.0) / n,
        Op::Broadcast => 1.0,
    }
}

/// One operation's time and bandwidths.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bandwidth {
    /// The operation's time, seconds.
    pub seconds: f64,
    /// Algorithm bandwidth, bytes per second.
    pub algbw: f64,
    /// Bus bandwidth, bytes per second.
    pub busbw: f64,
}

/// The figures of `op` over `ranks` ranks that moved `bytes` (its size as
/// nccl-tests counts it) in `seconds`.
pub fn bandwidth(op: Op, ranks: usize, bytes: u64, seconds: f64) -> Bandwidth {
    let algbw = if seconds > 0.0 {
        bytes as f64 / seconds
    } else {
        0.0
    };
    Bandwidth {
        seconds,
        algbw,
        busbw: algbw * bus_factor(op, ranks),
    }
}

/// The two-sided interval of `confidence` for the number of successes of
/// `n` independent trials of probability `p`: the smallest `lo` and `hi`
/// with P(X < lo) and P(X > hi) each at most (1 - confidence) / 2. Exact
/// (summing the distribution in log space) while the variance is small, a
/// normal approximation with continuity correction beyond.
pub fn binomial_interval(n: u64, p: f64, confidence: f64) -> (u64, u64) {
    let tail = (1.0 - confidence) / 2.0;
    if p <= 0.0 {
        return (0, 0);
    }
    if p >= 1.0 {
        return (n, n);
    }
    let nf = n as f64;
    let var = nf * p * (1.0 - p);
    if var > 100.0 {
        let z = normal_quantile(1.0 - tail);
        let (mean, sd) = (nf * p, var.sqrt());
        let lo = (mean - z * sd - 0.5).ceil().max(0.0) as u64;
        let hi = (mean + z * sd + 0.5).floor().min(nf) as u64;
        return (lo, hi);
    }
    // ln P(X = k), term by term from k = 0.
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut ln_pmf = nf * lq;
    let (mut cdf, mut lo, mut hi, mut k) = (0.0, None, n, 0u64);
    while k <= n {
        let pmf = ln_pmf.exp();
        if lo.is_none() && cdf + pmf > tail {
            lo = Some(k);
        }
        cdf += pmf;
        if 1.0 - cdf <= tail {
            hi = k;
            break;
        }
        // P(k+1) = P(k) * (n-k)/(k+1) * p/q
        ln_pmf += ((nf - k as f64) / (k as f64 + 1.0)).ln() + lp - lq;
        k += 1;
    }
    (lo.unwrap_or(0), hi)
}

/// The standard normal's quantile (Acklam's rational approximation,
/// relative error below 1.2e-9).
fn normal_quantile(q: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |t: f64| {
        let r = (-2.0 * t.ln()).sqrt();
        (((((C[0] * r + C[1]) * r + C[2]) * r + C[3]) * r + C[4]) * r + C[5])
            / ((((D[0] * r + D[1]) * r + D[2]) * r + D[3]) * r + 1.0)
    };
    if q < 0.02425 {
        tail(q)
    } else if q > 1.0 - 0.02425 {
        -tail(1.0 - q)
    } else {
        let x = q - 0.5;
        let r = x * x;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * x
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_factors_are_nccl_tests_factors() {
        assert_eq!(bus_factor(Op::AllReduce, 4), 1.5);
        assert_eq!(bus_factor(Op::AllGather, 4), 0.75);
        assert_eq!(bus_factor(Op::ReduceScatter, 8), 0.875);
        assert_eq!(bus_factor(Op::AllToAll, 2), 0.5);
        assert_eq!(bus_factor(Op::Broadcast, 16), 1.0);
    }

    #[test]
    fn binomial_intervals_cover_what_they_say() {
        // 1,000 trials at 1%: mean 10; the 99% interval is [3, 19]
        // (exact binomial quantiles 0.005 and 0.995).
        assert_eq!(binomial_interval(1000, 0.01, 0.99), (3, 19));
        // No loss expected: only 0 is consistent.
        assert_eq!(binomial_interval(500, 0.0, 0.99), (0, 0));
        // Large n: the normal approximation, centred on the mean.
        let (lo, hi) = binomial_interval(1_000_000, 0.05, 0.99);
        let sd = (1e6f64 * 0.05 * 0.95).sqrt();
        assert!((lo as f64 - (50_000.0 - 2.5758 * sd)).abs() < 2.0, "{lo}");
        assert!((hi as f64 - (50_000.0 + 2.5758 * sd)).abs() < 2.0, "{hi}");
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-6);
    }

    #[test]
    fn bandwidths_follow_from_size_and_time() {
        // 1 GB in 0.5 s over 8 ranks: algbw 2 GB/s, busbw 3.5 GB/s.
        let b = bandwidth(Op::AllReduce, 8, 1_000_000_000, 0.5);
        assert_eq!(b.algbw, 2e9);
        assert_eq!(b.busbw, 3.5e9);
        assert_eq!(bandwidth(Op::AllReduce, 8, 1, 0.0).algbw, 0.0);
    }
}
