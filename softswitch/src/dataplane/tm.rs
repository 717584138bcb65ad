//! The traffic manager: per (physical port, queue) FIFOs, shaped to the
//! device config's rates with a tail-drop limit, followed by the delayed
//! queue (a frame is due its link delay after it left its queue); the line
//! rates of interface ports, which pace what they receive; and the loss
//! draws' random streams.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::frame::Frame;
use super::hash::FastMap;
use crate::{Attach, DeviceConfig};

const NS_PER_SEC: u128 = 1_000_000_000;

/// A queue's shaper: the time its last queued bit is serialized.
#[derive(Debug, Clone)]
struct Shaper {
    rate_bps: u64,
    limit_bytes: u64,
    /// When the last accepted frame's last bit leaves (ns).
    busy_until: u64,
    /// Sub-nanosecond remainder of `busy_until`, in units of 1/rate ns, so
    /// a long burst keeps the exact rate whatever the rounding.
    carry: u64,
}

impl Shaper {
    /// Accepts `len` bytes offered at `now`, or refuses them when the
    /// backlog ahead of them plus themselves would pass the limit (tail
    /// drop); returns when their last bit is serialized.
    fn admit(&mut self, now: u64, len: u64) -> Result<u64, QueueFull> {
        let start = if self.busy_until > now {
            self.busy_until
        } else {
            self.carry = 0;
            now
        };
        // The bytes still to serialize ahead of this frame.
        let backlog =
            (u128::from(start - now) * u128::from(self.rate_bps) / (8 * NS_PER_SEC)) as u64;
        if backlog.saturating_add(len) > self.limit_bytes {
            return Err(QueueFull);
        }
        let work = u128::from(len) * 8 * NS_PER_SEC + u128::from(self.carry);
        let rate = u128::from(self.rate_bps);
        self.carry = (work % rate) as u64;
        self.busy_until = start.saturating_add(u64::try_from(work / rate).unwrap_or(u64::MAX));
        Ok(self.busy_until)
    }

    /// The same shaper at a new rate and limit: what is being serialized
    /// finishes at the old rate, the next frame starts at the new one.
    fn reconfigure(&mut self, rate_bps: u64, limit_bytes: u64) {
        if self.rate_bps != rate_bps {
            // The carry is in units of the old rate.
            self.carry = 0;
        }
        self.rate_bps = rate_bps;
        self.limit_bytes = limit_bytes;
    }
}

#[derive(Debug)]
struct Pending {
    due: u64,
    seq: u64,
    frame: Frame,
}

#[derive(Debug)]
struct Queue {
    port: u32,
    queue: u32,
    shaper: Option<Shaper>,
    fifo: VecDeque<Pending>,
    /// Due time of the last frame queued: a later frame is never due
    /// before it (a delay lowered by the controller must not reorder).
    last_due: u64,
}

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueFull;

/// The per-(port, queue) FIFOs and the heap of their heads.
#[derive(Debug, Default)]
pub(crate) struct TrafficManager {
    slots: FastMap<u64, u32>,
    queues: Vec<Queue>,
    /// (rate, limit) per (port << 32 | queue) from the device config.
    shaping: FastMap<u64, (u64, u64)>,
    /// One entry per non-empty queue: its head's (due, seq, slot). FIFOs
    /// are in due order, so the heap's top is the next frame due.
    heads: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    queued: usize,
}

fn key(port: u32, queue: u32) -> u64 {
    u64::from(port) << 32 | u64::from(queue)
}

fn shaper(rate_bps: u64, limit_bytes: u64) -> Shaper {
    Shaper {
        rate_bps,
        limit_bytes,
        busy_until: 0,
        carry: 0,
    }
}

impl TrafficManager {
    /// Takes the shaping of a (new) device config: queues keep their
    /// frames; a changed rate applies from the next frame on.
    pub(crate) fn configure(&mut self, config: &DeviceConfig) {
        self.shaping = config
            .ports
            .iter()
            .flat_map(|p| {
                // A zero rate never gets past validation; were it to, the
                // queue is left unshaped rather than divide by zero.
                p.queues
                    .iter()
                    .filter(|q| q.rate_bps > 0)
                    .map(|q| (key(p.port, q.queue), (q.rate_bps, q.limit())))
            })
            .collect();
        for q in &mut self.queues {
            q.shaper = match (self.shaping.get(&key(q.port, q.queue)), q.shaper.take()) {
                (None, _) => None,
                (Some(&(rate, limit)), Some(mut s)) => {
                    s.reconfigure(rate, limit);
                    Some(s)
                }
                (Some(&(rate, limit)), None) => Some(shaper(rate, limit)),
            };
        }
    }

