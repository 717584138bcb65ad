//! What a workload did, as the daemon reports it: its state, its flows,
//! operations and commands. Times are on the lab's clock (seconds since the
//! fabric was ready, as events are).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where a workload is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Waiting for its start time.
    Pending,
    /// Running.
    Running,
    /// Finished: every flow, operation or command completed.
    Done,
    /// Stopped before it finished (`workload stop`, the daemon stopping).
    Stopped,
    /// It could not run (a socket, a connection, a program that failed).
    Failed,
}

impl State {
    /// Its name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Running => "running",
            State::Done => "done",
            State::Stopped => "stopped",
            State::Failed => "failed",
        }
    }

    /// True once it will not change again.
    pub fn is_over(self) -> bool {
        matches!(self, State::Done | State::Stopped | State::Failed)
    }
}

/// What one flow did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowReport {
    /// Its number in the workload.
    pub id: usize,
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// When it started, seconds on the lab's clock.
    pub start: f64,
    /// Payload bytes the receiver got.
    pub bytes: u64,
    /// Seconds from its start to the receiver's last byte: the completion
    /// time of a flow of a given size.
    pub seconds: f64,
    /// `bytes` over `seconds`, bits per second.
    pub goodput: f64,
    /// TCP: segments the sender retransmitted (`tcpi_total_retrans`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// UDP: datagrams sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<u64>,
    /// UDP: datagrams received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    /// UDP: lost datagrams over those sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// UDP: mean one-way delay, seconds (sender and receiver share the
    /// daemon's monotonic clock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<f64>,
    /// UDP: 99th percentile one-way delay, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_p99: Option<f64>,
    /// A flood: the network its source addresses were drawn from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spoofed: Option<String>,
    /// Bytes received in each [`SERIES_STEP`] since the workload started.
    pub series: Vec<u64>,
    /// It completed (all its bytes arrived, or its duration passed).
    pub done: bool,
}

/// One collective operation size's figures, as nccl-tests reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpReport {
    /// The operation.
    pub op: String,
    /// Its algorithm.
    pub algorithm: String,
    /// Its size, as nccl-tests counts it.
    pub bytes: u64,
    /// The job's ranks.
    pub ranks: usize,
    /// Each timed repetition's time, seconds: from the start every rank
    /// shares to the last rank finishing.
    pub times: Vec<f64>,
    /// Their mean.
    pub time: f64,
    /// Algorithm bandwidth of the mean time, bits per second.
    pub algbw: f64,
    /// Bus bandwidth of the mean time, bits per second.
    pub busbw: f64,
    /// The slowest step over the timed repetitions (from the last rank
    /// finishing the step before to the last rank finishing it)...
    pub slowest_step: usize,
    /// ...how long it took, seconds...
    pub slowest_step_time: f64,
    /// ...and the rank that finished it last (the others waited on it).
    pub slowest_rank: usize,
    /// Its host.
    pub slowest_host: String,
}

/// What one rank's command did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandReport {
    /// Its rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// Its exit code (128 + the signal for one killed by a signal), once
    /// it exited.
    pub exit: Option<i32>,
    /// Seconds it ran.
    pub seconds: f64,
    /// Its output (stdout and stderr), in the lab directory.
    pub log: String,
}

/// What a workload did, so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Its name.
    pub name: String,
    /// `tcp`, `udp`, `collective`, `exec`.
    pub kind: String,
    /// The job it ran over.
    pub job: String,
    /// Its seed.
    pub seed: u64,
    /// Where it is.
    pub state: State,
    /// Why it failed or stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it started and ended, seconds on the lab's clock.
    pub started: Option<f64>,
    /// See `started`.
    pub ended: Option<f64>,
    /// Its flows (`tcp`, `udp`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub flows: Vec<FlowReport>,
    /// Its operations, one per size (`collective`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub ops: Vec<OpReport>,
    /// Bytes the job's ranks received in each [`SERIES_STEP`]
    /// (`collective`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub series: Vec<u64>,
    /// Its ranks' commands (`exec`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub commands: Vec<CommandReport>,
    /// Where this machine, not the fabric, set a figure (a sender that fell
    /// behind its schedule, datagrams dropped at a socket).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub warnings: Vec<String>,
}

/// The time step of throughput series.
pub const SERIES_STEP: Duration = Duration::from_millis(100);
