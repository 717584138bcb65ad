//! `turbonet show`: a lab's nodes, links, a node's routes, or BGP state.

use std::process::ExitCode;

use anyhow::Result;
use turbonet_lab::inspect::{self, LinkRow, NodeRow, RouteRow};
use turbonet_lab::routes::bgp::BgpReport;
use turbonet_lab::state::LabDir;

use super::print_json;
use crate::cli::{ShowArgs, ShowWhat};
use crate::render::table;

/// `turbonet show WHAT [NODE]`.
pub(crate) fn run(args: ShowArgs) -> Result<ExitCode> {
    let ShowArgs {
        what,
        node,
        lab,
        json,
    } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    let node = node.as_deref();
    match what {
        ShowWhat::Nodes => nodes(&turbonet_lab::parts::nodes(&running, node)?, json)?,
        ShowWhat::Links => links(&inspect::links(&running.lab, node)?, json)?,
        ShowWhat::Routes => {
            let Some(node) = node else {
                return Err(turbonet_lab::Error::Invalid(format!(
                    "`show routes` needs a NODE, e.g. `turbonet show routes {}`",
                    running
                        .lab
                        .fabric
                        .switches()
                        .next()
                        .map_or("NODE", |n| n.name.as_str())
                ))
                .into());
            };
            let (ns, rows) = turbonet_lab::parts::routes(&running, node)?;
            routes(&ns, &rows, json)?;
        }
        ShowWhat::Bgp => {
            let report = turbonet_lab::parts::bgp(&running, node)?;
            return bgp(&report, node, &running.dir, json);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `show nodes`.
fn nodes(rows: &[NodeRow], as_json: bool) -> Result<()> {
    if as_json {
        return print_json(&rows);
    }
    // A lab over several machines says where each node runs.
    let spread = rows.iter().any(|r| r.machine.is_some());
    let mut header = vec!["node", "role", "namespace", "asn", "loopback", "ports"];
    if spread {
        header.push("machine");
    }
    println!(
        "{}",
        table(
            &header,
            rows.iter().map(|r| {
                let mut row = vec![
                    r.name.clone(),
                    r.role.clone(),
                    r.namespace.clone(),
                    r.asn.map(|a| a.to_string()).unwrap_or_default(),
                    r.loopback.clone().unwrap_or_default(),
                    r.ports.to_string(),
                ];
                row.extend(r.machine.map(|m| m.to_string()));
                row
            }),
            &[3, 5, 6],
        )
    );
    Ok(())
}

/// `show links`.
fn links(rows: &[LinkRow], as_json: bool) -> Result<()> {
    if as_json {
        return print_json(&rows);
    }
    println!(
        "{}",
        table(
            &[
                "link",
                "class",
                "a",
                "interface",
                "address",
                "b",
                "interface",
                "address",
                "mtu"
            ],
            rows.iter().map(|r| vec![
                r.link.clone(),
                r.class.clone(),
                r.a.clone(),
                r.a_ifname.clone(),
                r.a_addr.clone(),
                r.b.clone(),
                r.b_ifname.clone(),
                r.b_addr.clone(),
                r.mtu.map_or_else(|| "-".into(), |m| m.to_string()),
            ]),
            &[8],
        )
    );
    Ok(())
}

/// `show routes NODE`: the table read in namespace `ns`.
fn routes(ns: &str, rows: &[RouteRow], as_json: bool) -> Result<()> {
    if as_json {
        return print_json(&rows);
    }
    println!(
        "{}",
        table(
            &["prefix", "next hops", "protocol"],
            rows.iter()
                .map(|r| vec![r.prefix.clone(), r.nexthops.join("\n"), r.protocol.clone()]),
            &[],
        )
    );
    println!("{} routes in {ns}", rows.len());
    Ok(())
}

/// `show bgp [NODE]`; `dir` is the lab's, for hints on FRR and BIRD.
fn bgp(report: &BgpReport, node: Option<&str>, dir: &LabDir, json: bool) -> Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let (Some(_), [speaker]) = (node, report.speakers.as_slice()) {
        println!(
            "{}: AS {}, router id {}, agent {}, {}/{} routes, {}",
            speaker.node,
            speaker.asn,
            speaker.router_id,
            speaker.agent,
            speaker.routes,
            speaker.expected,
            if speaker.converged {
                "converged"
            } else {
                "converging"
            }
        );
        if speaker.sessions.is_empty() {
            match turbonet_topo::Agent::from_name(&speaker.agent) {
                Some(agent @ (turbonet_topo::Agent::Frr | turbonet_topo::Agent::Bird)) => println!(
                    "{} did not say how its sessions are; ask it: {}",
                    speaker.agent,
                    turbonet_lab::routes::routers::shell_hint(dir, &speaker.node, agent)
                ),
                _ => println!("{} has no BGP sessions", speaker.node),
            }
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "{}",
            table(
                &[
                    "peer",
                    "address",
                    "AS",
                    "port",
                    "state",
                    "for",
                    "prefixes",
                    "last error"
                ],
                speaker.sessions.iter().map(|s| {
                    vec![
                        s.peer.clone(),
                        s.peer_addr.to_string(),
                        s.peer_asn.to_string(),
                        s.ifname.clone(),
                        s.state.clone(),
                        s.since.map_or_else(|| "-".to_owned(), format_duration),
                        s.received.map_or_else(|| "-".to_owned(), |n| n.to_string()),
                        s.last_error.clone().unwrap_or_default(),
                    ]
                }),
                &[2, 5, 6],
            )
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}",
        table(
            &[
                "switch",
                "agent",
                "AS",
                "router id",
                "sessions",
                "routes",
                "converged"
            ],
            report.speakers.iter().map(|s| {
                let up = s
                    .sessions
                    .iter()
                    .filter(|x| x.state == "established")
                    .count();
                vec![
                    s.node.clone(),
                    s.agent.clone(),
                    s.asn.to_string(),
                    s.router_id.to_string(),
                    if s.sessions.is_empty() {
                        "-".to_owned()
                    } else {
                        format!("{up}/{}", s.sessions.len())
                    },
                    format!("{}/{}", s.routes, s.expected),
                    match (s.converged, s.converged_at) {
                        (true, Some(t)) => format!("yes, at {t:.3} s"),
                        (true, None) => "yes".to_owned(),
                        (false, _) => "no".to_owned(),
                    },
                ]
            }),
            &[2, 4, 5],
        )
    );
    let converged = report.speakers.iter().filter(|s| s.converged).count();
    let (up, all) = report.sessions();
    println!(
        "{converged}/{} switches converged{}{}",
        report.speakers.len(),
        match (report.convergence_time(), report.since_change) {
            (Some(t), Some(_)) => format!(" {t:.3} s after the last fail/restore"),
            (Some(t), None) => format!(" {t:.3} s after the agents started"),
            _ => String::new(),
        },
        if all > 0 {
            format!("; {up}/{all} sessions established")
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `12.3s`, `4m05s`, `2h10m`.
fn format_duration(seconds: f64) -> String {
    let s = seconds as u64;
    match s {
        0..60 => format!("{seconds:.1}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}
