//! What `[[expect]]` and `[[task.check]]` tables have in common: one raw
//! table of every key either takes (each section admits its own), the
//! context checks are read against, and the readers of what both write
//! the same way: node and workload names, a figure with its bound.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::links::close_link_names;
use super::reader::{Keyword, keyword, missing, unit};
use super::timeline::close_node_names;
use crate::check::Check;
use crate::diag::{Diags, choices_help};
use crate::experiment::{Bound, Figure, FigureUnit, Of, Workload};
use crate::model::{Event, Fabric, NodeId};
use crate::units::{Delay, LossProb, Rate};

/// `[[expect]]` or `[[task.check]]`: every key either takes.
#[derive(Debug, Deserialize)]
pub(crate) struct RawCheck {
    pub name: Option<Spanned<String>>,
    pub from: Option<Spanned<String>>,
    pub to: Option<Spanned<String>>,
    pub reachable: Option<Spanned<bool>>,
    pub node: Option<Spanned<String>>,
    pub route: Option<Spanned<String>>,
    pub present: Option<Spanned<bool>>,
    pub ecmp: Option<Spanned<u32>>,
    pub run: Option<Spanned<String>>,
    pub exit: Option<Spanned<i32>>,
    pub output: Option<Spanned<String>>,
    pub bgp_peer: Option<Spanned<String>>,
    pub established: Option<Spanned<bool>>,
    pub workload: Option<Spanned<String>>,
    pub ran: Option<Spanned<String>>,
    pub algorithm: Option<Spanned<String>>,
    pub figure: Option<Spanned<String>>,
    pub of: Option<Spanned<String>>,
    pub min: Option<Spanned<toml::Value>>,
    pub max: Option<Spanned<toml::Value>>,
    pub within: Option<Spanned<toml::Value>>,
    pub of_link: Option<Spanned<String>>,
    pub binomial: Option<Spanned<toml::Value>>,
    pub confidence: Option<Spanned<f64>>,
    pub converged: Option<Spanned<toml::Value>>,
    pub after: Option<Spanned<String>>,
    pub capture: Option<Spanned<String>>,
    pub direction: Option<Spanned<String>>,
    pub frames: Option<Spanned<String>>,
    pub filter: Option<Spanned<String>>,
    pub counter: Option<Spanned<String>>,
    pub link: Option<Spanned<String>>,
    pub up: Option<Spanned<bool>>,
    pub mtu: Option<Spanned<i64>>,
    pub lookup: Option<Spanned<String>>,
    pub dev: Option<Spanned<String>>,
}

/// The keys of `[[expect]]`, in the order errors list them.
pub(crate) const EXPECT_KEYS: &[&str] = &[
    "name",
    "reachable",
    "workload",
    "figure",
    "of",
    "min",
    "max",
    "within",
    "of_link",
    "binomial",
    "confidence",
    "converged",
    "after",
];

/// The keys of `[[task.check]]`, in the order errors list them.
pub(crate) const CHECK_KEYS: &[&str] = &[
    "from",
    "to",
    "reachable",
    "node",
    "route",
    "present",
    "ecmp",
    "run",
    "exit",
    "output",
    "bgp_peer",
    "established",
    "workload",
    "ran",
    "algorithm",
    "figure",
    "of",
    "min",
    "max",
    "within",
    "of_link",
    "converged",
    "capture",
    "direction",
    "frames",
    "filter",
    "counter",
    "link",
    "up",
    "mtu",
    "lookup",
    "dev",
];

/// What checks are read against: the fabric, its timeline, whether it
/// speaks BGP, its filters, and the workloads (read, and every name
/// declared).
pub(crate) struct Context<'a> {
    pub fabric: Option<&'a Fabric>,
    pub timeline: &'a [Event],
    /// The names of the lab's `[[filter]]`s.
    pub filters: &'a [String],
    pub bgp: bool,
    pub workloads: &'a [Workload],
    pub declared: &'a BTreeSet<String>,
}

/// The node named `n`, or an error saying which names are close.
pub(crate) fn node_named(
    d: &mut Diags<'_>,
    fabric: &Fabric,
    n: &Spanned<String>,
) -> Option<NodeId> {
    match fabric.node_by_name(n.get_ref()) {
        Some(node) => Some(node.id),
        None => {
            d.error(Some(n.span()), format!("no node named `{}`", n.get_ref()))
                .label("unknown node")
                .help(close_node_names(n.get_ref(), fabric));
            None
        }
    }
}

