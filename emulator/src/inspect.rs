//! `status` and `show`: what is up, and what it looks like.

use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use futures::TryStreamExt;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteProtocol};
use serde::Serialize;
use turbonet_topo::Lab;

use crate::cli::{EXIT_INVALID, ShowWhat};
use crate::fabric;
use crate::lab;
use crate::netns;
use crate::render::{count, table};
use crate::state::{self, LabDir};

#[derive(Debug, Serialize)]
struct LabStatus {
    lab: String,
    phase: String,
    scenario: String,
    namespaces: usize,
    namespaces_present: usize,
    externals: usize,
    up_seconds: Option<f64>,
    pid: u32,
    daemon: String,
}

/// `turbonet status`.
pub fn status(json: bool) -> Result<ExitCode> {
    let mut rows = Vec::new();
    for name in state::labs(Path::new(state::RUN_DIR))? {
        let dir = LabDir::of(&name);
        let Some(st) = dir.load()? else {
            rows.push(LabStatus {
                lab: name,
                phase: "no state (interrupted)".into(),
                scenario: String::new(),
                namespaces: 0,
                namespaces_present: 0,
                externals: 0,
                up_seconds: None,
                pid: 0,
                daemon: String::new(),
            });
            continue;
        };
        let mut phase = st.phase.to_string();
        if st.phase == state::Phase::Building && !state::pid_alive(st.pid) {
            phase = "interrupted (run down)".into();
        }
        rows.push(LabStatus {
            lab: name,
            phase,
            scenario: st.scenario.display().to_string(),
            namespaces: st.namespaces.len(),
            namespaces_present: st.namespaces.iter().filter(|n| netns::exists(n)).count(),
            externals: st.externals.len(),
            up_seconds: st
                .timings
                .iter()
                .find(|t| t.phase == "total")
                .map(|t| t.seconds),
            pid: st.pid,
            daemon: match st.daemon_pid {
                Some(pid) if state::pid_alive(pid) => format!("running (pid {pid})"),
                Some(pid) => format!("DEAD (pid {pid}): down and up again"),
                None => "not started".into(),
            },
        });
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        println!("no lab is up");
    } else {
        println!(
            "{}",
            table(
                &[
                    "lab",
                    "phase",
                    "nodes",
                    "externals",
                    "up in",
                    "daemon",
                    "scenario"
                ],
                rows.iter().map(|r| vec![
                    r.lab.clone(),
                    r.phase.clone(),
                    if r.namespaces_present == r.namespaces {
                        count(r.namespaces)
                    } else {
                        format!("{}/{} present", r.namespaces_present, r.namespaces)
                    },
                    count(r.externals),
                    r.up_seconds
                        .map(|s| format!("{s:.2} s"))
                        .unwrap_or_default(),
                    r.daemon.clone(),
                    r.scenario.clone(),
                ]),
                &[2, 3, 4],
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `turbonet show nodes|links|routes [NODE]`.
pub fn show(
    what: ShowWhat,
    node: Option<&str>,
    lab_name: Option<&str>,
    json: bool,
) -> Result<ExitCode> {
    let (dir, _) = lab::resolve(lab_name)?;
    let lab = lab::saved_lab(&dir)?;
    if let Some(name) = node
        && lab.fabric.node_by_name(name).is_none()
    {
        eprintln!(
            "error: lab {} has no node {name}{}",
            lab.name,
            suggest(&lab, name)
        );
        return Ok(ExitCode::from(EXIT_INVALID));
    }
    match what {
        ShowWhat::Nodes => show_nodes(&lab, node, json)?,
        ShowWhat::Links => show_links(&lab, node, json)?,
        ShowWhat::Routes => {
            let Some(node) = node else {
                eprintln!(
                    "error: `show routes` needs a NODE, e.g. `turbonet show routes {}`",
                    lab.fabric
                        .switches()
                        .next()
                        .map_or("NODE", |n| n.name.as_str())
                );
                return Ok(ExitCode::from(EXIT_INVALID));
            };
            show_routes(&lab, node, json)?;
        }
        ShowWhat::Bgp => return show_bgp(&dir, node, json),
    }
    Ok(ExitCode::SUCCESS)
}

/// `show bgp [NODE]`: asks the lab daemon.
fn show_bgp(dir: &LabDir, node: Option<&str>, json: bool) -> Result<ExitCode> {
    use crate::control::{Request, Response};
    let request = Request::Bgp {
        node: node.map(str::to_owned),
    };
    let report = match crate::control::call(dir, &request)? {
        Response::Bgp { report } => report,
        Response::Error { message } | Response::Ok { message } => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
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
                    crate::routers::shell_hint(dir, &speaker.node, agent)
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

/// " (did you mean X?)" for a mistyped name, when a close one exists.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    turbonet_topo::suggest::closest(name, candidates)
        .first()
        .map(|n| format!(" (did you mean {n}?)"))
}

/// " (did you mean X?)" for a mistyped node name.
pub fn suggest(lab: &Lab, name: &str) -> String {
    did_you_mean(name, lab.fabric.nodes.iter().map(|n| n.name.as_str())).unwrap_or_default()
}

#[derive(Debug, Serialize)]
struct NodeRow<'a> {
    name: &'a str,
    role: String,
    namespace: String,
    asn: Option<u32>,
    loopback: Option<String>,
    ports: usize,
}

/// What namespace a node has: on `netns` every node is one; on the P4
/// targets hosts are, and a switch has at most a control-plane namespace
/// (its BGP agent's, on `soft`), its forwarding being the pipeline's.
pub fn namespace_of(lab: &Lab, node: &turbonet_topo::Node) -> Option<(String, bool)> {
    let name = fabric::ns_name(&lab.name, &node.name);
    if lab.target == turbonet_topo::Target::Netns || !node.role.is_switch() {
        Some((name, false))
    } else if lab.target == turbonet_topo::Target::Soft
        && lab.routing.mode == turbonet_topo::RoutingMode::Bgp
    {
        Some((name, true))
    } else {
        None
    }
}

/// The namespace `exec` runs in for node `name`, or why it has none.
pub fn node_namespace(lab: &Lab, name: &str) -> Result<String> {
    let Some(node) = lab.fabric.node_by_name(name) else {
        return Ok(fabric::ns_name(&lab.name, name));
    };
    match namespace_of(lab, node) {
        Some((ns, _)) => Ok(ns),
        None => anyhow::bail!(
            "{name} is a virtual switch inside the {} switch (target \"{}\"): it has no \
             namespace of its own; its forwarding is the pipeline's tables (`turbonet link \
             show` has its counters), and hosts are namespaces",
            lab.target,
            lab.target
        ),
    }
}

fn show_nodes(lab: &Lab, only: Option<&str>, json: bool) -> Result<()> {
    let rows: Vec<NodeRow<'_>> = lab
        .fabric
        .nodes
        .iter()
        .filter(|n| only.is_none_or(|o| o == n.name))
        .map(|n| NodeRow {
            name: &n.name,
            role: n.role.to_string(),
            namespace: match namespace_of(lab, n) {
                Some((ns, false)) => ns,
                Some((ns, true)) => format!("{ns} (control plane)"),
                None => format!("- (in the {} switch)", lab.target),
            },
            asn: n.asn.map(|a| a.0),
            loopback: n.loopback.map(|l| l.to_string()),
            ports: n.links.len(),
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{}",
        table(
            &["node", "role", "namespace", "asn", "loopback", "ports"],
            rows.iter().map(|r| vec![
                r.name.to_owned(),
                r.role.clone(),
                r.namespace.clone(),
                r.asn.map(|a| a.to_string()).unwrap_or_default(),
                r.loopback.clone().unwrap_or_default(),
                r.ports.to_string(),
            ]),
            &[3, 5],
        )
    );
    Ok(())
}

#[derive(Debug, Serialize)]
struct LinkRow {
    link: String,
    class: String,
    a: String,
    a_ifname: String,
    a_addr: String,
    b: String,
    b_ifname: String,
    b_addr: String,
    mtu: Option<u16>,
}

fn show_links(lab: &Lab, only: Option<&str>, json: bool) -> Result<()> {
    let only = only.and_then(|o| lab.fabric.node_by_name(o)).map(|n| n.id);
    let rows: Vec<LinkRow> = lab
        .fabric
        .links
        .iter()
        .filter(|l| only.is_none_or(|n| l.ends.iter().any(|e| e.node == n)))
        .map(|l| {
            let [a, b] = &l.ends;
            LinkRow {
                link: l.name.clone(),
                class: l.class.to_string(),
                a: lab.fabric.node(a.node).name.clone(),
                a_ifname: a.ifname.clone(),
                a_addr: a.addr.to_string(),
                b: lab.fabric.node(b.node).name.clone(),
                b_ifname: b.ifname.clone(),
                b_addr: b.addr.to_string(),
                mtu: l.params.mtu.map(|m| m.0),
            }
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
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

#[derive(Debug, Serialize)]
struct RouteRow {
    prefix: String,
    nexthops: Vec<String>,
    protocol: String,
}

/// Dumps a node's kernel routing table (main table, IPv4).
fn show_routes(lab: &Lab, node: &str, json: bool) -> Result<()> {
    if lab.target != turbonet_topo::Target::Netns
        && lab
            .fabric
            .node_by_name(node)
            .is_some_and(|n| n.role.is_switch())
    {
        anyhow::bail!(
            "{node} forwards by the {} switch's tables, not a kernel table: `turbonet show bgp \
             {node}` has its routes with BGP, and the routes follow the plan otherwise",
            lab.target
        );
    }
    let ns_name = node_namespace(lab, node)?;
    let ns = netns::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    let socket = netns::in_namespace(&ns, netns::route_socket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (routes, links) = runtime.block_on(async {
        let handle = fabric::connect(socket)?;
        let mut names = std::collections::HashMap::new();
        let mut links = handle.link().get().execute();
        while let Some(link) = links.try_next().await? {
            for attr in &link.attributes {
                if let rtnetlink::packet_route::link::LinkAttribute::IfName(n) = attr {
                    names.insert(link.header.index, n.clone());
                }
            }
        }
        let message = rtnetlink::RouteMessageBuilder::<std::net::Ipv4Addr>::new().build();
        let routes: Vec<RouteMessage> = handle.route().get(message).execute().try_collect().await?;
        Ok::<_, anyhow::Error>((routes, names))
    })?;
    let mut rows: Vec<RouteRow> = routes
        .iter()
        .filter(|r| r.header.address_family == AddressFamily::Inet && r.header.table == 254)
        .map(|r| route_row(r, &links))
        .collect();
    rows.sort_by_key(|r| sort_key(&r.prefix));
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
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
    println!("{} routes in {ns_name}", rows.len());
    Ok(())
}

fn sort_key(prefix: &str) -> (u32, u8) {
    let (addr, len) = prefix.split_once('/').unwrap_or((prefix, "32"));
    (
        addr.parse::<std::net::Ipv4Addr>().map_or(0, u32::from),
        len.parse().unwrap_or(32),
    )
}

fn route_row(r: &RouteMessage, links: &std::collections::HashMap<u32, String>) -> RouteRow {
    let mut dst = "0.0.0.0".to_owned();
    let mut gateway = None;
    let mut oif = None;
    let mut hops = Vec::new();
    let ifname = |i: u32| links.get(&i).cloned().unwrap_or_else(|| format!("if{i}"));
    for attr in &r.attributes {
        match attr {
            RouteAttribute::Destination(RouteAddress::Inet(a)) => dst = a.to_string(),
            RouteAttribute::Gateway(RouteAddress::Inet(a)) => gateway = Some(IpAddr::V4(*a)),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::MultiPath(nhs) => {
                for nh in nhs {
                    let via = nh.attributes.iter().find_map(|a| match a {
                        RouteAttribute::Gateway(RouteAddress::Inet(a)) => Some(a.to_string()),
                        _ => None,
                    });
                    hops.push(match via {
                        Some(v) => format!("via {v} dev {}", ifname(nh.interface_index)),
                        None => format!("dev {}", ifname(nh.interface_index)),
                    });
                }
            }
            _ => {}
        }
    }
    if hops.is_empty() {
        let dev = oif.map(ifname).unwrap_or_default();
        hops.push(match gateway {
            Some(g) => format!("via {g} dev {dev}"),
            None => format!("dev {dev}"),
        });
    }
    let protocol = match r.header.protocol {
        RouteProtocol::Kernel => "connected".to_owned(),
        RouteProtocol::Static => "turbonet".to_owned(),
        RouteProtocol::Boot => "boot".to_owned(),
        other => format!("{other:?}").to_lowercase(),
    };
    RouteRow {
        prefix: format!("{dst}/{}", r.header.destination_prefix_length),
        nexthops: hops,
        protocol,
    }
}

#[derive(Debug, Serialize)]
struct LinkShow {
    link: String,
    engine: &'static str,
    why: String,
    params: LinkParamsView,
    directions: Vec<DirectionView>,
}

#[derive(Debug, Serialize)]
struct LinkParamsView {
    rate: Option<String>,
    delay: Option<String>,
    jitter: Option<String>,
    loss: Option<String>,
    queue: Option<String>,
    mtu: Option<u16>,
}

#[derive(Debug, Serialize)]
struct DirectionView {
    from: String,
    to: String,
    #[serde(flatten)]
    counters: turbonet_injectors::Counters,
    tx_errors: u64,
}

/// `turbonet link show [LINK]`.
pub fn link_show(only: Option<&str>, lab_name: Option<&str>, json: bool) -> Result<ExitCode> {
    let (dir, _) = lab::resolve(lab_name)?;
    let lab = lab::saved_lab(&dir)?;
    if let Some(name) = only
        && lab.fabric.link_by_name(name).is_none()
    {
        let close = did_you_mean(name, lab.fabric.links.iter().map(|l| l.name.as_str()))
            .unwrap_or_default();
        eprintln!("error: lab {} has no link {name}{close}", lab.name);
        return Ok(ExitCode::from(EXIT_INVALID));
    }
    let counters: Vec<crate::engine::LinkCounters> =
        std::fs::read(crate::daemon::counters_path(&dir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
    let carriers = crate::fabric::link_carriers(&lab);
    let rows: Vec<LinkShow> = lab
        .fabric
        .links
        .iter()
        .zip(&carriers)
        .filter(|(l, _)| only.is_none_or(|o| o == l.name))
        .map(|(l, carrier)| {
            let engine_counters = counters.iter().find(|c| c.link == l.name);
            let p = &l.params;
            let names = [
                lab.fabric.node(l.ends[0].node).name.clone(),
                lab.fabric.node(l.ends[1].node).name.clone(),
            ];
            LinkShow {
                link: l.name.clone(),
                engine: carrier.name(),
                why: carrier.why().to_owned(),
                params: LinkParamsView {
                    rate: p.rate.map(|v| v.to_string()),
                    delay: p.delay.map(|v| v.to_string()),
                    jitter: p.jitter.map(|v| v.to_string()),
                    loss: p.loss.as_ref().map(std::string::ToString::to_string),
                    queue: p.queue.map(|v| v.to_string()),
                    mtu: p.mtu.map(|m| m.0),
                },
                directions: engine_counters
                    .map(|c| {
                        (0..2)
                            .map(|d| DirectionView {
                                from: names[d].clone(),
                                to: names[1 - d].clone(),
                                counters: c.directions[d].clone(),
                                tx_errors: c.tx_errors[d],
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let dash = || "-".to_owned();
    println!(
        "{}",
        table(
            &[
                "link", "engine", "why", "rate", "delay", "jitter", "loss", "queue", "mtu"
            ],
            rows.iter().map(|r| vec![
                r.link.clone(),
                r.engine.to_owned(),
                r.why.clone(),
                r.params.rate.clone().unwrap_or_else(dash),
                r.params.delay.clone().unwrap_or_else(dash),
                r.params.jitter.clone().unwrap_or_else(dash),
                r.params.loss.clone().unwrap_or_else(dash),
                r.params.queue.clone().unwrap_or_else(dash),
                r.params.mtu.map_or_else(dash, |m| m.to_string()),
            ]),
            &[],
        )
    );
    let directions: Vec<Vec<String>> = rows
        .iter()
        .flat_map(|r| {
            r.directions.iter().map(move |d| {
                let c = &d.counters;
                vec![
                    r.link.clone(),
                    format!("{} -> {}", d.from, d.to),
                    count(c.rx_packets as usize),
                    count(c.tx_packets as usize),
                    count(c.tx_bytes as usize),
                    count(c.dropped_loss as usize),
                    count(c.dropped_queue as usize),
                    count(c.corrupted as usize),
                    count(c.duplicated as usize),
                    count(c.ecn_marked as usize),
                    count(c.queue_packets as usize),
                ]
            })
        })
        .collect();
    if !directions.is_empty() {
        println!(
            "{}",
            table(
                &[
                    "link",
                    "direction",
                    "in",
                    "out",
                    "out bytes",
                    "lost",
                    "queue drops",
                    "corrupted",
                    "duplicated",
                    "ecn",
                    "queued",
                ],
                directions,
                &[2, 3, 4, 5, 6, 7, 8, 9, 10],
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `turbonet events`.
pub fn events(lab_name: Option<&str>, json: bool) -> Result<ExitCode> {
    let (dir, _) = lab::resolve(lab_name)?;
    let text = std::fs::read_to_string(crate::daemon::events_path(&dir)).unwrap_or_default();
    let events: Vec<crate::daemon::LoggedEvent> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&events)?);
    } else if events.is_empty() {
        println!("no events yet");
    } else {
        println!(
            "{}",
            table(
                &["t (s)", "source", "event", "result"],
                events.iter().map(|e| vec![
                    format!("{:.3}", e.t),
                    e.source.clone(),
                    e.event.clone(),
                    e.result.clone(),
                ]),
                &[0],
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}
