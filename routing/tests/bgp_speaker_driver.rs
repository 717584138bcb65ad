//! The speaker driver over real TCP on loopback: two speakers (127.0.0.1
//! and 127.0.0.2, one listener each, the connector mapping port 179 to
//! them) establish, install each other's routes in their FIBs, follow a
//! port going down and up, and stop; and keep their sessions up while
//! their thread is busy for longer than the Hold Time. A peer by hand that
//! sends only KEEPALIVEs keeps its session up, then lets it expire.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use ipnet::Ipv4Net;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, timeout};
use turbonet_routing::NextHop;
use turbonet_routing::bgp::plan::{self, Neighbour, Origination};
use turbonet_routing::bgp::session::Reason;
use turbonet_routing::bgp::speaker::{Cause, Event, NextHops, PeerState, Speaker, Status, Timers};
use turbonet_routing::bgp::speaker_driver::{
    Connector, Control, Fib, Report, SpeakerIo, accept_loop, run_speaker,
};
use turbonet_routing::bgp::{AfiSafi, Capability, Context, Message, Open};
use turbonet_topo::NodeId;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Connects from the local address to the listener standing for the
/// remote's port 179.
#[derive(Debug, Clone)]
struct Loopback {
    ports: BTreeMap<Ipv4Addr, u16>,
}

impl Connector for Loopback {
    fn connect(
        &mut self,
        local: Ipv4Addr,
        remote: SocketAddrV4,
    ) -> impl Future<Output = io::Result<TcpStream>> + Send + 'static {
        let port = self.ports.get(remote.ip()).copied();
        async move {
            let port = port.ok_or(io::ErrorKind::ConnectionRefused)?;
            let socket = TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((local, 0)))?;
            socket.connect(SocketAddr::from((*remote.ip(), port))).await
        }
    }
}

/// A FIB in memory, watched by the test; a request a route.
#[derive(Debug)]
struct MemFib(watch::Sender<BTreeMap<Ipv4Net, Vec<NextHop>>>, u64);

impl Fib for MemFib {
    type Error = String;

    async fn apply(&mut self, routes: Vec<(Ipv4Net, NextHops)>) -> Result<(), String> {
        self.1 += routes.len() as u64;
        self.0.send_modify(|fib| {
            for (prefix, hops) in routes {
                if hops.is_empty() {
                    fib.remove(&prefix);
                } else {
                    fib.insert(prefix, hops.to_vec());
                }
            }
        });
        Ok(())
    }

    fn requests(&self) -> u64 {
        self.1
    }
}

fn plan_for(i: u8) -> plan::Speaker {
    let (me, other) = (
        Ipv4Addr::new(127, 0, 0, 1 + i),
        Ipv4Addr::new(127, 0, 0, 2 - i),
    );
    plan::Speaker {
        node: NodeId(i.into()),
        name: format!("s{i}"),
        asn: 65001 + u32::from(i),
        router_id: Ipv4Addr::new(10, 0, 0, 1 + i),
        neighbours: vec![Neighbour {
            link: None,
            peer: Some(NodeId((1 - i).into())),
            peer_name: format!("s{}", 1 - i),
            ifname: "eth0".to_owned(),
            local_addr: me,
            peer_addr: other,
            peer_asn: 65002 - u32::from(i),
            passive: me > other,
        }],
        originate: vec![Origination {
            prefix: Ipv4Net::new(Ipv4Addr::new(10, 0, 0, 1 + i), 32).unwrap(),
            port: None,
        }],
        host_ports: vec![],
    }
}

/// A running speaker, as a caller holds it.
struct Running {
    control: mpsc::UnboundedSender<Control>,
    status: watch::Receiver<Status>,
    fib: watch::Receiver<BTreeMap<Ipv4Net, Vec<NextHop>>>,
    reports: mpsc::UnboundedReceiver<Report>,
    task: Option<tokio::task::JoinHandle<Speaker>>,
}

impl Running {
    async fn fib_until(
        &mut self,
        what: &str,
        f: impl Fn(&BTreeMap<Ipv4Net, Vec<NextHop>>) -> bool,
    ) {
        timeout(TIMEOUT, self.fib.wait_for(|fib| f(fib)))
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
            .unwrap();
    }

    async fn state_until(&mut self, state: PeerState) {
        self.status_until(&state.to_string(), |s| {
            s.neighbours.first().is_some_and(|n| n.state == state)
        })
        .await;
    }

    async fn status_until(&mut self, what: &str, f: impl Fn(&Status) -> bool) {
        timeout(TIMEOUT, self.status.wait_for(|s| f(s)))
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
            .unwrap();
    }

    async fn event(&mut self) -> Event {
        match timeout(TIMEOUT, self.reports.recv())
            .await
            .unwrap()
            .unwrap()
        {
            Report::Event(e) => e,
            Report::FibFailed(e) => panic!("{e}"),
        }
    }
}

