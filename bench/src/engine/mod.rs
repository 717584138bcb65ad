//! `turbonet bench --engine`: how faithfully and how fast the userspace
//! link engine emulates a link, measured on a real two-host lab.
//!
//! - Delay accuracy: UDP probes at light load (one per millisecond) from h1
//!   to h2 across a link with a configured one-way delay; the receive time
//!   is the kernel's timestamp (`SO_TIMESTAMPNS`), so receiver wake-up
//!   latency does not count. Error = measured one-way delay - configured
//!   delay - the same path's one-way delay without the engine.
//! - Loss: 10^6 frames through a link with a configured loss probability;
//!   the engine's own counters give the measured rate, compared with the
//!   99% binomial interval.
//! - Capacity: UDP frames blasted through the engine, compared with a plain
//!   veth path in the same run.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use socket2::Socket;
use turbonet_lab::bail;
use turbonet_lab::error::{Context, Result};

pub(crate) mod backends;
mod capacity;
mod load;
mod scaling;
mod stages;
pub(crate) mod traffic;

use crate::report::{Report, count};
use turbonet_lab::progress::Progress;
use turbonet_lab::state::LabDir;

const LAB: &str = "tnbench";
use traffic::PORT;

/// The engine the bench labs' impaired links get (`[lab] engine`), set
/// once per run from [`Options::link_engine`].
static LINK_ENGINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The `[lab] engine` line of the bench labs.
fn engine_line() -> String {
    let engine = LINK_ENGINE.get().map_or("userspace", String::as_str);
    format!("engine = \"{engine}\"\n")
}

/// The bench lab: h1 -- s1 -- h2; `params` go on h1--s1 (TOML lines).
fn scenario(params: &str) -> String {
    format!(
        "[lab]\nname = \"{LAB}\"\nseed = 1\n{}[topology]\nkind = \"custom\"\n\
         [[topology.nodes]]\nname = \"s1\"\nrole = \"switch\"\n\
         [[topology.nodes]]\nname = \"h1\"\nrole = \"host\"\n\
         [[topology.nodes]]\nname = \"h2\"\nrole = \"host\"\n\
         [[topology.links]]\na = \"h1\"\nb = \"s1\"\n{params}\n\
         [[topology.links]]\na = \"h2\"\nb = \"s1\"\n",
        engine_line()
    )
}

/// The bench lab, up (`down` when dropped), and h2's address.
struct BenchLab {
    _lab: crate::UpLab,
    h2: Ipv4Addr,
}

impl BenchLab {
    fn up(params: &str) -> Result<Self> {
        let lab = crate::UpLab::up(LAB, &scenario(params))?;
        Ok(BenchLab {
            h2: lab.address("h2")?,
            _lab: lab,
        })
    }
}

/// A UDP socket created inside a node of the bench lab.
fn udp_in(node: &str, bind: Option<SocketAddrV4>) -> Result<Socket> {
    traffic::udp_in(LAB, node, bind)
}

fn realtime_ns() -> i128 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME).expect("clock");
    i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec())
}

/// Sends `n` probes from h1 to h2, one per `gap`, and returns each
/// received probe's one-way delay (ns), kernel-timestamped on receipt.
fn one_way_delays(lab: &BenchLab, n: usize, gap: Duration) -> Result<Vec<i64>> {
    let to = SocketAddrV4::new(lab.h2, PORT);
    let rx = udp_in("h2", Some(to))?;
    let tx = udp_in("h1", None)?;
    one_way(&tx, rx, to, n, gap)
}

/// Sends `n` probes from `tx` to `to`, where `rx` is bound, one per `gap`,
/// and returns each received probe's one-way delay (ns), kernel-timestamped
/// on receipt (both ends on this machine's clock).
pub(crate) fn one_way(
    tx: &Socket,
    rx: Socket,
    to: SocketAddrV4,
    n: usize,
    gap: Duration,
) -> Result<Vec<i64>> {
    turbonet_packetio::timestamp::enable(&rx)?;
    rx.set_read_timeout(Some(Duration::from_secs(2)))?;
    let to = to.into();
    // Warm up until a probe gets through: ARP along the path is resolved
    // (through a 100 ms link that takes a while) before measuring.
    let mut buf = [MaybeUninit::<u8>::uninit(); 64];
    let mut through = false;
    for _ in 0..20 {
        tx.send_to(&[0u8; 16], &to)?;
        if rx.recv(&mut buf).is_ok() {
            through = true;
            break;
        }
    }
    if !through {
        bail!("no probe got through the bench lab");
    }
    std::thread::sleep(Duration::from_millis(300));
    traffic::drain(&rx);
    let receiver = std::thread::spawn(move || -> Vec<i64> {
        let mut delays = Vec::with_capacity(n);
        while delays.len() < n {
            match recv_timestamped(&rx) {
                // Warm-up frames (a zero timestamp) may still be in flight.
                Ok(Some((sent, received))) if sent > 0 => delays.push((received - sent) as i64),
                Ok(_) => continue,
                Err(_) => break,
            }
        }
        delays
    });
    // Pace by sleeping: the probe's own timestamp makes pacing jitter
    // harmless, and spinning would steal the core the engine runs on.
    let start = Instant::now();
    for i in 0..n {
        let due = start + gap * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        tx.send_to(&realtime_ns().to_be_bytes(), &to)?;
    }
    Ok(receiver.join().expect("receiver thread"))
}

