//! Descriptors passed between processes (`SCM_RIGHTS`), and the fork of a
//! process that has one thread: what `turbonet serve` is built of.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

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
/// it: exactly `max` at most (close-on-exec). A message that carried more
/// (the kernel truncates the control data and sets `MSG_CTRUNC`) or was
/// longer than `buf` is an error, and every descriptor that did arrive is
/// closed: a client must not make a long-lived service hold descriptors.
pub fn receive(
    conn: &OwnedFd,
    buf: &mut [u8],
    max: usize,
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    receive_with(conn, buf, max, 0)
}

/// [`receive`] of a message already there; never waits (`EAGAIN` when
/// there is none).
pub fn receive_now(
    conn: &OwnedFd,
    buf: &mut [u8],
    max: usize,
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    receive_with(conn, buf, max, libc::MSG_DONTWAIT)
}

fn receive_with(
    conn: &OwnedFd,
    buf: &mut [u8],
    max: usize,
    flags: libc::c_int,
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    // Room for one SCM_RIGHTS message of `max` descriptors and no more.
    // SAFETY: CMSG_SPACE only computes a size.
    let space_len = unsafe { libc::CMSG_SPACE((max.max(1) * size_of::<RawFd>()) as u32) } as usize;
    // u64s: the control buffer must be aligned for `cmsghdr`.
    let mut space = vec![0u64; space_len.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; its pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = space_len as _;
    // SAFETY: `msg` points at `iov` (over `buf`) and `space`, both live
    // and of the lengths given, for the length of the call.
    let n = unsafe { libc::recvmsg(conn.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC | flags) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the CMSG_* macros walk the control data the kernel wrote
    // into `space` (msg_controllen says how much); each SCM_RIGHTS entry
    // holds descriptors the kernel installed in this process, each owned
    // once, here, so that they close on every path below.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(std::io::Error::other(format!(
            "more than {max} descriptors came with a message"
        )));
    }
    if msg.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(std::io::Error::other(format!(
            "a message longer than {} bytes",
            buf.len()
        )));
    }
    Ok((n as usize, fds))
}

/// The text of a file a client passed as `fd`, read from the descriptor
/// itself and never reopened by a path (`/dev/fd/N` would open the file
/// again with this process's rights: a root service would read what the
/// client may not). The descriptor must be open for reading (an `O_PATH`
/// one is refused) on a regular file of at most `max` bytes.
pub fn read_passed(fd: OwnedFd, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let stat = nix::sys::stat::fstat(&fd)?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if size > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{size} bytes, more than the {max} a file may have"),
        ));
    }
    let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)?;
    if flags & libc::O_PATH != 0 || flags & libc::O_ACCMODE == libc::O_WRONLY {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "not opened for reading",
        ));
    }
    let mut text = String::new();
    // Read from where the file starts, however far the client had read;
    // at most `max` bytes, whatever the file grows to meanwhile.
    let mut file = std::fs::File::from(fd);
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
    file.take(max).read_to_string(&mut text)?;
    Ok(text)
}

/// Whether `fd` is a namespace (a file of `nsfs`: `/proc/PID/ns/*`, or a
/// name under `/run/netns`), which a command must not be handed as its
/// standard input, output or error by someone else.
pub fn is_namespace(fd: &impl AsFd) -> bool {
    const NSFS_MAGIC: i64 = 0x6e73_6673;
    nix::sys::statfs::fstatfs(fd).is_ok_and(|s| s.filesystem_type().0 == NSFS_MAGIC)
}

/// Makes the first three of `fds` this process's standard input, output
/// and error, and a fourth, if any, its descriptor 3, which it returns
/// owned; closes every other descriptor below 1024. The caller must own
/// no other descriptor it will close later (forget them: their numbers
/// are reused).
pub fn become_stdio(fds: Vec<OwnedFd>) -> std::io::Result<Option<OwnedFd>> {
    const HIGH: RawFd = 1024;
    let raw: Vec<RawFd> = fds
        .into_iter()
        .take(4)
        .map(IntoRawFd::into_raw_fd)
        .collect();
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
    // SAFETY: descriptor 3 was put in place just above, from the fourth
    // of `fds`, and nothing else owns it.
    Ok((high.len() == 4).then(|| unsafe { OwnedFd::from_raw_fd(3) }))
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
