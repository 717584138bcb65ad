//! A tokio driver for one [`Speaker`]: its connections, its timers and its
//! FIB calls, and nothing of the logic.
//!
//! The caller supplies the switch's I/O in a [`SpeakerIo`]: a
//! [`Connector`] that opens connections from a local address (the lab
//! creates the sockets inside the switch's network namespace, so the
//! driver never calls `TcpStream::connect` itself), the connections
//! accepted on the switch's BGP port with the address they come from
//! ([`accept_loop`] forwards a listener's), the switch's [`Fib`], a channel
//! of [`Control`] messages (port changes, stop) and a `watch` on which the
//! driver publishes the speaker's [`Status`] after a batch (at most every
//! 10 ms), so a reader never waits on the speaker.
//!
//! The loop: take one ready input (a connection event, an accepted
//! connection, a control message, a timer), hand it to the speaker, then
//! every other input that is ready, yielding to the other tasks a few
//! times while that brings more (as the lab's agents did: what other
//! speakers send meanwhile joins the batch); then [`Speaker::flush`] once:
//! one FIB change set and the UPDATEs that follow it. The speaker's clock
//! is `epoch.elapsed()`.
//!
//! The FIB is written beside the loop, one change set at a time, never
//! awaited by it: installing routes in a large fabric takes seconds of
//! the one thread that all speakers share, and a speaker that stopped
//! reading and sending meanwhile would miss its keepalives and have its
//! sessions reset. Change sets decided while one is being written merge,
//! the latest next hops of a prefix replacing earlier ones, so a prefix
//! whose ECMP set grows one neighbour at a time during convergence is
//! written once per write, not once per neighbour. Until the FIB holds
//! what the speaker decided, its [`Status::fib_pending`] says so.
//!
//! Each connection is two tasks, a reader and a writer, so that a peer slow
//! to read never blocks the speaker nor the reading of its own messages
//! (two speakers writing whole tables to each other would otherwise
//! deadlock on full socket buffers). They run on the runtime of
//! [`SpeakerIo::runtime`], best one with a thread of its own: the writer
//! sends an Established session's KEEPALIVEs
//! ([`Speaker::set_keepalives_by_driver`]), so they go out on time however
//! long the speaker waits for its turn among a thousand others on the
//! speakers' thread; and what the reader receives meanwhile waits in the
//! speaker's queue and counts, when its turn comes, before its Hold timer
//! is checked. Once the session is Established, a read that is nothing
//! but KEEPALIVEs (a quiet session's every read) is not sent on at all:
//! the reader notes when it heard them, and the driver tells the speaker
//! once its Hold timer is due ([`Input::Heard`]), so a spine of a
//! thousand sessions at steady state wakes its thread once in a while
//! rather than a thousand times a second. Connection events carry the
//! connection's id: those of a connection the speaker already dropped are
//! discarded, so the speaker sees exactly the contract of
//! [`speaker`](super::speaker) (one connection per neighbour; a newer
//! connection from a neighbour that has one is dropped).

use std::fmt;
use std::future::Future;
use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ipnet::Ipv4Net;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::speaker::{Event, Input, NextHops, Output, Speaker, Status};
use super::{Context, HEADER_LEN, MAX_MESSAGE_LEN, Message};

/// How long a closed connection may take to write what was queued on it
/// (a NOTIFICATION) before it is dropped anyway.
const LINGER: Duration = Duration::from_secs(1);

/// Rounds of yielding to other tasks while they bring more inputs, before
/// a batch is flushed anyway.
const BATCH_YIELDS: usize = 8;

/// When a session's Hold timer is due, the KEEPALIVEs kept by the readers
/// of every session whose timer is due this much later are told too: one
/// wake for the timers of a second, not one a timer.
const HEARD_AHEAD: Duration = Duration::from_secs(1);

/// Opens the speaker's TCP connections.
pub trait Connector {
    /// A connection from `local` (our address on the link) to `remote`.
    /// The call itself may do the synchronous part (create and bind the
    /// socket inside the switch's namespace) and leave the handshake to
    /// the future; errors of either part come out of the future. The
    /// driver drops the future to abandon the attempt (the session's
    /// ConnectRetry timer bounds it); it runs as a task of its own, hence
    /// `Send`.
    fn connect(
        &mut self,
        local: Ipv4Addr,
        remote: SocketAddrV4,
    ) -> impl Future<Output = io::Result<TcpStream>> + Send + 'static;
}

