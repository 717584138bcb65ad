//! Random draws of the impairment pipeline, written out so that their
//! values depend only on the ChaCha8 stream (not on a distribution crate's
//! version).

use rand_chacha::ChaCha8Rng;
use rand_core::RngCore;
use turbonet_topo::units::LossProb;

use crate::impairment::{Distribution, Jitter};

/// A probability compiled for a 64-bit draw: an event happens when a
/// uniform `u64` is below `p * 2^64`. An `f32` or a 32-bit draw cannot
/// represent probabilities such as 1e-9 (2^-32 is 2.3e-10, so 1e-9 would be
/// off by 7%); 64 bits resolve 5.4e-20.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chance {
    /// p = 0: never, and no draw is made.
    Never,
    /// p = 1: always, and no draw is made.
    Always,
    /// 0 < p < 1.
    Below(u64),
}

impl Chance {
    /// The chance of probability `p`.
    pub fn new(p: LossProb) -> Chance {
        let p = p.probability();
        if p.is_nan() || p <= 0.0 {
            Chance::Never
        } else if p >= 1.0 {
            Chance::Always
        } else {
            // 2^64 as f64 is exact; the product is < 2^64, and the cast
            // saturates anyway. A positive p rounds to at least 1 so that
            // it is never silently turned into "never".
            let t = (p * 18_446_744_073_709_551_616.0) as u64;
            Chance::Below(t.max(1))
        }
    }

    /// Draws once (unless the outcome is certain).
    pub(crate) fn happens(self, rng: &mut ChaCha8Rng) -> bool {
        match self {
            Chance::Never => false,
            Chance::Always => true,
            Chance::Below(t) => rng.next_u64() < t,
        }
    }
}

/// A uniform draw in [0, n) without modulo bias worth speaking of
/// (Lemire's multiply-shift; the bias is below n / 2^64).
pub(crate) fn below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// A uniform draw in (0, 1]: 53 random bits, never 0 (so logarithms and
/// negative powers stay finite).
fn unit_open0(rng: &mut ChaCha8Rng) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// A standard normal draw (Box-Muller; the second value is discarded so
/// that every frame consumes the same number of draws).
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = unit_open0(rng);
    let u2 = unit_open0(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// netem's Pareto table (iproute2 `netem/pareto.c`): shape a = 3, scale 1,
/// shifted by its mean a/(a-1) = 1.5 so that it has mean 0; heavy right
/// tail, standard deviation about 0.87.
fn centered_pareto(rng: &mut ChaCha8Rng) -> f64 {
    unit_open0(rng).powf(-1.0 / 3.0) - 1.5
}

/// A jitter offset in nanoseconds (may be negative).
///
/// Like netem, the jitter amount is the spread: uniform draws lie in
/// `[-jitter, +jitter]`; normal draws have standard deviation `jitter`;
/// Pareto draws are netem's centered Pareto scaled by `jitter`; "pareto
/// normal" follows iproute2's `netem/paretonormal.c`, which blends a normal
/// value with three times a Pareto value scaled by 4/3, divided by 4 (the
/// table pairs the two by quantile; here they are independent draws, an
/// approximation of the same shape).
pub(crate) fn jitter_offset(rng: &mut ChaCha8Rng, jitter: &Jitter) -> i128 {
    let sigma = jitter.amount.as_nanos();
    if sigma == 0 {
        return 0;
    }
    let x = match jitter.distribution {
        Distribution::Uniform => {
            // Integer draw: exact for every amount.
            let span = u128::from(sigma) * 2 + 1;
            let v = (u128::from(rng.next_u64()) * span) >> 64;
            return v as i128 - i128::from(sigma);
        }
        Distribution::Normal => standard_normal(rng),
        Distribution::Pareto => centered_pareto(rng),
        Distribution::ParetoNormal => {
            (standard_normal(rng) + 3.0 * (4.0 / 3.0) * centered_pareto(rng)) / 4.0
        }
    };
    // `as` saturates at the i64 range: a huge tail value becomes a huge
    // but finite delay.
    (x * sigma as f64).round() as i64 as i128
}
