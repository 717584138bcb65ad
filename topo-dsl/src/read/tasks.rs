//! `[[task]]`: a graded lab's tasks, each with its `[[task.check]]`s: a
//! node reaching another (`from`, `to`), a route at a node (`node`,
//! `route`), where a node sends an address (`node`, `lookup`), a BGP
//! session (`node`, `bgp_peer`) or convergence (`converged`), a command's
//! outcome in a node (`node`, `run`), a link's ports (`link`), a workload's
//! figure (`workload`, `ran`), frames a link carries (`capture`) or a
//! filter's counters (`filter`); and `[faults]`, what a troubleshooting lab
//! breaks. Node names are checked against the fabric, so a typo in a lab
//! is found by `turbonet validate`, not by a student.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::addressing::parse_net;
use super::check::{
    CHECK_KEYS, Context, RawCheck, Whose, figure_check, keyword_or, max_below_min, node_named,
    workload_named,
};
use super::lab::check_name_chars;
use super::links::close_link_names;
use super::reader::{Keys, Keyword, array_items, fields_of, missing, read_table, unit};
use crate::check::{Check, FilterCounter, FrameKind};
use crate::diag::{Diags, choices_help};
use crate::experiment::{Algorithm, Workload};
use crate::model::course::{Fault, Faults, Task};
use crate::model::{Fabric, NodeId};
use crate::units::Delay;

/// `[[task]]`
#[derive(Debug, Deserialize)]
struct RawTask {
    name: Option<Spanned<String>>,
    title: Option<Spanned<String>>,
    points: Option<Spanned<u32>>,
    hint: Option<Spanned<String>>,
}

/// `[faults]`
#[derive(Debug, Deserialize)]
struct RawFaults {
    pick: Option<Spanned<u32>>,
}

/// `[[faults.fault]]`
#[derive(Debug, Deserialize)]
struct RawFault {
    name: Option<Spanned<String>>,
    node: Option<Spanned<String>>,
    run: Option<Spanned<String>>,
}

const TASK: &str = "`[[task]]`";
const CHECK: &str = "`[[task.check]]`";
const TASK_KEYS: &[&str] = &["name", "title", "points", "hint", "check"];

const KINDS_HELP: &str = "a check is one of: `from` and `to` (with `reachable = false` for \
                          must not reach); `node` and `route` (with `present = false` or \
                          `ecmp = N`); `node` and `lookup` (an address, with `dev`: the port \
                          it leaves by); `node` and `bgp_peer` (with `established = false` \
                          for must be down); `node` and `run` (with `exit` and `output`); \
                          `workload` (one of the lab's, run by the check) or `ran` (one the \
                          student started) with `figure` and `min`, `max` or `within`; \
                          `converged = \"5s\"` (BGP labs); `capture` (a link) with `frames`, \
                          `min`, `max`; `filter` with `counter`, `min`, `max`; `link` \
                          (a link's name, or \"*\" for every link) with `up` and `mtu`";

