//! The per-lab daemon: the same binary, detached (`turbonet daemon LAB`).
//! It owns what must keep running after `up` returns: today the userspace
//! link engine. `up` starts it and waits until it is ready; `down` stops it
//! before removing the namespaces.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use turbonet_injectors::{Direction, Impairment, direction_seed};

use crate::engine::{self, EngineLink, LinkCounters, packet::PacketSocket};
use crate::lab;
use crate::netns;
use crate::state::{self, LabDir, LabState};

fn ready_path(dir: &LabDir) -> PathBuf {
    dir.path().join("daemon.ready")
}

/// Where the daemon publishes link counters (read by `link show`).
pub fn counters_path(dir: &LabDir) -> PathBuf {
    dir.path().join("engine.json")
}

/// Starts the daemon of `lab`, detached (new session, output to
/// `daemon.log` in the lab directory), and returns its pid.
pub fn spawn(lab: &str, dir: &LabDir) -> Result<u32> {
    let log = fs::File::create(dir.path().join("daemon.log")).context("creating daemon.log")?;
    let mut command = Command::new(std::env::current_exe()?);
    command
        .args(["daemon", lab])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; nothing else runs before exec.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()?;
            Ok(())
        });
    }
    let child = command.spawn().context("starting the lab daemon")?;
    Ok(child.id())
}

/// Waits until the daemon reports ready, failing early if it dies.
pub fn wait_ready(dir: &LabDir, pid: u32, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready_path(dir).exists() {
            return Ok(());
        }
        if !state::pid_alive(pid) {
            let log = fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
            bail!(
                "the lab daemon exited before it was ready:\n{}",
                log.trim_end()
            );
        }
        if Instant::now() >= deadline {
            bail!("the lab daemon was not ready after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Stops the daemon recorded in `state`: SIGTERM, then SIGKILL if it has
/// not exited within 5 s. A daemon that is gone already is fine.
pub fn stop(state: &LabState) -> Result<()> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Some(pid) = state.daemon_pid else {
        return Ok(());
    };
    if !state::pid_alive(pid) {
        return Ok(());
    }
    let pid_t = Pid::from_raw(pid as i32);
    let _ = kill(pid_t, Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(5);
    while state::pid_alive(pid) {
        if Instant::now() >= deadline {
            let _ = kill(pid_t, Signal::SIGKILL);
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// `turbonet daemon LAB`: runs the link engine of a lab until SIGTERM.
pub fn run(lab_name: &str) -> Result<ExitCode> {
    use nix::sys::signal::{SigSet, Signal};
    let dir = LabDir::of(lab_name);
    let lab = lab::saved_lab(&dir)?;
    let impaired: Vec<_> = lab
        .fabric
        .links
        .iter()
        .filter(|l| !Impairment::from_params(&l.params).is_noop())
        .collect();

    let ns = netns::open(&engine::namespace(lab_name)).context("opening the engine namespace")?;
    let sockets = netns::in_namespace(&ns, || {
        impaired
            .iter()
            .enumerate()
            .map(|(k, link)| {
                let (_, a) = engine::port(link.id.0, k, 0);
                let (_, b) = engine::port(link.id.0, k, 1);
                Ok([PacketSocket::bind(a)?, PacketSocket::bind(b)?])
            })
            .collect::<std::io::Result<Vec<_>>>()
    })
    .context("opening packet sockets in the engine namespace")?;
    let links: Vec<EngineLink> = impaired
        .iter()
        .zip(sockets)
        .map(|(link, sockets)| EngineLink {
            name: link.name.clone(),
            sockets,
            directions: [0u8, 1].map(|d| {
                Direction::new(
                    Impairment::from_params(&link.params),
                    direction_seed(lab.seed, &link.name, d),
                )
            }),
        })
        .collect();

    // Signals are taken synchronously by this thread; block them before
    // any other thread exists so the engine never sees them.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block()?;

    let stop = Arc::new(AtomicBool::new(false));
    let snapshot: engine::Snapshot = Arc::new(Mutex::new(Vec::new()));
    let count = links.len();
    let engine_thread = {
        let stop = stop.clone();
        let snapshot = snapshot.clone();
        std::thread::Builder::new()
            .name("link-engine".into())
            .spawn(move || engine::run(links, &stop, &snapshot))?
    };
    fs::write(ready_path(&dir), std::process::id().to_string())?;
    eprintln!("turbonet daemon for lab {lab_name}: link engine running {count} impaired links");

    let counters = counters_path(&dir);
    loop {
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 250_000_000,
        };
        // SAFETY: sigtimedwait on a valid, blocked signal set.
        let sig = unsafe { libc::sigtimedwait(signals.as_ref(), std::ptr::null_mut(), &timeout) };
        write_counters(&counters, &snapshot);
        if sig > 0 || engine_thread.is_finished() {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let result = engine_thread.join().expect("engine thread panicked");
    write_counters(&counters, &snapshot);
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("link engine failed: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn write_counters(path: &PathBuf, snapshot: &engine::Snapshot) {
    let counters: Vec<LinkCounters> = snapshot.lock().map(|s| s.clone()).unwrap_or_default();
    if let Ok(json) = serde_json::to_vec(&counters) {
        let tmp = path.with_extension("tmp");
        if fs::write(&tmp, json).is_ok() {
            let _ = fs::rename(&tmp, path);
        }
    }
}
