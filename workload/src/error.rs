//! What can be wrong with a workload's description.

/// A workload that cannot run as described.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A collective needs at least two ranks.
    #[error("a collective needs at least 2 ranks, this one has {0}")]
    TooFewRanks(usize),
    /// The algorithm does not implement the operation.
    #[error("{op} has no {algorithm} algorithm (valid: {valid})")]
    NoSuchAlgorithm {
        /// The operation.
        op: &'static str,
        /// The algorithm asked for.
        algorithm: &'static str,
        /// The operation's algorithms.
        valid: String,
    },
    /// Recursive halving-doubling pairs ranks by their bits.
    #[error("halving-doubling needs a power-of-two number of ranks, this job has {0}")]
    NotPowerOfTwo(usize),
    /// A broadcast's root is not a rank.
    #[error("root {root} is not a rank of a {ranks}-rank job")]
    NoSuchRoot {
        /// The root asked for.
        root: usize,
        /// The job's ranks.
        ranks: usize,
    },
    /// Per-pair sizes that are not a square matrix over the ranks.
    #[error("per-pair sizes must be {ranks} rows of {ranks}, found {found}")]
    BadSizes {
        /// The job's ranks.
        ranks: usize,
        /// What was found.
        found: String,
    },
    /// A traffic pattern that needs more hosts than it has.
    #[error("{pattern} needs at least {need} hosts, the workload has {have}")]
    TooFewHosts {
        /// The pattern.
        pattern: &'static str,
        /// Hosts it needs.
        need: usize,
        /// Hosts it has.
        have: usize,
    },
}

/// This crate's result.
pub type Result<T> = std::result::Result<T, Error>;
