//! What a link direction did that a monitor is scored on: its queue
//! building up past a threshold and draining again, and bursts of drops,
//! by cause. Sans-I/O like [`crate::Direction`]: the caller passes the
//! time and the direction's counters after it worked, and gets notes back.
//!
//! - **Queue**: the depth crossing the threshold upwards is
//!   [`Note::QueueHigh`]; falling to half of it again is [`Note::QueueLow`]
//!   (the hysteresis keeps a queue hovering at the threshold from writing a
//!   note per frame). The threshold is the link's ECN threshold when it has
//!   one (where a switch starts marking), otherwise half its queue limit;
//!   a link without a rate has no queue, and no threshold.
//! - **Drops**: a drop after at least [`BURST_GAP_NS`] without one of the
//!   same cause begins a burst ([`Note::DropsBegin`]); the burst ends once
//!   that long passes without another ([`Note::DropsEnd`], with how many
//!   frames it dropped and when it began).

use turbonet_topo::units::QueueLimit;

use crate::counters::Counters;
use crate::impairment::Impairment;

/// How long without a drop ends a burst of drops, ns.
pub const BURST_GAP_NS: u64 = 100_000_000;

/// Why frames were dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The loss model.
    Loss,
    /// The queue was full (tail drop).
    Queue,
}

impl Cause {
    /// As events name it.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Loss => "loss",
            Cause::Queue => "queue",
        }
    }

    fn count(self, c: &Counters) -> u64 {
        match self {
            Cause::Loss => c.dropped_loss,
            Cause::Queue => c.dropped_queue,
        }
    }
}

/// Something a direction did, at the time given to [`Watch::observe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// The queue's depth reached the threshold.
    QueueHigh {
        /// The depth (in the threshold's unit).
        depth: u64,
        /// The threshold.
        threshold: QueueLimit,
    },
    /// The queue drained to half the threshold.
    QueueLow {
        /// The depth (in the threshold's unit).
        depth: u64,
        /// The threshold.
        threshold: QueueLimit,
    },
    /// Frames began to be dropped.
    DropsBegin {
        /// Why.
        cause: Cause,
    },
    /// A burst of drops ended.
    DropsEnd {
        /// Why.
        cause: Cause,
        /// Frames it dropped.
        count: u64,
        /// When it began (the caller's clock, ns).
        since: u64,
        /// Its last drop.
        last: u64,
    },
}

/// One cause's bursts.
#[derive(Debug, Clone, Copy, Default)]
struct Burst {
    /// The cause's counter when last observed.
    seen: u64,
    /// The burst in progress: when it began, its last drop, its drops.
    open: Option<(u64, u64, u64)>,
}

/// Watches one direction (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Watch {
    threshold: Option<QueueLimit>,
    high: bool,
    bursts: [(Cause, Burst); 2],
}

impl Watch {
    /// A watch of a direction with these parameters.
    pub fn new(imp: &Impairment) -> Watch {
        Watch {
            threshold: threshold(imp),
            high: false,
            bursts: [
                (Cause::Loss, Burst::default()),
                (Cause::Queue, Burst::default()),
            ],
        }
    }

    /// The direction's parameters changed.
    pub fn set(&mut self, imp: &Impairment) {
        self.threshold = threshold(imp);
    }

    /// The queue threshold watched, if any.
    pub fn threshold(&self) -> Option<QueueLimit> {
        self.threshold
    }

    /// True while a note is still to come without further frames: the
    /// queue is high, or a burst of drops has not ended (it ends with
    /// time), so the caller must keep observing.
    pub fn is_open(&self) -> bool {
        self.high || self.bursts.iter().any(|(_, b)| b.open.is_some())
    }

