//! The instruments' sections: `[metrics]`, `[[capture]]`, `[[mirror]]`,
//! `[[filter]]`, and `flood` workloads: what they read, and located errors
//! that say what would be valid.

mod common;

use common::{TWO_HOSTS as DUO, errors, ok};
use turbonet_topo::experiment::{FloodProtocol, WorkloadKind};
use turbonet_topo::{Attach, FilterKind, Hook};

#[test]
fn taps_filters_and_the_endpoint_read_with_their_defaults() {
    let lab = ok(&format!(
        "{DUO}[metrics]\nport = 9464\n\
         [[capture]]\nlink = \"h1--s1\"\n\
         [[mirror]]\nlink = \"h2--s1\"\ndirection = \"b-a\"\nto = \"h1\"\ntruncate = 64\n\
         [[mirror]]\nlink = \"h1--s1\"\nto = \"h1\"\n\
         [[filter]]\nnode = \"s1\"\nport = \"h1\"\nnft = \"ip saddr != 10.128.0.2 drop\"\n\
         [[filter]]\nname = \"x\"\nnode = \"s1\"\nport = \"h2\"\nebpf = \"x.o\"\nattach = \"xdp\"\n"
    ));
    let m = lab.metrics.unwrap();
    assert_eq!(
        (m.port, m.address.to_string()),
        (9464, "127.0.0.1".to_owned())
    );
    assert_eq!(lab.captures[0].file, "h1--s1.pcapng");
    assert_eq!(lab.captures[0].directions, [true, true]);
    assert_eq!(lab.mirrors[0].directions, [false, true]);
    assert_eq!(
        (lab.mirrors[0].port.as_str(), lab.mirrors[0].truncate),
        ("mirror0", Some(64))
    );
    assert_eq!(
        lab.mirrors[1].port, "mirror1",
        "a node's mirror ports are numbered"
    );
    assert_eq!(
        (lab.filters[0].name.as_str(), lab.filters[0].hook),
        ("filter0", Hook::Ingress)
    );
    assert!(matches!(lab.filters[0].kind, FilterKind::Nft { .. }));
    assert!(matches!(
        lab.filters[1].kind,
        FilterKind::Ebpf {
            attach: Attach::Xdp,
            ..
        }
    ));
}

#[test]
fn bad_taps_and_filters_are_located_with_what_would_be_valid() {
    for (extra, says, helps) in [
        ("[metrics]\n", "missing `port`", "port = 9464"),
        ("[metrics]\nport = 70000\n", "a TCP port is 1 to 65535", ""),
        (
            "[[capture]]\nlink = \"s1--h1\"\n",
            "no link named `s1--h1`",
            "did you mean `h1--s1`",
        ),
        (
            "[[capture]]\nlink = \"h1--s1\"\ndirection = \"up\"\n",
            "unknown direction `up`",
            "`a-b` (frames from h1 to s1",
        ),
        (
            "[[mirror]]\nlink = \"h1--s1\"\nto = \"h3\"\n",
            "no node named `h3`",
            "h1",
        ),
        (
            "[[mirror]]\nlink = \"h1--s1\"\nto = \"s1\"\nport = \"h1\"\n",
            "s1 already has an interface `h1`",
            "span0",
        ),
        (
            "[[filter]]\nnode = \"s1\"\nport = \"h3\"\nnft = \"drop\"\n",
            "s1 has no port `h3`",
            "h1, h2",
        ),
        (
            "[[filter]]\nnode = \"s1\"\nport = \"h1\"\n",
            "missing `nft` or `ebpf`",
            "ebpf = \"sav.o\"",
        ),
        (
            "[[filter]]\nnode = \"s1\"\nport = \"h1\"\nebpf = \"x.o\"\nhook = \"egress\"\nattach = \"xdp\"\n",
            "XDP runs at a port's ingress only",
            "attach = \"tc\"",
        ),
        (
            "[[filter]]\nnode = \"s1\"\nport = \"h1\"\nnft = \"drop\"\nhook = \"egres\"\n",
            "unknown hook `egres`",
            "egress",
        ),
        (
            "[[filter]]\nnode = \"s1\"\nport = \"h1\"\nebpf = \"a.o\"\n[[filter]]\nnode = \"s1\"\nport = \"h1\"\nebpf = \"b.o\"\n",
            "port h1 of s1 has an eBPF filter already (`filter0`)",
            "one eBPF filter per port",
        ),
    ] {
        let e = errors(&format!("{DUO}{extra}"));
        assert!(!e.is_empty(), "{extra}: no error");
        assert!(e[0].2.contains(says), "{extra}: {e:?}");
        assert!(e[0].3.contains(helps), "{extra}: {e:?}");
    }
}

#[test]
fn a_flood_reads_its_target_rate_and_forged_network() {
    let lab = ok(&format!(
        "{DUO}[[workload]]\nname = \"f\"\nkind = \"flood\"\nhosts = [\"h1\"]\ntarget = \"h2\"\n\
         pps = 1000\nspoof = \"10.200.0.0/16\"\nprotocol = \"syn\"\n"
    ));
    let WorkloadKind::Flood {
        protocol,
        pps,
        spoof,
        port,
        ..
    } = &lab.workloads[0].kind
    else {
        panic!("{:?}", lab.workloads[0].kind);
    };
    assert_eq!((*protocol, *pps, *port), (FloodProtocol::Syn, 1000, 80));
    assert_eq!(spoof.unwrap().to_string(), "10.200.0.0/16");
    for (extra, says) in [
        (
            "target = \"s1\"\npps = 10\n",
            "`s1` is a switch, not a host",
        ),
        ("target = \"h2\"\n", "missing `pps`"),
        (
            "target = \"h2\"\npps = 10\nspoof = \"10.200.0.0\"\n",
            "invalid `spoof`",
        ),
        (
            "target = \"h2\"\npps = 10\nprotocol = \"syn\"\nsize = 64\n",
            "a SYN flood sends no payload",
        ),
    ] {
        let e = errors(&format!(
            "{DUO}[[workload]]\nname = \"f\"\nkind = \"flood\"\nhosts = [\"h1\"]\n{extra}"
        ));
        assert!(e.iter().any(|e| e.2.contains(says)), "{extra}: {e:?}");
    }
}