/// One probe: (send time from its payload, kernel receive time), ns.
fn recv_timestamped(socket: &Socket) -> io::Result<Option<(i128, i128)>> {
    let mut payload = [0u8; 64];
    let (n, received) = turbonet_packetio::timestamp::recv(socket, &mut payload)?;
    if n < 16 {
        return Ok(None);
    }
    let sent = i128::from_be_bytes(payload[..16].try_into().expect("16 bytes"));
    Ok(received.map(|received| (sent, received)))
}

pub(crate) fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub(crate) fn us(ns: i64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// The median one-way delay (ns) of the plain path (no engine) at light
/// load, over at most 500 probes: what an error is measured beyond.
fn plain_path_delay(probes: usize) -> Result<i64> {
    let lab = BenchLab::up("")?;
    let mut d = one_way_delays(&lab, probes.min(500), Duration::from_millis(1))?;
    d.sort_unstable();
    Ok(percentile(&d, 0.5))
}

/// Delay accuracy table rows.
fn delay_accuracy(probes: usize, progress: &dyn Progress) -> Result<Vec<Vec<String>>> {
    let baseline = plain_path_delay(probes)?;
    let mut rows = vec![vec![
        "none (veth)".into(),
        count(probes.min(500)),
        us(baseline),
        "-".into(),
        "-".into(),
        "-".into(),
        "-".into(),
    ]];
    for (label, delay_ns) in [
        ("100us", 100_000i64),
        ("1ms", 1_000_000),
        ("10ms", 10_000_000),
        ("100ms", 100_000_000),
    ] {
        progress.note(&format!("bench engine: delay {label} ..."));
        let lab = BenchLab::up(&format!("delay = \"{label}\""))?;
        let mut delays = one_way_delays(&lab, probes, Duration::from_millis(1))?;
        delays.sort_unstable();
        let mut errors: Vec<i64> = delays.iter().map(|d| d - delay_ns - baseline).collect();
        errors.sort_unstable();
        let mut abs: Vec<i64> = errors.iter().map(|e| e.abs()).collect();
        abs.sort_unstable();
        rows.push(vec![
            label.into(),
            count(delays.len()),
            us(percentile(&delays, 0.5)),
            us(percentile(&errors, 0.5)),
            us(percentile(&abs, 0.5)),
            us(percentile(&abs, 0.99)),
            us(*errors.last().unwrap_or(&0)),
        ]);
    }
    Ok(rows)
}

/// Loss rows: configured, frames, measured, 99% interval, verdict.
fn loss_accuracy(frames: u64, progress: &dyn Progress) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    for (label, p) in [
        ("1%", 1e-2),
        ("0.1%", 1e-3),
        ("0.01%", 1e-4),
        ("1e-8", 1e-8),
    ] {
        progress.note(&format!(
            "bench engine: loss {label} over {frames} frames ..."
        ));
        let lab = BenchLab::up(&format!("loss = \"{label}\""))?;
        blast(&lab, frames, Some(150_000))?;
        let directions = link_counters("h1--s1")?;
        let first = directions
            .first()
            .and_then(|d| d.counters)
            .unwrap_or_default();
        let (offered, lost) = (first.rx_packets, first.dropped_loss);
        let (lo, hi) = binomial_99(offered, p);
        rows.push(vec![
            label.into(),
            count(offered as usize),
            count(lost as usize),
            format!("{:.3e}", lost as f64 / offered.max(1) as f64),
            format!("{lo}-{hi}"),
            if (lo..=hi).contains(&lost) {
                "inside"
            } else {
                "OUTSIDE"
            }
            .into(),
        ]);
    }
    Ok(rows)
}

