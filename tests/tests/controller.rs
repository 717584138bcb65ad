//! End-to-end: `routing.mode = "controller"` routes around failures
//! (root).

use turbonet_tests::{LabGuard, require_root, run, text, unique_lab, workspace, write_scenario};

/// A bundled scenario under another name, in controller mode.
fn controller_scenario(bundled: &str, name: &str, lab: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(workspace().join("scenarios").join(bundled)).unwrap();
    let text = text
        .replace(&format!("name = \"{name}\""), &format!("name = \"{lab}\""))
        .replace("mode = \"static\"", "mode = \"controller\"");
    assert!(text.contains("controller"));
    write_scenario(lab, &text)
}

/// Fails and restores each target in turn; every host pair must stay
/// reachable throughout.
fn fail_and_restore(lab: &str, targets: &[(&str, &str)]) {
    let check = || {
        let out = run(&["check", "--lab", lab]);
        assert!(out.status.success(), "check failed: {}", text(&out));
    };
    for verb in ["fail", "restore"] {
        for (kind, name) in targets {
            let out = run(&[verb, kind, name, "--lab", lab]);
            assert!(out.status.success(), "{verb} {kind} {name}: {}", text(&out));
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("the controller changed"),
                "{}",
                text(&out)
            );
            check();
        }
    }
}

#[test]
fn the_controller_reroutes_hpn_around_a_tor_uplink_and_an_aggregation_switch() {
    require_root!();
    let lab = unique_lab("ch");
    let file = controller_scenario("hpn.toml", "hpn", &lab);
    let _guard = LabGuard(lab.clone());
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    fail_and_restore(&lab, &[("link", "tor0-r0p0--agg0-0"), ("node", "agg1-1")]);
}

#[test]
fn the_controller_routes_around_failed_links_and_switches() {
    require_root!();
    let lab = unique_lab("co");
    let file = controller_scenario("fat-tree-k4.toml", "k4", &lab);
    let _guard = LabGuard(lab.clone());
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    let check = || {
        let out = run(&["check", "--lab", &lab]);
        assert!(out.status.success(), "check failed: {}", text(&out));
    };
    for (verb, kind, name) in [
        ("fail", "link", "edge0-0--agg0-0"),
        ("fail", "node", "core0"),
        ("fail", "node", "agg1-1"),
        ("restore", "link", "edge0-0--agg0-0"),
        ("restore", "node", "core0"),
        ("restore", "node", "agg1-1"),
    ] {
        let out = run(&[verb, kind, name, "--lab", &lab]);
        assert!(out.status.success(), "{verb} {kind} {name}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("the controller changed"),
            "{}",
            text(&out)
        );
        check();
    }
    // Back to the original routes: edge0-0 spreads over both aggregation switches again.
    let routes = run(&["show", "routes", "edge0-0", "--lab", &lab, "--json"]);
    let routes: serde_json::Value = serde_json::from_slice(&routes.stdout).unwrap();
    assert!(
        routes
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["nexthops"].as_array().unwrap().len() == 2)
    );
}

/// Every switch's routing table, by switch, as `show routes` shows it.
fn all_routes(lab: &str) -> std::collections::BTreeMap<String, String> {
    let nodes = run(&["show", "nodes", "--lab", lab, "--json"]);
    let nodes: serde_json::Value = serde_json::from_slice(&nodes.stdout).unwrap();
    nodes
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["role"] != "host")
        .map(|n| {
            let name = n["name"].as_str().unwrap().to_owned();
            let out = run(&["show", "routes", &name, "--lab", lab, "--json"]);
            assert!(out.status.success(), "{}", text(&out));
            let mut routes: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
            routes.sort_by_key(|r| r["prefix"].to_string());
            (name, serde_json::to_string(&routes).unwrap())
        })
        .collect()
}

/// `fail`, `restore` and `flap` sent at once by several clients end with
/// the same routes in every switch as the same commands one by one: the
/// daemon runs each to completion before the next.
#[test]
fn concurrent_fail_restore_and_flap_end_as_the_same_one_by_one() {
    require_root!();
    // Commands on different links and switches, so that any order ends
    // the same: the first two cancel out, the flap ends with its link up.
    let commands: [&[&str]; 7] = [
        &["fail", "link", "edge0-0--agg0-0"],
        &["restore", "link", "edge0-1--agg0-1"],
        &["fail", "node", "core1"],
        &["flap", "agg1-0--core0", "--period", "100ms", "--count", "2"],
        &["fail", "link", "edge2-1--agg2-0"],
        &["fail", "link", "agg3-1--core3"],
        &["fail", "link", "edge1-0--agg1-1"],
    ];
    let up = |prefix: &str| {
        let lab = unique_lab(prefix);
        let file = controller_scenario("fat-tree-k4.toml", "k4", &lab);
        let out = run(&["up", "--quiet", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
        lab
    };
    let flap_ended = |lab: &str| {
        turbonet_tests::wait_until(std::time::Duration::from_secs(10), || {
            let out = run(&["events", "--lab", lab, "--json"]);
            let events: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            events
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["event"] == "flap: restore link agg1-0--core0")
                .count()
                == 2
        })
    };

    let together = up("cc");
    let _together_guard = LabGuard(together.clone());
    let children: Vec<_> = commands
        .iter()
        .map(|args| {
            turbonet_tests::turbonet()
                .args(*args)
                .args(["--lab", &together])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("turbonet runs")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    assert!(flap_ended(&together), "the flap did not end");

    let apart = up("cs");
    let _apart_guard = LabGuard(apart.clone());
    for args in commands {
        let mut args = args.to_vec();
        args.extend(["--lab", &apart]);
        let out = run(&args);
        assert!(out.status.success(), "{}", text(&out));
        if args[0] == "flap" {
            assert!(flap_ended(&apart), "the flap did not end");
        }
    }
    let (a, b) = (all_routes(&together), all_routes(&apart));
    assert_eq!(a.len(), 20);
    for (switch, routes) in &a {
        assert_eq!(Some(routes), b.get(switch), "{switch} differs");
    }
}
