//! `[lab]`: the lab's name, seed, target and engine.

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Keys, Keyword, fields_of, keyword, missing, read_table};
use crate::diag::Diags;
use crate::model::{EngineChoice, Target};

/// `[lab]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLab {
    name: Option<Spanned<String>>,
    seed: Option<Spanned<u64>>,
    target: Option<Spanned<String>>,
    engine: Option<Spanned<String>>,
    engine_shards: Option<Spanned<u64>>,
    rate_scale: Option<Spanned<u64>>,
}

/// `[lab]` as read; a value is `None` when it is invalid (reported).
#[derive(Debug)]
pub(crate) struct LabRead {
    /// `None` when missing or invalid.
    pub name: Option<String>,
    /// 1 by default.
    pub seed: u64,
    /// `netns` by default.
    pub target: Option<Target>,
    /// `auto` by default.
    pub engine: Option<EngineChoice>,
    /// Threads of the userspace link engine (`None`: one per core);
    /// `Some(None)` when invalid.
    pub engine_shards: Option<Option<u16>>,
    /// What every rate, queue and ECN threshold is divided by (1 by
    /// default); `None` when invalid.
    pub rate_scale: Option<u32>,
}

/// The most threads the userspace link engine may run.
pub(crate) const MAX_ENGINE_SHARDS: u64 = 64;

/// The largest `rate_scale`.
const MAX_RATE_SCALE: u64 = 1_000_000_000;

const TARGETS: &[(&str, Target)] = &[
    ("netns", Target::Netns),
    ("p4rt", Target::P4rt),
    ("soft", Target::Soft),
];

/// In the order of [`EngineChoice::NAMES`], which the help lists.
const ENGINES: &[(&str, EngineChoice)] = &[
    ("auto", EngineChoice::Auto),
    ("userspace", EngineChoice::Userspace),
    ("kernel", EngineChoice::Kernel),
    ("bpf", EngineChoice::Bpf),
];

/// Reads `[lab]` (`v`, if present; every scenario needs one). `None` when
/// the section is missing or is not a valid table.
pub(crate) fn read(d: &mut Diags<'_>, v: Option<&Spanned<DeValue<'_>>>) -> Option<LabRead> {
    let Some(v) = v else {
        d.error(Some(0..0), "missing `[lab]` section")
            .label("expected `[lab]`")
            .help("every scenario starts with `[lab]` and `name = \"mylab\"` (1-32 characters of a-z, 0-9, -)");
        return None;
    };
    let s = read_table::<RawLab>(d, v, "`[lab]`", Keys::new(fields_of::<RawLab>()))?;
    let name = match &s.raw.name {
        None => {
            missing(d, s.span.clone(), "name", "`[lab]`")
                .label("`[lab]` needs a name")
                .help("add e.g. `name = \"k4\"` (1-32 characters of a-z, 0-9, -)");
            None
        }
        Some(n) => {
            let name = n.get_ref();
            match check_lab_name(name) {
                Ok(()) => Some(name.clone()),
                Err(why) => {
                    let rule = "a lab name is 1-32 bytes of a-z, 0-9 and -, starting with a letter or digit (namespaces are named `tn-<lab>-<node>`)";
                    let help = match suggest_lab_name(name) {
                        Some(s) => format!("did you mean `{s}`? {rule}"),
                        None => rule.to_owned(),
                    };
                    d.error(Some(n.span()), format!("invalid lab name `{name}`: {why}"))
                        .label("invalid lab name")
                        .help(help);
                    None
                }
            }
        }
    };
    let seed = s.raw.seed.as_ref().map_or(1, |s| *s.get_ref());
    let target = match &s.raw.target {
        None => Some(Target::Netns),
        Some(t) => {
            let kw = Keyword {
                what: "target",
                short: "target",
                plural: "targets",
            };
            keyword(d, t.get_ref(), t.span(), TARGETS, kw)
        }
    };
    let engine = match &s.raw.engine {
        None => Some(EngineChoice::Auto),
        Some(e) => {
            let kw = Keyword {
                what: "engine",
                short: "engine",
                plural: "engines",
            };
            keyword(d, e.get_ref(), e.span(), ENGINES, kw)
        }
    };
    let engine_shards = match &s.raw.engine_shards {
        None => Some(None),
        Some(k) if (1..=MAX_ENGINE_SHARDS).contains(k.get_ref()) => Some(Some(*k.get_ref() as u16)),
        Some(k) => {
            d.error(
                Some(k.span()),
                format!(
                    "`engine_shards` must be from 1 to {MAX_ENGINE_SHARDS}, found {}",
                    k.get_ref()
                ),
            )
            .label("out of range")
            .help("the userspace link engine's threads; leave it out for one per core");
            None
        }
    };
    let rate_scale = match &s.raw.rate_scale {
        None => Some(1),
        Some(r) if (1..=MAX_RATE_SCALE).contains(r.get_ref()) => Some(*r.get_ref() as u32),
        Some(r) => {
            d.error(
                Some(r.span()),
                format!("`rate_scale` must be from 1 to {MAX_RATE_SCALE}, found {}", r.get_ref()),
            )
            .label("out of range")
            .help("every rate, queue and ECN threshold is divided by it: 1000 runs 400gbit links at 400mbit");
            None
        }
    };
    Some(LabRead {
        name,
        seed,
        target,
        engine,
        engine_shards,
        rate_scale,
    })
}

/// `text` in the characters of names: lowercase, any other character
/// `-`, no `-` at either end (`Alice.Smith` -> `alice-smith`).
pub fn name_chars(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches('-').to_owned()
}

/// A valid lab name close to an invalid one: [`name_chars`], truncated to
/// [`LAB_NAME_MAX`] bytes.
fn suggest_lab_name(name: &str) -> Option<String> {
    let mut s = name_chars(name);
    s.truncate(LAB_NAME_MAX);
    let s = s.trim_end_matches('-').to_owned();
    (check_lab_name(&s).is_ok() && s != name).then_some(s)
}

/// The longest lab name, in bytes: room for a student's prefix
/// (`turbonet serve` names a student's lab `<user>-<lab>`) in namespace
/// names that stay readable.
pub const LAB_NAME_MAX: usize = 32;

fn check_lab_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > LAB_NAME_MAX {
        return Err(format!(
            "it is {} bytes long, the limit is {LAB_NAME_MAX}",
            name.len()
        ));
    }
    check_name_chars(name)
}

/// The characters of a lab or node name: both become part of the names of
/// network namespaces (`tn-<lab>-<node>`) and interfaces.
pub(crate) fn check_name_chars(name: &str) -> Result<(), String> {
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!("`{c}` is not allowed"));
    }
    if name.starts_with('-') {
        return Err("it starts with `-`".into());
    }
    Ok(())
}
