//! Behaviour of `parse` and `summary` beyond the golden files.

mod common;

use std::path::Path;

use turbonet_topo::summary::CapacityBasis;
use turbonet_topo::units::{Delay, LossProb, Mtu, QueueLimit, Rate};
use turbonet_topo::{LinkClass, Loss, PrefixKind, Role, Target, TopologyKind, parse, summary};

use common::{errors, ok};

fn scenario(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios")
            .join(name),
    )
    .unwrap()
}

#[test]
fn hpn_pod_counts_and_oversubscription() {
    let start = std::time::Instant::now();
    let lab = ok(&scenario("hpn-pod.toml"));
    let parsed_in = start.elapsed();
    let s = summary(&lab);
    let count = |r: Role| {
        s.nodes_by_role
            .iter()
            .find(|x| x.role == r)
            .map_or(0, |x| x.count)
    };
    let class = |c: &str| {
        s.links_by_class
            .iter()
            .find(|x| x.class == c)
            .map_or(0, |x| x.count)
    };
    assert_eq!(count(Role::Tor), 240);
    assert_eq!(count(Role::Agg), 120);
    assert_eq!(count(Role::Core), 16);
    assert_eq!(count(Role::Host), 15 * 136);
    assert_eq!(s.backup_hosts, 15 * 8);
    assert_eq!(class("tor-agg"), 14_400);
    assert_eq!(class("host-tor"), 15 * 136 * 8 * 2);
    assert_eq!(class("agg-core"), 960);
    let tor = s
        .oversubscription
        .iter()
        .find(|o| o.role == Role::Tor)
        .unwrap();
    assert_eq!(tor.basis, CapacityBasis::Rate);
    assert_eq!(format!("{:.3}", tor.ratio.unwrap()), "1.067");
    // 128 active hosts x 200G down per ToR, 60 x 400G up.
    assert_eq!(tor.down / 240, 128 * 200_000_000_000);
    assert_eq!(tor.up / 240, 60 * 400_000_000_000);
    let agg = s
        .oversubscription
        .iter()
        .find(|o| o.role == Role::Agg)
        .unwrap();
    assert_eq!(agg.ratio, Some(15.0));
    assert_eq!(agg.down / 120, 120 * 400_000_000_000);
    assert_eq!(agg.up / 120, 8 * 400_000_000_000);
    // Every switch fits the 51.2T chip the scenario declares: the ToRs and
    // aggregation switches exactly (128 ports of 400G, 200G host links two
    // to a port), the cores with room to join more pods.
    let chip = |r: Role| s.chips.iter().find(|c| c.role == r).unwrap();
    for r in [Role::Tor, Role::Agg] {
        assert_eq!(
            (chip(r).ports, chip(r).bandwidth),
            (128, 51_200_000_000_000)
        );
    }
    assert_eq!(chip(Role::Core).ports, 60);
    // Each core has the same number of ports, all to its own plane.
    for c in lab.fabric.nodes.iter().filter(|n| n.role == Role::Core) {
        assert_eq!(c.links.len(), 60, "{}", c.name);
        for &l in &c.links {
            let agg = lab.fabric.node(lab.fabric.link(l).ends[0].node);
            assert_eq!(agg.plane, c.plane, "{} -- {}", agg.name, c.name);
        }
    }
    // About 0.1 s in release builds (47 000 links); measured, not asserted.
    eprintln!("hpn-pod parsed in {parsed_in:?}");
}

/// `[lab] rate_scale` divides every rate, queue and ECN threshold; the
/// chips are still checked against the rates as declared, and the
/// oversubscription does not change.
#[test]
fn a_rate_scale_runs_the_pod_slower_in_proportion() {
    let text = scenario("hpn-pod.toml").replace(
        "name = \"hpnpod\"\n",
        "name = \"hpnpod\"\nrate_scale = 1000\n",
    ) + "[[links.override]]\nlink = \"tor0-r0p0--agg0-0\"\nqueue = \"1000p\"\necn = \"64KiB\"\n";
    let lab = ok(&text);
    assert_eq!(lab.fabric.rate_scale, 1000);
    let link = lab.fabric.link_by_name("tor0-r0p0--agg0-0").unwrap();
    assert_eq!(link.params.rate.unwrap().bits_per_sec(), 400_000_000);
    assert_eq!(
        link.params.queue,
        Some(turbonet_topo::units::QueueLimit::Packets(1))
    );
    assert_eq!(
        link.params.ecn,
        Some(turbonet_topo::units::QueueLimit::Bytes(66))
    );
    let s = summary(&lab);
    assert_eq!(s.rate_scale, 1000);
    let tor = s.chips.iter().find(|c| c.role == Role::Tor).unwrap();
    assert_eq!(
        tor.bandwidth, 51_200_000_000_000,
        "declared rates fill the chip"
    );
    let agg = s
        .oversubscription
        .iter()
        .find(|o| o.role == Role::Agg)
        .unwrap();
    assert_eq!(agg.ratio, Some(15.0));
    let bad = scenario("hpn-pod.toml")
        .replace("name = \"hpnpod\"\n", "name = \"hpnpod\"\nrate_scale = 0\n");
    assert!(turbonet_topo::parse("t.toml", &bad).is_err());
}

