//! The turbonet pipeline's names (`p4/turbonet.p4`), resolved once to the
//! ids of the P4Info a device runs. The soft switch runs the pipeline
//! natively and the controller writes its tables; both find every table,
//! field, action, parameter, counter and controller metadata through a
//! [`Pipeline`], so a P4Info numbered differently (p4c's own ids) works as
//! well, and a P4Info that is not turbonet's is refused with what it lacks.
//!
//! The names are p4c's: a key field is named by its source text
//! (`standard_metadata.ingress_port`, `hdr.vlan.$valid$` for
//! `hdr.vlan.isValid()`), an action or table by its control. The P4Info
//! turbonet ships is p4c's own (`p4/build/`).
//!
//! What a number means can depend on what runs the program: delays are in
//! ticks of the target's global timestamps, which [`Target`] converts.

use crate::p4::config::v1::P4Info;
use crate::p4::config::v1::match_field::MatchType;

use crate::{ActionInfo, Error, Schema, TableInfo};

/// A table and its key fields' ids, in the program's key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableIds<const N: usize> {
    /// The table's id.
    pub id: u32,
    /// Its key fields' ids.
    pub fields: [u32; N],
}

/// An action and its parameters' ids and widths, in the program's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionIds<const N: usize> {
    /// The action's id.
    pub id: u32,
    /// Its parameters' ids.
    pub params: [u32; N],
    /// Their widths in bits.
    pub widths: [u32; N],
}

/// A parameter some P4Infos lack: its id and width.
pub type OptionalParam = Option<(u32, u32)>;

/// What runs the pipeline. The program's delays (`set_vport`'s and
/// `set_egress`'s `delay`) are added to the target's global timestamp
/// (`standard_metadata.ingress_global_timestamp` on v1model), so they are
/// in that clock's ticks, which differ by target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// BMv2's `simple_switch_grpc`: its timestamps are microseconds
    /// (simple_switch's `ts_res` is `std::chrono::microseconds`).
    Bmv2,
    /// A Tofino: its MAC timestamps are nanoseconds.
    Tofino,
    /// turbonet's soft switch: its clock is nanoseconds.
    Soft,
}

impl Target {
    /// The target a remote switch running `p4info` is, by its
    /// architecture: a TNA program (`tna`, `t2na`) runs on a Tofino, any
    /// other (`v1model`, `psa`) on BMv2.
    pub fn of_arch(p4info: &P4Info) -> Self {
        let arch = p4info.pkg_info.as_ref().map_or("", |p| p.arch.as_str());
        match arch {
            "tna" | "t2na" => Self::Tofino,
            _ => Self::Bmv2,
        }
    }

    /// Nanoseconds per tick of the target's global timestamps.
    pub const fn tick_ns(self) -> u64 {
        match self {
            Self::Bmv2 => 1_000,
            Self::Tofino | Self::Soft => 1,
        }
    }

    /// A delay of `ns` nanoseconds in the target's ticks, to the nearest
    /// tick (BMv2 cannot hold a frame for less than a microsecond).
    pub const fn delay_ticks(self, ns: u64) -> u64 {
        let tick = self.tick_ns();
        ns.saturating_add(tick / 2) / tick
    }

    /// A delay of `ticks` of the target's clock in nanoseconds.
    pub const fn delay_ns(self, ticks: u64) -> u64 {
        ticks.saturating_mul(self.tick_ns())
    }
}

