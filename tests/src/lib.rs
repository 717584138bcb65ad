//! Helpers for end-to-end tests that drive the built `turbonet` binary.
//!
//! Root tests create uniquely named labs (and any other objects), and always
//! remove them: a [`LabGuard`] runs `turbonet down` when dropped, also when
//! the test panics.

pub mod browser;
pub mod machines;
pub mod service;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// The `turbonet` binary under test: `$TURBONET_BIN`, else the workspace's
/// debug build (`cargo build --workspace` makes it).
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("TURBONET_BIN") {
        return bin.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace().join("target"), PathBuf::from);
    let bin = target.join("debug").join("turbonet");
    assert!(
        bin.exists(),
        "{} does not exist: run `cargo build --workspace` before the tests",
        bin.display()
    );
    bin
}

/// A `turbonet` command. Its `auto` engine never takes the kernel engine
/// (`TURBONET_KERNEL_ENGINE=off`): the suite's labs get the same engines on
/// every kernel, as on CI's, which has no `sch_fq`; what they check of
/// impaired links (engine threads, socket drops, captures of dropped
/// frames, the engine's events) is the userspace engine's. The kernel
/// engine has tests of its own (`turbonet-kernel-engine`'s parity, the
/// VM test, which runs its own binary's `up`).
pub fn turbonet() -> Command {
    let mut c = Command::new(binary());
    c.env_remove("TURBONET_LOG");
    c.env_remove("TURBONET_BGP_SHARDS");
    c.env_remove("TURBONET_LAB");
    c.env("TURBONET_KERNEL_ENGINE", "off");
    c
}

/// Runs `turbonet ARGS`, returning its output.
pub fn run(args: &[&str]) -> Output {
    turbonet().args(args).output().expect("turbonet runs")
}

/// stdout and stderr of an output, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// True when running as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// True under CI (`CI` set and not `false`/`0`): every test must run there,
/// so a test that cannot is a failure, not a skip.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Says that the calling test cannot run here and why. Outside CI it prints
/// `skipped: REASON` (the test then returns, and the harness counts it as
/// passed, so the note is the only sign); under CI it fails the test, since
/// CI runs as root with every peer installed and a skip there hides a
/// missing install step.
pub fn skip(reason: &str) {
    assert!(
        !under_ci(),
        "cannot run under CI: {reason} (CI runs as root after scripts/setup)"
    );
    eprintln!("skipped: {reason}");
}

/// Returns from the calling test, through [`skip`], unless running as root.
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::is_root() {
            $crate::skip("needs root (network namespaces)");
            return;
        }
    };
}

/// The Python of the venv `scripts/setup` creates (the Python client's
/// dependencies, the OpenMetrics parser).
pub const VENV_PYTHON: &str = "/var/tmp/turbonet-py/bin/python3";

/// Returns from the calling test, through [`skip`], unless the venv of
/// [`VENV_PYTHON`] is there.
#[macro_export]
macro_rules! require_venv {
    () => {
        if !std::path::Path::new($crate::VENV_PYTHON).exists() {
            $crate::skip(&format!(
                "{} is missing; run scripts/setup as root to create the venv",
                $crate::VENV_PYTHON
            ));
            return;
        }
    };
}

/// A lab name no other test (or test run) uses: `<prefix><pid><n>`, at most
/// 12 bytes.
pub fn unique_lab(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!("{prefix}{}{n}", std::process::id() % 100_000);
    assert!(name.len() <= 12, "lab name {name} too long");
    name
}

/// Writes a copy of a bundled scenario with another lab name (and optional
/// extra TOML appended), returning its path.
pub fn scenario_as(bundled: &str, lab: &str, extra: &str) -> PathBuf {
    file_as(&workspace().join("scenarios").join(bundled), lab, extra)
}

/// Writes a copy of a scenario or experiment file with another lab name
/// (and optional extra TOML appended), returning its path.
pub fn file_as(file: &Path, lab: &str, extra: &str) -> PathBuf {
    let bundled = file.display();
    let text = std::fs::read_to_string(file).expect("the file exists");
    let mut renamed = String::new();
    let mut done = false;
    for line in text.lines() {
        if !done && line.trim_start().starts_with("name") {
            renamed.push_str(&format!("name = \"{lab}\"\n"));
            done = true;
        } else {
            renamed.push_str(line);
            renamed.push('\n');
        }
    }
    assert!(done, "{bundled} has a lab name");
    renamed.push_str(extra);
    write_scenario(lab, &renamed)
}

/// Writes scenario text to a temporary file named after the lab.
pub fn write_scenario(lab: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join("turbonet-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{lab}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `turbonet down LAB` when dropped.
#[derive(Debug)]
pub struct LabGuard(pub String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = run(&["down", &self.0]);
    }
}

/// Brings a bundled scenario up (`up --quiet`) under a unique lab name
/// starting with `prefix`, with `extra` TOML appended; the guard's name is
/// the lab's, and dropping the guard takes the lab down.
pub fn up_bundled(prefix: &str, bundled: &str, extra: &str) -> LabGuard {
    let lab = unique_lab(prefix);
    let file = scenario_as(bundled, &lab, extra);
    let guard = LabGuard(lab);
    let up = run(&["up", "--quiet", file.to_str().unwrap()]);
    assert!(
        up.status.success(),
        "up {bundled} as {}: {}",
        guard.0,
        text(&up)
    );
    guard
}

/// Namespaces of a lab that exist now.
pub fn lab_namespaces(lab: &str) -> Vec<String> {
    let prefix = format!("tn-{lab}-");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(std::result::Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// The pids of the lab's BGP shard processes.
pub fn bgp_shards(lab: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "--bgp-shard") && args.last().is_some_and(|a| a == lab) {
            pids.push(pid);
        }
    }
    pids
}

/// True when the lab's state directory exists.
pub fn lab_state_exists(lab: &str) -> bool {
    Path::new("/run/turbonet").join(lab).exists()
}

/// Polls `f` until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The address of `host`'s first link (`show links HOST --json`), without
/// its prefix length.
pub fn host_address(lab: &str, host: &str) -> String {
    let out = run(&["show", "links", host, "--lab", lab, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    links[0]["a_addr"]
        .as_str()
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("no address for {host} in {links}"))
        .to_owned()
}

/// Pings `addr` twice from the named namespace `netns`; the output on
/// failure.
pub fn ping_from(netns: &str, addr: &str) -> Result<(), String> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", netns, "ping", "-c", "2", "-W", "2", "-i", "0.2", addr,
        ])
        .output()
        .expect("ip netns exec runs");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ping {addr} from {netns}: {}", text(&out)))
    }
}
