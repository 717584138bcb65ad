//! Tables for people. (`--json` prints the same data for scripts.)

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style};
use turbonet_topo::Lab;
use turbonet_topo::summary::Summary;

use crate::state::LabState;

/// A table from a header and rows; columns whose header is in `right` are
/// right-aligned (numbers).
pub fn table<I, R>(header: &[&str], rows: I, right: &[usize]) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut builder = Builder::default();
    builder.push_record(header.iter().map(std::string::ToString::to_string));
    for row in rows {
        builder.push_record(row);
    }
    let mut table = builder.build();
    table.with(Style::rounded());
    for &col in right {
        table.modify(Columns::one(col), Alignment::right());
    }
    table.to_string()
}

/// Thousands separators: 14400 -> "14,400".
pub fn count(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `static`, `controller`, or `bgp (builtin; 2 frr, 1 bird)`.
pub fn routing_name(lab: &Lab) -> String {
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
pub fn summary(lab: &Lab, summary: &Summary) -> String {
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
                        format!("{} ports", o.down_ports / o.switches.max(1)),
                        format!("{} ports", o.up_ports / o.switches.max(1)),
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

fn kind_name(lab: &Lab) -> &'static str {
    match lab.fabric.kind {
        turbonet_topo::TopologyKind::FatTree { .. } => "fat-tree",
        turbonet_topo::TopologyKind::LeafSpine { .. } => "leaf-spine",
        turbonet_topo::TopologyKind::Hpn { .. } => "hpn",
        turbonet_topo::TopologyKind::Custom => "custom",
    }
}

/// The table `up` prints when the fabric is ready.
pub fn up_summary(lab: &Lab, state: &LabState) -> String {
    let mut out = format!("lab {} is up and routed\n", lab.name);
    out.push_str(&table(
        &["phase", "seconds", "result"],
        state.timings.iter().map(|t| {
            vec![
                t.phase.clone(),
                format!("{:.2}", t.seconds),
                t.detail.clone(),
            ]
        }),
        &[1],
    ));
    let host = lab.fabric.hosts().next().map(|h| h.name.clone());
    out.push_str("\nnext:\n");
    out.push_str("  turbonet status | show nodes | show links | show routes NODE\n");
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        out.push_str("  turbonet show bgp [SWITCH]   # sessions, routes, convergence\n");
    }
    if let Some(host) = host {
        out.push_str(&format!("  turbonet exec {host} -- ip route\n"));
    }
    out.push_str(&format!(
        "  turbonet check          # every host pings every host\n  turbonet down {}\n",
        lab.name
    ));
    out
}
