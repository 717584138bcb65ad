//! A `TPACKET_V2` receive ring on an `AF_PACKET` socket: the kernel writes
//! each frame into memory shared with the process, with its timestamp, and
//! the reader walks the ring without a system call per batch (it sleeps in
//! `poll`/`epoll` when the ring is empty). The alternative to
//! [`crate::socket::PacketSocket::recv_batch`] (`recvmmsg`) that `turbonet
//! bench --engine --part io` measures.
//!
//! The ring is allocated up front and pinned: `frames` x `frame_size`
//! bytes per socket, whatever the traffic (`recvmmsg` uses the socket's
//! receive buffer only while frames wait).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

const ETH_P_ALL: u16 = 0x0003;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_VERSION: libc::c_int = 10;
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;

/// `struct tpacket2_hdr` (linux/if_packet.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct Tpacket2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
    tp_padding: [u8; 4],
}

/// `struct tpacket_req` (linux/if_packet.h).
#[repr(C)]
struct TpacketReq {
    tp_block_size: libc::c_uint,
    tp_block_nr: libc::c_uint,
    tp_frame_size: libc::c_uint,
    tp_frame_nr: libc::c_uint,
}

/// A receive ring bound to one interface.
#[derive(Debug)]
pub struct RxRing {
    fd: OwnedFd,
    map: NonNull<u8>,
    len: usize,
    frame_size: usize,
    frames: usize,
    next: usize,
}

// SAFETY: the mapping belongs to this value alone; the kernel's writes are
// ordered by tp_status, which is read with acquire and written with
// release semantics below.
unsafe impl Send for RxRing {}

impl RxRing {
    /// A ring of `frames` slots of `frame_size` bytes (a power of two, at
    /// least the largest frame plus 64 bytes of header) on interface
    /// `ifindex` of the calling thread's namespace.
    pub fn bind(ifindex: u32, frames: usize, frame_size: usize) -> io::Result<RxRing> {
        if !frame_size.is_power_of_two() || frame_size < 128 || frames == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a ring needs frames and a power-of-two frame size of 128 bytes or more",
            ));
        }
        // One block per 128 KiB (whole frames), as many as the frames need.
        let block = frame_size.max(128 << 10);
        let per_block = block / frame_size;
        let blocks = frames.div_ceil(per_block);
        let frames = blocks * per_block;
        // Protocol 0 until bound, as `PacketSocket` opens its sockets: no
        // frame of any interface reaches the ring before `bind`, and bind
        // waits for no RCU grace period.
        // SAFETY: socket(2) with constant arguments.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just returned by socket(2), owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt(&fd, PACKET_VERSION, &TPACKET_V2)?;
        let req = TpacketReq {
            tp_block_size: block as libc::c_uint,
            tp_block_nr: blocks as libc::c_uint,
            tp_frame_size: frame_size as libc::c_uint,
            tp_frame_nr: frames as libc::c_uint,
        };
        setsockopt(&fd, PACKET_RX_RING, &req)?;
        let len = block * blocks;
        // SAFETY: mapping the ring the kernel just allocated for this
        // socket, its whole length, shared.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = RxRing {
            fd,
            map: NonNull::new(map.cast()).expect("mmap returned a mapping"),
            len,
            frame_size,
            frames,
            next: 0,
        };
        // Bound last: no frame lands in the ring before it is mapped.
        let mut addr: libc::sockaddr_ll = {
            // SAFETY: an all-zero sockaddr_ll is valid.
            unsafe { std::mem::zeroed() }
        };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = ETH_P_ALL.to_be();
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: bind(2) with a sockaddr_ll of the right length.
        let r = unsafe {
            libc::bind(
                ring.fd.as_raw_fd(),
                std::ptr::from_ref(&addr).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ring)
    }

    /// Bytes the ring pins.
    pub fn bytes(&self) -> usize {
        self.len
    }

    /// Hands each frame ready in the ring (at most `max`) to `f` with its
    /// kernel receive time (realtime, ns), then gives its slot back to the
    /// kernel; returns how many.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(&[u8], i128)) -> usize {
        let mut n = 0;
        while n < max {
            let slot = self.slot(self.next);
            let status = slot.status();
            if status & TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the slot is the process's until its status goes back
            // to TP_STATUS_KERNEL; the header and the frame lie inside it
            // (the kernel keeps tp_mac + tp_snaplen within frame_size).
            let (hdr, frame) = unsafe {
                let hdr = std::ptr::read_volatile(slot.base.as_ptr().cast::<Tpacket2Hdr>());
                let start = usize::from(hdr.tp_mac).min(self.frame_size);
                let len = (hdr.tp_snaplen as usize).min(self.frame_size - start);
                (
                    hdr,
                    std::slice::from_raw_parts(slot.base.as_ptr().add(start), len),
                )
            };
            f(
                frame,
                i128::from(hdr.tp_sec) * 1_000_000_000 + i128::from(hdr.tp_nsec),
            );
            slot.release();
            self.next = (self.next + 1) % self.frames;
            n += 1;
        }
        n
    }

    fn slot(&self, i: usize) -> Slot {
        // SAFETY: i < frames, so the slot lies inside the mapping.
        let base = unsafe { self.map.add(i * self.frame_size) };
        Slot { base }
    }
}

/// One slot of the ring.
struct Slot {
    base: NonNull<u8>,
}

impl Slot {
    fn status(&self) -> u32 {
        // SAFETY: tp_status is the slot's first, aligned u32, shared with
        // the kernel: read atomically, acquiring the frame it publishes.
        let status = unsafe { &*self.base.as_ptr().cast::<std::sync::atomic::AtomicU32>() };
        status.load(std::sync::atomic::Ordering::Acquire)
    }

    fn release(&self) {
        // SAFETY: as in `status`; releasing the slot to the kernel.
        let status = unsafe { &*self.base.as_ptr().cast::<std::sync::atomic::AtomicU32>() };
        status.store(TP_STATUS_KERNEL, std::sync::atomic::Ordering::Release);
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `bind`, once.
        unsafe {
            libc::munmap(self.map.as_ptr().cast(), self.len);
        }
    }
}

impl AsFd for RxRing {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn setsockopt<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: setsockopt(2) with a pointer to a live T and its size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            name,
            std::ptr::from_ref(value).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
