//! `turbonet workload start|stop|show`: a running lab's workloads.

use anyhow::Result;
use turbonet_lab::inspect;

use super::print_json;
use crate::cli::WorkloadCommand;
use crate::students;

/// `turbonet workload start|stop|show`.
pub(crate) fn run(command: WorkloadCommand) -> Result<()> {
    use WorkloadCommand as W;
    match command {
        W::Start { what, lab } => {
            // A member's file is only the one their client opened and
            // passed along, read from that descriptor: no path of theirs
            // is opened here, as root.
            let file = match students::passed_file(&what) {
                Some(passed) => passed?,
                None => {
                    let path = std::path::Path::new(&what);
                    let looks_like_a_file = what.contains('/') || what.ends_with(".toml");
                    if looks_like_a_file && !path.is_file() {
                        return Err(turbonet_lab::Error::Invalid(format!(
                            "no file {what} (give a file of [[workload]] tables, or the name of a scenario workload)"
                        ))
                        .into());
                    }
                    match path.is_file() {
                        true => Some((what.clone(), std::fs::read_to_string(path)?)),
                        false => None,
                    }
                }
            };
            let mut client = lab.client()?;
            let message = if let Some((origin, text)) = file {
                let running = inspect::running(lab.lab.as_deref())?;
                // Located errors here, before the daemon reads it too.
                let parsed = turbonet_topo::parse_workloads(&origin, &text, &running.lab).map_err(
                    |errors| turbonet_lab::Error::Scenario {
                        origin: origin.clone(),
                        errors: Box::new(errors),
                    },
                )?;
                // The daemon runs a command workload as root.
                students::admit_workloads(&parsed)?;
                client.start_workload(None, &text, &origin)?
            } else {
                client.start_workload(Some(&what), "", "")?
            };
            println!("{message}");
        }
        W::Stop { name, lab } => println!("{}", lab.client()?.stop_workload(&name)?),
        W::Show { name, lab, json } => {
            let mut reports = lab.client()?.workloads()?;
            if let Some(name) = &name {
                reports.retain(|r| r.name == *name);
                if reports.is_empty() {
                    return Err(turbonet_lab::Error::NotFound(format!(
                        "no workload {name} was started"
                    ))
                    .into());
                }
            }
            if json {
                print_json(&reports)?;
            } else if reports.is_empty() {
                println!("no workload was started");
            } else {
                println!("{}", turbonet_lab::workload::table(&reports));
                for line in turbonet_lab::workload::warning_lines(&reports) {
                    println!("{line}");
                }
            }
        }
    }
    Ok(())
}
