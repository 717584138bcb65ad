//! `turbonet serve` attacked as students would: each test does what a
//! member of the group tried (with the stock client, or with a client of
//! the service's socket written for the test, `tests/serve_client.py`) and
//! asserts the refusal, and that nothing of another's, or of root's,
//! changed.

use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use turbonet_tests::service::{Service, assert_says, stdout};
use turbonet_tests::{require_root, run, text};

/// Starts `lab` for `user`, or panics with why not.
fn start(service: &Service, user: &str, lab: &str) {
    let out = service.run(user, &["lab", "start", "--quiet", lab]);
    assert!(out.status.success(), "{user} {lab}: {}", text(&out));
}

/// Whether node `node` of lab `lab` has an interface `name`.
fn has_link(lab: &str, node: &str, name: &str) -> bool {
    let out = run(&["exec", "--lab", lab, node, "--", "ip", "link", "show", name]);
    out.status.success()
}

#[test]
fn a_workload_file_is_read_from_what_the_student_passed_never_reopened_as_root() {
    require_root!();
    let service = Service::start("wf", 1, 0, "");
    let alice = &service.members[0];
    start(&service, alice, "tcp-queues");
    // An O_PATH descriptor needs no read permission: the service must not
    // open /etc/shadow again through /dev/fd/3 with root's rights.
    let out = service
        .other_as(
            alice,
            "python3",
            &[
                &service.client.display().to_string(),
                "opath",
                "/etc/shadow",
            ],
        )
        .args(["workload", "start", "/dev/fd/3"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("root:"), "{}", text(&out));
    assert_says(&out, "not opened for reading");
    // Nor a file past the size a workload file may have.
    let big = service.dir.join("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(512 << 20)
        .unwrap();
    std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = service.run(alice, &["workload", "start", big.to_str().unwrap()]);
    assert_says(&out, "more than the 1048576 a file may have");
    // A file of hers is read, and its errors name it as she typed it.
    let own = service.dir.join("mine.toml");
    std::fs::write(&own, "[[workload]]\nname = \"x\"\nkind = \"nonsense\"\n").unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = service.run(alice, &["workload", "start", own.to_str().unwrap()]);
    assert_says(&out, own.to_str().unwrap());
}

#[test]
fn a_namespace_passed_to_exec_gives_no_hold_on_another_students_nodes_or_the_machine() {
    require_root!();
    // Alice's switches run FRR, Bob's turbonet's own BGP agents.
    let service = Service::start("ns", 2, 0, "max_nodes = 40\n");
    let (alice, bob) = (&service.members[0], &service.members[1]);
    start(&service, alice, "bgp-failover");
    start(&service, bob, "hpn-dual-tor");
    let (lab_a, lab_b) = (format!("{alice}-bgpfo"), format!("{bob}-hpndt"));
    // Each one's routing works in their user namespace: FRR's daemons
    // and the lab daemon's agents are root's, and reach in.
    let out = service.run(
        alice,
        &["exec", "agg1-0", "--", "vtysh", "-c", "show bgp summary"],
    );
    assert!(stdout(&out).contains("core1"), "{}", text(&out));
    let out = service.run(
        bob,
        &[
            "exec",
            "tor0-r0p0",
            "--",
            "ip",
            "route",
            "show",
            "proto",
            "bgp",
        ],
    );
    assert!(
        out.status.success() && !stdout(&out).is_empty(),
        "{}",
        text(&out)
    );
    let id = std::process::id() % 100_000;
    let evil = format!("evil{id}");

    // Her own shell's namespace (the machine's) as exec's input: refused
    // before anything runs.
    let out = service
        .command(alice, &["exec", "agg1-0", "--", "true"])
        .stdin(std::fs::File::open("/proc/self/ns/net").unwrap())
        .output()
        .unwrap();
    assert_says(&out, "a namespace is not a command's input");
    // The names under /run/netns are closed to her.
    let out = Command::new("runuser")
        .args(["-u", alice, "--", "ls", "/run/netns"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));

    // However a descriptor reaches a command of hers (here a socket on its
    // input, over which it receives Bob's switch and the machine's
    // namespace), her capabilities do not hold there.
    let inside = format!(
        r#"
import socket, subprocess
s = socket.socket(fileno=0)
_, fds, _, _ = socket.recv_fds(s, 16, 8)
for fd in fds:
    r = subprocess.run(["ip", "link", "add", "{evil}", "netns", f"/proc/self/fd/{{fd}}", "type", "bridge"],
                       pass_fds=[fd], capture_output=True, text=True)
    print(r.returncode, r.stderr.strip())
"#
    );
    let (ours, theirs) = UnixStream::pair().unwrap();
    let exec = service
        .command(alice, &["exec", "agg1-0", "--", "python3", "-c", &inside])
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let targets = [
        std::fs::File::open(format!("/run/netns/tn-{lab_b}-tor0-r0p0")).unwrap(),
        std::fs::File::open("/proc/self/ns/net").unwrap(),
    ];
    let fds: Vec<i32> = targets.iter().map(AsRawFd::as_raw_fd).collect();
    nix::sys::socket::sendmsg::<()>(
        ours.as_raw_fd(),
        &[std::io::IoSlice::new(b"x")],
        &[nix::sys::socket::ControlMessage::ScmRights(&fds)],
        nix::sys::socket::MsgFlags::empty(),
        None,
    )
    .unwrap();
    let out = exec.wait_with_output().unwrap();
    let said = stdout(&out);
    assert_eq!(
        said.matches("Operation not permitted").count(),
        2,
        "{}",
        text(&out)
    );
    assert!(
        !has_link(&lab_b, "tor0-r0p0", &evil),
        "Bob's tor0-r0p0 has {evil}"
    );
    let host = Command::new("ip")
        .args(["link", "show", &evil])
        .output()
        .unwrap();
    assert!(!host.status.success(), "the machine has {evil}");
    // In her own nodes she still holds them.
    let out = service.run(
        alice,
        &[
            "exec", "agg1-0", "--", "ip", "link", "add", &evil, "type", "bridge",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(has_link(&lab_a, "agg1-0", &evil));
}

#[test]
fn descriptors_sent_past_what_a_request_carries_are_closed_and_the_service_lives() {
    require_root!();
    let service = Service::start("fd", 1, 0, "");
    let alice = &service.members[0];
    let open = || {
        std::fs::read_dir(format!("/proc/{}/fd", service.pid()))
            .unwrap()
            .count()
    };
    let before = open();
    let out = service
        .other_as(
            alice,
            "python3",
            &[&service.client.display().to_string(), "flood", "20", "200"],
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        service
            .log()
            .contains("more than 4 descriptors came with a message"),
        "{}",
        service.log()
    );
    assert_eq!(open(), before, "the service holds descriptors it was sent");
    let out = service.run(alice, &["lab", "list"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn an_idle_student_holds_only_their_own_connections() {
    require_root!();
    let service = Service::start("id", 2, 0, "requests = 4\n");
    let (alice, bob) = (&service.members[0], &service.members[1]);
    // Five connections that say nothing: four wait, one past her limit is
    // refused at once.
    let mut idle = service
        .other_as(
            alice,
            "python3",
            &[&service.client.display().to_string(), "idle", "5"],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = BufReader::new(idle.stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "open");
    // Bob is served while hers still wait (a service that read requests
    // one at a time would have timed hers out first).
    let out = service.run(bob, &["lab", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    drop(idle.stdin.take());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut said, &mut rest).unwrap();
    let _ = idle.wait();
    assert_eq!(rest.matches("waiting").count(), 4, "{rest}");
    assert_eq!(rest.matches("answered").count(), 1, "{rest}");
}

#[test]
fn two_starts_at_once_do_not_pass_the_node_limit_together() {
    require_root!();
    // 12 nodes: one 8-node lab fits, two do not.
    let service = Service::start("nl", 1, 0, "max_nodes = 12\n");
    let alice = &service.members[0];
    let starts = ["static-ecmp", "troubleshoot"]
        .map(|lab| service.spawn(alice, &["lab", "start", "--quiet", lab], Stdio::null()));
    let outs = starts.map(|c| c.wait_with_output().unwrap());
    let ok = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "{}\n{}", text(&outs[0]), text(&outs[1]));
    let refused = outs.iter().find(|o| !o.status.success()).unwrap();
    assert_says(refused, "your limit is 12 nodes");
}

#[test]
fn what_a_student_runs_gets_nothing_of_roots_and_their_files_are_theirs_alone() {
    require_root!();
    let service = Service::start("en", 2, 0, "");
    let (alice, bob) = (&service.members[0], &service.members[1]);
    start(&service, alice, "static-ecmp");
    // The service's environment (an administrator's token) stays its own.
    let out = service.run(alice, &["exec", "leaf0", "--", "env"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!stdout(&out).contains("s3cret"), "{}", text(&out));
    assert!(
        stdout(&out).contains(&format!("USER={alice}")),
        "{}",
        text(&out)
    );
    // Her network capabilities hold in her nodes: a raw socket (ping).
    let out = service.run(
        alice,
        &[
            "exec",
            "h0-0",
            "--",
            "sh",
            "-c",
            "ping -c 1 -W 5 $(ip route show default | cut -d ' ' -f 3)",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    // Her lab's copy (its faults and checks) is root's to read only.
    let copy = Path::new(turbonet_tests::service::COPIES).join(format!("{alice}-ecmp.toml"));
    let mode = std::fs::metadata(&copy).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", copy.display());
    let out = Command::new("runuser")
        .args(["-u", bob, "--", "cat"])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
}

#[test]
fn a_link_may_not_hold_more_memory_than_the_limit_nor_a_flap_fill_the_log() {
    require_root!();
    let service = Service::start("mem", 1, 0, "");
    let alice = &service.members[0];
    start(&service, alice, "tcp-queues");
    let out = service.run(
        alice,
        &[
            "link", "set", "r0--r1", "--rate", "10gbit", "--delay", "30s",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert_says(&out, "10gbit x 30s in flight may hold");
    // Nor in two steps: the delay first (20 Mbit/s x 30 s fits), then the
    // rate, which counts the delay now in force.
    let out = service.run(alice, &["link", "set", "r0--r1", "--delay", "30s"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = service.run(alice, &["link", "set", "r0--r1", "--rate", "10gbit"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_says(&out, "10gbit x 30s in flight may hold");
    // Nor may a flap fill the lab's log.
    let out = service.run(
        alice,
        &["flap", "r0--r1", "--period", "1ms", "--count", "4294967295"],
    );
    assert_says(&out, "a student's flap has a period of at least 100 ms");
}

#[test]
fn a_student_cannot_plant_a_socket_for_roots_vtysh_to_grade() {
    require_root!();
    let service = Service::start("fg", 1, 0, "max_nodes = 40\n");
    let alice = &service.members[0];
    start(&service, alice, "bgp-failover");
    let lab = format!("{alice}-bgpfo");
    let home = Path::new("/run/turbonet").join(&lab).join("routers/agg1-0");
    // She reaches her switch's daemons.
    let out = service.run(
        alice,
        &["exec", "agg1-0", "--", "vtysh", "-c", "show bgp summary"],
    );
    assert!(out.status.success(), "{}", text(&out));
    // But cannot put a socket of her own where root's vtysh looks: in
    // exec her switch's directory is /run/frr.
    let out = service.run(
        alice,
        &[
            "exec",
            "agg1-0",
            "--",
            "python3",
            "-c",
            "import os; os.replace('/run/frr/bgpd.vty', '/run/frr/bgpd.vty.old')",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert_says(&out, "Permission denied");
    assert!(home.join("bgpd.vty").exists());
    // Root's view of her sessions still comes from her daemons.
    let out = run(&["show", "bgp", "--lab", &lab]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_peers_address_on_lo_does_not_pass_for_reaching_it() {
    require_root!();
    let service = Service::start("lo", 1, 0, "");
    let alice = &service.members[0];
    start(&service, alice, "static-ecmp");
    let out = service.run(
        alice,
        &[
            "exec", "h1-0", "--", "ip", "-4", "-o", "addr", "show", "dev", "leaf1",
        ],
    );
    let h1 = stdout(&out)
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("no address: {}", text(&out)))
        .to_owned();
    // h0-0 cut off from the fabric, with h1-0's address on its own lo.
    let out = service.run(
        alice,
        &[
            "exec",
            "h0-0",
            "--",
            "sh",
            "-c",
            &format!("ip link set leaf0 down && ip addr add {h1}/32 dev lo"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = service.run(alice, &["check", "--json"]);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let failed = report["failures"].as_array().unwrap();
    assert!(
        failed
            .iter()
            .any(|f| f["from"] == "h0-0" && f["to"] == "h1-0" && f["address"] == h1.as_str()),
        "{report}"
    );
}

#[test]
fn a_students_frr_daemons_write_nothing_that_is_frrs() {
    require_root!();
    /// A folder of user frr's (as /etc/frr is), removed however the test
    /// ends.
    struct Theirs(std::path::PathBuf);
    impl Drop for Theirs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let service = Service::start("fr", 1, 0, "max_nodes = 40\n");
    let alice = &service.members[0];
    start(&service, alice, "bgp-failover");
    let frr = nix::unistd::User::from_name("frr")
        .unwrap()
        .expect("FRR's user");
    let folder = Theirs(Path::new("/run").join(format!("turbonet-frr-{}", std::process::id())));
    std::fs::create_dir(&folder.0).unwrap();
    nix::unistd::chown(&folder.0, Some(frr.uid), Some(frr.gid)).unwrap();
    let planted = folder.0.join("daemons");
    // Her vtysh asks her switch's bgpd to log into FRR's folder.
    let out = service.run(
        alice,
        &[
            "exec",
            "agg1-0",
            "--",
            "vtysh",
            "-c",
            "configure terminal",
            "-c",
            &format!("log file {}", planted.display()),
        ],
    );
    assert!(
        !planted.exists(),
        "bgpd wrote {}: {}",
        planted.display(),
        text(&out)
    );
    // Her daemons are her lab's own user, not FRR's.
    let lab = format!("{alice}-bgpfo");
    let pid = std::fs::read_to_string(
        Path::new("/run/turbonet")
            .join(&lab)
            .join("routers/agg1-0/bgpd.pid"),
    )
    .unwrap();
    let uid = std::fs::metadata(format!("/proc/{}", pid.trim()))
        .unwrap()
        .uid();
    assert_ne!(uid, frr.uid.as_raw());
    assert_ne!(uid, service.uid(alice));
}

#[test]
fn what_a_student_starts_is_held_to_their_process_limit() {
    require_root!();
    let service = Service::start("pl", 1, 0, "max_processes = 80\n");
    let alice = &service.members[0];
    start(&service, alice, "tcp-queues");
    // Two hundred processes asked for; the limit counts everything of hers
    // (the request's own processes and her lab's daemon among them).
    let fork = [
        "import os, sys, time",
        "n = 0",
        "for i in range(200):",
        "    try:",
        "        if os.fork() == 0:",
        "            time.sleep(60)",
        "            os._exit(0)",
        "        n += 1",
        "    except OSError:",
        "        pass",
        "print(n, flush=True)",
        "sys.stdin.read()",
    ]
    .join("\n");
    let mut bomb = service
        .command(alice, &["exec", "client", "--", "python3", "-c", &fork])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(bomb.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let started: u32 = line
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert!(started > 0 && started < 80, "{started} processes");
    // At her limit, her next command is refused with the reason.
    let out = service.run(alice, &["status"]);
    assert_says(&out, "as many processes running as your limit allows");
    drop(bomb.stdin.take());
    let _ = bomb.wait();
    assert!(
        !service.log().contains("not held to a limit"),
        "{}",
        service.log()
    );
}
