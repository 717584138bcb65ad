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

/// A number that orders prefixes as `Ipv4Net`'s `Ord` does (address, then
/// length), compared in one instruction: sorting a ToR's thousands of
/// changed prefixes by it is several times faster than comparing them
/// octet by octet.
pub(crate) fn order_key(p: &Ipv4Net) -> u64 {
    u64::from(u32::from(p.addr())) << 8 | u64::from(p.prefix_len())
}

/// Sorts `prefixes` in `Ipv4Net`'s order and drops repeats.
pub(crate) fn sort_dedup(prefixes: &mut Vec<Ipv4Net>) {
    prefixes.sort_unstable_by_key(order_key);
    prefixes.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_key_orders_as_prefixes_do() {
        let mut nets: Vec<Ipv4Net> = [
            "10.0.0.0/8",
            "10.0.0.0/24",
            "10.0.0.1/32",
            "9.255.255.255/32",
            "0.0.0.0/0",
            "255.255.255.255/32",
            "10.0.1.0/24",
            "10.0.0.0/16",
            "128.0.0.0/1",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let mut by_key = nets.clone();
        by_key.push(by_key[2]);
        sort_dedup(&mut by_key);
        nets.sort();
        assert_eq!(by_key, nets);
    }

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
