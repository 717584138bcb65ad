//! `turbonet serve`: labs for the members of a group, without root.
//!
//! A course's server runs one `turbonet serve` as root. It listens on a
//! Unix socket that only root and the group (`turbonet` unless configured)
//! may open, learns who connected from the kernel (`SO_PEERCRED`, which a
//! client cannot forge), and runs each request in a process of its own
//! whose standard input, output and error are the client's own (passed over
//! the socket), so a student's `turbonet lab check` prints to their
//! terminal as if it ran there. What a request may do, and the names it
//! may touch, is the caller's policy ([`serve`] takes it as a function):
//! this module only says who is asking and keeps them to their own labs
//! ([`Student`]) and their node limit ([`Policy`]).
//!
//! A member's labs are named `<user>-<lab>`; a member sees and acts on
//! those only. Commands they run inside a node run as them, not as root
//! ([`crate::exec::exec_as`]).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, killpg};
use nix::sys::socket::{
    AddressFamily, Backlog, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr, bind, connect,
    getsockopt, listen, sendmsg, setsockopt, socket, sockopt,
};
use nix::sys::time::TimeVal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Gid, Group, Pid, Uid, User};
use serde::{Deserialize, Serialize};
use turbonet_topo::units::{Delay, QueueLimit, Rate};

use crate::error::{Context, Error, Result};
use turbonet_host::descriptors;

/// Where `turbonet serve` listens unless told otherwise.
pub const SOCKET: &str = "/run/turbonet-serve.sock";

/// Where the copies of graded labs started for students are kept (each
/// named `<user>-<lab>.toml`, as `turbonet status` shows).
pub const SCENARIOS: &str = "/run/turbonet-serve";

/// The administrator's settings unless told otherwise.
pub const CONFIG: &str = "/etc/turbonet/users.toml";

/// The group whose members may run labs, unless configured.
pub const GROUP: &str = "turbonet";

/// The nodes a member may have up at once, over all their labs, unless
/// configured.
pub const MAX_NODES: usize = 100;

/// The longest prefix a member's lab names take (`<login>-`), so that a
/// lab's own name of 16 bytes still fits [`turbonet_topo::LAB_NAME_MAX`].
pub const PREFIX_MAX: usize = 16;

/// The bytes one link's queue of a member's lab may hold, unless
/// configured: 256 MiB, a thousand full 64 KiB segments and more.
pub const MAX_QUEUE: u64 = 256 << 20;

/// The most a queued packet can take: a 64 KiB segment (GSO), which a
/// queue limited in packets counts as one.
const PACKET_MAX: u64 = 64 << 10;

/// The largest request a client sends (its arguments and directory).
const REQUEST_MAX: usize = 64 << 10;

/// The processes (and threads) all that runs for one user may have at
/// once, unless configured.
pub const MAX_PROCESSES: u64 = 512;

/// The memory all that runs for one user may hold, unless configured:
/// 4 GiB.
pub const MAX_MEMORY: u64 = 4 << 30;

/// The commands one user may have open at once through the service
/// (waiting, or running: each holds a few processes of root's), unless
/// configured.
pub const REQUESTS: usize = 16;

/// `/etc/turbonet/users.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    group: Option<String>,
    max_nodes: Option<usize>,
    max_queue: Option<String>,
    requests: Option<usize>,
    max_processes: Option<u64>,
    max_memory: Option<String>,
    #[serde(default)]
    users: BTreeMap<String, RawUser>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUser {
    max_nodes: Option<usize>,
}

/// What the administrator allows: who, and how large.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The group whose members may run labs.
    pub group: String,
    /// Its id.
    pub gid: Gid,
    /// Nodes a member may have up at once, over all their labs.
    pub max_nodes: usize,
    /// Per user, where it differs.
    pub per_user: BTreeMap<String, usize>,
    /// The bytes a queue of a member's link may hold.
    pub max_queue: u64,
    /// The commands a user may have open at once.
    pub requests: usize,
    /// What all that runs for one user (their commands, what those start
    /// in their nodes, their labs' daemons) may hold at once.
    pub limits: turbonet_host::cgroup::Limits,
    /// The file it was read from (for messages).
    pub origin: PathBuf,
}

