//! Frames in flight and the header fields the pipeline reads and writes:
//! Ethernet, 802.1Q, ARP (RFC 826) and IPv4 (RFC 791) with its checksum
//! (RFC 1071, updated incrementally as RFC 1624 says).

/// Ethernet header length (no tag).
pub(crate) const ETH_LEN: usize = 14;
/// 802.1Q tag length.
pub(crate) const VLAN_LEN: usize = 4;
/// The ARP header for Ethernet and IPv4 (`arp_t` in turbonet.p4).
pub(crate) const ARP_LEN: usize = 28;
/// IPv4 header without options.
pub(crate) const IPV4_MIN: usize = 20;

pub(crate) const ETHERTYPE_IPV4: u16 = 0x0800;
pub(crate) const ETHERTYPE_ARP: u16 = 0x0806;
pub(crate) const ETHERTYPE_VLAN: u16 = 0x8100;

/// Room left in front of a received frame so pushing a tag moves 12 bytes
/// of MAC addresses instead of the whole frame.
const HEADROOM: usize = VLAN_LEN;

/// A frame on its way through the switch: the frame is `buf[start..]`;
/// the bytes before `start` are headroom for an 802.1Q tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    buf: Vec<u8>,
    start: usize,
}

impl Frame {
    /// A copy of a frame from the wire, with headroom for a tag.
    pub(crate) fn from_wire(bytes: &[u8]) -> Self {
        let mut buf = Vec::with_capacity(HEADROOM + bytes.len());
        buf.resize(HEADROOM, 0);
        buf.extend_from_slice(bytes);
        Self {
            buf,
            start: HEADROOM,
        }
    }

    /// A frame that owns its bytes already (a PacketOut's payload).
    pub(crate) fn from_vec(buf: Vec<u8>) -> Self {
        Self { buf, start: 0 }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..]
    }

    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The Ethernet type field (the outer one when tagged). The caller has
    /// checked the frame holds an Ethernet header.
    pub(crate) fn ether_type(&self) -> u16 {
        be16(self.bytes(), 12)
    }

    /// Removes the 802.1Q tag behind the MAC addresses (the caller has
    /// checked there is one): the addresses move forward over it.
    pub(crate) fn strip_vlan(&mut self) {
        let s = self.start;
        self.buf.copy_within(s..s + 12, s + VLAN_LEN);
        self.start += VLAN_LEN;
    }

    /// Pushes an 802.1Q tag with VLAN id `vid` (priority 0) behind the MAC
    /// addresses; the old Ethernet type becomes the tag's.
    pub(crate) fn push_vlan(&mut self, vid: u16) {
        if self.start >= VLAN_LEN {
            self.start -= VLAN_LEN;
            let s = self.start;
            self.buf.copy_within(s + VLAN_LEN..s + VLAN_LEN + 12, s);
        } else {
            let at = self.start + 12;
            self.buf.splice(at..at, [0; VLAN_LEN]);
        }
        let b = self.bytes_mut();
        b[12..14].copy_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
        b[14..16].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    }

    /// The frame's bytes, headroom dropped.
    pub(crate) fn into_vec(mut self) -> Vec<u8> {
        if self.start > 0 {
            self.buf.drain(..self.start);
        }
        self.buf
    }
}

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize) -> Vec<u8> {
        (0..n as u8).collect()
    }

    #[test]
    fn tags_push_and_strip_in_place_or_by_insertion() {
        let raw = frame(20);
        let mut f = Frame::from_wire(&raw);
        f.push_vlan(0x123);
        let tagged = f.bytes().to_vec();
        assert_eq!(&tagged[..12], &raw[..12]);
        assert_eq!(&tagged[12..16], &[0x81, 0x00, 0x01, 0x23]);
        assert_eq!(&tagged[16..], &raw[12..]);
        f.strip_vlan();
        assert_eq!(f.bytes(), &raw[..]);
        // No headroom: the tag is inserted.
        let mut g = Frame::from_vec(raw.clone());
        g.push_vlan(0xfff);
        let expected: Vec<u8> = [&raw[..12], &[0x81, 0x00, 0x0f, 0xff], &raw[12..]].concat();
        assert_eq!(g.bytes(), &expected[..]);
        assert_eq!(g.clone().into_vec().len(), 24);
        g.strip_vlan();
        assert_eq!(g.into_vec(), raw);
    }
}
