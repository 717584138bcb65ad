//! `[routing]` in BGP mode (agents, per-switch overrides, timers) and the
//! eBGP neighbours of `[[external]]` ports.

mod common;

use std::net::Ipv4Addr;

use turbonet_topo::{Agent, Asn, BgpTimers, ExternalPeer, RoutingMode};

use common::{errors, ok};

/// The only error of `text`.
fn one_error(text: &str) -> (usize, usize, String, String) {
    let mut e = errors(text);
    assert_eq!(e.len(), 1, "{e:#?}");
    e.remove(0)
}

/// A k=4 fat-tree (lines 1-5) followed by `rest` (from line 6).
fn k4(rest: &str) -> String {
    format!("[lab]\nname = \"r\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n{rest}")
}

/// The small HPN pod of `scenarios/hpn.toml` (lines 1-12) followed by
/// `rest` (from line 13).
fn hpn(rest: &str) -> String {
    format!(
        "[lab]\nname = \"hpn\"\n[topology]\nkind = \"hpn\"\nsegments = 2\nhosts_per_segment = 4\n\
         backup_hosts = 1\nrails = 2\nplanes = 2\naggs_per_plane = 2\ncores = 2\ncore_uplinks = 1\n{rest}"
    )
}

#[test]
fn static_mode_keeps_the_defaults() {
    for text in [k4(""), k4("[routing]\nmode = \"static\"\n")] {
        let lab = ok(&text);
        assert_eq!(lab.routing.mode, RoutingMode::Static);
        assert_eq!(lab.routing.agent, Agent::Builtin);
        assert!(lab.routing.agents.is_empty());
        assert_eq!(lab.routing.timers, BgpTimers::default());
    }
}

#[test]
fn bgp_mode_defaults_to_builtin_agents_and_fast_timers() {
    let lab = ok(&k4("[routing]\nmode = \"bgp\"\n"));
    assert_eq!(lab.routing.mode, RoutingMode::Bgp);
    assert_eq!(lab.routing.agent, Agent::Builtin);
    assert!(lab.routing.agents.is_empty());
    assert_eq!(
        lab.routing.timers,
        BgpTimers {
            hold_time: 3,
            keepalive: 1,
            connect_retry: 1
        }
    );
    for n in lab.fabric.switches() {
        assert_eq!(lab.routing.agent_of(n.id), Agent::Builtin);
    }
}

#[test]
fn agent_names_and_display() {
    assert_eq!(Agent::default(), Agent::Builtin);
    for (a, name) in Agent::ALL.into_iter().zip(Agent::NAMES) {
        assert_eq!(a.to_string(), *name);
        assert_eq!(Agent::from_name(name), Some(a));
        assert_eq!(serde_json::to_string(&a).unwrap(), format!("\"{name}\""));
    }
    assert_eq!(Agent::from_name("FRR"), None);
}

