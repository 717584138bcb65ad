//! A lab over machines: the bundled fabrics at 2 to 5 machines as golden
//! summaries, and the rules every plan keeps (every link local or cut once,
//! atoms whole, balance, determinism), checked from the plan alone.
//! Regenerate the goldens with `UPDATE_GOLDEN=1 cargo test -p turbonet-topo --test machines`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use turbonet_topo::machines::{self, FIRST_VNI, MachinePlan, MachinesError};
use turbonet_topo::partition::BALANCE_SLACK;
use turbonet_topo::{Lab, Role};

use common::{check_golden, ok};

/// The bundled scenarios with goldens, and their golden file names.
const GOLDEN: [(&str, &str); 6] = [
    ("fat-tree-k4.toml", "machines-fat-tree-k4.txt"),
    ("fat-tree-k8.toml", "machines-fat-tree-k8.txt"),
    ("fat-tree-k16.toml", "machines-fat-tree-k16.txt"),
    ("hpn.toml", "machines-hpn.txt"),
    ("hpn-pod.toml", "machines-hpn-pod.txt"),
    ("hpn-pods.toml", "machines-hpn-pods.txt"),
];

fn scenario(name: &str) -> Lab {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(name);
    ok(&std::fs::read_to_string(path).unwrap())
}

fn plan(lab: &Lab, m: u32) -> MachinePlan {
    machines::plan(lab, m).unwrap_or_else(|e| panic!("{} over {m}: {e}", lab.name))
}

/// Three switches in a line (`s1--s2--s3`), a host on each, every link
/// with `params` (a TOML inline table's body), under `engine`.
fn line(engine: &str, params: &str) -> Lab {
    ok(&format!(
        "[lab]\nname = \"line\"\nengine = \"{engine}\"\n[topology]\nkind = \"custom\"\n\
         nodes = [\n\
           {{ name = \"s1\", role = \"switch\" }}, {{ name = \"s2\", role = \"switch\" }},\n\
           {{ name = \"s3\", role = \"switch\" }}, {{ name = \"h1\", role = \"host\" }},\n\
           {{ name = \"h2\", role = \"host\" }}, {{ name = \"h3\", role = \"host\" }},\n\
         ]\n\
         links = [\n\
           {{ a = \"s1\", b = \"s2\", {params} }}, {{ a = \"s2\", b = \"s3\", {params} }},\n\
           {{ a = \"h1\", b = \"s1\", {params} }}, {{ a = \"h2\", b = \"s2\", {params} }},\n\
           {{ a = \"h3\", b = \"s3\", {params} }},\n\
         ]\n"
    ))
}

/// Every node's machine, from the plan's parts (each node in exactly one).
fn machine_of(lab: &Lab, plan: &MachinePlan) -> BTreeMap<String, u32> {
    let mut at = BTreeMap::new();
    for part in &plan.parts {
        for node in &part.nodes {
            assert!(
                at.insert(node.clone(), part.machine).is_none(),
                "{node} twice"
            );
        }
    }
    assert_eq!(at.len(), lab.fabric.nodes.len());
    at
}

/// What one machine count gives, in a few lines: per machine its counts
/// and what it holds, cut links by class and by pair, the random
/// placement's cut and the hash.
fn summary(plan: &MachinePlan) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "## {} machines: cut {} of {} (random {}), hash {}",
        plan.machines,
        plan.cut(),
        plan.links,
        plan.random.cut,
        plan.hash
    )
    .unwrap();
    for p in &plan.parts {
        let roles: Vec<String> = p
            .switches
            .iter()
            .map(|r| format!("{} {}", r.count, r.role))
            .collect();
        writeln!(
            out,
            "machine {}: {} namespaces ({}, {} hosts) pods {:?} segments {:?}; {} devices, \
             {} local links, {} vxlan, {} engine links, {}",
            p.machine,
            p.namespaces,
            roles.join(" "),
            p.hosts,
            p.pods,
            p.segments,
            p.devices,
            p.local_links,
            p.vxlan,
            p.engine_links,
            p.memory
        )
        .unwrap();
    }
    let classes: Vec<String> = plan
        .cut_by_class
        .iter()
        .map(|c| format!("{} {}/{}", c.class, c.cut, c.links))
        .collect();
    writeln!(out, "classes: {}", classes.join(", ")).unwrap();
    let pairs: Vec<String> = plan
        .cut_by_pair
        .iter()
        .map(|p| format!("{}-{} {}", p.machines[0], p.machines[1], p.cut))
        .collect();
    writeln!(out, "pairs: {}", pairs.join(", ")).unwrap();
    out
}

