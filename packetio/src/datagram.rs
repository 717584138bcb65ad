//! Datagrams in bulk on a connected socket: many copies of one payload
//! sent with one `sendmmsg`, and whatever is waiting received and counted
//! with one `recvmmsg`. What a load generator needs to keep a path full
//! without the sender's system calls being what limits it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The most datagrams one call moves.
pub const BATCH: usize = 64;

/// Sends up to `n` (at most [`BATCH`]) copies of `payload` on the
/// connected datagram socket `socket`; returns how many the kernel took
/// (fewer when its buffer is full and the socket is non-blocking).
pub fn send_copies(socket: BorrowedFd<'_>, payload: &[u8], n: usize) -> io::Result<usize> {
    let n = n.min(BATCH);
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    // SAFETY: an all-zero msghdr is valid; every header points at the one
    // iovec, which points at `payload`; the kernel only reads them.
    let mut headers: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for h in &mut headers[..n] {
        h.msg_hdr.msg_iov = &mut iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    loop {
        // SAFETY: sendmmsg over `n` initialised headers that outlive the call.
        let r = unsafe {
            libc::sendmmsg(
                socket.as_raw_fd(),
                headers.as_mut_ptr(),
                n as libc::c_uint,
                0,
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives what is waiting on `socket` (blocking for the first datagram
/// as the socket does, up to its receive timeout) into `scratch`, up to
/// [`BATCH`] datagrams; returns how many. The payloads are overwritten by
/// the next call: this counts datagrams, it does not keep them.
pub fn recv_count(socket: BorrowedFd<'_>, scratch: &mut [u8; 2048]) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: scratch.as_mut_ptr().cast(),
        iov_len: scratch.len(),
    };
    // SAFETY: as in `send_copies`; every header points at the one scratch
    // buffer, which the kernel may overwrite as often as it likes.
    let mut headers: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for h in &mut headers {
        h.msg_hdr.msg_iov = &mut iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    loop {
        // SAFETY: recvmmsg over BATCH initialised headers, one live buffer.
        let r = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                headers.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