/// A switch's forwarding table, as a speaker drives it.
pub trait Fib {
    /// Why [`Fib::apply`] failed.
    type Error: fmt::Display;

    /// Makes each prefix reach through its next hops, replacing what was
    /// there; an empty list removes the prefix.
    fn apply(
        &mut self,
        routes: Vec<(Ipv4Net, NextHops)>,
    ) -> impl Future<Output = Result<(), Self::Error>>;

    /// The requests it made of what holds its routes so far, to write
    /// them ([`Counters::fib_requests`](super::speaker::Counters)): what
    /// a route costs where it is kept.
    fn requests(&self) -> u64;
}

/// What the caller tells a running speaker.
#[derive(Debug)]
pub enum Control {
    /// A port went up or down ([`Input::Port`]).
    Port {
        /// The interface.
        ifname: String,
        /// Its new state.
        up: bool,
    },
    /// Send the speaker's RIBs (a snapshot).
    Dump(tokio::sync::oneshot::Sender<super::dump::RibDump>),
    /// Stop every session (Cease NOTIFICATIONs) and end the run. The FIB is
    /// left as it is, so that a successor can start from it
    /// ([`Speaker::assume_installed`]). Dropping the sender does the same.
    Stop,
}

/// What the driver reports, for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A session came up or went down.
    Event(Event),
    /// Applying a FIB change set failed; the speaker goes on as if it had
    /// been applied.
    FibFailed(String),
}

/// A switch's I/O, for [`run_speaker`].
#[derive(Debug)]
pub struct SpeakerIo<C, F> {
    /// Opens connections.
    pub connector: C,
    /// Connections accepted on the switch's BGP port, with the address
    /// they come from; those from no neighbour's address are dropped.
    pub accepted: mpsc::UnboundedReceiver<(TcpStream, SocketAddrV4)>,
    /// The switch's FIB.
    pub fib: F,
    /// Port changes and stop.
    pub control: mpsc::UnboundedReceiver<Control>,
    /// Where the status goes after a batch (at most every 10 ms).
    pub status: watch::Sender<Status>,
    /// The speaker's clock starts here: times in its status are durations
    /// since `epoch`.
    pub epoch: Instant,
    /// Runs the connections: attempts, readers, writers (and their
    /// keepalives). The current runtime will do, but one whose threads the
    /// speakers do not share keeps sessions up while the speakers are busy.
    pub runtime: tokio::runtime::Handle,
}

