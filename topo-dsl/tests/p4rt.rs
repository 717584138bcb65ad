//! `[p4rt]`: the switches of a `target = "p4rt"` lab, and its errors.

mod common;

use common::{errors, ok};
use turbonet_topo::{P4rtDevice, Target};

const HEAD: &str =
    "[lab]\nname = \"k4\"\ntarget = \"p4rt\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n";

fn with(p4rt: &str) -> String {
    format!("{HEAD}{p4rt}")
}

#[test]
fn switches_with_addresses_or_bmv2() {
    let lab = ok(&with(
        "[p4rt]\np4info = \"build/turbonet.p4info.txtpb\"\ndevice_config = \"build/turbonet.json\"\n\
         [[p4rt.switch]]\nname = \"s1\"\nports = 64\nspeed = \"100G\"\naddress = \"10.0.0.2:9559\"\n\
         [[p4rt.switch]]\nname = \"s2\"\nports = 32\nspeed = \"400g\"\nbmv2 = true\ndevice_id = 2\nelection_id = 7\n",
    ));
    assert_eq!(lab.target, Target::P4rt);
    let p4rt = lab.p4rt.unwrap();
    assert_eq!(p4rt.queues, 8);
    assert_eq!(p4rt.p4info.as_deref(), Some("build/turbonet.p4info.txtpb"));
    let [s1, s2] = p4rt.switches.as_slice() else {
        panic!("two switches")
    };
    assert_eq!(
        (s1.name.as_str(), s1.ports, s1.device_id, s1.election_id),
        ("s1", 64, 1, 1)
    );
    assert_eq!(s1.device, P4rtDevice::Address("10.0.0.2:9559".into()));
    assert_eq!(s1.speed.bits_per_sec(), 100_000_000_000);
    assert_eq!(
        (s2.device.clone(), s2.device_id, s2.election_id),
        (P4rtDevice::Bmv2, 2, 7)
    );
    // Other targets have none.
    assert!(ok(&HEAD.replace("p4rt", "netns")).p4rt.is_none());
}

#[test]
fn every_mistake_is_located_and_explained() {
    let missing = errors(HEAD);
    assert!(
        missing[0].2.contains("needs a `[p4rt]` section"),
        "{missing:?}"
    );

    let elsewhere = errors(&format!(
        "{}[p4rt]\n[[p4rt.switch]]\nname = \"s1\"\nports = 64\nspeed = \"100G\"\naddress = \"h:1\"\n",
        HEAD.replace("p4rt", "soft")
    ));
    assert!(
        elsewhere[0].2.contains("target = \"p4rt\" only"),
        "{elsewhere:?}"
    );
    assert_eq!(elsewhere[0].0, 7);

    let cases = [
        ("address = \"10.0.0.2\"", "invalid address `10.0.0.2`", 12),
        (
            "address = \"h:1\"\nbmv2 = true",
            "`address` and `bmv2 = true` together",
            12,
        ),
        ("", "needs `address` or `bmv2 = true`", 8),
        ("address = \"h:1\"\nelection_id = 0", "election id 0", 13),
        ("adress = \"h:1\"", "adress", 12),
    ];
    for (extra, message, line) in cases {
        let e = errors(&with(&format!(
            "[p4rt]\n[[p4rt.switch]]\nname = \"s1\"\nports = 64\nspeed = \"100G\"\n{extra}\n"
        )));
        assert!(
            e.iter()
                .any(|(l, _, m, _)| m.contains(message) && *l == line),
            "{extra}: {e:?}"
        );
    }
    let bad_speed = errors(&with(
        "[p4rt]\n[[p4rt.switch]]\nname = \"s1\"\nports = 64\nspeed = \"100\"\naddress = \"h:1\"\n",
    ));
    assert!(bad_speed[0].2.contains("has no unit"), "{bad_speed:?}");
    let twice = errors(&with(
        "[p4rt]\n[[p4rt.switch]]\nname = \"s1\"\nports = 64\nspeed = \"100G\"\naddress = \"h:1\"\n\
         [[p4rt.switch]]\nname = \"s1\"\nports = 64\nspeed = \"100G\"\naddress = \"h:2\"\n",
    ));
    assert!(twice[0].2.contains("declared twice"), "{twice:?}");
    let queues = errors(&with(
        "[p4rt]\nqueues = 0\n[[p4rt.switch]]\nname = \"s1\"\nports = 64\nspeed = \"100G\"\naddress = \"h:1\"\n",
    ));
    assert!(queues[0].2.contains("out of range"), "{queues:?}");
}
