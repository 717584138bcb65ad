//! The lab library's error type.
//!
//! Every failure is an [`Error`]: its kind says what a caller does with it
//! (the command line's exit code, the control API's status code), its
//! `Display` says what happened to whom, outermost first ("switch s1:
//! writing to device 1: ..."), as [`Context::context`] layers it.

use std::fmt;

/// `Result` with the lab's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The scenario does not parse or validate; every error found, each
    /// located in its text.
    #[error("{origin}: {} error{} found; nothing was created", .errors.len(), if .errors.len() == 1 { "" } else { "s" })]
    Scenario {
        /// The file, as named in the diagnostics.
        origin: String,
        /// The diagnostics (render them with `miette`).
        errors: Box<turbonet_topo::diag::ScenarioErrors>,
    },
    /// A request that cannot be carried out as asked: what was wrong and,
    /// where there is one, what would work.
    #[error("{0}")]
    Invalid(String),
    /// Something named does not exist (a lab, a node, a link), with the
    /// closest names.
    #[error("{0}")]
    NotFound(String),
    /// Not now or not here: the lab is in the wrong state, the machine
    /// lacks what it takes (root, a kernel feature, a program).
    #[error("{0}")]
    Refused(String),
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A system call failed (as `nix` reports it).
    #[error(transparent)]
    Sys(#[from] nix::Error),
    /// A netlink request failed.
    #[error(transparent)]
    Netlink(Box<rtnetlink::Error>),
    /// Asking the machine failed (a system call, netlink).
    #[error(transparent)]
    Host(Box<turbonet_host::Error>),
    /// Talking to a P4 switch failed.
    #[error(transparent)]
    P4(Box<turbonet_p4::Error>),
    /// The soft switch failed.
    #[error(transparent)]
    SoftSwitch(Box<turbonet_softswitch::Error>),
    /// A gRPC call failed.
    #[error("{}", .0.message())]
    Rpc(Box<tonic::Status>),
    /// A call to a lab's daemon failed.
    #[error(transparent)]
    Api(Box<turbonet_api::Error>),
    /// A gRPC connection failed.
    #[error(transparent)]
    Transport(Box<tonic::transport::Error>),
    /// A file turbonet wrote does not read back.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Anything else, said as a sentence.
    #[error("{0}")]
    Failed(String),
    /// `up` failed half way and took back what it had created.
    #[error("{source}; {}", match rollback {
        None => format!("rolled back: nothing of lab {lab} is left"),
        Some(e) => format!("rollback incomplete: {e}; run `turbonet down {lab}`"),
    })]
    RolledBack {
        /// The lab.
        lab: String,
        /// Why `up` failed.
        source: Box<Error>,
        /// Why the rollback did not finish, if it did not.
        rollback: Option<Box<Error>>,
    },
    /// `what` failed because of `source`.
    #[error("{what}: {source}")]
    Context {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: Box<Error>,
    },
}

pub use turbonet_api::Kind;

impl Error {
    /// The kind of the innermost error.
    pub fn kind(&self) -> Kind {
        match self {
            Error::Context { source, .. } | Error::RolledBack { source, .. } => source.kind(),
            Error::Scenario { .. } | Error::Invalid(_) => Kind::Invalid,
            Error::NotFound(_) => Kind::NotFound,
            Error::Refused(_) => Kind::Refused,
            Error::Rpc(status) => Kind::of_code(status.code()),
            Error::Api(e) => e.kind(),
            Error::SoftSwitch(e) if matches!(**e, turbonet_softswitch::Error::Usage(_)) => {
                Kind::Invalid
            }
            _ => Kind::Failed,
        }
    }

    /// The innermost error (past every context).
    pub fn root(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.root(),
            e => e,
        }
    }

    /// The invalid scenario's diagnostics, when that is what this is.
    pub fn scenario(&self) -> Option<(&str, &turbonet_topo::diag::ScenarioErrors)> {
        match self.root() {
            Error::Scenario { origin, errors } => Some((origin, &**errors)),
            _ => None,
        }
    }

    /// The operating system's error number, if a system call failed.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self.root() {
            Error::Io(e) => e.raw_os_error(),
            Error::Sys(e) => Some(*e as i32),
            Error::Host(e) => e.raw_os_error(),
            _ => None,
        }
    }
}

/// Boxes a large source error into its variant.
macro_rules! boxed_from {
    ($($source:ty => $variant:ident),* $(,)?) => {
        $(impl From<$source> for Error {
            fn from(e: $source) -> Self {
                Error::$variant(Box::new(e))
            }
        })*
    };
}

boxed_from! {
    rtnetlink::Error => Netlink,
    turbonet_host::Error => Host,
    turbonet_api::Error => Api,
    turbonet_p4::Error => P4,
    turbonet_softswitch::Error => SoftSwitch,
    tonic::Status => Rpc,
    tonic::transport::Error => Transport,
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::Failed(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Error::Failed(message.to_owned())
    }
}

impl From<std::num::TryFromIntError> for Error {
    fn from(e: std::num::TryFromIntError) -> Self {
        Error::Failed(e.to_string())
    }
}

impl From<std::num::ParseIntError> for Error {
    fn from(e: std::num::ParseIntError) -> Self {
        Error::Failed(e.to_string())
    }
}

impl From<std::num::ParseFloatError> for Error {
    fn from(e: std::num::ParseFloatError) -> Self {
        Error::Failed(e.to_string())
    }
}

impl From<tokio::sync::oneshot::error::RecvError> for Error {
    fn from(_: tokio::sync::oneshot::error::RecvError) -> Self {
        Error::Failed("a task ended without answering".to_owned())
    }
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Self {
        Error::Failed(format!("a task failed: {e}"))
    }
}

/// Adds what was being done to a failure, as `anyhow` does: `a.context(b)`
/// fails with "b: a".
pub trait Context<T> {
    /// Fails with `what` around the error (for an `Option`: with `what`).
    fn context(self, what: impl fmt::Display) -> Result<T>;

    /// [`Context::context`], the text computed only on failure.
    fn with_context<D: fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what.to_string(),
            source: Box::new(e.into()),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_layers_read_outermost_first_and_keep_the_kind() {
        let inner: Result<()> = Err(Error::NotFound("no link a--b".into()));
        let e = inner
            .context("link set")
            .context("lab k4")
            .expect_err("fails");
        assert_eq!(e.to_string(), "lab k4: link set: no link a--b");
        assert_eq!(e.kind(), Kind::NotFound);
        let io: std::io::Result<()> = Err(std::io::Error::from_raw_os_error(libc::ENOENT));
        let e = io.context("opening x").expect_err("fails");
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(e.kind(), Kind::Failed);
        assert_eq!(
            None::<u8>.context("no such thing").unwrap_err().to_string(),
            "no such thing"
        );
    }
}
