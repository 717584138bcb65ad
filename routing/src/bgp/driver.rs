//! A thin tokio driver for one [`Session`] over one TCP connection.
//!
//! The session owns all protocol logic (DESIGN "House style": sans-I/O
//! cores, thin drivers). The driver only moves bytes between the socket and
//! the session, maps the session's [`Duration`] clock to tokio time (the
//! epoch is the instant [`run_session`] starts), fires timers at
//! [`Session::next_deadline`], and reports what happened to its caller.
//!
//! One connection per run: the caller opens (or accepts) the TCP connection
//! and hands it over; the run ends when that connection is gone (closed by
//! the session, by the peer, or after [`DriverCommand::Stop`]). The session
//! is handed back, so the caller can reconnect and run it again.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::session::{Input, Output, PeerInfo, Reason, Session};
use super::{MAX_MESSAGE_LEN, Message, Update};

/// What the driver reports to its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverEvent {
    /// The session reached Established.
    Established(PeerInfo),
    /// An UPDATE or ROUTE-REFRESH from the peer, for the RIB.
    Received(Message),
    /// The session went down; the run ends.
    Down(Reason),
}

/// What the caller asks the driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverCommand {
    /// Send this UPDATE (only while Established, see
    /// [`Session::send_update`]). Boxed: an UPDATE is large and `Stop` is
    /// not.
    SendUpdate(Box<Update>),
    /// Stop the session: a Cease NOTIFICATION is sent and the connection
    /// closed (RFC 4271 §8.2.2 ManualStop).
    Stop,
}

/// Runs `session` over the connected `stream` until the connection is gone.
///
/// The session is started ([`Input::Start`]) and told the connection is up
/// ([`Input::TcpConnected`]), whether it is active or passive; an
/// [`Output::Connect`] is answered by the stream already given. Dropping
/// the command sender stops the session as [`DriverCommand::Stop`] does.
pub async fn run_session(
    mut session: Session,
    mut stream: TcpStream,
    mut report: impl FnMut(DriverEvent),
    mut commands: mpsc::UnboundedReceiver<DriverCommand>,
) -> Session {
    let start = Instant::now();
    let now = || start.elapsed();
    // Per session, so small: a burst takes several reads, each handed to
    // the session whole.
    let mut buf = vec![0u8; MAX_MESSAGE_LEN];
    let mut out = session.handle(now(), Input::Start);
    out.extend(session.handle(now(), Input::TcpConnected));
    let mut commands_open = true;
    // Messages of one batch go out in one write: a table of UPDATEs is
    // one system call, not one per message.
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let mut closed = false;
        let mut write_failed = false;
        for o in out.drain(..) {
            match o {
                Output::Send(bytes) => {
                    if !closed {
                        pending.extend_from_slice(&bytes);
                    }
                }
                Output::Close => {
                    if !pending.is_empty() && stream.write_all(&pending).await.is_err() {
                        write_failed = true;
                    }
                    pending.clear();
                    closed = true;
                }
                Output::Established(peer) => {
                    report(DriverEvent::Established(peer));
                }
                Output::Received(msg) => {
                    report(DriverEvent::Received(msg));
                }
                Output::Down(reason) => {
                    // The only connection is gone: the run ends after this
                    // batch, even if the session would restart on its own.
                    if !closed && !pending.is_empty() {
                        let _ = stream.write_all(&pending).await;
                    }
                    pending.clear();
                    closed = true;
                    report(DriverEvent::Down(reason));
                }
                Output::Connect | Output::StateChanged { .. } => {}
            }
        }
        if !closed && !pending.is_empty() {
            write_failed = stream.write_all(&pending).await.is_err();
            pending.clear();
        }
        if closed {
            // Let the peer read the NOTIFICATION before the FIN.
            let _ = stream.shutdown().await;
            return session;
        }
        if write_failed {
            out = session.handle(now(), Input::TcpFailed);
            continue;
        }
        let deadline = session.next_deadline().map(|d| start + d);
        out = tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => session.handle(now(), Input::TcpFailed),
                Ok(n) => session.handle(now(), Input::Bytes(buf[..n].to_vec())),
            },
            cmd = commands.recv(), if commands_open => {
                // Everything already queued joins this batch.
                let mut out = Vec::new();
                let mut next = cmd;
                loop {
                    match next {
                        Some(DriverCommand::SendUpdate(update)) => {
                            out.extend(session.send_update(now(), *update));
                        }
                        Some(DriverCommand::Stop) => {
                            out.extend(session.handle(now(), Input::Stop));
                            break;
                        }
                        None => {
                            commands_open = false;
                            out.extend(session.handle(now(), Input::Stop));
                            break;
                        }
                    }
                    match commands.try_recv() {
                        Ok(cmd) => next = Some(cmd),
                        Err(mpsc::error::TryRecvError::Empty) => break,
                        Err(mpsc::error::TryRecvError::Disconnected) => next = None,
                    }
                }
                out
            }
            () = sleep_until(deadline) => session.handle(now(), Input::Tick),
        };
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        // A timer due "now" may still compare as not expired against a
        // clock read a moment earlier; a millisecond later it has.
        Some(t) => tokio::time::sleep_until(t + Duration::from_millis(1)).await,
        None => std::future::pending().await,
    }
}
