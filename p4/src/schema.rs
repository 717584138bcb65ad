//! Loading a text-format P4Info and indexing it into a [`Schema`].

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use crate::FILE_DESCRIPTOR_SET;
use crate::p4::config::v1::{
    P4Info, action_ref::Scope, counter_spec::Unit, match_field::Match, match_field::MatchType,
};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};

use crate::Error;

/// The turbonet pipeline's P4Info as p4c wrote it (`p4/build/`, see
/// `p4/build/PROVENANCE.toml`).
const TURBONET_P4INFO: &str = include_str!("../build/turbonet.p4info.txtpb");

fn pool() -> Result<&'static DescriptorPool, Error> {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    if let Some(pool) = POOL.get() {
        return Ok(pool);
    }
    let pool = DescriptorPool::decode(FILE_DESCRIPTOR_SET)?;
    Ok(POOL.get_or_init(|| pool))
}

/// Parses a P4Info in protobuf text format (as written by p4c's
/// `--p4runtime-files x.txtpb`).
///
/// The text is parsed against the schema compiled into this crate
/// with `prost-reflect`, then transcoded (encoded and decoded again) into
/// the generated `p4.config.v1.P4Info`.
pub fn parse_p4info(text: &str) -> Result<P4Info, Error> {
    let desc = pool()?
        .get_message_by_name("p4.config.v1.P4Info")
        .ok_or_else(|| {
            Error::InvalidP4Info("p4.config.v1.P4Info missing from the schema".into())
        })?;
    let dynamic = DynamicMessage::parse_text_format(desc, text)?;
    Ok(P4Info::decode(dynamic.encode_to_vec().as_slice())?)
}

/// The P4Info of the turbonet pipeline, p4c's of `p4/turbonet.p4`
/// (`p4/build/turbonet.p4info.txtpb`).
pub fn turbonet_p4info() -> P4Info {
    // The file is part of the crate and tested; a parse failure is a build bug.
    parse_p4info(TURBONET_P4INFO).expect("p4/build/turbonet.p4info.txtpb parses")
}

/// A match field of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchFieldInfo {
    /// Field id (unique within the table).
    pub id: u32,
    /// P4 name, e.g. `hdr.ipv4.dst`.
    pub name: String,
    /// Width in bits.
    pub bitwidth: u32,
    /// Match kind; `Unspecified` for architecture-specific kinds.
    pub kind: MatchType,
}

/// A table of the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// Table id.
    pub id: u32,
    /// Fully qualified name.
    pub name: String,
    /// Short name.
    pub alias: String,
    /// Match fields by id.
    pub match_fields: BTreeMap<u32, MatchFieldInfo>,
    /// Actions the table may use, with their scope.
    pub actions: HashMap<u32, Scope>,
    /// The action profile or selector implementing the table, if any.
    pub implementation_id: Option<u32>,
    /// Maximum number of entries.
    pub size: u64,
    /// Non-zero when the default action cannot be changed.
    pub const_default_action_id: u32,
    /// Entries are fixed by the program.
    pub is_const: bool,
    /// The table has ternary, range or optional fields, so entries carry a
    /// priority (specification section 9.1).
    pub needs_priority: bool,
}

/// An action parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamInfo {
    /// Parameter id.
    pub id: u32,
    /// Name.
    pub name: String,
    /// Width in bits.
    pub bitwidth: u32,
}

/// An action of the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionInfo {
    /// Action id.
    pub id: u32,
    /// Fully qualified name.
    pub name: String,
    /// Short name.
    pub alias: String,
    /// Parameters by id.
    pub params: BTreeMap<u32, ParamInfo>,
}

/// An action profile (or action selector).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileInfo {
    /// Profile id.
    pub id: u32,
    /// Fully qualified name.
    pub name: String,
    /// Tables it implements.
    pub table_ids: Vec<u32>,
    /// An action selector: groups are allowed.
    pub with_selector: bool,
    /// Maximum number of members.
    pub size: u64,
    /// Maximum members per group; 0 means no limit.
    pub max_group_size: u32,
}

/// An indexed counter array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterInfo {
    /// Counter id.
    pub id: u32,
    /// Fully qualified name.
    pub name: String,
    /// Short name.
    pub alias: String,
    /// What it counts.
    pub unit: Unit,
    /// Number of cells.
    pub size: usize,
}

/// The validated, indexed view of a P4Info: only built when every id is
/// unique and every reference resolves.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// Tables by id.
    pub tables: BTreeMap<u32, TableInfo>,
    /// Actions by id.
    pub actions: HashMap<u32, ActionInfo>,
    /// Action profiles by id.
    pub profiles: BTreeMap<u32, ProfileInfo>,
    /// Counters by id.
    pub counters: BTreeMap<u32, CounterInfo>,
    /// `packet_in` header metadata: id -> bitwidth.
    pub packet_in: HashMap<u32, u32>,
    /// `packet_out` header metadata: id -> bitwidth.
    pub packet_out: HashMap<u32, u32>,
}

