//! What a run or a graded lab checks: one vocabulary for an experiment's
//! `[[expect]]` clauses and a lab's `[[task.check]]` tables. Which checks
//! a section may hold is the reader's business; what each means, and how
//! it is said, is here.

use serde::Serialize;

/// The prefixes route checks name (re-exported for those who judge them).
pub use ipnet::Ipv4Net;

use super::NodeId;
use crate::experiment::{Bound, Figure, Of};
use crate::units::{Delay, LossProb};

/// One thing a run or a graded lab requires.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Check {
    /// Every host reaches every other (`turbonet check`), at the end of a
    /// run.
    Reachable,
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
    /// `node` has a usable route for `address` (longest prefix match, as
    /// the kernel forwards), every usable next hop of which leaves by port
    /// `dev` if given.
    Lookup {
        /// The node.
        node: NodeId,
        /// The destination looked up.
        address: std::net::Ipv4Addr,
        /// The port packets to it must leave by.
        dev: Option<String>,
    },
    /// `node`'s BGP session with `peer` is Established (or, with
    /// `established = false`, is not): as `turbonet show bgp` reports it,
    /// for built-in agents, FRR and BIRD alike.
    Bgp {
        /// The switch.
        node: NodeId,
        /// The neighbour at the other end of the session.
        peer: NodeId,
        /// Whether the session must be up.
        established: bool,
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
    /// The ports at both ends of a link (of every link, when `link` is
    /// `None`) are up (or, with `up = false`, down) and have MTU `mtu`.
    Link {
        /// The link's name, or `None` for every link of the fabric.
        link: Option<String>,
        /// Whether its ports must be up (both) or down (either).
        up: Option<bool>,
        /// The MTU both its ports must have.
        mtu: Option<u32>,
    },
    /// Every switch's FIB holds what BGP's plan says, and got there within
    /// `within`: of the timeline event `after` (a run), or of the last
    /// fail or restore, or of the agents' start (a graded lab).
    Converged {
        /// At most this long.
        within: Delay,
        /// The timeline event it follows (`None`: the last change).
        #[serde(skip_serializing_if = "Option::is_none")]
        after: Option<After>,
    },
    /// Frames of a kind a link carries while `lab check` runs the graded
    /// workloads (2 s when there are none), captured as `turbonet
    /// capture` does: at least `min`, at most `max`.
    Capture {
        /// The link's name.
        link: String,
        /// `a-b`, `b-a` or `both`.
        direction: String,
        /// Which frames count.
        frames: FrameKind,
        /// At least this many.
        min: Option<u64>,
        /// At most this many.
        max: Option<u64>,
    },
    /// What a `[[filter]]` counted while `lab check` ran the graded
    /// workloads: at least `min`, at most `max`.
    Filter {
        /// The filter's name.
        filter: String,
        /// Which counter.
        counter: FilterCounter,
        /// At least this many.
        min: Option<u64>,
        /// At most this many.
        max: Option<u64>,
    },
    /// A workload's figure within a bound: one of the run's workloads, one
    /// of a lab's graded workloads (which `lab check` runs, with every
    /// other graded workload of the tasks it grades), or one the student
    /// ran.
    Figure {
        /// The workload's name.
        workload: String,
        /// Whether the student runs it (`turbonet workload start`), not
        /// `lab check`.
        ran: bool,
        /// A collective's algorithm the workload must have used.
        algorithm: Option<String>,
        /// The figure.
        figure: Figure,
        /// Which of its values.
        of: Of,
        /// The bound (relative ones already resolved against their link).
        bound: Bound,
    },
    /// A UDP workload's loss is what independent loss with probability
    /// `p` would give: the lost count lies in the two-sided binomial
    /// interval of `confidence` around `p` times the datagrams sent.
    Binomial {
        /// The workload.
        workload: String,
        /// The loss probability.
        p: f64,
        /// The interval's coverage (0.99 unless written).
        confidence: f64,
    },
}

/// The timeline event a convergence check follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct After {
    /// Its index in the timeline.
    pub index: usize,
    /// Its name.
    pub event: String,
}

/// Which captured frames a capture check counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FrameKind {
    /// Every frame.
    Any,
    /// IPv4 TCP segments.
    Tcp,
    /// IPv4 UDP datagrams.
    Udp,
    /// IPv4 ICMP messages.
    Icmp,
    /// Frames whose IP header carries Congestion Experienced.
    EcnMarked,
    /// Frames the link dropped (its loss model or a full queue).
    Dropped,
}

impl FrameKind {
    /// Every kind with its name.
    pub const ALL: [(&'static str, FrameKind); 6] = [
        ("any", FrameKind::Any),
        ("tcp", FrameKind::Tcp),
        ("udp", FrameKind::Udp),
        ("icmp", FrameKind::Icmp),
        ("ecn-marked", FrameKind::EcnMarked),
        ("dropped", FrameKind::Dropped),
    ];

    /// Its name in lab files.
    pub fn name(self) -> &'static str {
        FrameKind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("any", |(n, _)| n)
    }
}

/// Which counter of a filter a filter check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilterCounter {
    /// Frames it dropped.
    Dropped,
    /// Frames it let through.
    Passed,
    /// Every frame it saw.
    Seen,
}

