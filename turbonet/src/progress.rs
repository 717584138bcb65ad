//! Progress of long commands on stderr: a line per phase with its time,
//! and on a terminal the phase under way, updated in place.

use std::io::{self, IsTerminal, Write};

use turbonet_lab::progress::Progress;
use turbonet_lab::state::Timing;

/// Progress lines on stderr (none when quiet; notes always).
#[derive(Debug)]
pub(crate) struct Terminal {
    quiet: bool,
    live: bool,
}

impl Terminal {
    /// Prints progress unless `quiet`.
    pub(crate) fn new(quiet: bool) -> Self {
        Terminal {
            quiet,
            live: io::stderr().is_terminal(),
        }
    }
}

impl Progress for Terminal {
    fn start(&self, phase: &str) {
        if !self.quiet && self.live {
            eprint!("  {phase:<12} ...");
            let _ = io::stderr().flush();
        }
    }

    fn update(&self, phase: &str, detail: &str) {
        if !self.quiet && self.live {
            eprint!("\r\x1b[K  {phase:<12} ... {detail}");
            let _ = io::stderr().flush();
        }
    }

    fn done(&self, timing: &Timing) {
        if !self.quiet {
            let clear = if self.live { "\r\x1b[K" } else { "" };
            eprintln!(
                "{clear}  {:<12} {:>7.2} s  {}",
                timing.phase, timing.seconds, timing.detail
            );
        }
    }

    fn note(&self, text: &str) {
        if !self.quiet {
            let clear = if self.live { "\r\x1b[K" } else { "" };
            eprintln!("{clear}note: {text}");
        }
    }
}
