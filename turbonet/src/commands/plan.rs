//! `turbonet plan`: map a scenario onto physical P4 switches, and with
//! `--program` write the plan to them; or with `--machines` plan a lab
//! over several machines.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use turbonet_lab::plan;
use turbonet_topo::Lab;
use turbonet_topo::machines::{self, MachinePlan};
use turbonet_topo::units::Bytes;

use super::print_json;
use crate::cli::PlanArgs;
use crate::render::{count, prose_table, table};

/// `turbonet plan`: exit 2 when the fabric does not fit.
pub(crate) fn run(args: &PlanArgs) -> Result<ExitCode> {
    if let Some(m) = args.machines {
        return over_machines(&args.file, m, args.json);
    }
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

/// `turbonet plan --machines M FILE`: exit 2 when the lab cannot be spread
/// over M machines.
fn over_machines(file: &Path, m: u32, json: bool) -> Result<ExitCode> {
    /// What `--json` prints.
    #[derive(serde::Serialize)]
    struct MachinesJson<'a> {
        lab: &'a str,
        #[serde(flatten)]
        plan: &'a MachinePlan,
    }
    let (lab, _) = turbonet_lab::up::load(file)?;
    let plan = match machines::plan(&lab, m) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    if json {
        print_json(&MachinesJson {
            lab: &lab.name,
            plan: &plan,
        })?;
    } else {
        print!("{}", machines_report(&lab, &plan));
    }
    Ok(ExitCode::SUCCESS)
}

/// The human report of a plan over machines: what each machine runs, what
/// is cut by class and by pair of machines, balance, and the random
/// placement it is compared with.
fn machines_report(lab: &Lab, plan: &MachinePlan) -> String {
    let percent = |part: usize, whole: usize| 100.0 * part as f64 / whole.max(1) as f64;
    let mut out = format!(
        "lab {}: {} nodes and {} links over {} machine{}, partition {}\n",
        lab.name,
        count(plan.nodes),
        count(plan.links),
        plan.machines,
        if plan.machines == 1 { "" } else { "s" },
        plan.hash,
    );
    out.push_str(&prose_table(
        &[
            "machine",
            "holds",
            "switches",
            "hosts",
            "namespaces",
            "devices",
            "VXLAN",
            "engine links",
            "kernel memory",
        ],
        plan.parts.iter().map(|p| {
            let roles: Vec<String> = p
                .switches
                .iter()
                .map(|r| format!("{} {}", count(r.count), r.role))
                .collect();
            vec![
                p.machine.to_string(),
                holds(&p.pods, &p.segments),
                roles.join(", "),
                count(p.hosts),
                count(p.namespaces),
                count(p.devices),
                count(p.vxlan),
                count(p.engine_links),
                memory(p.memory),
            ]
        }),
        &[0, 3, 4, 5, 6, 7, 8],
        &[1, 2],
    ));
    out.push('\n');
    if plan.cut() == 0 {
        out.push_str("no link crosses machines\n");
    } else {
        out.push_str(&format!(
            "\ncut links: {} of {} ({:.1}%), each a VXLAN tunnel with a VNI of its own ({}-{}, in \
             link order):\n",
            count(plan.cut()),
            count(plan.links),
            percent(plan.cut(), plan.links),
            count(machines::FIRST_VNI as usize),
            count(machines::FIRST_VNI as usize + plan.cut() - 1),
        ));
        out.push_str(&table(
            &["class", "links", "cut", "cut %"],
            plan.cut_by_class.iter().map(|c| {
                vec![
                    c.class.clone(),
                    count(c.links),
                    count(c.cut),
                    format!("{:.1}%", percent(c.cut, c.links)),
                ]
            }),
            &[1, 2, 3],
        ));
        out.push('\n');
        out.push_str(&table(
            &["machines", "cut links", "carried by the owner's engine"],
            plan.cut_by_pair.iter().map(|p| {
                vec![
                    format!("{} - {}", p.machines[0], p.machines[1]),
                    count(p.cut),
                    count(p.engine),
                ]
            }),
            &[1, 2],
        ));
        out.push('\n');
        out.push_str(&format!(
            "a random placement of the nodes in the same sizes (seed {}) cuts {} ({:.1}x as many)\n",
            plan.random.seed,
            count(plan.random.cut),
            plan.random.cut as f64 / plan.cut() as f64,
        ));
    }
    if !plan.mirror_tunnels.is_empty() {
        out.push_str(&format!(
            "\n{} mirror{} cop{} to a monitor on another machine than the link's, each over a \
             VXLAN tunnel of its own:\n",
            count(plan.mirror_tunnels.len()),
            plural(plan.mirror_tunnels.len()),
            if plan.mirror_tunnels.len() == 1 {
                "ies"
            } else {
                "y"
            },
        ));
        out.push_str(&table(
            &["link", "tapped on", "monitor on", "VNI"],
            plan.mirror_tunnels.iter().map(|t| {
                vec![
                    t.link.clone(),
                    t.from.to_string(),
                    t.to.to_string(),
                    t.vni.to_string(),
                ]
            }),
            &[1, 2, 3],
        ));
        out.push('\n');
    }
    if let (Some(first), Some(last)) = (plan.mgmt_tunnels.first(), plan.mgmt_tunnels.last()) {
        out.push_str(&format!(
            "\nmanagement network: every machine's bridge joined to machine 0's by a VXLAN \
             tunnel (VNI{} {}), each machine's part at an address of its own\n",
            if first.vni == last.vni { "" } else { "s" },
            if first.vni == last.vni {
                first.vni.to_string()
            } else {
                format!("{}-{}", first.vni, last.vni)
            },
        ));
    }
    let balance: Vec<String> = plan
        .balance
        .iter()
        .map(|b| {
            format!(
                "{} at most {} (mean {}, +{:.1}%)",
                b.dimension,
                count(b.max),
                count(b.mean.round() as usize),
                100.0 * (b.max as f64 / b.mean - 1.0),
            )
        })
        .collect();
    out.push_str(&format!("balance: {}\n", balance.join("; ")));
    out.push_str(&format!(
        "kernel memory: {} KiB a namespace, {} KiB a device (the workers' own, routes and BGP, \
         comes on top)\n\
         --json lists every machine's nodes, and every cut link with its machines, VNI and owner \
         (the machine whose link engine carries it when impaired)\n",
        machines::NAMESPACE_KIB,
        machines::DEVICE_KIB,
    ));
    out
}

