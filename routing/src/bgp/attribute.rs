//! UPDATE path attributes (RFC 4271 §4.3, §5; RFC 4760; RFC 6793).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::prefix::{decode_ipv4_prefixes, decode_ipv6_prefixes, encode_prefix};
use super::{AS_TRANS, Afi, AfiSafi, Context, Safi};
use crate::error::DecodeError;

/// Attribute Flags bits (RFC 4271 §4.3).
pub mod attr_flags {
    /// Optional (1) or well-known (0).
    pub const OPTIONAL: u8 = 0x80;
    /// Transitive (1) or non-transitive (0).
    pub const TRANSITIVE: u8 = 0x40;
    /// Partial (1) or complete (0).
    pub const PARTIAL: u8 = 0x20;
    /// Attribute Length is two octets.
    pub const EXTENDED_LENGTH: u8 = 0x10;
}

/// Attribute Type Codes (RFC 4271 §5, RFC 4760 §3-4).
pub mod attr_type {
    /// ORIGIN (RFC 4271 §5.1.1).
    pub const ORIGIN: u8 = 1;
    /// AS_PATH (RFC 4271 §5.1.2).
    pub const AS_PATH: u8 = 2;
    /// NEXT_HOP (RFC 4271 §5.1.3).
    pub const NEXT_HOP: u8 = 3;
    /// MULTI_EXIT_DISC (RFC 4271 §5.1.4).
    pub const MULTI_EXIT_DISC: u8 = 4;
    /// LOCAL_PREF (RFC 4271 §5.1.5).
    pub const LOCAL_PREF: u8 = 5;
    /// ATOMIC_AGGREGATE (RFC 4271 §5.1.6).
    pub const ATOMIC_AGGREGATE: u8 = 6;
    /// AGGREGATOR (RFC 4271 §5.1.7).
    pub const AGGREGATOR: u8 = 7;
    /// MP_REACH_NLRI (RFC 4760 §3).
    pub const MP_REACH_NLRI: u8 = 14;
    /// MP_UNREACH_NLRI (RFC 4760 §4).
    pub const MP_UNREACH_NLRI: u8 = 15;
}

use attr_flags::{EXTENDED_LENGTH, OPTIONAL, PARTIAL, TRANSITIVE};

/// ORIGIN values (RFC 4271 §4.3, §5.1.1), written `igp`, `egp`,
/// `incomplete`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Interior to the originating AS.
    Igp = 0,
    /// Learned via EGP.
    Egp = 1,
    /// Learned by some other means.
    Incomplete = 2,
}

/// AS_PATH segment types (RFC 4271 §4.3, RFC 5065 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentType {
    /// Unordered set of ASes (1).
    AsSet = 1,
    /// Ordered sequence of ASes (2).
    AsSequence = 2,
    /// Ordered confederation member ASes (3, RFC 5065).
    ConfedSequence = 3,
    /// Unordered confederation member ASes (4, RFC 5065).
    ConfedSet = 4,
}

/// One AS_PATH segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AsSegment {
    /// Segment type.
    pub kind: SegmentType,
    /// AS numbers; never empty once decoded (RFC 7606 §7.2 calls a
    /// zero-length segment malformed).
    pub asns: Vec<u32>,
}

/// AS_PATH (RFC 4271 §5.1.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct AsPath {
    /// Segments, nearest AS first.
    pub segments: Vec<AsSegment>,
}

impl AsPath {
    /// A path of one AS_SEQUENCE.
    pub fn sequence(asns: impl IntoIterator<Item = u32>) -> AsPath {
        let asns: Vec<u32> = asns.into_iter().collect();
        AsPath {
            segments: if asns.is_empty() {
                Vec::new()
            } else {
                vec![AsSegment {
                    kind: SegmentType::AsSequence,
                    asns,
                }]
            },
        }
    }

