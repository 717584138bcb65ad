//! `turbonet bench --instruments`: what the instruments cost and how fast
//! they are.
//!
//! - The link engine's forwarding rate of 64-byte frames through one
//!   engine link, as is, while its counters are read ten times a second
//!   (the metrics endpoint and `ListLinks`, as a monitor scraping them),
//!   with a mirror of the link, and with a capture streaming to a client:
//!   each as a share of the engine as is, measured in the same run.
//! - The capture rate sustained without loss: frames sent at a rate
//!   through a captured engine link, and what the capture's reader got.
//! - Event latency: from a `fail` on fat-tree k=4 under BGP to each
//!   affected switch's route-change event reaching a subscriber.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::report::{Report, count};
use turbonet_api::{self as api, proto};
use turbonet_lab::bail;
use turbonet_lab::error::{Context, Result};
use turbonet_lab::progress::Progress;
use turbonet_lab::state::LabDir;

const LAB: &str = "tninstr";
const METRICS_PORT: u16 = 9_477;

/// h1 -- s1 -- h2, h1's link through the engine, a monitor node `mon`;
/// `extra` is appended (a mirror).
fn scenario(extra: &str) -> String {
    format!(
        "[lab]\nname = \"{LAB}\"\nseed = 1\n[topology]\nkind = \"custom\"\n\
         [[topology.nodes]]\nname = \"s1\"\nrole = \"switch\"\n\
         [[topology.nodes]]\nname = \"h1\"\nrole = \"host\"\n\
         [[topology.nodes]]\nname = \"h2\"\nrole = \"host\"\n\
         [[topology.nodes]]\nname = \"mon\"\nrole = \"host\"\n\
         [[topology.links]]\na = \"h1\"\nb = \"s1\"\ndelay = \"1ns\"\n\
         [[topology.links]]\na = \"h2\"\nb = \"s1\"\n\
         [[topology.links]]\na = \"mon\"\nb = \"s1\"\n\
         [metrics]\nport = {METRICS_PORT}\n{extra}"
    )
}

/// Sends `frames` 64-byte frames h1 -> h2 at `pps` (or as fast as the
/// sender can): kpps received.
fn blast(h2: Ipv4Addr, frames: u64, pps: Option<u64>) -> Result<(f64, u64)> {
    super::engine::blast_between(LAB, ("h1", "h2"), h2, frames, pps)
}

/// Reads the lab's counters ten times a second until `stop`, as a monitor
/// would: the metrics endpoint and the control API's `ListLinks`.
fn poll_counters(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut reads = 0u64;
        let Ok(mut client) = api::Client::connect(LabDir::of(LAB)) else {
            return 0;
        };
        while !stop.load(Ordering::Relaxed) {
            if client.list_links(None).is_ok() {
                reads += 1;
            }
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", METRICS_PORT)) {
                use std::io::{Read, Write};
                let _ = s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
                let mut sink = Vec::new();
                let _ = s.read_to_end(&mut sink);
                reads += 1;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        reads
    })
}

/// A capture running on a thread: frames it got, and those it missed.
type Capturing = std::thread::JoinHandle<Result<(u64, u64)>>;

/// Report rows.
type Rows = Vec<Vec<String>>;

/// Captures `link` until `stop`, counting frames and what the reader
/// missed.
fn capture(link: &str, stop: Arc<AtomicBool>) -> Result<(Capturing, Arc<AtomicU64>)> {
    let mut client = api::Client::connect(LabDir::of(LAB))?;
    let got = Arc::new(AtomicU64::new(0));
    let request = proto::CaptureRequest {
        link: link.to_owned(),
        direction: "a-b".to_owned(),
        snaplen: 128,
        count: 0,
    };
    let seen = got.clone();
    let thread = std::thread::spawn(move || {
        let mut missed = 0;
        client.capture(request, None, |frame| {
            seen.fetch_add(1, Ordering::Relaxed);
            missed = frame.missed;
            Ok::<_, turbonet_api::Error>(!stop.load(Ordering::Relaxed))
        })?;
        Ok((seen.load(Ordering::Relaxed), missed))
    });
    Ok((thread, got))
}

