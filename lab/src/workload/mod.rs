//! Workloads, run by the lab daemon inside the hosts' namespaces: TCP and
//! UDP flows ([`flows`]), collective operations over a job ([`collective`])
//! and a command on every rank ([`command`]).
//!
//! Every socket is created in its host's namespace (a socket belongs to the
//! namespace it was created in, whichever thread uses it after), so one
//! process runs every rank of every workload, on a runtime of its own
//! (`workload` threads) beside the actor. What a workload does is computed
//! before it runs, from its seed (`turbonet-workload`): the same seed gives
//! the same flows, ports, start times and sizes.
//!
//! A workload's [`Report`] is kept up to date while it runs, and read by
//! the control API without waiting on the actor. Times are on the lab's
//! clock (seconds since the fabric was ready, as events are).

pub mod collective;
pub mod command;
pub mod flood;
pub mod flows;
mod sockets;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use turbonet_topo::Lab;
use turbonet_topo::experiment::Workload;

use crate::error::{Error, Result};
use crate::events::Events;
use crate::state::LabDir;

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

/// A report being written by a running workload.
pub(crate) type Shared = Arc<Mutex<Report>>;

/// Everything a running workload needs.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    pub lab: Arc<Lab>,
    pub workload: Arc<Workload>,
    pub report: Shared,
    pub events: Events,
    /// The port its listeners use.
    pub port: u16,
    /// Where its commands write their output.
    pub dir: std::path::PathBuf,
}

impl Context {
    /// Updates the report.
    pub fn update(&self, f: impl FnOnce(&mut Report)) {
        if let Ok(mut r) = self.report.lock() {
            f(&mut r);
        }
    }

    /// A host's name.
    pub fn host(&self, rank: usize) -> &str {
        &self.lab.fabric.node(self.workload.ranks[rank].host).name
    }

    /// The lab's clock now.
    pub fn now(&self) -> f64 {
        self.events.now()
    }
}

/// A workload that was started.
#[derive(Debug)]
struct Entry {
    report: Shared,
    task: tokio::task::JoinHandle<()>,
}

/// The first port of the range workloads listen on (one per workload).
const FIRST_PORT: u16 = 20_000;

/// The lab's workloads, running on their own threads.
#[derive(Debug)]
pub struct Workloads {
    lab: Arc<Lab>,
    dir: LabDir,
    events: Events,
    /// Started with the first workload: a lab that runs none has no
    /// threads for them.
    runtime: OnceLock<tokio::runtime::Runtime>,
    entries: Mutex<Entries>,
}

/// The workloads started, and how many starts there were (each gets a port
/// of its own, a restarted one too).
#[derive(Debug, Default)]
struct Entries {
    by_name: BTreeMap<String, Entry>,
    starts: usize,
}

impl Workloads {
    /// The workloads of `lab`, none running yet.
    pub fn new(lab: Arc<Lab>, dir: LabDir, events: Events) -> Workloads {
        Workloads {
            lab,
            dir,
            events,
            runtime: OnceLock::new(),
            entries: Mutex::new(Entries::default()),
        }
    }