/// Runs `speaker` (started with [`Input::Start`]) until [`Control::Stop`]
/// or until the control sender is dropped, and hands it back. `report`
/// hears of session events and FIB failures.
pub async fn run_speaker<C: Connector, F: Fib>(
    mut speaker: Speaker,
    io: SpeakerIo<C, F>,
    report: impl FnMut(Report),
) -> Speaker {
    let SpeakerIo {
        connector,
        mut accepted,
        fib,
        mut control,
        status,
        epoch,
        runtime,
    } = io;
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let peers = speaker.plan().neighbours.len();
    speaker.set_keepalives_by_driver();
    let mut d = Driver {
        speaker,
        conns: Conns::new(peers, events_tx, runtime, epoch),
        connector,
        report,
    };
    let mut fib = FibWriter::new(fib);
    let mut writing = std::pin::pin!(None);
    d.input(Input::Start);
    let mut accepting = true;
    let mut stopping = false;
    let mut published: Option<Duration> = None;
    loop {
        if stopping {
            // A successor starts from what this speaker installed: all of
            // it must be written.
            loop {
                if let Some((f, routes)) = fib.next() {
                    writing.set(Some(write(f, routes)));
                }
                if writing.is_none() {
                    break;
                }
                let (f, result) = written(writing.as_mut()).await;
                writing.set(None);
                fib.done(f, d.now());
                if let Err(e) = result {
                    (d.report)(Report::FibFailed(e));
                }
            }
            status.send_replace(fib.status(d.speaker.status(d.now())));
            return d.speaker;
        }
        let outputs = d.speaker.flush(d.now());
        for o in outputs {
            match o {
                Output::Fib(routes) => fib.add(routes),
                o => d.carry_out(o),
            }
        }
        if let Some((f, routes)) = fib.next() {
            writing.set(Some(write(f, routes)));
        }
        // The status, unless one went out less than STATUS_EVERY ago: then
        // when that has passed.
        let now = d.now();
        let status_due = match published {
            Some(at) if now < at + STATUS_EVERY => Some(at + STATUS_EVERY),
            _ => {
                status.send_replace(fib.status(d.speaker.status(now)));
                published = Some(now);
                None
            }
        };
        let deadline = d
            .speaker
            .next_deadline()
            .into_iter()
            .chain(d.speaker.flush_at())
            .chain(status_due)
            .min()
            .map(|t| epoch + t);
        tokio::select! {
            Some(event) = events.recv() => d.io(event),
            conn = accepted.recv(), if accepting => match conn {
                Some((stream, from)) => d.accept(stream, from),
                None => accepting = false,
            },
            ctl = control.recv() => stopping = d.control(ctl),
            (f, result) = written(writing.as_mut()) => {
                writing.set(None);
                fib.done(f, d.now());
                if let Err(e) = result {
                    (d.report)(Report::FibFailed(e));
                }
            }
            // The timers fire below, once what is queued was read: a
            // KEEPALIVE waiting there counts before the Hold timer.
            () = sleep_until(deadline) => {}
            // Advertisements left over by a flush (it does a slice at a
            // time): the next flush, after the other tasks had their turn.
            () = tokio::task::yield_now(), if d.speaker.flush_at().is_some_and(|t| t <= now) => {}
        }
        // Everything else that is ready joins this batch.
        for _ in 0..BATCH_YIELDS {
            if stopping {
                break;
            }
            tokio::task::yield_now().await;
            let mut more = false;
            while let Ok(event) = events.try_recv() {
                d.io(event);
                more = true;
            }
            while accepting {
                match accepted.try_recv() {
                    Ok((stream, from)) => d.accept(stream, from),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => accepting = false,
                }
                more = true;
            }
            while !stopping {
                match control.try_recv() {
                    Ok(ctl) => stopping = d.control(Some(ctl)),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => stopping = d.control(None),
                }
                more = true;
            }
            if !more {
                break;
            }
        }
        // A long batch may have let a timer expire: what the readers kept
        // counts first.
        if d.speaker.next_deadline().is_some_and(|t| t <= d.now()) {
            d.heard();
            d.input(Input::Tick);
        }
    }
}

/// A FIB change set: next hops by prefix, none to remove it.
type Routes = Vec<(Ipv4Net, NextHops)>;

/// How often at most a speaker publishes its status: a spine with a
/// thousand sessions woken a hundred times a second would spend a tenth of
/// the speakers' thread building statuses nobody reads. Readers see one at
/// most this old; the times in it are those of the events.
const STATUS_EVERY: Duration = Duration::from_millis(10);

/// The speaker's FIB and the changes for it not yet written, merged by
/// prefix. One change set is written at a time, by a future the run loop
/// holds ([`write`]), which hands the FIB back when done.
struct FibWriter<F> {
    /// The FIB when no write is in flight.
    idle: Option<F>,
    /// Changes not yet handed to a write: the latest next hops by prefix.
    pending: std::collections::BTreeMap<Ipv4Net, NextHops>,
    /// When the last write ended (the speaker's clock).
    last_write: Duration,
    /// Prefixes handed to writes.
    written: u64,
    /// The FIB's requests, as of the last write's end.
    requests: u64,
}

impl<F: Fib> FibWriter<F> {
    fn new(fib: F) -> Self {
        FibWriter {
            requests: fib.requests(),
            idle: Some(fib),
            pending: std::collections::BTreeMap::new(),
            last_write: Duration::ZERO,
            written: 0,
        }
    }

    /// Changes the speaker decided.
    fn add(&mut self, routes: Routes) {
        self.pending.extend(routes);
    }

