//! A lab's shares built on two machines against the kernel (root): each
//! machine a network namespace of its own on an underlay veth pair, each
//! share built from its machine's namespace as a worker there would build
//! it. Every host then reaches every other with packets of the links' MTU,
//! across machines too, and the underlay fragments nothing.

use std::net::Ipv4Addr;
use std::process::Command;

use turbonet_host::kernel::Netlink;
use turbonet_host::namespaces;
use turbonet_lab::span::Span;

/// Runs `ip ARGS` (in namespace `ns` when given); fails on an error.
fn ip(ns: Option<&str>, args: &str) {
    let mut command = Command::new("ip");
    if let Some(ns) = ns {
        command.args(["-n", ns]);
    }
    let out = command
        .args(args.split_whitespace())
        .output()
        .expect("ip runs");
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A counter of namespace `ns`'s `/proc/net/snmp` `Ip:` line.
fn ip_counter(ns: &str, name: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .expect("cat runs");
    let text = String::from_utf8(out.stdout).expect("text");
    let mut ip = text.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (ip.next().expect("names"), ip.next().expect("values"));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
        .expect("the counter")
}

/// Named namespaces of the test's own, deleted when it ends, failed or not.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

#[test]
fn hosts_reach_each_other_across_machines_with_packets_of_the_links_mtu() {
    if !nix::unistd::geteuid().is_root() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "cannot run under CI: needs root (network namespaces)");
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let name = format!("sh{}", std::process::id() % 1_000_000);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/fat-tree-k4.toml");
    let text = std::fs::read_to_string(path)
        .expect("the scenario")
        .replace("name = \"k4\"", &format!("name = \"{name}\""));
    let lab = turbonet_topo::parse(path, &text).expect("a valid scenario");
    let plan = turbonet_topo::machines::plan(&lab, 2).expect("a plan");
    let machines = [0, 1].map(|i| format!("tnm-{name}-{i}"));
    let mut ours: Vec<String> = (lab.fabric.nodes.iter())
        .map(|n| turbonet_lab::names::node_namespace(&name, &n.name))
        .collect();
    ours.extend(machines.iter().cloned());
    let _guard = Namespaces(ours);
    for m in &machines {
        ip(None, &format!("netns add {m}"));
    }
    ip(
        Some(&machines[0]),
        &format!(
            "link add u0 mtu 1550 type veth peer name u1 mtu 1550 netns {}",
            machines[1]
        ),
    );
    let underlay = [Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2)];
    for (i, m) in machines.iter().enumerate() {
        ip(Some(m), &format!("addr add {}/24 dev u{i}", underlay[i]));
        ip(Some(m), &format!("link set u{i} up"));
    }

    let carriers = turbonet_lab::carrier::carriers(&lab, &turbonet_lab::carrier::Qdiscs::none())
        .expect("carriers");
    for (i, m) in machines.iter().enumerate() {
        let span = Span::of(&lab, &plan, i as u32, underlay.to_vec(), 14789).expect("a span");
        let machine = namespaces::open(m).expect("the machine's namespace");
        namespaces::in_namespace(&machine, || {
            let mut kernel = Netlink::new();
            let quiet = &turbonet_lab::progress::Quiet;
            Ok(turbonet_lab::up::dry_build(
                &mut kernel,
                &lab,
                &span,
                &carriers,
                namespaces::has_sysctl("net/ipv4/fib_multipath_hash_seed"),
                quiet,
            ))
        })
        .expect("a thread in the machine")
        .unwrap_or_else(|e| panic!("machine {i}'s share: {e}"));
    }

    // Every host reaches every other, a packet of 1,500 bytes with the
    // don't-fragment bit, within and across machines.
    let hosts: Vec<_> = lab.fabric.hosts().collect();
    let mut across = 0;
    for from in &hosts {
        let ns = turbonet_lab::names::node_namespace(&name, &from.name);
        for to in hosts.iter().filter(|h| h.id != from.id) {
            let addr = turbonet_lab::check::addresses(&lab, to.id)[0];
            let ok = Command::new("ip")
                .args(["netns", "exec", &ns, "ping", "-c", "1", "-W", "2"])
                .args(["-M", "do", "-s", "1472", &addr.to_string()])
                .output()
                .expect("ping runs")
                .status
                .success();
            assert!(ok, "{} -> {} ({addr})", from.name, to.name);
            across += usize::from(plan.place[from.id.0 as usize] != plan.place[to.id.0 as usize]);
        }
    }
    assert!(across > 0, "some pairs cross machines");
    for m in &machines {
        assert_eq!(ip_counter(m, "FragCreates"), 0, "{m} fragmented nothing");
    }
}
