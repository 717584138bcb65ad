//! `status` and `show`: what is up, and what it looks like, as values the
//! command line prints (or writes as JSON).

use std::path::Path;

use serde::Serialize;
use turbonet_topo::{Lab, Node};

use crate::dataplane::Carrier;
use crate::error::{Context, Error, Result};
use crate::kernel::routes::{TableRoute, link_names, read_table};
use crate::names;
use crate::state::{self, LabDir, Phase};
use crate::system::{namespaces, process};

/// One lab, as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LabStatus {
    /// Its name.
    pub lab: String,
    /// Its phase (`ready`, `building`, ...; `interrupted` when `up` died).
    pub phase: String,
    /// The scenario it came from.
    pub scenario: String,
    /// Namespaces it owns.
    pub namespaces: usize,
    /// Of those, how many exist.
    pub namespaces_present: usize,
    /// External interfaces it borrows.
    pub externals: usize,
    /// How long `up` took.
    pub up_seconds: Option<f64>,
    /// The process that built it.
    pub pid: u32,
    /// Its daemon: running, dead, or not started.
    pub daemon: String,
}

/// `turbonet status`: every lab with a directory on this machine.
pub fn status() -> Result<Vec<LabStatus>> {
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
        if st.phase == Phase::Building && !process::turbonet_alive(st.pid) {
            phase = "interrupted (run down)".into();
        }
        rows.push(LabStatus {
            lab: name,
            phase,
            scenario: st.scenario.display().to_string(),
            namespaces: st.namespaces.len(),
            namespaces_present: st
                .namespaces
                .iter()
                .filter(|n| namespaces::exists(n))
                .count(),
            externals: st.externals.len(),
            up_seconds: st
                .timings
                .iter()
                .find(|t| t.phase == "total")
                .map(|t| t.seconds),
            pid: st.pid,
            daemon: match st.daemon_pid {
                Some(pid) if process::turbonet_alive(pid) => format!("running (pid {pid})"),
                Some(pid) => format!("DEAD (pid {pid}): down and up again"),
                None => "not started".into(),
            },
        });
    }
    Ok(rows)
}

/// A lab that is up: its directory and its scenario.
#[derive(Debug)]
pub struct Running {
    /// Its directory.
    pub dir: LabDir,
    /// Its scenario.
    pub lab: Lab,
}

/// The lab a command is about (the one named, or the only one up), with
/// its scenario.
pub fn running(name: Option<&str>) -> Result<Running> {
    let (dir, _) = state::resolve(name)?;
    let lab = dir.saved_lab()?;
    Ok(Running { dir, lab })
}

/// What namespace a node has: on `netns` every node is one; on the P4
/// targets hosts are, and a switch has at most a control-plane namespace
/// (its BGP agent's, on `soft`), its forwarding being the pipeline's.
/// `true` marks a control-plane namespace.
pub fn namespace_of(lab: &Lab, node: &Node) -> Option<(String, bool)> {
    let name = names::node_namespace(&lab.name, &node.name);
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
    let node = crate::lookup::node(lab, name)?;
    namespace_of(lab, node).map(|(ns, _)| ns).ok_or_else(|| {
        Error::Invalid(format!(
            "{name} is a virtual switch inside the {} switch (target \"{}\"): it has no \
             namespace of its own; its forwarding is the pipeline's tables (`turbonet link \
             show` has its counters), and hosts are namespaces",
            lab.target, lab.target
        ))
    })
}

/// One node, as `show nodes` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRow {
    /// Its name.
    pub name: String,
    /// `host`, `edge`, `agg`, ...
    pub role: String,
    /// Its namespace, or where it lives.
    pub namespace: String,
    /// Its AS.
    pub asn: Option<u32>,
    /// Its loopback.
    pub loopback: Option<String>,
    /// Its ports.
    pub ports: usize,
}

/// `show nodes [NODE]`.
pub fn nodes(lab: &Lab, only: Option<&str>) -> Result<Vec<NodeRow>> {
    if let Some(name) = only {
        crate::lookup::node(lab, name)?;
    }
    Ok(lab
        .fabric
        .nodes
        .iter()
        .filter(|n| only.is_none_or(|o| o == n.name))
        .map(|n| NodeRow {
            name: n.name.clone(),
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
        .collect())
}

/// One link, as `show links` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct LinkRow {
    /// Its name.
    pub link: String,
    /// `host-edge`, `edge-agg`, ...
    pub class: String,
    /// One end's node.
    pub a: String,
    /// Its interface.
    pub a_ifname: String,
    /// Its address.
    pub a_addr: String,
    /// The other end's node.
    pub b: String,
    /// Its interface.
    pub b_ifname: String,
    /// Its address.
    pub b_addr: String,
    /// The link's MTU.
    pub mtu: Option<u16>,
}

/// `show links [NODE]`: every link, or those of one node.
pub fn links(lab: &Lab, only: Option<&str>) -> Result<Vec<LinkRow>> {
    let only = only
        .map(|name| crate::lookup::node(lab, name).map(|n| n.id))
        .transpose()?;
    Ok(lab
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
        .collect())
}

/// One route, as `show routes` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct RouteRow {
    /// Destination.
    pub prefix: String,
    /// `via GATEWAY dev IFACE` per next hop.
    pub nexthops: Vec<String>,
    /// Who installed it (`turbonet`, `bgp`, `connected`, ...).
    pub protocol: String,
}