#[test]
fn fat_tree_k16_counts() {
    let lab = ok(&scenario("fat-tree-k16.toml"));
    let s = summary(&lab);
    assert_eq!(s.switches, 320);
    assert_eq!(s.hosts, 1024);
    assert_eq!(s.links, 3072);
    assert_eq!(lab.fabric.kind, TopologyKind::FatTree { k: 16 });
    // Every switch has k ports.
    for n in lab.fabric.switches() {
        assert_eq!(n.links.len(), 16, "{}", n.name);
    }
    let edge = s
        .oversubscription
        .iter()
        .find(|o| o.role == Role::Edge)
        .unwrap();
    assert_eq!(edge.basis, CapacityBasis::Ports);
    assert_eq!(edge.ratio, Some(1.0));
}

#[test]
fn generated_fabrics_are_consistent() {
    for file in [
        "fat-tree-k8.toml",
        "leaf-spine.toml",
        "hpn.toml",
        "custom-triangle.toml",
    ] {
        let lab = ok(&scenario(file));
        let f = &lab.fabric;
        for (i, n) in f.nodes.iter().enumerate() {
            assert_eq!(n.id.0 as usize, i);
            let mut names = std::collections::HashSet::new();
            for (_, local, remote) in f.ports(n.id) {
                assert!(local.ifname.len() <= 15, "{file}: {}", local.ifname);
                assert!(
                    names.insert(local.ifname.clone()),
                    "{file}: duplicate ifname {}",
                    local.ifname
                );
                assert_ne!(local.node, remote.node);
            }
            assert_eq!(n.role.is_switch(), n.loopback.is_some());
            assert_eq!(n.role.is_switch(), n.asn.is_some());
        }
        let mut link_names = std::collections::HashSet::new();
        for (i, l) in f.links.iter().enumerate() {
            assert_eq!(l.id.0 as usize, i);
            assert!(
                link_names.insert(l.name.clone()),
                "{file}: duplicate link {}",
                l.name
            );
            if l.is_host_link() {
                assert_eq!(l.ends[0].addr.prefix_len(), 32);
                assert_eq!(l.ends[1].addr.prefix_len(), 32);
                // The gateway is in the host's subnet.
                let p = f
                    .prefixes
                    .iter()
                    .find(|p| p.net.contains(&l.ends[0].addr.addr()))
                    .expect("host address in a host subnet");
                assert_eq!(
                    p.kind,
                    PrefixKind::Hosts {
                        gateway: l.ends[1].addr.addr()
                    }
                );
                assert!(p.attached.contains(&l.ends[1].node));
            } else {
                assert_eq!(l.ends[0].addr.prefix_len(), 31);
                assert_eq!(l.ends[0].addr.trunc(), l.ends[1].addr.trunc());
            }
        }
    }
}

#[test]
fn leaf_spine_parallel_links() {
    let lab = ok(r#"
[lab]
name = "p"
[topology]
kind = "leaf-spine"
spines = 1
leaves = 1
hosts_per_leaf = 0
uplinks = 3
"#);
    let names: Vec<(&str, &str, &str)> = lab
        .fabric
        .links
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.ends[0].ifname.as_str(),
                l.ends[1].ifname.as_str(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("leaf0--spine0", "spine0", "leaf0"),
            ("leaf0--spine0:1", "spine0_2", "leaf0_2"),
            ("leaf0--spine0:2", "spine0_3", "leaf0_3"),
        ]
    );
    assert!(
        lab.fabric
            .prefixes
            .iter()
            .all(|p| p.kind == PrefixKind::Loopback)
    );
}