impl Policy {
    /// Reads the settings at `path` (every default when there is no such
    /// file) and finds the group.
    pub fn load(path: &Path) -> Result<Policy> {
        let raw: RawConfig = match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| {
                Error::Invalid(format!("{}: {}", path.display(), e.to_string().trim_end()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => RawConfig::default(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let group = raw.group.unwrap_or_else(|| GROUP.to_owned());
        let gid = Group::from_name(&group)
            .ok()
            .flatten()
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "there is no group {group}: create it (`groupadd {group}`) and add the \
                     students to it (`usermod -aG {group} NAME`), or name another in {}",
                    path.display()
                ))
            })?
            .gid;
        let max_queue = match raw.max_queue.as_deref().map(str::parse::<QueueLimit>) {
            None => MAX_QUEUE,
            Some(Ok(QueueLimit::Bytes(b))) => b,
            Some(Ok(QueueLimit::Packets(_))) => {
                return Err(Error::Invalid(format!(
                    "{}: `max_queue` is memory, in bytes: e.g. `max_queue = \"256MiB\"` (a \
                     queue in packets counts each as {} KiB)",
                    path.display(),
                    PACKET_MAX >> 10
                )));
            }
            Some(Err(e)) => {
                return Err(Error::Invalid(format!(
                    "{}: `max_queue`: {e}",
                    path.display()
                )));
            }
        };
        Ok(Policy {
            group,
            gid,
            max_queue,
            max_nodes: raw.max_nodes.unwrap_or(MAX_NODES),
            requests: raw.requests.unwrap_or(REQUESTS).max(1),
            limits: turbonet_host::cgroup::Limits {
                pids: raw.max_processes.unwrap_or(MAX_PROCESSES).max(16),
                memory: match raw.max_memory.as_deref().map(str::parse::<QueueLimit>) {
                    None => MAX_MEMORY,
                    Some(Ok(QueueLimit::Bytes(b))) => b,
                    _ => {
                        return Err(Error::Invalid(format!(
                            "{}: `max_memory` is bytes, e.g. `max_memory = \"4GiB\"`",
                            path.display()
                        )));
                    }
                },
            },
            per_user: raw
                .users
                .into_iter()
                .filter_map(|(name, u)| u.max_nodes.map(|m| (name, m)))
                .collect(),
            origin: path.to_owned(),
        })
    }

    /// The nodes `user` may have up at once.
    pub fn max_nodes(&self, user: &str) -> usize {
        self.per_user.get(user).copied().unwrap_or(self.max_nodes)
    }
}

/// A member of the group, as the kernel said who connected.
#[derive(Debug, Clone, Serialize)]
pub struct Student {
    /// Their login name.
    pub name: String,
    /// Their user id.
    pub uid: u32,
    /// Their primary group.
    pub gid: u32,
    /// Every group they are in.
    pub groups: Vec<u32>,
    /// The nodes they may have up at once.
    pub max_nodes: usize,
    /// The bytes a queue of one of their links may hold.
    pub max_queue: u64,
    /// Where their limits are set.
    pub limit_origin: PathBuf,
}

impl Student {
    /// The start of their labs' names: their login name made a valid lab
    /// name (`a-z`, `0-9`, `-`), and a `-`. A login name longer than
    /// [`PREFIX_MAX`] is cut, with a hash of it kept, so the lab's own name
    /// still fits.
    pub fn prefix(&self) -> String {
        let chars = turbonet_topo::name_chars(&self.name);
        if chars.is_empty() {
            return format!("u{}-", self.uid);
        }
        if chars.len() < PREFIX_MAX {
            return format!("{chars}-");
        }
        let hash = turbonet_topo::seed::for_name(0, &self.name) & 0xffff;
        let cut = chars[..PREFIX_MAX - 6].trim_end_matches('-');
        format!("{cut}-{hash:04x}-")
    }

    /// Whether lab `name` is theirs: started for them (not merely named
    /// like theirs: another member's login may begin as theirs does).
    pub fn owns(&self, name: &str) -> bool {
        name.starts_with(&self.prefix()) && crate::state::LabDir::of(name).owner() == Some(self.uid)
    }

