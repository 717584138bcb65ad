//! The P4Runtime path without a switch: `turbonet softswitch` serves
//! P4Runtime, `turbonet plan --program` writes a fabric's plan into it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use turbonet_tests::{binary, run, text, workspace};

/// A soft switch on a free port, with a token of its own, killed when
/// dropped.
struct SoftSwitch {
    child: Child,
    addr: String,
    /// The file holding its token.
    token: std::path::PathBuf,
}

impl SoftSwitch {
    fn start() -> SoftSwitch {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let token = std::env::temp_dir().join(format!(
            "turbonet-test-token-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&token);
        let mut child = Command::new(binary())
            .args(["softswitch", "--listen", "127.0.0.1:0", "--token-file"])
            .arg(&token)
            .stdout(Stdio::piped())
            .spawn()
            .expect("turbonet softswitch starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .rsplit_once("P4Runtime at ")
            .map_or_else(|| panic!("no address in {line:?}"), |(_, a)| a.to_owned());
        SoftSwitch { child, addr, token }
    }
}

impl Drop for SoftSwitch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.token);
    }
}

#[test]
fn a_soft_switch_on_tcp_needs_a_token_or_says_it_is_insecure() {
    let out = run(&["softswitch", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    for hint in ["--token-file", "--insecure", "unix:"] {
        assert!(text(&out).contains(hint), "{}", text(&out));
    }
}

#[test]
fn plan_programs_a_fat_tree_into_the_soft_switch() {
    let switch = SoftSwitch::start();
    let scenario = workspace().join("scenarios/fat-tree-k4.toml");
    let program = format!("s1={}", switch.addr);
    let base = [
        "plan",
        scenario.to_str().unwrap(),
        "--switch",
        "s1=64x100G",
        "--program",
        &program,
    ];

    // The pipeline's v1model queues are 3 bits: 32 queues per port cannot
    // be programmed, and the error says what to plan with.
    let out = run(&base);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("plan with --queues 8"),
        "{}",
        text(&out)
    );

    let mut args = base.to_vec();
    args.extend(["--queues", "8"]);
    // Without its token, or with another, the switch refuses.
    let out = run(&args);
    assert!(!out.status.success());
    assert!(text(&out).contains("requires its token"), "{}", text(&out));
    let wrong = std::env::temp_dir().join(format!("turbonet-wrong-token-{}", std::process::id()));
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    let mut with_wrong = args.clone();
    with_wrong.extend(["--token-file", wrong.to_str().unwrap()]);
    let out = run(&with_wrong);
    std::fs::remove_file(&wrong).unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("wrong token"), "{}", text(&out));

    args.extend(["--token-file", switch.token.to_str().unwrap()]);
    let out = run(&args);
    assert!(out.status.success(), "{}", text(&out));
    // 20 virtual switches, 80 virtual ports: 80 port-mapper and 80
    // queue-mapper entries, an ARP and a local entry per switch address,
    // and the static routes; every one read back from the device.
    let shown = text(&out);
    let line = shown
        .lines()
        .find(|l| l.starts_with("programmed s1"))
        .unwrap_or_else(|| panic!("{shown}"));
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let (written, read_back) = (numbers[numbers.len() - 2], numbers[numbers.len() - 1]);
    assert!(read_back >= 160 && read_back < written, "{line}");

    // Programming again replaces the pipeline and its entries.
    let again = run(&args);
    assert!(again.status.success(), "{}", text(&again));
    assert!(text(&again).contains(line.split(" at ").next().unwrap()));
}

/// A `p4rt` scenario: fat-tree k=4 on two switches at these addresses
/// (each line of `keys` added to the switch's table).
fn two_switch_scenario(
    lab: &str,
    a: (&str, &str),
    b: (&str, &str),
    extra: &str,
) -> std::path::PathBuf {
    turbonet_tests::write_scenario(
        lab,
        &format!(
            "[lab]\nname = \"{lab}\"\ntarget = \"p4rt\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n\
             [routing]\nmode = \"controller\"\n[p4rt]\nqueues = 8\n\
             [[p4rt.switch]]\nname = \"s1\"\nports = 32\nspeed = \"100G\"\naddress = \"{}\"\n{}\n\
             [[p4rt.switch]]\nname = \"s2\"\nports = 32\nspeed = \"100G\"\naddress = \"{}\"\n{}\n{extra}",
            a.0, a.1, b.0, b.1
        ),
    )
}

