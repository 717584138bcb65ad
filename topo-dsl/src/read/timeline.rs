//! `[[timeline]]`: events the lab daemon executes at times after the fabric
//! is ready. Read after the fabric is built, because events name its links
//! and nodes, and because a `set` is checked against the parameters the
//! link will have when it runs.

use std::collections::HashMap;
use std::ops::Range;

use toml::Spanned;
use toml::de::DeValue;

use super::links::close_link_names;
use super::params::{read_params, with_link_params};
use super::reader::{
    Keys, Keyword, array_items, fields_of, key_span, keyword, missing, read_table, unit,
};
use crate::diag::Diags;
use crate::model::*;
use crate::suggest;
use crate::units::Delay;

with_link_params! {
    /// `[[timeline]]` (`mtu` is rejected by the key check: it cannot change
    /// at run time).
    struct RawEvent {
        name: Option<Spanned<String>>,
        at: Option<Spanned<toml::Value>>,
        action: Option<Spanned<String>>,
        link: Option<Spanned<String>>,
        node: Option<Spanned<String>>,
        period: Option<Spanned<toml::Value>>,
        count: Option<Spanned<toml::Value>>,
    }
    without mtu
}

/// The actions of events, as `action` names them; [`Action`] holds what
/// each acts on once it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    /// [`Action::Set`].
    Set,
    /// [`Action::Reset`].
    Reset,
    /// [`Action::Fail`].
    Fail,
    /// [`Action::Restore`].
    Restore,
    /// [`Action::Flap`].
    Flap,
}

impl Verb {
    /// Every verb, in the order of [`Action::NAMES`] (which the help lists).
    const ALL: [Verb; 5] = [
        Verb::Set,
        Verb::Reset,
        Verb::Fail,
        Verb::Restore,
        Verb::Flap,
    ];

    /// The name of the action in scenario files.
    fn name(self) -> &'static str {
        match self {
            Verb::Set => "set",
            Verb::Reset => "reset",
            Verb::Fail => "fail",
            Verb::Restore => "restore",
            Verb::Flap => "flap",
        }
    }

    /// True for the actions that take a link only (`fail` and `restore`
    /// also take a node).
    fn links_only(self) -> bool {
        matches!(self, Verb::Set | Verb::Reset | Verb::Flap)
    }
}

const WHAT: &str = "`[[timeline]]`";

/// Why `mtu` is not a key of an event.
const MTU_REASON: &str = "cannot be changed at run time: the MTU is set on both interfaces \
                          when the fabric is built; set it in `[links]` instead";

/// An event that passed every check of its own, waiting for the check of
/// the link parameters over time.
struct Pending {
    event: Event,
    /// Where its parameter keys were written (a `set`).
    keys: Vec<(&'static str, Range<usize>)>,
    /// Where the event is, when no key can be pointed at.
    span: Range<usize>,
}

/// Reads `[[timeline]]` (`v`, if present), its events sorted by time.
/// Without a fabric (it had errors) only the events themselves are
/// checked, not the names they refer to.
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&Fabric>,
) -> Vec<Event> {
    let Some(v) = v else { return Vec::new() };
    let Some(items) = array_items(d, v, "`timeline`", "[[timeline]]") else {
        return Vec::new();
    };
    let links: HashMap<&str, LinkId> = fabric
        .map(|f| f.links.iter().map(|l| (l.name.as_str(), l.id)).collect())
        .unwrap_or_default();
    let nodes: HashMap<&str, NodeId> = fabric
        .map(|f| f.nodes.iter().map(|n| (n.name.as_str(), n.id)).collect())
        .unwrap_or_default();
    let mut pending = Vec::new();
    for item in items {
        if let Some(p) = read_event(d, item, fabric, &links, &nodes) {
            pending.push(p);
        }
    }
    // Stable: events at the same time keep their file order.
    pending.sort_by_key(|p| p.event.at);
    if let Some(fabric) = fabric {
        check_params_over_time(d, fabric, &pending);
    }
    pending.into_iter().map(|p| p.event).collect()
}

