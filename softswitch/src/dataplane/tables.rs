//! The tables compiled into lookup structures: hash maps keyed by packed
//! integers for the exact tables, a per-virtual-switch map per prefix
//! length for the LPM, members and groups resolved to their actions.

use turbonet_p4::p4::v1::{Action, TableAction, table_action};

use super::hash::FastMap;
use super::tm::{LossStreams, TrafficManager};
use crate::{DeviceState, EntryKey, KeyMatch};
use turbonet_p4::Pipeline as Ids;
use turbonet_p4::pipeline::TableIds;

/// `set_vport`'s result: the virtual switch and virtual ingress port, and
/// the inbound delay and loss of a host link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Vport {
    pub(crate) vswitch: u16,
    pub(crate) vport: u16,
    /// Added to the delay of whatever egress the frame then takes.
    pub(crate) delay_ns: u64,
    pub(crate) loss_threshold: u32,
    /// The inbound loss stream of this virtual port (when the threshold is
    /// not 0).
    pub(crate) loss: u32,
}

/// What `local` decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Local {
    /// `to_cpu`.
    ToCpu,
    /// A miss with `NoAction` (the program's default): on to the TTL
    /// check and the LPM.
    #[default]
    Continue,
    /// A hit on `NoAction` (or an action the table should not have): the
    /// program returns without an egress port, so nothing leaves.
    Drop,
}

/// One action of `ipv4_lpm` (direct, or a member's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Hop {
    /// `set_next_hop(vport, dmac, smac)`.
    Forward {
        vport: u16,
        dmac: [u8; 6],
        smac: [u8; 6],
    },
    /// `to_cpu`.
    ToCpu,
    /// `drop` (the program's default), or what cannot be forwarded (an
    /// empty group).
    #[default]
    Drop,
}

/// An `ipv4_lpm` entry's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Hop(Hop),
    /// Index into [`Tables::groups`].
    Group(u32),
}

/// An ECMP group: members' actions with cumulative weights.
#[derive(Debug, Clone, Default)]
pub(crate) struct Group {
    /// `cumulative[i]`: sum of the weights of members 0..=i.
    cumulative: Vec<u64>,
    hops: Vec<Hop>,
}

impl Group {
    /// The member a flow hash picks, weighted: the hash scaled to the
    /// total weight lands in one member's share.
    pub(crate) fn pick(&self, hash: u64) -> Hop {
        let Some(&total) = self.cumulative.last() else {
            return Hop::Drop;
        };
        let x = ((u128::from(hash) * u128::from(total)) >> 64) as u64;
        let i = self.cumulative.partition_point(|&c| c <= x);
        self.hops.get(i).copied().unwrap_or(Hop::Drop)
    }

    /// The member BMv2's selector picks for `hash`: the hash modulo the
    /// number of members, weights ignored, in the group's order.
    pub(crate) fn pick_nth(&self, hash: u16) -> Hop {
        match self.hops.len() {
            0 => Hop::Drop,
            n => self.hops[usize::from(hash) % n],
        }
    }
}

/// The routes of one virtual switch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lpm {
    /// Bit `l` set: some route has prefix length `l` (0..=32).
    lengths: u64,
    /// (prefix length << 32 | masked address) -> route.
    routes: FastMap<u64, Route>,
}

fn prefix_mask(len: u32) -> u32 {
    u32::MAX.checked_shl(32 - len).unwrap_or(0)
}

impl Lpm {
    fn insert(&mut self, value: u32, len: u32, route: Route) {
        self.lengths |= 1 << len;
        self.routes.insert(
            u64::from(len) << 32 | u64::from(value & prefix_mask(len)),
            route,
        );
    }

    /// The route of the longest prefix holding `dst`: one probe per prefix
    /// length present, longest first.
    pub(crate) fn lookup(&self, dst: u32) -> Option<Route> {
        let mut lengths = self.lengths;
        while lengths != 0 {
            let len = 63 - lengths.leading_zeros();
            let key = u64::from(len) << 32 | u64::from(dst & prefix_mask(len));
            if let Some(r) = self.routes.get(&key) {
                return Some(*r);
            }
            lengths &= !(1 << len);
        }
        None
    }
}

