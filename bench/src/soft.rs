//! `turbonet bench --soft`: the soft switch's forwarding rate through a
//! 5-hop fat-tree path (edge, aggregation, core, aggregation, edge), beside
//! the `netns` target (the kernel forwarding in five namespaces) on the
//! same path, measured in one run.
//!
//! 64-byte UDP frames go from h0-0-0 to h1-0-0 as fast as one sender can;
//! the rate is what arrives. For the soft switch, the CPU time of its
//! data-plane thread over the blast gives its load (one thread: one core).

use std::time::Instant;

use turbonet_lab::error::Result;

use crate::UpLab;
use crate::engine::blast_between;
use crate::report::{Report, count};
use turbonet_lab::progress::Progress;
use turbonet_lab::state::LabDir;

const FROM: &str = "h0-0-0";
const TO: &str = "h1-0-0";

/// Brings fat-tree k=4 up as lab `name` on `target`, with `links` TOML.
fn up(name: &str, target: &str, links: &str) -> Result<UpLab> {
    UpLab::up(
        name,
        &format!(
            "[lab]\nname = \"{name}\"\nseed = 1\ntarget = \"{target}\"\n\
             [topology]\nkind = \"fat-tree\"\nk = 4\n[routing]\nmode = \"static\"\n{links}"
        ),
    )
}

/// CPU seconds the data-plane thread of lab `lab`'s soft switch has used
/// so far (`None` on other targets).
fn data_plane_cpu(lab: &UpLab) -> Option<f64> {
    let state = LabDir::of(&lab.name).load().ok()??;
    let pid = state
        .routers
        .iter()
        .find(|r| r.node == turbonet_lab::dataplane::p4::soft::SWITCH)?
        .pid;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
        let (head, rest) = stat.rsplit_once(')')?;
        if !head.ends_with("(data-plane") {
            continue;
        }
        // Fields after the command: state is 3rd, utime 14th, stime 15th.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        let hz = turbonet_host::process::clock_ticks_per_second();
        return Some(ticks as f64 / hz);
    }
    None
}

/// `turbonet bench --soft`.
pub fn bench(frames: u64, progress: &dyn Progress) -> Result<Report> {
    let mut out = Report::default();
    let mut rows = Vec::new();
    for (label, name, target, links) in [
        ("netns (kernel)", "tnbsnetns", "netns", ""),
        ("soft switch", "tnbssoft", "soft", ""),
        (
            "soft switch, 50us every link",
            "tnbssoftd",
            "soft",
            "[links.default]\ndelay = \"50us\"\n",
        ),
    ] {
        progress.note(&format!("bench soft: {label} ..."));
        let lab = up(name, target, links)?;
        let to = lab.address(TO)?;
        // The first frames resolve the hosts' gateways.
        blast_between(name, (FROM, TO), to, 100, Some(1_000))?;
        let cpu_before = data_plane_cpu(&lab);
        let started = Instant::now();
        let (secs, got) = blast_between(name, (FROM, TO), to, frames, None)?;
        let wall = started.elapsed().as_secs_f64();
        let cpu = match (cpu_before, data_plane_cpu(&lab)) {
            (Some(a), Some(b)) => format!("{:.0}", (b - a) / wall * 100.0),
            _ => "-".into(),
        };
        rows.push(vec![
            label.to_owned(),
            count(frames as usize),
            count(got as usize),
            format!("{:.0}", got as f64 / secs / 1000.0),
            cpu,
        ]);
    }
    out.table(
        &[
            "path h0-0-0 -> h1-0-0 (5 hops)",
            "sent",
            "received",
            "kpps",
            "data plane CPU %",
        ],
        rows,
        &[1, 2, 3, 4],
    );
    out.text("64-byte UDP frames from one sender thread; kpps = frames received / time to the last one. \
         The soft switch's data plane is one thread (CPU % of one core); netns forwards in the \
         kernel on the sender's core.".to_owned());
    Ok(out)
}
