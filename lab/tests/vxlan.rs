//! Cut links' VXLAN ends through [`Netlink::add_vxlans`], against the
//! kernel (root): two machines, each a network namespace of its own on an
//! underlay veth pair, and a node namespace in each; the node ends are
//! created from their machine's namespace and carry frames of the link's
//! MTU whole, with the don't-fragment bit, and refuse larger ones.

mod machines;

use std::process::Command;

use machines::{Namespaces, fragments_made, ip};

use turbonet_host::kernel::{Kernel, Netlink, VXLAN_PORT, VethEnd, Vxlan};
use turbonet_host::namespaces;

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

#[test]
fn cut_link_ends_carry_the_links_mtu_between_machines() {
    if !machines::can_run() {
        return;
    }
    let id = std::process::id();
    let [m1, m2, n1, n2] = ["m1", "m2", "n1", "n2"].map(|n| format!("tn-vx{id}-{n}"));
    let _guard = Namespaces(vec![m1.clone(), m2.clone(), n1.clone(), n2.clone()]);
    for ns in [&n1, &n2] {
        ip(None, &format!("netns add {ns}"));
    }
    // The underlay: a veth pair between the machines, room for the
    // link's MTU and VXLAN's 50 bytes.
    let underlay = machines::underlay(&[m1.clone(), m2.clone()], 1550);

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
