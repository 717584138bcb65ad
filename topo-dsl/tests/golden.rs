//! Golden files: wiring of generated fabrics and rendered diagnostics.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p turbonet-topo --test golden`.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use turbonet_topo::{Lab, PrefixKind, RoutingMode};

use common::{check_golden, golden_dir};

/// A readable, complete dump of a lab.
fn dump(lab: &Lab) -> String {
    let f = &lab.fabric;
    let mut out = String::new();
    let s = turbonet_topo::summary(lab);
    writeln!(
        out,
        "lab {} seed {} target {:?} routing {:?}",
        lab.name, lab.seed, lab.target, lab.routing.mode
    )
    .unwrap();
    if lab.routing.mode == RoutingMode::Bgp {
        let r = &lab.routing;
        let overrides: Vec<String> = r
            .agents
            .iter()
            .map(|(&n, a)| format!("{}={a}", f.node(n).name))
            .collect();
        writeln!(
            out,
            "bgp agent {} hold_time {} keepalive {} connect_retry {} overrides [{}]",
            r.agent,
            r.timers.hold_time,
            r.timers.keepalive,
            r.timers.connect_retry,
            overrides.join(" ")
        )
        .unwrap();
    }
    writeln!(out, "topology {:?}", f.kind).unwrap();
    let roles: Vec<String> = s
        .nodes_by_role
        .iter()
        .map(|r| format!("{} {}", r.role, r.count))
        .collect();
    writeln!(out, "nodes {}: {}", f.nodes.len(), roles.join(", ")).unwrap();
    let classes: Vec<String> = s
        .links_by_class
        .iter()
        .map(|c| format!("{} {}", c.class, c.count))
        .collect();
    writeln!(out, "links {}: {}", f.links.len(), classes.join(", ")).unwrap();
    writeln!(out, "\n# nodes: name role pod plane asn loopback ports").unwrap();
    for n in &f.nodes {
        writeln!(
            out,
            "{} {} pod={}{} plane={} asn={} lo={}{} ports={}",
            n.name,
            n.role,
            n.pod.map_or("-".into(), |p| p.to_string()),
            n.segment.map_or(String::new(), |s| format!(" segment={s}")),
            n.plane.map_or("-".into(), |p| p.to_string()),
            n.asn.map_or("-".into(), |a| a.to_string()),
            n.loopback.map_or("-".into(), |a| a.to_string()),
            if n.backup { " backup" } else { "" },
            n.links.len()
        )
        .unwrap();
    }
    writeln!(
        out,
        "\n# links: name class  node:ifname addr -- node:ifname addr"
    )
    .unwrap();
    for l in &f.links {
        let [a, b] = &l.ends;
        write!(
            out,
            "{} {}  {}:{} {} -- {}:{} {}",
            l.name,
            l.class,
            f.node(a.node).name,
            a.ifname,
            a.addr,
            f.node(b.node).name,
            b.ifname,
            b.addr
        )
        .unwrap();
        let p = &l.params;
        for (k, v) in [
            ("rate", p.rate.map(|x| x.to_string())),
            ("delay", p.delay.map(|x| x.to_string())),
            ("jitter", p.jitter.map(|x| x.to_string())),
            (
                "jitter_distribution",
                p.jitter_distribution.map(|x| x.to_string()),
            ),
            ("reorder", p.reorder.map(|x| x.to_string())),
            ("loss", p.loss.map(|x| x.to_string())),
            ("corrupt", p.corrupt.map(|x| x.to_string())),
            ("duplicate", p.duplicate.map(|x| x.to_string())),
            ("queue", p.queue.map(|x| x.to_string())),
            ("ecn", p.ecn.map(|x| x.to_string())),
            ("mtu", p.mtu.map(|x| x.to_string())),
        ] {
            if let Some(v) = v {
                write!(out, " {k}={v}").unwrap();
            }
        }
        writeln!(out).unwrap();
    }
    writeln!(out, "\n# prefixes").unwrap();
    for p in &f.prefixes {
        let attached: Vec<&str> = p
            .attached
            .iter()
            .map(|&n| f.node(n).name.as_str())
            .collect();
        let kind = match &p.kind {
            PrefixKind::Loopback => "loopback".to_owned(),
            PrefixKind::Hosts { gateway } => format!("hosts gw={gateway}"),
            PrefixKind::External { gateway, ifname } => format!(
                "external via={} ifname={ifname}",
                gateway.map_or("on-link".into(), |g| g.to_string())
            ),
        };
        writeln!(out, "{} {} at {}", p.net, kind, attached.join(",")).unwrap();
    }
    if !f.externals.is_empty() {
        writeln!(out, "\n# externals").unwrap();
        for x in &f.externals {
            write!(
                out,
                "{}:{} <- {}{} addr={} gw={} routes={:?}",
                f.node(x.node).name,
                x.ifname,
                x.interface,
                x.netns.as_ref().map_or(String::new(), |n| format!("@{n}")),
                x.addr,
                x.gateway.map_or("-".into(), |g| g.to_string()),
                x.routes
                    .iter()
                    .map(std::string::ToString::to_string)
                    .collect::<Vec<_>>()
            )
            .unwrap();
            if let Some(p) = &x.bgp {
                write!(out, " bgp-peer={} asn={}", p.addr, p.asn).unwrap();
            }
            writeln!(out).unwrap();
        }
    }
    out
}

