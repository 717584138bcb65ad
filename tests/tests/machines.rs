//! End-to-end: labs over several machines, each machine emulated as a
//! network namespace with mounts of its own ([`turbonet_tests::machines`])
//! running an unmodified `turbonet worker` (root).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use turbonet_tests::machines::Machines;
use turbonet_tests::{
    LabGuard, require_root, run, scenario_as, text, unique_lab, wait_until, workspace,
    write_scenario,
};

/// How long a lab over machines may take to come up here.
const UP: Duration = Duration::from_secs(240);

/// `turbonet check --json` on machine `i`: its hosts to every host.
fn check_on(machines: &Machines, i: usize, lab: &str) -> serde_json::Value {
    let out = machines.turbonet(i, &["check", "--lab", lab, "--json"]);
    assert!(out.status.success(), "check on machine {i}: {}", text(&out));
    serde_json::from_slice(&out.stdout).expect("check's JSON")
}

/// `turbonet check --json` on machine `i` where it is to fail: how many
/// probes went unanswered.
fn check_on_failing(machines: &Machines, i: usize, lab: &str) -> usize {
    let out = machines.turbonet(i, &["check", "--lab", lab, "--json", "--timeout", "2"]);
    assert!(
        !out.status.success(),
        "check on machine {i}: {}",
        text(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("check's JSON");
    report["failures"].as_array().expect("failures").len()
}

/// A fat-tree over two machines: every pair of hosts reaches each other,
/// every node's routes are as on one machine; a worker killed and started
/// again keeps its part, its cut links down meanwhile, and learns the
/// failures made while it was away.
#[test]
fn a_fat_tree_over_two_machines_reaches_every_host_pair() {
    require_root!();
    let lab = unique_lab("wk");
    let file = scenario_as("fat-tree-k4.toml", &lab, "");
    let mut machines = Machines::new(&lab, 2);
    machines.run_lab(&lab, &file, UP);
    // `check` on either machine checks every ordered pair: from its hosts,
    // and through the other machine's worker from that one's.
    for i in 0..2 {
        let report = check_on(&machines, i, &lab);
        assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
        assert_eq!(report["part"], "all 2 machines");
        assert_eq!(report["hosts"], 16, "every host probed from, once");
        assert_eq!(report["probes"], 16 * 15, "every ordered pair of hosts");
    }

    // Every node's routes as on one machine.
    let over: Vec<_> = (0..2).map(|i| tables(Some((&machines, i)), &lab)).collect();
    let one = unique_lab("wo");
    let _one = up_here(&one, &scenario_as("fat-tree-k4.toml", &one, ""));
    same_tables(&over, &tables(None, &one));

    // The lab's commands see every part from either machine: which
    // machine runs each node, a node's routes read where it runs; `exec`
    // on a node of the other machine is refused naming it.
    let machine_of = |node: &str| (0..2).find(|i| over[*i].contains_key(node)).unwrap();
    for i in 0..2 {
        let shown = machines.turbonet(i, &["show", "nodes", "--lab", &lab, "--json"]);
        assert!(shown.status.success(), "{}", text(&shown));
        let nodes: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        let nodes = nodes.as_array().unwrap();
        assert_eq!(nodes.len(), 36);
        for node in nodes {
            let name = node["name"].as_str().unwrap();
            assert_eq!(node["machine"], machine_of(name), "{node}");
        }
    }
    for i in 0..2 {
        let status = machines.turbonet(i, &["status", "--json"]);
        let labs: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        let ours = (labs.as_array().unwrap().iter())
            .find(|l| l["lab"] == lab.as_str())
            .expect("the lab in status");
        assert_eq!(ours["part"], format!("machine {i} of 2"));
        // Each worker's readiness: its part built, its daemon answering.
        let ready = machines.turbonet(i, &["status", "--ready", &lab]);
        assert!(ready.status.success(), "{}", text(&ready));
        let absent = machines.turbonet(i, &["status", "--ready", "nolab"]);
        assert!(!absent.status.success());
        assert!(
            text(&absent).contains("lab nolab is not up here"),
            "{}",
            text(&absent)
        );
    }
    let ready = run(&["status", "--ready", &one]);
    assert!(ready.status.success(), "{}", text(&ready));
    let away = |i: usize| {
        if machine_of("edge0-0") == i {
            "edge1-0"
        } else {
            "edge0-0"
        }
    };
    for i in 0..2 {
        let node = away(i);
        let there = machines.turbonet(1 - i, &["show", "routes", node, "--lab", &lab, "--json"]);
        let here = machines.turbonet(i, &["show", "routes", node, "--lab", &lab, "--json"]);
        assert!(here.status.success(), "{}", text(&here));
        assert_eq!(
            here.stdout, there.stdout,
            "{node}'s routes read from machine {i}"
        );
        assert!(String::from_utf8_lossy(&here.stdout).contains("\"prefix\""));
        let exec = machines.turbonet(i, &["exec", "--lab", &lab, node, "true"]);
        assert!(!exec.status.success());
        assert!(
            text(&exec).contains(&format!("{node} runs on machine {}", 1 - i)),
            "{}",
            text(&exec)
        );
    }

    // `watch` on either machine rates the links the other carries: pings
    // between two hosts of the other machine show there.
    for i in 0..2 {
        let other = 1 - i;
        let from = (over[other].keys())
            .find(|n| n.starts_with('h') && n.ends_with("-0"))
            .unwrap();
        let to = format!("{}1", &from[..from.len() - 1]);
        let to_address = host_address(Some((&machines, other)), &lab, &to);
        let mut ping = machines
            .on(other, "ip")
            .args(["netns", "exec", &format!("tn-{lab}-{from}"), "ping", "-q"])
            .args(["-c", "40", "-i", "0.05", &to_address])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("ping runs");
        let watched = machines.turbonet(
            i,
            &[
                "watch", "--lab", &lab, "--json", "--all", "--count", "3", "-n", "0.5",
            ],
        );
        ping.wait().unwrap();
        assert!(watched.status.success(), "{}", text(&watched));
        let frames: Vec<serde_json::Value> = (String::from_utf8_lossy(&watched.stdout).lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!frames.is_empty(), "{}", text(&watched));
        assert!(
            frames.iter().all(|f| f["links"] == 48),
            "{}",
            text(&watched)
        );
        let pinged = frames.iter().any(|f| {
            (f["directions"].as_array().unwrap().iter())
                .any(|d| d["from"] == from.as_str() && d["frames_per_second"].as_f64() > Some(0.0))
        });
        assert!(
            pinged,
            "{from} -> {to} on machine {other}, watched from machine {i}: {}",
            text(&watched)
        );
    }

    // Worker 1 killed: its part stays up, machine 0 takes its cut links
    // to it down; started again, it keeps its part and the links come back.
    machines.kill_worker(1);
    machines.wait_for(0, "machine 1 is lost: its 8 cut links down", UP);
    machines.wait_for(0, "degraded: machine(s) 1 lost", UP);
    let cut_off = check_on_failing(&machines, 0, &lab);
    assert!(cut_off > 0, "hosts on machine 1 unreachable from machine 0");
    machines.start_worker(1, &lab, &file);
    machines.wait_for(1, "up already, as placed: kept", UP);
    machines.wait_for(0, "machine 1 is back: its 8 cut links up again", UP);
    machines.wait_for(0, "the lab runs on all 2 machines", UP);
    for i in 0..2 {
        let report = check_on(&machines, i, &lab);
        assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
    }

    // A cut link failed at one machine goes down at the other too: every
    // node's routes and every unanswered probe are those of the same link
    // failed on one machine. Restored at the other machine, it is back at
    // both, the routes too.
    let plan = plan_of(&file, 2);
    let cut = &plan["cut_links"][0];
    let link = cut["link"].as_str().unwrap();
    let (a, b) = link.split_once("--").unwrap();
    let on = |end: usize| cut["machines"][end].as_u64().unwrap() as usize;
    let failed = machines.turbonet(on(0), &["fail", "--lab", &lab, "link", link]);
    assert!(failed.status.success(), "{}", text(&failed));
    assert!(
        wait_until(UP, || !port_up(&machines, on(1), &lab, b, a)),
        "{b}'s end of {link} did not go down on machine {}",
        on(1)
    );
    let failed_one = run(&["fail", "--lab", &one, "link", link]);
    assert!(failed_one.status.success(), "{}", text(&failed_one));
    // `events` on either machine is the lab's: the failure made at one
    // machine, and its mirror at the other, each with its machine.
    let failure = format!("fail link {link}");
    for i in 0..2 {
        let logged = machines.turbonet(i, &["events", "--lab", &lab, "--json"]);
        assert!(logged.status.success(), "{}", text(&logged));
        let events: serde_json::Value = serde_json::from_slice(&logged.stdout).unwrap();
        let by = |machine: usize, source: &str| {
            events.as_array().unwrap().iter().any(|e| {
                e["event"].as_str().is_some_and(|t| t.starts_with(&failure))
                    && e["machine"] == machine
                    && e["source"] == source
            })
        };
        assert!(
            by(on(0), "api") && by(on(1), "machines"),
            "machine {i}'s events: {events:#}"
        );
        let times: Vec<f64> = (events.as_array().unwrap().iter())
            .map(|e| e["unix"].as_f64().unwrap())
            .collect();
        assert!(times.is_sorted(), "in the order they happened");
    }
    let as_on_one = |machines: &Machines| {
        let over: Vec<_> = (0..2).map(|i| tables(Some((machines, i)), &lab)).collect();
        differences(&over, &tables(None, &one))
    };
    assert!(
        wait_until(UP, || as_on_one(&machines).is_none()),
        "routes with {link} failed: {}",
        as_on_one(&machines).unwrap_or_default()
    );
    let unanswered_over: BTreeSet<_> = (0..2)
        .flat_map(|i| {
            unanswered(&check_json(
                machines.turbonet(i, &["check", "--lab", &lab, "--json"]),
            ))
        })
        .collect();
    let unanswered_one = unanswered(&check_json(run(&["check", "--lab", &one, "--json"])));
    assert!(
        !unanswered_one.is_empty(),
        "static routes adjust at the link's ends only"
    );
    assert_eq!(
        unanswered_over, unanswered_one,
        "the same probes unanswered"
    );

    let restored = machines.turbonet(on(1), &["restore", "--lab", &lab, "link", link]);
    assert!(restored.status.success(), "{}", text(&restored));
    assert!(
        wait_until(UP, || port_up(&machines, on(0), &lab, a, b)),
        "{a}'s end of {link} did not come back on machine {}",
        on(0)
    );
    let restored_one = run(&["restore", "--lab", &one, "link", link]);
    assert!(restored_one.status.success(), "{}", text(&restored_one));
    assert!(
        wait_until(UP, || as_on_one(&machines).is_none()),
        "routes with {link} restored: {}",
        as_on_one(&machines).unwrap_or_default()
    );
    for i in 0..2 {
        let report = check_on(&machines, i, &lab);
        assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
    }

    // A link of machine 1's part (pods 1 and 3) failed at machine 0 while
    // worker 1 is away: back, its part kept, worker 1 is told and takes
    // the link down; restored at machine 0, it comes back there as usual.
    let (edge, agg) = ("edge1-0", "agg1-0");
    let local = format!("{edge}--{agg}");
    machines.kill_worker(1);
    let failed = machines.turbonet(0, &["fail", "--lab", &lab, "link", &local]);
    assert!(failed.status.success(), "{}", text(&failed));
    assert!(
        port_up(&machines, 1, &lab, edge, agg),
        "no one told machine 1"
    );
    machines.start_worker(1, &lab, &file);
    assert!(
        wait_until(UP, || !port_up(&machines, 1, &lab, edge, agg)),
        "{local}, failed while worker 1 was away, is up on machine 1:\n{}",
        machines.said(1)
    );
    let restored = machines.turbonet(0, &["restore", "--lab", &lab, "link", &local]);
    assert!(restored.status.success(), "{}", text(&restored));
    assert!(
        wait_until(UP, || port_up(&machines, 1, &lab, edge, agg)),
        "{local} restored at machine 0 is still down on machine 1"
    );

    for i in 0..2 {
        stop(&mut machines, i);
        let left = machines.turbonet(i, &["status", "--json"]);
        assert!(
            !String::from_utf8_lossy(&left.stdout).contains(&lab),
            "lab {lab} left on machine {i}: {}",
            text(&left)
        );
    }
}

/// Stops worker `i` (SIGTERM), which takes its part down and exits 0.
fn stop(machines: &mut Machines, i: usize) {
    let status = machines.stop_worker(i).expect("a worker to stop");
    assert!(
        status.success(),
        "worker {i}: {status}:\n{}",
        machines.said(i)
    );
}

/// Every node's IPv4 routes (every table) on machine `i` of a lab over several,
/// or with `i` none on this machine, by node: `ip route` of each of the
/// lab's namespaces there, its lines sorted.
fn tables(machines: Option<(&Machines, usize)>, lab: &str) -> BTreeMap<String, Vec<String>> {
    let run = |args: &[&str]| -> String {
        let out = at(machines, args[0])
            .args(&args[1..])
            .output()
            .expect("runs");
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        String::from_utf8(out.stdout).expect("text")
    };
    let prefix = format!("tn-{lab}-");
    run(&["ls", "/run/netns"])
        .split_whitespace()
        .filter_map(|ns| Some((ns, ns.strip_prefix(&prefix)?)))
        .map(|(ns, node)| {
            // A route a line; the kernel's numbers of next-hop objects
            // depend on the order routes were learned in, not on them.
            let mut lines: Vec<String> =
                run(&["ip", "-o", "-4", "-n", ns, "route", "show", "table", "all"])
                    .lines()
                    .map(without_object_ids)
                    .collect();
            lines.sort();
            (node.to_owned(), lines)
        })
        .collect()
}

/// Asserts that the tables of the lab over machines, taken machine by
/// machine, are those of the same scenario on one machine, node by node.
fn same_tables(over: &[BTreeMap<String, Vec<String>>], one: &BTreeMap<String, Vec<String>>) {
    if let Some(differ) = differences(over, one) {
        panic!("{differ}");
    }
}

/// How the tables of the lab over machines differ from those of the same
/// scenario on one machine, if they do.
fn differences(
    over: &[BTreeMap<String, Vec<String>>],
    one: &BTreeMap<String, Vec<String>>,
) -> Option<String> {
    let mut all = BTreeMap::new();
    for part in over {
        for (node, lines) in part {
            if all.insert(node.clone(), lines.clone()).is_some() {
                return Some(format!("{node} runs on two machines"));
            }
        }
    }
    if !all.keys().eq(one.keys()) {
        return Some(format!(
            "nodes {:?} over machines, {:?} on one",
            all.keys().collect::<Vec<_>>(),
            one.keys().collect::<Vec<_>>()
        ));
    }
    all.iter()
        .find(|(node, lines)| *lines != &one[*node])
        .map(|(node, lines)| {
            format!(
                "{node}'s routes over machines:\n{}\non one:\n{}",
                lines.join("\n"),
                one[node].join("\n")
            )
        })
}

/// `turbonet check --json`'s report, whatever its verdict.
fn check_json(out: std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("check's JSON: {}", text(&out)))
}

/// The probes a check's report says went unanswered: (from, to, address).
fn unanswered(report: &serde_json::Value) -> BTreeSet<(String, String, String)> {
    (report["failures"].as_array().expect("failures").iter())
        .map(|f| {
            let field = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (field("from"), field("to"), field("address"))
        })
        .collect()
}

/// Brings `file` up on this machine as lab `lab`; the guard takes it down.
fn up_here(lab: &str, file: &Path) -> LabGuard {
    let guard = LabGuard(lab.to_owned());
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(up.status.success(), "up {lab}: {}", text(&up));
    guard
}

/// `ping` from host `from` (its namespace `tn-LAB-FROM`) to `to`, on
/// machine `i`: how many of `count` were answered.
/// `program` run on machine `i` of `machines`, or on this one.
fn at(machines: Option<(&Machines, usize)>, program: &str) -> Command {
    match machines {
        Some((m, i)) => m.on(i, program),
        None => Command::new(program),
    }
}

fn pings(
    machines: Option<(&Machines, usize)>,
    lab: &str,
    from: &str,
    to: &str,
    args: &[&str],
) -> u32 {
    let ns = format!("tn-{lab}-{from}");
    let out = at(machines, "ip")
        .args(["netns", "exec", &ns, "ping", "-q"])
        .args(args)
        .arg(to)
        .output()
        .expect("ping runs");
    received(&String::from_utf8_lossy(&out.stdout))
}

/// The number of replies in ping's summary.
fn received(summary: &str) -> u32 {
    summary
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(" transmitted, ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// A link's counters from `link show LINK --json`: per direction, frames
/// passed and dropped.
fn drops(out: &std::process::Output, link: &str) -> serde_json::Value {
    assert!(out.status.success(), "link show {link}: {}", text(out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    rows.as_array()
        .and_then(|r| r.iter().find(|l| l["link"] == link || l["name"] == link))
        .cloned()
        .unwrap_or_else(|| panic!("{link} in {rows}"))
}

/// What a link's model decided, per direction: frames in and out, and
/// dropped by cause (not the machine's timing).
fn model(counters: &serde_json::Value) -> Vec<BTreeMap<&str, u64>> {
    let fields = [
        "rx_packets",
        "tx_packets",
        "dropped_loss",
        "dropped_queue",
        "corrupted",
    ];
    (counters["directions"]
        .as_array()
        .expect("directions")
        .iter())
    .map(|d| {
        fields
            .iter()
            .map(|f| (*f, d[*f].as_u64().unwrap_or(0)))
            .collect()
    })
    .collect()
}

/// The triangle of switches, each with a host, over three machines: every
/// switch link is cut. The links between switches are impaired (carried by
/// a link engine at one end), one with seeded loss. Two of them are
/// mirrored to the host of the third switch, on the third machine: one
/// tapped in its owner's engine, one (rate-shaped) at its owner's port.
#[test]
fn a_triangle_over_three_machines_cuts_every_switch_link_and_keeps_its_model() {
    require_root!();
    let lab = unique_lab("wt");
    let impair = |text: String| {
        text.replace("seed", "#")
            .replace("name = \"tri\"", "name = \"tri\"\nseed = 3")
            .replace(
                "a = \"r1\"\nb = \"r2\"",
                "a = \"r1\"\nb = \"r2\"\ndelay = \"1ms\"\nloss = \"20%\"",
            )
            .replace(
                "a = \"r2\"\nb = \"r3\"",
                "a = \"r2\"\nb = \"r3\"\ndelay = \"2ms\"",
            )
            .replace(
                "a = \"r3\"\nb = \"r1\"",
                "a = \"r3\"\nb = \"r1\"\nrate = \"1gbit\"",
            )
            + "\n[[mirror]]\nlink = \"r1--r2\"\nto = \"h3\"\nport = \"span0\"\n\
               \n[[mirror]]\nlink = \"r3--r1\"\nto = \"h2\"\nport = \"span1\"\n"
    };
    let original = workspace().join("scenarios/custom-triangle.toml");
    let text = impair(std::fs::read_to_string(&original).unwrap());
    assert!(text.contains("loss = \"20%\"") && text.contains("seed = 3"));
    let file = write_scenario(
        &lab,
        &text.replace("name = \"tri\"", &format!("name = \"{lab}\"")),
    );

    let mut machines = Machines::new(&lab, 3);
    machines.run_lab(&lab, &file, UP);
    // Which machine runs which host: the one whose namespaces hold it.
    let over: Vec<_> = (0..3).map(|i| tables(Some((&machines, i)), &lab)).collect();
    let machine_of = |node: &str| (0..3).find(|i| over[*i].contains_key(node)).unwrap();

    // The lossy link's model: 40 pings h1 -> h2 across r1--r2.
    let lossy = ["-c", "40", "-i", "0.02", "-W", "1"];
    let h2 = host_address(Some((&machines, machine_of("h2"))), &lab, "h2");
    let mirrored = |host: &str, port: &str| {
        let out = machines.turbonet(
            machine_of(host),
            &[
                "exec",
                "--lab",
                &lab,
                host,
                "cat",
                &format!("/sys/class/net/{port}/statistics/rx_packets"),
            ],
        );
        assert!(
            out.status.success(),
            "{host} {port}: {}",
            turbonet_tests::text(&out)
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let span0 = mirrored("h3", "span0");
    let answered = pings(Some((&machines, machine_of("h1"))), &lab, "h1", &h2, &lossy);
    // Every request and reply that crossed was copied to h3 on the third
    // machine, through the mirror's tunnel from the link's owner.
    assert!(answered > 0, "some pings crossed r1--r2");
    let copies = mirrored("h3", "span0") - span0;
    assert!(
        copies >= 2 * u64::from(answered),
        "{copies} copies at h3's span0 of {answered} pings answered"
    );
    // The rate-shaped cut link, tapped at its owner's end.
    let h1 = host_address(Some((&machines, machine_of("h1"))), &lab, "h1");
    let span1 = mirrored("h2", "span1");
    let got = pings(
        Some((&machines, machine_of("h3"))),
        &lab,
        "h3",
        &h1,
        &["-c", "10", "-i", "0.02", "-W", "1"],
    );
    assert_eq!(got, 10, "h3 -> h1 across r3--r1");
    let copies = mirrored("h2", "span1") - span1;
    assert!(copies >= 20, "{copies} copies at h2's span1 of 10 pings");
    let owner = (0..3)
        .map(|i| machines.turbonet(i, &["link", "show", "r1--r2", "--lab", &lab, "--json"]))
        .find(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("drop"))
        .expect("the link's owner counts it");
    let over_model = drops(&owner, "r1--r2");
    // Every machine shows the link as its owner counts it.
    for i in 0..3 {
        let shown = machines.turbonet(i, &["link", "show", "r1--r2", "--lab", &lab, "--json"]);
        assert!(
            shown.status.success(),
            "{}",
            String::from_utf8_lossy(&shown.stderr)
        );
        assert_eq!(
            model(&drops(&shown, "r1--r2")),
            model(&over_model),
            "machine {i}"
        );
    }

    // A capture of r1--r2 from a machine that does not carry it is its
    // owner's: both directions of the pings, through the owner's worker.
    let owner_index = (0..3)
        .find(|&i| {
            let out = machines.turbonet(i, &["link", "show", "r1--r2", "--lab", &lab, "--json"]);
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("drop")
        })
        .expect("an owner");
    // Its owner measured the underlay to the far machine, and takes it off
    // the link's delay.
    let said = machines.said(owner_index);
    assert!(
        said.contains(
            "one way (half the median round trip of 200 echoes), taken off the delay \
             of the 1 cut link this machine's engine carries to it"
        ),
        "{said}"
    );
    let elsewhere = (owner_index + 1) % 3;
    let ping = |from: &str, to: &str| {
        pings(
            Some((&machines, machine_of(from))),
            &lab,
            from,
            to,
            &["-c", "2", "-i", "0.1", "-W", "1"],
        );
    };
    let captured = capture_while(&machines, elsewhere, &lab, "r1--r2", || ping("h1", &h2));
    for needle in ["r1 -> r2", "r2 -> r1", "4 frames captured on r1--r2"] {
        assert!(
            captured.contains(needle),
            "{needle} in the capture from machine {elsewhere}: {captured}"
        );
    }
    // The rate-shaped cut link is captured at the end of the machine asked,
    // and from the third machine at its owner's end.
    for i in 0..3 {
        let captured = capture_while(&machines, i, &lab, "r3--r1", || ping("h3", &h1));
        for needle in ["r3 -> r1", "r1 -> r3", "4 frames captured on r3--r1"] {
            assert!(
                captured.contains(needle),
                "{needle} in the capture from machine {i}: {captured}"
            );
        }
    }

    // Packets of the links' MTU cross every cut link whole.
    for (from, to) in [("h1", "h2"), ("h2", "h3"), ("h3", "h1")] {
        let addr = host_address(Some((&machines, machine_of(to))), &lab, to);
        let got = pings(
            Some((&machines, machine_of(from))),
            &lab,
            from,
            &addr,
            &[
                "-c", "10", "-i", "0.05", "-W", "1", "-M", "do", "-s", "1472",
            ],
        );
        assert!(got > 0, "{from} -> {to}: no 1,500-byte packet crossed");
    }
    for i in 0..3 {
        assert_eq!(
            fragments_made(&machines, i),
            0,
            "machine {i} fragmented nothing"
        );
    }
    // TCP (segments the size the kernel offloads) through the engine of
    // the cut link r2--r3, whose far-side port is a VXLAN device.
    let moved = tcp_bytes(
        &machines,
        &lab,
        ("h2", machine_of("h2")),
        ("h3", machine_of("h3")),
    );
    assert!(moved > 1_000_000, "TCP h2 -> h3 moved {moved} bytes");

    // The same scenario on one machine: the same tables, the same drops.
    let one = unique_lab("wo");
    let one_file = write_scenario(
        &one,
        &text.replace("name = \"tri\"", &format!("name = \"{one}\"")),
    );
    let _guard = up_here(&one, &one_file);
    let h2_one = host_address(None, &one, "h2");
    assert_eq!(h2_one, h2, "h2's address");
    let answered_one = pings(None, &one, "h1", &h2_one, &lossy);
    let one_model = drops(
        &run(&["link", "show", "r1--r2", "--lab", &one, "--json"]),
        "r1--r2",
    );
    assert_eq!(answered, answered_one, "the same pings answered");
    assert_eq!(
        model(&over_model),
        model(&one_model),
        "the same model's counts"
    );
    assert!(
        answered > 0 && model(&over_model).iter().any(|d| d["dropped_loss"] > 0),
        "some pings crossed, some frames were lost: {over_model}"
    );
    let renamed: BTreeMap<String, Vec<String>> = tables(None, &one);
    same_tables(&over, &renamed);

    // `link set` and `link reset` from any machine are made where the link
    // is carried: r1--r2 by its owner's engine, r3--r1 (rate-shaped: each
    // end shapes its own direction) at both its machines.
    for (link, flag, value, machines_told) in [
        ("r1--r2", "--delay", "3ms", 1),
        ("r3--r1", "--rate", "500mbit", 2),
    ] {
        let key = &flag[2..];
        for i in 0..3 {
            let set = machines.turbonet(i, &["link", "set", link, flag, value, "--lab", &lab]);
            assert!(set.status.success(), "{}", turbonet_tests::text(&set));
            assert_eq!(
                String::from_utf8_lossy(&set.stdout)
                    .matches("machine ")
                    .count(),
                machines_told,
                "{}",
                turbonet_tests::text(&set)
            );
            for j in 0..3 {
                let shown = machines.turbonet(j, &["link", "show", link, "--lab", &lab, "--json"]);
                assert_eq!(drops(&shown, link)["params"][key], value, "machine {j}");
            }
            let reset = machines.turbonet(i, &["link", "reset", link, "--lab", &lab]);
            assert!(reset.status.success(), "{}", turbonet_tests::text(&reset));
            let shown = machines.turbonet(i, &["link", "show", link, "--lab", &lab, "--json"]);
            assert_ne!(
                drops(&shown, link)["params"][key],
                value,
                "reset from machine {i}"
            );
        }
    }
}

/// What `turbonet capture LINK --count 4` on machine `i` says, `ping`
/// sending frames across the link until it has its four.
fn capture_while(machines: &Machines, i: usize, lab: &str, link: &str, ping: impl Fn()) -> String {
    let capture = machines
        .on(i, turbonet_tests::binary())
        .args([
            "capture",
            link,
            "--count",
            "4",
            "--duration",
            "20",
            "--lab",
            lab,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("capture runs");
    let capture = std::sync::Mutex::new(Some(capture));
    wait_until(UP, || {
        ping();
        let mut slot = capture.lock().unwrap();
        slot.as_mut().unwrap().try_wait().unwrap().is_some()
    });
    let child = capture.lock().unwrap().take().unwrap();
    let captured = child.wait_with_output().unwrap();
    let said = text(&captured);
    assert!(
        captured.status.success(),
        "capture of {link} from machine {i}: {said}"
    );
    said
}

/// `turbonet plan --machines M FILE --json`.
fn plan_of(file: &Path, machines: u32) -> serde_json::Value {
    let m = machines.to_string();
    let plan = run(&["plan", "--machines", &m, "--json", file.to_str().unwrap()]);
    assert!(plan.status.success(), "{}", text(&plan));
    serde_json::from_slice(&plan.stdout).expect("the plan")
}

/// Host `host`'s address (its first, global) on machine `i`.
fn host_address(machines: Option<(&Machines, usize)>, lab: &str, host: &str) -> String {
    let out = at(machines, "ip")
        .args(["-n", &format!("tn-{lab}-{host}"), "-4", "-o", "addr"])
        .args(["show", "scope", "global"])
        .output()
        .expect("ip runs");
    assert!(out.status.success(), "{host}'s address: {}", text(&out));
    first_address(&String::from_utf8_lossy(&out.stdout))
}

/// The first address of `ip -o addr` output, without its prefix length.
fn first_address(listing: &str) -> String {
    let field = listing.split_whitespace().nth(3).expect("an address");
    field.split('/').next().expect("address/len").to_owned()
}

/// IPv4 fragments machine `i` has made (`FragCreates`): its underlay's.
fn fragments_made(machines: &Machines, i: usize) -> u64 {
    let out = machines
        .on(i, "cat")
        .arg("/proc/net/snmp")
        .output()
        .expect("cat runs");
    let snmp = String::from_utf8_lossy(&out.stdout);
    let mut ip = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (ip.next().expect("names"), ip.next().expect("values"));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(name, _)| *name == "FragCreates")
        .and_then(|(_, v)| v.parse().ok())
        .expect("FragCreates")
}

/// HPN's two segments over two machines: every pair of hosts (each with
/// two ports, to two ToRs) reaches each other, every node's routes as on
/// one machine; worker 0 (the coordinator) killed, the lab runs on, and
/// started again it gathers the other, each keeping its part.
#[test]
fn hpn_over_two_machines_reaches_every_host_pair() {
    require_root!();
    let lab = unique_lab("wh");
    let file = scenario_as("hpn.toml", &lab, "");
    let mut machines = Machines::new(&lab, 2);
    machines.run_lab(&lab, &file, UP);
    let mut probes = Vec::new();
    for i in 0..2 {
        let report = check_on(&machines, i, &lab);
        assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
        probes.push(report["probes"].as_u64().unwrap());
    }
    let over: Vec<_> = (0..2).map(|i| tables(Some((&machines, i)), &lab)).collect();
    let one = unique_lab("wo");
    let _guard = up_here(&one, &scenario_as("hpn.toml", &one, ""));
    let whole = run(&["check", "--lab", &one, "--json"]);
    assert!(whole.status.success(), "{}", text(&whole));
    let whole: serde_json::Value = serde_json::from_slice(&whole.stdout).unwrap();
    assert_eq!(
        probes,
        vec![whole["probes"].as_u64().unwrap(); 2],
        "the same probes from either machine as on one"
    );
    same_tables(&over, &tables(None, &one));

    // Its part still up, machine 0's hosts answer; its worker does not.
    machines.kill_worker(0);
    machines.wait_for(1, "lost the coordinator", UP);
    let report = check_json(machines.turbonet(1, &["check", "--lab", &lab, "--json"]));
    assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
    let missing = report["missing"]
        .as_array()
        .expect("machines not checked from");
    assert!(
        missing.len() == 1 && missing[0].as_str().unwrap().starts_with("machine 0:"),
        "{report}"
    );
    machines.start_worker(0, &lab, &file);
    machines.wait_for(0, "up already, as placed: kept", UP);
    for i in 0..2 {
        machines.wait_for(i, "the lab runs on all 2 machines", UP);
    }
    for i in 0..2 {
        let report = check_on(&machines, i, &lab);
        assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
    }
}

/// Bytes iperf3 moved in 2 s from host `from` to host `to` (each on its
/// machine), the server started first and the client tried until it
/// answers.
fn tcp_bytes(machines: &Machines, lab: &str, from: (&str, usize), to: (&str, usize)) -> u64 {
    let addr = host_address(Some((machines, to.1)), lab, to.0);
    let mut server = machines
        .on(to.1, "ip")
        .args(["netns", "exec", &format!("tn-{lab}-{}", to.0)])
        .args(["iperf3", "-s", "-1", "-p", "5201"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("iperf3 -s starts");
    let start = std::time::Instant::now();
    let report = loop {
        let out = machines
            .on(from.1, "ip")
            .args(["netns", "exec", &format!("tn-{lab}-{}", from.0)])
            .args(["iperf3", "-c", &addr, "-p", "5201", "-t", "2", "-J"])
            .output()
            .expect("iperf3 -c runs");
        // With -J, iperf3 may say it could not connect (the server is not
        // listening yet) and still exit 0.
        let report = serde_json::from_slice::<serde_json::Value>(&out.stdout).ok();
        if let Some(report) = report.filter(|r| out.status.success() && r["error"].is_null()) {
            break report;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "iperf3 {} -> {}: {}",
            from.0,
            to.0,
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = server.kill();
    let _ = server.wait();
    let bytes = report["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    if bytes == 0 {
        eprintln!("iperf3 {} -> {}: {report:#}", from.0, to.0);
    }
    bytes
}

/// A fat-tree whose switches speak BGP over two machines, with `agents`
/// (`[routing]` lines): each machine runs its switches' speakers, their
/// sessions across cut links; every pair of hosts reaches each other, and
/// every switch's routes are those of the same fabric on one machine.
fn bgp_over_two_machines(prefix: &str, agents: &str) {
    let lab = unique_lab(prefix);
    let bgp = |lab: &str| {
        let file = scenario_as("fat-tree-k4.toml", lab, "");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("mode = \"static\""));
        let routing = format!("mode = \"bgp\"\n{agents}");
        write_scenario(lab, &text.replace("mode = \"static\"", &routing))
    };
    let file = bgp(&lab);
    let mut machines = Machines::new(&lab, 2);
    machines.run_lab(&lab, &file, UP);
    for i in 0..2 {
        assert!(
            machines.said(i).contains("converged in"),
            "machine {i}'s switches converged: {}",
            machines.said(i)
        );
    }
    for i in 0..2 {
        let report = check_on(&machines, i, &lab);
        assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
    }
    // A snapshot taken on either machine holds every switch: its
    // forwarding table, and its built-in agent's RIBs or its FRR or BIRD
    // configuration, each from the machine that runs it.
    for i in 0..2 {
        let dir = std::env::temp_dir().join(format!("{lab}-snapshot-{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        let out = machines.turbonet(i, &["snapshot", dir.to_str().unwrap(), "--lab", &lab]);
        assert!(out.status.success(), "{}", text(&out));
        let snapshot: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("snapshot.json")).unwrap()).unwrap();
        let configs = snapshot["configs"].as_object().unwrap().len();
        let written = (snapshot["configs"].as_object().unwrap().values())
            .flat_map(|c| c["files"].as_array().unwrap().clone())
            .all(|f| dir.join(f.as_str().unwrap()).is_file());
        let _ = std::fs::remove_dir_all(&dir);
        let fib = snapshot["fib"].as_object().unwrap();
        assert_eq!(fib.len(), 20, "every switch's table: {:?}", fib.keys());
        assert!(fib.values().all(|t| t.as_array().unwrap().len() > 10));
        let ribs = snapshot["rib"].as_object().unwrap().len();
        assert_eq!(ribs + configs, 20, "{ribs} RIBs, {configs} configurations");
        assert!(written, "every configuration file written");
    }

    // `show bgp` on either machine lists every switch's speaker, from
    // both machines.
    for i in 0..2 {
        let shown = machines.turbonet(i, &["show", "bgp", "--lab", &lab, "--json"]);
        assert!(shown.status.success(), "{}", text(&shown));
        let report: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        let speakers = report["speakers"].as_array().unwrap();
        assert_eq!(speakers.len(), 20, "{report:#}");
        assert!(
            speakers.iter().all(|s| s["converged"] == true),
            "{report:#}"
        );
    }
    let over: Vec<_> = (0..2).map(|i| tables(Some((&machines, i)), &lab)).collect();
    let one = unique_lab("wo");
    let _guard = up_here(&one, &bgp(&one));
    same_tables(&over, &tables(None, &one));
}

#[test]
fn a_bgp_fat_tree_over_two_machines_converges_across_cut_links() {
    require_root!();
    bgp_over_two_machines("wb", "");
}

/// FRR and BIRD among the built-in agents, on both machines (core0 and
/// agg0-0 on one, core3 and agg3-1 on the other).
#[test]
fn frr_bird_and_builtin_agents_over_two_machines_converge() {
    require_root!();
    bgp_over_two_machines(
        "wf",
        "[routing.agents]\n\"core0\" = \"frr\"\n\"agg0-0\" = \"bird\"\n\"core3\" = \"bird\"\n\"agg3-1\" = \"frr\"\n",
    );
}

/// An `ip -o route` line without its next-hop object's number (`nhid N`)
/// and with a multipath route's next hops in order: both are the order
/// routes were learned in (an object's number, a group's members), not
/// what the table holds.
fn without_object_ids(line: &str) -> String {
    let mut parts: Vec<Vec<&str>> = vec![Vec::new()];
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            "nhid" => {
                words.next();
            }
            // `-o` ends each line of a multipath route with a backslash.
            "\\" => parts.push(Vec::new()),
            w => parts.last_mut().expect("one part").push(w),
        }
    }
    let mut parts: Vec<String> = parts.iter().map(|p| p.join(" ")).collect();
    parts[1..].sort();
    parts.join(" | ")
}

/// Node `node`'s port toward `peer` (named after it) is up, on machine `i`.
fn port_up(machines: &Machines, i: usize, lab: &str, node: &str, peer: &str) -> bool {
    let out = machines
        .on(i, "ip")
        .args([
            "-o",
            "-n",
            &format!("tn-{lab}-{node}"),
            "link",
            "show",
            "dev",
            peer,
        ])
        .output()
        .expect("ip runs");
    let line = String::from_utf8_lossy(&out.stdout);
    let flags = line
        .split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map_or("", |(flags, _)| flags);
    flags.split(',').any(|f| f == "UP")
}

/// An `[[external]]` interface is the machine's that runs its node: a
/// veth of machine 1 attached to edge1-0 (which machine 1 runs), its peer
/// left in the machine answering for 192.0.2.2; hosts of both machines
/// reach it, across the cut links from machine 0. Machine 0 has no such
/// interface and is asked for none. Down, the interface is handed back.
#[test]
fn an_external_interface_is_the_one_of_the_machine_that_runs_its_node() {
    require_root!();
    let lab = unique_lab("we");
    let extra =
        "\n[[external]]\nnode = \"edge1-0\"\ninterface = \"xt0\"\naddress = \"192.0.2.1/24\"\n";
    let file = scenario_as("fat-tree-k4.toml", &lab, extra);
    let mut machines = Machines::new(&lab, 2);
    let ip = |machines: &Machines, i: usize, args: &[&str]| {
        let out = machines.on(i, "ip").args(args).output().expect("ip runs");
        assert!(
            out.status.success(),
            "ip {}: {}",
            args.join(" "),
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    ip(
        &machines,
        1,
        &["link", "add", "xt0", "type", "veth", "peer", "name", "xt0p"],
    );
    ip(
        &machines,
        1,
        &["addr", "add", "192.0.2.2/24", "dev", "xt0p"],
    );
    ip(&machines, 1, &["link", "set", "xt0p", "up"]);
    machines.run_lab(&lab, &file, UP);
    // The fabric's hosts, back through the node's external address.
    ip(
        &machines,
        1,
        &["route", "add", "10.128.0.0/9", "via", "192.0.2.1"],
    );

    let shown = machines.turbonet(0, &["show", "nodes", "edge1-0", "--lab", &lab, "--json"]);
    let nodes: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("show nodes");
    assert_eq!(nodes[0]["machine"], 1, "edge1-0 runs on machine 1: {nodes}");
    assert!(
        !ip(&machines, 1, &["-o", "link"]).contains("xt0:"),
        "xt0 moved into edge1-0"
    );
    for (host, m) in [("h0-0-0", 0), ("h1-0-1", 1)] {
        let got = pings(
            Some((&machines, m)),
            &lab,
            host,
            "192.0.2.2",
            &["-c", "3", "-i", "0.2", "-W", "2"],
        );
        assert!(
            got > 0,
            "{host} (machine {m}) did not reach 192.0.2.2 behind edge1-0's external port"
        );
    }

    for i in 0..2 {
        stop(&mut machines, i);
    }
    assert!(
        ip(&machines, 1, &["-o", "link"]).contains("xt0@"),
        "xt0 handed back to machine 1"
    );
}

/// Controller routing over two machines: every machine's controller
/// recomputes its nodes' routes around a failure made on either machine,
/// so that every node's routes are those of one machine with the same
/// failure, and every host pair still answers.
#[test]
fn a_controller_fat_tree_over_two_machines_reroutes_around_a_cut_link_failed_anywhere() {
    require_root!();
    let controller = |lab: &str| {
        let file = scenario_as("fat-tree-k4.toml", lab, "");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("mode = \"static\""));
        write_scenario(
            lab,
            &text.replace("mode = \"static\"", "mode = \"controller\""),
        )
    };
    let lab = unique_lab("wc");
    let file = controller(&lab);
    let mut machines = Machines::new(&lab, 2);
    machines.run_lab(&lab, &file, UP);
    let one = unique_lab("wo");
    let _one = up_here(&one, &controller(&one));
    let over = |machines: &Machines| -> Vec<_> {
        (0..2).map(|i| tables(Some((machines, i)), &lab)).collect()
    };
    same_tables(&over(&machines), &tables(None, &one));

    let plan = plan_of(&file, 2);
    // A cut link failed on the machine of its second end.
    let cut = &plan["cut_links"][0];
    let link = cut["link"].as_str().unwrap();
    let at = cut["machines"][1].as_u64().unwrap() as usize;
    let failed = machines.turbonet(at, &["fail", "--lab", &lab, "link", link]);
    assert!(failed.status.success(), "{}", text(&failed));
    let failed_one = run(&["fail", "--lab", &one, "link", link]);
    assert!(failed_one.status.success(), "{}", text(&failed_one));
    let rerouted = |machines: &Machines| differences(&over(machines), &tables(None, &one));
    assert!(
        wait_until(UP, || rerouted(&machines).is_none()),
        "routes with {link} failed: {}",
        rerouted(&machines).unwrap_or_default()
    );
    for i in 0..2 {
        let report = check_on(&machines, i, &lab);
        assert_eq!(
            report["failures"].as_array().unwrap().len(),
            0,
            "the controller routes around {link}: {report}"
        );
    }
}

/// The management network over two machines is one network: nodes reach
/// each other's `mgmt0` across machines (through the tunnel between the
/// machines' bridges), and `mgmt` names the address of the node's own
/// machine's part on it (machine 0's the lab's, machine 1's the top of the
/// pool).
#[test]
fn the_management_network_is_one_network_over_two_machines() {
    require_root!();
    let lab = unique_lab("wg");
    let file = scenario_as(
        "fat-tree-k4.toml",
        &lab,
        "\n[mgmt]\npool = \"192.168.251.0/24\"\n",
    );
    let plan = plan_of(&file, 2);
    assert_eq!(plan["mgmt_tunnels"].as_array().unwrap().len(), 1, "{plan}");
    let first = |i: usize| plan["parts"][i]["nodes"][0].as_str().unwrap().to_owned();
    let (a, b) = (first(0), first(1));

    let mut machines = Machines::new(&lab, 2);
    machines.run_lab(&lab, &file, UP);
    let exec = |i: usize, node: &str, args: &[&str]| {
        let mut all = vec!["exec", "--lab", lab.as_str(), node];
        all.extend(args);
        let out = machines.turbonet(i, &all);
        assert!(
            out.status.success(),
            "{node} on machine {i}: {args:?}: {}",
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for (i, from, to) in [(0, &a, &b), (1, &b, &a)] {
        exec(
            i,
            from,
            &["ping", "-c", "2", "-W", "2", &format!("{to}.mgmt")],
        );
    }
    for (i, node, hub) in [(0, &a, "192.168.251.1"), (1, &b, "192.168.251.254")] {
        let said = exec(i, node, &["getent", "hosts", "mgmt"]);
        assert!(said.starts_with(&format!("{hub} ")), "machine {i}: {said}");
        exec(i, node, &["ping", "-c", "1", "-W", "2", "mgmt"]);
    }
    // Machine 0's part's address, from machine 1, across the tunnel.
    exec(1, &b, &["ping", "-c", "1", "-W", "2", "192.168.251.1"]);
    // A workload runs on the machine of its hosts: refused elsewhere.
    let hosts: Vec<&str> = (plan["parts"][1]["nodes"].as_array().unwrap().iter())
        .filter_map(|n| n.as_str().filter(|n| n.starts_with('h')))
        .take(2)
        .collect();
    let workload = write_scenario(
        &format!("{lab}-w"),
        &format!(
            "[[job]]\nname = \"two\"\nhosts = [\"{0}\", \"{1}\"]\n\n\
             [[workload]]\nname = \"probe\"\njob = \"two\"\nkind = \"udp\"\n\
             pattern = \"pairs\"\npairs = [[\"{0}\", \"{1}\"]]\nrate = \"1mbit\"\n\
             duration = \"1s\"\n",
            hosts[0], hosts[1]
        ),
    );
    let workload = workload.to_str().unwrap();
    let away = machines.turbonet(0, &["workload", "start", workload, "--lab", &lab]);
    assert!(
        !away.status.success()
            && text(&away).contains(&format!(
                "workload probe runs on machine 1's hosts ({} among them), not this one's \
                 (machine 0): start it there",
                hosts[0]
            )),
        "{}",
        text(&away)
    );
    let here = machines.turbonet(1, &["workload", "start", workload, "--lab", &lab]);
    assert!(here.status.success(), "{}", text(&here));
    // `mpirun` starts every rank from where it runs: refused, saying why.
    let mpirun = machines.turbonet(0, &["mpirun", "--lab", &lab, "--", "true"]);
    assert!(
        !mpirun.status.success()
            && String::from_utf8_lossy(&mpirun.stderr).contains("runs over 2 machines"),
        "{}",
        text(&mpirun)
    );
}
