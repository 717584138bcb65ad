//! The turbonet pipeline's names, resolved to the ids of the committed
//! P4Info: the data plane runs `p4/turbonet.p4` natively but finds every
//! table, field, action, parameter, counter and controller metadata by
//! name, so a P4Info numbered differently (p4c's own ids) works as well.

use p4runtime_proto::p4::config::v1::P4Info;
use p4runtime_proto::p4::config::v1::match_field::MatchType;

use crate::{ActionInfo, Schema, TableInfo};

/// A match field of the pipeline: id in its table.
pub(crate) type FieldId = u32;

/// Ids of one table and its key fields, in the program's key order.
#[derive(Debug, Clone)]
pub(crate) struct TableIds<const N: usize> {
    pub(crate) id: u32,
    pub(crate) fields: [FieldId; N],
}

/// Ids of one action and its parameters, in the program's order.
#[derive(Debug, Clone)]
pub(crate) struct ActionIds<const N: usize> {
    pub(crate) id: u32,
    pub(crate) params: [u32; N],
}

/// Everything of the P4Info the data plane uses.
#[derive(Debug, Clone)]
pub(crate) struct Ids {
    /// (ingress port, vid).
    pub(crate) port_mapper: TableIds<2>,
    /// (vswitch, tpa).
    pub(crate) arp_responder: TableIds<2>,
    /// (vswitch, dst).
    pub(crate) local: TableIds<2>,
    /// (vswitch, dst LPM).
    pub(crate) ipv4_lpm: TableIds<2>,
    /// The action profile (selector) of `ipv4_lpm`, if it has one.
    pub(crate) ecmp_selector: Option<u32>,
    /// (vport_out).
    pub(crate) queue_mapper: TableIds<1>,
    /// `NoAction`, the default of `local` (absent from some P4Infos).
    pub(crate) no_action: Option<u32>,
    /// (vswitch, vport).
    pub(crate) set_vport: ActionIds<2>,
    /// `set_vport`'s inbound (delay_ns, loss_threshold) of a host link; a
    /// P4Info from before host links were impaired at ingress lacks them
    /// (no inbound delay or loss).
    pub(crate) set_vport_in: [Option<u32>; 2],
    /// (mac).
    pub(crate) arp_reply: ActionIds<1>,
    pub(crate) to_cpu: u32,
    /// (vport, dmac, smac).
    pub(crate) set_next_hop: ActionIds<3>,
    /// (port, tag, queue, delay_ns, loss_threshold).
    pub(crate) set_egress: ActionIds<5>,
    pub(crate) vport_rx: u32,
    pub(crate) vport_tx: u32,
    pub(crate) vport_lost: u32,
    /// The inbound loss counter of host links (absent from older P4Infos:
    /// not counted).
    pub(crate) vport_rx_lost: Option<u32>,
    /// `packet_in` metadata (vswitch, vport).
    pub(crate) packet_in: [u32; 2],
    /// `packet_out` metadata (vswitch, vport).
    pub(crate) packet_out: [u32; 2],
}

/// The widest value each role may have: keys are packed into 64-bit
/// words and a tag is 12 bits on the wire.
const ID_BITS: u32 = 16;

fn table<'a>(schema: &'a Schema, name: &str) -> Result<&'a TableInfo, String> {
    schema
        .table_by_name(name)
        .ok_or_else(|| format!("the P4Info has no table {name}"))
}

/// A field of `t` by name, of match kind `kind`, at most `max_bits` wide
/// (exactly `max_bits` when `exact_width`).
fn field(
    t: &TableInfo,
    name: &str,
    kind: MatchType,
    max_bits: u32,
    exact_width: bool,
) -> Result<FieldId, String> {
    let f = t
        .match_fields
        .values()
        .find(|f| f.name == name)
        .ok_or_else(|| format!("table {} has no match field {name}", t.name))?;
    if f.kind != kind {
        return Err(format!(
            "table {} field {name} is {} (the pipeline matches it {})",
            t.name,
            f.kind.as_str_name(),
            kind.as_str_name()
        ));
    }
    if f.bitwidth > max_bits || (exact_width && f.bitwidth != max_bits) {
        return Err(format!(
            "table {} field {name} is {} bits wide (the pipeline's is {max_bits})",
            t.name, f.bitwidth
        ));
    }
    Ok(f.id)
}

