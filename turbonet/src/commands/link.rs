//! `turbonet link show|set|reset`: links' parameters and counters, and
//! changes to them at run time.

use anyhow::Result;
use turbonet_lab::inspect::{self, LinkShow};
use turbonet_topo::LinkParams;

use super::print_json;
use crate::cli::LinkCommand;
use crate::render::{count, table};

/// `turbonet link ...`.
pub(crate) fn run(command: LinkCommand) -> Result<()> {
    match command {
        LinkCommand::Show { link, lab, json } => {
            let running = inspect::running(lab.lab.as_deref())?;
            link_show(
                &turbonet_lab::parts::link_show(&running, link.as_deref())?,
                json,
            )?;
            if !json && running.lab.fabric.rate_scale > 1 {
                println!(
                    "rates, queues and ECN thresholds are in force: the scenario's divided by \
                     {} ([lab] rate_scale); `link set` takes the scenario's units",
                    running.lab.fabric.rate_scale
                );
            }
        }
        LinkCommand::Set { link, params, lab } => {
            let patch = params.patch();
            if patch.is_empty() {
                return Err(turbonet_lab::Error::Invalid(
                    "nothing to set; give at least one parameter, e.g. --delay 5ms".to_owned(),
                )
                .into());
            }
            let running = inspect::running(lab.lab.as_deref())?;
            println!(
                "{}",
                turbonet_lab::parts::set_link(&running, &link, Some(&patch))?
            );
        }
        LinkCommand::Reset { link, lab } => {
            let running = inspect::running(lab.lab.as_deref())?;
            println!("{}", turbonet_lab::parts::set_link(&running, &link, None)?);
        }
    }
    Ok(())
}

/// `link show [LINK]`.
fn link_show(rows: &[LinkShow], as_json: bool) -> Result<()> {
    if as_json {
        return print_json(&rows);
    }
    // Every parameter set, as `key=value`; one `link set` changed is
    // marked `*`.
    fn parameters(now: &LinkParams, scenario: &LinkParams) -> String {
        let before = scenario.pairs();
        let cells: Vec<String> = now
            .pairs()
            .into_iter()
            .map(|(k, v)| {
                let same = before.iter().any(|(bk, bv)| *bk == k && *bv == v);
                format!("{k}={v}{}", if same { "" } else { "*" })
            })
            .collect();
        if cells.is_empty() {
            "-".to_owned()
        } else {
            cells.join(" ")
        }
    }
    let mut changed = false;
    println!(
        "{}",
        table(
            &["link", "state", "engine", "why", "parameters"],
            rows.iter().map(|r| {
                changed |= r.params != r.scenario;
                vec![
                    r.link.clone(),
                    if r.down { "DOWN" } else { "up" }.to_owned(),
                    r.engine.clone(),
                    r.why.clone(),
                    parameters(&r.params, &r.scenario),
                ]
            }),
            &[],
        )
    );
    if changed {
        println!("* set at run time; `turbonet link reset LINK` restores the scenario's");
    }
    let directions: Vec<Vec<String>> = rows
        .iter()
        .flat_map(|r| {
            r.directions.iter().map(move |d| {
                let c = &d.counters;
                vec![
                    r.link.clone(),
                    format!("{} -> {}", d.from, d.to),
                    count(c.rx_packets as usize),
                    count(c.tx_packets as usize),
                    count(c.tx_bytes as usize),
                    count(c.dropped_loss as usize),
                    count(c.dropped_queue as usize),
                    count(c.corrupted as usize),
                    count(c.duplicated as usize),
                    count(c.ecn_marked as usize),
                    count(c.queue_packets as usize),
                ]
            })
        })
        .collect();
    if !directions.is_empty() {
        println!(
            "{}",
            table(
                &[
                    "link",
                    "direction",
                    "in",
                    "out",
                    "out bytes",
                    "lost",
                    "queue drops",
                    "corrupted",
                    "duplicated",
                    "ecn",
                    "queued",
                ],
                directions,
                &[2, 3, 4, 5, 6, 7, 8, 9, 10],
            )
        );
    }
    let filters: Vec<Vec<String>> = rows
        .iter()
        .flat_map(|r| &r.filters)
        .map(|f| {
            vec![
                f.name.clone(),
                f.link.clone(),
                format!("{} {}", f.node, f.port),
                f.hook.clone(),
                f.kind.clone(),
                count(f.seen as usize),
                count(f.passed() as usize),
                count(f.dropped as usize),
            ]
        })
        .collect();
    if !filters.is_empty() {
        println!(
            "{}",
            table(
                &[
                    "filter", "link", "at", "hook", "kind", "seen", "passed", "dropped"
                ],
                filters,
                &[5, 6, 7],
            )
        );
    }
    let mut short = 0;
    for r in rows {
        for d in &r.directions {
            if let Some(why) = d.shortfall.describe(d.counters.tx_packets) {
                println!("warning: {} {} -> {}: {why}", r.link, d.from, d.to);
                short += 1;
            }
        }
    }
    if short > 0 {
        println!(
            "warning: {}",
            turbonet_lab::dataplane::plane::Shortfall::CONSEQUENCE
        );
    }
    Ok(())
}
