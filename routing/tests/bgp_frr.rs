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
    // 64 /30s on from the one the BIRD test picks for the same pid.
    let mut net = PeerNet::new("frr", "tf", 64);
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
