//! `--part io`: what receiving a frame costs with each I/O backend the
//! engine could read its ports with, on one veth pair of a namespace of
//! the bench's own: `recvmmsg` batches (what the engine uses) against a
//! `TPACKET_V2` ring. One thread blasts 64-byte frames into one end as
//! fast as it can; another reads the other end, copying each frame out as
//! the engine does, until the sender is done and the ring or socket is
//! empty. The kernel's share of the work moves between the reader and the
//! sender's softirq with the backend, so the machine's CPU per frame is
//! the figure to compare, with the reader's own beside it.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use turbonet_host::process;
use turbonet_lab::bail;
use turbonet_lab::error::{Context, Result};
use turbonet_packetio::poller::Poller;
use turbonet_packetio::ring::RxRing;
use turbonet_packetio::socket::{PacketSocket, RxBatch};

/// The frames each backend is measured with.
const FRAME: usize = 64;
/// Ring slots: 2 KiB, a full-size frame and its header.
const RING_FRAME_SIZE: usize = 2048;

/// The backends measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Mmsg,
    /// A ring of this many slots.
    Ring(usize),
}

impl Backend {
    fn name(self) -> String {
        match self {
            Backend::Mmsg => "recvmmsg (64 a call)".to_owned(),
            Backend::Ring(frames) => {
                format!("TPACKET_V2 ring ({} MiB)", (frames * RING_FRAME_SIZE) >> 20)
            }
        }
    }
}

/// A namespace with a veth pair `tx0`/`rx0`, up; deleted when dropped.
struct Pair {
    ns: String,
}

/// Runs `ip ARGS` (iproute2); an error names the command.
pub(crate) fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Pair {
    fn new() -> Result<Pair> {
        let pair = Pair {
            ns: format!("tnio{}", std::process::id()),
        };
        ip(&["netns", "add", &pair.ns])?;
        ip(&[
            "-n", &pair.ns, "link", "add", "name", "tx0", "type", "veth", "peer", "name", "rx0",
        ])?;
        for dev in ["tx0", "rx0"] {
            ip(&["-n", &pair.ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// Runs `f` on a thread inside the namespace.
    fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> std::thread::JoinHandle<Result<T>> {
        let path = format!("/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
            nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(std::io::Error::from)
                .context("entering the bench's namespace")?;
            f()
        })
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

fn ifindex(name: &str) -> Result<u32> {
    nix::net::if_::if_nametoindex(name)
        .map_err(std::io::Error::from)
        .with_context(|| format!("interface {name}"))
}

/// Reads with `read` (each call takes what is ready and returns how many
/// frames) until the sender is done and the port has stayed empty for
/// 20 looks; returns the frames read and the reading thread's CPU ns.
fn read_all(
    poller: &mut Poller,
    sending: &AtomicBool,
    mut read: impl FnMut() -> std::io::Result<usize>,
) -> Result<(u64, u64)> {
    let cpu0 = thread_cpu_ns();
    let (mut got, mut empty_after_send) = (0u64, 0);
    loop {
        let n = read()?;
        got += n as u64;
        if n == 0 {
            if !sending.load(Ordering::Acquire) {
                empty_after_send += 1;
                if empty_after_send > 20 {
                    break;
                }
            }
            poller.wait(Duration::from_millis(5))?;
        }
    }
    Ok((got, thread_cpu_ns() - cpu0))
}

/// One backend's run: frames sent, received, the reader's CPU ns, the
/// wall time of the blast, and the machine's CPU ns from the first frame
/// sent to the last read.
fn measure(backend: Backend, frames: u64) -> Result<(u64, u64, u64, Duration, f64)> {
    let pair = Pair::new()?;
    let sending = Arc::new(AtomicBool::new(true));
    let ready = Arc::new(AtomicBool::new(false));
    let reader = {
        let (sending, ready) = (sending.clone(), ready.clone());
        pair.spawn(move || -> Result<(u64, u64)> {
            let index = ifindex("rx0")?;
            let mut poller = Poller::new(4)?;
            let mut copy: Vec<u8> = Vec::with_capacity(2048);
            let mut copy_out = |frame: &[u8]| {
                copy.clear();
                copy.extend_from_slice(frame);
            };
            match backend {
                Backend::Mmsg => {
                    let socket = PacketSocket::bind(index)?;
                    poller.add(std::os::fd::AsFd::as_fd(&socket), 1)?;
                    let mut batch = RxBatch::new(64, 2048);
                    ready.store(true, Ordering::Release);
                    read_all(&mut poller, &sending, || {
                        let n = socket.recv_batch(&mut batch)?;
                        (0..n).for_each(|f| copy_out(batch.frame(f)));
                        Ok(n)
                    })
                }
                Backend::Ring(frames) => {
                    let mut ring = RxRing::bind(index, frames, RING_FRAME_SIZE)?;
                    poller.add(std::os::fd::AsFd::as_fd(&ring), 1)?;
                    ready.store(true, Ordering::Release);
                    read_all(&mut poller, &sending, || {
                        Ok(ring.drain(64, |frame, _| copy_out(frame)))
                    })
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ready.load(Ordering::Acquire) {
        if reader.is_finished() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let sender = pair.spawn(move || -> Result<(u64, Duration, (u64, u64), Instant)> {
        let socket = PacketSocket::bind(ifindex("tx0")?)?;
        let mut frame = vec![0xffu8; 6];
        frame.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
        frame.resize(FRAME - 4, 0);
        let batch: Vec<Vec<u8>> = vec![frame; 64];
        let ticks0 = process::machine_ticks()?;
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < frames {
            let lost = socket.send_batch(&batch)?;
            sent += (batch.len() - lost) as u64;
        }
        let wall = start.elapsed();
        Ok((sent, wall, ticks0, start))
    });
    let (sent, wall, ticks0, start) = sender.join().expect("the sending thread")?;
    sending.store(false, Ordering::Release);
    let (got, reader_ns) = reader.join().expect("the reading thread")?;
    let ticks1 = process::machine_ticks()?;
    // Busy share of every CPU from the first frame sent to the last read,
    // in CPU-nanoseconds.
    let cpus = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let share = (ticks1.0 - ticks0.0) as f64 / (ticks1.1 - ticks0.1).max(1) as f64;
    let machine_ns = share * cpus * start.elapsed().as_nanos() as f64;
    Ok((sent, got, reader_ns, wall, machine_ns))
}

/// The rows: backend, frames sent, received, lost, sender kpps, machine
/// CPU per received frame (us), reader CPU per received frame (us).
pub(crate) fn receive(frames: u64) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    let backends = [Backend::Mmsg, Backend::Ring(1024), Backend::Ring(8192)];
    for backend in backends.into_iter().chain(backends) {
        let (sent, got, reader_ns, wall, machine_ns) = measure(backend, frames)?;
        let per = |ns: f64| format!("{:.2}", ns / got.max(1) as f64 / 1e3);
        rows.push(vec![
            backend.name(),
            crate::report::count(sent as usize),
            crate::report::count(got as usize),
            format!(
                "{:.1}%",
                100.0 * (sent - got.min(sent)) as f64 / sent.max(1) as f64
            ),
            format!("{:.0}", sent as f64 / wall.as_secs_f64() / 1e3),
            per(machine_ns),
            per(reader_ns as f64),
        ]);
    }
    Ok(rows)
}

/// The columns of [`receive`].
pub(crate) const HEADERS: &[&str] = &[
    "receive backend",
    "sent",
    "received",
    "lost",
    "sender kpps",
    "machine us/frame",
    "reader us/frame",
];
