//! Graded labs (root): every lab under `labs/` scores below full as it
//! starts and full once its reference solution (`solution.sh`, what a
//! student would type) has run; the grade is plain text, JSON and JUnit.

use std::path::Path;
use std::process::Command;

use turbonet_tests::{
    LabGuard, binary, file_as, require_root, text, turbonet, unique_lab, workspace,
};

/// `turbonet ARGS` with the labs under `labs`.
fn lab_command(labs: &Path, args: &[&str]) -> std::process::Output {
    turbonet()
        .env("TURBONET_LABS", labs)
        .args(args)
        .output()
        .expect("turbonet runs")
}

/// The grade `lab check --json` prints: (earned, points).
fn score(out: &std::process::Output) -> (u64, u64) {
    let grade: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)));
    (
        grade["earned"].as_u64().unwrap(),
        grade["points"].as_u64().unwrap(),
    )
}

#[test]
fn every_lab_scores_below_full_at_start_and_full_with_its_solution() {
    require_root!();
    let bundled = workspace().join("labs");
    let mut names: Vec<String> = std::fs::read_dir(&bundled)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| bundled.join(n).join("lab.toml").is_file())
        // `TURBONET_TEST_LAB=NAME` tries one lab.
        .filter(|n| std::env::var("TURBONET_TEST_LAB").map_or(true, |only| *n == only))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no labs in {}", bundled.display());
    for name in names {
        // A copy of the lab whose fabric has a name of its own.
        let lab = unique_lab("lab");
        let labs = std::env::temp_dir()
            .join("turbonet-tests")
            .join(format!("{lab}-labs"));
        let folder = labs.join(&name);
        std::fs::create_dir_all(&folder).unwrap();
        for entry in std::fs::read_dir(bundled.join(&name)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, folder.join(path.file_name().unwrap())).unwrap();
        }
        let renamed = file_as(&bundled.join(&name).join("lab.toml"), &lab, "");
        std::fs::copy(&renamed, folder.join("lab.toml")).unwrap();
        let _guard = LabGuard(lab.clone());

        let listed = lab_command(&labs, &["lab", "list", "--json"]);
        assert!(listed.status.success(), "{}", text(&listed));
        let start = lab_command(&labs, &["lab", "start", "--quiet", &name]);
        assert!(start.status.success(), "{name}: {}", text(&start));

        let before = lab_command(&labs, &["lab", "check", "--json", "--lab", &lab]);
        let (earned, points) = score(&before);
        assert!(
            earned < points && !before.status.success(),
            "{name} scores {earned}/{points} untouched: {}",
            text(&before)
        );

        let solved = Command::new("sh")
            .arg(folder.join("solution.sh"))
            .env("TURBONET", binary())
            .env("TURBONET_LAB", &lab)
            .output()
            .unwrap();
        assert!(
            solved.status.success(),
            "{name}'s solution: {}",
            text(&solved)
        );

        let junit = labs.join(format!("{name}.xml"));
        let after = lab_command(
            &labs,
            &[
                "lab",
                "check",
                "--json",
                "--lab",
                &lab,
                "--junit",
                junit.to_str().unwrap(),
            ],
        );
        assert_eq!(
            score(&after),
            (points, points),
            "{name} with its solution: {}",
            text(&after)
        );
        assert!(after.status.success(), "{}", text(&after));
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(xml.contains("failures=\"0\""), "{xml}");

        let stop = lab_command(&labs, &["lab", "stop", "--lab", &lab]);
        assert!(stop.status.success(), "{}", text(&stop));
        let _ = std::fs::remove_dir_all(&labs);
    }
}

#[test]
fn lab_commands_say_what_exists() {
    // Validating labs needs no root.
    let labs = workspace().join("labs");
    let out = lab_command(&labs, &["lab", "start", "static-ecmpp"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no lab `static-ecmpp`") && err.contains("did you mean static-ecmp"),
        "{err}"
    );
    let out = lab_command(&labs, &["lab", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Static routes and ECMP"),
        "{}",
        text(&out)
    );
}

/// Capture and filter checks count what the graded workloads make: a UDP
/// stream from h1 into a filter at s1 that drops UDP.
#[test]
fn capture_and_filter_checks_count_while_the_graded_workloads_run() {
    require_root!();
    let lab = unique_lab("cf");
    let labs = std::env::temp_dir()
        .join("turbonet-tests")
        .join(format!("{lab}-labs"));
    let folder = labs.join("counted");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("README.md"), "# Counted frames\n").unwrap();
    std::fs::write(
        folder.join("lab.toml"),
        format!(
            r#"[lab]
name = "{lab}"
[topology]
kind = "custom"
nodes = [{{ name = "s1" }}, {{ name = "h1", role = "host" }}, {{ name = "h2", role = "host" }}]
links = [{{ a = "h1", b = "s1" }}, {{ a = "h2", b = "s1" }}]
[routing]
mode = "static"

[[filter]]
name = "no-udp"
node = "s1"
port = "h1"
hook = "ingress"
nft = "ip protocol udp drop"

[[workload]]
name = "stream"
kind = "udp"
pattern = "pairs"
pairs = [["h1", "h2"]]
rate = "1mbit"
size = 500
duration = "1s"

[[task]]
name = "seen"
title = "h1's datagrams cross its link and the filter drops them"
[[task.check]]
workload = "stream"
figure = "loss"
of = "max"
min = "99%"
[[task.check]]
capture = "h1--s1"
direction = "a-b"
frames = "udp"
min = 100
[[task.check]]
filter = "no-udp"
min = 100

[[task]]
name = "passed"
title = "The filter lets some through"
[[task.check]]
filter = "no-udp"
counter = "passed"
min = 100
"#
        ),
    )
    .unwrap();
    let _guard = LabGuard(lab.clone());
    let start = lab_command(&labs, &["lab", "start", "--quiet", "counted"]);
    assert!(start.status.success(), "{}", text(&start));
    let check = lab_command(&labs, &["lab", "check", "--json", "--lab", &lab]);
    let grade: serde_json::Value =
        serde_json::from_slice(&check.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&check)));
    let tasks = grade["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["earned"], 1, "{grade:#}");
    assert_eq!(tasks[1]["earned"], 0, "{grade:#}");
    let problem = tasks[1]["checks"][0]["problem"].as_str().unwrap();
    assert!(
        problem.starts_with("filter no-udp passed ") && problem.ends_with("not at least 100"),
        "{problem}"
    );
    let stop = lab_command(&labs, &["lab", "stop", "--lab", &lab]);
    assert!(stop.status.success(), "{}", text(&stop));
    let _ = std::fs::remove_dir_all(&labs);
}
