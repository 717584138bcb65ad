//! Interop with a real BIRD 2 (root only): BIRD runs in a namespace of its
//! own behind a veth pair; our session and driver run in the root namespace
//! and connect to it. Both directions of route exchange are checked, and a
//! stop must take BIRD's protocol out of Established. Skipped with a note
//! when not root or when `bird` is not installed.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ipnet::Ipv4Net;
use tokio::net::TcpSocket;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use turbonet_routing::bgp::driver::{DriverCommand, DriverEvent, run_session};
use turbonet_routing::bgp::session::{Reason, Session, SessionConfig, State};
use turbonet_routing::bgp::{AsPath, Message, Origin, PathAttributes, Update};

const LOCAL_AS: u32 = 65001;
const BIRD_AS: u32 = 65002;
const TIMEOUT: Duration = Duration::from_secs(20);

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Everything this test created; dropping it removes all of it, also when
/// the test fails.
struct Lab {
    netns: String,
    veth_root: String,
    dir: PathBuf,
    bird: Option<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut bird) = self.bird.take() {
            // `ip netns exec` execs bird, so this pid is bird's own.
            let _ = bird.kill();
            let _ = bird.wait();
        }
        // Deleting the namespace destroys the veth end inside it and so the
        // pair; delete the root end too in case the namespace never got it.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth_root])
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Lab {
    fn birdc(&self, args: &[&str]) -> String {
        let sock = self.dir.join("bird.ctl");
        let mut all = vec!["-s", sock.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = Command::new("birdc").args(&all).output().expect("birdc");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Polls `f` until it returns `Some`, at most `TIMEOUT`.
async fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn bird_config(router_id: Ipv4Addr, local: Ipv4Addr, peer: Ipv4Addr) -> String {
    format!(
        "router id {router_id};
protocol device {{ }}
protocol static {{
    ipv4;
    route 203.0.113.0/24 blackhole;
}}
protocol bgp tnt {{
    local {local} as {BIRD_AS};
    neighbor {peer} as {LOCAL_AS};
    hold time 9;
    passive on;
    ipv4 {{ import all; export all; }};
}}
"
    )
}

async fn next_event(rx: &mut mpsc::Receiver<DriverEvent>) -> DriverEvent {
    timeout(TIMEOUT, rx.recv())
        .await
        .expect("timed out waiting for a driver event")
        .expect("driver ended without a Down event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bird_exchanges_routes_and_sees_the_stop() {
    if !is_root() {
        eprintln!("bgp_bird: skipped, needs root");
        return;
    }
    if !have("bird") || !have("birdc") {
        eprintln!("bgp_bird: skipped, bird/birdc not installed (Debian package bird2)");
        return;
    }
    let pid = std::process::id();
    // A /30 in 198.19.0.0/16 (RFC 2544 benchmarking range) picked by pid,
    // so concurrent runs do not collide.
    let base = 0xc613_0000u32 + (pid % 16384) * 4;
    let ours = Ipv4Addr::from(base + 1);
    let theirs = Ipv4Addr::from(base + 2);
    let mut lab = Lab {
        netns: format!("tnt-bird-{pid}"),
        veth_root: format!("tbr{pid}"),
        dir: std::env::temp_dir().join(format!("tnt-bird-{pid}")),
        bird: None,
    };
    let veth_ns = format!("tbn{pid}");
    std::fs::create_dir_all(&lab.dir).unwrap();
    run("ip", &["netns", "add", &lab.netns]);
    run(
        "ip",
        &[
            "link",
            "add",
            &lab.veth_root,
            "type",
            "veth",
            "peer",
            "name",
            &veth_ns,
            "netns",
            &lab.netns,
        ],
    );
    run(
        "ip",
        &["addr", "add", &format!("{ours}/30"), "dev", &lab.veth_root],
    );
    run("ip", &["link", "set", &lab.veth_root, "up"]);
    let in_ns = |args: &[&str]| {
        let mut all = vec!["netns", "exec", &lab.netns, "ip"];
        all.extend_from_slice(args);
        run("ip", &all);
    };
    in_ns(&["addr", "add", &format!("{theirs}/30"), "dev", &veth_ns]);
    in_ns(&["link", "set", &veth_ns, "up"]);
    in_ns(&["link", "set", "lo", "up"]);

    let conf = lab.dir.join("bird.conf");
    std::fs::write(&conf, bird_config(theirs, theirs, ours)).unwrap();
    let sock = lab.dir.join("bird.ctl");
    let pidfile = lab.dir.join("bird.pid");
    lab.bird = Some(
        Command::new("ip")
            .args(["netns", "exec", &lab.netns, "bird", "-f", "-c"])
            .arg(&conf)
            .arg("-s")
            .arg(&sock)
            .arg("-P")
            .arg(&pidfile)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn bird"),
    );

    // BIRD is passive: connect to it once it listens.
    let stream = {
        let end = Instant::now() + TIMEOUT;
        loop {
            let socket = TcpSocket::new_v4().unwrap();
            socket
                .bind(SocketAddr::V4(SocketAddrV4::new(ours, 0)))
                .unwrap();
            let last_err = match timeout(
                Duration::from_secs(2),
                socket.connect(SocketAddr::V4(SocketAddrV4::new(theirs, 179))),
            )
            .await
            {
                Ok(Ok(s)) => break s,
                Ok(Err(e)) => e.to_string(),
                Err(_) => "connect timed out".to_string(),
            };
            assert!(
                Instant::now() < end,
                "could not connect to BIRD: {last_err}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };

    let config = SessionConfig {
        peer_as: Some(BIRD_AS),
        ..SessionConfig::new(LOCAL_AS, ours)
    };
    let (ev_tx, mut ev_rx) = mpsc::channel(64);
    let (cmd_tx, cmd_rx) = mpsc::channel(8);
    let driver = tokio::spawn(run_session(Session::new(config), stream, ev_tx, cmd_rx));

    match next_event(&mut ev_rx).await {
        DriverEvent::Established(peer) => {
            assert_eq!(peer.peer_as, BIRD_AS);
            assert_eq!(peer.peer_id, theirs);
            assert_eq!(peer.hold_time, 9);
            assert!(peer.four_octet_as);
        }
        other => panic!("expected Established, got {other:?}"),
    }

    // BIRD's static route, with its AS prepended and itself as next hop.
    let bird_prefix: Ipv4Net = "203.0.113.0/24".parse().unwrap();
    let update = loop {
        match next_event(&mut ev_rx).await {
            DriverEvent::Received(Message::Update(u)) if u.nlri.contains(&bird_prefix) => break u,
            DriverEvent::Received(_) => {}
            other => panic!("expected BIRD's UPDATE, got {other:?}"),
        }
    };
    assert_eq!(update.attributes.as_path, Some(AsPath::sequence([BIRD_AS])));
    assert_eq!(update.attributes.next_hop, Some(theirs));

    // Our route, as BIRD sees it.
    let our_prefix: Ipv4Net = "198.51.100.0/24".parse().unwrap();
    cmd_tx
        .send(DriverCommand::SendUpdate(Box::new(Update {
            withdrawn: vec![],
            attributes: PathAttributes {
                origin: Some(Origin::Igp),
                as_path: Some(AsPath::sequence([LOCAL_AS])),
                next_hop: Some(ours),
                ..PathAttributes::default()
            },
            nlri: vec![our_prefix],
        })))
        .await
        .unwrap();
    let shown = wait_until("BIRD to show 198.51.100.0/24", || {
        let out = lab.birdc(&["show", "route", "198.51.100.0/24", "all"]);
        out.contains("198.51.100.0/24").then_some(out)
    })
    .await;
    assert!(
        shown
            .lines()
            .any(|l| l.trim() == format!("BGP.as_path: {LOCAL_AS}")),
        "AS path in {shown}"
    );
    assert!(
        shown
            .lines()
            .any(|l| l.trim() == format!("BGP.next_hop: {ours}")),
        "next hop in {shown}"
    );

    // Stop: Cease NOTIFICATION, BIRD leaves Established.
    let established = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("tnt "))
            .map(|l| l.contains("Established"))
    };
    let before = lab.birdc(&["show", "protocols"]);
    assert_eq!(established(&before), Some(true), "{before}");
    cmd_tx.send(DriverCommand::Stop).await.unwrap();
    loop {
        match next_event(&mut ev_rx).await {
            DriverEvent::Down(Reason::Stopped) => break,
            // BIRD's End-of-RIB may still be queued.
            DriverEvent::Received(_) => {}
            other => panic!("expected Down(Stopped), got {other:?}"),
        }
    }
    let session = timeout(TIMEOUT, driver).await.unwrap().unwrap();
    assert_eq!(session.state(), State::Idle);
    wait_until("BIRD to leave Established", || {
        let out = lab.birdc(&["show", "protocols"]);
        (established(&out) == Some(false)).then_some(())
    })
    .await;
}
