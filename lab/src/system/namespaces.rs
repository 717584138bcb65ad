//! Named network namespaces (`/run/netns/<name>`, compatible with
//! `ip netns`), and the one safe way to get sockets into them.
//!
//! A socket belongs to the namespace of the thread that created it. We never
//! call `setns`/`unshare` on a thread we do not own: namespace work happens on
//! short-lived dedicated OS threads ([`in_namespace`], [`create_batch`]) that
//! create the sockets and hand them back.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
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
        return names
            .iter()
            .map(|_| Err(io::Error::new(e.kind(), e.to_string())))
            .collect();
    }
    let threads = threads.clamp(1, names.len().max(1));
    let chunk = names.len().div_ceil(threads).max(1);
    thread::scope(|scope| {
        // Collected: every worker starts before the first is joined.
        #[allow(clippy::needless_collect)]
        let workers: Vec<_> = names
            .chunks(chunk)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|name| create_here(name).and_then(|()| setup(name)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("namespace worker panicked"))
            .collect()
    })
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
