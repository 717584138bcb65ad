//! `[[expect]]`: what a run must show, checked by `turbonet run` once the
//! workloads end. One clause per table: every host reaching every other
//! (`reachable = true`), a workload's figure within bounds (`workload`,
//! `figure`, `min`/`max` or `within` a link's rate), a UDP workload's loss
//! consistent with a probability (`binomial`), or BGP converging within a
//! time of a timeline event (`converged`, `after`).

use std::collections::BTreeSet;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::links::close_link_names;
use super::reader::{Keys, Keyword, array_items, fields_of, keyword, missing, read_table, unit};
use crate::diag::{Diags, choices_help};
use crate::experiment::*;
use crate::model::{Event, Fabric};
use crate::units::{Delay, LossProb, Rate};

/// `[[expect]]`
#[derive(Debug, Deserialize)]
struct RawExpect {
    name: Option<Spanned<String>>,
    reachable: Option<Spanned<bool>>,
    workload: Option<Spanned<String>>,
    figure: Option<Spanned<String>>,
    of: Option<Spanned<String>>,
    min: Option<Spanned<toml::Value>>,
    max: Option<Spanned<toml::Value>>,
    within: Option<Spanned<toml::Value>>,
    of_link: Option<Spanned<String>>,
    binomial: Option<Spanned<toml::Value>>,
    confidence: Option<Spanned<f64>>,
    converged: Option<Spanned<toml::Value>>,
    after: Option<Spanned<String>>,
}

const WHAT: &str = "`[[expect]]`";

const KINDS_HELP: &str = "an expectation is one of: `reachable = true`; `workload` with `figure` \
                          and `min`, `max` or `within`; `workload` with `binomial`; `converged` \
                          with `after`";

/// Reads `[[expect]]` (`v`, if present) against the workloads and timeline
/// read before.
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&Fabric>,
    workloads: &[Workload],
    declared: &BTreeSet<String>,
    timeline: &[Event],
) -> Vec<Expect> {
    let Some(v) = v else { return Vec::new() };
    let Some(items) = array_items(d, v, "`expect`", "[[expect]]") else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let s = read_table::<RawExpect>(d, item, WHAT, Keys::new(fields_of::<RawExpect>()))?;
            let before = d.count();
            let check = clause(
                d,
                &s.raw,
                s.span.clone(),
                fabric,
                workloads,
                declared,
                timeline,
            );
            let check = check.filter(|_| d.count() == before)?;
            let name = s
                .raw
                .name
                .as_ref()
                .map_or_else(|| describe(&check), |n| n.get_ref().clone());
            Some(Expect { name, check })
        })
        .collect()
}

/// A name for an expectation that has none: what it checks.
fn describe(check: &Check) -> String {
    match check {
        Check::Reachable => "every host reaches every other".to_owned(),
        Check::Figure {
            workload,
            figure,
            of,
            bound,
        } => {
            format!(
                "{workload}: {} {figure} {}",
                of.name(),
                bound.describe(figure.unit())
            )
        }
        Check::Binomial { workload, p, .. } => {
            format!("{workload}: loss consistent with p = {}", LossProb(*p))
        }
        Check::Converged { event, within, .. } => {
            format!("BGP converged within {within} of `{event}`")
        }
    }
}

