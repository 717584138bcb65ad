//! The table entries of one physical switch, from the mapping and the
//! routes, written by the ids of the [`Pipeline`] resolved in the P4Info the
//! device runs, so a P4Info compiled by p4c (other ids) works as well as
//! turbonet's own.
//!
//! Numbering, per physical switch: virtual switch ids count from 1 in node
//! order, virtual port ids from 1 in the mapping's port order. An action
//! profile member is one next hop, a (virtual port, neighbour MAC) pair, so
//! its id is the virtual port's; a group's id is derived from its members.
//! Ids therefore stay put when routes change, and rewriting a switch after
//! a failure touches only what changed. MAC
//! addresses derive from node ids: a switch's is `02:74:6e:` and its node
//! id (24 bits), a host's `02:74:68:` and its node id; the `soft` target
//! gives host interfaces exactly these.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use crate::bail;
use crate::error::{Context, Result};
use turbonet_p4::Pipeline;
use turbonet_p4::p4::v1::{
    Action, ActionProfileGroup, ActionProfileMember, Entity, FieldMatch, TableAction, TableEntry,
    action, action_profile_group, entity, field_match, table_action,
};
use turbonet_p4::pipeline::ActionIds;
use turbonet_routing::{Failures, Route};
use turbonet_topo::mapper::{Mapping, VirtualPort};
use turbonet_topo::{Lab, LinkParams, NodeId, Role};

/// A switch's MAC address.
pub fn switch_mac(node: NodeId) -> [u8; 6] {
    mac(0x6e, node)
}

/// A host's MAC address.
pub fn host_mac(node: NodeId) -> [u8; 6] {
    mac(0x68, node)
}

fn mac(kind: u8, node: NodeId) -> [u8; 6] {
    let id = node.0.to_be_bytes();
    [0x02, 0x74, kind, id[1], id[2], id[3]]
}

/// The loss threshold of the pipeline's 32-bit draw for probability `p`.
pub fn loss_threshold(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * 4_294_967_296.0)
        .round()
        .min(u32::MAX as f64) as u32
}

/// A Read filter for every table entry of every table (§11.1).
pub fn all_table_entries() -> Entity {
    Entity {
        entity: Some(entity::Entity::TableEntry(TableEntry::default())),
    }
}

/// The key widths the turbonet pipeline encodes values for (the P4Info's
/// own widths may only be as wide, as [`Pipeline::resolve`] checks).
const PORT_BITS: u32 = 9;
const VID_BITS: u32 = 12;
const ID_BITS: u32 = 16;
const ADDR_BITS: u32 = 32;

/// `value` as a bytestring of a `bitwidth`-bit field.
fn bytes(value: u64, bitwidth: u32) -> Result<Vec<u8>> {
    Ok(turbonet_p4::bytes::encode(value, bitwidth)?)
}

/// Action `a` with parameter values `values`, each as wide as its
/// parameter.
fn action<const N: usize>(a: &ActionIds<N>, values: [u64; N]) -> Result<Action> {
    Ok(Action {
        action_id: a.id,
        params: a
            .params
            .iter()
            .zip(a.widths)
            .zip(values)
            .map(|((&param_id, width), value)| {
                Ok(action::Param {
                    param_id,
                    value: bytes(value, width)?,
                })
            })
            .collect::<Result<_>>()?,
    })
}

/// An action without parameters.
fn bare(action_id: u32) -> Action {
    Action {
        action_id,
        params: Vec::new(),
    }
}

fn exact(field_id: u32, value: Vec<u8>) -> FieldMatch {
    FieldMatch {
        field_id,
        field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
            value,
        })),
    }
}

fn table_entry(table_id: u32, matches: Vec<FieldMatch>, action: table_action::Type) -> Entity {
    Entity {
        entity: Some(entity::Entity::TableEntry(TableEntry {
            table_id,
            r#match: matches,
            action: Some(TableAction {
                r#type: Some(action),
            }),
            ..TableEntry::default()
        })),
    }
}

