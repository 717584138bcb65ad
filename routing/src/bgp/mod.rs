//! BGP-4 (RFC 4271), sans-I/O.
//!
//! Today: the message codec. [`Message::decode`] turns one framed message
//! into a validated representation or a [`DecodeError`] that carries the
//! NOTIFICATION RFC 4271 §6 asks for; [`Message::encode`] writes it back;
//! [`frame`] finds message boundaries in a TCP byte stream. The per-peer
//! session state machine is [`session::Session`] (RFC 4271 §8). The RIBs and
//! route selection with ECMP are [`rib::Rib`] (RFC 4271 §9, RFC 7938 §6).
//! One switch's speaker, all its sessions with its RIB, originations, ports
//! and FIB, is [`speaker::Speaker`]. No sockets, no clock in any of these:
//! [`driver::run_session`] is the thin tokio driver that owns one session's
//! TCP connection and timers, [`speaker_driver::run_speaker`] the one that
//! owns a whole speaker's connections, timers and FIB calls.
//!
//! Layers, in the smoltcp style: [`MessageView`] is the raw header view
//! (field accessors over bytes, checked once); [`Message`] and its parts are
//! the validated representation, which exists only if the bytes were valid.
//!
//! Not yet implemented (future work): RFC 7606 revised error handling
//! (treat-as-withdraw), RFC 8654 extended messages (> 4096 octets), RFC 9072
//! extended optional parameters length, AS4_PATH / AS4_AGGREGATOR
//! reconstruction for 2-octet-AS peers (RFC 6793 §4.2; those attributes are
//! kept raw and passed on), ADD-PATH (RFC 7911). Checks that need the
//! session are left to it: the peer's AS in OPEN ([`Open::check_peer_as`])
//! and as the first AS of an eBGP AS_PATH (RFC 4271 §6.3,
//! [`AsPath::first_as`]), NEXT_HOP semantics, AS 0 in AS_PATH (RFC 7607),
//! unsupported required capabilities (RFC 5492 §3,
//! [`DecodeError::UnsupportedCapability`]).

mod adj_out;
mod attribute;
pub mod config;
pub mod driver;
pub mod dump;
mod notification;
mod packet;
pub mod plan;
mod prefix;
pub mod rib;
pub mod session;
pub mod speaker;
pub mod speaker_driver;

pub use crate::error::DecodeError;
pub use attribute::{
    Aggregator, AsPath, AsSegment, MpReach, MpUnreach, Origin, PathAttributes, RawAttribute,
    SegmentType, attr_flags, attr_type,
};
pub use packet::{
    Capability, Message, MessageView, Notification, Open, RouteRefresh, Update, frame, msg_type,
};

use std::fmt;

/// The BGP version this speaker supports (RFC 4271 §4.2).
pub const BGP_VERSION: u8 = 4;
/// Length of the fixed message header: marker, length, type (RFC 4271 §4.1).
pub const HEADER_LEN: usize = 19;
/// Largest message without RFC 8654 extended messages (RFC 4271 §4.1).
pub const MAX_MESSAGE_LEN: usize = 4096;
/// The 16-octet marker, all ones (RFC 4271 §4.1).
pub const MARKER: [u8; 16] = [0xff; 16];
/// The BGP TCP port (RFC 4271 §8.2.1).
pub const PORT: u16 = 179;
/// AS_TRANS, the 2-octet stand-in for a 4-octet AS number (RFC 6793 §2, §9).
pub const AS_TRANS: u32 = 23456;

/// Session parameters that change how messages are encoded and decoded.
///
/// `four_octet_as` is true once both speakers advertised the 4-octet AS
/// capability (RFC 6793 §3): AS_PATH and AGGREGATOR then carry 4-octet AS
/// numbers. OPEN messages do not depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    /// AS numbers in AS_PATH and AGGREGATOR are 4 octets (RFC 6793 §4.1).
    pub four_octet_as: bool,
    /// Accept a Hold Time of 0 (no keepalives). RFC 4271 §4.2 allows it and
    /// §6.2 lets an implementation refuse it; `true` by default.
    pub allow_zero_hold_time: bool,
}

impl Context {
    /// A session between two 4-octet-AS speakers (RFC 6793).
    pub const FOUR_OCTET_AS: Context = Context {
        four_octet_as: true,
        allow_zero_hold_time: true,
    };
    /// A session with a 2-octet-AS peer (plain RFC 4271), or any session
    /// before the OPEN exchange.
    pub const TWO_OCTET_AS: Context = Context {
        four_octet_as: false,
        allow_zero_hold_time: true,
    };

    /// Octets per AS number in AS_PATH and AGGREGATOR.
    pub(crate) fn as_width(&self) -> usize {
        if self.four_octet_as { 4 } else { 2 }
    }
}

impl Default for Context {
    fn default() -> Self {
        Context::TWO_OCTET_AS
    }
}

/// Address Family Identifier (RFC 4760 §3, IANA "Address Family Numbers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Afi(pub u16);

impl Afi {
    /// IPv4.
    pub const IPV4: Afi = Afi(1);
    /// IPv6.
    pub const IPV6: Afi = Afi(2);
}

/// Subsequent Address Family Identifier (RFC 4760 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Safi(pub u8);

impl Safi {
    /// Unicast forwarding.
    pub const UNICAST: Safi = Safi(1);
    /// Multicast forwarding.
    pub const MULTICAST: Safi = Safi(2);
}

/// An address family: AFI and SAFI (RFC 4760).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AfiSafi {
    /// Address family.
    pub afi: Afi,
    /// Subsequent address family.
    pub safi: Safi,
}

impl AfiSafi {
    /// IPv4 unicast.
    pub const IPV4_UNICAST: AfiSafi = AfiSafi {
        afi: Afi::IPV4,
        safi: Safi::UNICAST,
    };
    /// IPv6 unicast.
    pub const IPV6_UNICAST: AfiSafi = AfiSafi {
        afi: Afi::IPV6,
        safi: Safi::UNICAST,
    };
}

impl fmt::Display for AfiSafi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AfiSafi::IPV4_UNICAST => f.write_str("ipv4-unicast"),
            AfiSafi::IPV6_UNICAST => f.write_str("ipv6-unicast"),
            AfiSafi { afi, safi } => write!(f, "afi {}/safi {}", afi.0, safi.0),
        }
    }
}
