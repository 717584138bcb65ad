//! Many students on one server: `turbonet serve` runs labs for the members
//! of a group, each on their own labs only, within the administrator's
//! node limit, with what they `exec` running as them. Two real
//! unprivileged users (and one outside the group) made for the test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use turbonet_tests::{LabGuard, binary, file_as, require_root, run, text, wait_until, workspace};

/// What the test made: users, a group, a directory, the service; all
/// removed, and the users' labs taken down, however the test ends.
struct Made {
    users: Vec<String>,
    group: String,
    dir: PathBuf,
    service: Option<Child>,
}

impl Drop for Made {
    fn drop(&mut self) {
        if let Some(mut s) = self.service.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        for user in &self.users {
            for lab in ["ecmp", "tcpq", "hpn", "bgpfo"] {
                let _ = run(&["down", &format!("{user}-{lab}")]);
            }
            let _ = Command::new("userdel").arg(user).output();
            for lab in ["ecmp", "tcpq", "hpn", "bgpfo"] {
                let _ = std::fs::remove_file(
                    Path::new(turbonet_lab_copies()).join(format!("{user}-{lab}.toml")),
                );
            }
        }
        let _ = Command::new("groupdel").arg(&self.group).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where the service keeps the copies of the labs it starts.
fn turbonet_lab_copies() -> &'static str {
    "/run/turbonet-serve"
}

fn must(command: &mut Command) {
    let out = command.output().expect("runs");
    assert!(out.status.success(), "{command:?}: {}", text(&out));
}

/// The reply to `GET path` from `host`, whole.
fn get(host: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(host).expect("the page listens");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

/// `turbonet ARGS` started as `user` through the service at `socket`, in
/// a process group of its own (runuser and the client both); its stderr
/// is piped.
fn spawn_as(user: &str, bin: &Path, socket: &Path, args: &[&str], stdout: Stdio) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new("runuser")
        .args(["-u", user, "--", "env"])
        .arg(format!("TURBONET_SERVE={}", socket.display()))
        .arg(bin)
        .args(args)
        .current_dir("/")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("runuser runs")
}

/// Ends a client as Ctrl-C at its terminal would: SIGINT to its group.
fn interrupt(mut client: Child) {
    let group = nix::unistd::Pid::from_raw(client.id() as i32);
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGINT);
    let _ = client.wait();
}

/// `turbonet ARGS` as `user`, through the service at `socket`.
fn as_user(user: &str, bin: &Path, socket: &Path, args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", user, "--", "env"])
        .arg(format!("TURBONET_SERVE={}", socket.display()))
        .arg(bin)
        .args(args)
        .current_dir("/")
        .output()
        .expect("runuser runs")
}

