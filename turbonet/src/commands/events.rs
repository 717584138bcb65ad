//! `turbonet events`: what the lab did and saw, on one clock.

use anyhow::Result;
use turbonet_lab::events::LoggedEvent;
use turbonet_lab::inspect;

use super::print_json;
use crate::cli::EventsArgs;
use crate::render::table;

/// `turbonet events [--follow]`.
pub(crate) fn run(args: EventsArgs) -> Result<()> {
    let EventsArgs { lab, follow, json } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    if follow {
        // One line per event as it happens (JSON Lines with --json).
        let mut failed = None;
        inspect::events(&running, true, |e| match event_line(&e, json) {
            Ok(()) => true,
            Err(err) => {
                failed = Some(err);
                false
            }
        })?;
        if let Some(err) = failed {
            return Err(err);
        }
    } else {
        let mut all = Vec::new();
        inspect::events(&running, false, |e| {
            all.push(e);
            true
        })?;
        events(&all, json)?;
    }
    Ok(())
}

/// The events so far: a table, or with `as_json` JSON.
fn events(events: &[LoggedEvent], as_json: bool) -> Result<()> {
    if as_json {
        print_json(&events)
    } else if events.is_empty() {
        println!("no events yet");
        Ok(())
    } else {
        println!(
            "{}",
            table(
                &["t (s)", "source", "event", "result"],
                events.iter().map(|e| vec![
                    format!("{:.3}", e.t),
                    e.source.clone(),
                    e.event.clone(),
                    e.result.clone(),
                ]),
                &[0],
            )
        );
        Ok(())
    }
}

/// One event of `turbonet events --follow`, as it happens: a line of
/// text, or of JSON (JSON Lines) with `--json`.
fn event_line(e: &LoggedEvent, as_json: bool) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if as_json {
        serde_json::to_writer(&mut out, e)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{:>10.3}  {:<8}  {}  {}",
            e.t, e.source, e.event, e.result
        )?;
    }
    out.flush()?;
    Ok(())
}
