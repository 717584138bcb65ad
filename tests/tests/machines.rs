//! End-to-end: labs over several machines, each machine emulated as a
//! network namespace with mounts of its own ([`turbonet_tests::machines`])
//! running an unmodified `turbonet worker` (root).

use std::time::Duration;

use turbonet_tests::machines::Machines;
use turbonet_tests::{require_root, scenario_as, text, unique_lab};

/// How long a lab over machines may take to come up here.
const UP: Duration = Duration::from_secs(240);

/// `turbonet check --json` on machine `i`: its hosts to every host.
fn check_on(machines: &Machines, i: usize, lab: &str) -> serde_json::Value {
    let out = machines.turbonet(i, &["check", "--lab", lab, "--json"]);
    assert!(out.status.success(), "check on machine {i}: {}", text(&out));
    serde_json::from_slice(&out.stdout).expect("check's JSON")
}

#[test]
fn a_fat_tree_over_two_machines_reaches_every_host_pair() {
    require_root!();
    let lab = unique_lab("wk");
    let file = scenario_as("fat-tree-k4.toml", &lab, "");
    let mut machines = Machines::new(&lab, 2);
    for i in 0..2 {
        machines.start_worker(i, &lab, &file);
    }
    for i in 0..2 {
        machines.wait_for(i, "the lab runs on all 2 machines", UP);
    }
    // Each machine checks from its hosts; together every ordered pair.
    let mut hosts = 0;
    let mut probes = 0;
    for i in 0..2 {
        let report = check_on(&machines, i, &lab);
        assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
        assert_eq!(report["part"], format!("machine {i} of 2"));
        hosts += report["hosts"].as_u64().unwrap();
        probes += report["probes"].as_u64().unwrap();
    }
    assert_eq!(hosts, 16, "every host probed from, once");
    assert_eq!(probes, 16 * 15, "every ordered pair of hosts");
    for i in 0..2 {
        let status = machines.stop_worker(i).expect("a worker to stop");
        assert!(
            status.success(),
            "worker {i}: {status}:\n{}",
            machines.said(i)
        );
        let left = machines.turbonet(i, &["status", "--json"]);
        assert!(
            !String::from_utf8_lossy(&left.stdout).contains(&lab),
            "lab {lab} left on machine {i}: {}",
            text(&left)
        );
    }
}
