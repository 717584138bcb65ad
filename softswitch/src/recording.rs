//! Recordings of turbonet's pipeline on BMv2, the reference the soft
//! switch is held to: what a controller wrote, the frames that went in and
//! what came out of every port, the PacketIns and the counters read back.
//!
//! A recording is JSON written to be read and diffed: entities by their
//! P4Info names (not ids, which change between compiles), values as
//! decimal, dotted IPv4, colon MAC or `0x` hex, frames as hex. The
//! recorder (`lab/tests/bmv2_record.rs`) runs it on `simple_switch_grpc`;
//! `softswitch/tests/bmv2_replay.rs` replays it through [`crate::Switch`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use turbonet_p4::Schema;
use turbonet_p4::p4::v1::{
    Action, ActionProfileGroup, ActionProfileMember, CounterEntry, Entity, FieldMatch,
    PacketMetadata, TableAction, TableEntry, action, action_profile_group, entity, field_match,
    table_action,
};

/// The control-block prefix of every table, action and counter name.
const CONTROL: &str = "TurbonetIngress.";

/// One case recorded on BMv2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recording {
    /// The case's name (its file is `<case>.json`).
    pub case: String,
    /// What it shows.
    pub about: String,
    /// The target and program it was recorded with.
    pub recorded_with: String,
    /// The physical switches, numbered from 0 in the order given.
    pub switches: Vec<RecordedSwitch>,
    /// Cables between two switches' ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cables: Vec<[PortRef; 2]>,
    /// What went in, one at a time, and what came out of each.
    pub steps: Vec<Step>,
    /// Every non-zero counter cell after the last step.
    pub counters: Vec<CounterCell>,
}

/// A physical switch: its ports and what the controller wrote to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedSwitch {
    /// Ports with a host (or the recorder) at the other end.
    pub ports: Vec<u32>,
    /// Loopback cables: pairs of this switch's ports joined to each other.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loopbacks: Vec<[u32; 2]>,
    /// The writes, in order, each an INSERT.
    pub writes: Vec<Write>,
}

/// A port of a switch of the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortRef {
    /// The switch's index.
    pub switch: usize,
    /// Its port.
    pub port: u32,
}

/// One INSERT, by P4Info names (tables, actions and counters without the
/// `TurbonetIngress.` prefix).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Write {
    /// A table entry: its match fields, then an action, a selector member
    /// or a group.
    Entry {
        /// The table.
        table: String,
        /// Match fields by name; an LPM value is `ADDRESS/LENGTH`.
        #[serde(rename = "match")]
        matches: BTreeMap<String, String>,
        /// A direct action by name...
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<String>,
        /// ... with its parameters by name.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        params: BTreeMap<String, String>,
        /// Or an action profile member.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        member: Option<u32>,
        /// Or an action profile group.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<u32>,
    },
    /// A member of `ipv4_lpm`'s action selector.
    Member {
        /// Member id.
        id: u32,
        /// Its action.
        action: String,
        /// Parameters by name.
        params: BTreeMap<String, String>,
    },
    /// A group of that selector (members of weight 1).
    Group {
        /// Group id.
        id: u32,
        /// Its members.
        members: Vec<u32>,
    },
}

/// One input and what it caused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// What the step shows.
    pub note: String,
    /// A frame into a port...
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    pub frame_in: Option<FrameIn>,
    /// ... or a controller's PacketOut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_out: Option<Packet>,
    /// Frames out of the switches' host ports (cables are inside).
    pub out: Vec<FrameOut>,
    /// PacketIns the controller received.
    pub packet_ins: Vec<Packet>,
}

/// A frame into a port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameIn {
    /// Switch index.
    pub switch: usize,
    /// Port.
    pub port: u32,
    /// The frame, hex.
    pub frame: String,
}

/// A frame out of a port, and when.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameOut {
    /// Switch index.
    pub switch: usize,
    /// Port.
    pub port: u32,
    /// The frame, hex.
    pub frame: String,
    /// Microseconds from the step's input to this frame: on BMv2 as
    /// measured at the port's other end (its own delay plus its time).
    pub delay_us: u64,
}

/// A PacketIn or PacketOut: metadata by name, payload hex.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Packet {
    /// Switch index.
    pub switch: usize,
    /// Metadata by name (`vswitch`, `vport`).
    pub metadata: BTreeMap<String, u64>,
    /// The payload, hex.
    pub payload: String,
}

/// A counter cell read back.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterCell {
    /// Switch index.
    pub switch: usize,
    /// Counter name (`vport_rx`, `vport_tx`, `vport_lost`,
    /// `vport_rx_lost`).
    pub counter: String,
    /// Cell.
    pub index: u64,
    /// Packets.
    pub packets: u64,
    /// Bytes (0 for a packets-only counter).
    pub bytes: u64,
}