fn clause(
    d: &mut Diags<'_>,
    e: &RawExpect,
    span: std::ops::Range<usize>,
    fabric: Option<&Fabric>,
    workloads: &[Workload],
    declared: &BTreeSet<String>,
    timeline: &[Event],
) -> Option<Check> {
    if let Some(r) = &e.reachable {
        if !*r.get_ref() {
            d.error(Some(r.span()), "`reachable = false` expects nothing")
                .label("nothing to check")
                .help("write `reachable = true`, or remove the clause");
            return None;
        }
        if let Some(w) = &e.workload {
            d.error(Some(w.span()), "one expectation per `[[expect]]`")
                .label("second clause")
                .help("move `workload` and its keys to an `[[expect]]` of its own");
            return None;
        }
        return Some(Check::Reachable);
    }
    if let Some(c) = &e.converged {
        let within = unit::<Delay>(d, &e.converged, "converged");
        let Some(after) = &e.after else {
            d.error(
                Some(c.span()),
                "`converged` needs the event it follows: `after`",
            )
            .label("after what?")
            .help("add e.g. `after = \"core-fails\"`, the `name` of a `[[timeline]]` event");
            return None;
        };
        let named: Vec<&str> = timeline.iter().filter_map(|t| t.name.as_deref()).collect();
        let Some(index) = timeline
            .iter()
            .position(|t| t.name.as_deref() == Some(after.get_ref()))
        else {
            let help = if named.is_empty() {
                "no `[[timeline]]` event has a `name`: add `name = \"...\"` to the one it follows"
                    .to_owned()
            } else {
                choices_help(after.get_ref(), "events", &named)
            };
            d.error(
                Some(after.span()),
                format!("no timeline event named `{}`", after.get_ref()),
            )
            .label("unknown event")
            .help(help);
            return None;
        };
        return Some(Check::Converged {
            after: index,
            event: after.get_ref().clone(),
            within: within?,
        });
    }
    let Some(wname) = &e.workload else {
        d.error(Some(span), "an `[[expect]]` without a clause")
            .label("expects what?")
            .help(KINDS_HELP);
        return None;
    };
    let Some(workload) = workloads.iter().find(|w| w.name == *wname.get_ref()) else {
        // One that is declared had errors, reported.
        if fabric.is_some() && !declared.contains(wname.get_ref()) {
            let names: Vec<&str> = declared.iter().map(String::as_str).collect();
            d.error(
                Some(wname.span()),
                format!("no workload named `{}`", wname.get_ref()),
            )
            .label("unknown workload")
            .help(choices_help(wname.get_ref(), "workloads", &names));
        }
        return None;
    };
    let kind = workload.kind.name();
    if let Some(b) = &e.binomial {
        if kind != "udp" {
            d.error(
                Some(b.span()),
                format!(
                    "`binomial` checks a UDP workload's loss; `{}` is {kind}",
                    workload.name
                ),
            )
            .label("not a udp workload")
            .help("name a `kind = \"udp\"` workload");
            return None;
        }
        let p = unit::<LossProb>(d, &e.binomial, "binomial")?;
        let confidence = e.confidence.as_ref().map_or(0.99, |c| *c.get_ref());
        if !(0.5..1.0).contains(&confidence) {
            d.error(
                e.confidence.as_ref().map(Spanned::span),
                "`confidence` must be at least 0.5 and below 1",
            )
            .label("out of range")
            .help("e.g. `confidence = 0.99`");
            return None;
        }
        return Some(Check::Binomial {
            workload: workload.name.clone(),
            p: p.probability(),
            confidence,
        });
    }
    let keys = FigureKeys {
        figure: &e.figure,
        of: &e.of,
        min: &e.min,
        max: &e.max,
        within: &e.within,
        of_link: &e.of_link,
    };
    let (figure, of, bound) = figure_bound(d, &keys, span, WHAT, fabric, Some(kind))?;
    Some(Check::Figure {
        workload: workload.name.clone(),
        figure,
        of,
        bound,
    })
}

/// The keys that bound a workload's figure, wherever they are written
/// (`[[expect]]`, a lab's `[[task.check]]`).
pub(crate) struct FigureKeys<'a> {
    pub figure: &'a Option<Spanned<String>>,
    pub of: &'a Option<Spanned<String>>,
    pub min: &'a Option<Spanned<toml::Value>>,
    pub max: &'a Option<Spanned<toml::Value>>,
    pub within: &'a Option<Spanned<toml::Value>>,
    pub of_link: &'a Option<Spanned<String>>,
}

/// Reads a figure, which of its values (`of`) and its bound, for a
/// workload of `kind` (`None`: a workload only known when it runs, whose
/// figures are checked against its kind then). `table` names the table
/// the keys are in, `span` where it is.
pub(crate) fn figure_bound(
    d: &mut Diags<'_>,
    e: &FigureKeys<'_>,
    span: std::ops::Range<usize>,
    table: &str,
    fabric: Option<&Fabric>,
    kind: Option<&str>,
) -> Option<(Figure, Of, Bound)> {
    let Some(fig) = e.figure else {
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
    let of = match e.of {
        None => Of::Each,
        Some(o) => {
            let kw = Keyword {
                what: "aggregate",
                short: "aggregate",
                plural: "aggregates",
            };
            keyword(d, o.get_ref(), o.span(), &Of::ALL, kw)?
        }
    };
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
    let bound = if let Some(w) = e.within {
        if e.min.is_some() || e.max.is_some() {
            d.error(Some(w.span()), "`within` or `min`/`max`, not both")
                .label("and a bound")
                .help("`within = \"10%\"` with `of_link` is a bound around the link's rate");
            return None;
        }
        let share = unit::<LossProb>(d, e.within, "within")?.probability();
        let Some(l) = e.of_link else {
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
        if let Some(l) = e.of_link {
            d.error(Some(l.span()), "`of_link` is the reference of `within`")
                .label("without `within`")
                .help("add e.g. `within = \"10%\"`, or remove `of_link`");
            return None;
        }
        let (min, max) = (value(d, e.min, "min"), value(d, e.max, "max"));
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
        if let (Some(a), Some(b)) = (min, max)
            && a > b
        {
            d.error(
                e.max.as_ref().map(Spanned::span),
                "`max` is below `min`: nothing can pass",
            )
            .label("below min")
            .help("swap them");
            return None;
        }
        Bound { min, max }
    };
    Some((figure, of, bound))
}

/// The figures workloads of `kind` report.
fn figures_of(kind: &str) -> Vec<&'static str> {
    Figure::ALL
        .iter()
        .filter(|f| f.kinds().contains(&kind))
        .map(|f| f.name())
        .collect()
}