    /// Path length for route selection: each AS in an AS_SEQUENCE counts
    /// one, an AS_SET counts one in all, confederation segments count zero
    /// (RFC 4271 §9.1.2.2, RFC 5065 §5.3).
    pub fn path_len(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s.kind {
                SegmentType::AsSequence => s.asns.len(),
                SegmentType::AsSet => 1,
                SegmentType::ConfedSequence | SegmentType::ConfedSet => 0,
            })
            .sum()
    }

    /// The AS nearest to this speaker: the first AS of a leading
    /// AS_SEQUENCE (RFC 4271 §6.3 checks it against the peer's AS).
    pub fn first_as(&self) -> Option<u32> {
        match self.segments.first() {
            Some(AsSegment {
                kind: SegmentType::AsSequence,
                asns,
            }) => asns.first().copied(),
            _ => None,
        }
    }

    /// Whether `asn` appears anywhere (loop detection, RFC 4271 §9.1.2).
    pub fn contains(&self, asn: u32) -> bool {
        self.segments.iter().any(|s| s.asns.contains(&asn))
    }

    fn decode(mut v: &[u8], width: usize) -> Result<AsPath, DecodeError> {
        let mut segments = Vec::new();
        while !v.is_empty() {
            let [kind, count, rest @ ..] = v else {
                return Err(DecodeError::MalformedAsPath);
            };
            let kind = match kind {
                1 => SegmentType::AsSet,
                2 => SegmentType::AsSequence,
                3 => SegmentType::ConfedSequence,
                4 => SegmentType::ConfedSet,
                _ => return Err(DecodeError::MalformedAsPath),
            };
            let n = usize::from(*count) * width;
            if *count == 0 || rest.len() < n {
                return Err(DecodeError::MalformedAsPath);
            }
            let asns = rest[..n].chunks_exact(width).map(read_asn).collect();
            segments.push(AsSegment { kind, asns });
            v = &rest[n..];
        }
        Ok(AsPath { segments })
    }

    fn encode(&self, out: &mut Vec<u8>, ctx: &Context) {
        for seg in &self.segments {
            // A segment holds at most 255 ASes: longer ones are split.
            for chunk in seg.asns.chunks(255) {
                out.push(seg.kind as u8);
                out.push(chunk.len() as u8);
                for &asn in chunk {
                    write_asn(out, asn, ctx);
                }
            }
        }
    }
}

/// AGGREGATOR (RFC 4271 §5.1.7, RFC 6793 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Aggregator {
    /// AS of the speaker that aggregated.
    pub asn: u32,
    /// Its BGP Identifier.
    pub address: Ipv4Addr,
}

/// MP_REACH_NLRI for IPv4 or IPv6 unicast (RFC 4760 §3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MpReach {
    /// Address family of the next hop and the NLRI.
    pub family: AfiSafi,
    /// Next hop: one address, or an IPv6 global and link-local pair
    /// (RFC 2545 §3).
    pub next_hops: Vec<IpAddr>,
    /// Reachable prefixes, all of `family`'s address family.
    pub nlri: Vec<IpNet>,
}

/// MP_UNREACH_NLRI for IPv4 or IPv6 unicast (RFC 4760 §4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MpUnreach {
    /// Address family of the withdrawn prefixes.
    pub family: AfiSafi,
    /// Withdrawn prefixes.
    pub withdrawn: Vec<IpNet>,
}

/// An attribute this speaker does not interpret, kept as received
/// (RFC 4271 §5: unrecognized optional attributes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawAttribute {
    /// Attribute Flags without the Extended Length bit, which the encoder
    /// recomputes. The low four bits are unused and cleared (RFC 4271 §4.3).
    pub flags: u8,
    /// Attribute Type Code.
    pub type_code: u8,
    /// Attribute Value.
    pub value: Vec<u8>,
}

impl RawAttribute {
    /// The attribute as it must be passed to other peers: a transitive one
    /// with the Partial bit set, a non-transitive one not at all
    /// (RFC 4271 §5: non-transitive ones are "quietly ignored and not
    /// passed along").
    pub fn for_propagation(&self) -> Option<RawAttribute> {
        (self.flags & TRANSITIVE != 0).then(|| RawAttribute {
            flags: self.flags | PARTIAL,
            ..self.clone()
        })
    }
}

