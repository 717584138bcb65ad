//! `tc` requests for the kernel impairment engine: a `netem` root qdisc,
//! encoded as a complete `RTM_NEWQDISC` netlink message.
//!
//! netlink-packet-route has no netem support, so the netem part of
//! `TCA_OPTIONS` is written here by hand following `linux/pkt_sched.h` and
//! what iproute2's `tc/q_netem.c` sends; the rest of the message (nlmsghdr,
//! tcmsg, `TCA_KIND`) is built with netlink-packet-route. Pure encoding, no
//! I/O but for [`apply`], which sends the bytes on a `NETLINK_ROUTE`
//! socket of the link's namespace.
//!
//! netem's `TCA_OPTIONS` is not a plain nest: its payload is a
//! `struct tc_netem_qopt` followed by `TCA_NETEM_*` attributes (the kernel's
//! `netem_change` skips `NLA_ALIGN(sizeof(qopt))` bytes, then parses).
//!
//! # What netem cannot honour
//!
//! [`netem_supports`] refuses (never drops) what netem would apply with a
//! different meaning than the userspace engine (`turbonet_injectors`):
//!
//! - `ecn`: netem's `TCA_NETEM_ECN` marks CE *instead of* a random loss; it
//!   has no queue-depth threshold.
//! - a queue limit in bytes: netem's limit counts packets.
//! - a rate together with a delay or jitter: netem's packet limit counts
//!   every frame it holds, including those still in their propagation
//!   delay, so the queue would tail-drop early (a 5 ms delay at 10 Gbit/s
//!   holds about 4,000 full-size frames, four times the default queue).
//! - jitter that must not reorder (`reorder = false`, the default): netem
//!   without a rate sorts frames by their jittered due time, so jitter
//!   reorders.
//! - a jitter distribution other than uniform: netem needs iproute2's
//!   `TCA_NETEM_DELAY_DIST` table for those, which this encoder does not
//!   carry.
//! - loss together with duplication: netem decides duplication before
//!   loss, keeps one copy when it both duplicates and loses, and sends the
//!   copy through the loss model again, so neither the loss nor the
//!   duplication rate is what the scenario says.
//! - values netem cannot represent: a rate that is not a whole number of
//!   bytes per second (or below 1 B/s), jitter above `i32::MAX` ns (the
//!   kernel caps it), a delay above `i64::MAX` ns.
//!
//! Differences that are accepted, because the rate of each impairment is
//! honoured and only the detail differs:
//!
//! - corruption: netem flips a bit anywhere in the frame's linear data,
//!   the Ethernet header included (such a frame is usually dropped by the
//!   receiver), and picks the bit with the unseeded kernel generator; the
//!   userspace engine flips a bit after the Ethernet header.
//! - randomness: `TCA_NETEM_PRNG_SEED` (Linux 6.5 and later) makes netem's
//!   decisions reproducible, but with netem's own generator, not the
//!   userspace engine's stream. Older kernels ignore the attribute without
//!   an error; the engine can read the seed back from a qdisc dump.
//!
//! The caller should turn off GSO/TSO on the device: netem counts a GSO
//! super-frame as one packet for the limit and the loss decision.

use std::io;
use std::os::fd::OwnedFd;

