//! What turbonet needs of the operating system beside netlink: named
//! network namespaces and the one safe way into them ([`namespaces`]),
//! and processes it starts detached or inside a namespace and finds again
//! ([`process`]).
//!
//! With the packet-I/O crate, the only place of the lab that uses
//! `unsafe` (system calls between fork and exec, raw file descriptors).

#![allow(unsafe_code)]

pub mod namespaces;
pub mod process;

/// Registers an owned descriptor (a TUN device) with tokio's reactor.
pub fn async_fd(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    // SAFETY: the OwnedFd moves into the AsyncFd, which then owns it: it
    // stays open and refers to the same file until the AsyncFd is dropped,
    // and `as_raw_fd` of an OwnedFd always returns it.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(std::convert::Into::into)
}
