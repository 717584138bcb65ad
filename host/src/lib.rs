//! turbonet-host: what turbonet asks of the machine it runs on. The
//! kernel's network side as one trait ([`kernel`]: namespaces, veth pairs,
//! addresses, routes, next hops, netem and tbf, through netlink or
//! recorded), named network namespaces (owned by root's user namespace or
//! a user's) and the one safe way into them ([`namespaces`]), processes
//! it starts detached or inside a namespace and finds again ([`process`]),
//! descriptors passed between processes ([`descriptors`]), a user's
//! control group ([`cgroup`]), a client's Unix stream that never raises
//! SIGPIPE ([`stream`]), and what the kernel says of a TCP connection.
//!
//! It knows nothing of scenarios or labs: callers compute what to ask for
//! and this crate asks. With the packet-I/O crate, the only crate of
//! turbonet that uses `unsafe` (system calls between fork and exec, raw
//! file descriptors).

#![allow(unsafe_code)]

pub mod cgroup;
pub mod descriptors;
pub mod error;
pub mod kernel;
pub mod namespaces;
pub mod process;
pub mod stream;

pub use error::{Error, Result};

/// `bytes` random bytes from the kernel, in hex: a secret (a token).
pub fn random_hex(bytes: usize) -> crate::Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| crate::err!("reading random bytes: {e}"))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Registers an owned descriptor (a TUN device, a netlink socket) with
/// tokio's reactor.
pub fn async_fd(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    // SAFETY: the OwnedFd moves into the AsyncFd, which then owns it: it
    // stays open and refers to the same file until the AsyncFd is dropped,
    // and `as_raw_fd` of an OwnedFd always returns it.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(std::convert::Into::into)
}

/// Segments the kernel retransmitted on a TCP socket so far
/// (`tcpi_total_retrans` of `TCP_INFO`); `None` if it cannot say.
pub fn tcp_retransmits(socket: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a zeroed `tcp_info` of `len` bytes, which the
    // kernel fills (at most `len` bytes) for the open socket `socket`
    // borrows.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    // SAFETY: all zeroes is a valid `tcp_info`, and the kernel wrote the
    // rest.
    (rc == 0).then(|| u64::from(unsafe { info.assume_init() }.tcpi_total_retrans))
}
