//! `turbonet plan`: map a scenario onto physical P4 switches, and with
//! `--program` write the plan to them.

use std::process::ExitCode;

use anyhow::Result;
use turbonet_lab::plan;
use turbonet_topo::Lab;

use super::print_json;
use crate::cli::PlanArgs;
use crate::render::{count, table};

/// `turbonet plan`: exit 2 when the fabric does not fit.
pub(crate) fn run(args: &PlanArgs) -> Result<ExitCode> {
    /// What `--json` prints: the mapping, or why the fabric does not fit.
    #[derive(serde::Serialize)]
    struct PlanJson<'a> {
        lab: &'a str,
        target: &'a str,
        fits: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        mapping: Option<&'a turbonet_topo::mapper::Mapping>,
        #[serde(skip_serializing_if = "Option::is_none")]
        refusal: Option<&'a turbonet_topo::mapper::Refusal>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    }
    let request = plan::Request {
        file: args.file.clone(),
        target: args.target.clone(),
        switches: args.switches.clone(),
        queues: args.queues,
        default_rate: args.default_rate.clone(),
        program: args.program.clone(),
        p4info: args.p4info.clone(),
        device_config: args.device_config.clone(),
        token_file: args.token_file.clone(),
    };
    let planned = plan::plan(&request)?;
    let (lab, target) = (&planned.lab, planned.target.as_str());
    match &planned.mapping {
        Ok(mapping) => {
            if args.json {
                print_json(&PlanJson {
                    lab: &lab.name,
                    target,
                    fits: true,
                    mapping: Some(mapping),
                    refusal: None,
                    message: None,
                })?;
            } else {
                print!(
                    "{}",
                    report(lab, target, &planned.config, mapping, args.ports)
                );
            }
            for p in plan::program(&request, &planned, mapping)? {
                println!(
                    "programmed {} at {}: pipeline set, {} entities written, {} table entries read back",
                    p.switch, p.addr, p.entities, p.tables
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if args.json
                && let turbonet_topo::mapper::MapError::DoesNotFit(refusal) = e
            {
                print_json(&PlanJson {
                    lab: &lab.name,
                    target,
                    fits: false,
                    mapping: None,
                    refusal: Some(refusal),
                    message: Some(e.to_string()),
                })?;
            }
            eprintln!("error: {}: {e}", args.file.display());
            Ok(ExitCode::from(crate::EXIT_INVALID))
        }
    }
}

/// The human report: switch summaries, table estimates, cables, host ports,
/// and with `ports` every virtual port.
fn report(
    lab: &Lab,
    target: &str,
    config: &turbonet_topo::mapper::MapConfig,
    m: &turbonet_topo::mapper::Mapping,
    ports: bool,
) -> String {
    let f = &lab.fabric;
    let nsw = config.switches.len();
    let mut out = format!(
        "lab {}: {} virtual switches, {} hosts, {} virtual links on {} physical switch{} \
         (target {target}, {} queues per port, links without rate count as {})\n",
        lab.name,
        count(f.switches().count()),
        count(f.hosts().count()),
        count(f.links.len()),
        nsw,
        if nsw == 1 { "" } else { "es" },
        m.queues,
        m.default_rate,
    );
    out.push_str(&table(
        &[
            "switch",
            "virtual switches",
            "ports used",
            "free",
            "loopback pairs",
            "inter-switch",
            "host",
            "queues used",
            "busiest port",
            "total load",
        ],
        m.switches.iter().zip(&config.switches).map(|(s, spec)| {
            vec![
                spec.to_string(),
                count(s.virtual_switches as usize),
                format!("{}/{}", s.ports_used, s.ports),
                s.ports_free.to_string(),
                s.loopback_pairs.to_string(),
                s.inter_switch_ports.to_string(),
                s.host_ports.to_string(),
                count(s.queues_used as usize),
                format!("{} in {} queues", s.max_port_load, s.max_port_queues),
                s.total_load.to_string(),
            ]
        }),
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
    ));
    out.push('\n');
    out.push_str(&table(
        &[
            "switch",
            "port-mapper entries",
            "LPM entries (est.)",
            "ECMP groups (est.)",
        ],
        m.switches.iter().map(|s| {
            vec![
                s.name.clone(),
                count(s.tables.port_mapper as usize),
                count(s.tables.lpm as usize),
                count(s.tables.ecmp_groups as usize),
            ]
        }),
        &[1, 2, 3],
    ));
    out.push('\n');
    if m.inter_switch_links > 0 {
        out.push_str(&format!(
            "{} virtual links cross physical switches\n",
            count(m.inter_switch_links as usize)
        ));
    }
    if !m.cables.is_empty() {
        if target == "soft" {
            out.push_str(&format!(
                "\ncables ({}, emulated inside the soft switch):\n",
                m.cables.len()
            ));
        } else {
            out.push_str(&format!("\ncables to connect ({}):\n", m.cables.len()));
        }
        out.push_str(&table(
            &["#", "kind", "from", "to", "virtual links", "load"],
            m.cables.iter().enumerate().map(|(i, c)| {
                vec![
                    (i + 1).to_string(),
                    c.kind.to_string(),
                    c.a.to_string(),
                    c.b.to_string(),
                    c.virtual_links.to_string(),
                    c.load.to_string(),
                ]
            }),
            &[0, 4],
        ));
        out.push('\n');
    }
    if !m.host_ports.is_empty() {
        out.push_str(&format!(
            "\nhost-facing ports ({}): cable the hosts' NICs here, one tag per host link\n",
            m.host_ports.len()
        ));
        out.push_str(&table(
            &["port", "host links", "load", "hosts"],
            m.host_ports.iter().map(|h| {
                let hosts = match h.hosts.as_slice() {
                    [] => String::new(),
                    [one] => one.clone(),
                    [first, .., last] => format!("{first} .. {last}"),
                };
                vec![
                    h.port.to_string(),
                    h.host_links.to_string(),
                    h.load.to_string(),
                    hosts,
                ]
            }),
            &[1],
        ));
        out.push('\n');
    }
    if ports {
        out.push_str(&format!("\nvirtual ports ({}):\n", count(m.ports.len())));
        out.push_str(&table(
            &[
                "virtual switch",
                "virtual port",
                "virtual link",
                "switch",
                "port",
                "tag",
                "queue",
                "shaping rate",
            ],
            m.ports.iter().map(|p| {
                vec![
                    p.virtual_switch.clone(),
                    p.virtual_port.clone(),
                    p.link.clone(),
                    p.switch.clone(),
                    p.port.to_string(),
                    p.tag.to_string(),
                    p.queue.to_string(),
                    if p.default_rate {
                        format!("{} (default)", p.rate)
                    } else {
                        p.rate.to_string()
                    },
                ]
            }),
            &[4, 5, 6],
        ));
        out.push('\n');
    } else {
        out.push_str(&format!(
            "\n{} virtual ports mapped; pass --ports to list each one's physical port, tag, \
             queue and shaping rate (or --json)\n",
            count(m.ports.len())
        ));
    }
    out
}
