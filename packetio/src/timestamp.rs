//! Kernel receive timestamps on datagram sockets (`SO_TIMESTAMPNS`): when
//! a probe arrived, not when the reader got round to it.

use std::io;
use std::os::fd::AsRawFd;

/// Asks the kernel to stamp every datagram `socket` receives.
pub fn enable(socket: &impl AsRawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with a valid fd and an int option.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Receives one datagram (blocking as the socket does) into `payload`:
/// its length and its kernel receive time (CLOCK_REALTIME, ns), if
/// stamped.
pub fn recv(socket: &impl AsRawFd, payload: &mut [u8]) -> io::Result<(usize, Option<i128>)> {
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // SAFETY: an all-zero msghdr is valid; we point it at live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: recvmsg with a msghdr whose buffers outlive the call.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                let received = i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec);
                return Ok((n as usize, Some(received)));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n as usize, None))
}
