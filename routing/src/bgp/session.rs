//! The per-peer BGP session: the RFC 4271 §8 finite state machine, sans-I/O.
//!
//! A [`Session`] owns no socket and reads no clock. The driver feeds it
//! [`Input`]s with the current time and carries out the [`Output`]s: open or
//! drop the one TCP connection to the peer, write bytes, and hand received
//! UPDATEs to the RIB. Time is a [`Duration`] since an arbitrary epoch chosen
//! by the driver (a virtual clock in tests, `Instant - start` in the daemon);
//! it only has to be monotonic. The driver calls [`Session::handle`] with
//! [`Input::Tick`] at [`Session::next_deadline`] so timers fire.
//!
//! Implemented: states and timers of RFC 4271 §8.2.2 (ConnectRetry, Hold,
//! Keepalive, and the IdleHold timer of the optional §8.1.1
//! DampPeerOscillations attribute group, used here as a fixed automatic
//! restart delay); OPEN validation (RFC 4271 §6.2, RFC 6793, RFC 6286 §2.2);
//! capability negotiation of 4-octet AS numbers and multiprotocol IPv4
//! unicast (RFC 5492, RFC 4760); error handling with NOTIFICATION
//! (RFC 4271 §6).
//!
//! Future work: connection collision detection (RFC 4271 §6.8) — the driver
//! keeps one connection per peer and makes one side passive, so a second
//! [`Input::TcpConnected`] while a connection is up is ignored; the
//! DelayOpen timer; RFC 6608 FSM error subcodes (5/0 is sent); timer jitter
//! (RFC 4271 §10) — left out to keep runs deterministic, a seeded jitter can
//! be added; advertising ROUTE-REFRESH (the RIB cannot re-advertise yet);
//! graceful restart (RFC 4724); peer oscillation damping with a growing
//! IdleHold time.

use std::fmt;
use std::mem;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::{
    AfiSafi, BGP_VERSION, Capability, Context, DecodeError, MAX_MESSAGE_LEN, Message, MessageView,
    Notification, Open, Update, frame, msg_type,
};

/// The Hold timer value while waiting for the peer's OPEN in OpenSent: RFC
/// 4271 §8.2.2 suggests "a large value", 4 minutes.
pub const OPEN_HOLD_TIME: Duration = Duration::from_secs(240);

/// The address families this speaker supports (RFC 4760).
const LOCAL_FAMILIES: [AfiSafi; 1] = [AfiSafi::IPV4_UNICAST];

/// Session states (RFC 4271 §8.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum State {
    /// Refuses connections; waits for a start (manual or automatic).
    Idle,
    /// Waiting for the outgoing TCP connection to complete.
    Connect,
    /// Listening for an incoming TCP connection.
    Active,
    /// OPEN sent, waiting for the peer's OPEN.
    OpenSent,
    /// OPEN received and KEEPALIVE sent, waiting for the peer's KEEPALIVE.
    OpenConfirm,
    /// UPDATE, KEEPALIVE and NOTIFICATION messages flow.
    Established,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Idle => "Idle",
            State::Connect => "Connect",
            State::Active => "Active",
            State::OpenSent => "OpenSent",
            State::OpenConfirm => "OpenConfirm",
            State::Established => "Established",
        })
    }
}

/// An event for the session (a subset of the RFC 4271 §8.1 events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Start the session and restart it automatically after errors
    /// (ManualStart, Event 1; passive sessions: ManualStart_with_Passive
    /// TcpEstablishment, Event 4).
    Start,
    /// Stop the session and do not restart it (ManualStop, Event 2).
    Stop,
    /// The TCP connection to the peer is up, whichever side opened it
    /// (Events 16/17).
    TcpConnected,
    /// The TCP connection attempt failed or the connection was closed
    /// (Event 18).
    TcpFailed,
    /// A chunk of the received TCP byte stream, at any message boundary.
    Bytes(Vec<u8>),
    /// The peer's KEEPALIVEs were read at this time, and kept by the driver
    /// (an Established session's, which only restart the Hold timer): the
    /// Hold timer runs from then, unless it runs from later already.
    /// Ignored in other states.
    Heard(Duration),
    /// Time advanced; expired timers fire.
    Tick,
}

