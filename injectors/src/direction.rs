//! One direction of one link: the impairment pipeline.
//!
//! loss -> corruption/duplication -> finite queue drained at `rate` (tail
//! drop, ECN marking) -> propagation delay + jitter -> due time.
//!
//! Sans-I/O: the caller offers frames with the time they arrived and pops
//! them when their due time has come; it owns the clock, the sockets and the
//! sleeping. All arithmetic is in integer nanoseconds.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use turbonet_topo::Loss;
use turbonet_topo::units::QueueLimit;

use crate::counters::Counters;
use crate::impairment::Impairment;
use crate::packet::{self, ETH_HEADER};
use crate::random::{self, Chance};
use crate::watch::Cause;

/// A frame waiting for its due time. Ordered by (due, seq): earliest due
/// first, and among equal due times the one offered first, so that a link
/// without jitter never reorders.
#[derive(Debug)]
struct Pending {
    due: u64,
    seq: u64,
    frame: Vec<u8>,
    marks: Marks,
}

/// What the pipeline did to a frame it passed on, for captures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// A bit was flipped.
    pub corrupted: bool,
    /// It was marked CE.
    pub ecn_marked: bool,
    /// It is the extra copy duplication made.
    pub duplicate: bool,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

/// The probabilities of an [`Impairment`], compiled for 64-bit draws.
#[derive(Debug, Clone, Copy)]
enum LossModel {
    None,
    Bernoulli(Chance),
    GilbertElliott {
        p: Chance,
        r: Chance,
        bad: Chance,
        good: Chance,
    },
}

#[derive(Debug, Clone, Copy)]
struct Compiled {
    loss: LossModel,
    corrupt: Chance,
    duplicate: Chance,
}

impl Compiled {
    fn new(imp: &Impairment) -> Compiled {
        let opt = |p: Option<turbonet_topo::units::LossProb>| p.map_or(Chance::Never, Chance::new);
        let loss = match imp.loss {
            None => LossModel::None,
            Some(Loss::Bernoulli(p)) => LossModel::Bernoulli(Chance::new(p)),
            Some(Loss::GilbertElliott { p, r, bad, good }) => LossModel::GilbertElliott {
                p: Chance::new(p),
                r: Chance::new(r),
                bad: Chance::new(bad),
                good: Chance::new(good),
            },
        };
        Compiled {
            loss,
            corrupt: opt(imp.corrupt),
            duplicate: opt(imp.duplicate),
        }
    }
}

/// The most one direction holds in flight (queued, on the wire or
/// waiting out its delay), in bytes: 256 MiB, two seconds of a fully
/// loaded 1 Gbit/s link.
pub const IN_FLIGHT_MAX: u64 = 256 << 20;

/// One direction of one link.
///
/// Deterministic: the same seed, the same parameters and the same sequence
/// of [`Direction::offer`] calls give the same drops, corruptions and due
/// times. Every random draw comes from one ChaCha8 stream, in a fixed order
/// per frame (loss, duplication, corruption of each copy, jitter of each
/// copy), and a draw is made only when its outcome is uncertain.
#[derive(Debug)]
pub struct Direction {
    imp: Impairment,
    compiled: Compiled,
    rng: ChaCha8Rng,
    /// Gilbert-Elliott state: true in the bad state. Starts good.
    ge_bad: bool,
    /// When the last frame accepted by the rate queue finishes transmission.
    last_tx_end: u64,
    /// The latest due time handed out, for in-order delivery.
    last_due: u64,
    /// Sequence number of the next pending frame.
    seq: u64,
    /// Frames counted in the queue depth: (tx_end, length), in acceptance
    /// order, which is also tx_end order (tx_end never decreases).
    in_queue: VecDeque<(u64, u64)>,
    /// Frames waiting for their due time that cannot be overtaken (no
    /// reordering jitter): their due times never decrease, so a FIFO.
    in_order: VecDeque<Pending>,
    /// Frames a reordering jitter may have put out of order: a min-heap,
    /// so `pop_due` is O(log n). (Both hold frames only after `link set`
    /// switched reordering on or off with frames in flight.)
    reordered: BinaryHeap<Reverse<Pending>>,
    /// Their bytes (at most [`IN_FLIGHT_MAX`]).
    pending_bytes: u64,
    counters: Counters,
    /// Keep the frames dropped, for [`Direction::take_dropped`] (a
    /// capture wants them; nothing is kept otherwise).
    keep_dropped: bool,
    dropped: Vec<(Cause, Vec<u8>)>,
}