/// Normal approximation of the 99% binomial interval of the loss count,
/// widened to whole frames.
fn binomial_99(n: u64, p: f64) -> (u64, u64) {
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    let lo = (mean - 2.576 * sd).floor().max(0.0) as u64;
    let hi = (mean + 2.576 * sd).ceil() as u64;
    (lo, hi)
}

/// Sends `frames` 64-byte frames from h1 to h2, paced to `pps` if given,
/// and returns (seconds, frames received).
fn blast(lab: &BenchLab, frames: u64, pps: Option<u64>) -> Result<(f64, u64)> {
    blast_between(LAB, ("h1", "h2"), lab.h2, frames, pps)
}

/// Sends `frames` 64-byte UDP frames from host `hosts.0` to `to` (host
/// `hosts.1`) of lab `lab`, at `pps` or as fast as the sender can;
/// returns the seconds from the first frame to the last received one, and
/// how many arrived.
pub(crate) fn blast_between(
    lab: &str,
    hosts: (&str, &str),
    to: Ipv4Addr,
    frames: u64,
    pps: Option<u64>,
) -> Result<(f64, u64)> {
    let b = traffic::blast(lab, hosts, to, frames, 64, pps)?;
    Ok((b.secs, b.received))
}

fn link_counters(link: &str) -> Result<Vec<turbonet_api::proto::LinkDirection>> {
    // The daemon refreshes them every 250 ms; wait for settled ones.
    std::thread::sleep(Duration::from_millis(600));
    let links = turbonet_api::Client::connect(LabDir::of(LAB))?.links(Some(link))?;
    links
        .into_iter()
        .next()
        .map(|l| l.directions)
        .ok_or_else(|| turbonet_lab::err!("no counters for {link}"))
}

/// `turbonet exec --lab tnbench NODE -- ARGS`.
fn exec_in(node: &str, args: &[&str]) -> std::process::Command {
    crate::exec_in(LAB, node, args)
}

/// TCP goodput (bit/s) of a 5 s iperf3 run from h1 to h2.
fn iperf3(lab: &BenchLab, seconds: u32) -> Result<f64> {
    let server = crate::IperfServer::start(LAB, "h2")?;
    let out = exec_in(
        "h1",
        &[
            "iperf3",
            "-J",
            "-c",
            &lab.h2.to_string(),
            "-p",
            &server.port,
            "-t",
            &seconds.to_string(),
        ],
    )
    .output()?;
    drop(server);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("iperf3 -J output")?;
    report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| {
            turbonet_lab::err!(
                "iperf3 reported no throughput: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
}

/// Rate rows: configured, TCP goodput, goodput as a share of the
/// configured rate, and the link-layer rate it implies (1448-byte TCP
/// payload per 1514-byte frame).
fn rate_accuracy(progress: &dyn Progress) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    for (label, bps) in [("10mbit", 10e6), ("100mbit", 100e6), ("1gbit", 1e9)] {
        progress.note(&format!("bench engine: rate {label} (iperf3) ..."));
        let lab = BenchLab::up(&format!("rate = \"{label}\""))?;
        let goodput = iperf3(&lab, 5)?;
        let wire = goodput * 1514.0 / 1448.0;
        rows.push(vec![
            label.into(),
            format!("{:.1}", goodput / 1e6),
            format!("{:.1}", wire / 1e6),
            format!("{:+.1}%", (wire / bps - 1.0) * 100.0),
        ]);
    }
    Ok(rows)
}

/// Queueing delay under a standing queue: UDP at twice the rate keeps a
/// 100-packet queue drained at 10 Mbit/s full, and ping RTTs through it
/// are compared with what the queue holds over the rate. The queue counts
/// 100 frames of the link's MTU (1,514 bytes) and is full of 1,500-byte
/// datagrams (1,496 bytes as the queue sees them, without FCS): 101 of
/// them, 120.9 ms. The filler's socket buffer is forced large: with the
/// default 208 KiB the sender blocks once about 50 datagrams (their
/// buffers' true size) are queued, and the queue never fills (this line
/// once read 55 ms). TCP would not do either: receive-window autotuning
/// keeps its standing queue far below 100 packets on a path this short.
fn standing_queue(lab: &BenchLab) -> Result<(f64, f64)> {
    const FRAME: usize = 1500;
    let seen = FRAME - 4;
    let held = (100 * 1514) / seen * seen;
    let expected_ms = held as f64 * 8.0 / 10e6 * 1000.0;
    let to = SocketAddrV4::new(lab.h2, PORT);
    let sink = traffic::Sink::start(LAB, "h2", to, Duration::from_secs(2))?;
    let tx = udp_in("h1", None)?;
    tx.connect(&to.into())?;
    nix::sys::socket::setsockopt(&tx, nix::sys::socket::sockopt::SndBufForce, &(8 << 20))
        .map_err(io::Error::from)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let filler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let payload = vec![0u8; traffic::payload_of(FRAME)];
            // 20 Mbit/s of 1,500-byte frames.
            traffic::paced(
                &tx,
                &payload,
                u64::MAX,
                20_000_000 / 8 / FRAME as u64,
                Some(&stop),
            )
        })
    };
    // Let the queue fill (it takes 60 ms at twice the rate).
    std::thread::sleep(Duration::from_millis(500));
    let ping = exec_in(
        "h1",
        &["ping", "-n", "-c", "10", "-i", "0.2", &lab.h2.to_string()],
    )
    .output();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = filler.join();
    let _ = sink.finish();
    let ping = ping?;
    Ok((expected_ms, crate::median_rtt_ms(&ping.stdout)))
}

