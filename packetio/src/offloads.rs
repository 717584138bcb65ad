//! Segmentation and checksum offloads, turned off where turbonet reads
//! and writes whole frames (a packet socket would otherwise see 64 KiB
//! super-frames, or frames whose checksum the NIC was to fill in).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Turns off the offloads that would hand the engine frames it cannot pass
/// on: TCP segmentation (64 KiB super-frames), generic segmentation, and
/// transmit checksum offload (frames with partial checksums). Runs in the
/// calling thread's namespace, on interface `ifname`.
pub fn disable(ifname: &str) -> io::Result<()> {
    // linux/ethtool.h
    const ETHTOOL_STXCSUM: u32 = 0x17;
    const ETHTOOL_SSG: u32 = 0x19;
    const ETHTOOL_STSO: u32 = 0x1f;
    const ETHTOOL_SGSO: u32 = 0x24;
    const ETHTOOL_SGRO: u32 = 0x2c;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    // SAFETY: plain socket(2) call for the ioctl; owned right below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fd we own.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    for cmd in [
        ETHTOOL_STSO,
        ETHTOOL_SGSO,
        ETHTOOL_SGRO,
        ETHTOOL_STXCSUM,
        ETHTOOL_SSG,
    ] {
        let mut value = EthtoolValue { cmd, data: 0 };
        // SAFETY: an all-zero ifreq is valid; we set the name and data.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in ifr
            .ifr_name
            .iter_mut()
            .zip(ifname.bytes().take(libc::IFNAMSIZ - 1))
        {
            *dst = src as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
        // SAFETY: SIOCETHTOOL with a valid ifreq pointing at a live value.
        let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut ifr) };
        if r < 0 {
            let e = io::Error::last_os_error();
            // Features a driver cannot change are already off.
            if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) {
                return Err(io::Error::new(
                    e.kind(),
                    format!("ethtool {cmd:#x} on {ifname}: {e}"),
                ));
            }
        }
    }
    Ok(())
}
