//! Layer-3 TUN devices: what a virtual switch's control plane sends and
//! receives through the pipeline's CPU port.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `TUNSETIFF` (linux/if_tun.h): `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// Layer-3 device, no packet-information prefix.
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

/// Opens a non-blocking TUN device named `name` (IP packets, no
/// packet-information prefix) in the calling thread's namespace.
pub fn open(name: &str) -> io::Result<OwnedFd> {
    // SAFETY: open(2) on a constant path; the fd is owned right below.
    let raw = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: an all-zero ifreq is valid; we fill the name and flags.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = IFF_TUN | IFF_NO_PI;
    // SAFETY: TUNSETIFF with a valid fd and a valid ifreq.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}
