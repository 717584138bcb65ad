//! `turbonet check`: does every host reach every other host.

use std::collections::HashSet;
use std::process::ExitCode;

use anyhow::Result;
use turbonet_lab::{check, inspect};

use super::print_json;
use crate::cli::CheckArgs;
use crate::render::{count, table};

/// `turbonet check`: exit 1 when a probe went unanswered.
pub(crate) fn run(args: CheckArgs) -> Result<ExitCode> {
    let CheckArgs {
        lab,
        timeout,
        sample,
        json,
    } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    let report = check::check_lab(&running, timeout, sample)?;
    print(&report, json)?;
    if !report.failures.is_empty() || !report.missing.is_empty() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The verdict and the first unanswered probes, or with `as_json` the
/// whole report.
fn print(report: &check::Report, as_json: bool) -> Result<()> {
    if as_json {
        return print_json(report);
    }

    let verdict = if report.failures.is_empty() && report.missing.is_empty() {
        "ok"
    } else {
        "FAILED"
    };
    println!(
        "check {verdict}: {}/{} probes answered {} {} hosts of lab {}{}{} in {:.2} s",
        count(report.reachable),
        count(report.probes),
        if report.part.as_ref().is_some_and(|p| !p.starts_with("all")) {
            "from"
        } else {
            "between"
        },
        count(report.hosts),
        report.lab,
        report.part.as_ref().map_or(String::new(), |p| {
            if p.starts_with("all") {
                format!(" (from {p})")
            } else {
                format!(" ({p}: its hosts, to every host)")
            }
        }),
        report.sample.map_or(String::new(), |k| format!(
            " ({k} sampled behind every ToR, edge or leaf)"
        )),
        report.seconds
    );
    for missing in &report.missing {
        println!("not checked from {missing}");
    }
    if !report.failures.is_empty() {
        let shown = report.failures.iter().take(20);
        println!(
            "{}",
            table(
                &["from", "to", "address"],
                shown.map(|f| vec![f.from.clone(), f.to.clone(), f.address.to_string()]),
                &[],
            )
        );
        if report.failures.len() > 20 {
            println!(
                "... and {} more (--json lists all)",
                report.failures.len() - 20
            );
        }
        let unreachable: HashSet<&str> = report.failures.iter().map(|f| f.to.as_str()).collect();
        println!(
            "{} hosts could not be reached from somewhere",
            unreachable.len()
        );
    }
    Ok(())
}
