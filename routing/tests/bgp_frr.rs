//! Interop with a real FRR bgpd (root only): bgpd runs in a namespace of its
//! own behind a veth pair, as user `frr` with private paths and without
//! zebra; our session and driver run in the root namespace and connect to
//! it. Both directions of route exchange are checked, and a stop must take
//! FRR's neighbor out of Established. Skipped with a note when not root or
//! when FRR is not installed.

mod common;

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{LOCAL_AS, Ours, PeerNet, have, is_root, run, wait_until};
use ipnet::Ipv4Net;
use turbonet_routing::bgp::AsPath;
use turbonet_routing::bgp::session::Reason;

const FRR_AS: u32 = 65003;
const BGPD: &str = "/usr/lib/frr/bgpd";

/// One vtysh command against the test's bgpd, inside its namespace.
fn vtysh(net: &PeerNet, command: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &net.netns, "vtysh", "--vty_socket"])
        .arg(&net.dir)
        .args(["-c", command])
        .output()
        .expect("vtysh");
    String::from_utf8_lossy(&out.stdout).into_owned()
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
fn neighbor_state(net: &PeerNet, peer: Ipv4Addr) -> Option<String> {
    let out = vtysh(net, &format!("show bgp neighbors {peer} json"));
    json_str_after(&out, &peer.to_string(), "bgpState")
}

/// True (with a note) when this machine cannot run FRR: not root, or FRR
/// not installed.
fn skipped() -> bool {
    if !is_root() {
        turbonet_tests::skip("needs root (network namespaces)");
        return true;
    }
    if !Path::new(BGPD).exists() || !have("vtysh") {
        turbonet_tests::skip(&format!("{BGPD}/vtysh not installed (Debian package frr)"));
        return true;
    }
    false
}

/// A namespace `tnt-<tag>-<pid>` (veths `<veth>r<pid>`, `<veth>n<pid>`)
/// with bgpd in it, configured by [`bgpd_config`]; `offset` picks its /30.
fn start_bgpd(tag: &str, veth: &str, offset: u32) -> PeerNet {
    let mut net = PeerNet::new(tag, veth, offset);
    let (ours, theirs) = (net.ours, net.theirs);
    net.log = Some(net.dir.join("bgpd.log"));

    // bgpd drops to user frr: its config, pid file, zserv path and vty
    // socket all live in the private directory, which frr must own.
    let conf = net.dir.join("bgpd.conf");
    std::fs::write(&conf, bgpd_config(theirs, ours)).unwrap();
    run("chown", &["-R", "frr:frr", net.dir.to_str().unwrap()]);
    let log = format!("file:{}", net.dir.join("bgpd.log").display());
    // In the foreground (no `-d`), so the child is bgpd itself.
    net.daemon = Some(
        Command::new("ip")
            .args(["netns", "exec", &net.netns, BGPD, "-Z", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(net.dir.join("bgpd.pid"))
            .arg("-z")
            .arg(net.dir.join("zserv.api"))
            .arg("--vty_socket")
            .arg(&net.dir)
            .args(["-u", "frr", "-g", "frr", "--log", &log])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn bgpd"),
    );

    net
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frr_exchanges_routes_and_sees_the_stop() {
    if skipped() {
        return;
    }
    // 64 /30s on from the one the BIRD test picks for the same pid.
    let net = start_bgpd("frr", "tf", 64);
    let (ours, theirs) = (net.ours, net.theirs);

    // The neighbor is passive: we connect to bgpd.
    let mut session = Ours::establish(&net, FRR_AS).await;

    // FRR's network, with its AS prepended and itself as next hop.
    let update = session.update_for("203.0.113.0/24".parse().unwrap()).await;
    assert_eq!(update.attributes.as_path, Some(AsPath::sequence([FRR_AS])));
    assert_eq!(update.attributes.next_hop, Some(theirs));

    // Our route, as FRR sees it.
    let our_prefix: Ipv4Net = "198.51.100.0/24".parse().unwrap();
    session.announce(&net, our_prefix).await;
    let shown = wait_until("FRR to show 198.51.100.0/24", || {
        let out = vtysh(&net, "show bgp ipv4 unicast 198.51.100.0/24 json");
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
    let before = neighbor_state(&net, ours);
    assert_eq!(before.as_deref(), Some("Established"));
    session.stop().await;
    wait_until("FRR to leave Established", || {
        neighbor_state(&net, ours).filter(|s| s != "Established")
    })
    .await;
}

/// The session ends cleanly when FRR sends a NOTIFICATION (an
/// administrative shutdown) and when FRR goes silent (our hold timer
/// expires and we send the NOTIFICATION RFC 4271 §6.5 asks for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frr_notification_and_silence_end_the_session() {
    if skipped() {
        return;
    }
    // 96 /30s on: clear of the other interop tests of this pid.
    let net = start_bgpd("frrn", "tg", 96);
    let ours = net.ours;

    // FRR shuts the neighbor down: Cease, Administrative Shutdown
    // (RFC 4486 §3, subcode 2).
    let session = Ours::establish(&net, FRR_AS).await;
    vtysh_config(
        &net,
        &[
            &format!("router bgp {FRR_AS}"),
            &format!("neighbor {ours} shutdown"),
        ],
    );
    match session.down().await {
        Reason::PeerNotification(n) => assert_eq!((n.code, n.subcode), (6, 2), "{n:?}"),
        other => panic!("expected FRR's Cease, got {other:?}"),
    }

    // Back up, then FRR stops answering: after the 9 s hold time our side
    // gives up with Hold Timer Expired (code 4).
    vtysh_config(
        &net,
        &[
            &format!("router bgp {FRR_AS}"),
            &format!("no neighbor {ours} shutdown"),
        ],
    );
    let session = Ours::establish(&net, FRR_AS).await;
    let pid = net.daemon.as_ref().expect("bgpd runs").id();
    run("kill", &["-STOP", &pid.to_string()]);
    let reason = session.down().await;
    run("kill", &["-CONT", &pid.to_string()]);
    assert_eq!(reason, Reason::HoldTimerExpired);
    assert_eq!(
        reason.sent_notification().map(|n| (n.code, n.subcode)),
        Some((4, 0))
    );
}

/// Runs configuration commands in FRR (`configure terminal` first).
fn vtysh_config(net: &PeerNet, commands: &[&str]) {
    let mut args = vec!["netns", "exec", &net.netns, "vtysh", "--vty_socket"];
    let dir = net.dir.to_str().unwrap().to_owned();
    args.push(&dir);
    args.extend(["-c", "configure terminal"]);
    for c in commands {
        args.extend(["-c", c]);
    }
    let out = Command::new("ip").args(&args).output().expect("vtysh runs");
    assert!(
        out.status.success(),
        "vtysh {commands:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
