//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624),
//! as IPv4 headers, ICMP and the soft switch's TTL rewrite use them.

/// The Internet checksum (RFC 1071) of `bytes`: the one's complement of the
/// one's-complement sum of its 16-bit words (an odd last byte padded with
/// zero). Over a header with its checksum field in place, it is 0 when the
/// header is valid.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The checksum `hc` after one 16-bit word changed from `old` to `new`:
/// RFC 1624 equation 3, `HC' = ~(~HC + ~m + m')`, which (unlike equation 2)
/// never yields the -0 of an all-zero header.
pub fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be16(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 section 4: HC = 0xDD2F, m = 0x5555 -> m' = 0x3285,
        // HC' = 0x0000.
        assert_eq!(checksum_update(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    #[test]
    fn checksum_of_known_header() {
        // A classic example IPv4 header with checksum 0xb861.
        let h: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0);
    }

    #[test]
    fn an_odd_length_is_padded_with_zero() {
        assert_eq!(internet_checksum(&[0x12, 0x34, 0x56]), !0x6834);
    }

    #[test]
    fn incremental_checksum_matches_a_full_recompute() {
        // A deterministic spread of headers, TTLs and protocols, including
        // checksums near 0x0000 and 0xffff.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..20_000u32 {
            let mut h = [0u8; 20];
            for chunk in h.chunks_mut(8) {
                let r = next().to_be_bytes();
                chunk.copy_from_slice(&r[..chunk.len()]);
            }
            h[0] = 0x45;
            h[8] = (i % 255) as u8 + 1;
            h[10] = 0;
            h[11] = 0;
            let c = internet_checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            assert_eq!(internet_checksum(&h), 0);
            let old = be16(&h, 8);
            h[8] -= 1;
            let new = be16(&h, 8);
            let updated = checksum_update(be16(&h, 10), old, new);
            h[10..12].copy_from_slice(&updated.to_be_bytes());
            assert_eq!(internet_checksum(&h), 0, "header {h:02x?}");
            let mut zeroed = h;
            zeroed[10..12].fill(0);
            assert_eq!(internet_checksum(&zeroed), updated, "header {h:02x?}");
        }
    }
}
