//! External ports: existing interfaces of the machine (a NIC, or a veth whose
//! peer the user owns) attached to a node's port, so real equipment joins
//! the fabric. `down` hands each one back as it was: name, namespace, MTU,
//! addresses and up/down state.

use std::net::IpAddr;
use std::os::fd::AsRawFd;

use rtnetlink::LinkUnspec;
use rtnetlink::packet_route::link::LinkFlags;
use turbonet_topo::ExternalPort as External;
use turbonet_topo::Lab;

use crate::error::{Context, Result};
use crate::span::Span;
use crate::state::{ExternalState, LabDir, LabState};
use crate::{bail, err};
use turbonet_host::kernel::interfaces::{ipv4_addrs, link_by_name, mtu_of, open_ns, with_handle};
use turbonet_host::namespaces;

/// The external interfaces of the nodes `span` runs, in scenario order:
/// on a lab over several machines, each is the machine's that runs its
/// node.
pub fn here<'a>(lab: &'a Lab, span: &'a Span) -> impl Iterator<Item = &'a External> + 'a {
    (lab.fabric.externals.iter()).filter(|ext| span.runs(ext.node))
}

/// Checks that every external interface of the nodes `span` runs exists
/// where the scenario says.
pub fn check(lab: &Lab, span: &Span) -> Result<()> {
    for ext in here(lab, span) {
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

/// Records how each external interface of the nodes `span` runs looks
/// now.
pub fn plan(lab: &Lab, span: &Span) -> Result<Vec<ExternalState>> {
    here(lab, span)
        .map(|ext| {
            let ns = open_ns(ext.netns.as_deref())?;
            let (mtu, up, addrs) = with_handle(&ns, async |h| {
                let link = link_by_name(&h, &ext.interface)
                    .await?
                    .ok_or_else(|| err!("external interface {} disappeared", ext.interface))?;
                let up = link.header.flags.contains(LinkFlags::Up);
                let addrs = ipv4_addrs(&h, link.header.index).await?;
                Ok::<_, crate::Error>((mtu_of(&link), up, addrs))
            })?;
            Ok(ExternalState {
                interface: ext.interface.clone(),
                netns: ext.netns.clone(),
                node_netns: crate::names::node_namespace(
                    &lab.name,
                    &lab.fabric.node(ext.node).name,
                ),
                ifname: ext.ifname.clone(),
                mtu,
                up,
                addrs,
                attached: false,
            })
        })
        .collect()
}

/// Moves every external interface of the nodes `span` runs into its node
/// through `kernel` (`state.externals` is their [`plan`]). The state
/// records each move before it happens.
pub async fn attach<K: turbonet_host::kernel::Kernel>(
    kernel: &K,
    lab: &Lab,
    span: &Span,
    namespaces: &super::Here<'_>,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<()> {
    let local: Vec<&External> = here(lab, span).collect();
    for (i, ext) in local.into_iter().enumerate() {
        let into = namespaces.ns(ext.node).ok_or_else(|| {
            err!(
                "node {} has no namespace here for its external interface {}",
                lab.fabric.node(ext.node).name,
                ext.interface
            )
        })?;
        state.externals[i].attached = true;
        dir.save(state)?;
        kernel
            .attach_external(&turbonet_host::kernel::External {
                interface: ext.interface.clone(),
                from: ext.netns.clone(),
                into,
                ifname: ext.ifname.clone(),
                alias: crate::names::alias(&lab.name, &format!("external:{}", ext.interface)),
                addr: ext.addr,
            })
            .await?;
    }
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
    if namespaces::exists(&ext.node_netns) {
        let node_ns = namespaces::open(&ext.node_netns)?;
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
            Ok::<_, crate::Error>(())
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
