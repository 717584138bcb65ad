//! `turbonet run FILE`: an experiment from start to end. Brings the
//! scenario up, lets its workloads and timeline run (the daemon starts them
//! when the fabric is ready), watches BGP re-converge after the events an
//! expectation names, collects every report and event, checks the
//! `[[expect]]` clauses, writes the reports (`report.json`, `junit.xml`,
//! `summary.txt`) and always takes the lab down again, on failure and on
//! Ctrl-C too (unless asked to keep it).

pub mod judge;
pub mod junit;
pub mod plot;
pub mod utilisation;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use turbonet_topo::check::Check;
use turbonet_topo::experiment::Figure;

pub use crate::judge::Convergence;
use crate::judge::{Observed, Probed, values};

use crate::utilisation::{LoadReading, Sampler, Utilisation};
use turbonet_api::Client;
use turbonet_lab::error::{Context as _, Error, Result};
use turbonet_lab::events::LoggedEvent;
use turbonet_lab::inspect::{self, Running};
use turbonet_lab::progress::Progress;
use turbonet_lab::state::LabDir;
use turbonet_lab::up;
use turbonet_lab::workload::Report;

/// How a run goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// The experiment (a scenario with workloads and expectations).
    pub file: PathBuf,
    /// Where the reports go.
    pub out: PathBuf,
    /// Leave the lab up afterwards.
    pub keep: bool,
    /// Longest the workloads may run before they are stopped (and the run
    /// fails).
    pub timeout: Duration,
}

/// One expectation's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The expectation's name.
    pub name: String,
    /// It holds.
    pub passed: bool,
    /// What was measured against what was expected, in words.
    pub message: String,
    /// The values it checked (base units: bits per second, seconds, ...).
    pub values: Vec<f64>,
}

/// Where and on what a run ran (what another run needs to compare).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// `uname -r`.
    pub kernel: String,
    /// Cores available.
    pub cpus: usize,
    /// Host name.
    pub host: String,
}

/// Everything a run measured: `report.json`.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// turbonet's version.
    pub turbonet: String,
    /// The experiment file.
    pub file: String,
    /// FNV-1a 64 of its text (hex): the same hash, the same experiment.
    pub scenario_hash: String,
    /// The lab.
    pub lab: String,
    /// The scenario's seed.
    pub seed: u64,
    /// The machine.
    pub machine: Machine,
    /// When the run started, Unix seconds.
    pub started_unix: f64,
    /// Seconds `up` took.
    pub up_seconds: f64,
    /// Seconds from ready to the last workload ending.
    pub run_seconds: f64,
    /// Every workload's report.
    pub workloads: Vec<Report>,
    /// Re-convergence after the events expectations name.
    pub convergence: Vec<Convergence>,
    /// `turbonet check` at the end, if an expectation asked for it.
    pub check: Option<turbonet_lab::check::Report>,
    /// Every event, on the lab's clock.
    pub events: Vec<LoggedEvent>,
    /// The expectations' verdicts, in file order.
    pub expectations: Vec<Verdict>,
    /// What every link carried, and where the link engine fell short.
    pub links: Utilisation,
    /// The plots written beside the report (file names).
    pub plots: Vec<String>,
    /// The run was interrupted (Ctrl-C, SIGTERM) before its workloads
    /// ended: what it measured so far, and no expectation holds.
    pub interrupted: bool,
    /// Every expectation held (and none was there to fail: true).
    pub passed: bool,
}

/// One figure over the runs of `--repeat`: the same value (a size's bus
/// bandwidth, a flow's goodput) in every run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// The workload.
    pub workload: String,
    /// The figure.
    pub figure: Figure,
    /// Which of its values: a size, a flow.
    pub what: String,
    /// Its value in each run, in run order (base units).
    pub values: Vec<f64>,
    /// The smallest, the median and the largest.
    pub min: f64,
    /// See `min`.
    pub median: f64,
    /// See `min`.
    pub max: f64,
}

