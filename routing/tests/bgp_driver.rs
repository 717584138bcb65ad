//! The tokio driver: two of our sessions over a loopback TCP connection
//! establish, pass an UPDATE, and a stop reaches the other side as a Cease
//! NOTIFICATION.

use std::net::Ipv4Addr;
use std::time::Duration;

use ipnet::Ipv4Net;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;
use turbonet_routing::bgp::driver::{DriverCommand, DriverEvent, run_session};
use turbonet_routing::bgp::session::{Reason, Session, SessionConfig, State};
use turbonet_routing::bgp::{AsPath, Message, Notification, Origin, PathAttributes, Update};

const TIMEOUT: Duration = Duration::from_secs(10);

async fn next(rx: &mut mpsc::UnboundedReceiver<DriverEvent>) -> DriverEvent {
    timeout(TIMEOUT, rx.recv())
        .await
        .expect("timed out waiting for a driver event")
        .expect("driver ended")
}

#[tokio::test]
async fn two_drivers_establish_exchange_and_stop() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (connected, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (a_stream, (b_stream, _)) = (connected.unwrap(), accepted.unwrap());

    let a = Session::new(SessionConfig {
        peer_as: Some(65002),
        ..SessionConfig::new(65001, Ipv4Addr::new(10, 0, 0, 1))
    });
    let b = Session::new(SessionConfig {
        peer_as: Some(65001),
        passive: true,
        ..SessionConfig::new(65002, Ipv4Addr::new(10, 0, 0, 2))
    });
    let (a_ev, mut a_rx) = mpsc::unbounded_channel();
    let (b_ev, mut b_rx) = mpsc::unbounded_channel();
    let (a_cmd, a_cmd_rx) = mpsc::unbounded_channel();
    let (_b_cmd, b_cmd_rx) = mpsc::unbounded_channel();
    let a_run = tokio::spawn(run_session(
        a,
        a_stream,
        move |e| drop(a_ev.send(e)),
        a_cmd_rx,
    ));
    let b_run = tokio::spawn(run_session(
        b,
        b_stream,
        move |e| drop(b_ev.send(e)),
        b_cmd_rx,
    ));

    for (rx, peer_as) in [(&mut a_rx, 65002), (&mut b_rx, 65001)] {
        match next(rx).await {
            DriverEvent::Established(p) => assert_eq!(p.peer_as, peer_as),
            other => panic!("expected Established, got {other:?}"),
        }
    }

    let update = Update {
        withdrawn: vec![],
        attributes: PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence([65001])),
            next_hop: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ..PathAttributes::default()
        },
        nlri: vec!["198.51.100.0/24".parse::<Ipv4Net>().unwrap()],
    };
    a_cmd
        .send(DriverCommand::SendUpdate(Box::new(update.clone())))
        .unwrap();
    assert_eq!(
        next(&mut b_rx).await,
        DriverEvent::Received(Message::Update(update))
    );

    a_cmd.send(DriverCommand::Stop).unwrap();
    assert_eq!(next(&mut a_rx).await, DriverEvent::Down(Reason::Stopped));
    assert_eq!(
        next(&mut b_rx).await,
        DriverEvent::Down(Reason::PeerNotification(Notification::new(
            Notification::CEASE,
            Notification::CEASE_ADMINISTRATIVE_SHUTDOWN,
        )))
    );
    for run in [a_run, b_run] {
        let session = timeout(TIMEOUT, run).await.unwrap().unwrap();
        assert_eq!(session.state(), State::Idle);
    }
}
