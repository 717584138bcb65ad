//! Interop with a real BIRD 2 (root only): BIRD runs in a namespace of its
//! own behind a veth pair; our session and driver run in the root namespace
//! and connect to it. Both directions of route exchange are checked, and a
//! stop must take BIRD's protocol out of Established. Skipped with a note
//! when not root or when `bird` is not installed.

mod common;

use std::process::{Command, Stdio};

use common::{LOCAL_AS, Ours, PeerNet, have, is_root, wait_until};
use ipnet::Ipv4Net;
use std::net::Ipv4Addr;
use turbonet_routing::bgp::AsPath;
use turbonet_routing::bgp::session::Reason;

const BIRD_AS: u32 = 65002;

fn birdc(net: &PeerNet, args: &[&str]) -> String {
    let sock = net.dir.join("bird.ctl");
    let mut all = vec!["-s", sock.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = Command::new("birdc").args(&all).output().expect("birdc");
    String::from_utf8_lossy(&out.stdout).into_owned()
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

/// True (with a note) when this machine cannot run BIRD: not root, or
/// BIRD not installed.
fn skipped() -> bool {
    if !is_root() {
        turbonet_tests::skip("needs root (network namespaces)");
        return true;
    }
    if !have("bird") || !have("birdc") {
        turbonet_tests::skip("bird/birdc not installed (Debian package bird2)");
        return true;
    }
    false
}

/// A namespace `tnt-<tag>-<pid>` (veths `<veth>r<pid>`, `<veth>n<pid>`)
/// with BIRD in it, configured by [`bird_config`]; `offset` picks its /30.
fn start_bird(tag: &str, veth: &str, offset: u32) -> PeerNet {
    let mut net = PeerNet::new(tag, veth, offset);
    let (ours, theirs) = (net.ours, net.theirs);
    let conf = net.dir.join("bird.conf");
    std::fs::write(&conf, bird_config(theirs, theirs, ours)).unwrap();
    net.daemon = Some(
        Command::new("ip")
            .args(["netns", "exec", &net.netns, "bird", "-f", "-c"])
            .arg(&conf)
            .arg("-s")
            .arg(net.dir.join("bird.ctl"))
            .arg("-P")
            .arg(net.dir.join("bird.pid"))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn bird"),
    );

    net
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bird_exchanges_routes_and_sees_the_stop() {
    if skipped() {
        return;
    }
    let net = start_bird("bird", "tb", 0);
    let (ours, theirs) = (net.ours, net.theirs);

    // BIRD is passive: we connect to it.
    let mut session = Ours::establish(&net, BIRD_AS).await;

    // BIRD's static route, with its AS prepended and itself as next hop.
    let update = session.update_for("203.0.113.0/24".parse().unwrap()).await;
    assert_eq!(update.attributes.as_path, Some(AsPath::sequence([BIRD_AS])));
    assert_eq!(update.attributes.next_hop, Some(theirs));

    // Our route, as BIRD sees it.
    let our_prefix: Ipv4Net = "198.51.100.0/24".parse().unwrap();
    session.announce(&net, our_prefix).await;
    let shown = wait_until("BIRD to show 198.51.100.0/24", || {
        let out = birdc(&net, &["show", "route", "198.51.100.0/24", "all"]);
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
    let before = birdc(&net, &["show", "protocols"]);
    assert_eq!(established(&before), Some(true), "{before}");
    session.stop().await;
    wait_until("BIRD to leave Established", || {
        let out = birdc(&net, &["show", "protocols"]);
        (established(&out) == Some(false)).then_some(())
    })
    .await;
}

/// The session ends cleanly when BIRD sends a NOTIFICATION (`disable`:
/// an administrative shutdown) and when BIRD goes silent (our hold timer
/// expires and we send the NOTIFICATION RFC 4271 §6.5 asks for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bird_notification_and_silence_end_the_session() {
    if skipped() {
        return;
    }
    // 32 /30s on: clear of the other interop tests of this pid.
    let net = start_bird("birdn", "tc", 32);

    let session = Ours::establish(&net, BIRD_AS).await;
    birdc(&net, &["disable", "tnt"]);
    match session.down().await {
        Reason::PeerNotification(n) => assert_eq!((n.code, n.subcode), (6, 2), "{n:?}"),
        other => panic!("expected BIRD's Cease, got {other:?}"),
    }

    birdc(&net, &["enable", "tnt"]);
    let session = Ours::establish(&net, BIRD_AS).await;
    let pid = net.daemon.as_ref().expect("bird runs").id();
    common::run("kill", &["-STOP", &pid.to_string()]);
    let reason = session.down().await;
    common::run("kill", &["-CONT", &pid.to_string()]);
    assert_eq!(reason, Reason::HoldTimerExpired);
    assert_eq!(
        reason.sent_notification().map(|n| (n.code, n.subcode)),
        Some((4, 0))
    );
}