impl Spread {
    /// (max - min) / median: 0 when every run gave the same value.
    pub fn relative(&self) -> f64 {
        if self.median == 0.0 {
            if self.max == self.min {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            (self.max - self.min) / self.median.abs()
        }
    }
}

/// What `--repeat N` measured: each run's report, and the spread of every
/// figure over them (`repeat.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Repeated {
    /// The runs, in order.
    pub runs: usize,
    /// Every figure's spread.
    pub spread: Vec<Spread>,
    /// Per expectation, in how many runs it held.
    pub held: Vec<(String, usize)>,
    /// Every expectation held in every run.
    pub passed: bool,
}

/// The outcome of a run.
#[derive(Debug)]
pub struct Outcome {
    /// What it measured.
    pub report: RunReport,
    /// Where its reports are.
    pub dir: PathBuf,
}

/// Set by SIGINT or SIGTERM during a run.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Catches SIGINT and SIGTERM from now on, on a thread of its own: the run
/// then ends early and still takes its lab down.
fn catch_interrupts() -> Result<()> {
    static CAUGHT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if CAUGHT.get().is_some() {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Registered here, before the run goes on, so no signal is missed.
    let (mut int, mut term) = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        Ok::<_, std::io::Error>((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        ))
    })?;
    std::thread::Builder::new()
        .name("interrupts".into())
        .spawn(move || {
            runtime.block_on(async {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            });
            INTERRUPTED.store(true, Ordering::SeqCst);
        })?;
    let _ = CAUGHT.set(());
    Ok(())
}

/// Runs the experiment `options.file`.
pub fn run(options: &Options, progress: &dyn Progress) -> Result<Outcome> {
    let started_unix = turbonet_lab::events::unix_now();
    let watch = Instant::now();
    // `up` reads and checks the file (exit 2 with located errors).
    let upped = up::up(
        &up::Options {
            file: options.file.clone(),
            threads: None,
            // `[[capture]]` files land beside the reports.
            captures_in: Some(options.out.clone()),
            owner: None,
            placement: None,
        },
        progress,
    )?;
    let up_seconds = watch.elapsed().as_secs_f64();
    catch_interrupts()?;
    let running = Running {
        dir: LabDir::of(&upped.lab.name),
        lab: upped.lab,
    };
    let lab = &running.lab;
    if lab.workloads.is_empty() && lab.expects.is_empty() {
        progress.note("the experiment has no [[workload]] and no [[expect]]: it only comes up");
    }
    // What `up` read, as it saved it.
    let text = std::fs::read_to_string(running.dir.scenario_path()).unwrap_or_default();
    let epoch = upped.state.epoch_unix.unwrap_or(started_unix);
    // The links the userspace engine carries, as `up` decided.
    let engine_links: Vec<String> = lab
        .fabric
        .links
        .iter()
        .zip(&turbonet_lab::carrier::recorded(lab, &upped.state.carriers))
        .filter(|(_, c)| c.is_userspace())
        .map(|(l, _)| l.name.clone())
        .collect();
    let measured = measure(&running, epoch, engine_links, options, progress);
    let down = if options.keep {
        Ok(())
    } else {
        progress.start("down");
        turbonet_lab::down::down(Some(&lab.name)).map(|_| ())
    };
    let measured = measured?;
    down?;
    let observed = Observed {
        workloads: measured.workloads.clone(),
        convergence: measured.convergence.clone(),
        reachability: measured.check.as_ref().map(|c| Probed {
            probes: c.probes,
            reachable: c.reachable,
            failures: c.failures.len(),
        }),
        ..Observed::default()
    };
    let expectations: Vec<Verdict> = lab
        .expects
        .iter()
        .map(|e| {
            if measured.interrupted {
                Verdict {
                    name: e.name.clone(),
                    passed: false,
                    message: "not evaluated: the run was interrupted".to_owned(),
                    values: Vec::new(),
                }
            } else {
                let judged = judge::verdict(&e.check, &observed);
                Verdict {
                    name: e.name.clone(),
                    passed: judged.pass,
                    message: judged.detail,
                    values: judged.values,
                }
            }
        })
        .collect();
    let passed = !measured.interrupted && expectations.iter().all(|v| v.passed);
    let report = RunReport {
        turbonet: env!("CARGO_PKG_VERSION").to_owned(),
        file: options.file.display().to_string(),
        scenario_hash: format!("{:016x}", turbonet_topo::seed::fnv1a64(text.as_bytes())),
        lab: lab.name.clone(),
        seed: lab.seed,
        machine: machine(),
        started_unix,
        up_seconds,
        run_seconds: measured.run_seconds,
        workloads: measured.workloads,
        convergence: measured.convergence,
        check: measured.check,
        events: measured.events,
        expectations,
        links: measured.links,
        plots: Vec::new(),
        interrupted: measured.interrupted,
        passed,
    };
    let mut report = report;
    write_reports(&options.out, &mut report)?;
    Ok(Outcome {
        report,
        dir: options.out.clone(),
    })
}

