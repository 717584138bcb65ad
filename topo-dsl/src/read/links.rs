//! `[links]`: the parameters of every link (`[links.default]`), of the
//! links of one class (`[links.<class>]`) and of single links
//! (`[[links.override]]`); once the fabric is built, the overrides are
//! applied and the merged parameters of every link are checked.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use toml::Spanned;
use toml::de::DeValue;

use super::params::{ParamSpans, RawParams, read_params, with_link_params};
use super::reader::{Keys, array_items, fields_of, missing, read_table};
use super::topology::Kind;
use crate::diag::{Diags, choices_help};
use crate::model::{Fabric, LinkClass, LinkParams, ParamProblem, Role};
use crate::suggest;
use crate::units::Rate;

with_link_params! {
    /// `[[links.override]]`
    struct RawOverride {
        link: Option<Spanned<String>>,
    }
}

impl RawOverride {
    /// The link it names and its parameters.
    fn into_parts(mut self) -> (Option<Spanned<String>>, RawParams) {
        let params = self.take_params();
        (self.link, params)
    }
}

/// A role as it is named in link classes.
fn role_from_str(s: &str) -> Option<Role> {
    Some(match s {
        "host" => Role::Host,
        "tor" => Role::Tor,
        "edge" => Role::Edge,
        "leaf" => Role::Leaf,
        "agg" => Role::Agg,
        "spine" => Role::Spine,
        "core" => Role::Core,
        "switch" => Role::Switch,
        _ => return None,
    })
}

/// A link class as `[links.<class>]` names it (`edge-agg`).
fn class_from_str(s: &str) -> Option<LinkClass> {
    let (lower, upper) = s.split_once('-')?;
    Some(LinkClass {
        lower: role_from_str(lower)?,
        upper: role_from_str(upper)?,
    })
}

/// `[links]` as read, waiting for the fabric.
#[derive(Debug, Default)]
pub(crate) struct LinkConfig {
    default: LinkParams,
    default_spans: ParamSpans,
    classes: HashMap<LinkClass, LinkParams>,
    class_spans: HashMap<LinkClass, ParamSpans>,
    overrides: Vec<(Spanned<String>, LinkParams, ParamSpans)>,
}

impl LinkConfig {
    /// The parameters of a link of `class` before its own (inline,
    /// override): `[links.<class>]` over `[links.default]`.
    pub(crate) fn params_of(&self, class: LinkClass) -> LinkParams {
        let mut p = self.default.clone();
        if let Some(c) = self.classes.get(&class) {
            p.overlay(c);
        }
        p
    }

    /// Applies `[[links.override]]` to the built fabric, then checks the
    /// merged parameters of every link. `inline` holds where the inline
    /// parameters of each link were written (custom topologies).
    pub(crate) fn apply(&self, d: &mut Diags<'_>, fabric: &mut Fabric, inline: &[ParamSpans]) {
        let override_spans = apply_overrides(d, fabric, &self.overrides);
        check_link_params(d, fabric, self, inline, &override_spans);
    }
}

