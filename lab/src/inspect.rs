//! `status` and `show`: what is up, and what it looks like, as values the
//! command line prints (or writes as JSON).

use std::path::Path;

use serde::Serialize;
use turbonet_topo::{Lab, LinkParams};

use crate::dataplane::plane::Shortfall;
use crate::error::{Context, Error, Result};
use crate::state::{self, LabDir, Phase};
use turbonet_api as api;
use turbonet_host::kernel::table::{TableRoute, link_names, read_table};
use turbonet_host::{namespaces, process};

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
    /// On a lab over several machines, which part runs here (`machine 1
    /// of 2`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
}

/// `turbonet status`: every lab with a directory on this machine.
pub fn status() -> Result<Vec<LabStatus>> {
    let mut rows = Vec::new();
    for name in state::labs(Path::new(state::RUN_DIR))? {
        let dir = LabDir::of(&name);
        // One lab's state (being written, being removed, damaged) is that
        // lab's row, never the whole listing's failure.
        let loaded = dir.load();
        let Ok(Some(st)) = loaded else {
            rows.push(LabStatus {
                lab: name,
                phase: match loaded {
                    Err(e) => format!("unreadable state ({e})"),
                    _ => "no state (interrupted)".into(),
                },
                scenario: String::new(),
                namespaces: 0,
                namespaces_present: 0,
                externals: 0,
                up_seconds: None,
                pid: 0,
                daemon: String::new(),
                part: None,
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
            daemon: daemon_status(&dir, st.daemon_pid),
            part: (st.placement.as_ref())
                .map(|p| format!("machine {} of {}", p.machine, p.machines)),
        });
    }
    Ok(rows)
}

/// `turbonet status --ready LAB`: `Ok` when lab `name`'s part on this
/// machine is up (the whole lab, on one machine) and its daemon answers;
/// on a lab over several machines, once its worker has recorded the part
/// as built. Why not, otherwise (a worker pod's readiness).
pub fn ready(name: &str) -> Result<()> {
    let dir = LabDir::of(name);
    let Some(st) = dir.load()? else {
        return Err(Error::Refused(format!("lab {name} is not up here")));
    };
    if st.phase != Phase::Ready {
        return Err(Error::Refused(format!("lab {name} is {}", st.phase)));
    }
    if st.placement.is_some() && crate::workers::Reach::load(&dir).is_none() {
        return Err(Error::Refused(format!(
            "lab {name}'s part here is not yet recorded as built by its worker"
        )));
    }
    api::Client::connect(&dir)?.status()?;
    Ok(())
}

/// What `status` says of a lab's daemon: what it says of itself over the
/// control API, or, when it does not answer, what the state records.
fn daemon_status(dir: &LabDir, supervisor: Option<u32>) -> String {
    match api::Client::connect(dir).and_then(|mut c| c.status()) {
        Ok(s) => {
            let mut text = format!("running (pid {})", s.daemon_pid);
            if s.restarts > 0 {
                text.push_str(&format!(", restarted {} time(s)", s.restarts));
            }
            let down = s.failed_links.len() + s.failed_nodes.len();
            if down > 0 {
                text.push_str(&format!(", {down} failed"));
            }
            text
        }
        Err(_) => match supervisor {
            Some(pid) if process::turbonet_alive(pid) => {
                format!("not answering (supervisor pid {pid})")
            }
            Some(pid) => format!("DEAD (pid {pid}): down and up again"),
            None => "not started".into(),
        },
    }
}

/// A lab that is up: its directory and its scenario.
#[derive(Debug, Clone)]
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

/// The namespace `exec` runs in for node `name`, or why it has none.
pub fn node_namespace(lab: &Lab, name: &str) -> Result<String> {
    let node = crate::lookup::node(lab, name)?;
    crate::dataplane::namespace_of(lab, node)
        .map(|(ns, _)| ns)
        .ok_or_else(|| {
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
    /// On a lab over several machines, the machine that runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<u32>,
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
            namespace: match crate::dataplane::namespace_of(lab, n) {
                Some((ns, false)) => ns,
                Some((ns, true)) => format!("{ns} (control plane)"),
                None => format!("- (in the {} switch)", lab.target),
            },
            asn: n.asn.map(|a| a.0),
            loopback: n.loopback.map(|l| l.to_string()),
            ports: n.links.len(),
            machine: None,
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
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
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
    let (ns_name, table, names) = node_table(lab, node)?;
    let rows = table.iter().map(|r| route_row(r, &names)).collect();
    Ok((ns_name, rows))
}

/// Node `node`'s kernel routes (main table, IPv4), the namespace they
/// were read in and the names of its interfaces by index.
pub fn node_table(
    lab: &Lab,
    node: &str,
) -> Result<(
    String,
    Vec<TableRoute>,
    std::collections::HashMap<u32, String>,
)> {
    let ns_name = node_namespace(lab, node)?;
    let ns = namespaces::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    let (table, names) = turbonet_host::kernel::interfaces::with_handle(&ns, async |h| {
        Ok::<_, crate::Error>((read_table(&h, &ns).await?, link_names(&h).await?))
    })?;
    Ok((ns_name, table, names))
}

/// Where node `node` sends a packet for `to`, as its kernel says, and its
/// interfaces' names by index.
pub fn node_lookup(
    lab: &Lab,
    node: &str,
    to: std::net::Ipv4Addr,
) -> Result<(
    turbonet_host::kernel::table::Lookup,
    std::collections::HashMap<u32, String>,
)> {
    let ns_name = node_namespace(lab, node)?;
    let ns = namespaces::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    turbonet_host::kernel::interfaces::with_handle(&ns, async |h| {
        Ok((
            turbonet_host::kernel::table::lookup(&h, &ns, to).await?,
            link_names(&h).await?,
        ))
    })
}

/// The ports of node `node`, by name.
pub fn node_ports(
    lab: &Lab,
    node: &str,
) -> Result<std::collections::HashMap<String, turbonet_host::kernel::interfaces::PortState>> {
    let ns_name = node_namespace(lab, node)?;
    let ns = namespaces::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    turbonet_host::kernel::interfaces::with_handle(&ns, async |h| {
        turbonet_host::kernel::interfaces::port_states(&h).await
    })
    .map_err(Into::into)
}

fn route_row(r: &TableRoute, names: &std::collections::HashMap<u32, String>) -> RouteRow {
    use rtnetlink::packet_route::route::RouteProtocol;
    let ifname = |i: u32| names.get(&i).cloned().unwrap_or_else(|| format!("if{i}"));
    RouteRow {
        prefix: r.prefix.to_string(),
        nexthops: r
            .hops
            .iter()
            .map(|h| {
                let down = if h.down { " (down)" } else { "" };
                match h.via {
                    Some(v) => format!("via {v} dev {}{down}", ifname(h.ifindex)),
                    None => format!("dev {}{down}", ifname(h.ifindex)),
                }
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

/// One link, as `link show` shows it: the parameters in force (what `link
/// set` changed included), the scenario's, the engine that carries it and
/// per-direction counters, as the lab's daemon reports them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkShow {
    /// Its name.
    pub link: String,
    /// The engine that carries it.
    pub engine: String,
    /// Why that engine.
    pub why: String,
    /// Whether it is down (failed, or a node at its end is).
    pub down: bool,
    /// Its parameters now.
    pub params: LinkParams,
    /// The scenario's.
    pub scenario: LinkParams,
    /// Per-direction counters.
    pub directions: Vec<DirectionView>,
    /// The filters at its ports.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<crate::dataplane::netns::filters::FilterCounters>,
}

/// One direction of a link and its counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionView {
    /// Where frames come from.
    pub from: String,
    /// Where they go.
    pub to: String,
    /// What the engine counted.
    #[serde(flatten)]
    pub counters: turbonet_injectors::Counters,
    /// What this machine, not the link's model, did to its frames.
    #[serde(flatten)]
    pub shortfall: Shortfall,
}

/// `turbonet link show [LINK]`: asks the lab's daemon.
pub fn link_show(running: &Running, only: Option<&str>) -> Result<Vec<LinkShow>> {
    Ok(read_links(&mut api::Client::connect(&running.dir)?, only)?.1)
}

/// Every link (or `only` one) as the daemon behind `client` reports it, and
/// when it read their counters (Unix seconds).
pub fn read_links(client: &mut api::Client, only: Option<&str>) -> Result<(f64, Vec<LinkShow>)> {
    let response = client.list_links(only)?;
    let at = response.counted_unix;
    let links = response
        .links
        .into_iter()
        .map(|l| {
            Ok(LinkShow {
                params: api::params_from_proto(&l.params.unwrap_or_default())?,
                scenario: api::params_from_proto(&l.scenario.unwrap_or_default())?,
                filters: l
                    .filters
                    .into_iter()
                    .map(|f| crate::dataplane::netns::filters::FilterCounters {
                        name: f.name,
                        node: f.node,
                        port: f.port,
                        link: l.name.clone(),
                        hook: f.hook,
                        kind: f.kind,
                        seen: f.seen,
                        dropped: f.dropped,
                    })
                    .collect(),
                link: l.name,
                engine: l.engine,
                why: l.engine_reason,
                down: l.down,
                directions: l
                    .directions
                    .into_iter()
                    .map(|d| {
                        let (counters, shortfall) =
                            api::counters_from_proto(&d.counters.unwrap_or_default());
                        DirectionView {
                            from: d.from,
                            to: d.to,
                            counters,
                            shortfall,
                        }
                    })
                    .collect(),
            })
        })
        .collect::<Result<_>>()?;
    Ok((at, links))
}

/// `turbonet events [--follow]`: every event so far, in order, handed to
/// `each`; with `follow`, then each new one as it happens, until `each`
/// returns `false`.
pub fn events(
    running: &Running,
    follow: bool,
    each: impl FnMut(crate::events::LoggedEvent) -> bool,
) -> Result<()> {
    Ok(api::Client::connect(&running.dir)?.events(follow, each)?)
}

/// What `turbonet snapshot` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotWritten {
    /// The directory.
    pub dir: std::path::PathBuf,
    /// Switches whose forwarding table it holds, and their routes.
    pub fibs: usize,
    /// Routes in them all.
    pub routes: usize,
    /// Built-in agents whose RIBs it holds.
    pub ribs: usize,
    /// Routes in their Adj-RIBs-In.
    pub received: usize,
    /// Configuration files of FRR and BIRD.
    pub configs: usize,
    /// Links and nodes down.
    pub down: usize,
}

/// `turbonet snapshot DIR`: asks the daemon for the fabric as it stands
/// and writes `DIR/snapshot.json` and the routers' configurations under
/// `DIR/configs/`. `DIR` must be new or empty.
pub fn snapshot(running: &Running, dir: &std::path::Path) -> Result<SnapshotWritten> {
    let response = api::Client::connect(&running.dir)?.snapshot()?;
    write_snapshot(dir, &response)
}

/// Writes the snapshot the daemon sent (`response`) into `dir`.
pub fn write_snapshot(
    dir: &std::path::Path,
    response: &api::proto::SnapshotResponse,
) -> Result<SnapshotWritten> {
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Error::Invalid(format!(
            "{} is not empty: give a new directory for the snapshot",
            dir.display()
        )));
    }
    let value: serde_json::Value = serde_json::from_str(&response.json)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for file in &response.files {
        // Paths come from the daemon as `configs/SWITCH/FILE`: nothing may
        // land outside DIR.
        let relative = std::path::Path::new(&file.path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(Error::Failed(format!(
                "the daemon sent a file path {}",
                file.path
            )));
        }
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &file.text).with_context(|| format!("writing {}", path.display()))?;
    }
    let index = dir.join("snapshot.json");
    std::fs::write(&index, &response.json)
        .with_context(|| format!("writing {}", index.display()))?;
    let count = |v: &serde_json::Value| v.as_array().map_or(0, Vec::len);
    let objects = |key: &str| value[key].as_object().cloned().unwrap_or_default();
    Ok(SnapshotWritten {
        dir: dir.to_path_buf(),
        fibs: objects("fib").len(),
        routes: objects("fib").values().map(count).sum(),
        ribs: objects("rib").len(),
        received: objects("rib")
            .values()
            .flat_map(|r| r["adj_rib_in"].as_array().cloned().unwrap_or_default())
            .map(|a| count(&a["routes"]))
            .sum(),
        configs: response.files.len(),
        down: count(&value["failures"]["links"]) + count(&value["failures"]["nodes"]),
    })
}
