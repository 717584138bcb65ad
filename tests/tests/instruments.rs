//! End-to-end: the instruments a monitor, a filter or a verifier uses on a
//! running lab (root): ground-truth events, the metrics endpoint,
//! snapshots.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use turbonet_tests::{
    LabGuard, VENV_PYTHON, require_root, run, scenario_as, text, unique_lab, up_bundled,
    wait_until, workspace,
};

/// Brings fat-tree k=4 up under BGP with `agent` (and the lines `routing`
/// more in `[routing]`); the guard takes it down.
fn bgp_fat_tree(prefix: &str, agent: &str, routing: &str) -> LabGuard {
    let lab = unique_lab(prefix);
    let file = scenario_as("fat-tree-k4.toml", &lab, "");
    let text_of = std::fs::read_to_string(&file).unwrap().replace(
        "mode = \"static\"",
        &format!("mode = \"bgp\"\nagent = \"{agent}\"\n{routing}"),
    );
    std::fs::write(&file, text_of).unwrap();
    let guard = LabGuard(lab);
    let out = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    guard
}

fn json(args: &[&str]) -> Value {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out)))
}

/// Every switch's kernel table: next hops that forward, by prefix.
fn tables(lab: &str) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let nodes = json(&["show", "nodes", "--lab", lab, "--json"]);
    nodes
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["role"] != "host")
        .map(|n| {
            let name = n["name"].as_str().unwrap().to_owned();
            let routes = json(&["show", "routes", &name, "--lab", lab, "--json"]);
            let table = routes
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let hops = r["nexthops"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|h| h.as_str())
                        .filter(|h| !h.ends_with("(down)"))
                        .map(str::to_owned)
                        .collect();
                    (r["prefix"].as_str().unwrap().to_owned(), hops)
                })
                .filter(|(_, hops): &(String, BTreeSet<String>)| !hops.is_empty())
                .collect();
            (name, table)
        })
        .collect()
}

