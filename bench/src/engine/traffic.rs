//! Load for the engine benchmarks: UDP datagrams of a given frame size
//! from one host of a bench lab to another, many per system call
//! (`packetio::datagram`), blasted or paced, and counted on arrival.

use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use turbonet_host::namespaces;
use turbonet_lab::error::Result;
use turbonet_packetio::datagram;

/// The UDP port blasts go to.
pub(crate) const PORT: u16 = 9_000;
/// Ethernet, IPv4 and UDP headers, plus the frame check sequence a frame
/// size counts (a "64-byte frame" carries 18 bytes of payload).
const OVERHEAD: usize = 14 + 20 + 8 + 4;

/// UDP payload of a frame of `size` bytes (FCS included, as frame sizes
/// are quoted).
pub(crate) fn payload_of(size: usize) -> usize {
    size.saturating_sub(OVERHEAD).max(1)
}

/// A UDP socket created inside node `node` of lab `lab`.
pub(crate) fn udp_in(lab: &str, node: &str, bind: Option<SocketAddrV4>) -> Result<Socket> {
    let ns = namespaces::open(&turbonet_lab::names::node_namespace(lab, node))?;
    udp_in_namespace(&ns, bind)
}

/// A UDP socket created inside namespace `ns`, bound to `bind` if given.
pub(crate) fn udp_in_namespace(
    ns: &std::os::fd::OwnedFd,
    bind: Option<SocketAddrV4>,
) -> Result<Socket> {
    let socket = namespaces::in_namespace(ns, || {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        if let Some(addr) = bind {
            s.bind(&addr.into())?;
        }
        Ok(s)
    })?;
    Ok(socket)
}

/// Reads whatever is waiting on `socket` without blocking.
pub(crate) fn drain(socket: &Socket) {
    let _ = socket.set_nonblocking(true);
    let mut buf = [MaybeUninit::<u8>::uninit(); 2048];
    while socket.recv(&mut buf).is_ok() {}
    let _ = socket.set_nonblocking(false);
}

/// What a blast did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Blast {
    /// Datagrams the sender's kernel accepted.
    pub(crate) sent: u64,
    /// Datagrams that arrived.
    pub(crate) received: u64,
    /// From the first send to the last arrival, seconds.
    pub(crate) secs: f64,
}

impl Blast {
    /// Frames per second delivered.
    pub(crate) fn pps(&self) -> f64 {
        self.received as f64 / self.secs
    }
}

/// A counting receiver bound in `node` at `to`: counts datagrams until
/// none has come for `quiet`, then returns the count and when the last
/// one came.
pub(crate) struct Sink {
    thread: std::thread::JoinHandle<(u64, Instant)>,
}

impl Sink {
    /// Binds in `lab`'s `node` at `to` and starts counting.
    pub(crate) fn start(lab: &str, node: &str, to: SocketAddrV4, quiet: Duration) -> Result<Sink> {
        let rx = udp_in(lab, node, Some(to))?;
        rx.set_read_timeout(Some(quiet))?;
        let _ = rx.set_recv_buffer_size(16 << 20);
        let thread = std::thread::spawn(move || {
            let mut got = 0u64;
            let mut last = Instant::now();
            let mut scratch = [0u8; 2048];
            while let Ok(n) = datagram::recv_count(rx.as_fd(), &mut scratch) {
                got += n as u64;
                last = Instant::now();
            }
            (got, last)
        });
        Ok(Sink { thread })
    }

    /// Waits for the sender's last datagram to arrive (or not).
    pub(crate) fn finish(self) -> (u64, Instant) {
        self.thread.join().expect("sink thread")
    }
}

/// Sends `frames` datagrams of `size`-byte frames from host `hosts.0` of
/// lab `lab` to `to` (host `hosts.1`), at `pps` or as fast as the sender
/// can, and counts what arrives.
pub(crate) fn blast(
    lab: &str,
    hosts: (&str, &str),
    to: Ipv4Addr,
    frames: u64,
    size: usize,
    pps: Option<u64>,
) -> Result<Blast> {
    Sender::ready(lab, hosts, to, size)?.blast(frames, pps)
}

/// A sender with its path resolved and its receiver counting, ready to
/// blast (several can start together).
pub(crate) struct Sender {
    tx: Socket,
    sink: Sink,
    payload: Vec<u8>,
}

impl Sender {
    /// A connected sender in `hosts.0` of `lab` to `to` in `hosts.1`, the
    /// path resolved (ARP) and the receiver counting.
    pub(crate) fn ready(
        lab: &str,
        hosts: (&str, &str),
        to: Ipv4Addr,
        size: usize,
    ) -> Result<Sender> {
        let at = SocketAddrV4::new(to, PORT);
        let tx = udp_in(lab, hosts.0, None)?;
        tx.connect(&at.into())?;
        let _ = tx.set_send_buffer_size(4 << 20);
        // Resolve the path (ARP) before counting.
        let probe = udp_in(lab, hosts.1, Some(at))?;
        probe.set_read_timeout(Some(Duration::from_millis(200)))?;
        let mut buf = [MaybeUninit::<u8>::uninit(); 64];
        for _ in 0..25 {
            tx.send(&[0u8; 18])?;
            if probe.recv(&mut buf).is_ok() {
                break;
            }
        }
        drop(probe);
        Ok(Sender {
            tx,
            sink: Sink::start(lab, hosts.1, at, Duration::from_millis(500))?,
            payload: vec![0u8; payload_of(size)],
        })
    }

    /// Sends `frames` frames at `pps` or as fast as it can, and counts
    /// what arrives.
    pub(crate) fn blast(self, frames: u64, pps: Option<u64>) -> Result<Blast> {
        let Sender { tx, sink, payload } = self;
        let start = Instant::now();
        let sent = match pps {
            Some(pps) => paced(&tx, &payload, frames, pps, None)?,
            None => {
                let mut sent = 0u64;
                while sent < frames {
                    let n = (frames - sent).min(datagram::BATCH as u64) as usize;
                    match datagram::send_copies(tx.as_fd(), &payload, n) {
                        Ok(n) => sent += n as u64,
                        // A path probe that came after the probing socket
                        // closed was refused (ICMP port unreachable); the
                        // socket reports it once, on a later send.
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                sent
            }
        };
        let (received, last) = sink.finish();
        Ok(Blast {
            sent,
            received,
            secs: last.duration_since(start).as_secs_f64().max(1e-9),
        })
    }
}

/// Sends `frames` copies of `payload` on the connected `tx` at `pps`, a
/// small batch every 50 us (sleeping between, timer slack lowered), until
/// `stop` if given; returns how many it sent.
pub(crate) fn paced(
    tx: &Socket,
    payload: &[u8],
    frames: u64,
    pps: u64,
    stop: Option<&Arc<AtomicBool>>,
) -> Result<u64> {
    turbonet_packetio::timing::lower_timer_slack();
    let tick = Duration::from_micros(50);
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < frames && !stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
        let owed = (start.elapsed().as_nanos() as u64).saturating_mul(pps) / 1_000_000_000 + 1;
        let n = owed.min(frames).saturating_sub(sent);
        if n == 0 {
            std::thread::sleep(tick);
            continue;
        }
        let n = n.min(datagram::BATCH as u64) as usize;
        // A full buffer loses nothing: the next tick sends it again.
        sent += datagram::send_copies(tx.as_fd(), payload, n).unwrap_or(0) as u64;
    }
    Ok(sent)
}
