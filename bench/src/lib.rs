//! turbonet-bench: `turbonet bench`. `up`, `check` and `down` on
//! scenarios phase by phase beside the kernel's own cost (`fabric`, with
//! [`ip_batch`]: what `up` asks of the kernel as iproute2 batches), and the
//! link engine, BGP, the soft switch, the workloads and the instruments,
//! each in its module; results come back as a [`report::Report`] the
//! command line prints.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::report::Report;
use turbonet_host::process;
use turbonet_lab::bail;
use turbonet_lab::error::{Context, Result};
use turbonet_lab::progress::Progress;

pub mod bgp;
pub mod engine;
mod fabric;
pub mod instruments;
pub mod ip_batch;
pub mod machines;
pub mod report;
pub mod soft;
pub mod workloads;

/// What to measure.
#[derive(Debug, Clone)]
pub enum Bench {
    /// `up` (until routed) phase by phase beside the kernel's own cost,
    /// `down` and with `check` the check, on `files` (default: fat-tree
    /// k=4, k=8, k=16 and hpn), the median of `runs`.
    Up {
        /// Scenario files.
        files: Vec<PathBuf>,
        /// Runs per scenario.
        runs: usize,
        /// Also time `check`: of every pair (`Some(None)`), or of K hosts
        /// behind every edge switch (`Some(Some(K))`).
        check: Option<Option<usize>>,
        /// The routing mode to bring each scenario up with instead of its
        /// own (`static`, `bgp`).
        routing: Option<String>,
    },
    /// The userspace link engine: accuracy, capacity and cost.
    Engine(engine::Options),
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
    /// A lab over machines emulated as namespaces: each worker's objects
    /// and CPU over each count of machines, and the delay across an
    /// impaired cut link.
    Machines {
        /// The scenario.
        file: PathBuf,
        /// The counts of machines.
        counts: Vec<u32>,
        /// Delay probes on each side.
        probes: usize,
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
        address(&self.name, node)
    }
}

/// The first address of node `node` of lab `lab`, which is up.
pub(crate) fn address(lab: &str, node: &str) -> Result<std::net::Ipv4Addr> {
    let saved = turbonet_lab::state::LabDir::of(lab).saved_lab()?;
    let n = saved
        .fabric
        .node_by_name(node)
        .with_context(|| format!("lab {lab} has no node {node}"))?;
    let (_, local, _) = saved
        .fabric
        .ports(n.id)
        .next()
        .with_context(|| format!("{node} has no port"))?;
    Ok(local.addr.addr())
}

impl Drop for UpLab {
    fn drop(&mut self) {
        if let Ok(exe) = std::env::current_exe() {
            let _ = Command::new(exe).args(["down", &self.name]).output();
        }
    }
}

/// The median round trip (ms) of `ping`'s output (`time=` of each reply);
/// NaN when none came back.
pub(crate) fn median_rtt_ms(stdout: &[u8]) -> f64 {
    let mut rtts: Vec<f64> = String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("time=")))
        .filter_map(|t| t.parse().ok())
        .collect();
    rtts.sort_by(f64::total_cmp);
    rtts.get(rtts.len() / 2).copied().unwrap_or(f64::NAN)
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
        let ns = turbonet_host::namespaces::open(&turbonet_lab::names::node_namespace(lab, node))
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
    turbonet_host::namespaces::in_namespace(ns, || {
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
    pub(crate) peak_rss_kib: u64,
}

/// Runs this binary with `args`, returning wall time and peak RSS.
pub(crate) fn measure(args: &[&str]) -> Result<Measured> {
    let exe = std::env::current_exe()?;
    let peaks = peaks_dir();
    std::fs::create_dir_all(&peaks)?;
    let start = Instant::now();
    let child = Command::new(&exe)
        .args(args)
        .env(process::PEAK_RSS_DIR, &peaks)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("running {}", exe.display()))?;
    let (status, rusage_kib) = process::wait_with_peak(&child)?;
    let seconds = start.elapsed().as_secs_f64();
    // The process's own figure; rusage's starts at this process's peak.
    let peak_file = peaks.join(child.id().to_string());
    let peak_rss_kib = std::fs::read_to_string(&peak_file)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(rusage_kib);
    let _ = std::fs::remove_file(&peak_file);
    if !status.success() {
        bail!("`turbonet {}` failed ({status})", args.join(" "));
    }
    Ok(Measured {
        seconds,
        peak_rss_kib,
    })
}

/// The size of the event log of the lab in `dir`, MiB (`None`: none).
pub(crate) fn events_mib(dir: &turbonet_lab::state::LabDir) -> Option<f64> {
    let bytes = std::fs::metadata(turbonet_lab::events::events_path(dir))
        .ok()?
        .len();
    Some(bytes as f64 / (1024.0 * 1024.0))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Where the processes [`measure`] starts write their peak RSS.
fn peaks_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("turbonet-bench-peaks-{}", std::process::id()))
}

/// `turbonet bench`.
pub fn bench(which: &Bench, progress: &dyn Progress) -> Result<Report> {
    let report = bench_one(which, progress);
    let _ = std::fs::remove_dir_all(peaks_dir());
    report
}

fn bench_one(which: &Bench, progress: &dyn Progress) -> Result<Report> {
    match which {
        Bench::Up {
            files,
            runs,
            check,
            routing,
        } => fabric::bench(files, *runs, *check, routing.as_deref(), progress),
        Bench::Engine(options) => engine::bench(options, progress),
        Bench::Bgp { density, agents } => bgp::bench(*density, agents, progress),
        Bench::Soft { frames } => soft::bench(*frames, progress),
        Bench::Machines {
            file,
            counts,
            probes,
        } => machines::bench(file, counts, *probes, progress),
        Bench::Workloads => workloads::bench(progress),
        Bench::Instruments { frames } => instruments::bench(*frames, progress),
    }
}