/// Reads `[links]` (`v`, if present) for a topology of `kind` (`None`
/// when it is unknown: the classes of every kind are accepted).
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    kind: Option<Kind>,
) -> LinkConfig {
    let mut cfg = LinkConfig::default();
    let Some(v) = v else { return cfg };
    let Some(table) = v.get_ref().as_table() else {
        d.error(Some(v.span()), "`links` must be a table")
            .label("expected a table")
            .help("write `[links.default]`, `[links.<class>]` and `[[links.override]]` sections");
        return cfg;
    };
    let classes: Vec<&str> = match kind {
        Some(k) => k.classes().to_vec(),
        None => Kind::ALL
            .iter()
            .flat_map(|k| k.classes())
            .copied()
            .collect(),
    };
    let param_keys = Keys::new(fields_of::<RawParams>()).extra(&["loss"]);
    let mut class_entries = Vec::new();
    for (key, value) in table {
        let name: &str = key.get_ref();
        match name {
            "default" => {
                if let Some(s) = read_table::<RawParams>(d, value, "`[links.default]`", param_keys)
                {
                    (cfg.default, cfg.default_spans) =
                        read_params(d, &s.raw, s.extra.get("loss").copied());
                }
            }
            "override" => {
                let Some(items) = array_items(d, value, "`links.override`", "[[links.override]]")
                else {
                    continue;
                };
                for item in items {
                    let keys = Keys::new(fields_of::<RawOverride>()).extra(&["loss"]);
                    let Some(s) = read_table::<RawOverride>(d, item, "`[[links.override]]`", keys)
                    else {
                        continue;
                    };
                    let span = s.span.clone();
                    let loss = s.extra.get("loss").copied();
                    let (link, raw) = s.raw.into_parts();
                    let (params, spans) = read_params(d, &raw, loss);
                    match link {
                        Some(link) => cfg.overrides.push((link, params, spans)),
                        None => {
                            missing(d, span, "link", "`[[links.override]]`")
                                .label("which link?")
                                .help("add e.g. `link = \"edge0-0--agg0-0\"` (see `turbonet validate --links` for names)");
                        }
                    }
                }
            }
            _ if classes.contains(&name) => {
                let what = format!("`[links.{name}]`");
                if let Some(s) = read_table::<RawParams>(d, value, &what, param_keys) {
                    let (params, spans) = read_params(d, &s.raw, s.extra.get("loss").copied());
                    if let Some(class) = class_from_str(name) {
                        class_entries.push((class, params, spans));
                    }
                }
            }
            _ => {
                let what = match kind {
                    Some(k) => format!("link classes of `{}` topologies", k.name()),
                    None => "link classes".to_owned(),
                };
                let msg = match kind {
                    Some(k) if class_from_str(name).is_some() => {
                        format!("`{name}` is not a link class of `{}` topologies", k.name())
                    }
                    _ => format!("unknown link class `{name}` in `[links]`"),
                };
                let mut help = choices_help(name, &what, &classes);
                help.push_str("; also `default` and `override`");
                d.error(Some(key.span()), msg)
                    .label("unknown link class")
                    .help(help);
            }
        }
    }
    for (class, params, spans) in class_entries {
        cfg.classes.insert(class, params);
        cfg.class_spans.insert(class, spans);
    }
    cfg
}

/// Applies `[[links.override]]`; returns, per overridden link, where its
/// overrides set the keys that [`check_link_params`] looks at.
fn apply_overrides(
    d: &mut Diags<'_>,
    fabric: &mut Fabric,
    overrides: &[(Spanned<String>, LinkParams, ParamSpans)],
) -> HashMap<usize, ParamSpans> {
    let mut spans: HashMap<usize, ParamSpans> = HashMap::new();
    if overrides.is_empty() {
        return spans;
    }
    let index: HashMap<&str, usize> = fabric
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| (l.name.as_str(), i))
        .collect();
    let mut found = Vec::new();
    for (name, params, keys) in overrides {
        match index.get(name.get_ref().as_str()) {
            Some(&i) => {
                spans.entry(i).or_default().overlay(keys);
                found.push((i, params));
            }
            None => {
                let help = close_link_names(name.get_ref(), fabric);
                d.error(
                    Some(name.span()),
                    format!("no link named `{}`", name.get_ref()),
                )
                .label("unknown link")
                .help(help);
            }
        }
    }
    for (i, params) in found {
        fabric.links[i].params.overlay(params);
    }
    spans
}

/// What can be wrong with a link's merged parameters, ordered as the
/// errors are reported at one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    QueueWithoutRate,
    EcnWithoutRate,
    EcnAboveQueue,
}

