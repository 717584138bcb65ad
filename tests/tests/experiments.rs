//! End-to-end: `turbonet run` on every bundled experiment (their
//! expectations are the assertions), a run whose expectation fails, and
//! workloads started and stopped at run time (root).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use turbonet_tests::{
    LabGuard, file_as, require_root, run, scenario_as, text, unique_lab, wait_until, workspace,
    write_scenario,
};

/// `turbonet workload show --json` of lab `lab`: every workload's report.
fn reports(lab: &str) -> serde_json::Value {
    let out = run(&["workload", "show", "--json", "--lab", lab]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `turbonet run -q --out DIR ARGS... FILE` for lab `lab` (its guard is
/// the caller's): where its reports are, and what it printed.
fn run_experiment(file: &Path, lab: &str, args: &[&str]) -> (PathBuf, Output) {
    let out_dir = std::env::temp_dir()
        .join("turbonet-tests")
        .join(format!("{lab}-report"));
    let mut argv = vec!["run", "-q", "--out", out_dir.to_str().unwrap()];
    argv.extend(args);
    argv.push(file.to_str().unwrap());
    (out_dir.clone(), run(&argv))
}

#[test]
fn every_bundled_experiment_passes_with_junit_output() {
    require_root!();
    let dir = workspace().join("experiments");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "bundled experiments: {files:?}");
    for file in files {
        let lab = unique_lab("ex");
        let copy = file_as(&file, &lab, "");
        let _guard = LabGuard(lab.clone());
        let (out_dir, out) = run_experiment(&copy, &lab, &["--timeout", "120"]);
        assert!(out.status.success(), "{}: {}", file.display(), text(&out));
        let junit = std::fs::read_to_string(out_dir.join("junit.xml")).unwrap();
        assert!(junit.contains("failures=\"0\""), "{junit}");
        assert!(junit.matches("<testcase").count() >= 2, "{junit}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report["passed"], true);
        let svg = std::fs::read_to_string(out_dir.join("throughput.svg")).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{svg}"
        );
        assert!(
            report["plots"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == "throughput.svg")
        );
        // What every link carried, and its picture.
        assert!(
            !report["links"]["directions"].as_array().unwrap().is_empty(),
            "{}: {}",
            file.display(),
            report["links"]
        );
        let svg = std::fs::read_to_string(out_dir.join("link-load.svg")).unwrap();
        assert!(svg.contains("link load"), "{svg}");
        assert!(
            report["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .all(|w| w["state"] == "done"),
            "{report:#}"
        );
        // The lab is gone: `run` takes it down.
        assert!(!turbonet_tests::lab_state_exists(&lab));
    }
}

#[test]
fn a_run_whose_expectation_fails_exits_1_and_says_why_and_bad_input_exits_2() {
    require_root!();
    let lab = unique_lab("ef");
    let file = scenario_as(
        "two-hosts.toml",
        &lab,
        r#"
[[workload]]
name = "pair"
kind = "collective"
op = "all-gather"
size = "1MiB"
iterations = 2

[[workload]]
name = "hello"
kind = "exec"
command = ["sh", "-c", "test $RANK -lt $WORLD_SIZE && getent hosts h2 && exit 3"]

[[expect]]
workload = "pair"
figure = "busbw"
min = "100tbit"

[[expect]]
workload = "hello"
figure = "exit"
max = 0
"#,
    );
    let _guard = LabGuard(lab.clone());
    let (out_dir, out) = run_experiment(&file, &lab, &[]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("FAIL pair: each busbw >= 100 Tbit/s"),
        "{said}"
    );
    // The command ran on both hosts, resolved a node by name, and exited 3.
    assert!(
        said.contains("rank 0 (h1): 3") && said.contains("rank 1 (h2): 3"),
        "{said}"
    );
    let junit = std::fs::read_to_string(out_dir.join("junit.xml")).unwrap();
    assert!(
        junit.contains("failures=\"2\"") && junit.contains("<failure message="),
        "{junit}"
    );
    assert!(!turbonet_tests::lab_state_exists(&lab));

    // Invalid input: located, exit 2, nothing created.
    let bad = scenario_as(
        "two-hosts.toml",
        &lab,
        "[[expect]]\nworkload = \"nope\"\nfigure = \"fct\"\nmax = \"1s\"\n",
    );
    let out = run(&["run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("no workload named `nope`"),
        "{}",
        text(&out)
    );
    assert!(!turbonet_tests::lab_state_exists(&lab));
}

#[test]
fn workloads_start_show_and_stop_at_run_time() {
    require_root!();
    let lab = unique_lab("ew");
    let file = scenario_as("two-hosts.toml", &lab, "");
    let _guard = LabGuard(lab.clone());
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    let workloads = write_scenario(
        &format!("{lab}-w"),
        r#"[[workload]]
name = "long"
kind = "tcp"
pattern = "pairs"
pairs = [["h1", "h2"]]
duration = "60s"

[[workload]]
name = "quick"
kind = "udp"
pattern = "all-to-all"
rate = "10mbit"
duration = "1s"
"#,
    );
    let out = run(&[
        "workload",
        "start",
        workloads.to_str().unwrap(),
        "--lab",
        &lab,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("started long, quick"), "{}", text(&out));
    // The UDP flows finish (sharing h1's link with the TCP flow, which may
    // cost them a datagram or two); the long TCP flow moves bytes meanwhile.
    assert!(wait_until(Duration::from_secs(20), || {
        let all = reports(&lab);
        all[1]["state"] == "done" && all[0]["flows"][0]["bytes"].as_u64().unwrap_or(0) > 0
    }));
    let all = reports(&lab);
    for flow in all[1]["flows"].as_array().unwrap() {
        assert!(flow["loss"].as_f64().unwrap() < 0.05, "{flow}");
        // 10 Mbit/s for 1 s is about 850 datagrams; a sender stalled by a
        // busy machine (CI runs tests side by side) sends fewer, and its
        // datagrams wait longer (a mean of 68 ms was seen beside other
        // tests, stalls of a few hundred ms in its series), which is not
        // what this test is about: the delay is measured, and bounded.
        assert!(flow["received"].as_u64().unwrap() > 600, "{flow}");
        let delay = flow["delay"].as_f64().unwrap();
        assert!(delay > 0.0 && delay < 0.5, "{flow}");
    }
    // Starting it again while it runs is refused; stopping it works.
    let again = run(&[
        "workload",
        "start",
        workloads.to_str().unwrap(),
        "--lab",
        &lab,
    ]);
    assert!(!again.status.success());
    assert!(text(&again).contains("running already"), "{}", text(&again));
    let stop = run(&["workload", "stop", "long", "--lab", &lab]);
    assert!(stop.status.success(), "{}", text(&stop));
    assert_eq!(reports(&lab)[0]["state"], "stopped");
    let over = run(&["workload", "stop", "quick", "--lab", &lab]);
    assert!(!over.status.success());
    assert!(
        text(&over).contains("workload quick is done already"),
        "{}",
        text(&over)
    );
    let missing = run(&["workload", "start", "nowhere/more.toml", "--lab", &lab]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(
        text(&missing).contains("no file nowhere/more.toml"),
        "{}",
        text(&missing)
    );
    // A file with a mistake is refused with its location.
    let bad = write_scenario(
        &format!("{lab}-b"),
        "[[workload]]\nname = \"x\"\nkind = \"tcp\"\npattern = \"pairs\"\npairs = [[\"h1\", \"h9\"]]\nbytes = \"1MiB\"\n",
    );
    let out = run(&["workload", "start", bad.to_str().unwrap(), "--lab", &lab]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("`h9` is not one of the workload's hosts"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_repeated_run_draws_the_same_flows_and_reports_the_spread() {
    require_root!();
    let lab = unique_lab("er");
    let file = file_as(
        &workspace().join("experiments/lossy-link-flows.toml"),
        &lab,
        "",
    );
    let _guard = LabGuard(lab.clone());
    let (out_dir, out) = run_experiment(&file, &lab, &["--repeat", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out_dir.join(name)).unwrap()).unwrap()
    };
    let repeat = read("repeat.json");
    assert_eq!(repeat["runs"], 2);
    assert_eq!(repeat["passed"], true);
    // The same seed: the same flows, from the same ports, in both runs.
    let flows = |run: &str| -> Vec<(String, String, u64)> {
        read(&format!("{run}/report.json"))["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|w| w["flows"].as_array().cloned().unwrap_or_default())
            .map(|f| {
                let s = |k: &str| f[k].as_str().unwrap().to_owned();
                (s("src"), s("dst"), f["sport"].as_u64().unwrap())
            })
            .collect()
    };
    let first = flows("run-1");
    assert_eq!(first.len(), 3, "{first:?}");
    assert_eq!(first, flows("run-2"));
    // The seeded link engine loses (nearly) the same datagrams each time.
    let loss = repeat["spread"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["workload"] == "probe" && s["figure"] == "loss")
        .expect("the probe's loss")
        .clone();
    let (min, max) = (loss["min"].as_f64().unwrap(), loss["max"].as_f64().unwrap());
    assert!(max - min < 0.002, "{loss}");
    assert!(text(&out).contains("held in 2 of 2 runs"), "{}", text(&out));
}

#[test]
fn datagrams_this_machine_dropped_at_a_receive_buffer_are_a_warning_not_the_fabric_s_loss() {
    require_root!();
    // Six senders at 1 Gbit/s each into one receiver: far more than one
    // socket on this machine takes in, on links that lose nothing.
    let lab = turbonet_tests::up_bundled("rb", "fat-tree-k4.toml", "");
    let file = write_scenario(
        &format!("{}-incast", lab.0),
        r#"
[[workload]]
name = "flood"
kind = "udp"
hosts = ["h0-0-0", "h0-0-1", "h1-0-0", "h1-0-1", "h2-0-0", "h2-0-1", "h3-0-0"]
pattern = "incast"
to = "h0-0-0"
rate = "1gbit"
duration = "1s"
"#,
    );
    let out = run(&["workload", "start", "--lab", &lab.0, file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let mut report = serde_json::Value::Null;
    assert!(
        wait_until(Duration::from_secs(30), || {
            report = reports(&lab.0)[0].clone();
            report["state"] == "done"
        }),
        "{report:#}"
    );
    let warnings = report["warnings"].as_array().unwrap();
    let first = warnings.first().and_then(|w| w.as_str()).unwrap_or("");
    assert!(
        first.starts_with("h0-0-0: ") && first.contains("dropped at full receive buffers"),
        "{warnings:#?}"
    );
}

/// The throughput series of the first flow of workload `name` in a report,
/// bits per second per step.
fn series(report: &serde_json::Value, name: &str) -> Vec<f64> {
    let w = report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no workload {name}: {report:#}"));
    w["flows"][0]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_f64().unwrap() * 8.0 / 0.1)
        .collect()
}

/// Steps of `series`, between its first and last busy one, that carried
/// less than a twentieth of its busiest: its off periods.
fn quiet_steps(series: &[f64]) -> usize {
    let max = series.iter().copied().fold(0.0, f64::max);
    let busy = |x: &f64| *x > max / 20.0;
    let (Some(first), Some(last)) = (series.iter().position(busy), series.iter().rposition(busy))
    else {
        return 0;
    };
    series[first..=last].iter().filter(|x| !busy(x)).count()
}

#[test]
fn on_off_flows_are_silent_between_bursts_and_a_load_is_a_share_of_the_link() {
    require_root!();
    let lab = unique_lab("eo");
    let file = scenario_as(
        "two-hosts.toml",
        &lab,
        r#"
[links.host-switch]
rate = "100mbit"
# 12 ms of queue: what TCP leaves queued at the end of a burst drains
# well within the off period.
queue = "100p"

[[workload]]
name = "udp-bursts"
kind = "udp"
pattern = "pairs"
pairs = [["h1", "h2"]]
load = "40%"
size = 1458
on = "200ms"
off = "200ms"
duration = "2s"

[[workload]]
name = "tcp-bursts"
kind = "tcp"
pattern = "pairs"
pairs = [["h2", "h1"]]
duration = "2s"
on = "200ms"
off = "200ms"
"#,
    );
    let _guard = LabGuard(lab.clone());
    let (out_dir, out) = run_experiment(&file, &lab, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    // 40% of 100 Mbit/s on the wire is 38.9 Mbit/s of 1458-byte payloads,
    // sent in five 200 ms bursts: 4.86 MB.
    let udp = report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "udp-bursts")
        .map(|w| w["flows"][0].clone())
        .unwrap();
    let bytes = udp["bytes"].as_f64().unwrap();
    assert!(
        (4.86e6 * 0.9..=4.86e6 * 1.1).contains(&bytes),
        "{bytes} bytes: {udp:#}"
    );
    // UDP falls silent between bursts (100 ms steps, 200 ms off).
    let s = series(&report, "udp-bursts");
    assert!(quiet_steps(&s) >= 3, "udp-bursts never paused: {s:?}");
    // TCP sends about half of the time: well under the 25 MB that 2 s at
    // 100 Mbit/s carry (when the receiver reads is the scheduler's on a
    // busy machine, so its steps are not checked).
    let tcp = report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "tcp-bursts")
        .map(|w| w["flows"][0]["bytes"].as_f64().unwrap())
        .unwrap();
    assert!(
        (1e6..=0.75 * 25e6).contains(&tcp),
        "tcp-bursts moved {tcp} bytes"
    );
    // The link carried the load: h1's link towards the switch peaked near
    // 40% of its rate.
    let up = report["links"]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["from"] == "h1" && d["to"] == "s1")
        .unwrap_or_else(|| panic!("h1 -> s1 carried nothing: {:#}", report["links"]))
        .clone();
    let share = up["peak"].as_f64().unwrap() / up["rate"].as_f64().unwrap();
    assert!((0.3..=0.6).contains(&share), "{up:#}");
    let svg = std::fs::read_to_string(out_dir.join("link-load.svg")).unwrap();
    assert!(
        svg.contains("h1 -&gt; s1") || svg.contains("h1 -> s1"),
        "{svg}"
    );
}

#[test]
fn an_interrupted_run_still_reports_what_it_measured_and_takes_its_lab_down() {
    require_root!();
    let lab = unique_lab("ei");
    let file = scenario_as(
        "two-hosts.toml",
        &lab,
        r#"
[[workload]]
name = "long"
kind = "udp"
pattern = "pairs"
pairs = [["h1", "h2"]]
rate = "10mbit"
duration = "60s"

[[expect]]
workload = "long"
figure = "loss"
max = "1%"
"#,
    );
    let _guard = LabGuard(lab.clone());
    let out_dir = std::env::temp_dir()
        .join("turbonet-tests")
        .join(format!("{lab}-report"));
    let child = turbonet_tests::turbonet()
        .args(["run", "-q", "--out", out_dir.to_str().unwrap()])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until the flow has moved some bytes.
    let moving = wait_until(Duration::from_secs(60), || {
        let out = run(&["workload", "show", "--json", "--lab", &lab]);
        out.status.success()
            && serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .ok()
                .and_then(|r| r[0]["flows"][0]["bytes"].as_u64())
                .is_some_and(|b| b > 100_000)
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    if !moving {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        panic!(
            "the workload never ran: {}",
            text(&child.wait_with_output().unwrap())
        );
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["interrupted"], true);
    assert_eq!(report["passed"], false);
    assert!(
        report["workloads"][0]["flows"][0]["bytes"]
            .as_u64()
            .unwrap()
            > 100_000
    );
    let junit = std::fs::read_to_string(out_dir.join("junit.xml")).unwrap();
    assert!(junit.contains("the run was interrupted"), "{junit}");
    let summary = std::fs::read_to_string(out_dir.join("summary.txt")).unwrap();
    assert!(summary.contains("interrupted"), "{summary}");
    assert!(!turbonet_tests::lab_state_exists(&lab));
}
