//! `turbonet status`: the labs that are up.

use anyhow::Result;
use turbonet_lab::inspect::{self, LabStatus};

use crate::cli::StatusArgs;
use crate::render::{count, table};
use crate::students;

/// `turbonet status`: every lab up (a member's own only).
pub(crate) fn run(args: StatusArgs) -> Result<()> {
    if let Some(lab) = &args.ready {
        inspect::ready(lab)?;
        println!("lab {lab} is ready here");
        return Ok(());
    }
    let mut labs = inspect::status()?;
    students::keep_own(&mut labs);
    print(&labs, args.json)
}

/// Prints the labs: a table, or with `json` JSON.
fn print(rows: &[LabStatus], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        println!("no lab is up");
    } else {
        // Labs over several machines say which part runs here.
        let spread = rows.iter().any(|r| r.part.is_some());
        let mut header = vec!["lab", "phase", "nodes", "externals", "up in", "daemon"];
        if spread {
            header.push("part");
        }
        header.push("scenario");
        println!(
            "{}",
            table(
                &header,
                rows.iter().map(|r| {
                    let mut row = vec![
                        r.lab.clone(),
                        r.phase.clone(),
                        if r.namespaces_present == r.namespaces {
                            count(r.namespaces)
                        } else {
                            format!("{}/{} present", r.namespaces_present, r.namespaces)
                        },
                        count(r.externals),
                        r.up_seconds
                            .map(|s| format!("{s:.2} s"))
                            .unwrap_or_default(),
                        r.daemon.clone(),
                    ];
                    if spread {
                        row.push(r.part.clone().unwrap_or_else(|| "whole".to_owned()));
                    }
                    row.push(r.scenario.clone());
                    row
                }),
                &[2, 3, 4],
            )
        );
    }
    Ok(())
}