    /// The slot of queue `queue` of `port`, created on first use.
    pub(crate) fn slot(&mut self, port: u32, queue: u32) -> u32 {
        let k = key(port, queue);
        if let Some(slot) = self.slots.get(&k) {
            return *slot;
        }
        let slot = self.queues.len() as u32;
        self.queues.push(Queue {
            port,
            queue,
            shaper: self
                .shaping
                .get(&k)
                .map(|&(rate, limit)| shaper(rate, limit)),
            fifo: VecDeque::new(),
            last_due: 0,
        });
        self.slots.insert(k, slot);
        slot
    }

    /// Queues `frame` at `now` in `slot`; it is due when its queue has
    /// serialized it (shaped queues) plus `delay_ns`. A shaped queue whose
    /// backlog would pass its limit refuses it (tail drop).
    pub(crate) fn enqueue(
        &mut self,
        now: u64,
        slot: u32,
        delay_ns: u64,
        frame: Frame,
    ) -> Result<(), QueueFull> {
        let Some(q) = self.queues.get_mut(slot as usize) else {
            return Err(QueueFull);
        };
        let departure = match &mut q.shaper {
            None => now,
            Some(s) => s.admit(now, frame.len() as u64)?,
        };
        let due = departure.saturating_add(delay_ns).max(q.last_due);
        q.last_due = due;
        let seq = self.seq;
        self.seq += 1;
        if q.fifo.is_empty() {
            self.heads.push(Reverse((due, seq, slot)));
        }
        q.fifo.push_back(Pending { due, seq, frame });
        self.queued += 1;
        Ok(())
    }

    /// The next frame due at or before `now`: (due time, port, frame).
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u64, u32, Frame)> {
        let mut head = self.heads.peek_mut()?;
        let Reverse((due, _, slot)) = *head;
        if due > now {
            return None;
        }
        let q = &mut self.queues[slot as usize];
        let p = q.fifo.pop_front()?;
        // The queue's next frame takes its place in the heap: one sift
        // instead of a pop and a push.
        match q.fifo.front() {
            Some(next) => *head = Reverse((next.due, next.seq, slot)),
            None => {
                PeekMut::pop(head);
            }
        }
        self.queued -= 1;
        Some((p.due, q.port, p.frame))
    }

    /// When the next frame is due.
    pub(crate) fn next_due(&self) -> Option<u64> {
        self.heads.peek().map(|Reverse((due, _, _))| *due)
    }

    /// Frames queued or in the delayed queue.
    pub(crate) fn len(&self) -> usize {
        self.queued
    }
}

/// A frame received on a rated port, waiting for its admission.
#[derive(Debug)]
struct Admission {
    at: u64,
    seq: u64,
    port: u32,
    frame: Frame,
}

impl PartialEq for Admission {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Admission {}

impl PartialOrd for Admission {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Admission {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The line rates of interface ports. A port's line rate limits what it
/// receives, as a wire would: a frame enters the pipeline when its last
/// bit has arrived, `max(arrival, the previous frame's admission) + its
/// bits / rate`, and a frame that would make the bytes not yet admitted
/// pass the port's limit is tail-dropped. A host sends into its veth as
/// fast as it likes, so without this the host-to-switch direction of a
/// host link would have no rate at all.
#[derive(Debug, Default)]
pub(crate) struct LineRates {
    /// The shaper of every rated port, by port.
    shapers: FastMap<u32, Shaper>,
    /// Ports with frames waiting: (admission time of the last, how many).
    waiting: FastMap<u32, (u64, usize)>,
    /// The frames waiting, earliest admission first (ties: arrival order).
    admissions: BinaryHeap<Reverse<Admission>>,
    seq: u64,
}

impl LineRates {
    /// Takes the line rates of a (new) device config: frames waiting keep
    /// their admission time; a changed rate applies from the next frame on.
    pub(crate) fn configure(&mut self, config: &DeviceConfig) {
        let rates: FastMap<u32, (u64, u64)> = config
            .ports
            .iter()
            .filter(|p| matches!(p.attach, Attach::Interface(_)))
            .filter_map(|p| {
                // A zero rate never gets past validation; were it to, the
                // port is left unrated rather than divide by zero.
                let rate = p.line_rate_bps.filter(|&r| r > 0)?;
                Some((p.port, (rate, p.line_limit().unwrap_or(u64::MAX))))
            })
            .collect();
        self.shapers.retain(|port, _| rates.contains_key(port));
        for (port, (rate, limit)) in rates {
            self.shapers
                .entry(port)
                .and_modify(|s| s.reconfigure(rate, limit))
                .or_insert_with(|| shaper(rate, limit));
        }
    }

