//! Message header, OPEN, UPDATE framing, NOTIFICATION, KEEPALIVE and
//! ROUTE-REFRESH (RFC 4271 §4, RFC 5492, RFC 2918).

use std::fmt;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use super::attribute::PathAttributes;
use super::prefix::{decode_ipv4_prefixes, encode_prefix};
use super::{AS_TRANS, AfiSafi, BGP_VERSION, Context, HEADER_LEN, MARKER, MAX_MESSAGE_LEN};
use super::{Afi, Safi};
use crate::error::DecodeError;

/// Message type codes (RFC 4271 §4.1, RFC 2918 §3).
pub mod msg_type {
    /// OPEN (RFC 4271 §4.2).
    pub const OPEN: u8 = 1;
    /// UPDATE (RFC 4271 §4.3).
    pub const UPDATE: u8 = 2;
    /// NOTIFICATION (RFC 4271 §4.5).
    pub const NOTIFICATION: u8 = 3;
    /// KEEPALIVE (RFC 4271 §4.4).
    pub const KEEPALIVE: u8 = 4;
    /// ROUTE-REFRESH (RFC 2918 §3).
    pub const ROUTE_REFRESH: u8 = 5;
}

/// Finds the next complete message at the start of a TCP byte stream.
///
/// Returns `Ok(Some(len))` when the first `len` bytes of `buf` are one
/// whole message, `Ok(None)` when more bytes are needed, and an error when
/// the header is already invalid: a marker that is not all ones (RFC 4271
/// §6.1 "Connection Not Synchronized") or a Length outside 19..=4096
/// ("Bad Message Length"). Type-specific checks are left to
/// [`Message::decode`].
pub fn frame(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    let seen = buf.len().min(MARKER.len());
    if buf[..seen].iter().any(|&b| b != 0xff) {
        return Err(DecodeError::ConnectionNotSynchronized);
    }
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let length = u16::from_be_bytes([buf[16], buf[17]]);
    if !(HEADER_LEN..=MAX_MESSAGE_LEN).contains(&usize::from(length)) {
        return Err(DecodeError::BadMessageLength { length });
    }
    Ok((buf.len() >= usize::from(length)).then_some(usize::from(length)))
}

/// Raw view of one framed message: field accessors over the bytes
/// (RFC 4271 §4.1). Build it with [`MessageView::new_checked`].
#[derive(Debug, Clone, Copy)]
pub struct MessageView<'a> {
    buf: &'a [u8],
}

impl<'a> MessageView<'a> {
    /// Wraps `buf` after the RFC 4271 §6.1 header checks: marker all ones,
    /// Length equal to `buf.len()` and within 19..=4096, Type known, and the
    /// Length valid for the Type (OPEN ≥ 29, UPDATE ≥ 23, NOTIFICATION ≥ 21,
    /// KEEPALIVE = 19).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, DecodeError> {
        match frame(buf)? {
            Some(len) if len == buf.len() => {}
            Some(_) | None => {
                // Either the buffer holds less than the Length says, or more:
                // in both cases the Length field is what is wrong.
                let length = match buf.get(16..18) {
                    Some(b) => u16::from_be_bytes([b[0], b[1]]),
                    None => buf.len() as u16,
                };
                return Err(DecodeError::BadMessageLength { length });
            }
        }
        let view = MessageView { buf };
        let length = view.length();
        let len = usize::from(length);
        let ok = match view.msg_type() {
            msg_type::OPEN => len >= HEADER_LEN + 10,
            msg_type::UPDATE => len >= HEADER_LEN + 4,
            msg_type::NOTIFICATION => len >= HEADER_LEN + 2,
            msg_type::KEEPALIVE => len == HEADER_LEN,
            // RFC 7313 §5 has its own error for a bad ROUTE-REFRESH length.
            msg_type::ROUTE_REFRESH => true,
            other => return Err(DecodeError::BadMessageType { msg_type: other }),
        };
        if !ok {
            return Err(DecodeError::BadMessageLength { length });
        }
        Ok(view)
    }

    /// The 16-octet marker.
    pub fn marker(&self) -> &'a [u8] {
        &self.buf[..16]
    }

    /// Total message length including the header.
    pub fn length(&self) -> u16 {
        u16::from_be_bytes([self.buf[16], self.buf[17]])
    }

    /// Message type code (see [`msg_type`]).
    pub fn msg_type(&self) -> u8 {
        self.buf[18]
    }

    /// Everything after the header.
    pub fn body(&self) -> &'a [u8] {
        &self.buf[HEADER_LEN..]
    }

    /// The whole message.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
}

