//! `turbonet mpirun`: Open MPI across a lab's hosts. `mpirun` runs in the
//! lab's management namespace ([`crate::dataplane::mgmt`]) and starts its
//! daemons (`orted`) through turbonet itself as its remote shell
//! (`plm_rsh_agent`), which runs each in its host's namespace ([`agent`]).
//! Open MPI's control channel then runs over the management network and
//! only the ranks' data crosses the fabric, over TCP (`btl tcp,self`), with
//! each collective's algorithm pinned so its traffic is reproducible.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use turbonet_topo::Lab;
use turbonet_topo::experiment::Algorithm;

use crate::error::{Context, Error, Result};
use crate::inspect::{self, Running};
use turbonet_host::namespaces;
use turbonet_host::process::Start;

/// The hidden subcommand Open MPI starts as its remote shell:
/// `turbonet mpi-agent HOST COMMAND...`.
pub const AGENT: &str = "mpi-agent";

/// The environment variable that tells the agent which job's rail the
/// ranks' data uses (unset: every fabric port).
const JOB_ENV: &str = "TURBONET_MPI_JOB";

/// What `turbonet mpirun` is asked to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The job whose hosts run the ranks, in rank order (`None`: every
    /// host of the lab, in node order).
    pub job: Option<String>,
    /// How the collectives run: `ring` (the default) or `halving-doubling`.
    pub algorithm: Algorithm,
    /// Everything for `mpirun` after turbonet's own options: the program
    /// and its arguments, after any `mpirun` options of the user's.
    pub command: Vec<String>,
}

