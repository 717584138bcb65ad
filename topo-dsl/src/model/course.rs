//! Graded labs: the tasks a student is given on a fabric (`[[task]]`),
//! each a set of checks `turbonet lab check` runs against the running lab.
//! A task scores its points when every one of its checks holds.

use std::fmt;

use ipnet::Ipv4Net;
use serde::Serialize;

use super::NodeId;

/// `[[task]]`: one graded task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    pub checks: Vec<TaskCheck>,
}

/// `[[task.check]]`: one thing a task requires of the running lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TaskCheck {
    /// `from` reaches every address of `to` (ICMP echo from `from`'s
    /// namespace), or with `reachable = false` none of them.
    Reach {
        /// Where the probes start.
        from: NodeId,
        /// Where they go.
        to: NodeId,
        /// Whether they must be answered.
        reachable: bool,
    },
    /// `node`'s forwarding table has a route for exactly `prefix` (or,
    /// with `present = false`, none), with `ecmp` usable next hops if
    /// given.
    Route {
        /// The node.
        node: NodeId,
        /// The destination.
        prefix: Ipv4Net,
        /// Whether the route must be there.
        present: bool,
        /// How many usable next hops it must have.
        ecmp: Option<usize>,
    },
    /// `run` in `node`'s namespace (through `sh -c`) exits with `exit`,
    /// and prints `output` if given.
    Command {
        /// The node.
        node: NodeId,
        /// The command line.
        run: String,
        /// Its exit status.
        exit: i32,
        /// Text its output must contain.
        output: Option<String>,
    },
}

impl TaskCheck {
    /// What it requires, in words, with `name` naming nodes.
    pub fn describe<'a>(&self, name: impl Fn(NodeId) -> &'a str) -> String {
        match self {
            TaskCheck::Reach {
                from,
                to,
                reachable: true,
            } => format!("{} reaches {}", name(*from), name(*to)),
            TaskCheck::Reach { from, to, .. } => {
                format!("{} does not reach {}", name(*from), name(*to))
            }
            TaskCheck::Route {
                node,
                prefix,
                present: false,
                ..
            } => format!("{} has no route to {prefix}", name(*node)),
            TaskCheck::Route {
                node,
                prefix,
                ecmp: Some(n),
                ..
            } => format!("{} reaches {prefix} over {n} next hops", name(*node)),
            TaskCheck::Route { node, prefix, .. } => {
                format!("{} has a route to {prefix}", name(*node))
            }
            TaskCheck::Command {
                node,
                run,
                exit,
                output,
            } => {
                let mut s = format!("`{run}` on {} exits with {exit}", name(*node));
                if let Some(o) = output {
                    s.push_str(&format!(" and prints {o:?}"));
                }
                s
            }
        }
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.title)
    }
}