/// A validated BGP message (RFC 4271 §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// OPEN (RFC 4271 §4.2).
    Open(Open),
    /// UPDATE (RFC 4271 §4.3).
    Update(Update),
    /// NOTIFICATION (RFC 4271 §4.5).
    Notification(Notification),
    /// KEEPALIVE (RFC 4271 §4.4).
    Keepalive,
    /// ROUTE-REFRESH (RFC 2918 §3).
    RouteRefresh(RouteRefresh),
}

impl Message {
    /// Decodes exactly one framed message (use [`frame`] to find it).
    ///
    /// Errors carry the NOTIFICATION RFC 4271 §6 requires.
    pub fn decode(bytes: &[u8], ctx: &Context) -> Result<Message, DecodeError> {
        let view = MessageView::new_checked(bytes)?;
        let body = view.body();
        Ok(match view.msg_type() {
            msg_type::OPEN => Message::Open(Open::decode_body(body, ctx)?),
            msg_type::UPDATE => Message::Update(Update::decode_body(body, ctx)?),
            msg_type::NOTIFICATION => Message::Notification(Notification {
                code: body[0],
                subcode: body[1],
                data: body[2..].to_vec(),
            }),
            msg_type::KEEPALIVE => Message::Keepalive,
            msg_type::ROUTE_REFRESH => {
                if body.len() != 4 {
                    return Err(DecodeError::InvalidRouteRefreshLength {
                        message: bytes.to_vec(),
                    });
                }
                // Octet 2 is Reserved (RFC 2918 §3), a subtype since
                // RFC 7313 §3.2; enhanced route refresh is not supported, so
                // it is ignored on receipt.
                Message::RouteRefresh(RouteRefresh {
                    family: AfiSafi {
                        afi: Afi(u16::from_be_bytes([body[0], body[1]])),
                        safi: Safi(body[3]),
                    },
                })
            }
            // MessageView::new_checked already rejects unknown types.
            other => return Err(DecodeError::BadMessageType { msg_type: other }),
        })
    }

    /// Message type code (see [`msg_type`]).
    pub fn msg_type(&self) -> u8 {
        match self {
            Message::Open(_) => msg_type::OPEN,
            Message::Update(_) => msg_type::UPDATE,
            Message::Notification(_) => msg_type::NOTIFICATION,
            Message::Keepalive => msg_type::KEEPALIVE,
            Message::RouteRefresh(_) => msg_type::ROUTE_REFRESH,
        }
    }

    /// Encodes the message with its header.
    ///
    /// The caller keeps messages within 4096 octets (RFC 4271 §4.1): an
    /// UPDATE with too many prefixes must be split before encoding.
    pub fn encode(&self, ctx: &Context) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        self.encode_into(&mut out, ctx);
        out
    }

    /// Appends the encoded message to `out` (see [`Message::encode`]).
    pub fn encode_into(&self, out: &mut Vec<u8>, ctx: &Context) {
        let start = out.len();
        let out = &mut *out;
        out.extend_from_slice(&MARKER);
        out.extend_from_slice(&[0, 0, self.msg_type()]);
        match self {
            Message::Open(open) => open.encode_body(out),
            Message::Update(update) => update.encode_body(out, ctx),
            Message::Notification(n) => {
                out.push(n.code);
                out.push(n.subcode);
                out.extend_from_slice(&n.data);
            }
            Message::Keepalive => {}
            Message::RouteRefresh(rr) => {
                out.extend_from_slice(&rr.family.afi.0.to_be_bytes());
                out.push(0);
                out.push(rr.family.safi.0);
            }
        }
        let len = (out.len() - start) as u16;
        out[start + 16..start + 18].copy_from_slice(&len.to_be_bytes());
    }
}

/// A capability advertised in an OPEN (RFC 5492 §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capability {
    /// Multiprotocol extensions for one address family (RFC 4760 §8,
    /// code 1).
    Multiprotocol(AfiSafi),
    /// Route refresh (RFC 2918 §2, code 2).
    RouteRefresh,
    /// Support for 4-octet AS numbers, with the speaker's AS (RFC 6793 §3,
    /// code 65).
    FourOctetAs(u32),
    /// Any other capability, kept as received.
    Unknown {
        /// Capability code.
        code: u8,
        /// Capability value.
        value: Vec<u8>,
    },
}

impl Capability {
    /// Capability code (IANA "Capability Codes").
    pub fn code(&self) -> u8 {
        match self {
            Capability::Multiprotocol(_) => 1,
            Capability::RouteRefresh => 2,
            Capability::FourOctetAs(_) => 65,
            Capability::Unknown { code, .. } => *code,
        }
    }

