//! `[mgmt]`: the out-of-band management network, off unless asked for.

mod common;

use common::{TWO_HOSTS as TWO, errors, ok};
use turbonet_topo::NodeId;

#[test]
fn the_management_network_is_off_by_default_and_an_empty_section_takes_the_default_pool() {
    assert_eq!(ok(TWO).mgmt, None);
    let lab = ok(&format!("{TWO}[mgmt]\n"));
    let mgmt = lab.mgmt.expect("[mgmt] turns it on");
    assert_eq!(mgmt.pool.to_string(), "172.31.0.0/16");
    assert_eq!(mgmt.hub().to_string(), "172.31.0.1/16");
    assert_eq!(mgmt.address(NodeId(0)).to_string(), "172.31.0.2/16");
    assert_eq!(mgmt.address(NodeId(2)).to_string(), "172.31.0.4/16");
}

#[test]
fn a_pool_that_overlaps_the_fabric_or_is_too_small_or_unknown_keys_are_located() {
    let e = errors(&format!("{TWO}[mgmt]\npool = \"10.0.0.0/8\"\n"));
    assert_eq!(e.len(), 3, "{e:?}");
    assert!(
        e[0].2.contains("overlaps the `loopbacks` pool 10.0.0.0/16"),
        "{e:?}"
    );
    assert!(e[0].3.contains("out of band"), "{e:?}");
    let line = TWO.lines().count() + 2;
    assert_eq!((e[0].0, e[0].1), (line, 8));

    let e = errors(&format!("{TWO}[mgmt]\npool = \"192.168.0.0/31\"\n"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        e[0].2,
        "the management pool 192.168.0.0/31 is too small: it holds 0 nodes, the fabric has 3"
    );
    assert!(e[0].3.contains("use a /29 or larger"), "{e:?}");

    let e = errors(&format!("{TWO}[mgmt]\npool = \"192.168.0.1/24\"\n"));
    assert!(e[0].2.contains("host bits are set"), "{e:?}");
    assert!(e[0].3.contains("192.168.0.0/24"), "{e:?}");

    let e = errors(&format!("{TWO}[mgmt]\npoool = \"192.168.0.0/24\"\n"));
    assert!(e[0].2.contains("poool"), "{e:?}");
    assert!(e[0].3.contains("pool"), "{e:?}");
}