/// The workload named `name`, or an error listing the workloads (with
/// `more` after them); `None` without an error for a workload declared
/// with errors of its own.
pub(crate) fn workload_named<'a>(
    d: &mut Diags<'_>,
    name: &Spanned<String>,
    cx: &Context<'a>,
    more: &str,
) -> Option<&'a Workload> {
    let found = cx.workloads.iter().find(|w| w.name == *name.get_ref());
    if found.is_none() && cx.fabric.is_some() && !cx.declared.contains(name.get_ref()) {
        let names: Vec<&str> = cx.declared.iter().map(String::as_str).collect();
        d.error(
            Some(name.span()),
            format!("no workload named `{}`", name.get_ref()),
        )
        .label("unknown workload")
        .help(format!(
            "{}{more}",
            choices_help(name.get_ref(), "workloads", &names)
        ));
    }
    found
}

/// The keyword `v` names among `choices`, or `default` when it is not
/// written; `None` when it is unknown (reported).
pub(crate) fn keyword_or<T: Copy>(
    d: &mut Diags<'_>,
    v: &Option<Spanned<String>>,
    default: T,
    choices: &[(&str, T)],
    kw: Keyword<'_>,
) -> Option<T> {
    match v {
        None => Some(default),
        Some(k) => keyword(d, k.get_ref(), k.span(), choices, kw),
    }
}

/// Whose workload a figure check reads.
pub(crate) enum Whose<'a> {
    /// One of the scenario's.
    Declared(&'a Workload),
    /// One the student starts, by name, whose kind is only known when it
    /// runs; with the algorithm a collective must use.
    Students(String, Option<String>),
}

/// A workload's figure within a bound, read from the keys of the table
/// (`table`, at `span`).
pub(crate) fn figure_check(
    d: &mut Diags<'_>,
    c: &RawCheck,
    span: Range<usize>,
    table: &str,
    fabric: Option<&Fabric>,
    whose: Whose<'_>,
) -> Option<Check> {
    let (name, ran, algorithm, kind) = match whose {
        Whose::Declared(w) => (w.name.clone(), false, None, Some(w.kind.name())),
        Whose::Students(name, algorithm) => (name, true, algorithm, None),
    };
    let (figure, of, bound) = figure_bound(d, c, span, table, fabric, kind)?;
    Some(Check::Figure {
        workload: name,
        ran,
        algorithm,
        figure,
        of,
        bound,
    })
}