    /// Appends code, length and value (RFC 5492 §4).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.code());
        match self {
            Capability::Multiprotocol(family) => {
                out.push(4);
                out.extend_from_slice(&family.afi.0.to_be_bytes());
                out.push(0);
                out.push(family.safi.0);
            }
            Capability::RouteRefresh => out.push(0),
            Capability::FourOctetAs(asn) => {
                out.push(4);
                out.extend_from_slice(&asn.to_be_bytes());
            }
            Capability::Unknown { value, .. } => {
                out.push(value.len() as u8);
                out.extend_from_slice(value);
            }
        }
    }

    fn decode(code: u8, value: &[u8]) -> Result<Capability, DecodeError> {
        // A recognized capability with a bad length is a malformed optional
        // parameter: RFC 4271 §6.2 "recognized, but is malformed" -> 2/0.
        let malformed = |reason| Err(DecodeError::MalformedOptionalParameter { reason });
        Ok(match code {
            1 => {
                let [a0, a1, _reserved, safi] = value else {
                    return malformed("multiprotocol capability length is not 4");
                };
                Capability::Multiprotocol(AfiSafi {
                    afi: Afi(u16::from_be_bytes([*a0, *a1])),
                    safi: Safi(*safi),
                })
            }
            2 => {
                if !value.is_empty() {
                    return malformed("route refresh capability length is not 0");
                }
                Capability::RouteRefresh
            }
            65 => {
                let Ok(asn) = <[u8; 4]>::try_from(value) else {
                    return malformed("4-octet AS capability length is not 4");
                };
                Capability::FourOctetAs(u32::from_be_bytes(asn))
            }
            _ => Capability::Unknown {
                code,
                value: value.to_vec(),
            },
        })
    }
}

/// An OPEN message (RFC 4271 §4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    /// Protocol version; always [`BGP_VERSION`] once decoded.
    pub version: u8,
    /// The sender's AS number, already resolved from the 4-octet AS
    /// capability (RFC 6793 §3). On the wire, a number above 65535 is sent
    /// as [`AS_TRANS`] in My Autonomous System.
    pub my_as: u32,
    /// Proposed Hold Time, in seconds: 0 or at least 3 (RFC 4271 §4.2).
    pub hold_time: u16,
    /// BGP Identifier (RFC 4271 §4.2, RFC 6286).
    pub bgp_id: Ipv4Addr,
    /// Capabilities in the order received (RFC 5492).
    pub capabilities: Vec<Capability>,
}

impl Open {
    /// The AS number from the 4-octet AS capability, if advertised
    /// (RFC 6793 §3).
    pub fn four_octet_as(&self) -> Option<u32> {
        self.capabilities.iter().find_map(|c| match c {
            Capability::FourOctetAs(asn) => Some(*asn),
            _ => None,
        })
    }