#[test]
fn two_students_run_labs_at_once_and_neither_can_touch_the_others() {
    require_root!();
    let id = std::process::id() % 100_000;
    let group = format!("tng{id}");
    let (alice, bob, eve) = (format!("tn{id}a"), format!("tn{id}b"), format!("tn{id}e"));
    let dir = std::env::temp_dir().join(format!("turbonet-serve-{id}"));
    let mut made = Made {
        users: vec![],
        group: group.clone(),
        dir: dir.clone(),
        service: None,
    };
    must(Command::new("groupadd").arg(&group));
    for (user, member) in [(&alice, true), (&bob, true), (&eve, false)] {
        let mut add = Command::new("useradd");
        add.args(["-M", "-N", "-s", "/bin/sh"]);
        if member {
            add.args(["-G", &group]);
        }
        must(add.arg(user));
        made.users.push(user.clone());
    }
    // The binary where the students may run it.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("turbonet");
    std::fs::copy(binary(), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("users.toml");
    std::fs::write(
        &config,
        format!("group = \"{group}\"\nmax_nodes = 12\n[users.{bob}]\nmax_nodes = 50\n"),
    )
    .unwrap();
    let socket = dir.join("serve.sock");
    made.service = Some(
        Command::new(&bin)
            .args(["serve", "--socket"])
            .arg(&socket)
            .arg("--config")
            .arg(&config)
            .env("TURBONET_LABS", workspace().join("labs"))
            .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_until(Duration::from_secs(10), || socket.exists()),
        "turbonet serve did not listen: {}",
        std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
    );
    let a = |args: &[&str]| as_user(&alice, &bin, &socket, args);
    let b = |args: &[&str]| as_user(&bob, &bin, &socket, args);
    let (lab_a, lab_b) = (format!("{alice}-ecmp"), format!("{bob}-ecmp"));

    // Not a member: told why.
    let out = as_user(&eve, &bin, &socket, &["lab", "list"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not open to you"),
        "{}",
        text(&out)
    );

    // Both start the same lab at once, each under their own name.
    let start = ["lab", "start", "--quiet", "static-ecmp"];
    let starting = [&alice, &bob].map(|who| spawn_as(who, &bin, &socket, &start, Stdio::piped()));
    for (who, client) in ["alice", "bob"].into_iter().zip(starting) {
        let out = client.wait_with_output().unwrap();
        assert!(out.status.success(), "{who}: {}", text(&out));
    }
    let status = run(&["status", "--json"]);
    let all = String::from_utf8_lossy(&status.stdout);
    assert!(all.contains(&lab_a) && all.contains(&lab_b), "{all}");

    // Each sees only their own.
    let mine = a(&["status", "--json"]);
    let mine = String::from_utf8_lossy(&mine.stdout);
    assert!(mine.contains(&lab_a) && !mine.contains(&lab_b), "{mine}");

    // Neither can stop, enter or change the other's.
    for args in [
        vec!["lab", "stop", "--lab", lab_b.as_str()],
        vec!["exec", "--lab", lab_b.as_str(), "leaf0", "--", "true"],
        vec!["fail", "link", "leaf0--spine0", "--lab", lab_b.as_str()],
        vec!["lab", "check", "--lab", lab_b.as_str()],
    ] {
        let out = a(&args);
        assert!(!out.status.success(), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("you have no lab"),
            "{args:?}: {}",
            text(&out)
        );
    }
    let still = run(&["status", "--json"]);
    assert!(
        String::from_utf8_lossy(&still.stdout).contains(&lab_b),
        "{}",
        text(&still)
    );

    // A lab root started under a name that looks like Alice's is not hers.
    let lookalike = format!("{alice}-root");
    let scenario = file_as(
        &workspace().join("labs/static-ecmp/lab.toml"),
        &lookalike,
        "",
    );
    let _root_lab = LabGuard(lookalike.clone());
    let up = run(&["up", "--quiet", scenario.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    let mine = a(&["status", "--json"]);
    assert!(
        !String::from_utf8_lossy(&mine.stdout).contains(&lookalike),
        "{}",
        text(&mine)
    );
    let out = a(&["lab", "stop", "--lab", &lookalike]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("you have no lab"),
        "{}",
        text(&out)
    );
    let down = run(&["down", &lookalike]);
    assert!(down.status.success(), "{}", text(&down));

    // What a student runs in a node runs as them, with the network's
    // capabilities only, and other namespaces out of sight.
    let uid = String::from_utf8_lossy(
        &Command::new("id")
            .args(["-u", &alice])
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .to_owned();
    let out = a(&["exec", "leaf0", "--", "id", "-u"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        uid,
        "{}",
        text(&out)
    );
    let out = a(&[
        "exec",
        "leaf0",
        "--",
        "ip",
        "route",
        "add",
        "10.99.0.0/24",
        "dev",
        "spine0",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let out = a(&[
        "exec",
        "leaf0",
        "--",
        "sh",
        "-c",
        "ls -A /run/netns; cat /etc/shadow",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "{}",
        text(&out)
    );
    // Bob's routes did not change.
    let out = run(&[
        "exec",
        "--lab",
        &lab_b,
        "leaf0",
        "--",
        "ip",
        "route",
        "show",
        "10.99.0.0/24",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "{}",
        text(&out)
    );

    // A command the student abandons (their client killed) stops too.
    let client = spawn_as(
        &alice,
        &bin,
        &socket,
        &["exec", "leaf0", "--", "sleep", "300"],
        Stdio::null(),
    );
    let sleeping = || {
        Command::new("pgrep")
            .args(["-u", &alice, "-x", "sleep"])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(
        wait_until(Duration::from_secs(10), sleeping),
        "the student's sleep never started"
    );
    interrupt(client);
    assert!(
        wait_until(Duration::from_secs(10), || !sleeping()),
        "the abandoned command still runs"
    );

    // The administrator's limit: 12 nodes each; 8 are up, hpn-dual-tor has 24.
    let out = a(&["lab", "start", "--quiet", "hpn-dual-tor"]);
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has 24 nodes") && err.contains("your limit is 12 nodes"),
        "{}",
        text(&out)
    );

    // A queue that may hold more memory than the limit (256 MiB a link).
    let out = a(&[
        "link",
        "set",
        "h0-0--leaf0",
        "--rate",
        "100mbit",
        "--queue",
        "100000p",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("your limit is 256 MiB a link"),
        "{}",
        text(&out)
    );
    let out = a(&[
        "link",
        "set",
        "h0-0--leaf0",
        "--rate",
        "100mbit",
        "--queue",
        "1000p",
    ]);
    // A queue within it passes the limit, to the next refusal: the lab's
    // links are plain veths.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is a plain veth"),
        "{}",
        text(&out)
    );

    // A workload file is the one her client could open, as her: the
    // service reads no path of hers as root.
    let out = a(&["workload", "start", "/root/workloads.toml"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no file /root/workloads.toml you can read"),
        "{}",
        text(&out)
    );

    // Her page of her lab, at an address with a secret in it, on a port
    // of its own; it stops when she does.
    let out = a(&["ui", "--listen", "0.0.0.0:9000"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("listens on this machine only"),
        "{}",
        text(&out)
    );
    let mut client = spawn_as(&alice, &bin, &socket, &["ui"], Stdio::piped());
    let mut first = String::new();
    BufReader::new(client.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    let (host, path) = url["http://".len()..].split_once('/').unwrap();
    assert_eq!(path.len(), 33, "a 128-bit token, then /: {url}");
    assert!(get(host, &format!("/{path}")).starts_with("HTTP/1.1 200"));
    assert!(get(host, &format!("/{path}api/lab")).contains(&lab_a));
    assert!(get(host, "/").starts_with("HTTP/1.1 404"));
    assert!(get(host, "/api/lab").starts_with("HTTP/1.1 404"));
    interrupt(client);
    assert!(
        wait_until(Duration::from_secs(10), || TcpStream::connect(host)
            .is_err()),
        "the abandoned page still serves"
    );

    // Only the service's labs, by folder name; nothing written as root.
    let out = a(&["lab", "start", "--quiet", "../../../tmp/own"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no lab `../../../tmp/own`"),
        "{}",
        text(&out)
    );
    let out = a(&["lab", "check", "--junit", "/etc/grade.xml"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("take `turbonet lab check --json`"),
        "{}",
        text(&out)
    );
    assert!(!Path::new("/etc/grade.xml").exists());

    // Bob's own limit lets him run FRR switches too, and talk to them.
    let out = b(&["lab", "start", "--quiet", "bgp-failover"]);
    assert!(out.status.success(), "{}", text(&out));
    let lab_b2 = format!("{bob}-bgpfo");
    let out = b(&[
        "exec",
        "--lab",
        &lab_b2,
        "agg1-0",
        "--",
        "vtysh",
        "-c",
        "show bgp summary",
    ]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("core1"),
        "{}",
        text(&out)
    );
    // Without PAM's complaint about a user outside FRR's group.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("account validation"),
        "{}",
        text(&out)
    );
    let out = b(&["lab", "stop", "--lab", &lab_b2]);
    assert!(out.status.success(), "{}", text(&out));

    for (who, stop) in [("alice", a(&["lab", "stop"])), ("bob", b(&["lab", "stop"]))] {
        assert!(stop.status.success(), "{who}: {}", text(&stop));
    }
    let after = run(&["status", "--json"]);
    let after = String::from_utf8_lossy(&after.stdout);
    assert!(
        !after.contains(&lab_a) && !after.contains(&lab_b),
        "{after}"
    );
}