    /// The FIB and what is pending, to write now, unless a write is in
    /// flight or nothing is pending.
    fn next(&mut self) -> Option<(F, Routes)> {
        if self.pending.is_empty() {
            return None;
        }
        let fib = self.idle.take()?;
        self.written += self.pending.len() as u64;
        Some((fib, mem::take(&mut self.pending).into_iter().collect()))
    }

    /// A write ended at `now`, handing the FIB back.
    fn done(&mut self, fib: F, now: Duration) {
        self.requests = fib.requests();
        self.idle = Some(fib);
        self.last_write = now;
    }

    /// The speaker's `status` with what the FIB has not written yet: the
    /// FIB last changed when its last write ended.
    fn status(&self, mut status: Status) -> Status {
        status.fib_pending |= self.idle.is_none() || !self.pending.is_empty();
        status.last_change = status.last_change.max(self.last_write);
        status.counters.fib_writes = self.written;
        status.counters.fib_requests = self.requests;
        status
    }
}

/// Writes `routes` to `fib`, handing it back with the outcome.
async fn write<F: Fib>(mut fib: F, routes: Routes) -> (F, Result<(), String>) {
    let result = fib.apply(routes).await.map_err(|e| e.to_string());
    (fib, result)
}

/// The end of the write in `writing` (never, when there is none).
async fn written<W: Future>(writing: std::pin::Pin<&mut Option<W>>) -> W::Output {
    match writing.as_pin_mut() {
        Some(w) => w.await,
        None => std::future::pending().await,
    }
}

/// Forwards the connections `listener` accepts to `to` (the
/// [`SpeakerIo::accepted`] of a speaker), until `to`'s receiver is gone.
pub async fn accept_loop(
    listener: TcpListener,
    to: mpsc::UnboundedSender<(TcpStream, SocketAddrV4)>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, SocketAddr::V4(from))) => {
                    if to.send((stream, from)).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                // Out of file descriptors, say: try again a bit later
                // rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            () = to.closed() => return,
        }
    }
}

/// The driver's state besides the FIB (awaited on its own).
struct Driver<C, R> {
    speaker: Speaker,
    conns: Conns,
    connector: C,
    report: R,
}

impl<C: Connector, R: FnMut(Report)> Driver<C, R> {
    fn now(&self) -> Duration {
        self.conns.epoch.elapsed()
    }

    /// Tells the speaker of the KEEPALIVEs the readers kept, for the
    /// sessions whose timer is due within [`HEARD_AHEAD`].
    fn heard(&mut self) {
        for peer in self.speaker.due(self.now() + HEARD_AHEAD) {
            if let Some(at) = self.conns.heard(peer) {
                self.input(Input::Heard { peer, at });
            }
        }
    }

    /// Hands `input` to the speaker and carries out what it asks for, at
    /// once: the next input may concern the same connection.
    fn input(&mut self, input: Input) {
        let outputs = self.speaker.handle(self.now(), input);
        for o in outputs {
            self.carry_out(o);
        }
    }

    fn carry_out(&mut self, output: Output) {
        match output {
            Output::Connect {
                peer,
                local,
                remote,
            } => {
                let attempt = self.connector.connect(local, remote);
                self.conns.connect(peer, attempt);
            }
            Output::Send { peer, bytes } => self.conns.send(peer, bytes),
            Output::Keepalives { peer, every } => self.conns.keepalives(peer, every),
            Output::Close { peer } => self.conns.close(peer),
            Output::Event(event) => {
                if let Event::Established { peer, .. } = &event {
                    self.conns.established(*peer);
                }
                (self.report)(Report::Event(event));
            }
            // Only a flush emits FIB changes, and the run loop applies them.
            Output::Fib(_) => {}
        }
    }

    /// A control message, or `None` when the sender is gone; true when the
    /// run ends.
    fn control(&mut self, ctl: Option<Control>) -> bool {
        match ctl {
            Some(Control::Port { ifname, up }) => {
                self.input(Input::Port { ifname, up });
                false
            }
            Some(Control::Dump(reply)) => {
                let _ = reply.send(super::dump::rib(&self.speaker));
                false
            }
            Some(Control::Stop) | None => {
                self.input(Input::Stop);
                true
            }
        }
    }