#[test]
fn a_p4rt_lab_programs_its_switches_and_rewrites_them_on_failures() {
    turbonet_tests::require_root!();
    let (s1, s2) = (SoftSwitch::start(), SoftSwitch::start());
    let lab = turbonet_tests::unique_lab("pr");
    let token = |s: &SoftSwitch| format!("token_file = \"{}\"", s.token.display());
    let file = two_switch_scenario(&lab, (&s1.addr, &token(&s1)), (&s2.addr, &token(&s2)), "");
    let _guard = turbonet_tests::LabGuard(lab.clone());
    let up = run(&["up", file.to_str().unwrap()]);
    let shown = text(&up);
    assert!(up.status.success(), "{shown}");
    // Both switches got the pipeline and their share of the fabric.
    for sw in ["pipeline s1", "pipeline s2"] {
        assert!(shown.contains(sw), "{shown}");
    }
    // Nothing is created on this machine: no namespaces.
    assert!(turbonet_tests::lab_namespaces(&lab).is_empty());

    // The daemon is primary now (a higher election id than up's) and
    // rewrites the entries a failure changes, on both switches.
    for verb in ["fail", "restore"] {
        let out = run(&[verb, "link", "edge0-0--agg0-0", "--lab", &lab]);
        assert!(out.status.success(), "{}", text(&out));
        let shown = text(&out);
        let rewritten: usize = shown
            .split_once(" entries of the switch rewritten")
            .and_then(|(before, _)| before.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{shown}"));
        assert!(rewritten > 0, "{}", text(&out));
    }
    let delay = run(&[
        "link",
        "set",
        "agg0-0--core0",
        "--delay",
        "1ms",
        "--lab",
        &lab,
    ]);
    assert!(delay.status.success(), "{}", text(&delay));
    // Rates are the traffic manager's, not P4Runtime's.
    let rate = run(&[
        "link",
        "set",
        "agg0-0--core0",
        "--rate",
        "1gbit",
        "--lab",
        &lab,
    ]);
    assert!(!rate.status.success());
    assert!(text(&rate).contains("traffic manager"), "{}", text(&rate));
    // `check` explains why it cannot run here.
    let check = run(&["check", "--lab", &lab]);
    assert!(!check.status.success());
    assert!(text(&check).contains("servers cabled"), "{}", text(&check));
}

#[test]
fn bmv2_is_asked_for_by_name() {
    turbonet_tests::require_root!();
    let lab = turbonet_tests::unique_lab("pb");
    let file = two_switch_scenario(&lab, ("127.0.0.1:1", ""), ("127.0.0.1:2", ""), "")
        .to_str()
        .unwrap()
        .to_owned();
    let text_of = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text_of.replace("address = \"127.0.0.1:2\"", "bmv2 = true"),
    )
    .unwrap();
    let up = run(&["up", &file]);
    assert!(!up.status.success());
    assert!(text(&up).contains("simple_switch_grpc"), "{}", text(&up));
    assert!(!turbonet_tests::lab_state_exists(&lab));
}

