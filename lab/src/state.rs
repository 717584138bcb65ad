//! Lab state on disk: `/run/turbonet/<lab>/`.
//!
//! The state file is the record of ownership. It is written *before* any
//! kernel object is created and lists every object the lab may create, so
//! `down` can remove exactly those even after `up` was SIGKILLed half way.
//! A copy of the scenario sits beside it, so `show` and `check` work without
//! the original file.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use turbonet_topo::Lab;

use crate::carrier::Carrier;
use crate::error::{Context, Error, Result};

/// Root of all lab state.
pub const RUN_DIR: &str = "/run/turbonet";

/// Lifecycle phase of a lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// `up` is creating objects (or was killed while doing so).
    Building,
    /// The fabric is up and routed.
    Ready,
    /// `down` is removing objects.
    Removing,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Building => "building",
            Phase::Ready => "ready",
            Phase::Removing => "removing",
        })
    }
}

/// How an external interface looked before the lab took it, so `down` can
/// hand it back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalState {
    /// Its name on the machine.
    pub interface: String,
    /// Named namespace it lived in (`None`: the root namespace).
    pub netns: Option<String>,
    /// Namespace of the node it was attached to.
    pub node_netns: String,
    /// Its name inside the node.
    pub ifname: String,
    /// MTU before.
    pub mtu: u32,
    /// Administratively up before.
    pub up: bool,
    /// IPv4 addresses before.
    pub addrs: Vec<Ipv4Net>,
    /// Whether it has been moved into the node yet.
    pub attached: bool,
}

/// One timed phase of `up`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Phase name.
    pub phase: String,
    /// What it did ("208 namespaces").
    pub detail: String,
    /// Seconds it took.
    pub seconds: f64,
}

/// Times a phase.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    /// Starts now.
    pub fn start() -> Self {
        Stopwatch(Instant::now())
    }

    /// Seconds since start.
    pub fn seconds(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// The state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    /// Format version.
    pub version: u32,
    /// Lab name.
    pub lab: String,
    /// Scenario file `up` was given (absolute).
    pub scenario: PathBuf,
    /// Phase.
    pub phase: Phase,
    /// Process that is building the lab.
    pub pid: u32,
    /// Seconds since the epoch when `up` started.
    pub started: u64,
    /// Every namespace the lab creates, named `tn-<lab>-<node>`.
    pub namespaces: Vec<String>,
    /// External interfaces the lab attaches.
    pub externals: Vec<ExternalState>,
    /// Timings of `up`.
    pub timings: Vec<Timing>,
    /// Neighbour-table entries the lab may need (see `limits`).
    #[serde(default)]
    pub neighbours: u64,
    /// The lab daemon's supervisor, once started (it restarts the daemon
    /// if the daemon dies).
    #[serde(default)]
    pub daemon_pid: Option<u32>,
    /// When the daemon first started (Unix seconds): the origin of the
    /// lab's clock (events, the timeline), kept across daemon restarts.
    #[serde(default)]
    pub epoch_unix: Option<f64>,
    /// Routing daemons (FRR, BIRD) started for switches, stopped by `down`.
    #[serde(default)]
    pub routers: Vec<RouterProcess>,
    /// Where each `[[capture]]` is written (absolute), in scenario order.
    #[serde(default)]
    pub captures: Vec<PathBuf>,
    /// How each link is carried, as `up` decided on this machine, in link
    /// order (empty in a state written before it was recorded).
    #[serde(default)]
    pub carriers: Vec<Carrier>,
    /// A P4 lab's mapping onto its physical switches, as `up` computed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<turbonet_topo::mapper::Mapping>,
    /// The part of a lab over several machines this machine runs (none:
    /// all of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::span::Placement>,
}

/// A routing daemon a lab started in a switch's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterProcess {
    /// The switch.
    pub node: String,
    /// Process name (`zebra`, `bgpd`, `bird`), checked before it is
    /// signalled so a reused pid is never hit.
    pub program: String,
    /// Its pid.
    pub pid: u32,
}

impl LabState {
    /// A new state for `lab`, in phase building.
    pub fn new(lab: &str, scenario: PathBuf, namespaces: Vec<String>) -> Self {
        LabState {
            version: 1,
            lab: lab.to_owned(),
            scenario,
            phase: Phase::Building,
            pid: std::process::id(),
            started: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            namespaces,
            externals: Vec::new(),
            timings: Vec::new(),
            neighbours: 0,
            daemon_pid: None,
            epoch_unix: None,
            routers: Vec::new(),
            captures: Vec::new(),
            carriers: Vec::new(),
            mapping: None,
            placement: None,
        }
    }
}

/// The directory of one lab.
#[derive(Debug, Clone)]
pub struct LabDir {
    dir: PathBuf,
}

impl AsRef<Path> for LabDir {
    fn as_ref(&self) -> &Path {
        &self.dir
    }
}

impl LabDir {
    /// The directory of `lab` under `root`.
    pub fn new(root: &Path, lab: &str) -> Self {
        LabDir {
            dir: root.join(lab),
        }
    }

    /// The directory of `lab` under [`RUN_DIR`].
    pub fn of(lab: &str) -> Self {
        Self::new(Path::new(RUN_DIR), lab)
    }

