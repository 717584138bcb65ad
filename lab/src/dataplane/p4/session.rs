//! The controller's hold on one P4 switch: its P4Runtime session, the
//! entities written to it, and the difference a change of the fabric
//! needs (so a failed link rewrites a handful of entries, not thousands).

use std::collections::BTreeMap;

use crate::error::Result;
use prost::Message;
use turbonet_p4::p4::config::v1::P4Info;
use turbonet_p4::p4::v1::{CounterEntry, Entity, TableEntry, Update, entity, update};
use turbonet_p4::pipeline::Target;
use turbonet_p4::{Pipeline, Schema};

use turbonet_p4::Client;

/// Packets and bytes of one counter cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// The per-virtual-port counters of the pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VportCounters {
    /// Frames in through the virtual port.
    pub rx: Count,
    /// Frames out through it.
    pub tx: Count,
    /// Frames the link's loss dropped on the way out.
    pub lost: Count,
    /// Frames a host link's inbound loss dropped as they came in (counted
    /// in `rx` too, which counts before the draw); zero when the pipeline
    /// has no `vport_rx_lost`.
    pub rx_lost: Count,
}

/// What a sync wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// Entities inserted.
    pub inserted: usize,
    /// Entities modified.
    pub modified: usize,
    /// Entities deleted.
    pub deleted: usize,
}

impl Changes {
    /// Entities written.
    pub fn total(&self) -> usize {
        self.inserted + self.modified + self.deleted
    }
}

/// Which kind of entity, in the order inserts must go in: members before
/// the groups that list them, both before the table entries that use them
/// (deletes go the other way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Member,
    Group,
    Entry,
}

/// An entity's identity (§9): what a MODIFY or DELETE names it by.
fn identity(e: &Entity) -> (Kind, Vec<u8>) {
    match &e.entity {
        Some(entity::Entity::ActionProfileMember(m)) => (
            Kind::Member,
            [m.action_profile_id, m.member_id]
                .iter()
                .flat_map(|v| v.to_be_bytes())
                .collect(),
        ),
        Some(entity::Entity::ActionProfileGroup(g)) => (
            Kind::Group,
            [g.action_profile_id, g.group_id]
                .iter()
                .flat_map(|v| v.to_be_bytes())
                .collect(),
        ),
        Some(entity::Entity::TableEntry(t)) => {
            let mut fields = t.r#match.clone();
            fields.sort_by_key(|f| f.field_id);
            let key = TableEntry {
                table_id: t.table_id,
                r#match: fields,
                priority: t.priority,
                ..TableEntry::default()
            };
            (Kind::Entry, key.encode_to_vec())
        }
        // The controller writes nothing else.
        _ => (Kind::Entry, e.encode_to_vec()),
    }
}

/// The entities a device holds, as last written.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    entities: BTreeMap<(Kind, Vec<u8>), Entity>,
}

impl Installed {
    /// What `entities` installed.
    pub fn new(entities: Vec<Entity>) -> Self {
        Installed {
            entities: entities.into_iter().map(|e| (identity(&e), e)).collect(),
        }
    }

    /// The writes that turn what is installed into `desired`, as batches
    /// to send one after the other: inserts and modifies of members, of
    /// groups, of table entries, then deletes of table entries, groups,
    /// members.
    pub fn diff(&self, desired: &[Entity]) -> (Vec<Vec<Update>>, Changes) {
        let want: BTreeMap<(Kind, Vec<u8>), &Entity> =
            desired.iter().map(|e| (identity(e), e)).collect();
        let mut changes = Changes::default();
        let mut upserts: BTreeMap<Kind, Vec<Update>> = BTreeMap::new();
        for (key, entity) in &want {
            let kind = match self.entities.get(key) {
                None => {
                    changes.inserted += 1;
                    update::Type::Insert
                }
                Some(have) if have != *entity => {
                    changes.modified += 1;
                    update::Type::Modify
                }
                Some(_) => continue,
            };
            upserts.entry(key.0).or_default().push(Update {
                r#type: kind as i32,
                entity: Some((*entity).clone()),
            });
        }
        let mut deletes: BTreeMap<Kind, Vec<Update>> = BTreeMap::new();
        for (key, entity) in &self.entities {
            if !want.contains_key(key) {
                changes.deleted += 1;
                deletes.entry(key.0).or_default().push(Update {
                    r#type: update::Type::Delete as i32,
                    entity: Some(entity.clone()),
                });
            }
        }
        let batches = upserts
            .into_values()
            .chain(deletes.into_values().rev())
            .collect();
        (batches, changes)
    }
}