#[test]
fn bundled_fabrics_over_two_to_five_machines() {
    for (file, golden) in GOLDEN {
        let lab = scenario(file);
        let mut out = format!(
            "# {file}: {} nodes, {} links\n",
            lab.fabric.nodes.len(),
            lab.fabric.links.len()
        );
        for m in 2..=5 {
            out.push_str(&summary(&plan(&lab, m)));
        }
        check_golden(golden, &out);
    }
}

/// Every rule a plan keeps, checked from its output.
fn check_rules(lab: &Lab, plan: &MachinePlan) {
    let f = &lab.fabric;
    let at = machine_of(lab, plan);
    let end = |l: &turbonet_topo::Link, i: usize| at[&f.node(l.ends[i].node).name];
    // Every link is local or cut, and cut exactly once, in link order,
    // with consecutive VNIs and an owner at one of its ends.
    let expected: Vec<&str> = f
        .links
        .iter()
        .filter(|l| end(l, 0) != end(l, 1))
        .map(|l| l.name.as_str())
        .collect();
    let listed: Vec<&str> = plan.cut_links.iter().map(|c| c.link.as_str()).collect();
    assert_eq!(listed, expected, "{}", lab.name);
    let links: BTreeMap<&str, &turbonet_topo::Link> =
        f.links.iter().map(|l| (l.name.as_str(), l)).collect();
    for (i, c) in plan.cut_links.iter().enumerate() {
        let link = links[c.link.as_str()];
        assert_eq!(c.machines, [end(link, 0), end(link, 1)], "{}", c.link);
        assert_eq!(c.vni, FIRST_VNI + i as u32);
        assert!(c.machines.contains(&c.owner), "{}", c.link);
        if !c.engine {
            assert_eq!(c.owner, c.machines[0].min(c.machines[1]), "{}", c.link);
        }
    }
    let local: usize = plan.parts.iter().map(|p| p.local_links).sum();
    assert_eq!(local + plan.cut(), f.links.len());
    let vxlan: usize = plan.parts.iter().map(|p| p.vxlan).sum();
    assert_eq!(vxlan, 2 * plan.cut());
    let by_class: usize = plan.cut_by_class.iter().map(|c| c.cut).sum();
    let by_pair: usize = plan.cut_by_pair.iter().map(|c| c.cut).sum();
    assert_eq!((by_class, by_pair), (plan.cut(), plan.cut()));
    // Atoms stay whole: no host link is cut, every HPN segment is on one
    // machine, and so is every pod and segment a part says it holds.
    assert!(
        plan.cut_links
            .iter()
            .all(|c| !links[c.link.as_str()].is_host_link()),
        "{}: a host link is cut",
        lab.name
    );
    let mut segments: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    let mut pods: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for n in &f.nodes {
        if let Some(s) = n.segment {
            segments.entry(s).or_default().insert(at[&n.name]);
        }
        if let Some(p) = n.pod {
            pods.entry(p).or_default().insert(at[&n.name]);
        }
    }
    assert!(segments.values().all(|m| m.len() == 1), "{}", lab.name);
    for part in &plan.parts {
        for p in &part.pods {
            assert_eq!(pods[p], BTreeSet::from([part.machine]), "pod {p}");
        }
        for s in &part.segments {
            assert_eq!(segments[s], BTreeSet::from([part.machine]), "segment {s}");
        }
        // Every machine runs something.
        assert!(
            part.namespaces > 0,
            "{}: machine {} is empty",
            lab.name,
            part.machine
        );
    }
}