    fn accept(&mut self, stream: TcpStream, from: SocketAddrV4) {
        let Some(peer) = self.speaker.neighbour_at(*from.ip()) else {
            return;
        };
        // One connection per neighbour: the one up stays (RFC 4271 §6.8
        // for an Established one; see the speaker's module docs).
        if self.conns.is_up(peer) {
            return;
        }
        self.conns.install(peer, stream);
        self.input(Input::Connected { peer });
    }

    fn io(&mut self, event: IoEvent) {
        match event {
            IoEvent::Connected {
                peer,
                conn_id,
                stream,
            } => {
                if self.conns.is_current(peer, conn_id) {
                    self.conns.install(peer, stream);
                    self.input(Input::Connected { peer });
                }
            }
            IoEvent::ConnectFailed { peer, conn_id } => {
                if self.conns.is_current(peer, conn_id) {
                    self.conns.close(peer);
                    self.input(Input::ConnectFailed { peer });
                }
            }
            IoEvent::Bytes {
                peer,
                conn_id,
                data,
            } => {
                if self.conns.is_current(peer, conn_id) {
                    // What the reader kept counts first: these bytes may
                    // end in part of a message, which restarts no timer,
                    // and the session's Hold timer may be due.
                    if let Some(at) = self.conns.heard(peer) {
                        self.input(Input::Heard { peer, at });
                    }
                    self.input(Input::Bytes { peer, data });
                }
            }
            IoEvent::Closed { peer, conn_id } => {
                if self.conns.is_current(peer, conn_id) {
                    self.conns.close(peer);
                    self.input(Input::Closed { peer });
                }
            }
        }
    }
}

/// What a connection's tasks report.
#[derive(Debug)]
enum IoEvent {
    Connected {
        peer: usize,
        conn_id: u64,
        stream: TcpStream,
    },
    ConnectFailed {
        peer: usize,
        conn_id: u64,
    },
    Bytes {
        peer: usize,
        conn_id: u64,
        data: Vec<u8>,
    },
    Closed {
        peer: usize,
        conn_id: u64,
    },
}

/// One neighbour's connection as the driver holds it.
#[derive(Debug)]
enum Conn {
    None,
    Connecting {
        conn_id: u64,
        task: JoinHandle<()>,
    },
    Up {
        conn_id: u64,
        tx: mpsc::UnboundedSender<Write>,
        reader: JoinHandle<()>,
        writer: JoinHandle<()>,
        /// What the reader kept.
        heard: Arc<Heard>,
        /// The last time of [`Heard::at`] the speaker was told.
        told: Duration,
    },
}

/// KEEPALIVEs a connection's reader kept rather than sent on: those of an
/// Established session, which only restart its Hold timer.
#[derive(Debug, Default)]
struct Heard {
    /// The session is Established: the reader keeps what is only
    /// KEEPALIVEs.
    established: AtomicBool,
    /// When it last kept some: nanoseconds since the driver's epoch, plus
    /// one (zero: never).
    at: AtomicU64,
}

impl Heard {
    /// The time of the last KEEPALIVEs kept.
    fn at(&self) -> Option<Duration> {
        match self.at.load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n - 1)),
        }
    }

    fn keep(&self, at: Duration) {
        let nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX - 1);
        self.at.store(nanos + 1, Ordering::Relaxed);
    }
}

/// What a connection's writer is told.
#[derive(Debug)]
enum Write {
    /// Whole messages.
    Bytes(Vec<u8>),
    /// From now on, a KEEPALIVE whenever nothing was written for this long
    /// (zero: none).
    KeepaliveEvery(Duration),
}

/// Every neighbour's connection.
#[derive(Debug)]
struct Conns {
    conns: Vec<Conn>,
    next_id: u64,
    events: mpsc::UnboundedSender<IoEvent>,
    /// Where the connections' tasks run.
    runtime: tokio::runtime::Handle,
    /// The speaker's clock starts here.
    epoch: Instant,
}

