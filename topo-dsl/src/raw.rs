//! The scenario file as written: serde structs with spanned values, read
//! section by section from a recoverable TOML parse so that every section's
//! errors are reported, not just the first one.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use crate::diag::{Diags, choices_help};

/// `[lab]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLab {
    pub name: Option<Spanned<String>>,
    pub seed: Option<Spanned<u64>>,
    pub target: Option<Spanned<String>>,
    pub engine: Option<Spanned<String>>,
}

/// `[p4rt]` (`switch` is read separately).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawP4rt {
    pub p4info: Option<Spanned<String>>,
    pub device_config: Option<Spanned<String>>,
    pub queues: Option<Spanned<u32>>,
    /// Listed for the key checks; read from [`Section::extra`].
    #[allow(dead_code)]
    pub switch: Option<IgnoredAny>,
}

/// `[[p4rt.switch]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawP4rtSwitch {
    pub name: Option<Spanned<String>>,
    pub ports: Option<Spanned<u32>>,
    pub speed: Option<Spanned<String>>,
    pub address: Option<Spanned<String>>,
    pub bmv2: Option<Spanned<bool>>,
    pub device_id: Option<Spanned<u64>>,
    pub election_id: Option<Spanned<u64>>,
}

/// `[topology]` (all kinds; `nodes` and `links` are read separately).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTopology {
    pub kind: Option<Spanned<String>>,
    pub k: Option<Spanned<u32>>,
    pub spines: Option<Spanned<u32>>,
    pub leaves: Option<Spanned<u32>>,
    pub hosts_per_leaf: Option<Spanned<u32>>,
    pub uplinks: Option<Spanned<u32>>,
    pub segments: Option<Spanned<u32>>,
    pub hosts_per_segment: Option<Spanned<u32>>,
    pub backup_hosts: Option<Spanned<u32>>,
    pub rails: Option<Spanned<u32>>,
    pub planes: Option<Spanned<u32>>,
    pub aggs_per_plane: Option<Spanned<u32>>,
    pub cores: Option<Spanned<u32>>,
    pub core_uplinks: Option<Spanned<u32>>,
}

/// `[[topology.nodes]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNode {
    pub name: Option<Spanned<String>>,
    pub role: Option<Spanned<String>>,
    pub asn: Option<Spanned<u32>>,
}

/// `[[topology.links]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCustomLink {
    pub a: Option<Spanned<String>>,
    pub b: Option<Spanned<String>>,
    pub rate: Option<Spanned<toml::Value>>,
    pub delay: Option<Spanned<toml::Value>>,
    pub jitter: Option<Spanned<toml::Value>>,
    pub jitter_distribution: Option<Spanned<toml::Value>>,
    pub reorder: Option<Spanned<toml::Value>>,
    /// Listed for the key checks; its value is read from
    /// [`Section::extra`] (it may be a table, whose keys need spans).
    #[allow(dead_code)]
    pub loss: Option<IgnoredAny>,
    pub corrupt: Option<Spanned<toml::Value>>,
    pub duplicate: Option<Spanned<toml::Value>>,
    pub queue: Option<Spanned<toml::Value>>,
    pub ecn: Option<Spanned<toml::Value>>,
    pub mtu: Option<Spanned<toml::Value>>,
}

/// `[routing]` (`asn` and `agents` are read separately). The timers are
/// kept as values so that a wrong type is reported by name without losing
/// the rest of the section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouting {
    pub mode: Option<Spanned<String>>,
    pub agent: Option<Spanned<String>>,
    pub hold_time: Option<Spanned<toml::Value>>,
    pub keepalive: Option<Spanned<toml::Value>>,
    pub connect_retry: Option<Spanned<toml::Value>>,
}

/// `[routing.asn]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAsn {
    pub base: Option<Spanned<u32>>,
}

/// `[addressing]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAddressing {
    pub loopbacks: Option<Spanned<String>>,
    pub fabric: Option<Spanned<String>>,
    pub hosts: Option<Spanned<String>>,
}

/// `[links.default]`, `[links.<class>]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawParams {
    pub rate: Option<Spanned<toml::Value>>,
    pub delay: Option<Spanned<toml::Value>>,
    pub jitter: Option<Spanned<toml::Value>>,
    pub jitter_distribution: Option<Spanned<toml::Value>>,
    pub reorder: Option<Spanned<toml::Value>>,
    /// Listed for the key checks; its value is read from
    /// [`Section::extra`] (it may be a table, whose keys need spans).
    #[allow(dead_code)]
    pub loss: Option<IgnoredAny>,
    pub corrupt: Option<Spanned<toml::Value>>,
    pub duplicate: Option<Spanned<toml::Value>>,
    pub queue: Option<Spanned<toml::Value>>,
    pub ecn: Option<Spanned<toml::Value>>,
    pub mtu: Option<Spanned<toml::Value>>,
}

