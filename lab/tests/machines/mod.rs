//! What the tests of labs over machines share: namespaces standing for
//! machines, and how they are looked at.

use std::process::Command;

/// Runs `ip ARGS` (in namespace `ns` when given); fails on an error.
pub(crate) fn ip(ns: Option<&str>, args: &str) -> String {
    let mut command = Command::new("ip");
    if let Some(ns) = ns {
        command.args(["-n", ns]);
    }
    let out = command
        .args(args.split_whitespace())
        .output()
        .expect("ip runs");
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("text")
}

/// IPv4 fragments namespace `ns` has made (`FragCreates`).
pub(crate) fn fragments_made(ns: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .expect("cat runs");
    let text = String::from_utf8(out.stdout).expect("text");
    let mut ip = text.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (
        ip.next().expect("Ip: names"),
        ip.next().expect("Ip: values"),
    );
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(name, _)| *name == "FragCreates")
        .and_then(|(_, value)| value.parse().ok())
        .expect("FragCreates")
}

/// Named namespaces of the test's own, deleted when it ends, failed or not.
pub(crate) struct Namespaces(pub(crate) Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// True when the test can run (root); otherwise says it was skipped, and
/// fails under CI, where it must run.
pub(crate) fn can_run() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!ci, "cannot run under CI: needs root (network namespaces)");
    eprintln!("skipped: needs root (network namespaces)");
    false
}

/// Two machines, each a namespace named `machines[i]`, on an underlay veth
/// pair of MTU `mtu` (`u0`, `u1`), at 198.18.0.1 and .2; their addresses.
pub(crate) fn underlay(machines: &[String; 2], mtu: u32) -> [std::net::Ipv4Addr; 2] {
    for m in machines {
        ip(None, &format!("netns add {m}"));
    }
    ip(
        Some(&machines[0]),
        &format!(
            "link add u0 mtu {mtu} type veth peer name u1 mtu {mtu} netns {}",
            machines[1]
        ),
    );
    let addresses = [
        std::net::Ipv4Addr::new(198, 18, 0, 1),
        std::net::Ipv4Addr::new(198, 18, 0, 2),
    ];
    for (i, m) in machines.iter().enumerate() {
        ip(Some(m), &format!("addr add {}/24 dev u{i}", addresses[i]));
        ip(Some(m), &format!("link set u{i} up"));
    }
    addresses
}
