//! What happened in a lab, on one clock: every change the daemon made or
//! saw (a `fail` from a client, a timeline step, a flap, a BGP session going
//! down, the daemon restarting), in order, with its time since the fabric
//! was ready. Kept in the lab's `events.jsonl` (so a restarted daemon
//! continues the sequence) and streamed to whoever subscribes (the control
//! API's `Events` call).

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::error::Result;
use crate::state::LabDir;

/// Where the daemon logs every event, one JSON object a line.
pub fn events_path(dir: &LabDir) -> PathBuf {
    dir.path().join("events.jsonl")
}

pub use turbonet_api::events::{About, Change, LoggedEvent, NextHop, RouteChange};

/// The time now, as Unix seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Where the events are kept.
#[derive(Debug)]
enum Store {
    /// In the lab's log: the file, and where each event's line starts in
    /// it. The pod's convergence logs a hundred thousand route changes of
    /// sixty next hops each: a daemon that kept them all in memory grew by
    /// gigabytes, where eight bytes an event is what finding one takes.
    File {
        file: fs::File,
        path: PathBuf,
        starts: Vec<u64>,
        /// The file's length.
        end: u64,
    },
    /// In memory (tests).
    Memory(Vec<LoggedEvent>),
}

#[derive(Debug)]
struct Inner {
    store: Store,
    /// The most the log may hold ([`LOG_MAX`]).
    log_max: u64,
    /// How many events of each kind there have been (read on every scrape
    /// of the metrics, which should not read the log).
    kinds: BTreeMap<String, u64>,
}

impl Inner {
    fn len(&self) -> u64 {
        match &self.store {
            Store::File { starts, .. } => starts.len() as u64,
            Store::Memory(log) => log.len() as u64,
        }
    }
}

/// The most a lab's log holds (2 GiB, three converging HPN pods' route
/// changes): past it events are counted (under their kind and
/// [`UNLOGGED`]) but neither logged nor sent, so no input — a
/// student's `flap` of a billion cycles — fills the machine's disk.
pub const LOG_MAX: u64 = 2 << 30;

/// The kind under which events past [`LOG_MAX`] are counted.
pub const UNLOGGED: &str = "unlogged";