impl FilterCounter {
    /// Every counter with its name.
    pub const ALL: [(&'static str, FilterCounter); 3] = [
        ("dropped", FilterCounter::Dropped),
        ("passed", FilterCounter::Passed),
        ("seen", FilterCounter::Seen),
    ];

    /// Its name in lab files.
    pub fn name(self) -> &'static str {
        FilterCounter::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("dropped", |(n, _)| n)
    }
}

/// `at least 1`, `at most 0`, `1 to 5`.
pub fn count_range(min: Option<u64>, max: Option<u64>) -> String {
    match (min, max) {
        (Some(a), Some(b)) if a == b => format!("exactly {a}"),
        (Some(a), Some(b)) => format!("{a} to {b}"),
        (Some(a), None) => format!("at least {a}"),
        (None, Some(b)) => format!("at most {b}"),
        (None, None) => "any number of".to_owned(),
    }
}

impl FrameKind {
    /// How a count of these frames is said: `"ecn-marked "`, or nothing
    /// for any frame.
    pub fn adjective(self) -> String {
        match self {
            FrameKind::Any => String::new(),
            k => format!("{} ", k.name()),
        }
    }
}

impl FilterCounter {
    /// This counter's value, from a filter's frames seen and dropped.
    pub fn of(self, seen: u64, dropped: u64) -> u64 {
        match self {
            FilterCounter::Dropped => dropped,
            FilterCounter::Passed => seen.saturating_sub(dropped),
            FilterCounter::Seen => seen,
        }
    }

    /// What the filter did to the frames it counts: `dropped`, `passed`,
    /// `saw`.
    pub fn verb(self) -> &'static str {
        match self {
            FilterCounter::Dropped => "dropped",
            FilterCounter::Passed => "passed",
            FilterCounter::Seen => "saw",
        }
    }
}

impl Check {
    /// The lab's graded workload it grades (`workload = NAME` in a task),
    /// which `lab check` runs.
    pub fn graded_workload(&self) -> Option<&str> {
        match self {
            Check::Figure {
                workload,
                ran: false,
                ..
            } => Some(workload),
            _ => None,
        }
    }

    /// The workload of the student's it grades (`ran = NAME`).
    pub fn students_workload(&self) -> Option<&str> {
        match self {
            Check::Figure {
                workload,
                ran: true,
                ..
            } => Some(workload),
            _ => None,
        }
    }

    /// What it requires, in words, with `name` naming nodes.
    pub fn describe<'a>(&self, name: impl Fn(NodeId) -> &'a str) -> String {
        match self {
            Check::Reachable => "every host reaches every other".to_owned(),
            Check::Reach {
                from,
                to,
                reachable: true,
            } => format!("{} reaches {}", name(*from), name(*to)),
            Check::Reach { from, to, .. } => {
                format!("{} does not reach {}", name(*from), name(*to))
            }
            Check::Route {
                node,
                prefix,
                present: false,
                ..
            } => format!("{} has no route to {prefix}", name(*node)),
            Check::Route {
                node,
                prefix,
                ecmp: Some(n),
                ..
            } => format!("{} reaches {prefix} over {n} next hops", name(*node)),
            Check::Route { node, prefix, .. } => {
                format!("{} has a route to {prefix}", name(*node))
            }
            Check::Lookup {
                node,
                address,
                dev: Some(dev),
            } => format!("{} sends {address} out of {dev}", name(*node)),
            Check::Lookup { node, address, .. } => {
                format!("{} has a route for {address}", name(*node))
            }
            Check::Bgp {
                node,
                peer,
                established: true,
            } => format!(
                "{}'s BGP session with {} is established",
                name(*node),
                name(*peer)
            ),
            Check::Bgp { node, peer, .. } => {
                format!("{}'s BGP session with {} is down", name(*node), name(*peer))
            }
            Check::Command {
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
            Check::Link { link, up, mtu } => {
                let which = link.as_deref().unwrap_or("every link");
                let mut wants = Vec::new();
                match up {
                    Some(true) => wants.push("is up".to_owned()),
                    Some(false) => wants.push("is down".to_owned()),
                    None => {}
                }
                if let Some(m) = mtu {
                    wants.push(format!("has MTU {m} at both ends"));
                }
                format!("{which} {}", wants.join(" and "))
            }
            Check::Capture {
                link,
                direction,
                frames,
                min,
                max,
            } => {
                let kind = frames.adjective();
                let way = if direction == "both" {
                    String::new()
                } else {
                    format!(" ({direction})")
                };
                format!(
                    "{link}{way} carries {} {kind}frames while the workloads run",
                    count_range(*min, *max)
                )
            }
            Check::Filter {
                filter,
                counter,
                min,
                max,
            } => format!(
                "filter {filter}: {} {} frames while the workloads run",
                count_range(*min, *max),
                counter.name()
            ),
            Check::Converged {
                within,
                after: Some(after),
            } => format!("BGP converged within {within} of `{}`", after.event),
            Check::Converged { within, .. } => {
                format!("BGP converged within {within} of the last fail or restore")
            }
            Check::Figure {
                workload,
                ran,
                algorithm,
                figure,
                of,
                bound,
            } => {
                let whose = if *ran { "your workload " } else { "" };
                let how = algorithm
                    .as_ref()
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default();
                format!(
                    "{whose}{workload}{how}: {} {figure} {}",
                    of.name(),
                    bound.describe(figure.unit())
                )
            }
            Check::Binomial { workload, p, .. } => {
                format!("{workload}: loss consistent with p = {}", LossProb(*p))
            }
        }
    }
}
