//! The impairment keys of links: jitter shape, reordering, Gilbert-Elliott
//! loss, corruption, duplication, ECN, and the checks across keys.

mod common;

use turbonet_topo::units::{Delay, LossProb, QueueLimit, Rate};
use turbonet_topo::{JitterDistribution, LinkParams, Loss};

use common::{errors, ok};

const FAT_TREE: &str = "[lab]\nname = \"imp\"\n[topology]\nkind = \"fat-tree\"\nk = 2\n";

#[test]
fn every_key_at_every_level() {
    let lab = ok(&format!(
        r#"{FAT_TREE}
[links.default]
rate = "10gbit"
delay = "5us"
jitter = "1us"
jitter_distribution = "normal"
reorder = true
loss = {{ p = "1%", r = "25%" }}
corrupt = "0.01%"
duplicate = "1e-5"
queue = "200p"
ecn = "60p"

[links.edge-agg]
jitter_distribution = "paretonormal"
loss = {{ p = "0.5%", r = "10%", bad = "50%", good = "0.1%" }}
queue = "1MiB"
ecn = "30KiB"

[[links.override]]
link = "edge0-0--agg0-0"
reorder = false
loss = "0.1%"
"#
    ));
    let f = &lab.fabric;
    let get = |name: &str| &f.link_by_name(name).unwrap().params;
    let host = get("h0-0-0--edge0-0");
    assert_eq!(host.rate, Some(Rate::from_gbit(10)));
    assert_eq!(host.jitter, Some(Delay::from_micros(1)));
    assert_eq!(host.jitter_distribution, Some(JitterDistribution::Normal));
    assert_eq!(host.reorder, Some(true));
    assert_eq!(
        host.loss,
        Some(Loss::gilbert(LossProb(0.01), LossProb(0.25)))
    );
    assert_eq!(host.corrupt, Some(LossProb(1e-4)));
    assert_eq!(host.duplicate, Some(LossProb(1e-5)));
    assert_eq!(host.queue, Some(QueueLimit::Packets(200)));
    assert_eq!(host.ecn, Some(QueueLimit::Packets(60)));

    let fabric = get("edge1-0--agg1-0");
    assert_eq!(
        fabric.jitter_distribution,
        Some(JitterDistribution::ParetoNormal)
    );
    assert_eq!(
        fabric.loss,
        Some(Loss::GilbertElliott {
            p: LossProb(0.005),
            r: LossProb(0.1),
            bad: LossProb(0.5),
            good: LossProb(0.001),
        })
    );
    assert_eq!(fabric.ecn, Some(QueueLimit::Bytes(30 * 1024)));
    assert_eq!(fabric.reorder, Some(true));

    let over = get("edge0-0--agg0-0");
    assert_eq!(over.reorder, Some(false));
    assert_eq!(over.loss, Some(Loss::Bernoulli(LossProb(0.001))));
    assert_eq!(
        over.jitter_distribution,
        Some(JitterDistribution::ParetoNormal)
    );
}