/// What the driver must do, or what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Open the TCP connection to the peer; answer with
    /// [`Input::TcpConnected`] or [`Input::TcpFailed`].
    Connect,
    /// Write these bytes (whole messages) to the connection.
    Send(Vec<u8>),
    /// Drop the TCP connection, or abandon the connection attempt. No
    /// [`Input::TcpFailed`] is expected for it.
    Close,
    /// The state changed.
    StateChanged {
        /// Old state.
        from: State,
        /// New state.
        to: State,
    },
    /// The session reached Established with these negotiated parameters.
    Established(PeerInfo),
    /// An UPDATE or ROUTE-REFRESH received while Established, for the RIB.
    Received(Message),
    /// The session went to Idle (from any other state). If it had been
    /// Established, the routes learned from the peer are gone.
    Down(Reason),
}

/// Parameters negotiated in the OPEN exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    /// The peer's AS number (from the 4-octet AS capability if present).
    pub peer_as: u32,
    /// The peer's BGP Identifier.
    pub peer_id: Ipv4Addr,
    /// Negotiated Hold Time in seconds: the smaller of both proposals
    /// (RFC 4271 §4.2); 0 means no KEEPALIVEs and no Hold timer.
    pub hold_time: u16,
    /// Interval between our KEEPALIVEs, in seconds; 0 when `hold_time` is 0.
    pub keepalive: u16,
    /// Both sides support 4-octet AS numbers (RFC 6793 §3): AS_PATH carries
    /// 4-octet AS numbers.
    pub four_octet_as: bool,
    /// Address families both sides support (RFC 4760 §8).
    pub families: Vec<AfiSafi>,
    /// The peer advertised ROUTE-REFRESH (RFC 2918 §2).
    pub route_refresh: bool,
}

impl PeerInfo {
    /// The codec context for this session's UPDATEs.
    pub fn context(&self) -> Context {
        Context {
            four_octet_as: self.four_octet_as,
            allow_zero_hold_time: true,
        }
    }

    /// Whether the peer is in our AS (internal BGP).
    pub fn is_internal(&self, local_as: u32) -> bool {
        self.peer_as == local_as
    }
}

/// Why a session went down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// [`Input::Stop`]; a Cease/Administrative Shutdown NOTIFICATION was
    /// sent if a connection was up (RFC 4486 §4).
    Stopped,
    /// The TCP connection failed or was closed by the peer.
    TcpFailed,
    /// No message from the peer within the Hold Time; NOTIFICATION 4/0 was
    /// sent (RFC 4271 §6.5).
    HoldTimerExpired,
    /// A received message was invalid, or the OPEN was unacceptable; the
    /// error's NOTIFICATION was sent (RFC 4271 §6).
    Error(DecodeError),
    /// A message of a type not allowed in the state was received;
    /// NOTIFICATION 5/0 was sent (RFC 4271 §6.6).
    UnexpectedMessage {
        /// The state it arrived in.
        state: State,
        /// Its message type.
        msg_type: u8,
    },
    /// The peer sent this NOTIFICATION (RFC 4271 §6.1).
    PeerNotification(Notification),
}

impl Reason {
    /// The NOTIFICATION we sent to the peer, if any.
    pub fn sent_notification(&self) -> Option<Notification> {
        match self {
            Reason::Stopped => Some(Notification::new(
                Notification::CEASE,
                Notification::CEASE_ADMINISTRATIVE_SHUTDOWN,
            )),
            Reason::HoldTimerExpired => {
                Some(Notification::new(Notification::HOLD_TIMER_EXPIRED, 0))
            }
            Reason::Error(e) => Some(e.to_notification()),
            Reason::UnexpectedMessage { .. } => Some(Notification::new(Notification::FSM_ERROR, 0)),
            Reason::TcpFailed | Reason::PeerNotification(_) => None,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Stopped => f.write_str("stopped"),
            Reason::TcpFailed => f.write_str("TCP connection failed or closed"),
            Reason::HoldTimerExpired => f.write_str("hold timer expired"),
            Reason::Error(e) => write!(f, "sent NOTIFICATION: {e}"),
            Reason::UnexpectedMessage { state, msg_type } => {
                write!(f, "unexpected message type {msg_type} in {state}")
            }
            Reason::PeerNotification(n) => write!(f, "received NOTIFICATION: {n}"),
        }
    }
}

