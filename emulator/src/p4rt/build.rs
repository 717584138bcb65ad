//! The kernel side of labs whose P4 switches run on this machine (the soft
//! switch, BMv2): a namespace per host, a namespace per switch, and one
//! veth per host link between them (the host's port, with the host's MAC,
//! and the switch's `p<port>`). Cables the switch cannot emulate itself
//! (BMv2's) are veth pairs between its ports. Hosts get their addresses
//! and routes as on `netns`; everything between the host ports is the
//! switches'.

use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures::TryStreamExt;
use rtnetlink::LinkUnspec;
use rtnetlink::LinkVeth;
use rtnetlink::packet_route::link::{InfoData, InfoVeth, LinkFlags};
use turbonet_routing::Route;
use turbonet_topo::mapper::{Mapping, PortKind};
use turbonet_topo::{Lab, Node, NodeId};

use super::entries::host_mac;
use super::soft;
use crate::fabric::{self, NodeNs};
use crate::{engine, netns};

/// The namespaces of a lab whose switches run here.
#[derive(Debug)]
pub struct LocalNamespaces {
    /// Every host's, in node order.
    pub hosts: Vec<(NodeId, NodeNs)>,
    /// Every physical switch's, by its name in the mapping.
    pub switches: Vec<(String, NodeNs)>,
}

impl LocalNamespaces {
    fn host(&self, id: NodeId) -> Result<&NodeNs> {
        self.hosts
            .iter()
            .find(|(h, _)| *h == id)
            .map(|(_, ns)| ns)
            .ok_or_else(|| anyhow!("node {} has no namespace", id.0))
    }

    /// Physical switch `name`'s namespace.
    pub fn switch(&self, name: &str) -> Result<&NodeNs> {
        self.switches
            .iter()
            .find(|(s, _)| s == name)
            .map(|(_, ns)| ns)
            .ok_or_else(|| anyhow!("switch {name} has no namespace"))
    }
}

/// The physical switches that run on this machine, with their namespace
/// names: the soft switch, or a `p4rt` lab's BMv2 switches.
pub fn local_switches(lab: &Lab) -> Vec<(String, String)> {
    match &lab.p4rt {
        Some(p4rt) if lab.target == turbonet_topo::Target::P4rt => p4rt
            .switches
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    super::switches::namespace(&lab.name, &s.name),
                )
            })
            .collect(),
        _ => vec![(soft::SWITCH.to_owned(), soft::namespace(&lab.name))],
    }
}

/// Names of the namespaces such a lab creates: hosts, switches, and with
/// BGP the switches' control planes.
pub fn namespace_names(lab: &Lab) -> Vec<String> {
    let mut names: Vec<String> = lab
        .fabric
        .hosts()
        .map(|h| fabric::ns_name(&lab.name, &h.name))
        .chain(local_switches(lab).into_iter().map(|(_, ns)| ns))
        .collect();
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        names.extend(super::cpu::namespace_names(lab));
    }
    names
}

/// Creates the hosts' namespaces and the switches', with their sysctls.
pub fn create_namespaces(lab: &Lab, threads: usize) -> Result<LocalNamespaces> {
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        super::cpu::create_namespaces(lab, threads)?;
    }
    let switches = local_switches(lab);
    let names: Vec<String> = lab
        .fabric
        .hosts()
        .map(|h| fabric::ns_name(&lab.name, &h.name))
        .chain(switches.iter().map(|(_, ns)| ns.clone()))
        .collect();
    let hosts: Vec<&Node> = lab.fabric.hosts().collect();
    let results = netns::create_batch(&names, threads, &|name: &str| {
        match hosts
            .iter()
            .find(|h| fabric::ns_name(&lab.name, &h.name) == name)
        {
            Some(host) => {
                for (key, value) in fabric::node_sysctls(lab, host, false) {
                    netns::write_sysctl(key, &value)?;
                }
            }
            None => {
                for (key, value) in fabric::ENGINE_SYSCTLS {
                    netns::write_sysctl(key, value)?;
                }
            }
        }
        Ok((netns::open_current()?, netns::route_socket()?))
    });
    let mut all = Vec::with_capacity(results.len());
    for (name, result) in names.iter().zip(results) {
        let (ns, socket) = result.with_context(|| format!("creating namespace {name}"))?;
        all.push(NodeNs::new(ns, socket));
    }
    let switch_ns = all.split_off(hosts.len());
    Ok(LocalNamespaces {
        hosts: hosts.iter().map(|h| h.id).zip(all).collect(),
        switches: switches
            .into_iter()
            .map(|(name, _)| name)
            .zip(switch_ns)
            .collect(),
    })
}

