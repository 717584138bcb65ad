//! How each decode error is told to the peer: the NOTIFICATION that RFC
//! 4271 §6 (and RFC 5492 §3, RFC 7313 §5) requires before the session
//! closes, its Error Code, Subcode and Data. Here, beside the message,
//! so that the crate's error type needs nothing of BGP's.

use super::{BGP_VERSION, Notification};
use crate::error::DecodeError;

impl DecodeError {
    /// NOTIFICATION Error Code (RFC 4271 §4.5).
    pub fn code(&self) -> u8 {
        use DecodeError::*;
        match self {
            ConnectionNotSynchronized | BadMessageLength { .. } | BadMessageType { .. } => {
                Notification::MESSAGE_HEADER_ERROR
            }
            MalformedOptionalParameter { .. }
            | UnsupportedVersion { .. }
            | BadPeerAs { .. }
            | BadBgpIdentifier { .. }
            | UnsupportedOptionalParameter { .. }
            | UnacceptableHoldTime { .. }
            | UnsupportedCapability { .. } => Notification::OPEN_MESSAGE_ERROR,
            InvalidRouteRefreshLength { .. } => Notification::ROUTE_REFRESH_MESSAGE_ERROR,
            _ => Notification::UPDATE_MESSAGE_ERROR,
        }
    }

    /// NOTIFICATION Error Subcode (RFC 4271 §4.5, §6).
    pub fn subcode(&self) -> u8 {
        use DecodeError::*;
        match self {
            ConnectionNotSynchronized => 1,
            BadMessageLength { .. } => 2,
            BadMessageType { .. } => 3,
            MalformedOptionalParameter { .. } => 0,
            UnsupportedVersion { .. } => 1,
            BadPeerAs { .. } => 2,
            BadBgpIdentifier { .. } => 3,
            UnsupportedOptionalParameter { .. } => 4,
            UnacceptableHoldTime { .. } => 6,
            UnsupportedCapability { .. } => 7,
            MalformedAttributeList { .. } => 1,
            UnrecognizedWellKnownAttribute { .. } => 2,
            MissingWellKnownAttribute { .. } => 3,
            AttributeFlagsError { .. } => 4,
            AttributeLengthError { .. } => 5,
            InvalidOrigin { .. } => 6,
            InvalidNextHop { .. } => 8,
            OptionalAttributeError { .. } => 9,
            InvalidNetworkField => 10,
            MalformedAsPath => 11,
            InvalidRouteRefreshLength { .. } => 1,
        }
    }

    /// NOTIFICATION Data field, as RFC 4271 §6 prescribes per subcode.
    pub fn data(&self) -> Vec<u8> {
        use DecodeError::*;
        match self {
            BadMessageLength { length } => length.to_be_bytes().to_vec(),
            BadMessageType { msg_type } => vec![*msg_type],
            // §6.2: "the largest, locally-supported version number".
            UnsupportedVersion { .. } => u16::from(BGP_VERSION).to_be_bytes().to_vec(),
            UnsupportedCapability { capabilities } => capabilities.clone(),
            UnrecognizedWellKnownAttribute { attribute }
            | AttributeFlagsError { attribute }
            | AttributeLengthError { attribute }
            | InvalidOrigin { attribute }
            | InvalidNextHop { attribute }
            | OptionalAttributeError { attribute } => attribute.clone(),
            MissingWellKnownAttribute { type_code } => vec![*type_code],
            InvalidRouteRefreshLength { message } => message.clone(),
            _ => Vec::new(),
        }
    }

    /// The NOTIFICATION this error calls for (RFC 4271 §6).
    pub fn to_notification(&self) -> Notification {
        Notification {
            code: self.code(),
            subcode: self.subcode(),
            data: self.data(),
        }
    }
}
