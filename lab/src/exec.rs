//! `turbonet exec NODE -- CMD`: run a command inside a node.

use std::path::PathBuf;
use std::process::Command;

use crate::error::{Context, Error, Result};
use crate::inspect::{self, Running};
use crate::system::namespaces;
use crate::system::process::Start;

/// Runs `command` in the namespace of `node`, like `ip netns exec`: the
/// child also gets a private mount namespace with `/sys` remounted, so tools
/// that read sysfs see the node's interfaces and `/etc/hosts` names every
/// node of the lab ([`crate::hostnames`]), and `TURBONET_LAB` and
/// `TURBONET_NODE` in its environment. Returns its exit code (128 + the
/// signal for a command killed by a signal); a command that cannot start
/// is [`Error::NotFound`].
pub fn exec(running: &Running, node: &str, command: &[String]) -> Result<i32> {
    let lab = &running.lab;
    let ns_name = inspect::node_namespace(lab, node)?;
    let ns = namespaces::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Error::Invalid("exec needs a command".to_owned()))?;
    // Labs brought up before hosts files existed have none.
    let hosts = crate::state::LabDir::of(&lab.name).hosts_path();
    let mut child = Command::new(program);
    child
        .args(args)
        .env("TURBONET_LAB", &lab.name)
        .env("TURBONET_NODE", node);
    let status = Start {
        namespace: Some(&ns),
        private_sysfs: true,
        hosts: Some(&hosts).filter(|h| h.exists()).map(PathBuf::as_path),
        ..Start::default()
    }
    .spawn(&mut child)
    .and_then(|mut c| c.wait())
    .map_err(|e| Error::NotFound(format!("cannot run {program} in {node}: {e}")))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}