    /// A frame received on `port` at `now`: handed back when it enters the
    /// pipeline at once (no line rate and nothing waiting before it), held
    /// for [`LineRates::pop_due`] otherwise, or refused (tail drop).
    pub(crate) fn receive(
        &mut self,
        now: u64,
        port: u32,
        frame: Frame,
    ) -> Result<Option<Frame>, QueueFull> {
        if self.shapers.is_empty() && self.waiting.is_empty() {
            // No line rates: the common case costs no lookups.
            return Ok(Some(frame));
        }
        let behind = self.waiting.get(&port).map(|w| w.0);
        let at = match self.shapers.get_mut(&port) {
            Some(s) => {
                // Frames admitted under an earlier config still go first.
                if let Some(last) = behind.filter(|&last| last > s.busy_until) {
                    s.busy_until = last;
                    s.carry = 0;
                }
                s.admit(now, frame.len() as u64)?
            }
            // Unrated, but frames from when it was rated still wait:
            // never overtake them.
            None => behind.map_or(now, |last| last.max(now)),
        };
        if at <= now && behind.is_none() {
            return Ok(Some(frame));
        }
        let w = self.waiting.entry(port).or_insert((at, 0));
        *w = (at, w.1 + 1);
        let seq = self.seq;
        self.seq += 1;
        self.admissions.push(Reverse(Admission {
            at,
            seq,
            port,
            frame,
        }));
        Ok(None)
    }

    /// The next frame admitted at or before `now`: (admission time, port,
    /// frame).
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u64, u32, Frame)> {
        if self.admissions.peek()?.0.at > now {
            return None;
        }
        let Reverse(a) = self.admissions.pop()?;
        if let Some(w) = self.waiting.get_mut(&a.port) {
            w.1 -= 1;
            if w.1 == 0 {
                self.waiting.remove(&a.port);
            }
        }
        Some((a.at, a.port, a.frame))
    }

    /// When the next waiting frame is admitted.
    pub(crate) fn next_due(&self) -> Option<u64> {
        self.admissions.peek().map(|Reverse(a)| a.at)
    }

    /// Frames waiting for admission.
    pub(crate) fn len(&self) -> usize {
        self.admissions.len()
    }
}

/// Stream numbers from here on are the virtual ingress ports' (a host
/// link's inbound loss); below, the virtual egress ports'.
const INGRESS_STREAMS: u64 = 1 << 32;

/// The loss draws: one ChaCha8 stream per virtual egress port and one per
/// virtual ingress port (the config's seed as key, the vport as stream
/// number, ingress ports' apart), so a link direction's losses depend on
/// its own traffic only and a run is reproducible per link.
#[derive(Debug, Default)]
pub(crate) struct LossStreams {
    seed: u64,
    by_number: FastMap<u64, u32>,
    streams: Vec<ChaCha8Rng>,
}

impl LossStreams {
    /// Starts every stream again from `seed` when it changes.
    pub(crate) fn reseed(&mut self, seed: u64) {
        if seed != self.seed || self.streams.is_empty() {
            self.seed = seed;
            self.by_number.clear();
            self.streams.clear();
        }
    }

    /// The stream of virtual egress port `vport`, created on first use.
    pub(crate) fn stream(&mut self, vport: u16) -> u32 {
        self.numbered(u64::from(vport))
    }

    /// The stream of virtual ingress port `vport`, created on first use.
    pub(crate) fn ingress_stream(&mut self, vport: u16) -> u32 {
        self.numbered(INGRESS_STREAMS | u64::from(vport))
    }