use rtnetlink::packet_core::{
    DefaultNla, NLA_F_NESTED, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkHeader,
    NetlinkMessage, NetlinkPayload,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::tc::{TcAttribute, TcHandle, TcMessage};
use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use super::raw::{NLMSG_ERROR, error_code, messages, put};
use turbonet_injectors::units::{Delay, LossProb, QueueLimit, Rate};
use turbonet_injectors::{Distribution, Impairment, Loss};

/// `TCA_OPTIONS` (linux/rtnetlink.h); netlink-packet-route keeps its own
/// copy private.
const TCA_OPTIONS: u16 = 2;

// `TCA_NETEM_*` attributes (linux/pkt_sched.h).
const TCA_NETEM_CORRUPT: u16 = 4;
const TCA_NETEM_LOSS: u16 = 5;
const TCA_NETEM_RATE: u16 = 6;
const TCA_NETEM_RATE64: u16 = 8;
const TCA_NETEM_LATENCY64: u16 = 10;
const TCA_NETEM_JITTER64: u16 = 11;
/// Added in Linux 6.5, after the `pkt_sched.h` most distributions ship.
const TCA_NETEM_PRNG_SEED: u16 = 14;
/// Gilbert-Elliott model inside `TCA_NETEM_LOSS` (linux/pkt_sched.h).
const NETEM_LOSS_GE: u16 = 2;

/// `sizeof(struct tc_netem_qopt)`: six `__u32`.
const QOPT_LEN: usize = 24;

/// The kernel's psched clock ticks every 2^6 ns (`PSCHED_SHIFT`,
/// include/net/pkt_sched.h; `/proc/net/psched` reports it as 1000/64).
const PSCHED_SHIFT: u32 = 6;

/// A full-size Ethernet frame as a qdisc sees it (no FCS), for the
/// "how many frames does the delay hold" estimate in error messages.
const FULL_FRAME: u128 = 1514;

/// An impairment the `netem` qdisc cannot apply as the scenario means it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("netem cannot apply `{parameter}`: {why}")]
pub struct Unsupported {
    /// The scenario parameter, as written in scenario files.
    pub parameter: &'static str,
    /// Why, in terms a user can act on.
    pub why: String,
}

impl Unsupported {
    fn new(parameter: &'static str, why: impl Into<String>) -> Self {
        Unsupported {
            parameter,
            why: why.into(),
        }
    }
}

/// Whether the `netem` qdisc can apply `imp` with the meaning the userspace
/// engine gives it. The `auto` engine chooser picks the kernel engine only
/// for links where this is `Ok`.
pub fn netem_supports(imp: &Impairment) -> Result<(), Unsupported> {
    Netem::from_impairment(imp, 0).map(|_| ())
}

/// The `RTM_NEWQDISC` request that makes netem, configured for `imp` with
/// the PRNG seed `seed`, the root qdisc of interface `ifindex` (created, or
/// replacing what is there). Sequence number and port id are 0.
pub fn new_qdisc_netem(ifindex: u32, imp: &Impairment, seed: u64) -> Result<Vec<u8>, Unsupported> {
    Ok(Netem::from_impairment(imp, seed)?.new_qdisc(ifindex))
}

/// netem's configuration in typed units: what one request carries. Build it
/// with [`Netem::from_impairment`], which refuses what netem would apply
/// differently; a hand-built value is encoded as is.
#[derive(Debug, Clone, PartialEq)]
pub struct Netem {
    /// Added delay (`TCA_NETEM_LATENCY64`, and in ticks in the qopt).
    pub latency: Delay,
    /// Half-width of the uniform jitter (`TCA_NETEM_JITTER64`).
    pub jitter: Delay,
    /// Packets netem holds at most, delayed or waiting for the rate.
    pub limit: u32,
    /// Loss model.
    pub loss: Option<Loss>,
    /// Duplication probability.
    pub duplicate: Option<LossProb>,
    /// Corruption probability.
    pub corrupt: Option<LossProb>,
    /// Rate (`TCA_NETEM_RATE`, `TCA_NETEM_RATE64` above 2^32-1 B/s).
    pub rate: Option<Rate>,
    /// `TCA_NETEM_PRNG_SEED`.
    pub seed: u64,
}

impl Netem {
    /// netem's configuration for `imp`, or the first thing netem would not
    /// apply as the scenario means it (see the module documentation).
    pub fn from_impairment(imp: &Impairment, seed: u64) -> Result<Netem, Unsupported> {
        let jitter = imp.jitter.filter(|j| !j.amount.is_zero());
        let losing = imp.loss.is_some_and(|l| !l.is_zero());
        let duplicating = imp.duplicate.is_some_and(|p| p.probability() > 0.0);

        let limit = match imp.rate {
            // Without a rate the userspace engine has no queue and never
            // drops for lack of room; netem's limit would still drop frames
            // past it that are only waiting out their delay.
            None => u32::MAX,
            Some(rate) => {
                if let Some(threshold) = imp.ecn {
                    return Err(Unsupported::new(
                        "ecn",
                        format!(
                            "netem only marks CE in place of its random loss \
                             (TCA_NETEM_ECN); it has no queue-depth threshold like {threshold}"
                        ),
                    ));
                }
                if rate.bits_per_sec() % 8 != 0 || rate.bytes_per_sec() == 0 {
                    return Err(Unsupported::new(
                        "rate",
                        format!(
                            "netem's rate is a whole, nonzero number of bytes per second; {rate} is not"
                        ),
                    ));
                }
                let held = if !imp.delay.is_zero() {
                    Some(("delay", imp.delay))
                } else {
                    jitter.map(|j| ("jitter", j.amount))
                };
                if let Some((parameter, d)) = held {
                    let frames = u128::from(rate.bytes_per_sec()) * u128::from(d.as_nanos())
                        / 1_000_000_000
                        / FULL_FRAME;
                    return Err(Unsupported::new(
                        parameter,
                        format!(
                            "with a rate, netem's packet limit also counts frames still in \
                             their delay, so the {} queue would tail-drop early \
                             ({d} at {rate} holds about {frames} full-size frames)",
                            imp.queue
                        ),
                    ));
                }
                match imp.queue {
                    QueueLimit::Packets(n) => n,
                    QueueLimit::Bytes(_) => {
                        return Err(Unsupported::new(
                            "queue",
                            format!("netem's limit counts packets, not bytes ({})", imp.queue),
                        ));
                    }
                }
            }
        };

        if let Some(j) = jitter {
            if j.distribution != Distribution::Uniform {
                return Err(Unsupported::new(
                    "jitter_distribution",
                    format!(
                        "netem needs iproute2's {} table (TCA_NETEM_DELAY_DIST) for it; \
                         only uniform is built in",
                        j.distribution.as_str()
                    ),
                ));
            }
            if !j.reorder {
                return Err(Unsupported::new(
                    "reorder",
                    "netem sends frames in the order of their jittered due times, so jitter \
                     reorders them; the scenario keeps order (reorder = false)",
                ));
            }
            if j.amount.as_nanos() > i32::MAX as u64 {
                return Err(Unsupported::new(
                    "jitter",
                    format!(
                        "netem caps jitter at {}",
                        Delay::from_nanos(i32::MAX as u64)
                    ),
                ));
            }
        }
        if imp.delay.as_nanos() > i64::MAX as u64 {
            return Err(Unsupported::new(
                "delay",
                format!(
                    "netem's delay is at most {}",
                    Delay::from_nanos(i64::MAX as u64)
                ),
            ));
        }
        if losing && duplicating {
            return Err(Unsupported::new(
                "duplicate",
                "netem decides duplication before loss and sends the copy through the loss \
                 model again, so with both neither rate is the scenario's",
            ));
        }

        Ok(Netem {
            latency: imp.delay,
            jitter: jitter.map_or(Delay::ZERO, |j| j.amount),
            limit,
            loss: imp.loss,
            duplicate: imp.duplicate,
            corrupt: imp.corrupt,
            rate: imp.rate,
            seed,
        })
    }

    /// The payload of `TCA_OPTIONS`: `struct tc_netem_qopt`, then the
    /// `TCA_NETEM_*` attributes in the order iproute2 writes them.
    ///
    /// Beyond what `tc` sends, corruption and rate are always present (0
    /// when unused) because a replace of an existing netem keeps every
    /// attribute the request leaves out (`netem_change`), and delay and
    /// jitter always go in the 64-bit nanosecond attributes: `tc` sends them
    /// only when the tick fields overflow, so `delay 1us` reaches the kernel
    /// as 15 ticks, 960 ns.
    pub fn options(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        let bernoulli = match self.loss {
            Some(Loss::Bernoulli(p)) => scale(p),
            _ => 0,
        };
        for field in [
            ticks(self.latency),
            self.limit,
            bernoulli,
            0, // gap: netem's own reordering, never used
            self.duplicate.map_or(0, scale),
            ticks(self.jitter),
        ] {
            out.extend_from_slice(&field.to_ne_bytes());
        }
        debug_assert_eq!(out.len(), QOPT_LEN);

        // struct tc_netem_corrupt { probability, correlation }
        let corrupt = self.corrupt.map_or(0, scale);
        put(&mut out, TCA_NETEM_CORRUPT, &words(&[corrupt, 0]));

        if let Some(Loss::GilbertElliott { p, r, bad, good }) = self.loss {
            // struct tc_netem_gemodel { p, r, h, k1 }. In the bad state the
            // kernel loses a frame when a draw exceeds h, in the good state
            // when it is below k1 (`loss_gilb_ell`): h = 1 - bad, k1 = good,
            // as iproute2 stores `gemodel P R 1-H 1-K`.
            let ge = words(&[scale(p), scale(r), u32::MAX - scale(bad), scale(good)]);
            let mut nest = Vec::with_capacity(24);
            put(&mut nest, NETEM_LOSS_GE, &ge);
            put(&mut out, TCA_NETEM_LOSS | NLA_F_NESTED, &nest);
        }

        // struct tc_netem_rate { rate (B/s), packet_overhead, cell_size,
        // cell_overhead }; above u32 the rate goes in TCA_NETEM_RATE64 and
        // the 32-bit field saturates (the kernel takes the larger).
        let bytes = self.rate.map_or(0, Rate::bytes_per_sec);
        let rate32 = match u32::try_from(bytes) {
            Ok(b) => b,
            Err(_) => {
                put(&mut out, TCA_NETEM_RATE64, &bytes.to_ne_bytes());
                u32::MAX
            }
        };
        put(&mut out, TCA_NETEM_RATE, &words(&[rate32, 0, 0, 0]));

        put(
            &mut out,
            TCA_NETEM_LATENCY64,
            &ns64(self.latency).to_ne_bytes(),
        );
        put(
            &mut out,
            TCA_NETEM_JITTER64,
            &ns64(self.jitter).to_ne_bytes(),
        );
        put(&mut out, TCA_NETEM_PRNG_SEED, &self.seed.to_ne_bytes());
        out
    }

    /// The complete `RTM_NEWQDISC` message (see [`new_root_qdisc`]).
    pub fn new_qdisc(&self, ifindex: u32) -> Vec<u8> {
        new_root_qdisc(ifindex, "netem", self.options())
    }
}

/// A probability as netem's u32 (0 = never, 2^32-1 = always), rounded to
/// nearest as iproute2's `get_percent` does (`rint(p * UINT32_MAX)`).
fn scale(p: LossProb) -> u32 {
    // In range after the clamp, so the cast is exact.
    (p.probability().clamp(0.0, 1.0) * f64::from(u32::MAX)).round_ties_even() as u32
}

/// A delay in psched ticks for the legacy qopt fields, saturating (as
/// `netem_dump` does); kernels that know `TCA_NETEM_LATENCY64` and
/// `TCA_NETEM_JITTER64` use those instead.
fn ticks(d: Delay) -> u32 {
    u32::try_from(d.as_nanos() >> PSCHED_SHIFT).unwrap_or(u32::MAX)
}

/// A delay as the kernel's s64 nanoseconds (range checked by
/// [`Netem::from_impairment`]; saturates for hand-built values).
fn ns64(d: Delay) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// `__u32` fields of a C struct, in host order.
fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// A complete `RTM_NEWQDISC` message for a root qdisc of `kind` with
/// `options` as its `TCA_OPTIONS` payload: flags REQUEST|ACK|CREATE|
/// REPLACE (`tc qdisc replace`), parent `TC_H_ROOT`, handle 0 so the
/// kernel picks one, as `tc` does without `handle`.
pub(super) fn new_root_qdisc(ifindex: u32, kind: &str, options: Vec<u8>) -> Vec<u8> {
    // tcm_ifindex is a C int; the bits go through unchanged.
    let mut tc = TcMessage::with_index(ifindex as i32);
    tc.header.parent = TcHandle::ROOT;
    tc.attributes.push(TcAttribute::Kind(kind.to_owned()));
    // Not TcAttribute::Options: netlink-packet-route would wrap an
    // unknown kind's options in a second attribute header.
    tc.attributes
        .push(TcAttribute::Other(DefaultNla::new(TCA_OPTIONS, options)));

    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
    let mut msg = NetlinkMessage::new(
        header,
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewQueueDiscipline(tc)),
    );
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf
}