/// The counters a recording reads back.
pub const COUNTERS: [&str; 4] = ["vport_rx", "vport_tx", "vport_lost", "vport_rx_lost"];

/// Why a recording does not fit a P4Info, or a value does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RecordingError(String);

fn err(msg: impl Into<String>) -> RecordingError {
    RecordingError(msg.into())
}

/// Bytes as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex back to bytes.
pub fn unhex(s: &str) -> Result<Vec<u8>, RecordingError> {
    if !s.len().is_multiple_of(2) {
        return Err(err(format!("odd-length hex {s:?}")));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| err(format!("bad hex {s:?}"))))
        .collect()
}

/// A value as written in a recording: decimal, `0x` hex, dotted IPv4 or
/// colon-separated MAC.
pub fn parse_value(s: &str) -> Result<u64, RecordingError> {
    let bad = || err(format!("bad value {s:?}: decimal, 0x hex, IPv4 or MAC"));
    if let Some(h) = s.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).map_err(|_| bad());
    }
    if s.contains('.') {
        let a: std::net::Ipv4Addr = s.parse().map_err(|_| bad())?;
        return Ok(u32::from(a).into());
    }
    if s.contains(':') {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(bad());
        }
        return parts.iter().try_fold(0u64, |v, p| {
            Ok(v << 8 | u64::from(u8::from_str_radix(p, 16).map_err(|_| bad())?))
        });
    }
    s.parse().map_err(|_| bad())
}

