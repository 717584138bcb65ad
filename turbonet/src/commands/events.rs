//! `turbonet events`: what the lab did and saw, on one clock.

use anyhow::Result;
use turbonet_lab::events::LoggedEvent;
use turbonet_lab::inspect;

use super::print_json;
use crate::cli::EventsArgs;
use crate::render::prose_table;

/// `turbonet events [--follow]`.
pub(crate) fn run(args: EventsArgs) -> Result<()> {
    let EventsArgs { lab, follow, json } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    if follow {
        // One line per event as it happens (JSON Lines with --json).
        let mut failed = None;
        turbonet_lab::parts::events(&running, true, |e| match event_line(&e, json) {
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
        turbonet_lab::parts::events(&running, false, |e| {
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
        // A lab over several machines says where each event happened.
        let spread = events.iter().any(|e| e.machine.is_some());
        let header: &[&str] = if spread {
            &["t (s)", "machine", "source", "event", "result"]
        } else {
            &["t (s)", "source", "event", "result"]
        };
        let event = header.len() - 2;
        println!(
            "{}",
            prose_table(
                header,
                events.iter().map(|e| {
                    let mut row = vec![format!("{:.3}", e.t)];
                    row.extend(e.machine.map(|m| m.to_string()));
                    row.extend([e.source.clone(), e.event.clone(), e.result.clone()]);
                    row
                }),
                if spread { &[0, 1] } else { &[0] },
                &[event],
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
        let machine = e.machine.map(|m| format!("m{m}  ")).unwrap_or_default();
        writeln!(
            out,
            "{:>10.3}  {machine}{:<8}  {}  {}",
            e.t, e.source, e.event, e.result
        )?;
    }
    out.flush()?;
    Ok(())
}