/// One host port: the host, its interface and ifindex, and the physical
/// switch and port.
struct HostPort<'a> {
    host: &'a Node,
    ifname: &'a str,
    ifindex: u32,
    switch: &'a str,
    port: u32,
    mtu: Option<u32>,
}

fn host_ports<'a>(lab: &'a Lab, mapping: &'a Mapping) -> Result<Vec<HostPort<'a>>> {
    let fabric = &lab.fabric;
    mapping
        .ports
        .iter()
        .filter(|vp| vp.kind == PortKind::Host)
        .map(|vp| {
            let link = fabric
                .link_by_name(&vp.link)
                .ok_or_else(|| anyhow!("mapping names an unknown link {}", vp.link))?;
            let end = link
                .ends
                .iter()
                .find(|e| !fabric.node(e.node).role.is_switch())
                .ok_or_else(|| anyhow!("host link {} has no host end", link.name))?;
            let host = fabric.node(end.node);
            Ok(HostPort {
                host,
                ifname: &end.ifname,
                ifindex: fabric::port_index(lab, host.id, link.id)
                    .expect("a link's end is a port of its node"),
                switch: &vp.switch,
                port: vp.port,
                mtu: link.params.mtu.map(|m| u32::from(m.0)),
            })
        })
        .collect()
}

/// Creates every host port: a veth from the host's namespace (its planned
/// name, ifindex and MAC) to `p<port>` in its switch's namespace. Returns
/// how many.
pub async fn create_links(lab: &Lab, mapping: &Mapping, ns: &LocalNamespaces) -> Result<usize> {
    let ports = host_ports(lab, mapping)?;
    let count = ports.len();
    fabric::per_node(ports, |p| async move {
        let switch_fd = ns.switch(p.switch)?.ns.as_raw_fd();
        let handle = ns.host(p.host.id)?.handle()?;
        let mut peer = LinkUnspec::new_with_index(soft::port_ifindex(p.port))
            .name(soft::port_ifname(p.port))
            .setns_by_fd(switch_fd);
        let mut veth = LinkVeth::new(p.ifname, &soft::port_ifname(p.port))
            .index(p.ifindex)
            .address(host_mac(p.host.id).to_vec())
            .up();
        if let Some(mtu) = p.mtu {
            peer = peer.mtu(mtu);
            veth = veth.mtu(mtu);
        }
        let veth = veth
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
            .build();
        handle
            .link()
            .add(veth)
            .execute()
            .await
            .with_context(|| format!("{}: creating port {}", p.host.name, p.ifname))
    })
    .await?;
    Ok(count)
}

/// Creates the loopback and inter-switch cables as veth pairs between the
/// switches' ports (for switches that cannot emulate them, as BMv2).
/// Returns how many.
pub async fn create_cables(mapping: &Mapping, ns: &LocalNamespaces) -> Result<usize> {
    for cable in &mapping.cables {
        let (a, b) = (&cable.a, &cable.b);
        let handle = ns.switch(&a.switch)?.handle()?;
        let peer = LinkUnspec::new_with_index(soft::port_ifindex(b.port))
            .name(soft::port_ifname(b.port))
            .setns_by_fd(ns.switch(&b.switch)?.ns.as_raw_fd());
        let veth = LinkVeth::new(&soft::port_ifname(a.port), &soft::port_ifname(b.port))
            .index(soft::port_ifindex(a.port))
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
            .build();
        handle
            .link()
            .add(veth)
            .execute()
            .await
            .with_context(|| format!("cable {a} <-> {b}"))?;
    }
    Ok(mapping.cables.len())
}

