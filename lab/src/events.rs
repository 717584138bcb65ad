//! What happened in a lab, on one clock: every change the daemon made or
//! saw (a `fail` from a client, a timeline step, a flap, a BGP session going
//! down, the daemon restarting), in order, with its time since the fabric
//! was ready. Kept in the lab's `events.jsonl` (so a restarted daemon
//! continues the sequence) and streamed to whoever subscribes (the control
//! API's `Events` call).

use std::fs;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::error::Result;
use crate::state::LabDir;

/// Where the daemon logs every event, one JSON object a line.
pub fn events_path(dir: &LabDir) -> PathBuf {
    dir.path().join("events.jsonl")
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedEvent {
    /// Seconds since the fabric was ready.
    pub t: f64,
    /// Unix time, seconds.
    pub unix: f64,
    /// Who: `api`, `timeline`, `flap`, `bgp`, `daemon`.
    pub source: String,
    /// What kind (`fail`, `link-set`, `session-down`, ...).
    #[serde(default)]
    pub kind: String,
    /// What happened (`fail link edge0-0--agg0-0`).
    pub event: String,
    /// `ok`, or `error: ...`.
    pub result: String,
}

/// The time now, as Unix seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[derive(Debug)]
struct Inner {
    file: fs::File,
    /// Every event so far (a subscriber gets them first).
    log: Vec<LoggedEvent>,
}

/// A lab's events: appended to its log and sent to subscribers. Cloning
/// shares it; it may be written from any thread.
#[derive(Debug, Clone)]
pub struct Events {
    inner: Arc<Mutex<Inner>>,
    bus: broadcast::Sender<(u64, LoggedEvent)>,
    /// When the fabric was ready (Unix seconds): the origin of `t`.
    ready: f64,
}

impl Events {
    /// Opens the log of the lab in `dir` (continuing the events already in
    /// it); the fabric was ready at Unix time `ready`.
    pub fn open(dir: &LabDir, ready: f64) -> Result<Events> {
        let path = events_path(dir);
        let log = match fs::File::open(&path) {
            Ok(f) => std::io::BufReader::new(f)
                .lines()
                .map_while(std::result::Result::ok)
                .filter_map(|l| serde_json::from_str(&l).ok())
                .collect(),
            Err(_) => Vec::new(),
        };
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let (bus, _) = broadcast::channel(4096);
        Ok(Events {
            inner: Arc::new(Mutex::new(Inner { file, log })),
            bus,
            ready,
        })
    }

    /// Seconds since the fabric was ready.
    pub fn now(&self) -> f64 {
        unix_now() - self.ready
    }

    /// When the fabric was ready (Unix seconds).
    pub fn ready(&self) -> f64 {
        self.ready
    }

    /// Records one event; `result` is `Ok(())` or what went wrong.
    pub fn write(&self, source: &str, kind: &str, event: &str, result: Result<(), &str>) {
        let unix = unix_now();
        let entry = LoggedEvent {
            t: unix - self.ready,
            unix,
            source: source.to_owned(),
            kind: kind.to_owned(),
            event: event.to_owned(),
            result: match result {
                Ok(()) => "ok".to_owned(),
                Err(e) => format!("error: {e}"),
            },
        };
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if let Ok(line) = serde_json::to_string(&entry) {
            let _ = writeln!(inner.file, "{line}");
        }
        let seq = inner.log.len() as u64;
        inner.log.push(entry.clone());
        // Sent while the lock is held, so a subscriber sees every event
        // exactly once: in its backlog or on the bus.
        let _ = self.bus.send((seq, entry));
    }

    /// Every event so far, and a receiver of the ones to come (none lost
    /// or seen twice between the two).
    pub fn subscribe(&self) -> (Vec<LoggedEvent>, broadcast::Receiver<(u64, LoggedEvent)>) {
        let inner = self
            .inner
            .lock()
            .expect("the event log's lock is never poisoned");
        (inner.log.clone(), self.bus.subscribe())
    }

    /// Every event so far.
    pub fn all(&self) -> Vec<LoggedEvent> {
        self.subscribe().0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_get_the_backlog_then_each_new_event_once_and_a_reopen_continues() {
        let root = std::env::temp_dir().join(format!("tn-events-{}", std::process::id()));
        let dir = LabDir::new(&root, "e");
        dir.claim().unwrap();
        let events = Events::open(&dir, unix_now()).unwrap();
        events.write("api", "fail", "fail link a--b", Ok(()));
        let (backlog, mut rx) = events.subscribe();
        assert_eq!(backlog.len(), 1);
        events.write(
            "timeline",
            "restore",
            "restore link a--b",
            Err("no such link"),
        );
        let (seq, e) = rx.try_recv().unwrap();
        assert_eq!(seq, 1);
        assert_eq!(e.result, "error: no such link");
        assert!(rx.try_recv().is_err());
        drop(events);
        let again = Events::open(&dir, unix_now()).unwrap();
        assert_eq!(again.all().len(), 2);
        again.write("daemon", "daemon-restarted", "daemon restarted", Ok(()));
        assert_eq!(again.all()[2].kind, "daemon-restarted");
        dir.remove().unwrap();
        let _ = std::fs::remove_dir_all(&root);
    }
}