/// What a machine holds whole: `pods 0-1; segments 4, 6-9`.
fn holds(pods: &[u32], segments: &[u32]) -> String {
    let mut out = Vec::new();
    if !pods.is_empty() {
        out.push(format!("pod{} {}", plural(pods.len()), ranges(pods)));
    }
    if !segments.is_empty() {
        out.push(format!(
            "segment{} {}",
            plural(segments.len()),
            ranges(segments)
        ));
    }
    out.join("; ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Sorted numbers as ranges: `0-3, 5, 7-8`.
fn ranges(numbers: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let mut j = i;
        while j + 1 < numbers.len() && numbers[j + 1] == numbers[j] + 1 {
            j += 1;
        }
        out.push(if j == i {
            numbers[i].to_string()
        } else {
            format!("{}-{}", numbers[i], numbers[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// Memory in the largest binary unit that keeps it above 1: `2.9 GiB`.
fn memory(bytes: Bytes) -> String {
    let mut value = bytes.0 as f64;
    for unit in ["B", "KiB", "MiB"] {
        if value < 1024.0 {
            return format!("{value:.0} {unit}");
        }
        value /= 1024.0;
    }
    format!("{value:.1} GiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 5, 7, 8]), "0-3, 5, 7-8");
        assert_eq!(ranges(&[0, 2, 4]), "0, 2, 4");
        assert_eq!(holds(&[1], &[]), "pod 1");
        assert_eq!(holds(&[], &[3, 4]), "segments 3-4");
    }

    #[test]
    fn memory_reads_in_binary_units() {
        assert_eq!(memory(Bytes(512)), "512 B");
        assert_eq!(memory(Bytes(200 << 10)), "200 KiB");
        assert_eq!(memory(Bytes(300 << 20)), "300 MiB");
        assert_eq!(memory(Bytes(5 << 30)), "5.0 GiB");
    }
}