fn lab_golden(input: &str, text: &str, golden: &str) {
    let lab =
        turbonet_topo::parse(input, text).unwrap_or_else(|e| panic!("{}", e.render_plain(100)));
    check_golden(&format!("{golden}.txt"), &dump(&lab));
    let summary = serde_json::to_string_pretty(&turbonet_topo::summary(&lab)).unwrap() + "\n";
    check_golden(&format!("{golden}.summary.json"), &summary);
}

fn scenario(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn fat_tree_k4() {
    lab_golden(
        "fat-tree-k4.toml",
        &scenario("fat-tree-k4.toml"),
        "fat-tree-k4",
    );
}

#[test]
fn leaf_spine_small() {
    lab_golden(
        "leaf-spine.toml",
        &scenario("leaf-spine.toml"),
        "leaf-spine",
    );
}

#[test]
fn hpn_small() {
    lab_golden("hpn.toml", &scenario("hpn.toml"), "hpn");
}

/// The same HPN with one core layer serving both planes.
#[test]
fn hpn_shared_core() {
    let text = scenario("hpn.toml").replace(
        "core_uplinks = 1\n",
        "core_uplinks = 1\ncore = \"shared\"\n",
    );
    assert!(text.contains("shared"));
    lab_golden("hpn.toml", &text, "hpn-shared-core");
}

#[test]
fn hpn_pods() {
    lab_golden("hpn-pods.toml", &scenario("hpn-pods.toml"), "hpn-pods");
}

#[test]
fn clos_five_stages() {
    lab_golden("clos-5.toml", &scenario("clos-5.toml"), "clos-5");
}

/// Three stages from 16-port switches at 3:1: 16 leaves of 12 hosts,
/// 4 spines.
#[test]
fn clos_three_stages() {
    let text = "[lab]\nname = \"clos3\"\n[topology]\nkind = \"clos\"\nstages = 3\nradix = 16\n\
                oversubscription = \"3:1\"\nswitch = \"16x100g\"\n[links.default]\nrate = \"100gbit\"\n";
    lab_golden("clos-3.toml", text, "clos-3");
}

#[test]
fn custom_triangle() {
    lab_golden(
        "custom-triangle.toml",
        &scenario("custom-triangle.toml"),
        "custom-triangle",
    );
}

/// Parameters, precedence, parallel links and externals in one file.
#[test]
fn leaf_spine_params_and_externals() {
    let text = r#"
[lab]
name = "lsx"
seed = 7
target = "soft"

[topology]
kind = "leaf-spine"
spines = 2
leaves = 2
hosts_per_leaf = 1
uplinks = 2

[routing]
mode = "controller"
[routing.asn]
base = 65000

[addressing]
loopbacks = "192.168.0.0/24"
fabric = "192.168.1.0/24"
hosts = "172.16.0.0/16"

[links.default]
mtu = 9000
delay = "1us"

[links.leaf-spine]
rate = "100gbit"
delay = "2us"

[[links.override]]
link = "leaf0--spine1:1"
delay = "1ms"
loss = "0.5%"
queue = "64KiB"
ecn = "16KiB"
jitter = "10us"
jitter_distribution = "pareto"
reorder = true

[[links.override]]
link = "leaf1--spine0"
loss = { p = "1%", r = "25%" }
corrupt = "0.01%"
duplicate = "1e-4"

[[external]]
node = "spine0"
interface = "enp3s0"
address = "192.0.2.1/24"
gateway = "192.0.2.2"
routes = ["198.51.100.0/24", "203.0.113.0/25"]

[[external]]
node = "leaf1"
interface = "veth-hw"
netns = "rig"
name = "hw0"
address = "10.99.0.1/31"
"#;
    lab_golden("lsx.toml", text, "leaf-spine-params");
}

/// BGP mode on a mixed fabric: default agent, per-switch overrides,
/// timers, and an eBGP neighbour on an external port.
#[test]
fn hpn_bgp_mixed_agents_and_external_peer() {
    let text = r#"
[lab]
name = "hpnbgp"

[topology]
kind = "hpn"
segments = 1
hosts_per_segment = 2
rails = 1
planes = 2
aggs_per_plane = 2

[routing]
mode = "bgp"
hold_time = 9
keepalive = 3

[routing.agents]
"tor0-r0p0" = "frr"
"tor0-r0p1" = "frr"
"agg1-0" = "bird"

[[external]]
node = "agg0-0"
interface = "veth-ext"
address = "192.0.2.1/30"
bgp = { peer = "192.0.2.2", asn = 65010 }
"#;
    lab_golden("hpnbgp.toml", text, "hpn-bgp");
}

/// Every `tests/golden/diag/*.toml` renders to its `.txt`: the plain list
/// (line:col, message, help) and miette's graphical report.
#[test]
fn diagnostics() {
    let dir = golden_dir().join("diag");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 5);
    for input in inputs {
        let name = input.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&input).unwrap();
        let Err(errors) = turbonet_topo::parse(&name, &text) else {
            panic!("{name} should not parse")
        };
        let mut out = String::new();
        for e in &errors {
            let (line, col) = e.line_col().unwrap_or((0, 0));
            writeln!(out, "{name}:{line}:{col}: {}", e.message()).unwrap();
            if let Some(h) = e.help() {
                writeln!(out, "  help: {h}").unwrap();
            }
        }
        writeln!(out, "---").unwrap();
        out.push_str(&errors.render_plain(80));
        check_golden(&format!("diag/{}", name.replace(".toml", ".txt")), &out);
    }
}
