//! `tc` requests for the kernel shaper: a `tbf` root qdisc on each end of
//! a link that only declares a rate (and a queue), encoded as a complete
//! `RTM_NEWQDISC` netlink message.
//!
//! A link whose only impairment is its rate needs no frame to pass through
//! userspace: the kernel's token bucket filter drains a byte-limited FIFO
//! at the rate, in the sending end's namespace, at the kernel's speed and
//! with nothing to splice. This is how a fabric of tens of thousands of
//! rated links (the real HPN pod) comes up, and why every kernel here can
//! carry rates without `sch_netem`.
//!
//! netlink-packet-route has no tbf support, so `TCA_OPTIONS` is written
//! here following `linux/pkt_sched.h` and the kernel's `tbf_change`:
//!
//! - `TCA_TBF_PARMS`, a `struct tc_tbf_qopt` { `struct tc_ratespec rate,
//!   peakrate`; `limit`, `buffer`, `mtu` }: the rate in bytes per second
//!   (saturated at 2^32-1, the full rate in `TCA_TBF_RATE64`), link layer
//!   Ethernet (so the kernel needs no rate table), the FIFO's limit in
//!   bytes, no peak rate;
//! - `TCA_TBF_BURST`, the bucket's size in bytes (the kernel derives the
//!   buffer time from it and the rate);
//! - `TCA_TBF_RATE64` above 2^32-1 bytes per second.
//!
//! What tbf cannot honour, [`shaper_supports`] refuses (never drops): any
//! impairment but the rate and the queue, and an ECN threshold (tbf never
//! marks CE). A queue in packets becomes that many full frames of the
//! link's MTU in bytes: tbf's FIFO counts bytes.

use std::io;
use std::os::fd::OwnedFd;

use turbonet_injectors::Impairment;
use turbonet_injectors::units::{QueueLimit, Rate};

use super::netem::{new_root_qdisc, send};
use super::raw::put;

// `TCA_TBF_*` attributes (linux/pkt_sched.h).
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TCA_TBF_BURST: u16 = 6;

/// `TC_LINKLAYER_ETHERNET` (linux/pkt_sched.h): the kernel computes
/// transmit times itself, with no rate table.
const LINKLAYER_ETHERNET: u8 = 1;

/// Ethernet header the qdisc sees on top of the MTU (no FCS).
const ETHERNET_HEADER: u64 = 14;

/// How long a full bucket lets the link send at line rate: 1 ms of the
/// rate (at least two full frames), so the shaper holds the rate over any
/// interval longer than a millisecond.
const BURST_NANOS: u64 = 1_000_000;

/// tbf's configuration in bytes: what one request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// The rate.
    pub rate: Rate,
    /// The bucket, bytes.
    pub burst: u32,
    /// The FIFO's limit, bytes.
    pub limit: u32,
}

/// Why the kernel shaper cannot carry a link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the kernel shaper (tbf) cannot apply `{parameter}`: it only shapes to a rate")]
pub struct Unsupported {
    /// The scenario parameter.
    pub parameter: &'static str,
}

/// Whether tbf can carry `imp`: a rate and a queue, nothing else.
pub fn shaper_supports(imp: &Impairment) -> Result<(), Unsupported> {
    let refuse = |parameter| Err(Unsupported { parameter });
    let zero =
        |p: Option<turbonet_injectors::units::LossProb>| p.is_none_or(|p| p.probability() <= 0.0);
    if imp.rate.is_none() {
        return refuse("rate");
    }
    if !imp.delay.is_zero() {
        return refuse("delay");
    }
    if imp.jitter.is_some_and(|j| !j.amount.is_zero()) {
        return refuse("jitter");
    }
    if imp.loss.is_some_and(|l| !l.is_zero()) {
        return refuse("loss");
    }
    if !zero(imp.corrupt) {
        return refuse("corrupt");
    }
    if !zero(imp.duplicate) {
        return refuse("duplicate");
    }
    if imp.ecn.is_some() {
        return refuse("ecn");
    }
    Ok(())
}

impl Tbf {
    /// The shaper of a link of `mtu` with impairment `imp` (checked with
    /// [`shaper_supports`]).
    pub fn for_link(imp: &Impairment, mtu: u32) -> Result<Tbf, Unsupported> {
        shaper_supports(imp)?;
        let rate = imp.rate.expect("checked");
        let frame = u64::from(mtu) + ETHERNET_HEADER;
        let limit = match imp.queue {
            QueueLimit::Packets(n) => u64::from(n).saturating_mul(frame),
            QueueLimit::Bytes(b) => b,
        }
        .max(frame);
        let burst = (u128::from(rate.bytes_per_sec()) * u128::from(BURST_NANOS) / 1_000_000_000)
            .max(u128::from(2 * frame));
        Ok(Tbf {
            rate,
            burst: u32::try_from(burst).unwrap_or(u32::MAX),
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
        })
    }