/// A listener on `addr`, and its port.
fn listen(addr: Ipv4Addr) -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind((addr, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// Starts the two speakers with their tasks spawned on `speakers` and
/// their connections on `connections`.
async fn start_two(
    speakers: &tokio::runtime::Handle,
    connections: &tokio::runtime::Handle,
) -> (Vec<Running>, Instant) {
    let mut listeners = Vec::new();
    let mut ports = BTreeMap::new();
    for i in 0..2u8 {
        let addr = Ipv4Addr::new(127, 0, 0, 1 + i);
        let (listener, port) = listen(addr);
        ports.insert(addr, port);
        listeners.push(listener);
    }
    let epoch = Instant::now();
    let running = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let on = (speakers, connections);
            start(i as u8, listener, &ports, epoch, on)
        })
        .collect();
    (running, epoch)
}

/// Starts speaker `i` of [`plan_for`], listening on `listener`, its
/// neighbours' ports in `ports`; its task spawned on `on.0`, its
/// connections on `on.1`.
fn start(
    i: u8,
    listener: std::net::TcpListener,
    ports: &BTreeMap<Ipv4Addr, u16>,
    epoch: Instant,
    on: (&tokio::runtime::Handle, &tokio::runtime::Handle),
) -> Running {
    let (speakers, connections) = on;
    let (accepted_tx, accepted) = mpsc::unbounded_channel();
    let listener = {
        let _entered = connections.enter();
        TcpListener::from_std(listener).unwrap()
    };
    connections.spawn(accept_loop(listener, accepted_tx));
    let (control, control_rx) = mpsc::unbounded_channel();
    let (status_tx, status) = watch::channel(Status::default());
    let (fib_tx, fib) = watch::channel(BTreeMap::new());
    let (report_tx, reports) = mpsc::unbounded_channel();
    let speaker = Speaker::new(
        plan_for(i),
        Timers::from(&turbonet_topo::BgpTimers::default()),
    );
    let io = SpeakerIo {
        connector: Loopback {
            ports: ports.clone(),
        },
        accepted,
        fib: MemFib(fib_tx, 0),
        control: control_rx,
        status: status_tx,
        epoch,
        runtime: connections.clone(),
    };
    let task = speakers.spawn(run_speaker(speaker, io, move |r| drop(report_tx.send(r))));
    Running {
        control,
        status,
        fib,
        reports,
        task: Some(task),
    }
}

#[tokio::test]
async fn two_speakers_over_tcp_follow_a_port_down_and_up_then_stop() {
    let here = tokio::runtime::Handle::current();
    let (mut running, epoch) = start_two(&here, &here).await;
    let [a, b] = &mut running[..] else {
        unreachable!()
    };
    let a_loopback: Ipv4Net = "10.0.0.1/32".parse().unwrap();
    let b_loopback: Ipv4Net = "10.0.0.2/32".parse().unwrap();

    // Up: each FIB has the other's loopback through the other's address.
    a.fib_until("A's route", |fib| fib.contains_key(&b_loopback))
        .await;
    b.fib_until("B's route", |fib| fib.contains_key(&a_loopback))
        .await;
    assert_eq!(
        a.fib.borrow()[&b_loopback],
        [NextHop {
            via: Some(Ipv4Addr::new(127, 0, 0, 2)),
            ifname: "eth0".to_owned(),
            onlink: true,
        }]
    );
    assert!(matches!(
        a.event().await,
        Event::Established { peer: 0, .. }
    ));
    // The status is published after the FIB is written: wait for it.
    a.status_until("A's status with B's route", |s| {
        s.routes == 1 && s.neighbours[0].state == PeerState::Established
    })
    .await;
    let status = a.status.borrow().clone();
    assert_eq!(status.neighbours[0].received, 1);
    assert!(status.sessions_up());

    // A's port goes down: its session at once, B's with the Cease; both
    // FIBs lose the route.
    a.control
        .send(Control::Port {
            ifname: "eth0".to_owned(),
            up: false,
        })
        .unwrap();
    assert_eq!(
        a.event().await,
        Event::Down {
            peer: 0,
            established: true,
            cause: Cause::PortDown
        }
    );
    a.fib_until("A's route gone", BTreeMap::is_empty).await;
    b.fib_until("B's route gone", BTreeMap::is_empty).await;
    a.state_until(PeerState::PortDown).await;

    // Back up: A connects again.
    a.control
        .send(Control::Port {
            ifname: "eth0".to_owned(),
            up: true,
        })
        .unwrap();
    a.fib_until("A's route back", |fib| fib.contains_key(&b_loopback))
        .await;
    b.fib_until("B's route back", |fib| fib.contains_key(&a_loopback))
        .await;
    assert!(epoch.elapsed() < TIMEOUT);

    // Stop A: B hears the Cease; A's FIB is left as it is.
    a.control.send(Control::Stop).unwrap();
    let task = a.task.take().expect("running");
    let stopped = timeout(TIMEOUT, task).await.unwrap().unwrap();
    assert_eq!(stopped.peer_state(0), Some(PeerState::Idle));
    assert!(a.fib.borrow().contains_key(&b_loopback));
    b.fib_until("B's route gone after the stop", BTreeMap::is_empty)
        .await;
}