/// Runs the experiment `runs` times, each into `out/run-K`, and writes the
/// spread of every figure (min, median, max over the runs) as
/// `out/repeat.json` and `out/summary.txt`: the evidence that a run is
/// reproducible. Stops early when interrupted.
pub fn repeat(options: &Options, runs: usize, progress: &dyn Progress) -> Result<Repeated> {
    let mut reports = Vec::with_capacity(runs);
    for k in 1..=runs {
        progress.note(&format!("run {k} of {runs}"));
        let each = Options {
            out: options.out.join(format!("run-{k}")),
            ..options.clone()
        };
        let report = run(&each, progress)?.report;
        if report.interrupted {
            return Err(Error::Failed(format!(
                "interrupted in run {k} of {runs}: its partial report is in {}",
                each.out.display()
            )));
        }
        reports.push(report);
    }
    let repeated = spread_of(&reports);
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("creating {}", options.out.display()))?;
    let write = |name: &str, text: &str| {
        let path = options.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("repeat.json", &serde_json::to_string_pretty(&repeated)?)?;
    write("summary.txt", &repeat_summary(&repeated))?;
    Ok(repeated)
}

/// The figures every run reports, side by side.
fn spread_of(reports: &[RunReport]) -> Repeated {
    let first = reports.first();
    let mut spread = Vec::new();
    for w in first.map_or(&[][..], |r| &r.workloads[..]) {
        let figures: &[Figure] = match w.kind.as_str() {
            "collective" => &[Figure::Busbw, Figure::Time],
            "tcp" => &[Figure::Goodput, Figure::Fct],
            "udp" => &[Figure::Loss, Figure::Delay],
            "flood" => &[Figure::Loss],
            _ => &[],
        };
        for &figure in figures {
            for (i, (_, what)) in values(w, figure).into_iter().enumerate() {
                // The same value of every run: the same workload, the
                // same position (the same seed gives the same flows).
                let each: Vec<f64> = reports
                    .iter()
                    .filter_map(|r| r.workloads.iter().find(|x| x.name == w.name))
                    .filter_map(|x| values(x, figure).get(i).map(|v| v.0))
                    .collect();
                let mut sorted = each.clone();
                sorted.sort_by(f64::total_cmp);
                let (Some(&min), Some(&max)) = (sorted.first(), sorted.last()) else {
                    continue;
                };
                spread.push(Spread {
                    workload: w.name.clone(),
                    figure,
                    what,
                    median: sorted[sorted.len() / 2],
                    values: each,
                    min,
                    max,
                });
            }
        }
    }
    let held = first
        .map_or(&[][..], |r| &r.expectations[..])
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let n = reports
                .iter()
                .filter(|r| r.expectations.get(i).is_some_and(|x| x.passed))
                .count();
            (v.name.clone(), n)
        })
        .collect::<Vec<_>>();
    Repeated {
        runs: reports.len(),
        passed: reports.iter().all(|r| r.passed),
        spread,
        held,
    }
}

/// `--repeat`'s summary: each figure's min, median and max, then how often
/// each expectation held.
pub fn repeat_summary(r: &Repeated) -> String {
    use tabled::{Table, Tabled, settings::Style};
    #[derive(Tabled)]
    struct Row {
        workload: String,
        figure: String,
        of: String,
        min: String,
        median: String,
        max: String,
        spread: String,
    }
    let rows = r.spread.iter().map(|s| {
        let unit = s.figure.unit();
        Row {
            workload: s.workload.clone(),
            figure: s.figure.name().to_owned(),
            of: s.what.clone(),
            min: unit.human(s.min),
            median: unit.human(s.median),
            max: unit.human(s.max),
            spread: format!("{:.1}%", s.relative() * 100.0),
        }
    });
    let mut text = format!("{} runs\n", r.runs);
    if !r.spread.is_empty() {
        let _ = writeln!(text, "{}", Table::new(rows).with(Style::rounded()));
    }
    for (name, n) in &r.held {
        let _ = writeln!(
            text,
            "{} {name}: held in {n} of {} runs",
            if *n == r.runs { "pass" } else { "FAIL" },
            r.runs
        );
    }
    text
}

