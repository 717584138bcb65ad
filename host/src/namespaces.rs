//! Named network namespaces (`/run/netns/<name>`, compatible with
//! `ip netns`), and the one safe way to get sockets into them.
//!
//! A socket belongs to the namespace of the thread that created it. We never
//! call `setns`/`unshare` on a thread we do not own: namespace work happens on
//! short-lived dedicated OS threads ([`in_namespace`], [`create_batch`]) that
//! create the sockets and hand them back.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::thread;

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, setns, unshare};

/// Where named namespaces are bind-mounted (as `ip netns` does).
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// Path of the bind mount of a named namespace.
pub fn path(name: &str) -> PathBuf {
    Path::new(NETNS_RUN_DIR).join(name)
}

/// True when a named namespace exists.
pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Opens a named namespace (the fd keeps it alive and can be passed to
/// `setns` or as `IFLA_NET_NS_FD`).
pub fn open(name: &str) -> io::Result<OwnedFd> {
    File::open(path(name)).map(OwnedFd::from)
}

/// Makes `/run/netns` a shared mount point, as `ip netns add` does, so that
/// namespace bind mounts propagate to other mount namespaces.
fn prepare_run_dir() -> io::Result<()> {
    fs::create_dir_all(NETNS_RUN_DIR)?;
    let shared = || {
        mount(
            None::<&str>,
            NETNS_RUN_DIR,
            None::<&str>,
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
    };
    match shared() {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EINVAL) => {
            mount(
                Some(NETNS_RUN_DIR),
                NETNS_RUN_DIR,
                Some("none"),
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )?;
            shared().map_err(io::Error::from)
        }
        Err(e) => Err(e.into()),
    }
}

/// What the caller wants done inside each new namespace, on the thread that
/// created it, before the thread moves on.
pub trait Setup<T>: Fn(&str) -> io::Result<T> + Sync {}
impl<T, F: Fn(&str) -> io::Result<T> + Sync> Setup<T> for F {}

/// Creates the named namespaces `names` and runs `setup(name)` inside each
/// (sysctls, sockets). Work is spread over `threads` dedicated OS threads,
/// each of which unshares into every namespace it creates and exits at the
/// end, so no shared thread ever changes namespace.
///
/// Returns one result per name, in order. A name that already exists fails
/// with `AlreadyExists` and is left alone.
pub fn create_batch<T: Send>(
    names: &[String],
    threads: usize,
    setup: &impl Setup<T>,
) -> Vec<io::Result<T>> {
    if let Err(e) = prepare_run_dir() {
        return fail_all(names.len(), &e);
    }
    on_threads(names, threads, |name| {
        create_here(name).and_then(|()| setup(name))
    })
}

/// `count` copies of the error `e` (every namespace of a batch failed
/// alike).
fn fail_all<T>(count: usize, e: &io::Error) -> Vec<io::Result<T>> {
    (0..count)
        .map(|_| Err(io::Error::new(e.kind(), e.to_string())))
        .collect()
}

/// `f` of each of `items`, in order, spread over `threads` dedicated OS
/// threads (each takes a run of them and exits at the end, so no shared
/// thread ever changes namespace).
fn on_threads<I: Sync, T: Send>(
    items: &[I],
    threads: usize,
    f: impl Fn(&I) -> io::Result<T> + Sync,
) -> Vec<io::Result<T>> {
    let threads = threads.clamp(1, items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    let f = &f;
    thread::scope(|scope| {
        // Collected: every worker starts before the first is joined.
        #[allow(clippy::needless_collect)]
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|chunk| scope.spawn(move || chunk.iter().map(f).collect::<Vec<_>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("namespace worker panicked"))
            .collect()
    })
}

/// A new user namespace in which `uid` and `gid` are themselves and no
/// other user or group exists, owned by this process's (root's). Network
/// namespaces created in it ([`create_owned`]) belong to it: a process
/// that joins it as `uid` holds capabilities over those namespaces and
/// over no other (the kernel checks a network capability against the
/// user namespace that owns the network namespace). Nothing but the
/// namespaces created in it keeps it alive; [`owner_of`] finds it again.
pub fn new_user_namespace(uid: u32, gid: u32) -> io::Result<OwnedFd> {
    // Close-on-exec: a program this process starts meanwhile (on another
    // thread) must not hold an end open.
    let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (go_r, go_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (ready_w_raw, go_r_raw) = (ready_w.as_raw_fd(), go_r.as_raw_fd());
    // SAFETY: the child makes only async-signal-safe calls (unshare,
    // write, read, _exit) on values made before the fork, so forking a
    // process that may have other threads is sound.
    let child = match unsafe { nix::unistd::fork() }? {
        // SAFETY: as above: async-signal-safe calls on raw descriptors.
        nix::unistd::ForkResult::Child => unsafe {
            let ok = libc::unshare(libc::CLONE_NEWUSER) == 0;
            let byte = [u8::from(ok)];
            libc::write(ready_w_raw, byte.as_ptr().cast(), 1);
            let mut wait = [0u8; 1];
            libc::read(go_r_raw, wait.as_mut_ptr().cast(), 1);
            libc::_exit(0)
        },
        nix::unistd::ForkResult::Parent { child } => child,
    };
    drop((ready_w, go_r));
    let made = (|| {
        let mut byte = [0u8; 1];
        let n = nix::unistd::read(&ready_r, &mut byte)?;
        if n != 1 || byte[0] != 1 {
            return Err(io::Error::other("creating a user namespace (unshare)"));
        }
        let proc = format!("/proc/{child}");
        // Written by root of the parent namespace: setgroups stays
        // allowed, so the user's supplementary groups (set before joining)
        // keep counting for files.
        fs::write(format!("{proc}/uid_map"), format!("{uid} {uid} 1\n"))?;
        fs::write(format!("{proc}/gid_map"), format!("{gid} {gid} 1\n"))?;
        File::open(format!("{proc}/ns/user")).map(OwnedFd::from)
    })();
    // Done with it: the child may go (a byte, not only the pipe's end).
    let _ = nix::unistd::write(&go_w, &[1]);
    drop(go_w);
    let _ = nix::sys::wait::waitpid(child, None);
    made
}

/// The user namespace that owns the network namespace `ns`
/// (`NS_GET_USERNS`).
pub fn owner_of(ns: &impl AsFd) -> io::Result<OwnedFd> {
    const NS_GET_USERNS: libc::c_ulong = 0xb701;
    // SAFETY: an ioctl without an argument on a descriptor we hold; it
    // returns a new descriptor, which we own.
    let fd = unsafe { libc::ioctl(ns.as_fd().as_raw_fd(), NS_GET_USERNS as _) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether `userns` is this process's own user namespace (a network
/// namespace owned by it gives a user nothing of their own).
pub fn is_own_user_namespace(userns: &impl AsFd) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let theirs = nix::sys::stat::fstat(userns)?;
    let ours = fs::metadata("/proc/self/ns/user")?;
    Ok(theirs.st_dev == ours.dev() && theirs.st_ino == ours.ino())
}

/// Creates the named namespaces `names`, owned by the user namespace
/// `owner` ([`new_user_namespace`]), and runs `setup(name)` inside each
/// as [`create_batch`] does. A process that joins a user namespace must
/// have a single thread, so a child forked for it creates them and hands
/// each back over a socket; here they are named and set up.
pub fn create_owned<T: Send>(
    names: &[String],
    owner: &OwnedFd,
    threads: usize,
    setup: &impl Setup<T>,
) -> Vec<io::Result<T>> {
    if let Err(e) = prepare_run_dir() {
        return fail_all(names.len(), &e);
    }
    let made = match unshare_owned(names.len(), owner) {
        Ok(made) => made,
        Err(e) => return fail_all(names.len(), &e),
    };
    let named: Vec<(&String, OwnedFd)> = names.iter().zip(made).collect();
    on_threads(&named, threads, |(name, fd)| {
        name_here(name, fd)?;
        setns(fd, CloneFlags::CLONE_NEWNET)?;
        setup(name)
    })
}

/// `count` new network namespaces owned by `owner`, made by a child that
/// joins it (see [`create_owned`]).
fn unshare_owned(count: usize, owner: &OwnedFd) -> io::Result<Vec<OwnedFd>> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    let (here, there) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let (there_raw, owner_raw) = (there.as_raw_fd(), owner.as_raw_fd());
    // SAFETY: the child makes only async-signal-safe calls (setns,
    // unshare, open, sendmsg, close, _exit), with every buffer on its
    // stack and every path a literal.
    let child = match unsafe { nix::unistd::fork() }? {
        // SAFETY: as above; `send_new_namespaces` keeps to the same rule.
        nix::unistd::ForkResult::Child => unsafe {
            libc::_exit(i32::from(
                send_new_namespaces(there_raw, owner_raw, count).is_err(),
            ))
        },
        nix::unistd::ForkResult::Parent { child } => child,
    };
    drop(there);
    let mut fds = Vec::with_capacity(count);
    let mut failed = None;
    while fds.len() < count {
        let mut buf = [0u8; 4];
        match super::descriptors::receive(&here, &mut buf, 1) {
            Ok((4, mut got)) if got.len() == 1 => fds.push(got.remove(0)),
            Ok((4, _)) => {
                failed = Some(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
                break;
            }
            Ok((0, _)) => break,
            Ok(_) => {
                failed = Some(io::Error::other("a malformed reply"));
                break;
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let _ = nix::sys::wait::waitpid(child, None);
    match failed {
        Some(e) => Err(io::Error::new(
            e.kind(),
            format!("creating a namespace in the lab's user namespace: {e}"),
        )),
        None if fds.len() < count => Err(io::Error::other(
            "creating the lab's namespaces: the child that makes them stopped",
        )),
        None => Ok(fds),
    }
}

/// In the child of [`unshare_owned`]: joins `owner`, then makes `count`
/// network namespaces, sending each (as a descriptor, with 4 bytes) over
/// `sock`; an error is sent as its errno, without a descriptor.
///
/// # Safety
///
/// Between fork and exec only: async-signal-safe calls, nothing
/// allocated.
unsafe fn send_new_namespaces(sock: RawFd, owner: RawFd, count: usize) -> Result<(), i32> {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: the caller's contract; each call below is async-signal-safe
    // and its buffers live on this stack.
    unsafe {
        let send = |fd: Option<RawFd>, word: i32| -> bool {
            let payload = word.to_ne_bytes();
            let mut iov = libc::iovec {
                iov_base: payload.as_ptr() as *mut libc::c_void,
                iov_len: payload.len(),
            };
            let mut control = [0u64; 4];
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            if let Some(fd) = fd {
                msg.msg_control = control.as_mut_ptr().cast();
                msg.msg_controllen = libc::CMSG_SPACE(size_of::<RawFd>() as u32) as _;
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
                libc::CMSG_DATA(c).cast::<RawFd>().write_unaligned(fd);
            }
            libc::sendmsg(sock, &msg, 0) == payload.len() as isize
        };
        if libc::setns(owner, libc::CLONE_NEWUSER) != 0 {
            send(None, errno());
            return Err(errno());
        }
        for i in 0..count {
            if libc::unshare(libc::CLONE_NEWNET) != 0 {
                send(None, errno());
                return Err(errno());
            }
            let fd = libc::open(
                c"/proc/self/ns/net".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                send(None, errno());
                return Err(errno());
            }
            let sent = send(Some(fd), i as i32);
            libc::close(fd);
            if !sent {
                return Err(errno());
            }
        }
    }
    Ok(())
}

/// Names the namespace `ns` as `name` under [`NETNS_RUN_DIR`] (a bind
/// mount, as `ip netns attach` makes).
fn name_here(name: &str, ns: &OwnedFd) -> io::Result<()> {
    let target = path(name);
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&target)?;
    let source = format!("/proc/self/fd/{}", ns.as_raw_fd());
    let made = mount(
        Some(source.as_str()),
        &target,
        Some("none"),
        MsFlags::MS_BIND,
        None::<&str>,
    );
    if made.is_err() {
        let _ = fs::remove_file(&target);
    }
    made.map_err(io::Error::from)
}

/// Creates a named namespace and moves the calling thread into it.
/// Only for dedicated threads.
fn create_here(name: &str) -> io::Result<()> {
    let target = path(name);
    // O_EXCL: never take over a name someone else holds.
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&target)?;
    let made = unshare(CloneFlags::CLONE_NEWNET)
        .map_err(io::Error::from)
        .and_then(|()| {
            mount(
                Some("/proc/thread-self/ns/net"),
                &target,
                Some("none"),
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(io::Error::from)
        });
    if made.is_err() {
        let _ = fs::remove_file(&target);
    }
    made
}

/// Deletes a named namespace: detaches the bind mount and removes the file.
/// The kernel destroys the namespace (and the veths in it) once nothing else
/// holds it. Missing namespaces are not an error.
pub fn delete(name: &str) -> io::Result<()> {
    let target = path(name);
    if !target.exists() {
        return Ok(());
    }
    match umount2(&target, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => {}
        Err(e) => return Err(e.into()),
    }
    match fs::remove_file(&target) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The processes (pid and `comm`) whose network namespace is one of the
/// named ones, this process aside: programs started in a lab's nodes that
/// are still running (a daemon a user started with `turbonet exec`, Open
/// MPI's `orted` after its `mpirun` was killed). Each would keep its
/// namespace alive once the name is gone.
pub fn processes_in(names: &[String]) -> Vec<(u32, String)> {
    use std::os::unix::fs::MetadataExt;
    let ids: std::collections::HashSet<(u64, u64)> = names
        .iter()
        .filter_map(|n| fs::metadata(path(n)).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let me = std::process::id();
    let Ok(proc) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    proc.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| ids.contains(&(m.dev(), m.ino())))
        })
        .filter_map(|pid| {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            Some((pid, comm.trim_end().to_owned()))
        })
        .collect()
}

/// Runs `f` on a new OS thread that has joined the namespace `ns`, and
/// returns its result (typically sockets created there).
pub fn in_namespace<T: Send>(
    ns: &impl AsFd,
    f: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    let fd = ns.as_fd();
    thread::scope(|scope| {
        scope
            .spawn(move || {
                setns(fd, CloneFlags::CLONE_NEWNET)?;
                f()
            })
            .join()
            .expect("namespace thread panicked")
    })
}

/// Runs `f` on the calling thread inside the namespace `ns`, then moves
/// the thread back to where it was, even if `f` panics. The same as
/// [`in_namespace`] without a thread per call (tens of microseconds): for
/// the sockets a BGP speaker opens whenever a session connects, thousands
/// at once after a mass failure. `f` must not block nor await: nothing else
/// runs on the thread meanwhile.
pub fn here_in_namespace<T>(ns: &impl AsFd, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    thread_local! {
        /// This thread's own namespace, opened once.
        static HOME: io::Result<OwnedFd> = open_current();
    }
    HOME.with(|home| {
        let home = home
            .as_ref()
            .map_err(|e| io::Error::new(e.kind(), e.to_string()))?;
        /// Moves the thread home when dropped.
        struct Back<'a>(std::os::fd::BorrowedFd<'a>);
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                // A thread left in another namespace would open everything
                // after this in the wrong place.
                if let Err(e) = setns(self.0, CloneFlags::CLONE_NEWNET) {
                    tracing::error!("cannot return to the thread's namespace: {e}");
                    std::process::abort();
                }
            }
        }
        setns(ns.as_fd(), CloneFlags::CLONE_NEWNET)?;
        let _back = Back(home.as_fd());
        f()
    })
}

/// Opens the calling thread's current network namespace.
pub fn open_current() -> io::Result<OwnedFd> {
    File::open("/proc/thread-self/ns/net").map(OwnedFd::from)
}

/// Writes a sysctl of the calling thread's network namespace, e.g.
/// `write_sysctl("net/ipv4/ip_forward", "1")`.
pub fn write_sysctl(key: &str, value: &str) -> io::Result<()> {
    let path = Path::new("/proc/sys").join(key);
    OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| io::Error::new(e.kind(), format!("sysctl {key}: {e}")))
}

/// True when the kernel has a sysctl (checked in the caller's namespace).
pub fn has_sysctl(key: &str) -> bool {
    Path::new("/proc/sys").join(key).exists()
}

/// A route-netlink socket in the calling thread's namespace, as an owned fd
/// to be turned into an rtnetlink connection on the runtime.
pub fn route_socket() -> io::Result<OwnedFd> {
    let socket = rtnetlink::sys::Socket::new(rtnetlink::sys::protocols::NETLINK_ROUTE)?;
    owned_route_socket(socket)
}

/// A route-netlink socket in the calling thread's namespace that also
/// receives the kernel's notifications of the multicast `groups`
/// (`RTMGRP_*` bits), e.g. every route and link change.
pub fn route_socket_listening(groups: u32) -> io::Result<OwnedFd> {
    let mut socket = rtnetlink::sys::Socket::new(rtnetlink::sys::protocols::NETLINK_ROUTE)?;
    socket.bind(&rtnetlink::sys::SocketAddr::new(0, groups))?;
    owned_route_socket(socket)
}

/// Takes over `socket`'s descriptor, with large buffers.
fn owned_route_socket(socket: rtnetlink::sys::Socket) -> io::Result<OwnedFd> {
    // Large buffers: we pipeline many requests and must not lose ACKs.
    let fd = socket.as_raw_fd();
    std::mem::forget(socket);
    // SAFETY: `fd` came from the socket we just leaked; we are its only owner.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let sock = socket2::SockRef::from(&owned);
    let _ = sock.set_recv_buffer_size(8 << 20);
    let _ = sock.set_send_buffer_size(4 << 20);
    force_buffers(&owned);
    Ok(owned)
}

/// Turns a route-netlink socket (see [`route_socket`]) into an rtnetlink
/// handle on the current tokio runtime; the connection task runs there
/// until the handle and its clones are dropped.
pub fn route_handle(socket: OwnedFd) -> io::Result<rtnetlink::Handle> {
    Ok(route_handle_listening(socket)?.0)
}

/// The kernel's notifications a listening socket receives.
pub type Notifications = futures::channel::mpsc::UnboundedReceiver<(
    rtnetlink::packet_core::NetlinkMessage<rtnetlink::packet_route::RouteNetlinkMessage>,
    rtnetlink::sys::SocketAddr,
)>;

/// [`route_handle`] for a socket from [`route_socket_listening`], with the
/// notifications it receives.
pub fn route_handle_listening(socket: OwnedFd) -> io::Result<(rtnetlink::Handle, Notifications)> {
    let fd = socket.as_raw_fd();
    std::mem::forget(socket);
    // SAFETY: ownership of `fd` moves from the OwnedFd into the TokioSocket.
    let socket = unsafe { rtnetlink::sys::TokioSocket::from_raw_fd(fd) };
    let (connection, handle, notifications) = rtnetlink::from_socket(socket);
    tokio::spawn(connection);
    Ok((handle, notifications))
}

/// As root, lift the socket buffer limits past `rmem_max`/`wmem_max`.
fn force_buffers(fd: &OwnedFd) {
    use nix::sys::socket::{setsockopt, sockopt};
    let _ = setsockopt(fd, sockopt::RcvBufForce, &(8 << 20));
    let _ = setsockopt(fd, sockopt::SndBufForce, &(4 << 20));
}
