//! The program's maps, mirrored field for field from `bpf/link.bpf.c`
//! (change both), and how a direction's [`Impairment`] and seed become
//! their values.

use std::fmt;

use turbonet_injectors::units::{Delay, QueueLimit};
use turbonet_injectors::{Chance, Distribution, Impairment, Loss};

/// Frames a direction's queue can hold in the program (its ring).
pub const RING: u32 = 1024;

/// The most a frame may wait for its due time in the kernel engine:
/// `fq` drops a frame stamped further ahead than its horizon, which is at
/// most 2^32 microseconds (71 minutes); an hour leaves room.
pub const HOLD_MAX: Delay = Delay(3_600_000_000_000);

/// The largest frame a queue may hold, for the longest wait it can cause.
const FRAME_MAX: u64 = 65_535;

/// The shortest frame: an Ethernet header.
const FRAME_MIN: u64 = 14;

const CHANCE_NEVER: u32 = 0;
const CHANCE_ALWAYS: u32 = 1;
const CHANCE_BELOW: u32 = 2;

const LOSS_NONE: u32 = 0;
const LOSS_BERNOULLI: u32 = 1;
const LOSS_GILBERT_ELLIOTT: u32 = 2;

const LIMIT_NONE: u32 = 0;
const LIMIT_PACKETS: u32 = 1;
const LIMIT_BYTES: u32 = 2;

/// `struct tn_chance`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawChance {
    below: u64,
    kind: u32,
    _pad: u32,
}

impl From<Chance> for RawChance {
    fn from(c: Chance) -> RawChance {
        let (kind, below) = match c {
            Chance::Never => (CHANCE_NEVER, 0),
            Chance::Always => (CHANCE_ALWAYS, 0),
            Chance::Below(t) => (CHANCE_BELOW, t),
        };
        RawChance {
            below,
            kind,
            _pad: 0,
        }
    }
}

/// `struct tn_params`: one direction's parameters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Params {
    loss_model: u32,
    egress_ifindex: u32,
    loss_p: RawChance,
    loss_r: RawChance,
    loss_bad: RawChance,
    loss_good: RawChance,
    corrupt: RawChance,
    duplicate: RawChance,
    has_rate: u32,
    queue_kind: u32,
    rate_bps: u64,
    queue_limit: u64,
    ecn_kind: u32,
    has_jitter: u32,
    ecn_threshold: u64,
    delay_ns: u64,
    jitter_ns: u64,
    reorder: u32,
    _pad: u32,
}

/// Why the program cannot run a direction's model; the userspace engine
/// can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// Normal and Pareto jitter are drawn with floating point.
    Jitter(Distribution),
    /// The queue may hold more frames than the program's ring.
    Queue(QueueLimit),
    /// A frame may wait longer than `fq` can hold it.
    Hold {
        /// The longest wait the parameters allow (saturated).
        worst: Delay,
    },
    /// A zero rate holds frames forever.
    ZeroRate,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::Jitter(d) => write!(
                f,
                "jitter_distribution = \"{d}\" is drawn with floating point, which BPF has not \
                 (the kernel engine draws uniform jitter)"
            ),
            Unsupported::Queue(q) => write!(
                f,
                "queue = \"{q}\" may hold more than {RING} frames, the kernel engine's queue"
            ),
            Unsupported::Hold { worst } => write!(
                f,
                "a frame may wait up to {worst} (delay, jitter and a full queue), longer than \
                 fq holds frames ({HOLD_MAX})"
            ),
            Unsupported::ZeroRate => write!(f, "a zero rate holds frames forever, and fq cannot"),
        }
    }
}

impl std::error::Error for Unsupported {}

