//! Interop with a real FRR bgpd (root only): bgpd runs in a namespace of its
//! own behind a veth pair, as user `frr` with private paths and without
//! zebra; our session and driver run in the root namespace and connect to
//! it. Both directions of route exchange are checked, and a stop must take
//! FRR's neighbor out of Established. Skipped with a note when not root or
//! when FRR is not installed.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
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
const FRR_AS: u32 = 65003;
const BGPD: &str = "/usr/lib/frr/bgpd";
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
        .arg("--help")
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
    bgpd: Option<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut bgpd) = self.bgpd.take() {
            // bgpd runs in the foreground and `ip netns exec` execs it, so
            // this pid is bgpd's own.
            let _ = bgpd.kill();
            let _ = bgpd.wait();
        }
        if std::thread::panicking()
            && let Ok(log) = std::fs::read_to_string(self.dir.join("bgpd.log"))
        {
            eprintln!("--- bgpd.log ---\n{log}");
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
    /// One vtysh command against this lab's bgpd, inside its namespace.
    fn vtysh(&self, command: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.netns, "vtysh", "--vty_socket"])
            .arg(&self.dir)
            .args(["-c", command])
            .output()
            .expect("vtysh");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// The string value of the first `"key": "..."` in `json` after `anchor`
/// (FRR's JSON output is all we read, so this small scan is enough).
fn json_str_after(json: &str, anchor: &str, key: &str) -> Option<String> {
    let rest = &json[json.find(&format!("\"{anchor}\""))?..];
    let rest = &rest[rest.find(&format!("\"{key}\""))? + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
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

fn bgpd_config(router_id: Ipv4Addr, peer: Ipv4Addr) -> String {
    // Without zebra nothing is in a RIB to import from, so `network` must
    // not wait for the prefix to exist.
    format!(
        "router bgp {FRR_AS}
 bgp router-id {router_id}
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor {peer} remote-as {LOCAL_AS}
 neighbor {peer} timers 3 9
 neighbor {peer} passive
 neighbor {peer} advertisement-interval 0
 address-family ipv4 unicast
  network 203.0.113.0/24
 exit-address-family
"
    )
}

/// FRR's state for `peer`, from `show bgp neighbors PEER json`.
fn neighbor_state(lab: &Lab, peer: Ipv4Addr) -> Option<String> {
    let out = lab.vtysh(&format!("show bgp neighbors {peer} json"));
    json_str_after(&out, &peer.to_string(), "bgpState")
}

async fn next_event(rx: &mut mpsc::Receiver<DriverEvent>) -> DriverEvent {
    timeout(TIMEOUT, rx.recv())
        .await
        .expect("timed out waiting for a driver event")
        .expect("driver ended without a Down event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frr_exchanges_routes_and_sees_the_stop() {
    if !is_root() {
        eprintln!("bgp_frr: skipped, needs root");
        return;
    }
    if !Path::new(BGPD).exists() || !have("vtysh") {
        eprintln!("bgp_frr: skipped, {BGPD}/vtysh not installed (Debian package frr)");
        return;
    }
    let pid = std::process::id();
    // A /30 in 198.19.0.0/16 (RFC 2544 benchmarking range) picked by pid,
    // so concurrent runs do not collide; 64 /30s on from the one the BIRD
    // test would pick for the same pid.
    let base = 0xc613_0000u32 + ((pid + 64) % 16384) * 4;
    let ours = Ipv4Addr::from(base + 1);
    let theirs = Ipv4Addr::from(base + 2);
    let mut lab = Lab {
        netns: format!("tnt-frr-{pid}"),
        veth_root: format!("tfr{pid}"),
        dir: std::env::temp_dir().join(format!("tnt-frr-{pid}")),
        bgpd: None,
    };
    let veth_ns = format!("tfn{pid}");
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

    // bgpd drops to user frr: its config, pid file, zserv path and vty
    // socket all live in the private directory, which frr must own.
    let conf = lab.dir.join("bgpd.conf");
    std::fs::write(&conf, bgpd_config(theirs, ours)).unwrap();
    run("chown", &["-R", "frr:frr", lab.dir.to_str().unwrap()]);
    let log = format!("file:{}", lab.dir.join("bgpd.log").display());
    // In the foreground (no `-d`), so the child is bgpd itself.
    lab.bgpd = Some(
        Command::new("ip")
            .args(["netns", "exec", &lab.netns, BGPD, "-Z", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(lab.dir.join("bgpd.pid"))
            .arg("-z")
            .arg(lab.dir.join("zserv.api"))
            .arg("--vty_socket")
            .arg(&lab.dir)
            .args(["-u", "frr", "-g", "frr", "--log", &log])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn bgpd"),
    );

    // The neighbor is passive: connect to bgpd once it listens.
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
                "could not connect to bgpd: {last_err}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };

    let config = SessionConfig {
        peer_as: Some(FRR_AS),
        ..SessionConfig::new(LOCAL_AS, ours)
    };
    let (ev_tx, mut ev_rx) = mpsc::channel(64);
    let (cmd_tx, cmd_rx) = mpsc::channel(8);
    let driver = tokio::spawn(run_session(Session::new(config), stream, ev_tx, cmd_rx));

    match next_event(&mut ev_rx).await {
        DriverEvent::Established(peer) => {
            assert_eq!(peer.peer_as, FRR_AS);
            assert_eq!(peer.peer_id, theirs);
            assert_eq!(peer.hold_time, 9);
            assert!(peer.four_octet_as);
        }
        other => panic!("expected Established, got {other:?}"),
    }

    // FRR's network, with its AS prepended and itself as next hop.
    let frr_prefix: Ipv4Net = "203.0.113.0/24".parse().unwrap();
    let update = loop {
        match next_event(&mut ev_rx).await {
            DriverEvent::Received(Message::Update(u)) if u.nlri.contains(&frr_prefix) => break u,
            DriverEvent::Received(_) => {}
            other => panic!("expected FRR's UPDATE, got {other:?}"),
        }
    };
    assert_eq!(update.attributes.as_path, Some(AsPath::sequence([FRR_AS])));
    assert_eq!(update.attributes.next_hop, Some(theirs));

    // Our route, as FRR sees it.
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
    let shown = wait_until("FRR to show 198.51.100.0/24", || {
        let out = lab.vtysh("show bgp ipv4 unicast 198.51.100.0/24 json");
        out.contains("\"paths\"").then_some(out)
    })
    .await;
    assert_eq!(
        json_str_after(&shown, "aspath", "string"),
        Some(LOCAL_AS.to_string()),
        "AS path in {shown}"
    );
    assert_eq!(
        json_str_after(&shown, "nexthops", "ip"),
        Some(ours.to_string()),
        "next hop in {shown}"
    );

    // Stop: Cease NOTIFICATION, FRR leaves Established.
    let before = neighbor_state(&lab, ours);
    assert_eq!(before.as_deref(), Some("Established"));
    cmd_tx.send(DriverCommand::Stop).await.unwrap();
    loop {
        match next_event(&mut ev_rx).await {
            DriverEvent::Down(Reason::Stopped) => break,
            // FRR's End-of-RIB or keepalives may still be queued.
            DriverEvent::Received(_) => {}
            other => panic!("expected Down(Stopped), got {other:?}"),
        }
    }
    let session = timeout(TIMEOUT, driver).await.unwrap().unwrap();
    assert_eq!(session.state(), State::Idle);
    wait_until("FRR to leave Established", || {
        neighbor_state(&lab, ours).filter(|s| s != "Established")
    })
    .await;
}
