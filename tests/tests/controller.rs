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
