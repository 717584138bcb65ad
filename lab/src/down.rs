//! `turbonet down` and `turbonet clean`: removing exactly what a lab
//! created, found from its state file (so it works after `up` was killed
//! with SIGKILL), and never anything else.

use std::path::Path;

use crate::bail;
use crate::daemon;
use crate::dataplane::netns::externals;
use crate::error::{Context, Error, Result};
use crate::limits;
use crate::state::{self, LabDir, LabState, Phase, Stopwatch};
use turbonet_host::{namespaces, process};

/// What `down` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Down {
    /// No lab is up at all.
    NothingUp,
    /// The lab named is not up.
    NotUp(String),
    /// The lab had a directory but no state yet (killed between claiming
    /// its name and writing its state): nothing was created.
    EmptyDirectory(String),
    /// The lab was removed.
    Removed {
        /// The lab.
        lab: String,
        /// Namespaces removed.
        namespaces: usize,
        /// Processes still running in them, stopped.
        processes: usize,
        /// How long it took.
        seconds: f64,
    },
}

/// Removes everything recorded in a lab's state, then the state itself;
/// returns how many processes were still running in its namespaces (and
/// were stopped: SIGTERM, then SIGKILL after a grace period).
pub fn teardown(dir: &LabDir, state: &mut LabState) -> Result<usize> {
    state.phase = Phase::Removing;
    let _ = dir.save(state);
    let mut failures = Vec::new();
    daemon::stop(state);
    crate::routes::routers::stop(state);
    crate::routes::routers::release(dir);
    let stray = namespaces::processes_in(&state.namespaces);
    let pids: Vec<(u32, &str)> = stray.iter().map(|(p, c)| (*p, c.as_str())).collect();
    process::stop(&pids, std::time::Duration::from_secs(2));
    if let Err(e) = externals::release(state) {
        failures.push(e.to_string());
    }
    for ns in &state.namespaces {
        if let Err(e) = namespaces::delete(ns) {
            failures.push(format!("deleting namespace {ns}: {e}"));
        }
    }
    if !failures.is_empty() {
        let _ = dir.save(state);
        bail!("{}", failures.join("; "));
    }
    dir.remove()
        .with_context(|| format!("removing {}", dir.path().display()))?;
    limits::restore_neighbour_limits()?;
    Ok(stray.len())
}

/// `turbonet down [LAB]`: the lab named, or the only one up.
pub fn down(name: Option<&str>) -> Result<Down> {
    let labs = state::labs(Path::new(state::RUN_DIR))?;
    let name = match (name, labs.as_slice()) {
        (Some(name), _) => name.to_owned(),
        (None, [only]) => only.clone(),
        (None, []) => return Ok(Down::NothingUp),
        (None, many) => {
            return Err(Error::Invalid(format!(
                "several labs are up ({}); name one, or `turbonet clean` removes all",
                many.join(", ")
            )));
        }
    };
    down_one(&name)
}

fn down_one(name: &str) -> Result<Down> {
    let dir = LabDir::of(name);
    if !dir.exists() {
        return Ok(Down::NotUp(name.to_owned()));
    }
    let watch = Stopwatch::start();
    let Some(mut state) = dir.load()? else {
        // Killed between claiming the name and writing the state: nothing
        // was created yet.
        dir.remove()?;
        return Ok(Down::EmptyDirectory(name.to_owned()));
    };
    if state.phase == Phase::Building
        && state.pid != std::process::id()
        && process::turbonet_alive(state.pid)
    {
        return Err(Error::Refused(format!(
            "lab {name} is still being built by process {}; stop it first (Ctrl-C rolls back)",
            state.pid
        )));
    }
    if !process::is_root() {
        return Err(Error::Refused(
            "`down` needs root; run it with sudo".to_owned(),
        ));
    }
    let namespaces = state.namespaces.len();
    let processes = teardown(&dir, &mut state)?;
    Ok(Down::Removed {
        lab: name.to_owned(),
        namespaces,
        processes,
        seconds: watch.seconds(),
    })
}

/// `turbonet clean`: `down` for every lab that has state on this machine,
/// each with its outcome (none: nothing was up).
pub fn clean() -> Result<Vec<(String, Result<Down>)>> {
    let labs = state::labs(Path::new(state::RUN_DIR))?;
    if labs.is_empty() {
        limits::restore_neighbour_limits()?;
    }
    Ok(labs
        .into_iter()
        .map(|lab| {
            let outcome = down_one(&lab);
            (lab, outcome)
        })
        .collect())
}
