//! Interfaces of the machine (not turbonet's): looked up, read, moved into
//! a node and back, in the namespace they live in.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, OwnedFd};

use futures::TryStreamExt;
use ipnet::Ipv4Net;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{
    InfoData, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use rtnetlink::{Handle, LinkUnspec, LinkVxlan};

use super::{External, NodeNs};
use crate::err;
use crate::error::{Context, Result};
use crate::namespaces;

/// Opens the namespace an external interface lives in: a named namespace,
/// or the one turbonet runs in.
pub fn open_ns(name: Option<&str>) -> Result<OwnedFd> {
    match name {
        Some(name) => namespaces::open(name).with_context(|| format!("opening namespace {name}")),
        None => namespaces::open_current().context("opening the current namespace"),
    }
}

/// Runs `f` with an rtnetlink handle inside namespace `ns`, on a private
/// runtime (for the synchronous parts of the lifecycle).
pub fn with_handle<T, E: From<crate::Error>>(
    ns: &OwnedFd,
    f: impl AsyncFnOnce(Handle) -> Result<T, E>,
) -> Result<T, E> {
    let socket =
        namespaces::in_namespace(ns, namespaces::route_socket).map_err(crate::Error::from)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(crate::Error::from)?;
    runtime.block_on(async {
        let handle = super::connect(socket)?;
        f(handle).await
    })
}

/// Looks an interface up by name.
pub async fn link_by_name(handle: &Handle, name: &str) -> Result<Option<LinkMessage>> {
    let mut links = handle.link().get().match_name(name.to_owned()).execute();
    match links.try_next().await {
        Ok(link) => Ok(link),
        Err(rtnetlink::Error::NetlinkError(e))
            if e.raw_code() == -(nix::errno::Errno::ENODEV as i32) =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// An interface's MTU (1500 when it does not say).
pub fn mtu_of(link: &LinkMessage) -> u32 {
    link.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Mtu(m) => Some(*m),
            _ => None,
        })
        .unwrap_or(1500)
}

/// The interface that holds address `addr`, by name, with its MTU: the
/// underlay a machine's cut links cross.
pub async fn holding(handle: &Handle, addr: Ipv4Addr) -> Result<Option<(String, u32)>> {
    let mut index = None;
    let mut addrs = handle.address().get().execute();
    while let Some(msg) = addrs.try_next().await? {
        let here = msg.attributes.iter().any(|a| {
            matches!(a, AddressAttribute::Local(IpAddr::V4(ip))
                | AddressAttribute::Address(IpAddr::V4(ip)) if *ip == addr)
        });
        if here && index.is_none() {
            index = Some(msg.header.index);
        }
    }
    let Some(index) = index else {
        return Ok(None);
    };
    let mut links = handle.link().get().match_index(index).execute();
    let Some(link) = links.try_next().await? else {
        return Ok(None);
    };
    let name = link.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(n) => Some(n.clone()),
        _ => None,
    });
    Ok(Some((
        name.unwrap_or_else(|| format!("#{index}")),
        mtu_of(&link),
    )))
}

/// Points every VXLAN device of the namespace `handle` talks to that sends
/// to `from` at `to` instead (the far machine of cut links moved); how many.
pub async fn repoint_vxlans(handle: &Handle, from: Ipv4Addr, to: Ipv4Addr) -> Result<usize> {
    let mut moved = Vec::new();
    let mut links = handle.link().get().execute();
    while let Some(link) = links.try_next().await? {
        let mut name = None;
        let mut vxlan = None;
        for a in &link.attributes {
            match a {
                LinkAttribute::IfName(n) => name = Some(n.clone()),
                LinkAttribute::LinkInfo(infos) => {
                    vxlan = infos.iter().find_map(|i| match i {
                        LinkInfo::Data(InfoData::Vxlan(v)) => Some(v),
                        _ => None,
                    });
                }
                _ => {}
            }
        }
        let Some(info) = vxlan else { continue };
        let vni = info.iter().find_map(|v| match v {
            InfoVxlan::Id(id) => Some(*id),
            _ => None,
        });
        let sends_to_from = info
            .iter()
            .any(|v| matches!(v, InfoVxlan::Group(ip) if *ip == from));
        if let (Some(name), Some(vni), true) = (name, vni, sends_to_from) {
            moved.push((name, vni));
        }
    }
    for (name, vni) in &moved {
        handle
            .link()
            .change(LinkVxlan::new(name, *vni).remote(to).build())
            .execute()
            .await
            .with_context(|| format!("pointing {name} at {to}"))?;
    }
    Ok(moved.len())
}