/// One event, checked on its own: keys, action, target, parameters.
fn read_event(
    d: &mut Diags<'_>,
    item: &Spanned<DeValue<'_>>,
    fabric: Option<&Fabric>,
    links: &HashMap<&str, LinkId>,
    nodes: &HashMap<&str, NodeId>,
) -> Option<Pending> {
    let keys = Keys::new(fields_of::<RawEvent>())
        .extra(&["loss"])
        .foreign(&["mtu"], MTU_REASON);
    let mut s = read_table::<RawEvent>(d, item, WHAT, keys)?;
    let span = s.span.clone();
    let loss = s.extra.get("loss").copied();
    let has_mtu = key_span(item, "mtu").is_some();
    let e = &mut s.raw;
    let mut ok = true;

    // at
    let at = match &e.at {
        None => {
            missing(d, span.clone(), "at", WHAT)
                .label("when?")
                .help("add e.g. `at = \"5s\"`: the time after the fabric is ready");
            None
        }
        Some(_) => unit::<Delay>(d, &e.at, "at"),
    };
    ok &= at.is_some();

    // action
    let action: Option<Verb> = match &e.action {
        None => {
            missing(d, span.clone(), "action", WHAT)
                .label("what happens?")
                .help(format!("valid actions: {}", Action::NAMES.join(", ")));
            None
        }
        Some(a) => {
            let verbs = Verb::ALL.map(|v| (v.name(), v));
            let kw = Keyword {
                what: "action",
                short: "action",
                plural: "actions",
            };
            keyword(d, a.get_ref(), a.span(), &verbs, kw)
        }
    };
    ok &= action.is_some();
    let action_span = e.action.as_ref().map_or(span.clone(), toml::Spanned::span);

    // link or node
    let links_only = action.is_some_and(Verb::links_only);
    let target = match (&e.link, &e.node) {
        (Some(_), Some(n)) => {
            d.error(
                Some(n.span()),
                "an event acts on a link or a node, not both",
            )
            .label("second target")
            .help("remove `node` or `link`; use one event per target");
            None
        }
        (None, None) => {
            let help = if links_only {
                "add e.g. `link = \"edge0-0--agg0-0\"` (see `turbonet validate --links` for names)"
            } else {
                "add `link = \"<link name>\"` or, for `fail` and `restore`, `node = \"<node name>\"`"
            };
            d.error(
                Some(span.clone()),
                format!("missing `link` or `node` in {WHAT}"),
            )
            .label("acts on what?")
            .help(help);
            None
        }
        (Some(l), None) => Some(l).map(|l| (true, l)),
        (None, Some(n)) => {
            if links_only {
                let act = action.map_or("", Verb::name);
                d.error(
                    Some(n.span()),
                    format!("`{act}` acts on links, not nodes"),
                )
                .label("a node")
                .help(format!(
                    "name a link with `link = \"...\"` (one event per link); only `fail` and `restore` take a `node`, e.g. `action = \"fail\"` with `node = \"{}\"`",
                    n.get_ref()
                ));
                None
            } else {
                Some((false, n))
            }
        }
    };
    ok &= target.is_some();
    let target = match (target, fabric) {
        (Some((true, l)), Some(f)) => match links.get(l.get_ref().as_str()) {
            Some(&id) => Some(EventTarget::Link(id)),
            None => {
                d.error(Some(l.span()), format!("no link named `{}`", l.get_ref()))
                    .label("unknown link")
                    .help(close_link_names(l.get_ref(), f));
                None
            }
        },
        (Some((false, n)), Some(f)) => match nodes.get(n.get_ref().as_str()) {
            Some(&id) => Some(EventTarget::Node(id)),
            None => {
                d.error(Some(n.span()), format!("no node named `{}`", n.get_ref()))
                    .label("unknown node")
                    .help(close_node_names(n.get_ref(), f));
                None
            }
        },
        _ => None,
    };

    // Link parameters: only `set` takes them.
    let mut given: Vec<(&'static str, Range<usize>)> = [
        ("rate", &e.rate),
        ("delay", &e.delay),
        ("jitter", &e.jitter),
        ("jitter_distribution", &e.jitter_distribution),
        ("reorder", &e.reorder),
        ("corrupt", &e.corrupt),
        ("duplicate", &e.duplicate),
        ("queue", &e.queue),
        ("ecn", &e.ecn),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| (k, v.span())))
    .collect();
    if let Some(l) = loss {
        given.push(("loss", l.span()));
    }
    given.sort_by_key(|(_, s)| s.start);
    let mut patch = None;
    match action {
        Some(Verb::Set) => {
            if given.is_empty() {
                if !has_mtu {
                    let mut valid = LinkParams::KEYS.to_vec();
                    valid.retain(|k| *k != "mtu");
                    d.error(Some(action_span.clone()), "`set` without link parameters")
                        .label("sets nothing")
                        .help(format!(
                            "add the keys to change, e.g. `delay = \"10ms\"`; valid keys: {}",
                            valid.join(", ")
                        ));
                }
                ok = false;
            } else {
                let before = d.count();
                let (params, _) = read_params(d, &e.take_params(), loss);
                ok &= d.count() == before;
                patch = Some(params);
            }
        }
        Some(other) if !given.is_empty() => {
            let other = other.name();
            ok = false;
            let list: Vec<String> = given.iter().map(|(k, _)| format!("`{k}`")).collect();
            let (first, first_span) = &given[0];
            let what = if given.len() == 1 {
                format!("`{first}` is")
            } else {
                format!("{} are", list.join(", "))
            };
            d.error(
                Some(first_span.clone()),
                format!("{what} not used by `{other}`: only `set` takes link parameters"),
            )
            .label("not a parameter of this action")
            .help(format!(
                "remove {}, or change {} in an event of its own with `action = \"set\"`",
                list.join(", "),
                if given.len() == 1 { "it" } else { "them" }
            ));
        }
        _ => {}
    }

    // period and count: only `flap` takes them.
    let mut period = None;
    let mut count = 1;
    if action == Some(Verb::Flap) {
        match &e.period {
            None => {
                ok = false;
                d.error(Some(action_span.clone()), "`flap` without a `period`")
                    .label("needs `period`")
                    .help("add e.g. `period = \"2s\"`: the link is down for the first half of each period and up for the second");
            }
            Some(p) => match unit::<Delay>(d, &e.period, "period") {
                Some(x) if x.is_zero() => {
                    ok = false;
                    d.error(
                        Some(p.span()),
                        "the `period` of a flap must be greater than zero",
                    )
                    .label("zero period")
                    .help("one down/up cycle lasts `period`, e.g. `period = \"2s\"`");
                }
                Some(x) => period = Some(x),
                None => ok = false,
            },
        }
        if let Some(c) = &e.count {
            match c.get_ref() {
                toml::Value::Integer(n) if *n >= 1 && *n <= i64::from(u32::MAX) => {
                    count = *n as u32;
                }
                toml::Value::Integer(n) => {
                    ok = false;
                    let (msg, help) = if *n < 1 {
                        (
                            format!("`count` must be at least 1, found {n}"),
                            "`count` is the number of down/up cycles; remove it for one cycle",
                        )
                    } else {
                        (
                            format!("`count` must be at most {}, found {n}", u32::MAX),
                            "`count` is the number of down/up cycles",
                        )
                    };
                    d.error(Some(c.span()), msg)
                        .label("out of range")
                        .help(help);
                }
                other => {
                    ok = false;
                    let help = match other.as_str() {
                        Some(t) if t.trim().parse::<u32>().is_ok() => {
                            format!("write it without quotes: `count = {}`", t.trim())
                        }
                        _ => "write a whole number of cycles, e.g. `count = 3`".to_owned(),
                    };
                    d.error(
                        Some(c.span()),
                        format!(
                            "expected an integer for `count`, found {}",
                            other.type_str()
                        ),
                    )
                    .label("expected an integer")
                    .help(help);
                }
            }
        }
    } else if let Some(act) = action.map(Verb::name) {
        for (key, v) in [("period", &e.period), ("count", &e.count)] {
            if let Some(v) = v {
                ok = false;
                d.error(
                    Some(v.span()),
                    format!("`{key}` is not used by `{act}`: only `flap` takes it"),
                )
                .label("only for `flap`")
                .help(format!("remove `{key}`, or use `action = \"flap\"`"));
            }
        }
    }

    if !ok {
        return None;
    }
    let (at, action, target) = (at?, action?, target?);
    let link = match target {
        EventTarget::Link(id) => Some(id),
        EventTarget::Node(_) => None,
    };
    let action = match action {
        Verb::Set => Action::Set {
            link: link?,
            params: patch?,
        },
        Verb::Reset => Action::Reset { link: link? },
        Verb::Fail => Action::Fail(target),
        Verb::Restore => Action::Restore(target),
        Verb::Flap => Action::Flap {
            link: link?,
            period: period?,
            count,
        },
    };
    Some(Pending {
        event: Event {
            name: e.name.as_ref().map(|n| n.get_ref().clone()),
            at,
            action,
        },
        keys: given,
        span: action_span,
    })
}

