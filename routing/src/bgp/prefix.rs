//! Prefixes as BGP writes them in NLRI and in MP_REACH/MP_UNREACH: a
//! length octet, then the fewest address octets that hold it (RFC 4271
//! §4.3, RFC 4760 §5). Below both the message and the attribute codecs,
//! which each carry prefixes.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

/// Appends one prefix as length octet plus the minimum number of address
/// octets (RFC 4271 §4.3 "Network Layer Reachability Information").
pub(crate) fn encode_prefix(out: &mut Vec<u8>, len: u8, addr: &[u8]) {
    out.push(len);
    out.extend_from_slice(&addr[..usize::from(len).div_ceil(8)]);
}

/// Splits one prefix off `buf`: (length, address octets, rest). `None` if
/// the length exceeds `max_len` bits or the address runs past `buf`.
fn take_prefix<const N: usize>(buf: &[u8]) -> Option<(u8, [u8; N], &[u8])> {
    let (&len, rest) = buf.split_first()?;
    if usize::from(len) > N * 8 {
        return None;
    }
    let n = usize::from(len).div_ceil(8);
    if rest.len() < n {
        return None;
    }
    let mut addr = [0u8; N];
    addr[..n].copy_from_slice(&rest[..n]);
    Some((len, addr, &rest[n..]))
}

/// Decodes a run of IPv4 prefixes; trailing host bits are cleared.
pub(crate) fn decode_ipv4_prefixes(mut buf: &[u8]) -> Option<Vec<Ipv4Net>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let (len, addr, rest) = take_prefix::<4>(buf)?;
        out.push(Ipv4Net::new(Ipv4Addr::from(addr), len).ok()?.trunc());
        buf = rest;
    }
    Some(out)
}

/// Decodes a run of IPv6 prefixes; trailing host bits are cleared.
pub(crate) fn decode_ipv6_prefixes(mut buf: &[u8]) -> Option<Vec<Ipv6Net>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let (len, addr, rest) = take_prefix::<16>(buf)?;
        out.push(Ipv6Net::new(Ipv6Addr::from(addr), len).ok()?.trunc());
        buf = rest;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_use_minimal_octets_and_clear_host_bits() {
        let mut out = Vec::new();
        encode_prefix(&mut out, 20, &[10, 1, 0xff, 9]);
        assert_eq!(out, [20, 10, 1, 0xff]);
        let p = decode_ipv4_prefixes(&out).unwrap();
        assert_eq!(p, vec!["10.1.240.0/20".parse::<Ipv4Net>().unwrap()]);
        assert_eq!(decode_ipv4_prefixes(&[33, 1, 2, 3, 4, 5]), None);
        assert_eq!(decode_ipv4_prefixes(&[24, 1, 2]), None);
        assert_eq!(
            decode_ipv4_prefixes(&[0]).unwrap(),
            vec!["0.0.0.0/0".parse::<Ipv4Net>().unwrap()]
        );
    }
}
