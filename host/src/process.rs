//! Processes turbonet starts and finds again: detached servers (the lab
//! daemon, the soft switch), programs inside a node's namespace (FRR, BIRD,
//! BMV2, `exec`), and the checks that a recorded pid is still the program
//! that was started before it is signalled.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How a child starts, set between fork and exec.
#[derive(Debug, Default)]
pub struct Start<'a> {
    /// Join this network namespace.
    pub namespace: Option<&'a OwnedFd>,
    /// A session of its own (detached from the caller's terminal and
    /// signals).
    pub new_session: bool,
    /// A private mount namespace with `/sys` remounted, so tools that read
    /// sysfs see the namespace's interfaces (as `ip netns exec` does).
    pub private_sysfs: bool,
    /// With `private_sysfs`: this file bind-mounted over `/etc/hosts` (the
    /// lab's names).
    pub hosts: Option<&'a Path>,
    /// stdin from `/dev/null`, stdout and stderr to (a new) this file.
    pub log: Option<&'a Path>,
    /// A UTS namespace of its own with this host name (a node's name, so
    /// `hostname` and MPI's processor name say which node a process is on).
    pub hostname: Option<&'a str>,
    /// Run as this user, not as root (needs `private_sysfs` and
    /// `user_namespace`).
    pub as_user: Option<&'a AsUser>,
    /// With `as_user`: the user namespace they join, the one that owns
    /// the network namespace (see [`AsUser`]).
    pub user_namespace: Option<&'a OwnedFd>,
    /// With `private_sysfs`: `/etc` seen through a read-only overlay with
    /// this directory on top, its files hiding `/etc`'s (a confined
    /// daemon's own `passwd` and `group`). An overlay, not a bind mount of
    /// each file: `useradd` replaces `/etc/passwd` by a rename, which
    /// would leave a file's bind mount on the old one, out of sight.
    pub etc_over: Option<&'a Path>,
    /// With `private_sysfs`: an empty tmpfs of its own over `/tmp`,
    /// `/var/tmp` and `/dev/shm`.
    pub private_tmp: bool,
    /// With `private_sysfs`: this directory bind-mounted over `/run/frr`
    /// (a switch's FRR daemons' sockets, so a plain `vtysh` reaches them).
    pub frr: Option<&'a Path>,
}

/// A user a command runs as, with only the capabilities a node's network
/// needs: `CAP_NET_ADMIN` (routes, links, the namespace's `net.*`
/// sysctls) and `CAP_NET_RAW` (ping, tcpdump), held in the user namespace
/// of theirs that owns their lab's network namespaces
/// ([`crate::namespaces::new_user_namespace`]): the kernel checks
/// a network capability against the owner of the namespace acted on, so
/// they hold none over any other namespace — another student's, root's,
/// the machine's — whatever descriptor of one reaches them. The command
/// also gets a PID namespace of its own (it sees only its own processes
/// in `/proc`), `/run/netns` hidden under an empty tmpfs, no capability
/// beyond those two in its bounding set, and no new privileges from
/// set-user-id programs. Its file access is the user's own.
#[derive(Debug, Clone)]
pub struct AsUser {
    /// The user.
    pub uid: u32,
    /// Their primary group.
    pub gid: u32,
    /// Every group they are in.
    pub groups: Vec<u32>,
    /// Where the command starts, entered as them (the root's way there
    /// is not theirs); `/` when they may not enter it.
    pub cwd: std::path::PathBuf,
    /// Their terminal's type (`TERM`), if they have one: the command's
    /// environment is theirs, nothing of root's.
    pub term: Option<String>,
}