/// Counters larger than this are refused: the soft switch keeps them in
/// memory, and a typo in a P4Info should not allocate gigabytes.
const MAX_COUNTER_SIZE: i64 = 1 << 24;

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidP4Info(msg.into())
}

fn width(bitwidth: i32, what: &str) -> Result<u32, Error> {
    u32::try_from(bitwidth)
        .ok()
        .filter(|w| *w > 0)
        .ok_or_else(|| bad(format!("{what}: bitwidth {bitwidth} must be positive")))
}

impl Schema {
    /// Indexes and checks a P4Info: ids present and unique, bitwidths
    /// positive, action references and table implementations resolve.
    pub fn new(p4info: &P4Info) -> Result<Self, Error> {
        let mut actions = HashMap::new();
        for action in &p4info.actions {
            let pre = action.preamble.clone().unwrap_or_default();
            if pre.id == 0 {
                return Err(bad(format!("action {:?} has id 0", pre.name)));
            }
            let mut params = BTreeMap::new();
            for p in &action.params {
                let info = ParamInfo {
                    id: p.id,
                    name: p.name.clone(),
                    bitwidth: width(p.bitwidth, &format!("action {} param {}", pre.name, p.name))?,
                };
                if params.insert(p.id, info).is_some() {
                    return Err(bad(format!(
                        "action {}: duplicate param id {}",
                        pre.name, p.id
                    )));
                }
            }
            let info = ActionInfo {
                id: pre.id,
                name: pre.name.clone(),
                alias: pre.alias,
                params,
            };
            if actions.insert(pre.id, info).is_some() {
                return Err(bad(format!("duplicate action id {}", pre.id)));
            }
        }

        let mut profiles = BTreeMap::new();
        for p in &p4info.action_profiles {
            let pre = p.preamble.clone().unwrap_or_default();
            let info = ProfileInfo {
                id: pre.id,
                name: pre.name,
                table_ids: p.table_ids.clone(),
                with_selector: p.with_selector,
                size: u64::try_from(p.size).unwrap_or(0),
                max_group_size: u32::try_from(p.max_group_size).unwrap_or(0),
            };
            if info.id == 0 || profiles.insert(info.id, info).is_some() {
                return Err(bad(format!(
                    "action profile id {} is 0 or duplicate",
                    pre.id
                )));
            }
        }

        let mut tables = BTreeMap::new();
        for t in &p4info.tables {
            let pre = t.preamble.clone().unwrap_or_default();
            if pre.id == 0 {
                return Err(bad(format!("table {:?} has id 0", pre.name)));
            }
            let mut match_fields = BTreeMap::new();
            let mut needs_priority = false;
            for f in &t.match_fields {
                let kind = match f.r#match {
                    Some(Match::MatchType(k)) => MatchType::try_from(k)
                        .map_err(|_| bad(format!("table {}: match type {k}", pre.name)))?,
                    _ => MatchType::Unspecified,
                };
                needs_priority |= matches!(
                    kind,
                    MatchType::Ternary | MatchType::Range | MatchType::Optional
                );
                let info = MatchFieldInfo {
                    id: f.id,
                    name: f.name.clone(),
                    bitwidth: width(f.bitwidth, &format!("table {} field {}", pre.name, f.name))?,
                    kind,
                };
                if f.id == 0 || match_fields.insert(f.id, info).is_some() {
                    return Err(bad(format!(
                        "table {}: field id {} is 0 or duplicate",
                        pre.name, f.id
                    )));
                }
            }
            let mut refs = HashMap::new();
            for r in &t.action_refs {
                if !actions.contains_key(&r.id) {
                    return Err(bad(format!(
                        "table {}: unknown action id {}",
                        pre.name, r.id
                    )));
                }
                refs.insert(
                    r.id,
                    Scope::try_from(r.scope).unwrap_or(Scope::TableAndDefault),
                );
            }
            let implementation_id = (t.implementation_id != 0).then_some(t.implementation_id);
            if let Some(id) = implementation_id {
                let profile = profiles.get(&id).ok_or_else(|| {
                    bad(format!("table {}: unknown implementation {id}", pre.name))
                })?;
                if !profile.table_ids.contains(&pre.id) {
                    return Err(bad(format!(
                        "table {}: action profile {} does not list it",
                        pre.name, profile.name
                    )));
                }
            }
            let info = TableInfo {
                id: pre.id,
                name: pre.name.clone(),
                alias: pre.alias,
                match_fields,
                actions: refs,
                implementation_id,
                size: u64::try_from(t.size).unwrap_or(0),
                const_default_action_id: t.const_default_action_id,
                is_const: t.is_const_table,
                needs_priority,
            };
            if tables.insert(pre.id, info).is_some() {
                return Err(bad(format!("duplicate table id {}", pre.id)));
            }
        }
        for p in profiles.values() {
            if let Some(t) = p.table_ids.iter().find(|t| !tables.contains_key(t)) {
                return Err(bad(format!(
                    "action profile {}: unknown table id {t}",
                    p.name
                )));
            }
        }

