//! BGP session FSM (RFC 4271 §8), deterministic: two sessions wired back to
//! back through an in-memory connection on a virtual clock, error paths
//! driven with hand-made messages, and a seeded no-panic run.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::time::Duration;

use ipnet::Ipv4Net;
use turbonet_routing::bgp::session::{
    Input, OPEN_HOLD_TIME, Output, Reason, Session, SessionConfig, State,
};
use turbonet_routing::bgp::{
    AfiSafi, AsPath, Capability, Context, DecodeError, Message, Notification, Open, Origin,
    PathAttributes, Update, frame,
};

const AS_A: u32 = 4_200_000_001;
const AS_B: u32 = 4_200_000_002;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn config_a() -> SessionConfig {
    SessionConfig {
        peer_as: Some(AS_B),
        ..SessionConfig::new(AS_A, Ipv4Addr::new(10, 0, 0, 1))
    }
}

fn config_b() -> SessionConfig {
    SessionConfig {
        peer_as: Some(AS_A),
        passive: true,
        ..SessionConfig::new(AS_B, Ipv4Addr::new(10, 0, 0, 2))
    }
}

/// Splits a byte stream into decoded messages.
fn messages(bytes: &[u8], ctx: &Context) -> Vec<Message> {
    let mut rest = bytes;
    let mut msgs = Vec::new();
    while let Some(len) = frame(rest).expect("valid stream") {
        msgs.push(Message::decode(&rest[..len], ctx).expect("valid message"));
        rest = &rest[len..];
    }
    assert!(rest.is_empty(), "partial message sent");
    msgs
}

/// All messages in the `Send` outputs.
fn sent(outputs: &[Output]) -> Vec<Message> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Send(b) => Some(messages(b, &Context::FOUR_OCTET_AS)),
            _ => None,
        })
        .flatten()
        .collect()
}

fn downs(outputs: &[Output]) -> Vec<Reason> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Down(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn update() -> Update {
    Update {
        withdrawn: vec![],
        attributes: PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence([AS_A])),
            next_hop: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ..PathAttributes::default()
        },
        nlri: vec!["192.0.2.0/24".parse::<Ipv4Net>().unwrap()],
    }
}

/// Side index: 0 is A (active), 1 is B (passive).
#[derive(Debug)]
struct Pipe {
    s: [Session; 2],
    now: Duration,
    conn_up: bool,
    /// Drop everything this side sends (it "goes silent").
    mute: [bool; 2],
    queue: VecDeque<(usize, Input)>,
    /// Every output, with time and side.
    log: Vec<(Duration, usize, Output)>,
}

impl Pipe {
    fn new(a: SessionConfig, b: SessionConfig) -> Pipe {
        Pipe {
            s: [Session::new(a), Session::new(b)],
            now: Duration::ZERO,
            conn_up: false,
            mute: [false; 2],
            queue: VecDeque::new(),
            log: Vec::new(),
        }
    }

    fn input(&mut self, side: usize, input: Input) {
        self.queue.push_back((side, input));
        self.drain();
    }

    fn drain(&mut self) {
        while let Some((side, input)) = self.queue.pop_front() {
            let outs = self.s[side].handle(self.now, input);
            self.apply(side, outs);
        }
    }

    fn apply(&mut self, side: usize, outs: Vec<Output>) {
        let other = 1 - side;
        for o in outs {
            match &o {
                Output::Connect => {
                    // The peer accepts if it listens (Active) and no
                    // connection is up.
                    if !self.conn_up && self.s[other].state() == State::Active {
                        self.conn_up = true;
                        self.queue.push_back((side, Input::TcpConnected));
                        self.queue.push_back((other, Input::TcpConnected));
                    } else {
                        self.queue.push_back((side, Input::TcpFailed));
                    }
                }
                Output::Send(bytes) => {
                    assert!(self.conn_up, "side {side} sent without a connection");
                    if !self.mute[side] {
                        self.queue.push_back((other, Input::Bytes(bytes.clone())));
                    }
                }
                Output::Close if self.conn_up => {
                    self.conn_up = false;
                    self.queue.push_back((other, Input::TcpFailed));
                }
                _ => {}
            }
            self.log.push((self.now, side, o));
        }
    }

