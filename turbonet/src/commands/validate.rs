//! `turbonet validate`: check a scenario file and print what it
//! describes.

use anyhow::Result;
use turbonet_lab::up;
use turbonet_topo::Lab;
use turbonet_topo::summary::Summary;

use super::print_json;
use crate::cli::ValidateArgs;
use crate::render::{count, table};

/// `turbonet validate`: the summary, or with `--json` the same data; an
/// invalid scenario is an error (exit 2).
pub(crate) fn run(args: ValidateArgs) -> Result<()> {
    let ValidateArgs { file, json } = args;
    let valid = up::validate(&file)?;
    if json {
        print_json(&valid.summary)?;
    } else {
        println!("{}", summary(&valid.lab, &valid.summary));
        if let Some(reason) = valid.not_here {
            println!("note: valid, but `up` cannot run it on this machine: {reason}");
        }
    }
    Ok(())
}

/// `static`, `controller`, or `bgp (builtin; 2 frr, 1 bird)`.
fn routing_name(lab: &Lab) -> String {
    use turbonet_topo::{Agent, RoutingMode};
    if lab.routing.mode != RoutingMode::Bgp {
        return lab.routing.mode.to_string();
    }
    let mut counts = std::collections::HashMap::new();
    for node in lab.fabric.switches() {
        *counts
            .entry(lab.routing.agent_of(node.id))
            .or_insert(0usize) += 1;
    }
    let default = lab.routing.agent;
    let others: Vec<String> = Agent::ALL
        .iter()
        .filter(|&&a| a != default)
        .filter_map(|a| counts.get(a).map(|n| format!("{n} {a}")))
        .collect();
    if others.is_empty() {
        format!("bgp ({default})")
    } else {
        format!("bgp ({default}; {})", others.join(", "))
    }
}

/// The `validate` summary.
fn summary(lab: &Lab, summary: &Summary) -> String {
    let mut out = format!(
        "lab {}: {} fabric, target {}, routing {}, seed {}\n",
        lab.name,
        kind_name(lab),
        lab.target,
        routing_name(lab),
        lab.seed
    );
    let asn_of = |role| {
        summary
            .asns
            .iter()
            .find(|a| a.role == role)
            .map(|a| {
                if a.first == a.last {
                    a.first.to_string()
                } else {
                    format!("{}-{} ({} distinct)", a.first, a.last, a.distinct)
                }
            })
            .unwrap_or_default()
    };
    out.push_str(&table(
        &["role", "nodes", "asn"],
        summary
            .nodes_by_role
            .iter()
            .map(|r| vec![r.role.to_string(), count(r.count), asn_of(r.role)])
            .chain([vec!["total".into(), count(summary.nodes), String::new()]]),
        &[1],
    ));
    out.push('\n');
    if summary.rate_scale > 1 {
        out.push_str(&format!(
            "rates, queues and ECN thresholds run {}x slower than declared (rate_scale): the \
             rates below are in force\n",
            summary.rate_scale
        ));
    }
    out.push_str(&table(
        &["link class", "links", "rate"],
        summary
            .links_by_class
            .iter()
            .map(|c| {
                vec![
                    c.class.clone(),
                    count(c.count),
                    c.rate.map_or_else(|| "-".into(), |r| r.to_string()),
                ]
            })
            .chain([vec!["total".into(), count(summary.links), String::new()]]),
        &[1],
    ));
    out.push('\n');
    let mut ranges = Vec::new();
    if let Some(r) = &summary.loopbacks {
        ranges.push(vec![
            "loopbacks /32".into(),
            format!("{} - {}", r.first, r.last),
            count(r.count),
        ]);
    }
    if let Some(r) = &summary.fabric_addrs {
        ranges.push(vec![
            "fabric links /31".into(),
            format!("{} - {}", r.first, r.last),
            count(r.count),
        ]);
    }
    if let Some(r) = &summary.host_subnets {
        ranges.push(vec![
            "host subnets".into(),
            format!("{} - {}", r.first, r.last),
            count(r.count),
        ]);
    }
    if !ranges.is_empty() {
        out.push_str(&table(&["addresses", "range", "count"], ranges, &[2]));
        out.push('\n');
    }
    if !summary.chips.is_empty() {
        use turbonet_topo::units::Rate;
        out.push_str(&table(
            &["tier", "switches", "chip", "ports used", "bandwidth used"],
            summary.chips.iter().map(|c| {
                vec![
                    c.role.to_string(),
                    count(c.switches),
                    c.chip.to_string(),
                    format!("{} of {}", c.ports, c.chip.ports),
                    format!(
                        "{} of {}",
                        Rate::from_bits_per_sec(c.bandwidth),
                        Rate::from_bits_per_sec(c.chip.capacity())
                    ),
                ]
            }),
            &[1, 3, 4],
        ));
        out.push('\n');
    }
    if summary.pods.len() > 1 {
        out.push_str(&table(
            &["pod", "switches", "hosts", "host subnets", "asn"],
            summary.pods.iter().map(|p| {
                vec![
                    p.pod.to_string(),
                    count(p.switches),
                    count(p.hosts),
                    p.host_subnets.as_ref().map_or_else(
                        || "-".into(),
                        |r| format!("{} - {} ({})", r.first, r.last, r.count),
                    ),
                    p.asns.map_or_else(
                        || "-".into(),
                        |[lo, hi]| {
                            if lo == hi {
                                lo.to_string()
                            } else {
                                format!("{lo}-{hi}")
                            }
                        },
                    ),
                ]
            }),
            &[0, 1, 2],
        ));
        out.push('\n');
    }
    if !summary.oversubscription.is_empty() {
        out.push_str(&table(
            &[
                "tier",
                "switches",
                "down / switch",
                "up / switch",
                "oversubscription",
            ],
            summary.oversubscription.iter().map(|o| {
                let (down, up) = match o.basis {
                    turbonet_topo::summary::CapacityBasis::Rate => (
                        turbonet_topo::units::Rate::from_bits_per_sec(
                            o.down / o.switches.max(1) as u64,
                        )
                        .to_string(),
                        turbonet_topo::units::Rate::from_bits_per_sec(
                            o.up / o.switches.max(1) as u64,
                        )
                        .to_string(),
                    ),
                    turbonet_topo::summary::CapacityBasis::Ports => (
                        ports(o.down_ports / o.switches.max(1)),
                        ports(o.up_ports / o.switches.max(1)),
                    ),
                };
                vec![
                    o.role.to_string(),
                    count(o.switches),
                    down,
                    up,
                    o.ratio.map_or_else(|| "-".into(), |r| format!("{r:.3}:1")),
                ]
            }),
            &[1, 2, 3, 4],
        ));
        out.push('\n');
    }
    out
}

/// "1 port", "15 ports".
fn ports(n: usize) -> String {
    match n {
        1 => "1 port".to_owned(),
        n => format!("{n} ports"),
    }
}

/// The fabric's kind, as `validate` names it.
fn kind_name(lab: &Lab) -> &'static str {
    match lab.fabric.kind {
        turbonet_topo::TopologyKind::FatTree { .. } => "fat-tree",
        turbonet_topo::TopologyKind::LeafSpine { .. } => "leaf-spine",
        turbonet_topo::TopologyKind::Hpn { .. } => "hpn",
        turbonet_topo::TopologyKind::Clos(_) => "clos",
        turbonet_topo::TopologyKind::Custom => "custom",
    }
}
