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
//! Shards: the links are dealt to K engine threads by position (link `k`
//! to shard `k % K`, [`turbonet_injectors::shard_of`]), each with its own
//! sockets, timer and frame buffers; a link's two directions stay on one
//! shard. The decisions do not depend on K (see `injectors::shard`).
//!
//! Each shard ([`shard`]) sleeps in `epoll` until a socket is readable,
//! a command arrives (an eventfd) or the next frame is nearly due, and
//! reads only the sockets that are readable.

mod shard;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use turbonet_injectors::{Direction, Impairment, Note, Watch, shard_of};
use turbonet_packetio::poller::Waker;
use turbonet_packetio::{Clock, PacketSocket};

use crate::carrier::Carrier;
use crate::dataplane::plane::LinkCounters;
use crate::dataplane::taps::{Tap, Taps};

/// The links spliced through the engine namespace (the userspace
/// engine's and the kernel engine's), each with its position `k` among
/// them (which fixes its engine-side interface indices).
pub fn spliced(carriers: &[Carrier]) -> Vec<Option<usize>> {
    let mut k = 0;
    carriers
        .iter()
        .map(|c| {
            c.is_spliced().then(|| {
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

/// What the engine's threads are called, each followed by its shard's
/// number (`link-engine-0`): a reader of `/proc` finds them by it.
pub const THREAD_NAME: &str = "link-engine-";

/// The daemon's end of the engine: each shard's commands, and the eventfd
/// that wakes it so they take effect at once.
#[derive(Debug)]
pub struct Control {
    shards: Vec<(mpsc::Sender<Command>, Waker)>,
}

impl Control {
    /// Another handle on the same engine.
    pub fn try_clone(&self) -> io::Result<Control> {
        Ok(Control {
            shards: self
                .shards
                .iter()
                .map(|(tx, waker)| Ok((tx.clone(), waker.try_clone()?)))
                .collect::<io::Result<_>>()?,
        })
    }

    /// Sends a command to the shard it concerns (a tap of a plain link to
    /// the first; the end of a tap to all, as any may hold it) and wakes
    /// it.
    pub fn send(&self, command: Command) -> io::Result<()> {
        let n = self.shards.len();
        let to = match &command {
            Command::Set { link, .. } => shard_of(*link, n),
            Command::Tap {
                at: TapAt::Engine(k),
                ..
            } => shard_of(*k, n),
            Command::Tap { .. } => 0,
            Command::Untap { id } => {
                for s in 1..n {
                    self.deliver(s, Command::Untap { id: *id })?;
                }
                0
            }
        };
        self.deliver(to, command)
    }

    fn deliver(&self, shard: usize, command: Command) -> io::Result<()> {
        let (tx, waker) = &self.shards[shard];
        tx.send(command).map_err(|_| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the link engine has stopped")
        })?;
        waker.wake()
    }
}

/// The engine's threads, running until [`Running::stop`].
#[derive(Debug)]
pub struct Running {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<io::Result<()>>>,
    wakers: Vec<Waker>,
}

impl Running {
    /// Stops every shard and waits for it; the first failure, if any.
    pub fn stop(&mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        for w in &self.wakers {
            let _ = w.wake();
        }
        let mut first = Ok(());
        for thread in self.threads.drain(..) {
            let done = match thread.join() {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("the link engine failed: {e}")),
                Err(_) => Err("the link engine panicked".to_owned()),
            };
            if first.is_ok() {
                first = done;
            }
        }
        first
    }
}

/// The number of shards the engine runs for `links` links when asked for
/// `wanted` (`None`: one per core): at least one (it also serves taps of
/// plain links), at most one per link.
pub fn shard_count(wanted: Option<u16>, links: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    wanted.map_or(cores, usize::from).min(links).max(1)
}

/// Starts `shards` engine threads over `links` (dealt by position), which
/// publish their counters into `snapshot` (one entry per link, by
/// position) and their notes to `notes`, timing frames on `clock`.
pub fn start(
    links: Vec<EngineLink>,
    shards: usize,
    clock: Clock,
    snapshot: &Snapshot,
    notes: &Notes,
) -> io::Result<(Control, Running)> {
    let shards = shards.max(1);
    if let Ok(mut s) = snapshot.lock() {
        *s = links
            .iter()
            .map(|l| LinkCounters {
                link: l.name.clone(),
                ..LinkCounters::default()
            })
            .collect();
    }
    let mut dealt: Vec<Vec<(usize, EngineLink)>> = (0..shards).map(|_| Vec::new()).collect();
    for (k, link) in links.into_iter().enumerate() {
        dealt[shard_of(k, shards)].push((k, link));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut control = Control { shards: Vec::new() };
    let mut running = Running {
        stop: stop.clone(),
        threads: Vec::new(),
        wakers: Vec::new(),
    };
    for (i, links) in dealt.into_iter().enumerate() {
        let (tx, rx) = mpsc::channel();
        let waker = Waker::new()?;
        let inbox = shard::Inbox {
            commands: rx,
            waker: waker.try_clone()?,
        };
        let (stop, snapshot, notes) = (stop.clone(), snapshot.clone(), notes.clone());
        let thread = std::thread::Builder::new()
            .name(format!("{THREAD_NAME}{i}"))
            .spawn(move || {
                let ran = shard::run(links, clock, &stop, &snapshot, &inbox, &notes);
                // Said now, in the daemon's log: its links stop passing
                // frames until the daemon restarts.
                if let Err(e) = &ran {
                    tracing::error!("link engine shard {i} stopped: {e}");
                }
                ran
            })?;
        running.wakers.push(waker.try_clone()?);
        running.threads.push(thread);
        control.shards.push((tx, waker));
    }
    Ok((control, running))
}
