//! `turbonet bench [FILES]`: `up` (until routed), `check` and `down` on
//! scenarios as a user runs them (this binary in a child process, timed
//! from spawn to exit, its peak RSS from `wait4`), phase by phase beside
//! the kernel's own cost of the same objects: the iproute2 batch files of
//! what `up` asks ([`ip_batches`]), run with `ip -batch` and
//! `tc -batch` in the same run, after `down`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use turbonet_topo::Lab;

use super::ip_batch::{Batch, Tool, ip_batches};
use super::{Measured, measure, median};
use crate::report::{Report, count};
use turbonet_host::namespaces;
use turbonet_lab::bail;
use turbonet_lab::error::{Context, Result};
use turbonet_lab::progress::Progress;
use turbonet_lab::state::LabDir;
use turbonet_lab::up;

/// The scenarios measured when none are named.
const DEFAULT: [&str; 4] = [
    "fat-tree-k4.toml",
    "fat-tree-k8.toml",
    "fat-tree-k16.toml",
    "hpn.toml",
];

/// Lines per `ip -batch` process in the root namespace: `ip` keeps the
/// file of every namespace a line names open, two a veth pair.
const LINES_PER_PROCESS: usize = 400;

/// What one run of one scenario measured.
/// A phase of `up`: its name, what it did and its seconds.
type PhaseTime = (String, String, f64);

struct Run {
    up: Measured,
    check: Option<f64>,
    down: Measured,
    /// `up`'s phases as it timed them.
    phases: Vec<PhaseTime>,
    /// The daemon's peak RSS, MiB, once `up` returned.
    daemon_mib: Option<f64>,
    /// The size of the lab's event log once `up` returned, MiB.
    events_mib: Option<f64>,
    /// The kernel's own time per phase.
    kernel: Vec<(String, f64)>,
    /// The kernel's own time to delete the namespaces.
    kernel_down: f64,
}

/// What a run measures between `up` and `down` (see [`Run`]).
struct AfterUp {
    phases: Vec<PhaseTime>,
    daemon_mib: Option<f64>,
    events_mib: Option<f64>,
    check: Option<f64>,
}

/// `turbonet bench [FILES]`: `runs` runs of each file, medians shown.
pub(super) fn bench(
    files: &[PathBuf],
    runs: usize,
    check: Option<Option<usize>>,
    routing: Option<&str>,
    progress: &dyn Progress,
) -> Result<Report> {
    let files = if files.is_empty() {
        let dir = Path::new("scenarios");
        if !dir.is_dir() {
            bail!(
                "no scenario files given and no ./scenarios directory; run from the turbonet checkout or name files"
            );
        }
        DEFAULT.iter().map(|f| dir.join(f)).collect()
    } else {
        files.to_vec()
    };
    let runs = runs.max(1);
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    let mut summary = Vec::new();
    let mut phases = Vec::new();
    for file in &files {
        let file = &with_routing(file, routing)?;
        let (lab, _) = up::load(file)?;
        let (names, batches) = ip_batches(&lab)?;
        let mut all = Vec::with_capacity(runs);
        for run in 0..runs {
            progress.note(&format!(
                "bench {} run {}/{runs}: turbonet ...",
                lab.name,
                run + 1
            ));
            let mut measured = run_turbonet(&lab, file, check)?;
            progress.note(&format!(
                "bench {} run {}/{runs}: ip -batch ...",
                lab.name,
                run + 1
            ));
            let (kernel, kernel_down) = kernel_cost(&names, &batches, workers)?;
            measured.kernel = kernel;
            measured.kernel_down = kernel_down;
            all.push(measured);
        }
        summary.push(summary_row(&lab, &all));
        phases.extend(phase_rows(&lab.name, &all));
    }
    let mut out = Report::default();
    out.table(
        &[
            "lab",
            "switches",
            "hosts",
            "links",
            "up s",
            "check s",
            "down s",
            "up MiB",
            "daemon MiB",
            "events MiB",
            "down MiB",
        ],
        summary,
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    );
    let checked = match check {
        Some(Some(k)) => format!("; `check s` probes {k} host(s) behind every edge switch"),
        Some(None) => "; `check s` probes every pair of hosts".to_owned(),
        None => String::new(),
    };
    out.text(format!(
        "median of {runs} run(s){checked}; `up s` is until every route is installed (with BGP, until \
         the agents converged); MiB is peak RSS of the turbonet process, and of the lab \
         daemon (with its BGP shards, if any) once `up` returned; events MiB: the lab's event \
         log (events.jsonl) then"
    ));
    out.table(
        &["lab", "phase", "turbonet s", "kernel s", "ratio", "what"],
        phases,
        &[2, 3, 4],
    );
    out.text(format!(
        "kernel s: the same requests as iproute2 batch files (`ip -batch`, `tc -batch`; \
         {LINES_PER_PROCESS} lines a process in the root namespace, one process per namespace \
         and phase, {workers} at a time), run after `down` in the same run; without the \
         namespaces' sysctls (no `ip` command sets them) and offloads (ethtool has no batch)"
    ));
    Ok(out)
}