    /// Their name for a lab: `name` with their prefix (unless it has it).
    pub fn lab_name(&self, name: &str) -> String {
        if name.starts_with(&self.prefix()) {
            name.to_owned()
        } else {
            format!("{}{name}", self.prefix())
        }
    }

    /// Their labs that are up.
    pub fn labs(&self) -> Result<Vec<String>> {
        let root = Path::new(crate::state::RUN_DIR);
        let mut labs = crate::state::labs(root).context("listing the labs that are up")?;
        labs.retain(|l| self.owns(l));
        Ok(labs)
    }

    /// The nodes of their labs that are up.
    pub fn nodes_up(&self) -> Result<usize> {
        Ok(self
            .labs()?
            .iter()
            .filter_map(|l| crate::state::LabDir::of(l).saved_lab().ok())
            .map(|lab| lab.fabric.nodes.len())
            .sum())
    }

    /// The lab a command of theirs is about: the one they name (with or
    /// without their prefix), or their only lab.
    pub fn resolve(&self, named: Option<&str>) -> Result<String> {
        let labs = self.labs()?;
        if let Some(typed) = named {
            let name = self.lab_name(typed);
            if !labs.contains(&name) {
                return Err(Error::NotFound(format!(
                    "you have no lab {typed} up (yours: {})",
                    if labs.is_empty() {
                        "none".to_owned()
                    } else {
                        labs.join(", ")
                    }
                )));
            }
            return Ok(name);
        }
        match labs.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(Error::NotFound(
                "you have no lab up: `turbonet lab start NAME` (`turbonet lab list` has them)"
                    .to_owned(),
            )),
            many => Err(Error::Invalid(format!(
                "you have {} labs up ({}): name one with --lab",
                many.len(),
                many.join(", ")
            ))),
        }
    }

    /// How a command of theirs runs: as them, starting in `cwd`, with
    /// their terminal's type.
    pub fn as_user(&self, cwd: PathBuf, term: Option<String>) -> turbonet_host::process::AsUser {
        turbonet_host::process::AsUser {
            term,
            uid: self.uid,
            gid: self.gid,
            groups: self.groups.clone(),
            cwd,
        }
    }

    /// Refuses a queue that may hold more than their limit, saying why.
    pub fn admit_queue(&self, queue: QueueLimit) -> Result<()> {
        self.admit_link(Some(queue), None, Delay::ZERO)
    }

    /// Refuses link parameters under which a link may hold more than
    /// their limit, saying why: its queue, and what is on the wire while
    /// a frame waits out the delay (the rate times delay plus jitter,
    /// which the link engine keeps in memory).
    pub fn admit_link(
        &self,
        queue: Option<QueueLimit>,
        rate: Option<Rate>,
        delay: Delay,
    ) -> Result<()> {
        let (queued, how) = match queue {
            None => (0, String::new()),
            Some(QueueLimit::Bytes(b)) => (b, format!("a queue of {b} B")),
            Some(QueueLimit::Packets(n)) => (
                u64::from(n) * PACKET_MAX,
                format!(
                    "a queue of {n}p ({n} packets of up to {} KiB)",
                    PACKET_MAX >> 10
                ),
            ),
        };
        let wire = rate.map_or(0, |r| {
            let bytes =
                u128::from(r.bytes_per_sec()) * u128::from(delay.as_nanos()) / 1_000_000_000;
            u64::try_from(bytes).unwrap_or(u64::MAX)
        });
        let total = queued.saturating_add(wire);
        if total > self.max_queue {
            let what = match rate.filter(|_| wire > 0) {
                Some(r) if queued > 0 => format!("{how} and {r} x {delay} in flight"),
                Some(r) => format!("{r} x {delay} in flight"),
                None => how,
            };
            return Err(Error::Refused(format!(
                "{what} may hold {}: your limit is {} a link (set by the administrator in {})",
                mib(total),
                mib(self.max_queue),
                self.limit_origin.display()
            )));
        }
        Ok(())
    }

    /// Holds their starts one at a time until the lock is dropped: from the
    /// count of their nodes to the record that a new lab is theirs, so two
    /// `lab start`s at once cannot both pass their node limit.
    pub fn lock_starts(&self) -> Result<nix::fcntl::Flock<std::fs::File>> {
        let dir = Path::new(SCENARIOS);
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("closing {}", dir.display()))?;
        let path = dir.join(format!(".{}.lock", self.uid));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| e)
            .with_context(|| format!("locking {}", path.display()))
    }

    /// Refuses a lab of `nodes` more nodes past their limit, saying why.
    pub fn admit(&self, lab: &str, nodes: usize) -> Result<()> {
        let up = self.nodes_up()?;
        if up + nodes > self.max_nodes {
            return Err(Error::Refused(format!(
                "lab {lab} has {nodes} nodes and you have {up} up: your limit is {} nodes \
                 (set by the administrator in {})",
                self.max_nodes,
                self.limit_origin.display()
            )));
        }
        Ok(())
    }
}