#[test]
fn a_soft_scenario_is_planned_onto_its_own_switch() {
    let scenario = workspace().join("scenarios/fat-tree-k4-soft.toml");
    let out = run(&["plan", scenario.to_str().unwrap()]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    // One soft switch, a port per host, 32 switch links on 4 loopback
    // pairs of 8 queues.
    assert!(shown.contains("soft=254x1000G"), "{shown}");
    assert!(shown.contains("24/254"), "{shown}");
    assert!(
        shown.contains("cables (4, emulated inside the soft switch)"),
        "{shown}"
    );
    // A netns scenario has no switches of its own.
    let netns = workspace().join("scenarios/fat-tree-k4.toml");
    let out = run(&["plan", netns.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--switch"), "{}", text(&out));
}

/// A stand-in for BMv2's `simple_switch_grpc` in a directory of its own:
/// it takes BMv2's flags and runs turbonet's soft switch with them (ports
/// as `-i PORT@IFACE`, the gRPC address; `--cpu-port` and
/// `--priority-queues` it leaves), so the whole BMv2 path runs where BMv2
/// is not installed: programmed with p4c's BMv2 JSON, the soft switch
/// keeps BMv2's microsecond delays. Returns the directory (for `PATH`).
fn fake_bmv2() -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("turbonet-fake-bmv2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("simple_switch_grpc");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
dev=1; ports=""; addr=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device-id) dev=$2; shift 2 ;;
    -i) ports="$ports -i $2"; shift 2 ;;
    --grpc-server-addr) addr=$2; shift 2 ;;
    --cpu-port) shift 2 ;;
    *) shift ;;
  esac
done
{bin} softswitch --listen "$addr" --insecure --device-id "$dev" $ports &
child=$!
trap 'kill $child; wait $child; exit 0' TERM INT
wait $child
"#,
            bin = binary().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn bmv2_switches_run_here_with_their_hosts() {
    turbonet_tests::require_root!();
    let dir = fake_bmv2();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let lab = turbonet_tests::unique_lab("pm");
    let file = turbonet_tests::write_scenario(
        &lab,
        &format!(
            "[lab]\nname = \"{lab}\"\ntarget = \"p4rt\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n\
             [routing]\nmode = \"controller\"\n\
             [[p4rt.switch]]\nname = \"s1\"\nports = 32\nspeed = \"100G\"\nbmv2 = true\n\
             [[p4rt.switch]]\nname = \"s2\"\nports = 32\nspeed = \"100G\"\nbmv2 = true\ndevice_id = 2\n"
        ),
    );
    let _guard = turbonet_tests::LabGuard(lab.clone());
    let run_with_path = |args: &[&str]| {
        turbonet_tests::turbonet()
            .env("PATH", &path)
            .args(args)
            .output()
            .unwrap()
    };
    let up = run_with_path(&["up", file.to_str().unwrap()]);
    let shown = text(&up);
    assert!(up.status.success(), "{shown}");
    for phase in ["cables", "bmv2 s1", "bmv2 s2", "pipeline s1", "pipeline s2"] {
        assert!(shown.contains(phase), "no {phase} phase: {shown}");
    }
    // Hosts are namespaces here, and reach each other across both
    // switches and the cables between them.
    let check = || {
        let out = run(&["check", "--lab", &lab]);
        assert!(out.status.success(), "{}", text(&out));
    };
    check();
    let out = run(&["fail", "node", "core0", "--lab", &lab]);
    assert!(out.status.success(), "{}", text(&out));
    check();
    // down stops every switch process and removes every namespace.
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("/run/turbonet/{lab}/state.json")).unwrap())
            .unwrap();
    let pids: Vec<u64> = state["routers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["pid"].as_u64())
        .collect();
    assert_eq!(pids.len(), 2, "{state}");
    let down = run(&["down", &lab]);
    assert!(down.status.success(), "{}", text(&down));
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            stat.is_empty() || stat.contains(") Z"),
            "switch process {pid} still runs: {stat}"
        );
    }
    assert!(turbonet_tests::lab_namespaces(&lab).is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_soft_switch_outlives_peers_that_reset_their_connections() {
    // A peer that resets its connection while the server writes must cost
    // an EPIPE on that socket, not the process: SIGPIPE is ignored.
    let switch = SoftSwitch::start();
    let status = std::fs::read_to_string(format!("/proc/{}/status", switch.child.id())).unwrap();
    let ignored = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap();
    assert_ne!(
        ignored & (1 << (libc::SIGPIPE - 1)),
        0,
        "SigIgn {ignored:#x}"
    );
}