/// The peak RSS of the lab daemon and of the processes its BGP speakers
/// run in, if it has them in several ([`turbonet_lab::routes::bgp::shard`]).
fn daemon_peak_kib(daemon: u32) -> Option<u64> {
    use turbonet_host::process::peak_rss_kib;
    let shards = bgp_shards(daemon).into_iter().filter_map(peak_rss_kib);
    Some(peak_rss_kib(daemon)? + shards.sum::<u64>())
}

/// The processes the lab daemon `daemon` runs its BGP speakers in, if
/// several ([`turbonet_lab::routes::bgp::shard`]).
pub(crate) fn bgp_shards(daemon: u32) -> Vec<u32> {
    turbonet_host::process::children(daemon)
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains("--bgp-shard"))
        .map(|(pid, _)| pid)
        .collect()
}

/// `file`, or with `routing` a copy of it in the temporary directory with
/// that routing mode (and without BGP's settings, for another mode).
fn with_routing(file: &Path, routing: Option<&str>) -> Result<PathBuf> {
    let Some(mode) = routing else {
        return Ok(file.to_owned());
    };
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut doc: toml::Table = text
        .parse()
        .map_err(|e| turbonet_lab::err!("{}: {e}", file.display()))?;
    let section = doc
        .entry("routing")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(section) = section.as_table_mut() else {
        bail!("{}: `routing` is not a table", file.display());
    };
    section.insert("mode".to_owned(), toml::Value::String(mode.to_owned()));
    if mode != "bgp" {
        // The scenario's BGP settings (the pod's timers) would be refused.
        for key in turbonet_topo::BGP_ONLY_KEYS {
            section.remove(key);
        }
    }
    let stem = file
        .file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy());
    let copy = std::env::temp_dir().join(format!("turbonet-bench-{stem}-{mode}.toml"));
    std::fs::write(
        &copy,
        toml::to_string(&doc).map_err(|e| turbonet_lab::err!("{e}"))?,
    )?;
    Ok(copy)
}

/// `up`, `check` and `down` of `file` (lab `lab`) as a user runs them.
fn run_turbonet(lab: &Lab, file: &Path, check: Option<Option<usize>>) -> Result<Run> {
    let file_arg = file.display().to_string();
    let up = measure(&["up", "--quiet", &file_arg])?;
    let after_up = || -> Result<AfterUp> {
        let dir = LabDir::of(&lab.name);
        let state = dir
            .load()?
            .with_context(|| format!("lab {} has no state after `up`", lab.name))?;
        let phases = state
            .timings
            .iter()
            .map(|t| (t.phase.clone(), t.detail.clone(), t.seconds))
            .collect();
        let daemon_mib = turbonet_api::Client::connect(&dir)
            .and_then(|mut c| c.status())
            .ok()
            .and_then(|s| daemon_peak_kib(s.daemon_pid))
            .map(|kib| kib as f64 / 1024.0);
        let events_mib = crate::events_mib(&dir);
        let check = match check {
            Some(sample) => {
                let sample = sample.map(|k| k.to_string());
                let mut args = vec!["check", "--lab", &lab.name];
                if let Some(k) = &sample {
                    args.extend(["--sample", k]);
                }
                Some(measure(&args)?.seconds)
            }
            None => None,
        };
        Ok(AfterUp {
            phases,
            daemon_mib,
            events_mib,
            check,
        })
    };
    let measured = after_up();
    let down = measure(&["down", &lab.name])?;
    let AfterUp {
        phases,
        daemon_mib,
        events_mib,
        check,
    } = measured?;
    Ok(Run {
        up,
        check,
        down,
        phases,
        daemon_mib,
        events_mib,
        kernel: Vec::new(),
        kernel_down: 0.0,
    })
}