/// Keeps the copy of a graded lab started for a member as
/// `<SCENARIOS>/<lab>.toml`, readable by root only (it holds the lab's
/// faults and checks: another student must not read them), in a folder
/// only root may list; returns its path.
pub fn save_copy(lab: &str, text: &str) -> Result<PathBuf> {
    use std::io::Write;
    let dir = Path::new(SCENARIOS);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("closing {}", dir.display()))?;
    let copy = dir.join(format!("{lab}.toml"));
    let _ = std::fs::remove_file(&copy);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&copy)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", copy.display()))?;
    Ok(copy)
}

/// `256 MiB`.
fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

/// Lets `student` talk to the FRR daemons of their lab `lab` (`vtysh`
/// through `turbonet exec`): each switch's vty sockets become theirs (the
/// daemons' group, frr, keeping its access), and its daemon directory,
/// still the daemons', lets them through to them but not write in it. The
/// daemons run as a user of the lab's own, never root nor the machine's
/// `frr` (see `routes::routers`), so what a student can make them do
/// (`write memory`, a log file) reaches their lab's switches only.
pub fn hand_routers(lab: &turbonet_topo::Lab, student: &Student) -> Result<()> {
    use turbonet_topo::{Agent, RoutingMode};
    if lab.routing.mode != RoutingMode::Bgp {
        return Ok(());
    }
    let dir = crate::state::LabDir::of(&lab.name);
    for node in lab.fabric.nodes.iter().filter(|n| n.role.is_switch()) {
        if lab.routing.agent_of(node.id) != Agent::Frr {
            continue;
        }
        let home = crate::routes::routers::router_dir(&dir, &node.name);
        // Everything in the directory first, then the directory: once it
        // is theirs, a name in it may be their symlink to a file of root's,
        // so nothing here follows one (O_NOFOLLOW, lchown).
        // vtysh reads it first (the machine's is FRR's group's only); it
        // asks PAM about a user it is not told needs no password, which
        // says "Failed in account validation" to a user outside FRR's
        // group.
        let conf = home.join("vtysh.conf");
        let text = format!(
            "! vtysh for a student of turbonet serve\nusername {} nopassword\n",
            student.name
        );
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&conf)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
            .with_context(|| format!("writing {}", conf.display()))?;
        for entry in
            std::fs::read_dir(&home).with_context(|| format!("reading {}", home.display()))?
        {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "vty") {
                std::os::unix::fs::lchown(&path, Some(student.uid), None)
                    .with_context(|| format!("giving {} to {}", path.display(), student.name))?;
            }
        }
        // The directory stays the daemons': they may pass through it to the
        // sockets, never put a socket of their own where root's `vtysh`
        // (in `lab check`, `show bgp`) would ask it for a grade.
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o711))
            .with_context(|| format!("opening {} to its sockets' user", home.display()))?;
    }
    Ok(())
}

/// What a client asks the service.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// Its arguments, after the program's name.
    pub args: Vec<String>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Whether a file it opened comes along (as descriptor 3 of the
    /// process that runs the request).
    pub file: bool,
    /// The name that file has for the client (for messages only: the
    /// service never opens it).
    #[serde(default)]
    pub file_name: Option<String>,
    /// The client's terminal type (`TERM`), for what it runs in a node.
    #[serde(default)]
    pub term: Option<String>,
    /// The lab the client's `$TURBONET_LAB` names, for a command that
    /// names none.
    #[serde(default)]
    pub lab: Option<String>,
}

