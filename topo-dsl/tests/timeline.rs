//! `[[timeline]]`: events after the fabric is ready, and the link
//! parameter rules they share with `[links]` and `turbonet link set`.

mod common;

use turbonet_topo::units::{Delay, LossProb, QueueLimit, Rate};
use turbonet_topo::{Action, Event, EventTarget, LinkId, LinkParams, Loss, NodeId, ParamProblem};

use common::{errors, ok};

/// A k=4 fat-tree whose agg-core links have a rate and a 100-packet queue.
const K4: &str = r#"[lab]
name = "tl"
[topology]
kind = "fat-tree"
k = 4
[links.agg-core]
rate = "10gbit"
queue = "100p"
"#;

fn with(events: &str) -> String {
    format!("{K4}{events}")
}

fn link(lab: &turbonet_topo::Lab, name: &str) -> LinkId {
    lab.fabric.link_by_name(name).unwrap().id
}

fn node(lab: &turbonet_topo::Lab, name: &str) -> NodeId {
    lab.fabric.node_by_name(name).unwrap().id
}

#[test]
fn valid_timeline_is_sorted_with_targets_and_patches() {
    let lab = ok(&with(
        r#"
[[timeline]]
at = "10s"
action = "flap"
link = "agg0-0--core0"
period = "2s"
count = 3

[[timeline]]
at = "5s"
action = "set"
link = "edge0-0--agg0-0"
delay = "10ms"
loss = "1%"

[[timeline]]
at = "5s"
action = "fail"
node = "agg0-1"

[[timeline]]
at = "0"
action = "fail"
link = "edge0-0--agg0-0"

[[timeline]]
at = "5s"
action = "restore"
link = "edge0-0--agg0-0"

[[timeline]]
at = "1.5s"
action = "set"
link = "agg0-0--core0"
ecn = "20p"
loss = { p = "1%", r = "25%" }
jitter = "1us"
jitter_distribution = "normal"
reorder = true

[[timeline]]
at = "20s"
action = "reset"
link = "agg0-0--core0"

[[timeline]]
at = "30s"
action = "flap"
link = "agg0-1--core2"
period = "100ms"

[[timeline]]
at = "31s"
action = "restore"
node = "agg0-1"
"#,
    ));
    let e00 = link(&lab, "edge0-0--agg0-0");
    let ac = link(&lab, "agg0-0--core0");
    let at = |s: &str| s.parse::<Delay>().unwrap();
    let expected = vec![
        Event {
            name: None,
            at: Delay::ZERO,
            action: Action::Fail(EventTarget::Link(e00)),
        },
        Event {
            name: None,
            at: at("1.5s"),
            action: Action::Set {
                link: ac,
                params: LinkParams {
                    ecn: Some(QueueLimit::Packets(20)),
                    loss: Some(Loss::gilbert(LossProb(0.01), LossProb(0.25))),
                    jitter: Some(Delay::from_micros(1)),
                    jitter_distribution: Some(turbonet_topo::JitterDistribution::Normal),
                    reorder: Some(true),
                    ..LinkParams::default()
                },
            },
        },
        // Three events at 5s, in file order.
        Event {
            name: None,
            at: at("5s"),
            action: Action::Set {
                link: e00,
                params: LinkParams {
                    delay: Some(Delay::from_millis(10)),
                    loss: Some(Loss::Bernoulli(LossProb(0.01))),
                    ..LinkParams::default()
                },
            },
        },
        Event {
            name: None,
            at: at("5s"),
            action: Action::Fail(EventTarget::Node(node(&lab, "agg0-1"))),
        },
        Event {
            name: None,
            at: at("5s"),
            action: Action::Restore(EventTarget::Link(e00)),
        },
        Event {
            name: None,
            at: at("10s"),
            action: Action::Flap {
                link: ac,
                period: Delay::from_secs(2),
                count: 3,
            },
        },
        Event {
            name: None,
            at: at("20s"),
            action: Action::Reset { link: ac },
        },
        Event {
            name: None,
            at: at("30s"),
            action: Action::Flap {
                link: link(&lab, "agg0-1--core2"),
                period: Delay::from_millis(100),
                count: 1,
            },
        },
        Event {
            name: None,
            at: at("31s"),
            action: Action::Restore(EventTarget::Node(node(&lab, "agg0-1"))),
        },
    ];
    assert_eq!(lab.timeline, expected);

    // Log lines.
    let lines: Vec<String> = lab
        .timeline
        .iter()
        .map(|e| format!("{} {}", e.at, e.action.display(&lab.fabric)))
        .collect();
    assert_eq!(
        lines,
        [
            "0 fail link edge0-0--agg0-0",
            "1.5s set agg0-0--core0 jitter=1us jitter_distribution=normal reorder=true \
             loss={ p = \"1%\", r = \"25%\", bad = \"100%\", good = \"0%\" } ecn=20p",
            "5s set edge0-0--agg0-0 delay=10ms loss=1%",
            "5s fail node agg0-1",
            "5s restore link edge0-0--agg0-0",
            "10s flap agg0-0--core0 period 2s x3",
            "20s reset agg0-0--core0",
            "30s flap agg0-1--core2 period 100ms x1",
            "31s restore node agg0-1",
        ]
    );
    // Without the fabric, ids stand for names.
    assert_eq!(
        lab.timeline[0].action.to_string(),
        format!("fail link #{}", e00.0)
    );
    assert_eq!(lab.timeline[0].action.name(), "fail");
    assert_eq!(lab.timeline[5].action.target(), EventTarget::Link(ac));

    // JSON: the action's fields sit next to `at`, values in scenario syntax.
    let json = serde_json::to_value(&lab.timeline[5]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"at": "10s", "action": "flap", "link": ac.0, "period": "2s", "count": 3})
    );
    let json = serde_json::to_value(&lab.timeline[3]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"at": "5s", "action": "fail", "node": node(&lab, "agg0-1").0})
    );
    let json = serde_json::to_value(&lab.timeline[2]).unwrap();
    assert_eq!(json["action"], "set");
    assert_eq!(json["params"]["delay"], "10ms");
    assert_eq!(json["params"]["loss"], "1%");
}

