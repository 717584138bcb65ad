//! One engine thread: the links dealt to it, their sockets, and the loop
//! that moves their frames.
//!
//! Timing: the thread (nice -20, not real-time: see
//! `timing::request_priority`) sleeps in `epoll_pwait2` (a nanosecond
//! timeout, timer slack lowered to 1 ns) until a socket is readable, a
//! command arrives or the next frame is nearly due, then spins for the
//! last 100 microseconds (unless it has been busy most of the time: see
//! [`BUSY_NS`]); tokio's millisecond timers are far too coarse.
//!
//! Cost: a pass reads only the sockets epoll reports readable, sends only
//! what the timer over direction heads says is due, and looks at a
//! direction's watch only when it moved; counters are published every
//! [`PUBLISH_EVERY`] for the links that changed. Nothing in a pass grows
//! with the number of links that carry nothing. Frame buffers are reused
//! ([`POOL`]), not allocated per frame.

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use turbonet_injectors::shard::{Due, Shard};
use turbonet_injectors::{Marks, Note, Watch};
use turbonet_packetio::poller::{Poller, Waker};
use turbonet_packetio::timing::{self, SPIN_NS};
use turbonet_packetio::{Clock, PacketSocket, RxBatch};

use super::{Command, EngineLink, Notes, Snapshot, TapAt};
use crate::dataplane::plane::Shortfall;
use crate::dataplane::taps::{PortTap, Taps};

/// Frames read with one `recvmmsg`.
const RX_BATCH: usize = 32;
/// Batches read from one socket per pass, so one busy link cannot starve
/// the others.
const RX_BATCHES: usize = 4;
/// How often the engine publishes its counters: often enough that a
/// reader sampling them every 100 ms sees them at most a tenth stale.
const PUBLISH_EVERY: Duration = Duration::from_millis(10);
/// How often (in publications) it asks the sockets that received
/// something for the frames the kernel dropped.
const DROPS_EVERY: u32 = 10;
/// How often the shard measures again how far realtime (the kernel's
/// receive timestamps) is from its clock.
const RESYNC_EVERY: Duration = Duration::from_secs(1);
/// Longest it sleeps with nothing to do.
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// Frame buffers kept for reuse.
const POOL: usize = 4_096;
/// Readiness reported per wait.
const EVENTS: usize = 256;

/// The engine spins only while it has been busy (working or spinning, not
/// asleep) for less than this share of its current [`WINDOW_NS`]; beyond,
/// it sleeps to due times instead, leaving the core to the kernel's work
/// and the lab's processes. (Measured when shards ran real-time: under
/// steady load an unbounded spin made the kernel's real-time throttling
/// stop the engine for 50 ms every second; one 100 Mbit/s TCP flow over two
/// engine links sent 1.4% of frames more than a millisecond late, the
/// latest by 51 ms; with the bound, 0.12%, the latest by 4 ms. Shards now
/// run at nice -20, see `timing::request_priority`.)
const BUSY_NS: u64 = 80_000_000;
/// See [`BUSY_NS`].
const WINDOW_NS: u64 = 100_000_000;

/// The poller's token of the command eventfd.
const WAKE: u64 = u64::MAX;
/// Tokens of tapped plain ports start here (a link's socket is `2k +
/// side`).
const PORTS: u64 = 1 << 32;

/// A shard's commands and the eventfd that says there are some.
#[derive(Debug)]
pub(super) struct Inbox {
    pub(super) commands: mpsc::Receiver<Command>,
    pub(super) waker: Waker,
}

/// One link's I/O: its sockets, what watches and taps it, and this
/// machine's shortfalls.
struct Wire {
    /// Its position among all the engine's links.
    position: usize,
    sockets: [PacketSocket; 2],
    watches: [Watch; 2],
    taps: Taps,
    shortfall: [Shortfall; 2],
    /// On the list of links to publish ([`Changed`]).
    listed: bool,
    /// Its sockets received since their drops were last asked for.
    received: bool,
}

/// The links whose counters changed since they were last published, each
/// once: publishing touches these, not every link of the shard.
#[derive(Default)]
struct Changed(Vec<usize>);

impl Changed {
    /// Link `i` (`wire`) changed.
    fn touch(&mut self, i: usize, wire: &mut Wire) {
        if !std::mem::replace(&mut wire.listed, true) {
            self.0.push(i);
        }
    }
}

/// How busy the shard has been in its current window.
struct Busy {
    /// When the window began (engine clock, ns).
    window: u64,
    /// Time asleep in it, ns.
    slept: u64,
}