/// Installs (or replaces) netem with `imp` as the root qdisc of interface
/// `ifindex` in namespace `ns`, with netem's PRNG seeded by `seed`.
pub fn apply(ns: &OwnedFd, ifindex: u32, imp: &Impairment, seed: u64) -> io::Result<()> {
    let request = new_qdisc_netem(ifindex, imp, seed)
        .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.to_string()))?;
    send(ns, &request)
}

/// Sends one request with `NLM_F_ACK` on a `NETLINK_ROUTE` socket of
/// namespace `ns` and waits for the kernel's answer.
pub(super) fn send(ns: &OwnedFd, request: &[u8]) -> io::Result<()> {
    send_all(ns, &[request])
}

/// Sends requests with `NLM_F_ACK` on one `NETLINK_ROUTE` socket of
/// namespace `ns`, in batches, and waits for every answer; fails with the
/// first error the kernel returns.
pub(super) fn send_all<R: AsRef<[u8]> + Sync>(ns: &OwnedFd, requests: &[R]) -> io::Result<()> {
    /// Requests in flight at once (their answers fit the socket's buffer).
    const BATCH: usize = 64;
    if requests.is_empty() {
        return Ok(());
    }
    crate::namespaces::in_namespace(ns, || {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        let mut buf = vec![0u8; 65536];
        for batch in requests.chunks(BATCH) {
            for request in batch {
                socket.send_to(request.as_ref(), &SocketAddr::new(0, 0), 0)?;
            }
            let mut answered = 0;
            while answered < batch.len() {
                let n = socket.recv(&mut &mut buf[..], 0)?;
                for m in messages(&buf[..n]) {
                    if m.kind == NLMSG_ERROR {
                        match error_code(m.payload) {
                            0 => answered += 1,
                            code => return Err(io::Error::from_raw_os_error(code)),
                        }
                    }
                }
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::tc::TcOption;
    use turbonet_injectors::Jitter;

    const RTM_NEWQDISC: u16 = 36;
    const SEED: u64 = 42;

    fn pct(p: f64) -> LossProb {
        LossProb::from_percent(p).unwrap()
    }

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// A request `tc` sent, as captured with strace: nlmsghdr (type
    /// RTM_NEWQDISC, flags 0x505, seq and pid zeroed) plus the payload.
    fn tc_request(payload_hex: &str) -> Vec<u8> {
        let payload = unhex(payload_hex);
        let mut msg = Vec::new();
        msg.extend_from_slice(&(16 + payload.len() as u32).to_ne_bytes());
        msg.extend_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        msg.extend_from_slice(&0x505u16.to_ne_bytes());
        msg.extend_from_slice(&[0; 8]);
        msg.extend_from_slice(&payload);
        msg
    }

    fn attrs(mut buf: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        while buf.len() >= 4 {
            let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
            let kind = u16::from_ne_bytes([buf[2], buf[3]]);
            assert!(len >= 4 && len <= buf.len(), "bad attribute length {len}");
            out.push((kind, buf[4..len].to_vec()));
            buf = &buf[len.next_multiple_of(4).min(buf.len())..];
        }
        assert!(buf.is_empty(), "trailing bytes");
        out
    }

    /// A netem request taken apart: (nlmsghdr type and flags, tcmsg,
    /// TCA_KIND, qopt fields, netem attributes).
    struct Request {
        kind_flags: (u16, u16),
        tcmsg: Vec<u8>,
        kind: Vec<u8>,
        qopt: [u32; 6],
        netem: Vec<(u16, Vec<u8>)>,
    }

    fn take_apart(msg: &[u8]) -> Request {
        assert_eq!(
            u32::from_ne_bytes(msg[0..4].try_into().unwrap()) as usize,
            msg.len()
        );
        let top = attrs(&msg[36..]);
        assert_eq!(top.len(), 2, "TCA_KIND and TCA_OPTIONS only");
        assert_eq!(top[0].0, 1);
        assert_eq!(top[1].0, TCA_OPTIONS);
        let opts = &top[1].1;
        let mut qopt = [0u32; 6];
        for (i, q) in qopt.iter_mut().enumerate() {
            *q = u32::from_ne_bytes(opts[i * 4..i * 4 + 4].try_into().unwrap());
        }
        Request {
            kind_flags: (
                u16::from_ne_bytes([msg[4], msg[5]]),
                u16::from_ne_bytes([msg[6], msg[7]]),
            ),
            tcmsg: msg[16..36].to_vec(),
            kind: top[0].1.clone(),
            qopt,
            netem: attrs(&opts[QOPT_LEN..]),
        }
    }

    /// Compares our request with `tc`'s. Header, tcmsg and kind must be
    /// identical; qopt too, except `limit` when `our_limit` says ours
    /// differs on purpose. Every attribute `tc` sent must be in ours with
    /// the same bytes and in the same order; ours may add exactly `extras`.
    fn compare(ours: &[u8], tc: &[u8], our_limit: Option<u32>, extras: &[(u16, Vec<u8>)]) {
        let (o, t) = (take_apart(ours), take_apart(tc));
        assert_eq!(o.kind_flags, t.kind_flags, "nlmsg type/flags");
        assert_eq!(o.tcmsg, t.tcmsg, "tcmsg");
        assert_eq!(o.kind, t.kind, "TCA_KIND");
        let mut want_qopt = t.qopt;
        if let Some(limit) = our_limit {
            want_qopt[1] = limit;
        }
        assert_eq!(o.qopt, want_qopt, "tc_netem_qopt");
        let tc_kinds: Vec<u16> = t.netem.iter().map(|a| a.0).collect();
        let (shared, extra): (Vec<_>, Vec<_>) =
            o.netem.into_iter().partition(|a| tc_kinds.contains(&a.0));
        assert_eq!(shared, t.netem, "the attributes tc sends");
        assert_eq!(extra, extras, "the attributes only we send");
    }

    /// What we send beyond `tc` for a link with no rate or corruption:
    /// explicit zeros (so a replace clears an earlier netem's values),
    /// exact nanosecond delay and jitter, and the seed (tc 6.1 has no
    /// `seed` option).
    fn extras(corrupt: bool, rate: bool, delay_ns: i64, jitter_ns: i64) -> Vec<(u16, Vec<u8>)> {
        let mut v = Vec::new();
        if !corrupt {
            v.push((TCA_NETEM_CORRUPT, vec![0; 8]));
        }
        if !rate {
            v.push((TCA_NETEM_RATE, vec![0; 16]));
        }
        v.push((TCA_NETEM_LATENCY64, delay_ns.to_ne_bytes().to_vec()));
        v.push((TCA_NETEM_JITTER64, jitter_ns.to_ne_bytes().to_vec()));
        v.push((TCA_NETEM_PRNG_SEED, SEED.to_ne_bytes().to_vec()));
        v
    }

    // Captured from iproute2 6.1 (`tc qdisc replace dev X root netem ...`
    // on ifindex 3, under strace -xx), payload after the nlmsghdr.

    /// `delay 5ms 1ms loss 0.1% corrupt 0.01% duplicate 0.01% rate 100mbit
    /// limit 1000`
    const TC_FULL: &str = "000000000300000000000000ffffffff000000000a0001006e6574656d000000
        3c0002002d310100e80300003789410000000000b98d0600093d00000c000400b98d060000000000
        1400060020bcbe00000000000000000000000000";
    /// `loss gemodel 1% 25% 100% 0%`
    const TC_GE: &str = "000000000300000000000000ffffffff000000000a0001006e6574656d000000
        3400020000000000e8030000000000000000000000000000000000001800058014000200295c8f02
        000000400000000000000000";
    /// `loss gemodel 1% 25% 90% 5%`
    const TC_GE_STATE_LOSS: &str =
        "000000000300000000000000ffffffff000000000a0001006e6574656d000000
        3400020000000000e8030000000000000000000000000000000000001800058014000200295c8f02
        0000004099999919cdcccc0c";
    /// `delay 5ms`
    const TC_DELAY: &str = "000000000300000000000000ffffffff000000000a0001006e6574656d000000
        1c0002002d310100e803000000000000000000000000000000000000";
    /// `delay 1us`
    const TC_DELAY_1US: &str = "000000000300000000000000ffffffff000000000a0001006e6574656d000000
        1c0002000f000000e803000000000000000000000000000000000000";
    /// `rate 100gbit limit 5000`
    const TC_RATE64: &str = "000000000300000000000000ffffffff000000000a0001006e6574656d000000
        3c0002000000000088130000000000000000000000000000000000000c00080000dd0ee902000000
        14000600ffffffff000000000000000000000000";

    #[test]
    #[cfg(target_endian = "little")]
    fn golden_full_tc_command() {
        // The scenario equivalent of tc's command, which netem_supports
        // refuses (rate with delay; loss with duplication), so the values
        // are checked through a hand-built Netem: the encoding of each field
        // is still tc's.
        let imp = Impairment {
            rate: Some(Rate::from_mbit(100)),
            delay: Delay::from_millis(5),
            jitter: Some(Jitter {
                amount: Delay::from_millis(1),
                distribution: Distribution::Uniform,
                reorder: true,
            }),
            loss: Some(Loss::Bernoulli(pct(0.1))),
            corrupt: Some(pct(0.01)),
            duplicate: Some(pct(0.01)),
            queue: QueueLimit::Packets(1000),
            ecn: None,
        };
        assert_eq!(netem_supports(&imp).unwrap_err().parameter, "delay");
        let netem = Netem {
            latency: imp.delay,
            jitter: Delay::from_millis(1),
            limit: 1000,
            loss: imp.loss,
            duplicate: imp.duplicate,
            corrupt: imp.corrupt,
            rate: imp.rate,
            seed: SEED,
        };
        compare(
            &netem.new_qdisc(3),
            &tc_request(TC_FULL),
            None,
            &extras(true, true, 5_000_000, 1_000_000),
        );
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn golden_gilbert_elliott() {
        // Without a rate our limit is unbounded (the userspace engine has
        // no queue then); tc uses its default of 1000.
        for (hex, bad, good) in [(TC_GE, 100.0, 0.0), (TC_GE_STATE_LOSS, 90.0, 5.0)] {
            let imp = Impairment {
                loss: Some(Loss::GilbertElliott {
                    p: pct(1.0),
                    r: pct(25.0),
                    bad: pct(bad),
                    good: pct(good),
                }),
                ..Impairment::default()
            };
            let ours = new_qdisc_netem(3, &imp, SEED).unwrap();
            compare(
                &ours,
                &tc_request(hex),
                Some(u32::MAX),
                &extras(false, false, 0, 0),
            );
        }
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn golden_delay() {
        let imp = Impairment {
            delay: Delay::from_millis(5),
            ..Impairment::default()
        };
        let ours = new_qdisc_netem(3, &imp, SEED).unwrap();
        compare(
            &ours,
            &tc_request(TC_DELAY),
            Some(u32::MAX),
            &extras(false, false, 5_000_000, 0),
        );

        // 1 us is 15.625 ticks: tc sends 15 (960 ns) and nothing else; our
        // qopt says the same and TCA_NETEM_LATENCY64 carries the exact value.
        let imp = Impairment {
            delay: Delay::from_micros(1),
            ..Impairment::default()
        };
        let ours = new_qdisc_netem(3, &imp, SEED).unwrap();
        compare(
            &ours,
            &tc_request(TC_DELAY_1US),
            Some(u32::MAX),
            &extras(false, false, 1_000, 0),
        );
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn golden_rate64() {
        let imp = Impairment {
            rate: Some(Rate::from_gbit(100)),
            queue: QueueLimit::Packets(5000),
            ..Impairment::default()
        };
        let ours = new_qdisc_netem(3, &imp, SEED).unwrap();
        compare(
            &ours,
            &tc_request(TC_RATE64),
            None,
            &extras(false, true, 0, 0),
        );
    }

    #[test]
    fn parses_back_with_netlink_packet_route() {
        let imp = Impairment {
            rate: Some(Rate::from_gbit(10)),
            loss: Some(Loss::Bernoulli(pct(1.0))),
            corrupt: Some(pct(0.5)),
            ..Impairment::default()
        };
        let bytes = new_qdisc_netem(7, &imp, SEED).unwrap();
        let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&bytes).unwrap();
        assert_eq!(
            msg.header.flags,
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
        );
        assert_eq!(msg.header.length as usize, bytes.len());
        let NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewQueueDiscipline(tc)) = msg.payload
        else {
            panic!("not a NewQueueDiscipline: {:?}", msg.payload);
        };
        assert_eq!(tc.header.index, 7);
        assert_eq!(tc.header.parent, TcHandle::ROOT);
        assert_eq!(u32::from(tc.header.handle), 0);
        assert_eq!(tc.attributes[0], TcAttribute::Kind("netem".to_owned()));
        // An unknown kind's options come back as one opaque attribute.
        let want = Netem::from_impairment(&imp, SEED).unwrap().options();
        assert_eq!(
            tc.attributes[1],
            TcAttribute::Options(vec![TcOption::Other(DefaultNla::new(TCA_OPTIONS, want))])
        );
        assert_eq!(tc.attributes.len(), 2);
    }

    #[test]
    fn fields_decode_back() {
        let imp = Impairment {
            delay: Delay::from_micros(3),
            jitter: Some(Jitter {
                amount: Delay::from_nanos(500),
                distribution: Distribution::Uniform,
                reorder: true,
            }),
            duplicate: Some(pct(50.0)),
            corrupt: Some(pct(100.0)),
            ..Impairment::default()
        };
        let r = take_apart(&new_qdisc_netem(1, &imp, u64::MAX).unwrap());
        assert_eq!(r.kind_flags, (RTM_NEWQDISC, 0x505));
        assert_eq!(r.kind, b"netem\0");
        // latency 3000 ns = 46 ticks, limit, loss, gap, 0.5 rounded half to
        // even like rint, jitter 500 ns = 7 ticks.
        assert_eq!(r.qopt, [46, u32::MAX, 0, 0, 2_147_483_648, 7]);
        let get = |kind: u16| r.netem.iter().find(|a| a.0 == kind).unwrap().1.clone();
        assert_eq!(get(TCA_NETEM_CORRUPT), words(&[u32::MAX, 0]));
        assert_eq!(get(TCA_NETEM_LATENCY64), 3000i64.to_ne_bytes());
        assert_eq!(get(TCA_NETEM_JITTER64), 500i64.to_ne_bytes());
        assert_eq!(get(TCA_NETEM_PRNG_SEED), u64::MAX.to_ne_bytes());
        assert!(
            r.netem
                .iter()
                .all(|a| a.0 != TCA_NETEM_LOSS && a.0 != TCA_NETEM_RATE64)
        );
    }

    #[test]
    fn rate64_only_above_u32() {
        let encode = |bytes_per_sec: u64| {
            let imp = Impairment {
                rate: Some(Rate::from_bits_per_sec(bytes_per_sec * 8)),
                ..Impairment::default()
            };
            take_apart(&new_qdisc_netem(1, &imp, 0).unwrap()).netem
        };
        let max32 = encode(u64::from(u32::MAX));
        assert!(max32.iter().all(|a| a.0 != TCA_NETEM_RATE64));
        assert!(max32.contains(&(TCA_NETEM_RATE, words(&[u32::MAX, 0, 0, 0]))));
        let above = encode(1 << 32);
        assert!(above.contains(&(TCA_NETEM_RATE64, (1u64 << 32).to_ne_bytes().to_vec())));
        assert!(above.contains(&(TCA_NETEM_RATE, words(&[u32::MAX, 0, 0, 0]))));
    }

    #[test]
    fn probabilities_scale_like_iproute2() {
        assert_eq!(scale(LossProb::ZERO), 0);
        assert_eq!(scale(pct(100.0)), u32::MAX);
        assert_eq!(scale(pct(0.1)), 4_294_967);
        assert_eq!(scale(pct(25.0)), 0x4000_0000);
    }

    #[test]
    fn supported() {
        let ok = |imp: Impairment| netem_supports(&imp).unwrap();
        ok(Impairment::default());
        // Queue and ECN act only with a rate; without one they are unused.
        ok(Impairment {
            delay: Delay::from_millis(1),
            queue: QueueLimit::Bytes(1 << 20),
            ecn: Some(QueueLimit::Packets(10)),
            ..Impairment::default()
        });
        ok(Impairment {
            rate: Some(Rate::from_gbit(1)),
            loss: Some(Loss::gilbert(pct(1.0), pct(10.0))),
            corrupt: Some(pct(1.0)),
            ..Impairment::default()
        });
        ok(Impairment {
            duplicate: Some(pct(1.0)),
            loss: Some(Loss::Bernoulli(LossProb::ZERO)),
            jitter: Some(Jitter {
                amount: Delay::from_micros(10),
                distribution: Distribution::Uniform,
                reorder: true,
            }),
            ..Impairment::default()
        });
    }

    #[test]
    fn unsupported() {
        let jitter = |distribution, reorder| {
            Some(Jitter {
                amount: Delay::from_micros(10),
                distribution,
                reorder,
            })
        };
        let rated = Impairment {
            rate: Some(Rate::from_gbit(10)),
            ..Impairment::default()
        };
        let cases = [
            (
                Impairment {
                    ecn: Some(QueueLimit::Packets(20)),
                    ..rated.clone()
                },
                "ecn",
            ),
            (
                Impairment {
                    queue: QueueLimit::Bytes(64 * 1024),
                    ..rated.clone()
                },
                "queue",
            ),
            (
                Impairment {
                    delay: Delay::from_millis(5),
                    ..rated.clone()
                },
                "delay",
            ),
            (
                Impairment {
                    jitter: jitter(Distribution::Uniform, true),
                    ..rated.clone()
                },
                "jitter",
            ),
            (
                Impairment {
                    rate: Some(Rate::from_bits_per_sec(1001)),
                    ..Impairment::default()
                },
                "rate",
            ),
            (
                Impairment {
                    jitter: jitter(Distribution::Normal, true),
                    ..Impairment::default()
                },
                "jitter_distribution",
            ),
            (
                Impairment {
                    jitter: jitter(Distribution::Uniform, false),
                    ..Impairment::default()
                },
                "reorder",
            ),
            (
                Impairment {
                    jitter: Some(Jitter {
                        amount: Delay::from_secs(3),
                        distribution: Distribution::Uniform,
                        reorder: true,
                    }),
                    ..Impairment::default()
                },
                "jitter",
            ),
            (
                Impairment {
                    loss: Some(Loss::Bernoulli(pct(1.0))),
                    duplicate: Some(pct(1.0)),
                    ..Impairment::default()
                },
                "duplicate",
            ),
        ];
        for (imp, parameter) in cases {
            let err = netem_supports(&imp).unwrap_err();
            assert_eq!(err.parameter, parameter, "{imp:?}: {err}");
            assert_eq!(new_qdisc_netem(1, &imp, 0).unwrap_err(), err);
        }
        let err = netem_supports(&Impairment {
            delay: Delay::from_millis(5),
            ..rated
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "netem cannot apply `delay`: with a rate, netem's packet limit also counts frames \
             still in their delay, so the 1000p queue would tail-drop early (5ms at 10gbit \
             holds about 4128 full-size frames)"
        );
    }
}