    /// Compares the direction's counters at `now` with what it saw last
    /// and appends what happened to `notes`. Call it after the direction
    /// took or gave up frames, and now and then without (bursts end on
    /// time).
    pub fn observe(&mut self, now: u64, c: &Counters, notes: &mut Vec<Note>) {
        if let Some(threshold) = self.threshold {
            let (depth, limit) = match threshold {
                QueueLimit::Packets(n) => (c.queue_packets, u64::from(n)),
                QueueLimit::Bytes(n) => (c.queue_bytes, n),
            };
            if !self.high && depth >= limit {
                self.high = true;
                notes.push(Note::QueueHigh { depth, threshold });
            } else if self.high && depth <= limit / 2 {
                self.high = false;
                notes.push(Note::QueueLow { depth, threshold });
            }
        }
        for (cause, burst) in &mut self.bursts {
            let count = cause.count(c);
            let new = count.saturating_sub(burst.seen);
            burst.seen = count;
            match (&mut burst.open, new) {
                (Some((_, last, n)), 1..) => {
                    *last = now;
                    *n += new;
                }
                (Some((since, last, n)), 0) => {
                    if now.saturating_sub(*last) >= BURST_GAP_NS {
                        notes.push(Note::DropsEnd {
                            cause: *cause,
                            count: *n,
                            since: *since,
                            last: *last,
                        });
                        burst.open = None;
                    }
                }
                (None, 1..) => {
                    burst.open = Some((now, now, new));
                    notes.push(Note::DropsBegin { cause: *cause });
                }
                (None, 0) => {}
            }
        }
    }
}

/// The queue threshold of a direction (see the module's documentation).
fn threshold(imp: &Impairment) -> Option<QueueLimit> {
    imp.rate?;
    Some(imp.ecn.unwrap_or(match imp.queue {
        QueueLimit::Packets(n) => QueueLimit::Packets((n / 2).max(1)),
        QueueLimit::Bytes(n) => QueueLimit::Bytes((n / 2).max(1)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_topo::units::Rate;

    fn rated(queue: QueueLimit, ecn: Option<QueueLimit>) -> Impairment {
        Impairment {
            rate: Some(Rate(1_000_000)),
            queue,
            ecn,
            ..Impairment::default()
        }
    }

    #[test]
    fn the_threshold_is_the_ecn_one_or_half_the_queue_and_none_without_a_rate() {
        assert_eq!(
            Watch::new(&rated(QueueLimit::Packets(100), None)).threshold(),
            Some(QueueLimit::Packets(50))
        );
        assert_eq!(
            Watch::new(&rated(
                QueueLimit::Packets(100),
                Some(QueueLimit::Bytes(3000))
            ))
            .threshold(),
            Some(QueueLimit::Bytes(3000))
        );
        assert_eq!(Watch::new(&Impairment::default()).threshold(), None);
    }

    #[test]
    fn a_queue_crossing_its_threshold_notes_once_up_and_once_back_at_half() {
        let mut w = Watch::new(&rated(QueueLimit::Packets(100), None));
        let mut notes = Vec::new();
        let mut c = Counters::default();
        for depth in [10, 49, 50, 60, 40, 26, 50, 25, 24] {
            c.queue_packets = depth;
            w.observe(0, &c, &mut notes);
        }
        let t = QueueLimit::Packets(50);
        assert_eq!(
            notes,
            vec![
                Note::QueueHigh {
                    depth: 50,
                    threshold: t
                },
                Note::QueueLow {
                    depth: 25,
                    threshold: t
                },
            ]
        );
    }

    #[test]
    fn drops_close_together_are_one_burst_per_cause_ended_by_a_gap() {
        let mut w = Watch::new(&Impairment::default());
        let mut notes = Vec::new();
        let mut c = Counters::default();
        let ms = 1_000_000;
        // Loss drops at 0, 50 and 120 ms: one burst; a queue drop at 60 ms.
        for (t, loss, queue) in [
            (0, 1, 0),
            (50 * ms, 3, 0),
            (60 * ms, 3, 1),
            (120 * ms, 4, 1),
            (159 * ms, 4, 1),
            (160 * ms, 4, 1),
            (219 * ms, 4, 1),
            (220 * ms, 4, 1),
            (400 * ms, 5, 1),
        ] {
            c.dropped_loss = loss;
            c.dropped_queue = queue;
            w.observe(t, &c, &mut notes);
        }
        assert_eq!(
            notes,
            vec![
                Note::DropsBegin { cause: Cause::Loss },
                Note::DropsBegin {
                    cause: Cause::Queue
                },
                Note::DropsEnd {
                    cause: Cause::Queue,
                    count: 1,
                    since: 60 * ms,
                    last: 60 * ms
                },
                Note::DropsEnd {
                    cause: Cause::Loss,
                    count: 4,
                    since: 0,
                    last: 120 * ms
                },
                Note::DropsBegin { cause: Cause::Loss },
            ]
        );
    }
}
