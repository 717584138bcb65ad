//! Taps on links, run by the link engine: what a capture records and what
//! a mirror copies.
//!
//! A link the engine carries is tapped where the engine hands a frame to
//! the receiving end, after loss, queueing, delay and corruption: what the
//! receiver gets, each frame marked with what the link did to it, and
//! (for captures) the frames the link dropped, with why. A plain link is
//! tapped by a packet socket on one of its ports, which sees what that end
//! sends and what it receives (a veth delivers both unchanged).
//!
//! A tap's sink is a capture (frames handed to a channel that the control
//! API streams to a client or a file; a reader too slow loses frames, and
//! they are counted) or a mirror (copies, truncated if asked, sent out of
//! a port whose other end is in a monitor's node: a switch's SPAN port).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc::Sender;
use tokio::sync::mpsc::error::TrySendError;
use turbonet_injectors::{Cause, Marks};
use turbonet_packetio::PacketSocket;

/// One frame a capture recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// When, Unix nanoseconds: when the receiving end got it, or when the
    /// link dropped it.
    pub unix_ns: i128,
    /// 0: from the link's `a` end to `b`; 1: the reverse.
    pub direction: u8,
    /// The frame (up to the capture's snap length).
    pub data: Vec<u8>,
    /// Its length on the wire.
    pub original_len: u32,
    /// Why the link dropped it (`None`: delivered).
    pub dropped: Option<Cause>,
    /// What the link did to it.
    pub marks: Marks,
}

/// Where a tap's frames go.
#[derive(Debug)]
pub enum Sink {
    /// A capture.
    Capture {
        /// The capture's reader.
        tx: Sender<Captured>,
        /// Bytes kept of each frame.
        snaplen: usize,
        /// Frames the reader was too slow for.
        missed: Arc<AtomicU64>,
    },
    /// A mirror: copies out of `socket`.
    Mirror {
        /// The mirror port's near end.
        socket: PacketSocket,
        /// Bytes kept of each copy (`None`: whole frames).
        truncate: Option<usize>,
        /// Copies waiting to be sent at the end of the engine's pass.
        pending: Vec<Vec<u8>>,
    },
}

/// A tap on a link: which directions, and where their frames go.
#[derive(Debug)]
pub struct Tap {
    /// Its id, to stop it.
    pub id: u64,
    /// Directions tapped (0: a -> b).
    pub directions: [bool; 2],
    /// Where frames go.
    pub sink: Sink,
}

impl Tap {
    /// True for a capture of direction `d` (it wants dropped frames too).
    pub fn captures(&self, d: usize) -> bool {
        self.directions[d] && matches!(self.sink, Sink::Capture { .. })
    }

    /// Hands the tap one frame of direction `d`; false when the tap is
    /// over (its reader hung up).
    pub fn offer(
        &mut self,
        d: usize,
        unix_ns: i128,
        frame: &[u8],
        dropped: Option<Cause>,
        marks: Marks,
    ) -> bool {
        if !self.directions[d] {
            return true;
        }
        match &mut self.sink {
            Sink::Capture {
                tx,
                snaplen,
                missed,
            } => {
                let captured = Captured {
                    unix_ns,
                    direction: d as u8,
                    data: frame[..frame.len().min(*snaplen)].to_vec(),
                    original_len: frame.len() as u32,
                    dropped,
                    marks,
                };
                match tx.try_send(captured) {
                    Ok(()) => true,
                    Err(TrySendError::Full(_)) => {
                        missed.fetch_add(1, Ordering::Relaxed);
                        true
                    }
                    Err(TrySendError::Closed(_)) => false,
                }
            }
            Sink::Mirror {
                truncate, pending, ..
            } => {
                if dropped.is_none() {
                    let keep = truncate.map_or(frame.len(), |t| frame.len().min(t));
                    pending.push(frame[..keep].to_vec());
                }
                true
            }
        }
    }

    /// Sends a mirror's pending copies. A copy the mirror port cannot
    /// take now (its buffer is full) is lost, as on a switch's
    /// oversubscribed SPAN port; the link's own frames never wait for it.
    pub fn flush(&mut self) {
        if let Sink::Mirror {
            socket, pending, ..
        } = &mut self.sink
            && !pending.is_empty()
        {
            let _ = socket.send_batch(pending);
            pending.clear();
        }
    }
}

/// The taps of one link, with a wish list of what the engine must keep.
#[derive(Debug, Default)]
pub struct Taps(pub Vec<Tap>);

impl Taps {
    /// True when a tap wants direction `d` at all.
    pub fn wants(&self, d: usize) -> bool {
        self.0.iter().any(|t| t.directions[d])
    }

    /// True when a capture wants direction `d`'s dropped frames.
    pub fn wants_dropped(&self, d: usize) -> bool {
        self.0.iter().any(|t| t.captures(d))
    }

    /// Hands every tap one frame; taps whose reader is gone are removed,
    /// and then it says true (what the taps want changed).
    pub fn offer(
        &mut self,
        d: usize,
        unix_ns: i128,
        frame: &[u8],
        dropped: Option<Cause>,
        marks: Marks,
    ) -> bool {
        let before = self.0.len();
        self.0
            .retain_mut(|t| t.offer(d, unix_ns, frame, dropped, marks));
        self.0.len() != before
    }

    /// Sends every mirror's pending copies.
    pub fn flush(&mut self) {
        for t in &mut self.0 {
            t.flush();
        }
    }

    /// Removes tap `id`; true if it was here.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.0.len();
        self.0.retain(|t| t.id != id);
        self.0.len() != before
    }
}

/// Which directions of `link` a request names (empty: both; see
/// [`turbonet_topo::link_directions`]).
pub fn directions(text: &str, link: &turbonet_topo::Link) -> crate::error::Result<[bool; 2]> {
    if text.is_empty() {
        return Ok([true, true]);
    }
    turbonet_topo::link_directions(text).ok_or_else(|| {
        crate::error::Error::Invalid(format!(
            "direction `{text}` of link {}: write `a-b` (frames from its first end to its second), `b-a`, or `both`",
            link.name
        ))
    })
}

/// A plain link tapped at one of its ports.
#[derive(Debug)]
pub struct PortTap {
    /// The link's name (a second tap of it shares this socket).
    pub link: String,
    /// A tap socket on the port of `ends[side]`.
    pub socket: PacketSocket,
    /// Which end the socket is at: what it sends is direction `side`.
    pub side: usize,
    /// The taps.
    pub taps: Taps,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_capture_keeps_its_snap_length_counts_what_its_reader_missed_and_ends_with_it() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(2);
        let missed = Arc::new(AtomicU64::new(0));
        let mut taps = Taps(vec![Tap {
            id: 1,
            directions: [true, false],
            sink: Sink::Capture {
                tx,
                snaplen: 4,
                missed: missed.clone(),
            },
        }]);
        assert!(taps.wants(0) && !taps.wants(1) && taps.wants_dropped(0));
        let frame = [1u8, 2, 3, 4, 5, 6];
        for _ in 0..3 {
            taps.offer(0, 7, &frame, Some(Cause::Loss), Marks::default());
        }
        // Not tapped: ignored.
        taps.offer(1, 7, &frame, None, Marks::default());
        let first = rx.recv().await.unwrap();
        assert_eq!(
            (first.data, first.original_len, first.dropped),
            (vec![1, 2, 3, 4], 6, Some(Cause::Loss))
        );
        assert_eq!(missed.load(Ordering::Relaxed), 1);
        drop(rx);
        taps.offer(0, 8, &frame, None, Marks::default());
        assert!(taps.0.is_empty(), "a capture whose reader hung up ends");
    }
}