/// Brings the switches' ports (host ports, and cable ends when `cables`)
/// and every `lo` up, turns offloads off on both ends of every host port
/// and cable (the switches read and write whole frames), and addresses the
/// hosts. Returns how many addresses.
pub async fn configure(
    lab: &Lab,
    mapping: &Mapping,
    ns: &LocalNamespaces,
    cables: bool,
) -> Result<usize> {
    let ports = host_ports(lab, mapping)?;
    for (name, switch_ns) in &ns.switches {
        let mut mine: Vec<u32> = ports
            .iter()
            .filter(|p| p.switch == name)
            .map(|p| p.port)
            .collect();
        if cables {
            mine.extend(
                mapping
                    .cables
                    .iter()
                    .flat_map(|c| [&c.a, &c.b])
                    .filter(|end| &end.switch == name)
                    .map(|end| end.port),
            );
        }
        let handle = switch_ns.handle()?;
        fabric::bring_up(
            &handle,
            [1].into_iter()
                .chain(mine.iter().map(|&p| soft::port_ifindex(p))),
            name,
        )
        .await?;
        let names: Vec<String> = mine.iter().map(|&p| soft::port_ifname(p)).collect();
        netns::in_namespace(&switch_ns.ns, || {
            names
                .iter()
                .try_for_each(|n| engine::packet::disable_offloads(n))
        })
        .with_context(|| format!("switch {name}: turning offloads off"))?;
    }
    let counts = fabric::per_node(&ns.hosts, |(id, host_ns)| {
        let ports = &ports;
        async move {
            let node = lab.fabric.node(*id);
            let handle = host_ns.handle()?;
            fabric::bring_up(&handle, [1], &node.name).await?;
            let mine: Vec<&str> = ports
                .iter()
                .filter(|p| p.host.id == *id)
                .map(|p| p.ifname)
                .collect();
            netns::in_namespace(&host_ns.ns, || {
                mine.iter()
                    .try_for_each(|n| engine::packet::disable_offloads(n))
            })
            .with_context(|| format!("{}: turning offloads off", node.name))?;
            fabric::add_addresses(lab, node, &handle).await
        }
    })
    .await?;
    Ok(counts.into_iter().sum())
}

/// Waits until every host port has carrier. Returns how many ports.
pub async fn wait_links_up(lab: &Lab, ns: &LocalNamespaces, timeout: Duration) -> Result<usize> {
    let deadline = tokio::time::Instant::now() + timeout;
    let total: usize = ns
        .hosts
        .iter()
        .map(|(id, _)| lab.fabric.node(*id).links.len())
        .sum();
    loop {
        let mut waiting = None;
        for (id, host_ns) in &ns.hosts {
            let node = lab.fabric.node(*id);
            let links: Vec<_> = host_ns
                .handle()?
                .link()
                .get()
                .execute()
                .try_collect()
                .await?;
            let up = links
                .iter()
                .filter(|l| l.header.index >= 2)
                .filter(|l| l.header.flags.contains(LinkFlags::LowerUp))
                .count();
            if up < node.links.len() {
                waiting = Some(node);
                break;
            }
        }
        let Some(node) = waiting else {
            return Ok(total);
        };
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{}: ports still without carrier after {timeout:?}",
                node.name
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Installs every host's routes (the switches' are the pipeline's).
pub async fn install_routes(
    lab: &Lab,
    ns: &LocalNamespaces,
    routes: &[Vec<Route>],
) -> Result<usize> {
    let counts = fabric::per_node(&ns.hosts, |(id, host_ns)| async move {
        let node = lab.fabric.node(*id);
        let handle = host_ns.handle()?;
        fabric::install_node_routes(lab, &handle, node, &routes[id.0 as usize], false).await
    })
    .await?;
    Ok(counts.into_iter().sum())
}

/// Where the soft switch writes the address its P4Runtime server listens
/// on.
pub fn address_path(dir: &crate::state::LabDir) -> std::path::PathBuf {
    dir.path().join("softswitch.addr")
}

/// The soft switch's P4Runtime address, as it wrote it.
pub fn address(dir: &crate::state::LabDir) -> Result<String> {
    let path = address_path(dir);
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_owned())
        .with_context(|| format!("reading the soft switch's address from {}", path.display()))
}

/// Starts the lab's soft switch (`turbonet softswitch`, detached, its
/// output in `softswitch.log`) on a free local port, its ports in the
/// lab's soft namespace. Returns its pid and, once it accepts
/// connections, its P4Runtime address; fails with its own output if it
/// exits first.
pub fn start_switch(lab: &Lab, dir: &crate::state::LabDir) -> Result<(u32, String)> {
    let log_path = dir.path().join("softswitch.log");
    let addr_path = address_path(dir);
    let device_id = soft::DEVICE_ID.to_string();
    let netns = soft::namespace(&lab.name);
    let args: [&std::ffi::OsStr; 9] = [
        "softswitch".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--device-id".as_ref(),
        device_id.as_ref(),
        "--netns".as_ref(),
        netns.as_ref(),
        "--address-file".as_ref(),
        addr_path.as_os_str(),
    ];
    let mut child =
        crate::daemon::spawn_detached(&args, &log_path).context("starting the soft switch")?;
    let pid = child.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(addr) = address(dir) {
            return Ok((pid, addr));
        }
        if let Some(status) = child.try_wait()? {
            let output = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!(
                "the soft switch exited ({status}) before it served P4Runtime: {}",
                output.trim()
            );
        }
        if std::time::Instant::now() >= deadline {
            // Not recorded in the lab's state yet: nothing else would stop it.
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the soft switch (pid {pid}) did not serve P4Runtime within 15 s; see {}",
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
