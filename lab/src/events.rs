//! What happened in a lab, on one clock: every change turbonet made or
//! observed, as the daemon logs it.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::state::LabDir;

/// Where the daemon logs every event it executes, one JSON object a line.
pub fn events_path(dir: &LabDir) -> PathBuf {
    dir.path().join("events.jsonl")
}

/// One executed event, as `turbonet events` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoggedEvent {
    /// Seconds since the fabric was ready.
    pub t: f64,
    /// Unix time, seconds.
    pub unix: f64,
    /// `cli` or `timeline`.
    pub source: String,
    /// What happened (`fail link edge0-0--agg0-0`).
    pub event: String,
    /// `ok`, or the error.
    pub result: String,
}

/// The lab's event log (`events.jsonl`): what the daemon executed and what
/// the routing agents saw, relative to the moment the fabric was ready.
#[derive(Debug, Clone)]
pub struct EventLog {
    file: Arc<Mutex<fs::File>>,
    ready: Instant,
}

impl EventLog {
    /// Opens the log; the fabric is ready now.
    pub fn open(dir: &LabDir) -> Result<EventLog> {
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(events_path(dir))?;
        Ok(EventLog {
            file: Arc::new(Mutex::new(file)),
            ready: Instant::now(),
        })
    }

    /// When the fabric was ready: the origin of event times and of the
    /// timeline.
    pub fn ready(&self) -> Instant {
        self.ready
    }

    /// Logs one event; `error` is `None` when it succeeded.
    pub fn write(&self, source: &str, event: &str, error: Option<&str>) {
        let entry = LoggedEvent {
            t: self.ready.elapsed().as_secs_f64(),
            unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            source: source.to_owned(),
            event: event.to_owned(),
            result: match error {
                None => "ok".to_owned(),
                Some(e) => format!("error: {e}"),
            },
        };
        if let (Ok(mut file), Ok(line)) = (self.file.lock(), serde_json::to_string(&entry)) {
            let _ = writeln!(file, "{line}");
        }
    }
}