/// Events read back per call of [`Events::range`] at most, so that a
/// follower catching up holds a bounded batch.
pub const READ_BATCH: u64 = 1024;

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
        Self::open_at_most(dir, ready, LOG_MAX)
    }

    /// [`Events::open`], the log held to `log_max` bytes.
    fn open_at_most(dir: &LabDir, ready: f64, log_max: u64) -> Result<Events> {
        let path = events_path(dir);
        let mut starts = Vec::new();
        let mut kinds = BTreeMap::new();
        let mut end = 0u64;
        if let Ok(f) = fs::File::open(&path) {
            let mut reader = std::io::BufReader::new(f);
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader.read_line(&mut line)?;
                if n == 0 || !line.ends_with('\n') {
                    // A line cut short by a crash is written over.
                    break;
                }
                if let Ok(e) = serde_json::from_str::<LoggedEvent>(&line) {
                    starts.push(end);
                    *kinds.entry(e.kind).or_insert(0) += 1;
                }
                end += n as u64;
            }
        }
        let file = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)?;
        file.set_len(end)?;
        let (bus, _) = broadcast::channel(4096);
        Ok(Events {
            inner: Arc::new(Mutex::new(Inner {
                store: Store::File {
                    file,
                    path,
                    starts,
                    end,
                },
                log_max,
                kinds,
            })),
            bus,
            ready,
        })
    }

    /// Events kept in memory only, on a clock that starts now (tests).
    pub fn scratch() -> Events {
        let (bus, _) = broadcast::channel(4096);
        Events {
            inner: Arc::new(Mutex::new(Inner {
                store: Store::Memory(Vec::new()),
                log_max: LOG_MAX,
                kinds: BTreeMap::new(),
            })),
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
            machine: None,
        };
        let line = match serde_json::to_string(&entry) {
            Ok(line) => line + "\n",
            Err(_) => return,
        };
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let seq = inner.len();
        let log_max = inner.log_max;
        match &mut inner.store {
            Store::File {
                file, starts, end, ..
            } => {
                if *end + line.len() as u64 > log_max {
                    if !inner.kinds.contains_key(UNLOGGED) {
                        tracing::warn!(
                            "the lab's log is full ({log_max} bytes): events are counted only"
                        );
                    }
                    *inner.kinds.entry(UNLOGGED.to_owned()).or_insert(0) += 1;
                    *inner.kinds.entry(entry.kind).or_insert(0) += 1;
                    return;
                }
                // One write a line, at the end: a line is whole or not
                // there, and its start is known.
                if file.write_all_at(line.as_bytes(), *end).is_err() {
                    return;
                }
                starts.push(*end);
                *end += line.len() as u64;
            }
            Store::Memory(log) => log.push(entry.clone()),
        }
        *inner.kinds.entry(entry.kind.clone()).or_insert(0) += 1;
        // Sent while the lock is held, so a subscriber sees every event
        // exactly once: up to the count it was given, or on the bus.
        let _ = self.bus.send((seq, entry));
    }

    /// How many events there have been, and a receiver of the ones to come
    /// (none lost or seen twice between the two): the ones before are read
    /// with [`Events::range`].
    pub fn subscribe(&self) -> (u64, broadcast::Receiver<(u64, LoggedEvent)>) {
        let inner = self
            .inner
            .lock()
            .expect("the event log's lock is never poisoned");
        (inner.len(), self.bus.subscribe())
    }

    /// Events `from..to` (as many as there are), [`READ_BATCH`] at most,
    /// with their positions: read back from the log (a follower catching
    /// up, or one that fell behind the bus).
    pub fn range(&self, from: u64, to: u64) -> Vec<(u64, LoggedEvent)> {
        let (path, start, count) = {
            let inner = self
                .inner
                .lock()
                .expect("the event log's lock is never poisoned");
            let to = to.min(inner.len()).min(from.saturating_add(READ_BATCH));
            if from >= to {
                return Vec::new();
            }
            match &inner.store {
                Store::Memory(log) => {
                    return (from..to)
                        .map(|seq| (seq, log[seq as usize].clone()))
                        .collect();
                }
                Store::File { path, starts, .. } => {
                    (path.clone(), starts[from as usize], (to - from) as usize)
                }
            }
        };
        // Lines before the count taken are whole: read without the lock.
        let Ok(mut file) = fs::File::open(&path) else {
            return Vec::new();
        };
        if file.seek(SeekFrom::Start(start)).is_err() {
            return Vec::new();
        }
        std::io::BufReader::new(file)
            .lines()
            .map_while(std::result::Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .take(count)
            .enumerate()
            .map(|(i, e)| (from + i as u64, e))
            .collect()
    }

    /// How many events of each kind there have been.
    pub fn kinds(&self) -> BTreeMap<String, u64> {
        self.inner
            .lock()
            .map(|inner| inner.kinds.clone())
            .unwrap_or_default()
    }

    /// Every event so far (tests, and small logs).
    pub fn all(&self) -> Vec<LoggedEvent> {
        let mut all = Vec::new();
        let (count, _) = self.subscribe();
        while (all.len() as u64) < count {
            let batch = self.range(all.len() as u64, count);
            if batch.is_empty() {
                break;
            }
            all.extend(batch.into_iter().map(|(_, e)| e));
        }
        all
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
        let (count, mut rx) = events.subscribe();
        assert_eq!(count, 1);
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

    #[test]
    fn a_full_log_counts_events_and_grows_no_more() {
        let root = std::env::temp_dir().join(format!("tn-events-full-{}", std::process::id()));
        let dir = LabDir::new(&root, "f");
        dir.claim().unwrap();
        let events = Events::open_at_most(&dir, unix_now(), 4096).unwrap();
        for i in 0..1_000 {
            events.write("api", "flap", &format!("flap {i}"), Ok(()));
        }
        let size = fs::metadata(events_path(&dir)).unwrap().len();
        assert!(size <= 4096, "{size} bytes");
        let logged = events.all().len() as u64;
        assert!(logged > 0);
        let kinds = events.kinds();
        assert_eq!(kinds["flap"], 1_000);
        assert_eq!(kinds[UNLOGGED], 1_000 - logged);
        dir.remove().unwrap();
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_log_is_read_back_in_batches_and_a_cut_line_is_written_over() {
        let root = std::env::temp_dir().join(format!("tn-events-range-{}", std::process::id()));
        let dir = LabDir::new(&root, "r");
        dir.claim().unwrap();
        let events = Events::open(&dir, unix_now()).unwrap();
        for i in 0..2_500 {
            events.write("api", "fail", &format!("fail {i}"), Ok(()));
        }
        let first = events.range(0, u64::MAX);
        assert_eq!(first.len() as u64, READ_BATCH);
        assert_eq!(first[7], (7, events.range(7, 8)[0].1.clone()));
        assert_eq!(events.range(2_499, u64::MAX)[0].1.event, "fail 2499");
        assert!(events.range(2_500, u64::MAX).is_empty());
        let all = events.all();
        assert_eq!(all.len(), 2_500);
        assert!(
            all.iter()
                .enumerate()
                .all(|(i, e)| e.event == format!("fail {i}"))
        );
        drop(events);
        // A daemon killed in the middle of a line.
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(events_path(&dir))
            .unwrap();
        std::io::Write::write_all(&mut file, b"{\"t\": 1.0, \"unix\"").unwrap();
        let again = Events::open(&dir, unix_now()).unwrap();
        again.write("daemon", "daemon-restarted", "daemon restarted", Ok(()));
        assert_eq!(again.range(2_500, u64::MAX)[0].1.kind, "daemon-restarted");
        assert_eq!(again.kinds()["fail"], 2_500);
        let text = fs::read_to_string(events_path(&dir)).unwrap();
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<LoggedEvent>(l).is_ok())
        );
        dir.remove().unwrap();
        let _ = std::fs::remove_dir_all(&root);
    }
}
