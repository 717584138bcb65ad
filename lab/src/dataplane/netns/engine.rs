//! The userspace link engine: impaired links are spliced through the lab
//! daemon, which reads every frame a node sends on such a link, runs it
//! through the link's impairment model (`turbonet-injectors`) and transmits
//! it to the other end at its due time.
//!
//! Wiring: node A's port of an impaired link is a veth whose peer `e<id>a`
//! lives in the lab's hidden engine namespace; node B's likewise ends at
//! `e<id>b`. Frames read on `e<id>a` go through direction 0 and out of
//! `e<id>b`; direction 1 is the reverse.
//!
//! Timing: one engine thread serves all impaired links of a lab. It sleeps
//! in `ppoll` (nanosecond timeout, timer slack lowered to 1 ns) until a
//! frame arrives or the next frame is nearly due, then spins for the last
//! 100 microseconds (unless it has been busy most of the time: see
//! [`BUSY_NS`]); tokio's millisecond timers are far too coarse.

use crate::dataplane::plane::{LinkCounters, Shortfall};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use turbonet_injectors::{Direction, Impairment, Marks, Note, Watch};
use turbonet_packetio::timing::{self, SPIN_NS};
use turbonet_packetio::{Clock, PacketSocket, RxBatch};

use crate::carrier::Carrier;
use crate::dataplane::taps::{PortTap, Tap, Taps};

/// Frames read with one `recvmmsg`.
const RX_BATCH: usize = 32;
/// Batches read from one socket per pass, so one busy link cannot starve
/// the others.
const RX_BATCHES: usize = 4;
/// How often the engine publishes its counters: often enough that a
/// reader sampling them every 100 ms sees them at most a tenth stale.
const PUBLISH_EVERY: Duration = Duration::from_millis(10);
/// How often it asks its sockets for the frames the kernel dropped.
const DROPS_EVERY: u32 = 10;
/// Longest it sleeps with nothing to do.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// The engine spins only while it has been busy (working or spinning, not
/// asleep) for less than this share of its current [`WINDOW_NS`]; beyond,
/// it sleeps to due times instead. Under steady load a frame is nearly due
/// at every pass, so an unbounded spin keeps the engine's real-time thread
/// running all the time, and the kernel's real-time throttling
/// (`sched_rt_runtime_us`: 95% of each second) then stops it for 50 ms
/// every second: frames 50 ms late. Measured with one 100 Mbit/s TCP flow
/// over two engine links: the engine used 97% of a core and sent 1.4% of
/// frames more than a millisecond late, the latest by 51 ms; with the
/// bound, 0.12%, the latest by 4 ms.
const BUSY_NS: u64 = 80_000_000;
/// See [`BUSY_NS`].
const WINDOW_NS: u64 = 100_000_000;

/// How busy the engine has been in its current window.
struct Busy {
    /// When the window began (engine clock, ns).
    window: u64,
    /// Time asleep in it, ns.
    slept: u64,
}

/// The links the userspace engine splices, each with its position `k`
/// among them (which fixes its engine-side interface indices).
pub fn spliced(carriers: &[Carrier]) -> Vec<Option<usize>> {
    let mut k = 0;
    carriers
        .iter()
        .map(|c| {
            c.is_userspace().then(|| {
                k += 1;
                k - 1
            })
        })
        .collect()
}

/// Engine-side interface names and indices of the `k`-th impaired link
/// (`side` 0 faces `ends[0]`, 1 faces `ends[1]`).
pub fn port(link_id: u32, k: usize, side: usize) -> (String, u32) {
    let name = format!("e{link_id}{}", if side == 0 { 'a' } else { 'b' });
    (name, 2 + 2 * k as u32 + side as u32)
}

/// One impaired link as the engine runs it.
#[derive(Debug)]
pub struct EngineLink {
    /// The link's name (`edge0-0--agg0-0`).
    pub name: String,
    /// Sockets on `e<id>a` and `e<id>b`.
    pub sockets: [PacketSocket; 2],
    /// Direction 0: ends[0] -> ends[1]; direction 1: the reverse.
    pub directions: [Direction; 2],
    /// What each direction's queue and drops did, for the events.
    pub watches: [Watch; 2],
    /// Captures and mirrors of it.
    pub taps: Taps,
}

