//! `turbonet capture`: a link's frames, and the link engine's drops with
//! why.

use std::process::ExitCode;

use anyhow::Result;
use turbonet_lab::inspect;

use crate::cli::CaptureArgs;

/// `turbonet capture LINK`.
pub(crate) fn run(args: CaptureArgs) -> Result<ExitCode> {
    let CaptureArgs {
        link,
        direction,
        write,
        count,
        duration,
        snaplen,
        lab,
    } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    capture(
        &running,
        &turbonet_lab::capture::Options {
            link,
            direction,
            snaplen,
            count: count.unwrap_or(0),
            duration: duration.map(std::time::Duration::from_secs_f64),
        },
        write.as_deref(),
    )
}

/// `turbonet capture`: a line per frame, or pcapng to a file or standard
/// output; the summary on standard error (standard output may be the
/// capture). Exits 130 on Ctrl-C, as a shell would.
fn capture(
    running: &turbonet_lab::inspect::Running,
    options: &turbonet_lab::capture::Options,
    write: Option<&std::path::Path>,
) -> Result<ExitCode> {
    use std::io::Write;
    let to_stdout = write.is_some_and(|p| p.as_os_str() == "-");
    let pcap: Option<Box<dyn Write>> = match write {
        None => None,
        Some(_) if to_stdout => Some(Box::new(std::io::stdout())),
        Some(path) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| turbonet_lab::capture::output_error(path, &e))?,
        ))),
    };
    if !to_stdout {
        eprintln!(
            "capturing {} ({}){}; Ctrl-C stops",
            options.link,
            options.direction,
            write.map_or_else(String::new, |p| format!(" into {}", p.display()))
        );
    }
    let print = write.is_none();
    let summary = turbonet_lab::capture::capture(running, options, pcap, |f| {
        if print {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{:>10.6}  {} -> {}  {:>5}  {}{}",
                f.t,
                f.from,
                f.to,
                f.original_len,
                turbonet_lab::capture::describe(f.data),
                f.note
                    .as_ref()
                    .map_or_else(String::new, |n| format!("  [{n}]"))
            )?;
        }
        Ok(())
    })?;
    eprintln!("{}", summary.line());
    Ok(if summary.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
