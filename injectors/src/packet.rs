//! The few header fields the pipeline touches: the ECN field of IPv4 and
//! IPv6 (directly or behind one 802.1Q tag) and one bit of the payload.

use turbonet_packetio::checksum::checksum_update;

/// Length of an Ethernet header without VLAN tags.
pub const ETH_HEADER: usize = 14;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;

/// The ECN codepoints (RFC 3168 section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    /// 00: the sender does not do ECN.
    NotEct,
    /// 10: ECN-capable transport, codepoint 0.
    Ect0,
    /// 01: ECN-capable transport, codepoint 1.
    Ect1,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b10 => Ecn::Ect0,
            0b01 => Ecn::Ect1,
            _ => Ecn::Ce,
        }
    }
}

/// Where the IP header of a frame is.
enum L3 {
    V4(usize),
    V6(usize),
}

fn l3(frame: &[u8]) -> Option<L3> {
    let ethertype = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
    };
    let (ty, off) = match ethertype(12)? {
        // One 802.1Q tag: TPID, TCI, then the inner ethertype.
        ETHERTYPE_VLAN => (ethertype(16)?, ETH_HEADER + 4),
        ty => (ty, ETH_HEADER),
    };
    match ty {
        // Version 4 and a header of at least 20 bytes that fits the frame.
        ETHERTYPE_IPV4 => {
            let b0 = *frame.get(off)?;
            let ihl = usize::from(b0 & 0x0f) * 4;
            (b0 >> 4 == 4 && ihl >= 20 && frame.len() >= off + ihl).then_some(L3::V4(off))
        }
        ETHERTYPE_IPV6 => (frame.len() >= off + 40 && frame[off] >> 4 == 6).then_some(L3::V6(off)),
        _ => None,
    }
}

/// The ECN codepoint of an IPv4 or IPv6 frame; `None` for anything else.
pub fn ecn(frame: &[u8]) -> Option<Ecn> {
    match l3(frame)? {
        // IPv4: the low two bits of the TOS byte (RFC 3168 section 5).
        L3::V4(o) => Some(Ecn::from_bits(frame[o + 1])),
        // IPv6: the low two bits of the traffic class, which spans the low
        // nibble of byte 0 and the high nibble of byte 1 (RFC 8200 section 3).
        L3::V6(o) => Some(Ecn::from_bits(frame[o + 1] >> 4)),
    }
}

/// Marks an ECN-capable IPv4/IPv6 frame Congestion Experienced (RFC 3168
/// section 5: a router sets CE instead of dropping an ECT packet). Returns
/// true when the frame is CE afterwards (it was ECT or already CE); a
/// Not-ECT or non-IP frame is left untouched and false is returned.
///
/// The IPv4 header checksum is updated incrementally (RFC 1624 equation 3),
/// so a header that was valid stays valid and one that was corrupted stays
/// detectably corrupted.
pub fn mark_ce(frame: &mut [u8]) -> bool {
    let Some(l3) = l3(frame) else {
        return false;
    };
    match l3 {
        L3::V4(o) => match Ecn::from_bits(frame[o + 1]) {
            Ecn::NotEct => false,
            Ecn::Ce => true,
            Ecn::Ect0 | Ecn::Ect1 => {
                let old = u16::from_be_bytes([frame[o], frame[o + 1]]);
                frame[o + 1] |= 0b11;
                let new = u16::from_be_bytes([frame[o], frame[o + 1]]);
                let hc = u16::from_be_bytes([frame[o + 10], frame[o + 11]]);
                let hc = checksum_update(hc, old, new);
                frame[o + 10..o + 12].copy_from_slice(&hc.to_be_bytes());
                true
            }
        },
        L3::V6(o) => match Ecn::from_bits(frame[o + 1] >> 4) {
            Ecn::NotEct => false,
            Ecn::Ce => true,
            // IPv6 has no header checksum.
            Ecn::Ect0 | Ecn::Ect1 => {
                frame[o + 1] |= 0b11 << 4;
                true
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_frames_are_not_ip() {
        assert_eq!(ecn(&[0u8; 13]), None);
        let mut f = vec![0u8; 20];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        assert_eq!(ecn(&f), None);
        assert!(!mark_ce(&mut f));
    }
}
