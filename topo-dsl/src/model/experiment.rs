//! What runs on a fabric, as a scenario declares it: jobs (hosts in rank
//! order), workloads (flows, collectives, commands) and expectations
//! (what a run must show). The vocabulary of collectives and traffic
//! patterns lives here because scenario files name it;
//! `turbonet-workload` computes schedules from it and the lab runs them.

use std::fmt;
use std::net::Ipv4Addr;
use std::time::Duration;

use serde::Serialize;

use super::NodeId;
use super::check::Check;
use crate::units::{Bytes, Delay, Rate};

/// A collective operation, named as nccl-tests names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Every rank ends with the reduction of every rank's buffer.
    AllReduce,
    /// Every rank ends with its share of the reduction.
    ReduceScatter,
    /// Every rank ends with every rank's share.
    AllGather,
    /// Every rank ends with the root's buffer.
    Broadcast,
    /// Every rank sends a block to every other rank.
    AllToAll,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 5] = [
        Op::AllReduce,
        Op::ReduceScatter,
        Op::AllGather,
        Op::Broadcast,
        Op::AllToAll,
    ];

    /// Its name in workload files.
    pub fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all-reduce",
            Op::ReduceScatter => "reduce-scatter",
            Op::AllGather => "all-gather",
            Op::Broadcast => "broadcast",
            Op::AllToAll => "all-to-all",
        }
    }

    /// The operation named `name`.
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Its algorithms, the default first.
    pub fn algorithms(self) -> &'static [Algorithm] {
        match self {
            Op::AllReduce => &[Algorithm::Ring, Algorithm::HalvingDoubling, Algorithm::Tree],
            Op::ReduceScatter | Op::AllGather => &[Algorithm::Ring],
            Op::Broadcast => &[Algorithm::Chain],
            Op::AllToAll => &[Algorithm::Pairwise],
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an operation's bytes move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// Around a ring in rank order, one chunk per step.
    Ring,
    /// Rabenseifner's recursive halving, then doubling.
    HalvingDoubling,
    /// A binary tree in rank order: reduce up, broadcast down.
    Tree,
    /// A chain from the root, pipelined in chunks.
    Chain,
    /// Pairwise exchange.
    Pairwise,
}

impl Algorithm {
    /// Every algorithm.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Ring,
        Algorithm::HalvingDoubling,
        Algorithm::Tree,
        Algorithm::Chain,
        Algorithm::Pairwise,
    ];

    /// Its name in workload files.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::HalvingDoubling => "halving-doubling",
            Algorithm::Tree => "tree",
            Algorithm::Chain => "chain",
            Algorithm::Pairwise => "pairwise",
        }
    }

    /// The algorithm named `name`.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which hosts send to which (indices into a workload's hosts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// These pairs, `(source, destination)`.
    Pairs(Vec<(usize, usize)>),
    /// Every other host to this one (many to one).
    Incast {
        /// The receiver.
        to: usize,
    },
    /// A random permutation without fixed points: every host sends to one
    /// other and receives from one other.
    Permutation,
    /// Every ordered pair of distinct hosts.
    AllToAll,
    /// This many pairs of distinct hosts, drawn uniformly.
    Random {
        /// The pairs drawn.
        count: usize,
    },
}

impl Pattern {
    /// Every pattern's name, as workload files write them.
    pub const NAMES: [&'static str; 5] = ["pairs", "incast", "permutation", "all-to-all", "random"];

    /// Its name in workload files.
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::Pairs(_) => "pairs",
            Pattern::Incast { .. } => "incast",
            Pattern::Permutation => "permutation",
            Pattern::AllToAll => "all-to-all",
            Pattern::Random { .. } => "random",
        }
    }
}

/// When flows start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrivals {
    /// Every flow at this time after the workload starts.
    At(Duration),
    /// A Poisson process of this many flows per second from the start: the
    /// gaps between starts are exponential.
    Poisson {
        /// Mean flows per second.
        per_second: f64,
    },
}

/// One rank of a job: a host, and the address it uses (that of one of its
/// rails: on HPN each rail NIC has an address of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rank {
    /// The host.
    pub host: NodeId,
    /// Which of its addresses (rail), counting distinct port addresses in
    /// port order.
    pub rail: u32,
    /// That address.
    pub addr: Ipv4Addr,
}

impl Rank {
    /// What its links on its address carry together (both ports of a
    /// dual-ToR rail NIC), each way; `None` when one of them has no rate.
    pub fn capacity(&self, fabric: &super::Fabric) -> Option<Rate> {
        let node = fabric.node(self.host);
        let mut total = 0u64;
        for &l in &node.links {
            let link = fabric.link(l);
            let (mine, _) = link.ends_from(self.host)?;
            if mine.addr.addr() == self.addr {
                total += link.params.rate?.bits_per_sec();
            }
        }
        (total > 0).then_some(Rate(total))
    }
}