/// Forwarding rate rows, and the capture-rate rows.
fn engine_costs(frames: u64, progress: &dyn Progress) -> Result<(Rows, Rows)> {
    let mut rows = Vec::new();
    let row = |label: &str, got: u64, secs: f64, base: Option<f64>| {
        let kpps = got as f64 / secs / 1000.0;
        vec![
            label.to_owned(),
            count(frames as usize),
            count(got as usize),
            format!("{kpps:.0}"),
            base.map_or_else(|| "1.00".to_owned(), |b| format!("{:.2}", kpps / b)),
        ]
    };
    // As is, and with its counters read by a monitor.
    let lab = super::UpLab::up(LAB, &scenario(""))?;
    let h2 = lab.address("h2")?;
    progress.note("bench instruments: engine as is ...");
    let (secs, got) = blast(h2, frames, None)?;
    let base = got as f64 / secs / 1000.0;
    rows.push(row("engine link as is", got, secs, None));
    progress.note("bench instruments: counters read 10 times a second ...");
    let stop = Arc::new(AtomicBool::new(false));
    let poller = poll_counters(stop.clone());
    let (secs, got) = blast(h2, frames, None)?;
    stop.store(true, Ordering::Relaxed);
    let reads = poller.join().unwrap_or(0);
    rows.push(row(
        &format!("counters read ({reads} reads: metrics + ListLinks)"),
        got,
        secs,
        Some(base),
    ));
    // Captured, streaming to a client.
    progress.note("bench instruments: captured ...");
    let stop = Arc::new(AtomicBool::new(false));
    let (thread, _) = capture("h1--s1", stop.clone())?;
    let (secs, got) = blast(h2, frames, None)?;
    // One more frame ends the capture's loop.
    stop.store(true, Ordering::Relaxed);
    let _ = blast(h2, 1, None);
    let (captured, missed) = thread
        .join()
        .map_err(|_| turbonet_lab::err!("the capture thread panicked"))??;
    rows.push(row(
        &format!(
            "captured ({} frames to the reader, {} missed)",
            count(captured as usize),
            count(missed as usize)
        ),
        got,
        secs,
        Some(base),
    ));
    // The capture rate sustained without loss.
    let mut capture_rows = Vec::new();
    for pps in [50_000u64, 100_000, 200_000] {
        progress.note(&format!("bench instruments: capture at {pps} pps ..."));
        let n = pps * 2;
        let stop = Arc::new(AtomicBool::new(false));
        let (thread, _) = capture("h1--s1", stop.clone())?;
        let (_, got) = blast(h2, n, Some(pps))?;
        stop.store(true, Ordering::Relaxed);
        let _ = blast(h2, 1, None);
        let (captured, missed) = thread
            .join()
            .map_err(|_| turbonet_lab::err!("the capture thread panicked"))??;
        capture_rows.push(vec![
            count(pps as usize),
            count(n as usize),
            count(got as usize),
            count(captured.min(got) as usize),
            count(missed as usize),
            if missed == 0 && captured >= got {
                "none lost".to_owned()
            } else {
                format!("{:.1}% lost", missed as f64 * 100.0 / got.max(1) as f64)
            },
        ]);
    }
    drop(lab);
    // Mirrored to the monitor.
    progress.note("bench instruments: mirrored ...");
    let lab = super::UpLab::up(
        LAB,
        &scenario("[[mirror]]\nlink = \"h1--s1\"\nto = \"mon\"\n"),
    )?;
    let h2 = lab.address("h2")?;
    let (secs, got) = blast(h2, frames, None)?;
    rows.push(row("mirrored to a monitor's port", got, secs, Some(base)));
    drop(lab);
    Ok((rows, capture_rows))
}