fn mac_value(mac: [u8; 6]) -> u64 {
    turbonet_p4::bytes::decode(&mac)
}

/// The state of the fabric that the entries follow.
#[derive(Debug, Clone, Copy)]
pub struct FabricState<'a> {
    /// Every node's routes (switches' only are used), by node id.
    pub routes: &'a [Vec<Route>],
    /// Every link's current parameters, by link id.
    pub params: &'a [LinkParams],
    /// What is down: the queue mapper drops what would leave over it.
    pub failures: &'a Failures,
}

/// The virtual switches of physical switch `switch`, by name, with their
/// ids.
pub fn vswitches<'m>(mapping: &'m Mapping, switch: &str) -> HashMap<&'m str, u64> {
    mapping
        .placement
        .iter()
        .filter(|p| p.switch == switch)
        .enumerate()
        .map(|(i, p)| (p.virtual_switch.as_str(), i as u64 + 1))
        .collect()
}

/// The virtual ports of physical switch `switch` with their ids.
pub fn vports<'m>(mapping: &'m Mapping, switch: &str) -> Vec<(u64, &'m VirtualPort)> {
    mapping
        .ports
        .iter()
        .filter(|p| p.switch == switch)
        .enumerate()
        .map(|(i, p)| (i as u64 + 1, p))
        .collect()
}

/// A group id for a set of members: stable for the same set, never 0.
fn group_id(members: &[u32], taken: &BTreeMap<u32, Vec<u32>>) -> u32 {
    let bytes: Vec<u8> = members.iter().flat_map(|m| m.to_le_bytes()).collect();
    let h = turbonet_topo::seed::fnv1a64(&bytes);
    let mut id = ((h >> 32) as u32 ^ h as u32).max(1);
    // Another set with the same hash takes the next free id.
    while taken.get(&id).is_some_and(|other| other != members) {
        id = id.wrapping_add(1).max(1);
    }
    id
}