/// Configuration of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Our AS number.
    pub local_as: u32,
    /// Our BGP Identifier.
    pub router_id: Ipv4Addr,
    /// The AS the peer must announce (RFC 4271 §6.2 Bad Peer AS); `None`
    /// accepts any.
    pub peer_as: Option<u32>,
    /// Hold Time we propose, in seconds: 0, or at least 3 (1 and 2 are
    /// raised to 3, RFC 4271 §4.2).
    pub hold_time: u16,
    /// KEEPALIVE interval in seconds; `None` means a third of the
    /// negotiated Hold Time (RFC 4271 §10). Capped at that third, at least 1.
    pub keepalive: Option<u16>,
    /// ConnectRetry timer (RFC 4271 §10 suggests 120 s; labs want less).
    pub connect_retry: Duration,
    /// Wait for the peer to connect; never send [`Output::Connect`].
    pub passive: bool,
    /// Delay before the automatic restart after the session went to Idle
    /// (IdleHoldTimer, RFC 4271 §8.1.1).
    pub idle_hold: Duration,
    /// The driver writes the periodic KEEPALIVEs of an Established
    /// session: one whenever it has written nothing on the connection for
    /// [`PeerInfo::keepalive`] seconds (none when that is 0); a speaker's
    /// driver those of OpenConfirm too. The session still sends the
    /// KEEPALIVE that answers an OPEN and those of OpenConfirm when its
    /// turn comes, and keeps the Hold timer. A driver whose speakers share
    /// a thread sets it, so that their keepalives go out on time however
    /// long a speaker waits for its turn (FRR has a thread for them).
    pub keepalives_by_driver: bool,
}

impl SessionConfig {
    /// Lab defaults: hold time 9 s, keepalive 3 s, ConnectRetry 5 s,
    /// restart after 1 s, active, any peer AS, KEEPALIVEs sent by the
    /// session.
    pub fn new(local_as: u32, router_id: Ipv4Addr) -> SessionConfig {
        SessionConfig {
            local_as,
            router_id,
            peer_as: None,
            hold_time: 9,
            keepalive: None,
            connect_retry: Duration::from_secs(5),
            passive: false,
            idle_hold: Duration::from_secs(1),
            keepalives_by_driver: false,
        }
    }

    fn proposed_hold_time(&self) -> u16 {
        match self.hold_time {
            1 | 2 => 3,
            h => h,
        }
    }
}

/// One BGP session with one peer (RFC 4271 §8).
#[derive(Debug, Clone)]
pub struct Session {
    config: SessionConfig,
    state: State,
    /// Started and not stopped: restart automatically from Idle.
    enabled: bool,
    /// Received bytes not yet forming a whole message.
    buf: Vec<u8>,
    /// Codec context: 2-octet AS until the OPEN exchange says otherwise.
    ctx: Context,
    /// Negotiated parameters, from OpenConfirm on.
    peer: Option<PeerInfo>,
    connect_retry_at: Option<Duration>,
    hold_at: Option<Duration>,
    keepalive_at: Option<Duration>,
    idle_hold_at: Option<Duration>,
}

