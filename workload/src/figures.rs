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
    fn bandwidths_follow_from_size_and_time() {
        // 1 GB in 0.5 s over 8 ranks: algbw 2 GB/s, busbw 3.5 GB/s.
        let b = bandwidth(Op::AllReduce, 8, 1_000_000_000, 0.5);
        assert_eq!(b.algbw, 2e9);
        assert_eq!(b.busbw, 3.5e9);
        assert_eq!(bandwidth(Op::AllReduce, 8, 1, 0.0).algbw, 0.0);
    }
}