/// The largest smallest atom: an HPN segment or a switch with its hosts
/// (namespaces, devices).
fn largest_atom(lab: &Lab) -> (usize, usize) {
    let f = &lab.fabric;
    let mut atoms: BTreeMap<(u8, u32), (usize, usize)> = BTreeMap::new();
    for n in &f.nodes {
        let anchor = if n.role == Role::Host {
            f.node(f.link(n.links[0]).ends_from(n.id).unwrap().1.node)
        } else {
            n
        };
        let key = anchor.segment.map_or((1, anchor.id.0), |s| (0, s));
        let atom = atoms.entry(key).or_default();
        atom.0 += 1;
        atom.1 += n.links.len();
    }
    atoms
        .values()
        .fold((0, 0), |(a, b), &(x, y)| (a.max(x), b.max(y)))
}

#[test]
fn every_plan_keeps_the_rules() {
    let mut labs: Vec<Lab> = GOLDEN.iter().map(|(file, _)| scenario(file)).collect();
    labs.extend(
        [
            "leaf-spine.toml",
            "clos-5.toml",
            "custom-triangle.toml",
            "hpn-bgp.toml",
        ]
        .map(scenario),
    );
    labs.push(line("auto", "loss = \"1%\""));
    for lab in &labs {
        for m in 1..=8 {
            match machines::plan(lab, m) {
                Ok(plan) => check_rules(lab, &plan),
                Err(MachinesError::TooManyMachines { atoms, .. }) => assert!(atoms < m as usize),
                Err(e) => panic!("{} over {m}: {e}", lab.name),
            }
        }
    }
}

#[test]
fn every_machine_stays_within_its_share_or_one_atom_above() {
    for (file, _) in GOLDEN {
        let lab = scenario(file);
        let (atom_ns, atom_dev) = largest_atom(&lab);
        for m in 2..=5 {
            let plan = plan(&lab, m);
            let mean_ns = lab.fabric.nodes.len() as f64 / f64::from(m);
            let mean_dev = 2.0 * lab.fabric.links.len() as f64 / f64::from(m);
            for p in &plan.parts {
                let (ns, dev) = (p.namespaces as f64, p.devices as f64);
                assert!(
                    ns <= mean_ns * (1.0 + BALANCE_SLACK) + atom_ns as f64,
                    "{file} over {m}: machine {} has {ns} namespaces",
                    p.machine
                );
                assert!(
                    dev <= mean_dev * (1.0 + BALANCE_SLACK) + atom_dev as f64,
                    "{file} over {m}: machine {} has {dev} devices",
                    p.machine
                );
                // Large fabrics have atoms fine enough for the bound itself.
                if lab.fabric.nodes.len() > 1000 {
                    assert!(ns <= mean_ns * (1.0 + BALANCE_SLACK), "{file} over {m}");
                    assert!(dev <= mean_dev * (1.0 + BALANCE_SLACK), "{file} over {m}");
                }
            }
        }
    }
}

#[test]
fn the_same_lab_gives_the_same_plan_and_hash() {
    for file in ["fat-tree-k8.toml", "hpn-pods.toml"] {
        for m in 1..=5 {
            let (a, b) = (plan(&scenario(file), m), plan(&scenario(file), m));
            assert_eq!(a, b, "{file} over {m}");
            assert_eq!(a.hash.len(), 16);
            assert!(a.hash.chars().all(|c| c.is_ascii_hexdigit()));
        }
    }
    // Another machine count, another partition, another hash.
    let lab = scenario("fat-tree-k8.toml");
    let hashes: BTreeSet<String> = (1..=5).map(|m| plan(&lab, m).hash).collect();
    assert_eq!(hashes.len(), 5);
}

#[test]
fn one_machine_cuts_nothing() {
    for (file, _) in GOLDEN {
        let lab = scenario(file);
        let plan = plan(&lab, 1);
        assert_eq!(plan.cut(), 0, "{file}");
        assert_eq!(plan.random.cut, 0, "{file}");
        assert_eq!(plan.parts.len(), 1);
        assert_eq!(plan.parts[0].namespaces, lab.fabric.nodes.len());
        assert_eq!(plan.parts[0].local_links, lab.fabric.links.len());
        assert_eq!(plan.parts[0].devices, 2 * lab.fabric.links.len());
    }
}