#[test]
fn no_timeline_is_empty() {
    assert!(ok(K4).timeline.is_empty());
}

#[test]
fn set_is_checked_against_the_link_at_that_time() {
    // `queue` needs a rate: edge-agg links have none.
    let e = errors(&with(
        "[[timeline]]\nat = \"1s\"\naction = \"set\"\nlink = \"edge0-0--agg0-0\"\nqueue = \"10p\"\n",
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!((e[0].0, e[0].1), (13, 9));
    assert_eq!(
        e[0].2,
        "`queue` is set at 1s but link `edge0-0--agg0-0` has no `rate`"
    );
    assert!(e[0].3.contains("add e.g. `rate = \"10gbit\"`"), "{e:?}");

    // ECN above the scenario's queue of 100p.
    let e = errors(&with(
        "[[timeline]]\nat = \"1s\"\naction = \"set\"\nlink = \"agg0-0--core0\"\necn = \"200p\"\n",
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(
        e[0].2,
        "`ecn` threshold 200p is above the queue limit 100p of link `agg0-0--core0` at 1s"
    );
    assert!(
        e[0].3
            .contains("the link's `queue = \"100p\"` in `[links]`"),
        "{e:?}"
    );
    // ... or by an earlier `set`.
    let e = errors(&with(
        r#"[[timeline]]
at = "1s"
action = "set"
link = "agg0-0--core0"
queue = "10p"
[[timeline]]
at = "2s"
action = "set"
link = "agg0-0--core0"
ecn = "50p"
"#,
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!((e[0].0, e[0].1), (18, 7));
    assert!(e[0].3.contains("`queue = \"10p\"` set at 1s"), "{e:?}");

    // Lowering the queue under an ECN threshold set earlier points at `queue`.
    let e = errors(&with(
        r#"[[timeline]]
at = "1s"
action = "set"
link = "agg0-0--core0"
ecn = "50p"
[[timeline]]
at = "2s"
action = "set"
link = "agg0-0--core0"
queue = "20p"
"#,
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!((e[0].0, e[0].1), (18, 9));
    assert!(e[0].3.contains("`queue = \"20p\"` in this event"), "{e:?}");

    // A rate set earlier carries over to a later `set`, until a `reset`.
    ok(&with(
        r#"[[timeline]]
at = "1s"
action = "set"
link = "edge0-0--agg0-0"
rate = "1gbit"
[[timeline]]
at = "2s"
action = "set"
link = "edge0-0--agg0-0"
queue = "10p"
ecn = "2p"
"#,
    ));
    let e = errors(&with(
        r#"[[timeline]]
at = "1s"
action = "set"
link = "edge0-0--agg0-0"
rate = "1gbit"
[[timeline]]
at = "2s"
action = "reset"
link = "edge0-0--agg0-0"
[[timeline]]
at = "3s"
action = "set"
link = "edge0-0--agg0-0"
ecn = "2p"
"#,
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(
        e[0].2,
        "`ecn` is set at 3s but link `edge0-0--agg0-0` has no `rate`"
    );
    // Time order, not file order: the `set` of the rate comes later in the
    // file but earlier in time.
    ok(&with(
        r#"[[timeline]]
at = "2s"
action = "set"
link = "edge0-0--agg0-0"
queue = "10p"
[[timeline]]
at = "1s"
action = "set"
link = "edge0-0--agg0-0"
rate = "1gbit"
"#,
    ));
    // Against the default queue of 1000 packets.
    let e = errors(&with(
        "[[timeline]]\nat = \"1s\"\naction = \"set\"\nlink = \"edge0-0--agg0-0\"\nrate = \"1gbit\"\necn = \"2000p\"\n",
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].3.contains("the default queue of 1000p"), "{e:?}");
}

#[test]
fn event_errors_are_located_with_help() {
    let text = with(
        r#"[[timeline]]
at = "1s"
action = "fial"
link = "edge0-0--agg0-0"
[[timeline]]
action = "fail"
link = "edge0-0--agg9-0"
[[timeline]]
at = "1s"
action = "restore"
node = "agg0-9"
[[timeline]]
at = "1s"
action = "fail"
[[timeline]]
at = "1s"
action = "fail"
link = "edge0-0--agg0-0"
node = "agg0-0"
[[timeline]]
at = "1s"
action = "reset"
node = "agg0-0"
[[timeline]]
at = "1s"
action = "fail"
link = "edge0-0--agg0-0"
delay = "1ms"
loss = "1%"
[[timeline]]
at = "1s"
action = "set"
link = "edge0-0--agg0-0"
[[timeline]]
at = "1s"
action = "set"
link = "edge0-0--agg0-0"
mtu = 9000
[[timeline]]
at = "1s"
action = "flap"
link = "edge0-0--agg0-0"
period = "0"
count = 0
[[timeline]]
at = "1s"
action = "flap"
link = "edge0-0--agg0-0"
[[timeline]]
at = "1s"
action = "fail"
link = "edge0-0--agg0-0"
period = "2s"
[[timeline]]
at = "5"
action = "fail"
link = "edge0-0--agg0-0"
when = "later"
[[timeline]]
at = "1s"
action = "flap"
link = "edge0-0--agg0-0"
period = "2s"
count = "3"
[[timeline]]
at = "1s"
action = "set"
link = "agg0-0--edge0-0"
delay = "1msec"
"#,
    );
    let e = errors(&text);
    let msgs: Vec<(usize, &str)> = e.iter().map(|x| (x.0, x.2.as_str())).collect();
    assert_eq!(
        msgs,
        [
            (11, "unknown action `fial`"),
            (13, "missing `at` in `[[timeline]]`"),
            (15, "no link named `edge0-0--agg9-0`"),
            (19, "no node named `agg0-9`"),
            (20, "missing `link` or `node` in `[[timeline]]`"),
            (27, "an event acts on a link or a node, not both"),
            (31, "`reset` acts on links, not nodes"),
            (
                36,
                "`delay`, `loss` are not used by `fail`: only `set` takes link parameters"
            ),
            (40, "`set` without link parameters"),
            (
                46,
                "`mtu` cannot be changed at run time: the MTU is set on both interfaces when the fabric is built; set it in `[links]` instead"
            ),
            (51, "the `period` of a flap must be greater than zero"),
            (52, "`count` must be at least 1, found 0"),
            (55, "`flap` without a `period`"),
            (61, "`period` is not used by `fail`: only `flap` takes it"),
            (63, "invalid `at`: delay `5` has no unit"),
            (66, "unknown key `when` in `[[timeline]]`"),
            (72, "expected an integer for `count`, found string"),
            (76, "no link named `agg0-0--edge0-0`"),
            (77, "invalid `delay`: unknown unit `msec` in delay `1msec`"),
        ]
    );
    let help = |line: usize| e.iter().find(|x| x.0 == line).unwrap().3.as_str();
    assert_eq!(
        help(11),
        "did you mean `fail`? valid actions: set, reset, fail, restore, flap"
    );
    assert!(
        help(15).contains("close names: `edge0-0--agg0-0`"),
        "{e:#?}"
    );
    assert!(
        help(19).starts_with("close names: `agg0-0`, `agg0-1`"),
        "{e:#?}"
    );
    assert!(help(31).contains("only `fail` and `restore` take a `node`"));
    assert!(help(40).contains("valid keys: rate, delay, jitter"));
    assert!(!help(40).contains("mtu"));
    assert!(help(66).contains("valid keys: name, at, action, link, node, period, count, rate"));
    assert_eq!(help(72), "write it without quotes: `count = 3`");
    assert!(help(76).starts_with("did you mean `edge0-0--agg0-0`?"));
}

#[test]
fn timeline_must_be_an_array_of_tables() {
    let e = errors(&format!("timeline = \"soon\"\n{K4}"));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(
        e[0].2,
        "`timeline` must be an array of tables, found string"
    );
}

#[test]
fn merged_replaces_only_the_keys_the_patch_sets() {
    let base = LinkParams {
        rate: Some(Rate::from_gbit(10)),
        delay: Some(Delay::from_micros(5)),
        queue: Some(QueueLimit::Packets(100)),
        mtu: Some(turbonet_topo::units::Mtu(9000)),
        ..LinkParams::default()
    };
    let patch = LinkParams {
        delay: Some(Delay::from_millis(10)),
        loss: Some(Loss::Bernoulli(LossProb(0.001))),
        ..LinkParams::default()
    };
    let m = base.merged(&patch);
    assert_eq!(
        m,
        LinkParams {
            rate: Some(Rate::from_gbit(10)),
            delay: Some(Delay::from_millis(10)),
            loss: Some(Loss::Bernoulli(LossProb(0.001))),
            queue: Some(QueueLimit::Packets(100)),
            mtu: Some(turbonet_topo::units::Mtu(9000)),
            ..LinkParams::default()
        }
    );
    // An empty patch changes nothing; merging is not commutative.
    assert_eq!(base.merged(&LinkParams::default()), base);
    assert_eq!(LinkParams::default().merged(&base), base);
    assert_eq!(patch.merged(&base).delay, base.delay);
    assert!(LinkParams::default().is_empty());
    assert!(!patch.is_empty());
    assert_eq!(
        m.to_string(),
        "rate=10gbit delay=10ms loss=0.1% queue=100p mtu=9000"
    );
    assert_eq!(LinkParams::default().to_string(), "");
}

#[test]
fn check_names_every_broken_rule() {
    let rate = Some(Rate::from_gbit(1));
    let p = |n| Some(QueueLimit::Packets(n));
    assert_eq!(LinkParams::default().check(), Ok(()));
    assert_eq!(
        LinkParams {
            rate,
            queue: p(100),
            ecn: p(100),
            ..LinkParams::default()
        }
        .check(),
        Ok(())
    );
    // Both rules without a rate, one message each.
    let no_rate = LinkParams {
        queue: p(100),
        ecn: p(20),
        ..LinkParams::default()
    };
    assert_eq!(
        no_rate.problems(),
        [ParamProblem::QueueWithoutRate, ParamProblem::EcnWithoutRate]
    );
    let msgs = no_rate.check().unwrap_err();
    assert_eq!(msgs.len(), 2);
    assert!(
        msgs[0].starts_with("`queue` is set but `rate` is not"),
        "{msgs:?}"
    );
    assert!(msgs[0].contains("set a `rate`"), "{msgs:?}");
    assert!(
        msgs[1].starts_with("`ecn` is set but `rate` is not"),
        "{msgs:?}"
    );
    // ECN above the queue, or above the default queue of 1000 packets.
    let above = LinkParams {
        rate,
        queue: p(50),
        ecn: p(60),
        ..LinkParams::default()
    };
    assert_eq!(
        above.check().unwrap_err(),
        [
            "`ecn` threshold 60p is above the queue limit 50p: nothing would ever be marked; \
          set `ecn` to at most 50p (e.g. a fifth of it) or raise `queue`"
        ]
    );
    let default_queue = LinkParams {
        rate,
        ecn: p(1001),
        ..LinkParams::default()
    };
    assert_eq!(
        default_queue.problems(),
        [ParamProblem::EcnAboveQueue {
            ecn: QueueLimit::Packets(1001),
            queue: LinkParams::DEFAULT_QUEUE,
            default_queue: true,
        }]
    );
    assert!(
        default_queue.check().unwrap_err()[0].contains("the default queue limit 1000p"),
        "{:?}",
        default_queue.check()
    );
    // Packets and bytes are not compared.
    assert_eq!(
        LinkParams {
            rate,
            queue: Some(QueueLimit::Bytes(1500)),
            ecn: p(5000),
            ..LinkParams::default()
        }
        .check(),
        Ok(())
    );
    assert_eq!(ParamProblem::QueueWithoutRate.key(), "queue");
    assert_eq!(ParamProblem::EcnWithoutRate.key(), "ecn");
}

/// The example of `docs/scenarios.md` parses on a k=4 fat-tree.
#[test]
fn documented_example_parses() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/scenarios.md"),
    )
    .unwrap();
    let section = &doc[doc.find("## `[[timeline]]`").unwrap()..];
    let start = section.find("```toml\n").unwrap() + "```toml\n".len();
    let example = &section[start..start + section[start..].find("```").unwrap()];
    let lab = ok(&with(example));
    let lines: Vec<String> = lab
        .timeline
        .iter()
        .map(|e| format!("{} {}", e.at, e.action.display(&lab.fabric)))
        .collect();
    assert_eq!(
        lines,
        [
            "5s set edge0-0--agg0-0 delay=10ms loss=1%",
            "8s fail node agg0-1",
            "10s flap agg0-0--core0 period 2s x3",
            "20s reset edge0-0--agg0-0",
            "20s restore node agg0-1",
        ]
    );
}