/// A MAC as a recording writes it.
pub fn mac(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

fn encode(value: u64, bits: u32, what: &str) -> Result<Vec<u8>, RecordingError> {
    turbonet_p4::bytes::encode(value, bits).map_err(|e| err(format!("{what}: {e}")))
}

fn action(
    schema: &Schema,
    name: &str,
    params: &BTreeMap<String, String>,
) -> Result<Action, RecordingError> {
    let info = schema
        .action_by_name(&format!("{CONTROL}{name}"))
        .ok_or_else(|| err(format!("no action {name}")))?;
    let mut out = Vec::new();
    for (pname, value) in params {
        let p = info
            .params
            .values()
            .find(|p| &p.name == pname)
            .ok_or_else(|| err(format!("action {name} has no parameter {pname}")))?;
        out.push(action::Param {
            param_id: p.id,
            value: encode(parse_value(value)?, p.bitwidth, pname)?,
        });
    }
    out.sort_by_key(|p| p.param_id);
    Ok(Action {
        action_id: info.id,
        params: out,
    })
}

fn profile(schema: &Schema) -> Result<u32, RecordingError> {
    schema
        .table_by_name(&format!("{CONTROL}ipv4_lpm"))
        .and_then(|t| t.implementation_id)
        .ok_or_else(|| err("ipv4_lpm has no action selector"))
}

impl Write {
    /// The P4Runtime entity of this write, its names resolved in `schema`.
    pub fn entity(&self, schema: &Schema) -> Result<Entity, RecordingError> {
        let entity = match self {
            Write::Member {
                id,
                action: a,
                params,
            } => entity::Entity::ActionProfileMember(ActionProfileMember {
                action_profile_id: profile(schema)?,
                member_id: *id,
                action: Some(action(schema, a, params)?),
            }),
            Write::Group { id, members } => {
                entity::Entity::ActionProfileGroup(ActionProfileGroup {
                    action_profile_id: profile(schema)?,
                    group_id: *id,
                    members: members
                        .iter()
                        .map(|&member_id| action_profile_group::Member {
                            member_id,
                            weight: 1,
                            ..Default::default()
                        })
                        .collect(),
                    max_size: 0,
                })
            }
            Write::Entry {
                table,
                matches,
                action: a,
                params,
                member,
                group,
            } => {
                let info = schema
                    .table_by_name(&format!("{CONTROL}{table}"))
                    .ok_or_else(|| err(format!("no table {table}")))?;
                let mut fields = Vec::new();
                for (fname, value) in matches {
                    let f = info
                        .match_fields
                        .values()
                        .find(|f| &f.name == fname)
                        .ok_or_else(|| err(format!("table {table} has no field {fname}")))?;
                    let kind = match value.split_once('/') {
                        Some((addr, len)) => field_match::FieldMatchType::Lpm(field_match::Lpm {
                            value: encode(parse_value(addr)?, f.bitwidth, fname)?,
                            prefix_len: len
                                .parse()
                                .map_err(|_| err(format!("bad prefix {value}")))?,
                        }),
                        None => field_match::FieldMatchType::Exact(field_match::Exact {
                            value: encode(parse_value(value)?, f.bitwidth, fname)?,
                        }),
                    };
                    fields.push(FieldMatch {
                        field_id: f.id,
                        field_match_type: Some(kind),
                    });
                }
                fields.sort_by_key(|f| f.field_id);
                let then = match (a, member, group) {
                    (Some(a), None, None) => table_action::Type::Action(action(schema, a, params)?),
                    (None, Some(m), None) => table_action::Type::ActionProfileMemberId(*m),
                    (None, None, Some(g)) => table_action::Type::ActionProfileGroupId(*g),
                    _ => {
                        return Err(err(format!(
                            "an entry of {table} needs one of action, member, group"
                        )));
                    }
                };
                entity::Entity::TableEntry(TableEntry {
                    table_id: info.id,
                    r#match: fields,
                    action: Some(TableAction { r#type: Some(then) }),
                    ..Default::default()
                })
            }
        };
        Ok(Entity {
            entity: Some(entity),
        })
    }
}

/// The id of counter `name` (without the control prefix).
pub fn counter_id(schema: &Schema, name: &str) -> Result<u32, RecordingError> {
    schema
        .counter_by_name(&format!("{CONTROL}{name}"))
        .map(|c| c.id)
        .ok_or_else(|| err(format!("no counter {name}")))
}

/// A wildcard read of every cell of counter `name`.
pub fn counter_read(schema: &Schema, name: &str) -> Result<Entity, RecordingError> {
    Ok(Entity {
        entity: Some(entity::Entity::CounterEntry(CounterEntry {
            counter_id: counter_id(schema, name)?,
            ..Default::default()
        })),
    })
}

/// The `packet_in` or `packet_out` header's metadata ids by name
/// (`vswitch`, `vport`), from the P4Info.
pub fn packet_metadata(
    p4info: &turbonet_p4::p4::config::v1::P4Info,
    header: &str,
) -> BTreeMap<String, u32> {
    p4info
        .controller_packet_metadata
        .iter()
        .filter(|h| h.preamble.as_ref().is_some_and(|p| p.name == header))
        .flat_map(|h| h.metadata.iter().map(|m| (m.name.clone(), m.id)))
        .collect()
}

impl Packet {
    /// This packet's metadata as P4Runtime's, by the ids of `ids`
    /// ([`packet_metadata`]).
    pub fn metadata(
        &self,
        ids: &BTreeMap<String, u32>,
    ) -> Result<Vec<PacketMetadata>, RecordingError> {
        self.metadata
            .iter()
            .map(|(name, &value)| {
                let id = ids
                    .get(name)
                    .ok_or_else(|| err(format!("no packet metadata {name}")))?;
                Ok(PacketMetadata {
                    metadata_id: *id,
                    value: encode(value, 64, name)?,
                })
            })
            .collect()
    }

    /// A packet of switch `switch` from P4Runtime's metadata, named by
    /// `ids` ([`packet_metadata`]).
    pub fn from_p4rt(
        switch: usize,
        metadata: &[PacketMetadata],
        payload: &[u8],
        ids: &BTreeMap<String, u32>,
    ) -> Self {
        let names: BTreeMap<u32, &String> = ids.iter().map(|(n, id)| (*id, n)).collect();
        Packet {
            switch,
            metadata: metadata
                .iter()
                .map(|m| {
                    let name = names
                        .get(&m.metadata_id)
                        .map_or_else(|| format!("id {}", m.metadata_id), |n| (*n).clone());
                    (name, turbonet_p4::bytes::decode(&m.value))
                })
                .collect(),
            payload: hex(payload),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_in_every_notation() {
        assert_eq!(parse_value("42").unwrap(), 42);
        assert_eq!(parse_value("0xffffffff").unwrap(), 0xffff_ffff);
        assert_eq!(parse_value("10.0.2.0").unwrap(), 0x0a00_0200);
        assert_eq!(parse_value("02:74:6e:00:00:01").unwrap(), 0x0274_6e00_0001);
        assert!(parse_value("ten").is_err());
        assert_eq!(unhex(&hex(&[0, 0xab, 0xff])).unwrap(), vec![0, 0xab, 0xff]);
        assert!(unhex("abc").is_err());
    }

    #[test]
    fn writes_resolve_by_name_and_refuse_unknown_names() {
        let p4info = turbonet_p4::turbonet_p4info();
        let schema = Schema::new(&p4info).unwrap();
        let route = Write::Entry {
            table: "ipv4_lpm".into(),
            matches: [
                ("meta.vswitch".into(), "1".into()),
                ("hdr.ipv4.dst".into(), "10.0.2.0/24".into()),
            ]
            .into(),
            action: None,
            params: BTreeMap::new(),
            member: Some(3),
            group: None,
        };
        let Some(entity::Entity::TableEntry(e)) = route.entity(&schema).unwrap().entity else {
            panic!("a table entry");
        };
        assert_eq!(e.r#match.len(), 2);
        let bad = Write::Member {
            id: 1,
            action: "set_next_hop".into(),
            params: [("nope".into(), "1".into())].into(),
        };
        assert!(bad.entity(&schema).is_err());
    }
}