/// `[[links.override]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOverride {
    pub link: Option<Spanned<String>>,
    pub rate: Option<Spanned<toml::Value>>,
    pub delay: Option<Spanned<toml::Value>>,
    pub jitter: Option<Spanned<toml::Value>>,
    pub jitter_distribution: Option<Spanned<toml::Value>>,
    pub reorder: Option<Spanned<toml::Value>>,
    /// Listed for the key checks; its value is read from
    /// [`Section::extra`] (it may be a table, whose keys need spans).
    #[allow(dead_code)]
    pub loss: Option<IgnoredAny>,
    pub corrupt: Option<Spanned<toml::Value>>,
    pub duplicate: Option<Spanned<toml::Value>>,
    pub queue: Option<Spanned<toml::Value>>,
    pub ecn: Option<Spanned<toml::Value>>,
    pub mtu: Option<Spanned<toml::Value>>,
}

impl RawOverride {
    pub(crate) fn into_parts(self) -> (Option<Spanned<String>>, RawParams) {
        let params = RawParams {
            rate: self.rate,
            delay: self.delay,
            jitter: self.jitter,
            jitter_distribution: self.jitter_distribution,
            reorder: self.reorder,
            loss: None,
            corrupt: self.corrupt,
            duplicate: self.duplicate,
            queue: self.queue,
            ecn: self.ecn,
            mtu: self.mtu,
        };
        (self.link, params)
    }
}

impl RawCustomLink {
    pub(crate) fn take_params(&mut self) -> RawParams {
        RawParams {
            rate: self.rate.take(),
            delay: self.delay.take(),
            jitter: self.jitter.take(),
            jitter_distribution: self.jitter_distribution.take(),
            reorder: self.reorder.take(),
            loss: None,
            corrupt: self.corrupt.take(),
            duplicate: self.duplicate.take(),
            queue: self.queue.take(),
            ecn: self.ecn.take(),
            mtu: self.mtu.take(),
        }
    }
}

/// `[[timeline]]` (`mtu` is rejected by the key check: it cannot change at
/// run time).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEvent {
    pub at: Option<Spanned<toml::Value>>,
    pub action: Option<Spanned<String>>,
    pub link: Option<Spanned<String>>,
    pub node: Option<Spanned<String>>,
    pub period: Option<Spanned<toml::Value>>,
    pub count: Option<Spanned<toml::Value>>,
    pub rate: Option<Spanned<toml::Value>>,
    pub delay: Option<Spanned<toml::Value>>,
    pub jitter: Option<Spanned<toml::Value>>,
    pub jitter_distribution: Option<Spanned<toml::Value>>,
    pub reorder: Option<Spanned<toml::Value>>,
    /// Listed for the key checks; its value is read from
    /// [`Section::extra`] (it may be a table, whose keys need spans).
    #[allow(dead_code)]
    pub loss: Option<IgnoredAny>,
    pub corrupt: Option<Spanned<toml::Value>>,
    pub duplicate: Option<Spanned<toml::Value>>,
    pub queue: Option<Spanned<toml::Value>>,
    pub ecn: Option<Spanned<toml::Value>>,
}

impl RawEvent {
    pub(crate) fn take_params(&mut self) -> RawParams {
        RawParams {
            rate: self.rate.take(),
            delay: self.delay.take(),
            jitter: self.jitter.take(),
            jitter_distribution: self.jitter_distribution.take(),
            reorder: self.reorder.take(),
            loss: None,
            corrupt: self.corrupt.take(),
            duplicate: self.duplicate.take(),
            queue: self.queue.take(),
            ecn: self.ecn.take(),
            mtu: None,
        }
    }
}

/// The Gilbert-Elliott form of `loss`: `{ p = "1%", r = "25%" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGilbertElliott {
    pub p: Option<Spanned<toml::Value>>,
    pub r: Option<Spanned<toml::Value>>,
    pub bad: Option<Spanned<toml::Value>>,
    pub good: Option<Spanned<toml::Value>>,
}

/// `[[external]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExternal {
    pub node: Option<Spanned<String>>,
    pub interface: Option<Spanned<String>>,
    pub netns: Option<Spanned<String>>,
    pub name: Option<Spanned<String>>,
    pub address: Option<Spanned<String>>,
    pub gateway: Option<Spanned<String>>,
    pub routes: Option<Vec<Spanned<String>>>,
    /// Listed for the key checks; its value is read from
    /// [`Section::extra`] (a table, whose keys need spans).
    #[allow(dead_code)]
    pub bgp: Option<IgnoredAny>,
}

/// `bgp = { peer = "192.0.2.2", asn = 65010 }` in `[[external]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExternalPeer {
    pub peer: Option<Spanned<String>>,
    pub asn: Option<Spanned<toml::Value>>,
}