impl Session {
    /// A session in Idle; [`Input::Start`] starts it.
    pub fn new(config: SessionConfig) -> Session {
        Session {
            config,
            state: State::Idle,
            enabled: false,
            buf: Vec::new(),
            ctx: Context::TWO_OCTET_AS,
            peer: None,
            connect_retry_at: None,
            hold_at: None,
            keepalive_at: None,
            idle_hold_at: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Leaves the periodic KEEPALIVEs of Established to the driver from now
    /// on ([`SessionConfig::keepalives_by_driver`]).
    pub fn set_keepalives_by_driver(&mut self) {
        self.config.keepalives_by_driver = true;
        if self.state == State::Established {
            self.keepalive_at = None;
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Negotiated parameters, in OpenConfirm and Established.
    pub fn peer(&self) -> Option<&PeerInfo> {
        self.peer.as_ref()
    }

    /// When the next timer expires; feed [`Input::Tick`] then.
    pub fn next_deadline(&self) -> Option<Duration> {
        [
            self.connect_retry_at,
            self.hold_at,
            self.keepalive_at,
            self.idle_hold_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Handles one event at time `now`. Expired timers fire first, except
    /// for received bytes, which are handled before: the peer sent them
    /// before `now` (they waited in the driver's queue), so a KEEPALIVE
    /// among them counts before the Hold Timer is checked. A driver that
    /// fell behind does not reset a session whose keepalives it had not
    /// read yet.
    pub fn handle(&mut self, now: Duration, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        match &input {
            Input::Bytes(bytes) => self.receive(now, bytes, &mut out),
            Input::Heard(at) if self.state == State::Established => self.heard((*at).min(now)),
            _ => {}
        }
        self.fire_timers(now, &mut out);
        match input {
            Input::Start => {
                self.enabled = true;
                // §8.2.2: a start event in any other state is ignored.
                if self.state == State::Idle {
                    self.leave_idle(now, &mut out);
                }
            }
            Input::Stop => {
                self.enabled = false;
                self.idle_hold_at = None;
                if self.state != State::Idle {
                    if self.tcp_up() {
                        self.send(
                            &Message::Notification(Notification::new(
                                Notification::CEASE,
                                Notification::CEASE_ADMINISTRATIVE_SHUTDOWN,
                            )),
                            &mut out,
                        );
                    }
                    self.go_idle(now, Reason::Stopped, &mut out);
                }
            }
            Input::TcpConnected => self.tcp_connected(now, &mut out),
            Input::TcpFailed => self.tcp_failed(now, &mut out),
            // Received above, before the timers.
            Input::Bytes(_) | Input::Heard(_) | Input::Tick => {}
        }
        out
    }

    /// Sends an UPDATE; only while Established (otherwise nothing happens).
    ///
    /// The caller keeps the UPDATE within 4096 octets (RFC 4271 §4.1),
    /// splitting it if needed; a larger one is not sent.
    pub fn send_update(&mut self, now: Duration, update: Update) -> Vec<Output> {
        self.send_updates(now, [update])
    }

    /// Sends UPDATEs, in order, as one [`Output::Send`] (one write of the
    /// driver for a whole table); as [`Session::send_update`] otherwise.
    pub fn send_updates(
        &mut self,
        now: Duration,
        updates: impl IntoIterator<Item = Update>,
    ) -> Vec<Output> {
        let mut out = Vec::new();
        self.fire_timers(now, &mut out);
        if self.state != State::Established {
            return out;
        }
        let mut bytes = Vec::new();
        for update in updates {
            let at = bytes.len();
            Message::Update(update).encode_into(&mut bytes, &self.ctx);
            if bytes.len() - at > MAX_MESSAGE_LEN {
                bytes.truncate(at);
            }
        }
        if !bytes.is_empty() {
            out.push(Output::Send(bytes));
            // §8.2.2 Established: sending an UPDATE restarts the
            // KeepaliveTimer.
            self.restart_keepalive(now);
        }
        out
    }

    /// A TCP connection exists exactly in these states.
    fn tcp_up(&self) -> bool {
        matches!(
            self.state,
            State::OpenSent | State::OpenConfirm | State::Established
        )
    }

    fn set_state(&mut self, to: State, out: &mut Vec<Output>) {
        if self.state != to {
            out.push(Output::StateChanged {
                from: self.state,
                to,
            });
            self.state = to;
        }
    }

    fn send(&self, msg: &Message, out: &mut Vec<Output>) {
        debug_assert!(self.tcp_up(), "send without a connection");
        out.push(Output::Send(msg.encode(&self.ctx)));
    }

    fn restart_keepalive(&mut self, now: Duration) {
        let by_driver = self.config.keepalives_by_driver && self.state == State::Established;
        self.keepalive_at = match self.peer.as_ref().map(|p| p.keepalive) {
            Some(k) if k > 0 && !by_driver => {
                Some(now.saturating_add(Duration::from_secs(k.into())))
            }
            _ => None,
        };
    }

    /// KEEPALIVEs read `at`: the Hold timer restarts from then, if later.
    fn heard(&mut self, at: Duration) {
        let running = self.hold_at;
        self.restart_hold(at);
        self.hold_at = self.hold_at.max(running);
    }

    fn restart_hold(&mut self, now: Duration) {
        self.hold_at = match self.peer.as_ref().map(|p| p.hold_time) {
            Some(h) if h > 0 => Some(now.saturating_add(Duration::from_secs(h.into()))),
            _ => None,
        };
    }

    /// Idle -> Connect (active) or Active (passive), §8.2.2 Idle on
    /// ManualStart / AutomaticStart.
    fn leave_idle(&mut self, now: Duration, out: &mut Vec<Output>) {
        self.idle_hold_at = None;
        if self.config.passive {
            // A passive session never initiates: no ConnectRetry timer.
            self.set_state(State::Active, out);
        } else {
            self.connect_retry_at = Some(now.saturating_add(self.config.connect_retry));
            out.push(Output::Connect);
            self.set_state(State::Connect, out);
        }
    }

    /// Any state -> Idle: drop the connection, release resources, and
    /// schedule the automatic restart.
    fn go_idle(&mut self, now: Duration, reason: Reason, out: &mut Vec<Output>) {
        let close = self.tcp_up() || self.state == State::Connect;
        self.enter_idle(now, reason, close, out);
    }

    /// [`Session::go_idle`], with `close` false when the connection (or
    /// the attempt) is already gone.
    fn enter_idle(&mut self, now: Duration, reason: Reason, close: bool, out: &mut Vec<Output>) {
        if close {
            out.push(Output::Close);
        }
        self.buf.clear();
        self.ctx = Context::TWO_OCTET_AS;
        self.peer = None;
        self.connect_retry_at = None;
        self.hold_at = None;
        self.keepalive_at = None;
        self.set_state(State::Idle, out);
        out.push(Output::Down(reason));
        if self.enabled {
            self.idle_hold_at = Some(now.saturating_add(self.config.idle_hold));
        }
    }

    fn fire_timers(&mut self, now: Duration, out: &mut Vec<Output>) {
        if self.hold_at.is_some_and(|t| t <= now) {
            // §6.5, §8.2.2: HoldTimer_Expires sends NOTIFICATION 4/0.
            self.send(
                &Message::Notification(Notification::new(Notification::HOLD_TIMER_EXPIRED, 0)),
                out,
            );
            self.go_idle(now, Reason::HoldTimerExpired, out);
        }
        if self.keepalive_at.is_some_and(|t| t <= now) {
            self.send(&Message::Keepalive, out);
            self.restart_keepalive(now);
        }
        if self.connect_retry_at.is_some_and(|t| t <= now) {
            self.connect_retry_at = Some(now.saturating_add(self.config.connect_retry));
            match self.state {
                // §8.2.2 Connect, ConnectRetryTimer_Expires: drop the
                // attempt and try again.
                State::Connect => {
                    out.push(Output::Close);
                    out.push(Output::Connect);
                }
                // §8.2.2 Active, ConnectRetryTimer_Expires: initiate.
                State::Active => {
                    out.push(Output::Connect);
                    self.set_state(State::Connect, out);
                }
                _ => self.connect_retry_at = None,
            }
        }
        if self.idle_hold_at.is_some_and(|t| t <= now) {
            self.idle_hold_at = None;
            if self.enabled && self.state == State::Idle {
                self.leave_idle(now, out);
            }
        }
    }

    fn tcp_connected(&mut self, now: Duration, out: &mut Vec<Output>) {
        match self.state {
            // §8.2.2 Idle: refuse all incoming connections.
            State::Idle => out.push(Output::Close),
            // §8.2.2 Connect/Active, Tcp_CR_Acked / TcpConnectionConfirmed:
            // send OPEN, set the Hold timer to a large value.
            State::Connect | State::Active => {
                self.connect_retry_at = None;
                self.buf.clear();
                self.set_state(State::OpenSent, out);
                self.send(&Message::Open(self.local_open()), out);
                self.hold_at = Some(now.saturating_add(OPEN_HOLD_TIME));
            }
            // A second connection while one is up would need collision
            // detection (§6.8, future work); the driver never opens one.
            State::OpenSent | State::OpenConfirm | State::Established => {}
        }
    }

    fn tcp_failed(&mut self, now: Duration, out: &mut Vec<Output>) {
        match self.state {
            State::Idle => {}
            // §8.2.2 OpenSent, TcpConnectionFails: back to Active, listening,
            // with the ConnectRetry timer running.
            State::OpenSent => {
                self.buf.clear();
                self.hold_at = None;
                self.set_state(State::Active, out);
                if !self.config.passive {
                    self.connect_retry_at = Some(now.saturating_add(self.config.connect_retry));
                }
            }
            // §8.2.2 Connect, Active, OpenConfirm, Established: Idle. The
            // connection is already gone, so no Close.
            State::Connect | State::Active | State::OpenConfirm | State::Established => {
                self.enter_idle(now, Reason::TcpFailed, false, out);
            }
        }
    }

    fn local_open(&self) -> Open {
        Open {
            version: BGP_VERSION,
            my_as: self.config.local_as,
            hold_time: self.config.proposed_hold_time(),
            bgp_id: self.config.router_id,
            capabilities: LOCAL_FAMILIES
                .iter()
                .map(|f| Capability::Multiprotocol(*f))
                .chain([Capability::FourOctetAs(self.config.local_as)])
                .collect(),
        }
    }

    fn receive(&mut self, now: Duration, bytes: &[u8], out: &mut Vec<Output>) {
        if !self.tcp_up() {
            // Bytes from a connection already dropped.
            return;
        }
        // Whole messages are handled where they lie; only the start of an
        // incomplete one stays for the next read, in a buffer of its own
        // size: fifteen thousand sessions keep no read-sized buffer each.
        let joined;
        let buf = if self.buf.is_empty() {
            bytes
        } else {
            joined = [mem::take(&mut self.buf).as_slice(), bytes].concat();
            &joined[..]
        };
        let mut at = 0;
        while self.tcp_up() {
            match frame(&buf[at..]) {
                Ok(None) => break,
                Ok(Some(len)) => {
                    self.process(now, &buf[at..at + len], out);
                    at += len;
                }
                Err(e) => self.error(now, e, out),
            }
        }
        if self.tcp_up() {
            self.buf = buf[at..].to_vec();
        }
    }

    /// Sends the error's NOTIFICATION and goes Idle (RFC 4271 §6).
    fn error(&mut self, now: Duration, e: DecodeError, out: &mut Vec<Output>) {
        self.send(&Message::Notification(e.to_notification()), out);
        self.go_idle(now, Reason::Error(e), out);
    }

    /// Handles one framed message.
    fn process(&mut self, now: Duration, raw: &[u8], out: &mut Vec<Output>) {
        let view = match MessageView::new_checked(raw) {
            Ok(v) => v,
            Err(e) => return self.error(now, e, out),
        };
        let t = view.msg_type();
        let expected = t == msg_type::NOTIFICATION
            || match self.state {
                State::OpenSent => t == msg_type::OPEN,
                State::OpenConfirm => t == msg_type::KEEPALIVE,
                State::Established => matches!(
                    t,
                    msg_type::KEEPALIVE | msg_type::UPDATE | msg_type::ROUTE_REFRESH
                ),
                _ => false,
            };
        if !expected {
            // §6.6, §8.2.2 "any other event": FSM error.
            let state = self.state;
            self.send(
                &Message::Notification(Notification::new(Notification::FSM_ERROR, 0)),
                out,
            );
            return self.go_idle(now, Reason::UnexpectedMessage { state, msg_type: t }, out);
        }
        let msg = match Message::decode(raw, &self.ctx) {
            Ok(m) => m,
            Err(e) => return self.error(now, e, out),
        };
        match msg {
            // §6.4, §8.2.2: on NOTIFICATION, close and go Idle; no reply.
            Message::Notification(n) => self.go_idle(now, Reason::PeerNotification(n), out),
            Message::Open(open) => self.open_received(now, open, out),
            Message::Keepalive => {
                self.restart_hold(now);
                if self.state == State::OpenConfirm {
                    self.set_state(State::Established, out);
                    self.restart_keepalive(now);
                    if let Some(peer) = &self.peer {
                        out.push(Output::Established(peer.clone()));
                    }
                }
            }
            Message::Update(_) => {
                self.restart_hold(now);
                out.push(Output::Received(msg));
            }
            Message::RouteRefresh(rr) => {
                // Any message proves the peer alive.
                self.restart_hold(now);
                // RFC 2918 §4: a ROUTE-REFRESH for a family not negotiated
                // is ignored.
                if self
                    .peer
                    .as_ref()
                    .is_some_and(|p| p.families.contains(&rr.family))
                {
                    out.push(Output::Received(Message::RouteRefresh(rr)));
                }
            }
        }
    }

    /// The peer's OPEN in OpenSent (RFC 4271 §6.2, §8.2.2).
    fn open_received(&mut self, now: Duration, open: Open, out: &mut Vec<Output>) {
        if let Err(e) = self.check_open(&open) {
            return self.error(now, e, out);
        }
        let hold_time = self.config.proposed_hold_time().min(open.hold_time);
        // §4.4, §10: KEEPALIVEs at a third of the Hold Time, none if 0.
        let keepalive = if hold_time == 0 {
            0
        } else {
            let third = hold_time / 3;
            self.config.keepalive.unwrap_or(third).clamp(1, third)
        };
        let peer_families: Vec<AfiSafi> = open.multiprotocol().collect();
        let families = if peer_families.is_empty() {
            // A speaker without the multiprotocol capability carries IPv4
            // unicast only (RFC 4760 §1: plain RFC 4271).
            vec![AfiSafi::IPV4_UNICAST]
        } else {
            LOCAL_FAMILIES
                .into_iter()
                .filter(|f| peer_families.contains(f))
                .collect()
        };
        let peer = PeerInfo {
            peer_as: open.my_as,
            peer_id: open.bgp_id,
            hold_time,
            keepalive,
            // We always advertise the capability (RFC 6793 §3), so it is
            // negotiated when the peer does too; otherwise AS_PATH stays
            // 2-octet.
            four_octet_as: open.four_octet_as().is_some(),
            families,
            route_refresh: open.route_refresh(),
        };
        self.ctx = peer.context();
        self.peer = Some(peer);
        self.connect_retry_at = None;
        self.send(&Message::Keepalive, out);
        self.restart_keepalive(now);
        self.restart_hold(now);
        self.set_state(State::OpenConfirm, out);
    }

    /// Checks the codec leaves to the session.
    fn check_open(&self, open: &Open) -> Result<(), DecodeError> {
        if let Some(expected) = self.config.peer_as {
            open.check_peer_as(expected)?;
        }
        // RFC 6286 §2.2: the identifier must differ from ours on an
        // internal session (external peers may reuse it).
        if open.my_as == self.config.local_as && open.bgp_id == self.config.router_id {
            return Err(DecodeError::BadBgpIdentifier { id: open.bgp_id });
        }
        Ok(())
    }
}
