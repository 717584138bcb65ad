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