impl Conns {
    fn new(
        peers: usize,
        events: mpsc::UnboundedSender<IoEvent>,
        runtime: tokio::runtime::Handle,
        epoch: Instant,
    ) -> Conns {
        Conns {
            conns: (0..peers).map(|_| Conn::None).collect(),
            next_id: 0,
            events,
            runtime,
            epoch,
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn is_up(&self, peer: usize) -> bool {
        matches!(self.conns.get(peer), Some(Conn::Up { .. }))
    }

    fn is_current(&self, peer: usize, conn_id: u64) -> bool {
        match self.conns.get(peer) {
            Some(Conn::Connecting { conn_id: g, .. } | Conn::Up { conn_id: g, .. }) => {
                *g == conn_id
            }
            _ => false,
        }
    }

    /// Starts an attempt, abandoning the one in flight if any.
    fn connect(
        &mut self,
        peer: usize,
        attempt: impl Future<Output = io::Result<TcpStream>> + Send + 'static,
    ) {
        if peer >= self.conns.len() {
            return;
        }
        self.close(peer);
        let conn_id = self.next_id();
        let events = self.events.clone();
        let task = self.runtime.spawn(async move {
            let event = match attempt.await {
                Ok(stream) => IoEvent::Connected {
                    peer,
                    conn_id,
                    stream,
                },
                Err(_) => IoEvent::ConnectFailed { peer, conn_id },
            };
            let _ = events.send(event);
        });
        self.conns[peer] = Conn::Connecting { conn_id, task };
    }

    /// Makes `stream` the neighbour's connection, abandoning an attempt.
    fn install(&mut self, peer: usize, stream: TcpStream) {
        if peer >= self.conns.len() {
            return;
        }
        self.close(peer);
        // Messages are small and each batch is one write: no Nagle delay.
        let _ = stream.set_nodelay(true);
        let conn_id = self.next_id();
        let (r, w) = stream.into_split();
        let (tx, rx) = mpsc::unbounded_channel();
        let heard = Arc::new(Heard::default());
        let reader = self.runtime.spawn(read_loop(
            Reader {
                peer,
                conn_id,
                heard: heard.clone(),
                epoch: self.epoch,
            },
            r,
            self.events.clone(),
        ));
        let writer = self
            .runtime
            .spawn(write_loop(peer, conn_id, w, rx, self.events.clone()));
        self.conns[peer] = Conn::Up {
            conn_id,
            tx,
            reader,
            writer,
            heard,
            told: Duration::ZERO,
        };
    }

    fn send(&self, peer: usize, bytes: Vec<u8>) {
        if let Some(Conn::Up { tx, .. }) = self.conns.get(peer) {
            let _ = tx.send(Write::Bytes(bytes));
        }
    }

    /// The connection's writer sends a KEEPALIVE whenever it wrote
    /// nothing for `every` (zero: never): the session answered the OPEN.
    fn keepalives(&self, peer: usize, every: Duration) {
        if let Some(Conn::Up { tx, .. }) = self.conns.get(peer) {
            let _ = tx.send(Write::KeepaliveEvery(every));
        }
    }

    /// The neighbour's session is Established: the connection's reader
    /// keeps the KEEPALIVEs it reads (its writer sends them since
    /// OpenConfirm, [`Output::Keepalives`]).
    fn established(&self, peer: usize) {
        if let Some(Conn::Up { heard, .. }) = self.conns.get(peer) {
            heard.established.store(true, Ordering::Relaxed);
        }
    }

    /// When the neighbour's reader last kept KEEPALIVEs, if the speaker
    /// was not told yet.
    fn heard(&mut self, peer: usize) -> Option<Duration> {
        let Some(Conn::Up { heard, told, .. }) = self.conns.get_mut(peer) else {
            return None;
        };
        let at = heard.at().filter(|at| at > told)?;
        *told = at;
        Some(at)
    }

    /// Drops the connection once its queue is written (or after
    /// [`LINGER`]), or abandons the attempt.
    fn close(&mut self, peer: usize) {
        let Some(conn) = self.conns.get_mut(peer) else {
            return;
        };
        match mem::replace(conn, Conn::None) {
            Conn::None => {}
            Conn::Connecting { task, .. } => task.abort(),
            Conn::Up {
                tx, reader, writer, ..
            } => {
                // The writer sees its queue end, writes the rest, shuts the
                // connection down.
                drop(tx);
                reader.abort();
                self.runtime.spawn(async move {
                    tokio::time::sleep(LINGER).await;
                    writer.abort();
                });
            }
        }
    }
}

impl Drop for Conns {
    fn drop(&mut self) {
        // The tasks would outlive the driver otherwise; no linger here,
        // there may be no runtime left to wait on.
        for conn in self.conns.drain(..) {
            match conn {
                Conn::None => {}
                Conn::Connecting { task, .. } => task.abort(),
                Conn::Up { reader, writer, .. } => {
                    reader.abort();
                    writer.abort();
                }
            }
        }
    }
}

thread_local! {
    /// Where a connection's bytes are read before they are sent on.
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Who a connection's reader reads for.
struct Reader {
    peer: usize,
    conn_id: u64,
    heard: Arc<Heard>,
    epoch: Instant,
}

/// What one read brought.
enum Read {
    /// Bytes to send on.
    Bytes(Vec<u8>),
    /// KEEPALIVEs only, kept.
    Kept,
    /// The peer closed the connection.
    Closed,
}

async fn read_loop(reader: Reader, r: OwnedReadHalf, events: mpsc::UnboundedSender<IoEvent>) {
    let Reader {
        peer,
        conn_id,
        heard,
        epoch,
    } = reader;
    let mut framing = Framing::default();
    loop {
        // Read once there is something to read, into the thread's buffer:
        // fifteen thousand idle sessions hold no buffer of their own.
        let read = match r.readable().await {
            Ok(()) => READ_BUFFER.with_borrow_mut(|buf| {
                buf.resize(4 * MAX_MESSAGE_LEN, 0);
                let n = r.try_read(buf)?;
                let data = &buf[..n];
                Ok(if n == 0 {
                    Read::Closed
                } else if framing.at_start()
                    && heard.established.load(Ordering::Relaxed)
                    && only_keepalives(data)
                {
                    heard.keep(epoch.elapsed());
                    Read::Kept
                } else {
                    framing.advance(data);
                    Read::Bytes(data.to_vec())
                })
            }),
            Err(e) => Err(e),
        };
        match read {
            Ok(Read::Kept) => {}
            Ok(Read::Bytes(data)) => {
                let event = IoEvent::Bytes {
                    peer,
                    conn_id,
                    data,
                };
                if events.send(event).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Ok(Read::Closed) | Err(_) => {
                let _ = events.send(IoEvent::Closed { peer, conn_id });
                return;
            }
        }
    }
}

/// A KEEPALIVE as it crosses the wire (RFC 4271 §4.1, §4.4).
const KEEPALIVE: [u8; HEADER_LEN] = {
    let mut m = [0xff; HEADER_LEN];
    m[16] = 0;
    m[17] = HEADER_LEN as u8;
    m[18] = super::packet::msg_type::KEEPALIVE;
    m
};

/// `data` is one KEEPALIVE or more, whole, and nothing else.
fn only_keepalives(data: &[u8]) -> bool {
    !data.is_empty()
        && data.len().is_multiple_of(HEADER_LEN)
        && data.chunks_exact(HEADER_LEN).all(|m| m == KEEPALIVE)
}

/// Where a connection's byte stream stands among its messages, as far as
/// their headers' lengths tell (the session checks the rest): a reader
/// keeps a read of KEEPALIVEs only if it begins a message.
#[derive(Debug, Default)]
struct Framing {
    /// The current message's header, as far as it came.
    header: [u8; HEADER_LEN],
    /// How much of it came.
    have: usize,
    /// The bytes of the current message's body still to come.
    body: usize,
    /// A length no message has: the session ends the connection; until
    /// then nothing is kept.
    lost: bool,
}

impl Framing {
    /// The next byte begins a message.
    fn at_start(&self) -> bool {
        !self.lost && self.have == 0 && self.body == 0
    }

    /// `bytes` came next.
    fn advance(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.lost {
            if self.body > 0 {
                let n = self.body.min(bytes.len());
                self.body -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (HEADER_LEN - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == HEADER_LEN {
                let len = usize::from(u16::from_be_bytes([self.header[16], self.header[17]]));
                self.have = 0;
                match len.checked_sub(HEADER_LEN) {
                    Some(body) => self.body = body,
                    None => self.lost = true,
                }
            }
        }
    }
}

/// The largest write buffer a connection keeps between writes: a few
/// messages (keepalives, a small UPDATE).
const KEPT_WRITE_BUFFER: usize = 4096;

async fn write_loop(
    peer: usize,
    conn_id: u64,
    mut w: OwnedWriteHalf,
    mut queue: mpsc::UnboundedReceiver<Write>,
    events: mpsc::UnboundedSender<IoEvent>,
) {
    let keepalive = Message::Keepalive.encode(&Context::TWO_OCTET_AS);
    let mut every = None;
    let mut last_write = Instant::now();
    let mut pending = Vec::new();
    loop {
        let idle_until = every.map(|e| last_write + e);
        tokio::select! {
            write = queue.recv() => match write {
                Some(write) => take(write, &mut pending, &mut every),
                None => break,
            },
            () = sleep_until(idle_until) => pending.extend_from_slice(&keepalive),
        }
        // What is queued goes in one write: a table of UPDATEs is one
        // system call, not one per message.
        while let Ok(write) = queue.try_recv() {
            take(write, &mut pending, &mut every);
        }
        if pending.is_empty() {
            continue;
        }
        if w.write_all(&pending).await.is_err() {
            let _ = events.send(IoEvent::Closed { peer, conn_id });
            return;
        }
        // A burst's buffer is not kept: thirteen thousand sessions that
        // each once sent a table would hold their largest write for good.
        if pending.capacity() > KEPT_WRITE_BUFFER {
            pending = Vec::new();
        } else {
            pending.clear();
        }
        last_write = Instant::now();
    }
    // Let the peer read a NOTIFICATION before the FIN.
    let _ = w.shutdown().await;
}

/// A writer's `write`: bytes join `pending`, a keepalive interval replaces
/// `every`.
fn take(write: Write, pending: &mut Vec<u8>, every: &mut Option<Duration>) {
    match write {
        Write::Bytes(bytes) => pending.extend_from_slice(&bytes),
        Write::KeepaliveEvery(e) => *every = (!e.is_zero()).then_some(e),
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        // A timer due "now" may still compare as not expired against a
        // clock read a moment earlier; a millisecond later it has.
        Some(t) => tokio::time::sleep_until(t + Duration::from_millis(1)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keepalive_is_the_one_messages_encode() {
        assert_eq!(Message::Keepalive.encode(&Context::TWO_OCTET_AS), KEEPALIVE);
        assert!(only_keepalives(&KEEPALIVE.repeat(3)));
        assert!(!only_keepalives(&[]));
        assert!(!only_keepalives(&KEEPALIVE[..18]));
        let mut bad_marker = KEEPALIVE;
        bad_marker[3] = 0;
        assert!(!only_keepalives(&[KEEPALIVE, bad_marker].concat()));
    }

    /// A message of `len` bytes in all (type UPDATE).
    fn message(len: u16) -> Vec<u8> {
        let mut m = vec![0xff; 16];
        m.extend(len.to_be_bytes());
        m.push(2);
        m.resize(len.into(), 0);
        m
    }

    #[test]
    fn framing_follows_messages_cut_anywhere() {
        let stream = [message(23), KEEPALIVE.to_vec(), message(4096), message(19)].concat();
        let ends = [23, 42, 4138, 4157];
        // Cut at every position from 1 to 40 bytes: it is at a start
        // exactly after each message's last byte.
        for step in 1..40 {
            let mut f = Framing::default();
            let mut at = 0;
            while at < stream.len() {
                let to = (at + step).min(stream.len());
                f.advance(&stream[at..to]);
                at = to;
                assert_eq!(f.at_start(), ends.contains(&at), "step {step}, at {at}");
            }
        }
    }

    #[test]
    fn framing_gives_up_on_a_length_below_a_header() {
        let mut f = Framing::default();
        f.advance(&message(19)[..16]);
        f.advance(&[0, 5, 4]);
        assert!(!f.at_start());
        f.advance(&KEEPALIVE);
        assert!(!f.at_start());
    }
}
