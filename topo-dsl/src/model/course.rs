//! Graded labs: the tasks a student is given on a fabric (`[[task]]`),
//! each a set of checks `turbonet lab check` runs against the running lab.
//! A task scores its points when every one of its checks holds.

use std::fmt;

use serde::Serialize;

use super::NodeId;
use super::check::Check;

/// `[[task]]`: one graded task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    /// Short name, unique in the lab: what `lab check NAME` and
    /// `lab hint NAME` take.
    pub name: String,
    /// What the student is asked to do, in a line.
    pub title: String,
    /// Points it is worth (1 unless written).
    pub points: u32,
    /// A nudge for a student who is stuck (`lab hint NAME`).
    pub hint: Option<String>,
    /// What must hold, in file order.
    pub checks: Vec<Check>,
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.title)
    }
}

/// `[faults]`: what is broken in a troubleshooting lab before the student
/// starts. Each seed applies its own `pick` of the faults, so every student
/// of a seed meets the same faults, and another seed others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Faults {
    /// How many faults a seed applies.
    pub pick: usize,
    /// Every fault there is, in file order.
    pub faults: Vec<Fault>,
}

/// `[[faults.fault]]`: one fault, a command run in a node once the fabric
/// is up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// Its name, unique in the lab.
    pub name: String,
    /// Where it is made.
    pub node: NodeId,
    /// The command that makes it (through `sh -c` in the node).
    pub run: String,
}

impl Faults {
    /// The faults `seed` applies, in file order: the `pick` whose names
    /// hash lowest with the seed (the same on every machine and version).
    pub fn chosen(&self, seed: u64) -> Vec<&Fault> {
        let mut order: Vec<(u64, usize)> = self
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| (crate::seed::for_name(seed, &f.name), i))
            .collect();
        order.sort_unstable();
        let mut picked: Vec<usize> = order.iter().take(self.pick).map(|&(_, i)| i).collect();
        picked.sort_unstable();
        picked.into_iter().map(|i| &self.faults[i]).collect()
    }
}