/// Reads `[[task]]` (`v`, if present) against the fabric.
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    cx: &Context<'_>,
) -> Vec<Task> {
    let Some(v) = v else { return Vec::new() };
    let Some(items) = array_items(d, v, "`task`", "[[task]]") else {
        return Vec::new();
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut tasks = Vec::new();
    // Where the first capture or filter check is: it measures while the
    // graded workloads run, so they must run for a set time.
    let mut counted: Option<Range<usize>> = None;
    for item in items {
        let Some(s) = read_table::<RawTask>(d, item, TASK, Keys::new(TASK_KEYS).extra(&["check"]))
        else {
            continue;
        };
        let before = d.count();
        let name = match &s.raw.name {
            Some(n) => {
                if let Err(why) = check_name_chars(n.get_ref()) {
                    d.error(Some(n.span()), format!("invalid task name: {why}"))
                        .label("invalid name")
                        .help("a task name is what a student types: e.g. `leaf-routes`");
                } else if !seen.insert(n.get_ref().clone()) {
                    d.error(Some(n.span()), format!("two tasks named `{}`", n.get_ref()))
                        .label("second task of that name")
                        .help("give every task its own name");
                }
                n.get_ref().clone()
            }
            None => {
                missing(d, s.span.clone(), "name", TASK)
                    .label("which task?")
                    .help("name it as a student types it: `name = \"leaf-routes\"`");
                String::new()
            }
        };
        let title = match &s.raw.title {
            Some(t) => t.get_ref().clone(),
            None => {
                missing(d, s.span.clone(), "title", TASK)
                    .label("what is asked?")
                    .help("say in a line what the student must do: `title = \"...\"`");
                String::new()
            }
        };
        if let Some(p) = &s.raw.points
            && *p.get_ref() == 0
        {
            d.error(Some(p.span()), "a task is worth at least 1 point")
                .label("0 points")
                .help("write `points = 1` or more, or leave it out (1)");
        }
        let checks = match s.extra.get("check") {
            Some(v) => {
                let checks = read_checks(d, v, cx);
                counted = counted.or_else(|| {
                    checks
                        .iter()
                        .find(|(c, _)| matches!(c, Check::Capture { .. } | Check::Filter { .. }))
                        .map(|(_, span)| span.clone())
                });
                checks.into_iter().map(|(c, _)| c).collect()
            }
            None => {
                missing(d, s.span.clone(), "check", TASK)
                    .label("nothing to grade")
                    .help(format!(
                        "add `[[task.check]]` tables under the task; {KINDS_HELP}"
                    ));
                Vec::new()
            }
        };
        if d.count() == before {
            tasks.push(Task {
                name,
                title,
                points: s.raw.points.map_or(1, |p| *p.get_ref()),
                hint: s.raw.hint.map(Spanned::into_inner),
                checks,
            });
        }
    }
    if let Some(at) = counted {
        endless_graded(d, at, &tasks, cx.workloads);
    }
    tasks
}

/// Reports a graded workload that runs until done (a transfer of so many
/// bytes, a collective) in a lab whose capture or filter check (at `at`)
/// measures while the graded workloads run: there is no span to measure.
fn endless_graded(d: &mut Diags<'_>, at: Range<usize>, tasks: &[Task], workloads: &[Workload]) {
    let endless = tasks
        .iter()
        .flat_map(|t| &t.checks)
        .filter_map(Check::graded_workload)
        .filter_map(|name| workloads.iter().find(|w| w.name == name))
        .find(|w| w.length().is_none());
    if let Some(w) = endless {
        d.error(
            Some(at),
            format!(
                "this check counts while the graded workloads run, and `{}` runs until it is done",
                w.name
            ),
        )
        .label("counted over no set time")
        .help(format!(
            "give `{}` a `duration` (a flow or a flood for so long), or grade it in a lab \
             without capture and filter checks",
            w.name
        ));
    }
}

/// The checks of a task, each with where it is written.
fn read_checks(
    d: &mut Diags<'_>,
    v: &Spanned<DeValue<'_>>,
    cx: &Context<'_>,
) -> Vec<(Check, Range<usize>)> {
    let Some(items) = array_items(d, v, "`task.check`", "[[task.check]]") else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let before = d.count();
            let s = read_table::<RawCheck>(d, item, CHECK, Keys::new(CHECK_KEYS))?;
            // An unknown key is the error to fix first (a misspelt kind).
            if d.count() > before {
                return None;
            }
            // Where an error about the whole check points: its kind's key.
            let at = (s.raw.capture.as_ref())
                .or(s.raw.filter.as_ref())
                .map_or_else(|| s.span.clone(), Spanned::span);
            check(d, &s.raw, s.span, cx).map(|c| (c, at))
        })
        .collect()
}

/// The kinds of check. The first key that names a kind (`from`/`to`,
/// `route`, `lookup`, `bgp_peer`, `run`, ...) decides it, and any key of
/// another kind is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reach,
    Route,
    Lookup,
    Bgp,
    Command,
    Workload,
    Ran,
    Converged,
    Capture,
    Filter,
    Link,
}

impl Kind {
    /// The kind `c` is, by the first key that names one.
    fn of(c: &RawCheck) -> Option<Kind> {
        let kinds = [
            (c.from.is_some() || c.to.is_some(), Kind::Reach),
            (c.route.is_some(), Kind::Route),
            (c.lookup.is_some(), Kind::Lookup),
            (c.bgp_peer.is_some(), Kind::Bgp),
            (c.run.is_some(), Kind::Command),
            (c.workload.is_some(), Kind::Workload),
            (c.ran.is_some(), Kind::Ran),
            (c.converged.is_some(), Kind::Converged),
            (c.capture.is_some(), Kind::Capture),
            (c.filter.is_some(), Kind::Filter),
            (c.link.is_some(), Kind::Link),
        ];
        kinds.into_iter().find(|(named, _)| *named).map(|(_, k)| k)
    }