/// `queue_mapper`'s result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Egress {
    /// `set_egress`, with the traffic manager's queue and the loss stream
    /// resolved.
    Set {
        port: u32,
        tag: u16,
        /// The traffic manager's (port, queue) slot.
        queue: u32,
        delay_ns: u64,
        loss_threshold: u32,
        /// The loss stream of this virtual port (when the threshold is not 0).
        loss: u32,
    },
    /// `drop` (a cut link), or a miss (the program's default).
    #[default]
    Drop,
}

/// Every table of the pipeline, compiled.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tables {
    /// (port << 32 | tagged << 16 | vid) -> set_vport, or None for `drop`.
    port_mapper: FastMap<u64, Option<Vport>>,
    port_mapper_default: Option<Vport>,
    /// (vswitch << 32 | tpa) -> arp_reply's MAC, or None for `drop`.
    arp: FastMap<u64, Option<[u8; 6]>>,
    arp_default: Option<[u8; 6]>,
    /// (vswitch << 32 | dst) -> action.
    local: FastMap<u64, Local>,
    local_default: Local,
    lpm: FastMap<u16, Lpm>,
    lpm_default: Hop,
    pub(crate) groups: Vec<Group>,
    queue_mapper: FastMap<u16, Egress>,
    queue_mapper_default: Egress,
}

impl Tables {
    /// The entry of a frame in on `port`, tagged with `vid` or untagged
    /// (`None`): the program matches the tag's validity, so a tag of 0 is
    /// not the absence of one.
    pub(crate) fn port_mapper(&self, port: u32, vid: Option<u16>) -> Option<Vport> {
        let key = match vid {
            Some(vid) => port_key(u64::from(port), 1, u64::from(vid)),
            None => port_key(u64::from(port), 0, 0),
        };
        match self.port_mapper.get(&key) {
            Some(hit) => *hit,
            None => self.port_mapper_default,
        }
    }

    pub(crate) fn arp_responder(&self, vswitch: u16, tpa: u32) -> Option<[u8; 6]> {
        match self.arp.get(&(u64::from(vswitch) << 32 | u64::from(tpa))) {
            Some(hit) => *hit,
            None => self.arp_default,
        }
    }

    pub(crate) fn local(&self, vswitch: u16, dst: u32) -> Local {
        match self.local.get(&(u64::from(vswitch) << 32 | u64::from(dst))) {
            Some(hit) => *hit,
            None => self.local_default,
        }
    }

    pub(crate) fn ipv4_lpm(&self, vswitch: u16, dst: u32) -> Route {
        self.lpm
            .get(&vswitch)
            .and_then(|l| l.lookup(dst))
            .unwrap_or(Route::Hop(self.lpm_default))
    }

    pub(crate) fn queue_mapper(&self, vport: u16) -> Egress {
        self.queue_mapper
            .get(&vport)
            .copied()
            .unwrap_or(self.queue_mapper_default)
    }
}

/// The `port_mapper` key (ingress port, tagged, tag) packed in a word.
fn port_key(port: u64, tagged: u64, vid: u64) -> u64 {
    port << 32 | (tagged & 1) << 16 | vid
}

/// A canonical bytestring as an integer (widths were checked when the
/// names were resolved; longer strings keep their low 64 bits).
fn value(bytes: &[u8]) -> u64 {
    let tail = &bytes[bytes.len().saturating_sub(8)..];
    tail.iter().fold(0, |v, b| v << 8 | u64::from(*b))
}

/// A 48-bit parameter as a MAC address.
fn mac(v: u64) -> [u8; 6] {
    let v = v.to_be_bytes();
    [v[2], v[3], v[4], v[5], v[6], v[7]]
}

/// The exact value of field `id` of a key (the write path guarantees every
/// exact field is present; 0 otherwise).
fn exact(key: &EntryKey, id: u32) -> u64 {
    key.fields
        .iter()
        .find(|(f, _)| *f == id)
        .map_or(0, |(_, m)| match m {
            KeyMatch::Exact(v) | KeyMatch::Optional(v) => value(v),
            _ => 0,
        })
}

/// The prefix of LPM field `id`: absent is the /0 wildcard.
fn prefix(key: &EntryKey, id: u32) -> (u32, u32) {
    key.fields
        .iter()
        .find(|(f, _)| *f == id)
        .map_or((0, 0), |(_, m)| match m {
            KeyMatch::Lpm {
                value: v,
                prefix_len,
            } => (value(v) as u32, (*prefix_len).min(32)),
            _ => (0, 0),
        })
}