/// Everything of the P4Info the turbonet pipeline is driven through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    /// What runs the pipeline: the unit of its delays.
    pub target: Target,
    /// `port_mapper`: (ingress port, tagged (`hdr.vlan.$valid$`), tag: 0
    /// when untagged) -> `set_vport` or `drop`.
    pub port_mapper: TableIds<3>,
    /// `arp_responder`: (vswitch, tpa) -> `arp_reply`.
    pub arp_responder: TableIds<2>,
    /// `local`: (vswitch, dst) -> `to_cpu`.
    pub local: TableIds<2>,
    /// `ipv4_lpm`: (vswitch, dst LPM) -> `set_next_hop`, by a selector.
    pub ipv4_lpm: TableIds<2>,
    /// The action profile (selector) of `ipv4_lpm`, if it has one.
    pub ecmp_selector: Option<u32>,
    /// `queue_mapper`: (vport_out) -> `set_egress` or `drop`.
    pub queue_mapper: TableIds<1>,
    /// `NoAction`, the default of `local` (absent from some P4Infos).
    pub no_action: Option<u32>,
    /// `drop`.
    pub drop: u32,
    /// `set_vport`: (vswitch, vport).
    pub set_vport: ActionIds<2>,
    /// `set_vport`'s inbound (delay, loss_threshold) of a host link; a
    /// P4Info from before host links were impaired at ingress lacks them
    /// (no inbound delay or loss).
    pub set_vport_in: [OptionalParam; 2],
    /// `arp_reply`: (mac).
    pub arp_reply: ActionIds<1>,
    /// `to_cpu`.
    pub to_cpu: u32,
    /// `set_next_hop`: (vport, dmac, smac).
    pub set_next_hop: ActionIds<3>,
    /// `set_egress`: (port, tag, queue, delay, loss_threshold); the delays
    /// are in ticks of [`Pipeline::target`].
    pub set_egress: ActionIds<5>,
    /// Counter `vport_rx`: frames in through a virtual port.
    pub vport_rx: u32,
    /// Counter `vport_tx`: frames out through it.
    pub vport_tx: u32,
    /// Counter `vport_lost`: frames the link's loss dropped on the way out.
    pub vport_lost: u32,
    /// Counter `vport_rx_lost`, the inbound loss of host links (absent
    /// from older P4Infos: not counted).
    pub vport_rx_lost: Option<u32>,
    /// `packet_in` metadata (vswitch, vport).
    pub packet_in: [u32; 2],
    /// `packet_out` metadata (vswitch, vport).
    pub packet_out: [u32; 2],
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
) -> Result<u32, String> {
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
    let mut widths = [0; N];
    for ((slot, width), (name, bits, exact)) in params.iter_mut().zip(&mut widths).zip(wanted) {
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
        *width = p.bitwidth;
    }
    Ok(ActionIds {
        id: a.id,
        params,
        widths,
    })
}