fn action<'a>(schema: &'a Schema, name: &str) -> Result<&'a ActionInfo, String> {
    schema
        .action_by_name(name)
        .ok_or_else(|| format!("the P4Info has no action {name}"))
}

/// Parameters of `a` by name with their widest (or, with `true`, exact)
/// widths.
fn params<const N: usize>(
    a: &ActionInfo,
    wanted: [(&str, u32, bool); N],
) -> Result<ActionIds<N>, String> {
    let mut params = [0; N];
    for (slot, (name, bits, exact)) in params.iter_mut().zip(wanted) {
        let p = a
            .params
            .values()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("action {} has no parameter {name}", a.name))?;
        if p.bitwidth > bits || (exact && p.bitwidth != bits) {
            return Err(format!(
                "action {} parameter {name} is {} bits wide (the pipeline's is {bits})",
                a.name, p.bitwidth
            ));
        }
        *slot = p.id;
    }
    Ok(ActionIds { id: a.id, params })
}

/// Parameter `name` of `a`, at most `bits` wide, if the action has it.
fn optional_param(a: &ActionInfo, name: &str, bits: u32) -> Result<Option<u32>, String> {
    match a.params.values().find(|p| p.name == name) {
        None => Ok(None),
        Some(p) if p.bitwidth > bits => Err(format!(
            "action {} parameter {name} is {} bits wide (the pipeline's is {bits})",
            a.name, p.bitwidth
        )),
        Some(p) => Ok(Some(p.id)),
    }
}

fn counter(schema: &Schema, name: &str) -> Result<u32, String> {
    schema
        .counter_by_name(name)
        .map(|c| c.id)
        .ok_or_else(|| format!("the P4Info has no counter {name}"))
}

/// The ids of controller header `header`'s metadata `names`.
fn metadata(p4info: &P4Info, header: &str, names: [&str; 2]) -> Result<[u32; 2], String> {
    let h = p4info
        .controller_packet_metadata
        .iter()
        .find(|h| h.preamble.as_ref().is_some_and(|p| p.name == header))
        .ok_or_else(|| format!("the P4Info has no controller header {header}"))?;
    let mut ids = [0; 2];
    for (slot, name) in ids.iter_mut().zip(names) {
        let m = h
            .metadata
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| format!("controller header {header} has no metadata {name}"))?;
        if !(1..=ID_BITS as i32).contains(&m.bitwidth) {
            return Err(format!(
                "controller header {header} metadata {name} is {} bits wide (the pipeline's is \
                 {ID_BITS})",
                m.bitwidth
            ));
        }
        *slot = m.id;
    }
    Ok(ids)
}

