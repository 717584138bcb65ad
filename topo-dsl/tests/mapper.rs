//! Port mapper and queue mapper: published cases as golden files, a refusal,
//! the capacity rules and determinism.
//! Regenerate the goldens with `UPDATE_GOLDEN=1 cargo test -p turbonet-topo --test mapper`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use turbonet_topo::mapper::{
    self, Bound, MapConfig, MapError, Mapping, PhysicalSwitch, PortKind, Refusal,
};
use turbonet_topo::units::Rate;
use turbonet_topo::{Fabric, Lab};

use common::check_golden;

fn parse(text: &str) -> Lab {
    turbonet_topo::parse("test.toml", text).unwrap_or_else(|e| panic!("{}", e.render_plain(100)))
}

fn scenario(name: &str) -> Lab {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(name);
    parse(&std::fs::read_to_string(path).unwrap())
}

fn fat_tree(k: u32, extra: &str) -> Lab {
    parse(&format!(
        "[lab]\nname = \"k{k}\"\n[topology]\nkind = \"fat-tree\"\nk = {k}\n{extra}"
    ))
}

fn switches(specs: &[&str]) -> MapConfig {
    MapConfig::new(specs.iter().map(|s| s.parse().unwrap()).collect())
}

/// Every rule the mapping must keep, checked from its output alone.
fn check_invariants(fabric: &Fabric, config: &MapConfig, m: &Mapping) {
    // Every switch end of every link is mapped exactly once.
    let expected: usize = fabric
        .links
        .iter()
        .map(|l| {
            l.ends
                .iter()
                .filter(|e| fabric.node(e.node).role.is_switch())
                .count()
        })
        .sum();
    assert_eq!(m.ports.len(), expected);
    let mut seen = BTreeSet::new();
    for p in &m.ports {
        assert!(seen.insert((p.virtual_switch.clone(), p.virtual_port.clone())));
    }
    // Per physical port: unique tags, queues below the limit, load within
    // the speed; the tag is queue + 1.
    let speed: BTreeMap<&str, Rate> = config
        .switches
        .iter()
        .map(|s| (s.name.as_str(), s.speed))
        .collect();
    let mut per_port: BTreeMap<(String, u32), (BTreeSet<u32>, u64)> = BTreeMap::new();
    for p in &m.ports {
        if config.untagged_hosts && p.kind == PortKind::Host {
            assert_eq!((p.tag, p.queue), (0, 0), "{p:?}");
        } else {
            assert_eq!(p.tag, p.queue + 1);
        }
        assert!(p.queue < config.queues, "{p:?}");
        let e = per_port.entry((p.switch.clone(), p.port)).or_default();
        assert!(
            e.0.insert(p.tag),
            "tag reused on {} port {}",
            p.switch,
            p.port
        );
        e.1 += p.rate.bits_per_sec();
    }
    for ((sw, port), (_, load)) in &per_port {
        assert!(
            *load <= speed[sw.as_str()].bits_per_sec(),
            "{sw} port {port}"
        );
    }
    // Both ends of a virtual link share the tag; loopback ends are on one
    // switch, inter-switch ends on two.
    let mut by_link: BTreeMap<&str, Vec<&mapper::VirtualPort>> = BTreeMap::new();
    for p in &m.ports {
        by_link.entry(&p.link).or_default().push(p);
    }
    for (link, ends) in by_link {
        match ends.as_slice() {
            [a, b] => {
                assert_eq!(a.tag, b.tag, "{link}");
                assert_eq!(a.kind, b.kind, "{link}");
                match a.kind {
                    PortKind::Loopback => {
                        assert_eq!(a.switch, b.switch);
                        assert_ne!(a.port, b.port);
                    }
                    PortKind::InterSwitch => assert_ne!(a.switch, b.switch),
                    PortKind::Host => panic!("{link}: host link with two switch ends"),
                }
            }
            [a] => assert_eq!(a.kind, PortKind::Host, "{link}"),
            _ => panic!("{link}: {} ends", ends.len()),
        }
    }
    // The summary agrees with the port table, and every port is in range.
    for s in &m.switches {
        let used: BTreeSet<u32> = per_port
            .keys()
            .filter(|(sw, _)| *sw == s.name)
            .map(|(_, p)| *p)
            .collect();
        assert_eq!(used.len() as u32, s.ports_used, "{}", s.name);
        assert_eq!(
            s.ports_used,
            2 * s.loopback_pairs + s.inter_switch_ports + s.host_ports
        );
        assert_eq!(s.ports_used + s.ports_free, s.ports);
        assert!(used.iter().all(|&p| p >= 1 && p <= s.ports));
        let queues = m.ports.iter().filter(|p| p.switch == s.name).count() as u32;
        assert_eq!(queues, s.queues_used);
        assert_eq!(queues, s.tables.port_mapper);
        assert!(s.max_port_queues <= config.queues);
        assert!(s.max_port_load <= s.speed);
    }
    // Cables join the ports the table uses, each port in one cable at most.
    let mut cabled = BTreeSet::new();
    for c in &m.cables {
        assert!(cabled.insert((c.a.switch.clone(), c.a.port)));
        assert!(cabled.insert((c.b.switch.clone(), c.b.port)));
        match c.kind {
            PortKind::Loopback => assert_eq!(c.a.switch, c.b.switch),
            PortKind::InterSwitch => assert_ne!(c.a.switch, c.b.switch),
            PortKind::Host => panic!("host ports are not cables"),
        }
    }
    for h in &m.host_ports {
        assert!(cabled.insert((h.port.switch.clone(), h.port.port)));
        assert_eq!(h.hosts.len() as u32, h.host_links);
    }
    assert_eq!(cabled.len(), per_port.len());
}