    /// Claims the lab name: creates the directory, root's only (mode
    /// 0700, set explicitly: its control socket and logs are no one
    /// else's), failing with `AlreadyExists` if the lab is in use.
    pub fn claim(&self) -> io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if let Some(parent) = self.dir.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::DirBuilder::new().mode(0o700).create(&self.dir)?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The lab's name (the directory's).
    pub fn name(&self) -> &str {
        self.dir
            .file_name()
            .and_then(std::ffi::OsStr::to_str)
            .unwrap_or_default()
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// Path of the saved copy of the scenario.
    pub fn scenario_path(&self) -> PathBuf {
        self.dir.join("scenario.toml")
    }

    /// Path of the lab's hosts file ([`crate::hostnames`]).
    pub fn hosts_path(&self) -> PathBuf {
        self.dir.join("hosts")
    }

    /// Path of the file naming the member of the `turbonet` group a lab
    /// was started for (`turbonet serve`): their user id.
    fn owner_path(&self) -> PathBuf {
        self.dir.join("owner")
    }

    /// Records that the lab was started for user `uid`.
    pub fn save_owner(&self, uid: u32) -> io::Result<()> {
        fs::write(self.owner_path(), format!("{uid}\n"))
    }

    /// The user the lab was started for, if one was recorded.
    pub fn owner(&self) -> Option<u32> {
        fs::read_to_string(self.owner_path())
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// True when the lab directory exists.
    pub fn exists(&self) -> bool {
        self.dir.exists()
    }

    /// Writes the state atomically (temp file + rename).
    pub fn save(&self, state: &LabState) -> io::Result<()> {
        let tmp = self.dir.join("state.json.tmp");
        let json = serde_json::to_vec_pretty(state).map_err(io::Error::other)?;
        fs::write(&tmp, json)?;
        fs::rename(&tmp, self.state_path())
    }

    /// Reads the state, `Ok(None)` when there is none.
    pub fn load(&self) -> io::Result<Option<LabState>> {
        match fs::read(self.state_path()) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Saves the scenario text beside the state.
    pub fn save_scenario(&self, text: &str) -> io::Result<()> {
        fs::write(self.scenario_path(), text)
    }

    /// Saves the lab's hosts file, readable by all: it is bind-mounted
    /// over `/etc/hosts` for programs that may run as another user (FRR,
    /// a workload's).
    pub fn save_hosts(&self, text: &str) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.hosts_path();
        fs::write(&path, text)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644))
    }

    /// Removes the lab directory and everything in it.
    pub fn remove(&self) -> io::Result<()> {
        match fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Names of all labs with a directory under `root`, sorted.
pub fn labs(root: &Path) -> io::Result<Vec<String>> {
    let mut labs = match fs::read_dir(root) {
        Ok(entries) => entries
            .filter_map(std::result::Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect::<Vec<_>>(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    labs.sort();
    Ok(labs)
}

/// The variable that names the lab commands are about when none is named
/// (as kubectl's context does): set by `turbonet exec` in what it runs.
pub const LAB_VARIABLE: &str = "TURBONET_LAB";

/// Picks the lab a command is about: the one named, else the one
/// `$TURBONET_LAB` names, else the only one up.
pub fn resolve(name: Option<&str>) -> Result<(LabDir, LabState)> {
    let labs = labs(Path::new(RUN_DIR))?;
    let from_env = std::env::var(LAB_VARIABLE).ok().filter(|n| !n.is_empty());
    let name = match (name.or(from_env.as_deref()), labs.as_slice()) {
        (Some(name), _) => name.to_owned(),
        (None, [only]) => only.clone(),
        (None, []) => {
            return Err(Error::NotFound(
                "no lab is up; start one with `turbonet up FILE`".to_owned(),
            ));
        }
        (None, many) => {
            return Err(Error::Invalid(format!(
                "several labs are up ({}); pick one with --lab, or for every command with \
                 `export {LAB_VARIABLE}=NAME`",
                many.join(", ")
            )));
        }
    };
    let dir = LabDir::of(&name);
    match dir.load()? {
        Some(state) => Ok((dir, state)),
        None if labs.contains(&name) => Err(Error::Refused(format!(
            "lab {name} has no state file (interrupted?); `turbonet down {name}` removes it"
        ))),
        None => Err(Error::NotFound(format!(
            "no lab named {name} is up{}",
            if labs.is_empty() {
                String::new()
            } else {
                format!(" (up: {})", labs.join(", "))
            }
        ))),
    }
}

impl LabDir {
    /// The scenario saved with the lab.
    pub fn saved_lab(&self) -> Result<Lab> {
        let path = self.scenario_path();
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        turbonet_topo::parse(&path.display().to_string(), &text).map_err(|errors| Error::Scenario {
            origin: format!("{} (the scenario saved with the lab)", path.display()),
            errors: Box::new(errors),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_claim_is_exclusive() {
        let root = std::env::temp_dir().join(format!("tn-state-test-{}", std::process::id()));
        let dir = LabDir::new(&root, "k4");
        dir.claim().unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "a lab directory is root's only");
        assert_eq!(
            dir.claim().unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(dir.load().unwrap(), None);
        let state = LabState::new("k4", "/x.toml".into(), vec!["tn-k4-h0".into()]);
        dir.save(&state).unwrap();
        assert_eq!(dir.load().unwrap(), Some(state));
        assert_eq!(labs(&root).unwrap(), vec!["k4".to_owned()]);
        dir.remove().unwrap();
        dir.remove().unwrap();
        fs::remove_dir_all(&root).unwrap();
    }
}
