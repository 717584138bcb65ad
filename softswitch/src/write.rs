//! Write and Read semantics (specification sections 9 "P4 Entity Messages",
//! 12 "Write RPC" and 11 "Read RPC"): validation against the P4Info,
//! canonical form, and the per-entity rules.

use std::collections::BTreeMap;

use turbonet_p4::google::rpc::Code;
use turbonet_p4::p4::config::v1::{action_ref::Scope, counter_spec::Unit, match_field::MatchType};
use turbonet_p4::p4::v1::{
    Action, ActionProfileGroup, ActionProfileMember, CounterData, CounterEntry, Entity, FieldMatch,
    Index, TableAction, TableEntry, Update, action, action_profile_group, entity, field_match,
    table_action, update,
};

use crate::bytes::{all_ones, bits_outside, canonical_bytes, hex, prefix_mask, to_fixed_width};
use crate::device::{
    ActionProfileState, CounterValue, DeviceState, EntryKey, Forwarding, KeyMatch,
};
use crate::error::P4Error;
use turbonet_p4::{Schema, TableInfo};

type R<T> = Result<T, P4Error>;

// ------------------------------------------------------------ match keys

/// Checks one FieldMatch against its P4Info field and returns it in
/// canonical form (section 9.1.1 "Match format").
fn key_match(t: &TableInfo, m: &FieldMatch) -> R<KeyMatch> {
    let f = t.match_fields.get(&m.field_id).ok_or_else(|| {
        P4Error::invalid(format!(
            "table {} has no match field id {}",
            t.name, m.field_id
        ))
    })?;
    let bw = f.bitwidth;
    let what = |part: &str| format!("table {} field {} {part}", t.name, f.name);
    use field_match::FieldMatchType as F;
    let got = match &m.field_match_type {
        Some(F::Exact(_)) => MatchType::Exact,
        Some(F::Lpm(_)) => MatchType::Lpm,
        Some(F::Ternary(_)) => MatchType::Ternary,
        Some(F::Range(_)) => MatchType::Range,
        Some(F::Optional(_)) => MatchType::Optional,
        Some(F::Other(_)) => {
            return Err(P4Error::unimplemented("architecture-specific match kinds"));
        }
        None => return Err(P4Error::invalid(what("has no match value"))),
    };
    if got != f.kind {
        return Err(P4Error::invalid(format!(
            "table {} field {} is {} but the match is {}",
            t.name,
            f.name,
            f.kind.as_str_name(),
            got.as_str_name()
        )));
    }
    Ok(match &m.field_match_type {
        Some(F::Exact(e)) => KeyMatch::Exact(canonical_bytes(&e.value, bw, &what("value"))?),
        Some(F::Optional(o)) => KeyMatch::Optional(canonical_bytes(&o.value, bw, &what("value"))?),
        Some(F::Lpm(l)) => {
            // A zero-length prefix is a wildcard, written by omitting the field.
            if l.prefix_len <= 0 || l.prefix_len as u32 > bw {
                return Err(P4Error::invalid(what(&format!(
                    "prefix_len {} must be in 1..={bw} (omit the field for a wildcard)",
                    l.prefix_len
                ))));
            }
            let value = canonical_bytes(&l.value, bw, &what("value"))?;
            let prefix_len = l.prefix_len as u32;
            if bits_outside(&to_fixed_width(&value, bw), &prefix_mask(prefix_len, bw)) {
                return Err(P4Error::invalid(what(&format!(
                    "value 0x{} has bits set past the /{prefix_len} prefix",
                    hex(&value)
                ))));
            }
            KeyMatch::Lpm { value, prefix_len }
        }
        Some(F::Ternary(tm)) => {
            let value = canonical_bytes(&tm.value, bw, &what("value"))?;
            let mask = canonical_bytes(&tm.mask, bw, &what("mask"))?;
            if mask == [0] {
                return Err(P4Error::invalid(what(
                    "mask is zero (omit the field for a wildcard)",
                )));
            }
            if bits_outside(&to_fixed_width(&value, bw), &to_fixed_width(&mask, bw)) {
                return Err(P4Error::invalid(what(
                    "value has bits set outside the mask",
                )));
            }
            KeyMatch::Ternary { value, mask }
        }
        Some(F::Range(r)) => {
            let low = canonical_bytes(&r.low, bw, &what("low"))?;
            let high = canonical_bytes(&r.high, bw, &what("high"))?;
            if to_fixed_width(&low, bw) > to_fixed_width(&high, bw) {
                return Err(P4Error::invalid(what("low is above high")));
            }
            if low == [0] && all_ones(&high, bw) {
                return Err(P4Error::invalid(what(
                    "range covers every value (omit the field)",
                )));
            }
            KeyMatch::Range { low, high }
        }
        _ => unreachable!("handled above"),
    })
}