/// Summary, cables, host ports, placement per physical switch, the load of
/// every physical port, and the first rows of the port table.
fn dump(fabric: &Fabric, config: &MapConfig, m: &Mapping, port_rows: usize) -> String {
    let mut out = String::new();
    let specs: Vec<String> = config
        .switches
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    writeln!(
        out,
        "switches {} queues {} default-rate {}",
        specs.join(" "),
        m.queues,
        m.default_rate
    )
    .unwrap();
    writeln!(
        out,
        "virtual switches {} virtual ports {} inter-switch links {}",
        m.placement.len(),
        m.ports.len(),
        m.inter_switch_links
    )
    .unwrap();
    writeln!(out, "\n# switches").unwrap();
    for s in &m.switches {
        writeln!(
            out,
            "{} vswitches={} ports used={} free={} (loopback pairs={} inter-switch={} host={}) \
             queues={} max-port-queues={} max-port-load={} total-load={} port-mapper={} lpm={} ecmp={}",
            s.name,
            s.virtual_switches,
            s.ports_used,
            s.ports_free,
            s.loopback_pairs,
            s.inter_switch_ports,
            s.host_ports,
            s.queues_used,
            s.max_port_queues,
            s.max_port_load,
            s.total_load,
            s.tables.port_mapper,
            s.tables.lpm,
            s.tables.ecmp_groups
        )
        .unwrap();
    }
    writeln!(out, "\n# placement").unwrap();
    for s in &config.switches {
        let on: Vec<&str> = m
            .placement
            .iter()
            .filter(|p| p.switch == s.name)
            .map(|p| p.virtual_switch.as_str())
            .collect();
        writeln!(out, "{}: {}", s.name, on.join(" ")).unwrap();
    }
    let _ = fabric;
    writeln!(out, "\n# cables").unwrap();
    for c in &m.cables {
        writeln!(
            out,
            "{} <-> {} {} links={} load={}",
            c.a, c.b, c.kind, c.virtual_links, c.load
        )
        .unwrap();
    }
    writeln!(out, "\n# host ports").unwrap();
    for h in &m.host_ports {
        writeln!(
            out,
            "{} links={} load={} hosts={}..{}",
            h.port,
            h.host_links,
            h.load,
            h.hosts.first().map_or("", |s| s),
            h.hosts.last().map_or("", |s| s)
        )
        .unwrap();
    }
    writeln!(
        out,
        "\n# virtual ports (first {port_rows} of {})",
        m.ports.len()
    )
    .unwrap();
    for p in m.ports.iter().take(port_rows) {
        writeln!(
            out,
            "{}:{} {} {} {} port {} tag={} queue={} rate={}{}",
            p.virtual_switch,
            p.virtual_port,
            p.link,
            p.kind,
            p.switch,
            p.port,
            p.tag,
            p.queue,
            p.rate,
            if p.default_rate { " (default)" } else { "" }
        )
        .unwrap();
    }
    out
}