/// Open MPI's numbers for its `tuned` collectives (`ompi_info --param
/// coll tuned --level 9`), for `algorithm`: allreduce, allgather,
/// reduce_scatter, alltoall, bcast.
fn tuned(algorithm: Algorithm) -> Result<[(&'static str, u32); 5]> {
    Ok(match algorithm {
        // Ring; pairwise all-to-all; binomial-tree broadcast.
        Algorithm::Ring => [
            ("allreduce", 4),
            ("allgather", 4),
            ("reduce_scatter", 3),
            ("alltoall", 2),
            ("bcast", 6),
        ],
        // Recursive doubling (allreduce, allgather), recursive halving
        // (reduce_scatter), modified Bruck all-to-all.
        Algorithm::HalvingDoubling => [
            ("allreduce", 3),
            ("allgather", 3),
            ("reduce_scatter", 2),
            ("alltoall", 3),
            ("bcast", 6),
        ],
        other => {
            return Err(Error::Invalid(format!(
                "Open MPI's collectives cannot be pinned to `{}`; use `ring` or `halving-doubling`",
                other.name()
            )));
        }
    })
}

/// The hosts that run the ranks, in rank order, each with how many ranks
/// it runs.
fn placement(lab: &Lab, job: Option<&str>) -> Result<Vec<(String, usize)>> {
    let Some(name) = job else {
        return Ok(lab.fabric.hosts().map(|h| (h.name.clone(), 1)).collect());
    };
    let mut hosts: Vec<(String, usize)> = Vec::new();
    for rank in &crate::lookup::job(lab, name)?.ranks {
        let host = &lab.fabric.node(rank.host).name;
        match hosts.iter_mut().find(|(h, _)| h == host) {
            Some((_, n)) => *n += 1,
            None => hosts.push((host.clone(), 1)),
        }
    }
    Ok(hosts)
}

/// The interfaces `host`'s ranks send their data on: its fabric ports, or
/// with `job` only those of the job's rail (the ports with the address of
/// the host's rank). Open MPI takes them as names, valid on the host
/// itself, so the agent sets them per host.
pub fn data_interfaces(lab: &Lab, host: &str, job: Option<&str>) -> Result<Vec<String>> {
    let node = crate::lookup::node(lab, host)?;
    let rails: Option<Vec<std::net::Ipv4Addr>> = match job {
        None => None,
        Some(job) => Some(
            crate::lookup::job(lab, job)?
                .ranks
                .iter()
                .filter(|r| r.host == node.id)
                .map(|r| r.addr)
                .collect(),
        ),
    };
    Ok(lab
        .fabric
        .ports(node.id)
        .filter(|(_, local, _)| {
            rails
                .as_ref()
                .is_none_or(|r| r.contains(&local.addr.addr()))
        })
        .map(|(_, local, _)| local.ifname.clone())
        .collect())
}

/// The `mpirun` command line for `options` on `lab`, with `ranks` ranks
/// placed by `hostfile` and `agent` (turbonet's own path) as Open MPI's
/// remote shell.
fn command_line(
    lab: &Lab,
    options: &Options,
    ranks: usize,
    hostfile: &Path,
    agent: &Path,
) -> Result<Vec<String>> {
    if lab.mgmt.is_none() {
        return Err(Error::Refused(format!(
            "lab {} has no management network, which carries Open MPI's control channel: \
             add `[mgmt]` to its scenario (an empty table takes the pool {})",
            lab.name,
            turbonet_topo::Mgmt::DEFAULT_POOL
        )));
    }
    let mut argv: Vec<String> = ["mpirun", "--allow-run-as-root", "--hostfile"]
        .map(str::to_owned)
        .into();
    argv.push(hostfile.display().to_string());
    argv.extend(["-np".to_owned(), ranks.to_string()]);
    // Every rank thinks it has the machine's cores: binding would pin them
    // all to the same ones.
    argv.extend(["--bind-to", "none"].map(str::to_owned));
    let mut mca = |key: &str, value: String| {
        argv.extend(["--mca".to_owned(), key.to_owned(), value]);
    };
    mca("plm_rsh_agent", format!("{} {AGENT}", agent.display()));
    mca("plm_rsh_no_tree_spawn", "1".into());
    let interface = crate::dataplane::mgmt::INTERFACE;
    mca("oob_tcp_if_include", interface.to_owned());
    mca("pml", "ob1".into());
    // Which interfaces carry the data is said per host, by the agent
    // (`OMPI_MCA_btl_tcp_if_include`: see [`data_interfaces`]).
    mca("btl", "tcp,self".into());
    mca("coll_tuned_use_dynamic_rules", "1".into());
    for (collective, number) in tuned(options.algorithm)? {
        mca(
            &format!("coll_tuned_{collective}_algorithm"),
            number.to_string(),
        );
    }
    argv.extend(options.command.iter().cloned());
    Ok(argv)
}

/// The hostfile's text: one line per host, with its ranks as slots.
fn hostfile_text(hosts: &[(String, usize)]) -> String {
    let mut text = String::new();
    for (host, slots) in hosts {
        let _ = writeln!(text, "{host} slots={slots}");
    }
    text
}

/// What `turbonet mpirun` runs, without running it.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The `mpirun` command line.
    pub argv: Vec<String>,
    /// The hostfile it names.
    pub hostfile: PathBuf,
    /// The namespace it runs in (the lab's management namespace).
    pub namespace: String,
    /// The environment it runs with, besides the caller's.
    pub env: Vec<(&'static str, String)>,
}

/// Writes the hostfile for `options` into the lab's directory and returns
/// the command line that runs it.
pub fn prepare(running: &Running, options: &Options) -> Result<Prepared> {
    if options.command.is_empty() {
        return Err(Error::Invalid(
            "mpirun needs a program: `turbonet mpirun -- PROGRAM ARGS...`".to_owned(),
        ));
    }
    let lab = &running.lab;
    if let Some(placement) = running.dir.load()?.and_then(|state| state.placement)
        && placement.machines > 1
    {
        return Err(Error::Refused(format!(
            "turbonet mpirun starts every rank from this machine, and lab {} runs over {} \
             machines: run Open MPI's own launcher over the management network, or the job on \
             a lab on one machine",
            lab.name, placement.machines
        )));
    }
    let hosts = placement(lab, options.job.as_deref())?;
    let hostfile = running.dir.path().join(format!(
        "mpi-hostfile-{}",
        options.job.as_deref().unwrap_or("hosts")
    ));
    let agent = turbonet_host::process::self_exe()?;
    if agent.to_string_lossy().contains(char::is_whitespace) {
        return Err(Error::Refused(format!(
            "Open MPI splits its remote shell's command line on spaces, and this turbonet is {}: \
             run one installed under a path without spaces",
            agent.display()
        )));
    }
    let ranks = hosts.iter().map(|(_, n)| n).sum();
    let argv = command_line(lab, options, ranks, &hostfile, &agent)?;
    std::fs::write(&hostfile, hostfile_text(&hosts))
        .with_context(|| format!("writing {}", hostfile.display()))?;
    Ok(Prepared {
        argv,
        hostfile,
        namespace: crate::names::mgmt_namespace(&lab.name),
        env: [
            ("TURBONET_LAB", lab.name.clone()),
            (JOB_ENV, options.job.clone().unwrap_or_default()),
            // Open MPI refuses root without both.
            ("OMPI_ALLOW_RUN_AS_ROOT", "1".to_owned()),
            ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1".to_owned()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect(),
    })
}

/// Runs `prepared` in the lab's management namespace, as the caller's
/// child (its terminal's Ctrl-C reaches `mpirun`, which stops the job);
/// returns `mpirun`'s exit code.
pub fn run(running: &Running, prepared: &Prepared) -> Result<i32> {
    let ns_name = &prepared.namespace;
    let ns = namespaces::open(ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
    let (program, args) = prepared
        .argv
        .split_first()
        .expect("argv starts with mpirun");
    let hosts = running.dir.hosts_path();
    let mut child = Command::new(program);
    child
        .args(args)
        .envs(prepared.env.iter().map(|(k, v)| (k, v)));
    Start {
        namespace: Some(&ns),
        private_sysfs: true,
        hosts: Some(&hosts).filter(|h| h.exists()).map(PathBuf::as_path),
        hostname: Some("mgmt"),
        ..Start::default()
    }
    .prepare(&mut child)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        use nix::sys::signal::{Signal, kill};
        use tokio::signal::unix::{SignalKind, signal};
        // The terminal's Ctrl-C reaches mpirun too, which takes the job
        // down and exits: wait for that rather than die first. SIGTERM and
        // SIGHUP, which reach only this process, are passed on.
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let mut child = tokio::process::Command::from(child)
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::NotFound(
                    "mpirun is not installed: install Open MPI (Debian: apt-get install openmpi-bin)"
                        .to_owned(),
                ),
                _ => Error::Io(e),
            })?;
        let pid = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
        let pass_on = |sig| {
            if let Some(pid) = pid {
                let _ = kill(pid, sig);
            }
        };
        loop {
            tokio::select! {
                status = child.wait() => {
                    return Ok(turbonet_host::process::exit_code(status?));
                }
                _ = interrupt.recv() => {}
                _ = terminate.recv() => pass_on(Signal::SIGTERM),
                _ = hangup.recv() => pass_on(Signal::SIGHUP),
            }
        }
    })
}

