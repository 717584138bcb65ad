//! turbonet-topo: scenario files to validated fabric models.
//!
//! Pure: no I/O. [`parse`] turns the text of a scenario file into a [`Lab`]
//! (nodes, links, addresses, ASNs, prefixes, timeline) or into located
//! diagnostics ([`diag::ScenarioErrors`]); [`summary()`] condenses a lab for
//! `turbonet validate`. The scenario language is documented in
//! `docs/scenarios.md`.

pub mod chip;
pub mod diag;
pub mod machines;
pub mod mapper;
pub mod model;
pub mod partition;
pub mod seed;
pub mod suggest;
pub mod summary;
pub mod units;

mod generate;
mod plan;
mod read;
mod resolve;

pub use model::check;
pub use model::course;
pub use model::experiment;
pub use model::*;
pub use read::lab::{LAB_NAME_MAX, name_chars};

/// Parses and validates a scenario file. `origin` is the file name shown in
/// diagnostics. On failure every error found is returned, each located in
/// the text.
pub fn parse(origin: &str, text: &str) -> Result<Lab, diag::ScenarioErrors> {
    resolve::parse(origin, text)
}

/// `text` with its `[lab] name` replaced by `name` (what `turbonet serve`
/// does to a student's copy of a lab), everything else as written; `None`
/// when `text` has no `[lab] name` string to replace.
pub fn with_lab_name(text: &str, name: &str) -> Option<String> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let lab = root.get_ref().get("lab")?;
    let toml::de::DeValue::Table(table) = lab.get_ref() else {
        return None;
    };
    let value = table.get("name")?;
    let toml::de::DeValue::String(_) = value.get_ref() else {
        return None;
    };
    let span = value.span();
    let quoted = toml::Value::String(name.to_owned()).to_string();
    Some(format!(
        "{}{quoted}{}",
        &text[..span.start],
        &text[span.end..]
    ))
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