    fn numbered(&mut self, number: u64) -> u32 {
        if let Some(s) = self.by_number.get(&number) {
            return *s;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(number);
        let s = self.streams.len() as u32;
        self.streams.push(rng);
        self.by_number.insert(number, s);
        s
    }

    /// One 32-bit draw from stream `s`.
    pub(crate) fn draw(&mut self, s: u32) -> u32 {
        match self.streams.get_mut(s as usize) {
            Some(rng) => rng.next_u32(),
            // A stream index from an older compile: no loss rather than a panic.
            None => u32::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PortConfig, QueueConfig};

    fn config(rate_bps: u64, limit_bytes: Option<u64>) -> DeviceConfig {
        DeviceConfig {
            ports: vec![PortConfig {
                port: 1,
                attach: Attach::Interface("p1".into()),
                queues: vec![QueueConfig {
                    queue: 0,
                    rate_bps,
                    limit_bytes,
                }],
                line_rate_bps: None,
                line_limit_bytes: None,
            }],
            seed: 0,
        }
    }

    /// Port 1 an interface received at `rate_bps` (limit `limit_bytes`),
    /// port 2 a cable (to port 3), which has no line rate.
    fn lines(rate_bps: Option<u64>, limit_bytes: Option<u64>) -> DeviceConfig {
        let port = |port, attach| PortConfig {
            port,
            attach,
            queues: vec![],
            line_rate_bps: rate_bps,
            line_limit_bytes: limit_bytes,
        };
        DeviceConfig {
            ports: vec![
                port(1, Attach::Interface("p1".into())),
                port(2, Attach::Cable(3)),
            ],
            seed: 0,
        }
    }

    fn admitted(l: &mut LineRates, now: u64) -> Vec<(u64, u32, u8)> {
        std::iter::from_fn(|| l.pop_due(now).map(|(at, p, f)| (at, p, f.bytes()[0]))).collect()
    }

    fn kilobyte(tag: u8) -> Frame {
        Frame::from_vec(vec![tag; 1000])
    }

    #[test]
    fn a_line_rate_admits_frames_one_serialization_time_apart_and_tail_drops() {
        let mut l = LineRates::default();
        l.configure(&lines(Some(1_000_000_000), Some(3_000)));
        let taken: Vec<bool> = (0..5)
            .map(|i| l.receive(100, 1, kilobyte(i)).is_ok())
            .collect();
        assert_eq!(taken, [true, true, true, false, false]);
        assert_eq!(l.len(), 3);
        assert_eq!(l.next_due(), Some(8_100));
        assert!(admitted(&mut l, 8_099).is_empty());
        assert_eq!(
            admitted(&mut l, u64::MAX),
            [(8_100, 1, 0), (16_100, 1, 1), (24_100, 1, 2)]
        );
        // An idle line starts afresh from the arrival.
        assert!(l.receive(50_000, 1, kilobyte(9)).unwrap().is_none());
        assert_eq!(admitted(&mut l, u64::MAX), [(58_000, 1, 9)]);
        // Unrated ports (and cables) hand the frame straight back.
        assert!(l.receive(0, 2, kilobyte(1)).unwrap().is_some());
        assert!(l.receive(0, 7, kilobyte(1)).unwrap().is_some());
        assert_eq!(l.len(), 0);
    }

    #[test]
    fn the_default_line_limit_holds_100ms() {
        let mut l = LineRates::default();
        // 10 Mbit/s: 125000 bytes in 100 ms.
        l.configure(&lines(Some(10_000_000), None));
        let taken = (0..200)
            .filter(|_| l.receive(0, 1, kilobyte(0)).is_ok())
            .count();
        assert_eq!(taken, 125);
    }

    #[test]
    fn a_new_line_rate_keeps_the_order_of_what_waits() {
        let mut l = LineRates::default();
        l.configure(&lines(Some(1_000_000_000), None));
        l.receive(0, 1, kilobyte(1)).unwrap();
        l.receive(0, 1, kilobyte(2)).unwrap();
        // Twice the rate: the next frame takes 4 us after the last waiting.
        l.configure(&lines(Some(2_000_000_000), None));
        l.receive(0, 1, kilobyte(3)).unwrap();
        // No rate at all: behind them still, but at once after them.
        l.configure(&lines(None, None));
        assert!(l.receive(0, 1, kilobyte(4)).unwrap().is_none());
        assert_eq!(
            admitted(&mut l, u64::MAX),
            [
                (8_000, 1, 1),
                (16_000, 1, 2),
                (20_000, 1, 3),
                (20_000, 1, 4)
            ]
        );
        // Nothing waits any more: straight through.
        assert!(l.receive(30_000, 1, kilobyte(5)).unwrap().is_some());
    }

    fn drain(tm: &mut TrafficManager, now: u64) -> Vec<u64> {
        std::iter::from_fn(|| tm.pop_due(now).map(|(due, _, _)| due)).collect()
    }

    #[test]
    fn shaped_frames_leave_one_serialization_time_apart_then_delayed() {
        let mut tm = TrafficManager::default();
        tm.configure(&config(1_000_000_000, None));
        let slot = tm.slot(1, 0);
        for _ in 0..5 {
            tm.enqueue(100, slot, 1_000, Frame::from_vec(vec![0; 1000]))
                .unwrap();
        }
        assert_eq!(tm.next_due(), Some(100 + 8_000 + 1_000));
        assert_eq!(drain(&mut tm, 9_099), Vec::<u64>::new());
        assert_eq!(
            drain(&mut tm, u64::MAX),
            vec![9_100, 17_100, 25_100, 33_100, 41_100]
        );
    }

    #[test]
    fn odd_rates_keep_their_long_run_rate() {
        let mut tm = TrafficManager::default();
        tm.configure(&config(3_000_000, Some(u64::MAX)));
        let slot = tm.slot(1, 0);
        for _ in 0..3_000 {
            tm.enqueue(0, slot, 0, Frame::from_vec(vec![0; 1])).unwrap();
        }
        // 3000 bytes at 3 Mbit/s: exactly 8 ms.
        assert_eq!(drain(&mut tm, u64::MAX).last(), Some(&8_000_000));
    }

    #[test]
    fn the_limit_tail_drops_and_an_idle_queue_starts_afresh() {
        let mut tm = TrafficManager::default();
        tm.configure(&config(1_000_000_000, Some(3_000)));
        let slot = tm.slot(1, 0);
        let sent: Vec<bool> = (0..5)
            .map(|_| {
                tm.enqueue(0, slot, 0, Frame::from_vec(vec![0; 1000]))
                    .is_ok()
            })
            .collect();
        assert_eq!(sent, [true, true, true, false, false]);
        // After the first frame left, one more fits.
        assert!(
            tm.enqueue(8_000, slot, 0, Frame::from_vec(vec![0; 1000]))
                .is_ok()
        );
        assert!(
            tm.enqueue(8_000, slot, 0, Frame::from_vec(vec![0; 1000]))
                .is_err()
        );
        assert_eq!(drain(&mut tm, u64::MAX), [8_000, 16_000, 24_000, 32_000]);
        tm.enqueue(100_000, slot, 0, Frame::from_vec(vec![0; 1000]))
            .unwrap();
        assert_eq!(drain(&mut tm, u64::MAX), [108_000]);
    }

    #[test]
    fn fifo_order_holds_when_the_delay_drops_and_queues_interleave_by_due_time() {
        let mut tm = TrafficManager::default();
        let a = tm.slot(1, 0);
        let b = tm.slot(2, 0);
        tm.enqueue(0, a, 5_000, Frame::from_vec(vec![1])).unwrap();
        tm.enqueue(0, a, 1_000, Frame::from_vec(vec![2])).unwrap();
        tm.enqueue(0, b, 2_000, Frame::from_vec(vec![3])).unwrap();
        let order: Vec<(u64, u32, u8)> =
            std::iter::from_fn(|| tm.pop_due(u64::MAX).map(|(d, p, f)| (d, p, f.bytes()[0])))
                .collect();
        assert_eq!(order, [(2_000, 2, 3), (5_000, 1, 1), (5_000, 1, 2)]);
        assert_eq!(tm.len(), 0);
        assert_eq!(tm.next_due(), None);
    }

    #[test]
    fn a_new_rate_applies_to_queued_queues() {
        let mut tm = TrafficManager::default();
        tm.configure(&config(1_000_000_000, None));
        let slot = tm.slot(1, 0);
        tm.enqueue(0, slot, 0, Frame::from_vec(vec![0; 1000]))
            .unwrap();
        tm.configure(&config(2_000_000_000, None));
        tm.enqueue(0, slot, 0, Frame::from_vec(vec![0; 1000]))
            .unwrap();
        tm.configure(&DeviceConfig::default());
        tm.enqueue(0, slot, 0, Frame::from_vec(vec![0; 1000]))
            .unwrap();
        assert_eq!(drain(&mut tm, u64::MAX), [8_000, 12_000, 12_000]);
    }

    #[test]
    fn loss_streams_are_per_vport_and_reproducible() {
        let mut a = LossStreams::default();
        a.reseed(7);
        let (x, y, z) = (a.stream(1), a.stream(2), a.ingress_stream(1));
        let first: Vec<u32> = (0..4).map(|_| a.draw(x)).collect();
        let other: Vec<u32> = (0..4).map(|_| a.draw(y)).collect();
        let inbound: Vec<u32> = (0..4).map(|_| a.draw(z)).collect();
        assert_ne!(first, other);
        assert_ne!(
            first, inbound,
            "a vport's ingress draws are not its egress draws"
        );
        let mut b = LossStreams::default();
        b.reseed(7);
        let s = b.stream(1);
        assert_eq!(first, (0..4).map(|_| b.draw(s)).collect::<Vec<_>>());
    }
}