    /// The workloads' runtime, started on first use.
    fn runtime(&self) -> Result<&tokio::runtime::Runtime> {
        if let Some(r) = self.runtime.get() {
            return Ok(r);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("workload")
            .enable_all()
            .build()
            .map_err(|e| Error::Failed(format!("starting the workloads' threads: {e}")))?;
        Ok(self.runtime.get_or_init(|| runtime))
    }

    /// Starts `workload` at its start time (seconds on the lab's clock);
    /// refused when one of that name was started already and is not over.
    pub fn start(&self, workload: Workload, at: f64) -> Result<()> {
        let mut entries = self.entries.lock().expect("workloads lock");
        if let Some(e) = entries.by_name.get(&workload.name)
            && !e.report.lock().map_or(true, |r| r.state.is_over())
        {
            return Err(Error::Refused(format!(
                "workload {} is running already (stop it first)",
                workload.name
            )));
        }
        let port = FIRST_PORT
            + u16::try_from(entries.starts % usize::from(u16::MAX - FIRST_PORT))
                .expect("below the range");
        let report = Arc::new(Mutex::new(Report {
            name: workload.name.clone(),
            kind: workload.kind.name().to_owned(),
            job: workload.job.clone(),
            seed: workload.seed,
            state: State::Pending,
            message: None,
            started: None,
            ended: None,
            flows: Vec::new(),
            ops: Vec::new(),
            series: Vec::new(),
            commands: Vec::new(),
            warnings: Vec::new(),
        }));
        let name = workload.name.clone();
        let dir = self.dir.path().join("workloads").join(&name);
        let cx = Context {
            lab: self.lab.clone(),
            workload: Arc::new(workload),
            report: report.clone(),
            events: self.events.clone(),
            port,
            dir,
        };
        let task = self.runtime()?.spawn(run(cx, at));
        entries.starts += 1;
        entries.by_name.insert(name, Entry { report, task });
        Ok(())
    }

    /// Stops a workload that is running: its tasks end, its sockets close,
    /// its commands are killed; its report says so. Refused for one that
    /// is over already.
    pub fn stop(&self, name: &str) -> Result<()> {
        let entries = self.entries.lock().expect("workloads lock");
        let Some(e) = entries.by_name.get(name) else {
            let names: Vec<&str> = entries.by_name.keys().map(String::as_str).collect();
            return Err(Error::NotFound(format!(
                "no workload {name} (started: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )));
        };
        let mut r = e.report.lock().expect("report lock");
        if r.state.is_over() {
            return Err(Error::Refused(format!(
                "workload {name} is {} already",
                r.state.name()
            )));
        }
        e.task.abort();
        r.state = State::Stopped;
        r.message = Some("stopped before it finished".to_owned());
        r.ended = Some(self.events.now());
        drop(r);
        drop(entries);
        self.events.write_about(
            "workload",
            "workload-stopped",
            &format!("workload {name} stopped before it finished"),
            Ok(()),
            crate::events::About::workload(name),
        );
        Ok(())
    }

    /// Every workload's report, in name order.
    pub fn reports(&self) -> Vec<Report> {
        let entries = self.entries.lock().expect("workloads lock");
        entries
            .by_name
            .values()
            .filter_map(|e| e.report.lock().ok().map(|r| r.clone()))
            .collect()
    }

    /// Stops every workload still running (the daemon is stopping).
    pub fn stop_all(&self) {
        let names: Vec<String> = {
            let entries = self.entries.lock().expect("workloads lock");
            entries.by_name.keys().cloned().collect()
        };
        for name in names {
            // Those over already refuse, and need nothing.
            let _ = self.stop(&name);
        }
    }
}

/// Runs a workload from its start time to its end, and records how it
/// ended.
async fn run(cx: Context, at: f64) {
    let wait = (at - cx.now()).max(0.0);
    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    let name = cx.workload.name.clone();
    let started = cx.now();
    cx.update(|r| {
        r.state = State::Running;
        r.started = Some(started);
    });
    cx.events.write_about(
        "workload",
        "workload-start",
        &format!(
            "workload {name} ({}, {} ranks) started",
            cx.workload.kind.name(),
            cx.workload.ranks.len()
        ),
        Ok(()),
        crate::events::About::workload(&name),
    );
    use turbonet_topo::experiment::WorkloadKind as K;
    let result = match &cx.workload.kind {
        K::Tcp { .. } => flows::tcp(&cx).await,
        K::Udp { .. } => flows::udp(&cx).await,
        K::Collective { .. } => collective::run(&cx).await,
        K::Exec { .. } => command::run(&cx).await,
        K::Flood { .. } => flood::run(&cx).await,
    };
    let ended = cx.now();
    let error = result.err().map(|e| e.to_string());
    cx.update(|r| {
        r.state = if error.is_some() {
            State::Failed
        } else {
            State::Done
        };
        r.ended = Some(ended);
        r.message.clone_from(&error);
    });
    let (kind, line) = match &error {
        None => ("workload-end", format!("workload {name} done")),
        Some(e) => ("workload-failed", format!("workload {name} failed: {e}")),
    };
    cx.events.write_about(
        "workload",
        kind,
        &line,
        error.as_deref().map_or(Ok(()), Err),
        crate::events::About::workload(&name),
    );
}

/// Bytes received at `t` (seconds on the lab's clock) added to a series
/// that starts at `start`.
pub(crate) fn add_to_series(series: &mut Vec<u64>, start: f64, t: f64, bytes: u64) {
    let i = ((t - start).max(0.0) / SERIES_STEP.as_secs_f64()) as usize;
    if series.len() <= i {
        series.resize(i + 1, 0);
    }
    series[i] += bytes;
}

/// A workload's figures in a few words per line: per size for a
/// collective (time, algorithm and bus bandwidth, its slowest step), the
/// flows' goodput and completion (and loss, for UDP), the commands' exits.
pub fn headline(r: &Report) -> String {
    use turbonet_topo::experiment::FigureUnit;
    let rate = |bps: f64| FigureUnit::Rate.human(bps);
    let mut lines = Vec::new();
    for o in &r.ops {
        if o.times.is_empty() {
            continue;
        }
        lines.push(format!(
            "{} {} {}: {:.2} ms, algbw {}, busbw {}; slowest step {} ({:.2} ms, rank {} {})",
            o.op,
            o.algorithm,
            turbonet_topo::units::Bytes(o.bytes),
            o.time * 1e3,
            rate(o.algbw),
            rate(o.busbw),
            o.slowest_step,
            o.slowest_step_time * 1e3,
            o.slowest_rank,
            o.slowest_host
        ));
    }
    if r.kind == "flood" {
        let sent: u64 = r.flows.iter().filter_map(|f| f.sent).sum();
        let received: u64 = r.flows.iter().filter_map(|f| f.received).sum();
        let spoofed = r
            .flows
            .first()
            .and_then(|f| f.spoofed.as_deref())
            .map_or_else(String::new, |s| format!(" from {s}"));
        lines.push(format!(
            "{} host{} sent {sent} packets{spoofed} to {}: {received} got through ({:.1}%)",
            r.flows.len(),
            if r.flows.len() == 1 { "" } else { "s" },
            r.flows.first().map_or("", |f| f.dst.as_str()),
            if sent == 0 {
                0.0
            } else {
                received as f64 * 100.0 / sent as f64
            }
        ));
    } else if !r.flows.is_empty() {
        let n = r.flows.len() as f64;
        let done = r.flows.iter().filter(|f| f.done).count();
        let mean = r.flows.iter().map(|f| f.goodput).sum::<f64>() / n;
        let longest = r.flows.iter().map(|f| f.seconds).fold(0.0, f64::max);
        let mut line = format!(
            "{done}/{} flows done, goodput mean {}, longest {longest:.3} s",
            r.flows.len(),
            rate(mean)
        );
        if r.kind == "udp" {
            let sent: u64 = r.flows.iter().filter_map(|f| f.sent).sum();
            let received: u64 = r.flows.iter().filter_map(|f| f.received).sum();
            line.push_str(&format!(
                ", {} of {sent} datagrams lost",
                sent.saturating_sub(received)
            ));
        }
        if r.kind == "tcp" {
            let retrans: u64 = r.flows.iter().filter_map(|f| f.retransmits).sum();
            line.push_str(&format!(", {retrans} retransmits"));
        }
        lines.push(line);
    }
    if !r.commands.is_empty() {
        let exited = r.commands.iter().filter(|c| c.exit.is_some()).count();
        let failed = r
            .commands
            .iter()
            .filter(|c| c.exit.is_some_and(|e| e != 0))
            .count();
        lines.push(format!(
            "{exited}/{} exited, {failed} with an error",
            r.commands.len()
        ));
    }
    if let Some(m) = &r.message {
        lines.push(m.clone());
    }
    lines.join("\n")
}

/// Every report's warnings as lines for people, `warning: NAME: ...`:
/// at most three per workload, then how many more there are (a report's
/// JSON lists them all).
pub fn warning_lines(reports: &[Report]) -> Vec<String> {
    const SHOWN: usize = 3;
    let mut lines = Vec::new();
    for r in reports {
        for w in r.warnings.iter().take(SHOWN) {
            lines.push(format!("warning: {}: {w}", r.name));
        }
        if r.warnings.len() > SHOWN {
            lines.push(format!(
                "warning: {}: and {} more like these (the JSON report lists them)",
                r.name,
                r.warnings.len() - SHOWN
            ));
        }
    }
    lines
}

/// The workloads as a table: name, kind, state, time on the lab's clock,
/// headline figures.
pub fn table(reports: &[Report]) -> String {
    use tabled::{Table, Tabled, settings::Style};
    #[derive(Tabled)]
    struct Row {
        workload: String,
        kind: String,
        state: String,
        #[tabled(rename = "ran (s)")]
        ran: String,
        figures: String,
    }
    let rows = reports.iter().map(|r| Row {
        workload: r.name.clone(),
        kind: r.kind.clone(),
        state: r.state.name().to_owned(),
        ran: match (r.started, r.ended) {
            (Some(a), Some(b)) => format!("{a:.1} - {b:.1}"),
            (Some(a), None) => format!("{a:.1} -"),
            _ => String::new(),
        },
        figures: headline(r),
    });
    Table::new(rows).with(Style::rounded()).to_string()
}