fn field_match_of(field_id: u32, m: &KeyMatch) -> FieldMatch {
    use field_match::FieldMatchType as F;
    let t = match m.clone() {
        KeyMatch::Exact(value) => F::Exact(field_match::Exact { value }),
        KeyMatch::Optional(value) => F::Optional(field_match::Optional { value }),
        KeyMatch::Lpm { value, prefix_len } => F::Lpm(field_match::Lpm {
            value,
            prefix_len: prefix_len as i32,
        }),
        KeyMatch::Ternary { value, mask } => F::Ternary(field_match::Ternary { value, mask }),
        KeyMatch::Range { low, high } => F::Range(field_match::Range { low, high }),
    };
    FieldMatch {
        field_id,
        field_match_type: Some(t),
    }
}

/// The canonical key of a table entry: every field valid, no duplicate,
/// every exact field present, and a priority iff the table needs one.
fn entry_key(t: &TableInfo, entry: &TableEntry) -> R<EntryKey> {
    let mut fields = BTreeMap::new();
    for m in &entry.r#match {
        let k = key_match(t, m)?;
        if fields.insert(m.field_id, k).is_some() {
            return Err(P4Error::invalid(format!(
                "table {}: match field id {} given twice",
                t.name, m.field_id
            )));
        }
    }
    for f in t.match_fields.values() {
        if f.kind == MatchType::Exact && !fields.contains_key(&f.id) {
            return Err(P4Error::invalid(format!(
                "table {}: exact field {} (id {}) is missing",
                t.name, f.name, f.id
            )));
        }
    }
    if t.needs_priority && entry.priority <= 0 {
        return Err(P4Error::invalid(format!(
            "table {} has ternary, range or optional fields: priority must be > 0",
            t.name
        )));
    }
    if !t.needs_priority && entry.priority != 0 {
        return Err(P4Error::invalid(format!(
            "table {} has only exact and LPM fields: priority must be 0",
            t.name
        )));
    }
    Ok(EntryKey {
        fields: fields.into_iter().collect(),
        priority: entry.priority,
    })
}

// --------------------------------------------------------------- actions

/// Checks an action and its parameters; returns it canonical (params by
/// id, canonical values). `table` restricts it to a table's actions; with
/// `default` the DEFAULT_ONLY scope is allowed and TABLE_ONLY is not.
fn check_action(schema: &Schema, table: Option<(&TableInfo, bool)>, a: &Action) -> R<Action> {
    let info = schema
        .actions
        .get(&a.action_id)
        .ok_or_else(|| P4Error::invalid(format!("unknown action id {}", a.action_id)))?;
    if let Some((t, default)) = table {
        let scope = t.actions.get(&a.action_id).ok_or_else(|| {
            P4Error::invalid(format!(
                "action {} is not an action of table {}",
                info.name, t.name
            ))
        })?;
        match (scope, default) {
            (Scope::TableOnly, true) => {
                return Err(P4Error::invalid(format!(
                    "action {} is TABLE_ONLY in table {}: it cannot be the default",
                    info.name, t.name
                )));
            }
            (Scope::DefaultOnly, false) => {
                return Err(P4Error::invalid(format!(
                    "action {} is DEFAULT_ONLY in table {}",
                    info.name, t.name
                )));
            }
            _ => {}
        }
    }
    let mut params = BTreeMap::new();
    for p in &a.params {
        let pi = info.params.get(&p.param_id).ok_or_else(|| {
            P4Error::invalid(format!(
                "action {} has no param id {}",
                info.name, p.param_id
            ))
        })?;
        let value = canonical_bytes(
            &p.value,
            pi.bitwidth,
            &format!("action {} param {}", info.name, pi.name),
        )?;
        if params.insert(p.param_id, value).is_some() {
            return Err(P4Error::invalid(format!(
                "action {}: param {} given twice",
                info.name, pi.name
            )));
        }
    }
    if let Some(missing) = info.params.values().find(|p| !params.contains_key(&p.id)) {
        return Err(P4Error::invalid(format!(
            "action {}: param {} (id {}) is missing",
            info.name, missing.name, missing.id
        )));
    }
    Ok(Action {
        action_id: a.action_id,
        params: params
            .into_iter()
            .map(|(param_id, value)| action::Param { param_id, value })
            .collect(),
    })
}