/// Replays the `set` and `reset` events in time order and checks that every
/// `set` leaves its link with parameters that pass [`LinkParams::check`]:
/// a `set` changes only the keys it gives, over the link's parameters at
/// that time (the scenario's, changed by the earlier `set`s since the last
/// `reset`). A problem the link already had is not reported again.
fn check_params_over_time(d: &mut Diags<'_>, fabric: &Fabric, events: &[Pending]) {
    // Per link changed by a `set`: its parameters, and when its `queue`
    // was last set by one.
    let mut current: HashMap<LinkId, (LinkParams, Option<Delay>)> = HashMap::new();
    for p in events {
        match &p.event.action {
            Action::Set { link, params } => {
                let link = fabric.link(*link);
                let (base, queue_at) = current
                    .get(&link.id)
                    .map_or((&link.params, None), |(params, at)| (params, *at));
                let before = base.problems();
                let merged = base.merged(params);
                for problem in merged.problems() {
                    if before.contains(&problem) {
                        continue;
                    }
                    report(d, p, &link.name, problem, queue_at);
                }
                let queue_at = if params.queue.is_some() {
                    Some(p.event.at)
                } else {
                    queue_at
                };
                current.insert(link.id, (merged, queue_at));
            }
            Action::Reset { link } => {
                current.remove(link);
            }
            _ => {}
        }
    }
}

