//! `turbonet bench --workloads`: what turbonet's workloads can measure on
//! this machine, beside the tools people compare them with, in one run on
//! one unimpaired k=4 fat-tree (with a management network):
//!
//! - the traffic generator's capacity on one 5-hop path (h0-0-0 to
//!   h1-0-0): a TCP flow, and UDP with 1,472- and 64-byte payloads, sent as
//!   fast as the sender can, beside iperf3 on the same path;
//! - ring AllReduce bus bandwidth over four hosts, one per pod, beside the
//!   same two-rank ring between two hosts of one edge switch (the machine's
//!   ceiling for one path) and beside Open MPI's ring (mpi4py, `turbonet
//!   mpirun`) on the same four hosts.
//!
//! Every figure is received bytes over time at the receivers; the host is
//! the bottleneck, so ratios in one run are what to compare.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::report::Report;
use crate::{IperfServer, UpLab, exec_in};
use turbonet_lab::bail;
use turbonet_lab::error::{Context, Result};
use turbonet_lab::progress::Progress;
use turbonet_lab::workload::Report as Workload;

const LAB: &str = "tnbwl";
const FROM: &str = "h0-0-0";
const TO: &str = "h1-0-0";
const RING: [&str; 4] = ["h0-0-0", "h1-0-0", "h2-0-0", "h3-0-0"];
const PAIR: [&str; 2] = ["h0-0-0", "h0-0-1"];
const SECONDS: u64 = 3;
const RING_BYTES: u64 = 32 << 20;

/// The mpi4py program `turbonet mpirun` runs.
const MPI_PROGRAM: &str = include_str!("../assets/mpi_collective.py");

fn turbonet(args: &[&str]) -> Result<std::process::Output> {
    Ok(Command::new(std::env::current_exe()?)
        .args(args)
        .stdin(Stdio::null())
        .output()?)
}

