//! End-to-end: impaired links through the userspace link engine (root).

use std::collections::BTreeSet;
use std::process::Output;

use turbonet_tests::{
    LabGuard, lab_namespaces, lab_state_exists, require_root, run, scenario_as, text, unique_lab,
    up_bundled, write_scenario,
};

fn host_addr(lab: &str, host: &str) -> String {
    let out = run(&["show", "links", host, "--lab", lab, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    links[0]["a_addr"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned()
}

/// RTTs in ms and the sequence numbers answered, from ping's output.
fn ping(
    lab: &str,
    from: &str,
    to: &str,
    count: u32,
    interval: &str,
) -> (Vec<f64>, BTreeSet<u32>, Output) {
    let out = run(&[
        "exec",
        "--lab",
        lab,
        from,
        "--",
        "ping",
        "-n",
        "-c",
        &count.to_string(),
        "-i",
        interval,
        "-W",
        "2",
        to,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut rtts = Vec::new();
    let mut seqs = BTreeSet::new();
    for line in stdout.lines() {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(str::to_owned)
        };
        if let (Some(seq), Some(time)) = (field("icmp_seq="), field("time=")) {
            seqs.insert(seq.parse().unwrap());
            rtts.push(time.parse().unwrap());
        }
    }
    (rtts, seqs, out)
}

/// Link-layer rate (bit/s) of a 3 s TCP transfer with iperf3 from `client`
/// to `server` (at `addr`): TCP payload is 1448 of every 1514 bytes.
fn iperf3_wire_rate(lab: &str, client: &str, server: &str, addr: &str) -> f64 {
    let mut daemon = turbonet_tests::turbonet()
        .args(["exec", "--lab", lab, server, "--", "iperf3", "-s", "-1"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The server is ready once it listens; retry the client until then.
    let mut report = serde_json::Value::Null;
    let got = turbonet_tests::wait_until(std::time::Duration::from_secs(10), || {
        let out = run(&[
            "exec", "--lab", lab, client, "--", "iperf3", "-J", "-c", addr, "-t", "3",
        ]);
        report = serde_json::from_slice(&out.stdout).unwrap_or_default();
        report["end"]["sum_received"]["bits_per_second"].is_number()
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(got, "iperf3 never ran: {report}");
    report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap()
        * 1514.0
        / 1448.0
}

#[test]
fn declared_delay_shows_in_ping_and_down_removes_the_engine() {
    require_root!();
    let lab = unique_lab("dl");
    let file = scenario_as("two-hosts.toml", &lab, "");
    let guard = LabGuard(lab.clone());
    let up = run(&["up", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    assert!(
        String::from_utf8_lossy(&up.stderr).contains("link engine"),
        "{}",
        text(&up)
    );

    let h2 = host_addr(&lab, "h2");
    let (rtts, _, out) = ping(&lab, "h1", &h2, 5, "0.2");
    assert_eq!(rtts.len(), 5, "{}", text(&out));
    // Four crossings of a 5 ms link per round trip.
    let min = rtts.iter().copied().fold(f64::MAX, f64::min);
    assert!(
        min >= 20.0,
        "RTT {min} ms below the 20 ms the links declare"
    );
    assert!(
        min < 26.0,
        "RTT {min} ms far above the 20 ms the links declare"
    );

    let check = run(&["check", "--lab", &lab]);
    assert!(check.status.success(), "{}", text(&check));

    // Counters reach `link show` within the daemon's publishing period.
    let seen = turbonet_tests::wait_until(std::time::Duration::from_secs(5), || {
        let show = run(&["link", "show", "h1--s1", "--lab", &lab, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap_or_default();
        v[0]["directions"][0]["tx_packets"].as_u64().unwrap_or(0) >= 5
    });
    assert!(seen, "link show never counted the pings");

    let down = run(&["down", &lab]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(lab_namespaces(&lab).is_empty());
    assert!(!std::path::Path::new(&format!("/run/netns/tn-{lab}.engine")).exists());
    assert!(!lab_state_exists(&lab));
    drop(guard);
}

#[test]
fn same_seed_same_drops() {
    require_root!();
    let extra = "\n[[links.override]]\nlink = \"h1--s1\"\nloss = \"30%\"\n";
    let mut patterns = Vec::new();
    for _ in 0..2 {
        let lab = unique_lab("sd");
        let file = scenario_as("two-hosts.toml", &lab, extra);
        let _guard = LabGuard(lab.clone());
        let up = run(&["up", "--quiet", file.to_str().unwrap()]);
        assert!(up.status.success(), "{}", text(&up));
        let h2 = host_addr(&lab, "h2");
        let (_, seqs, out) = ping(&lab, "h1", &h2, 60, "0.05");
        assert!(
            seqs.len() < 60 && !seqs.is_empty(),
            "30% loss each way: {}",
            text(&out)
        );
        patterns.push(seqs);
    }
    assert_eq!(
        patterns[0], patterns[1],
        "the same seed must drop the same packets"
    );
}

#[test]
fn fat_tree_with_impaired_tier_routes_and_delays() {
    require_root!();
    let guard = up_bundled(
        "fi",
        "fat-tree-k4.toml",
        "\n[links.edge-agg]\ndelay = \"1ms\"\n\n[links.host-edge]\nrate = \"100mbit\"\n",
    );
    let lab = guard.0.clone();
    let check = run(&["check", "--lab", &lab]);
    assert!(check.status.success(), "{}", text(&check));
    // Across pods a round trip crosses edge-agg links four times.
    let far = host_addr(&lab, "h3-1-1");
    let (rtts, _, out) = ping(&lab, "h0-0-0", &far, 3, "0.2");
    assert_eq!(rtts.len(), 3, "{}", text(&out));
    assert!(rtts.iter().all(|&r| r >= 4.0), "RTTs {rtts:?} below 4 ms");

    // Host links are shaped to 100 Mbit/s: TCP across pods gets about that.
    let wire = iperf3_wire_rate(&lab, "h0-0-0", "h3-1-1", &far);
    assert!(
        (80e6..101e6).contains(&wire),
        "{:.1} Mbit/s through 100 Mbit/s host links",
        wire / 1e6
    );
}

#[test]
fn link_set_reset_fail_restore_and_flap_change_what_traffic_sees() {
    require_root!();
    let guard = up_bundled("ct", "two-hosts.toml", "");
    let lab = guard.0.clone();
    let h2 = host_addr(&lab, "h2");
    let min_rtt = |label: &str| {
        let (rtts, _, out) = ping(&lab, "h1", &h2, 3, "0.2");
        assert_eq!(rtts.len(), 3, "{label}: {}", text(&out));
        rtts.iter().copied().fold(f64::MAX, f64::min)
    };
    assert!(min_rtt("declared") < 25.0);

    // 20 ms each way on h1--s1 instead of 5: 2 x 20 + 2 x 5 = 50 ms.
    let set = run(&["link", "set", "h1--s1", "--delay", "20ms", "--lab", &lab]);
    assert!(set.status.success(), "{}", text(&set));
    let slow = min_rtt("after set");
    assert!((50.0..58.0).contains(&slow), "RTT {slow} ms after link set");

    // Reversed names work; bad values are refused before reaching the daemon.
    let bad = run(&["link", "set", "s1--h1", "--delay", "-1ms", "--lab", &lab]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    let unknown = run(&["link", "set", "h1--s2", "--delay", "1ms", "--lab", &lab]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("did you mean h1--s1"),
        "{}",
        text(&unknown)
    );

    let reset = run(&["link", "reset", "s1--h1", "--lab", &lab]);
    assert!(reset.status.success(), "{}", text(&reset));
    assert!(min_rtt("after reset") < 25.0);

    let fail = run(&["fail", "link", "h2--s1", "--lab", &lab]);
    assert!(fail.status.success(), "{}", text(&fail));
    let (rtts, _, _) = ping(&lab, "h1", &h2, 2, "0.2");
    assert!(rtts.is_empty(), "traffic crossed a failed link");
    let restore = run(&["restore", "link", "h2--s1", "--lab", &lab]);
    assert!(restore.status.success(), "{}", text(&restore));
    assert!(min_rtt("after restore") < 25.0);

    // A flap takes the link down for half of each period.
    let flap = run(&[
        "flap", "h2--s1", "--period", "2s", "--count", "1", "--lab", &lab,
    ]);
    assert!(flap.status.success(), "{}", text(&flap));
    let (rtts, _, _) = ping(&lab, "h1", &h2, 2, "0.2");
    assert!(
        rtts.is_empty(),
        "traffic crossed a flapping link while it was down"
    );
    let back = turbonet_tests::wait_until(std::time::Duration::from_secs(5), || {
        !ping(&lab, "h1", &h2, 1, "0.2").0.is_empty()
    });
    assert!(back, "the link never came back after the flap");

    let events = run(&["events", "--lab", &lab, "--json"]);
    let events: serde_json::Value = serde_json::from_slice(&events.stdout).unwrap();
    let lines: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    for expected in [
        "set h1--s1 delay=20ms",
        // Events name links as the lab does, whichever way round a
        // command wrote them (`link reset s1--h1`).
        "reset h1--s1",
        "fail link h2--s1",
        "restore link h2--s1",
        "flap: restore link h2--s1",
    ] {
        assert!(
            lines.contains(&expected),
            "missing event {expected}: {lines:?}"
        );
    }
}

#[test]
fn the_timeline_runs_after_the_fabric_is_ready() {
    require_root!();
    let lab = unique_lab("tl");
    let timeline = "\n[[timeline]]\nat = \"500ms\"\naction = \"set\"\nlink = \"h1--s1\"\ndelay = \"20ms\"\n\
                    \n[[timeline]]\nat = \"1500ms\"\naction = \"fail\"\nnode = \"h2\"\n\
                    \n[[timeline]]\nat = \"3s\"\naction = \"restore\"\nnode = \"h2\"\n\
                    \n[[timeline]]\nat = \"4s\"\naction = \"flap\"\nlink = \"h2--s1\"\nperiod = \"1s\"\ncount = 2\n";
    let file = scenario_as("two-hosts.toml", &lab, timeline);
    let _guard = LabGuard(lab.clone());
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    let h2 = host_addr(&lab, "h2");
    let logged = |what: &str| {
        let out = run(&["events", "--lab", &lab, "--json"]);
        let events: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        events
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["event"].as_str().unwrap_or("").starts_with(what))
            .cloned()
    };
    let wait = |what: &str| {
        assert!(
            turbonet_tests::wait_until(std::time::Duration::from_secs(10), || logged(what)
                .is_some()),
            "timeline never ran `{what}`"
        );
        logged(what).unwrap()
    };
    let set = wait("set h1--s1");
    assert_eq!(set["source"], "timeline");
    assert_eq!(set["result"], "ok");
    assert!(set["t"].as_f64().unwrap() >= 0.5);
    // Between the set (0.5 s) and the fail (1.5 s) the new delay shows:
    // 2 x 20 + 2 x 5 ms. A ping that the fail overlapped proves nothing,
    // so it only counts when the fail is still not logged afterwards.
    if logged("fail node h2").is_none() {
        let (rtts, _, out) = ping(&lab, "h1", &h2, 1, "0.2");
        if logged("fail node h2").is_none() {
            assert_eq!(rtts.len(), 1, "no answer before the fail: {}", text(&out));
            assert!(rtts[0] >= 50.0, "{rtts:?}: {}", text(&out));
        }
    }
    wait("fail node h2");
    wait("restore node h2");
    let (rtts, _, out) = ping(&lab, "h1", &h2, 2, "0.2");
    assert_eq!(
        rtts.len(),
        2,
        "h2 unreachable after the timeline restored it: {}",
        text(&out)
    );
    // The scheduled flap: two cycles of 0.5 s down, 0.5 s up, each logged.
    let flap = wait("flap h2--s1");
    assert_eq!(flap["result"], "ok", "{flap}");
    let cycles = turbonet_tests::wait_until(std::time::Duration::from_secs(10), || {
        let out = run(&["events", "--lab", &lab, "--json"]);
        let events: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        events
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["event"] == "flap: restore link h2--s1")
            .count()
            == 2
    });
    assert!(cycles, "the flap did not complete two cycles");
}

/// TCP through a shaped link gets the configured rate (iperf3 as the peer).
#[test]
fn declared_rate_shows_in_iperf3() {
    require_root!();
    let guard = up_bundled(
        "rt",
        "two-hosts.toml",
        "\n[[links.override]]\nlink = \"h1--s1\"\nrate = \"50mbit\"\ndelay = \"0us\"\n",
    );
    let lab = guard.0.clone();
    let h2 = host_addr(&lab, "h2");
    let wire = iperf3_wire_rate(&lab, "h1", "h2", &h2);
    assert!(
        (40e6..51e6).contains(&wire),
        "{:.1} Mbit/s on the wire through a 50 Mbit/s link",
        wire / 1e6
    );
}

/// `link show` shows what applies now: every parameter `link set` changed
/// (here the delay), next to the scenario's, as the daemon reports them.
#[test]
fn link_show_shows_what_link_set_applied() {
    require_root!();
    let guard = up_bundled("ls", "two-hosts.toml", "");
    let lab = guard.0.clone();
    let out = run(&[
        "link", "set", "h1--s1", "--delay", "20ms", "--loss", "0.1%", "--queue", "50p", "--rate",
        "1gbit", "--lab", &lab,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run(&["link", "show", "h1--s1", "--lab", &lab, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let params = &shown[0]["params"];
    assert_eq!(params["delay"], "20ms", "{shown}");
    assert_eq!(params["loss"], "0.1%", "{shown}");
    assert_eq!(params["queue"], "50p", "{shown}");
    assert_eq!(params["rate"], "1gbit", "{shown}");
    assert_eq!(shown[0]["scenario"]["delay"], "5ms", "{shown}");
    // The table marks what changed.
    let table = text(&run(&["link", "show", "h1--s1", "--lab", &lab]));
    assert!(table.contains("delay=20ms*"), "{table}");
    assert!(table.contains("set at run time"), "{table}");
}

/// The lab daemon killed with SIGKILL is started again by its supervisor
/// and re-adopts the lab: the link engine carries the impaired links again
/// with the parameters `link set` gave them, and `status` and the events say
/// it restarted.
#[test]
fn a_killed_daemon_is_restarted_and_readopts_the_lab() {
    require_root!();
    let guard = up_bundled("kd", "two-hosts.toml", "");
    let lab = guard.0.clone();
    let h2 = host_addr(&lab, "h2");
    let out = run(&["link", "set", "h1--s1", "--delay", "20ms", "--lab", &lab]);
    assert!(out.status.success(), "{}", text(&out));
    let status = |lab: &str| -> serde_json::Value {
        let out = run(&["status", "--json"]);
        let all: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("status --json: {e}\n{}", text(&out)));
        all.as_array()
            .unwrap()
            .iter()
            .find(|l| l["lab"] == lab)
            .cloned()
            .unwrap_or_else(|| panic!("{lab} not in {all}"))
    };
    let daemon = status(&lab)["daemon"].as_str().unwrap().to_owned();
    let pid: i32 = daemon
        .split_once("pid ")
        .and_then(|(_, rest)| rest.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in `{daemon}`"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        turbonet_tests::wait_until(std::time::Duration::from_secs(10), || {
            status(&lab)["daemon"]
                .as_str()
                .is_some_and(|d| d.contains("restarted 1 time"))
        }),
        "never restarted: {}",
        status(&lab)
    );
    // Traffic flows again, through the link engine, with 20 ms each way
    // on h1--s1 and 5 ms on h2--s1.
    let (rtts, _, out) = ping(&lab, "h1", &h2, 3, "0.2");
    assert_eq!(rtts.len(), 3, "{}", text(&out));
    assert!(rtts.iter().all(|&r| r >= 50.0), "RTTs {rtts:?} below 50 ms");
    let events = text(&run(&["events", "--lab", &lab]));
    for event in [
        "killed by signal 9",
        "daemon restarted (restart 1)",
        "1 impairment(s)",
    ] {
        assert!(events.contains(event), "no `{event}` in\n{events}");
    }
    let shown = run(&["link", "show", "h1--s1", "--lab", &lab, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown[0]["params"]["delay"], "20ms", "{shown}");
}

/// `events --follow` streams: an event that happens after it started
/// reaches it.
#[test]
fn events_follow_streams_new_events() {
    require_root!();
    let guard = up_bundled("ef", "two-hosts.toml", "");
    let lab = guard.0.clone();
    let mut follower = turbonet_tests::turbonet()
        .args(["events", "--follow", "--json", "--lab", &lab])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("turbonet events --follow runs");
    let stdout = follower.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    // The backlog comes first.
    let first = lines
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the backlog");
    assert!(first.contains("daemon-started"), "{first}");
    let out = run(&["fail", "link", "h2--s1", "--lab", &lab]);
    assert!(out.status.success(), "{}", text(&out));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let event: serde_json::Value = serde_json::from_str(&line).unwrap();
                if event["event"] == "fail link h2--s1" {
                    break true;
                }
                seen.push(line);
            }
            Err(_) => break false,
        }
    };
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(found, "the fail never reached the follower: {seen:?}");
}

/// A link that declares only a rate is shaped by the kernel's token bucket
/// on both ends (no frame through userspace): `link show` says so, `tc`
/// sees the qdisc, TCP gets the rate, `link set` changes it at run time,
/// and a delay, which the shaper cannot apply, is refused with the way to
/// have it.
#[test]
fn a_link_with_only_a_rate_is_shaped_by_the_kernel() {
    require_root!();
    let guard = up_bundled(
        "tb",
        "fat-tree-k4.toml",
        "\n[links.host-edge]\nrate = \"50mbit\"\n",
    );
    let lab = guard.0.clone();
    let show = run(&["link", "show", "h0-0-0--edge0-0", "--lab", &lab, "--json"]);
    assert!(show.status.success(), "{}", text(&show));
    assert!(text(&show).contains("kernel (tbf)"), "{}", text(&show));
    let qdisc = || {
        let out = std::process::Command::new("tc")
            .args(["-n", &format!("tn-{lab}-h0-0-0"), "qdisc", "show"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        qdisc().contains("tbf") && qdisc().contains("rate 50Mbit"),
        "{}",
        qdisc()
    );

    let far = host_addr(&lab, "h3-1-1");
    let wire = iperf3_wire_rate(&lab, "h0-0-0", "h3-1-1", &far);
    assert!(
        (30e6..53e6).contains(&wire),
        "{:.1} Mbit/s through 50 Mbit/s host links",
        wire / 1e6
    );

    let set = run(&[
        "link",
        "set",
        "h0-0-0--edge0-0",
        "--rate",
        "20mbit",
        "--lab",
        &lab,
    ]);
    assert!(set.status.success(), "{}", text(&set));
    assert!(qdisc().contains("rate 20Mbit"), "{}", qdisc());
    let refused = run(&[
        "link",
        "set",
        "h0-0-0--edge0-0",
        "--delay",
        "5ms",
        "--lab",
        &lab,
    ]);
    assert!(!refused.status.success());
    let why = text(&refused);
    assert!(
        why.contains("tbf") && why.contains("engine = \"userspace\""),
        "{why}"
    );
}

/// A lab whose engine runs in three shards: four impaired links are dealt
/// over them (the fourth back to the first), each carries traffic with its
/// own delay, `link set` reaches the shard that carries the link, and the
/// daemon runs exactly three engine threads.
#[test]
fn links_dealt_over_shards_each_keep_their_own_delay_and_take_link_set() {
    require_root!();
    let lab = unique_lab("sh");
    let mut text_ = format!(
        "[lab]\nname = \"{lab}\"\nengine_shards = 3\n[topology]\nkind = \"custom\"\n\
         [[topology.nodes]]\nname = \"s1\"\nrole = \"switch\"\n"
    );
    for h in 1..=4 {
        text_ += &format!("[[topology.nodes]]\nname = \"h{h}\"\nrole = \"host\"\n");
    }
    // 1, 2, 4 and 8 ms: every pair of links sums to its own delay, so a
    // link given another's parameters shows.
    for h in 1..=4u32 {
        let ms = 1 << (h - 1);
        text_ += &format!("[[topology.links]]\na = \"h{h}\"\nb = \"s1\"\ndelay = \"{ms}ms\"\n");
    }
    let file = write_scenario(&lab, &text_);
    let guard = LabGuard(lab.clone());
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    let _ = std::fs::remove_file(&file);

    // Three engine threads in the daemon.
    let out = run(&["status", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let daemon = all
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lab"] == lab.as_str())
        .and_then(|l| l["daemon"].as_str())
        .unwrap_or_else(|| panic!("no daemon for {lab} in {all}"))
        .to_owned();
    let pid: u32 = daemon
        .split_once("pid ")
        .and_then(|(_, rest)| rest.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in `{daemon}`"));
    let shards = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("link-engine-"))
        .count();
    assert_eq!(shards, 3, "engine threads of {daemon}");

    // Each path sees its own two links' delays: h1 -> h4 crosses links on
    // shards 0 (h1, and h4 dealt back to it), h2 -> h3 shards 1 and 2.
    let min = |from: &str, to: &str| {
        let (rtts, _, out) = ping(&lab, from, &host_addr(&lab, to), 5, "0.2");
        assert!(!rtts.is_empty(), "{from} -> {to}: {}", text(&out));
        rtts.iter().copied().fold(f64::MAX, f64::min)
    };
    let rtt = min("h1", "h4");
    assert!(
        (18.0..24.0).contains(&rtt),
        "h1 -> h4 RTT {rtt} ms, 2 x (1 + 8) expected"
    );
    let rtt = min("h2", "h3");
    assert!(
        (12.0..18.0).contains(&rtt),
        "h2 -> h3 RTT {rtt} ms, 2 x (2 + 4) expected"
    );

    // `link set` on links of shards 1 and 2 changes only their paths.
    for (link, delay) in [("h2--s1", "20ms"), ("h3--s1", "30ms")] {
        let out = run(&["link", "set", link, "--delay", delay, "--lab", &lab]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let rtt = min("h2", "h3");
    assert!(
        (100.0..130.0).contains(&rtt),
        "h2 -> h3 RTT {rtt} ms after link set, 2 x (20 + 30) expected"
    );
    let rtt = min("h1", "h4");
    assert!(
        (18.0..24.0).contains(&rtt),
        "h1 -> h4 RTT {rtt} ms, 2 x (1 + 8) unchanged"
    );

    // Every link's counters moved, whichever shard carries it.
    let out = run(&["link", "show", "--lab", &lab, "--json"]);
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for l in links.as_array().unwrap() {
        let moved = l["directions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["tx_packets"].as_u64().unwrap_or(0) > 0);
        assert!(moved, "no frames counted on {}: {l}", l["link"]);
    }
    drop(guard);
}