/// What a run saw, before the expectations are checked against it.
struct Measured {
    workloads: Vec<Report>,
    convergence: Vec<Convergence>,
    check: Option<turbonet_lab::check::Report>,
    events: Vec<LoggedEvent>,
    run_seconds: f64,
    links: Utilisation,
    interrupted: bool,
}

/// Reads what the machine's CPUs and the engine's shards (threads of the
/// lab daemon `daemon`) have spent so far into `sampler`; nothing when
/// `/proc` cannot say.
fn sample_load(sampler: &mut Sampler, daemon: Option<u32>) {
    use turbonet_host::process;
    let Ok(ticks) = process::machine_ticks() else {
        return;
    };
    let engine = turbonet_lab::dataplane::netns::engine::THREAD_NAME;
    sampler.add_load(LoadReading {
        at_unix: turbonet_lab::events::unix_now(),
        ticks,
        shards_ns: daemon
            .and_then(|pid| process::threads_cpu_ns(pid, engine).ok())
            .unwrap_or_default(),
    });
}

/// Waits for the workloads and the timeline, watching convergence, then
/// collects.
/// `epoch` is when the fabric was ready (Unix seconds): the lab's clock
/// starts there.
fn measure(
    running: &Running,
    epoch: f64,
    engine_links: Vec<String>,
    options: &Options,
    progress: &dyn Progress,
) -> Result<Measured> {
    let lab = &running.lab;
    let mut client = Client::connect(&running.dir)?;
    let watched: Vec<(usize, String, f64)> = lab
        .expects
        .iter()
        .filter_map(|e| match &e.check {
            Check::Converged {
                within,
                after: Some(after),
            } => Some((
                after.index,
                after.event.clone(),
                within.as_duration().as_secs_f64(),
            )),
            _ => None,
        })
        .collect();
    let last_event = lab
        .timeline
        .last()
        .map_or(0.0, |e| e.at.as_duration().as_secs_f64());
    let mut convergence: BTreeMap<usize, Convergence> = BTreeMap::new();
    let begin = Instant::now();
    let mut reports;
    let mut sampler = Sampler::new(epoch, engine_links);
    let daemon = client.status().ok().map(|s| s.daemon_pid);
    let mut sampled = Instant::now();
    let mut interrupted = false;
    progress.start("run");
    sampler.add(client.counters()?);
    sample_load(&mut sampler, daemon);
    loop {
        reports = client.workloads()?;
        if sampled.elapsed() >= SAMPLE_EVERY {
            sampler.add(client.counters()?);
            sample_load(&mut sampler, daemon);
            sampled = Instant::now();
        }
        let now = turbonet_lab::events::unix_now() - epoch;
        // Re-convergence after each watched event, once it ran.
        for (index, name, within) in &watched {
            let at = lab.timeline[*index].at.as_duration().as_secs_f64();
            let entry = convergence.entry(*index).or_insert(Convergence {
                event: name.clone(),
                at,
                seconds: None,
            });
            if entry.seconds.is_some() || now < at || now > at + within + 1.0 {
                continue;
            }
            let bgp = client.bgp_summary(Duration::from_secs(5))?;
            let since = bgp.since_change;
            // The plan changed with this event (or later) and every FIB
            // holds it.
            if let Some(since) = since
                && now - since >= at - 0.05
                && !bgp.speakers.is_empty()
                && bgp.speakers.iter().all(|s| s.converged)
            {
                let slowest = bgp
                    .speakers
                    .iter()
                    .filter_map(|s| s.converged_at)
                    .fold(0.0, f64::max);
                entry.seconds = Some(slowest);
            }
        }
        let over = reports.iter().all(|r| r.state.is_over())
            && reports.len() >= lab.workloads.iter().filter(|w| !w.graded).count()
            && now >= last_event
            && watched.iter().all(|(i, _, within)| {
                convergence
                    .get(i)
                    .is_some_and(|c| c.seconds.is_some() || now > c.at + within + 1.0)
            });
        if over {
            break;
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            progress.note("interrupted: stopping the workloads, keeping what they measured");
            stop_all(&mut client, &reports);
            reports = client.workloads()?;
            interrupted = true;
            break;
        }
        if begin.elapsed() > options.timeout {
            progress.note(&format!(
                "the workloads ran longer than {:?}: stopping them",
                options.timeout
            ));
            stop_all(&mut client, &reports);
            reports = client.workloads()?;
            break;
        }
        progress.update("run", &status_line(&reports, now));
        std::thread::sleep(Duration::from_millis(100));
    }
    let run_seconds = reports.iter().filter_map(|r| r.ended).fold(0.0, f64::max);
    // The last interval: counters read after the workloads ended.
    let ended = turbonet_lab::events::unix_now();
    let waited = Instant::now();
    while waited.elapsed() < 2 * SAMPLE_EVERY {
        let counted = client.counters()?;
        let fresh = counted.at_unix >= ended;
        sampler.add(counted);
        sample_load(&mut sampler, daemon);
        if fresh {
            break;
        }
        std::thread::sleep(SAMPLE_EVERY / 5);
    }
    let links = sampler.finish(lab);
    let check = if !interrupted && lab.expects.iter().any(|e| e.check == Check::Reachable) {
        progress.update("run", "checking reachability");
        Some(turbonet_lab::check::check(running, 2.0)?)
    } else {
        None
    };
    let mut events = Vec::new();
    inspect::events(running, false, |e| {
        events.push(e);
        true
    })?;
    Ok(Measured {
        workloads: reports,
        convergence: convergence.into_values().collect(),
        check,
        events,
        run_seconds,
        links,
        interrupted,
    })
}