/// What a table entry's action refers to, for reference counting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ref {
    None,
    Member(u32),
    Group(u32),
}

fn ref_of(a: Option<&TableAction>) -> Ref {
    match a.and_then(|a| a.r#type.as_ref()) {
        Some(table_action::Type::ActionProfileMemberId(m)) => Ref::Member(*m),
        Some(table_action::Type::ActionProfileGroupId(g)) => Ref::Group(*g),
        _ => Ref::None,
    }
}

fn adjust_ref(p: &mut ActionProfileState, r: Ref, up: bool) {
    let slot = match r {
        Ref::None => return,
        Ref::Member(m) => p.member_refs.entry(m).or_default(),
        Ref::Group(g) => p.group_refs.entry(g).or_default(),
    };
    *slot = if up {
        *slot + 1
    } else {
        slot.saturating_sub(1)
    };
}

fn check_table_action(
    schema: &Schema,
    fwd: &Forwarding,
    t: &TableInfo,
    a: Option<&TableAction>,
) -> R<TableAction> {
    use table_action::Type;
    let ty = a
        .and_then(|a| a.r#type.as_ref())
        .ok_or_else(|| P4Error::invalid(format!("table {}: the entry has no action", t.name)))?;
    let profile = t.implementation_id.map(|id| (id, &schema.profiles[&id]));
    let checked = match (ty, profile) {
        (Type::Action(a), None) => Type::Action(check_action(schema, Some((t, false)), a)?),
        (Type::Action(_), Some((_, p))) => {
            return Err(P4Error::invalid(format!(
                "table {} is implemented by action profile {}: entries name a member or group",
                t.name, p.name
            )));
        }
        (Type::ActionProfileMemberId(_) | Type::ActionProfileGroupId(_), None) => {
            return Err(P4Error::invalid(format!(
                "table {} has no action profile: entries name an action",
                t.name
            )));
        }
        (Type::ActionProfileMemberId(m), Some((pid, p))) => {
            if !fwd.profiles[&pid].members.contains_key(m) {
                return Err(P4Error::not_found(format!(
                    "action profile {}: no member {m}",
                    p.name
                )));
            }
            Type::ActionProfileMemberId(*m)
        }
        (Type::ActionProfileGroupId(g), Some((pid, p))) => {
            if !p.with_selector {
                return Err(P4Error::invalid(format!(
                    "action profile {} has no selector",
                    p.name
                )));
            }
            if !fwd.profiles[&pid].groups.contains_key(g) {
                return Err(P4Error::not_found(format!(
                    "action profile {}: no group {g}",
                    p.name
                )));
            }
            Type::ActionProfileGroupId(*g)
        }
        (Type::ActionProfileActionSet(_), _) => {
            return Err(P4Error::unimplemented(
                "one-shot action selector programming (action_profile_action_set)",
            ));
        }
    };
    Ok(TableAction {
        r#type: Some(checked),
    })
}

// ---------------------------------------------------------------- writes

fn update_type(u: &Update) -> R<update::Type> {
    match update::Type::try_from(u.r#type) {
        Ok(update::Type::Unspecified) | Err(_) => Err(P4Error::invalid(format!(
            "update type {} is not INSERT, MODIFY or DELETE",
            u.r#type
        ))),
        Ok(t) => Ok(t),
    }
}

fn write_table_entry(
    schema: &Schema,
    fwd: &mut Forwarding,
    ty: update::Type,
    e: &TableEntry,
) -> R<()> {
    let t = schema
        .tables
        .get(&e.table_id)
        .ok_or_else(|| P4Error::not_found(format!("unknown table id {}", e.table_id)))?;
    if e.counter_data.is_some() || e.meter_config.is_some() || e.meter_counter_data.is_some() {
        return Err(P4Error::invalid(format!(
            "table {} has no direct counter or meter",
            t.name
        )));
    }
    if e.is_default_action {
        if ty != update::Type::Modify {
            return Err(P4Error::invalid(
                "the default action can only be changed with MODIFY",
            ));
        }
        if !e.r#match.is_empty() || e.priority != 0 {
            return Err(P4Error::invalid(
                "a default-action entry has no match and no priority",
            ));
        }
        if t.const_default_action_id != 0 {
            return Err(P4Error::new(
                Code::PermissionDenied,
                format!("table {} has a const default action", t.name),
            ));
        }
        // No action: back to the program's default.
        let action = match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            None => None,
            Some(table_action::Type::Action(a)) => Some(TableAction {
                r#type: Some(table_action::Type::Action(check_action(
                    schema,
                    Some((t, true)),
                    a,
                )?)),
            }),
            Some(_) => {
                return Err(P4Error::invalid(
                    "the default action must be a direct action",
                ));
            }
        };
        fwd.tables
            .get_mut(&t.id)
            .expect("table of schema")
            .default_action = action;
        return Ok(());
    }
    if t.is_const {
        return Err(P4Error::new(
            Code::PermissionDenied,
            format!("table {} is const", t.name),
        ));
    }
    let key = entry_key(t, e)?;
    let exists = fwd.tables[&t.id].entries.contains_key(&key);
    let profile_id = t.implementation_id;
    check_presence(ty, exists, &format!("entry in table {}", t.name))?;
    match ty {
        update::Type::Insert | update::Type::Modify => {
            if ty == update::Type::Insert
                && t.size > 0
                && fwd.tables[&t.id].entries.len() as u64 >= t.size
            {
                return Err(P4Error::new(
                    Code::ResourceExhausted,
                    format!("table {} is full ({} entries)", t.name, t.size),
                ));
            }
            let action = check_table_action(schema, fwd, t, e.action.as_ref())?;
            let stored = TableEntry {
                table_id: t.id,
                r#match: key
                    .fields
                    .iter()
                    .map(|(id, m)| field_match_of(*id, m))
                    .collect(),
                action: Some(action),
                priority: e.priority,
                idle_timeout_ns: e.idle_timeout_ns,
                metadata: e.metadata.clone(),
                ..Default::default()
            };
            let new_ref = ref_of(stored.action.as_ref());
            let old = fwd
                .tables
                .get_mut(&t.id)
                .expect("table of schema")
                .entries
                .insert(key, stored);
            if let Some(pid) = profile_id {
                let p = fwd.profiles.get_mut(&pid).expect("profile of schema");
                if let Some(old) = old {
                    adjust_ref(p, ref_of(old.action.as_ref()), false);
                }
                adjust_ref(p, new_ref, true);
            }
        }
        update::Type::Delete => {
            let old = fwd
                .tables
                .get_mut(&t.id)
                .expect("table of schema")
                .entries
                .remove(&key)
                .expect("presence checked");
            if let Some(pid) = profile_id {
                adjust_ref(
                    fwd.profiles.get_mut(&pid).expect("profile"),
                    ref_of(old.action.as_ref()),
                    false,
                );
            }
        }
        update::Type::Unspecified => unreachable!("checked by update_type"),
    }
    Ok(())
}

