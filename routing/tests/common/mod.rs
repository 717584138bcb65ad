//! Harness shared by the interop tests against real BGP daemons (BIRD,
//! FRR): a namespace of the peer's own behind a veth pair, the peer daemon
//! in it, and our session + driver in the root namespace connecting to it.
//! Everything a test creates is removed when its [`PeerNet`] drops, also
//! when the test fails.

#![allow(dead_code)] // each test binary uses its own subset

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ipnet::Ipv4Net;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use turbonet_routing::bgp::driver::{DriverCommand, DriverEvent, run_session};
use turbonet_routing::bgp::session::{Reason, Session, SessionConfig, State};
use turbonet_routing::bgp::{AsPath, Message, Origin, PathAttributes, Update};

/// Our AS in every interop test.
pub(crate) const LOCAL_AS: u32 = 65001;
/// How long any single wait may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) use turbonet_tests::is_root;

/// True when `cmd --version` runs.
pub(crate) fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Runs a command that must succeed; its stdout.
pub(crate) fn run(cmd: &str, args: &[&str]) -> String {
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

/// The peer's namespace, the veth pair to it, a private directory, and the
/// peer daemon once started.
pub(crate) struct PeerNet {
    /// Namespace the peer runs in.
    pub netns: String,
    veth_root: String,
    /// Private directory for the daemon's config, sockets and logs.
    pub dir: PathBuf,
    /// The daemon, started in the foreground through `ip netns exec` (which
    /// execs it, so the pid is the daemon's own).
    pub daemon: Option<Child>,
    /// A log file in `dir` to print when the test fails.
    pub log: Option<PathBuf>,
    /// Our address (root namespace).
    pub ours: Ipv4Addr,
    /// The peer's address.
    pub theirs: Ipv4Addr,
}

impl PeerNet {
    /// Creates `tnt-<tag>-<pid>` with a /30 to it from 198.19.0.0/16 (RFC
    /// 2544 benchmarking range), picked by pid and `offset` so concurrent
    /// runs and the other interop tests do not collide. `prefix` names the
    /// veth ends (`<prefix>r<pid>`, `<prefix>n<pid>`, at most 15 bytes).
    pub(crate) fn new(tag: &str, prefix: &str, offset: u32) -> Self {
        let pid = std::process::id();
        let base = 0xc613_0000u32 + ((pid + offset) % 16384) * 4;
        let net = PeerNet {
            netns: format!("tnt-{tag}-{pid}"),
            veth_root: format!("{prefix}r{pid}"),
            dir: std::env::temp_dir().join(format!("tnt-{tag}-{pid}")),
            daemon: None,
            log: None,
            ours: Ipv4Addr::from(base + 1),
            theirs: Ipv4Addr::from(base + 2),
        };
        let veth_ns = format!("{prefix}n{pid}");
        std::fs::create_dir_all(&net.dir).unwrap();
        run("ip", &["netns", "add", &net.netns]);
        run(
            "ip",
            &[
                "link",
                "add",
                &net.veth_root,
                "type",
                "veth",
                "peer",
                "name",
                &veth_ns,
                "netns",
                &net.netns,
            ],
        );
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/30", net.ours),
                "dev",
                &net.veth_root,
            ],
        );
        run("ip", &["link", "set", &net.veth_root, "up"]);
        let in_ns = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &net.netns, "ip"];
            all.extend_from_slice(args);
            run("ip", &all);
        };
        in_ns(&[
            "addr",
            "add",
            &format!("{}/30", net.theirs),
            "dev",
            &veth_ns,
        ]);
        in_ns(&["link", "set", &veth_ns, "up"]);
        in_ns(&["link", "set", "lo", "up"]);
        net
    }

    /// Connects to the peer's port 179 from our address, retrying until it
    /// listens.
    pub(crate) async fn connect(&self) -> TcpStream {
        let end = Instant::now() + TIMEOUT;
        loop {
            let socket = TcpSocket::new_v4().unwrap();
            socket
                .bind(SocketAddr::V4(SocketAddrV4::new(self.ours, 0)))
                .unwrap();
            let to = SocketAddr::V4(SocketAddrV4::new(self.theirs, 179));
            let last_err = match timeout(Duration::from_secs(2), socket.connect(to)).await {
                Ok(Ok(s)) => return s,
                Ok(Err(e)) => e.to_string(),
                Err(_) => "connect timed out".to_owned(),
            };
            assert!(
                Instant::now() < end,
                "could not connect to the peer: {last_err}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for PeerNet {
    fn drop(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
        if std::thread::panicking()
            && let Some(log) = self
                .log
                .as_ref()
                .and_then(|l| std::fs::read_to_string(l).ok())
        {
            eprintln!("--- peer log ---\n{log}");
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

/// Polls `f` until it returns `Some`, at most [`TIMEOUT`].
pub(crate) async fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Our side of one session with the peer, driven by `run_session`.
pub(crate) struct Ours {
    events: mpsc::UnboundedReceiver<DriverEvent>,
    commands: mpsc::UnboundedSender<DriverCommand>,
    driver: JoinHandle<Session>,
}

impl Ours {
    /// Connects to the peer (AS `peer_as`) and waits until Established,
    /// checking what was negotiated.
    pub(crate) async fn establish(net: &PeerNet, peer_as: u32) -> Self {
        let stream = net.connect().await;
        let config = SessionConfig {
            peer_as: Some(peer_as),
            ..SessionConfig::new(LOCAL_AS, net.ours)
        };
        let (ev_tx, events) = mpsc::unbounded_channel();
        let (commands, cmd_rx) = mpsc::unbounded_channel();
        let driver = tokio::spawn(run_session(
            Session::new(config),
            stream,
            move |e| drop(ev_tx.send(e)),
            cmd_rx,
        ));
        let mut ours = Ours {
            events,
            commands,
            driver,
        };
        match ours.next_event().await {
            DriverEvent::Established(peer) => {
                assert_eq!(peer.peer_as, peer_as);
                assert_eq!(peer.peer_id, net.theirs);
                assert_eq!(peer.hold_time, 9);
                assert!(peer.four_octet_as);
            }
            other => panic!("expected Established, got {other:?}"),
        }
        ours
    }

    async fn next_event(&mut self) -> DriverEvent {
        timeout(TIMEOUT, self.events.recv())
            .await
            .expect("timed out waiting for a driver event")
            .expect("driver ended without a Down event")
    }

    /// Waits for the peer's UPDATE announcing `prefix` (skipping others,
    /// such as End-of-RIB).
    pub(crate) async fn update_for(&mut self, prefix: Ipv4Net) -> Update {
        loop {
            match self.next_event().await {
                DriverEvent::Received(Message::Update(u)) if u.nlri.contains(&prefix) => return u,
                DriverEvent::Received(_) => {}
                other => panic!("expected the peer's UPDATE for {prefix}, got {other:?}"),
            }
        }
    }

    /// Announces `prefix` with AS_PATH [LOCAL_AS] and our address as next hop.
    pub(crate) async fn announce(&self, net: &PeerNet, prefix: Ipv4Net) {
        let update = Update {
            withdrawn: vec![],
            attributes: PathAttributes {
                origin: Some(Origin::Igp),
                as_path: Some(AsPath::sequence([LOCAL_AS])),
                next_hop: Some(net.ours),
                ..PathAttributes::default()
            },
            nlri: vec![prefix],
        };
        self.commands
            .send(DriverCommand::SendUpdate(Box::new(update)))
            .unwrap();
    }

    /// Waits until the session goes down (skipping what the peer still
    /// sends) and returns why; our side must end Idle.
    pub(crate) async fn down(mut self) -> Reason {
        let reason = loop {
            match self.next_event().await {
                DriverEvent::Down(reason) => break reason,
                DriverEvent::Received(_) => {}
                other => panic!("expected the session to go down, got {other:?}"),
            }
        };
        let session = timeout(TIMEOUT, self.driver).await.unwrap().unwrap();
        assert_eq!(session.state(), State::Idle);
        reason
    }

    /// Stops the session (Cease NOTIFICATION) and waits until our side is
    /// down and Idle.
    pub(crate) async fn stop(mut self) {
        self.commands.send(DriverCommand::Stop).unwrap();
        loop {
            match self.next_event().await {
                DriverEvent::Down(Reason::Stopped) => break,
                // The peer's End-of-RIB or keepalives may still be queued.
                DriverEvent::Received(_) => {}
                other => panic!("expected Down(Stopped), got {other:?}"),
            }
        }
        let session = timeout(TIMEOUT, self.driver).await.unwrap().unwrap();
        assert_eq!(session.state(), State::Idle);
    }
}