impl Params {
    /// The parameters of a direction whose passed frames leave by the
    /// port with `egress_ifindex`, or why the program cannot honour them.
    pub fn new(imp: &Impairment, egress_ifindex: u32) -> Result<Params, Unsupported> {
        let mut p = Params {
            egress_ifindex,
            ..Params::default()
        };
        match imp.loss {
            None => p.loss_model = LOSS_NONE,
            Some(Loss::Bernoulli(l)) => {
                p.loss_model = LOSS_BERNOULLI;
                p.loss_p = Chance::new(l).into();
            }
            Some(Loss::GilbertElliott {
                p: move_bad,
                r,
                bad,
                good,
            }) => {
                p.loss_model = LOSS_GILBERT_ELLIOTT;
                p.loss_p = Chance::new(move_bad).into();
                p.loss_r = Chance::new(r).into();
                p.loss_bad = Chance::new(bad).into();
                p.loss_good = Chance::new(good).into();
            }
        }
        let chance = |c: Option<_>| c.map_or(Chance::Never, Chance::new).into();
        p.corrupt = chance(imp.corrupt);
        p.duplicate = chance(imp.duplicate);

        let mut queued_max = Delay::ZERO;
        if let Some(rate) = imp.rate {
            let (kind, limit, frames_max, bytes_max) = match imp.queue {
                QueueLimit::Packets(n) => (
                    LIMIT_PACKETS,
                    u64::from(n),
                    u64::from(n),
                    u64::from(n) * FRAME_MAX,
                ),
                QueueLimit::Bytes(n) => (LIMIT_BYTES, n, n / FRAME_MIN, n),
            };
            if frames_max > u64::from(RING) {
                return Err(Unsupported::Queue(imp.queue));
            }
            queued_max = rate.transmit_time(bytes_max).ok_or(Unsupported::ZeroRate)?;
            p.has_rate = 1;
            p.rate_bps = rate.0;
            p.queue_kind = kind;
            p.queue_limit = limit;
            (p.ecn_kind, p.ecn_threshold) = match imp.ecn {
                None => (LIMIT_NONE, 0),
                Some(QueueLimit::Packets(n)) => (LIMIT_PACKETS, u64::from(n)),
                Some(QueueLimit::Bytes(n)) => (LIMIT_BYTES, n),
            };
        }
        p.delay_ns = imp.delay.as_nanos();
        let mut jitter_max = 0;
        if let Some(j) = &imp.jitter {
            if j.distribution != Distribution::Uniform {
                return Err(Unsupported::Jitter(j.distribution));
            }
            p.has_jitter = 1;
            p.jitter_ns = j.amount.as_nanos();
            p.reorder = u32::from(j.reorder);
            jitter_max = p.jitter_ns;
        }
        let worst = Delay(
            queued_max
                .as_nanos()
                .saturating_add(p.delay_ns)
                .saturating_add(jitter_max),
        );
        if worst > HOLD_MAX {
            return Err(Unsupported::Hold { worst });
        }
        Ok(p)
    }
}

/// Whether the program can honour `imp`, or why not (the parameters
/// [`Params::new`] would give any port).
pub fn honours(imp: &Impairment) -> Result<(), Unsupported> {
    Params::new(imp, 0).map(drop)
}

/// `struct tn_config`: the parameters behind their lock.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    lock: u32,
    _pad: u32,
    /// The parameters.
    pub params: Params,
}

impl Config {
    /// The map value for `params` (the lock field is the kernel's).
    pub fn new(params: Params) -> Config {
        Config {
            params,
            ..Config::default()
        }
    }
}

/// `struct tn_state`: a direction's random stream, its queue's indices
/// and counters (the queue's ring is a map of its own, `tn_ring`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct State {
    lock: u32,
    ge_bad: u32,
    key: [u32; 8],
    /// 32-bit words of the random stream drawn.
    pub drawn: u64,
    filled: u64,
    buf: [u32; 64],
    last_now: u64,
    last_tx_end: u64,
    last_due: u64,
    head: u32,
    tail: u32,
    cum_total: u64,
    cum_head: u64,
    /// Frames offered.
    pub rx_packets: u64,
    /// Bytes offered.
    pub rx_bytes: u64,
    /// Frames the loss model dropped.
    pub dropped_loss: u64,
    /// Frames and copies the full queue dropped.
    pub dropped_queue: u64,
    /// Copies with a bit flipped.
    pub corrupted: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Copies marked CE (or found CE) above the ECN threshold.
    pub ecn_marked: u64,
    /// Clones the far port refused (its qdisc full).
    pub transmit_errors: u64,
}

impl State {
    /// A fresh direction whose stream is the one
    /// `ChaCha8Rng::from_seed(chacha_key(seed))` draws, as the userspace
    /// model's `Direction::new(imp, seed)`.
    pub fn new(seed: u64) -> State {
        let bytes = turbonet_topo::seed::chacha_key(seed);
        let mut key = [0u32; 8];
        for (word, chunk) in key.iter_mut().zip(bytes.chunks_exact(4)) {
            *word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        State {
            lock: 0,
            ge_bad: 0,
            key,
            drawn: 0,
            filled: 0,
            buf: [0; 64],
            last_now: 0,
            last_tx_end: 0,
            last_due: 0,
            head: 0,
            tail: 0,
            cum_total: 0,
            cum_head: 0,
            rx_packets: 0,
            rx_bytes: 0,
            dropped_loss: 0,
            dropped_queue: 0,
            corrupted: 0,
            duplicated: 0,
            ecn_marked: 0,
            transmit_errors: 0,
        }
    }

    /// Frames in the queue now, and their bytes (as of the last frame).
    pub fn queue(&self) -> (u64, u64) {
        (
            u64::from(self.tail.wrapping_sub(self.head)),
            self.cum_total.wrapping_sub(self.cum_head),
        )
    }
}

/// What happened to one copy of a frame (`VERDICT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No such copy (no duplicate was made).
    None,
    /// Passed, due at this time.
    Pass {
        /// Its due time (ns).
        due: u64,
    },
    /// Dropped by the loss model.
    Loss,
    /// Dropped by the full queue.
    Queue,
}