#[test]
fn long_names_fall_back_to_eth_port() {
    let lab = ok(r#"
[lab]
name = "long"
[topology]
kind = "custom"
[[topology.nodes]]
name = "a-switch-with-a-long-name"
[[topology.nodes]]
name = "b"
[[topology.nodes]]
name = "eth1"
[[topology.links]]
a = "b"
b = "a-switch-with-a-long-name"
[[topology.links]]
a = "b"
b = "eth1"
[[topology.links]]
a = "eth1"
b = "a-switch-with-a-long-name"
"#);
    let f = &lab.fabric;
    let b = f.node_by_name("b").unwrap();
    let ifs: Vec<&str> = f.ports(b.id).map(|(_, l, _)| l.ifname.as_str()).collect();
    assert_eq!(ifs, ["eth0", "eth1"]);
    let e = f.node_by_name("eth1").unwrap();
    let ifs: Vec<&str> = f.ports(e.id).map(|(_, l, _)| l.ifname.as_str()).collect();
    assert_eq!(ifs, ["b", "eth1"]);
    let long = f.node_by_name("a-switch-with-a-long-name").unwrap();
    let ifs: Vec<&str> = f
        .ports(long.id)
        .map(|(_, l, _)| l.ifname.as_str())
        .collect();
    assert_eq!(ifs, ["b", "eth1"]);
    // ASNs: base + 1000 + switch index when not given.
    assert_eq!(long.asn.unwrap().0, 4_200_001_000);
    assert_eq!(e.asn.unwrap().0, 4_200_001_002);
}

#[test]
fn custom_host_on_two_switches_gets_two_addresses() {
    let lab = ok(r#"
[lab]
name = "mh"
[topology]
kind = "custom"
nodes = [
  { name = "s1" }, { name = "s2" }, { name = "h", role = "host" },
]
links = [
  { a = "s1", b = "h", mtu = 9000, delay = "1ms" },
  { a = "h", b = "s2" },
]
[links.host-switch]
delay = "5us"
rate = "1gbit"
"#);
    let f = &lab.fabric;
    let l0 = &f.links[0];
    assert_eq!(l0.name, "h--s1");
    assert_eq!(
        l0.class,
        LinkClass {
            lower: Role::Host,
            upper: Role::Switch
        }
    );
    assert_eq!(l0.params.delay, Some(Delay::from_millis(1)));
    assert_eq!(l0.params.rate, Some(Rate::from_gbit(1)));
    assert_eq!(l0.params.mtu, Some(Mtu(9000)));
    assert_eq!(f.links[1].params.delay, Some(Delay::from_micros(5)));
    assert_ne!(f.links[0].ends[0].addr, f.links[1].ends[0].addr);
    let hosts = f
        .prefixes
        .iter()
        .filter(|p| matches!(p.kind, PrefixKind::Hosts { .. }))
        .count();
    assert_eq!(hosts, 2);
}

#[test]
fn precedence_default_class_override() {
    let lab = ok(r#"
[lab]
name = "prec"
target = "p4rt"
[topology]
kind = "fat-tree"
k = 2
[links.default]
rate = "1gbit"
delay = "1us"
loss = "1e-9"
queue = "100p"
[links.edge-agg]
delay = "2us"
queue = "1MiB"
[[links.override]]
link = "edge0-0--agg0-0"
delay = "3us"
[[p4rt.switch]]
name = "s1"
ports = 64
speed = "100G"
address = "10.0.0.2:9559"
"#);
    assert_eq!(lab.target, Target::P4rt);
    let f = &lab.fabric;
    let get = |name: &str| &f.link_by_name(name).unwrap().params;
    assert_eq!(get("edge0-0--agg0-0").delay, Some(Delay::from_micros(3)));
    assert_eq!(
        get("edge0-0--agg0-0").queue,
        Some(QueueLimit::Bytes(1 << 20))
    );
    assert_eq!(get("edge1-0--agg1-0").delay, Some(Delay::from_micros(2)));
    assert_eq!(get("h0-0-0--edge0-0").delay, Some(Delay::from_micros(1)));
    assert_eq!(
        get("h0-0-0--edge0-0").loss,
        Some(Loss::Bernoulli(LossProb(1e-9)))
    );
    assert_eq!(get("h0-0-0--edge0-0").queue, Some(QueueLimit::Packets(100)));
}

#[test]
fn all_errors_are_reported_with_locations() {
    let errs = errors(
        "[lab]\nname = \"\"\n[topology]\nkind = \"fat-tree\"\nk = 66\n[links.default]\nrate = 5\nmtu = \"big\"\n",
    );
    let lines: Vec<usize> = errs.iter().map(|e| e.0).collect();
    assert_eq!(lines, [2, 5, 7, 8], "{errs:#?}");
    assert!(errs[1].2.contains("`k` must be from 2 to 64"));
    assert!(errs[2].3.contains("gbit"), "{errs:#?}");
}

#[test]
fn scenario_errors_api() {
    let e = parse(
        "bad.toml",
        "[lab]\nname = \"x\"\n[topology]\nkind = \"fat-tre\"\n",
    )
    .unwrap_err();
    assert_eq!(e.len(), 1);
    assert_eq!(e.origin(), "bad.toml");
    let first = e.iter().next().unwrap();
    assert_eq!(first.line_col(), Some((4, 8)));
    assert_eq!(first.message(), "unknown topology kind `fat-tre`");
    assert!(
        first
            .help()
            .unwrap()
            .starts_with("did you mean `fat-tree`?")
    );
    assert_eq!(e.to_string(), "unknown topology kind `fat-tre`");
    let rendered = e.render_plain(80);
    assert!(rendered.contains("bad.toml:4:8"), "{rendered}");
    // Works as a miette diagnostic and a std error.
    let _: &dyn miette::Diagnostic = &e;
    let _: &dyn std::error::Error = &e;
    let json = serde_json::to_value(first).unwrap();
    assert_eq!(json["line_col"], serde_json::json!([4, 8]));
}

#[test]
fn duplicate_keys_and_bad_types_are_located() {
    let errs = errors("[lab]\nname = \"a\"\nname = \"b\"\n[topology]\nkind = \"hpn\"\n");
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].0, 3);
    let errs = errors("[lab]\nname = \"a\"\nseed = -1\n[topology]\nkind = 4\n");
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_eq!((errs[0].0, errs[1].0), (3, 5));
}

/// No input makes the parser panic: truncations of every scenario, byte
/// flips, and a list of hostile values.
#[test]
fn malformed_inputs_never_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut inputs: Vec<String> = Vec::new();
    for file in [
        "fat-tree-k4.toml",
        "leaf-spine.toml",
        "hpn.toml",
        "custom-triangle.toml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for cut in (0..text.len()).step_by(7) {
            if text.is_char_boundary(cut) {
                inputs.push(text[..cut].to_string());
            }
        }
        let bytes = text.as_bytes();
        for i in (0..bytes.len()).step_by(11) {
            for replacement in [b'"', b'[', b'=', b'\n', b'-', b'9', b'x'] {
                let mut b = bytes.to_vec();
                b[i] = replacement;
                if let Ok(s) = String::from_utf8(b) {
                    inputs.push(s);
                }
            }
        }
    }
    let base = "[lab]\nname = \"x\"\n";
    for topo in [
        "kind = \"fat-tree\"\nk = 0",
        "kind = \"fat-tree\"\nk = 4294967295",
        "kind = \"fat-tree\"\nk = -2",
        "kind = \"fat-tree\"\nk = 1e9",
        "kind = \"leaf-spine\"\nspines = 4294967295\nleaves = 4294967295\nhosts_per_leaf = 4294967295",
        "kind = \"leaf-spine\"\nspines = 1\nleaves = 1\nhosts_per_leaf = 0\nuplinks = 0",
        "kind = \"hpn\"\nsegments = 4294967295\nhosts_per_segment = 4294967295\nrails = 4294967295\naggs_per_plane = 1",
        "kind = \"hpn\"\nsegments = 1\nhosts_per_segment = 1\nrails = 1\naggs_per_plane = 1\ncores = 4294967295\ncore_uplinks = 4294967295",
        "kind = \"hpn\"\nsegments = 1\nhosts_per_segment = 1\nrails = 1\naggs_per_plane = 1\nplanes = 0",
        "kind = \"custom\"",
        "kind = \"custom\"\nnodes = 3",
        "kind = \"custom\"\nnodes = [1, \"a\", {}]\nlinks = [{a = 1}]",
        "kind = \"custom\"\nnodes = [{name = \"\"}, {name = \"-x\"}, {name = \"a--b\"}, {name = \"é\"}]",
        "kind = [\"fat-tree\"]",
        "kind = \"\"",
    ] {
        inputs.push(format!("{base}[topology]\n{topo}\n"));
    }
    for extra in [
        "[links]\ndefault = 3",
        "[links.default]\nrate = \"\"\ndelay = \"1e400s\"\nloss = \"1e-400%\"\nqueue = \"18446744073709551616B\"",
        "[links.default]\nrate = [1]\ndelay = {a = 1}\nloss = true\nmtu = 1e9",
        "[links.default]\nrate = \"0.0000000000000000000000000000000001gbit\"\ndelay = \"99999999999999999999999999999999999s\"",
        "[[links.override]]\nlink = 3",
        "[[links.override]]\nrate = \"1gbit\"",
        "links = 5",
        "external = 5",
        "[[external]]",
        "[[external]]\nnode = \"edge0-0\"\ninterface = \"\"\naddress = \"300.1.1.1/24\"\ngateway = \"x\"\nroutes = [\"1.2.3.4\"]\nnetns = \"../x\"",
        "[[external]]\nnode = \"edge0-0\"\ninterface = \"e\"\naddress = \"192.0.2.1/32\"",
        "[[external]]\nnode = \"edge0-0\"\ninterface = \"e\"\naddress = \"192.0.2.1/24\"\nname = \"agg0-0\"",
        "[addressing]\nloopbacks = \"0.0.0.0/0\"\nfabric = \"::/0\"\nhosts = \"255.255.255.255/32\"",
        "[addressing]\nhosts = \"255.255.255.252/30\"",
        "[routing.asn]\nbase = 4294967295",
        "[routing]\nasn = 3",
        "[routing]\nmode = \"\"\nasn = { base = -1 }",
        "[routing]\nmode = \"bgp\"\nagent = 3\nagents = 4\nhold_time = 1e99\nkeepalive = -9223372036854775808\nconnect_retry = []",
        "[routing]\nmode = \"bgp\"\nhold_time = 9223372036854775807\nkeepalive = 65535\n[routing.agents]\n\"\" = \"\"\nx = {}\n\"h0-0-0\" = \"frr\"",
        "[routing]\nagents = { \"edge0-0\" = [\"frr\"] }\n[[external]]\nbgp = 1",
        "[routing]\nmode = \"bgp\"\n[[external]]\nnode = \"core0\"\ninterface = \"e\"\naddress = \"192.0.2.1/31\"\nbgp = { peer = \"192.0.2.0\", asn = -1 }",
        "[routing]\nmode = \"bgp\"\n[[external]]\nnode = \"h0-0-0\"\ninterface = \"e\"\naddress = \"x\"\nbgp = { peer = 7, asn = 1e9, x = 1 }",
        "[lab.x]\ny = 1",
        "timeline = 5",
        "timeline = [1, \"a\", []]",
        "[timeline]\nat = \"1s\"",
        "[[timeline]]",
        "[[timeline]]\nat = [1]\naction = 3\nlink = 4\nnode = {}\nperiod = true\ncount = 1e99",
        "[[timeline]]\nat = \"99999999999999999999s\"\naction = \"flap\"\nlink = \"edge0-0--agg0-0\"\nperiod = \"1ns\"\ncount = 99999999999",
        "[[timeline]]\nat = \"-1s\"\naction = \"set\"\nnode = \"\"\nloss = { p = 2 }\nmtu = 1",
        "[[timeline]]\nat = \"0\"\naction = \"set\"\nlink = \"edge0-0--agg0-0\"\necn = \"1p\"\nqueue = \"1B\"",
    ] {
        inputs.push(format!(
            "{base}[topology]\nkind = \"fat-tree\"\nk = 4\n{extra}\n"
        ));
    }
    for text in [
        "",
        " ",
        "\u{feff}",
        "=",
        "[",
        "[[",
        "]]",
        "a",
        "lab = 1",
        "lab = []",
        "[lab]\nname = 1",
        "[lab]\nname = \"a\"\n[topology]\n",
        "\0",
        "[lab]\nname = \"\u{1F600}\"",
        "[lab]\r\nname = \"crlf\"\r\n[topology]\r\nkind = \"fat-tree\"\r\nk = 3\r\n",
    ] {
        inputs.push(text.to_owned());
    }
    for text in &inputs {
        let result = std::panic::catch_unwind(|| {
            if let Err(e) = parse("fuzz.toml", text) {
                assert!(!e.is_empty());
                let _ = e.render_plain(80);
                for err in &e {
                    let _ = (err.message(), err.help(), err.line_col());
                }
            }
        });
        assert!(result.is_ok(), "panicked on input:\n{text}");
    }
}
