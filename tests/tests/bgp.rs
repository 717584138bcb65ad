//! End-to-end: `routing.mode = "bgp"` (root). Every switch runs a BGP
//! agent; `up` returns once every FIB is what the BGP plan says, and after
//! every fail or restore the fabric re-converges to the plan around it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use turbonet_tests::{
    LabGuard, bgp_shards, host_address, ping_from, require_root, run, text, turbonet, unique_lab,
    wait_until, workspace, write_scenario,
};

/// A bundled scenario under another name, in BGP mode, with `routing`
/// (more `[routing]` keys) added.
fn bgp_scenario(bundled: &str, lab: &str, routing: &str) -> PathBuf {
    let text = std::fs::read_to_string(workspace().join("scenarios").join(bundled)).unwrap();
    // `[topology]` lines ride in `routing` after a `[topology]` marker.
    let (routing, topology) = routing.split_once("[topology]\n").unwrap_or((routing, ""));
    let mut out = String::new();
    let mut renamed = false;
    for line in text.lines() {
        if !renamed && line.starts_with("name = ") {
            out.push_str(&format!("name = \"{lab}\"\n"));
            renamed = true;
        } else if line.starts_with("kind = ") {
            out.push_str(&format!("{line}\n{topology}\n"));
        } else if line.starts_with("mode = ") {
            out.push_str(&format!("mode = \"bgp\"\n{routing}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(renamed && out.contains("mode = \"bgp\""));
    write_scenario(lab, &out)
}

/// Brings a BGP lab up; its output must report the convergence.
fn up(bundled: &str, prefix: &str, routing: &str) -> LabGuard {
    let lab = unique_lab(prefix);
    let file = bgp_scenario(bundled, &lab, routing);
    let guard = LabGuard(lab);
    let out = run(&["up", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("converged in"), "{}", text(&out));
    guard
}

fn bgp(lab: &str) -> Value {
    let out = run(&["show", "bgp", "--lab", lab, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).expect("show bgp --json is JSON")
}

/// Every switch's FIB is what the plan says after the last change.
fn converged(report: &Value) -> bool {
    report["speakers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["converged"] == true)
}

fn sessions(report: &Value) -> (usize, usize) {
    let all: Vec<&Value> = report["speakers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["sessions"].as_array().unwrap())
        .collect();
    let up = all.iter().filter(|s| s["state"] == "established").count();
    (up, all.len())
}

fn check(lab: &str) {
    let out = run(&["check", "--lab", lab]);
    assert!(out.status.success(), "check failed: {}", text(&out));
}

/// `verb kind name`, then wait until the fabric has re-converged and check
/// every host pair.
fn change(lab: &str, verb: &str, kind: &str, name: &str) {
    let out = run(&[verb, kind, name, "--lab", lab]);
    assert!(out.status.success(), "{verb} {kind} {name}: {}", text(&out));
    assert!(
        wait_until(Duration::from_secs(20), || converged(&bgp(lab))),
        "no convergence after {verb} {kind} {name}: {}",
        text(&run(&["show", "bgp", "--lab", lab]))
    );
    check(lab);
}

/// The next hops of `prefix` in `node`'s kernel table (empty: no route).
fn nexthops(lab: &str, node: &str, prefix: &str) -> String {
    let out = run(&["show", "routes", node, "--lab", lab, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let routes: Value = serde_json::from_slice(&out.stdout).unwrap();
    routes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["prefix"] == prefix)
        .map(|r| r["nexthops"].to_string())
        .unwrap_or_default()
}

fn route_count(lab: &str, node: &str) -> usize {
    let out = run(&["show", "routes", node, "--lab", lab, "--json"]);
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn fat_tree_converges_and_reconverges_around_a_link_and_a_core() {
    require_root!();
    let lab = up("fat-tree-k4.toml", "bk", "");
    let lab = lab.0.as_str();
    let report = bgp(lab);
    assert!(converged(&report));
    assert_eq!(sessions(&report), (64, 64));
    assert_eq!(report["speakers"].as_array().unwrap().len(), 20);
    check(lab);

    // edge0-0 loses agg0-0. agg0-0 can no longer reach edge0-0 (the other
    // way round is through its own pod's AS), so it withdraws edge0-0's
    // prefixes, and so do the cores above it and the aggregation switches
    // of other pods that only they connect: fewer routes at agg1-0.
    let before = route_count(lab, "agg1-0");
    change(lab, "fail", "link", "edge0-0--agg0-0");
    assert!(route_count(lab, "agg1-0") < before);
    let report = bgp(lab);
    assert_eq!(sessions(&report), (62, 64));
    let events = text(&run(&["events", "--lab", lab]));
    assert!(
        events.contains("edge0-0: session with agg0-0 (10.1.0.1) down"),
        "{events}"
    );

    // A core fails on top: its four sessions go, the rest re-converge.
    change(lab, "fail", "node", "core0");
    assert_eq!(sessions(&bgp(lab)), (54, 64));

    change(lab, "restore", "node", "core0");
    change(lab, "restore", "link", "edge0-0--agg0-0");
    assert_eq!(route_count(lab, "agg1-0"), before);
    assert_eq!(sessions(&bgp(lab)), (64, 64));
}

/// The nexthop object `node`'s route to `prefix` points at (`ip route`
/// names it alone where the kernel does not spell out groups).
fn object_of(lab: &str, node: &str, prefix: &str) -> u32 {
    let out = run(&[
        "exec", node, "--lab", lab, "--", "ip", "route", "show", prefix,
    ]);
    let shown = text(&out);
    let id = shown
        .split_whitespace()
        .skip_while(|w| *w != "nhid")
        .nth(1)
        .unwrap_or_else(|| panic!("no nhid in `{shown}`"));
    id.parse().unwrap()
}

/// Where the kernel names a route's group alone (`nexthop_compat =
/// false`), a set of next hops that shrinks and grows back for every route
/// of its group is a change of that group, in place: the routes keep
/// pointing at it (nothing rewritten), and the route watcher still tells
/// of every route that changed, with its next hops.
#[test]
fn a_set_that_grows_back_is_its_group_changed_in_place_and_told_route_by_route() {
    require_root!();
    let lab = unique_lab("gp");
    let file = write_scenario(
        &lab,
        &format!(
            "[lab]\nname = \"{lab}\"\n\n[topology]\nkind = \"leaf-spine\"\nspines = 3\n\
             leaves = 3\nhosts_per_leaf = 1\nuplinks = 1\n\n[routing]\nmode = \"bgp\"\n\
             nexthop_compat = false\n"
        ),
    );
    let guard = LabGuard(lab);
    let lab = guard.0.as_str();
    let out = run(&["up", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    // leaf0's routes over all three spines: the other leaves' prefixes.
    let routes: Value =
        serde_json::from_slice(&run(&["show", "routes", "leaf0", "--lab", lab, "--json"]).stdout)
            .unwrap();
    let wide: Vec<String> = routes
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["nexthops"].as_array().is_some_and(|h| h.len() == 3))
        .map(|r| r["prefix"].as_str().unwrap().to_owned())
        .collect();
    assert!(wide.len() >= 2, "{routes}");
    let groups: Vec<u32> = wide.iter().map(|p| object_of(lab, "leaf0", p)).collect();
    let logged = run_json(&["events", "--lab", lab, "--json"]).len();

    change(lab, "fail", "node", "spine0");
    for prefix in &wide {
        assert_eq!(nexthops(lab, "leaf0", prefix).matches("spine").count(), 2);
    }
    change(lab, "restore", "node", "spine0");
    for (prefix, group) in wide.iter().zip(&groups) {
        assert!(
            nexthops(lab, "leaf0", prefix).contains("spine0"),
            "{prefix}"
        );
        assert_eq!(
            object_of(lab, "leaf0", prefix),
            *group,
            "{prefix} was rewritten"
        );
    }
    // Each route's last change at leaf0 says it is back over three spines.
    let told = wait_until(Duration::from_secs(5), || {
        let events = run_json(&["events", "--lab", lab, "--json"]);
        wide.iter().all(|prefix| {
            events[logged..]
                .iter()
                .filter(|e| e["kind"] == "route-change" && e["node"] == "leaf0")
                .flat_map(|e| e["routes"].as_array().unwrap().iter())
                .rfind(|r| {
                    r["prefixes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|p| p == prefix.as_str())
                })
                .is_some_and(|r| r["next_hops"].as_array().is_some_and(|h| h.len() == 3))
        })
    });
    assert!(told, "{}", text(&run(&["events", "--lab", lab])));
}

/// `turbonet ARGS` printing a JSON array.
fn run_json(args: &[&str]) -> Vec<Value> {
    let out = run(args);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn speakers_sharded_over_processes_converge_and_survive_a_shard_dying() {
    require_root!();
    let lab = unique_lab("bs");
    let file = bgp_scenario("fat-tree-k4.toml", &lab, "");
    let guard = LabGuard(lab);
    let lab = guard.0.as_str();
    let out = turbonet()
        .env("TURBONET_BGP_SHARDS", "3")
        .args(["up", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(bgp_shards(lab).len(), 3, "three shard processes");
    let report = bgp(lab);
    assert!(converged(&report));
    assert_eq!(sessions(&report), (64, 64));
    check(lab);

    change(lab, "fail", "node", "core0");
    assert_eq!(sessions(&bgp(lab)), (56, 64));
    let events = text(&run(&["events", "--lab", lab]));
    assert!(events.contains("session with core0"), "{events}");
    // The RIBs of every speaker, wherever it runs.
    let dir = std::env::temp_dir().join(format!("{lab}-snapshot"));
    let out = run(&["snapshot", dir.to_str().unwrap(), "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    let snapshot: Value =
        serde_json::from_slice(&std::fs::read(dir.join("snapshot.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(snapshot["rib"].as_object().unwrap().len(), 20);

    // A shard dies: it is started again, its speakers hear that core0 is
    // still down, and the fabric converges as before.
    let victim = bgp_shards(lab)[0];
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || {
            let pids = bgp_shards(lab);
            pids.len() == 3 && !pids.contains(&victim)
        }),
        "the shard was not started again"
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            let report = bgp(lab);
            converged(&report) && sessions(&report) == (56, 64)
        }),
        "no convergence after a shard died: {}",
        text(&run(&["show", "bgp", "--lab", lab]))
    );
    check(lab);
    let events = text(&run(&["events", "--lab", lab]));
    assert!(
        events.contains("killed by signal 9; starting it again"),
        "{events}"
    );

    let out = run(&["down", lab]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        wait_until(Duration::from_secs(10), || bgp_shards(lab).is_empty()),
        "shards left behind"
    );
}

/// HPN with one core layer serving both planes (`core = "shared"`).
const SHARED_CORE: &str = "[topology]\ncore = \"shared\"";

#[test]
fn hpn_with_a_shared_core_routes_around_a_failed_host_link_by_the_hosts_32() {
    require_root!();
    let lab = up("hpn.toml", "bh", SHARED_CORE);
    host_link_failover(lab.0.as_str());
}

/// Pings `addr` from `host` with its flows to `addr` pinned to its port
/// `ifname` (a /32 route through that port's gateway, as a host moves a
/// flow to one of its ports): true when answered. The replies may come
/// back on any port, so the ping itself is not bound to the port.
fn ping_out_of(lab: &str, host: &str, ifname: &str, addr: &str) -> bool {
    let out = run(&["show", "routes", host, "--lab", lab, "--json"]);
    let routes: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hop = routes[0]["nexthops"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|h| h.ends_with(&format!(" dev {ifname}")))
        .unwrap_or_else(|| panic!("{host} has no default through {ifname}: {routes}"));
    let gateway = hop.split_whitespace().nth(1).unwrap();
    let exec = |args: &[&str]| run(&[&["exec", host, "--lab", lab, "--"][..], args].concat());
    let route = format!("{addr}/32");
    let pin = exec(&[
        "ip", "route", "replace", &route, "via", gateway, "dev", ifname, "onlink",
    ]);
    assert!(pin.status.success(), "{}", text(&pin));
    let ping = exec(&["ping", "-c", "2", "-i", "0.2", "-W", "1", addr]);
    let unpin = exec(&["ip", "route", "del", &route]);
    assert!(unpin.status.success(), "{}", text(&unpin));
    ping.status.success()
}

/// With the planes apart through the core (HPN's design), a failed host
/// link leaves its plane without a way to the host: tor0-r0p0 withdraws
/// h0-0's /32 and no switch of plane 0 learns it again, while plane 1
/// still delivers. A sender reaches h0-0 out of its plane-1 port and no
/// longer out of its plane-0 port (its flows there must move: the NIC's
/// other port carries them).
#[test]
fn hpn_with_planes_apart_loses_a_failed_host_link_in_its_plane_only() {
    require_root!();
    let lab = up("hpn.toml", "bq", "");
    let lab = lab.0.as_str();
    check(lab);
    let (host, addr) = ("10.128.0.2/32", "10.128.0.2");
    assert!(nexthops(lab, "agg0-0", host).contains("tor0-r0p0"));
    assert!(ping_out_of(lab, "h1-0", "tor1-r0p0", addr));
    assert!(ping_out_of(lab, "h1-0", "tor1-r0p1", addr));
    let out = run(&["fail", "link", "h0-0--tor0-r0p0", "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        wait_until(Duration::from_secs(20), || converged(&bgp(lab))),
        "{}",
        text(&run(&["show", "bgp", "--lab", lab]))
    );
    for plane0 in ["agg0-0", "agg0-1", "tor0-r0p0", "tor1-r0p0"] {
        assert_eq!(
            nexthops(lab, plane0, host),
            "",
            "{plane0} still routes h0-0"
        );
    }
    assert!(nexthops(lab, "agg1-0", host).contains("tor0-r0p1"));
    assert!(!ping_out_of(lab, "h1-0", "tor1-r0p0", addr));
    assert!(ping_out_of(lab, "h1-0", "tor1-r0p1", addr));
    change(lab, "restore", "link", "h0-0--tor0-r0p0");
    assert!(nexthops(lab, "agg0-0", host).contains("tor0-r0p0"));
    assert!(ping_out_of(lab, "h1-0", "tor1-r0p0", addr));
}

/// h0-0's rail-0 address is announced as a /32 by both ToRs of its pair;
/// agg0-0 (plane 0) reaches it through tor0-r0p0 directly. When that host
/// link fails, tor0-r0p0 withdraws the /32: with a shared core, plane 0
/// reaches the host through the cores and its plane-1 ToR, and tor0-r0p0
/// itself learns it from the fabric. A restore puts the direct path back.
fn host_link_failover(lab: &str) {
    check(lab);
    let host = "10.128.0.2/32";
    assert!(nexthops(lab, "agg0-0", host).contains("tor0-r0p0"));
    change(lab, "fail", "link", "h0-0--tor0-r0p0");
    let hops = nexthops(lab, "agg0-0", host);
    assert!(!hops.is_empty() && !hops.contains("tor0-r0p0"), "{hops}");
    assert!(!nexthops(lab, "tor0-r0p0", host).is_empty());
    change(lab, "restore", "link", "h0-0--tor0-r0p0");
    assert!(nexthops(lab, "agg0-0", host).contains("tor0-r0p0"));
}

#[test]
fn show_bgp_explains_and_refuses_what_it_cannot_show() {
    require_root!();
    let lab = up("fat-tree-k4.toml", "bs", "hold_time = 9\nkeepalive = 3");
    let lab = lab.0.as_str();
    let out = run(&["show", "bgp", "edge0-0", "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = text(&out);
    for expected in [
        "AS 4200001000",
        "agg0-0",
        "agg0-1",
        "established",
        "26/26 routes",
    ] {
        assert!(shown.contains(expected), "{expected} missing in {shown}");
    }
    let out = run(&["show", "bgp", "edge0-O", "--lab", lab]);
    assert!(!out.status.success());
    assert!(text(&out).contains("edge0-0"), "{}", text(&out));
    let out = run(&["show", "bgp", "h0-0-0", "--lab", lab]);
    assert!(!out.status.success());
    assert!(text(&out).contains("host"), "{}", text(&out));
}

#[test]
fn show_bgp_on_a_static_lab_says_why_not() {
    require_root!();
    let lab = turbonet_tests::up_bundled("bn", "two-hosts.toml", "");
    let out = run(&["show", "bgp", "--lab", &lab.0]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not BGP"), "{}", text(&out));
}

#[test]
fn fat_tree_on_frr_converges_and_reconverges() {
    require_root!();
    let lab = up("fat-tree-k4.toml", "bf", "agent = \"frr\"");
    let lab = lab.0.as_str();
    assert!(converged(&bgp(lab)));
    check(lab);
    let before = route_count(lab, "agg1-0");
    change(lab, "fail", "link", "edge0-0--agg0-0");
    assert!(route_count(lab, "agg1-0") < before);
    change(lab, "fail", "node", "core0");
    change(lab, "restore", "node", "core0");
    change(lab, "restore", "link", "edge0-0--agg0-0");
    assert_eq!(route_count(lab, "agg1-0"), before);
    // FRR's own view of edge0-0's sessions, through `show bgp`.
    let out = run(&["show", "bgp", "edge0-0", "--lab", lab]);
    assert_eq!(
        text(&out).matches("established").count(),
        2,
        "{}",
        text(&out)
    );
}

#[test]
fn hpn_on_frr_routes_around_a_failed_host_link() {
    require_root!();
    let lab = up("hpn.toml", "bp", &format!("agent = \"frr\"\n{SHARED_CORE}"));
    let lab = lab.0.as_str();
    host_link_failover(lab);
    change(lab, "fail", "node", "agg0-1");
    change(lab, "restore", "node", "agg0-1");
}

#[test]
fn builtin_frr_and_bird_share_one_fabric() {
    require_root!();
    let lab = up(
        "hpn.toml",
        "bm",
        &format!(
            "[routing.agents]\n\"tor0-r0p0\" = \"frr\"\n\"agg0-0\" = \"frr\"\n\"tor0-r0p1\" = \"bird\"\n\"core1\" = \"bird\"\n{SHARED_CORE}"
        ),
    );
    let lab = lab.0.as_str();
    let report = bgp(lab);
    let agent = |node: &str| {
        report["speakers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["node"] == node)
            .map(|s| s["agent"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(
        [agent("tor0-r0p0"), agent("tor0-r0p1"), agent("tor1-r0p0")],
        ["frr", "bird", "builtin"]
    );
    // Every session, whichever implementation runs either end, as the
    // agents (and FRR's and BIRD's own reports) see it.
    assert_eq!(sessions(&report), (40, 40));
    check(lab);
    // The host behind the FRR ToR moves to the BIRD ToR's plane and back.
    change(lab, "fail", "link", "h0-0--tor0-r0p0");
    change(lab, "fail", "node", "core0");
    change(lab, "restore", "node", "core0");
    change(lab, "restore", "link", "h0-0--tor0-r0p0");
}

/// A BIRD router outside the fabric, in a namespace of the test's, peers
/// with edge0-0 over an external port: the fabric learns its network and
/// it learns the fabric's (it reaches a host with no static route).
#[test]
fn an_external_router_joins_the_fabric_over_bgp() {
    require_root!();
    if Command::new("bird").arg("--version").output().is_err() {
        eprintln!("skipped: bird (Debian bird2) is not installed");
        return;
    }
    let lab = unique_lab("bx");
    let pid = std::process::id() % 100_000;
    let (peer_ns, outside, inside) = (
        format!("tnt-bgp-{pid}"),
        format!("tbu{pid}"),
        format!("tbx{pid}"),
    );
    let dir = std::env::temp_dir().join(format!("turbonet-bgp-peer-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let ip = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().expect("ip runs");
        assert!(out.status.success(), "ip {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    struct Cleanup(String, String, Option<std::process::Child>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(child) = &mut self.2 {
                let _ = child.kill();
                let _ = child.wait();
            }
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
            let _ = Command::new("ip").args(["link", "del", &self.1]).status();
        }
    }
    let mut cleanup = Cleanup(peer_ns.clone(), inside.clone(), None);
    ip(&["netns", "add", &peer_ns]);
    ip(&[
        "link", "add", &inside, "type", "veth", "peer", "name", &outside, "netns", &peer_ns,
    ]);
    ip(&[
        "-n",
        &peer_ns,
        "addr",
        "add",
        "192.0.2.2/30",
        "dev",
        &outside,
    ]);
    ip(&["-n", &peer_ns, "link", "set", &outside, "up"]);
    ip(&["-n", &peer_ns, "link", "set", "lo", "up"]);
    let conf = dir.join("bird.conf");
    std::fs::write(
        &conf,
        "router id 192.0.2.2;\n\
         protocol device {}\n\
         protocol kernel { ipv4 { import none; export where source = RTS_BGP; }; merge paths on; }\n\
         protocol static { ipv4; route 198.51.100.0/24 blackhole; }\n\
         protocol bgp fabric {\n\
           local 192.0.2.2 as 65010;\n\
           neighbor 192.0.2.1 as 4200001000;\n\
           hold time 3; keepalive time 1; connect retry time 1;\n\
           ipv4 { import all; export where source = RTS_STATIC; };\n\
         }\n",
    )
    .unwrap();
    cleanup.2 = Some(
        Command::new("ip")
            .args(["netns", "exec", &peer_ns, "bird", "-f", "-c"])
            .arg(&conf)
            .arg("-s")
            .arg(dir.join("bird.ctl"))
            .arg("-P")
            .arg(dir.join("bird.pid"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("bird starts"),
    );

    let file = bgp_scenario(
        "fat-tree-k4.toml",
        &lab,
        &format!(
            "\n[[external]]\nnode = \"edge0-0\"\ninterface = \"{inside}\"\nname = \"ext0\"\n\
             address = \"192.0.2.1/30\"\nbgp = {{ peer = \"192.0.2.2\", asn = 65010 }}\n"
        ),
    );
    let _guard = LabGuard(lab.clone());
    let out = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));

    // The session comes up; the fabric learns the router's network.
    assert!(
        wait_until(Duration::from_secs(20), || {
            !nexthops(&lab, "agg1-0", "198.51.100.0/24").is_empty()
        }),
        "agg1-0 never learned 198.51.100.0/24: {}",
        text(&run(&["show", "bgp", "edge0-0", "--lab", &lab]))
    );
    let shown = text(&run(&["show", "bgp", "edge0-0", "--lab", &lab]));
    assert!(shown.contains(&format!("external {inside}")), "{shown}");
    // The switch that holds the session forwards to that network too (it
    // installs the route through the external port), so a host of the
    // fabric reaches an address in it.
    assert!(
        wait_until(Duration::from_secs(10), || {
            nexthops(&lab, "edge0-0", "198.51.100.0/24").contains("192.0.2.2")
        }),
        "edge0-0 has no route to 198.51.100.0/24 through the router: {}\n{}",
        nexthops(&lab, "edge0-0", "198.51.100.0/24"),
        text(&run(&["events", "--lab", &lab]))
    );
    ip(&[
        "-n",
        &peer_ns,
        "addr",
        "add",
        "198.51.100.1/32",
        "dev",
        "lo",
    ]);
    let ping = run(&[
        "exec",
        "h0-0-0",
        "--lab",
        &lab,
        "--",
        "ping",
        "-c",
        "2",
        "-W",
        "2",
        "-i",
        "0.2",
        "198.51.100.1",
    ]);
    assert!(
        ping.status.success(),
        "h0-0-0 cannot reach 198.51.100.1: {}",
        text(&ping)
    );
    // The router learned the fabric's: it reaches a host in another pod.
    let host = host_address(&lab, "h3-1-1");
    if let Err(e) = ping_from(&peer_ns, &host) {
        panic!("{e}");
    }
}