/// The path attributes of an UPDATE (RFC 4271 §4.3, §5).
///
/// Each attribute appears at most once (RFC 4271 §6.3); the encoder writes
/// them in ascending type code order, as §5 recommends.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PathAttributes {
    /// ORIGIN, well-known mandatory (RFC 4271 §5.1.1).
    pub origin: Option<Origin>,
    /// AS_PATH, well-known mandatory (RFC 4271 §5.1.2).
    pub as_path: Option<AsPath>,
    /// NEXT_HOP, well-known mandatory with IPv4 NLRI (RFC 4271 §5.1.3).
    pub next_hop: Option<Ipv4Addr>,
    /// MULTI_EXIT_DISC, optional non-transitive (RFC 4271 §5.1.4).
    pub med: Option<u32>,
    /// LOCAL_PREF, well-known, iBGP only (RFC 4271 §5.1.5).
    pub local_pref: Option<u32>,
    /// ATOMIC_AGGREGATE, well-known discretionary (RFC 4271 §5.1.6).
    pub atomic_aggregate: bool,
    /// AGGREGATOR, optional transitive (RFC 4271 §5.1.7).
    pub aggregator: Option<Aggregator>,
    /// MP_REACH_NLRI, optional non-transitive (RFC 4760 §3).
    pub mp_reach: Option<MpReach>,
    /// MP_UNREACH_NLRI, optional non-transitive (RFC 4760 §4).
    pub mp_unreach: Option<MpUnreach>,
    /// Unrecognized optional attributes, as received.
    pub unknown: Vec<RawAttribute>,
}

/// How a recognized attribute's flags must look (RFC 4271 §5).
fn expected_flags(type_code: u8) -> Option<(u8, bool)> {
    // (Optional|Transitive bits, Partial allowed)
    use attr_type::*;
    Some(match type_code {
        ORIGIN | AS_PATH | NEXT_HOP | LOCAL_PREF | ATOMIC_AGGREGATE => (TRANSITIVE, false),
        MULTI_EXIT_DISC | MP_REACH_NLRI | MP_UNREACH_NLRI => (OPTIONAL, false),
        AGGREGATOR => (OPTIONAL | TRANSITIVE, true),
        _ => return None,
    })
}

impl PathAttributes {
    /// No attribute at all.
    pub fn is_empty(&self) -> bool {
        *self == PathAttributes::default()
    }

    /// Decodes the Path Attributes field of an UPDATE.
    pub(crate) fn decode(mut buf: &[u8], ctx: &Context) -> Result<PathAttributes, DecodeError> {
        let mut attrs = PathAttributes::default();
        let mut seen = [false; 256];
        while !buf.is_empty() {
            let (flags, type_code) = match buf {
                [f, t, ..] => (*f, *t),
                _ => {
                    return Err(DecodeError::MalformedAttributeList {
                        reason: "truncated attribute header",
                    });
                }
            };
            let hdr = if flags & EXTENDED_LENGTH != 0 { 4 } else { 3 };
            if buf.len() < hdr {
                return Err(DecodeError::MalformedAttributeList {
                    reason: "truncated attribute header",
                });
            }
            let len = if hdr == 4 {
                usize::from(u16::from_be_bytes([buf[2], buf[3]]))
            } else {
                usize::from(buf[2])
            };
            if buf.len() < hdr + len {
                // RFC 4271 §6.3: a length that conflicts with the list is an
                // Attribute Length Error; the data is what is there.
                return Err(DecodeError::AttributeLengthError {
                    attribute: buf.to_vec(),
                });
            }
            let (whole, rest) = buf.split_at(hdr + len);
            buf = rest;
            if std::mem::replace(&mut seen[usize::from(type_code)], true) {
                return Err(DecodeError::MalformedAttributeList {
                    reason: "attribute appears more than once",
                });
            }
            attrs.decode_one(flags, type_code, &whole[hdr..], whole, ctx)?;
        }
        Ok(attrs)
    }

