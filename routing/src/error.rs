//! The crate's error type.

use std::net::Ipv4Addr;

/// Why a received BGP message was rejected.
///
/// Every variant maps to the NOTIFICATION that RFC 4271 §6 (and RFC 5492
/// §3, RFC 7313 §5) requires the receiver to send before closing the
/// session; [`DecodeError::to_notification`] (in `bgp`, beside the
/// message) builds it, including the Data field the RFC asks for.
///
/// Future work: RFC 7606 ("revised error handling") replaces the session
/// reset with "treat-as-withdraw" or "attribute discard" for most UPDATE
/// attribute errors. This codec implements the RFC 4271 behaviour only; the
/// RFC 7606 policy will sit on top of these variants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The marker is not all ones (RFC 4271 §6.1; 1/1).
    #[error("message header: marker is not all ones (connection not synchronized)")]
    ConnectionNotSynchronized,
    /// The Length field is out of range for the message or its type
    /// (RFC 4271 §6.1; 1/2, data: the erroneous Length field).
    #[error("message header: bad message length {length}")]
    BadMessageLength {
        /// The erroneous Length field.
        length: u16,
    },
    /// The Type field is not a known message type (RFC 4271 §6.1; 1/3,
    /// data: the erroneous Type field).
    #[error("message header: bad message type {msg_type}")]
    BadMessageType {
        /// The erroneous Type field.
        msg_type: u8,
    },
    /// A recognized OPEN optional parameter is malformed (RFC 4271 §6.2;
    /// 2/0 "Unspecific").
    #[error("OPEN: malformed optional parameter: {reason}")]
    MalformedOptionalParameter {
        /// What is wrong.
        reason: &'static str,
    },
    /// The peer bid a version other than 4 (RFC 4271 §6.2; 2/1, data: the
    /// largest locally supported version as two octets).
    #[error("OPEN: unsupported version {version}")]
    UnsupportedVersion {
        /// The version the peer bid.
        version: u8,
    },
    /// The peer's AS number is unacceptable (RFC 4271 §6.2, RFC 6793 §4.1,
    /// RFC 7607 §2; 2/2, no data).
    #[error("OPEN: bad peer AS {asn}")]
    BadPeerAs {
        /// The (resolved) AS number the peer announced.
        asn: u32,
    },
    /// The BGP Identifier is syntactically incorrect (RFC 4271 §6.2,
    /// RFC 6286 §2.2; 2/3, no data).
    #[error("OPEN: bad BGP identifier {id}")]
    BadBgpIdentifier {
        /// The erroneous identifier.
        id: Ipv4Addr,
    },
    /// An optional parameter type is not supported (RFC 4271 §6.2; 2/4).
    #[error("OPEN: unsupported optional parameter type {param_type}")]
    UnsupportedOptionalParameter {
        /// The parameter type.
        param_type: u8,
    },
    /// The Hold Time is 1 or 2 seconds (or 0 when the local policy
    /// refuses it) (RFC 4271 §6.2; 2/6, no data).
    #[error("OPEN: unacceptable hold time {hold_time} s")]
    UnacceptableHoldTime {
        /// The erroneous Hold Time, in seconds.
        hold_time: u16,
    },
    /// The peer requires capabilities this speaker does not support
    /// (RFC 5492 §3; 2/7, data: the capabilities, encoded as in the OPEN).
    /// Raised by the session, not the codec: the codec keeps unknown
    /// capabilities as [`crate::bgp::Capability::Unknown`].
    #[error("OPEN: unsupported capability")]
    UnsupportedCapability {
        /// The unsupported capabilities as code/length/value triples.
        capabilities: Vec<u8>,
    },
    /// Length fields or attribute headers of an UPDATE do not add up, or an
    /// attribute appears twice (RFC 4271 §6.3; 3/1, no data).
    #[error("UPDATE: malformed attribute list: {reason}")]
    MalformedAttributeList {
        /// What is wrong.
        reason: &'static str,
    },
    /// A well-known attribute is not recognized (RFC 4271 §6.3; 3/2,
    /// data: the attribute).
    #[error("UPDATE: unrecognized well-known attribute")]
    UnrecognizedWellKnownAttribute {
        /// The attribute (flags, type code, length, value) as received.
        attribute: Vec<u8>,
    },
    /// A mandatory well-known attribute is missing (RFC 4271 §6.3; 3/3,
    /// data: its type code).
    #[error("UPDATE: missing well-known attribute {type_code}")]
    MissingWellKnownAttribute {
        /// Type code of the missing attribute.
        type_code: u8,
    },
    /// Attribute flags conflict with the type code (RFC 4271 §6.3; 3/4,
    /// data: the attribute).
    #[error("UPDATE: attribute flags error")]
    AttributeFlagsError {
        /// The attribute as received.
        attribute: Vec<u8>,
    },
    /// Attribute length conflicts with the type code or overruns the
    /// attribute list (RFC 4271 §6.3; 3/5, data: the attribute).
    #[error("UPDATE: attribute length error")]
    AttributeLengthError {
        /// The attribute as received (truncated if it overran the list).
        attribute: Vec<u8>,
    },
    /// ORIGIN has an undefined value (RFC 4271 §6.3; 3/6, data: the
    /// attribute).
    #[error("UPDATE: invalid ORIGIN")]
    InvalidOrigin {
        /// The attribute as received.
        attribute: Vec<u8>,
    },
    /// NEXT_HOP is syntactically incorrect (RFC 4271 §6.3; 3/8, data: the
    /// attribute).
    #[error("UPDATE: invalid NEXT_HOP")]
    InvalidNextHop {
        /// The attribute as received.
        attribute: Vec<u8>,
    },
    /// A recognized optional attribute has an incorrect value (RFC 4271
    /// §6.3, RFC 4760 §7; 3/9, data: the attribute).
    #[error("UPDATE: optional attribute error")]
    OptionalAttributeError {
        /// The attribute as received.
        attribute: Vec<u8>,
    },
    /// A prefix in the Withdrawn Routes or NLRI field is syntactically
    /// incorrect (RFC 4271 §6.3; 3/10, no data).
    #[error("UPDATE: invalid network field")]
    InvalidNetworkField,
    /// AS_PATH is syntactically incorrect (RFC 4271 §6.3; 3/11, no data).
    #[error("UPDATE: malformed AS_PATH")]
    MalformedAsPath,
    /// A ROUTE-REFRESH message does not have a 4-octet body (RFC 7313 §5;
    /// 7/1, data: the complete message).
    #[error("ROUTE-REFRESH: invalid message length")]
    InvalidRouteRefreshLength {
        /// The complete message as received.
        message: Vec<u8>,
    },
}
