//! A lab's shares built on two machines against the kernel (root): each
//! machine a network namespace of its own on an underlay veth pair, each
//! share built from its machine's namespace as a worker there would build
//! it. Every host then reaches every other with packets of the links' MTU,
//! across machines too, and the underlay fragments nothing.

mod machines;

use std::process::Command;

use machines::{Namespaces, fragments_made};

use turbonet_host::kernel::Netlink;
use turbonet_host::namespaces;
use turbonet_lab::span::Span;

#[test]
fn hosts_reach_each_other_across_machines_with_packets_of_the_links_mtu() {
    if !machines::can_run() {
        return;
    }
    let name = format!("sh{}", std::process::id() % 1_000_000);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/fat-tree-k4.toml");
    let text = std::fs::read_to_string(path)
        .expect("the scenario")
        .replace("name = \"k4\"", &format!("name = \"{name}\""));
    let lab = turbonet_topo::parse(path, &text).expect("a valid scenario");
    let plan = turbonet_topo::machines::plan(&lab, 2).expect("a plan");
    let machine_names = [0, 1].map(|i| format!("tnm-{name}-{i}"));
    let mut ours: Vec<String> = (lab.fabric.nodes.iter())
        .map(|n| turbonet_lab::names::node_namespace(&name, &n.name))
        .collect();
    ours.extend(machine_names.iter().cloned());
    let _guard = Namespaces(ours);
    let underlay = machines::underlay(&machine_names, 1550);

    let carriers = turbonet_lab::carrier::carriers(&lab, &turbonet_lab::carrier::Qdiscs::none())
        .expect("carriers");
    for (i, m) in machine_names.iter().enumerate() {
        let span = Span::of(&plan, i as u32, underlay.to_vec(), 14789).expect("a span");
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
    for m in &machine_names {
        assert_eq!(fragments_made(m), 0, "{m} fragmented nothing");
    }
}
