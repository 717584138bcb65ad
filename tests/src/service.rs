//! `turbonet serve` for a test: a group, members and outsiders made for
//! it (real unprivileged users, unique names), the binary where they may
//! run it, and the service; all removed, and the users' labs taken down,
//! however the test ends.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::{binary, run, text, wait_until, workspace};

/// Where the service keeps the copies of the labs it starts.
pub const COPIES: &str = "/run/turbonet-serve";

/// A running `turbonet serve` and the users made for it.
#[derive(Debug)]
pub struct Service {
    /// The members, in the order asked for.
    pub members: Vec<String>,
    /// The users outside the group.
    pub outsiders: Vec<String>,
    /// The group.
    pub group: String,
    /// The folder with the binary, the settings, the socket and the log.
    pub dir: PathBuf,
    /// The binary the users run.
    pub bin: PathBuf,
    /// A client of the service's socket written to misbehave
    /// (`tests/serve_client.py`), where the users may run it.
    pub client: PathBuf,
    /// Where the service listens.
    pub socket: PathBuf,
    service: Option<Child>,
}

impl Service {
    /// Makes `members` members and `outsiders` other users (names from
    /// `tag` and this process's id), and starts the service with the
    /// settings `config` adds to its group (where `{m0}`, `{m1}`, ... stand
    /// for the members' names), from the workspace's folder
    /// and without `TURBONET_LABS` (it finds `labs/` there, as an
    /// administrator's `sudo turbonet serve` does).
    pub fn start(tag: &str, members: usize, outsiders: usize, config: &str) -> Service {
        let id = std::process::id() % 100_000;
        let group = format!("tn{tag}{id}");
        let mut made = Service {
            members: Vec::new(),
            outsiders: Vec::new(),
            dir: std::env::temp_dir().join(format!("turbonet-serve-{tag}{id}")),
            bin: PathBuf::new(),
            client: PathBuf::new(),
            socket: PathBuf::new(),
            group: group.clone(),
            service: None,
        };
        must(Command::new("groupadd").arg(&group));
        for i in 0..members + outsiders {
            let user = format!("tn{tag}{id}{}", char::from(b'a' + i as u8));
            let mut add = Command::new("useradd");
            add.args(["-M", "-N", "-s", "/bin/sh"]);
            if i < members {
                add.args(["-G", &group]);
            }
            must(add.arg(&user));
            if i < members {
                made.members.push(user);
            } else {
                made.outsiders.push(user);
            }
        }
        let dir = made.dir.clone();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        made.bin = dir.join("turbonet");
        std::fs::copy(binary(), &made.bin).unwrap();
        std::fs::set_permissions(&made.bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        // The workspace may be closed to them (a checkout in root's
        // temporary folder).
        made.client = dir.join("serve_client.py");
        std::fs::copy(workspace().join("tests/serve_client.py"), &made.client).unwrap();
        std::fs::set_permissions(&made.client, std::fs::Permissions::from_mode(0o644)).unwrap();
        let settings = dir.join("users.toml");
        let mut config = config.to_owned();
        for (i, member) in made.members.iter().enumerate() {
            config = config.replace(&format!("{{m{i}}}"), member);
        }
        std::fs::write(&settings, format!("group = \"{group}\"\n{config}")).unwrap();
        made.socket = dir.join("serve.sock");
        let mut serve = Command::new(&made.bin);
        serve
            .args(["serve", "--socket"])
            .arg(&made.socket)
            .arg("--config")
            .arg(&settings)
            .current_dir(workspace())
            .env_remove("TURBONET_LABS")
            // What an administrator's shell may hold: never a student's.
            .env("TURBONET_ADMIN_TOKEN", "s3cret-of-the-admin")
            .stderr(std::fs::File::create(dir.join("serve.log")).unwrap());
        // Another test's fork may hold the copy open for writing a moment
        // (it inherited the descriptor `copy` wrote through): the kernel
        // says the file is busy until that child has exec'd.
        let mut started = None;
        assert!(
            wait_until(Duration::from_secs(10), || match serve.spawn() {
                Ok(child) => {
                    started = Some(child);
                    true
                }
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => false,
                Err(e) => panic!("starting turbonet serve: {e}"),
            }),
            "the copy of turbonet stayed busy"
        );
        made.service = started;
        assert!(
            wait_until(Duration::from_secs(10), || made.socket.exists()),
            "turbonet serve did not listen: {}",
            made.log()
        );
        made
    }

    /// What the service logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
    }

    /// The service's process id.
    pub fn pid(&self) -> u32 {
        self.service.as_ref().expect("the service runs").id()
    }

    /// `turbonet ARGS` as `user` through the service, its input from
    /// `/dev/null` unless set, in a process group of its own (so that
    /// [`interrupt`] can end it as Ctrl-C would).
    pub fn command(&self, user: &str, args: &[&str]) -> Command {
        let mut c = Command::new("runuser");
        c.args(["-u", user, "--", "env"])
            .arg(format!("TURBONET_SERVE={}", self.socket.display()))
            .arg(&self.bin)
            .args(args)
            .current_dir("/")
            .stdin(Stdio::null())
            .process_group(0);
        c
    }

    /// `turbonet ARGS` as `user`, waited for.
    pub fn run(&self, user: &str, args: &[&str]) -> Output {
        self.command(user, args).output().expect("runuser runs")
    }

    /// `turbonet ARGS` as `user`, started, its stderr piped.
    pub fn spawn(&self, user: &str, args: &[&str], stdout: Stdio) -> Child {
        self.command(user, args)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("runuser runs")
    }

    /// `PROGRAM ARGS` as `user` (with the service's socket in
    /// `TURBONET_SERVE`), e.g. a client of the service's socket written for
    /// a test.
    pub fn other_as(&self, user: &str, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("runuser");
        c.args(["-u", user, "--", "env"])
            .arg(format!("TURBONET_SERVE={}", self.socket.display()))
            .arg(program)
            .args(args)
            .current_dir("/")
            .process_group(0);
        c
    }

    /// `user`'s id.
    pub fn uid(&self, user: &str) -> u32 {
        let out = Command::new("id").args(["-u", user]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut s) = self.service.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        for user in self.members.iter().chain(&self.outsiders) {
            let prefix = format!("{user}-");
            let labs = std::fs::read_dir("/run/turbonet")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| name.starts_with(&prefix));
            for lab in labs {
                let _ = run(&["down", &lab]);
                let _ = std::fs::remove_file(Path::new(COPIES).join(format!("{lab}.toml")));
            }
            let _ = Command::new("pkill").args(["-KILL", "-u", user]).output();
            let _ = Command::new("userdel").arg(user).output();
        }
        let _ = Command::new("groupdel").arg(&self.group).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `command`; panics with its output unless it succeeds.
pub fn must(command: &mut Command) {
    let out = command.output().expect("runs");
    assert!(out.status.success(), "{command:?}: {}", text(&out));
}

/// Ends a client as Ctrl-C at its terminal would: SIGINT to its group.
pub fn interrupt(mut client: Child) {
    let group = nix::unistd::Pid::from_raw(client.id() as i32);
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGINT);
    let _ = client.wait();
}

/// Panics, showing all it said, unless `out`'s standard error says
/// `words`.
#[track_caller]
pub fn assert_says(out: &Output, words: &str) {
    assert!(
        stderr(out).contains(words),
        "not saying {words:?}: {}",
        text(out)
    );
}

/// The standard error of `out`, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The standard output of `out`, as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
