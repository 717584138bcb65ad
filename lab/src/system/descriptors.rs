//! Descriptors passed between processes (`SCM_RIGHTS`), and the fork of a
//! process that has one thread: what `turbonet serve` is built of.

use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use nix::unistd::ForkResult;

/// The connection `accept` takes from `listener`.
pub fn accept(listener: &OwnedFd) -> std::io::Result<OwnedFd> {
    let fd = nix::sys::socket::accept4(
        listener.as_raw_fd(),
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )?;
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One message from `conn` into `buf`, and the descriptors that came with
/// it (at most `max`; close-on-exec).
pub fn receive(
    conn: &OwnedFd,
    buf: &mut [u8],
    max: usize,
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = vec![0u8; nix::sys::socket::cmsg_space::<RawFd>() * max.max(1)];
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        conn.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(list) = c {
            // SAFETY: the kernel installed these descriptors for this
            // process; each is owned once, here.
            fds.extend(
                list.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    Ok((msg.bytes, fds))
}

/// Makes `fds` this process's descriptors 0, 1, 2, ... in order, and
/// closes every other descriptor below 1024. The caller must own no other
/// descriptor it will close later (forget them: their numbers are reused).
pub fn become_stdio(fds: Vec<OwnedFd>) -> std::io::Result<()> {
    const HIGH: RawFd = 1024;
    let raw: Vec<RawFd> = fds.into_iter().map(IntoRawFd::into_raw_fd).collect();
    let mut high = Vec::with_capacity(raw.len());
    for fd in &raw {
        // SAFETY: fcntl duplicates a descriptor this process holds.
        let h = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, HIGH) };
        if h < 0 {
            return Err(std::io::Error::last_os_error());
        }
        high.push(h);
    }
    // SAFETY: closes every descriptor below HIGH, none of which an owner
    // will close again (the caller's contract); then puts the copies in
    // place (dup2 clears close-on-exec) and closes the copies.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, (HIGH - 1) as u32, 0u32);
        for (i, h) in high.iter().enumerate() {
            if libc::dup2(*h, i as RawFd) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(*h);
        }
    }
    Ok(())
}

/// Forks this process, which must have a single thread (else an error:
/// a child of a threaded process may find a lock held forever).
pub fn fork_single_threaded() -> std::io::Result<ForkResult> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse::<u32>().ok());
    if threads != Some(1) {
        return Err(std::io::Error::other(format!(
            "fork from a process with {} threads",
            threads.map_or("an unknown number of".to_owned(), |n| n.to_string())
        )));
    }
    // SAFETY: this process has one thread: the child starts with every lock
    // free and every structure consistent.
    Ok(unsafe { nix::unistd::fork() }?)
}