fn refusal(lab: &Lab, config: &MapConfig) -> Refusal {
    match mapper::map(&lab.fabric, config) {
        Err(MapError::DoesNotFit(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn fat_tree_k8_fits_one_64x100g_switch() {
    let lab = scenario("fat-tree-k8.toml");
    let config = switches(&["s1=64x100G"]);
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    let s = &m.switches[0];
    assert!(s.ports_used <= 64);
    assert_eq!(s.virtual_switches, 80);
    assert_eq!(s.queues_used, 640);
    assert_eq!(m.inter_switch_links, 0);
    check_golden(
        "mapper-fat-tree-k8-1x64.txt",
        &dump(&lab.fabric, &config, &m, 48),
    );
}

#[test]
fn fat_tree_k10_fits_four_64x100g_switches() {
    let lab = fat_tree(10, "");
    let config = switches(&["s1=64x100G", "s2=64x100G", "s3=64x100G", "s4=64x100G"]);
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    assert_eq!(m.placement.len(), 125);
    assert!(m.switches.iter().all(|s| s.ports_used <= 64));
    // Pods stay whole: every edge and aggregation switch of a pod is on the
    // same physical switch.
    let place: BTreeMap<&str, &str> = m
        .placement
        .iter()
        .map(|p| (p.virtual_switch.as_str(), p.switch.as_str()))
        .collect();
    for node in lab.fabric.switches() {
        if let Some(pod) = node.pod {
            assert_eq!(
                place[node.name.as_str()],
                place[format!("edge{pod}-0").as_str()]
            );
        }
    }
    // Only agg-core links cross switches, and every switch carries some.
    assert!(m.inter_switch_links <= 250);
    assert!(m.switches.iter().all(|s| s.virtual_switches > 0));
    check_golden(
        "mapper-fat-tree-k10-4x64.txt",
        &dump(&lab.fabric, &config, &m, 48),
    );
}

#[test]
fn fat_tree_k8_at_40gbit_is_refused_on_one_switch() {
    let lab = fat_tree(8, "[links.default]\nrate = \"40gbit\"\n");
    let config = switches(&["s1=64x100G"]);
    let r = refusal(&lab, &config);
    assert_eq!(r.shortages.len(), 1);
    let s = &r.shortages[0];
    // 256 fabric links, two per 100G port: 128 loopback pairs; 128 host
    // links, two per port: 64 host ports.
    assert_eq!(
        (s.needed, s.available, s.loopback_pairs, s.host_ports),
        (320, 64, 128, 64)
    );
    assert_eq!(s.bound, Bound::Bandwidth);
    let add = r.add.clone().expect("fits with more switches");
    let mut bigger = config.clone();
    bigger.switches.extend(add.iter().cloned());
    let m = mapper::map(&lab.fabric, &bigger).unwrap();
    check_invariants(&lab.fabric, &bigger, &m);
    // One fewer switch does not fit: the suggestion is the smallest.
    bigger.switches.pop();
    assert!(matches!(
        mapper::map(&lab.fabric, &bigger),
        Err(MapError::DoesNotFit(_))
    ));
    let text = MapError::DoesNotFit(r).to_string();
    check_golden("mapper-refusal-k8-40gbit.txt", &(text + "\n"));
}

/// A two-switch chain with `n` parallel links and one host on each switch.
fn chain(n: u32, rate: Option<&str>) -> Lab {
    let mut text = String::from(
        "[lab]\nname = \"c\"\n[topology]\nkind = \"custom\"\n\
         [[topology.nodes]]\nname = \"a\"\nrole = \"switch\"\n\
         [[topology.nodes]]\nname = \"b\"\nrole = \"switch\"\n\
         [[topology.nodes]]\nname = \"ha\"\nrole = \"host\"\n\
         [[topology.nodes]]\nname = \"hb\"\nrole = \"host\"\n\
         [[topology.links]]\na = \"ha\"\nb = \"a\"\n\
         [[topology.links]]\na = \"hb\"\nb = \"b\"\n",
    );
    for _ in 0..n {
        text.push_str("[[topology.links]]\na = \"a\"\nb = \"b\"\n");
    }
    if let Some(rate) = rate {
        writeln!(text, "[links.default]\nrate = \"{rate}\"").unwrap();
    }
    parse(&text)
}

#[test]
fn queues_per_port_limit_virtual_links_per_port() {
    let lab = chain(5, None);
    let mut config = switches(&["s1=8x100G"]);
    config.queues = 2;
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    // 5 links, 2 per pair: 3 pairs; 2 host links on one port.
    let s = &m.switches[0];
    assert_eq!((s.loopback_pairs, s.host_ports, s.ports_used), (3, 1, 7));
    assert_eq!(s.max_port_queues, 2);
    let per_cable: Vec<u32> = m.cables.iter().map(|c| c.virtual_links).collect();
    assert_eq!(per_cable, [2, 2, 1]);
    // Exactly at the limit: 4 links in 2 pairs, 2 host links in one port.
    let lab = chain(4, None);
    let m = mapper::map(&lab.fabric, &config).unwrap();
    assert_eq!(m.switches[0].ports_used, 5);
    // One port short: the refusal is bound by queues and says so.
    config.switches[0].ports = 6;
    let r = refusal(&chain(5, None), &config);
    assert_eq!(r.shortages[0].needed, 7);
    assert_eq!(r.shortages[0].bound, Bound::Queues);
    assert!(
        MapError::DoesNotFit(r).to_string().contains("--queues"),
        "a queue-bound refusal points at --queues"
    );
}

#[test]
fn port_speed_limits_the_sum_of_rates() {
    // 40G links on 100G ports: two per port even with 32 queues.
    let lab = chain(5, Some("40gbit"));
    let config = switches(&["s1=8x100G"]);
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    let per_cable: Vec<(u32, String)> = m
        .cables
        .iter()
        .map(|c| (c.virtual_links, c.load.to_string()))
        .collect();
    assert_eq!(
        per_cable,
        [
            (2, "80gbit".into()),
            (2, "80gbit".into()),
            (1, "40gbit".into())
        ]
    );
    assert_eq!(m.switches[0].max_port_load, Rate::from_gbit(80));
    // A link exactly at the port speed fits alone.
    let lab = chain(2, Some("100gbit"));
    let m = mapper::map(&lab.fabric, &config).unwrap();
    assert_eq!(m.switches[0].loopback_pairs, 2);
    assert_eq!(m.switches[0].host_ports, 2);
    // A link faster than every port is refused by name.
    let lab = chain(1, Some("101gbit"));
    match mapper::map(&lab.fabric, &config) {
        Err(e @ MapError::LinkTooFast { .. }) => {
            let text = e.to_string();
            assert!(text.contains("runs at 101gbit"), "{text}");
            assert!(text.contains("s1 run at 100gbit"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn links_without_rate_count_as_the_default_rate() {
    let lab = chain(5, None);
    let mut config = switches(&["s1=8x100G"]);
    config.default_rate = Rate::from_gbit(50);
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    assert_eq!(m.switches[0].loopback_pairs, 3);
    assert!(
        m.ports
            .iter()
            .all(|p| p.default_rate && p.rate == Rate::from_gbit(50))
    );
    // A declared rate wins over the default.
    let lab = chain(5, Some("10gbit"));
    let m = mapper::map(&lab.fabric, &config).unwrap();
    assert_eq!(m.switches[0].loopback_pairs, 1);
    assert!(m.ports.iter().all(|p| !p.default_rate));
}

#[test]
fn mixed_rates_pack_first_fit_decreasing() {
    // 60G + 40G fill one 100G port; 60G + 60G do not.
    let text = "[lab]\nname = \"m\"\n[topology]\nkind = \"custom\"\n\
        [[topology.nodes]]\nname = \"a\"\nrole = \"switch\"\n\
        [[topology.nodes]]\nname = \"b\"\nrole = \"switch\"\n\
        [[topology.links]]\na = \"a\"\nb = \"b\"\nrate = \"40gbit\"\n\
        [[topology.links]]\na = \"a\"\nb = \"b\"\nrate = \"60gbit\"\n\
        [[topology.links]]\na = \"a\"\nb = \"b\"\nrate = \"60gbit\"\n\
        [[topology.links]]\na = \"a\"\nb = \"b\"\nrate = \"40gbit\"\n";
    let lab = parse(text);
    let config = switches(&["s1=8x100G"]);
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    let loads: Vec<String> = m.cables.iter().map(|c| c.load.to_string()).collect();
    assert_eq!(loads, ["100gbit", "100gbit"]);
}

#[test]
fn inter_switch_links_share_cables_per_switch_pair() {
    let lab = chain(5, Some("10gbit"));
    let mut config = switches(&["s1=4x100G", "s2=4x100G"]);
    config.queues = 4;
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    // a and b weigh the same: one on each switch, 5 links in 2 cables.
    assert_eq!(m.inter_switch_links, 5);
    let cables: Vec<String> = m
        .cables
        .iter()
        .map(|c| format!("{} <-> {} {}", c.a, c.b, c.virtual_links))
        .collect();
    assert_eq!(
        cables,
        ["s1 port 1 <-> s2 port 1 4", "s1 port 2 <-> s2 port 2 1"]
    );
    assert_eq!(m.host_ports.len(), 2);
}

#[test]
fn hpn_segments_stay_together() {
    let lab = scenario("hpn.toml");
    let config = switches(&["a=32x100G", "b=32x100G"]);
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    let place: BTreeMap<&str, &str> = m
        .placement
        .iter()
        .map(|p| (p.virtual_switch.as_str(), p.switch.as_str()))
        .collect();
    for node in lab.fabric.switches() {
        if let Some(seg) = node.segment {
            assert_eq!(
                place[node.name.as_str()],
                place[format!("tor{seg}-r0p0").as_str()]
            );
        }
    }
    assert_ne!(place["tor0-r0p0"], place["tor1-r0p0"]);
}

#[test]
fn leaf_spine_and_hpn_keep_the_rules() {
    for (name, specs) in [
        ("leaf-spine.toml", &["s1=16x100G"][..]),
        (
            "leaf-spine.toml",
            &["s1=8x100G", "s2=8x100G", "s3=8x100G"][..],
        ),
        ("hpn.toml", &["s1=64x400G"][..]),
        ("custom-triangle.toml", &["x=4x10G", "y=4x10G"][..]),
        ("fat-tree-k4.toml", &["s1=64x100G", "s2=32x100G"][..]),
    ] {
        let lab = scenario(name);
        let config = switches(specs);
        let m = mapper::map(&lab.fabric, &config).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_invariants(&lab.fabric, &config, &m);
    }
}

#[test]
fn mapping_is_deterministic() {
    let lab = fat_tree(10, "[links.agg-core]\nrate = \"25gbit\"\n");
    let config = switches(&["s1=64x100G", "s2=64x100G", "s3=48x100G", "s4=64x100G"]);
    let first = mapper::map(&lab.fabric, &config).unwrap();
    for _ in 0..3 {
        let again = mapper::map(&lab.fabric, &config).unwrap();
        assert_eq!(first, again);
    }
    // Parsing again gives the same mapping too (no state in between).
    let lab2 = fat_tree(10, "[links.agg-core]\nrate = \"25gbit\"\n");
    let other = mapper::map(&lab2.fabric, &config).unwrap();
    assert_eq!(
        serde_json::to_string(&first).unwrap(),
        serde_json::to_string(&other).unwrap()
    );
    check_invariants(&lab.fabric, &config, &first);
}

#[test]
fn bad_configurations_are_refused_with_examples() {
    let lab = chain(1, None);
    let e = mapper::map(&lab.fabric, &MapConfig::new(vec![])).unwrap_err();
    assert_eq!(e, MapError::NoSwitch);
    assert!(e.to_string().contains("--switch s1=64x100G"));
    let e = mapper::map(&lab.fabric, &switches(&["s1=8x100G", "s1=8x100G"])).unwrap_err();
    assert_eq!(e, MapError::DuplicateSwitch("s1".into()));
    let mut config = switches(&["s1=8x100G"]);
    config.queues = 0;
    assert!(matches!(
        mapper::map(&lab.fabric, &config),
        Err(MapError::BadQueues { queues: 0 })
    ));
    let e = "s1=64".parse::<PhysicalSwitch>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid switch `s1=64`: no `x` between the port count and the speed; write \
         NAME=PORTSxSPEED, e.g. s1=64x100G or s2=32x400G"
    );
}

#[test]
fn untagged_hosts_get_a_port_each() {
    let lab = fat_tree(4, "");
    let mut config = switches(&["soft=254x400G"]);
    config.queues = 8;
    config.untagged_hosts = true;
    let m = mapper::map(&lab.fabric, &config).unwrap();
    check_invariants(&lab.fabric, &config, &m);
    assert_eq!(m.host_ports.len(), 16);
    assert!(m.host_ports.iter().all(|p| p.host_links == 1));
    // 32 switch-switch links, 8 per loopback pair: 4 pairs.
    assert_eq!(m.switches[0].loopback_pairs, 4);
    assert_eq!(m.switches[0].ports_used, 8 + 16);
}
