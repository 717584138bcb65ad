//! `turbonet run`: an experiment from up to down, with its reports.

use std::process::ExitCode;

use anyhow::Result;

use super::print_json;
use crate::cli::RunArgs;
use crate::progress::Terminal;

/// `turbonet run`: 0 when every expectation holds, 1 when one does not.
pub(crate) fn run(args: &RunArgs) -> Result<ExitCode> {
    let out = args.out.clone().unwrap_or_else(|| {
        let stem = args
            .file
            .file_stem()
            .map_or("experiment".into(), |s| s.to_string_lossy().into_owned());
        std::path::Path::new("reports").join(stem)
    });
    let options = turbonet_experiment::Options {
        file: args.file.clone(),
        out,
        keep: args.keep,
        timeout: std::time::Duration::from_secs_f64(args.timeout.max(0.0)),
    };
    if args.repeat > 1 {
        let repeated = turbonet_experiment::repeat(
            &options,
            args.repeat as usize,
            &Terminal::new(args.quiet),
        )?;
        if args.json {
            print_json(&repeated)?;
        } else {
            print!("{}", turbonet_experiment::repeat_summary(&repeated));
            println!("reports: {}", options.out.display());
        }
        return Ok(if repeated.passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let outcome = turbonet_experiment::run(&options, &Terminal::new(args.quiet))?;
    if args.json {
        print_json(&outcome.report)?;
    } else {
        print!("{}", turbonet_experiment::summary(&outcome.report));
        println!("reports: {}", outcome.dir.display());
    }
    Ok(if outcome.report.interrupted {
        // As a shell reports a command that SIGINT ended.
        ExitCode::from(130)
    } else if outcome.report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
