//! `turbonet exec NODE -- CMD`: run a command inside a node.

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, setns, unshare};

use crate::cli::EXIT_INVALID;
use crate::{inspect, lab, netns};

/// Runs `command` in the namespace of `node`, like `ip netns exec`: the
/// child also gets a private mount namespace with `/sys` remounted, so tools
/// that read sysfs see the node's interfaces. The exit code is passed
/// through (128 + signal for a command killed by a signal).
pub fn exec(lab_name: Option<&str>, node: &str, command: &[String]) -> Result<ExitCode> {
    let (dir, _) = lab::resolve(lab_name)?;
    let lab = lab::saved_lab(&dir)?;
    if lab.fabric.node_by_name(node).is_none() {
        eprintln!(
            "error: lab {} has no node {node}{}",
            lab.name,
            inspect::suggest(&lab, node)
        );
        return Ok(ExitCode::from(EXIT_INVALID));
    }
    let ns_name = inspect::node_namespace(&lab, node)?;
    let ns = netns::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    let (program, args) = command.split_first().expect("clap requires a command");
    let mut child = Command::new(program);
    child
        .args(args)
        .env("TURBONET_LAB", &lab.name)
        .env("TURBONET_NODE", node);
    let fd = ns.as_raw_fd();
    // SAFETY: between fork and exec we only make async-signal-safe syscalls
    // (setns, unshare, mount, umount2) and allocate nothing.
    unsafe {
        child.pre_exec(move || {
            let ns = std::os::fd::BorrowedFd::borrow_raw(fd);
            setns(ns, CloneFlags::CLONE_NEWNET)?;
            if unshare(CloneFlags::CLONE_NEWNS).is_ok() {
                let _ = mount(
                    None::<&str>,
                    "/",
                    None::<&str>,
                    MsFlags::MS_SLAVE | MsFlags::MS_REC,
                    None::<&str>,
                );
                if umount2("/sys", MntFlags::MNT_DETACH).is_ok() {
                    let _ = mount(
                        Some("sysfs"),
                        "/sys",
                        Some("sysfs"),
                        MsFlags::empty(),
                        None::<&str>,
                    );
                }
            }
            Ok(())
        });
    }
    let status = match child.status() {
        Ok(status) => status,
        Err(e) => {
            eprintln!("error: cannot run {program} in {node}: {e}");
            return Ok(ExitCode::from(127));
        }
    };
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