/// INSERT of what exists is ALREADY_EXISTS; MODIFY or DELETE of what does
/// not is NOT_FOUND (P4Runtime §12.1). `what` names it ("member 3 in
/// action profile P").
fn check_presence(ty: update::Type, exists: bool, what: &str) -> R<()> {
    match (ty, exists) {
        (update::Type::Insert, true) => {
            Err(P4Error::new(Code::AlreadyExists, format!("{what} exists")))
        }
        (update::Type::Modify | update::Type::Delete, false) => {
            Err(P4Error::not_found(format!("no {what}")))
        }
        _ => Ok(()),
    }
}

fn write_member(
    schema: &Schema,
    fwd: &mut Forwarding,
    ty: update::Type,
    m: &ActionProfileMember,
) -> R<()> {
    let info = schema.profiles.get(&m.action_profile_id).ok_or_else(|| {
        P4Error::not_found(format!("unknown action profile id {}", m.action_profile_id))
    })?;
    let p = fwd.profiles.get_mut(&info.id).expect("profile of schema");
    let exists = p.members.contains_key(&m.member_id);
    check_presence(
        ty,
        exists,
        &format!("member {} in action profile {}", m.member_id, info.name),
    )?;
    if ty == update::Type::Delete {
        if p.member_refs.get(&m.member_id).copied().unwrap_or(0) > 0 {
            return Err(P4Error::new(
                Code::FailedPrecondition,
                format!(
                    "action profile {}: member {} is used by a group or table entry",
                    info.name, m.member_id
                ),
            ));
        }
        p.members.remove(&m.member_id);
        p.member_refs.remove(&m.member_id);
        return Ok(());
    }
    if ty == update::Type::Insert && info.size > 0 && p.members.len() as u64 >= info.size {
        return Err(P4Error::new(
            Code::ResourceExhausted,
            format!(
                "action profile {} is full ({} members)",
                info.name, info.size
            ),
        ));
    }
    let a = m
        .action
        .as_ref()
        .ok_or_else(|| P4Error::invalid("the member has no action"))?;
    let mut action = check_action(schema, None, a)?;
    for tid in &info.table_ids {
        action = check_action(schema, Some((&schema.tables[tid], false)), &action)?;
    }
    p.members.insert(
        m.member_id,
        ActionProfileMember {
            action_profile_id: info.id,
            member_id: m.member_id,
            action: Some(action),
        },
    );
    Ok(())
}

