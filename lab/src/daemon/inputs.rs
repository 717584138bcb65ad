//! The lab's input log (`inputs.jsonl`): every command the daemon's actor
//! ran, in order, with who asked and whether it succeeded. A restarted
//! daemon replays it to rebuild the state it carries on from; with the
//! scenario, it is a record from which the run can be replayed.

use std::fs;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::command::{Command, Source};
use crate::error::{Context, Result};
use crate::events::unix_now;
use crate::state::LabDir;

/// Where a lab's input log is.
pub fn path(dir: &LabDir) -> PathBuf {
    dir.path().join("inputs.jsonl")
}

/// One command, as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Logged {
    /// Its position in the log, from 0.
    pub seq: u64,
    /// When it ran (Unix seconds).
    pub unix: f64,
    /// Who asked.
    pub source: Source,
    /// What.
    #[serde(flatten)]
    pub command: Command,
    /// Whether it succeeded (a refused command changed nothing).
    pub ok: bool,
}

/// The input log, open for appending.
#[derive(Debug)]
pub struct InputLog {
    file: Option<fs::File>,
    next: u64,
}

impl InputLog {
    /// Opens the log of the lab in `dir`, continuing after `existing`
    /// entries.
    pub fn open(dir: &LabDir, existing: usize) -> Result<InputLog> {
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path(dir))
            .with_context(|| format!("opening {}", path(dir).display()))?;
        Ok(InputLog {
            file: Some(file),
            next: existing as u64,
        })
    }

    /// A log that keeps nothing (tests).
    pub fn discard() -> InputLog {
        InputLog {
            file: None,
            next: 0,
        }
    }

    /// Appends one command.
    pub fn append(&mut self, source: Source, command: &Command, ok: bool) {
        let entry = Logged {
            seq: self.next,
            unix: unix_now(),
            source,
            command: command.clone(),
            ok,
        };
        self.next += 1;
        if let (Some(file), Ok(line)) = (&mut self.file, serde_json::to_string(&entry))
            && let Err(e) = writeln!(file, "{line}")
        {
            tracing::warn!("writing the input log: {e}");
        }
    }
}

/// Every command of the lab's input log (none before the first command).
pub fn read(dir: &LabDir) -> Result<Vec<Logged>> {
    match fs::File::open(path(dir)) {
        Ok(file) => std::io::BufReader::new(file)
            .lines()
            .map(|line| Ok(serde_json::from_str(&line?)?))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}
