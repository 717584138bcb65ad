//! `turbonet snapshot`: the fabric as it stands, for a verifier to compare
//! its predictions with — the topology with the parameters in force, what
//! is down, every switch's forwarding table, every built-in agent's
//! Adj-RIB-In and Loc-RIB with path attributes, and the configuration
//! files of the switches FRR and BIRD run. One JSON layout on every target
//! (docs/instruments.md).

use std::collections::BTreeMap;

use ipnet::Ipv4Net;
use serde::Serialize;
use turbonet_routing::bgp::dump::RibDump;
use turbonet_topo::{LinkParams, Target};

use super::shared::Shared;
use crate::dataplane::netns::fibwatch;
use crate::events::NextHop;
use crate::topology::{Topology, topology};

/// What the snapshot's `format` says: its layout and version.
pub const FORMAT: &str = "turbonet-snapshot/1";

/// A snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// [`FORMAT`].
    pub format: &'static str,
    /// The lab.
    pub lab: String,
    /// `netns`, `soft`, `p4rt`.
    pub target: String,
    /// `static`, `controller`, `bgp`.
    pub routing: String,
    /// turbonet's version.
    pub turbonet: String,
    /// The scenario's seed.
    pub seed: u64,
    /// When it was taken: seconds since the fabric was ready.
    pub t: f64,
    /// The same, Unix time.
    pub unix: f64,
    /// The fabric, with the link parameters in force.
    pub topology: Topology,
    /// What is down and what was changed.
    pub failures: Failures,
    /// Every switch's forwarding table: the kernel's main table (`netns`),
    /// or the routes written to the pipeline (P4 targets), by switch.
    pub fib: BTreeMap<String, Vec<FibRoute>>,
    /// Every built-in BGP agent's RIBs, by switch.
    pub rib: BTreeMap<String, RibDump>,
    /// The configuration files of the switches FRR and BIRD run, by switch
    /// (paths in the snapshot's directory).
    pub configs: BTreeMap<String, RouterConfig>,
    /// The files of `configs`: path and text.
    #[serde(skip)]
    pub files: Vec<(String, String)>,
}

/// What is down and what was changed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Failures {
    /// Links failed, by name (a failed node's links are not listed: see
    /// `nodes`).
    pub links: Vec<String>,
    /// Nodes failed.
    pub nodes: Vec<String>,
    /// Links whose parameters differ from the scenario's: those in force.
    pub changed: BTreeMap<String, LinkParams>,
}

/// One route of a forwarding table.
#[derive(Debug, Clone, Serialize)]
pub struct FibRoute {
    /// The destination.
    pub prefix: Ipv4Net,
    /// Who installed it: `static` (turbonet), `bgp`, `bird`, `kernel`
    /// (connected), ...
    pub protocol: String,
    /// The kernel's metric (0 in a pipeline).
    pub metric: u32,
    /// Where it sends packets (next hops whose port is down left out).
    pub next_hops: Vec<NextHop>,
}

/// A switch's routing daemon's configuration.
#[derive(Debug, Clone, Serialize)]
pub struct RouterConfig {
    /// `frr` or `bird`.
    pub agent: String,
    /// Its files, relative to the snapshot's directory.
    pub files: Vec<String>,
}

/// Takes a snapshot of the lab behind `shared`.
pub async fn take(shared: &Shared) -> crate::error::Result<Snapshot> {
    let lab = &shared.lab;
    let fabric = &lab.fabric;
    let published = shared.published.borrow().clone();
    let unix = crate::events::unix_now();
    let failures = Failures {
        links: published
            .failures
            .links
            .iter()
            .map(|&l| fabric.link(l).name.clone())
            .collect(),
        nodes: published
            .failures
            .nodes
            .iter()
            .map(|&n| fabric.node(n).name.clone())
            .collect(),
        changed: fabric
            .links
            .iter()
            .filter_map(|l| {
                let now = published.params.get(l.id.0 as usize)?;
                (*now != l.params).then(|| (l.name.clone(), now.clone()))
            })
            .collect(),
    };
    let rib: BTreeMap<String, RibDump> = match &shared.bgp {
        Some(view) => view
            .ribs(None)
            .await
            .into_iter()
            .map(|r| (r.node.clone(), r))
            .collect(),
        None => BTreeMap::new(),
    };
    let fib = match lab.target {
        Target::Netns => kernel_fibs(lab, &shared.share).await?,
        Target::Soft | Target::P4rt => pipeline_fibs(lab, published.routes.as_deref(), &rib),
    };
    let (configs, files) = router_configs(shared);
    Ok(Snapshot {
        format: FORMAT,
        lab: lab.name.clone(),
        target: lab.target.to_string(),
        routing: lab.routing.mode.to_string(),
        turbonet: env!("CARGO_PKG_VERSION").to_owned(),
        seed: lab.seed,
        t: unix - shared.events.ready(),
        unix,
        topology: topology(lab, Some(&published.params)),
        failures,
        fib,
        rib,
        configs,
        files,
    })
}

