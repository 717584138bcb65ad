//! `turbonet bench`: time `up` (until routed) and `down` on scenarios, with
//! the peak memory of each, measured as a user would run them: each step is
//! this binary in a child process, timed from spawn to exit, its peak RSS
//! read from `wait4`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::bail;
use crate::error::{Context, Result};
use crate::report::{Report, count};
use crate::system::process;
use crate::up::{self, Progress};

pub mod bgp;
pub mod engine;
pub mod instruments;
pub mod soft;
pub mod workloads;

/// What to measure.
#[derive(Debug, Clone)]
pub enum Bench {
    /// `up` (until routed), `down` and with `check` the all-pairs check, on
    /// `files` (default: fat-tree k=4, k=8, k=16 and hpn), the median of
    /// `runs`.
    Up {
        /// Scenario files.
        files: Vec<PathBuf>,
        /// Runs per scenario.
        runs: usize,
        /// Also time `check`.
        check: bool,
    },
    /// The userspace link engine: delay accuracy with `probes` per delay,
    /// loss statistics over `loss_frames` per probability, rate and
    /// forwarding capacity.
    Engine {
        /// Delay probes per configured delay.
        probes: usize,
        /// Frames per configured loss probability.
        loss_frames: u64,
    },
    /// BGP convergence per agent, or with `density` the cost of many
    /// agents at steady state.
    Bgp {
        /// Agent density instead of convergence.
        density: bool,
        /// The agents to compare.
        agents: Vec<String>,
    },
    /// The traffic generator and collectives beside iperf3 and Open MPI.
    Workloads,
    /// What captures, mirrors and counter reads cost the link engine, the
    /// capture rate, and the latency of route-change events.
    Instruments {
        /// Frames per forwarding-rate measurement.
        frames: u64,
    },
    /// The soft switch's forwarding rate beside the netns target.
    Soft {
        /// Frames per path.
        frames: u64,
    },
}

/// A lab a benchmark brought up (`up --quiet` of `text`); `down` when
/// dropped.
pub(crate) struct UpLab {
    /// The lab's name.
    pub(crate) name: String,
}

impl UpLab {
    /// Writes `text` (a scenario naming lab `name`) to a temporary file and
    /// brings it up with this binary.
    pub(crate) fn up(name: &str, text: &str) -> Result<UpLab> {
        let path = std::env::temp_dir().join(format!("turbonet-bench-{name}.toml"));
        std::fs::write(&path, text)?;
        let out = Command::new(std::env::current_exe()?)
            .args(["up", "--quiet"])
            .arg(&path)
            .output()?;
        if !out.status.success() {
            bail!(
                "bench lab {name} did not come up: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(UpLab {
            name: name.to_owned(),
        })
    }

    /// The first address of node `node`.
    pub(crate) fn address(&self, node: &str) -> Result<std::net::Ipv4Addr> {
        let lab = crate::state::LabDir::of(&self.name).saved_lab()?;
        let n = lab
            .fabric
            .node_by_name(node)
            .with_context(|| format!("lab {} has no node {node}", self.name))?;
        let (_, local, _) = lab
            .fabric
            .ports(n.id)
            .next()
            .with_context(|| format!("{node} has no port"))?;
        Ok(local.addr.addr())
    }
}

impl Drop for UpLab {
    fn drop(&mut self) {
        if let Ok(exe) = std::env::current_exe() {
            let _ = Command::new(exe).args(["down", &self.name]).output();
        }
    }
}

/// `turbonet exec --lab LAB NODE -- ARGS` (the benches are not the main
/// path: tools run as a user would run them).
pub(crate) fn exec_in(lab: &str, node: &str, args: &[&str]) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("own path"));
    c.args(["exec", "--lab", lab, node, "--"]).args(args);
    c
}

/// An iperf3 server for one test (`-s -1`) in a node's namespace, on a port
/// of its own, listening once [`IperfServer::start`] returns (a client that
/// finds no server leaves iperf3 in a state that spoils the next test).
/// Dropped, it is given 2 s to finish its test, then stopped.
pub(crate) struct IperfServer {
    child: std::process::Child,
    /// Its port, for the client's `-p`.
    pub(crate) port: String,
}

