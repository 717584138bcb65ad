//! End-to-end: `routing.mode = "controller"` routes around failures
//! (root).

use turbonet_tests::{LabGuard, require_root, run, text, unique_lab, workspace, write_scenario};

/// fat-tree-k4.toml under another name, in controller mode.
fn controller_scenario(lab: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(workspace().join("scenarios/fat-tree-k4.toml")).unwrap();
    let text = text
        .replace("name = \"k4\"", &format!("name = \"{lab}\""))
        .replace("mode = \"static\"", "mode = \"controller\"");
    assert!(text.contains("controller"));
    write_scenario(lab, &text)
}

#[test]
fn the_controller_routes_around_failed_links_and_switches() {
    require_root!();
    let lab = unique_lab("co");
    let file = controller_scenario(&lab);
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