fn param(a: &Action, id: u32) -> u64 {
    a.params
        .iter()
        .find(|p| p.param_id == id)
        .map_or(0, |p| value(&p.value))
}

fn direct(a: Option<&TableAction>) -> Option<&Action> {
    match a?.r#type.as_ref()? {
        table_action::Type::Action(a) => Some(a),
        _ => None,
    }
}

/// Builds the lookup structures from the device's tables. Queue slots
/// and loss streams are created in `tm` and `losses` as entries need them
/// (they outlive a compile: queued frames and random streams carry on).
pub(crate) fn compile(
    ids: &Ids,
    state: &DeviceState,
    tm: &mut TrafficManager,
    losses: &mut LossStreams,
) -> Tables {
    let mut t = Tables::default();
    let entries = |table: u32| {
        state
            .table(table)
            .into_iter()
            .flat_map(|t| t.entries.iter())
    };
    let default = |table: u32| state.table(table).and_then(|t| t.default_action.as_ref());

    // Port mapper. A P4Info without the inbound parameters has none.
    let mut set_vport = |a: &Action| {
        if a.action_id != ids.set_vport.id {
            return None;
        }
        let [delay, loss] = ids.set_vport_in.map(|p| p.map_or(0, |(p, _)| param(a, p)));
        let vport = param(a, ids.set_vport.params[1]) as u16;
        let loss_threshold = loss as u32;
        Some(Vport {
            vswitch: param(a, ids.set_vport.params[0]) as u16,
            vport,
            delay_ns: ids.target.delay_ns(delay),
            loss_threshold,
            loss: if loss_threshold == 0 {
                0
            } else {
                losses.ingress_stream(vport)
            },
        })
    };
    let TableIds { id, fields } = &ids.port_mapper;
    for (key, e) in entries(*id) {
        let k = port_key(
            exact(key, fields[0]),
            exact(key, fields[1]),
            exact(key, fields[2]),
        );
        t.port_mapper
            .insert(k, direct(e.action.as_ref()).and_then(&mut set_vport));
    }
    t.port_mapper_default = direct(default(*id)).and_then(set_vport);

    // ARP responder.
    let arp_reply = |a: &Action| {
        (a.action_id == ids.arp_reply.id).then(|| mac(param(a, ids.arp_reply.params[0])))
    };
    let TableIds { id, fields } = &ids.arp_responder;
    for (key, e) in entries(*id) {
        let k = exact(key, fields[0]) << 32 | exact(key, fields[1]);
        t.arp
            .insert(k, direct(e.action.as_ref()).and_then(arp_reply));
    }
    t.arp_default = direct(default(*id)).and_then(arp_reply);

    // Local addresses.
    let TableIds { id, fields } = &ids.local;
    for (key, e) in entries(*id) {
        let k = exact(key, fields[0]) << 32 | exact(key, fields[1]);
        let action = match direct(e.action.as_ref()) {
            Some(a) if a.action_id == ids.to_cpu => Local::ToCpu,
            _ => Local::Drop,
        };
        t.local.insert(k, action);
    }
    t.local_default = match direct(default(*id)) {
        Some(a) if a.action_id == ids.to_cpu => Local::ToCpu,
        Some(a) if Some(a.action_id) != ids.no_action => Local::Drop,
        _ => Local::Continue,
    };

    // Routes: members and groups first.
    let hop = |a: &Action| {
        if a.action_id == ids.set_next_hop.id {
            let [vport, dmac, smac] = ids.set_next_hop.params;
            Hop::Forward {
                vport: param(a, vport) as u16,
                dmac: mac(param(a, dmac)),
                smac: mac(param(a, smac)),
            }
        } else if a.action_id == ids.to_cpu {
            Hop::ToCpu
        } else {
            Hop::Drop
        }
    };
    let profile = ids.ecmp_selector.and_then(|p| state.profile(p));
    let members: FastMap<u32, Hop> = profile
        .iter()
        .flat_map(|p| p.members.iter())
        .map(|(id, m)| (*id, m.action.as_ref().map_or(Hop::Drop, hop)))
        .collect();
    let mut group_index: FastMap<u32, u32> = FastMap::default();
    for (id, g) in profile.iter().flat_map(|p| p.groups.iter()) {
        let mut group = Group::default();
        let mut total = 0u64;
        for m in &g.members {
            // Weights are positive (the write path checks).
            total += u64::from(m.weight.max(1).unsigned_abs());
            group.cumulative.push(total);
            group
                .hops
                .push(members.get(&m.member_id).copied().unwrap_or(Hop::Drop));
        }
        group_index.insert(*id, t.groups.len() as u32);
        t.groups.push(group);
    }
    let TableIds { id, fields } = &ids.ipv4_lpm;
    for (key, e) in entries(*id) {
        let vswitch = exact(key, fields[0]) as u16;
        let (addr, len) = prefix(key, fields[1]);
        let route = match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            Some(table_action::Type::Action(a)) => Route::Hop(hop(a)),
            Some(table_action::Type::ActionProfileMemberId(m)) => {
                Route::Hop(members.get(m).copied().unwrap_or(Hop::Drop))
            }
            Some(table_action::Type::ActionProfileGroupId(g)) => group_index
                .get(g)
                .map_or(Route::Hop(Hop::Drop), |i| Route::Group(*i)),
            _ => Route::Hop(Hop::Drop),
        };
        t.lpm.entry(vswitch).or_default().insert(addr, len, route);
    }
    t.lpm_default = direct(default(*id)).map_or(Hop::Drop, hop);

    // Queue mapper.
    let mut set_egress = |vport: u16, a: &Action| {
        if a.action_id != ids.set_egress.id {
            return Egress::Drop;
        }
        let [port, tag, queue, delay, loss] = ids.set_egress.params;
        let port = param(a, port) as u32;
        let loss_threshold = param(a, loss) as u32;
        Egress::Set {
            port,
            tag: param(a, tag) as u16,
            queue: tm.slot(port, param(a, queue) as u32),
            delay_ns: ids.target.delay_ns(param(a, delay)),
            loss_threshold,
            loss: if loss_threshold == 0 {
                0
            } else {
                losses.stream(vport)
            },
        }
    };
    let TableIds { id, fields } = &ids.queue_mapper;
    for (key, e) in entries(*id) {
        let vport = exact(key, fields[0]) as u16;
        let egress = direct(e.action.as_ref()).map_or(Egress::Drop, |a| set_egress(vport, a));
        t.queue_mapper.insert(vport, egress);
    }
    // A default set_egress applies to every vport; its loss stream is
    // vport 0's (a vport the controller does not number).
    t.queue_mapper_default = direct(default(*id)).map_or(Egress::Drop, |a| set_egress(0, a));
    t
}

