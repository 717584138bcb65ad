//! Many students on one server: `turbonet serve` runs labs for the members
//! of a group, each on their own labs only, within the administrator's
//! node limit, with what they `exec` running as them. Two real
//! unprivileged users (and one outside the group) made for the test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use turbonet_tests::service::{Service, interrupt};
use turbonet_tests::{LabGuard, file_as, require_root, run, text, wait_until, workspace};

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

#[test]
fn two_students_run_labs_at_once_and_neither_can_touch_the_others() {
    require_root!();
    // Two members (Bob with a larger limit of his own) and one outsider.
    let made = Service::start("st", 2, 1, "max_nodes = 12\n[users.{m1}]\nmax_nodes = 50\n");
    let (alice, bob, eve) = (
        made.members[0].clone(),
        made.members[1].clone(),
        made.outsiders[0].clone(),
    );
    let a = |args: &[&str]| made.run(&alice, args);
    let b = |args: &[&str]| made.run(&bob, args);
    let (lab_a, lab_b) = (format!("{alice}-ecmp"), format!("{bob}-ecmp"));

    // Not a member: told why.
    let out = made.run(&eve, &["lab", "list"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not open to you"),
        "{}",
        text(&out)
    );

    // Both start the same lab at once, each under their own name.
    let start = ["lab", "start", "--quiet", "static-ecmp"];
    let starting = [&alice, &bob].map(|who| made.spawn(who, &start, Stdio::piped()));
    for (who, client) in ["alice", "bob"].into_iter().zip(starting) {
        let out = client.wait_with_output().unwrap();
        assert!(out.status.success(), "{who}: {}", text(&out));
    }
    let status = run(&["status", "--json"]);
    let all = String::from_utf8_lossy(&status.stdout);
    assert!(all.contains(&lab_a) && all.contains(&lab_b), "{all}");

    // Starting it again says what to do that is theirs to do.
    let out = a(&["lab", "start", "--quiet", "static-ecmp"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "you have lab {lab_a} up already: `turbonet lab stop"
        )),
        "{}",
        text(&out)
    );

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
    let client = made.spawn(
        &alice,
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
    let mut client = made.spawn(&alice, &["ui"], Stdio::piped());
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