    /// What it is called in an error.
    fn what(self) -> &'static str {
        match self {
            Kind::Reach => "a reachability check",
            Kind::Route => "a route check",
            Kind::Lookup => "a lookup check",
            Kind::Bgp => "a BGP session check",
            Kind::Command => "a command check",
            Kind::Workload => "a workload check",
            Kind::Ran => "a check of the student's workload",
            Kind::Converged => "a convergence check",
            Kind::Capture => "a capture check",
            Kind::Filter => "a filter check",
            Kind::Link => "a link check",
        }
    }

    /// The keys it takes.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::Reach => &["from", "to", "reachable"],
            Kind::Route => &["node", "route", "present", "ecmp"],
            Kind::Lookup => &["node", "lookup", "dev"],
            Kind::Bgp => &["node", "bgp_peer", "established"],
            Kind::Command => &["node", "run", "exit", "output"],
            Kind::Workload => &[
                "workload", "figure", "of", "min", "max", "within", "of_link",
            ],
            Kind::Ran => &[
                "ran",
                "algorithm",
                "figure",
                "of",
                "min",
                "max",
                "within",
                "of_link",
            ],
            Kind::Converged => &["converged"],
            Kind::Capture => &["capture", "direction", "frames", "min", "max"],
            Kind::Filter => &["filter", "counter", "min", "max"],
            Kind::Link => &["link", "up", "mtu"],
        }
    }
}