/// The kernel table of every switch that runs here (`share`).
async fn kernel_fibs(
    lab: &turbonet_topo::Lab,
    share: &turbonet_topo::machines::Share,
) -> crate::error::Result<BTreeMap<String, Vec<FibRoute>>> {
    use crate::error::Context;
    use turbonet_host::namespaces;
    let mut fibs = BTreeMap::new();
    for node in lab.fabric.switches().filter(|n| share.runs(n.id)) {
        let name = crate::names::node_namespace(&lab.name, &node.name);
        let ns = namespaces::open(&name).with_context(|| format!("opening {name}"))?;
        let handle = turbonet_host::kernel::connect(namespaces::in_namespace(
            &ns,
            namespaces::route_socket,
        )?)?;
        let ports = fibwatch::ports(lab, node);
        let routes = turbonet_host::kernel::table::read_table(&handle, &ns)
            .await?
            .iter()
            .map(|r| FibRoute {
                prefix: r.prefix,
                protocol: fibwatch::protocol_name(r.protocol),
                metric: r.metric,
                next_hops: fibwatch::next_hops(&ports, r).into_iter().collect(),
            })
            .filter(|r| !r.next_hops.is_empty())
            .collect();
        fibs.insert(node.name.clone(), routes);
    }
    Ok(fibs)
}

/// Every switch's pipeline routes: those turbonet wrote, and the built-in
/// agents' selected routes.
fn pipeline_fibs(
    lab: &turbonet_topo::Lab,
    routes: Option<&Vec<Vec<turbonet_routing::Route>>>,
    ribs: &BTreeMap<String, RibDump>,
) -> BTreeMap<String, Vec<FibRoute>> {
    let fabric = &lab.fabric;
    let mut fibs = BTreeMap::new();
    for node in fabric.switches() {
        let by_port: BTreeMap<&str, String> = fabric
            .ports(node.id)
            .map(|(_, local, remote)| {
                (local.ifname.as_str(), fabric.node(remote.node).name.clone())
            })
            .collect();
        let mut table: Vec<FibRoute> = routes
            .and_then(|r| r.get(node.id.0 as usize))
            .into_iter()
            .flatten()
            .map(|r| FibRoute {
                prefix: r.prefix,
                protocol: "static".to_owned(),
                metric: 0,
                next_hops: r
                    .nexthops
                    .iter()
                    .map(|h| NextHop {
                        gateway: h.via,
                        ifname: h.ifname.clone(),
                        node: by_port.get(h.ifname.as_str()).cloned(),
                    })
                    .collect(),
            })
            .collect();
        if let Some(rib) = ribs.get(&node.name) {
            let by_peer: BTreeMap<&str, &str> = rib
                .adj_rib_in
                .iter()
                .map(|a| (a.peer.as_str(), a.ifname.as_str()))
                .collect();
            table.extend(rib.loc_rib.iter().filter(|r| !r.local).map(|r| {
                FibRoute {
                    prefix: r.prefix,
                    protocol: "bgp".to_owned(),
                    metric: 0,
                    next_hops: r
                        .next_hops
                        .iter()
                        .map(|h| NextHop {
                            gateway: Some(h.next_hop),
                            ifname: by_peer
                                .get(h.peer.as_str())
                                .map_or_else(String::new, |i| (*i).to_owned()),
                            node: Some(h.peer.clone()),
                        })
                        .collect(),
                }
            }));
        }
        table.sort_by_key(|r| (u32::from(r.prefix.network()), r.prefix.prefix_len()));
        fibs.insert(node.name.clone(), table);
    }
    fibs
}

/// The configuration files of FRR and BIRD switches, read from their
/// directories: `configs/SWITCH/FILE`.
fn router_configs(shared: &Shared) -> (BTreeMap<String, RouterConfig>, Vec<(String, String)>) {
    use turbonet_topo::Agent;
    let lab = &shared.lab;
    let dir = crate::state::LabDir::of(&lab.name);
    let mut configs = BTreeMap::new();
    let mut files = Vec::new();
    if lab.routing.mode != turbonet_topo::RoutingMode::Bgp {
        return (configs, files);
    }
    for node in lab.fabric.switches().filter(|n| shared.share.runs(n.id)) {
        let agent = lab.routing.agent_of(node.id);
        let names: &[&str] = match agent {
            Agent::Frr => &["frr.conf", "zebra.conf"],
            Agent::Bird => &["bird.conf"],
            Agent::Builtin => continue,
        };
        let home = crate::routes::routers::router_dir(&dir, &node.name);
        let mut mine = Vec::new();
        for name in names {
            if let Ok(text) = std::fs::read_to_string(home.join(name)) {
                let path = format!("configs/{}/{name}", node.name);
                files.push((path.clone(), text));
                mine.push(path);
            }
        }
        configs.insert(
            node.name.clone(),
            RouterConfig {
                agent: agent.to_string(),
                files: mine,
            },
        );
    }
    (configs, files)
}
