//! turbonet-workload: what a workload does, computed before it runs.
//!
//! Pure: no I/O and no clock. A [`collective::Collective`] becomes a
//! [`collective::Schedule`] of steps, each a set of transfers that a rank
//! starts once it has received the previous step's inputs (as a
//! collective-communication library does); [`figures`] turns a measured
//! time into nccl-tests' algorithm and bus bandwidth; [`traffic`] draws
//! flows' endpoints, start times and ports from the scenario seed, so the
//! same seed gives the same run. The lab runs what these compute.

pub mod collective;
pub mod error;
pub mod figures;
pub mod traffic;

pub use error::{Error, Result};
