//! Frames and helpers shared by the pipeline tests.

#![allow(dead_code)]

use turbonet_injectors::Direction;
use turbonet_packetio::checksum::internet_checksum;

/// An Ethernet frame of `len` bytes (at least 22) whose payload starts with
/// `index`, so that frames can be told apart after the pipeline.
pub(crate) fn frame(len: usize, index: u64) -> Vec<u8> {
    assert!(len >= 22);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    // IEEE 802 local experimental ethertype: not IP.
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..22].copy_from_slice(&index.to_be_bytes());
    for (i, b) in f[22..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31);
    }
    f
}

/// The index written by [`frame`].
pub(crate) fn index_of(f: &[u8]) -> u64 {
    u64::from_be_bytes(f[14..22].try_into().unwrap())
}

/// An IPv4/UDP frame with the given ECN bits, a valid header checksum and
/// optionally one 802.1Q tag.
pub(crate) fn ipv4_frame(ecn: u8, vlan: bool) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let l3 = f.len();
    let total: u16 = 20 + 8 + 32;
    f.extend_from_slice(&[0x45, 0xb8 | ecn]); // DSCP EF, ECN
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    let hc = internet_checksum(&f[l3..l3 + 20]);
    f[l3 + 10..l3 + 12].copy_from_slice(&hc.to_be_bytes());
    f.extend_from_slice(&[0x30, 0x39, 0x30, 0x39, 0, 40, 0, 0]);
    f.extend_from_slice(&[0xab; 32]);
    f
}

/// Offset of the IP header in a frame built by [`ipv4_frame`] or
/// [`ipv6_frame`].
pub(crate) fn l3_offset(f: &[u8]) -> usize {
    if f[12..14] == [0x81, 0x00] { 18 } else { 14 }
}

/// An IPv6/UDP frame with the given ECN bits in its traffic class.
pub(crate) fn ipv6_frame(ecn: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd];
    // Version 6, traffic class 0xb8 | ecn (DSCP EF), flow label 0x12345.
    let tc = 0xb8u8 | ecn;
    f.push(0x60 | (tc >> 4));
    f.push((tc << 4) | 0x01);
    f.extend_from_slice(&[0x23, 0x45]);
    f.extend_from_slice(&[0, 8 + 16, 17, 64]);
    f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[0x30, 0x39, 0x30, 0x39, 0, 24, 0, 0]);
    f.extend_from_slice(&[0xcd; 16]);
    f
}

/// Pops every pending frame at its due time: (due, frame), in pop order.
pub(crate) fn drain(dir: &mut Direction) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(t) = dir.next_due() {
        let f = dir.pop_due(t).expect("a frame is due at next_due");
        out.push((t, f));
    }
    out
}

/// The two-sided 99% interval of a binomial(n, p) count: the 0.5% and
/// 99.5% quantiles, computed from the exact probability mass function
/// (summed in log space, so that (1-p)^n does not underflow).
pub(crate) fn binomial_99(n: u64, p: f64) -> (u64, u64) {
    let mean = n as f64 * p;
    let sd = (mean * (1.0 - p)).sqrt();
    let top = (mean + 12.0 * sd + 10.0).ceil() as u64;
    let ratio = (p / (1.0 - p)).ln();
    let mut log_pmf = n as f64 * (-p).ln_1p();
    let mut cdf = 0.0;
    let (mut lo, mut hi) = (None, None);
    for k in 0..=top {
        cdf += log_pmf.exp();
        if lo.is_none() && cdf >= 0.005 {
            lo = Some(k);
        }
        if cdf >= 0.995 {
            hi = Some(k);
            break;
        }
        log_pmf += ((n - k) as f64 / (k + 1) as f64).ln() + ratio;
    }
    (lo.unwrap(), hi.unwrap())
}
