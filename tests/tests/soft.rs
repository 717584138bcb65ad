//! End to end on the `soft` target (root): a k=4 fat-tree whose switches
//! run in turbonet's soft switch, programmed over P4Runtime.

use std::process::Command;

use turbonet_tests::{host_address, require_root, run, text, up_bundled, wait_until};

/// The smallest round trip of three pings from `netns` to `addr`, in ms.
fn min_rtt(netns: &str, addr: &str) -> f64 {
    let out = Command::new("ip")
        .args([
            "netns", "exec", netns, "ping", "-c", "3", "-i", "0.2", "-W", "2", "-q", addr,
        ])
        .output()
        .expect("ip netns exec runs");
    assert!(
        out.status.success(),
        "ping {addr} from {netns}: {}",
        text(&out)
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    // "rtt min/avg/max/mdev = 0.051/0.060/0.071/0.008 ms"
    shown
        .lines()
        .find_map(|l| l.split_once(" = "))
        .and_then(|(_, v)| v.split('/').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no rtt in {shown}"))
}

/// The lab's soft switch serves P4Runtime on a Unix socket in the lab's
/// directory, both root's only: root connects, uid 65534 (`nobody`) is
/// refused before it can say a word of P4Runtime.
fn only_root_reaches_the_soft_switch(lab: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::path::PathBuf::from(format!("/run/turbonet/{lab}"));
    let socket = dir.join("softswitch.sock");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    assert_eq!(mode(&socket), 0o600, "{}", socket.display());
    let connect = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); print('connected')",
        socket.display().to_string()
    );
    let as_root = Command::new("/usr/bin/python3")
        .args(["-c", &connect])
        .output()
        .expect("python3 runs");
    assert!(as_root.status.success(), "root: {}", text(&as_root));
    let as_nobody = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &connect,
        ])
        .output()
        .expect("setpriv runs");
    assert!(
        !as_nobody.status.success(),
        "uid 65534 connected: {}",
        text(&as_nobody)
    );
    assert!(
        text(&as_nobody).contains("PermissionError"),
        "{}",
        text(&as_nobody)
    );
}

#[test]
fn a_fat_tree_runs_on_the_soft_switch() {
    require_root!();
    let guard = up_bundled("sf", "fat-tree-k4-soft.toml", "");
    let lab = guard.0.as_str();
    let check = |when: &str| {
        let out = run(&["check", "--lab", lab]);
        assert!(out.status.success(), "check {when}: {}", text(&out));
    };
    check("after up");
    only_root_reaches_the_soft_switch(lab);

    // Switches are virtual switches of the soft switch, not namespaces.
    assert!(!std::path::Path::new(&format!("/run/netns/tn-{lab}-edge0-0")).exists());
    assert!(std::path::Path::new(&format!("/run/netns/tn-{lab}.soft")).exists());

    // A delay set on both uplinks of edge0-0 shows in the round trip from
    // one of its hosts to a host of the other edge switch of its pod.
    let (from, to) = (format!("tn-{lab}-h0-0-0"), host_address(lab, "h0-1-0"));
    let before = min_rtt(&from, &to);
    for link in ["edge0-0--agg0-0", "edge0-0--agg0-1"] {
        let out = run(&["link", "set", link, "--delay", "15ms", "--lab", lab]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let after = min_rtt(&from, &to);
    assert!(
        after >= 30.0 && after < before + 45.0,
        "rtt {before} ms, then {after} ms with 15 ms each way"
    );

    // The pipeline's counters reach `link show`.
    assert!(
        wait_until(std::time::Duration::from_secs(5), || {
            let out = run(&["link", "show", "edge0-0--agg0-0", "--lab", lab, "--json"]);
            let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            shown[0]["directions"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["tx_packets"].as_u64() > Some(0)))
        }),
        "no packets counted on edge0-0--agg0-0"
    );

    // Failed links and switches are routed around, and restored.
    for (verb, kind, name) in [
        ("fail", "link", "edge0-0--agg0-0"),
        ("fail", "node", "core0"),
        ("restore", "link", "edge0-0--agg0-0"),
        ("restore", "node", "core0"),
    ] {
        let out = run(&[verb, kind, name, "--lab", lab]);
        assert!(out.status.success(), "{verb} {kind} {name}: {}", text(&out));
        assert!(
            text(&out).contains("entries of the switch rewritten"),
            "{}",
            text(&out)
        );
        check(&format!("after {verb} {kind} {name}"));
    }

    let out = run(&["down", lab]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!std::path::Path::new(&format!("/run/netns/tn-{lab}.soft")).exists());
}

#[test]
fn bgp_agents_speak_through_the_soft_switchs_cpu_port() {
    require_root!();
    // The same fabric with built-in BGP agents: their sessions run over
    // the emulated links (PacketIn/PacketOut through the CPU port), their
    // routes go into the pipeline's tables.
    let scenario = std::fs::read_to_string(
        turbonet_tests::workspace().join("scenarios/fat-tree-k4-soft.toml"),
    )
    .unwrap()
    .replace("mode = \"controller\"", "mode = \"bgp\"");
    let lab = turbonet_tests::unique_lab("sb");
    let file = turbonet_tests::write_scenario(&lab, &scenario.replace("k4soft", &lab));
    let _guard = turbonet_tests::LabGuard(lab.clone());
    let up = run(&["up", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    assert!(
        text(&up).contains("64/64 sessions established"),
        "{}",
        text(&up)
    );
    let check = |when: &str| {
        let out = run(&["check", "--lab", &lab]);
        assert!(out.status.success(), "check {when}: {}", text(&out));
    };
    check("after up");

    // A failed link takes its session down and BGP routes around it.
    let out = run(&["fail", "link", "edge0-0--agg0-0", "--lab", &lab]);
    assert!(out.status.success(), "{}", text(&out));
    let converged = |sessions: &str| {
        wait_until(std::time::Duration::from_secs(20), || {
            let out = run(&["show", "bgp", "--lab", &lab]);
            let shown = text(&out);
            shown.contains("20/20 switches converged") && shown.contains(sessions)
        })
    };
    assert!(converged("62/64 sessions established"), "no re-convergence");
    check("after the failure");
    let out = run(&["restore", "link", "edge0-0--agg0-0", "--lab", &lab]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(converged("64/64 sessions established"), "no re-convergence");
    check("after the restore");
}