fn write_group(
    schema: &Schema,
    fwd: &mut Forwarding,
    ty: update::Type,
    g: &ActionProfileGroup,
) -> R<()> {
    let info = schema.profiles.get(&g.action_profile_id).ok_or_else(|| {
        P4Error::not_found(format!("unknown action profile id {}", g.action_profile_id))
    })?;
    if !info.with_selector {
        return Err(P4Error::invalid(format!(
            "action profile {} has no selector: no groups",
            info.name
        )));
    }
    let p = fwd.profiles.get_mut(&info.id).expect("profile of schema");
    let exists = p.groups.contains_key(&g.group_id);
    let release = |p: &mut ActionProfileState, group_id: u32| {
        if let Some(old) = p.groups.remove(&group_id) {
            for m in old.members {
                adjust_ref(p, Ref::Member(m.member_id), false);
            }
        }
    };
    check_presence(
        ty,
        exists,
        &format!("group {} in action profile {}", g.group_id, info.name),
    )?;
    if ty == update::Type::Delete {
        if p.group_refs.get(&g.group_id).copied().unwrap_or(0) > 0 {
            return Err(P4Error::new(
                Code::FailedPrecondition,
                format!(
                    "action profile {}: group {} is used by a table entry",
                    info.name, g.group_id
                ),
            ));
        }
        release(p, g.group_id);
        p.group_refs.remove(&g.group_id);
        return Ok(());
    }
    let limit = info.max_group_size;
    if g.max_size < 0 || (limit > 0 && g.max_size as u32 > limit) {
        return Err(P4Error::invalid(format!(
            "action profile {}: max_size {} must be in 0..={limit}",
            info.name, g.max_size
        )));
    }
    let max = if g.max_size > 0 {
        g.max_size as u32
    } else {
        limit
    };
    let mut members = BTreeMap::new();
    for m in &g.members {
        if m.weight <= 0 {
            return Err(P4Error::invalid(format!(
                "group {}: member {} weight must be > 0",
                g.group_id, m.member_id
            )));
        }
        if !p.members.contains_key(&m.member_id) {
            return Err(P4Error::not_found(format!(
                "action profile {}: no member {}",
                info.name, m.member_id
            )));
        }
        let mut m = m.clone();
        m.watch_kind = None;
        if members.insert(m.member_id, m).is_some() {
            return Err(P4Error::invalid(format!(
                "group {}: member listed twice",
                g.group_id
            )));
        }
    }
    if max > 0 && members.len() as u32 > max {
        return Err(P4Error::new(
            Code::ResourceExhausted,
            format!(
                "group {}: {} members, at most {max}",
                g.group_id,
                members.len()
            ),
        ));
    }
    release(p, g.group_id);
    for id in members.keys() {
        adjust_ref(p, Ref::Member(*id), true);
    }
    p.groups.insert(
        g.group_id,
        ActionProfileGroup {
            action_profile_id: info.id,
            group_id: g.group_id,
            members: members
                .into_values()
                .collect::<Vec<action_profile_group::Member>>(),
            max_size: g.max_size,
        },
    );
    Ok(())
}