impl Start<'_> {
    /// Prepares `command` to start this way.
    pub fn prepare(&self, command: &mut Command) -> io::Result<()> {
        if let Some(log) = self.log {
            let file = fs::File::create(log).map_err(|e| {
                io::Error::new(e.kind(), format!("creating {}: {e}", log.display()))
            })?;
            command
                .stdin(Stdio::null())
                .stdout(file.try_clone()?)
                .stderr(file);
        }
        let fd = self.namespace.map(AsRawFd::as_raw_fd);
        let (new_session, private_sysfs) = (self.new_session, self.private_sysfs);
        // Converted before the fork: the child must not allocate.
        let hosts = self
            .hosts
            .map(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()))
            .transpose()?;
        let hostname = self.hostname.map(std::ffi::OsString::from);
        let etc_over = match self.etc_over {
            Some(dir) if dir.as_os_str().as_encoded_bytes().contains(&b':') => {
                return Err(io::Error::other(format!(
                    "{} cannot be an overlay's layer (it has a `:`)",
                    dir.display()
                )));
            }
            Some(dir) => Some(std::ffi::CString::new(format!(
                "lowerdir={}:/etc",
                dir.display()
            ))?),
            None => None,
        };
        let private_tmp = self.private_tmp;
        let frr = self
            .frr
            .map(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()))
            .transpose()?;
        // A switch directory with a vtysh.conf of its own (one handed to a
        // student) stands for /etc/frr too, which only root and FRR's group
        // may enter.
        let etc_frr = self
            .frr
            .filter(|p| p.join("vtysh.conf").is_file() && Path::new("/etc/frr").is_dir())
            .map(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()))
            .transpose()?;
        let as_user = self.as_user.cloned();
        if as_user.is_some() && !private_sysfs {
            return Err(io::Error::other(
                "a command run as a user needs a mount namespace of its own",
            ));
        }
        let userns = self.user_namespace.map(AsRawFd::as_raw_fd);
        if as_user.is_some() && userns.is_none() {
            return Err(io::Error::other(
                "a command run as a user needs a user namespace of theirs",
            ));
        }
        let cwd = match &as_user {
            Some(u) => Some(
                std::ffi::CString::new(u.cwd.as_os_str().as_encoded_bytes())
                    .map_err(|_| io::Error::other("a working directory with a NUL"))?,
            ),
            None => None,
        };
        let groups: Vec<nix::unistd::Gid> = as_user
            .as_ref()
            .map(|u| {
                u.groups
                    .iter()
                    .map(|g| nix::unistd::Gid::from_raw(*g))
                    .collect()
            })
            .unwrap_or_default();
        // SAFETY: between fork and exec the child only makes
        // async-signal-safe system calls (setns, unshare, mount, umount2,
        // sethostname, setsid) and allocates nothing (nix passes short
        // literal paths on the stack, `hosts` and `hostname` are converted
        // already); `fd` stays open in the parent until spawn returns.
        unsafe {
            command.pre_exec(move || {
                if let Some(fd) = fd {
                    setns(BorrowedFd::borrow_raw(fd), CloneFlags::CLONE_NEWNET)?;
                }
                // Mounts only once the new mount namespace receives nothing
                // back from ours and sends nothing to it: a bind over
                // /etc/hosts must never reach the machine's.
                if private_sysfs
                    && unshare(CloneFlags::CLONE_NEWNS).is_ok()
                    && mount(
                        None::<&str>,
                        "/",
                        None::<&str>,
                        MsFlags::MS_SLAVE | MsFlags::MS_REC,
                        None::<&str>,
                    )
                    .is_ok()
                {
                    if umount2("/sys", MntFlags::MNT_DETACH).is_ok() {
                        let _ = mount(
                            Some("sysfs"),
                            "/sys",
                            Some("sysfs"),
                            MsFlags::empty(),
                            None::<&str>,
                        );
                    }
                    if let Some(hosts) = &hosts {
                        let _ = mount(
                            Some(hosts.as_c_str()),
                            "/etc/hosts",
                            None::<&str>,
                            MsFlags::MS_BIND,
                            None::<&str>,
                        );
                    }
                    if let Some(layers) = &etc_over {
                        mount(
                            Some(c"overlay"),
                            c"/etc",
                            Some(c"overlay"),
                            MsFlags::MS_RDONLY,
                            Some(layers.as_c_str()),
                        )?;
                    }
                    if private_tmp {
                        for dir in [c"/tmp", c"/var/tmp", c"/dev/shm"] {
                            let _ = mount(
                                Some("tmpfs"),
                                dir,
                                Some("tmpfs"),
                                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                                Some("mode=1777,size=64m"),
                            );
                        }
                    }
                    if let Some(frr) = &frr {
                        let _ = mount(
                            Some(frr.as_c_str()),
                            "/run/frr",
                            None::<&str>,
                            MsFlags::MS_BIND,
                            None::<&str>,
                        );
                    }
                    if let Some(conf) = &etc_frr {
                        let _ = mount(
                            Some(conf.as_c_str()),
                            "/etc/frr",
                            None::<&str>,
                            MsFlags::MS_BIND,
                            None::<&str>,
                        );
                    }
                }
                if let Some(name) = &hostname {
                    unshare(CloneFlags::CLONE_NEWUTS)?;
                    nix::unistd::sethostname(name)?;
                }
                if new_session {
                    nix::unistd::setsid()?;
                }
                if let (Some(user), Some(userns)) = (&as_user, userns) {
                    confine(user, &groups, BorrowedFd::borrow_raw(userns))?;
                }
                if let Some(cwd) = &cwd
                    && nix::unistd::chdir(cwd.as_c_str()).is_err()
                {
                    nix::unistd::chdir(c"/")?;
                }
                Ok(())
            });
        }
        Ok(())
    }

    /// Starts `command` this way.
    pub fn spawn(&self, command: &mut Command) -> io::Result<std::process::Child> {
        self.prepare(command)?;
        command.spawn()
    }
}

