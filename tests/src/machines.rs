//! Machines emulated on this one, for labs over several: each machine a
//! network namespace on a shared bridge (the underlay, addresses from
//! 198.18.0.0/15, MTU 9100), with a mount namespace of its own whose
//! `/run/netns` and `/run/turbonet` are private tmpfs mounts, so that an
//! unmodified `turbonet worker` run in it sees a machine of its own: its
//! labs, its namespaces, its daemon. A process (`sleep`) holds each
//! machine's namespaces for as long as the fixture lives, so a worker
//! killed and started again finds its machine as it left it.
//!
//! Everything is removed when the fixture is dropped, a test's panic
//! included: every worker stopped, the lab taken down on every machine,
//! the machines' namespaces deleted.

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The port worker 0 listens on, in its machine's namespace.
pub const COORDINATOR_PORT: u16 = 7789;

/// The underlay's MTU.
pub const UNDERLAY_MTU: u32 = 9100;

/// A number of machines, emulated.
#[allow(missing_debug_implementations)] // child processes
pub struct Machines {
    tag: String,
    names: Vec<String>,
    holders: Vec<Child>,
    workers: Vec<Option<Worker>>,
    token: PathBuf,
    /// The lab the workers run (taken down on every machine at the end).
    lab: Option<String>,
}

/// A worker running on a machine, and what it has said.
struct Worker {
    child: Child,
    said: Arc<Mutex<Vec<String>>>,
    /// Lines before this one were matched by [`Machines::wait_for`].
    read: usize,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Machines {
    /// `count` machines named after `tag` (a few characters, unique to
    /// the test): `tnm-TAG-0` and on, on a bridge in `tnm-TAG-hub`.
    pub fn new(tag: &str, count: usize) -> Machines {
        let hub = format!("tnm-{tag}-hub");
        let names: Vec<String> = (0..count).map(|i| format!("tnm-{tag}-{i}")).collect();
        let token = std::env::temp_dir().join(format!("tnm-{tag}-{}.token", std::process::id()));
        let mut machines = Machines {
            tag: tag.to_owned(),
            names: Vec::new(),
            holders: Vec::new(),
            workers: Vec::new(),
            token,
            lab: None,
        };
        ip(&["netns", "add", &hub]);
        machines.names.push(hub.clone()); // deleted with the rest
        let mtu = UNDERLAY_MTU.to_string();
        ip(&[
            "-n", &hub, "link", "add", "br0", "mtu", &mtu, "type", "bridge",
        ]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        for (i, name) in names.iter().enumerate() {
            ip(&["netns", "add", name]);
            machines.names.push(name.clone());
            let port = format!("p{i}");
            ip(&[
                "-n", &hub, "link", "add", &port, "mtu", &mtu, "type", "veth", "peer", "name",
                "u0", "mtu", &mtu, "netns", name,
            ]);
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"]);
            let addr = format!("{}/15", Machines::address(i));
            ip(&["-n", name, "addr", "add", &addr, "dev", "u0"]);
            ip(&["-n", name, "link", "set", "u0", "up"]);
            ip(&["-n", name, "link", "set", "lo", "up"]);
            // The machine's own mounts, held by a process that lives as
            // long as the fixture.
            let holder = Command::new("ip")
                .args(["netns", "exec", name, "sh", "-c"])
                .arg(
                    "mount -t tmpfs tnm /run/netns && mkdir -p /run/turbonet && \
                     mount -t tmpfs tnm /run/turbonet && echo ready && exec sleep infinity",
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("ip netns exec runs");
            machines.holders.push(holder);
            let holder = machines.holders.last_mut().expect("just pushed");
            let mut ready = String::new();
            BufReader::new(holder.stdout.take().expect("piped"))
                .read_line(&mut ready)
                .expect("the holder says");
            assert_eq!(ready.trim(), "ready", "machine {name} mounted its own /run");
            machines.workers.push(None);
        }
        std::fs::write(&machines.token, format!("tnm-{tag}-token\n")).expect("the token");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&machines.token, std::fs::Permissions::from_mode(0o600))
            .expect("token mode");
        machines
    }

    /// Machine `i`'s underlay address.
    pub fn address(i: usize) -> Ipv4Addr {
        let n = u32::from(Ipv4Addr::new(198, 18, 0, 1)) + i as u32;
        Ipv4Addr::from(n)
    }

    /// Machine `i`'s network namespace.
    pub fn namespace(&self, i: usize) -> &str {
        &self.names[i + 1]
    }

    /// A command run on machine `i` (its network and mount namespaces).
    pub fn on(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("-t")
            .arg(self.holders[i].id().to_string())
            .args(["-m", "-n", "--"])
            .arg(program);
        c
    }

    /// `turbonet ARGS` run on machine `i`.
    pub fn turbonet(&self, i: usize, args: &[&str]) -> Output {
        let mut c = self.on(i, crate::binary());
        c.env("TURBONET_KERNEL_ENGINE", "off")
            .env_remove("TURBONET_LAB")
            .args(args);
        c.output().expect("turbonet runs")
    }

    /// Starts worker `i` of lab `lab` (its scenario at `file`) over every
    /// machine.
    pub fn start_worker(&mut self, i: usize, lab: &str, file: &Path) {
        self.lab = Some(lab.to_owned());
        let coordinator = format!("{}:{COORDINATOR_PORT}", Machines::address(0));
        let mut c = self.on(i, crate::binary());
        c.env("TURBONET_KERNEL_ENGINE", "off")
            .env_remove("TURBONET_LAB")
            .env_remove("TURBONET_LOG")
            .args(["worker", "--index", &i.to_string()])
            .args(["--of", &(self.names.len() - 1).to_string()])
            .args(["--coordinator", &coordinator, "--rendezvous", "120"])
            .arg("--token-file")
            .arg(&self.token)
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("turbonet worker starts");
        let said = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped");
        let (tag, heard) = (format!("{}/{i}", self.tag), said.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[worker {tag}] {line}");
                heard.lock().expect("not poisoned").push(line);
            }
        });
        self.workers[i] = Some(Worker {
            child,
            said,
            read: 0,
        });
    }