/// Every entity of physical switch `switch`: action profile members and
/// groups first, then table entries (in an order a device accepts as one
/// batch).
pub fn switch_entries(
    lab: &Lab,
    mapping: &Mapping,
    state: FabricState<'_>,
    pipeline: &Pipeline,
    switch: &str,
) -> Result<Vec<Entity>> {
    let routes = state.routes;
    let fabric = &lab.fabric;
    // Virtual switches and ports of this physical switch, numbered from 1.
    let vswitches = vswitches(mapping, switch);
    if vswitches.is_empty() {
        bail!("no virtual switch is placed on {switch}");
    }
    let vports = vports(mapping, switch);
    let vport_of: HashMap<(&str, &str), u64> = vports
        .iter()
        .map(|(id, p)| ((p.virtual_switch.as_str(), p.virtual_port.as_str()), *id))
        .collect();

    let p = pipeline;
    let selector = p.ecmp_selector.context(
        "the pipeline's ipv4_lpm has no action selector (TurbonetIngress.ecmp_selector)",
    )?;

    let mut members: Vec<Entity> = Vec::new();
    let mut groups: Vec<Entity> = Vec::new();
    let mut entries: Vec<Entity> = Vec::new();
    let mut member_done = std::collections::HashSet::<u32>::new();
    // Groups written so far, by id.
    let mut group_members: BTreeMap<u32, Vec<u32>> = BTreeMap::new();

    let queue_bits = p.set_egress.widths[2];
    // A P4Info from before host links were impaired where they enter has a
    // two-parameter set_vport: it gets none.
    let inbound = match p.set_vport_in {
        [Some(delay), Some(loss)] => Some((delay, loss)),
        _ => None,
    };
    for (vport, vp) in &vports {
        let vswitch = vswitches[vp.virtual_switch.as_str()];
        let bits = queue_bits;
        if bits < 32 && vp.queue >> bits != 0 {
            bail!(
                "{} port {} uses queue {}, but the pipeline's queues are {bits}-bit (v1model: 8 \
                     priority queues): plan with --queues {}",
                vp.switch,
                vp.port,
                vp.queue,
                1u32 << bits
            );
        }
        let link = fabric
            .link_by_name(&vp.link)
            .with_context(|| format!("mapping names an unknown link {}", vp.link))?;
        // A link that is down is cut at both of its ports: frames neither
        // enter the virtual switch from it nor leave into it (a host link
        // has only its switch end in the pipeline).
        let down = state.failures.blocks(link);
        let params = &state.params[link.id.0 as usize];
        // In ticks of the target's timestamps (BMv2's are microseconds).
        let delay = p.target.delay_ticks(
            params
                .delay
                .map_or(0, turbonet_topo::units::Delay::as_nanos),
        );
        let loss = match &params.loss {
            Some(turbonet_topo::Loss::Bernoulli(p)) => loss_threshold(p.0),
            _ => 0,
        };
        let ingress = if down {
            bare(p.drop)
        } else {
            let mut set_vport = action(&p.set_vport, [vswitch, *vport])?;
            if let Some(((delay_id, delay_bits), (loss_id, loss_bits))) = inbound {
                // A host link's host-to-switch direction has no egress in
                // the pipeline: it is impaired where it enters. Between
                // switches, the other virtual switch's egress does it.
                let (in_delay, in_loss) = if link.is_host_link() {
                    (delay, loss)
                } else {
                    (0, 0)
                };
                set_vport.params.extend([
                    action::Param {
                        param_id: delay_id,
                        value: bytes(in_delay, delay_bits)?,
                    },
                    action::Param {
                        param_id: loss_id,
                        value: bytes(u64::from(in_loss), loss_bits)?,
                    },
                ]);
            }
            set_vport
        };
        // (port, tagged, tag): tag 0 is an untagged port.
        entries.push(table_entry(
            p.port_mapper.id,
            vec![
                exact(
                    p.port_mapper.fields[0],
                    bytes(u64::from(vp.port), PORT_BITS)?,
                ),
                exact(p.port_mapper.fields[1], bytes(u64::from(vp.tag != 0), 1)?),
                exact(p.port_mapper.fields[2], bytes(u64::from(vp.tag), VID_BITS)?),
            ],
            table_action::Type::Action(ingress),
        ));
        let egress = if down {
            bare(p.drop)
        } else {
            action(
                &p.set_egress,
                [
                    u64::from(vp.port),
                    u64::from(vp.tag),
                    u64::from(vp.queue),
                    delay,
                    u64::from(loss),
                ],
            )?
        };
        entries.push(table_entry(
            p.queue_mapper.id,
            vec![exact(p.queue_mapper.fields[0], bytes(*vport, ID_BITS)?)],
            table_action::Type::Action(egress),
        ));
    }

    for node in fabric.nodes.iter().filter(|n| n.role != Role::Host) {
        let Some(&vswitch) = vswitches.get(node.name.as_str()) else {
            continue;
        };
        let own = mac_value(switch_mac(node.id));
        // The switch's own addresses: ARP answers and punts to the CPU.
        let mut addrs: Vec<Ipv4Addr> = fabric
            .ports(node.id)
            .map(|(_, local, _)| local.addr.addr())
            .chain(node.loopback)
            .collect();
        addrs.sort();
        addrs.dedup();
        for addr in addrs {
            // (virtual switch, address), in both tables' key order.
            let key = |fields: [u32; 2]| -> Result<Vec<FieldMatch>> {
                Ok(vec![
                    exact(fields[0], bytes(vswitch, ID_BITS)?),
                    exact(fields[1], bytes(u64::from(u32::from(addr)), ADDR_BITS)?),
                ])
            };
            entries.push(table_entry(
                p.arp_responder.id,
                key(p.arp_responder.fields)?,
                table_action::Type::Action(action(&p.arp_reply, [own])?),
            ));
            entries.push(table_entry(
                p.local.id,
                key(p.local.fields)?,
                table_action::Type::Action(bare(p.to_cpu)),
            ));
        }
        // Routes: one member per next hop, one group per ECMP set.
        let peer_mac: HashMap<&str, [u8; 6]> = fabric
            .ports(node.id)
            .map(|(_, local, remote)| {
                let peer = fabric.node(remote.node);
                let mac = if peer.role == Role::Host {
                    host_mac(peer.id)
                } else {
                    switch_mac(peer.id)
                };
                (local.ifname.as_str(), mac)
            })
            .collect();
        for route in &routes[node.id.0 as usize] {
            let mut hop_members = Vec::new();
            for hop in &route.nexthops {
                let vport = vport_of
                    .get(&(node.name.as_str(), hop.ifname.as_str()))
                    .with_context(|| format!("{}: port {} is not mapped", node.name, hop.ifname))?;
                let dmac = peer_mac[hop.ifname.as_str()];
                let id = u32::try_from(*vport)?;
                if member_done.insert(id) {
                    members.push(Entity {
                        entity: Some(entity::Entity::ActionProfileMember(ActionProfileMember {
                            action_profile_id: selector,
                            member_id: id,
                            action: Some(action(&p.set_next_hop, [*vport, mac_value(dmac), own])?),
                        })),
                    });
                }
                hop_members.push(id);
            }
            hop_members.sort_unstable();
            hop_members.dedup();
            let action = match hop_members.as_slice() {
                [] => continue,
                [one] => table_action::Type::ActionProfileMemberId(*one),
                many => {
                    // The same set finds its own id again.
                    let id = group_id(many, &group_members);
                    if group_members.insert(id, many.to_vec()).is_none() {
                        groups.push(Entity {
                            entity: Some(entity::Entity::ActionProfileGroup(ActionProfileGroup {
                                action_profile_id: selector,
                                group_id: id,
                                members: many
                                    .iter()
                                    .map(|&member_id| action_profile_group::Member {
                                        member_id,
                                        weight: 1,
                                        ..Default::default()
                                    })
                                    .collect(),
                                max_size: 0,
                            })),
                        });
                    }
                    table_action::Type::ActionProfileGroupId(id)
                }
            };
            let mut key = vec![exact(p.ipv4_lpm.fields[0], bytes(vswitch, ID_BITS)?)];
            // A /0 is a wildcard: the field is left out (P4Runtime §9.1.1).
            if route.prefix.prefix_len() > 0 {
                key.push(FieldMatch {
                    field_id: p.ipv4_lpm.fields[1],
                    field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
                        value: bytes(u64::from(u32::from(route.prefix.network())), ADDR_BITS)?,
                        prefix_len: i32::from(route.prefix.prefix_len()),
                    })),
                });
            }
            entries.push(table_entry(p.ipv4_lpm.id, key, action));
        }
    }
    members.extend(groups);
    members.extend(entries);
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_p4::p4::config::v1::P4Info;
    use turbonet_p4::pipeline::Target;
    use turbonet_p4::{Schema, turbonet_p4info};

    fn lab() -> Lab {
        turbonet_topo::parse(
            "t.toml",
            "[lab]\nname = \"t\"\ntarget = \"soft\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n\
             [links.host-edge]\ndelay = \"10ms\"\nloss = \"1%\"\n\
             [links.edge-agg]\ndelay = \"1ms\"\nloss = \"2%\"\n",
        )
        .unwrap()
    }

    /// The port_mapper entries of the soft switch, as (link, action name,
    /// params by name), written for `target`.
    fn port_mappers(
        lab: &Lab,
        p4info: &P4Info,
        failures: &Failures,
        target: Target,
    ) -> Vec<(String, String, BTreeMap<String, u64>)> {
        let schema = Schema::new(p4info).unwrap();
        let mapping = super::super::soft::map(lab).unwrap();
        let entities = all_entities_for(lab, p4info, failures, target);
        let table = schema
            .table_by_name("TurbonetIngress.port_mapper")
            .unwrap()
            .id;
        let value = |b: &[u8]| b.iter().fold(0u64, |v, b| v << 8 | u64::from(*b));
        entities
            .iter()
            .filter_map(|e| match &e.entity {
                Some(entity::Entity::TableEntry(t)) if t.table_id == table => Some(t),
                _ => None,
            })
            .map(|t| {
                let key: Vec<u64> = t
                    .r#match
                    .iter()
                    .map(|m| match &m.field_match_type {
                        Some(field_match::FieldMatchType::Exact(x)) => value(&x.value),
                        other => panic!("{other:?}"),
                    })
                    .collect();
                let vp = mapping
                    .ports
                    .iter()
                    .find(|vp| {
                        let tagged = u64::from(vp.tag != 0);
                        [u64::from(vp.port), tagged, u64::from(vp.tag)] == key[..]
                    })
                    .unwrap();
                let Some(table_action::Type::Action(a)) =
                    t.action.as_ref().and_then(|a| a.r#type.as_ref())
                else {
                    panic!("a direct action")
                };
                let info = schema.actions.get(&a.action_id).unwrap();
                let params = a
                    .params
                    .iter()
                    .map(|p| (info.params[&p.param_id].name.clone(), value(&p.value)))
                    .collect();
                (vp.link.clone(), info.name.clone(), params)
            })
            .collect()
    }

    /// Every entity of the soft switch with `failures` down.
    fn all_entities(lab: &Lab, p4info: &P4Info, failures: &Failures) -> Vec<Entity> {
        all_entities_for(lab, p4info, failures, Target::Soft)
    }

    /// Every entity of physical switch "soft" with `failures` down, as
    /// written for `target`.
    fn all_entities_for(
        lab: &Lab,
        p4info: &P4Info,
        failures: &Failures,
        target: Target,
    ) -> Vec<Entity> {
        let schema = Schema::new(p4info).unwrap();
        let mapping = super::super::soft::map(lab).unwrap();
        let params: Vec<LinkParams> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
        // Static routing, as a kernel prunes it (what `routes::Static` gives).
        let mut routes = turbonet_routing::static_routes(&lab.fabric);
        for (node, mine) in lab.fabric.nodes.iter().zip(&mut routes) {
            failures.prune(&lab.fabric, node.id, mine);
        }
        let state = FabricState {
            routes: &routes,
            params: &params,
            failures,
        };
        let pipeline = Pipeline::resolve(&schema, p4info, target).unwrap();
        switch_entries(lab, &mapping, state, &pipeline, "soft").unwrap()
    }

    #[test]
    fn ids_stay_put_so_a_failure_rewrites_little() {
        let lab = lab();
        let before = all_entities(&lab, &turbonet_p4info(), &Failures::default());
        let mut failures = Failures::default();
        failures
            .links
            .insert(lab.fabric.link_by_name("edge0-0--agg0-0").unwrap().id);
        let after = all_entities(&lab, &turbonet_p4info(), &failures);
        let (batches, changes) = super::super::session::Installed::new(before.clone()).diff(&after);
        // Two port-mapper and two queue-mapper entries cut, and the routes
        // of the two switches at its ends: a few dozen of a thousand.
        assert!(changes.total() > 4, "{changes:?}");
        assert!(
            changes.total() * 10 < before.len(),
            "{changes:?} of {}",
            before.len()
        );
        // No member changes its next hop: a member is one virtual port.
        let modified_members = batches
            .iter()
            .flatten()
            .filter(|u| u.r#type == turbonet_p4::p4::v1::update::Type::Modify as i32)
            .filter(|u| {
                matches!(
                    u.entity.as_ref().and_then(|e| e.entity.as_ref()),
                    Some(entity::Entity::ActionProfileMember(_))
                )
            })
            .count();
        assert_eq!(modified_members, 0);
        // Back up: the same entities, ids included.
        assert_eq!(
            all_entities(&lab, &turbonet_p4info(), &Failures::default()),
            before
        );
    }

    #[test]
    fn host_links_are_impaired_where_they_enter_and_switch_links_are_not() {
        let lab = lab();
        let entries = port_mappers(&lab, &turbonet_p4info(), &Failures::default(), Target::Soft);
        assert_eq!(
            entries.len(),
            16 + 2 * 32,
            "a port per host, two per fabric link"
        );
        for (link, action, params) in &entries {
            assert_eq!(action, "TurbonetIngress.set_vport");
            let host = lab.fabric.link_by_name(link).unwrap().is_host_link();
            let (delay, loss) = if host {
                (10_000_000, u64::from(loss_threshold(0.01)))
            } else {
                (0, 0)
            };
            assert_eq!(params["delay"], delay, "{link}");
            assert_eq!(params["loss_threshold"], loss, "{link}");
        }
    }

    #[test]
    fn a_down_host_link_drops_where_it_enters() {
        let lab = lab();
        let link = lab.fabric.links.iter().find(|l| l.is_host_link()).unwrap();
        let failures = Failures {
            links: [link.id].into_iter().collect(),
            ..Failures::default()
        };
        let entries = port_mappers(&lab, &turbonet_p4info(), &failures, Target::Soft);
        let (_, action, params) = entries.iter().find(|(l, _, _)| *l == link.name).unwrap();
        assert_eq!(action, "TurbonetIngress.drop");
        assert!(params.is_empty());
    }

    #[test]
    fn a_two_parameter_set_vport_gets_two_parameters() {
        let mut p4info = turbonet_p4info();
        let set_vport = p4info
            .actions
            .iter_mut()
            .find(|a| a.preamble.as_ref().unwrap().alias == "set_vport")
            .unwrap();
        set_vport.params.truncate(2);
        for (link, _, params) in port_mappers(&lab(), &p4info, &Failures::default(), Target::Soft) {
            assert_eq!(
                params.keys().map(String::as_str).collect::<Vec<_>>(),
                ["vport", "vswitch"],
                "{link}"
            );
        }
    }

    /// BMv2's global timestamps are microseconds: the 10 ms of a host link
    /// and the 1 ms of a fabric link are written as 10,000 and 1,000 ticks
    /// for it, in nanoseconds for the soft switch.
    #[test]
    fn delays_are_written_in_the_targets_ticks() {
        let lab = lab();
        let p4info = turbonet_p4info();
        let delays = |target| {
            let schema = Schema::new(&p4info).unwrap();
            let set_egress = schema.action_by_name("set_egress").unwrap().clone();
            let delay = set_egress
                .params
                .values()
                .find(|p| p.name == "delay")
                .unwrap()
                .id;
            let mut seen: Vec<u64> = all_entities_for(&lab, &p4info, &Failures::default(), target)
                .iter()
                .filter_map(|e| match &e.entity {
                    Some(entity::Entity::TableEntry(t)) => t.action.as_ref(),
                    _ => None,
                })
                .filter_map(|a| match &a.r#type {
                    Some(table_action::Type::Action(a)) if a.action_id == set_egress.id => Some(a),
                    _ => None,
                })
                .map(|a| {
                    let p = a.params.iter().find(|p| p.param_id == delay).unwrap();
                    turbonet_p4::bytes::decode(&p.value)
                })
                .collect();
            seen.sort_unstable();
            seen.dedup();
            seen
        };
        assert_eq!(delays(Target::Bmv2), [0, 1_000, 10_000]);
        assert_eq!(delays(Target::Soft), [0, 1_000_000, 10_000_000]);
        let (_, _, host) = port_mappers(&lab, &p4info, &Failures::default(), Target::Bmv2)
            .into_iter()
            .find(|(link, _, _)| lab.fabric.link_by_name(link).unwrap().is_host_link())
            .unwrap();
        assert_eq!(host["delay"], 10_000);
    }
}