/// A request, in the process that runs it: who asked, what, and the file
/// their client passed (its descriptor 3), if any.
pub type Served = (Student, Request, Option<OwnedFd>);

/// A client's request, from the message's `body` and the number of
/// descriptors that came with it (its standard input, output and error,
/// and its file if it says one comes), or what is wrong with it.
pub fn decode_request(body: &[u8], descriptors: usize) -> std::result::Result<Request, String> {
    let request: Request =
        serde_json::from_slice(body).map_err(|e| format!("a malformed request: {e}"))?;
    let expected = 3 + usize::from(request.file);
    if descriptors != expected {
        return Err(format!(
            "a request that says it brings {expected} descriptors came with {descriptors}"
        ));
    }
    Ok(request)
}

/// Serves `socket` for the members of the policy's group until the
/// process is stopped. Each connection gets a process of its own at once
/// (a client that says nothing holds only its own), which reads the
/// request, checks who sent it and runs it in a child with the client's
/// standard input, output and error (and file, as descriptor 3): there,
/// and only there, `serve` returns, with who asked and what; that
/// process's exit code is the client's. A client that goes away (Ctrl-C)
/// stops what it asked for. A user has at most
/// [`Policy::requests`] connections open at once.
///
/// Call it from a process with a single thread: it forks for each request.
pub fn serve(socket: &Path, policy: &Policy) -> Result<Served> {
    close_netns_names()?;
    // Where each user's processes are held to their limits, if the kernel
    // lets us.
    let cgroups = match turbonet_host::cgroup::prepare() {
        Ok(bases) => Some(bases),
        Err(e) => {
            tracing::warn!("users' processes are not held to a limit: {e}");
            None
        }
    };
    let listener = listen_on(socket, policy.gid)?;
    tracing::info!(
        "serving {} for the members of {} (at most {} nodes each unless {} says otherwise)",
        socket.display(),
        policy.group,
        policy.max_nodes,
        policy.origin.display()
    );
    // The process of each open connection, and whose it is.
    let mut open: BTreeMap<Pid, u32> = BTreeMap::new();
    loop {
        reap(&mut open);
        let ready = poll(
            &mut [PollFd::new(listener.as_fd(), PollFlags::POLLIN)],
            PollTimeout::from(1000u16),
        );
        match ready {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("waiting for clients"),
            Ok(_) => {}
        }
        let conn = match descriptors::accept(&listener) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!("accepting a client: {e}");
                continue;
            }
        };
        let Ok(cred) = getsockopt(&conn, sockopt::PeerCredentials) else {
            continue;
        };
        let uid = cred.uid();
        let theirs = open.values().filter(|&&u| u == uid).count();
        if theirs >= policy.requests {
            refuse_busy(&conn, theirs);
            continue;
        }
        match descriptors::fork_single_threaded() {
            Err(e) => tracing::warn!("starting a request: {e}"),
            Ok(ForkResult::Parent { child }) => {
                open.insert(child, uid);
            }
            Ok(ForkResult::Child) => {
                // The service's socket is not this request's: held open
                // here, a new `turbonet serve` would think this one still
                // answers. Its number is the client's later (see `watch`).
                drop(listener);
                match take(conn, uid, policy, cgroups.as_deref()) {
                    Some(request) => return Ok(request),
                    None => std::process::exit(0),
                }
            }
        }
    }
}

/// Closes `/run/netns` to everyone but root (mode 0700): the names there
/// are `nsfs` files, which cannot be made unreadable one by one, and a
/// member must not open another's nodes (nor anyone's) by name. What a
/// member runs in a node holds no capability over a namespace it did not
/// get from its own lab anyway (see [`turbonet_host::process::AsUser`]).
fn close_netns_names() -> Result<()> {
    let dir = Path::new(turbonet_host::namespaces::NETNS_RUN_DIR);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("closing {} to users", dir.display()))
}