    /// Address families advertised with the multiprotocol capability
    /// (RFC 4760 §8).
    pub fn multiprotocol(&self) -> impl Iterator<Item = AfiSafi> + '_ {
        self.capabilities.iter().filter_map(|c| match c {
            Capability::Multiprotocol(family) => Some(*family),
            _ => None,
        })
    }

    /// Whether the route refresh capability is advertised (RFC 2918 §2).
    pub fn route_refresh(&self) -> bool {
        self.capabilities.contains(&Capability::RouteRefresh)
    }

    /// Checks My AS against the AS configured for the peer (RFC 4271 §6.2
    /// "Bad Peer AS"); the session calls this after decoding.
    pub fn check_peer_as(&self, expected: u32) -> Result<(), DecodeError> {
        if self.my_as == expected {
            Ok(())
        } else {
            Err(DecodeError::BadPeerAs { asn: self.my_as })
        }
    }

    fn decode_body(body: &[u8], ctx: &Context) -> Result<Open, DecodeError> {
        // Length ≥ 29 was checked with the header: the fixed part is here.
        let version = body[0];
        if version != BGP_VERSION {
            return Err(DecodeError::UnsupportedVersion { version });
        }
        let two_octet_as = u16::from_be_bytes([body[1], body[2]]);
        let hold_time = u16::from_be_bytes([body[3], body[4]]);
        let bgp_id = Ipv4Addr::new(body[5], body[6], body[7], body[8]);
        let opt_len = usize::from(body[9]);
        let mut params = &body[10..];
        if params.len() != opt_len {
            return Err(DecodeError::MalformedOptionalParameter {
                reason: "optional parameters length does not match the message length",
            });
        }

        let mut capabilities = Vec::new();
        while !params.is_empty() {
            let [param_type, len, rest @ ..] = params else {
                return Err(DecodeError::MalformedOptionalParameter {
                    reason: "truncated optional parameter header",
                });
            };
            let len = usize::from(*len);
            if rest.len() < len {
                return Err(DecodeError::MalformedOptionalParameter {
                    reason: "optional parameter overruns the parameters",
                });
            }
            let (value, next) = rest.split_at(len);
            params = next;
            // Type 2 is the only optional parameter in use (RFC 5492 §4;
            // type 1, authentication, is deprecated by RFC 5492 §1).
            if *param_type != 2 {
                return Err(DecodeError::UnsupportedOptionalParameter {
                    param_type: *param_type,
                });
            }
            let mut caps = value;
            while !caps.is_empty() {
                let [code, len, rest @ ..] = caps else {
                    return Err(DecodeError::MalformedOptionalParameter {
                        reason: "truncated capability header",
                    });
                };
                let len = usize::from(*len);
                if rest.len() < len {
                    return Err(DecodeError::MalformedOptionalParameter {
                        reason: "capability overruns its optional parameter",
                    });
                }
                let (value, next) = rest.split_at(len);
                caps = next;
                capabilities.push(Capability::decode(*code, value)?);
            }
        }

        let four_octet = capabilities.iter().find_map(|c| match c {
            Capability::FourOctetAs(asn) => Some(*asn),
            _ => None,
        });
        let my_as = match four_octet {
            // RFC 6793 §4.1: a 4-octet AS that fits in 2 octets is sent as
            // itself; one that does not is sent as AS_TRANS. A mismatch means
            // the OPEN is inconsistent.
            Some(asn) => {
                let expected = if asn > 0xffff { AS_TRANS } else { asn };
                if u32::from(two_octet_as) != expected {
                    return Err(DecodeError::BadPeerAs { asn });
                }
                asn
            }
            None => u32::from(two_octet_as),
        };
        // RFC 7607 §2: AS 0 in OPEN (or the capability) is Bad Peer AS.
        if my_as == 0 {
            return Err(DecodeError::BadPeerAs { asn: 0 });
        }
        // RFC 4271 §4.2/§6.2: 0 or at least 3 seconds.
        if hold_time == 1 || hold_time == 2 || (hold_time == 0 && !ctx.allow_zero_hold_time) {
            return Err(DecodeError::UnacceptableHoldTime { hold_time });
        }
        // RFC 6286 §2.2: a non-zero 4-octet number.
        if bgp_id.is_unspecified() {
            return Err(DecodeError::BadBgpIdentifier { id: bgp_id });
        }
        Ok(Open {
            version,
            my_as,
            hold_time,
            bgp_id,
            capabilities,
        })
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        out.push(self.version);
        let my_as = if self.my_as > 0xffff {
            AS_TRANS
        } else {
            self.my_as
        };
        out.extend_from_slice(&(my_as as u16).to_be_bytes());
        out.extend_from_slice(&self.hold_time.to_be_bytes());
        out.extend_from_slice(&self.bgp_id.octets());
        // All capabilities in one Capabilities parameter (RFC 5492 §4).
        // Without RFC 9072 (future work) they must fit in 253 octets.
        if self.capabilities.is_empty() {
            out.push(0);
            return;
        }
        let len_at = out.len();
        out.extend_from_slice(&[0, 2, 0]);
        for cap in &self.capabilities {
            cap.encode(out);
        }
        let caps_len = out.len() - len_at - 3;
        out[len_at] = (caps_len + 2) as u8;
        out[len_at + 2] = caps_len as u8;
    }
}

/// An UPDATE message (RFC 4271 §4.3) for IPv4 unicast, with optional
/// multiprotocol attributes (RFC 4760).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Update {
    /// Withdrawn Routes.
    pub withdrawn: Vec<Ipv4Net>,
    /// Path Attributes.
    pub attributes: PathAttributes,
    /// Network Layer Reachability Information.
    pub nlri: Vec<Ipv4Net>,
}

impl Update {
    /// An UPDATE with nothing in it is the IPv4 unicast End-of-RIB marker
    /// (RFC 4724 §2).
    pub fn is_end_of_rib(&self) -> bool {
        self.withdrawn.is_empty() && self.nlri.is_empty() && self.attributes.is_empty()
    }

