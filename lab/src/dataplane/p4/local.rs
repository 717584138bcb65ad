//! The kernel side of labs whose P4 switches run on this machine (the soft
//! switch, BMv2): a namespace per host, a namespace per switch, and one
//! veth per host link between them (the host's port, with the host's MAC,
//! and the switch's `p<port>`). Cables the switch cannot emulate itself
//! (BMv2's) are veth pairs between its ports. Hosts get their addresses
//! and routes as on `netns`; everything between the host ports is the
//! switches'.

use std::time::Duration;

use crate::bail;
use crate::err;
use crate::error::{Context, Result};
use turbonet_routing::Route;
use turbonet_topo::mapper::{Mapping, PortKind};
use turbonet_topo::{Lab, Node, NodeId};

use super::entries::host_mac;
use super::soft;
use turbonet_p4::Client;

use turbonet_host::kernel::{Address, KernelRoute, NamespaceSpec, Ns, PerNs, Veth, VethEnd};

/// The namespaces of a lab whose switches run here, as created.
#[derive(Debug)]
pub struct LocalNamespaces {
    /// Every host's, in node order.
    pub hosts: Vec<(NodeId, Ns)>,
    /// Every physical switch's, by its name in the mapping.
    pub switches: Vec<(String, Ns)>,
}

impl LocalNamespaces {
    fn host(&self, id: NodeId) -> Result<Ns> {
        self.hosts
            .iter()
            .find(|(h, _)| *h == id)
            .map(|(_, ns)| *ns)
            .ok_or_else(|| err!("node {} has no namespace", id.0))
    }

    /// Physical switch `name`'s namespace.
    pub fn switch(&self, name: &str) -> Result<Ns> {
        self.switches
            .iter()
            .find(|(s, _)| s == name)
            .map(|(_, ns)| *ns)
            .ok_or_else(|| err!("switch {name} has no namespace"))
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
                    crate::names::bmv2_namespace(&lab.name, &s.name),
                )
            })
            .collect(),
        _ => vec![(
            soft::SWITCH.to_owned(),
            crate::names::soft_namespace(&lab.name),
        )],
    }
}

/// Names of the namespaces such a lab creates: hosts, switches, and with
/// BGP the switches' control planes.
pub fn namespace_names(lab: &Lab) -> Vec<String> {
    let mut names: Vec<String> = lab
        .fabric
        .hosts()
        .map(|h| crate::names::node_namespace(&lab.name, &h.name))
        .chain(local_switches(lab).into_iter().map(|(_, ns)| ns))
        .collect();
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        names.extend(super::cpu::namespace_names(lab));
    }
    names
}

/// The namespaces to create, in the order of [`namespace_names`]: hosts
/// with their sysctls, the switches' (silent: IPv6 off), and with BGP the
/// switches' control planes.
pub fn namespace_specs(lab: &Lab) -> Vec<NamespaceSpec> {
    let silent = || {
        crate::dataplane::SILENT_SYSCTLS
            .iter()
            .map(|(k, v)| (*k, (*v).to_owned()))
            .collect()
    };
    let mut specs: Vec<NamespaceSpec> = lab
        .fabric
        .hosts()
        .map(|h| NamespaceSpec {
            name: crate::names::node_namespace(&lab.name, &h.name),
            // Hosts alone: their kernels spell out next hops as usual.
            sysctls: crate::dataplane::netns::node_sysctls(lab, h, false, true),
            for_user: true,
        })
        .chain(
            local_switches(lab)
                .into_iter()
                .map(|(_, name)| NamespaceSpec {
                    name,
                    sysctls: silent(),
                    for_user: false,
                }),
        )
        .collect();
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        specs.extend(super::cpu::namespace_specs(lab));
    }
    specs
}

/// Which of the namespaces `created` (in the order of
/// [`namespace_specs`]) are the hosts' and the switches'.
pub fn local_namespaces(lab: &Lab, created: &[Ns]) -> LocalNamespaces {
    let hosts: Vec<NodeId> = lab.fabric.hosts().map(|h| h.id).collect();
    let switches = local_switches(lab);
    LocalNamespaces {
        switches: switches
            .into_iter()
            .map(|(name, _)| name)
            .zip(created[hosts.len()..].iter().copied())
            .collect(),
        hosts: hosts.into_iter().zip(created.iter().copied()).collect(),
    }
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
                .ok_or_else(|| err!("mapping names an unknown link {}", vp.link))?;
            let end = link
                .ends
                .iter()
                .find(|e| !fabric.node(e.node).role.is_switch())
                .ok_or_else(|| err!("host link {} has no host end", link.name))?;
            let host = fabric.node(end.node);
            Ok(HostPort {
                host,
                ifname: &end.ifname,
                ifindex: crate::names::port_index(lab, host.id, link.id)
                    .expect("a link's end is a port of its node"),
                switch: &vp.switch,
                port: vp.port,
                mtu: link.params.mtu.map(|m| u32::from(m.0)),
            })
        })
        .collect()
}

/// Every host port: a veth from the host's namespace (its planned name,
/// ifindex and MAC) to `p<port>` in its switch's namespace.
pub fn host_veths(lab: &Lab, mapping: &Mapping, ns: &LocalNamespaces) -> Result<Vec<Veth>> {
    host_ports(lab, mapping)?
        .into_iter()
        .map(|p| {
            Ok(Veth {
                what: format!("{}: port {}", p.host.name, p.ifname),
                local: VethEnd {
                    ns: ns.host(p.host.id)?,
                    name: p.ifname.to_owned(),
                    ifindex: p.ifindex,
                    mac: Some(host_mac(p.host.id)),
                },
                peer: VethEnd {
                    ns: ns.switch(p.switch)?,
                    name: soft::port_ifname(p.port),
                    ifindex: soft::port_ifindex(p.port),
                    mac: None,
                },
                mtu: p.mtu,
                peer_up: false,
            })
        })
        .collect()
}