/// A thread busy for longer than the Hold Time (a thousand speakers
/// converging on it) resets no session: the connections' writers, on
/// another thread, keep sending KEEPALIVEs, and what arrived meanwhile is
/// read before the Hold timer is checked.
#[tokio::test]
async fn sessions_stay_up_while_the_speakers_thread_is_busy() {
    let speakers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let here = tokio::runtime::Handle::current();
    let (mut running, epoch) = start_two(speakers.handle(), &here).await;
    for r in &mut running {
        r.state_until(PeerState::Established).await;
    }
    let since: Vec<Duration> = running
        .iter()
        .map(|r| r.status.borrow().neighbours[0].since)
        .collect();

    // The Hold Time is 3 s: the thread is busy for 4.
    let hold = Duration::from_secs(turbonet_topo::BgpTimers::default().hold_time.into());
    let busy = hold + Duration::from_secs(1);
    let (done_tx, done) = tokio::sync::oneshot::channel();
    speakers.spawn(async move {
        std::thread::sleep(busy);
        let _ = done_tx.send(epoch.elapsed());
    });
    let ended = timeout(TIMEOUT, done).await.unwrap().unwrap();

    // Each speaker's first batch after it: still the same sessions.
    for (r, since) in running.iter_mut().zip(since) {
        let status = timeout(TIMEOUT, r.status.wait_for(|s| s.at > ended))
            .await
            .expect("a batch after the busy spell")
            .unwrap()
            .clone();
        assert_eq!(status.neighbours[0].state, PeerState::Established);
        assert_eq!(status.neighbours[0].since, since, "the session was reset");
        while let Ok(report) = r.reports.try_recv() {
            assert!(
                !matches!(report, Report::Event(Event::Down { .. })),
                "{report:?}"
            );
        }
    }
    speakers.shutdown_background();
}

/// A peer by hand that sends nothing but KEEPALIVEs once Established
/// (which the connection's reader keeps rather than wake the speaker for
/// each) holds the session up for several Hold Times; once it falls
/// silent the session is reset by its Hold timer, on time.
#[tokio::test]
async fn keepalives_kept_by_the_reader_hold_a_session_up_and_silence_still_resets_it() {
    let here = tokio::runtime::Handle::current();
    let peer_addr = Ipv4Addr::new(127, 0, 0, 2);
    let (mine, _) = listen(Ipv4Addr::new(127, 0, 0, 1));
    let (theirs, their_port) = listen(peer_addr);
    let ports = BTreeMap::from([(peer_addr, their_port)]);
    let epoch = Instant::now();
    let mut a = start(0, mine, &ports, epoch, (&here, &here));

    // The peer: answers A's OPEN, then only KEEPALIVEs, one a second,
    // while it reads (and drops) what A sends.
    let theirs = TcpListener::from_std(theirs).unwrap();
    let (stream, _) = timeout(TIMEOUT, theirs.accept()).await.unwrap().unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut r, mut w) = stream.into_split();
    let ctx = Context::FOUR_OCTET_AS;
    let open = Open {
        version: 4,
        my_as: 65002,
        hold_time: 3,
        bgp_id: Ipv4Addr::new(10, 0, 0, 2),
        capabilities: vec![
            Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
            Capability::FourOctetAs(65002),
        ],
    };
    w.write_all(&Message::Open(open).encode(&ctx))
        .await
        .unwrap();
    w.write_all(&Message::Keepalive.encode(&ctx)).await.unwrap();
    let drain = tokio::spawn(async move {
        let mut buf = vec![0; 65536];
        while r.read(&mut buf).await.is_ok_and(|n| n > 0) {}
    });
    a.state_until(PeerState::Established).await;
    assert!(matches!(
        a.event().await,
        Event::Established { peer: 0, .. }
    ));
    let since = a.status.borrow().neighbours[0].since;

    let hold = Duration::from_secs(3);
    let talking = 3 * hold;
    let until = Instant::now() + talking;
    let mut last = Instant::now();
    while last < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        w.write_all(&Message::Keepalive.encode(&ctx)).await.unwrap();
        last = Instant::now();
    }
    let status = a.status.borrow().clone();
    assert_eq!(status.neighbours[0].state, PeerState::Established);
    assert_eq!(status.neighbours[0].since, since, "the session was reset");
    assert_eq!(status.counters.hold_expiries, 0);
    assert!(
        a.reports.try_recv().is_err(),
        "no session event while talking"
    );

    // Silent from now: the Hold timer expires a Hold Time after the last
    // KEEPALIVE, not before, and not much later.
    let event = timeout(hold * 3, a.event())
        .await
        .expect("the Hold timer expired");
    assert_eq!(
        event,
        Event::Down {
            peer: 0,
            established: true,
            cause: Cause::Session(Reason::HoldTimerExpired),
        }
    );
    let after = last.elapsed();
    assert!(
        after >= hold - Duration::from_millis(50) && after <= hold + Duration::from_secs(2),
        "reset {after:?} after the last KEEPALIVE"
    );
    // Counted, once.
    timeout(
        TIMEOUT,
        a.status.wait_for(|s| s.counters.hold_expiries == 1),
    )
    .await
    .expect("the expiry counted")
    .unwrap();
    drain.abort();
}