/// Counters are read-only but for MODIFY, which sets cells (usually to
/// zero, i.e. a reset); an unset index means every cell.
fn write_counter(
    schema: &Schema,
    state: &DeviceState,
    ty: update::Type,
    c: &CounterEntry,
    apply: bool,
) -> R<()> {
    if ty != update::Type::Modify {
        return Err(P4Error::invalid(
            "counter entries are only written with MODIFY (to set or reset them)",
        ));
    }
    let info = schema
        .counters
        .get(&c.counter_id)
        .ok_or_else(|| P4Error::not_found(format!("unknown counter id {}", c.counter_id)))?;
    let range = match c.index {
        None => 0..info.size,
        Some(Index { index }) if index >= 0 && (index as usize) < info.size => {
            index as usize..index as usize + 1
        }
        Some(Index { index }) => {
            return Err(P4Error::out_of_range(format!(
                "counter {}: index {index} not in 0..{}",
                info.name, info.size
            )));
        }
    };
    let d = c.data.unwrap_or_default();
    if d.packet_count < 0 || d.byte_count < 0 {
        return Err(P4Error::invalid("counter values cannot be negative"));
    }
    if apply {
        let cells = &state.counters[&info.id];
        for i in range {
            cells.set(
                i,
                CounterValue {
                    packets: d.packet_count as u64,
                    bytes: d.byte_count as u64,
                },
            );
        }
    }
    Ok(())
}

fn write_one(
    schema: &Schema,
    fwd: &mut Forwarding,
    counters: &DeviceState,
    u: &Update,
    apply_counters: bool,
) -> R<()> {
    let ty = update_type(u)?;
    match u.entity.as_ref().and_then(|e| e.entity.as_ref()) {
        None => Err(P4Error::invalid("the update has no entity")),
        Some(entity::Entity::TableEntry(e)) => write_table_entry(schema, fwd, ty, e),
        Some(entity::Entity::ActionProfileMember(m)) => write_member(schema, fwd, ty, m),
        Some(entity::Entity::ActionProfileGroup(g)) => write_group(schema, fwd, ty, g),
        Some(entity::Entity::CounterEntry(c)) => {
            write_counter(schema, counters, ty, c, apply_counters)
        }
        Some(_) => Err(P4Error::unimplemented(
            "this entity type is not supported by the soft switch",
        )),
    }
}

