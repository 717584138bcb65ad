//! `[[expect]]`: what a run must show, checked by `turbonet run` once the
//! workloads end. One clause per table: every host reaching every other
//! (`reachable = true`), a workload's figure within bounds (`workload`,
//! `figure`, `min`/`max` or `within` a link's rate), a UDP workload's loss
//! consistent with a probability (`binomial`), or BGP converging within a
//! time of a timeline event (`converged`, `after`).

use toml::Spanned;
use toml::de::DeValue;

use super::check::{Context, EXPECT_KEYS, RawCheck, Whose, figure_check, workload_named};
use super::reader::{Keys, array_items, read_table, unit};
use crate::check::{After, Check};
use crate::diag::{Diags, choices_help};
use crate::experiment::Expect;
use crate::units::{Delay, LossProb};

const WHAT: &str = "`[[expect]]`";

const KINDS_HELP: &str = "an expectation is one of: `reachable = true`; `workload` with `figure` \
                          and `min`, `max` or `within`; `workload` with `binomial`; `converged` \
                          with `after`";

/// Reads `[[expect]]` (`v`, if present) against the workloads and timeline
/// read before.
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    cx: &Context<'_>,
) -> Vec<Expect> {
    let Some(v) = v else { return Vec::new() };
    let Some(items) = array_items(d, v, "`expect`", "[[expect]]") else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let s = read_table::<RawCheck>(d, item, WHAT, Keys::new(EXPECT_KEYS))?;
            let before = d.count();
            let check = clause(d, &s.raw, s.span.clone(), cx);
            let check = check.filter(|_| d.count() == before)?;
            let name = s
                .raw
                .name
                .as_ref()
                .map_or_else(|| check.describe(|_| ""), |n| n.get_ref().clone());
            Some(Expect { name, check })
        })
        .collect()
}

/// The check one `[[expect]]` table makes.
fn clause(
    d: &mut Diags<'_>,
    e: &RawCheck,
    span: std::ops::Range<usize>,
    cx: &Context<'_>,
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
        let named: Vec<&str> = cx
            .timeline
            .iter()
            .filter_map(|t| t.name.as_deref())
            .collect();
        let Some(index) = cx
            .timeline
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
            within: within?,
            after: Some(After {
                index,
                event: after.get_ref().clone(),
            }),
        });
    }
    let Some(wname) = &e.workload else {
        d.error(Some(span), "an `[[expect]]` without a clause")
            .label("expects what?")
            .help(KINDS_HELP);
        return None;
    };
    let workload = workload_named(d, wname, cx, "")?;
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
    figure_check(d, e, span, WHAT, cx.fabric, Whose::Declared(workload))
}
