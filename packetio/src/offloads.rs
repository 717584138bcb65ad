//! Segmentation and checksum offloads, turned off where turbonet reads
//! and writes whole frames (a packet socket would otherwise see 64 KiB
//! super-frames, or frames whose checksum the NIC was to fill in).

use std::io;

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
    let sock = crate::ethtool::control_socket()?;
    for cmd in [
        ETHTOOL_STSO,
        ETHTOOL_SGSO,
        ETHTOOL_SGRO,
        ETHTOOL_STXCSUM,
        ETHTOOL_SSG,
    ] {
        // struct ethtool_value { cmd, data }: the feature off.
        let mut value = [0u8; 8];
        value[0..4].copy_from_slice(&cmd.to_ne_bytes());
        if let Err(e) = crate::ethtool::request(&sock, ifname, &mut value) {
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
