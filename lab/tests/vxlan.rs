//! Cut links' VXLAN ends through [`Netlink::add_vxlans`], against the
//! kernel (root): two machines, each a network namespace of its own on an
//! underlay veth pair, and a node namespace in each; the node ends are
//! created from their machine's namespace and carry frames of the link's
//! MTU whole, with the don't-fragment bit, and refuse larger ones.

use std::net::Ipv4Addr;
use std::process::Command;

use turbonet_host::kernel::{Kernel, Netlink, VXLAN_PORT, VethEnd, Vxlan};
use turbonet_host::namespaces;

/// Runs `ip ARGS` (in namespace `ns` when given); fails on an error.
fn ip(ns: Option<&str>, args: &str) -> String {
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

/// Whether `ping` of `size` bytes with the don't-fragment bit goes from
/// `ns` to `to`.
fn ping(ns: &str, to: &str, size: usize) -> bool {
    Command::new("ip")
        .args([
            "netns", "exec", ns, "ping", "-c", "1", "-W", "2", "-M", "do",
        ])
        .args(["-s", &size.to_string(), to])
        .output()
        .expect("ping runs")
        .status
        .success()
}

/// IPv4 fragments namespace `ns` has made (`FragCreates`).
fn fragments_made(ns: &str) -> u64 {
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

/// Creates `vxlans` from namespace `machine`, as a worker on that
/// machine would, into namespaces `kernel` opened.
fn add_from(machine: &str, kernel: &Netlink, vxlans: Vec<Vxlan>) -> turbonet_host::Result<()> {
    let machine = namespaces::open(machine).expect("the machine's namespace");
    namespaces::in_namespace(&machine, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(runtime.block_on(kernel.add_vxlans(vxlans)))
    })
    .expect("a runtime")
}

/// Named namespaces of the test's own, deleted when it ends, failed or not.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

#[test]
fn cut_link_ends_carry_the_links_mtu_between_machines() {
    if !nix::unistd::geteuid().is_root() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "cannot run under CI: needs root (network namespaces)");
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let id = std::process::id();
    let [m1, m2, n1, n2] = ["m1", "m2", "n1", "n2"].map(|n| format!("tn-vx{id}-{n}"));
    let _guard = Namespaces(vec![m1.clone(), m2.clone(), n1.clone(), n2.clone()]);
    for ns in [&m1, &m2, &n1, &n2] {
        ip(None, &format!("netns add {ns}"));
    }
    // The underlay: a veth pair between the machines, room for the
    // link's MTU and VXLAN's 50 bytes.
    ip(
        Some(&m1),
        &format!("link add u0 mtu 1550 type veth peer name u1 mtu 1550 netns {m2}"),
    );
    ip(Some(&m1), "addr add 198.18.0.1/24 dev u0");
    ip(Some(&m2), "addr add 198.18.0.2/24 dev u1");
    ip(Some(&m1), "link set u0 up");
    ip(Some(&m2), "link set u1 up");
    let underlay = [Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2)];

    for (i, (machine, node)) in [(&m1, &n1), (&m2, &n2)].into_iter().enumerate() {
        let mut kernel = Netlink::new();
        let nodes = kernel
            .open_namespaces(std::slice::from_ref(node))
            .expect("the node's namespace");
        let vxlan = Vxlan {
            what: "cut link s1--s2".to_owned(),
            end: VethEnd {
                ns: nodes[0],
                name: "s1-s2".to_owned(),
                ifindex: 40 + i as u32,
                mac: Some([0x02, 0, 0, 0, 0, 1 + i as u8]),
            },
            vni: 7,
            local: underlay[i],
            remote: underlay[1 - i],
            port: VXLAN_PORT,
            mtu: Some(1500),
        };
        add_from(machine, &kernel, vec![vxlan]).expect("add_vxlans");
    }

    // In the node, with the index, address and MTU asked for, up; its
    // socket on the machine's underlay.
    let shown = ip(Some(&n1), "-d link show s1-s2");
    for want in [
        "40: s1-s2",
        "mtu 1500",
        "state UNKNOWN",
        "link/ether 02:00:00:00:00:01",
        "vxlan id 7 remote 198.18.0.2 local 198.18.0.1",
        "dstport 14789",
        "nolearning",
        "df set",
    ] {
        assert!(shown.contains(want), "{want:?} not in:\n{shown}");
    }
    assert!(ip(Some(&m1), "link show").contains("u0"));
    assert!(!ip(Some(&m1), "link show").contains("s1-s2"));

    ip(Some(&n1), "addr add 10.77.0.1/30 dev s1-s2");
    ip(Some(&n2), "addr add 10.77.0.2/30 dev s1-s2");
    // A frame of the link's MTU crosses whole; one byte more is refused
    // at the sender, not fragmented on the underlay.
    assert!(ping(&n1, "10.77.0.2", 1472), "a 1,500-byte packet");
    assert!(!ping(&n1, "10.77.0.2", 1473), "a 1,501-byte packet");
    assert_eq!(fragments_made(&m1), 0, "the underlay fragmented nothing");

    // A second device with the same VNI to the same machine is refused,
    // naming the link.
    let mut kernel = Netlink::new();
    let nodes = kernel
        .open_namespaces(std::slice::from_ref(&n1))
        .expect("n1");
    let again = Vxlan {
        what: "cut link s1--s3".to_owned(),
        end: VethEnd {
            ns: nodes[0],
            name: "s1-s3".to_owned(),
            ifindex: 50,
            mac: None,
        },
        vni: 7,
        local: underlay[0],
        remote: underlay[1],
        port: VXLAN_PORT,
        mtu: None,
    };
    let refused = add_from(&m1, &kernel, vec![again]);
    let message = refused
        .expect_err("a second VNI 7 on one socket")
        .to_string();
    assert!(
        message.contains("cut link s1--s3") && message.contains("File exists"),
        "{message}"
    );
}