impl EngineLink {
    /// A link with these sockets, both directions with `impairment`
    /// seeded by `seeds`.
    pub fn new(
        name: String,
        sockets: [PacketSocket; 2],
        impairment: &Impairment,
        seeds: [u64; 2],
    ) -> EngineLink {
        EngineLink {
            name,
            sockets,
            directions: seeds.map(|seed| Direction::new(impairment.clone(), seed)),
            watches: [Watch::new(impairment), Watch::new(impairment)],
            taps: Taps::default(),
        }
    }

    /// Makes each direction keep its dropped frames exactly while a
    /// capture wants them.
    fn keep_dropped(&mut self) {
        for d in 0..2 {
            self.directions[d].keep_dropped(self.taps.wants_dropped(d));
        }
    }
}

/// A note of one direction of the `link`-th engine link, at `at` on the
/// engine's clock.
#[derive(Debug, Clone, Copy)]
pub struct EngineNote {
    /// Position in the engine's link list.
    pub link: usize,
    /// 0: ends[0] -> ends[1].
    pub direction: usize,
    /// When, on the engine's clock (as the times inside `note`).
    pub at: u64,
    /// What.
    pub note: Note,
}

/// Where the engine sends its notes.
pub type Notes = mpsc::Sender<EngineNote>;

/// Shared snapshot of all counters, refreshed by the engine thread.
pub type Snapshot = Arc<Mutex<Vec<LinkCounters>>>;

/// A change the daemon asks the running engine to make.
#[derive(Debug)]
pub enum Command {
    /// New parameters for both directions of the `link`-th engine link.
    Set {
        /// Position in the engine's link list.
        link: usize,
        /// The new parameters.
        impairment: Impairment,
    },
    /// Start a tap.
    Tap {
        /// On which link.
        at: TapAt,
        /// The tap.
        tap: Tap,
    },
    /// Stop tap `id`.
    Untap {
        /// The tap.
        id: u64,
    },
}

/// Where a tap goes.
#[derive(Debug)]
pub enum TapAt {
    /// On the `k`-th link the engine carries.
    Engine(usize),
    /// On a plain link, through a tap socket on the port of its end `side`
    /// (unused when the link is tapped already).
    Port {
        /// The link.
        link: String,
        /// The socket.
        socket: PacketSocket,
        /// Which end it is at.
        side: usize,
    },
}

/// The daemon's end of the engine: commands, and a pipe that wakes the
/// engine from its sleep so they take effect at once.
#[derive(Debug)]
pub struct Control {
    commands: mpsc::Sender<Command>,
    wake: OwnedFd,
}

impl Control {
    /// Another handle on the same engine.
    pub fn try_clone(&self) -> io::Result<Control> {
        Ok(Control {
            commands: self.commands.clone(),
            wake: self.wake.try_clone()?,
        })
    }

    /// Sends a command and wakes the engine.
    pub fn send(&self, command: Command) -> io::Result<()> {
        self.commands.send(command).map_err(|_| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the link engine has stopped")
        })?;
        nix::unistd::write(&self.wake, &[1u8])
            .map(drop)
            .map_err(io::Error::from)
    }
}

/// The engine's end: commands and the wake pipe's read end.
#[derive(Debug)]
pub struct Inbox {
    commands: mpsc::Receiver<Command>,
    wake: OwnedFd,
}

/// A connected control/inbox pair.
pub fn channel() -> io::Result<(Control, Inbox)> {
    let (tx, rx) = mpsc::channel();
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC)?;
    Ok((
        Control {
            commands: tx,
            wake: write,
        },
        Inbox {
            commands: rx,
            wake: read,
        },
    ))
}

impl Inbox {
    /// Applies every pending command; true when the ports tapped changed.
    fn apply(&self, links: &mut [EngineLink], ports: &mut Vec<PortTap>) -> bool {
        let mut sink = [0u8; 64];
        let mut changed = false;
        while matches!(nix::unistd::read(&self.wake, &mut sink), Ok(n) if n > 0) {}
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Tap {
                    at: TapAt::Engine(k),
                    tap,
                } => {
                    if let Some(l) = links.get_mut(k) {
                        l.taps.0.push(tap);
                        l.keep_dropped();
                    }
                }
                Command::Tap {
                    at: TapAt::Port { link, socket, side },
                    tap,
                } => match ports.iter_mut().find(|p| p.link == link) {
                    Some(port) => port.taps.0.push(tap),
                    None => {
                        ports.push(PortTap {
                            link,
                            socket,
                            side,
                            taps: Taps(vec![tap]),
                        });
                        changed = true;
                    }
                },
                Command::Untap { id } => {
                    for l in links.iter_mut() {
                        if l.taps.remove(id) {
                            l.keep_dropped();
                        }
                    }
                    for p in ports.iter_mut() {
                        p.taps.remove(id);
                    }
                    let before = ports.len();
                    ports.retain(|p| !p.taps.0.is_empty());
                    changed |= ports.len() != before;
                }
                Command::Set { link, impairment } => {
                    if let Some(l) = links.get_mut(link) {
                        for d in &mut l.directions {
                            d.set_impairment(impairment.clone());
                        }
                        for w in &mut l.watches {
                            w.set(&impairment);
                        }
                    }
                }
            }
        }
        changed
    }
}