impl Direction {
    /// A direction with these parameters and its own random stream, seeded
    /// with `seed` (see [`crate::direction_seed`]).
    pub fn new(imp: Impairment, seed: u64) -> Self {
        Direction {
            compiled: Compiled::new(&imp),
            imp,
            rng: ChaCha8Rng::from_seed(turbonet_topo::seed::chacha_key(seed)),
            ge_bad: false,
            last_tx_end: 0,
            last_due: 0,
            seq: 0,
            in_queue: VecDeque::new(),
            in_order: VecDeque::new(),
            reordered: BinaryHeap::new(),
            pending_bytes: 0,
            counters: Counters::default(),
            keep_dropped: false,
            dropped: Vec::new(),
        }
    }

    /// Keeps the frames it drops from now on (`true`) until
    /// [`Direction::take_dropped`] takes them, or drops them unseen.
    pub fn keep_dropped(&mut self, keep: bool) {
        self.keep_dropped = keep;
        if !keep {
            self.dropped = Vec::new();
        }
    }

    /// True while it keeps the frames it drops.
    pub fn keeps_dropped(&self) -> bool {
        self.keep_dropped
    }

    /// The frames dropped since the last call, with why, in the order
    /// they were dropped (empty unless [`Direction::keep_dropped`]).
    pub fn take_dropped(&mut self) -> impl Iterator<Item = (Cause, Vec<u8>)> + '_ {
        self.dropped.drain(..)
    }

    /// The parameters in force.
    pub fn impairment(&self) -> &Impairment {
        &self.imp
    }

    /// Changes parameters at run time (`turbonet link set`). Frames already
    /// queued keep their due times, and the transmission in progress
    /// finishes at the old rate: only frames offered afterwards see the new
    /// parameters. The random stream and the Gilbert-Elliott state carry
    /// on, so a run with the same changes at the same points is still
    /// reproducible.
    pub fn set_impairment(&mut self, imp: Impairment) {
        self.compiled = Compiled::new(&imp);
        self.imp = imp;
    }

    /// A frame (Ethernet, starting with the 14-byte header) arrives at
    /// `now` (nanoseconds on the caller's clock, never decreasing).
    pub fn offer(&mut self, now: u64, mut frame: Vec<u8>) {
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += frame.len() as u64;
        self.expire(now);

        // 1. Loss, decided first like on a lossy wire: a lost frame takes no
        //    queue space and draws nothing else.
        if self.lost() {
            self.counters.dropped_loss += 1;
            if self.keep_dropped {
                self.dropped.push((Cause::Loss, frame));
            }
            return;
        }

        // 2. Duplication: the copy is a second frame from here on (it may
        //    be corrupted, queued, dropped and jittered on its own), which is
        //    what a duplicating device upstream of the queue produces.
        let copy = self
            .compiled
            .duplicate
            .happens(&mut self.rng)
            .then(|| frame.clone());
        if copy.is_some() {
            self.counters.duplicated += 1;
        }

        let corrupted = self.pass(&mut frame);
        self.admit(
            now,
            frame,
            Marks {
                corrupted,
                ..Marks::default()
            },
        );
        if let Some(mut copy) = copy {
            let corrupted = self.pass(&mut copy);
            self.admit(
                now,
                copy,
                Marks {
                    corrupted,
                    duplicate: true,
                    ..Marks::default()
                },
            );
        }
    }

    /// Earliest due time of a frame waiting to leave, if any.
    pub fn next_due(&self) -> Option<u64> {
        self.head().map(|p| p.due)
    }

    /// The frame that leaves next: the earlier (due, offer order) of the
    /// two queues' heads.
    fn head(&self) -> Option<&Pending> {
        match (self.in_order.front(), self.reordered.peek()) {
            (Some(a), Some(Reverse(b))) => Some(if b < a { b } else { a }),
            (a, b) => a.or(b.map(|Reverse(b)| b)),
        }
    }

    /// Removes and returns one frame whose due time is <= `now`, earliest
    /// first (ties in offer order).
    pub fn pop_due(&mut self, now: u64) -> Option<Vec<u8>> {
        self.pop_due_timed(now).map(|(_, frame)| frame)
    }

    /// [`Direction::pop_due`], with the frame's due time (how late it
    /// leaves is `now` minus that).
    pub fn pop_due_timed(&mut self, now: u64) -> Option<(u64, Vec<u8>)> {
        self.pop_due_marked(now).map(|(due, frame, _)| (due, frame))
    }

    /// [`Direction::pop_due_timed`], with what the pipeline did to the
    /// frame.
    pub fn pop_due_marked(&mut self, now: u64) -> Option<(u64, Vec<u8>, Marks)> {
        self.expire(now);
        let head = self.head()?;
        if head.due > now {
            return None;
        }
        let from_heap = self
            .reordered
            .peek()
            .is_some_and(|Reverse(b)| std::ptr::eq(b, head));
        let p = if from_heap {
            self.reordered.pop()?.0
        } else {
            self.in_order.pop_front()?
        };
        self.pending_bytes -= p.frame.len() as u64;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += p.frame.len() as u64;
        Some((p.due, p.frame, p.marks))
    }

    /// Brings the queue's depth up to `now` (frames whose transmission
    /// has ended leave it) without sending anything, for a reader of the
    /// counters while no frame comes or goes.
    pub fn advance(&mut self, now: u64) {
        self.expire(now);
    }

    /// Frames waiting for their due time.
    pub fn pending(&self) -> usize {
        self.in_order.len() + self.reordered.len()
    }

    /// How many 32-bit words of its random stream the direction has
    /// drawn: the stream's position, which another implementation of the
    /// model (the kernel engine) must reach with the same frames.
    pub fn words_drawn(&self) -> u128 {
        self.rng.get_word_pos()
    }

    /// What this direction did so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The loss decision for one frame.
    fn lost(&mut self) -> bool {
        match self.compiled.loss {
            LossModel::None => false,
            LossModel::Bernoulli(c) => c.happens(&mut self.rng),
            // Gilbert-Elliott: the chain moves first, then the frame is lost
            // with the probability of the state it lands in. With bad = 1
            // and good = 0 a burst in the bad state lasts 1/r frames on
            // average and the long-run loss is p / (p + r).
            LossModel::GilbertElliott { p, r, bad, good } => {
                if self.ge_bad {
                    if r.happens(&mut self.rng) {
                        self.ge_bad = false;
                    }
                } else if p.happens(&mut self.rng) {
                    self.ge_bad = true;
                }
                if self.ge_bad {
                    bad.happens(&mut self.rng)
                } else {
                    good.happens(&mut self.rng)
                }
            }
        }
    }

    /// Corruption of one frame (or copy): one random bit after the
    /// Ethernet header is flipped, so the frame is still delivered and
    /// switched, and the L3/L4 checksums at the receiver catch it (a link
    /// with a bad FCS would drop it instead, which is just loss).
    fn pass(&mut self, frame: &mut [u8]) -> bool {
        if frame.len() > ETH_HEADER && self.compiled.corrupt.happens(&mut self.rng) {
            let bits = (frame.len() - ETH_HEADER) as u64 * 8;
            let bit = random::below(&mut self.rng, bits);
            frame[ETH_HEADER + (bit / 8) as usize] ^= 1 << (bit % 8);
            self.counters.corrupted += 1;
            return true;
        }
        false
    }

    /// The rate queue, then the delay: gives the frame its due time.
    fn admit(&mut self, now: u64, mut frame: Vec<u8>, mut marks: Marks) {
        let len = frame.len() as u64;
        // What a direction holds is bounded whatever its parameters say (a
        // long delay at a high rate is gigabytes on the wire): past the
        // bound a frame is tail-dropped, counted with the queue's drops.
        if self.pending_bytes + len > IN_FLIGHT_MAX {
            self.counters.dropped_queue += 1;
            if self.keep_dropped {
                self.dropped.push((Cause::Queue, frame));
            }
            return;
        }
        let tx_end = match self.imp.rate {
            // Without a rate nothing is serialized and nothing queues: the
            // frame is "transmitted" the moment it arrives.
            None => now,
            Some(rate) => {
                let (depth_p, depth_b) = (self.counters.queue_packets, self.counters.queue_bytes);
                // Tail drop: the queue holds every frame whose transmission
                // has not ended (including the one on the wire), like a
                // pfifo/bfifo in front of a shaper. A frame larger than a
                // byte limit can never enter, as in bfifo.
                let full = match self.imp.queue {
                    QueueLimit::Packets(n) => depth_p + 1 > u64::from(n),
                    QueueLimit::Bytes(n) => depth_b + len > n,
                };
                if full {
                    self.counters.dropped_queue += 1;
                    if self.keep_dropped {
                        self.dropped.push((Cause::Queue, frame));
                    }
                    return;
                }
                // ECN: mark instead of waiting for the queue to overflow, as
                // an AQM with a step threshold does (DCTCP's K). The depth
                // before this frame is compared, so a threshold of 1 packet
                // marks every frame that has to wait. Not-ECT frames pass
                // unmarked; only the tail drop above limits them.
                if let Some(threshold) = self.imp.ecn {
                    let above = match threshold {
                        QueueLimit::Packets(n) => depth_p >= u64::from(n),
                        QueueLimit::Bytes(n) => depth_b >= n,
                    };
                    if above && packet::mark_ce(&mut frame) {
                        self.counters.ecn_marked += 1;
                        marks.ecn_marked = true;
                    }
                }
                // Serialization: the frame starts when the link is free
                // (now, or when the previous frame ends) and takes
                // len*8/rate seconds, rounded up to the next nanosecond.
                let tx_time = rate
                    .transmit_time(len)
                    .map_or(u64::MAX, turbonet_topo::units::Delay::as_nanos);
                let tx_end = now.max(self.last_tx_end).saturating_add(tx_time);
                self.last_tx_end = tx_end;
                if tx_end > now {
                    self.in_queue.push_back((tx_end, len));
                    self.counters.queue_packets += 1;
                    self.counters.queue_bytes += len;
                }
                tx_end
            }
        };
        self.last_tx_end = self.last_tx_end.max(tx_end);

        // Propagation delay and jitter. A frame cannot arrive before it has
        // been transmitted, so a negative jitter is clamped at tx_end.
        let mut due = i128::from(tx_end) + i128::from(self.imp.delay.as_nanos());
        let mut reorder = false;
        if let Some(j) = &self.imp.jitter {
            due += random::jitter_offset(&mut self.rng, j);
            reorder = j.reorder;
        }
        let mut due = u64::try_from(due.max(i128::from(tx_end))).unwrap_or(u64::MAX);
        // Without reordering a frame never overtakes an earlier one: jitter
        // then only stretches gaps, as on a real path with one queue.
        if !reorder {
            due = due.max(self.last_due);
        }
        self.last_due = self.last_due.max(due);
        self.pending_bytes += len;
        let pending = Pending {
            due,
            seq: self.seq,
            frame,
            marks,
        };
        if reorder {
            self.reordered.push(Reverse(pending));
        } else {
            self.in_order.push_back(pending);
        }
        self.seq += 1;
    }

    /// Frames whose transmission ended by `now` leave the queue depth.
    fn expire(&mut self, now: u64) {
        while let Some(&(tx_end, len)) = self.in_queue.front() {
            if tx_end > now {
                break;
            }
            self.in_queue.pop_front();
            self.counters.queue_packets -= 1;
            self.counters.queue_bytes -= len;
        }
    }
}