/// Tells a client with too many requests open why it is refused, if its
/// request is already there to say it on (never waiting for it).
fn refuse_busy(conn: &OwnedFd, open: usize) {
    let mut buf = vec![0u8; REQUEST_MAX];
    if let Ok((_, fds)) = descriptors::receive_now(conn, &mut buf, 4)
        && let Some(err) = fds.get(2)
    {
        let _ = nix::unistd::write(
            err,
            format!(
                "error: you have {open} commands running through turbonet serve, the most one \
                 user may: wait for one to end\n"
            )
            .as_bytes(),
        );
    }
    answer(conn, 1);
}

/// The listening socket: mode 0660, owned by root and `gid`.
fn listen_on(path: &Path, gid: Gid) -> Result<OwnedFd> {
    // A socket a stopped service left behind; nothing else.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(Error::Invalid(format!(
                "{} exists and is not a socket",
                path.display()
            )));
        }
        if connect_to(path).is_ok() {
            return Err(Error::Refused(format!(
                "another turbonet serve answers at {}",
                path.display()
            )));
        }
        std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
    }
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .context("creating the service's socket")?;
    let addr = UnixAddr::new(path).context("the socket's path")?;
    // Nobody but root may connect until the mode and group are set.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let bound = bind(fd.as_raw_fd(), &addr);
    nix::sys::stat::umask(old);
    bound.with_context(|| format!("binding {}", path.display()))?;
    nix::unistd::chown(path, Some(Uid::from_raw(0)), Some(gid))
        .with_context(|| format!("giving {} to its group", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .with_context(|| format!("opening {} to its group", path.display()))?;
    listen(&fd, Backlog::new(16).expect("a small backlog")).context("listening")?;
    Ok(fd)
}

/// Collects the processes of requests that ended.
fn reap(open: &mut BTreeMap<Pid, u32>) {
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        match status.pid() {
            Some(pid) => {
                open.remove(&pid);
            }
            None => break,
        }
    }
}

/// Sends a client its exit code.
fn answer(conn: &OwnedFd, code: u8) {
    let _ = sendmsg::<()>(
        conn.as_raw_fd(),
        &[IoSlice::new(&[code])],
        &[],
        MsgFlags::empty(),
        None,
    );
}

/// In a connection's own process: reads its request, checks who sent
/// it and forks the process that runs it, where it returns it (here it
/// returns none once that process ended).
fn take(conn: OwnedFd, uid: u32, policy: &Policy, cgroups: Option<&[PathBuf]>) -> Option<Served> {
    // A client that connects and says nothing holds only this process.
    let timeout = TimeVal::new(5, 0);
    setsockopt(&conn, sockopt::ReceiveTimeout, &timeout).ok()?;
    let mut buf = vec![0u8; REQUEST_MAX];
    let (len, fds) = match descriptors::receive(&conn, &mut buf, 4) {
        Ok(got) => got,
        Err(e) => {
            tracing::warn!("a request of user {uid}: {e}");
            answer(&conn, 2);
            return None;
        }
    };
    let say = |text: &str| {
        if let Some(err) = fds.get(2) {
            let _ = nix::unistd::write(err, format!("error: {text}\n").as_bytes());
        }
    };
    let request = match decode_request(&buf[..len], fds.len()) {
        Ok(r) => r,
        Err(why) => {
            say(&format!(
                "{why} (is this turbonet the same version as the service's?)"
            ));
            answer(&conn, 2);
            return None;
        }
    };
    // Namespaces are not a command's input or output: handed to a
    // command in a node, one would name a network it must not reach.
    if fds.iter().any(descriptors::is_namespace) {
        say("a namespace is not a command's input, output or error");
        answer(&conn, 2);
        return None;
    }
    let student = match member(uid, policy) {
        Ok(s) => s,
        Err(why) => {
            say(&why);
            answer(&conn, 1);
            return None;
        }
    };
    tracing::info!(
        "{} ({}): turbonet {}",
        student.name,
        student.uid,
        request.args.join(" ")
    );
    // This process and all it starts count against their limits.
    if let Some(bases) = cgroups
        && let Err(e) = turbonet_host::cgroup::enter(bases, uid, policy.limits)
    {
        tracing::warn!("confining a request of {}: {e}", student.name);
        say(&format!(
            "the service could not hold your command to your limits: {e}"
        ));
        answer(&conn, 1);
        return None;
    }
    watch(conn, fds).map(|file| (student, request, file))
}