/// Parameter `name` of `a`, at most `bits` wide, if the action has it.
fn optional_param(a: &ActionInfo, name: &str, bits: u32) -> Result<OptionalParam, String> {
    match a.params.values().find(|p| p.name == name) {
        None => Ok(None),
        Some(p) if p.bitwidth > bits => Err(format!(
            "action {} parameter {name} is {} bits wide (the pipeline's is {bits})",
            a.name, p.bitwidth
        )),
        Some(p) => Ok(Some((p.id, p.bitwidth))),
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

impl Pipeline {
    /// Resolves the pipeline's names in `p4info` (indexed as `schema`) for
    /// `target`, or says what it lacks.
    pub fn resolve(schema: &Schema, p4info: &P4Info, target: Target) -> Result<Self, Error> {
        Self::resolve_names(schema, p4info, target).map_err(Error::NotTurbonet)
    }

    fn resolve_names(schema: &Schema, p4info: &P4Info, target: Target) -> Result<Self, String> {
        use MatchType::{Exact, Lpm};
        let pm = table(schema, "TurbonetIngress.port_mapper")?;
        let arp = table(schema, "TurbonetIngress.arp_responder")?;
        let local = table(schema, "TurbonetIngress.local")?;
        let lpm = table(schema, "TurbonetIngress.ipv4_lpm")?;
        let qm = table(schema, "TurbonetIngress.queue_mapper")?;
        // Every action that is not one of the others drops; `drop` must
        // still be there, or this is not the turbonet pipeline.
        let drop = action(schema, "TurbonetIngress.drop")?.id;
        let set_vport = action(schema, "TurbonetIngress.set_vport")?;
        Ok(Self {
            target,
            port_mapper: TableIds {
                id: pm.id,
                fields: [
                    field(pm, "standard_metadata.ingress_port", Exact, ID_BITS, false)?,
                    field(pm, "hdr.vlan.$valid$", Exact, 1, true)?,
                    field(pm, "meta.vid", Exact, 12, false)?,
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
            drop,
            set_vport: params(
                set_vport,
                [("vswitch", ID_BITS, false), ("vport", ID_BITS, false)],
            )?,
            set_vport_in: [
                optional_param(set_vport, "delay", 64)?,
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
                    ("delay", 64, false),
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

    fn resolve(p4info: &P4Info) -> Result<Pipeline, String> {
        Pipeline::resolve_names(&Schema::new(p4info).unwrap(), p4info, Target::Soft)
    }

    /// p4c's P4Info of `p4/turbonet.p4` (p4c's ids, p4c's names for the
    /// keys: the source text) resolves.
    #[test]
    fn p4cs_p4info_resolves() {
        let p4info = turbonet_p4info();
        let ids = resolve(&p4info).unwrap();
        assert_eq!(ids.port_mapper.id, 48185095);
        assert_eq!(ids.port_mapper.fields, [1, 2, 3]);
        assert_eq!(ids.set_egress.params, [1, 2, 3, 4, 5]);
        assert_eq!(ids.set_vport.params, [1, 2]);
        assert_eq!(ids.set_vport_in, [Some((3, 48)), Some((4, 32))]);
        assert_eq!(ids.set_egress.widths, [9, 12, 3, 48, 32]);
        assert_eq!(ids.vport_rx_lost, Some(313452294));
        assert_eq!(ids.ecmp_selector, Some(301826970));
        assert_eq!(ids.no_action, Some(21257015));
        assert_eq!(ids.packet_out, [1, 2]);
        assert_eq!(ids.target, Target::Soft);
    }

    /// BMv2's global timestamps are microseconds: a delay written for it
    /// is in microseconds, or a 10 ms link would hold frames 10 s.
    #[test]
    fn delays_are_in_the_targets_ticks() {
        let ten_ms = 10_000_000;
        assert_eq!(Target::Bmv2.delay_ticks(ten_ms), 10_000);
        assert_eq!(Target::Tofino.delay_ticks(ten_ms), ten_ms);
        assert_eq!(Target::Soft.delay_ticks(ten_ms), ten_ms);
        // To the nearest microsecond; back to nanoseconds.
        assert_eq!(Target::Bmv2.delay_ticks(1_499), 1);
        assert_eq!(Target::Bmv2.delay_ticks(1_500), 2);
        assert_eq!(
            Target::Bmv2.delay_ns(Target::Bmv2.delay_ticks(ten_ms)),
            ten_ms
        );
        assert_eq!(Target::Bmv2.delay_ticks(u64::MAX), u64::MAX / 1_000);
    }

    #[test]
    fn a_remote_targets_clock_follows_the_programs_architecture() {
        let mut p4info = turbonet_p4info();
        assert_eq!(Target::of_arch(&p4info), Target::Bmv2, "v1model");
        p4info.pkg_info.as_mut().unwrap().arch = "tna".into();
        assert_eq!(Target::of_arch(&p4info), Target::Tofino);
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
        let ids = resolve(&p4info).unwrap();
        assert_eq!(ids.set_vport_in, [None, None]);
        assert_eq!(ids.vport_rx_lost, None);
    }

    #[test]
    fn what_is_missing_is_named() {
        let mut p4info = turbonet_p4info();
        p4info
            .counters
            .retain(|c| c.preamble.as_ref().unwrap().alias != "vport_tx");
        let why = resolve(&p4info).unwrap_err();
        assert_eq!(why, "the P4Info has no counter TurbonetIngress.vport_tx");

        let mut p4info = turbonet_p4info();
        p4info.tables[3].match_fields[1].bitwidth = 128;
        let why = resolve(&p4info).unwrap_err();
        assert!(why.contains("hdr.ipv4.dst is 128 bits wide"), "{why}");
    }
}