    /// Advances the virtual clock to `until`, firing timers on the way.
    fn run_until(&mut self, until: Duration) {
        for _ in 0..100_000 {
            let next = self.s.iter().filter_map(Session::next_deadline).min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    for side in 0..2 {
                        if self.s[side].next_deadline().is_some_and(|d| d <= self.now) {
                            self.queue.push_back((side, Input::Tick));
                        }
                    }
                    self.drain();
                }
                _ => {
                    self.now = until;
                    return;
                }
            }
        }
        panic!("timers do not advance");
    }

    fn start(&mut self) {
        self.input(1, Input::Start);
        self.input(0, Input::Start);
    }

    fn sent_by(&self, side: usize, from: Duration) -> Vec<(Duration, Message)> {
        self.log
            .iter()
            .filter(|(t, s, _)| *s == side && *t >= from)
            .flat_map(|(t, _, o)| sent(std::slice::from_ref(o)).into_iter().map(|m| (*t, m)))
            .collect()
    }
}

#[test]
fn back_to_back_sessions_establish_keep_alive_and_exchange_updates() {
    let mut p = Pipe::new(config_a(), config_b());
    p.start();
    assert_eq!(p.s[0].state(), State::Established);
    assert_eq!(p.s[1].state(), State::Established);

    // Both report the negotiated parameters.
    let est: Vec<_> = p
        .log
        .iter()
        .filter_map(|(_, side, o)| match o {
            Output::Established(info) => Some((*side, info.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(est.len(), 2);
    let info_a = &est.iter().find(|(s, _)| *s == 0).unwrap().1;
    assert_eq!(info_a.peer_as, AS_B);
    assert_eq!(info_a.peer_id, Ipv4Addr::new(10, 0, 0, 2));
    assert_eq!(info_a.hold_time, 9);
    assert_eq!(info_a.keepalive, 3);
    assert!(info_a.four_octet_as);
    assert_eq!(info_a.families, vec![AfiSafi::IPV4_UNICAST]);

    // A walked Idle -> Connect -> OpenSent -> OpenConfirm -> Established,
    // B Idle -> Active -> OpenSent -> OpenConfirm -> Established.
    let path = |side| {
        p.log
            .iter()
            .filter_map(|(_, s, o)| match o {
                Output::StateChanged { to, .. } if *s == side => Some(*to),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    use State::*;
    assert_eq!(path(0), [Connect, OpenSent, OpenConfirm, Established]);
    assert_eq!(path(1), [Active, OpenSent, OpenConfirm, Established]);

    // KEEPALIVEs every 3 s (hold/3) from each side, nothing else.
    p.run_until(secs(30));
    for side in 0..2 {
        let times: Vec<Duration> = p
            .sent_by(side, secs(1))
            .into_iter()
            .map(|(t, m)| {
                assert_eq!(m, Message::Keepalive);
                t
            })
            .collect();
        assert_eq!(times, (1..=10).map(|i| secs(3 * i)).collect::<Vec<_>>());
    }

    // An UPDATE from A comes out of B for the RIB.
    let outs = p.s[0].send_update(p.now, update());
    p.apply(0, outs);
    p.drain();
    let received: Vec<_> = p
        .log
        .iter()
        .filter(|(_, s, _)| *s == 1)
        .filter_map(|(_, _, o)| match o {
            Output::Received(m) => Some(m.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(received, vec![Message::Update(update())]);

    // Stays up for simulated minutes.
    p.run_until(secs(600));
    assert_eq!(p.s[0].state(), State::Established);
    assert_eq!(p.s[1].state(), State::Established);
    assert!(p.log.iter().all(|(_, _, o)| !matches!(o, Output::Down(_))));
    // The keepalive timer restarted when the UPDATE went out, so A still
    // sends about one KEEPALIVE per 3 s.
    let ka = p.sent_by(0, secs(31)).len();
    assert!((189..=191).contains(&ka), "{ka} messages");
}

/// With KEEPALIVEs left to the driver, an Established session sends none
/// of its own (the KEEPALIVE answering the OPEN still goes), and a peer
/// that sends none resets it after the Hold Time as before.
#[test]
fn keepalives_left_to_the_driver_are_not_sent_by_the_session() {
    let mut a = config_a();
    a.keepalives_by_driver = true;
    let mut p = Pipe::new(a, config_b());
    p.start();
    assert_eq!(p.s[0].state(), State::Established);
    assert_eq!(
        p.sent_by(0, Duration::ZERO)
            .iter()
            .filter(|(_, m)| *m == Message::Keepalive)
            .count(),
        1,
        "the KEEPALIVE of OpenConfirm"
    );
    // B's keepalives keep A up; A sends nothing, so B's Hold timer
    // (9 s) expires: the driver was to send them.
    p.run_until(secs(8));
    assert!(p.sent_by(0, secs(1)).is_empty());
    assert_eq!(p.s[0].state(), State::Established);
    p.run_until(secs(10));
    assert!(
        p.log
            .iter()
            .any(|(_, side, o)| *side == 1 && *o == Output::Down(Reason::HoldTimerExpired))
    );
}

/// KEEPALIVEs a driver read and kept count when it tells them: the Hold
/// timer runs from when they were read, never back from a later start;
/// before Established they count for nothing (the KEEPALIVE that
/// completes OpenConfirm must reach the session itself).
#[test]
fn keepalives_heard_by_the_driver_restart_the_hold_timer_from_when_they_were_read() {
    let mut s = in_open_sent(config_a());
    let outs = s.handle(
        secs(1),
        Input::Bytes(encode(Message::Open(peer_open(AS_B, 9)))),
    );
    assert!(downs(&outs).is_empty());
    assert_eq!(s.state(), State::OpenConfirm);
    let in_open_confirm = s.next_deadline();
    s.handle(secs(2), Input::Heard(secs(2)));
    assert_eq!(s.next_deadline(), in_open_confirm);
    s.handle(secs(2), Input::Bytes(encode(Message::Keepalive)));
    assert_eq!(s.state(), State::Established);
    assert_eq!(s.peer().map(|p| p.hold_time), Some(9));

    // Read at 8 s, told at 10.5 s: the Hold timer expires at 17 s.
    let outs = s.handle(secs(10) + Duration::from_millis(500), Input::Heard(secs(8)));
    assert!(downs(&outs).is_empty());
    let outs = s.handle(secs(17) - Duration::from_millis(1), Input::Tick);
    assert!(downs(&outs).is_empty(), "{outs:?}");
    // Told of an older read: nothing moves back.
    s.handle(secs(16), Input::Heard(secs(5)));
    let outs = s.handle(secs(17), Input::Tick);
    assert_eq!(downs(&outs), vec![Reason::HoldTimerExpired]);
    assert_eq!(s.state(), State::Idle);
}

#[test]
fn silent_peer_hold_timer_expires_then_sessions_come_back() {
    let mut p = Pipe::new(config_a(), config_b());
    p.start();
    p.run_until(secs(10));
    assert_eq!(p.s[1].state(), State::Established);

    // A goes silent at t=10 s; its last KEEPALIVE went out at 9 s, so B's
    // hold timer (9 s) expires at 18 s.
    p.mute[0] = true;
    let mark = p.log.len();
    p.run_until(secs(18) - Duration::from_millis(1));
    assert_eq!(p.s[1].state(), State::Established);
    p.run_until(secs(18));
    assert_eq!(p.s[1].state(), State::Idle);
    let outs: Vec<Output> = p.log[mark..]
        .iter()
        .filter(|(_, s, _)| *s == 1)
        .map(|(_, _, o)| o.clone())
        .collect();
    assert_eq!(
        sent(&outs).last(),
        Some(&Message::Notification(Notification::new(4, 0)))
    );
    assert!(outs.contains(&Output::Close));
    assert_eq!(downs(&outs), vec![Reason::HoldTimerExpired]);
    // A saw the NOTIFICATION and went down too.
    let a_down: Vec<Reason> = p.log[mark..]
        .iter()
        .filter(|(_, s, _)| *s == 0)
        .flat_map(|(_, _, o)| downs(std::slice::from_ref(o)))
        .collect();
    assert_eq!(
        a_down,
        vec![Reason::PeerNotification(Notification::new(4, 0))]
    );
    assert_eq!(p.s[0].state(), State::Idle);

    // After idle_hold (1 s) both restart; A connects again. At 19 s A may
    // restart just before B listens again; its next attempt (20 s) works.
    p.mute[0] = false;
    assert_eq!(p.s[0].next_deadline(), Some(secs(19)));
    assert_eq!(p.s[1].next_deadline(), Some(secs(19)));
    p.run_until(secs(20));
    assert_eq!(p.s[0].state(), State::Established);
    assert_eq!(p.s[1].state(), State::Established);
    p.run_until(secs(120));
    assert_eq!(p.s[1].state(), State::Established);
}

#[test]
fn active_side_retries_until_the_peer_listens() {
    let mut p = Pipe::new(config_a(), config_b());
    // Only A starts: its attempts fail, it goes Idle and retries after 1 s.
    p.input(0, Input::Start);
    assert_eq!(p.s[0].state(), State::Idle);
    assert_eq!(
        downs(&p.log.iter().map(|l| l.2.clone()).collect::<Vec<_>>()),
        vec![Reason::TcpFailed]
    );
    p.run_until(secs(3));
    let connects = p.log.iter().filter(|l| l.2 == Output::Connect).count();
    assert_eq!(connects, 4, "at 0, 1, 2 and 3 s");
    p.input(1, Input::Start);
    p.run_until(secs(4));
    assert_eq!(p.s[0].state(), State::Established);
    // A manual Stop sends Cease and does not restart.
    p.input(0, Input::Stop);
    assert_eq!(p.s[0].state(), State::Idle);
    assert_eq!(p.s[1].state(), State::Idle);
    p.run_until(secs(60));
    assert_eq!(p.s[0].state(), State::Idle);
    assert_eq!(p.s[0].next_deadline(), None);
    assert_eq!(p.s[1].state(), State::Active, "B restarted and listens");
}

/// A session driven by hand: started and connected, OPEN already sent.
fn in_open_sent(config: SessionConfig) -> Session {
    let mut s = Session::new(config);
    let outs = s.handle(Duration::ZERO, Input::Start);
    assert_eq!(outs[0], Output::Connect);
    let outs = s.handle(Duration::ZERO, Input::TcpConnected);
    assert!(matches!(sent(&outs)[..], [Message::Open(_)]));
    assert_eq!(s.state(), State::OpenSent);
    assert_eq!(s.next_deadline(), Some(OPEN_HOLD_TIME));
    s
}

fn peer_open(my_as: u32, hold_time: u16) -> Open {
    Open {
        version: 4,
        my_as,
        hold_time,
        bgp_id: Ipv4Addr::new(10, 0, 0, 2),
        capabilities: vec![
            Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
            Capability::FourOctetAs(my_as),
        ],
    }
}

fn encode(m: Message) -> Vec<u8> {
    m.encode(&Context::FOUR_OCTET_AS)
}

/// Feeds `bytes`, expects the NOTIFICATION `code/subcode`, a Close, Idle,
/// and returns the Down reason.
fn expect_error(s: &mut Session, bytes: Vec<u8>, code: u8, subcode: u8) -> Reason {
    let outs = s.handle(secs(1), Input::Bytes(bytes));
    match &sent(&outs)[..] {
        [Message::Notification(n)] => assert_eq!((n.code, n.subcode), (code, subcode)),
        other => panic!("expected one NOTIFICATION, got {other:?}"),
    }
    assert!(outs.contains(&Output::Close));
    assert_eq!(s.state(), State::Idle);
    let reasons = downs(&outs);
    assert_eq!(reasons.len(), 1);
    assert_eq!(
        reasons[0].sent_notification().map(|n| (n.code, n.subcode)),
        Some((code, subcode))
    );
    reasons[0].clone()
}

#[test]
fn wrong_peer_as_is_bad_peer_as() {
    let mut s = in_open_sent(config_a());
    let r = expect_error(&mut s, encode(Message::Open(peer_open(65000, 9))), 2, 2);
    assert_eq!(r, Reason::Error(DecodeError::BadPeerAs { asn: 65000 }));
    // The automatic restart comes after idle_hold.
    assert_eq!(s.next_deadline(), Some(secs(2)));
    assert_eq!(s.handle(secs(2), Input::Tick)[0], Output::Connect);
}

#[test]
fn hold_time_one_is_unacceptable() {
    let mut s = in_open_sent(config_a());
    let mut bytes = encode(Message::Open(peer_open(AS_B, 9)));
    bytes[22..24].copy_from_slice(&1u16.to_be_bytes()); // Hold Time field
    let r = expect_error(&mut s, bytes, 2, 6);
    assert_eq!(
        r,
        Reason::Error(DecodeError::UnacceptableHoldTime { hold_time: 1 })
    );
}

#[test]
fn internal_peer_with_our_identifier_is_bad_bgp_identifier() {
    let mut s = in_open_sent(SessionConfig::new(AS_A, Ipv4Addr::new(10, 0, 0, 2)));
    expect_error(&mut s, encode(Message::Open(peer_open(AS_A, 9))), 2, 3);
    // On an external session the same identifier is fine (RFC 6286 §2.2).
    let mut s = in_open_sent(SessionConfig::new(AS_B + 1, Ipv4Addr::new(10, 0, 0, 2)));
    s.handle(
        secs(1),
        Input::Bytes(encode(Message::Open(peer_open(AS_A, 9)))),
    );
    assert_eq!(s.state(), State::OpenConfirm);
}

#[test]
fn garbage_bytes_are_connection_not_synchronized() {
    let mut s = in_open_sent(config_a());
    let r = expect_error(&mut s, b"GET / HTTP/1.1\r\n\r\n".to_vec(), 1, 1);
    assert_eq!(r, Reason::Error(DecodeError::ConnectionNotSynchronized));
}

#[test]
fn received_notification_goes_idle_with_the_reason() {
    let mut s = in_open_sent(config_a());
    let n = Notification::new(6, 2);
    let outs = s.handle(
        secs(1),
        Input::Bytes(encode(Message::Notification(n.clone()))),
    );
    assert!(sent(&outs).is_empty(), "no reply to a NOTIFICATION");
    assert!(outs.contains(&Output::Close));
    assert_eq!(s.state(), State::Idle);
    assert_eq!(downs(&outs), vec![Reason::PeerNotification(n)]);
}

#[test]
fn update_before_established_is_an_fsm_error() {
    let mut s = in_open_sent(config_a());
    let r = expect_error(&mut s, encode(Message::Update(update())), 5, 0);
    assert_eq!(
        r,
        Reason::UnexpectedMessage {
            state: State::OpenSent,
            msg_type: 2
        }
    );
    // Also in OpenConfirm.
    let mut s = in_open_sent(config_a());
    s.handle(
        secs(1),
        Input::Bytes(encode(Message::Open(peer_open(AS_B, 9)))),
    );
    assert_eq!(s.state(), State::OpenConfirm);
    expect_error(&mut s, encode(Message::Update(update())), 5, 0);
}

#[test]
fn two_octet_peer_and_zero_hold_time() {
    // A peer without the 4-octet AS capability: 2-octet AS_PATH context. It
    // proposes hold time 0: no KEEPALIVEs, no hold timer.
    let mut cfg = config_a();
    cfg.peer_as = Some(65002);
    let mut s = in_open_sent(cfg);
    let open = Open {
        version: 4,
        my_as: 65002,
        hold_time: 0,
        bgp_id: Ipv4Addr::new(10, 0, 0, 2),
        capabilities: vec![],
    };
    let outs = s.handle(secs(1), Input::Bytes(encode(Message::Open(open))));
    assert_eq!(sent(&outs), vec![Message::Keepalive]);
    let outs = s.handle(secs(1), Input::Bytes(encode(Message::Keepalive)));
    let Some(Output::Established(info)) = outs.last() else {
        panic!("not established: {outs:?}");
    };
    assert!(!info.four_octet_as);
    assert_eq!((info.hold_time, info.keepalive), (0, 0));
    assert_eq!(info.families, vec![AfiSafi::IPV4_UNICAST]);
    assert_eq!(s.next_deadline(), None);
    // UPDATEs go out with 2-octet AS numbers.
    let u = Update {
        attributes: PathAttributes {
            as_path: Some(AsPath::sequence([65001])),
            ..update().attributes
        },
        ..update()
    };
    let outs = s.send_update(secs(100), u.clone());
    let [Output::Send(bytes)] = &outs[..] else {
        panic!("{outs:?}");
    };
    assert_eq!(
        Message::decode(bytes, &Context::TWO_OCTET_AS),
        Ok(Message::Update(u))
    );
}

/// xorshift64*, fixed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_inputs_never_panic_nor_send_without_a_connection() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let configs = [config_a(), config_b(), {
        let mut c = config_a();
        c.peer_as = None;
        c.hold_time = 3;
        c
    }];
    let mut sessions: Vec<Session> = configs.iter().cloned().map(Session::new).collect();
    let mut conn_up = vec![false; sessions.len()];
    let mut now = Duration::ZERO;
    let mut states_seen = std::collections::HashSet::new();
    for step in 0..20_000 {
        let i = rng.below(sessions.len() as u64) as usize;
        now += Duration::from_millis(rng.below(2_000));
        let input = match rng.below(12) {
            0 => Input::Start,
            1 => Input::Stop,
            2 => Input::TcpConnected,
            3 => Input::TcpFailed,
            4 => Input::Tick,
            5 => Input::Heard(now.saturating_sub(Duration::from_millis(rng.below(5_000)))),
            6 => Input::Bytes(encode(Message::Open(peer_open(
                [AS_A, AS_B, 65000][rng.below(3) as usize],
                [0, 3, 9, 90][rng.below(4) as usize],
            )))),
            7 => Input::Bytes(encode(Message::Keepalive)),
            8 => Input::Bytes(encode(Message::Update(update()))),
            9 => Input::Bytes(encode(Message::Notification(Notification::new(6, 4)))),
            10 => {
                // A valid message cut at a random point.
                let m = encode(Message::Open(peer_open(AS_B, 9)));
                let cut = rng.below(m.len() as u64) as usize;
                Input::Bytes(m[..cut].to_vec())
            }
            _ => {
                // Random bytes, often behind a valid marker.
                let len = rng.below(40) as usize;
                let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                if rng.below(2) == 0 {
                    let mut v = vec![0xff; 16];
                    v.append(&mut b);
                    b = v;
                }
                Input::Bytes(b)
            }
        };
        // Like a driver, fire due timers before the event: the event (say a
        // connection) belongs to the state after them.
        for o in sessions[i].handle(now, Input::Tick) {
            match o {
                Output::Send(_) => assert!(conn_up[i], "step {step}: Send without connection"),
                Output::Close => conn_up[i] = false,
                _ => {}
            }
        }
        match input {
            Input::TcpConnected => conn_up[i] = true,
            Input::TcpFailed => conn_up[i] = false,
            _ => {}
        }
        let outs = sessions[i].handle(now, input.clone());
        for o in &outs {
            match o {
                Output::Send(_) => assert!(
                    conn_up[i],
                    "step {step}: Send without connection after {input:?}"
                ),
                Output::Close => conn_up[i] = false,
                _ => {}
            }
        }
        if rng.below(20) == 0 {
            let outs = sessions[i].send_update(now, update());
            assert!(outs.iter().all(|o| !matches!(o, Output::Send(_))) || conn_up[i]);
        }
        if let Some(d) = sessions[i].next_deadline() {
            // Deadlines are never in the past after handling.
            assert!(d > now, "step {step}: deadline {d:?} not after {now:?}");
        }
        states_seen.insert(sessions[i].state());
    }
    // The run exercised the whole machine.
    assert_eq!(states_seen.len(), 6, "{states_seen:?}");
}