#[test]
fn inline_custom_links_take_every_key() {
    let lab = ok(r#"
[lab]
name = "c"
[topology]
kind = "custom"
[[topology.nodes]]
name = "s1"
[[topology.nodes]]
name = "h1"
role = "host"
[[topology.links]]
a = "h1"
b = "s1"
rate = "1gbit"
ecn = "10p"
loss = { p = "2%", r = "50%" }
duplicate = "1%"
jitter = "3us"
"#);
    let p = &lab.fabric.links[0].params;
    assert_eq!(p.ecn, Some(QueueLimit::Packets(10)));
    assert_eq!(p.loss, Some(Loss::gilbert(LossProb(0.02), LossProb(0.5))));
    assert_eq!(p.duplicate, Some(LossProb(0.01)));
    // Jitter without delay is fine.
    assert_eq!(p.delay, None);
    assert!(p.has_impairments());
}

#[test]
fn has_impairments_counts_the_new_keys() {
    assert!(!LinkParams::default().has_impairments());
    for p in [
        LinkParams {
            corrupt: Some(LossProb(0.1)),
            ..LinkParams::default()
        },
        LinkParams {
            duplicate: Some(LossProb(0.1)),
            ..LinkParams::default()
        },
        LinkParams {
            ecn: Some(QueueLimit::Packets(5)),
            ..LinkParams::default()
        },
        LinkParams {
            loss: Some(Loss::gilbert(LossProb(0.1), LossProb(0.5))),
            ..LinkParams::default()
        },
    ] {
        assert!(p.has_impairments(), "{p:?}");
    }
    // Modifiers of jitter alone need no engine.
    let p = LinkParams {
        jitter_distribution: Some(JitterDistribution::Pareto),
        reorder: Some(true),
        ..LinkParams::default()
    };
    assert!(!p.has_impairments());
}

#[test]
fn loss_prints_and_parses_scenario_syntax() {
    let ge = Loss::GilbertElliott {
        p: LossProb(0.01),
        r: LossProb(0.25),
        bad: LossProb(1.0),
        good: LossProb(0.0),
    };
    assert_eq!(
        ge.to_string(),
        r#"{ p = "1%", r = "25%", bad = "100%", good = "0%" }"#
    );
    assert_eq!(ge.to_string().parse::<Loss>().unwrap(), ge);
    let b = Loss::Bernoulli(LossProb(1e-9));
    assert_eq!(b.to_string().parse::<Loss>().unwrap(), b);
    assert_eq!(
        "{ p = \"1%\", r = \"25%\" }".parse::<Loss>().unwrap(),
        Loss::gilbert(LossProb(0.01), LossProb(0.25))
    );
    assert!("{ p = \"1%\" }".parse::<Loss>().is_err());
    assert!(
        "{ p = \"1%\", r = \"2%\", q = \"1%\" }"
            .parse::<Loss>()
            .is_err()
    );
    assert!("abc".parse::<Loss>().is_err());

    // serde: a string for Bernoulli, a map for Gilbert-Elliott.
    let json = serde_json::to_string(&ge).unwrap();
    assert_eq!(json, r#"{"p":"1%","r":"25%","bad":"100%","good":"0%"}"#);
    assert_eq!(serde_json::from_str::<Loss>(&json).unwrap(), ge);
    let json = serde_json::to_string(&b).unwrap();
    assert_eq!(serde_json::from_str::<Loss>(&json).unwrap(), b);
    assert_eq!(serde_json::from_str::<Loss>(r#""1e-9""#).unwrap(), b);
    assert_eq!(
        serde_json::from_str::<Loss>("0.5").unwrap(),
        Loss::Bernoulli(LossProb(0.5))
    );
    assert_eq!(
        serde_json::from_str::<Loss>(r#"{"p":"1%","r":"25%"}"#).unwrap(),
        Loss::gilbert(LossProb(0.01), LossProb(0.25))
    );
    assert!(serde_json::from_str::<Loss>(r#"{"p":"1%"}"#).is_err());

    assert!((ge.mean() - 0.01 / 0.26).abs() < 1e-12);
    assert!(!ge.is_zero());
    assert!(Loss::gilbert(LossProb(0.0), LossProb(0.5)).is_zero());
}

#[test]
fn jitter_distributions_parse() {
    for d in JitterDistribution::ALL {
        assert_eq!(d.to_string().parse::<JitterDistribution>().unwrap(), d);
        assert_eq!(
            serde_json::from_str::<JitterDistribution>(&serde_json::to_string(&d).unwrap())
                .unwrap(),
            d
        );
    }
    assert_eq!(JitterDistribution::default(), JitterDistribution::Uniform);
}

#[test]
fn bad_values_are_located_with_help() {
    let e = errors(&format!(
        r#"{FAT_TREE}
[links.default]
rate = "1gbit"
jitter_distribution = "gaussian"
reorder = "yes"
corrupt = "200%"
duplicate = "-1%"
ecn = "5 apples"
loss = true
[links.edge-agg]
loss = {{ p = "1%", q = "2%" }}
[links.agg-core]
loss = {{ r = "2%", bad = "1.5" }}
"#
    ));
    let find = |needle: &str| {
        e.iter()
            .find(|x| x.2.contains(needle))
            .unwrap_or_else(|| panic!("no error with {needle:?} in {e:#?}"))
            .clone()
    };
    let d = find("unknown jitter distribution `gaussian`");
    assert_eq!((d.0, d.1), (9, 23));
    assert!(
        d.3.contains("valid distributions: uniform, normal, pareto, paretonormal"),
        "{d:?}"
    );
    let r = find("expected `true` or `false` for `reorder`");
    assert_eq!((r.0, r.1), (10, 11));
    let c = find("invalid `corrupt`");
    assert_eq!(c.0, 11);
    let dup = find("invalid `duplicate`");
    assert_eq!(dup.0, 12);
    let ecn = find("invalid `ecn`");
    assert_eq!(ecn.0, 13);
    let l = find("expected a probability or a table for `loss`, found boolean");
    assert!(l.3.contains("Gilbert-Elliott"), "{l:?}");
    let q = find("unknown key `q` in the Gilbert-Elliott `loss` table");
    assert_eq!((q.0, q.1), (16, 20));
    assert!(q.3.contains("valid keys: p, r, bad, good"), "{q:?}");
    let q = find("missing `r` in the Gilbert-Elliott `loss` table");
    assert_eq!(q.0, 16);
    let p = find("missing `p`");
    assert_eq!(p.0, 18);
    assert!(p.3.contains("good->bad"), "{p:?}");
    let bad = find("invalid `bad`");
    assert_eq!(bad.0, 18);
    assert!(bad.3.contains("did you mean `1.5%`?"), "{bad:?}");
}

#[test]
fn queue_and_ecn_need_a_rate() {
    let e = errors(&format!(
        r#"{FAT_TREE}
[links.default]
queue = "100p"
[links.edge-agg]
ecn = "10p"
"#
    ));
    assert_eq!(e.len(), 2, "{e:#?}");
    assert_eq!((e[0].0, e[0].1), (8, 9));
    assert_eq!(
        e[0].2,
        "`queue` is set but link `h0-0-0--edge0-0` (and 5 other links) has no `rate`"
    );
    assert!(e[0].3.contains("add e.g. `rate = \"10gbit\"`"), "{e:?}");
    assert_eq!((e[1].0, e[1].1), (10, 7));
    assert_eq!(
        e[1].2,
        "`ecn` is set but link `edge0-0--agg0-0` (and 1 other link) has no `rate`"
    );

    // A rate from any level counts: default rate, override queue and ECN.
    ok(&format!(
        r#"{FAT_TREE}
[links.agg-core]
rate = "100gbit"
[[links.override]]
link = "agg0-0--core0"
queue = "10p"
ecn = "2p"
"#
    ));
    // An override cannot hide the problem on the other links of a class.
    let e = errors(&format!(
        r#"{FAT_TREE}
[links.agg-core]
queue = "10p"
[[links.override]]
link = "agg0-0--core0"
rate = "1gbit"
"#
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(
        e[0].2,
        "`queue` is set but link `agg1-0--core0` has no `rate`"
    );
}

#[test]
fn ecn_above_the_queue_is_an_error() {
    let e = errors(&format!(
        r#"{FAT_TREE}
[links.default]
rate = "1gbit"
queue = "50p"
[links.edge-agg]
ecn = "60p"
[links.agg-core]
ecn = "2000p"
queue = "64KiB"
"#
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!((e[0].0, e[0].1), (11, 7));
    assert!(
        e[0].2.starts_with(
            "`ecn` threshold 60p is above the queue limit 50p of link `edge0-0--agg0-0`"
        ),
        "{e:?}"
    );
    assert!(e[0].3.contains("`queue = \"50p\"` at line 9"), "{e:?}");

    // Against the default queue of 1000 packets.
    let e = errors(&format!(
        "{FAT_TREE}[links.default]\nrate = \"1gbit\"\necn = \"1001p\"\n"
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].3.contains("the default queue of 1000p"), "{e:?}");
    // Equal is fine (marks only a full queue), and bytes vs packets are
    // not compared.
    ok(&format!(
        "{FAT_TREE}[links.default]\nrate = \"1gbit\"\necn = \"1000p\"\n"
    ));
    ok(&format!(
        "{FAT_TREE}[links.default]\nrate = \"1gbit\"\necn = \"10MiB\"\n"
    ));
}
