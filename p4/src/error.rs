//! The crate's error type.

/// What can go wrong loading a P4Info, resolving the pipeline in it, or
/// talking to a device.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The compiled-in P4Runtime descriptor set could not be loaded.
    #[error("P4Runtime descriptor set: {0}")]
    Descriptor(#[from] prost_reflect::DescriptorError),
    /// The text-format P4Info does not parse.
    #[error("P4Info text format: {0}")]
    P4InfoText(#[from] prost_reflect::text_format::ParseError),
    /// The parsed P4Info did not transcode into `p4.config.v1.P4Info`.
    #[error("P4Info transcoding: {0}")]
    Transcode(#[from] prost::DecodeError),
    /// The P4Info parses but is not usable (duplicate or dangling ids, ...).
    #[error("invalid P4Info: {0}")]
    InvalidP4Info(String),
    /// The P4Info is not the turbonet pipeline's: what it lacks.
    #[error("{0}")]
    NotTurbonet(String),
    /// A value does not fit the field or parameter it is for.
    #[error("{value} does not fit in {bitwidth} bits")]
    TooWide {
        /// The value.
        value: u64,
        /// The field's width.
        bitwidth: u32,
    },
    /// A token that cannot travel in gRPC metadata.
    #[error("the token must be printable ASCII")]
    BadToken,
    /// No connection to the device's P4Runtime server.
    #[error("connecting to the P4Runtime server at {addr}: {source}")]
    Connect {
        /// Where.
        addr: String,
        /// Why.
        source: tonic::transport::Error,
    },
    /// Another controller is primary (a higher election id).
    #[error(
        "device {device_id} at {addr}: not primary (another controller holds a higher election \
         id than {election_id}): {message}"
    )]
    NotPrimary {
        /// The device.
        device_id: u64,
        /// Where.
        addr: String,
        /// The election id offered.
        election_id: u128,
        /// The device's words.
        message: String,
    },
    /// The device closed the stream.
    #[error("device {device_id} at {addr} closed the stream {when}")]
    StreamClosed {
        /// The device.
        device_id: u64,
        /// Where.
        addr: String,
        /// During what.
        when: &'static str,
    },
    /// An RPC failed: what it was for, and the device's status (for a
    /// Write, with its first per-update errors).
    #[error("{what}: {message}")]
    Rpc {
        /// What the call was for.
        what: String,
        /// The status code.
        code: tonic::Code,
        /// The status message, with details.
        message: String,
    },
}

impl Error {
    /// An RPC's failure.
    pub(crate) fn rpc(what: impl Into<String>, status: &tonic::Status) -> Self {
        Error::Rpc {
            what: what.into(),
            code: status.code(),
            message: status.message().to_owned(),
        }
    }
}