#[test]
fn more_machines_than_atoms_or_none_or_a_p4_lab_are_refused() {
    let triangle = scenario("custom-triangle.toml");
    // Three switches with a host each: three atoms, every one on its own
    // machine at three, and every switch link cut.
    let three = plan(&triangle, 3);
    assert_eq!(three.cut(), 3);
    let e = machines::plan(&triangle, 4).unwrap_err();
    assert_eq!(
        e,
        MachinesError::TooManyMachines {
            machines: 4,
            atoms: 3
        }
    );
    assert!(e.to_string().contains("use at most 3 machines"), "{e}");
    assert_eq!(
        machines::plan(&triangle, 0).unwrap_err(),
        MachinesError::NoMachine
    );
    let soft = scenario("fat-tree-k4-soft.toml");
    let e = machines::plan(&soft, 2).unwrap_err();
    assert!(e.to_string().contains("only a netns lab"), "{e}");
}

#[test]
fn the_engine_carries_impaired_links_and_owners_share_them() {
    // Lossy links: the engine carries them all. Over three machines
    // (a switch and its host each) both switch links are cut, each owned
    // by the machine whose engine carried fewer so far.
    let lab = line("auto", "loss = \"1%\"");
    let plan = plan(&lab, 3);
    assert_eq!(plan.cut(), 2);
    assert!(plan.cut_links.iter().all(|c| c.engine));
    let engine: Vec<usize> = plan.parts.iter().map(|p| p.engine_links).collect();
    assert_eq!(engine.iter().sum::<usize>(), 5);
    assert!(engine.iter().all(|&e| e <= 2), "{engine:?}");
    // Every machine: two devices per local link, two engine ports per
    // local impaired link, a VXLAN device per cut end, two more on the
    // owner of an impaired cut link.
    let devices: usize = plan.parts.iter().map(|p| p.devices).sum();
    assert_eq!(devices, 3 * 4 + 2 * (2 + 2));
    let engine_dim = plan.balance.iter().find(|b| b.dimension == "engine links");
    assert!(engine_dim.is_some());

    // A rate alone is the kernel's token bucket's, but the userspace engine
    // takes it when asked; netem (engine = "kernel") needs no engine.
    for (engine, params, carried) in [
        ("auto", "rate = \"1gbit\"", false),
        ("userspace", "rate = \"1gbit\"", true),
        ("kernel", "delay = \"1ms\"", false),
        ("bpf", "delay = \"1ms\"", true),
        // Written as zero, a parameter asks for nothing (as `up` has it).
        ("userspace", "delay = \"0ms\", loss = \"0%\"", false),
        ("auto", "rate = \"1gbit\", duplicate = \"0%\"", false),
    ] {
        let plan = machines::plan(&line(engine, params), 3).unwrap();
        assert!(
            plan.cut_links.iter().all(|c| c.engine == carried),
            "{engine} {params}"
        );
        let engine_links: usize = plan.parts.iter().map(|p| p.engine_links).sum();
        assert_eq!(
            engine_links,
            if carried { 5 } else { 0 },
            "{engine} {params}"
        );
    }
}

#[test]
fn kernel_memory_counts_namespaces_and_devices() {
    let lab = scenario("hpn-pod.toml");
    let one = plan(&lab, 1);
    let kib = 2416 * machines::NAMESPACE_KIB + 96_000 * machines::DEVICE_KIB;
    assert_eq!(one.parts[0].memory.0, kib << 10);
    // About 5.6 GiB, as measured for the whole pod on one machine.
    assert!((5.5..5.7).contains(&((kib as f64) / f64::from(1 << 20))));
}