/// The primary controller's session with one P4 switch.
#[derive(Debug)]
pub struct SwitchSession {
    client: Client,
    p4info: P4Info,
    pipeline: Pipeline,
    installed: Installed,
}

impl SwitchSession {
    /// Becomes primary, sets the pipeline (the device's tables start
    /// empty) and writes `entities`; `target` runs it.
    pub async fn program(
        mut client: Client,
        p4info: P4Info,
        target: Target,
        device_config: Vec<u8>,
        entities: Vec<Entity>,
    ) -> Result<Self> {
        let schema = Schema::new(&p4info)?;
        let pipeline = Pipeline::resolve(&schema, &p4info, target)?;
        client.set_pipeline(p4info.clone(), device_config).await?;
        let mut session = SwitchSession {
            client,
            p4info,
            pipeline,
            installed: Installed::default(),
        };
        session.sync(entities).await?;
        Ok(session)
    }

    /// Takes over a device that `entities` were written to (by `up`, under
    /// a lower election id); `target` runs the pipeline.
    pub fn adopt(
        client: Client,
        p4info: P4Info,
        target: Target,
        entities: Vec<Entity>,
    ) -> Result<Self> {
        let schema = Schema::new(&p4info)?;
        Ok(SwitchSession {
            pipeline: Pipeline::resolve(&schema, &p4info, target)?,
            client,
            p4info,
            installed: Installed::new(entities),
        })
    }

    /// Takes over a device whose entities are not known: they are read
    /// back (every table entry, action profile member and group).
    pub async fn adopt_reading(mut client: Client, p4info: P4Info, target: Target) -> Result<Self> {
        use turbonet_p4::p4::v1::{ActionProfileGroup, ActionProfileMember};
        let filters = vec![
            Entity {
                entity: Some(entity::Entity::TableEntry(TableEntry::default())),
            },
            Entity {
                entity: Some(entity::Entity::ActionProfileMember(
                    ActionProfileMember::default(),
                )),
            },
            Entity {
                entity: Some(entity::Entity::ActionProfileGroup(
                    ActionProfileGroup::default(),
                )),
            },
        ];
        let entities = client.read_all(filters).await?;
        Self::adopt(client, p4info, target, entities)
    }

    /// The stream's ends, for packet I/O (see [`Client::packet_io`]).
    pub fn packet_io(&mut self) -> Option<turbonet_p4::PacketIo> {
        self.client.packet_io()
    }

    /// The turbonet pipeline's ids in the device's P4Info.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// How many entities the device holds.
    pub fn installed(&self) -> usize {
        self.installed.entities.len()
    }

    /// Writes what it takes for the device to hold exactly `desired`.
    pub async fn sync(&mut self, desired: Vec<Entity>) -> Result<Changes> {
        let (batches, changes) = self.installed.diff(&desired);
        for batch in batches {
            self.client.write_updates(batch).await?;
        }
        self.installed = Installed::new(desired);
        Ok(changes)
    }

    /// Gives the running pipeline a new device config, keeping its tables.
    pub async fn set_device_config(&mut self, device_config: Vec<u8>) -> Result<()> {
        Ok(self
            .client
            .reconcile_pipeline(self.p4info.clone(), device_config)
            .await?)
    }