/// The loopback and inter-switch cables as veth pairs between the
/// switches' ports (for switches that cannot emulate them, as BMv2).
pub fn cable_veths(mapping: &Mapping, ns: &LocalNamespaces) -> Result<Vec<Veth>> {
    mapping
        .cables
        .iter()
        .map(|cable| {
            let (a, b) = (&cable.a, &cable.b);
            let end = |ns, port| VethEnd {
                ns,
                name: soft::port_ifname(port),
                ifindex: soft::port_ifindex(port),
                mac: None,
            };
            Ok(Veth {
                what: format!("cable {a} <-> {b}"),
                local: end(ns.switch(&a.switch)?, a.port),
                peer: end(ns.switch(&b.switch)?, b.port),
                mtu: None,
                peer_up: false,
            })
        })
        .collect()
}

/// What `configure` asks: interfaces up, offloads off, addresses.
#[derive(Debug, Default)]
pub struct Configure {
    /// Interfaces to bring up, per namespace.
    pub up: PerNs<u32>,
    /// Interfaces whose offloads go off, per namespace.
    pub offloads: PerNs<String>,
    /// The hosts' addresses.
    pub addresses: PerNs<Address>,
}

/// The switches' ports (host ports, and cable ends when `cables`) and
/// every `lo` come up, offloads go off on both ends of every host port and
/// cable (the switches read and write whole frames), and the hosts get
/// their addresses.
pub fn configure(
    lab: &Lab,
    mapping: &Mapping,
    ns: &LocalNamespaces,
    cables: bool,
) -> Result<Configure> {
    let ports = host_ports(lab, mapping)?;
    let mut plan = Configure::default();
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
        plan.up.push((
            *switch_ns,
            std::iter::once(1)
                .chain(mine.iter().map(|&p| soft::port_ifindex(p)))
                .collect(),
        ));
        plan.offloads.push((
            *switch_ns,
            mine.iter().map(|&p| soft::port_ifname(p)).collect(),
        ));
    }
    for (id, host_ns) in &ns.hosts {
        let node = lab.fabric.node(*id);
        plan.up.push((*host_ns, vec![1]));
        plan.offloads.push((
            *host_ns,
            ports
                .iter()
                .filter(|p| p.host.id == *id)
                .map(|p| p.ifname.to_owned())
                .collect(),
        ));
        plan.addresses
            .push((*host_ns, crate::dataplane::netns::node_addresses(lab, node)));
    }
    Ok(plan)
}

/// Every host's ports, to wait for carrier on.
pub fn carrier_ports(lab: &Lab, ns: &LocalNamespaces) -> Vec<(Ns, String, usize)> {
    ns.hosts
        .iter()
        .map(|(id, host_ns)| {
            let node = lab.fabric.node(*id);
            (*host_ns, node.name.clone(), node.links.len())
        })
        .collect()
}

/// Every host's routes (the switches' are the pipeline's).
pub fn host_routes(
    lab: &Lab,
    ns: &LocalNamespaces,
    routes: &[Vec<Route>],
) -> Result<PerNs<KernelRoute>> {
    ns.hosts
        .iter()
        .map(|(id, host_ns)| {
            let node = lab.fabric.node(*id);
            let mine = crate::dataplane::kernel_routes::node_kernel_routes(
                lab,
                node,
                &routes[id.0 as usize],
                rtnetlink::packet_route::route::RouteProtocol::Static,
                None,
            )?;
            Ok((*host_ns, mine))
        })
        .collect()
}

/// The Unix socket a lab's soft switch serves P4Runtime on: in the lab's
/// root-only directory, itself root-only (mode 0600), so only root — the
/// lab's daemon, `up` — can be its controller.
pub fn socket_path(dir: &crate::state::LabDir) -> std::path::PathBuf {
    dir.path().join("softswitch.sock")
}

/// Connects to the lab's soft switch on its Unix socket and becomes its
/// primary controller with `election_id`.
pub async fn connect_switch(dir: &crate::state::LabDir, election_id: u128) -> Result<Client> {
    let path = socket_path(dir);
    let channel = {
        let socket = path.clone();
        tonic::transport::Endpoint::from_static("http://softswitch.local")
            .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                let path = socket.clone();
                async move {
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                        tokio::net::UnixStream::connect(path).await?,
                    ))
                }
            }))
            .await
            .with_context(|| format!("connecting to the soft switch at {}", path.display()))?
    };
    Ok(Client::over(
        channel,
        &format!("unix:{}", path.display()),
        soft::DEVICE_ID,
        election_id,
    )
    .await?)
}

/// Starts the lab's soft switch (`turbonet softswitch`, detached, its
/// output in `softswitch.log`) on its Unix socket, its ports in the lab's
/// soft namespace. Returns its pid once it accepts connections; fails with
/// its own output if it exits first.
pub fn start_switch(lab: &Lab, dir: &crate::state::LabDir) -> Result<u32> {
    let log_path = dir.path().join("softswitch.log");
    let socket = socket_path(dir);
    let listen = format!("unix:{}", socket.display());
    let device_id = soft::DEVICE_ID.to_string();
    let netns = crate::names::soft_namespace(&lab.name);
    let args: [&std::ffi::OsStr; 7] = [
        "softswitch".as_ref(),
        "--listen".as_ref(),
        listen.as_ref(),
        "--device-id".as_ref(),
        device_id.as_ref(),
        "--netns".as_ref(),
        netns.as_ref(),
    ];
    let mut child =
        turbonet_host::process::spawn_self(&args, &log_path).context("starting the soft switch")?;
    let pid = child.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            return Ok(pid);
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
