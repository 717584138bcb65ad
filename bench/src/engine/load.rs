//! Accuracy under load, and the cost of links that carry nothing.
//!
//! - Under load: the one-way delay of timestamped probes (one per
//!   millisecond) across a link with a 1 ms delay while 64-byte frames
//!   keep it at 0, 25, 50 and 80% of the capacity measured on the same
//!   link in the same run; the error is measured delay - configured delay -
//!   the plain path's delay at light load.
//! - Idle: the engine's CPU, as a share of one core, and the daemon's
//!   memory, with N impaired links up and no traffic.

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use turbonet_lab::error::Result;
use turbonet_lab::progress::Progress;
use turbonet_lab::state::LabDir;

use super::traffic::{self, Sink};
use super::{BenchLab, LAB, one_way_delays, percentile, plain_path_delay, us};
use crate::report::count;

/// The filler's port (the probes use [`traffic::PORT`]).
const FILL_PORT: u16 = 9_001;

/// Rows: load, filler kpps, probes, then one-way delay error p50, p99,
/// p99.9 and max (us).
pub(crate) fn under_load(probes: usize, progress: &dyn Progress) -> Result<Vec<Vec<String>>> {
    let baseline = plain_path_delay(probes)?;
    const DELAY_NS: i64 = 1_000_000;
    let lab = BenchLab::up("delay = \"1ms\"")?;
    progress.note("bench engine: under load, the link's capacity ...");
    let capacity = traffic::blast(LAB, ("h1", "h2"), lab.h2, 500_000, 64, None)?.pps();
    let mut rows = Vec::new();
    for share in [0u64, 25, 50, 80] {
        progress.note(&format!("bench engine: under load, {share}% ..."));
        let pps = (capacity * share as f64 / 100.0) as u64;
        let to = SocketAddrV4::new(lab.h2, FILL_PORT);
        let sink = Sink::start(LAB, "h2", to, Duration::from_millis(300))?;
        let stop = Arc::new(AtomicBool::new(false));
        let filler = (pps > 0).then(|| -> Result<_> {
            let tx = traffic::udp_in(LAB, "h1", None)?;
            tx.connect(&to.into())?;
            let stop = stop.clone();
            Ok(std::thread::spawn(move || {
                let payload = [0u8; 18];
                traffic::paced(&tx, &payload, u64::MAX, pps, Some(&stop))
            }))
        });
        let filler = filler.transpose()?;
        if filler.is_some() {
            std::thread::sleep(Duration::from_millis(300));
        }
        let path = super::stages::Path::bench(LAB, true);
        let before = path.read()?;
        let window = std::time::Instant::now();
        let delays = one_way_delays(&lab, probes, Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(300));
        let spent = path.read()?.since(&before);
        let window = window.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let sent = filler.map(|f| f.join().ok().and_then(Result::ok).unwrap_or(0));
        let (got, _) = sink.finish();
        let mut errors: Vec<i64> = delays?.iter().map(|d| d - DELAY_NS - baseline).collect();
        errors.sort_unstable();
        rows.push(vec![
            format!("{share}%"),
            format!("{:.0}", pps as f64 / 1e3),
            sent.map_or("-".into(), |s| {
                format!("{:.1}%", 100.0 * (s - got.min(s)) as f64 / s.max(1) as f64)
            }),
            count(errors.len()),
            us(percentile(&errors, 0.5)),
            us(percentile(&errors, 0.99)),
            us(percentile(&errors, 0.999)),
            us(*errors.last().unwrap_or(&0)),
            count(spent.late as usize),
            format!("{:.0}%", spent.busiest_shard / window * 100.0),
        ]);
    }
    Ok(rows)
}

/// The columns of [`under_load`].
pub(crate) const LOAD_HEADERS: &[&str] = &[
    "load",
    "filler kpps",
    "filler lost",
    "probes",
    "error p50 us",
    "p99 us",
    "p99.9 us",
    "max us",
    "engine frames >1ms late",
    "busiest shard",
];

/// Rows: impaired links, engine CPU (% of a core), daemon memory.
pub(crate) fn idle(links: &[usize], progress: &dyn Progress) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    for &n in links {
        progress.note(&format!("bench engine: {n} idle impaired links ..."));
        let _lab = crate::UpLab::up(super::capacity::LAB, &super::capacity::scenario(n, None))?;
        std::thread::sleep(Duration::from_secs(2));
        let pid = turbonet_api::Client::connect(LabDir::of(super::capacity::LAB))?
            .status()?
            .daemon_pid;
        let path = super::stages::Path::bench(super::capacity::LAB, true);
        let before = path.read()?;
        let window = Duration::from_secs(5);
        std::thread::sleep(window);
        let spent = path.read()?.since(&before);
        rows.push(vec![
            count(n),
            format!("{:.2}%", spent.engine_cpu / window.as_secs_f64() * 100.0),
            format!("{:.0}", crate::bgp::rss_mib(pid)?),
        ]);
    }
    Ok(rows)
}

/// The columns of [`idle`].
pub(crate) const IDLE_HEADERS: &[&str] = &[
    "impaired links",
    "engine CPU, % of a core",
    "daemon RSS MiB",
];
