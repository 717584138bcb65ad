//! The control API from outside turbonet (root): the Python client of
//! `docs/api.md`, its code generated from `api/proto/turbonet/v1/lab.proto` with
//! grpcio-tools, drives a lab through the lab's Unix socket.
//!
//! Needs the venv `scripts/setup` creates at /var/tmp/turbonet-py; skipped
//! with a note when it is absent (a failure under CI).

use std::path::Path;
use std::process::Command;

use turbonet_tests::{VENV_PYTHON, require_root, run, text, up_bundled, workspace};

/// The first ```python block of `docs/api.md`.
fn documented_client() -> String {
    let doc = std::fs::read_to_string(workspace().join("docs/api.md")).unwrap();
    doc.split_once("```python\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(code, _)| code.to_owned())
        .expect("docs/api.md has a ```python block")
}

#[test]
fn the_python_client_of_the_docs_fails_a_link_and_follows_events() {
    require_root!();
    turbonet_tests::require_venv!();
    let dir = std::env::temp_dir().join(format!("turbonet-api-client-{}", std::process::id()));
    struct Cleanup<'a>(&'a Path);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0);
        }
    }
    let _cleanup = Cleanup(&dir);
    let gen_dir = dir.join("gen");
    std::fs::create_dir_all(&gen_dir).unwrap();
    let proto = workspace().join("api/proto");
    let generated = Command::new(VENV_PYTHON)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(&proto)
        .arg(format!("--python_out={}", gen_dir.display()))
        .arg(format!("--grpc_python_out={}", gen_dir.display()))
        .arg(proto.join("turbonet/v1/lab.proto"))
        .output()
        .expect("grpc_tools.protoc runs");
    assert!(generated.status.success(), "{}", text(&generated));
    let client = dir.join("fail_and_follow.py");
    std::fs::write(&client, documented_client()).unwrap();

    let guard = up_bundled("api", "two-hosts.toml", "");
    let lab = guard.0.as_str();
    let out = Command::new("timeout")
        .arg("60")
        .arg(VENV_PYTHON)
        .arg(&client)
        .args([lab, "h1--s1"])
        .env("PYTHONPATH", &gen_dir)
        .output()
        .expect("the client runs");
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    for line in [
        &format!("lab {lab}: 3 nodes, 2 links"),
        "h1--s1: delay=20ms",
        "failed link h1--s1: 1 link(s) down",
        "fail link h1--s1  ok",
        "h1--s1: down=True, delay 20 ms (the scenario's: 5 ms)",
        "restored link h1--s1: 1 link(s) up",
    ] {
        assert!(shown.contains(line), "no `{line}` in\n{shown}");
    }

    // What the client did shows from the command line too: the link is up
    // with the scenario's delay again, and the events have it all.
    let links = run(&["link", "show", "h1--s1", "--lab", lab, "--json"]);
    let links: serde_json::Value = serde_json::from_slice(&links.stdout).unwrap();
    assert_eq!(links[0]["down"], false, "{links}");
    assert_eq!(links[0]["params"]["delay"], "5ms", "{links}");
    let events = text(&run(&["events", "--lab", lab]));
    for event in [
        "set h1--s1 delay=20ms",
        "fail link h1--s1",
        "restore link h1--s1",
        "reset h1--s1",
    ] {
        assert!(events.contains(event), "no `{event}` in\n{events}");
    }
}
