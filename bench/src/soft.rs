//! `turbonet bench --soft`: the soft switch's forwarding rate through a
//! 5-hop fat-tree path (edge, aggregation, core, aggregation, edge), beside
//! the `netns` target (the kernel forwarding in five namespaces) and, when
//! `simple_switch_grpc` is on `PATH`, one BMv2 running turbonet.p4 (the
//! whole fabric mapped onto it, `target = "p4rt"`, `bmv2 = true`) on the
//! same path, measured in one run.
//!
//! 64-byte UDP frames go from h0-0-0 to h1-0-0 as fast as one sender can;
//! the rate is what arrives. For the soft switch, the CPU time of its
//! data-plane thread over the blast gives its load (one thread: one core).
//! Then delay accuracy: with 1 ms on every link, a ping crosses 12 links
//! (6 each way), so its round trip should be 12 ms plus the path's own
//! time.

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

/// One BMv2 with ports enough for the whole k=4 fat-tree.
const BMV2_SWITCH: &str =
    "[p4rt]\n[[p4rt.switch]]\nname = \"bm0\"\nports = 128\nspeed = \"10G\"\nbmv2 = true\n";

/// Every link's delay in the delay-accuracy rows, and the links a ping's
/// round trip crosses on the 5-hop path.
const DELAY_MS: f64 = 1.0;
const CROSSINGS: f64 = 12.0;

/// Where [`bench`] looked for `simple_switch_grpc`, for the note when it
/// is absent.
fn bmv2_search_path() -> String {
    std::env::var("PATH").unwrap_or_default().replace(':', ", ")
}

/// The median round trip (ms) of 20 pings from [`FROM`] to [`TO`] in lab
/// `name`.
fn ping_ms(name: &str, lab: &UpLab) -> Result<f64> {
    let to = lab.address(TO)?.to_string();
    let ping =
        crate::exec_in(name, FROM, &["ping", "-n", "-c", "20", "-i", "0.05", &to]).output()?;
    Ok(crate::median_rtt_ms(&ping.stdout))
}

/// `turbonet bench --soft`.
pub fn bench(frames: u64, progress: &dyn Progress) -> Result<Report> {
    let mut out = Report::default();
    let mut rows = Vec::new();
    let bmv2 = turbonet_lab::dataplane::p4::switches::find_bmv2().is_some();
    let mut targets = vec![
        ("netns (kernel)", "tnbsnetns", "netns", String::new()),
        ("soft switch", "tnbssoft", "soft", String::new()),
        (
            "soft switch, 50us every link",
            "tnbssoftd",
            "soft",
            "[links.default]\ndelay = \"50us\"\n".to_owned(),
        ),
    ];
    if bmv2 {
        targets.push((
            "BMv2 (one simple_switch_grpc)",
            "tnbsbmv2",
            "p4rt",
            BMV2_SWITCH.to_owned(),
        ));
    }
    for (label, name, target, links) in targets {
        progress.note(&format!("bench soft: {label} ..."));
        let lab = up(name, target, &links)?;
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
         kernel on the sender's core; BMv2 runs the fabric's 20 virtual switches on one \
         simple_switch_grpc, its cables loopback veth pairs.".to_owned());
    if !bmv2 {
        out.text(format!(
            "BMv2: skipped, {} is not on PATH (looked in: {})",
            turbonet_lab::dataplane::p4::switches::BMV2,
            bmv2_search_path()
        ));
    }

    // Delay accuracy: 1 ms on every link.
    let mut rows = Vec::new();
    let delay = format!("[links.default]\ndelay = \"{DELAY_MS}ms\"\n");
    let mut targets = vec![("soft switch", "tnbssoftp", "soft", delay.clone())];
    if bmv2 {
        targets.push(("BMv2", "tnbsbmv2p", "p4rt", format!("{delay}{BMV2_SWITCH}")));
    }
    for (label, name, target, links) in targets {
        progress.note(&format!("bench soft: delay on {label} ..."));
        let lab = up(name, target, &links)?;
        // The first pings resolve the hosts' gateways.
        let _ = ping_ms(name, &lab);
        let rtt = ping_ms(name, &lab)?;
        let expected = DELAY_MS * CROSSINGS;
        rows.push(vec![
            label.to_owned(),
            format!("{expected:.1}"),
            format!("{rtt:.2}"),
            format!("{:+.2}", rtt - expected),
        ]);
    }
    out.table(
        &[
            "ping h0-0-0 -> h1-0-0, 1 ms every link",
            "expected RTT ms",
            "median RTT ms",
            "error ms",
        ],
        rows,
        &[1, 2, 3],
    );
    Ok(out)
}
