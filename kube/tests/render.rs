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

/// Whether the validator is there; in CI it must be.
fn validator() -> bool {
    if Path::new(VALIDATE).exists() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!ci, "{VALIDATE} is missing: scripts/setup installs it");
    eprintln!("skipped: {VALIDATE} is missing (scripts/setup installs it)");
    false
}

/// A directory of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("turbonet-kube-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Validates `files` against Kubernetes 1.30's and 1.37's schemas,
/// strictly, and asserts that `objects` objects passed in each.
fn validate(files: &[PathBuf], objects: usize) {
    for version in ["1.30.0", "1.37.0"] {
        let out = std::process::Command::new(VALIDATE)
            .args(["--strict", "--kubernetes-version", version])
            .args(files)
            .output()
            .expect("kubernetes-validate runs");
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "Kubernetes {version}:\n{said}");
        // Every object of every file passed; none was skipped or refused.
        assert_eq!(
            said.lines()
                .filter(|l| l.starts_with("INFO") && l.contains(" passed "))
                .count(),
            objects,
            "Kubernetes {version}:\n{said}"
        );
        assert!(
            !said.contains("ERROR") && !said.contains("WARN"),
            "Kubernetes {version}:\n{said}"
        );
    }
}

#[test]
fn every_bundled_lab_validates_against_kubernetes_schemas() {
    if !validator() {
        return;
    }
    let dir = Scratch::new("render");
    let mut files = Vec::new();
    for (scenario, machines) in [
        ("fat-tree-k4.toml", 2),
        ("hpn.toml", 2),
        ("custom-triangle.toml", 3),
        ("hpn-pod.toml", 4),
        ("two-hosts.toml", 1),
    ] {
        let file = dir.0.join(format!("{scenario}-{machines}.yaml"));
        std::fs::write(&file, rendered(scenario, machines)).unwrap();
        files.push(file);
    }
    validate(&files, 5 * files.len());
    // The self-test's lab too.
    let (objects, hash) = turbonet_kube::selftest::objects(
        "selftest-1a2b",
        "registry.example/turbonet:0.1.0",
        "0123456789abcdef0123456789abcdef",
        WORKER_PORT,
    )
    .unwrap();
    let file = dir.0.join("selftest.yaml");
    std::fs::write(&file, objects.to_yaml("selftest-1a2b", 2, &hash)).unwrap();
    validate(&[file], 5);
}

/// Validates `Lab` objects (a YAML stream each file) against the CRD's
/// schema as the API server would, strictly (`kubectl apply` refuses
/// unknown fields): each file's verdict, `ok` or the first error.
const LAB_SCHEMA: &str = r#"
import json, sys, yaml, jsonschema
crd = yaml.safe_load(open(sys.argv[1]))
schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
def strict(s):
    if isinstance(s, dict):
        if s.get("type") == "object" and "properties" in s:
            s.setdefault("additionalProperties", False)
        for v in s.values():
            strict(v)
    elif isinstance(s, list):
        for v in s:
            strict(v)
strict(schema)
# The API server checks these before the schema.
group = crd["spec"]["group"] + "/" + crd["spec"]["versions"][0]["name"]
schema["properties"]["apiVersion"] = {"const": group}
schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
schema["properties"]["metadata"] = {"type": "object"}
for path in sys.argv[2:]:
    for doc in yaml.safe_load_all(open(path)):
        try:
            jsonschema.validate(doc, schema)
            print(path, "ok")
        except jsonschema.ValidationError as e:
            print(path, "refused:", e.message)
"#;

#[test]
fn the_operator_and_lab_objects_validate_against_kubernetes_and_the_crd() {
    if !validator() {
        return;
    }
    let dir = Scratch::new("operator");
    let install =
        turbonet_kube::install::install("registry.example/turbonet:0.1.0", "turbonet").unwrap();
    let file = dir.0.join("install.yaml");
    std::fs::write(&file, install.to_yaml()).unwrap();
    // The CRD, the namespace, the operator's account, role, binding and
    // Deployment.
    validate(std::slice::from_ref(&file), 6);
    let crd = dir.0.join("crd.yaml");
    std::fs::write(
        &crd,
        serde_norway::to_string(&turbonet_kube::crd::definition()).unwrap(),
    )
    .unwrap();

    let k4 = std::fs::read_to_string(workspace().join("scenarios/fat-tree-k4.toml")).unwrap();
    let spec = |machines: u32, port: Option<u16>| turbonet_kube::crd::LabSpec {
        scenario: k4.clone(),
        machines,
        image: "registry.example/turbonet:0.1.0".to_owned(),
        port,
    };
    let good = [
        turbonet_kube::crd::Lab::new("k4", spec(2, None)),
        turbonet_kube::crd::Lab::new("k4-port", spec(4, Some(7800))),
    ];
    let mut files = Vec::new();
    for (i, lab) in good.iter().enumerate() {
        let file = dir.0.join(format!("good-{i}.yaml"));
        std::fs::write(&file, lab.to_yaml()).unwrap();
        files.push(file);
    }
    // What the schema refuses: no machine, an unknown field, no image.
    let first = good[0].to_yaml();
    let bad = [
        first.replace("machines: 2", "machines: 0"),
        first.replace("machines: 2", "machines: 2\n  replicas: 2"),
        first.replace("image: registry.example/turbonet:0.1.0", "image: ''"),
    ];
    for (i, text) in bad.iter().enumerate() {
        assert_ne!(text, &first, "bad Lab {i} differs");
        let file = dir.0.join(format!("bad-{i}.yaml"));
        std::fs::write(&file, text).unwrap();
        files.push(file);
    }
    let python = Path::new(VALIDATE).with_file_name("python");
    let out = std::process::Command::new(python)
        .args(["-c", LAB_SCHEMA])
        .arg(&crd)
        .args(&files)
        .output()
        .expect("python runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let verdicts: Vec<&str> = said.lines().collect();
    assert_eq!(verdicts.len(), 5, "{said}");
    for (verdict, file) in verdicts.iter().zip(&files) {
        let good = file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("good");
        assert_eq!(verdict.ends_with(" ok"), good, "{said}");
    }
    assert!(
        verdicts[2].contains("minimum") || verdicts[2].contains("less than"),
        "{said}"
    );
    assert!(verdicts[3].contains("replicas"), "{said}");
}