    fn decode_one(
        &mut self,
        flags: u8,
        type_code: u8,
        value: &[u8],
        whole: &[u8],
        ctx: &Context,
    ) -> Result<(), DecodeError> {
        use attr_type::*;
        let Some((ot, partial_ok)) = expected_flags(type_code) else {
            // RFC 4271 §5: unrecognized well-known -> error; unrecognized
            // optional -> kept (and passed on if transitive).
            if flags & OPTIONAL == 0 {
                return Err(DecodeError::UnrecognizedWellKnownAttribute {
                    attribute: whole.to_vec(),
                });
            }
            self.unknown.push(RawAttribute {
                flags: flags & (OPTIONAL | TRANSITIVE | PARTIAL),
                type_code,
                value: value.to_vec(),
            });
            return Ok(());
        };
        // RFC 4271 §6.3: flags that conflict with the type code.
        if flags & (OPTIONAL | TRANSITIVE) != ot || (!partial_ok && flags & PARTIAL != 0) {
            return Err(DecodeError::AttributeFlagsError {
                attribute: whole.to_vec(),
            });
        }
        let length_error = || DecodeError::AttributeLengthError {
            attribute: whole.to_vec(),
        };
        let u32_value = || {
            <[u8; 4]>::try_from(value)
                .map(u32::from_be_bytes)
                .map_err(|_| length_error())
        };
        match type_code {
            ORIGIN => {
                let [o] = value else {
                    return Err(length_error());
                };
                self.origin = Some(match o {
                    0 => Origin::Igp,
                    1 => Origin::Egp,
                    2 => Origin::Incomplete,
                    _ => {
                        return Err(DecodeError::InvalidOrigin {
                            attribute: whole.to_vec(),
                        });
                    }
                });
            }
            AS_PATH => self.as_path = Some(AsPath::decode(value, ctx.as_width())?),
            NEXT_HOP => {
                let addr = Ipv4Addr::from(u32_value()?);
                // RFC 4271 §6.3 "syntactically incorrect": not a unicast
                // host address.
                if addr.is_unspecified() || addr.is_broadcast() || addr.is_multicast() {
                    return Err(DecodeError::InvalidNextHop {
                        attribute: whole.to_vec(),
                    });
                }
                self.next_hop = Some(addr);
            }
            MULTI_EXIT_DISC => self.med = Some(u32_value()?),
            LOCAL_PREF => self.local_pref = Some(u32_value()?),
            ATOMIC_AGGREGATE => {
                if !value.is_empty() {
                    return Err(length_error());
                }
                self.atomic_aggregate = true;
            }
            AGGREGATOR => {
                let w = ctx.as_width();
                if value.len() != w + 4 {
                    return Err(length_error());
                }
                let address = Ipv4Addr::new(value[w], value[w + 1], value[w + 2], value[w + 3]);
                self.aggregator = Some(Aggregator {
                    asn: read_asn(&value[..w]),
                    address,
                });
            }
            MP_REACH_NLRI => {
                let err = || DecodeError::OptionalAttributeError {
                    attribute: whole.to_vec(),
                };
                self.mp_reach = Some(decode_mp_reach(value).ok_or_else(err)?);
            }
            MP_UNREACH_NLRI => {
                let err = || DecodeError::OptionalAttributeError {
                    attribute: whole.to_vec(),
                };
                self.mp_unreach = Some(decode_mp_unreach(value).ok_or_else(err)?);
            }
            // expected_flags() answers only for the types above.
            _ => {
                return Err(DecodeError::UnrecognizedWellKnownAttribute {
                    attribute: whole.to_vec(),
                });
            }
        }
        Ok(())
    }

    /// RFC 4271 §6.3 / RFC 4760 §3: ORIGIN and AS_PATH with any reachable
    /// prefixes, NEXT_HOP with IPv4 NLRI.
    pub(crate) fn check_mandatory(&self, has_ipv4_nlri: bool) -> Result<(), DecodeError> {
        let missing = |type_code| Err(DecodeError::MissingWellKnownAttribute { type_code });
        if has_ipv4_nlri || self.mp_reach.is_some() {
            if self.origin.is_none() {
                return missing(attr_type::ORIGIN);
            }
            if self.as_path.is_none() {
                return missing(attr_type::AS_PATH);
            }
        }
        if has_ipv4_nlri && self.next_hop.is_none() {
            return missing(attr_type::NEXT_HOP);
        }
        Ok(())
    }