/// Reads a figure, which of its values (`of`) and its bound, for a
/// workload of `kind` (`None`: a workload only known when it runs, whose
/// figures are checked against its kind then). `table` names the table
/// the keys are in, `span` where it is.
fn figure_bound(
    d: &mut Diags<'_>,
    e: &RawCheck,
    span: std::ops::Range<usize>,
    table: &str,
    fabric: Option<&Fabric>,
    kind: Option<&str>,
) -> Option<(Figure, Of, Bound)> {
    let Some(fig) = &e.figure else {
        let help = match kind {
            Some(kind) => format!(
                "add e.g. `figure = \"busbw\"`; figures of {kind} workloads: {}",
                figures_of(kind).join(", ")
            ),
            None => format!(
                "add e.g. `figure = \"busbw\"`; the figures: {}",
                Figure::ALL.map(Figure::name).join(", ")
            ),
        };
        missing(d, span, "figure", table)
            .label("which figure?")
            .help(help);
        return None;
    };
    let all: Vec<(&str, Figure)> = Figure::ALL.iter().map(|f| (f.name(), *f)).collect();
    let kw = Keyword {
        what: "figure",
        short: "figure",
        plural: "figures",
    };
    let figure = keyword(d, fig.get_ref(), fig.span(), &all, kw)?;
    if let Some(kind) = kind
        && !figure.kinds().contains(&kind)
    {
        d.error(
            Some(fig.span()),
            format!("{kind} workloads do not report `{figure}`"),
        )
        .label(format!("not a figure of {kind}"))
        .help(format!(
            "figures of {kind} workloads: {}",
            figures_of(kind).join(", ")
        ));
        return None;
    }
    let kw = Keyword {
        what: "aggregate",
        short: "aggregate",
        plural: "aggregates",
    };
    let of = keyword_or(d, &e.of, Of::Each, &Of::ALL, kw)?;
    let value = |d: &mut Diags<'_>, v: &Option<Spanned<toml::Value>>, key: &str| -> Option<f64> {
        match figure.unit() {
            FigureUnit::Rate => unit::<Rate>(d, v, key).map(|r| r.bits_per_sec() as f64),
            FigureUnit::Time => unit::<Delay>(d, v, key).map(|t| t.as_nanos() as f64 / 1e9),
            FigureUnit::Fraction => unit::<LossProb>(d, v, key).map(LossProb::probability),
            FigureUnit::Count => match v.as_ref().map(|v| (v.get_ref(), v.span())) {
                Some((toml::Value::Integer(i), _)) => Some(*i as f64),
                Some((toml::Value::Float(f), _)) => Some(*f),
                Some((other, at)) => {
                    d.error(
                        Some(at),
                        format!(
                            "`{key}` of `{figure}` is a number, found {}",
                            other.type_str()
                        ),
                    )
                    .label("expected a number")
                    .help(format!("e.g. `{key} = 0`"));
                    None
                }
                None => None,
            },
        }
    };
    let bound = if let Some(w) = &e.within {
        if e.min.is_some() || e.max.is_some() {
            d.error(Some(w.span()), "`within` or `min`/`max`, not both")
                .label("and a bound")
                .help("`within = \"10%\"` with `of_link` is a bound around the link's rate");
            return None;
        }
        let share = unit::<LossProb>(d, &e.within, "within")?.probability();
        let Some(l) = &e.of_link else {
            d.error(
                Some(w.span()),
                "`within` needs the link whose rate it is near: `of_link`",
            )
            .label("within what?")
            .help("add e.g. `of_link = \"h0-0--tor0\"`");
            return None;
        };
        if figure.unit() != FigureUnit::Rate {
            d.error(
                Some(w.span()),
                format!("`within` a link's rate bounds rates, and `{figure}` is not one"),
            )
            .label("not a rate")
            .help("use `min` and `max`");
            return None;
        }
        let fabric = fabric?;
        let Some(link) = fabric.links.iter().find(|k| k.name == *l.get_ref()) else {
            d.error(Some(l.span()), format!("no link named `{}`", l.get_ref()))
                .label("unknown link")
                .help(close_link_names(l.get_ref(), fabric));
            return None;
        };
        let Some(rate) = link.params.rate else {
            d.error(
                Some(l.span()),
                format!("link `{}` has no `rate` to be near", link.name),
            )
            .label("no rate")
            .help("give the link a `rate` in `[links]`, or use `min` and `max`");
            return None;
        };
        let r = rate.bits_per_sec() as f64;
        Bound {
            min: Some(r * (1.0 - share)),
            max: Some(r * (1.0 + share)),
        }
    } else {
        if let Some(l) = &e.of_link {
            d.error(Some(l.span()), "`of_link` is the reference of `within`")
                .label("without `within`")
                .help("add e.g. `within = \"10%\"`, or remove `of_link`");
            return None;
        }
        let (min, max) = (value(d, &e.min, "min"), value(d, &e.max, "max"));
        if e.min.is_none() && e.max.is_none() {
            d.error(Some(fig.span()), format!("`{figure}` without a bound"))
                .label("bounded how?")
                .help(format!(
                    "add `min`, `max`, or both, e.g. `min = \"{}\"`",
                    match figure.unit() {
                        FigureUnit::Rate => "1gbit",
                        FigureUnit::Time => "2s",
                        FigureUnit::Fraction => "1%",
                        FigureUnit::Count => "0",
                    }
                ));
            return None;
        }
        if max_below_min(d, e.max.as_ref().map(Spanned::span), min, max) {
            return None;
        }
        Bound { min, max }
    };
    Some((figure, of, bound))
}

/// Refuses a `max` (at `max_at`) below `min`, which nothing can pass; true
/// when it did.
pub(crate) fn max_below_min<T: PartialOrd>(
    d: &mut Diags<'_>,
    max_at: Option<Range<usize>>,
    min: Option<T>,
    max: Option<T>,
) -> bool {
    let below = matches!((min, max), (Some(a), Some(b)) if a > b);
    if below {
        d.error(max_at, "`max` is below `min`: nothing can pass")
            .label("below min")
            .help("swap them");
    }
    below
}

/// The figures workloads of `kind` report.
fn figures_of(kind: &str) -> Vec<&'static str> {
    Figure::ALL
        .iter()
        .filter(|f| f.kinds().contains(&kind))
        .map(|f| f.name())
        .collect()
}