/// What `turbonet bench --engine` measures, and how much.
#[derive(Debug, Clone)]
pub struct Options {
    /// Delay probes per configured delay.
    pub probes: usize,
    /// Frames per configured loss probability.
    pub loss_frames: u64,
    /// Frames per capacity cell.
    pub frames: u64,
    /// Impaired links in the capacity grid.
    pub links: Vec<usize>,
    /// Engine shard counts in the capacity grid (`None`: the default).
    pub shards: Vec<Option<usize>>,
    /// The parts to run, in this order.
    pub parts: Vec<Part>,
    /// The engine the impaired links get: `userspace`, `bpf` (the kernel
    /// engine, where the kernel has `sch_fq`), `kernel` (netem) or `auto`.
    pub link_engine: String,
}

/// A part of `turbonet bench --engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// One-way delay at light load.
    Delay,
    /// Loss against the binomial interval.
    Loss,
    /// TCP through a rate.
    Rate,
    /// Queueing delay of a standing queue.
    Queue,
    /// The capacity grid, with every lost frame attributed.
    Capacity,
    /// One-way delay while the link carries 0-80% of its capacity.
    Load,
    /// The engine's cost with links that carry nothing.
    Idle,
    /// One flow per shard: how the delivered rate grows with shards.
    Scaling,
    /// What receiving a frame costs with each I/O backend.
    Io,
}

impl Part {
    /// Every part, in the order they run by default.
    pub const ALL: [Part; 9] = [
        Part::Delay,
        Part::Loss,
        Part::Rate,
        Part::Queue,
        Part::Capacity,
        Part::Load,
        Part::Idle,
        Part::Scaling,
        Part::Io,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Part::Delay => "delay",
            Part::Loss => "loss",
            Part::Rate => "rate",
            Part::Queue => "queue",
            Part::Capacity => "capacity",
            Part::Load => "load",
            Part::Idle => "idle",
            Part::Scaling => "scaling",
            Part::Io => "io",
        }
    }
}