#[test]
fn a_cut_link_needs_an_underlay_its_frames_cross_whole() {
    // Ethernet's MTU when the link sets none: 1,550 bytes on the underlay.
    let plain = plan(&line("auto", "delay = \"1ms\""), 3);
    assert!(plain.cut() > 0);
    assert_eq!(plain.fits_underlay(1550), Ok(()));
    let e = plain.fits_underlay(1500).unwrap_err();
    assert_eq!(
        e.link.as_ref(),
        Some(&plain.cut_links[0].link),
        "the first cut link"
    );
    assert_eq!((e.mtu, e.needed, e.fits), (1500, 1550, 1450));

    let jumbo = plan(&line("auto", "mtu = 9000"), 3);
    assert!(jumbo.cut_links.iter().all(|c| c.mtu == 9000));
    assert_eq!(jumbo.fits_underlay(9100), Ok(()));
    let e = jumbo.fits_underlay(9049).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "link {} crosses machines",
            jumbo.cut_links[0].link
        )) && e.contains("at least 9050")
            && e.contains("the underlay's is 9049")
            && e.contains("at most 8999"),
        "{e}"
    );
}

/// Each machine's share of a plan: every node runs on exactly one, every
/// link is local on one machine or cut with one end on each of two (each
/// end seeing the other's machine, the plan's VNI and owner), away from
/// the rest; the whole lab is all local.
#[test]
fn shares_split_the_lab_between_machines_as_the_plan_says() {
    use turbonet_topo::machines::{Reach, Share};
    for (file, m) in [
        ("fat-tree-k4.toml", 2),
        ("hpn.toml", 3),
        ("custom-triangle.toml", 3),
    ] {
        let lab = scenario(file);
        let whole = Share::whole(&lab.fabric);
        assert!(whole.is_whole());
        assert!(lab.fabric.nodes.iter().all(|n| whole.runs(n.id)));
        assert!(
            lab.fabric
                .links
                .iter()
                .all(|l| whole.reach(l) == Reach::Local)
        );
        let plan = plan(&lab, m);
        let shares: Vec<Share> = (0..m).map(|i| Share::of(&plan, i)).collect();
        for node in &lab.fabric.nodes {
            let runs: Vec<u32> = (0..m)
                .filter(|i| shares[*i as usize].runs(node.id))
                .collect();
            assert_eq!(runs.len(), 1, "{file}: {} runs on {runs:?}", node.name);
            let part = &plan.parts[runs[0] as usize];
            assert!(part.nodes.contains(&node.name), "{file}: {}", node.name);
        }
        let mut cut = 0;
        for link in &lab.fabric.links {
            let reach: Vec<Reach> = shares.iter().map(|s| s.reach(link)).collect();
            let local = reach.iter().filter(|r| **r == Reach::Local).count();
            let ends: Vec<(u32, turbonet_topo::machines::CutEnd)> = reach
                .iter()
                .enumerate()
                .filter_map(|(i, r)| match r {
                    Reach::Cut(end) => Some((i as u32, *end)),
                    _ => None,
                })
                .collect();
            match (local, ends.as_slice()) {
                (1, []) => {}
                (0, [(a, ea), (b, eb)]) => {
                    cut += 1;
                    let planned = plan
                        .cut_links
                        .iter()
                        .find(|c| c.link == link.name)
                        .unwrap_or_else(|| panic!("{file}: {} is not in the plan", link.name));
                    assert_eq!((ea.far, eb.far), (*b, *a), "{file}: {}", link.name);
                    assert_eq!(ea.end + eb.end, 1, "{file}: {}", link.name);
                    for (machine, end) in [(a, ea), (b, eb)] {
                        assert_eq!(planned.machines[end.end], *machine);
                        assert_eq!(
                            shares[*machine as usize].machine_of(link.ends[end.end].node),
                            *machine
                        );
                        assert_eq!((end.vni, end.owner), (planned.vni, planned.owner));
                    }
                }
                other => panic!("{file}: {} is {other:?} ({reach:?})", link.name),
            }
        }
        assert_eq!(cut, plan.cut(), "{file}");
        if file == "custom-triangle.toml" {
            assert_eq!(cut, 3, "every switch link of the triangle is cut");
        }
    }
}

