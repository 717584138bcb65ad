//! ICMP echo probes from raw sockets: many probes share one socket per
//! host, each naming itself in its payload, so thousands of pairs are
//! checked in one round.

use std::io;
use std::os::fd::AsRawFd;

use socket2::{Domain, Protocol, Socket, Type};

use crate::checksum::internet_checksum;

const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
/// `ICMP_FILTER` option of `SOL_RAW` sockets (linux/icmp.h).
const ICMP_FILTER: libc::c_int = 1;
/// What marks our probes' payloads.
const MAGIC: &[u8; 4] = b"tnet";

/// A non-blocking raw ICMP socket in the calling thread's namespace that
/// receives echo replies only.
pub fn socket() -> io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
    socket.set_nonblocking(true)?;
    // A raw ICMP socket also sees the echo requests other hosts send to this
    // one; filter everything but echo replies so they cannot crowd ours out
    // of the receive buffer (ICMP_FILTER: a set bit drops that type).
    let filter: u32 = !(1 << ECHO_REPLY);
    // SAFETY: setsockopt with a valid fd and a correctly sized u32 option.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_RAW,
            ICMP_FILTER,
            (&filter as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // Which interface each reply came in by (see `drain`).
    nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::Ipv4PacketInfo, &true)?;
    // Room for a reply from every other host of a large fabric.
    let _ =
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::RcvBufForce, &(8 << 20));
    Ok(socket)
}

/// An ICMP echo request whose payload carries `probe`.
pub fn echo_request(ident: u16, seq: u16, probe: u32) -> [u8; 16] {
    let mut p = [0u8; 16];
    p[0] = ECHO_REQUEST;
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    p[8..12].copy_from_slice(&probe.to_be_bytes());
    p[12..16].copy_from_slice(MAGIC);
    let sum = internet_checksum(&p);
    p[2..4].copy_from_slice(&sum.to_be_bytes());
    p
}

/// The probe an echo reply to us answers (raw sockets see the IP header).
pub fn parse_reply(packet: &[u8], ident: u16) -> Option<u32> {
    let ihl = usize::from(packet.first()? & 0x0f) * 4;
    let icmp = packet.get(ihl..)?;
    if icmp.len() < 16
        || icmp[0] != ECHO_REPLY
        || icmp[4..6] != ident.to_be_bytes()
        || &icmp[12..16] != MAGIC
    {
        return None;
    }
    Some(u32::from_be_bytes(icmp[8..12].try_into().ok()?))
}

/// Reads every reply waiting on `socket` and hands each probe it answers
/// to `answered`. A reply that came in by the loopback interface was
/// answered by this very node (the probed address put on `lo`), not by
/// its owner across the fabric: it answers nothing.
pub fn drain(socket: &Socket, ident: u16, mut answered: impl FnMut(u32)) {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    /// Every namespace's loopback interface is its first.
    const LOOPBACK: u32 = 1;
    let mut buf = [0u8; 2048];
    let mut control = nix::cmsg_space!(libc::in_pktinfo);
    loop {
        let (n, looped) = {
            let mut iov = [io::IoSliceMut::new(&mut buf)];
            let Ok(msg) = recvmsg::<()>(
                socket.as_raw_fd(),
                &mut iov,
                Some(&mut control),
                MsgFlags::MSG_DONTWAIT,
            ) else {
                break;
            };
            let looped = msg.cmsgs().into_iter().flatten().any(|c| {
                matches!(c, ControlMessageOwned::Ipv4PacketInfo(info)
                    if u32::try_from(info.ipi_ifindex) == Ok(LOOPBACK))
            });
            (msg.bytes, looped)
        };
        if looped {
            continue;
        }
        if let Some(probe) = parse_reply(&buf[..n], ident) {
            answered(probe);
        }
    }
}

/// The round-trip times of `count` echo requests to `to`, sent `gap`
/// apart: each from just before it was sent until the kernel stamped its
/// reply (`SO_TIMESTAMPNS`, so not how long this thread took to wake). A
/// request unanswered within `wait` has none.
pub fn round_trips(
    to: std::net::Ipv4Addr,
    count: u16,
    gap: std::time::Duration,
    wait: std::time::Duration,
) -> io::Result<Vec<std::time::Duration>> {
    let socket = socket()?;
    crate::timestamp::enable(&socket)?;
    socket.set_nonblocking(false)?;
    let ident = (std::process::id() as u16) ^ 0x5ee1;
    let to = socket2::SockAddr::from(std::net::SocketAddrV4::new(to, 0));
    let realtime = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128)
    };
    let mut times = Vec::with_capacity(usize::from(count));
    let mut buf = [0u8; 2048];
    for seq in 0..count {
        let sent = realtime();
        socket.send_to(&echo_request(ident, seq, u32::from(seq)), &to)?;
        let deadline = std::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            socket.set_read_timeout(Some(left))?;
            match crate::timestamp::recv(&socket, &mut buf) {
                Ok((n, stamped)) if parse_reply(&buf[..n], ident) == Some(u32::from(seq)) => {
                    let took = stamped.unwrap_or_else(realtime) - sent;
                    times.push(std::time::Duration::from_nanos(took.max(0) as u64));
                    break;
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        std::thread::sleep(gap);
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request_checksum_verifies_and_replies_parse_back() {
        let p = echo_request(0x1234, 2, 77);
        assert_eq!(
            internet_checksum(&p),
            0,
            "a packet with its checksum sums to zero"
        );
        let mut reply = vec![0x45u8; 20];
        reply[0] = 0x45;
        let mut icmp = p.to_vec();
        icmp[0] = ECHO_REPLY;
        reply.extend_from_slice(&icmp);
        assert_eq!(parse_reply(&reply, 0x1234), Some(77));
        assert_eq!(parse_reply(&reply, 0x1235), None);
        assert_eq!(parse_reply(&reply[..25], 0x1234), None);
    }
}