/// Who `uid` is, if a member (root is not served: it runs turbonet
/// itself).
fn member(uid: u32, policy: &Policy) -> std::result::Result<Student, String> {
    if uid == 0 {
        return Err("root runs turbonet directly, not through turbonet serve".to_owned());
    }
    let user = User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .ok_or_else(|| format!("user id {uid} has no account"))?;
    let name = CString::new(user.name.as_str()).map_err(|_| "a user name with a NUL")?;
    let groups = nix::unistd::getgrouplist(&name, user.gid)
        .map_err(|e| format!("the groups of {}: {e}", user.name))?;
    if !groups.contains(&policy.gid) {
        return Err(format!(
            "{} is not in the group {}: ask the administrator (`usermod -aG {} {}`, then log in again)",
            user.name, policy.group, policy.group, user.name
        ));
    }
    Ok(Student {
        max_nodes: policy.max_nodes(&user.name),
        max_queue: policy.max_queue,
        limit_origin: policy.origin.clone(),
        uid,
        gid: user.gid.as_raw(),
        groups: groups.iter().map(|g| g.as_raw()).collect(),
        name: user.name,
    })
}

/// In the request's process: forks the child that runs it (a process
/// group of its own, the client's descriptors as 0, 1, 2 and 3), where it
/// returns the client's file (3) if one came; here, waits for that child,
/// stops its group if the client goes away, tells the client its exit
/// code and returns none.
fn watch(conn: OwnedFd, fds: Vec<OwnedFd>) -> Option<Option<OwnedFd>> {
    let child = match descriptors::fork_single_threaded() {
        Err(e) => {
            let why = if e.raw_os_error() == Some(libc::EAGAIN) {
                "you have as many processes running as your limit allows (max_processes, set \
                 by the administrator): end some first"
                    .to_owned()
            } else {
                format!("the service could not start your command: {e}")
            };
            if let Some(err) = fds.get(2) {
                let _ = nix::unistd::write(err, format!("error: {why}\n").as_bytes());
            }
            answer(&conn, 1);
            return None;
        }
        Ok(ForkResult::Child) => {
            let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
            turbonet_host::process::default_signals();
            // Every other descriptor closes (the listener, the connection):
            // their numbers are the client's now.
            std::mem::forget(conn);
            let Ok(file) = descriptors::become_stdio(fds) else {
                std::process::exit(1)
            };
            // Root works from `/`: a relative path of the service's (a
            // capture file) must not land in a folder the student chose.
            // What they run (`exec`) starts in theirs, entered as them.
            let _ = std::env::set_current_dir("/");
            return Some(file);
        }
        Ok(ForkResult::Parent { child }) => child,
    };
    drop(fds);
    let conn = &conn;
    loop {
        let code = match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => Some(code.clamp(0, 255) as u8),
            Ok(WaitStatus::Signaled(_, signal, _)) => Some(128 + signal as u8),
            Ok(_) => None,
            Err(_) => Some(1),
        };
        if let Some(code) = code {
            answer(conn, code);
            return None;
        }
        let mut pfd = [PollFd::new(conn.as_fd(), PollFlags::POLLIN)];
        let gone = match poll(&mut pfd, PollTimeout::from(100u16)) {
            Ok(0) => false,
            Ok(_) => true,
            Err(e) => e != nix::errno::Errno::EINTR,
        };
        if gone {
            stop(child);
            return None;
        }
    }
}