/// The check one `[[task.check]]` table makes.
fn check(d: &mut Diags<'_>, c: &RawCheck, span: Range<usize>, cx: &Context<'_>) -> Option<Check> {
    let at = |v: Option<Range<usize>>, key| v.map(|span| (key, span));
    let written: Vec<(&str, Range<usize>)> = [
        at(c.from.as_ref().map(Spanned::span), "from"),
        at(c.to.as_ref().map(Spanned::span), "to"),
        at(c.reachable.as_ref().map(Spanned::span), "reachable"),
        at(c.node.as_ref().map(Spanned::span), "node"),
        at(c.route.as_ref().map(Spanned::span), "route"),
        at(c.present.as_ref().map(Spanned::span), "present"),
        at(c.ecmp.as_ref().map(Spanned::span), "ecmp"),
        at(c.bgp_peer.as_ref().map(Spanned::span), "bgp_peer"),
        at(c.established.as_ref().map(Spanned::span), "established"),
        at(c.run.as_ref().map(Spanned::span), "run"),
        at(c.exit.as_ref().map(Spanned::span), "exit"),
        at(c.output.as_ref().map(Spanned::span), "output"),
        at(c.workload.as_ref().map(Spanned::span), "workload"),
        at(c.ran.as_ref().map(Spanned::span), "ran"),
        at(c.algorithm.as_ref().map(Spanned::span), "algorithm"),
        at(c.figure.as_ref().map(Spanned::span), "figure"),
        at(c.of.as_ref().map(Spanned::span), "of"),
        at(c.min.as_ref().map(Spanned::span), "min"),
        at(c.max.as_ref().map(Spanned::span), "max"),
        at(c.within.as_ref().map(Spanned::span), "within"),
        at(c.of_link.as_ref().map(Spanned::span), "of_link"),
        at(c.converged.as_ref().map(Spanned::span), "converged"),
        at(c.capture.as_ref().map(Spanned::span), "capture"),
        at(c.direction.as_ref().map(Spanned::span), "direction"),
        at(c.frames.as_ref().map(Spanned::span), "frames"),
        at(c.filter.as_ref().map(Spanned::span), "filter"),
        at(c.counter.as_ref().map(Spanned::span), "counter"),
        at(c.link.as_ref().map(Spanned::span), "link"),
        at(c.up.as_ref().map(Spanned::span), "up"),
        at(c.mtu.as_ref().map(Spanned::span), "mtu"),
        at(c.lookup.as_ref().map(Spanned::span), "lookup"),
        at(c.dev.as_ref().map(Spanned::span), "dev"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let Some(kind) = Kind::of(c) else {
        let (message, label, at) = match &c.node {
            Some(n) => (
                "`node` alone checks nothing",
                "what of this node?",
                n.span(),
            ),
            None => ("a check must say what it checks", "nothing to check", span),
        };
        d.error(Some(at), message).label(label).help(KINDS_HELP);
        return None;
    };
    let mut stray = false;
    for (key, at) in &written {
        if !kind.keys().contains(key) {
            d.error(
                Some(at.clone()),
                format!("`{key}` is not a key of {}", kind.what()),
            )
            .label("not valid here")
            .help(KINDS_HELP);
            stray = true;
        }
    }
    if stray {
        return None;
    }
    match kind {
        Kind::Capture | Kind::Filter => counted_check(d, c, cx),
        Kind::Link => link_check(d, c, span, cx),
        Kind::Converged => converged_check(d, c, cx),
        Kind::Workload | Kind::Ran => workload_check(d, c, span, cx),
        Kind::Reach => reach_check(d, c, span, cx.fabric?),
        Kind::Route | Kind::Lookup | Kind::Bgp | Kind::Command => {
            let fabric = cx.fabric?;
            let Some(at_node) = &c.node else {
                missing(d, span, "node", CHECK)
                    .label("at which node?")
                    .help("name the node whose state is checked: `node = \"leaf0\"`");
                return None;
            };
            let node = node_named(d, fabric, at_node);
            match kind {
                Kind::Route => route_check(d, c, node),
                Kind::Lookup => lookup_check(d, c, node, at_node, fabric),
                Kind::Bgp => bgp_check(d, c, node, at_node, cx),
                _ => command_check(d, c, node),
            }
        }
    }
}

/// `converged = "5s"`, in a BGP lab.
fn converged_check(d: &mut Diags<'_>, c: &RawCheck, cx: &Context<'_>) -> Option<Check> {
    let at = c.converged.as_ref().map(Spanned::span);
    let within = unit::<Delay>(d, &c.converged, "converged")?;
    if !cx.bgp {
        d.error(at, "a convergence check in a lab without BGP")
            .label("nothing converges")
            .help("write `mode = \"bgp\"` in `[routing]`, or check routes instead");
        return None;
    }
    Some(Check::Converged {
        within,
        after: None,
    })
}

/// `from` and `to`, with `reachable`.
fn reach_check(
    d: &mut Diags<'_>,
    c: &RawCheck,
    span: Range<usize>,
    fabric: &Fabric,
) -> Option<Check> {
    let (Some(from), Some(to)) = (&c.from, &c.to) else {
        let lacking = if c.from.is_none() { "from" } else { "to" };
        missing(d, span, lacking, CHECK)
            .label("reach from where to where?")
            .help("a reachability check names both ends: `from = \"h0-0\"`, `to = \"h1-0\"`");
        return None;
    };
    let (from, to) = (node_named(d, fabric, from), node_named(d, fabric, to));
    Some(Check::Reach {
        from: from?,
        to: to?,
        reachable: c.reachable.as_ref().is_none_or(|r| *r.get_ref()),
    })
}

/// `node` and `route`, with `present` or `ecmp`.
fn route_check(d: &mut Diags<'_>, c: &RawCheck, node: Option<NodeId>) -> Option<Check> {
    let route = c.route.as_ref().expect("the kind is a route check");
    let prefix = match parse_net(route.get_ref()) {
        Ok(p) => Some(p),
        Err((message, help)) => {
            d.error(Some(route.span()), message)
                .label("invalid prefix")
                .help(help);
            None
        }
    };
    let present = c.present.as_ref().is_none_or(|p| *p.get_ref());
    if !present && let Some(e) = &c.ecmp {
        d.error(Some(e.span()), "`ecmp` with `present = false`")
            .label("next hops of a route that must not exist")
            .help("leave `ecmp` out, or make the route `present`");
        return None;
    }
    if let Some(e) = &c.ecmp
        && *e.get_ref() == 0
    {
        d.error(Some(e.span()), "a route has at least 1 next hop")
            .label("0 next hops")
            .help("write `present = false` for a route that must not exist");
        return None;
    }
    Some(Check::Route {
        node: node?,
        prefix: prefix?,
        present,
        ecmp: c.ecmp.as_ref().map(|e| *e.get_ref() as usize),
    })
}

/// `node` and `lookup` (an address), with `dev`.
fn lookup_check(
    d: &mut Diags<'_>,
    c: &RawCheck,
    node: Option<NodeId>,
    at_node: &Spanned<String>,
    fabric: &Fabric,
) -> Option<Check> {
    let lookup = c.lookup.as_ref().expect("the kind is a lookup check");
    let Ok(address) = lookup.get_ref().parse::<std::net::Ipv4Addr>() else {
        d.error(
            Some(lookup.span()),
            format!("`{}` is not an IPv4 address", lookup.get_ref()),
        )
        .label("not an address")
        .help("a lookup is of one address, e.g. `lookup = \"10.128.0.10\"`; a prefix is `route`");
        return None;
    };
    let node = node?;
    let dev = match &c.dev {
        None => None,
        Some(dev) => {
            let ports: Vec<&str> = fabric
                .ports(node)
                .map(|(_, local, _)| local.ifname.as_str())
                .collect();
            if !ports.contains(&dev.get_ref().as_str()) {
                d.error(
                    Some(dev.span()),
                    format!("{} has no port `{}`", at_node.get_ref(), dev.get_ref()),
                )
                .label("unknown port")
                .help(choices_help(dev.get_ref(), "ports", &ports));
                return None;
            }
            Some(dev.get_ref().clone())
        }
    };
    Some(Check::Lookup { node, address, dev })
}

/// `node` and `bgp_peer`, with `established`, in a BGP lab.
fn bgp_check(
    d: &mut Diags<'_>,
    c: &RawCheck,
    node: Option<NodeId>,
    at_node: &Spanned<String>,
    cx: &Context<'_>,
) -> Option<Check> {
    let peer = c
        .bgp_peer
        .as_ref()
        .expect("the kind is a BGP session check");
    let fabric = cx.fabric?;
    if !cx.bgp {
        d.error(
            Some(peer.span()),
            "a BGP session check in a lab without BGP",
        )
        .label("no sessions to check")
        .help("write `mode = \"bgp\"` in `[routing]`, or check routes instead");
        return None;
    }
    let (node, peer_id) = (node?, node_named(d, fabric, peer)?);
    let switches = fabric.node(node).role.is_switch() && fabric.node(peer_id).role.is_switch();
    if !switches
        || !fabric
            .ports(node)
            .any(|(_, _, remote)| remote.node == peer_id)
    {
        d.error(
            Some(peer.span()),
            format!(
                "{} and {} do not speak BGP to each other",
                at_node.get_ref(),
                peer.get_ref()
            ),
        )
        .label("no session between them")
        .help("a session runs over a link between two switches: name a neighbouring switch");
        return None;
    }
    Some(Check::Bgp {
        node,
        peer: peer_id,
        established: c.established.as_ref().is_none_or(|e| *e.get_ref()),
    })
}

/// `node` and `run`, with `exit` and `output`.
fn command_check(d: &mut Diags<'_>, c: &RawCheck, node: Option<NodeId>) -> Option<Check> {
    let run = c.run.as_ref().expect("the kind is a command check");
    if run.get_ref().trim().is_empty() {
        d.error(Some(run.span()), "an empty command")
            .label("nothing to run")
            .help("e.g. `run = \"ping -c1 -W1 10.128.1.2\"`");
        return None;
    }
    Some(Check::Command {
        node: node?,
        run: run.get_ref().clone(),
        exit: c.exit.as_ref().map_or(0, |e| *e.get_ref()),
        output: c.output.as_ref().map(|o| o.get_ref().clone()),
    })
}

/// A count in `min` or `max`: a whole number of frames.
fn count(d: &mut Diags<'_>, v: &Option<Spanned<toml::Value>>, key: &str) -> Option<Option<u64>> {
    match v.as_ref().map(|v| (v.get_ref(), v.span())) {
        None => Some(None),
        Some((toml::Value::Integer(i), _)) if *i >= 0 => Some(Some(*i as u64)),
        Some((other, at)) => {
            d.error(
                Some(at),
                format!("`{key}` is a number of frames, found {other}"),
            )
            .label("expected a count")
            .help(format!("e.g. `{key} = 1`"));
            None
        }
    }
}

/// `capture` (a link, `direction`, `frames`) or `filter` (`counter`), with
/// `min` and `max` counts (`min = 1` unless either is written).
fn counted_check(d: &mut Diags<'_>, c: &RawCheck, cx: &Context<'_>) -> Option<Check> {
    let (min, max) = (count(d, &c.min, "min")?, count(d, &c.max, "max")?);
    if max_below_min(d, c.max.as_ref().map(Spanned::span), min, max) {
        return None;
    }
    let min = if min.is_none() && max.is_none() {
        Some(1)
    } else {
        min
    };
    let fabric = cx.fabric?;
    if let Some(link) = &c.capture {
        let Some(found) = fabric.links.iter().find(|l| l.name == *link.get_ref()) else {
            d.error(
                Some(link.span()),
                format!("no link named `{}`", link.get_ref()),
            )
            .label("unknown link")
            .help(close_link_names(link.get_ref(), fabric));
            return None;
        };
        let direction = match &c.direction {
            None => "both".to_owned(),
            Some(dir) if ["a-b", "b-a", "both"].contains(&dir.get_ref().as_str()) => {
                dir.get_ref().clone()
            }
            Some(dir) => {
                d.error(
                    Some(dir.span()),
                    format!("unknown direction `{}`", dir.get_ref()),
                )
                .label("unknown direction")
                .help("`a-b` (from the link's first node), `b-a` or `both`");
                return None;
            }
        };
        let kw = Keyword {
            what: "kind of frame",
            short: "kind",
            plural: "kinds",
        };
        let frames = keyword_or(d, &c.frames, FrameKind::Any, &FrameKind::ALL, kw)?;
        return Some(Check::Capture {
            link: found.name.clone(),
            direction,
            frames,
            min,
            max,
        });
    }
    let name = c.filter.as_ref().expect("the kind is a filter check");
    if !cx.filters.iter().any(|f| f == name.get_ref()) {
        let names: Vec<&str> = cx.filters.iter().map(String::as_str).collect();
        let help = if names.is_empty() {
            "the lab has no `[[filter]]`: declare the filter the check reads".to_owned()
        } else {
            choices_help(name.get_ref(), "filters", &names)
        };
        d.error(
            Some(name.span()),
            format!("no filter named `{}`", name.get_ref()),
        )
        .label("unknown filter")
        .help(help);
        return None;
    }
    let kw = Keyword {
        what: "filter counter",
        short: "counter",
        plural: "counters",
    };
    let counter = keyword_or(
        d,
        &c.counter,
        FilterCounter::Dropped,
        &FilterCounter::ALL,
        kw,
    )?;
    Some(Check::Filter {
        filter: name.get_ref().clone(),
        counter,
        min,
        max,
    })
}

/// The smallest and largest MTU a port may be given (Linux's bounds for a
/// veth: IPv4's minimum, and the largest jumbo frame).
const MTU_RANGE: (i64, i64) = (68, 65535);

/// `link` (a name, or `"*"` for every link) with `up` and `mtu`.
fn link_check(
    d: &mut Diags<'_>,
    c: &RawCheck,
    span: Range<usize>,
    cx: &Context<'_>,
) -> Option<Check> {
    let name = c.link.as_ref().expect("the kind is a link check");
    if c.up.is_none() && c.mtu.is_none() {
        d.error(
            Some(span),
            "a link check must say what of the link it checks",
        )
        .label("neither `up` nor `mtu`")
        .help("add `up = true` (both ports up), `up = false` (down) or `mtu = 9000`");
        return None;
    }
    let mtu = match &c.mtu {
        None => None,
        Some(m) if (MTU_RANGE.0..=MTU_RANGE.1).contains(m.get_ref()) => Some(*m.get_ref() as u32),
        Some(m) => {
            d.error(Some(m.span()), format!("an MTU of {} bytes", m.get_ref()))
                .label("not a port's MTU")
                .help(format!(
                    "an MTU is {} to {} bytes: e.g. `mtu = 9000`",
                    MTU_RANGE.0, MTU_RANGE.1
                ));
            return None;
        }
    };
    let fabric = cx.fabric?;
    let link = if name.get_ref() == "*" {
        None
    } else if let Some(found) = fabric.links.iter().find(|l| l.name == *name.get_ref()) {
        Some(found.name.clone())
    } else {
        d.error(
            Some(name.span()),
            format!("no link named `{}`", name.get_ref()),
        )
        .label("unknown link")
        .help(format!(
            "{}; `link = \"*\"` checks every link",
            close_link_names(name.get_ref(), fabric)
        ));
        return None;
    };
    Some(Check::Link {
        link,
        up: c.up.as_ref().map(|u| *u.get_ref()),
        mtu,
    })
}

/// A workload's figure: `workload` (the lab's) or `ran` (the student's).
fn workload_check(
    d: &mut Diags<'_>,
    c: &RawCheck,
    span: Range<usize>,
    cx: &Context<'_>,
) -> Option<Check> {
    if let Some(name) = &c.ran {
        if let Err(why) = check_name_chars(name.get_ref()) {
            d.error(Some(name.span()), format!("invalid workload name: {why}"))
                .label("invalid name")
                .help("the name the student gives their workload, e.g. `ran = \"ring\"`");
            return None;
        }
        let algorithm = c.algorithm.as_ref().map(|a| a.get_ref().clone());
        if let Some(a) = &c.algorithm {
            let names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
            if !names.contains(&a.get_ref().as_str()) {
                d.error(Some(a.span()), format!("no algorithm `{}`", a.get_ref()))
                    .label("unknown algorithm")
                    .help(choices_help(a.get_ref(), "algorithms", &names));
                return None;
            }
        }
        let whose = Whose::Students(name.get_ref().clone(), algorithm);
        return figure_check(d, c, span, CHECK, cx.fabric, whose);
    }
    let name = c.workload.as_ref().expect("the kind is a workload check");
    let more = "; a workload the student starts is `ran = \"NAME\"`";
    let workload = workload_named(d, name, cx, more)?;
    figure_check(d, c, span, CHECK, cx.fabric, Whose::Declared(workload))
}

/// Reads `[faults]` (`v`, if present): `pick` and its `[[faults.fault]]`s.
pub(crate) fn read_faults(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&Fabric>,
) -> Option<Faults> {
    const WHAT: &str = "`[faults]`";
    const FAULT: &str = "`[[faults.fault]]`";
    let v = v?;
    let s = read_table::<RawFaults>(d, v, WHAT, Keys::new(&["pick", "fault"]).extra(&["fault"]))?;
    let Some(items) = s.extra.get("fault") else {
        missing(d, s.span.clone(), "fault", WHAT)
            .label("no faults to pick from")
            .help("add `[[faults.fault]]` tables: `name`, `node` and `run`, the command that breaks something");
        return None;
    };
    let items = array_items(d, items, "`faults.fault`", "[[faults.fault]]")?;
    let before = d.count();
    let mut seen = BTreeSet::new();
    let mut faults = Vec::new();
    for item in items {
        let Some(f) = read_table::<RawFault>(d, item, FAULT, Keys::new(fields_of::<RawFault>()))
        else {
            continue;
        };
        let (Some(name), Some(node), Some(run)) = (&f.raw.name, &f.raw.node, &f.raw.run) else {
            let lacking = if f.raw.name.is_none() {
                "name"
            } else if f.raw.node.is_none() {
                "node"
            } else {
                "run"
            };
            missing(d, f.span.clone(), lacking, FAULT)
                .label("incomplete fault")
                .help(
                    "a fault is `name`, `node` and `run`: e.g. `run = \"ip link set spine0 down\"`",
                );
            continue;
        };
        if !seen.insert(name.get_ref().clone()) {
            d.error(
                Some(name.span()),
                format!("two faults named `{}`", name.get_ref()),
            )
            .label("second fault of that name")
            .help("the seed picks faults by name: give every fault its own");
        }
        if let Some(id) = fabric.and_then(|f| node_named(d, f, node)) {
            faults.push(Fault {
                name: name.get_ref().clone(),
                node: id,
                run: run.get_ref().clone(),
            });
        }
    }
    let pick = s.raw.pick.as_ref().map_or(1, |p| *p.get_ref() as usize);
    if let Some(p) = &s.raw.pick
        && (pick == 0 || pick > items.len())
    {
        d.error(
            Some(p.span()),
            format!("`pick = {pick}` of {} fault(s)", items.len()),
        )
        .label("cannot pick that many")
        .help(format!("pick 1 to {} faults", items.len()));
    }
    (d.count() == before).then_some(Faults { pick, faults })
}
