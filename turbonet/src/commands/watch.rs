//! `turbonet watch`: the links live, rates, frames, drops and queues.

use anyhow::Result;
use turbonet_lab::inspect;

use crate::cli::WatchArgs;
use crate::render::table;

/// `turbonet watch`.
pub(crate) fn run(args: WatchArgs) -> Result<()> {
    let WatchArgs {
        lab,
        interval,
        top,
        all,
        count,
        json,
    } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    let options = WatchOptions { top, all, json };
    watch(&running, interval, count, &options)
}

/// What `turbonet watch` shows.
#[derive(Debug, Clone, Copy)]
struct WatchOptions {
    /// At most this many directions.
    top: usize,
    /// Idle directions too.
    all: bool,
    /// JSON Lines instead of tables.
    json: bool,
}

/// `turbonet watch`: a reading every `interval` seconds, `count` times (or
/// until Ctrl-C); on a terminal each table replaces the one before.
fn watch(
    running: &turbonet_lab::inspect::Running,
    interval: f64,
    count: Option<u64>,
    options: &WatchOptions,
) -> Result<()> {
    use std::io::{IsTerminal, Write};
    let mut watcher = turbonet_lab::watch::Watcher::new(running)?;
    let in_place = !options.json && std::io::stdout().is_terminal();
    let period = std::time::Duration::from_secs_f64(interval);
    // The first reading only starts the count.
    watcher.read()?;
    let mut shown = 0u64;
    while count.is_none_or(|c| shown < c) {
        std::thread::sleep(period);
        let Some(frame) = watcher.read()? else {
            continue;
        };
        shown += 1;
        let mut out = std::io::stdout().lock();
        if options.json {
            serde_json::to_writer(&mut out, &frame)?;
            writeln!(out)?;
        } else {
            if in_place {
                // Home, and clear the screen: the new table replaces the old.
                write!(out, "\x1b[H\x1b[2J")?;
            } else if shown > 1 {
                writeln!(out)?;
            }
            writeln!(out, "{}", watch_table(&frame, options))?;
        }
        out.flush()?;
    }
    Ok(())
}

/// One reading as a table, busiest directions first.
fn watch_table(frame: &turbonet_lab::watch::Frame, options: &WatchOptions) -> String {
    use turbonet_topo::experiment::FigureUnit;
    let shown: Vec<&turbonet_lab::watch::DirectionRate> = frame
        .directions
        .iter()
        .filter(|d| options.all || d.is_active())
        .take(options.top)
        .collect();
    let per_second = |v: f64| {
        if v == 0.0 {
            String::new()
        } else if v >= 100.0 {
            format!("{v:.0}/s")
        } else {
            format!("{v:.1}/s")
        }
    };
    let mut text = format!(
        "lab {} at {:.1} s: {} links, {} down; rates over the last {:.1} s, busiest first",
        frame.lab, frame.t, frame.links, frame.down, frame.interval
    );
    if shown.is_empty() {
        text.push_str("\nno traffic (--all shows every direction)");
        return text;
    }
    let hidden = frame
        .directions
        .iter()
        .filter(|d| options.all || d.is_active())
        .count()
        - shown.len();
    text.push('\n');
    text.push_str(&table(
        &[
            "link",
            "direction",
            "state",
            "rate",
            "of link",
            "frames",
            "loss",
            "queue drops",
            "ecn",
            "queue",
        ],
        shown.iter().map(|d| {
            vec![
                d.link.clone(),
                format!("{} -> {}", d.from, d.to),
                if d.down { "DOWN" } else { "up" }.to_owned(),
                if d.bits_per_second > 0.0 {
                    FigureUnit::Rate.human(d.bits_per_second)
                } else {
                    String::new()
                },
                d.utilisation
                    .filter(|_| d.bits_per_second > 0.0)
                    .map(|u| format!("{:.0}%", u * 100.0))
                    .unwrap_or_default(),
                per_second(d.frames_per_second),
                per_second(d.loss_per_second),
                per_second(d.queue_drops_per_second),
                per_second(d.ecn_per_second),
                if d.queue_packets > 0 {
                    format!("{} p", d.queue_packets)
                } else {
                    String::new()
                },
            ]
        }),
        &[3, 4, 5, 6, 7, 8, 9],
    ));
    if hidden > 0 {
        text.push_str(&format!("\n{hidden} more (--top N shows more)"));
    }
    text
}
