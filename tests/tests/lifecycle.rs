//! End-to-end: `validate`, `up`, `check`, `show`, `exec`, `down` on real
//! namespaces (root), as a user runs them.

use std::process::Command;
use std::time::Duration;

use turbonet_tests::{
    LabGuard, lab_namespaces, lab_state_exists, require_root, run, scenario_as, text, turbonet,
    unique_lab, up_bundled, wait_until, write_scenario,
};

/// Brings a bundled scenario up under a unique name, checks every host pair,
/// looks at it, and takes it down leaving nothing behind.
fn up_check_down(bundled: &str, prefix: &str) {
    let lab = unique_lab(prefix);
    let file = scenario_as(bundled, &lab, "");
    let guard = LabGuard(lab.clone());
    let up = run(&["up", file.to_str().unwrap()]);
    assert!(up.status.success(), "up failed: {}", text(&up));
    let up_out = String::from_utf8_lossy(&up.stdout);
    assert!(up_out.contains("up and routed"), "{}", text(&up));
    assert!(!lab_namespaces(&lab).is_empty());

    let check = run(&["check", "--lab", &lab]);
    assert!(check.status.success(), "check failed: {}", text(&check));
    assert!(
        String::from_utf8_lossy(&check.stdout).starts_with("check ok"),
        "{}",
        text(&check)
    );

    let nodes = run(&["show", "nodes", "--lab", &lab, "--json"]);
    assert!(nodes.status.success(), "{}", text(&nodes));
    let nodes: serde_json::Value = serde_json::from_slice(&nodes.stdout).unwrap();
    let count = nodes.as_array().unwrap().len();
    assert_eq!(lab_namespaces(&lab).len(), count, "one namespace per node");

    let down = run(&["down", &lab]);
    assert!(down.status.success(), "down failed: {}", text(&down));
    assert!(
        lab_namespaces(&lab).is_empty(),
        "namespaces left: {:?}",
        lab_namespaces(&lab)
    );
    assert!(!lab_state_exists(&lab), "state left behind");
    // Idempotent.
    let again = run(&["down", &lab]);
    assert!(again.status.success(), "{}", text(&again));
    drop(guard);
}

#[test]
fn fat_tree_k4_up_check_down() {
    require_root!();
    up_check_down("fat-tree-k4.toml", "ft");
}

#[test]
fn hpn_up_check_down() {
    require_root!();
    up_check_down("hpn.toml", "hp");
}

/// Two HPN pods joined by per-plane cores: every host reaches every
/// other, across pods, on every rail.
#[test]
fn hpn_pods_up_check_down() {
    require_root!();
    up_check_down("hpn-pods.toml", "hm");
}

/// A 5-stage Clos: every host reaches every other through leaves, spines
/// and the core planes.
#[test]
fn clos_up_check_down() {
    require_root!();
    up_check_down("clos-5.toml", "cl");
}

#[test]
fn leaf_spine_up_check_down() {
    require_root!();
    up_check_down("leaf-spine.toml", "ls");
}