#[cfg(test)]
mod tests {
    use super::super::hash::mix;
    use super::*;

    #[test]
    fn lpm_prefers_the_longest_prefix_and_falls_back_to_zero() {
        let mut l = Lpm::default();
        let r = |v: u16| {
            Route::Hop(Hop::Forward {
                vport: v,
                dmac: [0; 6],
                smac: [0; 6],
            })
        };
        l.insert(0, 0, r(0));
        l.insert(0x0a00_0000, 8, r(8));
        l.insert(0x0a00_0200, 24, r(24));
        l.insert(0x0a00_0280, 25, r(25));
        l.insert(0x0a00_0281, 32, r(32));
        assert_eq!(l.lookup(0x0a00_0281), Some(r(32)));
        assert_eq!(l.lookup(0x0a00_0282), Some(r(25)));
        assert_eq!(l.lookup(0x0a00_0202), Some(r(24)));
        assert_eq!(l.lookup(0x0a01_0202), Some(r(8)));
        assert_eq!(l.lookup(0x0b00_0000), Some(r(0)));
        assert_eq!(Lpm::default().lookup(1), None);
    }

    #[test]
    fn groups_pick_by_weight() {
        let hop = |v: u16| Hop::Forward {
            vport: v,
            dmac: [0; 6],
            smac: [0; 6],
        };
        let g = Group {
            cumulative: vec![3, 4],
            hops: vec![hop(1), hop(2)],
        };
        let mut counts = [0u32; 2];
        for i in 0..40_000u64 {
            match g.pick(mix(i)) {
                Hop::Forward { vport, .. } => counts[vport as usize - 1] += 1,
                other => panic!("{other:?}"),
            }
        }
        assert!((29_000..31_000).contains(&counts[0]), "{counts:?}");
        assert_eq!(Group::default().pick(7), Hop::Drop);
        assert_eq!(g.pick(0), hop(1));
        assert_eq!(g.pick(u64::MAX), hop(2));
    }
}