    fn decode_body(body: &[u8], ctx: &Context) -> Result<Update, DecodeError> {
        // RFC 4271 §6.3: length fields that overrun the message are a
        // Malformed Attribute List.
        let too_large = DecodeError::MalformedAttributeList {
            reason: "withdrawn routes or attribute length too large",
        };
        let wlen = usize::from(u16::from_be_bytes([body[0], body[1]]));
        let rest = &body[2..];
        if rest.len() < wlen + 2 {
            return Err(too_large);
        }
        let (withdrawn, rest) = rest.split_at(wlen);
        let alen = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let rest = &rest[2..];
        if rest.len() < alen {
            return Err(too_large);
        }
        let (attrs, nlri) = rest.split_at(alen);

        let withdrawn = decode_ipv4_prefixes(withdrawn).ok_or(DecodeError::InvalidNetworkField)?;
        let attributes = PathAttributes::decode(attrs, ctx)?;
        let nlri = decode_ipv4_prefixes(nlri).ok_or(DecodeError::InvalidNetworkField)?;
        attributes.check_mandatory(!nlri.is_empty())?;
        Ok(Update {
            withdrawn,
            attributes,
            nlri,
        })
    }

    fn encode_body(&self, out: &mut Vec<u8>, ctx: &Context) {
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        for p in &self.withdrawn {
            encode_prefix(out, p.prefix_len(), &p.trunc().addr().octets());
        }
        let wlen = (out.len() - at - 2) as u16;
        out[at..at + 2].copy_from_slice(&wlen.to_be_bytes());
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        self.attributes.encode(out, ctx);
        let alen = (out.len() - at - 2) as u16;
        out[at..at + 2].copy_from_slice(&alen.to_be_bytes());
        for p in &self.nlri {
            encode_prefix(out, p.prefix_len(), &p.trunc().addr().octets());
        }
    }
}

/// A NOTIFICATION message (RFC 4271 §4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// Error Code.
    pub code: u8,
    /// Error Subcode.
    pub subcode: u8,
    /// Data, whose meaning depends on code and subcode (RFC 4271 §6).
    pub data: Vec<u8>,
}

impl Notification {
    /// Message Header Error (RFC 4271 §4.5).
    pub const MESSAGE_HEADER_ERROR: u8 = 1;
    /// OPEN Message Error (RFC 4271 §4.5).
    pub const OPEN_MESSAGE_ERROR: u8 = 2;
    /// UPDATE Message Error (RFC 4271 §4.5).
    pub const UPDATE_MESSAGE_ERROR: u8 = 3;
    /// Hold Timer Expired (RFC 4271 §4.5, §6.5).
    pub const HOLD_TIMER_EXPIRED: u8 = 4;
    /// Finite State Machine Error (RFC 4271 §4.5, §6.6).
    pub const FSM_ERROR: u8 = 5;
    /// Cease (RFC 4271 §4.5, §6.7).
    pub const CEASE: u8 = 6;
    /// ROUTE-REFRESH Message Error (RFC 7313 §5).
    pub const ROUTE_REFRESH_MESSAGE_ERROR: u8 = 7;
    /// Cease subcode: Administrative Shutdown (RFC 4486 §4).
    pub const CEASE_ADMINISTRATIVE_SHUTDOWN: u8 = 2;

    /// A NOTIFICATION with an empty Data field.
    pub fn new(code: u8, subcode: u8) -> Notification {
        Notification {
            code,
            subcode,
            data: Vec::new(),
        }
    }
}

impl fmt::Display for Notification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.code {
            1 => "message header error",
            2 => "OPEN message error",
            3 => "UPDATE message error",
            4 => "hold timer expired",
            5 => "finite state machine error",
            6 => "cease",
            7 => "ROUTE-REFRESH message error",
            _ => "unknown error",
        };
        write!(f, "{name} ({}/{})", self.code, self.subcode)?;
        if !self.data.is_empty() {
            f.write_str(", data")?;
            for b in &self.data {
                write!(f, " {b:02x}")?;
            }
        }
        Ok(())
    }
}

/// A ROUTE-REFRESH message (RFC 2918 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteRefresh {
    /// The address family to re-advertise.
    pub family: AfiSafi,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_needs_a_whole_header_then_the_whole_message() {
        let ka = Message::Keepalive.encode(&Context::default());
        assert_eq!(frame(&ka[..10]), Ok(None));
        assert_eq!(frame(&ka[..18]), Ok(None));
        assert_eq!(frame(&ka), Ok(Some(19)));
        let mut two = ka.clone();
        two.extend_from_slice(&ka);
        assert_eq!(frame(&two), Ok(Some(19)));
        assert_eq!(frame(&[]), Ok(None));
    }

    #[test]
    fn frame_rejects_a_bad_marker_early() {
        assert_eq!(
            frame(&[0xff, 0xff, 0x00]),
            Err(DecodeError::ConnectionNotSynchronized)
        );
    }
}