/// `[[job]]`: hosts in rank order that workloads run over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Its name, unique among jobs.
    pub name: String,
    /// Its ranks, rank 0 first.
    pub ranks: Vec<Rank>,
}

/// How much a TCP flow sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Amount {
    /// This many bytes, then the flow completes.
    Bytes(Bytes),
    /// As much as it can for this long.
    For(Delay),
}

/// How a UDP sender spaces its datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pacing {
    /// Evenly, at the rate.
    Constant,
    /// Exponential gaps whose mean gives the rate.
    Poisson,
}

/// How fast a UDP flow sends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Offered {
    /// This payload rate per flow.
    Rate(Rate),
    /// This fraction of each sender's rail capacity (the rates of its
    /// links on the rank's address), on the wire, shared evenly among the
    /// flows it sends: background load.
    Load(f64),
}

/// Bytes a datagram adds on the wire to its payload: Ethernet (14), IPv4
/// (20) and UDP (8) headers, as link rates count frames.
pub const UDP_WIRE_OVERHEAD: u32 = 42;

impl Offered {
    /// The payload rate of one of `flows` flows from a sender whose rail
    /// carries `capacity` bits per second, with `size`-byte payloads.
    pub fn per_flow(self, capacity: Option<Rate>, flows: usize, size: u32) -> Rate {
        match self {
            Offered::Rate(r) => r,
            Offered::Load(f) => {
                let wire = capacity.map_or(0.0, |c| c.bits_per_sec() as f64) * f;
                let payload = wire * f64::from(size) / f64::from(size + UDP_WIRE_OVERHEAD);
                Rate((payload / flows.max(1) as f64).round() as u64)
            }
        }
    }
}

/// How long each on and off period of a flow lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Periods {
    /// Exactly `on`, then exactly `off`.
    Fixed,
    /// Exponentially distributed with those means (drawn from the flow's
    /// seed).
    Exponential,
}

/// A flow that sends in bursts: on for a while, then silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OnOff {
    /// How long it sends (the mean, for exponential periods).
    pub on: Delay,
    /// How long it is silent.
    pub off: Delay,
    /// How the periods' lengths are drawn.
    pub periods: Periods,
}

/// Bytes at the front of every datagram a UDP workload sends: flow (4),
/// sequence (8), send time (8).
pub const UDP_HEADER: u32 = 20;

/// What a workload does.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// TCP bulk flows.
    Tcp {
        /// Who sends to whom.
        pattern: Pattern,
        /// When flows start.
        arrivals: Arrivals,
        /// How much each sends.
        amount: Amount,
        /// Congestion control (`cubic`, `bbr`, `reno`: what the kernel
        /// has), the kernel's default when `None`.
        congestion: Option<String>,
        /// Sends only in on periods (`None`: all the time).
        on_off: Option<OnOff>,
    },
    /// UDP flows at a rate, with timestamped, numbered datagrams.
    Udp {
        /// Who sends to whom.
        pattern: Pattern,
        /// When flows start.
        arrivals: Arrivals,
        /// Each flow's rate (payload bits per second), or the load its
        /// sender puts on its links (while on).
        rate: Offered,
        /// Payload bytes per datagram.
        size: u32,
        /// How long each flow sends.
        duration: Delay,
        /// How datagrams are spaced.
        pacing: Pacing,
        /// Sends only in on periods (`None`: all the time).
        on_off: Option<OnOff>,
    },
    /// A collective operation, repeated.
    Collective {
        /// The operation.
        op: Op,
        /// Its algorithm (the operation's default when `None`).
        algorithm: Option<Algorithm>,
        /// Operation sizes, as nccl-tests counts them, smallest first.
        sizes: Vec<Bytes>,
        /// Timed repetitions per size.
        iterations: u32,
        /// Untimed repetitions per size before them.
        warmup: u32,
        /// Time between repetitions (the compute they stand for).
        gap: Delay,
        /// Broadcast: the root rank.
        root: usize,
        /// All-to-all: destinations skewed with this Zipf exponent (an
        /// expert-parallel dispatch), uniform when `None`.
        skew: Option<f64>,
    },
    /// A command on every rank.
    Exec {
        /// The program and its arguments.
        command: Vec<String>,
    },
    /// Attack traffic: every rank floods `target` with packets whose source
    /// addresses are drawn (seeded) from `spoof`, so source-address
    /// validation can be measured.
    Flood {
        /// The host attacked (any host of the fabric).
        target: NodeId,
        /// UDP datagrams or TCP SYNs.
        protocol: FloodProtocol,
        /// Packets per second, per rank.
        pps: u32,
        /// How long each rank sends.
        duration: Delay,
        /// The source addresses (`None`: the rank's own).
        spoof: Option<ipnet::Ipv4Net>,
        /// The destination port.
        port: u16,
        /// UDP payload bytes.
        size: u32,
    },
}

