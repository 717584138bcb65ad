//! What happened in a lab, on one clock: every change the daemon made or
//! saw (a `fail` from a client, a timeline step, a flap, a BGP session going
//! down, the daemon restarting), in order, with its time since the fabric
//! was ready. Kept in the lab's `events.jsonl` (so a restarted daemon
//! continues the sequence) and streamed to whoever subscribes (the control
//! API's `Events` call).

use std::collections::BTreeMap;
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
    /// Who: `api`, `timeline`, `flap`, `bgp`, `kernel`, `engine`,
    /// `workload`, `daemon`.
    pub source: String,
    /// What kind (`fail`, `link-set`, `session-down`, `route-change`, ...).
    #[serde(default)]
    pub kind: String,
    /// What happened (`fail link edge0-0--agg0-0`).
    pub event: String,
    /// `ok`, or `error: ...`.
    pub result: String,
    /// What it is about, field by field (docs/events.md).
    #[serde(flatten)]
    pub about: About,
}

/// What an event is about: the fields a monitor matches its detections
/// against. Those that do not apply are left out of the JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct About {
    /// A node: the switch whose routes or sessions changed, a failed node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A link (`a--b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// A link's direction: frames from this node...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// ... to this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// A BGP session's peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// A workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Why: a drop's cause (`loss`, `queue`), a session's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// A count (frames dropped in a burst) or a queue's depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// The threshold a queue's depth crossed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
    /// The unit of `value` and `threshold` (`frames`, `packets`, `bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// When what this event ends began (a drop burst), on the lab's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<f64>,
    /// A switch's routes that changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteChange>,
}

impl About {
    /// About a node.
    pub fn node(name: impl Into<String>) -> About {
        About {
            node: Some(name.into()),
            ..About::default()
        }
    }

    /// About a link.
    pub fn link(name: impl Into<String>) -> About {
        About {
            link: Some(name.into()),
            ..About::default()
        }
    }

    /// About a workload.
    pub fn workload(name: impl Into<String>) -> About {
        About {
            workload: Some(name.into()),
            ..About::default()
        }
    }
}

/// Prefixes of a switch's forwarding table that changed the same way: to
/// the same next hops, by the same protocol. (A switch converging writes
/// thousands of prefixes to one set of sixty next hops: listed once, not
/// once a prefix.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteChange {
    /// The destinations, ascending.
    pub prefixes: Vec<ipnet::Ipv4Net>,
    /// What happened to them.
    pub change: Change,
    /// The next hops they have now (none when withdrawn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next_hops: Vec<NextHop>,
    /// Who installed it: `static`, `bgp`, `bird`, `kernel` (connected).
    pub protocol: String,
}

/// What happened to a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// It was not in the table.
    Added,
    /// It is no longer in the table.
    Withdrawn,
    /// Its next hops changed.
    Changed,
}

impl Change {
    /// As events and the API name it.
    pub fn name(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Withdrawn => "withdrawn",
            Change::Changed => "changed",
        }
    }
}

/// Where a route sends a packet.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NextHop {
    /// The gateway (`None`: on the link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<std::net::Ipv4Addr>,
    /// The port it leaves by.
    pub ifname: String,
    /// The node at the other end of that port, if it is the lab's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The time now, as Unix seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[derive(Debug)]
struct Inner {
    /// The log on disk (none: kept in memory only).
    file: Option<fs::File>,
    /// Every event so far (a subscriber gets them first).
    log: Vec<LoggedEvent>,
    /// How many events of each kind are in `log` (read on every scrape
    /// of the metrics, which should not copy the log).
    kinds: BTreeMap<String, u64>,
}

impl Inner {
    fn new(file: Option<fs::File>, log: Vec<LoggedEvent>) -> Inner {
        let mut kinds = BTreeMap::new();
        for e in &log {
            *kinds.entry(e.kind.clone()).or_insert(0) += 1;
        }
        Inner { file, log, kinds }
    }
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
            inner: Arc::new(Mutex::new(Inner::new(Some(file), log))),
            bus,
            ready,
        })
    }

    /// Events kept in memory only, on a clock that starts now (tests).
    pub fn scratch() -> Events {
        let (bus, _) = broadcast::channel(4096);
        Events {
            inner: Arc::new(Mutex::new(Inner::new(None, Vec::new()))),
            bus,
            ready: unix_now(),
        }
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
        self.write_about(source, kind, event, result, About::default());
    }

    /// Records one event and what it is about.
    pub fn write_about(
        &self,
        source: &str,
        kind: &str,
        event: &str,
        result: Result<(), &str>,
        about: About,
    ) {
        self.write_at(unix_now(), source, kind, event, result, about);
    }

    /// Records one event that happened at Unix time `unix` (a command
    /// when it began, the link engine's note when the engine saw it):
    /// events are logged in the order they are written, which may differ
    /// a little from the order of their times.
    pub fn write_at(
        &self,
        unix: f64,
        source: &str,
        kind: &str,
        event: &str,
        result: Result<(), &str>,
        about: About,
    ) {
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
            about,
        };
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if let Some(file) = &mut inner.file
            && let Ok(line) = serde_json::to_string(&entry)
        {
            let _ = writeln!(file, "{line}");
        }
        let seq = inner.log.len() as u64;
        *inner.kinds.entry(entry.kind.clone()).or_insert(0) += 1;
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

    /// The events from position `seq` on (a follower that fell behind
    /// the bus catches up from the log).
    pub fn from(&self, seq: u64) -> Vec<(u64, LoggedEvent)> {
        let inner = self
            .inner
            .lock()
            .expect("the event log's lock is never poisoned");
        inner
            .log
            .iter()
            .enumerate()
            .skip(seq as usize)
            .map(|(i, e)| (i as u64, e.clone()))
            .collect()
    }

    /// How many events of each kind there have been.
    pub fn kinds(&self) -> BTreeMap<String, u64> {
        self.inner
            .lock()
            .map(|inner| inner.kinds.clone())
            .unwrap_or_default()
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