impl IperfServer {
    /// Starts one in `node` of lab `lab`.
    pub(crate) fn start(lab: &str, node: &str) -> Result<IperfServer> {
        static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(5299);
        let port = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ns = crate::system::namespaces::open(&crate::names::node_namespace(lab, node))
            .with_context(|| format!("opening the namespace of {node}"))?;
        let mut command = Command::new("iperf3");
        command
            .args(["-s", "-1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = process::Start {
            namespace: Some(&ns),
            ..process::Start::default()
        }
        .spawn(&mut command)
        .context("starting iperf3 (Debian: apt-get install iperf3)")?;
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while !listening(&ns, port) {
            if let Some(status) = child.try_wait()? {
                bail!("the iperf3 server in {node} exited at once ({status})");
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the iperf3 server in {node} did not listen on port {port} within 10 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(IperfServer {
            child,
            port: port.to_string(),
        })
    }
}

impl Drop for IperfServer {
    fn drop(&mut self) {
        let deadline = Instant::now() + std::time::Duration::from_secs(2);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True when a TCP socket listens on `port` in namespace `ns`.
fn listening(ns: &std::os::fd::OwnedFd, port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    crate::system::namespaces::in_namespace(ns, || {
        let mut found = false;
        for table in ["tcp", "tcp6"] {
            let text = std::fs::read_to_string(format!("/proc/thread-self/net/{table}"))
                .unwrap_or_default();
            // "sl local_address rem_address st ...": 0A is LISTEN.
            found |= text.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3 && f[1].ends_with(&suffix) && f[3] == "0A"
            });
        }
        Ok(found)
    })
    .unwrap_or(false)
}

pub(crate) struct Measured {
    pub(crate) seconds: f64,
    peak_rss_kib: u64,
}

/// Runs this binary with `args`, returning wall time and peak RSS.
pub(crate) fn measure(args: &[&str]) -> Result<Measured> {
    let exe = std::env::current_exe()?;
    let start = Instant::now();
    let child = Command::new(&exe)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("running {}", exe.display()))?;
    let (status, peak_rss_kib) = process::wait_with_peak(&child)?;
    let seconds = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!("`turbonet {}` failed ({status})", args.join(" "));
    }
    Ok(Measured {
        seconds,
        peak_rss_kib,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `turbonet bench`.
pub fn bench(which: &Bench, progress: &dyn Progress) -> Result<Report> {
    let (files, runs, check) = match which {
        Bench::Engine {
            probes,
            loss_frames,
        } => return engine::bench(*probes, *loss_frames, progress),
        Bench::Bgp { density, agents } => return bgp::bench(*density, agents, progress),
        Bench::Soft { frames } => return soft::bench(*frames, progress),
        Bench::Workloads => return workloads::bench(progress),
        Bench::Instruments { frames } => return instruments::bench(*frames, progress),
        Bench::Up { files, runs, check } => (files, *runs, *check),
    };
    let mut out = Report::default();
    let files = if files.is_empty() {
        let dir = Path::new("scenarios");
        if !dir.is_dir() {
            bail!(
                "no scenario files given and no ./scenarios directory; run from the turbonet checkout or name files"
            );
        }
        [
            "fat-tree-k4.toml",
            "fat-tree-k8.toml",
            "fat-tree-k16.toml",
            "hpn.toml",
        ]
        .iter()
        .map(|f| dir.join(f))
        .collect()
    } else {
        files.clone()
    };
    let runs = runs.max(1);
    let mut rows = Vec::new();
    for file in &files {
        let (lab, _) = up::load(file)?;
        let file_arg = file.display().to_string();
        let (mut ups, mut downs, mut checks) = (Vec::new(), Vec::new(), Vec::new());
        let (mut up_rss, mut down_rss) = (0, 0);
        for run in 0..runs {
            progress.note(&format!("bench {} run {}/{runs} ...", lab.name, run + 1));
            let up = measure(&["up", "--quiet", &file_arg])?;
            if check {
                match measure(&["check", "--lab", &lab.name]) {
                    Ok(c) => checks.push(c.seconds),
                    Err(e) => {
                        let _ = measure(&["down", &lab.name]);
                        return Err(e);
                    }
                }
            }
            let down = measure(&["down", &lab.name])?;
            ups.push(up.seconds);
            downs.push(down.seconds);
            up_rss = up_rss.max(up.peak_rss_kib);
            down_rss = down_rss.max(down.peak_rss_kib);
        }
        let switches = lab.fabric.switches().count();
        let hosts = lab.fabric.hosts().count();
        rows.push(vec![
            lab.name.clone(),
            count(switches),
            count(hosts),
            count(lab.fabric.links.len()),
            format!("{:.2}", median(ups)),
            if checks.is_empty() {
                "-".into()
            } else {
                format!("{:.2}", median(checks))
            },
            format!("{:.2}", median(downs)),
            format!("{:.1}", up_rss as f64 / 1024.0),
            format!("{:.1}", down_rss as f64 / 1024.0),
        ]);
    }
    out.table(
        &[
            "lab", "switches", "hosts", "links", "up s", "check s", "down s", "up MiB", "down MiB",
        ],
        rows,
        &[1, 2, 3, 4, 5, 6, 7, 8],
    );
    out.text(format!(
        "median of {runs} run(s); `up s` is until every route is installed; MiB is peak RSS of the turbonet process"
    ));
    Ok(out)
}
