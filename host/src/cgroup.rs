//! A control group per user for what `turbonet serve` runs on their
//! behalf: the request's processes, what they start in their nodes, and
//! their labs' daemons, under one process and one memory limit.
//!
//! Made under the service's own cgroup (never above it: a service that an
//! administrator or a container runtime confined stays confined), in
//! either layout the kernel offers: cgroup v1's `pids` and `memory`
//! hierarchies, or the unified v2 tree, where the service first moves
//! itself into a leaf of its own (`service`) so that its cgroup may hand
//! the controllers down (v2 lets a cgroup with processes have no
//! controlled children).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where the kernel's cgroup trees are mounted.
const ROOT: &str = "/sys/fs/cgroup";

/// What one user's cgroup may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Processes and threads at once (`pids.max`).
    pub pids: u64,
    /// Memory in bytes (`memory.max`, or v1's `memory.limit_in_bytes`).
    pub memory: u64,
}

/// The cgroups a user's processes go to: one per v1 hierarchy, or one in
/// the v2 tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserGroups {
    /// Each cgroup's directory.
    pub dirs: Vec<PathBuf>,
}

/// This process's cgroups: `(controllers, path)` per line of
/// `/proc/self/cgroup` (controllers empty for v2).
fn own() -> io::Result<Vec<(String, String)>> {
    Ok(fs::read_to_string("/proc/self/cgroup")?
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let _id = parts.next()?;
            Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
        })
        .collect())
}

/// Where the service's own cgroup is in the hierarchy of `controller`
/// (v1), if the kernel mounts one.
fn v1_base(cgroups: &[(String, String)], controller: &str) -> Option<PathBuf> {
    let (_, path) = cgroups
        .iter()
        .find(|(c, _)| c.split(',').any(|c| c == controller))?;
    let mount = Path::new(ROOT).join(controller);
    mount
        .join("cgroup.procs")
        .exists()
        .then(|| mount.join(path.trim_start_matches('/')))
}

/// The v2 tree's mount (`/sys/fs/cgroup`, or `unified` beside v1's) and
/// the service's own cgroup in it, when the tree offers `pids` and
/// `memory`.
fn v2_base(cgroups: &[(String, String)]) -> Option<PathBuf> {
    let (_, path) = cgroups.iter().find(|(c, _)| c.is_empty())?;
    [
        Path::new(ROOT).to_path_buf(),
        Path::new(ROOT).join("unified"),
    ]
    .into_iter()
    .find(|m| {
        fs::read_to_string(m.join("cgroup.controllers")).is_ok_and(|c| {
            let c: Vec<&str> = c.split_whitespace().collect();
            c.contains(&"pids") && c.contains(&"memory")
        })
    })
    .map(|m| m.join(path.trim_start_matches('/')))
}

/// Prepares the service's cgroup to hold users' cgroups, where the kernel
/// has `pids` and `memory`: on v2, moves this process into a leaf of its
/// own and hands the controllers down. Returns where users' cgroups go,
/// or why they cannot be made (the service then runs without them).
pub fn prepare() -> io::Result<Vec<PathBuf>> {
    let cgroups = own()?;
    let v1: Vec<PathBuf> = ["pids", "memory"]
        .iter()
        .filter_map(|c| v1_base(&cgroups, c))
        .map(|b| b.join("turbonet-serve"))
        .collect();
    if v1.len() == 2 {
        for dir in &v1 {
            fs::create_dir_all(dir)?;
        }
        return Ok(v1);
    }
    let Some(base) = v2_base(&cgroups) else {
        return Err(io::Error::other(
            "the kernel offers neither cgroup v1's pids and memory hierarchies nor cgroup v2 \
             with both controllers",
        ));
    };
    let leaf = base.join("service");
    fs::create_dir_all(&leaf)?;
    fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())?;
    fs::write(base.join("cgroup.subtree_control"), "+pids +memory").map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "handing pids and memory down from {} (another process shares the service's \
                 cgroup: run turbonet serve in one of its own, e.g. a systemd service): {e}",
                base.display()
            ),
        )
    })?;
    Ok(vec![base])
}

/// Moves this process into user `uid`'s cgroup under each of `bases`
/// (made with `limits` if new; the limits are set again if not), so that
/// what it starts is counted there too.
pub fn enter(bases: &[PathBuf], uid: u32, limits: Limits) -> io::Result<UserGroups> {
    let mut dirs = Vec::new();
    for base in bases {
        let dir = base.join(format!("u{uid}"));
        fs::create_dir_all(&dir)?;
        let write = |file: &str, value: String| {
            let path = dir.join(file);
            if path.exists() {
                fs::write(&path, value)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
            } else {
                Ok(())
            }
        };
        write("pids.max", limits.pids.to_string())?;
        write("memory.max", limits.memory.to_string())?;
        write("memory.limit_in_bytes", limits.memory.to_string())?;
        fs::write(dir.join("cgroup.procs"), std::process::id().to_string())?;
        dirs.push(dir);
    }
    Ok(UserGroups { dirs })
}