impl Ids {
    /// Resolves the pipeline's names in a committed P4Info, or says what
    /// it lacks.
    pub(crate) fn resolve(schema: &Schema, p4info: &P4Info) -> Result<Self, String> {
        use MatchType::{Exact, Lpm};
        let pm = table(schema, "TurbonetIngress.port_mapper")?;
        let arp = table(schema, "TurbonetIngress.arp_responder")?;
        let local = table(schema, "TurbonetIngress.local")?;
        let lpm = table(schema, "TurbonetIngress.ipv4_lpm")?;
        let qm = table(schema, "TurbonetIngress.queue_mapper")?;
        // Every action that is not one of the others drops; `drop` must
        // still be there, or this is not the turbonet pipeline.
        action(schema, "TurbonetIngress.drop")?;
        let set_vport = action(schema, "TurbonetIngress.set_vport")?;
        Ok(Self {
            port_mapper: TableIds {
                id: pm.id,
                fields: [
                    field(pm, "standard_metadata.ingress_port", Exact, ID_BITS, false)?,
                    field(pm, "hdr.vlan.vid", Exact, 12, false)?,
                ],
            },
            arp_responder: TableIds {
                id: arp.id,
                fields: [
                    field(arp, "meta.vswitch", Exact, ID_BITS, false)?,
                    field(arp, "hdr.arp.tpa", Exact, 32, true)?,
                ],
            },
            local: TableIds {
                id: local.id,
                fields: [
                    field(local, "meta.vswitch", Exact, ID_BITS, false)?,
                    field(local, "hdr.ipv4.dst", Exact, 32, true)?,
                ],
            },
            ipv4_lpm: TableIds {
                id: lpm.id,
                fields: [
                    field(lpm, "meta.vswitch", Exact, ID_BITS, false)?,
                    field(lpm, "hdr.ipv4.dst", Lpm, 32, true)?,
                ],
            },
            ecmp_selector: lpm.implementation_id,
            queue_mapper: TableIds {
                id: qm.id,
                fields: [field(qm, "meta.vport_out", Exact, ID_BITS, false)?],
            },
            no_action: schema.action_by_name("NoAction").map(|a| a.id),
            set_vport: params(
                set_vport,
                [("vswitch", ID_BITS, false), ("vport", ID_BITS, false)],
            )?,
            set_vport_in: [
                optional_param(set_vport, "delay_ns", 64)?,
                optional_param(set_vport, "loss_threshold", 32)?,
            ],
            arp_reply: params(
                action(schema, "TurbonetIngress.arp_reply")?,
                [("mac", 48, true)],
            )?,
            to_cpu: action(schema, "TurbonetIngress.to_cpu")?.id,
            set_next_hop: params(
                action(schema, "TurbonetIngress.set_next_hop")?,
                [
                    ("vport", ID_BITS, false),
                    ("dmac", 48, true),
                    ("smac", 48, true),
                ],
            )?,
            set_egress: params(
                action(schema, "TurbonetIngress.set_egress")?,
                [
                    ("port", ID_BITS, false),
                    ("tag", 12, false),
                    ("queue", 32, false),
                    ("delay_ns", 64, false),
                    ("loss_threshold", 32, false),
                ],
            )?,
            vport_rx: counter(schema, "TurbonetIngress.vport_rx")?,
            vport_tx: counter(schema, "TurbonetIngress.vport_tx")?,
            vport_lost: counter(schema, "TurbonetIngress.vport_lost")?,
            vport_rx_lost: schema
                .counter_by_name("TurbonetIngress.vport_rx_lost")
                .map(|c| c.id),
            packet_in: metadata(p4info, "packet_in", ["vswitch", "vport"])?,
            packet_out: metadata(p4info, "packet_out", ["vswitch", "vport"])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turbonet_p4info;

    #[test]
    fn turbonet_p4info_resolves() {
        let p4info = turbonet_p4info();
        let ids = Ids::resolve(&Schema::new(&p4info).unwrap(), &p4info).unwrap();
        assert_eq!(ids.port_mapper.id, 33554433);
        assert_eq!(ids.port_mapper.fields, [1, 2]);
        assert_eq!(ids.set_egress.params, [1, 2, 3, 4, 5]);
        assert_eq!(ids.set_vport.params, [1, 2]);
        assert_eq!(ids.set_vport_in, [Some(3), Some(4)]);
        assert_eq!(ids.vport_rx_lost, Some(301989892));
        assert_eq!(ids.ecmp_selector, Some(285212673));
        assert_eq!(ids.packet_out, [1, 2]);
    }

    #[test]
    fn a_p4info_without_inbound_impairments_still_resolves() {
        let mut p4info = turbonet_p4info();
        p4info
            .counters
            .retain(|c| c.preamble.as_ref().unwrap().alias != "vport_rx_lost");
        let set_vport = p4info
            .actions
            .iter_mut()
            .find(|a| a.preamble.as_ref().unwrap().alias == "set_vport")
            .unwrap();
        set_vport.params.truncate(2);
        let ids = Ids::resolve(&Schema::new(&p4info).unwrap(), &p4info).unwrap();
        assert_eq!(ids.set_vport_in, [None, None]);
        assert_eq!(ids.vport_rx_lost, None);
    }

    #[test]
    fn what_is_missing_is_named() {
        let mut p4info = turbonet_p4info();
        p4info
            .counters
            .retain(|c| c.preamble.as_ref().unwrap().alias != "vport_tx");
        let why = Ids::resolve(&Schema::new(&p4info).unwrap(), &p4info).unwrap_err();
        assert_eq!(why, "the P4Info has no counter TurbonetIngress.vport_tx");

        let mut p4info = turbonet_p4info();
        p4info.tables[3].match_fields[1].bitwidth = 128;
        let why = Ids::resolve(&Schema::new(&p4info).unwrap(), &p4info).unwrap_err();
        assert!(why.contains("hdr.ipv4.dst is 128 bits wide"), "{why}");
    }
}
