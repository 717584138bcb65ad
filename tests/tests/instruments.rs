//! End-to-end: the instruments a monitor, a filter or a verifier uses on a
//! running lab (root): ground-truth events, the metrics endpoint,
//! snapshots.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use turbonet_tests::{
    LabGuard, require_root, run, scenario_as, text, unique_lab, up_bundled, wait_until, workspace,
};

const VENV_PYTHON: &str = "/var/tmp/turbonet-py/bin/python3";

/// Brings fat-tree k=4 up under BGP with `agent`; the guard takes it down.
fn bgp_fat_tree(prefix: &str, agent: &str) -> LabGuard {
    let lab = unique_lab(prefix);
    let file = scenario_as("fat-tree-k4.toml", &lab, "");
    let text_of = std::fs::read_to_string(&file).unwrap().replace(
        "mode = \"static\"",
        &format!("mode = \"bgp\"\nagent = \"{agent}\""),
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
fn a_fail_is_a_route_change_at_every_affected_switch(agent: &str, prefix: &str) {
    let lab = bgp_fat_tree(prefix, agent);
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
                prefixes.insert(r["prefix"].as_str().unwrap().to_owned());
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
    a_fail_is_a_route_change_at_every_affected_switch("builtin", "ib");
}

#[test]
fn a_fail_is_a_route_change_at_every_affected_switch_with_frr() {
    require_root!();
    a_fail_is_a_route_change_at_every_affected_switch("frr", "if");
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
    let lab = bgp_fat_tree("is", "builtin");
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
    if !std::path::Path::new(VENV_PYTHON).exists() {
        turbonet_tests::skip(&format!(
            "{VENV_PYTHON} is missing; run scripts/setup as root to create the venv"
        ));
        return;
    }
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
