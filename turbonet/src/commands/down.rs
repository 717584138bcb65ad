//! `turbonet down` and `turbonet clean`: remove what labs created.

use std::process::ExitCode;

use anyhow::Result;
use turbonet_lab::down;

use crate::cli::DownArgs;

/// `turbonet down [LAB]`.
pub(crate) fn run(args: DownArgs) -> Result<()> {
    print_down(down::down(args.lab.as_deref())?);
    Ok(())
}

/// `turbonet clean`: every lab's leftovers; exit 1 when one could not be
/// removed.
pub(crate) fn clean() -> Result<ExitCode> {
    let outcomes = down::clean()?;
    if outcomes.is_empty() {
        println!("nothing to clean");
    }
    let mut failed = false;
    for (lab, outcome) in outcomes {
        match outcome {
            Ok(down::Down::Removed {
                namespaces,
                processes,
                seconds,
                ..
            }) => println!("{}", removed(&lab, namespaces, processes, seconds)),
            Ok(down::Down::EmptyDirectory(_)) => {
                println!("lab {lab}: removed an empty lab directory");
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("error: {lab}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `down` (and `lab stop`) did.
pub(crate) fn print_down(outcome: down::Down) {
    match outcome {
        down::Down::NothingUp => println!("no lab is up"),
        down::Down::NotUp(lab) => println!("lab {lab} is not up"),
        down::Down::EmptyDirectory(lab) => {
            println!("lab {lab}: removed an empty lab directory");
        }
        down::Down::Removed {
            lab,
            namespaces,
            processes,
            seconds,
        } => println!("{}", removed(&lab, namespaces, processes, seconds)),
    }
}

/// What `down` says of a lab it removed.
fn removed(lab: &str, namespaces: usize, processes: usize, seconds: f64) -> String {
    let stopped = match processes {
        0 => String::new(),
        1 => ", 1 process still running in them stopped,".to_owned(),
        n => format!(", {n} processes still running in them stopped,"),
    };
    format!("lab {lab} is down: {namespaces} namespaces removed{stopped} in {seconds:.2} s")
}
