//! `turbonet plan`: the port mapper and queue mapper of the P4 targets, as a
//! planner. Maps a scenario's virtual fabric onto physical programmable
//! switches ([`turbonet_topo::mapper`]) and prints what runs where and what
//! a person must cable, or refuses with what is short.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use turbonet_topo::Lab;
use turbonet_topo::mapper::{self, MapConfig, MapError, Mapping, PhysicalSwitch, Refusal};
use turbonet_topo::units::Rate;

use crate::cli::EXIT_INVALID;
use crate::lab;
use crate::render::{count, table};

/// Targets that run the turbonet pipeline on (real or emulated) switches.
const TARGETS: [&str; 2] = ["p4rt", "soft"];

/// Arguments of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    /// Target to plan for: `p4rt` (P4 switches) or `soft` (turbonet's
    /// userspace switch).
    #[arg(long, default_value = "p4rt")]
    pub target: String,
    /// A physical switch, NAME=PORTSxSPEED (speed in G or M), e.g.
    /// `s1=64x100G`; repeat for more switches.
    #[arg(long = "switch", value_name = "NAME=PORTSxSPEED")]
    pub switches: Vec<String>,
    /// Egress queues per physical port (one per virtual link sharing it).
    #[arg(long, default_value_t = mapper::DEFAULT_QUEUES)]
    pub queues: u32,
    /// Rate a link without `rate` counts as, e.g. `1gbit`, `10gbit`.
    #[arg(long, default_value = "1gbit")]
    pub default_rate: String,
    /// Also print every virtual port (one row each; long on large fabrics).
    #[arg(long)]
    pub ports: bool,
    /// Print JSON (always with every virtual port).
    #[arg(long)]
    pub json: bool,
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
struct PlanJson<'a> {
    lab: &'a str,
    target: &'a str,
    fits: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    mapping: Option<&'a Mapping>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refusal: Option<&'a Refusal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// The arguments as a mapper configuration, or what is wrong with them.
fn config(args: &PlanArgs) -> Result<MapConfig, String> {
    match args.target.as_str() {
        t if TARGETS.contains(&t) => {}
        "netns" => {
            return Err(
                "`plan` maps onto programmable switches: --target must be p4rt or \
                 soft (on netns every virtual port is its own veth; nothing to plan)"
                    .into(),
            );
        }
        other => {
            return Err(format!(
                "unknown target `{other}` for --target: valid targets are {}",
                TARGETS.join(", ")
            ));
        }
    }
    if args.switches.is_empty() {
        return Err(MapError::NoSwitch.to_string());
    }
    let switches = args
        .switches
        .iter()
        .map(|s| s.parse::<PhysicalSwitch>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--switch: {e}"))?;
    let default_rate: Rate =
        args.default_rate
            .parse()
            .map_err(|e: turbonet_topo::units::UnitError| match e.hint() {
                Some(h) => format!("--default-rate {}: {}; {h}", args.default_rate, e.message()),
                None => format!("--default-rate {}: {}", args.default_rate, e.message()),
            })?;
    let mut config = MapConfig::new(switches);
    config.queues = args.queues;
    config.default_rate = default_rate;
    Ok(config)
}

/// `turbonet plan FILE --switch NAME=PORTSxSPEED ...`.
pub fn plan(args: &PlanArgs) -> Result<ExitCode> {
    let config = match config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let Ok((lab, _)) = lab::load(&args.file) else {
        return Ok(ExitCode::from(EXIT_INVALID));
    };
    match mapper::map(&lab.fabric, &config) {
        Ok(mapping) => {
            if args.json {
                let out = PlanJson {
                    lab: &lab.name,
                    target: &args.target,
                    fits: true,
                    mapping: Some(&mapping),
                    refusal: None,
                    message: None,
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                print!(
                    "{}",
                    human(&lab, &args.target, &config, &mapping, args.ports)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if args.json {
                if let MapError::DoesNotFit(refusal) = &e {
                    let out = PlanJson {
                        lab: &lab.name,
                        target: &args.target,
                        fits: false,
                        mapping: None,
                        refusal: Some(refusal),
                        message: Some(e.to_string()),
                    };
                    println!("{}", serde_json::to_string_pretty(&out)?);
                }
            }
            eprintln!("error: {}: {e}", args.file.display());
            Ok(ExitCode::from(EXIT_INVALID))
        }
    }
}

/// The human report: switch summaries, table estimates, cables, host ports,
/// and with `ports` every virtual port.
fn human(lab: &Lab, target: &str, config: &MapConfig, m: &Mapping, ports: bool) -> String {
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
        out.push_str(&format!("\ncables to connect ({}):\n", m.cables.len()));
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
