//! turbonet-packetio: moving frames between turbonet and the kernel, fast
//! and on time, shared by the link engine and the soft switch's driver.
//!
//! - [`socket`]: non-blocking `AF_PACKET` sockets bound to one interface,
//!   with kernel receive timestamps, VLAN tags given back, and batched
//!   `recvmmsg`/`sendmmsg` (one system call for up to a batch of frames);
//! - [`offloads`]: turning segmentation and checksum offloads off where
//!   turbonet reads and writes whole frames, over [`ethtool`] requests,
//!   which also read a driver's statistics (veth's XDP counters);
//! - [`tun`]: layer-3 TUN devices (the control planes of virtual switches);
//! - [`poller`]: epoll with nanosecond timeouts over many sockets, and an
//!   eventfd to wake it;
//! - [`clock`] and [`timing`]: a monotonic nanosecond clock that kernel
//!   timestamps map onto, high-resolution waits (`ppoll`), low timer slack
//!   and real-time scheduling for the thread that times frames;
//! - [`datagram`]: many datagrams per system call on a connected socket,
//!   for load generators;
//! - [`icmp`]: echo probes from raw ICMP sockets (`turbonet check`);
//! - [`timestamp`]: kernel receive timestamps on datagram sockets;
//! - [`checksum`]: the Internet checksum (RFC 1071) and its incremental
//!   update (RFC 1624), pure.
//!
//! Nearly all of turbonet's `unsafe` is here, each block with the reason
//! it is sound; the rest of the workspace denies `unsafe_code`.

#![allow(unsafe_code)]

pub mod checksum;
pub mod clock;
pub mod datagram;
pub mod ethtool;
pub mod icmp;
pub mod offloads;
pub mod poller;
pub mod ring;
pub mod socket;
pub mod timestamp;
pub mod timing;
pub mod tun;

pub use clock::Clock;
pub use socket::{PacketSocket, RxBatch};
