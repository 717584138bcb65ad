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

use turbonet_topo::Lab;
use turbonet_topo::experiment::Workload;

use crate::error::{Error, Result};
use crate::events::Events;
use crate::state::LabDir;

pub use turbonet_api::workload::{CommandReport, FlowReport, OpReport, Report, SERIES_STEP, State};

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
    pub(crate) fn update(&self, f: impl FnOnce(&mut Report)) {
        if let Ok(mut r) = self.report.lock() {
            f(&mut r);
        }
    }

    /// A host's name.
    pub(crate) fn host(&self, rank: usize) -> &str {
        &self.lab.fabric.node(self.workload.ranks[rank].host).name
    }

    /// The lab's clock now.
    pub(crate) fn now(&self) -> f64 {
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
    /// The hosts this machine runs: a workload's ranks are all here.
    share: Arc<turbonet_topo::machines::Share>,
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
    pub fn new(
        lab: Arc<Lab>,
        share: Arc<turbonet_topo::machines::Share>,
        dir: LabDir,
        events: Events,
    ) -> Workloads {
        Workloads {
            lab,
            share,
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

    /// Whether every rank of `workload` runs on this machine (on a lab over
    /// several, the plan keeps a workload's ranks on one machine).
    pub fn here(&self, workload: &Workload) -> bool {
        self.away(workload).is_none()
    }

    /// A host of `workload`'s ranks that another machine runs.
    fn away<'w>(&self, workload: &'w Workload) -> Option<&'w turbonet_topo::NodeId> {
        (workload.ranks.iter())
            .map(|r| &r.host)
            .find(|&&host| !self.share.runs(host))
    }

    /// Starts `workload` at its start time (seconds on the lab's clock);
    /// refused when one of that name was started already and is not over,
    /// or when its ranks run on another machine.
    pub fn start(&self, workload: Workload, at: f64) -> Result<()> {
        if let Some(&away) = self.away(&workload) {
            return Err(Error::Refused(format!(
                "workload {} runs on machine {}'s hosts ({} among them), not this one's \
                 (machine {}): start it there",
                workload.name,
                self.share.machine_of(away),
                self.lab.fabric.node(away).name,
                self.share.machine
            )));
        }
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