/// `show routes NODE`: the node's kernel routing table (main table, IPv4),
/// and the namespace it was read in.
pub fn routes(lab: &Lab, node: &str) -> Result<(String, Vec<RouteRow>)> {
    if lab.target != turbonet_topo::Target::Netns
        && crate::lookup::node(lab, node)?.role.is_switch()
    {
        return Err(Error::Invalid(format!(
            "{node} forwards by the {} switch's tables, not a kernel table: `turbonet show bgp \
             {node}` has its routes with BGP, and the routes follow the plan otherwise",
            lab.target
        )));
    }
    let ns_name = node_namespace(lab, node)?;
    let ns = namespaces::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    let socket = namespaces::in_namespace(&ns, namespaces::route_socket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (table, names) = runtime.block_on(async {
        let handle = crate::kernel::connect(socket)?;
        Ok::<_, Error>((read_table(&handle).await?, link_names(&handle).await?))
    })?;
    let rows = table.iter().map(|r| route_row(r, &names)).collect();
    Ok((ns_name, rows))
}

fn route_row(r: &TableRoute, names: &std::collections::HashMap<u32, String>) -> RouteRow {
    use rtnetlink::packet_route::route::RouteProtocol;
    let ifname = |i: u32| names.get(&i).cloned().unwrap_or_else(|| format!("if{i}"));
    RouteRow {
        prefix: r.prefix.to_string(),
        nexthops: r
            .hops
            .iter()
            .map(|(via, dev)| match via {
                Some(v) => format!("via {v} dev {}", ifname(*dev)),
                None => format!("dev {}", ifname(*dev)),
            })
            .collect(),
        protocol: match r.protocol {
            RouteProtocol::Kernel => "connected".to_owned(),
            RouteProtocol::Static => "turbonet".to_owned(),
            RouteProtocol::Boot => "boot".to_owned(),
            other => format!("{other:?}").to_lowercase(),
        },
    }
}

/// One link, as `link show` shows it: parameters, engine, counters.
#[derive(Debug, Clone, Serialize)]
pub struct LinkShow {
    /// Its name.
    pub link: String,
    /// The engine that carries it.
    pub engine: &'static str,
    /// Why that engine.
    pub why: String,
    /// Its parameters.
    pub params: LinkParamsView,
    /// Per-direction counters (impaired links).
    pub directions: Vec<DirectionView>,
}

/// A link's parameters in scenario syntax.
#[derive(Debug, Clone, Serialize)]
pub struct LinkParamsView {
    /// Bandwidth.
    pub rate: Option<String>,
    /// One-way delay.
    pub delay: Option<String>,
    /// Delay jitter.
    pub jitter: Option<String>,
    /// Loss.
    pub loss: Option<String>,
    /// Queue limit.
    pub queue: Option<String>,
    /// MTU.
    pub mtu: Option<u16>,
}

/// One direction of a link and its counters.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionView {
    /// Where frames come from.
    pub from: String,
    /// Where they go.
    pub to: String,
    /// What the engine counted.
    #[serde(flatten)]
    pub counters: turbonet_injectors::Counters,
    /// Frames it could not transmit.
    pub tx_errors: u64,
}

/// `turbonet link show [LINK]`.
pub fn link_show(running: &Running, only: Option<&str>) -> Result<Vec<LinkShow>> {
    let lab = &running.lab;
    let only = only
        .map(|name| crate::lookup::link(lab, name).map(|l| l.name.as_str()))
        .transpose()?;
    let counters: Vec<crate::dataplane::netns::engine::LinkCounters> =
        std::fs::read(crate::daemon::counters_path(&running.dir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
    let carriers = crate::dataplane::carrier::link_carriers(lab);
    Ok(lab
        .fabric
        .links
        .iter()
        .zip(&carriers)
        .filter(|(l, _)| only.is_none_or(|o| o == l.name))
        .map(|(l, carrier): (_, &Carrier)| {
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
                    loss: p.loss.as_ref().map(ToString::to_string),
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
        .collect())
}

/// `turbonet events`: what the lab's daemon executed and saw.
pub fn events(running: &Running) -> Result<Vec<crate::events::LoggedEvent>> {
    let text =
        std::fs::read_to_string(crate::events::events_path(&running.dir)).unwrap_or_default();
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}
