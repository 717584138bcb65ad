//! `turbonet exec NODE -- CMD`: run a command inside a node.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::error::{Context, Error, Result};
use crate::inspect::{self, Running};
use turbonet_host::namespaces;
use turbonet_host::process::{AsUser, Start};

/// Runs `command` in the namespace of `node`, like `ip netns exec`: the
/// child also gets a private mount namespace with `/sys` remounted, so tools
/// that read sysfs see the node's interfaces and `/etc/hosts` names every
/// node of the lab ([`crate::hostnames`]), a UTS namespace with the node's
/// name as host name, and `TURBONET_LAB` and `TURBONET_NODE` in its
/// environment. Returns its exit code (128 + the
/// signal for a command killed by a signal); a command that cannot start
/// is [`Error::NotFound`].
pub fn exec(running: &Running, node: &str, command: &[String]) -> Result<i32> {
    exec_with(running, node, command, &[])
}

/// [`exec`] as `user` rather than root, confined as [`AsUser`] says (what
/// `turbonet serve` runs for a student).
pub fn exec_as(running: &Running, node: &str, command: &[String], user: &AsUser) -> Result<i32> {
    let program = command.first().cloned().unwrap_or_default();
    let account = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(user.uid))
        .ok()
        .flatten();
    // Their own environment, nothing of the service's (an administrator's
    // token, root's paths): what a login would give them.
    let mut env: Vec<(&str, String)> = vec![("PATH", USER_PATH.to_owned())];
    if let Some(a) = account {
        env.extend([
            ("HOME", a.dir.display().to_string()),
            ("USER", a.name.clone()),
            ("LOGNAME", a.name),
        ]);
    }
    env.extend(user.term.clone().map(|t| ("TERM", t)));
    let status = spawn_as(running, node, command, &env, false, Some(user))?
        .wait()
        .map_err(|e| Error::NotFound(format!("cannot run {program} in {node}: {e}")))?;
    Ok(turbonet_host::process::exit_code(status))
}

/// The `PATH` a user's command starts with (root's `sbin` folders too:
/// `ip`, `tcpdump` and `vtysh` live there).
const USER_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// [`exec`] with `env` added to the command's environment.
pub fn exec_with(
    running: &Running,
    node: &str,
    command: &[String],
    env: &[(&str, String)],
) -> Result<i32> {
    let program = command.first().cloned().unwrap_or_default();
    let status = spawn_in(running, node, command, env, false)?
        .wait()
        .map_err(|e| Error::NotFound(format!("cannot run {program} in {node}: {e}")))?;
    Ok(turbonet_host::process::exit_code(status))
}

/// [`exec`], its output (standard output, then standard error) captured
/// rather than shown.
pub fn exec_captured(running: &Running, node: &str, command: &[String]) -> Result<(i32, String)> {
    let program = command.first().cloned().unwrap_or_default();
    let out = spawn_in(running, node, command, &[], true)?
        .wait_with_output()
        .map_err(|e| Error::NotFound(format!("cannot run {program} in {node}: {e}")))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((turbonet_host::process::exit_code(out.status), text))
}

/// Starts `command` in `node` as [`exec`] describes; with `capture`, its
/// output goes to pipes.
fn spawn_in(
    running: &Running,
    node: &str,
    command: &[String],
    env: &[(&str, String)],
    capture: bool,
) -> Result<std::process::Child> {
    spawn_as(running, node, command, env, capture, None)
}

/// [`spawn_in`], as `user` if given.
/// Refuses a node another machine runs, on a lab over several, naming the
/// machine.
fn elsewhere(running: &Running, node: &str) -> Result<()> {
    let Some(parts) = crate::parts::Parts::of(running)? else {
        return Ok(());
    };
    let m = parts.machine_of(&running.lab, node)?;
    if m == parts.here() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "{node} runs on machine {m} of lab {} ({}), not this one (machine {}): run it there",
        running.lab.name,
        parts.underlay(m)?,
        parts.here()
    )))
}

fn spawn_as(
    running: &Running,
    node: &str,
    command: &[String],
    env: &[(&str, String)],
    capture: bool,
    user: Option<&AsUser>,
) -> Result<std::process::Child> {
    let lab = &running.lab;
    let ns_name = inspect::node_namespace(lab, node)?;
    elsewhere(running, node)?;
    let ns = namespaces::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    // A user holds capabilities in the user namespace that owns their
    // lab's nodes, never in the machine's.
    let userns = match user {
        None => None,
        Some(_) => {
            let owner = namespaces::owner_of(&ns)
                .with_context(|| format!("finding the owner of namespace {ns_name}"))?;
            if namespaces::is_own_user_namespace(&owner)? {
                return Err(Error::Refused(format!(
                    "lab {}'s nodes are not in a user namespace of yours (it was started \
                     before turbonet gave each student's labs one): stop it and start it again",
                    lab.name
                )));
            }
            Some(owner)
        }
    };
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Error::Invalid("exec needs a command".to_owned()))?;
    // Labs brought up before hosts files existed have none.
    let dir = crate::state::LabDir::of(&lab.name);
    let hosts = dir.hosts_path();
    // A switch that runs FRR: plain `vtysh` talks to its own daemons.
    let frr = crate::lookup::node(lab, node)
        .ok()
        .filter(|n| {
            lab.routing.mode == turbonet_topo::RoutingMode::Bgp
                && n.role.is_switch()
                && lab.routing.agent_of(n.id) == turbonet_topo::Agent::Frr
        })
        .map(|_| crate::routes::routers::router_dir(&dir, node))
        // Where vtysh looks (FRR's package makes it at boot; a machine
        // that has not booted since gets it here, empty).
        .filter(|_| std::fs::create_dir_all("/run/frr").is_ok());
    let mut child = Command::new(program);
    if user.is_some() {
        child.env_clear();
    }
    child
        .args(args)
        .env("TURBONET_LAB", &lab.name)
        .env("TURBONET_NODE", node)
        .envs(env.iter().map(|(k, v)| (k, v)));
    if capture {
        child
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }
    Start {
        namespace: Some(&ns),
        private_sysfs: true,
        hosts: Some(&hosts).filter(|h| h.exists()).map(PathBuf::as_path),
        hostname: Some(node),
        as_user: user,
        user_namespace: userns.as_ref(),
        frr: frr.as_deref(),
        ..Start::default()
    }
    .spawn(&mut child)
    .map_err(|e| Error::NotFound(format!("cannot run {program} in {node}: {e}")))
}