/// Between fork and exec: hides the machine's named network namespaces,
/// moves into a PID namespace of its own (two forks: an init that reaps,
/// and the command), joins the user namespace `userns` and becomes `user`
/// there with `CAP_NET_ADMIN` and `CAP_NET_RAW` only ([`AsUser`]). The
/// processes left waiting pass the command's exit status up and exit.
///
/// Async-signal-safe system calls only; `groups` was built before the fork.
fn confine(user: &AsUser, groups: &[nix::unistd::Gid], userns: BorrowedFd<'_>) -> io::Result<()> {
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};
    /// Waits for `child` and exits as it did; closes every descriptor but
    /// the standard ones first (the spawner's error pipe among them, so it
    /// learns of the exec as soon as the command's own copy closes).
    fn relay(child: nix::unistd::Pid) -> ! {
        // SAFETY: close_range on descriptors this process no longer needs.
        unsafe {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        }
        let code = loop {
            match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, code)) => break code,
                Ok(WaitStatus::Signaled(_, signal, _)) => break 128 + signal as i32,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => break 1,
            }
        };
        // SAFETY: exiting without running the parent's atexit handlers.
        unsafe { libc::_exit(code) }
    }
    let hidden = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if std::path::Path::new("/run/netns").exists() {
        mount(
            Some("tmpfs"),
            "/run/netns",
            Some("tmpfs"),
            hidden,
            Some("mode=0755"),
        )?;
    }
    unshare(CloneFlags::CLONE_NEWPID)?;
    // SAFETY: fork between fork and exec; the branches make only
    // async-signal-safe calls.
    if let ForkResult::Parent { child } = unsafe { fork() }? {
        relay(child);
    }
    // PID 1 of the new namespace: its /proc, then the command as its child
    // (PID 1 ignores the signals a terminal sends).
    let _ = mount(Some("proc"), "/proc", Some("proc"), hidden, None::<&str>);
    // SAFETY: as above.
    if let ForkResult::Parent { child } = unsafe { fork() }? {
        relay(child);
    }
    const NET_ADMIN: u32 = 12;
    const NET_RAW: u32 = 13;
    let caps = (1u32 << NET_ADMIN) | (1 << NET_RAW);
    // Their groups while still root of the machine's user namespace: in
    // theirs, only their own group exists to set.
    nix::unistd::setgroups(groups)?;
    // Every capability from here on is the user namespace's: over the
    // namespaces it owns, and no other.
    setns(userns, CloneFlags::CLONE_NEWUSER)?;
    // SAFETY: prctl and capset with values and structures laid out as the
    // kernel's ABI (capability version 3: two 32-bit words per set).
    unsafe {
        // Nothing but the two, even through a program's file capabilities.
        for cap in 0..64 {
            if cap != NET_ADMIN && cap != NET_RAW {
                let _ = libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
            }
        }
        if libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let (uid, gid) = (
        nix::unistd::Uid::from_raw(user.uid),
        nix::unistd::Gid::from_raw(user.gid),
    );
    nix::unistd::setresgid(gid, gid, gid)?;
    nix::unistd::setresuid(uid, uid, uid)?;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [
        Data {
            effective: caps,
            permitted: caps,
            inheritable: caps,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: see above.
    unsafe {
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for cap in [NET_ADMIN, NET_RAW] {
            if libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                cap as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The program that starts this binary again: its path, or, when that file
/// was replaced or removed since this process started (an upgrade, a
/// rebuild), the image still running (`/proc/self/exe`); a process started
/// from the latter names itself with [`name_self`].
pub fn self_exe() -> io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    if exe.exists() {
        Ok(exe)
    } else {
        Ok("/proc/self/exe".into())
    }
}

/// Names this process `turbonet` (its `comm`, which [`turbonet_alive`]
/// checks) whatever path it was started from. Call it first thing: the
/// name is the calling thread's, and threads started later inherit it.
pub fn name_self() {
    if let Err(e) = nix::sys::prctl::set_name(c"turbonet") {
        tracing::warn!("naming the process: {e}");
    }
}

/// Starts this binary with `args`, detached from the caller: a session of
/// its own, no stdin, its output to (a new) `log`.
pub fn spawn_self(args: &[&std::ffi::OsStr], log: &Path) -> io::Result<std::process::Child> {
    let mut command = Command::new(self_exe()?);
    command.args(args);
    Start {
        new_session: true,
        log: Some(log),
        ..Start::default()
    }
    .spawn(&mut command)
}

/// True when the turbonet process with this pid is still running: not a
/// zombie, and not another program that reused the pid.
pub fn turbonet_alive(pid: u32) -> bool {
    alive(pid, "turbonet")
}

/// [`turbonet_alive`] for a process this one just started from its own
/// binary ([`spawn_self`]): until it names itself `turbonet` it has the name
/// of the file it was started from, which is this process's when the
/// binary was installed under another name.
pub fn spawned_alive(pid: u32) -> bool {
    turbonet_alive(pid)
        || fs::read_to_string("/proc/self/comm").is_ok_and(|me| alive(pid, me.trim_end()))
}

/// True when `pid` is a live (not zombie) process named `program` (its
/// `comm`, at most 15 bytes).
pub fn alive(pid: u32, program: &str) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) state ..."; comm may contain spaces and parentheses.
    let Some((head, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let comm = head.split_once('(').map_or("", |(_, c)| c);
    let state = rest.trim_start().chars().next().unwrap_or('X');
    comm == program && !matches!(state, 'Z' | 'X' | 'x')
}

/// Stops the processes `pids` (each with the program name it must still
/// have): SIGTERM, then SIGKILL for those still running after `grace`. A
/// pid that is gone or now names another program is left alone.
pub fn stop(pids: &[(u32, &str)], grace: Duration) {
    let running = |&&(pid, program): &&(u32, &str)| alive(pid, program);
    for &(pid, _) in pids.iter().filter(running) {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|p| running(&p)) {
        if Instant::now() >= deadline {
            for &(pid, _) in pids.iter().filter(running) {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// True when running as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Restores the default action of SIGPIPE, so a command that prints dies
/// quietly on a closed pipe (`turbonet show links | head`) as Unix tools
/// do. Servers keep Rust's default of ignoring it: a peer that resets its
/// connection must cost them an EPIPE, not their life. Call it before any
/// thread exists.
pub fn default_sigpipe() {
    // SAFETY: setting a signal disposition before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Restores the default action of the signals that stop a command
/// (SIGINT, SIGQUIT, SIGTERM, SIGPIPE), whatever the process inherited (a
/// service started in the background ignores SIGINT, and ignored signals
/// stay ignored across exec). Call it before any thread exists.
pub fn default_signals() {
    // SAFETY: setting signal dispositions before any thread exists.
    unsafe {
        for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGPIPE] {
            libc::signal(signal, libc::SIG_DFL);
        }
    }
}

/// CPU seconds (user + system) a process has used.
pub fn cpu_seconds(pid: u32) -> io::Result<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("malformed stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the comm: state is field 3, utime 14, stime 15 (1-based).
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((ticks(11) + ticks(12)) / clock_ticks_per_second())
}

/// Time on a CPU, in nanoseconds, of each thread of `pid` whose name
/// begins with `prefix` (`/proc/PID/task/*/schedstat`), in name order.
pub fn threads_cpu_ns(pid: u32, prefix: &str) -> io::Result<Vec<u64>> {
    let mut threads = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task"))? {
        let dir = task?.path();
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
        let ns = stat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        threads.push((comm, ns));
    }
    threads.sort();
    Ok(threads.into_iter().map(|(_, ns)| ns).collect())
}

/// The machine's CPUs together since boot, in clock ticks: (busy, all),
/// from `/proc/stat` (busy is all but idle and I/O wait).
pub fn machine_ticks() -> io::Result<(u64, u64)> {
    let text = fs::read_to_string("/proc/stat")?;
    let line = text.lines().next().unwrap_or_default();
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let all: u64 = (0..8).map(at).sum();
    Ok((all - at(3) - at(4), all))
}

/// The clock ticks per second `/proc/*/stat` times are counted in.
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64).max(1.0)
}

/// How a child process ended, for a log or an event: `exited with exit
/// status: 1`, or `killed by signal 9`.
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    status.signal().map_or_else(
        || format!("exited with {status}"),
        |s| format!("killed by signal {s}"),
    )
}

/// The exit code a shell reports for `status`: the code, or 128 + the
/// signal that killed the process.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// The directory where a process started by `turbonet bench` (and what it
/// starts) writes its own peak RSS, in a file named by its pid.
pub const PEAK_RSS_DIR: &str = "TURBONET_PEAK_RSS_DIR";

/// A running process's peak RSS (`VmHWM`), KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The processes `pid` started that are still running, each with its
/// command line (arguments joined by spaces).
pub fn children(pid: u32) -> Vec<(u32, String)> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<u32>>()
        })
        .map(|child| {
            let cmdline = fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            let words: Vec<String> = cmdline
                .split(|&b| b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            (child, words.join(" "))
        })
        .collect()
}

/// Writes this process's peak RSS to its file in [`PEAK_RSS_DIR`], if set:
/// a child's `ru_maxrss` starts at its parent's peak when the parent
/// is larger (the kernel keeps the exec'ing image's high-water mark), so a
/// benchmark asks the process itself.
pub fn report_peak_rss() {
    if let (Some(dir), Some(kib)) = (
        std::env::var_os(PEAK_RSS_DIR),
        peak_rss_kib(std::process::id()),
    ) {
        let path = Path::new(&dir).join(std::process::id().to_string());
        let _ = fs::write(path, kib.to_string());
    }
}

/// Reaps `child` and returns its peak resident memory in KiB (from
/// `wait4`'s rusage: at least its parent's when it was started, see
/// [`report_peak_rss`]) with its exit status.
pub fn wait_with_peak(child: &std::process::Child) -> io::Result<(std::process::ExitStatus, u64)> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid pointers.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((
        std::process::ExitStatus::from_raw(status),
        usage.ru_maxrss as u64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_child_is_listed_with_its_command_line() {
        let mut child = Command::new("sleep").args(["30", "--"]).spawn().unwrap();
        let expected = (child.id(), "sleep 30 --".to_owned());
        // A child is listed from its fork, with its command line once its
        // exec is done.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut listed = children(std::process::id());
        while !listed.contains(&expected) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            listed = children(std::process::id());
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(listed.contains(&expected), "{listed:?}");
    }

    #[test]
    fn only_a_running_turbonet_counts_as_alive() {
        // The test binary is `turbonet_lab-<hash>`, not `turbonet`.
        assert!(!turbonet_alive(std::process::id()));
        assert!(!turbonet_alive(u32::MAX));
    }
}