/// How a port stands, as a lab's link checks read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortState {
    /// Set up by its owner (`ip link set ... up`).
    pub up: bool,
    /// Its peer is up too, so frames pass (`LOWER_UP`).
    pub carrier: bool,
    /// Its MTU.
    pub mtu: u32,
}

/// Every interface of the namespace `handle` talks to, by name.
pub async fn port_states(handle: &Handle) -> Result<HashMap<String, PortState>> {
    let mut ports = HashMap::new();
    let mut links = handle.link().get().execute();
    while let Some(link) = links.try_next().await? {
        let name = link.attributes.iter().find_map(|a| match a {
            LinkAttribute::IfName(n) => Some(n.clone()),
            _ => None,
        });
        if let Some(name) = name {
            let flags = link.header.flags;
            let state = PortState {
                up: flags.contains(LinkFlags::Up),
                carrier: flags.contains(LinkFlags::LowerUp),
                mtu: mtu_of(&link),
            };
            ports.insert(name, state);
        }
    }
    Ok(ports)
}

/// The IPv4 addresses of interface `index`.
pub async fn ipv4_addrs(handle: &Handle, index: u32) -> Result<Vec<Ipv4Net>> {
    let mut out = Vec::new();
    let mut addrs = handle
        .address()
        .get()
        .set_link_index_filter(index)
        .execute();
    while let Some(msg) = addrs.try_next().await? {
        if msg.header.family != AddressFamily::Inet {
            continue;
        }
        for attr in &msg.attributes {
            if let AddressAttribute::Local(IpAddr::V4(ip))
            | AddressAttribute::Address(IpAddr::V4(ip)) = attr
            {
                if let Ok(net) = Ipv4Net::new(*ip, msg.header.prefix_len)
                    && !out.contains(&net)
                {
                    out.push(net);
                }
                break;
            }
        }
    }
    Ok(out)
}

/// Moves one external interface into its node's namespace `node`, renames
/// it, addresses it and brings it up.
pub async fn attach(ext: &External, node: &NodeNs) -> Result<()> {
    let source = open_ns(ext.from.as_deref())?;
    let socket = namespaces::in_namespace(&source, namespaces::route_socket)?;
    let source_handle = super::connect(socket)?;
    let link = link_by_name(&source_handle, &ext.interface)
        .await?
        .ok_or_else(|| err!("external interface {} disappeared", ext.interface))?;
    let node_handle = node.handle()?;
    source_handle
        .link()
        .set(
            LinkUnspec::new_with_index(link.header.index)
                .down()
                .setns_by_fd(node.ns.as_raw_fd())
                .build(),
        )
        .execute()
        .await
        .with_context(|| format!("moving {} into its node", ext.interface))?;
    let moved = link_by_name(&node_handle, &ext.interface)
        .await?
        .ok_or_else(|| err!("{} vanished while moving", ext.interface))?;
    let index = moved.header.index;
    node_handle
        .link()
        .set(
            LinkUnspec::new_with_index(index)
                .name(ext.ifname.clone())
                .alias(ext.alias.clone())
                .up()
                .build(),
        )
        .execute()
        .await
        .with_context(|| format!("renaming {} to {}", ext.interface, ext.ifname))?;
    node_handle
        .address()
        .add(index, IpAddr::V4(ext.addr.addr()), ext.addr.prefix_len())
        .execute()
        .await
        .with_context(|| format!("address {} on {}", ext.addr, ext.ifname))?;
    Ok(())
}