/// Stops a request the client no longer waits for: SIGINT to its process
/// group (the command and everything it started), SIGKILL to whatever of
/// it is left a few seconds later.
fn stop(child: Pid) {
    let _ = killpg(child, Signal::SIGINT);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let _ = waitpid(child, Some(WaitPidFlag::WNOHANG));
        // No process left in the group.
        if killpg(child, None).is_err() {
            return;
        }
        if Instant::now() >= deadline {
            let _ = killpg(child, Signal::SIGKILL);
            let _ = waitpid(child, None);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn connect_to(path: &Path) -> std::io::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let addr = UnixAddr::new(path)?;
    connect(fd.as_raw_fd(), &addr)?;
    Ok(fd)
}

/// Asks the service at `socket` to run `request` with this process's
/// standard input, output and error (and `file`, if any); returns the exit
/// code it reports.
pub fn forward(socket: &Path, request: &Request, file: Option<&std::fs::File>) -> Result<u8> {
    let conn = connect_to(socket).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            Error::NotFound(format!(
                "this command needs root, or turbonet serve running for your group (nothing \
                 answers at {}): ask the administrator",
                socket.display()
            ))
        }
        std::io::ErrorKind::PermissionDenied => Error::Refused(format!(
            "this command needs root, or membership of the group turbonet serve runs labs \
             for ({} is not open to you): ask the administrator",
            socket.display()
        )),
        _ => Error::Context {
            what: format!("connecting to {}", socket.display()),
            source: Box::new(Error::Io(e)),
        },
    })?;
    let body = serde_json::to_vec(request)?;
    let mut fds: Vec<RawFd> = vec![0, 1, 2];
    fds.extend(file.map(AsRawFd::as_raw_fd));
    sendmsg::<()>(
        conn.as_raw_fd(),
        &[IoSlice::new(&body)],
        &[ControlMessage::ScmRights(&fds)],
        // A service gone is an error, not SIGPIPE (the command keeps its
        // default for its pipes).
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .context("sending the request")?;
    let mut code = [0u8; 1];
    let n = nix::sys::socket::recv(conn.as_raw_fd(), &mut code, MsgFlags::empty())
        .context("waiting for the command")?;
    if n == 0 {
        return Err(Error::Failed(
            "turbonet serve ended the command without an exit code".to_owned(),
        ));
    }
    Ok(code[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn student(name: &str) -> Student {
        Student {
            name: name.to_owned(),
            uid: 1234,
            gid: 1234,
            groups: Vec::new(),
            max_nodes: MAX_NODES,
            max_queue: MAX_QUEUE,
            limit_origin: PathBuf::from(CONFIG),
        }
    }

    #[test]
    fn a_members_labs_are_named_after_them_and_fit_however_long_their_login() {
        assert_eq!(student("alice").lab_name("trouble"), "alice-trouble");
        assert_eq!(student("alice").lab_name("alice-trouble"), "alice-trouble");
        assert_eq!(student("Bob.Smith").prefix(), "bob-smith-");
        assert_eq!(student("___").prefix(), "u1234-");
        let long = student("christopher.alexander-montgomery");
        let prefix = long.prefix();
        assert!(prefix.len() <= PREFIX_MAX, "{prefix}");
        assert!(prefix.starts_with("christophe"), "{prefix}");
        // Two long logins that begin alike are told apart.
        assert_ne!(prefix, student("christopher.alexander-morrison").prefix());
        let name = long.lab_name("ecmp-polarize");
        assert!(name.len() <= turbonet_topo::LAB_NAME_MAX, "{name}");
        assert_eq!(turbonet_topo::name_chars(&name), name);
    }

    #[test]
    fn a_queue_is_held_to_the_memory_it_may_take() {
        let s = student("alice");
        assert!(s.admit_queue(QueueLimit::Packets(1000)).is_ok());
        assert!(s.admit_queue(QueueLimit::Bytes(64 << 20)).is_ok());
        let e = s.admit_queue(QueueLimit::Packets(100_000)).unwrap_err();
        assert!(
            e.to_string()
                .contains("a queue of 100000p (100000 packets of up to 64 KiB) may hold 6250 MiB"),
            "{e}"
        );
        assert!(s.admit_queue(QueueLimit::Bytes(1 << 30)).is_err());
        // What is on the wire counts: 10 Gbit/s for 30 s is 35 GiB.
        let e = s
            .admit_link(None, Some(Rate::from_gbit(10)), Delay::from_secs(30))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("10gbit x 30s in flight may hold 35763 MiB"),
            "{e}"
        );
        // 1 Gbit/s for 100 ms (12 MB) and a 1000-packet queue fit.
        assert!(
            s.admit_link(
                Some(QueueLimit::Packets(1000)),
                Some(Rate::from_gbit(1)),
                Delay::from_millis(100)
            )
            .is_ok()
        );
    }
}
