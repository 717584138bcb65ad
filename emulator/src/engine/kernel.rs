//! The kernel impairment engine: a `netem` root qdisc on each end of a
//! link (each end shapes its own egress, i.e. one direction), installed
//! through rtnetlink in the end's namespace.

use std::io;
use std::os::fd::OwnedFd;

use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use turbonet_injectors::Impairment;

use crate::netns;
use crate::tc;

/// `NLMSG_ERROR`: the kernel's answer to a request with `NLM_F_ACK`.
const NLMSG_ERROR: u16 = 2;

/// Installs (or replaces) netem with `imp` as the root qdisc of interface
/// `ifindex` in namespace `ns`, with netem's PRNG seeded by `seed`.
pub fn apply(ns: &OwnedFd, ifindex: u32, imp: &Impairment, seed: u64) -> io::Result<()> {
    let request = tc::new_qdisc_netem(ifindex, imp, seed)
        .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.to_string()))?;
    netns::in_namespace(ns, || {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.send_to(&request, &SocketAddr::new(0, 0), 0)?;
        let mut buf = vec![0u8; 8192];
        loop {
            let n = socket.recv(&mut &mut buf[..], 0)?;
            let mut at = 0;
            while at + 16 <= n {
                let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
                let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().expect("2 bytes"));
                if kind == NLMSG_ERROR && at + 20 <= n {
                    let code =
                        i32::from_ne_bytes(buf[at + 16..at + 20].try_into().expect("4 bytes"));
                    return if code == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::from_raw_os_error(-code))
                    };
                }
                if len == 0 {
                    break;
                }
                at += (len + 3) & !3;
            }
        }
    })
}