/// What a flood sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FloodProtocol {
    /// UDP datagrams.
    Udp,
    /// TCP SYNs (connection attempts never completed).
    Syn,
}

impl FloodProtocol {
    /// Its name in workload files.
    pub fn name(self) -> &'static str {
        match self {
            FloodProtocol::Udp => "udp",
            FloodProtocol::Syn => "syn",
        }
    }
}

impl WorkloadKind {
    /// Its name in workload files.
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadKind::Tcp { .. } => "tcp",
            WorkloadKind::Udp { .. } => "udp",
            WorkloadKind::Collective { .. } => "collective",
            WorkloadKind::Exec { .. } => "exec",
            WorkloadKind::Flood { .. } => "flood",
        }
    }
}

/// `[[workload]]`: something that runs on a job's hosts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    /// Its name, unique among workloads.
    pub name: String,
    /// The job it runs over.
    pub job: String,
    /// The job's ranks (a copy: a workload stands on its own once read).
    pub ranks: Vec<Rank>,
    /// When it starts, after the fabric is ready.
    pub start: Delay,
    /// Its seed: the scenario's, mixed with its name.
    pub seed: u64,
    /// A graded lab's workload, named by a task's check: `lab check` runs
    /// it, not the fabric being ready.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub graded: bool,
    /// What it does.
    #[serde(flatten)]
    pub kind: WorkloadKind,
}

impl Workload {
    /// How long it runs from its start, when that is set (a flow or a
    /// flood for a duration); `None` when it runs until done (a transfer
    /// of so many bytes, a collective, a command).
    pub fn length(&self) -> Option<std::time::Duration> {
        match &self.kind {
            WorkloadKind::Tcp {
                amount: Amount::For(d),
                ..
            }
            | WorkloadKind::Udp { duration: d, .. }
            | WorkloadKind::Flood { duration: d, .. } => Some(d.as_duration()),
            _ => None,
        }
    }
}

/// A figure a workload reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Figure {
    /// A collective's bus bandwidth (nccl-tests' busbw), bits per second.
    Busbw,
    /// A collective's algorithm bandwidth, bits per second.
    Algbw,
    /// A collective operation's time.
    Time,
    /// A flow's goodput, bits per second.
    Goodput,
    /// A flow's completion time.
    Fct,
    /// A TCP flow's retransmitted segments.
    Retransmits,
    /// A UDP flow's lost datagrams, as a fraction of those sent.
    Loss,
    /// A UDP flow's mean one-way delay.
    Delay,
    /// A command's exit code.
    Exit,
}

impl Figure {
    /// Every figure, in the order the help lists them.
    pub const ALL: [Figure; 9] = [
        Figure::Busbw,
        Figure::Algbw,
        Figure::Time,
        Figure::Goodput,
        Figure::Fct,
        Figure::Retransmits,
        Figure::Loss,
        Figure::Delay,
        Figure::Exit,
    ];