/// Reports a problem of the parameters a `set` leaves; `queue_at` is when
/// an earlier `set` gave the link its current `queue`.
fn report(
    d: &mut Diags<'_>,
    p: &Pending,
    name: &str,
    problem: ParamProblem,
    queue_at: Option<Delay>,
) {
    let key_span = |key: &str| {
        p.keys
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| s.clone())
    };
    let at = p.event.at;
    // The key this event set that breaks the rule; failing that, the first
    // key it set.
    let span = key_span(problem.key())
        .or_else(|| key_span("queue"))
        .or_else(|| p.keys.first().map(|(_, s)| s.clone()))
        .unwrap_or(p.span.clone());
    let add_rate = "add e.g. `rate = \"10gbit\"` to this event (or to the link in `[links]`)";
    match problem {
        ParamProblem::QueueWithoutRate => {
            d.error(
                Some(span),
                format!("`queue` is set at {at} but link `{name}` has no `rate`"),
            )
            .label("nothing drains this queue")
            .help(format!(
                "a queue is drained at the link's `rate`: {add_rate}, or remove `queue`"
            ));
        }
        ParamProblem::EcnWithoutRate => {
            d.error(
                Some(span),
                format!("`ecn` is set at {at} but link `{name}` has no `rate`"),
            )
            .label("no queue to mark from")
            .help(format!(
                "ECN marks packets when the queue drained at `rate` is at least this deep: {add_rate}, or remove `ecn`"
            ));
        }
        ParamProblem::EcnAboveQueue {
            ecn,
            queue,
            default_queue,
        } => {
            let whence = if key_span("queue").is_some() {
                format!("`queue = \"{queue}\"` in this event")
            } else if default_queue {
                format!("the default queue of {queue}")
            } else if let Some(t) = queue_at {
                format!("`queue = \"{queue}\"` set at {t}")
            } else {
                format!("the link's `queue = \"{queue}\"` in `[links]`")
            };
            d.error(
                Some(span),
                format!(
                    "`ecn` threshold {ecn} is above the queue limit {queue} of link `{name}` at {at}"
                ),
            )
            .label("the queue never gets this deep")
            .help(format!(
                "nothing would ever be marked: the queue is limited by {whence}; set `ecn` below `queue` (e.g. a fifth of it) or raise `queue`"
            ));
        }
    }
}

pub(crate) fn close_node_names(name: &str, fabric: &Fabric) -> String {
    let close: Vec<String> = suggest::closest(name, fabric.nodes.iter().map(|n| n.name.as_str()))
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect();
    let example = fabric.nodes.first().map_or_else(
        || "this topology has no nodes".to_owned(),
        |n| format!("node names look like `{}`", n.name),
    );
    if close.is_empty() {
        example
    } else {
        format!("close names: {}; {example}", close.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_are_the_actions_of_the_model() {
        assert_eq!(Verb::ALL.map(Verb::name), Action::NAMES);
    }
}
