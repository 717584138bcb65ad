//! The crate's error type.

use std::net::SocketAddr;

/// Errors of the soft switch's library API (gRPC errors are `tonic::Status`).
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
    /// The device config is not the JSON the soft switch reads.
    #[error("device config: {0}")]
    DeviceConfigJson(#[from] serde_json::Error),
    /// The device config parses but cannot be used (a port out of range
    /// or listed twice, a cable without its other end, ...).
    #[error("invalid device config: {0}")]
    InvalidDeviceConfig(String),
    /// No forwarding pipeline has been committed yet.
    #[error("no forwarding pipeline is set")]
    NoPipeline,
    /// A counter id that the pipeline does not have.
    #[error("unknown counter id {0}")]
    UnknownCounter(u32),
    /// A counter index past the counter's size.
    #[error("counter {counter_id} index {index} is out of range (size {size})")]
    CounterIndex {
        /// The counter.
        counter_id: u32,
        /// The index asked for.
        index: usize,
        /// The counter's size.
        size: usize,
    },
    /// The server could not bind its address.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}