/// `turbonet mpi-agent HOST COMMAND...`, Open MPI's remote shell: runs
/// COMMAND (a shell command line, as `ssh` would run it) in HOST's
/// namespace of lab `$TURBONET_LAB`, as `turbonet exec` does.
pub fn agent(args: &[String]) -> Result<i32> {
    // Options a remote shell may be given before the host are not ours.
    let mut rest = args.iter().skip_while(|a| a.starts_with('-'));
    let host = rest
        .next()
        .ok_or_else(|| Error::Invalid("mpi-agent needs a host and a command".to_owned()))?;
    let command: Vec<&str> = rest.map(String::as_str).collect();
    let lab = std::env::var("TURBONET_LAB").ok();
    let running = inspect::running(lab.as_deref())?;
    let job = std::env::var(JOB_ENV).ok().filter(|j| !j.is_empty());
    let interfaces = data_interfaces(&running.lab, host, job.as_deref())?;
    if interfaces.is_empty() {
        return Err(Error::Invalid(format!(
            "{host} has no fabric port for the ranks' data"
        )));
    }
    let shell = vec!["/bin/sh".to_owned(), "-c".to_owned(), command.join(" ")];
    let env = [("OMPI_MCA_btl_tcp_if_include", interfaces.join(","))];
    crate::exec::exec_with(&running, host, &shell, &env)
}