/// Runs `batches` phase by phase with `workers` processes at a time and
/// times each phase, then deletes namespaces `names` (timed as the
/// kernel's `down`). Refuses to start when any of them exists; deletes
/// what it created even when a batch fails.
fn kernel_cost(
    names: &[String],
    batches: &[Batch],
    workers: usize,
) -> Result<(Vec<(String, f64)>, f64)> {
    if let Some(taken) = names.iter().find(|n| namespaces::exists(n)) {
        bail!("namespace {taken} exists: the kernel's cost is measured on namespaces of its own");
    }
    let mut order: Vec<&str> = Vec::new();
    for b in batches {
        if !order.contains(&b.phase.as_str()) {
            order.push(&b.phase);
        }
    }
    let mut times = Vec::new();
    let mut failed = None;
    for phase in order {
        let of_phase: Vec<&Batch> = batches.iter().filter(|b| b.phase == phase).collect();
        let watch = turbonet_lab::state::Stopwatch::start();
        if let Err(e) = run_phase(&of_phase, workers) {
            failed = Some(turbonet_lab::err!(
                "the kernel's cost of phase {phase}: {e}"
            ));
            break;
        }
        times.push((phase.to_owned(), watch.seconds()));
    }
    let watch = turbonet_lab::state::Stopwatch::start();
    let ours: Vec<String> = names
        .iter()
        .filter(|n| namespaces::exists(n))
        .map(|n| format!("netns del {n}"))
        .collect();
    let deleted = ours
        .chunks(LINES_PER_PROCESS)
        .try_for_each(|chunk| run_batch(Tool::Ip, None, chunk));
    let down = watch.seconds();
    if let Some(e) = failed {
        return Err(e);
    }
    deleted?;
    Ok((times, down))
}

/// One phase's batches: those of the root namespace in order, in chunks,
/// then those of the namespaces, `workers` at a time.
fn run_phase(batches: &[&Batch], workers: usize) -> Result<()> {
    for b in batches.iter().filter(|b| b.netns.is_none()) {
        for chunk in b.lines.chunks(LINES_PER_PROCESS) {
            run_batch(b.tool, None, chunk)?;
        }
    }
    let inside: Vec<&Batch> = batches
        .iter()
        .copied()
        .filter(|b| b.netns.is_some())
        .collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..workers.max(1))
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    while let Some(b) = inside.get(next.fetch_add(1, Ordering::Relaxed)) {
                        run_batch(b.tool, b.netns.as_deref(), &b.lines)?;
                    }
                    Ok(())
                })
            })
            .collect();
        threads.into_iter().try_for_each(|t| {
            t.join()
                .map_err(|_| turbonet_lab::err!("a batch thread panicked"))?
        })
    })
}

