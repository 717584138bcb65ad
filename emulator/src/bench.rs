//! `turbonet bench`: time `up` (until routed) and `down` on scenarios, with
//! the peak memory of each, measured as a user would run them: each step is
//! this binary in a child process, timed from spawn to exit, its peak RSS
//! read from `wait4`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::lab;
use crate::render::{count, table};

/// Arguments of `bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Scenario files (default: fat-tree k=4, k=8, k=16 and hpn from ./scenarios).
    pub files: Vec<PathBuf>,
    /// Runs per scenario; the table shows the median.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Also run `check` (all host pairs) after each `up`, and time it.
    #[arg(long)]
    pub check: bool,
    /// Measure the userspace link engine instead: delay accuracy, loss
    /// statistics and forwarding capacity on a two-host lab.
    #[arg(long)]
    pub engine: bool,
    /// With --engine: delay probes per configured delay.
    #[arg(long, default_value_t = 5_000)]
    pub probes: usize,
    /// With --engine: frames per configured loss probability.
    #[arg(long, default_value_t = 1_000_000)]
    pub loss_frames: u64,
    /// Measure BGP instead: convergence from `up` and after a link and a
    /// switch failure on fat-tree k=4, k=8 and hpn, per agent.
    #[arg(long)]
    pub bgp: bool,
    /// With --bgp: the agents to compare.
    #[arg(long, value_delimiter = ',', default_value = "builtin,frr")]
    pub agents: Vec<String>,
    /// With --bgp: agent density instead (CPU and memory of 80, 320 and
    /// 1,000 built-in agents at steady state; FRR on k=8 for comparison).
    #[arg(long, requires = "bgp")]
    pub density: bool,
    /// Measure the soft switch instead: its forwarding rate through a
    /// 5-hop fat-tree path, beside the netns target on the same path.
    #[arg(long)]
    pub soft: bool,
    /// With --soft: frames per path.
    #[arg(long, default_value_t = 1_000_000, requires = "soft")]
    pub frames: u64,
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
        let lab = lab::saved_lab(&crate::state::LabDir::of(&self.name))?;
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
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = start.elapsed().as_secs_f64();
    if r < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("`turbonet {}` failed (status {status})", args.join(" "));
    }
    Ok(Measured {
        seconds,
        peak_rss_kib: usage.ru_maxrss as u64,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `turbonet bench`.
pub fn bench(args: &BenchArgs) -> Result<ExitCode> {
    if args.engine {
        return crate::bench_engine::bench(args.probes, args.loss_frames);
    }
    if args.bgp {
        return crate::bench_bgp::bench(args.density, &args.agents);
    }
    if args.soft {
        return crate::bench_soft::bench(args.frames);
    }
    let files = if args.files.is_empty() {
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
        args.files.clone()
    };
    let runs = args.runs.max(1);
    let mut rows = Vec::new();
    for file in &files {
        let Ok((lab, _)) = lab::load(file) else {
            return Ok(ExitCode::from(crate::cli::EXIT_INVALID));
        };
        let file_arg = file.display().to_string();
        let (mut ups, mut downs, mut checks) = (Vec::new(), Vec::new(), Vec::new());
        let (mut up_rss, mut down_rss) = (0, 0);
        for run in 0..runs {
            eprintln!("bench {} run {}/{runs} ...", lab.name, run + 1);
            let up = measure(&["up", "--quiet", &file_arg])?;
            if args.check {
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
    println!(
        "{}",
        table(
            &[
                "lab", "switches", "hosts", "links", "up s", "check s", "down s", "up MiB",
                "down MiB",
            ],
            rows,
            &[1, 2, 3, 4, 5, 6, 7, 8],
        )
    );
    println!(
        "median of {runs} run(s); `up s` is until every route is installed; MiB is peak RSS of the turbonet process"
    );
    Ok(ExitCode::SUCCESS)
}