#[test]
fn agents_are_overridden_by_switch_name() {
    let lab = ok(&hpn(r#"[routing]
mode = "bgp"
agent = "bird"
hold_time = 9
keepalive = 3
connect_retry = 5

[routing.agents]
"tor0-r0p0" = "frr"
"agg0-1" = "builtin"
"#));
    let f = &lab.fabric;
    let id = |name: &str| f.node_by_name(name).unwrap().id;
    assert_eq!(lab.routing.agent, Agent::Bird);
    assert_eq!(lab.routing.agents.len(), 2);
    assert_eq!(lab.routing.agent_of(id("tor0-r0p0")), Agent::Frr);
    assert_eq!(lab.routing.agent_of(id("agg0-1")), Agent::Builtin);
    assert_eq!(lab.routing.agent_of(id("core0-0")), Agent::Bird);
    assert_eq!(
        lab.routing.timers,
        BgpTimers {
            hold_time: 9,
            keepalive: 3,
            connect_retry: 5
        }
    );
    // Inline form, and a hold time of 0 takes any keepalive.
    let lab = ok(&hpn(
        "[routing]\nmode = \"bgp\"\nhold_time = 0\nkeepalive = 60\nagents = { \"agg0-1\" = \"bird\" }\n",
    ));
    assert_eq!(lab.routing.timers.hold_time, 0);
    assert_eq!(lab.routing.timers.keepalive, 60);
    assert_eq!(
        lab.routing
            .agent_of(lab.fabric.node_by_name("agg0-1").unwrap().id),
        Agent::Bird
    );
}

#[test]
fn unknown_agent_lists_the_valid_ones() {
    let (l, c, msg, help) = one_error(&k4("[routing]\nmode = \"bgp\"\nagent = \"fr\"\n"));
    assert_eq!((l, c), (8, 9));
    assert_eq!(msg, "unknown agent `fr`");
    assert_eq!(help, "did you mean `frr`? valid agents: builtin, frr, bird");

    let (l, c, msg, help) = one_error(&k4(
        "[routing]\nmode = \"bgp\"\n[routing.agents]\n\"edge0-0\" = \"brid\"\n",
    ));
    assert_eq!((l, c), (9, 13));
    assert_eq!(msg, "unknown agent `brid` for `edge0-0`");
    assert_eq!(
        help,
        "did you mean `bird`? valid agents: builtin, frr, bird"
    );

    let (l, c, msg, help) = one_error(&k4(
        "[routing]\nmode = \"bgp\"\n[routing.agents]\n\"edge0-0\" = 3\n",
    ));
    assert_eq!((l, c), (9, 13));
    assert_eq!(
        msg,
        "the agent of `edge0-0` must be a string, found integer"
    );
    assert!(help.contains("builtin, frr, bird"), "{help}");
}

#[test]
fn agents_name_switches_of_the_fabric() {
    let e = errors(&k4(r#"[routing]
mode = "bgp"
[routing.agents]
"edge0-9" = "frr"
"h0-0-0" = "bird"
"spine7" = "frr"
agg0-1 = "frr"
"#));
    assert_eq!(e.len(), 3, "{e:#?}");
    assert_eq!((e[0].0, e[0].1), (9, 1));
    assert_eq!(e[0].2, "unknown node `edge0-9` in `[routing.agents]`");
    assert_eq!(
        e[0].3,
        "close names: `edge0-0`, `edge0-1`, `edge1-0`; switch names look like `edge0-0`"
    );
    assert_eq!((e[1].0, e[1].1), (10, 1));
    assert_eq!(
        e[1].2,
        "`h0-0-0` is a host: hosts run no routing agent; only switches take an agent"
    );
    assert_eq!(
        e[1].3,
        "remove this line, or name a switch, e.g. `edge0-0`, the switch `h0-0-0` is attached to"
    );
    assert_eq!((e[2].0, e[2].1), (11, 1));
    assert_eq!(e[2].2, "unknown node `spine7` in `[routing.agents]`");
    assert_eq!(e[2].3, "switch names look like `edge0-0`");
}

#[test]
fn bgp_keys_need_bgp_mode() {
    // Every key is reported, at the key, with the mode's line.
    let e = errors(&k4(r#"[routing]
mode = "controller"
agent = "frr"
hold_time = 3
keepalive = 1
connect_retry = 1
[routing.agents]
"edge0-0" = "frr"
"#));
    assert_eq!(e.len(), 5, "{e:#?}");
    let at: Vec<(usize, usize)> = e.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(at, [(8, 1), (9, 1), (10, 1), (11, 1), (12, 10)]);
    for (x, key) in e
        .iter()
        .zip(["agent", "hold_time", "keepalive", "connect_retry", "agents"])
    {
        assert_eq!(
            x.2,
            format!("`{key}` in `[routing]` is only used with mode = \"bgp\"")
        );
        assert_eq!(
            x.3,
            format!(
                "the routing mode is \"controller\" (`mode` at line 7); set `mode = \"bgp\"` in `[routing]`, or remove `{key}`"
            )
        );
    }
    // Without `mode`, the default mode is named.
    let (l, c, msg, help) = one_error(&k4("[routing]\nagent = \"builtin\"\n"));
    assert_eq!((l, c), (7, 1));
    assert_eq!(
        msg,
        "`agent` in `[routing]` is only used with mode = \"bgp\""
    );
    assert_eq!(
        help,
        "the routing mode is \"static\" by default; set `mode = \"bgp\"` in `[routing]`, or remove `agent`"
    );
    // A wrong mode is reported once, not with its BGP keys.
    let (_, _, msg, _) = one_error(&k4("[routing]\nmode = \"bpg\"\nagent = \"frr\"\n"));
    assert_eq!(msg, "unknown routing mode `bpg`");
}

#[test]
fn timers_follow_rfc_4271() {
    let (l, c, msg, help) = one_error(&k4("[routing]\nmode = \"bgp\"\nhold_time = 2\n"));
    assert_eq!((l, c), (8, 13));
    assert_eq!(
        msg,
        "`hold_time` must be 0 or from 3 to 65535 seconds, found 2"
    );
    assert!(help.starts_with("RFC 4271 section 4.2"), "{help}");

    let (l, c, msg, _) = one_error(&k4("[routing]\nmode = \"bgp\"\nhold_time = 65536\n"));
    assert_eq!((l, c), (8, 13));
    assert_eq!(
        msg,
        "`hold_time` must be 0 or from 3 to 65535 seconds, found 65536"
    );

    let (l, c, msg, help) = one_error(&k4(
        "[routing]\nmode = \"bgp\"\nhold_time = 9\nkeepalive = 4\n",
    ));
    assert_eq!((l, c), (9, 13));
    assert_eq!(
        msg,
        "`keepalive` = 4 is more than a third of the hold time 9"
    );
    assert_eq!(
        help,
        "RFC 4271 section 4.4: KEEPALIVEs are sent every third of the hold time, so that a \
         peer's hold timer survives two lost ones; with `hold_time` = 9 (line 8), set \
         `keepalive` to at most 3, or `hold_time` to at least 12"
    );

    // Against the default hold time.
    let (l, c, msg, help) = one_error(&k4("[routing]\nmode = \"bgp\"\nkeepalive = 2\n"));
    assert_eq!((l, c), (8, 13));
    assert_eq!(
        msg,
        "`keepalive` = 2 is more than a third of the hold time 3"
    );
    assert!(help.contains("with the default `hold_time` of 3"), "{help}");

    // Every bad timer is reported.
    let e = errors(&k4(
        "[routing]\nmode = \"bgp\"\nhold_time = \"3s\"\nkeepalive = 0\nconnect_retry = -1\n",
    ));
    assert_eq!(e.len(), 3, "{e:#?}");
    assert_eq!((e[0].0, e[0].1), (8, 13));
    assert_eq!(
        e[0].2,
        "`hold_time` must be an integer number of seconds, found string \"3s\""
    );
    assert_eq!(
        e[0].3,
        "write whole seconds as a plain integer without unit or quotes, e.g. `hold_time = 3`"
    );
    assert_eq!((e[1].0, e[1].1), (9, 13));
    assert_eq!(
        e[1].2,
        "`keepalive` must be from 1 to 65535 seconds, found 0"
    );
    assert_eq!((e[2].0, e[2].1), (10, 17));
    assert_eq!(
        e[2].2,
        "`connect_retry` must be a non-negative number of seconds, found -1"
    );
}

#[test]
fn unknown_routing_key_suggests_the_closest() {
    let (l, c, msg, help) = one_error(&k4("[routing]\nmode = \"bgp\"\nhold = 3\n"));
    assert_eq!((l, c), (8, 1));
    assert_eq!(msg, "unknown key `hold` in `[routing]`");
    assert!(help.starts_with("did you mean `hold_time`?"), "{help}");
    assert!(
        help.contains("agent, hold_time, keepalive, connect_retry, nexthop_compat, asn, agents"),
        "{help}"
    );
}

/// A k=4 fat-tree in BGP mode (lines 1-7) with one external port on
/// `edge0-0` (lines 8-11) and `bgp` from line 12.
fn external(bgp: &str) -> String {
    k4(&format!(
        "[routing]\nmode = \"bgp\"\n[[external]]\nnode = \"edge0-0\"\ninterface = \"veth-ext\"\naddress = \"192.0.2.1/30\"\n{bgp}"
    ))
}

#[test]
fn external_bgp_peer() {
    let lab = ok(&external(
        "gateway = \"192.0.2.2\"\nroutes = [\"198.51.100.0/24\"]\nbgp = { peer = \"192.0.2.2\", asn = 65010 }\n",
    ));
    let x = &lab.fabric.externals[0];
    assert_eq!(
        x.bgp,
        Some(ExternalPeer {
            addr: Ipv4Addr::new(192, 0, 2, 2),
            asn: Asn(65010)
        })
    );
    // `routes` stay static routes next to the session.
    assert_eq!(x.routes, ["198.51.100.0/24".parse().unwrap()]);
    assert_eq!(x.gateway, Some(Ipv4Addr::new(192, 0, 2, 2)));
    // The table form, and the largest ASN.
    let lab = ok(&external(
        "[external.bgp]\npeer = \"192.0.2.2\"\nasn = 4294967295\n",
    ));
    assert_eq!(lab.fabric.externals[0].bgp.unwrap().asn, Asn(u32::MAX));
    // Without `bgp`, no session.
    let lab = ok(&external(""));
    assert_eq!(lab.fabric.externals[0].bgp, None);
}

#[test]
fn external_bgp_needs_bgp_mode() {
    let text = k4(
        "[[external]]\nnode = \"edge0-0\"\ninterface = \"veth-ext\"\naddress = \"192.0.2.1/30\"\nbgp = { peer = \"192.0.2.2\", asn = 65010 }\n",
    );
    let (l, c, msg, help) = one_error(&text);
    assert_eq!((l, c), (10, 1));
    assert_eq!(
        msg,
        "`bgp` in `[[external]]` is only used with mode = \"bgp\""
    );
    assert_eq!(
        help,
        "the routing mode is \"static\" by default; set `mode = \"bgp\"` in `[routing]`, or remove `bgp`"
    );
}

#[test]
fn external_bgp_peer_errors() {
    // Peer off the subnet, the node's own address, the broadcast address.
    let (l, c, msg, help) = one_error(&external("bgp = { peer = \"192.0.2.9\", asn = 65010 }\n"));
    assert_eq!((l, c), (12, 16));
    assert_eq!(
        msg,
        "BGP peer 192.0.2.9 is not on the external subnet 192.0.2.0/30"
    );
    assert_eq!(
        help,
        "the neighbour is directly connected: give another host address of 192.0.2.0/30 than the node's 192.0.2.1, e.g. \"192.0.2.2\""
    );
    let (_, _, msg, _) = one_error(&external("bgp = { peer = \"192.0.2.1\", asn = 65010 }\n"));
    assert_eq!(
        msg,
        "BGP peer 192.0.2.1 is the node's own address on this port"
    );
    let (_, _, msg, _) = one_error(&external("bgp = { peer = \"192.0.2.3\", asn = 65010 }\n"));
    assert_eq!(
        msg,
        "BGP peer 192.0.2.3 is the network or broadcast address of 192.0.2.0/30"
    );
    let (l, c, msg, _) = one_error(&external("bgp = { peer = \"192.0.2\", asn = 65010 }\n"));
    assert_eq!((l, c), (12, 16));
    assert_eq!(msg, "invalid BGP peer address `192.0.2`");

    // ASNs: 0, too large, not an integer, the node's own.
    let (l, c, msg, help) = one_error(&external("bgp = { peer = \"192.0.2.2\", asn = 0 }\n"));
    assert_eq!((l, c), (12, 35));
    assert_eq!(
        msg,
        "`asn` in `bgp` of `[[external]]` must be from 1 to 4294967295, found 0"
    );
    assert!(help.contains("RFC 7607"), "{help}");
    let (_, _, msg, _) = one_error(&external(
        "bgp = { peer = \"192.0.2.2\", asn = 4294967296 }\n",
    ));
    assert_eq!(
        msg,
        "`asn` in `bgp` of `[[external]]` must be from 1 to 4294967295, found 4294967296"
    );
    let (_, _, msg, _) = one_error(&external(
        "bgp = { peer = \"192.0.2.2\", asn = \"65010\" }\n",
    ));
    assert_eq!(
        msg,
        "`asn` in `bgp` of `[[external]]` must be an integer, found string \"65010\""
    );
    // edge0-0 has ASN 4200001000.
    let (l, c, msg, help) = one_error(&external(
        "bgp = { peer = \"192.0.2.2\", asn = 4200001000 }\n",
    ));
    assert_eq!((l, c), (12, 35));
    assert_eq!(msg, "the BGP peer's ASN 4200001000 is the ASN of `edge0-0`");
    assert!(
        help.starts_with("an external neighbour is an eBGP peer"),
        "{help}"
    );

    // Unknown and missing keys; every error is reported.
    let e = errors(&external("bgp = { pear = \"192.0.2.2\", as = 65010 }\n"));
    let got: Vec<(usize, usize, &str, &str)> = e
        .iter()
        .map(|x| (x.0, x.1, x.2.as_str(), x.3.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                12,
                7,
                "missing `peer` in `bgp` of `[[external]]`",
                "add the neighbour's address on the external subnet, e.g. `peer = \"192.0.2.2\"`"
            ),
            (
                12,
                7,
                "missing `asn` in `bgp` of `[[external]]`",
                "add the neighbour's ASN, e.g. `asn = 65010`"
            ),
            (
                12,
                9,
                "unknown key `pear` in `bgp` of `[[external]]`",
                "did you mean `peer`? valid keys: peer, asn"
            ),
            (
                12,
                29,
                "unknown key `as` in `bgp` of `[[external]]`",
                "did you mean `asn`? valid keys: peer, asn"
            ),
        ]
    );
}

/// The first TOML example after `heading` in `docs/scenarios.md`.
fn doc_example(heading: &str) -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/scenarios.md"),
    )
    .unwrap();
    let section = &doc[doc.find(heading).unwrap()..];
    let start = section.find("```toml\n").unwrap() + "```toml\n".len();
    section[start..start + section[start..].find("```").unwrap()].to_string()
}

/// The BGP examples of `docs/scenarios.md` parse.
#[test]
fn documented_examples_parse() {
    let lab = ok(&hpn(&doc_example("### `[routing.agents]`")));
    let r = &lab.routing;
    let count = |a: Agent| {
        lab.fabric
            .switches()
            .filter(|n| r.agent_of(n.id) == a)
            .count()
    };
    assert_eq!(r.mode, RoutingMode::Bgp);
    assert_eq!((count(Agent::Frr), count(Agent::Bird)), (2, 1));
    assert_eq!(count(Agent::Builtin), lab.fabric.switches().count() - 3);
    assert_eq!((r.timers.hold_time, r.timers.keepalive), (9, 3));

    let lab = ok(&format!(
        "[lab]\nname = \"ls\"\n[topology]\nkind = \"leaf-spine\"\nspines = 2\nleaves = 2\n\
         hosts_per_leaf = 1\n[routing]\nmode = \"bgp\"\n{}",
        doc_example("### External BGP neighbour")
    ));
    let x = &lab.fabric.externals[0];
    assert_eq!(lab.fabric.node(x.node).name, "spine0");
    assert_eq!(
        x.bgp,
        Some(ExternalPeer {
            addr: Ipv4Addr::new(192, 0, 2, 2),
            asn: Asn(65010)
        })
    );
}

#[test]
fn next_hops_are_spelled_out_in_small_fabrics_unless_asked() {
    use turbonet_topo::RoutingConfig;
    let lab = ok(&k4(""));
    assert_eq!(lab.routing.nexthop_compat, None);
    assert!(lab.routing.spells_out_next_hops(20));
    assert!(
        lab.routing
            .spells_out_next_hops(RoutingConfig::SPELLED_OUT_UP_TO)
    );
    assert!(
        !lab.routing
            .spells_out_next_hops(RoutingConfig::SPELLED_OUT_UP_TO + 1)
    );
    let lab = ok(&k4("[routing]\nnexthop_compat = false\n"));
    assert!(!lab.routing.spells_out_next_hops(20));
    let lab = ok(&k4("[routing]\nmode = \"bgp\"\nnexthop_compat = true\n"));
    assert!(lab.routing.spells_out_next_hops(1_000));
    let (l, _, msg, _) = one_error(&k4("[routing]\nnexthop_compat = \"no\"\n"));
    assert_eq!(l, 7);
    assert!(msg.contains("nexthop_compat"), "{msg}");
}