        let mut counters = BTreeMap::new();
        for c in &p4info.counters {
            let pre = c.preamble.clone().unwrap_or_default();
            if !(0..=MAX_COUNTER_SIZE).contains(&c.size) {
                return Err(bad(format!(
                    "counter {}: size {} out of range",
                    pre.name, c.size
                )));
            }
            let unit = c.spec.as_ref().map(|s| s.unit).unwrap_or_default();
            let info = CounterInfo {
                id: pre.id,
                name: pre.name,
                alias: pre.alias,
                unit: Unit::try_from(unit).unwrap_or(Unit::Unspecified),
                size: c.size as usize,
            };
            if info.id == 0 || counters.insert(info.id, info).is_some() {
                return Err(bad(format!("counter id {} is 0 or duplicate", pre.id)));
            }
        }

        let mut packet_in = HashMap::new();
        let mut packet_out = HashMap::new();
        for h in &p4info.controller_packet_metadata {
            let pre = h.preamble.clone().unwrap_or_default();
            let target = match pre.name.as_str() {
                "packet_in" => &mut packet_in,
                "packet_out" => &mut packet_out,
                _ => continue,
            };
            for m in &h.metadata {
                target.insert(
                    m.id,
                    width(m.bitwidth, &format!("{} {}", pre.name, m.name))?,
                );
            }
        }

        Ok(Self {
            tables,
            actions,
            profiles,
            counters,
            packet_in,
            packet_out,
        })
    }

    /// Looks a table up by full name or alias.
    pub fn table_by_name(&self, name: &str) -> Option<&TableInfo> {
        self.tables
            .values()
            .find(|t| t.name == name || t.alias == name)
    }

    /// Looks an action up by full name or alias.
    pub fn action_by_name(&self, name: &str) -> Option<&ActionInfo> {
        self.actions
            .values()
            .find(|a| a.name == name || a.alias == name)
    }

    /// Looks a counter up by full name or alias.
    pub fn counter_by_name(&self, name: &str) -> Option<&CounterInfo> {
        self.counters
            .values()
            .find(|c| c.name == name || c.alias == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turbonet_p4info_indexes() {
        let schema = Schema::new(&turbonet_p4info()).unwrap();
        assert_eq!(schema.tables.len(), 5);
        let lpm = schema.table_by_name("ipv4_lpm").unwrap();
        assert_eq!(lpm.implementation_id, Some(301826970));
        assert!(!lpm.needs_priority);
        assert_eq!(lpm.match_fields[&2].kind, MatchType::Lpm);
        assert_eq!(
            schema.action_by_name("set_egress").unwrap().params[&3].bitwidth,
            3
        );
        assert_eq!(
            schema.counter_by_name("vport_lost").unwrap().unit,
            Unit::Packets
        );
        assert_eq!(schema.packet_out.len(), 2);
    }

    /// p4c writes fields of P4Runtime 1.4 (`initial_default_action` on
    /// every table): the vendored protos must know them, as the text
    /// parser refuses unknown fields.
    #[test]
    fn p4cs_p4info_parses() {
        let parsed = parse_p4info(TURBONET_P4INFO);
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    /// The selector's `@max_group_size` reaches the P4Info: without it p4c
    /// writes none and a group could grow without bound.
    #[test]
    fn the_selector_limits_groups_to_16_members() {
        let schema = Schema::new(&turbonet_p4info()).unwrap();
        let lpm = schema.table_by_name("ipv4_lpm").unwrap();
        let selector = &schema.profiles[&lpm.implementation_id.unwrap()];
        assert!(selector.with_selector);
        assert_eq!(selector.max_group_size, 16);
    }

    #[test]
    fn text_errors_are_reported() {
        assert!(matches!(
            parse_p4info("tables { bogus: 1 }"),
            Err(Error::P4InfoText(_))
        ));
    }

    #[test]
    fn dangling_action_ref_is_refused() {
        let mut p4info = turbonet_p4info();
        p4info.tables[0].action_refs[0].id = 99;
        assert!(matches!(Schema::new(&p4info), Err(Error::InvalidP4Info(_))));
    }
}