/// Applies a batch. With `atomic` (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC)
/// the batch is applied to a copy that replaces the state only if every
/// update succeeded; the others are then reported as ABORTED. Otherwise
/// (CONTINUE_ON_ERROR) each update stands on its own.
pub(crate) fn apply_batch(
    state: &mut DeviceState,
    schema: &Schema,
    updates: &[Update],
    atomic: bool,
) -> Vec<R<()>> {
    if !atomic {
        let mut fwd = std::mem::take(&mut state.fwd);
        let results = updates
            .iter()
            .map(|u| write_one(schema, &mut fwd, state, u, true))
            .collect();
        state.fwd = fwd;
        return results;
    }
    let mut fwd = state.fwd.clone();
    let results: Vec<R<()>> = updates
        .iter()
        .map(|u| write_one(schema, &mut fwd, state, u, false))
        .collect();
    if results.iter().all(Result::is_ok) {
        state.fwd = fwd;
        // Counter writes were only checked; apply them now.
        let mut scratch = Forwarding::default();
        for u in updates {
            if matches!(
                u.entity.as_ref().and_then(|e| e.entity.as_ref()),
                Some(entity::Entity::CounterEntry(_))
            ) {
                let _ = write_one(schema, &mut scratch, state, u, true);
            }
        }
        return results;
    }
    results
        .into_iter()
        .map(|r| {
            r.and(Err(P4Error::new(
                Code::Aborted,
                "rolled back: another update of the batch failed",
            )))
        })
        .collect()
}

/// Checks that the forwarding state fits a new schema (for
/// RECONCILE_AND_COMMIT): every entry, member and group re-validated.
pub(crate) fn reconcile(state: &DeviceState, schema: &Schema) -> R<Forwarding> {
    let mut fwd = Forwarding {
        tables: schema
            .tables
            .keys()
            .map(|id| (*id, crate::device::Table::default()))
            .collect(),
        profiles: schema
            .profiles
            .keys()
            .map(|id| (*id, ActionProfileState::default()))
            .collect(),
    };
    let cant = |e: P4Error| {
        P4Error::invalid(format!(
            "cannot reconcile the state with the new P4Info: {}",
            e.message
        ))
    };
    for p in state.fwd.profiles.values() {
        for m in p.members.values() {
            write_member(schema, &mut fwd, update::Type::Insert, m).map_err(cant)?;
        }
        for g in p.groups.values() {
            write_group(schema, &mut fwd, update::Type::Insert, g).map_err(cant)?;
        }
    }
    for (id, t) in &state.fwd.tables {
        for e in t.entries.values() {
            write_table_entry(schema, &mut fwd, update::Type::Insert, e).map_err(cant)?;
        }
        if let Some(a) = &t.default_action {
            let e = TableEntry {
                table_id: *id,
                action: Some(a.clone()),
                is_default_action: true,
                ..Default::default()
            };
            write_table_entry(schema, &mut fwd, update::Type::Modify, &e).map_err(cant)?;
        }
    }
    Ok(fwd)
}

// ----------------------------------------------------------------- reads

fn default_entry(t: &TableInfo, table: &crate::Table) -> TableEntry {
    let action = table.default_action.clone().or_else(|| {
        (t.const_default_action_id != 0).then(|| TableAction {
            r#type: Some(table_action::Type::Action(Action {
                action_id: t.const_default_action_id,
                params: vec![],
            })),
        })
    });
    TableEntry {
        table_id: t.id,
        action,
        is_default_action: true,
        ..Default::default()
    }
}

fn read_table_entries(
    state: &DeviceState,
    schema: &Schema,
    q: &TableEntry,
    out: &mut Vec<Entity>,
) -> R<()> {
    let wrap = |e: TableEntry| Entity {
        entity: Some(entity::Entity::TableEntry(e)),
    };
    let tables: Vec<&TableInfo> = if q.table_id == 0 {
        if !q.r#match.is_empty() {
            return Err(P4Error::invalid(
                "a read of every table (table_id 0) cannot filter on match fields",
            ));
        }
        schema.tables.values().collect()
    } else {
        vec![
            schema
                .tables
                .get(&q.table_id)
                .ok_or_else(|| P4Error::not_found(format!("unknown table id {}", q.table_id)))?,
        ]
    };
    for t in tables {
        let table = &state.fwd.tables[&t.id];
        if q.is_default_action {
            out.push(wrap(default_entry(t, table)));
            continue;
        }
        // Given fields filter (all of them must be equal); absent ones match all.
        let mut filter = Vec::new();
        for m in &q.r#match {
            filter.push((m.field_id, key_match(t, m)?));
        }
        for (key, e) in &table.entries {
            if q.priority != 0 && key.priority != q.priority {
                continue;
            }
            if filter.iter().all(|f| key.fields.contains(f)) {
                out.push(wrap(e.clone()));
            }
        }
    }
    Ok(())
}