/// The line of three switches with a management network on `pool`, every
/// link with MTU `mtu`.
fn line_with_mgmt(pool: &str, mtu: u16) -> Lab {
    let text = format!(
        "[lab]\nname = \"line\"\n[topology]\nkind = \"custom\"\n\
         nodes = [\n\
           {{ name = \"s1\", role = \"switch\" }}, {{ name = \"s2\", role = \"switch\" }},\n\
           {{ name = \"s3\", role = \"switch\" }}, {{ name = \"h1\", role = \"host\" }},\n\
         ]\n\
         links = [\n\
           {{ a = \"s1\", b = \"s2\", mtu = {mtu} }}, {{ a = \"s2\", b = \"s3\", mtu = {mtu} }},\n\
           {{ a = \"h1\", b = \"s1\", mtu = {mtu} }},\n\
         ]\n\
         [mgmt]\npool = \"{pool}\"\n"
    );
    ok(&text)
}

#[test]
fn the_management_network_joins_every_machine_to_machine_0() {
    let lab = line_with_mgmt("192.168.9.0/24", 1500);
    let three = plan(&lab, 3);
    let vnis: Vec<(u32, u32)> = three
        .mgmt_tunnels
        .iter()
        .map(|t| (t.machine, t.vni))
        .collect();
    let first = machines::FIRST_VNI + three.cut() as u32;
    assert_eq!(vnis, [(1, first), (2, first + 1)], "after the cut links'");
    // Machine 0 ends every tunnel, the others one each.
    let ends = |m: u32| machines::Share::of(&three, m).mgmt_tunnels().count();
    assert_eq!((ends(0), ends(1), ends(2)), (2, 1, 1));
    assert!(plan(&lab, 1).mgmt_tunnels.is_empty());
    // Each machine's part has an address of its own, from the top down.
    let mgmt = lab.mgmt.unwrap();
    let hubs: Vec<String> = (0..3).map(|m| mgmt.hub_of(m).to_string()).collect();
    assert_eq!(
        hubs,
        ["192.168.9.1/24", "192.168.9.254/24", "192.168.9.253/24"]
    );
    // Its frames are Ethernet's (`mgmt0`'s): 1,550 bytes on the underlay,
    // whatever the links' MTU.
    let small = plan(&line_with_mgmt("192.168.9.0/24", 1400), 3);
    assert_eq!(small.fits_underlay(1550), Ok(()));
    let e = small.fits_underlay(1460).unwrap_err();
    assert_eq!((e.link.as_ref(), e.mtu, e.needed), (None, 1500, 1550));
    assert_eq!(
        e.to_string(),
        "the management network crosses machines with MTU 1500: its VXLAN tunnel needs an \
         underlay MTU of at least 1550, and the underlay's is 1460 (raise the underlay's MTU)"
    );
}

#[test]
fn a_management_pool_without_room_for_every_machine_is_refused() {
    // Four nodes take .2-.5 of a /29 (.0-.7): room for machine 1 at .6.
    let lab = line_with_mgmt("192.168.9.0/29", 1500);
    assert!(machines::plan(&lab, 2).is_ok());
    let e = machines::plan(&lab, 3).unwrap_err().to_string();
    assert!(
        e.contains("pool 192.168.9.0/29 holds the lab's 4 nodes")
            && e.contains("each of 3 machines")
            && e.contains("larger network"),
        "{e}"
    );
}

#[test]
fn a_workload_whose_ranks_the_partition_puts_on_two_machines_is_refused() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/custom-triangle.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let across = ok(&(text
        + "[[workload]]\nname = \"probe\"\nkind = \"udp\"\npattern = \"pairs\"\n\
           pairs = [[\"h1\", \"h2\"]]\nrate = \"1mbit\"\nduration = \"1s\"\n"));
    assert!(machines::plan(&across, 1).is_ok());
    let e = machines::plan(&across, 3).unwrap_err().to_string();
    assert!(
        e.starts_with("workload probe has ranks on machines")
            && e.contains("(h1)")
            && e.contains("(h2)")
            && e.contains("give it a [[job]] of one machine's hosts"),
        "{e}"
    );
}
