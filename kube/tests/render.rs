//! What `turbonet kube render` writes: the objects of a bundled lab held
//! to a golden file, and every bundled scenario's objects validated
//! against Kubernetes' own schemas (1.30 and the latest the validator
//! carries, strict: no field Kubernetes does not know).

use std::path::{Path, PathBuf};

use turbonet_kube::{Request, WORKER_PORT, render};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("in the workspace")
        .to_path_buf()
}

/// The YAML of a bundled scenario over `machines`, with a fixed token.
fn rendered(scenario: &str, machines: u32) -> String {
    let path = workspace().join("scenarios").join(scenario);
    let text = std::fs::read_to_string(&path).unwrap();
    let lab = turbonet_topo::parse(&path.display().to_string(), &text).unwrap();
    let plan = turbonet_topo::machines::plan(&lab, machines).unwrap();
    let objects = render(&Request {
        lab: &lab,
        scenario: &text,
        plan: &plan,
        image: "registry.example/turbonet:0.1.0",
        token: "0123456789abcdef0123456789abcdef",
        port: WORKER_PORT,
    })
    .unwrap();
    objects.to_yaml(&lab.name, plan.machines, &plan.hash)
}

#[test]
fn a_fat_tree_over_two_machines_renders_as_the_golden_file_says() {
    let yaml = rendered("fat-tree-k4.toml", 2);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fat-tree-k4-m2.yaml");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &yaml).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).expect("the golden file (UPDATE_GOLDEN=1)");
    assert_eq!(yaml, expected, "UPDATE_GOLDEN=1 accepts the change");
    // Five objects, the workers told who they are and where worker 0 is.
    assert_eq!(yaml.matches("\n---\n").count() + 1, 5 + 1);
    for needle in [
        "kind: StatefulSet",
        "replicas: 2",
        "hostNetwork: true",
        "privileged: true",
        "turbonet-k4-0.turbonet-k4:7789",
        "metadata.labels['apps.kubernetes.io/pod-index']",
        "clusterIP: None",
        "maxUnavailable: 0",
    ] {
        assert!(yaml.contains(needle), "{needle} in\n{yaml}");
    }
}

#[test]
fn refusals_say_what_would_do() {
    let path = workspace().join("scenarios/fat-tree-k4.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let lab = turbonet_topo::parse("k4", &text).unwrap();
    let plan = turbonet_topo::machines::plan(&lab, 2).unwrap();
    let request = |scenario: &str, image: &str, token: &str| {
        render(&Request {
            lab: &lab,
            scenario,
            plan: &plan,
            image,
            token,
            port: WORKER_PORT,
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    let token = "0123456789abcdef";
    let huge = "#".repeat(turbonet_kube::SCENARIO_MAX + 1);
    assert!(
        request(&huge, "i", token)
            .unwrap_err()
            .contains("at most 1000000")
    );
    assert!(
        request(&text, " ", token)
            .unwrap_err()
            .contains("no container image")
    );
    assert!(
        request(&text, "bad image!", token)
            .unwrap_err()
            .contains("\"bad image!\" is not an image reference")
    );
    assert!(
        request(&text, "i", "short")
            .unwrap_err()
            .contains("16 to 256")
    );
    assert!(request(&text, "i", "with a space in it!").is_err());
    assert_eq!(request(&text, "i", token), Ok(()));
}

/// The validator's command, from the tests' Python venv.
const VALIDATE: &str = "/var/tmp/turbonet-py/bin/kubernetes-validate";

#[test]
fn every_bundled_lab_validates_against_kubernetes_schemas() {
    if !Path::new(VALIDATE).exists() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "{VALIDATE} is missing: scripts/setup installs it");
        eprintln!("skipped: {VALIDATE} is missing (scripts/setup installs it)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("turbonet-kube-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for (scenario, machines) in [
        ("fat-tree-k4.toml", 2),
        ("hpn.toml", 2),
        ("custom-triangle.toml", 3),
        ("hpn-pod.toml", 4),
        ("two-hosts.toml", 1),
    ] {
        let file = dir.join(format!("{scenario}-{machines}.yaml"));
        std::fs::write(&file, rendered(scenario, machines)).unwrap();
        files.push(file);
    }
    let said: Vec<(&str, bool, String)> = ["1.30.0", "1.37.0"]
        .into_iter()
        .map(|version| {
            let out = std::process::Command::new(VALIDATE)
                .args(["--strict", "--kubernetes-version", version])
                .args(&files)
                .output()
                .expect("kubernetes-validate runs");
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            (version, out.status.success(), text)
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    for (version, ok, said) in said {
        assert!(ok, "Kubernetes {version}:\n{said}");
        // Every object of every file passed; none was skipped or refused.
        assert_eq!(
            said.lines()
                .filter(|l| l.starts_with("INFO") && l.contains(" passed "))
                .count(),
            5 * files.len(),
            "Kubernetes {version}:\n{said}"
        );
        assert!(
            !said.contains("ERROR") && !said.contains("WARN"),
            "Kubernetes {version}:\n{said}"
        );
    }
}