/// `ip [-n NETNS] -batch FILE` (or `tc`) with `lines` in the file. A
/// file, not a pipe: a batch that fails stops reading, and a pipe's
/// writer would die of SIGPIPE (the CLI keeps its default action).
fn run_batch(tool: Tool, netns: Option<&str>, lines: &[String]) -> Result<()> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "turbonet-bench-{}-{}.batch",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    let mut command = Command::new(tool.program());
    if let Some(ns) = netns {
        command.args(["-n", ns]);
    }
    let out = command
        .arg("-batch")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| {
            format!(
                "running {} (Debian: apt-get install iproute2)",
                tool.program()
            )
        });
    let _ = std::fs::remove_file(&path);
    let out = out?;
    if !out.status.success() {
        // iproute2 names the failing line as "Command failed FILE:N".
        let failed = String::from_utf8_lossy(&out.stderr);
        let line = failed
            .lines()
            .find_map(|l| {
                l.rsplit_once(".batch:")
                    .and_then(|(_, n)| n.trim().parse::<usize>().ok())
            })
            .and_then(|n| lines.get(n.wrapping_sub(1)));
        bail!(
            "`{} {}-batch` failed: {}{}",
            tool.program(),
            netns.map(|n| format!("-n {n} ")).unwrap_or_default(),
            failed.trim(),
            line.map(|l| format!(" (the line: {l})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// The first table's row for `lab`.
fn summary_row(lab: &Lab, runs: &[Run]) -> Vec<String> {
    let checks: Vec<f64> = runs.iter().filter_map(|r| r.check).collect();
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    let daemon = runs
        .iter()
        .filter_map(|r| r.daemon_mib)
        .fold(None, |m, d| Some(m.map_or(d, |m: f64| m.max(d))));
    let events = runs
        .iter()
        .map(|r| r.events_mib)
        .collect::<Option<Vec<f64>>>()
        .map(median);
    vec![
        lab.name.clone(),
        count(lab.fabric.switches().count()),
        count(lab.fabric.hosts().count()),
        count(lab.fabric.links.len()),
        format!("{:.2}", median(runs.iter().map(|r| r.up.seconds).collect())),
        if checks.is_empty() {
            "-".into()
        } else {
            format!("{:.2}", median(checks))
        },
        format!(
            "{:.2}",
            median(runs.iter().map(|r| r.down.seconds).collect())
        ),
        mib(runs.iter().map(|r| r.up.peak_rss_kib).max().unwrap_or(0)),
        daemon.map_or("-".into(), |d| format!("{d:.1}")),
        events.map_or("-".into(), |e| format!("{e:.1}")),
        mib(runs.iter().map(|r| r.down.peak_rss_kib).max().unwrap_or(0)),
    ]
}

/// The second table's rows for `lab`: every phase of `up` with the
/// kernel's time for the same requests, then `up` and `down` in all.
fn phase_rows(lab: &str, runs: &[Run]) -> Vec<Vec<String>> {
    let first = &runs[0];
    // The median over the runs, when every run measured it.
    let of = |pick: &dyn Fn(&Run) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = runs.iter().filter_map(pick).collect();
        (v.len() == runs.len()).then(|| median(v))
    };
    let row = |phase: &str, ours: Option<f64>, kernel: Option<f64>, what: &str| {
        vec![
            lab.to_owned(),
            phase.to_owned(),
            ours.map_or("-".into(), |s| format!("{s:.2}")),
            kernel.map_or("-".into(), |s| format!("{s:.2}")),
            match (ours, kernel) {
                (Some(o), Some(k)) if k > 0.0 => format!("{:.2}x", o / k),
                _ => "-".into(),
            },
            what.to_owned(),
        ]
    };
    let mut rows = Vec::new();
    // `up`'s own total is the wall time below, spawn to exit.
    for (phase, what, _) in first.phases.iter().filter(|(p, ..)| p != "total") {
        let ours = of(&|r| r.phases.iter().find(|(p, ..)| p == phase).map(|&(.., s)| s));
        let kernel = of(&|r| r.kernel.iter().find(|(p, _)| p == phase).map(|&(_, s)| s));
        rows.push(row(phase, ours, kernel, what));
    }
    let total = |r: &Run| -> f64 { r.kernel.iter().map(|(_, s)| s).sum() };
    rows.push(row(
        "up (all)",
        of(&|r| Some(r.up.seconds)),
        of(&|r| Some(total(r))),
        "wall time of `turbonet up`; kernel: every batch",
    ));
    rows.push(row(
        "down",
        of(&|r| Some(r.down.seconds)),
        of(&|r| Some(r.kernel_down)),
        "kernel: `ip netns del` of every namespace",
    ));
    rows
}