    /// tbf's `TCA_OPTIONS` payload: a nest of its attributes.
    pub fn options(&self) -> Vec<u8> {
        let bytes = self.rate.bytes_per_sec().max(1);
        let rate32 = u32::try_from(bytes).unwrap_or(u32::MAX);
        // struct tc_ratespec { u8 cell_log; u8 linklayer; u16 overhead;
        // s16 cell_align; u16 mpu; u32 rate; }
        let ratespec = |rate: u32, linklayer: u8| {
            let mut r = vec![0u8, linklayer];
            r.extend_from_slice(&0u16.to_ne_bytes());
            r.extend_from_slice(&0i16.to_ne_bytes());
            r.extend_from_slice(&0u16.to_ne_bytes());
            r.extend_from_slice(&rate.to_ne_bytes());
            r
        };
        let mut parms = ratespec(rate32, LINKLAYER_ETHERNET);
        parms.extend(ratespec(0, 0));
        // limit, buffer (derived from TCA_TBF_BURST), mtu (peak rate only).
        for field in [self.limit, 0, 0] {
            parms.extend_from_slice(&field.to_ne_bytes());
        }
        let mut out = Vec::with_capacity(64);
        put(&mut out, TCA_TBF_PARMS, &parms);
        if rate32 == u32::MAX {
            put(&mut out, TCA_TBF_RATE64, &bytes.to_ne_bytes());
        }
        put(&mut out, TCA_TBF_BURST, &self.burst.to_ne_bytes());
        out
    }

    /// The complete `RTM_NEWQDISC` message (`tc qdisc replace dev IF root
    /// tbf ...`).
    pub fn new_qdisc(&self, ifindex: u32) -> Vec<u8> {
        new_root_qdisc(ifindex, "tbf", self.options())
    }
}

/// Installs (or replaces) `tbf` as the root qdisc of interface `ifindex`
/// in namespace `ns`.
pub fn apply(ns: &OwnedFd, ifindex: u32, tbf: &Tbf) -> io::Result<()> {
    send(ns, &tbf.new_qdisc(ifindex))
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_injectors::units::{Delay, LossProb};

    fn rated(rate: &str) -> Impairment {
        Impairment {
            rate: Some(rate.parse().unwrap()),
            ..Impairment::default()
        }
    }

    #[test]
    fn only_a_rate_and_a_queue_go_to_the_shaper() {
        assert!(shaper_supports(&rated("1gbit")).is_ok());
        let refused = |imp: Impairment| shaper_supports(&imp).unwrap_err().parameter;
        assert_eq!(refused(Impairment::default()), "rate");
        let mut delayed = rated("1gbit");
        delayed.delay = Delay::from_nanos(1_000_000);
        assert_eq!(refused(delayed), "delay");
        let mut lossy = rated("1gbit");
        lossy.corrupt = Some(LossProb::from_percent(1.0).unwrap());
        assert_eq!(refused(lossy), "corrupt");
        let mut marking = rated("1gbit");
        marking.ecn = Some(QueueLimit::Bytes(30_000));
        assert_eq!(refused(marking), "ecn");
    }

    #[test]
    fn the_bucket_holds_a_millisecond_and_a_packet_queue_becomes_bytes() {
        let t = Tbf::for_link(&rated("400mbit"), 9000).unwrap();
        assert_eq!(t.burst, 50_000);
        assert_eq!(t.limit, 1000 * 9014, "the default 1000-packet queue");
        let slow = Tbf::for_link(&rated("1mbit"), 1500).unwrap();
        assert_eq!(slow.burst, 2 * 1514, "at least two full frames");
        let fast = Tbf::for_link(&rated("400gbit"), 9000).unwrap();
        assert_eq!(fast.burst, 50_000_000);
    }

    #[test]
    fn options_carry_the_rate_the_burst_and_the_limit() {
        let t = Tbf::for_link(&rated("400mbit"), 1500).unwrap();
        let o = t.options();
        // TCA_TBF_PARMS: 4 + 12 + 12 + 12 bytes.
        assert_eq!(u16::from_ne_bytes([o[0], o[1]]), 40);
        assert_eq!(u16::from_ne_bytes([o[2], o[3]]), TCA_TBF_PARMS);
        assert_eq!(o[5], LINKLAYER_ETHERNET);
        assert_eq!(
            u32::from_ne_bytes(o[12..16].try_into().unwrap()),
            50_000_000
        );
        assert_eq!(
            u32::from_ne_bytes(o[28..32].try_into().unwrap()),
            1000 * 1514
        );
        // TCA_TBF_BURST, and no TCA_TBF_RATE64 below 2^32 B/s.
        assert_eq!(u16::from_ne_bytes([o[42], o[43]]), TCA_TBF_BURST);
        assert_eq!(o.len(), 48);
        let fast = Tbf::for_link(&rated("400gbit"), 9000).unwrap().options();
        assert_eq!(
            u32::from_ne_bytes(fast[12..16].try_into().unwrap()),
            u32::MAX
        );
        assert_eq!(u16::from_ne_bytes([fast[42], fast[43]]), TCA_TBF_RATE64);
        assert_eq!(
            u64::from_ne_bytes(fast[44..52].try_into().unwrap()),
            50_000_000_000
        );
    }
}