    /// Waits until worker `i` says a line containing `text` (after the
    /// line the last wait matched), failing after `timeout` with what it
    /// said.
    pub fn wait_for(&mut self, i: usize, text: &str, timeout: Duration) {
        let start = Instant::now();
        loop {
            let worker = self.workers[i].as_mut().expect("worker started");
            let found = (worker.said.lock().expect("not poisoned").iter())
                .skip(worker.read)
                .position(|l| l.contains(text));
            if let Some(at) = found {
                worker.read += at + 1;
                return;
            }
            if let Ok(Some(status)) = worker.child.try_wait() {
                panic!(
                    "worker {i} ended ({status}) before saying {text:?}:\n{}",
                    self.said(i)
                );
            }
            assert!(
                start.elapsed() < timeout,
                "worker {i} did not say {text:?} within {timeout:?}:\n{}",
                self.said(i)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Everything worker `i` said.
    pub fn said(&self, i: usize) -> String {
        self.workers[i].as_ref().map_or_else(String::new, |w| {
            w.said.lock().expect("not poisoned").join("\n")
        })
    }

    /// Kills worker `i` at once (SIGKILL): its part stays up.
    pub fn kill_worker(&mut self, i: usize) {
        if let Some(mut w) = self.workers[i].take() {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
    }

    /// Stops worker `i` as a user would (SIGTERM), waiting for it to take
    /// its part down; its exit status.
    pub fn stop_worker(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        let mut w = self.workers[i].take()?;
        let pid = nix::unistd::Pid::from_raw(w.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(120) {
            if let Ok(Some(status)) = w.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = w.child.kill();
        w.child.wait().ok()
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        for i in 0..self.workers.len() {
            self.stop_worker(i);
        }
        if let Some(lab) = self.lab.clone() {
            for i in 0..self.holders.len() {
                let _ = self.turbonet(i, &["down", &lab]);
            }
        }
        for holder in &mut self.holders {
            let _ = holder.kill();
            let _ = holder.wait();
        }
        for name in self.names.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
        let _ = std::fs::remove_file(&self.token);
    }
}
