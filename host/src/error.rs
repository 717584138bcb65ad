//! The host crate's error type: a system call, a netlink request, or
//! something said as a sentence, with what was being done around it.

use std::fmt;

/// `Result` with the host's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A system call failed (as `nix` reports it).
    #[error(transparent)]
    Sys(#[from] nix::Error),
    /// A netlink request failed.
    #[error(transparent)]
    Netlink(Box<rtnetlink::Error>),
    /// Anything else, said as a sentence.
    #[error("{0}")]
    Failed(String),
    /// `what` failed because of `source`.
    #[error("{what}: {source}")]
    Context {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: Box<Error>,
    },
}

impl Error {
    /// The operating system's error number, if a system call failed.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Context { source, .. } => source.raw_os_error(),
            Error::Io(e) => e.raw_os_error(),
            Error::Sys(e) => Some(*e as i32),
            _ => None,
        }
    }
}

impl From<rtnetlink::Error> for Error {
    fn from(e: rtnetlink::Error) -> Self {
        Error::Netlink(Box::new(e))
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::Failed(message)
    }
}

impl From<std::num::TryFromIntError> for Error {
    fn from(e: std::num::TryFromIntError) -> Self {
        Error::Failed(e.to_string())
    }
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Self {
        Error::Failed(format!("a task failed: {e}"))
    }
}

/// Adds what was being done to a failure: `a.context(b)` fails with "b: a".
pub trait Context<T> {
    /// Fails with `what` around the error (for an `Option`: with `what`).
    fn context(self, what: impl fmt::Display) -> Result<T>;

    /// [`Context::context`], the text computed only on failure.
    fn with_context<D: fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.with_context(|| what)
    }

    fn with_context<D: fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what().to_string(),
            source: Box::new(e.into()),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.ok_or_else(|| Error::Failed(what.to_string()))
    }

    fn with_context<D: fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.ok_or_else(|| Error::Failed(what().to_string()))
    }
}

/// An [`Error::Failed`] from a format string.
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::Error::Failed(format!($($arg)*))
    };
}

/// Returns an [`Error::Failed`] from a format string.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::Error::Failed(format!($($arg)*)))
    };
}
