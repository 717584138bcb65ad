//! Waiting on many sockets at once with a nanosecond timeout: `epoll`
//! (`epoll_pwait2`, whose timeout is a `timespec`, where `epoll_wait`
//! counts milliseconds), so a thread serving thousands of sockets wakes for
//! the few that are readable and touches only those; and an `eventfd` to
//! wake it from another thread.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// An epoll instance and the readiness it last reported.
#[derive(Debug)]
pub struct Poller {
    epoll: OwnedFd,
    events: Vec<libc::epoll_event>,
    ready: Vec<u64>,
}

impl Poller {
    /// A poller reporting up to `batch` ready descriptors per wait.
    pub fn new(batch: usize) -> io::Result<Poller> {
        // SAFETY: plain epoll_create1; the fd is owned right below.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Poller {
            // SAFETY: `raw` is a fresh fd we own.
            epoll: unsafe { OwnedFd::from_raw_fd(raw) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; batch.max(1)],
            ready: Vec::with_capacity(batch.max(1)),
        })
    }

    /// Reports `fd` as `token` whenever it is readable (level-triggered:
    /// until it has been read empty).
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, token)
    }

    /// Stops reporting `fd`.
    pub fn remove(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_DEL, fd, 0)
    }

    fn control(&self, op: libc::c_int, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: epoll_ctl on our epoll fd and a live fd, with a valid event.
        let r =
            unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd.as_raw_fd(), &raw mut event) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Waits until something is readable or `timeout` has passed (zero:
    /// only looks); returns the tokens of what is readable.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<&[u64]> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: epoll_pwait2 fills at most `events.len()` entries of our
        // buffer; the timeout and (null) signal mask are valid.
        let n = unsafe {
            libc::epoll_pwait2(
                self.epoll.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                &ts,
                std::ptr::null(),
            )
        };
        self.ready.clear();
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(&self.ready)
            } else {
                Err(e)
            };
        }
        self.ready
            .extend(self.events[..n as usize].iter().map(|e| e.u64));
        Ok(&self.ready)
    }
}

/// An `eventfd` one thread writes to wake another's [`Poller`].
#[derive(Debug)]
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    /// A non-blocking eventfd.
    pub fn new() -> io::Result<Waker> {
        // SAFETY: plain eventfd(2); the fd is owned right below.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Waker {
            // SAFETY: `raw` is a fresh fd we own.
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
        })
    }

    /// Another handle on the same eventfd.
    pub fn try_clone(&self) -> io::Result<Waker> {
        Ok(Waker {
            fd: self.fd.try_clone()?,
        })
    }

    /// Makes it readable.
    pub fn wake(&self) -> io::Result<()> {
        nix::unistd::write(&self.fd, &1u64.to_ne_bytes())
            .map(drop)
            .map_err(io::Error::from)
    }

    /// Makes it unreadable again (after it woke the reader).
    pub fn reset(&self) {
        let mut count = [0u8; 8];
        let _ = nix::unistd::read(&self.fd, &mut count);
    }
}

impl AsFd for Waker {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_wake_is_reported_once_until_reset() {
        let mut poller = Poller::new(4).unwrap();
        let waker = Waker::new().unwrap();
        poller.add(waker.as_fd(), 7).unwrap();
        assert!(poller.wait(Duration::ZERO).unwrap().is_empty());
        waker.try_clone().unwrap().wake().unwrap();
        assert_eq!(poller.wait(Duration::ZERO).unwrap(), &[7]);
        waker.reset();
        let start = Instant::now();
        assert!(poller.wait(Duration::from_micros(300)).unwrap().is_empty());
        assert!(start.elapsed() >= Duration::from_micros(300));
    }
}
