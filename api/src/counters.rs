//! Link counters as a data plane counts them and the API carries them,
//! with what the machine (not the link's model) did to the frames.

use serde::{Deserialize, Serialize};
use turbonet_injectors::Counters;

/// Counters of one link, both directions, as a data plane counts them
/// (the link engine, a switch's counters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkCounters {
    /// Link name.
    pub link: String,
    /// Per direction (0: ends[0] -> ends[1]).
    pub directions: [Counters; 2],
    /// Per direction, what this machine (not the link's model) did to its
    /// frames.
    pub shortfall: [Shortfall; 2],
}

/// Every link's counters, as read at one time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counted {
    /// When they were read, Unix seconds.
    pub at_unix: f64,
    /// The links counted.
    pub links: Vec<LinkCounters>,
}

/// What the machine running a link, rather than the link's model, did to
/// one direction's frames: where a figure measured over the link is this
/// machine's and not the fabric's. Zero where nothing stands between the
/// ends (a veth, a switch's port).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shortfall {
    /// Frames the engine could not transmit (full socket buffer, peer
    /// down).
    pub tx_errors: u64,
    /// Frames the kernel dropped at the engine's receive socket before the
    /// engine read them (it could not keep up).
    pub socket_drops: u64,
    /// Frames that left more than [`Shortfall::LATE_NS`] after their due
    /// time.
    pub late: u64,
    /// The latest any frame left after its due time, nanoseconds.
    pub max_late_ns: u64,
}

impl Shortfall {
    /// Lateness above which a frame counts as late: a millisecond, far
    /// above the engine's wake-up jitter (tens of microseconds), far below
    /// the delays a scenario's figures hang on.
    pub const LATE_NS: u64 = 1_000_000;

    /// What grew from `before` to `self`; the latest lateness is this
    /// one's (it is a maximum, not a count).
    pub fn since(&self, before: &Shortfall) -> Shortfall {
        Shortfall {
            tx_errors: self.tx_errors.saturating_sub(before.tx_errors),
            socket_drops: self.socket_drops.saturating_sub(before.socket_drops),
            late: self.late.saturating_sub(before.late),
            max_late_ns: self.max_late_ns,
        }
    }

    /// What follows [`Shortfall::describe`]'s words.
    pub const CONSEQUENCE: &'static str = "the link engine could not keep up: figures over these links are this machine's, not the fabric's";

    /// In words, when the machine fell short for a direction that passed
    /// `frames` frames (`None`: it did not, or so rarely that the figures
    /// stand: late frames count from one in a hundred).
    pub fn describe(&self, frames: u64) -> Option<String> {
        let mut parts = Vec::new();
        if self.socket_drops > 0 {
            parts.push(format!(
                "{} frames dropped at the engine's socket before it read them",
                self.socket_drops
            ));
        }
        if self.tx_errors > 0 {
            parts.push(format!(
                "{} frames the engine could not transmit",
                self.tx_errors
            ));
        }
        if self.late > 0 && self.late * 100 >= frames.max(1) {
            parts.push(format!(
                "{} of {frames} frames ({:.0}%) left more than {} ms late, the latest {:.1} ms late",
                self.late,
                self.late as f64 * 100.0 / frames.max(1) as f64,
                Self::LATE_NS / 1_000_000,
                self.max_late_ns as f64 / 1e6
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}
