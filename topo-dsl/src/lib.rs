//! turbonet-topo: scenario files to validated fabric models.
//!
//! Pure: no I/O. [`parse`] turns the text of a scenario file into a [`Lab`]
//! (nodes, links, addresses, ASNs, prefixes, timeline) or into located
//! diagnostics ([`diag::ScenarioErrors`]); [`summary()`] condenses a lab for
//! `turbonet validate`. The scenario language is documented in
//! `docs/scenarios.md`.

pub mod chip;
pub mod diag;
pub mod mapper;
pub mod model;
pub mod seed;
pub mod suggest;
pub mod summary;
pub mod units;

mod generate;
mod plan;
mod read;
mod resolve;

pub use model::course;
pub use model::experiment;
pub use model::*;

/// Parses and validates a scenario file. `origin` is the file name shown in
/// diagnostics. On failure every error found is returned, each located in
/// the text.
pub fn parse(origin: &str, text: &str) -> Result<Lab, diag::ScenarioErrors> {
    resolve::parse(origin, text)
}

/// Parses `[[job]]` and `[[workload]]` tables to run on `lab` (started at
/// run time: `turbonet workload start FILE`); they may run over the lab's
/// own jobs. On failure every error found is returned, located in `text`.
pub fn parse_workloads(
    origin: &str,
    text: &str,
    lab: &Lab,
) -> Result<Vec<experiment::Workload>, diag::ScenarioErrors> {
    resolve::parse_workloads(origin, text, lab)
}

/// Summary of a lab for `turbonet validate`: counts, ranges, oversubscription.
pub fn summary(lab: &Lab) -> summary::Summary {
    summary::summary(lab)
}
