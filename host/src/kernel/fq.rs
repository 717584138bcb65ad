//! `tc` requests for the kernel engine's hold: an `fq` root qdisc on each
//! engine-side port of a link the kernel engine carries, encoded as a
//! complete `RTM_NEWQDISC` netlink message.
//!
//! The kernel engine's program stamps every frame it passes with its due
//! time (`skb->tstamp`) and sends it out of the far port, whose `fq` holds
//! it until then (the earliest-departure-time model). `fq` is configured
//! to hold what the program decided and nothing else:
//!
//! - one flow for everything: the program's clones carry no socket, and
//!   `orphan_mask 0` hashes every socketless frame to one flow, so frames
//!   leave in due-time order (FIFO among equal times), as the model wants;
//! - no pacing of its own (`rate_enable 0`) and no CE marking of its own
//!   (its threshold left off);
//! - a frame stamped beyond the horizon is held until the horizon, never
//!   dropped (`horizon_drop 0`), and the horizon is an hour (the program
//!   refuses links that could hold a frame longer);
//! - room for [`HOLD_FRAMES`] frames, in the qdisc and in its one flow: a
//!   frame beyond it is refused, and the program counts it as a transmit
//!   error of the link;
//! - its timer fires on time (`timer_slack` 0).
//!
//! netlink-packet-route has no fq support, so `TCA_OPTIONS` is written
//! here following `linux/pkt_sched.h` (`TCA_FQ_*`) and the kernel's
//! `fq_change`.

use std::io;
use std::os::fd::OwnedFd;

use super::netem::{new_root_qdisc, send_all};
use super::raw::put;

// `TCA_FQ_*` attributes (linux/pkt_sched.h).
const TCA_FQ_PLIMIT: u16 = 1;
const TCA_FQ_FLOW_PLIMIT: u16 = 2;
const TCA_FQ_RATE_ENABLE: u16 = 5;
const TCA_FQ_ORPHAN_MASK: u16 = 10;
const TCA_FQ_TIMER_SLACK: u16 = 13;
const TCA_FQ_HORIZON: u16 = 14;
const TCA_FQ_HORIZON_DROP: u16 = 15;

/// Frames one engine-side port holds at most: 256 Ki, about 400 MB of
/// full-size frames.
pub const HOLD_FRAMES: u32 = 262_144;

/// The horizon, microseconds: an hour.
pub const HORIZON_MICROS: u32 = 3_600_000_000;

/// The `fq` root qdisc's `TCA_OPTIONS` payload.
pub fn options() -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    for (kind, value) in [
        (TCA_FQ_PLIMIT, HOLD_FRAMES),
        (TCA_FQ_FLOW_PLIMIT, HOLD_FRAMES),
        (TCA_FQ_RATE_ENABLE, 0),
        (TCA_FQ_ORPHAN_MASK, 0),
        (TCA_FQ_TIMER_SLACK, 0),
        (TCA_FQ_HORIZON, HORIZON_MICROS),
    ] {
        put(&mut out, kind, &value.to_ne_bytes());
    }
    put(&mut out, TCA_FQ_HORIZON_DROP, &[0u8]);
    out
}

/// The complete `RTM_NEWQDISC` message (`tc qdisc replace dev IF root fq
/// ...`).
pub fn new_qdisc(ifindex: u32) -> Vec<u8> {
    new_root_qdisc(ifindex, "fq", options())
}

/// Installs (or replaces) the kernel engine's `fq` as the root qdisc of
/// interfaces `ifindexes` in namespace `ns`, over one netlink socket.
pub fn apply(ns: &OwnedFd, ifindexes: &[u32]) -> io::Result<()> {
    let requests: Vec<Vec<u8>> = ifindexes.iter().map(|&i| new_qdisc(i)).collect();
    send_all(ns, &requests)
}

/// True when this kernel has `sch_fq` (loaded, built in, or as a module
/// on disk): the kernel engine could then hold frames.
pub fn kernel_has_fq() -> bool {
    super::kernel_has_module("sch_fq")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attributes of a `TCA_OPTIONS` payload: (kind, value).
    fn attributes(mut buf: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        while buf.len() >= 4 {
            let len = usize::from(u16::from_ne_bytes([buf[0], buf[1]]));
            let kind = u16::from_ne_bytes([buf[2], buf[3]]);
            out.push((kind, buf[4..len].to_vec()));
            buf = &buf[len.next_multiple_of(4).min(buf.len())..];
        }
        out
    }

    #[test]
    fn one_flow_no_pacing_an_hour_of_horizon_and_nothing_dropped_at_it() {
        let attrs = attributes(&options());
        let u32_of = |kind| {
            let (_, v) = attrs.iter().find(|(k, _)| *k == kind).expect("attribute");
            u32::from_ne_bytes(v[..4].try_into().unwrap())
        };
        assert_eq!(u32_of(TCA_FQ_ORPHAN_MASK), 0);
        assert_eq!(u32_of(TCA_FQ_RATE_ENABLE), 0);
        assert_eq!(u32_of(TCA_FQ_HORIZON), 3_600_000_000);
        assert_eq!(u32_of(TCA_FQ_FLOW_PLIMIT), u32_of(TCA_FQ_PLIMIT));
        let drop = attrs.iter().find(|(k, _)| *k == TCA_FQ_HORIZON_DROP);
        assert_eq!(drop.map(|(_, v)| v.as_slice()), Some(&[0u8][..]));
        let msg = new_qdisc(7);
        assert!(msg.windows(3).any(|w| w == b"fq\0"), "the kind is fq");
    }
}