    /// Appends the attributes in ascending type code order.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, ctx: &Context) {
        use attr_type::*;
        let mut list: Vec<(u8, u8, Vec<u8>)> = Vec::new();
        if let Some(o) = self.origin {
            list.push((TRANSITIVE, ORIGIN, vec![o as u8]));
        }
        if let Some(p) = &self.as_path {
            let mut v = Vec::new();
            p.encode(&mut v, ctx);
            list.push((TRANSITIVE, AS_PATH, v));
        }
        if let Some(nh) = self.next_hop {
            list.push((TRANSITIVE, NEXT_HOP, nh.octets().to_vec()));
        }
        if let Some(med) = self.med {
            list.push((OPTIONAL, MULTI_EXIT_DISC, med.to_be_bytes().to_vec()));
        }
        if let Some(lp) = self.local_pref {
            list.push((TRANSITIVE, LOCAL_PREF, lp.to_be_bytes().to_vec()));
        }
        if self.atomic_aggregate {
            list.push((TRANSITIVE, ATOMIC_AGGREGATE, Vec::new()));
        }
        if let Some(a) = self.aggregator {
            let mut v = Vec::new();
            write_asn(&mut v, a.asn, ctx);
            v.extend_from_slice(&a.address.octets());
            list.push((OPTIONAL | TRANSITIVE, AGGREGATOR, v));
        }
        if let Some(r) = &self.mp_reach {
            list.push((OPTIONAL, MP_REACH_NLRI, encode_mp_reach(r)));
        }
        if let Some(u) = &self.mp_unreach {
            list.push((OPTIONAL, MP_UNREACH_NLRI, encode_mp_unreach(u)));
        }
        for raw in &self.unknown {
            list.push((raw.flags, raw.type_code, raw.value.clone()));
        }
        list.sort_by_key(|(_, t, _)| *t);
        for (flags, type_code, value) in list {
            // RFC 4271 §4.3: the Extended Length bit only when needed.
            let flags = flags & (OPTIONAL | TRANSITIVE | PARTIAL);
            if value.len() > 255 {
                out.extend_from_slice(&[flags | EXTENDED_LENGTH, type_code]);
                out.extend_from_slice(&(value.len() as u16).to_be_bytes());
            } else {
                out.extend_from_slice(&[flags, type_code, value.len() as u8]);
            }
            out.extend_from_slice(&value);
        }
    }
}

fn read_asn(b: &[u8]) -> u32 {
    b.iter().fold(0, |acc, &x| (acc << 8) | u32::from(x))
}

/// Writes an AS number in the session's width; a 4-octet AS number on a
/// 2-octet session becomes AS_TRANS (RFC 6793 §4.2.2).
fn write_asn(out: &mut Vec<u8>, asn: u32, ctx: &Context) {
    if ctx.four_octet_as {
        out.extend_from_slice(&asn.to_be_bytes());
    } else {
        let asn = if asn > 0xffff { AS_TRANS } else { asn };
        out.extend_from_slice(&(asn as u16).to_be_bytes());
    }
}

fn read_family(v: &[u8]) -> Option<(AfiSafi, &[u8])> {
    let [a0, a1, safi, rest @ ..] = v else {
        return None;
    };
    let family = AfiSafi {
        afi: Afi(u16::from_be_bytes([*a0, *a1])),
        safi: Safi(*safi),
    };
    matches!(family, AfiSafi::IPV4_UNICAST | AfiSafi::IPV6_UNICAST).then_some((family, rest))
}

fn decode_nets(family: AfiSafi, v: &[u8]) -> Option<Vec<IpNet>> {
    Some(if family.afi == Afi::IPV4 {
        decode_ipv4_prefixes(v)?
            .into_iter()
            .map(IpNet::V4)
            .collect()
    } else {
        decode_ipv6_prefixes(v)?
            .into_iter()
            .map(IpNet::V6)
            .collect()
    })
}

fn encode_nets(out: &mut Vec<u8>, nets: &[IpNet]) {
    for n in nets {
        match n.trunc() {
            IpNet::V4(p) => encode_prefix(out, p.prefix_len(), &p.addr().octets()),
            IpNet::V6(p) => encode_prefix(out, p.prefix_len(), &p.addr().octets()),
        }
    }
}

/// RFC 4760 §3; `None` means "Optional Attribute Error" (RFC 4760 §7).
fn decode_mp_reach(v: &[u8]) -> Option<MpReach> {
    let (family, rest) = read_family(v)?;
    let (&nh_len, rest) = rest.split_first()?;
    let nh_len = usize::from(nh_len);
    if rest.len() < nh_len + 1 {
        return None;
    }
    let (nh, rest) = rest.split_at(nh_len);
    // rest[0] is Reserved (RFC 4760 §3: ignored on receipt).
    let next_hops = match nh.len() {
        4 => vec![IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(nh).ok()?))],
        16 | 32 => nh
            .chunks_exact(16)
            .map(|c| Ipv6Addr::from(<[u8; 16]>::try_from(c).unwrap_or_default()).into())
            .collect(),
        _ => return None,
    };
    let nlri = decode_nets(family, &rest[1..])?;
    Some(MpReach {
        family,
        next_hops,
        nlri,
    })
}