/// Reads members or groups: profile id 0 means every profile, id 0 every
/// member (group) of the profile.
fn read_profile<T: Clone>(
    state: &DeviceState,
    schema: &Schema,
    (profile_id, id, what): (u32, u32, &str),
    pick: impl Fn(&ActionProfileState) -> &BTreeMap<u32, T>,
    wrap: impl Fn(T) -> Entity,
    out: &mut Vec<Entity>,
) -> R<()> {
    let ids: Vec<u32> = if profile_id == 0 {
        schema.profiles.keys().copied().collect()
    } else if schema.profiles.contains_key(&profile_id) {
        vec![profile_id]
    } else {
        return Err(P4Error::not_found(format!(
            "unknown action profile id {profile_id}"
        )));
    };
    for pid in ids {
        let map = pick(&state.fwd.profiles[&pid]);
        if id == 0 {
            out.extend(map.values().cloned().map(&wrap));
        } else if let Some(v) = map.get(&id) {
            out.push(wrap(v.clone()));
        } else if profile_id != 0 {
            return Err(P4Error::not_found(format!(
                "action profile {pid}: no {what} {id}"
            )));
        }
    }
    Ok(())
}

fn counter_data(unit: Unit, v: CounterValue) -> CounterData {
    let packets = matches!(unit, Unit::Packets | Unit::Both);
    let bytes = matches!(unit, Unit::Bytes | Unit::Both);
    CounterData {
        packet_count: if packets { v.packets as i64 } else { 0 },
        byte_count: if bytes { v.bytes as i64 } else { 0 },
    }
}

fn read_counters(
    state: &DeviceState,
    schema: &Schema,
    q: &CounterEntry,
    out: &mut Vec<Entity>,
) -> R<()> {
    let infos: Vec<_> =
        if q.counter_id == 0 {
            schema.counters.values().collect()
        } else {
            vec![schema.counters.get(&q.counter_id).ok_or_else(|| {
                P4Error::not_found(format!("unknown counter id {}", q.counter_id))
            })?]
        };
    for info in infos {
        let cells = &state.counters[&info.id];
        let range = match q.index {
            None => 0..info.size,
            Some(Index { index }) if index >= 0 && (index as usize) < info.size => {
                index as usize..index as usize + 1
            }
            Some(Index { index }) => {
                return Err(P4Error::out_of_range(format!(
                    "counter {}: index {index} not in 0..{}",
                    info.name, info.size
                )));
            }
        };
        for i in range {
            out.push(Entity {
                entity: Some(entity::Entity::CounterEntry(CounterEntry {
                    counter_id: info.id,
                    index: Some(Index { index: i as i64 }),
                    data: Some(counter_data(info.unit, cells.get(i))),
                })),
            });
        }
    }
    Ok(())
}

/// Reads the entities one request entity (possibly a wildcard) selects.
pub(crate) fn read_entity(
    state: &DeviceState,
    schema: &Schema,
    q: &Entity,
    out: &mut Vec<Entity>,
) -> R<()> {
    match q.entity.as_ref() {
        None => Err(P4Error::invalid("the read request names no entity")),
        Some(entity::Entity::TableEntry(t)) => read_table_entries(state, schema, t, out),
        Some(entity::Entity::ActionProfileMember(m)) => read_profile(
            state,
            schema,
            (m.action_profile_id, m.member_id, "member"),
            |p| &p.members,
            |v| Entity {
                entity: Some(entity::Entity::ActionProfileMember(v)),
            },
            out,
        ),
        Some(entity::Entity::ActionProfileGroup(g)) => read_profile(
            state,
            schema,
            (g.action_profile_id, g.group_id, "group"),
            |p| &p.groups,
            |v| Entity {
                entity: Some(entity::Entity::ActionProfileGroup(v)),
            },
            out,
        ),
        Some(entity::Entity::CounterEntry(c)) => read_counters(state, schema, c, out),
        Some(_) => Err(P4Error::unimplemented(
            "this entity type is not supported by the soft switch",
        )),
    }
}