/// Starts the workloads of `text` on the bench lab and waits until `name`
/// is done; its report.
fn run_workload(name: &str, text: &str) -> Result<Workload> {
    let path = std::env::temp_dir().join(format!("turbonet-bench-{LAB}-{name}.toml"));
    std::fs::write(&path, text)?;
    let out = turbonet(&[
        "workload",
        "start",
        "--lab",
        LAB,
        &path.display().to_string(),
    ])?;
    if !out.status.success() {
        bail!("starting {name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = turbonet(&["workload", "show", name, "--lab", LAB, "--json"])?;
        let reports: Vec<Workload> = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("reading the report of {name}"))?;
        if let Some(r) = reports
            .into_iter()
            .find(|r| r.name == name && r.state.is_over())
        {
            return Ok(r);
        }
        if Instant::now() >= deadline {
            bail!("workload {name} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs iperf3 from `FROM` to `TO` (`args` for the client) against a
/// server of its own; the client's JSON report.
fn iperf3(to: std::net::Ipv4Addr, args: &[&str]) -> Result<serde_json::Value> {
    let server = IperfServer::start(LAB, TO)?;
    let (to, secs) = (to.to_string(), SECONDS.to_string());
    let mut client = vec!["iperf3", "-c", &to, "-p", &server.port, "-J", "-t", &secs];
    client.extend(args);
    let out = exec_in(LAB, FROM, &client).stdin(Stdio::null()).output()?;
    if !out.status.success() {
        bail!("iperf3 failed: {}", String::from_utf8_lossy(&out.stdout));
    }
    serde_json::from_slice(&out.stdout).context("iperf3 -J output")
}

/// Received bits per second of an iperf3 report (the receiver's figure).
fn received(report: &serde_json::Value) -> f64 {
    report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
}

fn ratio(ours: f64, theirs: f64) -> String {
    if theirs > 0.0 {
        format!("{:.2}", ours / theirs)
    } else {
        "-".to_owned()
    }
}

fn gbit(bps: f64) -> String {
    format!("{:.2}", bps / 1e9)
}

/// `turbonet bench --workloads`.
pub fn bench(progress: &dyn Progress) -> Result<Report> {
    let mut out = Report::default();
    progress.note("bench workloads: bringing up fat-tree k=4 ...");
    let ring: Vec<String> = RING.iter().map(|h| format!("\"{h}\"")).collect();
    let lab = UpLab::up(
        LAB,
        &format!(
            "[lab]\nname = \"{LAB}\"\nseed = 1\n[topology]\nkind = \"fat-tree\"\nk = 4\n\
             [routing]\nmode = \"static\"\n[mgmt]\npool = \"192.168.250.0/24\"\n\
             [[job]]\nname = \"ring\"\nhosts = [{}]\n",
            ring.join(", ")
        ),
    )?;
    let to = lab.address(TO)?;

    let mut rows = Vec::new();
    let pair = format!(
        "hosts = [\"{FROM}\", \"{TO}\"]\npattern = \"pairs\"\npairs = [[\"{FROM}\", \"{TO}\"]]\n"
    );
    // TCP.
    progress.note("bench workloads: TCP ...");
    let tcp = run_workload(
        "bench-tcp",
        &format!(
            "[[workload]]\nname = \"bench-tcp\"\nkind = \"tcp\"\n{pair}duration = \"{SECONDS}s\"\n"
        ),
    )?;
    let ours = tcp.flows.first().map_or(0.0, |f| f.goodput);
    let theirs = received(&iperf3(to, &[])?);
    rows.push(vec![
        "TCP, one flow".to_owned(),
        gbit(ours),
        gbit(theirs),
        ratio(ours, theirs),
        "-".into(),
        "-".into(),
    ]);
    // UDP, as fast as one sender goes (a rate it cannot reach).
    for (payload, label) in [
        (1472u32, "UDP, 1,472-byte payload"),
        (64, "UDP, 64-byte payload"),
    ] {
        progress.note(&format!("bench workloads: {label} ..."));
        let name = format!("bench-udp{payload}");
        let udp = run_workload(
            &name,
            &format!(
                "[[workload]]\nname = \"{name}\"\nkind = \"udp\"\n{pair}rate = \"40gbit\"\n\
                 size = {payload}\nduration = \"{SECONDS}s\"\n"
            ),
        )?;
        let ours = udp.flows.first().map_or(0.0, |f| f.goodput);
        let size = payload.to_string();
        let theirs = received(&iperf3(to, &["-u", "-b", "0", "-l", &size])?);
        let pps = |bps: f64| format!("{:.0}", bps / 8.0 / f64::from(payload) / 1000.0);
        rows.push(vec![
            label.to_owned(),
            gbit(ours),
            gbit(theirs),
            ratio(ours, theirs),
            pps(ours),
            pps(theirs),
        ]);
    }
    out.table(
        &[
            "h0-0-0 -> h1-0-0 (5 hops)",
            "turbonet Gbit/s",
            "iperf3 Gbit/s",
            "ratio",
            "turbonet kpps",
            "iperf3 kpps",
        ],
        rows,
        &[1, 2, 3, 4, 5],
    );
    out.text(format!(
        "Received payload over {SECONDS} s from one sender (turbonet: one flow of the lab \
         daemon's workload runtime; iperf3: one client process). UDP is sent as fast as the \
         sender goes; what the receiver gets counts."
    ));

    // Collectives.
    let mut rows = Vec::new();
    let ring = |name: &str, hosts: &[&str]| -> Result<(f64, f64)> {
        let list: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
        let r = run_workload(
            name,
            &format!(
                "[[workload]]\nname = \"{name}\"\nkind = \"collective\"\nhosts = [{}]\n\
                 op = \"all-reduce\"\nalgorithm = \"ring\"\nsize = \"{}MiB\"\niterations = 5\nwarmup = 1\n",
                list.join(", "),
                RING_BYTES >> 20
            ),
        )?;
        let op = r
            .ops
            .first()
            .with_context(|| format!("{name} reported no operation"))?;
        Ok((op.time, op.busbw))
    };
    progress.note("bench workloads: ring AllReduce ...");
    let (t4, bus4) = ring("bench-ring4", &RING)?;
    let (t2, bus2) = ring("bench-ring2", &PAIR)?;
    progress.note("bench workloads: Open MPI's ring AllReduce ...");
    let mpi = mpi_ring()?;
    let n = RING.len() as f64;
    let mpi_bus = mpi.map(|t| RING_BYTES as f64 * 8.0 / t * 2.0 * (n - 1.0) / n);
    rows.push(vec![
        "turbonet, 4 ranks (one per pod)".to_owned(),
        format!("{:.1}", t4 * 1e3),
        gbit(bus4),
        "1.00".into(),
    ]);
    rows.push(vec![
        "turbonet, 2 ranks on one edge switch".to_owned(),
        format!("{:.1}", t2 * 1e3),
        gbit(bus2),
        format!("{:.2}", bus2 / bus4.max(1.0)),
    ]);
    match (mpi, mpi_bus) {
        (Some(t), Some(bus)) => rows.push(vec![
            "Open MPI ring (mpi4py), 4 ranks".to_owned(),
            format!("{:.1}", t * 1e3),
            gbit(bus),
            format!("{:.2}", bus / bus4.max(1.0)),
        ]),
        _ => rows.push(vec![
            "Open MPI ring (mpi4py), 4 ranks".to_owned(),
            "-".into(),
            "not installed".into(),
            "-".into(),
        ]),
    }
    out.table(
        &[
            &format!("ring AllReduce, {} MiB", RING_BYTES >> 20),
            "time ms",
            "busbw Gbit/s",
            "vs 4 ranks",
        ],
        rows,
        &[1, 2, 3],
    );
    out.text(
        "Bus bandwidth as nccl-tests defines it (size / time x 2(n-1)/n), mean of 5 timed \
         repetitions after one warm-up. Two ranks on one edge switch: the fastest path this \
         machine has, its ceiling. Open MPI: the same hosts and size, its tuned ring pinned, \
         data over TCP on the fabric, timed by MPI_Wtime over 5 repetitions."
            .to_owned(),
    );
    drop(lab);
    Ok(out)
}

/// Open MPI's ring AllReduce of `RING_BYTES` over the `RING` hosts: mean
/// seconds per repetition, or `None` without Open MPI and mpi4py.
fn mpi_ring() -> Result<Option<f64>> {
    if !std::path::Path::new("/usr/bin/mpirun").exists() {
        return Ok(None);
    }
    let program: PathBuf = std::env::temp_dir().join("turbonet-bench-mpi_collective.py");
    std::fs::write(&program, MPI_PROGRAM)?;
    let out = turbonet(&[
        "mpirun",
        "--lab",
        LAB,
        "--job",
        "ring",
        "--",
        "/usr/bin/python3",
        &program.display().to_string(),
        "allreduce",
        &RING_BYTES.to_string(),
        "5",
    ])?;
    if !out.status.success() {
        bail!(
            "Open MPI's ring failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("no report from rank 0: {stdout}"))?;
    let report: serde_json::Value = serde_json::from_str(line)?;
    Ok(report["seconds"].as_f64())
}
