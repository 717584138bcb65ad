//! Machine-wide limits a large fabric outgrows.
//!
//! The kernel's neighbour tables (ARP, NDP) are shared by all network
//! namespaces, with one machine-wide hard limit (`gc_thresh3`, 1024 entries
//! by default) that only the initial namespace can change. A fat-tree k=16
//! needs about 6,000 entries: past the limit the kernel drops packets to
//! unresolved neighbours ("neighbor table overflow"). `up` raises the limits
//! to fit every lab that is up, remembers the machine's own values, and the
//! last `down` puts them back.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::state::{self, LabDir};

/// The neighbour-table thresholds turbonet may raise.
const KEYS: [&str; 4] = [
    "net/ipv4/neigh/default/gc_thresh2",
    "net/ipv4/neigh/default/gc_thresh3",
    "net/ipv6/neigh/default/gc_thresh2",
    "net/ipv6/neigh/default/gc_thresh3",
];

/// Where the machine's own values are kept while any lab is up.
fn saved_path() -> PathBuf {
    Path::new(state::RUN_DIR).join("neighbour-limits.json")
}

#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    values: Vec<(String, u64)>,
}

fn read(key: &str) -> io::Result<u64> {
    fs::read_to_string(Path::new("/proc/sys").join(key))?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn write(key: &str, value: u64) -> io::Result<()> {
    fs::write(Path::new("/proc/sys").join(key), value.to_string())
}

/// Open files kept spare beyond what a process is known to hold.
pub const SPARE_FDS: usize = 256;

/// The most open files this process may hold (its hard `nofile` limit).
pub fn hard_fd_limit() -> usize {
    use nix::sys::resource::{Resource, getrlimit};
    getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(_, hard)| {
        usize::try_from(hard).unwrap_or(usize::MAX)
    })
}

/// Makes sure the process (and the daemon it starts, which inherits the
/// limit) may hold `need` file descriptors: raises the soft limit, and the
/// hard limit too where the process may (`CAP_SYS_RESOURCE`). `why` says
/// what needs them, for the refusal.
pub fn raise_fd_limit(need: usize, why: &str) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let need = need as u64;
    if soft >= need {
        return Ok(());
    }
    let raised = if hard >= need {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    } else {
        setrlimit(Resource::RLIMIT_NOFILE, need, need)
    };
    raised.map_err(|_| {
        crate::Error::Refused(format!(
            "{why} needs {need} open files, but this process may open {hard} at most and \
             cannot raise that limit (it lacks CAP_SYS_RESOURCE); raise the hard `nofile` \
             limit (`ulimit -Hn {need}` as a privileged user, or LimitNOFILE= for a service)"
        ))
    })
}

/// The open files the lab daemon holds apart from its BGP speakers': a
/// route watcher and a namespace per switch, two packet sockets per link
/// the link engine carries (`impaired`).
pub fn daemon_fds(switches: usize, impaired: usize) -> usize {
    2 * switches + 2 * impaired
}

/// The file descriptors `up` and the lab daemon it starts hold at most,
/// with what needs the most (for a refusal): `up` holds a namespace, a
/// netlink socket and, while it makes links, a connection on that socket
/// per namespace; the daemon its own (`daemon`, see [`daemon_fds`]) and
/// its built-in BGP speakers' (`speakers`: none when they run in shards
/// of their own, each of which fits). [`SPARE_FDS`] spare.
pub fn fds_needed(namespaces: usize, daemon: usize, speakers: usize) -> (usize, &'static str) {
    let up = 3 * namespaces;
    let what = if daemon + speakers > up {
        if speakers > daemon {
            "the lab daemon (its BGP sessions' sockets, two a session)"
        } else {
            "the lab daemon (the link engine's sockets, two an impaired link)"
        }
    } else {
        "`up` (a namespace and two netlink sockets per node)"
    };
    (up.max(daemon + speakers) + SPARE_FDS, what)
}

/// Neighbour entries a lab may need: one per port end, plus headroom.
pub fn neighbours_needed(ports: usize) -> u64 {
    ports as u64 + 64
}

/// Raises the machine-wide neighbour limits so that `needed` entries (this
/// lab and every other lab that is up) fit. Returns a note for the user when
/// it changed something. Must run in the initial network namespace.
pub fn raise_neighbour_limits(this_lab: u64) -> Result<Option<String>> {
    let mut total = this_lab;
    for lab in state::labs(Path::new(state::RUN_DIR))? {
        if let Ok(Some(st)) = LabDir::of(&lab).load() {
            total += st.neighbours;
        }
    }
    // Raise only what the fabric outgrows (leaving the rest of the machine
    // 256 entries), and then generously, so a second lab rarely needs more.
    let mut changes = Vec::new();
    for key in KEYS {
        let Ok(current) = read(key) else { continue };
        let (need, want) = if key.ends_with("thresh3") {
            (total + 256, 2 * total + 1024)
        } else {
            (total, total + 512)
        };
        if current < need {
            changes.push((key, current, want));
        }
    }
    if changes.is_empty() {
        return Ok(None);
    }
    let saved = saved_path();
    if !saved.exists() {
        let values = KEYS
            .iter()
            .filter_map(|k| read(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        fs::create_dir_all(state::RUN_DIR)?;
        fs::write(&saved, serde_json::to_vec(&Saved { values })?)
            .with_context(|| format!("writing {}", saved.display()))?;
    }
    for (key, _, want) in &changes {
        write(key, *want).with_context(|| format!("raising {key}"))?;
    }
    let (_, from, to) = changes
        .iter()
        .find(|(k, ..)| k.contains("ipv4") && k.ends_with("thresh3"))
        .copied()
        .unwrap_or(changes[0]);
    Ok(Some(format!(
        "raised the machine's neighbour table limit (gc_thresh3) from {from} to {to} for {total} entries; \
         the last `down` restores it"
    )))
}

/// Restores the machine's own neighbour limits when no lab is up any more.
pub fn restore_neighbour_limits() -> Result<()> {
    let saved = saved_path();
    if !saved.exists() || !state::labs(Path::new(state::RUN_DIR))?.is_empty() {
        return Ok(());
    }
    let Saved { values } = serde_json::from_slice(&fs::read(&saved)?)?;
    for (key, value) in values {
        write(&key, value).with_context(|| format!("restoring {key}"))?;
    }
    fs::remove_file(&saved)?;
    Ok(())
}