fn encode_mp_reach(r: &MpReach) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&r.family.afi.0.to_be_bytes());
    v.push(r.family.safi.0);
    let at = v.len();
    v.push(0);
    for nh in &r.next_hops {
        match nh {
            IpAddr::V4(a) => v.extend_from_slice(&a.octets()),
            IpAddr::V6(a) => v.extend_from_slice(&a.octets()),
        }
    }
    v[at] = (v.len() - at - 1) as u8;
    v.push(0);
    encode_nets(&mut v, &r.nlri);
    v
}

fn decode_mp_unreach(v: &[u8]) -> Option<MpUnreach> {
    let (family, rest) = read_family(v)?;
    Some(MpUnreach {
        family,
        withdrawn: decode_nets(family, rest)?,
    })
}

fn encode_mp_unreach(u: &MpUnreach) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&u.family.afi.0.to_be_bytes());
    v.push(u.family.safi.0);
    encode_nets(&mut v, &u.withdrawn);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_path_length_counts_a_set_once() {
        let p = AsPath {
            segments: vec![
                AsSegment {
                    kind: SegmentType::AsSequence,
                    asns: vec![1, 2],
                },
                AsSegment {
                    kind: SegmentType::AsSet,
                    asns: vec![3, 4, 5],
                },
            ],
        };
        assert_eq!(p.path_len(), 3);
        assert_eq!(p.first_as(), Some(1));
        assert!(p.contains(4));
    }

    #[test]
    fn four_octet_asns_become_as_trans_on_a_two_octet_session() {
        let mut out = Vec::new();
        AsPath::sequence([4_200_000_000, 65001]).encode(&mut out, &Context::TWO_OCTET_AS);
        assert_eq!(out, [2, 2, 0x5b, 0xa0, 0xfd, 0xe9]);
    }

    #[test]
    fn long_attributes_use_the_extended_length() {
        let attrs = PathAttributes {
            as_path: Some(AsPath::sequence(1..=100)),
            ..Default::default()
        };
        let mut out = Vec::new();
        attrs.encode(&mut out, &Context::FOUR_OCTET_AS);
        assert_eq!(&out[..4], &[0x50, 2, 0x01, 0x92]); // 2 + 400 octets
        assert_eq!(
            PathAttributes::decode(&out, &Context::FOUR_OCTET_AS),
            Ok(attrs)
        );
        // And a short attribute sent with the Extended Length bit decodes.
        assert_eq!(
            PathAttributes::decode(&[0x50, 1, 0, 1, 2], &Context::FOUR_OCTET_AS)
                .unwrap()
                .origin,
            Some(Origin::Incomplete)
        );
    }

    #[test]
    fn unknown_transitive_attributes_are_passed_on_as_partial() {
        let raw = RawAttribute {
            flags: OPTIONAL | TRANSITIVE,
            type_code: 99,
            value: vec![1],
        };
        assert_eq!(raw.for_propagation().unwrap().flags, 0xe0);
        let non = RawAttribute {
            flags: OPTIONAL,
            ..raw
        };
        assert_eq!(non.for_propagation(), None);
    }

    #[test]
    fn mp_reach_ipv6_round_trips() {
        let attrs = PathAttributes {
            mp_reach: Some(MpReach {
                family: AfiSafi::IPV6_UNICAST,
                next_hops: vec!["2001:db8::1".parse().unwrap(), "fe80::1".parse().unwrap()],
                nlri: vec!["2001:db8:1::/48".parse().unwrap()],
            }),
            mp_unreach: Some(MpUnreach {
                family: AfiSafi::IPV4_UNICAST,
                withdrawn: vec!["10.0.0.0/8".parse().unwrap()],
            }),
            ..Default::default()
        };
        let mut out = Vec::new();
        attrs.encode(&mut out, &Context::FOUR_OCTET_AS);
        assert_eq!(
            PathAttributes::decode(&out, &Context::FOUR_OCTET_AS),
            Ok(attrs)
        );
    }
}
