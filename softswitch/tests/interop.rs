//! Interop: the Python `p4runtime` package (with `grpcio`), an independent
//! P4Runtime client, drives the soft switch (`tests/interop.py`).
//!
//! Needs the venv `scripts/setup` creates at /var/tmp/turbonet-py; skipped
//! with a note when it is absent (a failure under CI).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use turbonet_softswitch::{Device, serve};

const VENV_PYTHON: &str = "/var/tmp/turbonet-py/bin/python3";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_p4runtime_client_drives_the_switch() {
    if !Path::new(VENV_PYTHON).exists() {
        turbonet_tests::skip(&format!(
            "{VENV_PYTHON} is missing; run scripts/setup as root to create the venv"
        ));
        return;
    }
    let (addr, handle) = serve("127.0.0.1:0".parse().unwrap(), Device::new(1))
        .await
        .unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("tests/interop.py");
    let p4info = root.join("../p4/build/turbonet.p4info.txtpb");
    let child = tokio::process::Command::new(VENV_PYTHON)
        .arg(&script)
        .arg(addr.to_string())
        .arg(&p4info)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the venv python");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("interop.py finished within 60 s")
        .expect("interop.py ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "interop.py failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    assert!(stdout.contains("interop: all checks passed"), "{stdout}");
    println!("{stdout}");
    handle.shutdown().await.unwrap();
}