/// `turbonet bench --engine`.
pub fn bench(options: &Options, progress: &dyn Progress) -> Result<Report> {
    let mut out = Report::default();
    if LINK_ENGINE.set(options.link_engine.clone()).is_err()
        && LINK_ENGINE.get() != Some(&options.link_engine)
    {
        bail!(
            "one engine per run: this run measures {:?}",
            LINK_ENGINE.get()
        );
    }
    out.text(format!(
        "impaired links on engine = \"{}\" (link show says which engine each link got)",
        options.link_engine
    ));
    for lab in [LAB, capacity::LAB, scaling::LAB] {
        if LabDir::of(lab).exists() {
            bail!("lab {lab} is up; `turbonet down {lab}` first");
        }
    }
    for part in &options.parts {
        match part {
            Part::Delay => delay_part(&mut out, options.probes, progress)?,
            Part::Loss => loss_part(&mut out, options.loss_frames, progress)?,
            Part::Rate => rate_part(&mut out, progress)?,
            Part::Queue => queue_part(&mut out, progress)?,
            Part::Capacity => capacity_part(&mut out, options, progress)?,
            Part::Load => {
                let rows = load::under_load(options.probes.min(5_000), progress)?;
                out.text(
                    "one-way delay error under load: probes (1/ms) across a 1ms link while \
                     64-byte frames keep it at a share of the capacity measured on it"
                        .to_owned(),
                );
                out.table(load::LOAD_HEADERS, rows, &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
            }
            Part::Io => {
                progress.note("bench engine: receive backends ...");
                let rows = backends::receive(options.frames)?;
                out.text(
                    "receive backends: 64-byte frames blasted into one end of a veth pair, \
                     read from the other (each frame copied out, as the engine does); the \
                     kernel's share moves between the reader and the sender's softirq, so \
                     compare the machine's CPU per frame"
                        .to_owned(),
                );
                out.table(backends::HEADERS, rows, &[1, 2, 3, 4, 5, 6]);
            }
            Part::Scaling => {
                let shards: Vec<usize> = options
                    .shards
                    .iter()
                    .map(|k| {
                        k.unwrap_or_else(|| {
                            turbonet_lab::dataplane::netns::engine::shard_count(None, usize::MAX)
                        })
                    })
                    .collect();
                let rows = scaling::scaling(options.frames, &shards, progress)?;
                out.text(format!(
                    "scaling: K flows of 64-byte frames, each from a sender thread of its own \
                     through an impaired link (10us delay) on a shard of its own, {} frames a \
                     flow; vs linear = delivered / (K x the first row's per-flow rate); on a \
                     machine with fewer cores than senders + shards + the kernel's receive \
                     work, the machine is the bottleneck (machine idle near 0%)",
                    count(options.frames as usize)
                ));
                out.table(scaling::HEADERS, rows, scaling::NUMERIC);
            }
            Part::Idle => {
                let rows = load::idle(&options.links, progress)?;
                out.text(
                    "idle cost: impaired links up, no traffic, engine CPU over 5 s".to_owned(),
                );
                out.table(load::IDLE_HEADERS, rows, &[0, 1, 2]);
            }
        }
    }
    Ok(out)
}

fn delay_part(out: &mut Report, probes: usize, progress: &dyn Progress) -> Result<()> {
    let delay = delay_accuracy(probes, progress)?;
    out.text(
        "one-way delay through the link's engine, light load (1 probe/ms), kernel rx timestamps"
            .to_owned(),
    );
    out.table(
        &[
            "configured",
            "probes",
            "median one-way us",
            "median error us",
            "median |error| us",
            "p99 |error| us",
            "max error us",
        ],
        delay,
        &[1, 2, 3, 4, 5, 6],
    );
    Ok(())
}

fn loss_part(out: &mut Report, loss_frames: u64, progress: &dyn Progress) -> Result<()> {
    let loss = loss_accuracy(loss_frames, progress)?;
    out.text("loss, measured by the engine's counters");
    out.table(
        &[
            "configured",
            "frames",
            "lost",
            "measured",
            "99% interval",
            "verdict",
        ],
        loss,
        &[1, 2, 3],
    );
    Ok(())
}

fn rate_part(out: &mut Report, progress: &dyn Progress) -> Result<()> {
    let rate = rate_accuracy(progress)?;
    out.text("rate: TCP (iperf3, 5 s) through a link shaped by the engine");
    out.table(
        &[
            "configured",
            "TCP goodput Mbit/s",
            "link-layer Mbit/s",
            "vs configured",
        ],
        rate,
        &[1, 2, 3],
    );
    Ok(())
}

fn queue_part(out: &mut Report, progress: &dyn Progress) -> Result<()> {
    progress.note("bench engine: standing queue ...");
    let (expected, measured) = {
        let lab = BenchLab::up("rate = \"10mbit\"\nqueue = \"100p\"")?;
        standing_queue(&lab)?
    };
    let verdict = if (measured / expected - 1.0).abs() <= 0.1 {
        "within 10%".to_owned()
    } else {
        format!("OFF by {:+.0}%", (measured / expected - 1.0) * 100.0)
    };
    out.text(format!(
        "standing queue (100 packets at 10 Mbit/s, UDP at 20 Mbit/s filling it): expected queueing delay {expected:.1} ms, \
         median ping RTT {measured:.1} ms: {verdict}\n"
    ));
    Ok(())
}

fn capacity_part(out: &mut Report, options: &Options, progress: &dyn Progress) -> Result<()> {
    let rows = capacity::grid(options.frames, &options.links, &options.shards, progress)?;
    out.text(format!(
        "capacity: {} UDP frames per cell, h1 -> h2 as fast as one sender thread can \
         (64 per sendmmsg), through one impaired link (10us delay) among the links counted, \
         beside a plain veth path; CPU per delivered frame, of the machine and of the engine; \
         every lost frame attributed to the stage that dropped it",
        count(options.frames as usize)
    ));
    out.table(capacity::HEADERS, rows, capacity::NUMERIC);
    Ok(())
}