    /// Its name in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Figure::Busbw => "busbw",
            Figure::Algbw => "algbw",
            Figure::Time => "time",
            Figure::Goodput => "goodput",
            Figure::Fct => "fct",
            Figure::Retransmits => "retransmits",
            Figure::Loss => "loss",
            Figure::Delay => "delay",
            Figure::Exit => "exit",
        }
    }

    /// What its values are.
    pub fn unit(self) -> FigureUnit {
        match self {
            Figure::Busbw | Figure::Algbw | Figure::Goodput => FigureUnit::Rate,
            Figure::Time | Figure::Fct | Figure::Delay => FigureUnit::Time,
            Figure::Retransmits | Figure::Exit => FigureUnit::Count,
            Figure::Loss => FigureUnit::Fraction,
        }
    }

    /// The workload kinds that report it.
    pub fn kinds(self) -> &'static [&'static str] {
        match self {
            Figure::Busbw | Figure::Algbw | Figure::Time => &["collective"],
            Figure::Goodput | Figure::Fct => &["tcp", "udp"],
            Figure::Retransmits => &["tcp"],
            Figure::Loss => &["udp", "flood"],
            Figure::Delay => &["udp"],
            Figure::Exit => &["exec"],
        }
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kind of value a figure has; bounds are written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FigureUnit {
    /// Bits per second (`"1gbit"`).
    Rate,
    /// Seconds (`"2s"`).
    Time,
    /// A plain number.
    Count,
    /// A fraction (`"1%"`).
    Fraction,
}

impl FigureUnit {
    /// A value in this unit (in its base unit: bits per second, seconds, a
    /// count, a fraction), in scenario syntax.
    pub fn show(self, v: f64) -> String {
        match self {
            FigureUnit::Rate => Rate(v.round().max(0.0) as u64).to_string(),
            FigureUnit::Time => Delay((v * 1e9).round().max(0.0) as u64).to_string(),
            FigureUnit::Count => format!("{v}"),
            FigureUnit::Fraction => crate::units::LossProb(v).to_string(),
        }
    }
}

impl FigureUnit {
    /// A value in this unit for people: three significant digits and a
    /// unit (`1.55 Gbit/s`, `9.45 ms`, `0.12%`).
    pub fn human(self, v: f64) -> String {
        match self {
            FigureUnit::Rate => scaled(
                v,
                &[
                    (1e12, "Tbit/s"),
                    (1e9, "Gbit/s"),
                    (1e6, "Mbit/s"),
                    (1e3, "kbit/s"),
                    (1.0, "bit/s"),
                ],
            ),
            FigureUnit::Time => scaled(v, &[(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")]),
            FigureUnit::Count => format!("{v}"),
            FigureUnit::Fraction => format!("{}%", sig(v * 100.0)),
        }
    }
}

/// Bytes for people, as [`FigureUnit::human`] writes figures: three
/// significant digits and a decimal unit (`32.3 MB`).
pub fn human_bytes(b: u64) -> String {
    scaled(
        b as f64,
        &[
            (1e12, "TB"),
            (1e9, "GB"),
            (1e6, "MB"),
            (1e3, "kB"),
            (1.0, "B"),
        ],
    )
}

/// Three significant digits.
fn sig(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `v` in the first of `units` (largest first) it reaches, or the last.
fn scaled(v: f64, units: &[(f64, &str)]) -> String {
    let (f, u) = units
        .iter()
        .find(|(f, _)| v.abs() >= *f)
        .copied()
        .unwrap_or(*units.last().expect("units"));
    format!("{} {u}", sig(v / f))
}

/// Which of a workload's values a bound applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Of {
    /// Every value (every flow; every size's mean for a collective).
    Each,
    /// Their mean.
    Mean,
    /// The smallest.
    Min,
    /// The largest.
    Max,
    /// Their sum; for goodput, every flow's bytes over the span from the
    /// first start to the last byte (goodputs over different spans do not
    /// add up).
    Total,
}

impl Of {
    /// Every choice with its name.
    pub const ALL: [(&'static str, Of); 5] = [
        ("each", Of::Each),
        ("mean", Of::Mean),
        ("min", Of::Min),
        ("max", Of::Max),
        ("total", Of::Total),
    ];

    /// Its name in scenario files.
    pub fn name(self) -> &'static str {
        Of::ALL
            .iter()
            .find(|(_, o)| *o == self)
            .map_or("each", |(n, _)| n)
    }
}

/// A bound on a figure, in the figure's base unit (bits per second,
/// seconds, a count or a fraction).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Bound {
    /// At least this.
    pub min: Option<f64>,
    /// At most this.
    pub max: Option<f64>,
}

impl Bound {
    /// `x` lies within the bound.
    pub fn holds(self, x: f64) -> bool {
        self.min.is_none_or(|m| x >= m) && self.max.is_none_or(|m| x <= m)
    }

    /// The bound for people, in `unit`: `>= 1 Gbit/s`, `in [1 s, 2 s]`.
    pub fn describe(self, unit: FigureUnit) -> String {
        match (self.min, self.max) {
            (Some(a), Some(b)) => format!("in [{}, {}]", unit.human(a), unit.human(b)),
            (Some(a), None) => format!(">= {}", unit.human(a)),
            (None, Some(b)) => format!("<= {}", unit.human(b)),
            (None, None) => "any value".to_owned(),
        }
    }
}

/// `[[expect]]`: what a run must show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expect {
    /// Its name (written, or made from what it checks): the test case's
    /// name in JUnit.
    pub name: String,
    /// What it checks.
    #[serde(flatten)]
    pub check: Check,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_print_for_people_with_three_digits_and_a_unit() {
        assert_eq!(FigureUnit::Rate.human(1_553_763_239.0), "1.55 Gbit/s");
        assert_eq!(FigureUnit::Rate.human(887_864_708.0), "888 Mbit/s");
        assert_eq!(FigureUnit::Time.human(0.00945), "9.45 ms");
        assert_eq!(FigureUnit::Time.human(12.5), "12.5 s");
        assert_eq!(FigureUnit::Fraction.human(0.0072), "0.72%");
        assert_eq!(FigureUnit::Rate.show(1e8), "100mbit");
        assert_eq!(human_bytes(32_271_618), "32.3 MB");
        assert_eq!(human_bytes(512), "512 B");
    }
}
