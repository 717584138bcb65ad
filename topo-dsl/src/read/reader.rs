//! What every section uses to read TOML values with their spans: typed
//! tables whose keys are checked against the valid ones ([`read_table`]),
//! arrays of tables, the span of a key, strings, keywords of a closed
//! vocabulary, values with units, and the wording of the errors these
//! share ("missing `x` in ...", serde's messages in scenario terms).
//!
//! Sections read from a recoverable TOML parse (`DeValue`s, which keep the
//! span of every key and value), so that every section's errors are
//! reported, not just the first one.

use std::collections::BTreeMap;
use std::ops::Range;
use std::str::FromStr;

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use crate::diag::{Diags, ErrorBuilder, choices_help};
use crate::units::UnitError;

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
    allowed: &'k [&'k str],
    /// Keys of `allowed` handled by the caller rather than by serde.
    extra: &'k [&'k str],
    /// Keys that are valid in other variants of this table...
    foreign: &'k [&'k str],
    /// ...and why they are not here (e.g. "is not a parameter of
    /// `fat-tree` topologies").
    foreign_reason: &'k str,
}

impl<'k> Keys<'k> {
    /// Exactly the keys `allowed`, every one read by serde.
    pub(crate) fn new(allowed: &'k [&'k str]) -> Self {
        Keys {
            allowed,
            extra: &[],
            foreign: &[],
            foreign_reason: "",
        }
    }

    /// The keys of `allowed` that the caller reads itself (a nested table
    /// whose keys need spans, an array of tables): they end up in
    /// [`Section::extra`].
    pub(crate) fn extra(self, extra: &'k [&'k str]) -> Self {
        Keys { extra, ..self }
    }

    /// Keys of other variants of the table, reported with `reason` rather
    /// than as unknown.
    pub(crate) fn foreign(self, foreign: &'k [&'k str], reason: &'k str) -> Self {
        Keys {
            foreign,
            foreign_reason: reason,
            ..self
        }
    }
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
fn report_toml_error(d: &mut Diags<'_>, e: &toml::de::Error, fallback: Range<usize>, what: &str) {
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

/// The tables of an array of tables (`[[x]]`).
pub(crate) fn array_items<'a, 'i>(
    d: &mut Diags<'_>,
    v: &'a Spanned<DeValue<'i>>,
    what: &str,
    syntax: &str,
) -> Option<&'a [Spanned<DeValue<'i>>]> {
    match v.get_ref().as_array() {
        Some(a) => Some(a),
        None => {
            d.error(
                Some(v.span()),
                format!(
                    "{what} must be an array of tables, found {}",
                    v.get_ref().type_str()
                ),
            )
            .label("expected an array of tables")
            .help(format!("write each entry under its own `{syntax}` header"));
            None
        }
    }
}

/// The span of the key `name` of a table value.
pub(crate) fn key_span(v: &Spanned<DeValue<'_>>, name: &str) -> Option<Range<usize>> {
    v.get_ref()
        .as_table()?
        .iter()
        .find(|(k, _)| k.get_ref() == name)
        .map(|(k, _)| k.span())
}

/// Reports that `key` is missing in `what` (the table at `span`), as
/// "missing `key` in what"; the caller adds the label and the help.
pub(crate) fn missing<'d>(
    d: &'d mut Diags<'_>,
    span: Range<usize>,
    key: &str,
    what: &str,
) -> ErrorBuilder<'d> {
    d.error(Some(span), format!("missing `{key}` in {what}"))
}

/// How an unknown keyword is reported by [`keyword`]: "unknown {what}
/// `x`", labelled "unknown {short}", with the valid {plural} and the
/// closest one in the help.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keyword<'w> {
    /// What the keyword names: "routing mode".
    pub what: &'w str,
    /// The label's shorter name: "mode".
    pub short: &'w str,
    /// The plural listed in the help: "modes".
    pub plural: &'w str,
}

/// The value that the keyword `text` (written at `span`) names among
/// `choices`, which the help lists in their order; `None` when it is
/// unknown (reported).
pub(crate) fn keyword<T: Copy>(
    d: &mut Diags<'_>,
    text: &str,
    span: Range<usize>,
    choices: &[(&str, T)],
    kw: Keyword<'_>,
) -> Option<T> {
    if let Some((_, value)) = choices.iter().find(|(name, _)| *name == text) {
        return Some(*value);
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    d.error(Some(span), format!("unknown {} `{text}`", kw.what))
        .label(format!("unknown {}", kw.short))
        .help(choices_help(text, kw.plural, &names));
    None
}

/// A value with a unit (`"10gbit"`, `"5us"`, `"1%"`): a string, or a bare
/// number where the unit has a default. `None` when the key is absent or the
/// value is invalid (reported).
pub(crate) fn unit<T: FromStr<Err = UnitError>>(
    d: &mut Diags<'_>,
    v: &Option<Spanned<toml::Value>>,
    key: &str,
) -> Option<T> {
    let v = v.as_ref()?;
    let text = match v.get_ref() {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        _ => {
            expected_string(d, v, key);
            return None;
        }
    };
    match text.parse::<T>() {
        Ok(x) => Some(x),
        Err(e) => {
            d.error(Some(v.span()), format!("invalid `{key}`: {}", e.message()))
                .label(format!("invalid {key}"))
                .help(e.hint().unwrap_or_default());
            None
        }
    }
}

/// The string value of `key`; `None` when it is of another type
/// (reported, with an example).
pub(crate) fn string<'v>(
    d: &mut Diags<'_>,
    v: &'v Spanned<toml::Value>,
    key: &str,
) -> Option<&'v str> {
    let text = v.get_ref().as_str();
    if text.is_none() {
        expected_string(d, v, key);
    }
    text
}

/// Reports that the value of `key` is not a string.
fn expected_string(d: &mut Diags<'_>, v: &Spanned<toml::Value>, key: &str) {
    d.error(
        Some(v.span()),
        format!(
            "expected a string for `{key}`, found {}",
            v.get_ref().type_str()
        ),
    )
    .label("expected a string")
    .help(example_for(key));
}

/// An example of a valid value of `key`, for the help of a value of the
/// wrong type.
pub(crate) fn example_for(key: &str) -> &'static str {
    match key {
        "rate" => "e.g. `rate = \"10gbit\"`",
        "delay" | "jitter" => "e.g. `delay = \"5us\"`",
        "loss" => {
            "e.g. `loss = \"0.01%\"` (independent) or `loss = { p = \"1%\", r = \"25%\" }` (Gilbert-Elliott bursts)"
        }
        "corrupt" | "duplicate" => "e.g. `corrupt = \"0.01%\"`",
        "ecn" => "e.g. `ecn = \"60p\"` or `ecn = \"30KiB\"`",
        "jitter_distribution" => {
            "e.g. `jitter_distribution = \"normal\"` (uniform, normal, pareto, paretonormal)"
        }
        "reorder" => "e.g. `reorder = true`",
        "queue" => "e.g. `queue = \"1000p\"`",
        "mtu" => "e.g. `mtu = 9000`",
        "at" => "e.g. `at = \"5s\"` (time after the fabric is ready)",
        "period" => "e.g. `period = \"2s\"`",
        _ => "",
    }
}