/// The field names of a `#[derive(Deserialize)]` struct, as serde sees them.
pub(crate) fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::value::Error;
    use serde::de::{Error as _, Visitor};

    struct Capture<'a>(&'a mut &'static [&'static str]);

    impl<'de> serde::Deserializer<'de> for Capture<'_> {
        type Error = Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Err(Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Error> {
            *self.0 = fields;
            Err(Error::custom("captured"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Capture(&mut fields));
    fields
}

/// A table of the scenario, after its keys were checked.
#[derive(Debug)]
pub(crate) struct Section<'a, 'i, T> {
    /// The typed part.
    pub raw: T,
    /// Span of the whole table.
    pub span: Range<usize>,
    /// Keys read separately (nested tables, arrays of tables).
    pub extra: BTreeMap<&'a str, &'a Spanned<DeValue<'i>>>,
}

/// How the keys of a table are checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keys<'k> {
    /// Keys valid here (shown in the help).
    pub allowed: &'k [&'k str],
    /// Keys of `allowed` handled by the caller rather than by serde.
    pub extra: &'k [&'k str],
    /// Keys that are valid in other variants of this table, and why they are
    /// not here (e.g. "is not a parameter of `fat-tree` topologies").
    pub foreign: &'k [&'k str],
    pub foreign_reason: &'k str,
}

/// Reads one table: checks its keys (reporting every unknown key with the
/// valid ones), then deserializes the known ones into `T`.
pub(crate) fn read_table<'a, 'i, T: DeserializeOwned>(
    d: &mut Diags<'_>,
    value: &'a Spanned<DeValue<'i>>,
    what: &str,
    keys: Keys<'_>,
) -> Option<Section<'a, 'i, T>> {
    let span = value.span();
    let Some(table) = value.get_ref().as_table() else {
        d.error(
            Some(span),
            format!(
                "{what} must be a table, found {}",
                value.get_ref().type_str()
            ),
        )
        .label("expected a table")
        .help(format!("valid keys: {}", keys.allowed.join(", ")));
        return None;
    };
    let mut filtered = DeTable::new();
    let mut extra = BTreeMap::new();
    for (key, val) in table {
        let name: &'a str = key.get_ref();
        if !keys.allowed.contains(&name) {
            if keys.foreign.contains(&name) {
                d.error(
                    Some(key.span()),
                    format!("`{name}` {}", keys.foreign_reason),
                )
                .label("not valid here")
                .help(format!("valid keys: {}", keys.allowed.join(", ")));
            } else {
                d.error(Some(key.span()), format!("unknown key `{name}` in {what}"))
                    .label("unknown key")
                    .help(choices_help(name, "keys", keys.allowed));
            }
        } else if keys.extra.contains(&name) {
            extra.insert(name, val);
        } else {
            filtered.insert(key.clone(), val.clone());
        }
    }
    let de = ValueDeserializer::from(Spanned::new(span.clone(), DeValue::Table(filtered)));
    match T::deserialize(de) {
        Ok(raw) => Some(Section { raw, span, extra }),
        Err(e) => {
            // Name the key whose value failed, when the error points at one.
            let key = e.span().and_then(|es| {
                table
                    .iter()
                    .find(|(_, v)| v.span() == es)
                    .map(|(k, _)| -> &str { k.get_ref() })
            });
            let what = match key {
                Some(k) => format!("`{k}` in {what}"),
                None => what.to_owned(),
            };
            report_toml_error(d, &e, span, &what);
            None
        }
    }
}

/// Turns a toml/serde error into a located diagnostic.
pub(crate) fn report_toml_error(
    d: &mut Diags<'_>,
    e: &toml::de::Error,
    fallback: Range<usize>,
    what: &str,
) {
    let message = e.message().trim_end();
    let span = e.span().unwrap_or(fallback);
    let (message, help) = explain_serde_message(message, what);
    d.error(Some(span), message).help(help);
}

/// Rewords serde's messages ("invalid type: string \"4\", expected u32") in
/// scenario terms.
fn explain_serde_message(message: &str, what: &str) -> (String, String) {
    if let Some(rest) = message.strip_prefix("invalid type: ")
        && let Some((found, expected)) = rest.split_once(", expected ")
    {
        let expected = match expected {
            "u32" | "u64" => "a non-negative integer",
            "a string" => "a string",
            other => other,
        };
        return (
            format!("{what}: expected {expected}, found {found}"),
            type_help(expected),
        );
    }
    if let Some(rest) = message.strip_prefix("invalid value: ")
        && let Some((found, expected)) = rest.split_once(", expected ")
    {
        let expected = match expected {
            "u32" => "an integer from 0 to 4294967295",
            "u64" => "a non-negative integer",
            other => other,
        };
        return (
            format!("{what}: expected {expected}, found {found}"),
            String::new(),
        );
    }
    (format!("{what}: {message}"), String::new())
}

fn type_help(expected: &str) -> String {
    match expected {
        "a string" => "quote the value, e.g. `\"value\"`".to_owned(),
        "a non-negative integer" => "write a plain integer without quotes, e.g. `4`".to_owned(),
        _ => String::new(),
    }
}
