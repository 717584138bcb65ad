//! HPN hosts as the paper's NICs: each NIC's flows hash over its two ports
//! (one per plane), and a failed port moves only its own flows.
//!
//! Needs root (namespaces); skipped otherwise.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use turbonet_tests::{host_address, require_root, run, text, up_bundled};

/// Flows of a host, as source ports of TCP connections to one address.
const FLOWS: u16 = 400;

/// The port the kernel of `netns` sends each flow from `from` to `to` out
/// of (`ip route get` with the flow's 5-tuple, one `ip -batch` for all).
fn ports_of_flows(netns: &str, from: &str, to: &str) -> Vec<String> {
    let mut ip = Command::new("ip")
        .args(["-n", netns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("ip runs");
    let mut stdin = ip.stdin.take().unwrap();
    for sport in 0..FLOWS {
        writeln!(
            stdin,
            "route get {to} from {from} ipproto tcp sport {} dport 5201",
            10_000 + sport
        )
        .unwrap();
    }
    drop(stdin);
    let out = ip.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ports: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "dev")?;
            words.next().map(str::to_owned)
        })
        .collect();
    assert_eq!(ports.len(), usize::from(FLOWS), "one answer per flow");
    ports
}

fn spread(ports: &[String]) -> BTreeMap<&str, usize> {
    let mut by_port = BTreeMap::new();
    for p in ports {
        *by_port.entry(p.as_str()).or_insert(0) += 1;
    }
    by_port
}

/// h0-0's rail-0 NIC has two ports, `tor0-r0p0` (plane 0) and `tor0-r0p1`
/// (plane 1). Its flows from that NIC's address spread over both; when
/// the plane-0 port fails, exactly the flows it carried move to the
/// plane-1 port and none of the others move; a restore puts every flow
/// back where it was.
#[test]
fn a_nic_hashes_flows_over_its_two_ports_and_a_failed_port_moves_only_its_flows() {
    require_root!();
    let lab = up_bundled("hn", "hpn.toml", "");
    let lab = lab.0.as_str();
    let netns = format!("tn-{lab}-h0-0");
    let (from, to) = (host_address(lab, "h0-0"), host_address(lab, "h1-0"));
    let rules = Command::new("ip")
        .args(["-n", &netns, "rule"])
        .output()
        .unwrap();
    let rules = String::from_utf8_lossy(&rules.stdout);
    assert!(
        rules.contains(&format!("from {from} lookup 100")),
        "{rules}"
    );

    let before = ports_of_flows(&netns, &from, &to);
    let by_port = spread(&before);
    assert_eq!(
        by_port.keys().copied().collect::<Vec<_>>(),
        ["tor0-r0p0", "tor0-r0p1"],
        "flows leave by the NIC's own ports only"
    );
    for (port, n) in &by_port {
        assert!(
            *n >= usize::from(FLOWS) / 4,
            "{port} carries {n} of {FLOWS}"
        );
    }

    let out = run(&["fail", "link", "h0-0--tor0-r0p0", "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    let after = ports_of_flows(&netns, &from, &to);
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a, "tor0-r0p1", "every flow leaves by the port left");
        if b == "tor0-r0p1" {
            assert_eq!(a, b, "a flow of the surviving port moved");
        }
    }

    let out = run(&["restore", "link", "h0-0--tor0-r0p0", "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(ports_of_flows(&netns, &from, &to), before);
}

/// `graph` of a running lab marks a failed link and a failed node in red,
/// by their ids; `graph` of a scenario file (no root needed) draws every
/// node, and a segment of the real pod node by node.
#[test]
fn graph_draws_a_running_lab_with_what_is_down() {
    require_root!();
    let lab = up_bundled("hg", "hpn.toml", "");
    let lab = lab.0.as_str();
    for (kind, name) in [("link", "tor0-r0p0--agg0-0"), ("node", "agg1-1")] {
        let out = run(&["fail", kind, name, "--lab", lab]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = run(&["graph", lab]);
    assert!(out.status.success(), "{}", text(&out));
    let svg = String::from_utf8_lossy(&out.stdout);
    let element = |id: &str| {
        let at = svg
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no {id} in the picture"));
        svg[at..].split("</g>").next().unwrap().to_owned()
    };
    assert!(element("link-tor0-r0p0--agg0-0").contains("#d62728"));
    assert!(element("node-agg1-1").contains("#d62728"));
    assert!(!element("node-agg1-0").contains("#d62728"));
    assert!(svg.contains(&format!("{lab} (running)")));
}

/// `check --sample 1` probes one host behind every ToR set from every
/// host, every address of it: in two HPN pods of 10 segments, 20 hosts
/// with 3 rails each probe 10 hosts at 3 addresses (less themselves, when
/// the sample picks them: at most once each).
#[test]
fn a_sampled_check_reaches_every_segment_of_two_pods() {
    require_root!();
    let lab = up_bundled("hs", "hpn-pods.toml", "");
    let out = run(&["check", "--sample", "1", "--json", "--lab", &lab.0]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["sample"], 1);
    let probes = report["probes"].as_u64().unwrap();
    assert!(
        probes.is_multiple_of(3) && (20 * 10 * 3 - 20 * 3..=20 * 10 * 3).contains(&probes),
        "{report}"
    );
    assert_eq!(report["reachable"], report["probes"]);
}
