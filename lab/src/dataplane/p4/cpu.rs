//! The control plane of virtual switches that run in a P4 switch, reached
//! through its CPU port (P4Runtime's StreamChannel, §16), so that BGP
//! agents speak over the emulated links.
//!
//! Every virtual switch gets a control-plane namespace (`tn-<lab>-<switch>`,
//! as on `netns`) with a TUN interface per port, named and addressed as the
//! switch's port, and its loopback on `lo`. The pipeline punts what is
//! addressed to a virtual switch (its `local` table) as a PacketIn carrying
//! the virtual switch and ingress port: the IP packet is written to that
//! port's TUN. What the namespace's kernel sends out of a TUN goes back
//! into the pipeline as a PacketOut through the same virtual port, in an
//! Ethernet frame from the switch's MAC to the neighbour's, and so crosses
//! the link with its delay and loss. The built-in agents run in those
//! namespaces unchanged; their routes go to the pipeline's tables.

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::OwnedFd;

use crate::bail;
use crate::err;
use crate::error::{Context, Result};
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;
use turbonet_p4::Pipeline;
use turbonet_p4::p4::v1::{
    PacketMetadata, PacketOut, StreamMessageRequest, stream_message_request,
    stream_message_response,
};
use turbonet_topo::mapper::Mapping;
use turbonet_topo::{Lab, Role};

use super::entries::{self, host_mac, switch_mac};
use turbonet_host::namespaces;
use turbonet_p4::PacketIo;

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];

/// Sysctls of a control-plane namespace: it terminates, never forwards.
const CONTROL_SYSCTLS: [(&str, &str); 5] = [
    ("net/ipv4/ip_forward", "0"),
    ("net/ipv4/conf/all/rp_filter", "0"),
    ("net/ipv4/conf/default/rp_filter", "0"),
    ("net/ipv6/conf/all/disable_ipv6", "1"),
    ("net/ipv6/conf/default/disable_ipv6", "1"),
];

/// Names of the control-plane namespaces: one per switch.
pub fn namespace_names(lab: &Lab) -> Vec<String> {
    lab.fabric
        .switches()
        .map(|n| crate::names::node_namespace(&lab.name, &n.name))
        .collect()
}

/// The control-plane namespaces to create, with their sysctls (`lo` comes
/// up with [`CpuPorts::open`]).
pub fn namespace_specs(lab: &Lab) -> Vec<turbonet_host::kernel::NamespaceSpec> {
    namespace_names(lab)
        .into_iter()
        .map(|name| turbonet_host::kernel::NamespaceSpec {
            name,
            sysctls: CONTROL_SYSCTLS
                .iter()
                .map(|(k, v)| (*k, (*v).to_owned()))
                .collect(),
            // A switch's control plane: the node a user enters.
            for_user: true,
        })
        .collect()
}

/// One virtual port's TUN.
struct CpuPort {
    tun: AsyncFd<OwnedFd>,
    vswitch: u64,
    vport: u64,
    /// Ethernet header of the frames it sends: neighbour, switch, IPv4.
    header: [u8; 14],
}

/// The metadata ids of the controller headers.
#[derive(Debug, Clone, Copy)]
struct MetaIds {
    in_vswitch: u32,
    in_vport: u32,
    out_vswitch: u32,
    out_vport: u32,
}

impl MetaIds {
    fn of(pipeline: &Pipeline) -> MetaIds {
        let ([in_vswitch, in_vport], [out_vswitch, out_vport]) =
            (pipeline.packet_in, pipeline.packet_out);
        MetaIds {
            in_vswitch,
            in_vport,
            out_vswitch,
            out_vport,
        }
    }
}

/// The CPU ports of every virtual switch of one physical switch.
pub struct CpuPorts {
    ports: Vec<CpuPort>,
    by_id: HashMap<(u64, u64), usize>,
    meta: MetaIds,
}

impl std::fmt::Debug for CpuPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuPorts")
            .field("ports", &self.ports.len())
            .finish()
    }
}

