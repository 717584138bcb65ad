//! The crate's error type.

use std::net::SocketAddr;

use turbonet_p4::google::rpc::Code;

/// `Result` with the soft switch's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the soft switch's library API (gRPC errors are `tonic::Status`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The P4Info is not usable.
    #[error(transparent)]
    P4(#[from] turbonet_p4::Error),
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
    /// The server could not bind its Unix socket.
    #[error("cannot serve on {}: {source}", .path.display())]
    BindUnix {
        /// The socket's path.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// `turbonet softswitch` was asked for something it cannot do (a port
    /// that is not `PORT@IFACE`, TCP without a token): what was wrong.
    #[error("{0}")]
    Usage(String),
    /// Asking the machine failed (a namespace, a file, a socket).
    #[error(transparent)]
    Host(#[from] turbonet_host::Error),
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Anything else, said as a sentence.
    #[error("{0}")]
    Failed(String),
}

/// The error of one update or read request: a google.rpc code and a
/// message (becomes a `p4.v1.Error` or a gRPC status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Error {
    /// Canonical code.
    pub code: Code,
    /// What was wrong, for people.
    pub message: String,
}

impl P4Error {
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    pub(crate) fn invalid(m: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, m)
    }
    pub(crate) fn out_of_range(m: impl Into<String>) -> Self {
        Self::new(Code::OutOfRange, m)
    }
    pub(crate) fn not_found(m: impl Into<String>) -> Self {
        Self::new(Code::NotFound, m)
    }
    pub(crate) fn unimplemented(m: impl Into<String>) -> Self {
        Self::new(Code::Unimplemented, m)
    }
}

impl std::fmt::Display for P4Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str_name(), self.message)
    }
}

impl std::error::Error for P4Error {}

impl From<P4Error> for tonic::Status {
    fn from(e: P4Error) -> Self {
        tonic::Status::new(tonic::Code::from_i32(e.code as i32), e.message)
    }
}