/// How often a run reads the link counters (as often as the daemon
/// refreshes them).
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

fn stop_all(client: &mut Client, reports: &[Report]) {
    for r in reports.iter().filter(|r| !r.state.is_over()) {
        let _ = client.stop_workload(&r.name);
    }
}

/// One line on the workloads' progress.
fn status_line(reports: &[Report], now: f64) -> String {
    let mut line = format!("t={now:.1}s");
    for r in reports {
        let detail = match r.kind.as_str() {
            "collective" => {
                let done: usize = r.ops.iter().map(|o| o.times.len()).sum();
                format!("{done} ops")
            }
            "exec" => {
                let done = r.commands.iter().filter(|c| c.exit.is_some()).count();
                format!("{done}/{} exited", r.commands.len())
            }
            _ => {
                let done = r.flows.iter().filter(|f| f.done).count();
                format!("{done}/{} flows", r.flows.len())
            }
        };
        let _ = write!(line, "  {} {} ({detail})", r.name, r.state.name());
    }
    line
}

/// This machine.
fn machine() -> Machine {
    let uname = nix::sys::utsname::uname().ok();
    Machine {
        kernel: uname
            .as_ref()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        cpus: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        host: uname
            .as_ref()
            .map(|u| u.nodename().to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

/// Writes the plots (`throughput.svg`, `op-times.svg`, noted in the
/// report), `report.json`, `junit.xml` and `summary.txt` into `dir`.
fn write_reports(dir: &Path, report: &mut RunReport) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    let plots = [
        (
            "throughput.svg",
            crate::plot::throughput(&report.workloads, &report.events),
        ),
        ("op-times.svg", crate::plot::op_times(&report.workloads)),
        (
            "link-load.svg",
            crate::plot::link_load(&report.links, &report.events),
        ),
    ];
    for (name, svg) in plots {
        if let Some(svg) = svg {
            write(name, &svg)?;
            report.plots.push(name.to_owned());
        }
    }
    let json = serde_json::to_string_pretty(report)?;
    write("report.json", &json)?;
    write("junit.xml", &junit(report))?;
    write("summary.txt", &summary(report))?;
    Ok(())
}

/// The expectations as JUnit XML: one test suite, a test case per
/// expectation (its message in `<failure>` when it does not hold).
pub fn junit(report: &RunReport) -> String {
    use crate::junit::{Case, Outcome, Suite};
    let cases = (report.expectations.iter())
        .map(|v| Case {
            name: v.name.clone(),
            outcome: if v.passed {
                Outcome::Passed(Some(v.message.clone()))
            } else {
                Outcome::Failed(v.message.clone(), None)
            },
        })
        .collect();
    crate::junit::write(&Suite {
        name: &report.file,
        classname: &report.lab,
        time: report.run_seconds,
        wrapped: true,
        cases,
    })
}

/// The human summary: workloads' headline figures, then the verdicts.
pub fn summary(report: &RunReport) -> String {
    let mut text = format!(
        "experiment {} (lab {}, seed {}, scenario {}), up {:.1} s, ran {:.1} s\n",
        report.file,
        report.lab,
        report.seed,
        report.scenario_hash,
        report.up_seconds,
        report.run_seconds
    );
    if report.interrupted {
        let _ = writeln!(
            text,
            "interrupted: the workloads were stopped before they ended; what follows is what they measured until then"
        );
    }
    if !report.workloads.is_empty() {
        let _ = writeln!(text, "{}", turbonet_lab::workload::table(&report.workloads));
    }
    if !report.links.directions.is_empty() {
        let _ = writeln!(text, "{}", busiest_links(&report.links));
    }
    for line in turbonet_lab::workload::warning_lines(&report.workloads) {
        let _ = writeln!(text, "{line}");
    }
    let fidelity = &report.links.fidelity;
    if !fidelity.is_empty() {
        let _ = writeln!(
            text,
            "warning: on {} link direction{}, {}",
            fidelity.len(),
            if fidelity.len() == 1 { "" } else { "s" },
            turbonet_lab::dataplane::plane::Shortfall::CONSEQUENCE
        );
        for line in fidelity.iter().take(FIDELITY_LINES) {
            let _ = writeln!(text, "  {line}");
        }
        if let Some(machine) = report.links.machine.describe() {
            let _ = writeln!(text, "  {machine}");
        }
        if fidelity.len() > FIDELITY_LINES {
            let _ = writeln!(
                text,
                "  and {} more (report.json: links.fidelity)",
                fidelity.len() - FIDELITY_LINES
            );
        }
    }
    for v in &report.expectations {
        let _ = writeln!(
            text,
            "{} {}: {}",
            if v.passed { "pass" } else { "FAIL" },
            v.name,
            v.message
        );
    }
    let failed = report.expectations.iter().filter(|v| !v.passed).count();
    let _ = writeln!(
        text,
        "{} of {} expectations hold",
        report.expectations.len() - failed,
        report.expectations.len()
    );
    text
}

/// Link directions shown in a summary.
const BUSIEST: usize = 5;

/// Link directions whose shortfalls a summary spells out.
const FIDELITY_LINES: usize = 3;

/// The busiest link directions of a run: bytes, mean and peak rate, and
/// the peak's share of the link's rate.
fn busiest_links(u: &Utilisation) -> String {
    use tabled::settings::object::Columns;
    use tabled::settings::{Alignment, Style};
    use tabled::{Table, Tabled};
    use turbonet_topo::experiment::FigureUnit;
    #[derive(Tabled)]
    struct Row {
        #[tabled(rename = "busiest links")]
        link: String,
        direction: String,
        bytes: String,
        mean: String,
        peak: String,
        #[tabled(rename = "peak of rate")]
        share: String,
    }
    let span = match (u.times.first(), u.times.last()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => 1.0,
    };
    let rows = u.directions.iter().take(BUSIEST).map(|d| Row {
        link: d.link.clone(),
        direction: format!("{} -> {}", d.from, d.to),
        bytes: turbonet_topo::experiment::human_bytes(d.bytes),
        mean: FigureUnit::Rate.human(d.bytes as f64 * 8.0 / span),
        peak: FigureUnit::Rate.human(d.peak),
        share: d
            .peak_utilisation()
            .map_or("-".to_owned(), |s| format!("{:.0}%", s * 100.0)),
    });
    Table::new(rows)
        .with(Style::rounded())
        .modify(Columns::new(2..), Alignment::right())
        .to_string()
}