fn converged(lab: &str) -> bool {
    json(&["show", "bgp", "--lab", lab, "--json"])["speakers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["converged"] == true)
}

fn events(lab: &str) -> Vec<Value> {
    json(&["events", "--lab", lab, "--json"])
        .as_array()
        .unwrap()
        .clone()
}

/// A failed link changes routes at some switches: every one of them (the
/// switches whose kernel table differs between before and after) has a
/// `route-change` event after the `fail` naming the prefixes that changed,
/// and no other switch has one.
fn a_fail_is_a_route_change_at_every_affected_switch(agent: &str, prefix: &str, routing: &str) {
    let lab = bgp_fat_tree(prefix, agent, routing);
    let lab = lab.0.as_str();
    assert!(wait_until(Duration::from_secs(30), || converged(lab)));
    let before = tables(lab);
    let logged = events(lab).len();
    let out = run(&["fail", "link", "edge0-0--agg0-0", "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        wait_until(Duration::from_secs(30), || converged(lab)),
        "no convergence: {}",
        text(&run(&["show", "bgp", "--lab", lab]))
    );
    // The kernel's last notifications reach the events a moment after the
    // tables converge.
    let after = tables(lab);
    let mut affected = BTreeMap::new();
    for (switch, table) in &after {
        let old = &before[switch];
        let changed: BTreeSet<String> = old
            .keys()
            .chain(table.keys())
            .filter(|p| old.get(*p) != table.get(*p))
            .cloned()
            .collect();
        if !changed.is_empty() {
            affected.insert(switch.clone(), changed);
        }
    }
    assert!(affected.len() > 4, "{affected:?}");
    let seen = |events: &[Value]| -> BTreeMap<String, BTreeSet<String>> {
        let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for e in events.iter().filter(|e| e["kind"] == "route-change") {
            let prefixes = seen
                .entry(e["node"].as_str().unwrap().to_owned())
                .or_default();
            for r in e["routes"].as_array().unwrap() {
                for p in r["prefixes"].as_array().unwrap() {
                    prefixes.insert(p.as_str().unwrap().to_owned());
                }
            }
        }
        seen
    };
    let mut got = BTreeMap::new();
    let complete = wait_until(Duration::from_secs(5), || {
        let all = events(lab);
        got = seen(&all[logged..]);
        affected
            .iter()
            .all(|(s, prefixes)| got.get(s).is_some_and(|g| g.is_superset(prefixes)))
    });
    assert!(complete, "affected {affected:?}\nevents {got:?}");
    let unaffected: Vec<&String> = got.keys().filter(|s| !affected.contains_key(*s)).collect();
    assert!(
        unaffected.is_empty(),
        "route-change events at {unaffected:?}"
    );
    // The fail itself is an event about the link, before every route change.
    let all = events(lab);
    let fail = all[logged..]
        .iter()
        .find(|e| e["kind"] == "fail")
        .unwrap_or_else(|| panic!("{all:?}"));
    assert_eq!(fail["link"], "edge0-0--agg0-0");
    let first_change = all[logged..]
        .iter()
        .filter(|e| e["kind"] == "route-change")
        .map(|e| e["t"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert!(
        fail["t"].as_f64().unwrap() <= first_change,
        "{fail} after {first_change}"
    );
    if routing.contains("nexthop_compat = false") {
        // The kernel names each ECMP route's group alone.
        let out = run(&["exec", "edge0-1", "--lab", lab, "--", "ip", "route"]);
        let shown = text(&out);
        assert!(shown.contains(" nhid "), "{shown}");
        assert!(!shown.contains("nexthop via"), "{shown}");
    }
    if agent == "frr" {
        // A snapshot holds the configuration FRR runs on every switch.
        let snap = Snapshot::take(lab);
        let configs = snap.json["configs"].as_object().unwrap();
        assert_eq!(configs.len(), 20);
        for (switch, config) in configs {
            assert_eq!(config["agent"], "frr");
            let path = format!("configs/{switch}/frr.conf");
            assert!(
                config["files"]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from(path.clone()))
            );
            let text = std::fs::read_to_string(snap.dir.join(&path)).unwrap();
            assert!(text.contains("router bgp"), "{path}: {text}");
        }
        assert_eq!(snap.json["fib"].as_object().unwrap().len(), 20);
        assert!(snap.json["rib"].as_object().unwrap().is_empty());
    }
}

#[test]
fn a_fail_is_a_route_change_at_every_affected_switch_with_builtin_agents() {
    require_root!();
    a_fail_is_a_route_change_at_every_affected_switch("builtin", "ib", "");
}

/// The same where the kernels name only a route's nexthop group
/// (`nexthop_compat_mode` 0): the watcher resolves each route's next hops
/// from the groups it hears of, and `ip route` shows the group alone.
#[test]
fn a_fail_is_a_route_change_at_every_affected_switch_with_routes_told_by_their_groups() {
    require_root!();
    a_fail_is_a_route_change_at_every_affected_switch("builtin", "ig", "nexthop_compat = false");
}

#[test]
fn a_fail_is_a_route_change_at_every_affected_switch_with_frr() {
    require_root!();
    a_fail_is_a_route_change_at_every_affected_switch("frr", "if", "");
}

/// A snapshot (`turbonet snapshot DIR`) into a scratch directory, removed
/// on drop.
struct Snapshot {
    dir: std::path::PathBuf,
    json: Value,
}

impl Snapshot {
    fn take(lab: &str) -> Snapshot {
        let dir = std::env::temp_dir().join(format!("turbonet-snapshot-{lab}"));
        let _ = std::fs::remove_dir_all(&dir);
        let out = run(&["snapshot", dir.to_str().unwrap(), "--lab", lab]);
        assert!(out.status.success(), "{}", text(&out));
        let json =
            serde_json::from_str(&std::fs::read_to_string(dir.join("snapshot.json")).unwrap())
                .unwrap();
        Snapshot { dir, json }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The prefixes of a list of routes whose `protocol` (if given) is this.
fn prefixes(routes: &Value, protocol: Option<&str>) -> BTreeSet<String> {
    routes
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| protocol.is_none_or(|p| r["protocol"] == p))
        .map(|r| r["prefix"].as_str().unwrap().to_owned())
        .collect()
}

/// A snapshot of fat-tree k=4 under BGP lists every switch's forwarding
/// table as the kernel holds it, every agent's Loc-RIB agreeing with its
/// FIB, every neighbour's routes with their path attributes, every edge
/// switch reaching every host subnet, and the failure in force.
#[test]
fn a_snapshot_of_a_bgp_fat_tree_lists_every_prefix_in_every_fib_and_rib() {
    require_root!();
    let lab = bgp_fat_tree("is", "builtin", "");
    let lab = lab.0.as_str();
    assert!(wait_until(Duration::from_secs(30), || converged(lab)));
    let out = run(&["fail", "link", "edge1-0--agg1-1", "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(wait_until(Duration::from_secs(30), || converged(lab)));
    let snap = Snapshot::take(lab);
    let s = &snap.json;
    assert_eq!(s["format"], "turbonet-snapshot/1");
    assert_eq!(
        s["failures"]["links"],
        serde_json::json!(["edge1-0--agg1-1"])
    );
    assert_eq!(s["topology"]["nodes"].as_array().unwrap().len(), 36);
    assert_eq!(s["topology"]["links"].as_array().unwrap().len(), 48);
    // Every edge switch's host subnet (a /29 in fat-tree k=4: its
    // gateway's network).
    let subnets: BTreeMap<String, String> = s["topology"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["role"] == "edge")
        .map(|n| {
            let port = n["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["peer"].as_str().unwrap().starts_with('h'))
                .unwrap();
            let gateway: std::net::Ipv4Addr = port["address"]
                .as_str()
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let subnet = std::net::Ipv4Addr::from(u32::from(gateway) & !7);
            (
                n["name"].as_str().unwrap().to_owned(),
                format!("{subnet}/29"),
            )
        })
        .collect();
    assert_eq!(subnets.len(), 8, "{subnets:?}");
    let kernel = tables(lab);
    for (switch, fib) in s["fib"].as_object().unwrap() {
        // The snapshot's table is the kernel's.
        let have = prefixes(fib, None);
        let theirs: BTreeSet<String> = kernel[switch].keys().cloned().collect();
        assert_eq!(have, theirs, "{switch}");
        // The agent's Loc-RIB is its FIB's BGP routes.
        let rib = &s["rib"][switch];
        let selected: BTreeSet<String> = rib["loc_rib"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["local"] == false)
            .map(|r| r["prefix"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(selected, prefixes(fib, Some("bgp")), "{switch}");
        // Every route received carries its path attributes.
        for neighbour in rib["adj_rib_in"].as_array().unwrap() {
            for route in neighbour["routes"].as_array().unwrap() {
                assert_eq!(
                    route["next_hop"], neighbour["peer_address"],
                    "{switch}: {route}"
                );
                assert!(
                    !route["as_path"].as_array().unwrap().is_empty(),
                    "{switch}: {route}"
                );
                assert_eq!(route["origin"], "igp");
            }
        }
        if switch.starts_with("edge") {
            let missing: Vec<&String> = subnets
                .iter()
                .filter(|(edge, subnet)| *edge != switch && !have.contains(*subnet))
                .map(|(_, subnet)| subnet)
                .collect();
            assert!(missing.is_empty(), "{switch} has no route to {missing:?}");
        }
    }
    assert_eq!(s["fib"].as_object().unwrap().len(), 20);
    assert_eq!(s["rib"].as_object().unwrap().len(), 20);
}

/// A TCP port free on this machine now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every sample of an OpenMetrics endpoint, parsed by the Prometheus
/// project's parser (`tests/openmetrics.py`), run in `node` of `lab` (or on
/// this machine): `(family, labels) -> value`.
fn scrape(
    url: &str,
    from: Option<(&str, &str)>,
) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
    let script = workspace().join("tests/openmetrics.py");
    let script = script.to_str().unwrap();
    let out = match from {
        Some((lab, node)) => run(&["exec", node, "--lab", lab, "--", VENV_PYTHON, script, url]),
        None => std::process::Command::new(VENV_PYTHON)
            .args([script, url])
            .output()
            .unwrap(),
    };
    assert!(out.status.success(), "scraping {url}: {}", text(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let labels = v["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            (
                (v["name"].as_str().unwrap().to_owned(), labels),
                v["value"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The value of the sample `name` whose labels include `with`.
fn sample(
    samples: &BTreeMap<(String, BTreeMap<String, String>), f64>,
    name: &str,
    with: &[(&str, &str)],
) -> f64 {
    let found: Vec<f64> = samples
        .iter()
        .filter(|((n, labels), _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{name} {with:?}: {found:?} in {:?}",
        samples
            .keys()
            .filter(|(n, _)| n == name)
            .collect::<Vec<_>>()
    );
    found[0]
}

/// `[metrics]` serves OpenMetrics that the Prometheus project's parser
/// reads, on this machine and on the management network; its counters
/// move with traffic and its gauges with a failure.
#[test]
fn the_metrics_endpoint_parses_and_its_counters_move_with_traffic() {
    require_root!();
    turbonet_tests::require_venv!();
    let port = free_port();
    let lab = up_bundled(
        "im",
        "two-hosts.toml",
        &format!("[metrics]\nport = {port}\n[mgmt]\n"),
    );
    let lab = lab.0.as_str();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let before = scrape(&url, None);
    let h1_s1 = [("link", "h1--s1"), ("node", "h1"), ("peer", "s1")];
    let sent = sample(&before, "turbonet_link_passed_frames_total", &h1_s1);
    assert_eq!(
        sample(&before, "turbonet_link_up", &[("link", "h1--s1")]),
        1.0
    );
    assert_eq!(
        sample(
            &before,
            "turbonet_link_delay_seconds",
            &[("link", "h1--s1")]
        ),
        0.005
    );
    let ping = run(&[
        "exec", "h1", "--lab", lab, "--", "ping", "-c", "20", "-i", "0.01", "-q", "h2",
    ]);
    assert!(ping.status.success(), "{}", text(&ping));
    // The daemon counts every 100 ms.
    let moved = wait_until(Duration::from_secs(5), || {
        sample(
            &scrape(&url, None),
            "turbonet_link_passed_frames_total",
            &h1_s1,
        ) >= sent + 20.0
    });
    assert!(moved, "{}", text(&run(&["link", "show", "--lab", lab])));
    let out = run(&["fail", "link", "h1--s1", "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    // From a host, over the management network.
    let from_host = scrape(&format!("http://mgmt:{port}/metrics"), Some((lab, "h2")));
    assert_eq!(
        sample(&from_host, "turbonet_link_up", &[("link", "h1--s1")]),
        0.0
    );
    assert_eq!(
        sample(&from_host, "turbonet_events_total", &[("kind", "fail")]),
        1.0
    );
    assert!(sample(&from_host, "turbonet_link_passed_bytes_total", &h1_s1) >= 20.0 * 98.0);
}

/// One frame of a capture file (pcapng or pcap): its interface (the
/// direction), bytes and comment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    interface: u32,
    data: Vec<u8>,
    comment: Option<String>,
}

/// Every whole frame of a pcapng file.
fn read_pcapng(path: &std::path::Path) -> Vec<Frame> {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
    use pcap_file::pcapng::{Block, PcapNgReader};
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // A file still being written ends in a partial block, or is empty:
    // what is whole so far.
    let Ok(mut reader) = PcapNgReader::new(file) else {
        return Vec::new();
    };
    let mut frames = Vec::new();
    while let Some(Ok(block)) = reader.next_block() {
        if let Block::EnhancedPacket(epb) = block {
            frames.push(Frame {
                interface: epb.interface_id,
                data: epb.data.to_vec(),
                comment: epb.options.iter().find_map(|o| match o {
                    EnhancedPacketOption::Comment(c) => Some(c.to_string()),
                    _ => None,
                }),
            });
        }
    }
    frames
}

/// Every whole frame of a pcap file (tcpdump's `-w`).
fn read_pcap(path: &std::path::Path) -> Vec<Vec<u8>> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let Ok(mut reader) = pcap_file::pcap::PcapReader::new(file) else {
        return Vec::new();
    };
    let mut frames = Vec::new();
    while let Some(Ok(packet)) = reader.next_packet() {
        frames.push(packet.data.to_vec());
    }
    frames
}

/// An ICMP echo request's identifier, if the frame is one.
fn echo_request_id(frame: &[u8]) -> Option<u16> {
    (frame.len() >= 42 && frame[12..14] == [0x08, 0x00] && frame[23] == 1 && frame[34] == 8)
        .then(|| u16::from_be_bytes([frame[38], frame[39]]))
}

/// A background process, stopped with SIGINT (as Ctrl-C) and waited for
/// when dropped.
struct Background(std::process::Child);

impl Background {
    fn interrupt(&mut self) -> std::process::ExitStatus {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        self.0.wait().unwrap()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            self.interrupt();
        }
    }
}

/// A scratch directory, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("turbonet-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Two hosts and a monitor behind one switch; h2's link loses 20%.
fn tapped_lab(prefix: &str, extra: &str) -> LabGuard {
    let lab = unique_lab(prefix);
    let file = turbonet_tests::write_scenario(
        &lab,
        &format!(
            r#"[lab]
name = "{lab}"
seed = 3
[topology]
kind = "custom"
[[topology.nodes]]
name = "s1"
role = "switch"
[[topology.nodes]]
name = "h1"
role = "host"
[[topology.nodes]]
name = "h2"
role = "host"
[[topology.nodes]]
name = "mon"
role = "host"
[[topology.links]]
a = "h1"
b = "s1"
[[topology.links]]
a = "h2"
b = "s1"
loss = "20%"
[[topology.links]]
a = "mon"
b = "s1"
[routing]
mode = "static"
{extra}"#
        ),
    );
    let guard = LabGuard(lab);
    let out = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    guard
}

/// `tcpdump` in `node` of `lab` on `ifname`, packet-buffered into `file`,
/// listening once this returns.
fn tcpdump(lab: &str, node: &str, args: &[&str], file: &std::path::Path) -> Background {
    let log = file.with_extension("log");
    let mut command = turbonet_tests::turbonet();
    command
        .args([
            "exec",
            node,
            "--lab",
            lab,
            "--",
            "tcpdump",
            "--immediate-mode",
            "-U",
            "-n",
            "-w",
        ])
        .arg(file)
        .args(args)
        .stderr(std::fs::File::create(&log).unwrap());
    let child = Background(command.spawn().unwrap());
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("listening on"))),
        "tcpdump did not start: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    child
}

fn ping(lab: &str, args: &[&str]) {
    let mut all = vec!["exec", "h1", "--lab", lab, "--", "ping", "-q"];
    all.extend(args);
    all.push("h2");
    // Loss on the way is expected: the exit code is not the point.
    let _ = run(&all);
}

/// A capture of a lossy link holds exactly the frames its receiver got
/// (compared with tcpdump at the receiver), in order, and every frame the
/// link dropped, annotated with why.
#[test]
fn a_capture_of_a_lossy_link_is_what_the_receiver_got_and_the_drops_annotated() {
    require_root!();
    let lab = tapped_lab("ic", "");
    let lab = lab.0.as_str();
    let scratch = Scratch::new("capture");
    let ours = scratch.0.join("h2.pcapng");
    // Frames from s1 to h2: `b-a` of h2--s1.
    let mut capture = Background(
        turbonet_tests::turbonet()
            .args([
                "capture",
                "h2--s1",
                "--direction",
                "b-a",
                "--lab",
                lab,
                "-w",
            ])
            .arg(&ours)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let theirs = scratch.0.join("h2.pcap");
    let mut receiver = tcpdump(lab, "h2", &["-i", "s1", "-Q", "in", "icmp"], &theirs);
    // Both are recording once a probe shows up in both.
    let seen = wait_until(Duration::from_secs(10), || {
        ping(lab, &["-c", "1", "-W", "0.2"]);
        read_pcapng(&ours)
            .iter()
            .any(|f| f.comment.is_none() && echo_request_id(&f.data).is_some())
            && !read_pcap(&theirs).is_empty()
    });
    assert!(seen, "no probe reached both captures");
    ping(lab, &["-c", "300", "-i", "0.005", "-W", "1"]);
    assert_eq!(capture.interrupt().code(), Some(130));
    receiver.interrupt();

    let captured = read_pcapng(&ours);
    assert!(
        captured.iter().all(|f| f.interface == 1),
        "only b-a was asked for"
    );
    // The 300-probe run's echo requests: its identifier is the commonest.
    let mut ids = BTreeMap::new();
    for f in &captured {
        if let Some(id) = echo_request_id(&f.data) {
            *ids.entry(id).or_insert(0) += 1;
        }
    }
    let (&id, _) = ids.iter().max_by_key(|(_, n)| **n).unwrap();
    let ours: Vec<&Frame> = captured
        .iter()
        .filter(|f| echo_request_id(&f.data) == Some(id))
        .collect();
    let theirs: Vec<Vec<u8>> = read_pcap(&theirs)
        .into_iter()
        .filter(|f| echo_request_id(f) == Some(id))
        .collect();
    let delivered: Vec<Vec<u8>> = ours
        .iter()
        .filter(|f| f.comment.is_none())
        .map(|f| f.data.clone())
        .collect();
    let dropped: Vec<&&Frame> = ours.iter().filter(|f| f.comment.is_some()).collect();
    let differs = delivered.iter().zip(&theirs).position(|(a, b)| a != b);
    assert!(
        delivered.len() == theirs.len() && differs.is_none(),
        "the capture delivered {} frames, the receiver got {}; first difference at {differs:?}",
        delivered.len(),
        theirs.len()
    );
    assert!(
        dropped
            .iter()
            .all(|f| f.comment.as_deref() == Some("dropped: loss")),
        "{dropped:?}"
    );
    // 20% of 300, within a wide margin; and every request is in the
    // capture, delivered or dropped.
    assert!(
        (25..=100).contains(&dropped.len()),
        "{} dropped",
        dropped.len()
    );
    assert_eq!(delivered.len() + dropped.len(), 300);
}

/// A mirror copies a link's frames, live, to a port of another node,
/// where tcpdump sees them (truncated when asked); a `[[capture]]` of the
/// lossy link, written while the lab runs, holds what both ends got and
/// what the link dropped.
#[test]
fn a_mirror_delivers_copies_to_a_host_where_tcpdump_sees_them() {
    require_root!();
    let scratch = Scratch::new("mirror");
    let captured = scratch.0.join("h2.pcapng");
    let guard = tapped_lab(
        "ir",
        &format!(
            "[[mirror]]\nlink = \"h1--s1\"\nto = \"mon\"\ntruncate = 64\n\
             [[mirror]]\nlink = \"h2--s1\"\ndirection = \"b-a\"\nto = \"mon\"\nport = \"span1\"\n\
             [[capture]]\nlink = \"h2--s1\"\nfile = \"{}\"\n",
            captured.display()
        ),
    );
    let lab = guard.0.as_str();
    let all = scratch.0.join("mirror0.pcap");
    let to_h2 = scratch.0.join("span1.pcap");
    let mut m0 = tcpdump(lab, "mon", &["-i", "mirror0", "icmp"], &all);
    let mut m1 = tcpdump(lab, "mon", &["-i", "span1", "icmp"], &to_h2);
    ping(lab, &["-c", "20", "-i", "0.01", "-W", "1"]);
    // Copies arrive as the frames pass: wait for the 20 requests.
    assert!(wait_until(Duration::from_secs(10), || {
        read_pcap(&all)
            .iter()
            .filter(|f| echo_request_id(f).is_some())
            .count()
            >= 20
    }));
    m0.interrupt();
    m1.interrupt();
    let copies = read_pcap(&all);
    let requests = copies
        .iter()
        .filter(|f| echo_request_id(f).is_some())
        .count();
    let replies = copies
        .iter()
        .filter(|f| f.len() > 34 && f[23] == 1 && f[34] == 0)
        .count();
    assert_eq!(requests, 20, "both directions of h1--s1");
    assert!(replies > 0 && replies <= 20, "{replies} replies");
    assert!(
        copies.iter().all(|f| f.len() == 64),
        "truncated to 64 bytes"
    );
    // span1: only s1 -> h2, whole frames, the requests the lossy link
    // delivered (not the replies).
    let delivered = read_pcap(&to_h2);
    assert!(
        !delivered.is_empty() && delivered.len() <= 20,
        "{} frames",
        delivered.len()
    );
    assert!(
        delivered
            .iter()
            .all(|f| echo_request_id(f).is_some() && f.len() == 98)
    );
    // The lab's capture file is complete once the lab is down.
    let out = run(&["down", lab]);
    assert!(out.status.success(), "{}", text(&out));
    let frames = read_pcapng(&captured);
    let requests_delivered = frames
        .iter()
        .filter(|f| f.interface == 1 && f.comment.is_none() && echo_request_id(&f.data).is_some())
        .count();
    let dropped = frames
        .iter()
        .filter(|f| f.comment.as_deref() == Some("dropped: loss"))
        .count();
    assert_eq!(
        requests_delivered,
        delivered.len(),
        "the file and the mirror agree"
    );
    assert!(
        dropped > 0,
        "20% loss over {} frames dropped none",
        frames.len()
    );
    assert!(frames.iter().any(|f| f.interface == 0), "both directions");
}

/// The bundled source-address validation program, compiled into `dir` as
/// `name` for an edge switch of fat-tree k=4 whose hosts are `net` (a
/// /29, as `0x0a800000`).
fn compile_sav(dir: &std::path::Path, name: &str, net: &str) -> Option<std::path::PathBuf> {
    let triple = std::process::Command::new("gcc")
        .arg("-dumpmachine")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())?;
    let object = dir.join(name);
    let out = std::process::Command::new("clang")
        .args(["-O2", "-g", "-target", "bpf"])
        .arg(format!("-I/usr/include/{triple}"))
        .arg(format!("-DALLOWED_NET={net}"))
        .args(["-DALLOWED_MASK=0xfffffff8", "-c"])
        .arg(workspace().join("examples/sav/sav.c"))
        .arg("-o")
        .arg(&object)
        .output()
        .ok()?;
    assert!(out.status.success(), "clang: {}", text(&out));
    Some(object)
}

/// An nftables filter, an eBPF tc filter and an eBPF XDP filter at edge
/// switches' host ports drop what a spoofed-source flood sends through
/// them, pass what an honest one sends, and count both.
#[test]
fn an_nftables_and_an_ebpf_filter_drop_spoofed_traffic_at_an_edge_port_and_count_it() {
    require_root!();
    let scratch = Scratch::new("filters");
    // edge0-0's hosts are 10.128.0.0/29, edge0-1's 10.128.0.8/29.
    let (Some(object), Some(other)) = (
        compile_sav(&scratch.0, "sav.o", "0x0a800000"),
        compile_sav(&scratch.0, "sav-b.o", "0x0a800008"),
    ) else {
        turbonet_tests::skip("clang is missing; run scripts/setup as root");
        return;
    };
    let lab = turbonet_tests::up_bundled(
        "if",
        "fat-tree-k4.toml",
        &format!(
            r#"
[[filter]]
name = "sav-nft"
node = "edge0-0"
port = "h0-0-0"
nft = "ip saddr != 10.128.0.2 drop"

[[filter]]
name = "sav-ebpf"
node = "edge0-0"
port = "h0-0-1"
ebpf = "{}"
program = "sav"

[[filter]]
name = "sav-xdp"
node = "edge0-1"
port = "h0-1-0"
ebpf = "{}"
program = "sav_xdp"
attach = "xdp"
"#,
            object.display(),
            other.display()
        ),
    );
    let lab = lab.0.as_str();
    let attack = scratch.0.join("attack.toml");
    let flood = |name: &str, host: &str, extra: &str| {
        format!(
            "[[workload]]\nname = \"{name}\"\nkind = \"flood\"\nhosts = [\"{host}\"]\n\
             target = \"h3-1-1\"\npps = 2000\nduration = \"1s\"\n{extra}\n"
        )
    };
    std::fs::write(
        &attack,
        flood("spoof-a", "h0-0-0", "spoof = \"10.200.0.0/16\"")
            + &flood(
                "spoof-b",
                "h0-0-1",
                "spoof = \"10.200.0.0/16\"\nprotocol = \"syn\"",
            )
            + &flood("spoof-c", "h0-1-0", "spoof = \"10.200.0.0/16\"")
            + &flood("honest", "h0-0-1", "")
            + &flood("honest-b", "h0-1-0", ""),
    )
    .unwrap();
    let out = run(&["workload", "start", attack.to_str().unwrap(), "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    let reports = || json(&["workload", "show", "--json", "--lab", lab]);
    assert!(
        wait_until(Duration::from_secs(30), || reports()
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "done")),
        "{}",
        reports()
    );
    let flow = |name: &str| -> (u64, u64) {
        let all = reports();
        let r = all
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap();
        let f = &r["flows"][0];
        (f["sent"].as_u64().unwrap(), f["received"].as_u64().unwrap())
    };
    let (a_sent, a_got) = flow("spoof-a");
    let (b_sent, b_got) = flow("spoof-b");
    let (c_sent, c_got) = flow("spoof-c");
    let (h_sent, h_got) = flow("honest");
    let (hb_sent, hb_got) = flow("honest-b");
    assert!(
        [a_sent, b_sent, c_sent, h_sent, hb_sent]
            .iter()
            .all(|&n| n > 1000),
        "{a_sent} {b_sent} {c_sent} {h_sent} {hb_sent}"
    );
    assert_eq!(
        (a_got, b_got, c_got),
        (0, 0, 0),
        "spoofed packets got through"
    );
    assert_eq!(
        (h_got, hb_got),
        (h_sent, hb_sent),
        "honest packets were dropped"
    );
    // The counters are read every second.
    let filters = || -> BTreeMap<String, (u64, u64)> {
        json(&["link", "show", "--json", "--lab", lab])
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|l| l["filters"].as_array().cloned().unwrap_or_default())
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_owned(),
                    (f["seen"].as_u64().unwrap(), f["dropped"].as_u64().unwrap()),
                )
            })
            .collect()
    };
    let counted = wait_until(Duration::from_secs(5), || {
        let f = filters();
        f.get("sav-nft").is_some_and(|c| c.1 == a_sent)
            && f.get("sav-ebpf")
                .is_some_and(|c| c.1 == b_sent && c.0 >= b_sent + h_sent)
            && f.get("sav-xdp")
                .is_some_and(|c| c.1 == c_sent && c.0 >= c_sent + hb_sent)
    });
    assert!(
        counted,
        "{:?} (sent {a_sent} and {b_sent} spoofed, {h_sent} honest)",
        filters()
    );
    let events = events(lab);
    for name in ["sav-nft", "sav-ebpf", "sav-xdp"] {
        assert!(
            events
                .iter()
                .any(|e| e["kind"] == "drops-begin" && e["cause"] == format!("filter {name}")),
            "no drop event of {name}"
        );
    }
}

/// The bundled monitor (examples/monitor), scored against the lab's
/// ground truth, finds the failure its lab injects and the restore.
#[test]
fn the_bundled_monitor_finds_the_injected_failure_scored_against_ground_truth() {
    require_root!();
    turbonet_tests::require_venv!();
    let port = free_port();
    let lab = unique_lab("im");
    let scenario = std::fs::read_to_string(workspace().join("examples/monitor/lab.toml"))
        .unwrap()
        .replace("name = \"mon\"", &format!("name = \"{lab}\""))
        .replace("port = 9465", &format!("port = {port}"));
    let file = turbonet_tests::write_scenario(&lab, &scenario);
    let guard = LabGuard(lab.clone());
    let out = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let bin = turbonet_tests::binary();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new(VENV_PYTHON)
        .arg(workspace().join("examples/monitor/monitor.py"))
        .args(["--lab", &lab, "--seconds", "10", "--metrics"])
        .arg(format!("http://127.0.0.1:{port}/metrics"))
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    let score: Value = serde_json::from_str(printed.lines().last().unwrap()).unwrap();
    assert_eq!(score["truth"], 2, "{printed}");
    assert_eq!(score["recall"], 1.0, "{printed}");
    // Each detection matched its event within the scorer's window (2 s);
    // how fast is the monitor's figure, not the test's.
    assert_eq!(score["delays"].as_array().unwrap().len(), 2, "{printed}");
    drop(guard);
}
