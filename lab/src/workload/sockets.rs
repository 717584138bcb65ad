//! Sockets in a host's namespace: created on a short-lived thread that has
//! joined it (the socket stays there whichever thread uses it after), then
//! handed to tokio.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use turbonet_topo::NodeId;

use super::Context;
use crate::error::{Context as _, Result};
use crate::names;
use turbonet_host::namespaces;

/// UDP socket buffers: room for a burst at tens of gigabits. TCP sockets
/// keep the kernel's autotuning, bounded by the host's own
/// `net.ipv4.tcp_rmem` and `tcp_wmem`, as an application that sets no
/// buffers gets (iperf3 without `-w`): a window is the host's to limit.
const BUFFER: usize = 4 << 20;

/// Runs `f` in `host`'s namespace (on a thread of its own, off the
/// runtime's threads).
pub(crate) async fn in_host<T: Send + 'static>(
    cx: &Context,
    host: NodeId,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T> {
    let node = &cx.lab.fabric.node(host).name;
    let ns_name = names::node_namespace(&cx.lab.name, node);
    let what = format!("opening a socket in {node}");
    tokio::task::spawn_blocking(move || {
        let ns = namespaces::open(&ns_name)?;
        namespaces::in_namespace(&ns, f)
    })
    .await
    .map_err(|e| crate::Error::Failed(format!("{what}: {e}")))?
    .with_context(|| what)
}

/// A TCP listener on `addr:port` in `host`'s namespace.
pub(crate) async fn listen(
    cx: &Context,
    host: NodeId,
    addr: Ipv4Addr,
    port: u16,
) -> Result<TcpListener> {
    let std = in_host(cx, host, move || {
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        s.set_reuse_address(true)?;
        s.bind(&SocketAddrV4::new(addr, port).into())?;
        s.listen(1024)?;
        s.set_nonblocking(true)?;
        Ok(std::net::TcpListener::from(s))
    })
    .await?;
    Ok(TcpListener::from_std(std)?)
}

/// A TCP connection from `from:sport` (`0`: any port) in `host`'s
/// namespace to `to`, with congestion control `congestion` if given, and
/// with at most about `unsent` bytes written and not yet sent if given
/// (`TCP_NOTSENT_LOWAT`: what a sender stops writing then stops on the
/// wire soon, not once a send buffer of seconds drains).
pub(crate) async fn connect(
    cx: &Context,
    host: NodeId,
    from: SocketAddrV4,
    to: SocketAddrV4,
    congestion: Option<&str>,
    unsent: Option<u32>,
) -> Result<TcpStream> {
    let congestion = congestion.map(str::to_owned);
    let std = in_host(cx, host, move || {
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        // A port the last run's connection still holds (TIME_WAIT).
        s.set_reuse_address(true)?;
        s.set_tcp_nodelay(true)?;
        if let Some(bytes) = unsent {
            s.set_tcp_notsent_lowat(bytes)?;
        }
        if let Some(cc) = &congestion {
            s.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("congestion control {cc} (is its module loaded?): {e}"),
                )
            })?;
        }
        s.bind(&from.into())?;
        s.set_nonblocking(true)?;
        Ok(std::net::TcpStream::from(s))
    })
    .await?;
    let socket = TcpSocket::from_std_stream(std);
    socket
        .connect(SocketAddr::V4(to))
        .await
        .with_context(|| format!("connecting {from} to {to}"))
}

/// A UDP socket bound to `addr:port` in `host`'s namespace.
pub(crate) async fn udp(cx: &Context, host: NodeId, addr: SocketAddrV4) -> Result<UdpSocket> {
    let std = in_host(cx, host, move || {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        s.set_reuse_address(true)?;
        s.set_recv_buffer_size(BUFFER)?;
        s.set_send_buffer_size(BUFFER)?;
        s.bind(&addr.into())?;
        s.set_nonblocking(true)?;
        Ok(std::net::UdpSocket::from(s))
    })
    .await?;
    Ok(UdpSocket::from_std(std)?)
}

/// Datagrams `host`'s kernel dropped so far because a UDP socket's receive
/// buffer was full (`RcvbufErrors` of its `/proc/net/snmp`): drops of this
/// machine, not of the fabric.
pub(crate) async fn udp_receive_drops(cx: &Context, host: NodeId) -> Result<u64> {
    in_host(cx, host, || {
        let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
        Ok(rcvbuf_errors(&snmp).unwrap_or(0))
    })
    .await
}

/// `RcvbufErrors` of the `Udp:` lines of `/proc/net/snmp` (a line of
/// names, then one of values).
fn rcvbuf_errors(snmp: &str) -> Option<u64> {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next()?, udp.next()?);
    let at = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Segments the kernel retransmitted on `stream` so far.
pub(crate) fn retransmits(stream: &TcpStream) -> Option<u64> {
    use std::os::fd::AsFd;
    turbonet_host::tcp_retransmits(stream.as_fd())
}

#[cfg(test)]
mod tests {
    #[test]
    fn receive_buffer_drops_are_read_from_the_udp_lines_of_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    Udp: 100 0 7 90 7 0\n\
                    UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    UdpLite: 0 0 0 0 0 0\n";
        assert_eq!(super::rcvbuf_errors(snmp), Some(7));
        assert_eq!(super::rcvbuf_errors("Ip: 1\n"), None);
    }
}
