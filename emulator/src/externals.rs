//! External ports: existing interfaces of the machine (a NIC, or a veth whose
//! peer the user owns) attached to a node's port, so real equipment joins
//! the fabric. `down` hands each one back as it was: name, namespace, MTU,
//! addresses and up/down state.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use anyhow::{Context, Result, anyhow, bail};
use futures::TryStreamExt;
use ipnet::Ipv4Net;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::{Handle, LinkUnspec};
use turbonet_topo::Lab;

use crate::fabric::{self, NodeNs};
use crate::netns;
use crate::state::{ExternalState, LabDir, LabState};

/// Opens the namespace an external interface lives in: a named namespace,
/// or the one turbonet runs in.
fn open_ns(name: Option<&str>) -> Result<OwnedFd> {
    match name {
        Some(name) => netns::open(name).with_context(|| format!("opening namespace {name}")),
        None => netns::open_current().context("opening the current namespace"),
    }
}

/// Runs `f` with an rtnetlink handle inside namespace `ns`, on a private
/// runtime (for the synchronous parts of the lifecycle).
fn with_handle<T>(ns: &OwnedFd, f: impl AsyncFnOnce(Handle) -> Result<T>) -> Result<T> {
    let socket = netns::in_namespace(ns, netns::route_socket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let handle = fabric::connect(socket)?;
        f(handle).await
    })
}

/// Looks an interface up by name.
async fn link_by_name(handle: &Handle, name: &str) -> Result<Option<LinkMessage>> {
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

fn mtu_of(link: &LinkMessage) -> u32 {
    link.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Mtu(m) => Some(*m),
            _ => None,
        })
        .unwrap_or(1500)
}

async fn ipv4_addrs(handle: &Handle, index: u32) -> Result<Vec<Ipv4Net>> {
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

/// Checks that every external interface exists where the scenario says.
pub fn check(lab: &Lab) -> Result<()> {
    for ext in &lab.fabric.externals {
        let ns = open_ns(ext.netns.as_deref())?;
        let found = with_handle(&ns, async |h| link_by_name(&h, &ext.interface).await)?;
        if found.is_none() {
            bail!(
                "external interface {} not found{} (attached to node {})",
                ext.interface,
                ext.netns
                    .as_deref()
                    .map(|n| format!(" in namespace {n}"))
                    .unwrap_or_default(),
                lab.fabric.node(ext.node).name
            );
        }
    }
    Ok(())
}

/// Records how each external interface looks now.
pub fn plan(lab: &Lab) -> Result<Vec<ExternalState>> {
    lab.fabric
        .externals
        .iter()
        .map(|ext| {
            let ns = open_ns(ext.netns.as_deref())?;
            let (mtu, up, addrs) = with_handle(&ns, async |h| {
                let link = link_by_name(&h, &ext.interface)
                    .await?
                    .ok_or_else(|| anyhow!("external interface {} disappeared", ext.interface))?;
                let up = link.header.flags.contains(LinkFlags::Up);
                let addrs = ipv4_addrs(&h, link.header.index).await?;
                Ok((mtu_of(&link), up, addrs))
            })?;
            Ok(ExternalState {
                interface: ext.interface.clone(),
                netns: ext.netns.clone(),
                node_netns: fabric::ns_name(&lab.name, &lab.fabric.node(ext.node).name),
                ifname: ext.ifname.clone(),
                mtu,
                up,
                addrs,
                attached: false,
            })
        })
        .collect()
}

/// Moves every external interface into its node through `kernel`. The
/// state records each move before it happens.
pub async fn attach<K: crate::kernel::Kernel>(
    kernel: &K,
    lab: &Lab,
    nodes: &[crate::kernel::Ns],
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    for (i, ext) in lab.fabric.externals.iter().enumerate() {
        state.externals[i].attached = true;
        dir.save(state)?;
        kernel
            .attach_external(&crate::kernel::External {
                interface: ext.interface.clone(),
                from: ext.netns.clone(),
                into: nodes[ext.node.0 as usize],
                ifname: ext.ifname.clone(),
                alias: fabric::alias(&lab.name, &format!("external:{}", ext.interface)),
                addr: ext.addr,
            })
            .await?;
    }
    Ok(())
}

/// Moves one external interface into its node's namespace `node`, renames
/// it, addresses it and brings it up.
pub async fn attach_one(ext: &crate::kernel::External, node: &NodeNs) -> Result<()> {
    let source = open_ns(ext.from.as_deref())?;
    let socket = netns::in_namespace(&source, netns::route_socket)?;
    let source_handle = fabric::connect(socket)?;
    let link = link_by_name(&source_handle, &ext.interface)
        .await?
        .ok_or_else(|| anyhow!("external interface {} disappeared", ext.interface))?;
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
        .ok_or_else(|| anyhow!("{} vanished while moving", ext.interface))?;
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

/// Hands every attached external interface back: renamed, moved home, with
/// its MTU, addresses and up/down state restored.
pub fn release(state: &mut LabState) -> Result<()> {
    for ext in state.externals.iter_mut().filter(|e| e.attached) {
        release_one(ext).with_context(|| format!("handing back {}", ext.interface))?;
        ext.attached = false;
    }
    Ok(())
}

fn release_one(ext: &ExternalState) -> Result<()> {
    let home = open_ns(ext.netns.as_deref())?;
    if netns::exists(&ext.node_netns) {
        let node_ns = netns::open(&ext.node_netns)?;
        with_handle(&node_ns, async |h| {
            // Killed half way, it may still carry its own name.
            let link = match link_by_name(&h, &ext.ifname).await? {
                Some(link) => Some(link),
                None => link_by_name(&h, &ext.interface).await?,
            };
            if let Some(link) = link {
                h.link()
                    .set(
                        LinkUnspec::new_with_index(link.header.index)
                            .down()
                            .name(ext.interface.clone())
                            .alias(String::new())
                            .build(),
                    )
                    .execute()
                    .await?;
                h.link()
                    .set(
                        LinkUnspec::new_with_index(link.header.index)
                            .setns_by_fd(home.as_raw_fd())
                            .build(),
                    )
                    .execute()
                    .await?;
            }
            Ok(())
        })?;
    }
    with_handle(&home, async |h| {
        let Some(link) = link_by_name(&h, &ext.interface).await? else {
            bail!("{} is not back in its namespace", ext.interface);
        };
        let index = link.header.index;
        let mut set = LinkUnspec::new_with_index(index).mtu(ext.mtu);
        set = if ext.up { set.up() } else { set.down() };
        h.link().set(set.build()).execute().await?;
        let present = ipv4_addrs(&h, index).await?;
        for addr in ext.addrs.iter().filter(|a| !present.contains(a)) {
            h.address()
                .add(index, IpAddr::V4(addr.addr()), addr.prefix_len())
                .execute()
                .await?;
        }
        Ok(())
    })
}
