//! End-to-end: the management network and `turbonet mpirun` (root, Open
//! MPI and mpi4py from Debian). A real mpi4py AllReduce and All-to-All over
//! a k=4 fat-tree: each rank runs on its own host, Open MPI's control
//! channel stays on the management network, and the bytes each host sends
//! on its fabric ports are what the pinned algorithm sends.

use std::collections::BTreeMap;
use std::process::Command;

use turbonet_tests::{require_root, run, skip, text, up_bundled, workspace};

/// Four hosts, one in each pod, so every ring step crosses the core.
const EXTRA: &str = r#"
[mgmt]
pool = "192.168.100.0/24"

[[job]]
name = "ring"
hosts = ["h0-0-0", "h1-0-1", "h2-1-0", "h3-1-1"]
"#;

const HOSTS: [&str; 4] = ["h0-0-0", "h1-0-1", "h2-1-0", "h3-1-1"];

/// Bytes sent so far on each interface of a node (`ip -s -j link`).
fn tx_bytes(lab: &str, node: &str) -> BTreeMap<String, u64> {
    let out = Command::new("ip")
        .args(["-n", &format!("tn-{lab}-{node}"), "-s", "-j", "link"])
        .output()
        .expect("ip runs");
    assert!(out.status.success(), "{}", text(&out));
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    links
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let name = l["ifname"].as_str().unwrap().to_owned();
            (name, l["stats64"]["tx"]["bytes"].as_u64().unwrap())
        })
        .collect()
}

/// Bytes each job host sent while `f` ran: on its fabric ports, and on
/// `mgmt0`.
fn sent_during(lab: &str, f: impl FnOnce()) -> Vec<(u64, u64)> {
    let before: Vec<_> = HOSTS.iter().map(|h| tx_bytes(lab, h)).collect();
    f();
    HOSTS
        .iter()
        .zip(before)
        .map(|(h, before)| {
            let after = tx_bytes(lab, h);
            let mut fabric = 0;
            let mut mgmt = 0;
            for (name, bytes) in after {
                let sent = bytes - before.get(&name).copied().unwrap_or(0);
                match name.as_str() {
                    "lo" => {}
                    "mgmt0" => mgmt += sent,
                    _ => fabric += sent,
                }
            }
            (fabric, mgmt)
        })
        .collect()
}

fn mpirun(lab: &str, op: &str, bytes: u64) -> serde_json::Value {
    let program = workspace().join("bench/assets/mpi_collective.py");
    let out = run(&[
        "mpirun",
        "--lab",
        lab,
        "--job",
        "ring",
        "--",
        "/usr/bin/python3",
        program.to_str().unwrap(),
        op,
        &bytes.to_string(),
    ]);
    assert!(out.status.success(), "mpirun {op}: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no report from rank 0: {}", text(&out)));
    serde_json::from_str(line).unwrap()
}

#[test]
fn mpi4py_collectives_run_one_rank_per_host_and_send_what_the_algorithm_sends() {
    require_root!();
    let has = |path: &str| std::path::Path::new(path).exists();
    if !has("/usr/bin/mpirun") {
        return skip("Open MPI is not installed (apt-get install openmpi-bin)");
    }
    if Command::new("/usr/bin/python3")
        .args(["-c", "import mpi4py"])
        .status()
        .is_ok_and(|s| !s.success())
    {
        return skip("mpi4py is not installed (apt-get install python3-mpi4py)");
    }
    let lab = up_bundled("mpi", "fat-tree-k4.toml", EXTRA);
    let lab = lab.0.as_str();
    let n = HOSTS.len() as f64;
    let size: u64 = 4 << 20;

    // Ring AllReduce: every rank sends 2(n-1)/n of the buffer.
    let mut report = serde_json::Value::Null;
    let sent = sent_during(lab, || report = mpirun(lab, "allreduce", size));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["ranks"], 4);
    assert_eq!(
        report["hosts"],
        serde_json::json!(HOSTS),
        "one rank per host, in rank order"
    );
    let expected = 2.0 * (n - 1.0) / n * size as f64;
    for (host, (fabric, mgmt)) in HOSTS.iter().zip(&sent) {
        let ratio = *fabric as f64 / expected;
        // Headers and acknowledgements add a little; recursive doubling
        // would send 2x the buffer (ratio 1.33), a tree other shares.
        assert!(
            (1.0..1.06).contains(&ratio),
            "{host} sent {fabric} bytes on its fabric ports, the ring sends {expected} (ratio {ratio:.3})"
        );
        // Open MPI's control channel ran over the management network.
        assert!(*mgmt > 0, "{host} sent nothing on mgmt0");
    }

    // Pairwise All-to-All: every rank sends all of its buffer but its own
    // block.
    let sent = sent_during(lab, || report = mpirun(lab, "alltoall", size));
    assert_eq!(report["ok"], true, "{report}");
    let expected = (n - 1.0) / n * size as f64;
    for (host, (fabric, _)) in HOSTS.iter().zip(&sent) {
        let ratio = *fabric as f64 / expected;
        assert!(
            (1.0..1.06).contains(&ratio),
            "{host} sent {fabric} bytes on its fabric ports, all-to-all sends {expected} (ratio {ratio:.3})"
        );
    }

    // --show prints the command line and the hostfile in rank order.
    let out = run(&[
        "mpirun", "--lab", lab, "--job", "ring", "--show", "--", "a.out",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&format!("ip netns exec tn-{lab}.mgmt ")),
        "{shown}"
    );
    assert!(
        shown.contains("--mca coll_tuned_allreduce_algorithm 4"),
        "{shown}"
    );
    assert!(shown.contains("--mca oob_tcp_if_include mgmt0"), "{shown}");
    let order: Vec<usize> = HOSTS
        .iter()
        .map(|h| shown.find(&format!("#   {h} slots=1")).expect(h))
        .collect();
    assert!(order.is_sorted(), "{shown}");

    // Errors say what would be valid.
    let out = run(&["mpirun", "--lab", lab, "--job", "rign", "--", "a.out"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("has no job rign (did you mean ring?)"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_lab_without_a_management_network_refuses_mpirun_and_says_how_to_add_one() {
    require_root!();
    let lab = up_bundled("nomg", "two-hosts.toml", "");
    let out = run(&["mpirun", "--lab", &lab.0, "--", "hostname"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("has no management network"), "{said}");
    assert!(said.contains("add `[mgmt]`"), "{said}");
    // The management network's namespace goes with the lab.
    let with = up_bundled("mg", "two-hosts.toml", "[mgmt]\n");
    let hub = format!("/run/netns/tn-{}.mgmt", with.0);
    assert!(std::path::Path::new(&hub).exists());
    let out = run(&[
        "exec", "--lab", &with.0, "h1", "--", "ping", "-c1", "-W2", "h2.mgmt",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run(&["exec", "--lab", &with.0, "h1", "--", "hostname"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "h1");
    let name = with.0.clone();
    drop(with);
    assert!(!std::path::Path::new(&format!("/run/netns/tn-{name}.mgmt")).exists());
}
