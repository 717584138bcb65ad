//! `turbonet plan`: the port mapper and queue mapper of the P4 targets, as a
//! planner. Maps a scenario's virtual fabric onto physical programmable
//! switches ([`turbonet_topo::mapper`]) and prints what runs where and what
//! a person must cable, or refuses with what is short.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
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
    /// Program a physical switch that runs the turbonet pipeline:
    /// NAME=HOST:PORT of its P4Runtime server (device id 1), e.g.
    /// `s1=127.0.0.1:9559`; repeat per switch. turbonet becomes primary,
    /// sets the pipeline and writes every table entry of the plan with the
    /// fabric's static routes.
    #[arg(long = "program", value_name = "NAME=HOST:PORT")]
    pub program: Vec<String>,
    /// With --program: the P4Info the switches run (text format); default
    /// turbonet's own (p4/turbonet.p4info.txtpb).
    #[arg(long, value_name = "FILE")]
    pub p4info: Option<PathBuf>,
    /// With --program: the target's compiled pipeline (BMv2 JSON, Tofino
    /// binary) sent with the P4Info; none for the soft switch.
    #[arg(long, value_name = "FILE")]
    pub device_config: Option<PathBuf>,
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
        return Err(format!(
            "{} (or plan a scenario whose target is soft or p4rt: it has its own)",
            MapError::NoSwitch
        ));
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
    // Without --switch, a soft or p4rt scenario is planned onto its own
    // switches.
    let own = if args.switches.is_empty() {
        let Ok((lab, _)) = lab::load(&args.file) else {
            return Ok(ExitCode::from(EXIT_INVALID));
        };
        match lab.target {
            turbonet_topo::Target::Soft => Some(crate::p4rt::soft::map_config()),
            turbonet_topo::Target::P4rt => lab.p4rt.as_ref().map(crate::p4rt::switches::map_config),
            turbonet_topo::Target::Netns => None,
        }
    } else {
        None
    };
    let own_switches = own.is_some();
    let configured = match own {
        Some(c) => Ok(c),
        None => config(args),
    };
    let (config, targets) = match configured.and_then(|c| {
        let targets = program_targets(args, &c)?;
        Ok((c, targets))
    }) {
        Ok(checked) => checked,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let Ok((lab, _)) = lab::load(&args.file) else {
        return Ok(ExitCode::from(EXIT_INVALID));
    };
    let target = if own_switches {
        lab.target.to_string()
    } else {
        args.target.clone()
    };
    match mapper::map(&lab.fabric, &config) {
        Ok(mapping) => {
            if args.json {
                let out = PlanJson {
                    lab: &lab.name,
                    target: &target,
                    fits: true,
                    mapping: Some(&mapping),
                    refusal: None,
                    message: None,
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                print!("{}", human(&lab, &target, &config, &mapping, args.ports));
            }
            if !targets.is_empty() {
                return program(args, &lab, &mapping, &targets);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if args.json
                && let MapError::DoesNotFit(refusal) = &e
            {
                let out = PlanJson {
                    lab: &lab.name,
                    target: &target,
                    fits: false,
                    mapping: None,
                    refusal: Some(refusal),
                    message: Some(e.to_string()),
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            }
            eprintln!("error: {}: {e}", args.file.display());
            Ok(ExitCode::from(EXIT_INVALID))
        }
    }
}

/// `--program NAME=HOST:PORT` as (switch, address) pairs, each naming a
/// `--switch`; checked before anything is planned or printed.
fn program_targets(args: &PlanArgs, config: &MapConfig) -> Result<Vec<(String, String)>, String> {
    args.program
        .iter()
        .map(|spec| {
            let (name, addr) = spec.split_once('=').ok_or_else(|| {
                format!("--program {spec}: write NAME=HOST:PORT, e.g. s1=127.0.0.1:9559")
            })?;
            if !config.switches.iter().any(|s| s.name == name) {
                return Err(format!(
                    "--program {spec}: no switch {name} in the plan (the --switch names are {})",
                    config
                        .switches
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Ok((name.to_owned(), addr.to_owned()))
        })
        .collect()
}

/// `--program`: writes the plan into each named switch.
fn program(
    args: &PlanArgs,
    lab: &Lab,
    mapping: &Mapping,
    targets: &[(String, String)],
) -> Result<ExitCode> {
    use crate::p4rt::entries;
    use turbonet_p4::Client;
    let p4info = match &args.p4info {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            turbonet_p4::parse_p4info(&text)
                .with_context(|| format!("{}: not a text-format P4Info", path.display()))?
        }
        None => turbonet_p4::turbonet_p4info(),
    };
    let schema = turbonet_p4::Schema::new(&p4info)?;
    let pipeline = turbonet_p4::Pipeline::resolve(&schema, &p4info)?;
    let device_config = match &args.device_config {
        Some(path) => std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        None => Vec::new(),
    };
    let routes = turbonet_routing::static_routes(&lab.fabric);
    let params: Vec<_> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        for (name, addr) in targets {
            let state = entries::FabricState {
                routes: &routes,
                params: &params,
                failures: &turbonet_routing::Failures::default(),
            };
            let entities = entries::switch_entries(lab, mapping, state, &pipeline, name)?;
            let count = entities.len();
            let mut client = Client::connect(addr, 1, 1).await?;
            client.set_pipeline(p4info.clone(), device_config.clone()).await?;
            client
                .write(turbonet_p4::p4::v1::update::Type::Insert, entities)
                .await?;
            let tables = client.read(entries::all_table_entries()).await?.len();
            println!(
                "programmed {name} at {addr}: pipeline set, {count} entities written, {tables} table entries read back"
            );
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
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