/// `struct tn_trace`: what the program decided for the last frame of a
/// test run.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Trace {
    due: [u64; 2],
    verdict: [u32; 2],
    bit: [u32; 2],
    marked: [u32; 2],
}

/// One copy's outcome in a [`Trace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copy {
    /// Passed or dropped, and why.
    pub verdict: Verdict,
    /// The bit after the Ethernet header that was flipped.
    pub bit: Option<u32>,
    /// Marked CE.
    pub marked: bool,
}

impl Trace {
    /// The original (0) or the duplicate (1).
    pub fn copy(&self, k: usize) -> Copy {
        let verdict = match self.verdict[k] {
            1 => Verdict::Pass { due: self.due[k] },
            2 => Verdict::Loss,
            3 => Verdict::Queue,
            _ => Verdict::None,
        };
        Copy {
            verdict,
            bit: (self.bit[k] != u32::MAX).then_some(self.bit[k]),
            marked: self.marked[k] != 0,
        }
    }
}

// The map values are copied to and from the kernel as bytes (aya's `Pod`).
// SAFETY: plain old data, `repr(C)`, every bit pattern valid, padding
// spelled out as fields.
#[allow(unsafe_code)]
unsafe impl aya::Pod for Config {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl aya::Pod for State {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl aya::Pod for Trace {}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_injectors::Jitter;
    use turbonet_injectors::units::Rate;

    #[test]
    fn layouts_match_the_c_structs() {
        // Sizes computed from bpf/link.bpf.c's declarations; the loader
        // also checks them against the object's maps.
        assert_eq!(std::mem::size_of::<Params>(), 168);
        assert_eq!(std::mem::size_of::<Config>(), 176);
        assert_eq!(std::mem::size_of::<State>(), 424);
        assert_eq!(std::mem::size_of::<Trace>(), 40);
    }

    #[test]
    fn what_the_program_cannot_honour_is_refused_with_the_reason() {
        let jitter = |distribution| Impairment {
            jitter: Some(Jitter {
                amount: Delay::from_micros(10),
                distribution,
                reorder: false,
            }),
            ..Impairment::default()
        };
        assert!(Params::new(&jitter(Distribution::Uniform), 1).is_ok());
        let e = Params::new(&jitter(Distribution::Normal), 1).unwrap_err();
        assert!(e.to_string().contains("floating point"), "{e}");

        let queue = |queue| Impairment {
            rate: Some(Rate(1_000_000_000)),
            queue,
            ..Impairment::default()
        };
        assert!(Params::new(&queue(QueueLimit::Packets(1024)), 1).is_ok());
        assert!(Params::new(&queue(QueueLimit::Bytes(14 * 1024)), 1).is_ok());
        let e = Params::new(&queue(QueueLimit::Packets(1025)), 1).unwrap_err();
        assert_eq!(e, Unsupported::Queue(QueueLimit::Packets(1025)));
        assert!(Params::new(&queue(QueueLimit::Bytes(14 * 1025)), 1).is_err());

        // 1000 frames of 64 KiB at 1 kbit/s: days.
        let slow = Impairment {
            rate: Some(Rate(1_000)),
            ..Impairment::default()
        };
        let e = Params::new(&slow, 1).unwrap_err();
        assert!(matches!(e, Unsupported::Hold { .. }), "{e}");
        let stopped = Impairment {
            rate: Some(Rate(0)),
            ..Impairment::default()
        };
        assert_eq!(Params::new(&stopped, 1), Err(Unsupported::ZeroRate));
    }

    #[test]
    fn the_key_is_the_seed_expanded_as_the_userspace_model_does() {
        let s = State::new(7);
        let bytes = turbonet_topo::seed::chacha_key(7);
        assert_eq!(s.key[0].to_le_bytes(), bytes[0..4]);
        assert_eq!(s.key[7].to_le_bytes(), bytes[28..32]);
        assert_eq!((s.drawn, s.filled), (0, 0));
    }
}
