//! Per-direction counters of the link engine.

use serde::{Deserialize, Serialize};

/// What one direction of a link did. Packet and byte counts are totals since
/// the direction was created; `queue_packets`/`queue_bytes` are the current
/// depth of the rate queue (as of the last `offer` or `pop_due`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Frames offered to the direction.
    pub rx_packets: u64,
    /// Bytes offered to the direction.
    pub rx_bytes: u64,
    /// Frames handed back by `pop_due` (duplicates included).
    pub tx_packets: u64,
    /// Bytes handed back by `pop_due`.
    pub tx_bytes: u64,
    /// Frames dropped by the loss model.
    pub dropped_loss: u64,
    /// Frames (and duplicates) dropped because the queue was full.
    pub dropped_queue: u64,
    /// Frames that got a bit flipped.
    pub corrupted: u64,
    /// Extra copies made by duplication.
    pub duplicated: u64,
    /// Frames marked CE (or found already CE) above the ECN threshold.
    pub ecn_marked: u64,
    /// Frames in the rate queue now, including the one being transmitted.
    pub queue_packets: u64,
    /// Bytes in the rate queue now.
    pub queue_bytes: u64,
}