/// Checks the combinations of a link's parameters once every level
/// (default, class, inline, overrides) is merged: `rate` may come from
/// `[links.default]` and `queue` from an override. The rules are
/// [`LinkParams::check`]'s; here each problem is reported once per
/// offending key (with the first link it affects and how many others), not
/// once per link: one bad `[links.default]` would otherwise give a thousand
/// identical errors.
fn check_link_params(
    d: &mut Diags<'_>,
    fabric: &Fabric,
    cfg: &LinkConfig,
    inline: &[ParamSpans],
    overrides: &HashMap<usize, ParamSpans>,
) {
    let nothing = cfg.default_spans.is_empty()
        && cfg.class_spans.values().all(ParamSpans::is_empty)
        && inline.iter().all(ParamSpans::is_empty)
        && overrides.values().all(ParamSpans::is_empty);
    if nothing {
        return;
    }
    // (problem, span) -> (first link, number of links, queue span)
    type Key = (Problem, usize, usize);
    let mut found: BTreeMap<Key, (usize, usize, Option<Range<usize>>)> = BTreeMap::new();
    for (i, link) in fabric.links.iter().enumerate() {
        let mut spans = cfg.default_spans.clone();
        if let Some(c) = cfg.class_spans.get(&link.class) {
            spans.overlay(c);
        }
        if let Some(s) = inline.get(i) {
            spans.overlay(s);
        }
        if let Some(s) = overrides.get(&i) {
            spans.overlay(s);
        }
        let mut p = link.params.clone();
        if p.rate.is_none() && spans.rate.is_some() {
            // A `rate` was written but its value is invalid (already
            // reported): the link is not rate-less.
            p.rate = Some(Rate(1));
        }
        for problem in p.problems() {
            let (kind, span, queue) = match problem {
                ParamProblem::QueueWithoutRate => (Problem::QueueWithoutRate, &spans.queue, None),
                ParamProblem::EcnWithoutRate => (Problem::EcnWithoutRate, &spans.ecn, None),
                ParamProblem::EcnAboveQueue { .. } => {
                    (Problem::EcnAboveQueue, &spans.ecn, spans.queue.clone())
                }
            };
            // Every key set on a link was written somewhere; a key without
            // a span cannot be located and is not reported twice.
            let Some(span) = span else { continue };
            let e = found
                .entry((kind, span.start, span.end))
                .or_insert((i, 0, queue));
            e.1 += 1;
        }
    }
    for ((problem, start, end), (first, count, queue_span)) in found {
        let link = &fabric.links[first];
        let others = match count - 1 {
            0 => String::new(),
            1 => " (and 1 other link)".to_owned(),
            n => format!(" (and {n} other links)"),
        };
        let name = &link.name;
        match problem {
            Problem::QueueWithoutRate => {
                d.error(
                    Some(start..end),
                    format!("`queue` is set but link `{name}`{others} has no `rate`"),
                )
                .label("nothing drains this queue")
                .help(
                    "a queue is drained at the link's `rate`: add e.g. `rate = \"10gbit\"` \
                     next to it (or in `[links.default]`), or remove `queue`",
                );
            }
            Problem::EcnWithoutRate => {
                d.error(
                    Some(start..end),
                    format!("`ecn` is set but link `{name}`{others} has no `rate`"),
                )
                .label("no queue to mark from")
                .help(
                    "ECN marks packets when the queue drained at `rate` is at least this deep: \
                     add e.g. `rate = \"10gbit\"` next to it (or in `[links.default]`), or remove `ecn`",
                );
            }
            Problem::EcnAboveQueue => {
                let ecn = link.params.ecn.map(|e| e.to_string()).unwrap_or_default();
                let queue = link.params.queue.unwrap_or(LinkParams::DEFAULT_QUEUE);
                let whence = match &queue_span {
                    Some(q) => format!("`queue = \"{queue}\"` at line {}", d.line_col(q.start).0),
                    None => format!("the default queue of {queue}"),
                };
                d.error(
                    Some(start..end),
                    format!(
                        "`ecn` threshold {ecn} is above the queue limit {queue} of link `{name}`{others}"
                    ),
                )
                .label("the queue never gets this deep")
                .help(format!(
                    "nothing would ever be marked: the queue is limited by {whence}; set `ecn` below `queue` (e.g. a fifth of it) or raise `queue`"
                ));
            }
        }
    }
}

/// The help for an unknown link name: the reversed name when it exists
/// (link names put the lower tier first), else the closest names and what
/// link names look like.
pub(crate) fn close_link_names(name: &str, fabric: &Fabric) -> String {
    if let Some((a, b)) = name.split_once("--") {
        let (b, n) = b.split_once(':').map_or((b, None), |(b, n)| (b, Some(n)));
        let reversed = match n {
            Some(n) => format!("{b}--{a}:{n}"),
            None => format!("{b}--{a}"),
        };
        if fabric.link_by_name(&reversed).is_some() {
            return format!("did you mean `{reversed}`? link names put the lower tier first");
        }
    }
    let close: Vec<String> = suggest::closest(name, fabric.links.iter().map(|l| l.name.as_str()))
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect();
    let example = fabric.links.first().map_or_else(
        || "this topology has no links".to_owned(),
        |l| {
            format!(
                "link names look like `{}` (lower tier first, `:1`, `:2` for parallel links)",
                l.name
            )
        },
    );
    if close.is_empty() {
        example
    } else {
        format!("close names: {}; {example}", close.join(", "))
    }
}