    /// The rx, tx, lost and rx_lost counters of virtual ports `1..=vports`
    /// (rx_lost stays zero on a pipeline without `vport_rx_lost`).
    pub async fn vport_counters(&mut self, vports: u32) -> Result<Vec<VportCounters>> {
        let p = &self.pipeline;
        let mut ids = vec![p.vport_rx, p.vport_tx, p.vport_lost];
        // A pipeline from before host links were impaired at ingress has
        // no vport_rx_lost: nothing is lost there.
        ids.extend(p.vport_rx_lost);
        // The cells in use only: a wildcard would read every cell of every
        // counter (16,384 each in turbonet.p4), several times a second.
        let filters = ids
            .iter()
            .flat_map(|&counter_id| {
                (1..=i64::from(vports)).map(move |index| Entity {
                    entity: Some(entity::Entity::CounterEntry(CounterEntry {
                        counter_id,
                        index: Some(turbonet_p4::p4::v1::Index { index }),
                        ..CounterEntry::default()
                    })),
                })
            })
            .collect();
        let mut out = vec![VportCounters::default(); vports as usize + 1];
        for e in self.client.read_all(filters).await? {
            let Some(entity::Entity::CounterEntry(c)) = e.entity else {
                continue;
            };
            let (Some(index), Some(data)) = (c.index, c.data) else {
                continue;
            };
            let Some(cell) = usize::try_from(index.index)
                .ok()
                .and_then(|i| out.get_mut(i))
            else {
                continue;
            };
            let count = Count {
                packets: u64::try_from(data.packet_count).unwrap_or(0),
                bytes: u64::try_from(data.byte_count).unwrap_or(0),
            };
            match ids.iter().position(|&id| id == c.counter_id) {
                Some(0) => cell.rx = count,
                Some(1) => cell.tx = count,
                Some(2) => cell.lost = count,
                Some(3) => cell.rx_lost = count,
                _ => {}
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_p4::p4::v1::{ActionProfileMember, FieldMatch, field_match};

    fn entry(table_id: u32, key: u8, action: u32) -> Entity {
        Entity {
            entity: Some(entity::Entity::TableEntry(TableEntry {
                table_id,
                r#match: vec![FieldMatch {
                    field_id: 1,
                    field_match_type: Some(field_match::FieldMatchType::Exact(
                        field_match::Exact { value: vec![key] },
                    )),
                }],
                action: Some(turbonet_p4::p4::v1::TableAction {
                    r#type: Some(
                        turbonet_p4::p4::v1::table_action::Type::ActionProfileMemberId(action),
                    ),
                }),
                ..TableEntry::default()
            })),
        }
    }

    fn member(id: u32, port: u8) -> Entity {
        Entity {
            entity: Some(entity::Entity::ActionProfileMember(ActionProfileMember {
                action_profile_id: 9,
                member_id: id,
                action: Some(turbonet_p4::p4::v1::Action {
                    action_id: 5,
                    params: vec![turbonet_p4::p4::v1::action::Param {
                        param_id: 1,
                        value: vec![port],
                    }],
                }),
            })),
        }
    }

    fn kinds(batch: &[Update]) -> Vec<i32> {
        batch.iter().map(|u| u.r#type).collect()
    }

    #[test]
    fn nothing_changed_writes_nothing() {
        let all = vec![member(1, 1), entry(7, 1, 1)];
        let (batches, changes) = Installed::new(all.clone()).diff(&all);
        assert!(batches.is_empty());
        assert_eq!(changes.total(), 0);
    }

    #[test]
    fn inserts_go_members_first_and_deletes_entries_first() {
        let before = Installed::new(vec![member(1, 1), entry(7, 1, 1)]);
        // Entry 1 now uses a new member 2, member 1 goes, entry 2 appears.
        let after = vec![member(2, 2), entry(7, 1, 2), entry(7, 2, 2)];
        let (batches, changes) = before.diff(&after);
        assert_eq!(
            changes,
            Changes {
                inserted: 2,
                modified: 1,
                deleted: 1
            }
        );
        let insert = update::Type::Insert as i32;
        let modify = update::Type::Modify as i32;
        let delete = update::Type::Delete as i32;
        assert_eq!(batches.len(), 3);
        assert_eq!(kinds(&batches[0]), vec![insert]); // member 2
        assert_eq!(kinds(&batches[1]), vec![modify, insert]); // entries
        assert_eq!(kinds(&batches[2]), vec![delete]); // member 1, last
    }

    #[test]
    fn match_field_order_does_not_change_identity() {
        let mut a = entry(7, 1, 1);
        let Some(entity::Entity::TableEntry(t)) = &mut a.entity else {
            unreachable!()
        };
        t.r#match.push(FieldMatch {
            field_id: 0,
            field_match_type: None,
        });
        let mut b = a.clone();
        let Some(entity::Entity::TableEntry(t)) = &mut b.entity else {
            unreachable!()
        };
        t.r#match.reverse();
        assert_eq!(identity(&a), identity(&b));
    }
}