/// Event latency on fat-tree k=4 under BGP: (switches with a route
/// change, first, median, last latency in ms).
fn event_latency(progress: &dyn Progress) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    let text = std::fs::read_to_string("scenarios/fat-tree-k4.toml")
        .context("reading scenarios/fat-tree-k4.toml (run bench from the repository)")?
        .replace("name = \"k4\"", &format!("name = \"{LAB}\""))
        .replace("mode = \"static\"", "mode = \"bgp\"");
    let _lab = super::UpLab::up(LAB, &text)?;
    let dir = LabDir::of(LAB);
    for (i, link) in ["edge0-0--agg0-0", "agg1-0--core0"].into_iter().enumerate() {
        progress.note(&format!(
            "bench instruments: event latency, fail {link} ..."
        ));
        // A subscriber, following from now on.
        let mut client = api::Client::connect(&dir)?;
        let arrivals: Arc<std::sync::Mutex<Vec<(String, Instant)>>> = Arc::default();
        let seen = arrivals.clone();
        let skip = client_backlog(&dir)?;
        let follower = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(3);
            let mut n = 0usize;
            let _ = client.events_until(true, Some(deadline), |e| {
                n += 1;
                if n > skip
                    && e.kind == "route-change"
                    && let Some(node) = e.about.node
                    && let Ok(mut s) = seen.lock()
                {
                    s.push((node, Instant::now()));
                }
                true
            });
        });
        std::thread::sleep(Duration::from_millis(300));
        let sent = Instant::now();
        api::Client::connect(&dir)?.fail(&api::Target::Link(link.to_owned()))?;
        follower
            .join()
            .map_err(|_| turbonet_lab::err!("the event follower panicked"))?;
        api::Client::connect(&dir)?.restore(&api::Target::Link(link.to_owned()))?;
        let arrived = arrivals.lock().map(|a| a.clone()).unwrap_or_default();
        let mut per_switch = std::collections::BTreeMap::<String, f64>::new();
        for (node, at) in arrived {
            let ms = at.saturating_duration_since(sent).as_secs_f64() * 1e3;
            // The last change of each switch.
            per_switch.insert(node, ms);
        }
        let mut ms: Vec<f64> = per_switch.values().copied().collect();
        ms.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            ms.get(((ms.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        rows.push(vec![
            format!("fail {link}"),
            count(ms.len()),
            format!("{:.1}", pick(0.0)),
            format!("{:.1}", pick(0.5)),
            format!("{:.1}", pick(1.0)),
        ]);
        if i == 0 {
            // Let the restore converge before the next failure.
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    Ok(rows)
}

/// How many events the lab has logged so far (a follower skips them).
fn client_backlog(dir: &LabDir) -> Result<usize> {
    let mut n = 0;
    api::Client::connect(dir)?.events(false, |_| {
        n += 1;
        true
    })?;
    Ok(n)
}

/// The instruments' benchmark.
pub fn bench(frames: u64, progress: &dyn Progress) -> Result<Report> {
    if LabDir::of(LAB).exists() {
        bail!("lab {LAB} is up; `turbonet down {LAB}` first");
    }
    let mut out = Report::default();
    let (rows, capture_rows) = engine_costs(frames, progress)?;
    out.text(
        "forwarding rate of one engine link, 64-byte UDP frames h1 -> h2 as fast as one sender can",
    );
    out.table(
        &["engine link", "sent", "received", "kpps", "vs as is"],
        rows,
        &[1, 2, 3, 4],
    );
    out.text(
        "capture rate: frames sent at a rate through a captured engine link, streamed to a reader",
    );
    out.table(
        &["pps", "sent", "received", "captured", "missed", "capture"],
        capture_rows,
        &[0, 1, 2, 3, 4],
    );
    let latency = event_latency(progress)?;
    out.text("event latency, fat-tree k=4 under BGP (built-in agents): from the fail request to each switch's last route-change event reaching a subscriber");
    out.table(
        &["change", "switches", "first ms", "median ms", "last ms"],
        latency,
        &[1, 2, 3, 4],
    );
    Ok(out)
}