/// What the engine polls: every link's two sockets, every tapped port's
/// socket, then the wake pipe.
fn poll_set(links: &[EngineLink], ports: &[PortTap], wake: &OwnedFd) -> Vec<libc::pollfd> {
    let fd = |fd: i32| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    links
        .iter()
        .flat_map(|l| l.sockets.iter())
        .chain(ports.iter().map(|p| &p.socket))
        .map(|s| fd(s.as_fd().as_raw_fd()))
        .chain(std::iter::once(fd(wake.as_raw_fd())))
        .collect()
}

/// Runs the engine until `stop` is set. Returns an error only for socket
/// failures the engine cannot survive.
pub fn run(
    mut links: Vec<EngineLink>,
    clock: Clock,
    stop: &AtomicBool,
    snapshot: &Snapshot,
    inbox: &Inbox,
    notes: &Notes,
) -> io::Result<()> {
    timing::lower_timer_slack();
    timing::request_realtime();
    let mut noted: Vec<Note> = Vec::new();
    let mut shortfall = vec![[Shortfall::default(); 2]; links.len()];
    let mut rx = RxBatch::new(RX_BATCH, 65_536);
    let mut due: Vec<Vec<u8>> = Vec::with_capacity(RX_BATCH);
    let mut ports: Vec<PortTap> = Vec::new();
    let mut fds = poll_set(&links, &ports, &inbox.wake);
    let unix = |ns: u64| clock.unix_nanos(ns);
    let mut published = Instant::now();
    let mut publications = 0u32;
    // Counters changed since they were last published.
    let mut dirty = false;
    let mut all_readable = true;
    let mut busy = Busy {
        window: clock.now(),
        slept: 0,
    };
    while !stop.load(Ordering::Relaxed) {
        if inbox.apply(&mut links, &mut ports) {
            fds = poll_set(&links, &ports, &inbox.wake);
            all_readable = true;
        }
        // Receive: everything that is waiting, in batches.
        let now = clock.now();
        for (i, link) in links.iter_mut().enumerate() {
            // A capture whose reader hung up ends here or below.
            let mut ended = false;
            for side in 0..2 {
                if !all_readable && fds[2 * i + side].revents & libc::POLLIN == 0 {
                    continue;
                }
                for _ in 0..RX_BATCHES {
                    let n = link.sockets[side].recv_batch(&mut rx)?;
                    dirty |= n > 0;
                    let keep = link.taps.wants_dropped(side);
                    for f in 0..n {
                        let arrival = clock.arrival(rx.received[f].1, now);
                        link.directions[side].offer(arrival, rx.frame(f).to_vec());
                        // A capture records a dropped frame when it arrived.
                        if keep {
                            let taps = &mut link.taps;
                            for (cause, frame) in link.directions[side].take_dropped() {
                                ended |= taps.offer(
                                    side,
                                    unix(arrival),
                                    &frame,
                                    Some(cause),
                                    Marks::default(),
                                );
                            }
                        }
                    }
                    if n < RX_BATCH {
                        break;
                    }
                }
            }
            if ended {
                link.keep_dropped();
            }
        }
        // Tapped plain links: what their ports sent and received.
        let tapped = 2 * links.len();
        let mut ended = false;
        for (j, port) in ports.iter_mut().enumerate() {
            if !all_readable && fds[tapped + j].revents & libc::POLLIN == 0 {
                continue;
            }
            for _ in 0..RX_BATCHES {
                // A port gone (its node was removed) ends its taps.
                let Ok(n) = port.socket.recv_batch(&mut rx) else {
                    port.taps.0.clear();
                    break;
                };
                for f in 0..n {
                    let d = if rx.outgoing[f] {
                        port.side
                    } else {
                        1 - port.side
                    };
                    let at = rx.received[f].1.unwrap_or_else(|| unix(now));
                    ended |= port.taps.offer(d, at, rx.frame(f), None, Marks::default());
                }
                if n < RX_BATCH {
                    break;
                }
            }
            port.taps.flush();
        }
        if ended {
            ports.retain(|p| !p.taps.0.is_empty());
            fds = poll_set(&links, &ports, &inbox.wake);
        }
        // Transmit: every frame that is due, in batches.
        let now = clock.now();
        let mut next_due: Option<u64> = None;
        for (k, (link, short)) in links.iter_mut().zip(shortfall.iter_mut()).enumerate() {
            for (side, short) in short.iter_mut().enumerate() {
                due.clear();
                let tapped = link.taps.wants(side);
                while let Some((at, frame, marks)) = link.directions[side].pop_due_marked(now) {
                    let late = now - at;
                    if late > Shortfall::LATE_NS {
                        short.late += 1;
                    }
                    short.max_late_ns = short.max_late_ns.max(late);
                    if tapped && link.taps.offer(side, unix(now), &frame, None, marks) {
                        link.keep_dropped();
                    }
                    due.push(frame);
                }
                if !due.is_empty() {
                    dirty = true;
                    short.tx_errors += link.sockets[1 - side].send_batch(&due)? as u64;
                    if tapped {
                        link.taps.flush();
                    }
                }
                if let Some(at) = link.directions[side].next_due() {
                    next_due = Some(next_due.map_or(at, |n: u64| n.min(at)));
                }
                link.watches[side].observe(now, link.directions[side].counters(), &mut noted);
                for note in noted.drain(..) {
                    // The daemon going away stops the engine soon after.
                    let _ = notes.send(EngineNote {
                        link: k,
                        direction: side,
                        at: now,
                        note,
                    });
                }
            }
        }
        if published.elapsed() >= PUBLISH_EVERY {
            publications = publications.wrapping_add(1);
            publish(
                &links,
                &mut shortfall,
                publications.is_multiple_of(DROPS_EVERY),
                snapshot,
            );
            published = Instant::now();
            dirty = false;
        }
        // Wait for the next frame or the next due time.
        let now = clock.now();
        if now - busy.window >= WINDOW_NS {
            busy = Busy {
                window: now,
                slept: 0,
            };
        }
        let may_spin = (now - busy.window).saturating_sub(busy.slept) < BUSY_NS;
        let wait = match next_due {
            Some(due) if due <= now + SPIN_NS && may_spin => {
                // Nearly due: spin, but keep reading (a non-blocking pass).
                all_readable = true;
                continue;
            }
            Some(due) if may_spin => Duration::from_nanos(due - now - SPIN_NS),
            // Busy enough: sleep to the due time itself.
            Some(due) => Duration::from_nanos(due.saturating_sub(now)),
            // Nothing queued: wake to publish what changed, if anything.
            None if dirty => PUBLISH_EVERY.saturating_sub(published.elapsed()),
            None => IDLE_WAIT,
        };
        timing::wait_readable(&mut fds, wait)?;
        busy.slept += clock.now().saturating_sub(now);
        all_readable = false;
    }
    publish(&links, &mut shortfall, true, snapshot);
    Ok(())
}

/// Publishes every link's counters, with (if `drops`) the frames the
/// kernel dropped at the engine's sockets since it last asked (socket side
/// 0 receives direction 0).
fn publish(
    links: &[EngineLink],
    shortfall: &mut [[Shortfall; 2]],
    drops: bool,
    snapshot: &Snapshot,
) {
    if drops {
        for (l, short) in links.iter().zip(shortfall.iter_mut()) {
            for (socket, short) in l.sockets.iter().zip(short.iter_mut()) {
                short.socket_drops += socket.take_drops().unwrap_or(0);
            }
        }
    }
    let counters = links
        .iter()
        .zip(shortfall.iter())
        .map(|(l, short)| LinkCounters {
            link: l.name.clone(),
            directions: [
                l.directions[0].counters().clone(),
                l.directions[1].counters().clone(),
            ],
            shortfall: *short,
        })
        .collect();
    if let Ok(mut s) = snapshot.lock() {
        *s = counters;
    }
}
