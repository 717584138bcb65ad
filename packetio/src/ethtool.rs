//! The `SIOCETHTOOL` ioctl in the calling thread's namespace: one request
//! on one interface, and a driver's own statistics (`ethtool -S`), such
//! as what veth counts of the XDP programs on its receive queues.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

/// A datagram socket to send ethtool requests on.
pub(crate) fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: a plain socket(2) call; the descriptor is owned right away.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor we just opened and own alone.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Runs one `SIOCETHTOOL` request on `ifname`; `data` is the ethtool
/// command the caller wrote, with room for its answer.
pub(crate) fn request(socket: &OwnedFd, ifname: &str, data: &mut [u8]) -> io::Result<()> {
    if ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {ifname} too long"),
        ));
    }
    // SAFETY: an all-zero ifreq is valid; we set the name and data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = data.as_mut_ptr().cast();
    // SAFETY: SIOCETHTOOL with a valid ifreq whose data points at `data`,
    // which holds the command and room for its answer (sized by the caller
    // from the kernel's own counts); both outlive the call.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCETHTOOL, &raw mut ifr) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Every statistic of `ifname`'s driver, by name.
pub fn stats(ifname: &str) -> io::Result<Vec<(String, u64)>> {
    let socket = control_socket()?;
    // ETHTOOL_GSSET_INFO: how many statistics (struct ethtool_sset_info:
    // cmd, reserved, sset_mask u64, then one u32 per set in the mask).
    let mut info = [0u8; 20];
    info[0..4].copy_from_slice(&ETHTOOL_GSSET_INFO.to_ne_bytes());
    info[8..16].copy_from_slice(&(1u64 << ETH_SS_STATS).to_ne_bytes());
    request(&socket, ifname, &mut info)?;
    let count = u32::from_ne_bytes(info[16..20].try_into().expect("4 bytes")) as usize;
    // ETHTOOL_GSTRINGS (struct ethtool_gstrings: cmd, string_set, len,
    // then the names).
    let mut names = vec![0u8; 12 + count * ETH_GSTRING_LEN];
    names[0..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    names[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    names[8..12].copy_from_slice(&(count as u32).to_ne_bytes());
    request(&socket, ifname, &mut names)?;
    // ETHTOOL_GSTATS (struct ethtool_stats: cmd, n_stats, then u64s).
    let mut values = vec![0u8; 8 + count * 8];
    values[0..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
    values[4..8].copy_from_slice(&(count as u32).to_ne_bytes());
    request(&socket, ifname, &mut values)?;
    Ok((0..count)
        .map(|i| {
            let raw = &names[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            let value =
                u64::from_ne_bytes(values[8 + i * 8..16 + i * 8].try_into().expect("8 bytes"));
            (String::from_utf8_lossy(&raw[..end]).into_owned(), value)
        })
        .collect())
}

/// Frames the XDP program on veth `ifname` saw and dropped, over all its
/// receive queues (`rx_queue_N_xdp_packets`, `rx_queue_N_xdp_drops`).
pub fn xdp_stats(ifname: &str) -> io::Result<(u64, u64)> {
    let (mut seen, mut dropped) = (0, 0);
    for (name, value) in stats(ifname)? {
        if name.starts_with("rx_queue_") {
            if name.ends_with("_xdp_packets") {
                seen += value;
            } else if name.ends_with("_xdp_drops") {
                dropped += value;
            }
        }
    }
    Ok((seen, dropped))
}