#[test]
fn show_routes_and_exec_see_the_fabric() {
    require_root!();
    let guard = up_bundled("sh", "fat-tree-k4.toml", "");
    let lab = guard.0.clone();

    // An edge switch reaches the other pods' host subnets over both its
    // aggregation switches (ECMP).
    let routes = run(&["show", "routes", "edge0-0", "--lab", &lab, "--json"]);
    assert!(routes.status.success(), "{}", text(&routes));
    let routes: serde_json::Value = serde_json::from_slice(&routes.stdout).unwrap();
    let ecmp = routes
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["nexthops"].as_array().unwrap().len() == 2)
        .count();
    assert!(ecmp > 0, "no ECMP routes on edge0-0: {routes}");

    // exec runs inside the node and passes the exit code through.
    let out = run(&[
        "exec",
        "--lab",
        &lab,
        "edge0-0",
        "--",
        "cat",
        "/proc/sys/net/ipv4/ip_forward",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    let hash = run(&[
        "exec",
        "--lab",
        &lab,
        "edge0-0",
        "--",
        "cat",
        "/proc/sys/net/ipv4/fib_multipath_hash_policy",
    ]);
    // The switch hashes the 5-tuple itself, with its own seed, where the
    // kernel has seeds (policy 3); the L4 hash elsewhere.
    let seeded = std::path::Path::new("/proc/sys/net/ipv4/fib_multipath_hash_seed").exists();
    assert_eq!(
        String::from_utf8_lossy(&hash.stdout).trim(),
        if seeded { "3" } else { "1" },
        "{}",
        text(&hash)
    );
    // Nodes find each other by name, and the name reaches the node.
    let ping = run(&[
        "exec", "--lab", &lab, "h0-0-0", "--", "ping", "-c", "1", "-W", "2", "h3-1-1",
    ]);
    assert!(ping.status.success(), "{}", text(&ping));
    let resolved = run(&[
        "exec", "--lab", &lab, "h0-0-0", "--", "getent", "hosts", "edge0-0",
    ]);
    let loopback = run(&["show", "nodes", "--lab", &lab, "--json"]);
    let edge_lo = serde_json::from_slice::<serde_json::Value>(&loopback.stdout)
        .ok()
        .and_then(|nodes| {
            nodes.as_array()?.iter().find_map(|n| {
                (n["name"] == "edge0-0").then(|| n["loopback"].as_str().map(str::to_owned))?
            })
        });
    assert!(resolved.status.success(), "{}", text(&resolved));
    let edge_lo = edge_lo.unwrap_or_else(|| panic!("no loopback for edge0-0: {}", text(&loopback)));
    let resolved = String::from_utf8_lossy(&resolved.stdout).to_string();
    assert_eq!(
        resolved.split_whitespace().next(),
        Some(edge_lo.as_str()),
        "{resolved} / {}",
        text(&loopback)
    );
    let code = run(&["exec", "--lab", &lab, "h0-0-0", "--", "sh", "-c", "exit 7"]);
    assert_eq!(code.status.code(), Some(7));
    // The interfaces are named after their peers.
    let links = run(&[
        "exec",
        "--lab",
        &lab,
        "edge0-0",
        "--",
        "ls",
        "/sys/class/net",
    ]);
    let names = String::from_utf8_lossy(&links.stdout);
    assert!(
        names.contains("agg0-0") && names.contains("h0-0-0"),
        "{names}"
    );

    let bad = run(&["exec", "--lab", &lab, "edge9-9", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("no node edge9-9"),
        "{}",
        text(&bad)
    );
}

#[test]
fn invalid_scenario_exits_2_with_located_errors_and_creates_nothing() {
    let lab = unique_lab("bad");
    let file = write_scenario(
        &lab,
        &format!(
            "[lab]\nname = \"{lab}\"\n\n[topology]\nkind = \"fat-tre\"\nk = 4\n\n[routing]\nmode = \"static\"\ncolour = 1\n"
        ),
    );
    for verb in ["validate", "up"] {
        let out = run(&[verb, file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{verb}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(
            err.contains(&format!("{name}:5:")),
            "{verb}: no location for the kind: {err}"
        );
        assert!(err.contains("fat-tree"), "{verb}: no suggestion: {err}");
        assert!(
            err.contains("colour"),
            "{verb}: second error not reported: {err}"
        );
    }
    assert!(lab_namespaces(&lab).is_empty());
    assert!(!lab_state_exists(&lab));
}

#[test]
fn sigkill_during_up_then_down_leaves_nothing() {
    require_root!();
    let lab = unique_lab("kill");
    let file = scenario_as("fat-tree-k8.toml", &lab, "");
    let guard = LabGuard(lab.clone());
    let mut child = turbonet()
        .args(["up", "--quiet", file.to_str().unwrap()])
        .spawn()
        .unwrap();
    // Kill it once it has started creating namespaces.
    let started = wait_until(Duration::from_secs(60), || !lab_namespaces(&lab).is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(started, "up never started creating namespaces");
    assert!(lab_state_exists(&lab), "state must exist before objects do");

    let status = run(&["status"]);
    assert!(status.status.success(), "{}", text(&status));

    let down = run(&["down", &lab]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(
        lab_namespaces(&lab).is_empty(),
        "left: {:?}",
        lab_namespaces(&lab)
    );
    assert!(!lab_state_exists(&lab));
    drop(guard);
}

#[test]
fn failure_half_way_rolls_back() {
    require_root!();
    let lab = unique_lab("rb");
    let file = scenario_as("fat-tree-k4.toml", &lab, "");
    let _guard = LabGuard(lab.clone());
    let out = turbonet()
        .args(["up", file.to_str().unwrap()])
        .env("TURBONET_FAIL_AFTER", "links")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rolled back"),
        "{}",
        text(&out)
    );
    assert!(
        lab_namespaces(&lab).is_empty(),
        "left: {:?}",
        lab_namespaces(&lab)
    );
    assert!(!lab_state_exists(&lab));
}

#[test]
fn two_labs_side_by_side_do_not_interfere() {
    require_root!();
    let (a, b) = (unique_lab("sa"), unique_lab("sb"));
    let _ga = LabGuard(a.clone());
    let _gb = LabGuard(b.clone());
    for lab in [&a, &b] {
        let file = scenario_as("fat-tree-k4.toml", lab, "");
        let up = run(&["up", "--quiet", file.to_str().unwrap()]);
        assert!(up.status.success(), "{}", text(&up));
    }
    // The same lab name twice is refused.
    let again = run(&[
        "up",
        scenario_as("fat-tree-k4.toml", &a, "").to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already up"),
        "{}",
        text(&again)
    );

    let down = run(&["down", &a]);
    assert!(down.status.success(), "{}", text(&down));
    let check = run(&["check", "--lab", &b]);
    assert!(check.status.success(), "{}", text(&check));
    assert!(lab_namespaces(&a).is_empty());
}

/// A veth whose other end lives in a namespace the user owns joins the
/// fabric as an external port; `down` hands it back unchanged.
#[test]
fn external_port_joins_the_fabric_and_is_handed_back() {
    require_root!();
    let lab = unique_lab("ext");
    let pid = std::process::id() % 100_000;
    let (user_ns, outside, inside) = (
        format!("tnt-user-{pid}"),
        format!("tnu{pid}"),
        format!("tnx{pid}"),
    );
    let ip = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().expect("ip runs");
        assert!(out.status.success(), "ip {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    struct Cleanup(String, String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
            let _ = Command::new("ip").args(["link", "del", &self.1]).status();
        }
    }
    let _cleanup = Cleanup(user_ns.clone(), inside.clone());
    ip(&["netns", "add", &user_ns]);
    ip(&[
        "link", "add", &inside, "mtu", "1400", "type", "veth", "peer", "name", &outside, "netns",
        &user_ns,
    ]);
    ip(&["addr", "add", "198.18.99.1/30", "dev", &inside]);
    ip(&[
        "-n",
        &user_ns,
        "addr",
        "add",
        "192.0.2.2/24",
        "dev",
        &outside,
    ]);
    ip(&["-n", &user_ns, "link", "set", &outside, "up"]);
    ip(&[
        "-n",
        &user_ns,
        "route",
        "add",
        "10.0.0.0/8",
        "via",
        "192.0.2.1",
    ]);

    let file = scenario_as(
        "fat-tree-k4.toml",
        &lab,
        &format!(
            "\n[[external]]\nnode = \"edge0-0\"\ninterface = \"{inside}\"\nname = \"ext0\"\naddress = \"192.0.2.1/24\"\n"
        ),
    );
    let guard = LabGuard(lab.clone());
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    assert!(
        !ip(&["link", "show"]).contains(&inside),
        "the interface moved into the node"
    );

    // The user's namespace reaches a host in another pod through the fabric.
    let host_addr = turbonet_tests::host_address(&lab, "h3-1-1");
    if let Err(e) = turbonet_tests::ping_from(&user_ns, &host_addr) {
        panic!("from outside: {e}");
    }

    let down = run(&["down", &lab]);
    assert!(down.status.success(), "{}", text(&down));
    let show = ip(&["addr", "show", "dev", &inside]);
    assert!(show.contains("mtu 1400"), "MTU restored: {show}");
    assert!(show.contains("198.18.99.1/30"), "address restored: {show}");
    assert!(
        !show.contains("192.0.2.1"),
        "fabric address removed: {show}"
    );
    drop(guard);
}

/// The real HPN pod validates (no root) and reports the paper's numbers.
/// `graph` of a scenario file needs no lab: fat-tree k=4 node by node,
/// the real pod grouped, one of its segments node by node, as SVG and as
/// Graphviz; a filter that matches nothing is an error.
#[test]
fn graph_draws_scenario_files_whole_or_in_part() {
    let file = |name: &str| turbonet_tests::workspace().join("scenarios").join(name);
    let k4 = file("fat-tree-k4.toml");
    let out = run(&["graph", k4.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let svg = String::from_utf8_lossy(&out.stdout);
    assert_eq!(svg.matches("id=\"node-").count(), 36);
    assert_eq!(svg.matches("id=\"link-").count(), 48);
    let pod = file("hpn-pod.toml");
    let out = run(&["graph", pod.to_str().unwrap(), "--format", "dot"]);
    assert!(out.status.success(), "{}", text(&out));
    let dot = String::from_utf8_lossy(&out.stdout);
    assert!(dot.contains("15 ToRs\\npod 0 plane 1 rail 7"), "{dot}");
    let out = run(&["graph", pod.to_str().unwrap(), "--segment", "3"]);
    let svg = String::from_utf8_lossy(&out.stdout);
    assert_eq!(svg.matches("id=\"node-tor3-").count(), 16, "{svg}");
    let out = run(&["graph", pod.to_str().unwrap(), "--segment", "99"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("nothing to draw"), "{}", text(&out));
}

#[test]
fn validate_reports_the_hpn_pod() {
    let file = turbonet_tests::workspace().join("scenarios/hpn-pod.toml");
    let out = run(&["validate", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    for expected in ["14,400", "1.067:1", "15.000:1", "240", "120"] {
        assert!(table.contains(expected), "missing {expected}: {table}");
    }
    let json = run(&["validate", "--json", file.to_str().unwrap()]);
    let summary: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let role = |r: &str| {
        summary["nodes_by_role"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["role"] == r)
            .map(|x| x["count"].as_u64().unwrap())
    };
    assert_eq!(role("tor"), Some(240));
    assert_eq!(role("agg"), Some(120));
    let class = summary["links_by_class"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["class"] == "tor-agg")
        .unwrap()["count"]
        .as_u64();
    assert_eq!(class, Some(14_400));
}

#[test]
fn bench_times_each_phase_beside_the_kernel_and_leaves_nothing() {
    require_root!();
    let lab = unique_lab("bn");
    let file = scenario_as("hpn.toml", &lab, "\n[links.host-tor]\nrate = \"1gbit\"\n");
    let _guard = LabGuard(lab.clone());
    let out = run(&["bench", "--runs", "1", "--check", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    // Every phase with a kernel counterpart has a time and a ratio.
    for phase in [
        "namespaces",
        "links",
        "shapers",
        "addresses",
        "routes",
        "down",
    ] {
        let row = table
            .lines()
            .find(|l| l.split('│').nth(2).is_some_and(|c| c.trim() == phase))
            .unwrap_or_else(|| panic!("no row for {phase}: {table}"));
        let cells: Vec<&str> = row.split('│').map(str::trim).collect();
        assert!(
            cells[4].parse::<f64>().is_ok(),
            "kernel s of {phase}: {row}"
        );
        assert!(cells[5].ends_with('x'), "ratio of {phase}: {row}");
    }
    assert!(
        lab_namespaces(&lab).is_empty(),
        "{:?}",
        lab_namespaces(&lab)
    );
    assert!(!lab_state_exists(&lab));
}

/// `up FILE` of a k=8 fat-tree under BGP with at most `limit` open files.
fn up_within_open_files(lab: &str, limit: u32) -> std::process::Output {
    // 80 switches, 256 sessions, two sockets each; `up` holds three files a
    // namespace (208) while it builds.
    let file = write_scenario(
        lab,
        &format!(
            "[lab]\nname = \"{lab}\"\n[topology]\nkind = \"fat-tree\"\nk = 8\n[routing]\nmode = \"bgp\"\n"
        ),
    );
    Command::new("bash")
        .args(["-c", &format!("ulimit -n {limit} && exec \"$0\" up \"$1\"")])
        .arg(turbonet_tests::binary())
        .arg(&file)
        .output()
        .unwrap()
}

#[test]
fn up_refuses_a_fabric_beyond_the_open_file_limit_before_creating_anything() {
    require_root!();
    let lab = unique_lab("fd");
    let _guard = LabGuard(lab.clone());
    let out = up_within_open_files(&lab, 600);
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("`up`") && said.contains("open files") && said.contains("600"),
        "{said}"
    );
    assert!(lab_namespaces(&lab).is_empty());
    assert!(!lab_state_exists(&lab));
}

#[test]
fn bgp_speakers_beyond_the_open_file_limit_run_in_shards_that_fit() {
    require_root!();
    let lab = unique_lab("fs");
    let guard = LabGuard(lab.clone());
    // The daemon with every speaker would need more than 1,000.
    let out = up_within_open_files(&lab, 1000);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("512/512 sessions established"),
        "{}",
        text(&out)
    );
    let shards = turbonet_tests::bgp_shards(&lab);
    assert!(shards.len() >= 2, "{shards:?}");
    drop(guard);
    assert!(
        wait_until(Duration::from_secs(10), || turbonet_tests::bgp_shards(&lab)
            .is_empty()),
        "shards left behind"
    );
}

#[test]
fn turbonet_lab_names_the_lab_a_command_is_about_when_several_are_up() {
    require_root!();
    let (a, b) = (
        up_bundled("enva", "two-hosts.toml", ""),
        up_bundled("envb", "custom-triangle.toml", ""),
    );
    let nodes = |env: &str, args: &[&str]| {
        let out = turbonet()
            .args(["show", "nodes", "--json"])
            .args(args)
            .env("TURBONET_LAB", env)
            .output()
            .unwrap();
        assert!(out.status.success(), "{env}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Each lab's own nodes, by the variable alone.
    assert!(nodes(&a.0, &[]).contains(&format!("tn-{}-", a.0)));
    assert!(nodes(&b.0, &[]).contains(&format!("tn-{}-", b.0)));
    // --lab wins over it.
    assert!(nodes(&a.0, &["--lab", &b.0]).contains(&format!("tn-{}-", b.0)));
}

/// The binary installed under another name (a versioned copy, a symlink
/// of another name) brings a lab up and down: its daemon is not taken for
/// dead before it has named itself.
#[test]
fn a_binary_under_another_name_brings_a_lab_up_and_down() {
    require_root!();
    /// Removes the copy's directory, whatever happens.
    struct Scratch(std::path::PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let dir = Scratch(std::env::temp_dir().join(format!("tn-renamed-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let renamed = dir.0.join("turbonet-0.1");
    std::fs::copy(turbonet_tests::binary(), &renamed).unwrap();
    let lab = unique_lab("rn");
    let file = scenario_as("two-hosts.toml", &lab, "");
    let guard = LabGuard(lab.clone());
    let up = Command::new(&renamed)
        .args(["up", "--quiet", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "up as {}: {}",
        renamed.display(),
        text(&up)
    );
    let down = Command::new(&renamed)
        .args(["down", &lab])
        .output()
        .unwrap();
    assert!(down.status.success(), "{}", text(&down));
    assert!(
        lab_namespaces(&lab).is_empty(),
        "{:?}",
        lab_namespaces(&lab)
    );
    drop(guard);
}
