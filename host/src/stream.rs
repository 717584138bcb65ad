//! A Unix stream for a client of turbonet's own sockets (a lab daemon's
//! control API) whose writes never raise SIGPIPE. The command line restores
//! SIGPIPE's default action so that `turbonet ... | head` ends quietly; a
//! daemon that dies while a command talks to it must then cost the command
//! an error (EPIPE), not its life.

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{MsgFlags, send};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::UnixStream;

/// A connected Unix stream that writes with `MSG_NOSIGNAL`.
#[derive(Debug)]
pub struct QuietStream(UnixStream);

impl QuietStream {
    /// Connects to the socket at `path`.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<QuietStream> {
        UnixStream::connect(path).await.map(QuietStream)
    }
}

impl From<UnixStream> for QuietStream {
    fn from(stream: UnixStream) -> Self {
        QuietStream(stream)
    }
}

impl AsyncRead for QuietStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for QuietStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let stream = &self.get_mut().0;
        loop {
            ready!(stream.poll_write_ready(cx))?;
            match stream.try_io(Interest::WRITABLE, || {
                send(stream.as_raw_fd(), buf, MsgFlags::MSG_NOSIGNAL).map_err(io::Error::from)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                written => return Poll::Ready(written),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use nix::sys::signal::{SigSet, Signal};
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// True when SIGPIPE is pending for this thread (it is blocked here, so
    /// one raised stays pending).
    fn sigpipe_pending() -> bool {
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `sigpending` fills the set it is given; it is read only
        // when the call succeeded.
        unsafe {
            libc::sigpending(set.as_mut_ptr()) == 0
                && libc::sigismember(set.as_ptr(), libc::SIGPIPE) == 1
        }
    }

    #[test]
    fn a_write_to_a_peer_that_went_away_fails_and_raises_no_sigpipe() {
        SigSet::from(Signal::SIGPIPE).thread_block().unwrap();
        let written = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let (ours, theirs) = UnixStream::pair().unwrap();
                drop(theirs);
                QuietStream::from(ours).write_all(b"hello").await
            });
        assert_eq!(written.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
        assert!(!sigpipe_pending(), "the write raised SIGPIPE");
    }
}
