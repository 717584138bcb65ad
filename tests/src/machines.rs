//! Labs over several machines, the machines emulated on this one
//! ([`turbonet_bench::machines::Emulated`]: each a network namespace on a
//! shared bridge, with its own `/run/netns` and `/run/turbonet`), each
//! running an unmodified `turbonet worker`.
//!
//! Everything is removed when the fixture is dropped, a test's panic
//! included: every worker stopped, the lab taken down on every machine,
//! the machines deleted.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use turbonet_bench::machines::Emulated;

/// A lab's workers on emulated machines.
#[allow(missing_debug_implementations)] // child processes
pub struct Machines {
    emulated: Emulated,
    tag: String,
    workers: Vec<Option<Worker>>,
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

impl Machines {
    /// `count` machines named after `tag` (a few characters, unique to
    /// the test).
    pub fn new(tag: &str, count: usize) -> Machines {
        Machines {
            emulated: Emulated::new(tag, count).expect("machines emulated"),
            tag: tag.to_owned(),
            workers: (0..count).map(|_| None).collect(),
            lab: None,
        }
    }

    /// A command run on machine `i` (its network and mount namespaces).
    pub fn on(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.emulated.on(i, program)
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
        let mut c = (self.emulated).worker(i, &crate::binary(), file, Duration::from_secs(120));
        c.env("TURBONET_KERNEL_ENGINE", "off")
            .env_remove("TURBONET_LAB")
            .env_remove("TURBONET_LOG")
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

    /// Starts every machine's worker of lab `lab` (its scenario at
    /// `file`) and waits until each says the lab runs on them all.
    pub fn run_lab(&mut self, lab: &str, file: &Path, timeout: Duration) {
        let all = self.workers.len();
        for i in 0..all {
            self.start_worker(i, lab, file);
        }
        for i in 0..all {
            self.wait_for(i, &format!("the lab runs on all {all} machines"), timeout);
        }
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
            for i in 0..self.workers.len() {
                let _ = self.turbonet(i, &["down", &lab]);
            }
        }
    }
}
