//! The API's error type, and the kinds of failure that cross the wire as
//! gRPC status codes.

/// `Result` with the API's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure an error is, whatever its context: what a caller
/// does with it (the command line's exit code), and the gRPC status code
/// it crosses the wire as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The input is wrong: a scenario with errors, a bad argument, an
    /// unknown name.
    Invalid,
    /// Something named does not exist.
    NotFound,
    /// Not in the lab's (or the machine's) present state.
    Refused,
    /// It was tried and failed.
    Failed,
}

impl Kind {
    /// The gRPC status code a failure of this kind is sent as.
    pub fn code(self) -> tonic::Code {
        match self {
            Kind::Invalid => tonic::Code::InvalidArgument,
            Kind::NotFound => tonic::Code::NotFound,
            Kind::Refused => tonic::Code::FailedPrecondition,
            Kind::Failed => tonic::Code::Internal,
        }
    }

    /// The kind a gRPC status code says.
    pub fn of_code(code: tonic::Code) -> Kind {
        match code {
            tonic::Code::InvalidArgument => Kind::Invalid,
            tonic::Code::NotFound => Kind::NotFound,
            tonic::Code::FailedPrecondition => Kind::Refused,
            _ => Kind::Failed,
        }
    }
}

/// What went wrong talking to a lab's daemon, or reading what it sent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value that does not convert (a parameter out of range).
    #[error("{0}")]
    Invalid(String),
    /// The daemon cannot be reached (the lab is not up).
    #[error("{0}")]
    Refused(String),
    /// The daemon did not answer in time.
    #[error("{0}")]
    Failed(String),
    /// The daemon answered with an error.
    #[error("{}", .0.message())]
    Rpc(Box<tonic::Status>),
    /// The connection failed.
    #[error(transparent)]
    Transport(Box<tonic::transport::Error>),
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A value sent as JSON does not read back.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// What kind of failure it is.
    pub fn kind(&self) -> Kind {
        match self {
            Error::Invalid(_) => Kind::Invalid,
            Error::Refused(_) => Kind::Refused,
            Error::Rpc(status) => Kind::of_code(status.code()),
            _ => Kind::Failed,
        }
    }
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        Error::Rpc(Box::new(status))
    }
}

impl From<tonic::transport::Error> for Error {
    fn from(e: tonic::transport::Error) -> Self {
        Error::Transport(Box::new(e))
    }
}