impl CpuPorts {
    /// Creates a TUN per port of every virtual switch on physical switch
    /// `switch`, in the switch's control-plane namespace, addressed as the
    /// port, and the switch's loopback.
    pub async fn open(
        lab: &Lab,
        mapping: &Mapping,
        switch: &str,
        pipeline: &Pipeline,
    ) -> Result<CpuPorts> {
        let meta = MetaIds::of(pipeline);
        let vswitches = entries::vswitches(mapping, switch);
        let vports: HashMap<(&str, &str), u64> = entries::vports(mapping, switch)
            .into_iter()
            .map(|(id, vp)| ((vp.virtual_switch.as_str(), vp.virtual_port.as_str()), id))
            .collect();
        let mut ports = Vec::new();
        for node in lab.fabric.switches() {
            let Some(&vswitch) = vswitches.get(node.name.as_str()) else {
                continue;
            };
            let ns_name = crate::names::node_namespace(&lab.name, &node.name);
            let ns = namespaces::open(&ns_name).with_context(|| format!("opening {ns_name}"))?;
            let names: Vec<String> = lab
                .fabric
                .ports(node.id)
                .map(|(_, local, _)| local.ifname.clone())
                .collect();
            let tuns = namespaces::in_namespace(&ns, || {
                names
                    .iter()
                    .map(|n| {
                        let fd = turbonet_packetio::tun::open(n)?;
                        let index = nix::net::if_::if_nametoindex(n.as_str())?;
                        Ok((fd, index))
                    })
                    .collect::<std::io::Result<Vec<_>>>()
            })
            .with_context(|| format!("{}: creating its CPU ports", node.name))?;
            let handle = turbonet_host::kernel::connect(namespaces::in_namespace(
                &ns,
                namespaces::route_socket,
            )?)?;
            let mut up = vec![1];
            if let Some(lo) = node.loopback {
                handle
                    .address()
                    .add(1, IpAddr::V4(lo), 32)
                    .execute()
                    .await
                    .with_context(|| format!("{}: loopback {lo}", node.name))?;
            }
            for ((_, local, remote), (fd, index)) in lab.fabric.ports(node.id).zip(tuns) {
                handle
                    .address()
                    .add(
                        index,
                        IpAddr::V4(local.addr.addr()),
                        local.addr.prefix_len(),
                    )
                    .execute()
                    .await
                    .with_context(|| format!("{}: address on {}", node.name, local.ifname))?;
                up.push(index);
                let vport = *vports
                    .get(&(node.name.as_str(), local.ifname.as_str()))
                    .with_context(|| {
                        format!("{}: port {} is not mapped", node.name, local.ifname)
                    })?;
                let peer = lab.fabric.node(remote.node);
                let peer_mac = if peer.role == Role::Host {
                    host_mac(peer.id)
                } else {
                    switch_mac(peer.id)
                };
                let mut header = [0u8; 14];
                header[..6].copy_from_slice(&peer_mac);
                header[6..12].copy_from_slice(&switch_mac(node.id));
                header[12..].copy_from_slice(&ETHERTYPE_IPV4);
                let tun = turbonet_host::async_fd(fd)
                    .map_err(|e| err!("registering {}: {e}", local.ifname))?;
                ports.push(CpuPort {
                    tun,
                    vswitch,
                    vport,
                    header,
                });
            }
            for index in up {
                handle
                    .link()
                    .set(rtnetlink::LinkUnspec::new_with_index(index).up().build())
                    .execute()
                    .await
                    .with_context(|| format!("{}: bringing interface {index} up", node.name))?;
            }
        }
        let by_id = ports
            .iter()
            .enumerate()
            .map(|(i, p)| ((p.vswitch, p.vport), i))
            .collect();
        Ok(CpuPorts { ports, by_id, meta })
    }

    /// Carries packets between the TUNs and the device's stream until the
    /// stream ends (on the daemon's event loop).
    pub async fn run(self, io: PacketIo) -> Result<()> {
        let (tx, mut rx) = io;
        let CpuPorts { ports, by_id, meta } = self;
        let ports: Vec<std::rc::Rc<CpuPort>> = ports.into_iter().map(std::rc::Rc::new).collect();
        for port in &ports {
            tokio::task::spawn_local(packet_outs(port.clone(), tx.clone(), meta));
        }
        while let Some(message) = rx.message().await? {
            let Some(stream_message_response::Update::Packet(packet)) = message.update else {
                continue;
            };
            let field = |id: u32| {
                packet
                    .metadata
                    .iter()
                    .find(|m| m.metadata_id == id)
                    .map(|m| turbonet_p4::bytes::decode(&m.value))
            };
            let (Some(vswitch), Some(vport)) = (field(meta.in_vswitch), field(meta.in_vport))
            else {
                continue;
            };
            let Some(&i) = by_id.get(&(vswitch, vport)) else {
                continue;
            };
            // Only IPv4 reaches a TUN (ARP is the pipeline's).
            let frame = &packet.payload;
            if frame.len() <= 14 || frame[12..14] != ETHERTYPE_IPV4 {
                continue;
            }
            // A TUN takes a whole packet or nothing; a full one drops it,
            // as a busy CPU port would.
            let _ = nix::unistd::write(ports[i].tun.get_ref(), &frame[14..]);
        }
        bail!("the switch closed its stream")
    }
}

/// Sends what the kernel writes to `port`'s TUN into the pipeline.
async fn packet_outs(
    port: std::rc::Rc<CpuPort>,
    tx: mpsc::Sender<StreamMessageRequest>,
    meta: MetaIds,
) {
    // Canonical bytestrings (§8.4): no leading zero bytes.
    let metadata = |id: u32, v: u64| {
        let bytes = v.to_be_bytes();
        let first = bytes.iter().position(|&b| b != 0).unwrap_or(7);
        PacketMetadata {
            metadata_id: id,
            value: bytes[first..].to_vec(),
        }
    };
    let mut buf = vec![0u8; 65_536];
    loop {
        let Ok(mut ready) = port.tun.readable().await else {
            return;
        };
        let read = ready
            .try_io(|fd| nix::unistd::read(fd.get_ref(), &mut buf).map_err(std::io::Error::from));
        let n = match read {
            Ok(Ok(n)) if n > 0 => n,
            Ok(Ok(_)) => return,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(Err(_)) => return,
            Err(_would_block) => continue,
        };
        // IPv4 only: the fabric is IPv4 (IPv6 is off in the namespace).
        if buf[0] >> 4 != 4 {
            continue;
        }
        let mut payload = Vec::with_capacity(14 + n);
        payload.extend_from_slice(&port.header);
        payload.extend_from_slice(&buf[..n]);
        let out = StreamMessageRequest {
            update: Some(stream_message_request::Update::Packet(PacketOut {
                payload,
                metadata: vec![
                    metadata(meta.out_vswitch, port.vswitch),
                    metadata(meta.out_vport, port.vport),
                ],
            })),
        };
        if tx.send(out).await.is_err() {
            return;
        }
    }
}
