//! Units as types: rates, delays, probabilities, queue limits, MTUs.
//! (Placeholder: filled in by the scenario parser work.)

use serde::Serialize;

/// Bandwidth in bits per second. Scenario syntax: `10gbit`, `100mbit`, `400G`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Rate(pub u64);

/// A duration with nanosecond resolution. Scenario syntax: `5us`, `1.5ms`, `0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Delay(pub u64);

/// A probability in [0, 1]. Scenario syntax: `0.1%`, `1e-9`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
pub struct LossProb(pub f64);

/// A queue limit. Scenario syntax: `1000p` (packets), `64KiB`, `1MB` (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum QueueLimit {
    /// At most this many packets.
    Packets(u32),
    /// At most this many bytes.
    Bytes(u64),
}

/// Interface MTU in bytes (68..=65535).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Mtu(pub u16);