/// Directions whose watch needs looking at: those that moved in this
/// pass, and those with a burst or a high queue open (which end with
/// time, not with frames).
struct Watching {
    /// `2 * link + side`, each at most once.
    moved: Vec<usize>,
    flagged: Vec<bool>,
    open: Vec<usize>,
    is_open: Vec<bool>,
}

impl Watching {
    fn new(directions: usize) -> Watching {
        Watching {
            moved: Vec::new(),
            flagged: vec![false; directions],
            open: Vec::new(),
            is_open: vec![false; directions],
        }
    }

    fn moved(&mut self, i: usize) {
        if !std::mem::replace(&mut self.flagged[i], true) {
            self.moved.push(i);
        }
    }
}

/// Runs one shard over `links` (each with its position among all the
/// engine's links) until `stop` is set. Returns an error only for socket
/// failures it cannot survive.
pub(super) fn run(
    links: Vec<(usize, EngineLink)>,
    mut clock: Clock,
    stop: &AtomicBool,
    snapshot: &Snapshot,
    inbox: &Inbox,
    notes: &Notes,
) -> io::Result<()> {
    timing::lower_timer_slack();
    timing::request_priority();
    let mut poller = Poller::new(EVENTS)?;
    poller.add(inbox.waker.as_fd(), WAKE)?;
    let mut directions = Vec::with_capacity(links.len());
    let mut wires = Vec::with_capacity(links.len());
    for (i, (position, link)) in links.into_iter().enumerate() {
        for (side, socket) in link.sockets.iter().enumerate() {
            poller.add(socket.as_fd(), (2 * i + side) as u64)?;
        }
        directions.push(link.directions);
        wires.push(Wire {
            position,
            sockets: link.sockets,
            watches: link.watches,
            taps: link.taps,
            shortfall: [Shortfall::default(); 2],
            listed: false,
            received: false,
        });
    }
    let mut core = Shard::new(directions);
    let mut ports: Vec<PortTap> = Vec::new();
    let mut watching = Watching::new(2 * wires.len());
    let mut changed = Changed::default();
    let mut rx = RxBatch::new(RX_BATCH, 65_536);
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(RX_BATCH);
    let mut ready: Vec<u64> = Vec::with_capacity(EVENTS);
    let mut noted: Vec<Note> = Vec::new();
    let mut published = Instant::now();
    let mut synced = Instant::now();
    let mut publications = 0u32;
    let mut busy = Busy {
        window: clock.now(),
        slept: 0,
    };
    let mut wait = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        ready.clear();
        if wait.is_zero() {
            // Spinning: a look, which is work, not sleep.
            ready.extend_from_slice(poller.wait(wait)?);
        } else {
            let before = clock.now();
            ready.extend_from_slice(poller.wait(wait)?);
            busy.slept += clock.now().saturating_sub(before);
        }
        if ready.contains(&WAKE) {
            inbox.waker.reset();
            if apply(inbox, &mut core, &mut wires, &mut changed, &mut ports) {
                register_ports(&poller, &ports);
            }
        }
        // Receive: only what is readable.
        let now = clock.now();
        let mut ports_ended = false;
        for &token in &ready {
            if token == WAKE {
                continue;
            }
            if token >= PORTS {
                if let Some(port) = ports.get_mut((token - PORTS) as usize) {
                    ports_ended |= read_port(port, &mut rx, clock.unix_nanos(now));
                }
                continue;
            }
            let (i, side) = ((token / 2) as usize, (token % 2) as usize);
            let wire = &mut wires[i];
            let mut taps_changed = false;
            for _ in 0..RX_BATCHES {
                let n = wire.sockets[side].recv_batch(&mut rx)?;
                if n == 0 {
                    break;
                }
                changed.touch(i, wire);
                wire.received = true;
                let keep = wire.taps.wants_dropped(side);
                for f in 0..n {
                    let arrival = clock.arrival(rx.received[f].1, now);
                    let mut buffer = pool.pop().unwrap_or_default();
                    buffer.clear();
                    buffer.extend_from_slice(rx.frame(f));
                    core.offer(i, side, arrival, buffer);
                    // A capture records a dropped frame when it arrived.
                    if keep {
                        for (cause, frame) in core.direction_mut(i, side).take_dropped() {
                            taps_changed |= wire.taps.offer(
                                side,
                                clock.unix_nanos(arrival),
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
            watching.moved(token as usize);
            if taps_changed {
                keep_dropped(&mut core, i, &wire.taps);
            }
        }
        if ports_ended {
            ports.retain(|p| !p.taps.0.is_empty());
            register_ports(&poller, &ports);
        }
        // Transmit: what is due, direction by direction.
        let now = clock.now();
        transmit(
            &mut core,
            &mut wires,
            &mut changed,
            &mut watching,
            &mut batch,
            &mut pool,
            now,
            &clock,
        )?;
        // Watches: what moved now, and what is open whenever counters are
        // published.
        let publish = published.elapsed() >= PUBLISH_EVERY;
        if publish {
            for k in 0..watching.open.len() {
                let i = watching.open[k];
                core.direction_mut(i / 2, i % 2).advance(now);
                changed.touch(i / 2, &mut wires[i / 2]);
                watching.moved(i);
            }
        }
        observe(&core, &mut wires, &mut watching, &mut noted, notes, now);
        if publish {
            publications = publications.wrapping_add(1);
            let drops = publications.is_multiple_of(DROPS_EVERY);
            publish_counters(&core, &mut wires, &mut changed, drops, snapshot);
            published = Instant::now();
            if synced.elapsed() >= RESYNC_EVERY {
                clock.resync();
                synced = published;
            }
        }
        // How long to wait for the next frame or the next due time.
        let now = clock.now();
        if now - busy.window >= WINDOW_NS {
            busy = Busy {
                window: now,
                slept: 0,
            };
        }
        let may_spin = (now - busy.window).saturating_sub(busy.slept) < BUSY_NS;
        let dirty = !changed.0.is_empty() || !watching.open.is_empty();
        wait = match core.next_due() {
            // Nearly due: spin, but keep reading (a look, not a wait).
            Some(due) if due <= now + SPIN_NS && may_spin => Duration::ZERO,
            Some(due) if may_spin => Duration::from_nanos(due - now - SPIN_NS),
            // Busy enough: sleep to the due time itself.
            Some(due) => Duration::from_nanos(due.saturating_sub(now)),
            // Nothing queued: wake to publish what changed, if anything.
            None if dirty => PUBLISH_EVERY.saturating_sub(published.elapsed()),
            None => IDLE_WAIT,
        };
    }
    publish_counters(&core, &mut wires, &mut changed, true, snapshot);
    Ok(())
}

/// Sends every frame due by `now`: the frames of one direction go out
/// together with one `sendmmsg`, their buffers back to the pool.
#[allow(clippy::too_many_arguments)]
fn transmit(
    core: &mut Shard,
    wires: &mut [Wire],
    changed: &mut Changed,
    watching: &mut Watching,
    batch: &mut Vec<Vec<u8>>,
    pool: &mut Vec<Vec<u8>>,
    now: u64,
    clock: &Clock,
) -> io::Result<()> {
    let mut current: Option<(usize, usize)> = None;
    let mut failed: Option<io::Error> = None;
    let mut taps_changed: Vec<usize> = Vec::new();
    let mut flush = |wires: &mut [Wire], at: (usize, usize), batch: &mut Vec<Vec<u8>>| {
        let (i, side) = at;
        let wire = &mut wires[i];
        match wire.sockets[1 - side].send_batch(batch) {
            Ok(lost) => wire.shortfall[side].tx_errors += lost as u64,
            Err(e) => failed = Some(e),
        }
        if wire.taps.wants(side) {
            wire.taps.flush();
        }
        let room = POOL.saturating_sub(pool.len());
        pool.extend(batch.drain(..).take(room));
        batch.clear();
    };
    core.pop_due(now, |due: Due| {
        let at = (due.link, due.side);
        if current.is_some_and(|c| c != at) {
            flush(wires, current.expect("a direction"), batch);
        }
        current = Some(at);
        let wire = &mut wires[due.link];
        changed.touch(due.link, wire);
        let late = now - due.at;
        let short = &mut wire.shortfall[due.side];
        if late > Shortfall::LATE_NS {
            short.late += 1;
        }
        short.max_late_ns = short.max_late_ns.max(late);
        if wire.taps.wants(due.side)
            && wire
                .taps
                .offer(due.side, clock.unix_nanos(now), &due.frame, None, due.marks)
        {
            taps_changed.push(due.link);
        }
        batch.push(due.frame);
        watching.moved(2 * due.link + due.side);
    });
    if let Some(at) = current {
        flush(wires, at, batch);
    }
    for i in taps_changed {
        keep_dropped(core, i, &wires[i].taps);
    }
    failed.map_or(Ok(()), Err)
}

/// Looks at the watch of every direction that moved, sends its notes, and
/// keeps the open ones for later.
fn observe(
    core: &Shard,
    wires: &mut [Wire],
    watching: &mut Watching,
    noted: &mut Vec<Note>,
    notes: &Notes,
    now: u64,
) {
    let Watching {
        moved,
        flagged,
        open,
        is_open,
    } = watching;
    for i in moved.drain(..) {
        flagged[i] = false;
        let (link, side) = (i / 2, i % 2);
        let wire = &mut wires[link];
        let watch = &mut wire.watches[side];
        watch.observe(now, core.direction(link, side).counters(), noted);
        for note in noted.drain(..) {
            // The daemon going away stops the engine soon after.
            let _ = notes.send(super::EngineNote {
                link: wire.position,
                direction: side,
                at: now,
                note,
            });
        }
        let still = watch.is_open();
        if still && !is_open[i] {
            open.push(i);
        }
        is_open[i] = still;
    }
    open.retain(|&i| is_open[i]);
}

/// Makes both directions of link `i` keep their dropped frames exactly
/// while a capture wants them.
fn keep_dropped(core: &mut Shard, i: usize, taps: &Taps) {
    for side in 0..2 {
        core.direction_mut(i, side)
            .keep_dropped(taps.wants_dropped(side));
    }
}

/// Reads a tapped plain port: what it sent and received goes to its taps.
/// True when a tap ended (its reader hung up or the port is gone).
fn read_port(port: &mut PortTap, rx: &mut RxBatch, now_unix: i128) -> bool {
    let mut ended = false;
    for _ in 0..RX_BATCHES {
        // A port gone (its node was removed) ends its taps.
        let Ok(n) = port.socket.recv_batch(rx) else {
            port.taps.0.clear();
            return true;
        };
        for f in 0..n {
            let d = if rx.outgoing[f] {
                port.side
            } else {
                1 - port.side
            };
            let at = rx.received[f].1.unwrap_or(now_unix);
            ended |= port.taps.offer(d, at, rx.frame(f), None, Marks::default());
        }
        if n < RX_BATCH {
            break;
        }
    }
    port.taps.flush();
    ended
}

/// Polls every tapped port's socket under its position's token.
fn register_ports(poller: &Poller, ports: &[PortTap]) {
    for (j, port) in ports.iter().enumerate() {
        let _ = poller.remove(port.socket.as_fd());
        let _ = poller.add(port.socket.as_fd(), PORTS + j as u64);
    }
}

/// Applies every pending command; true when the ports tapped changed.
fn apply(
    inbox: &Inbox,
    core: &mut Shard,
    wires: &mut [Wire],
    changed: &mut Changed,
    ports: &mut Vec<PortTap>,
) -> bool {
    let mut ports_changed = false;
    let local = |wires: &[Wire], position: usize| wires.iter().position(|w| w.position == position);
    while let Ok(command) = inbox.commands.try_recv() {
        match command {
            Command::Tap {
                at: TapAt::Engine(k),
                tap,
            } => {
                if let Some(i) = local(wires, k) {
                    wires[i].taps.0.push(tap);
                    keep_dropped(core, i, &wires[i].taps);
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
                    ports_changed = true;
                }
            },
            Command::Untap { id } => {
                for (i, wire) in wires.iter_mut().enumerate() {
                    if wire.taps.remove(id) {
                        keep_dropped(core, i, &wire.taps);
                    }
                }
                for p in ports.iter_mut() {
                    p.taps.remove(id);
                }
                let before = ports.len();
                ports.retain(|p| !p.taps.0.is_empty());
                ports_changed |= ports.len() != before;
            }
            Command::Set { link, impairment } => {
                if let Some(i) = local(wires, link) {
                    for side in 0..2 {
                        core.direction_mut(i, side)
                            .set_impairment(impairment.clone());
                        wires[i].watches[side].set(&impairment);
                    }
                    changed.touch(i, &mut wires[i]);
                }
            }
        }
    }
    ports_changed
}

/// Publishes the counters of every link that changed, with (if `drops`)
/// the frames the kernel dropped at the engine's sockets since it last
/// asked (socket side 0 receives direction 0), asked only of sockets that
/// received since: a socket nothing arrived at dropped nothing. A link
/// whose sockets received stays listed until its drops were asked.
fn publish_counters(
    core: &Shard,
    wires: &mut [Wire],
    changed: &mut Changed,
    drops: bool,
    snapshot: &Snapshot,
) {
    let Ok(mut shared) = snapshot.lock() else {
        return;
    };
    changed.0.retain(|&i| {
        let w = &mut wires[i];
        if drops && w.received {
            for (socket, short) in w.sockets.iter().zip(w.shortfall.iter_mut()) {
                short.socket_drops += socket.take_drops().unwrap_or(0);
            }
            w.received = false;
        }
        if let Some(c) = shared.get_mut(w.position) {
            c.directions = [0, 1].map(|side| core.direction(i, side).counters().clone());
            c.shortfall = w.shortfall;
        }
        w.listed = w.received;
        w.listed
    });
}
