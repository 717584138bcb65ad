//! `[[workload]]`: what runs on the fabric once it is ready. Every
//! workload has a `kind` (`tcp`, `udp`, `collective`, `exec`) whose keys
//! it may use, and runs over a job (`job = "train"`), hosts of its own
//! (the keys of a `[[job]]`), or every host that is not a backup.

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::jobs::{self, Jobs, RawHosts};
use super::reader::{
    Keys, Keyword, array_items, fields_of, key_span, keyword, missing, read_table, unit,
};
use crate::diag::{Diags, choices_help};
use crate::experiment::*;
use crate::model::Fabric;
use crate::units::{Bytes, Delay, Rate};

/// A list of node names, each with its span.
type Names = Vec<Spanned<String>>;

/// `[[workload]]`, every kind's keys (checked against the kind after).
#[derive(Debug, Deserialize)]
struct RawWorkload {
    name: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    job: Option<Spanned<String>>,
    hosts: Option<Spanned<Vec<Spanned<String>>>>,
    segment: Option<Spanned<u32>>,
    rail: Option<Spanned<u32>>,
    count: Option<Spanned<u32>>,
    backup: Option<Spanned<bool>>,
    start: Option<Spanned<toml::Value>>,
    // tcp, udp
    pattern: Option<Spanned<String>>,
    to: Option<Spanned<String>>,
    pairs: Option<Spanned<Vec<Spanned<Names>>>>,
    flows: Option<Spanned<u32>>,
    arrivals: Option<Spanned<String>>,
    per_second: Option<Spanned<f64>>,
    bytes: Option<Spanned<toml::Value>>,
    duration: Option<Spanned<toml::Value>>,
    congestion: Option<Spanned<String>>,
    rate: Option<Spanned<toml::Value>>,
    size: Option<Spanned<toml::Value>>,
    pacing: Option<Spanned<String>>,
    load: Option<Spanned<toml::Value>>,
    on: Option<Spanned<toml::Value>>,
    off: Option<Spanned<toml::Value>>,
    periods: Option<Spanned<String>>,
    // collective
    op: Option<Spanned<String>>,
    algorithm: Option<Spanned<String>>,
    sizes: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    iterations: Option<Spanned<u32>>,
    warmup: Option<Spanned<u32>>,
    gap: Option<Spanned<toml::Value>>,
    root: Option<Spanned<u32>>,
    skew: Option<Spanned<f64>>,
    // exec
    command: Option<Spanned<Vec<String>>>,
    // flood
    target: Option<Spanned<String>>,
    protocol: Option<Spanned<String>>,
    pps: Option<Spanned<i64>>,
    spoof: Option<Spanned<String>>,
    port: Option<Spanned<i64>>,
}

const WHAT: &str = "`[[workload]]`";

/// The kinds, and the keys each takes besides the common ones.
const KINDS: &[(&str, &[&str])] = &[
    (
        "tcp",
        &[
            "pattern",
            "to",
            "pairs",
            "flows",
            "arrivals",
            "per_second",
            "bytes",
            "duration",
            "congestion",
            "on",
            "off",
            "periods",
        ],
    ),
    (
        "udp",
        &[
            "pattern",
            "to",
            "pairs",
            "flows",
            "arrivals",
            "per_second",
            "rate",
            "size",
            "duration",
            "pacing",
            "load",
            "on",
            "off",
            "periods",
        ],
    ),
    (
        "collective",
        &[
            "op",
            "algorithm",
            "size",
            "sizes",
            "iterations",
            "warmup",
            "gap",
            "root",
            "skew",
        ],
    ),
    ("exec", &["command"]),
    (
        "flood",
        &[
            "target", "protocol", "pps", "spoof", "port", "size", "duration",
        ],
    ),
];

/// Keys every kind takes.
const COMMON: &[&str] = &[
    "name", "kind", "job", "hosts", "segment", "rail", "count", "backup", "start",
];

/// Congestion control algorithms a flow may ask for (those Linux ships;
/// the lab says at run time when the kernel lacks one).
const CONGESTION: &[&str] = &["cubic", "reno", "bbr", "dctcp", "vegas", "htcp"];

/// Reads `[[workload]]` (`v`, if present) over `jobs`. The scenario's
/// `seed` seeds each workload (mixed with its name). Without a fabric (it
/// had errors) nothing is resolved. Returns the valid workloads and every
/// name declared (an expectation naming an invalid one is not reported
/// again).
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&Fabric>,
    jobs: &Jobs,
    seed: u64,
) -> (Vec<Workload>, BTreeSet<String>) {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let Some(v) = v else {
        return (out, seen);
    };
    let Some(items) = array_items(d, v, "`workload`", "[[workload]]") else {
        return (out, seen);
    };
    for item in items {
        if let Some(w) = read_one(d, item, fabric, jobs, seed, &mut seen) {
            out.push(w);
        }
    }
    (out, seen)
}

fn read_one(
    d: &mut Diags<'_>,
    item: &Spanned<DeValue<'_>>,
    fabric: Option<&Fabric>,
    jobs: &Jobs,
    seed: u64,
    seen: &mut BTreeSet<String>,
) -> Option<Workload> {
    let s = read_table::<RawWorkload>(d, item, WHAT, Keys::new(fields_of::<RawWorkload>()))?;
    let span = s.span.clone();
    let mut w = s.raw;
    let before = d.count();

    let name = match &w.name {
        None => {
            missing(d, span.clone(), "name", WHAT)
                .label("a workload needs a name")
                .help("add e.g. `name = \"ring\"`: reports and expectations name it");
            None
        }
        Some(n) if !seen.insert(n.get_ref().clone()) => {
            d.error(
                Some(n.span()),
                format!("a workload named `{}` exists already", n.get_ref()),
            )
            .label("duplicate name")
            .help("workload names are unique: rename this one");
            None
        }
        Some(n) => Some(n.get_ref().clone()),
    };

    // kind, and the keys it takes
    let kind = match &w.kind {
        None => {
            let names: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
            missing(d, span.clone(), "kind", WHAT)
                .label("what runs?")
                .help(format!(
                    "add e.g. `kind = \"collective\"`; kinds: {}",
                    names.join(", ")
                ));
            None
        }
        Some(k) => {
            let kinds: Vec<(&str, &str)> = KINDS.iter().map(|(k, _)| (*k, *k)).collect();
            let kw = Keyword {
                what: "workload kind",
                short: "kind",
                plural: "kinds",
            };
            keyword(d, k.get_ref(), k.span(), &kinds, kw)
        }
    };
    if let Some(kind) = kind {
        let own = KINDS
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(&[][..], |k| k.1);
        for key in KINDS.iter().flat_map(|(_, keys)| keys.iter()) {
            if own.contains(key) || COMMON.contains(key) {
                continue;
            }
            if let Some(at) = key_span(item, key) {
                let mut valid: Vec<&str> = COMMON.to_vec();
                valid.extend_from_slice(own);
                d.error(
                    Some(at),
                    format!("`{key}` is not a key of `{kind}` workloads"),
                )
                .label(format!("not for `{kind}`"))
                .help(format!("valid keys: {}", valid.join(", ")));
            }
        }
    }

    let start = unit::<Delay>(d, &w.start, "start").unwrap_or(Delay::ZERO);

    // The job: named, inline, or every host.
    let inline = RawHosts {
        hosts: w.hosts.take(),
        segment: w.segment.take(),
        rail: w.rail.take(),
        count: w.count.take(),
        backup: w.backup.take(),
    };
    let has_inline = !inline.is_empty();
    let (job, ranks) = match (&w.job, fabric) {
        (Some(j), _) if has_inline => {
            d.error(
                Some(j.span()),
                "a workload runs over a `job` or hosts of its own, not both",
            )
            .label("and hosts too")
            .help("remove `job`, or the host keys (hosts, segment, rail, count, backup)");
            (None, None)
        }
        (Some(j), Some(_)) => match jobs.valid.iter().find(|job| job.name == *j.get_ref()) {
            Some(job) => (Some(job.name.clone()), Some(job.ranks.clone())),
            // Invalid, and reported.
            None if jobs.names.contains(j.get_ref()) => (None, None),
            None => {
                let names: Vec<&str> = jobs.names.iter().map(String::as_str).collect();
                let help = if names.is_empty() {
                    "no `[[job]]` is declared: add one, or list the workload's `hosts`".to_owned()
                } else {
                    choices_help(j.get_ref(), "jobs", &names)
                };
                d.error(Some(j.span()), format!("no job named `{}`", j.get_ref()))
                    .label("unknown job")
                    .help(help);
                (None, None)
            }
        },
        (None, Some(f)) => (
            name.clone(),
            // A flood may come from one host; everything else is between
            // hosts.
            jobs::ranks(
                d,
                &inline,
                f,
                span.clone(),
                "a workload",
                if kind == Some("flood") { 1 } else { 2 },
            ),
        ),
        (_, None) => (None, None),
    };

    let kind = match kind? {
        "tcp" | "udp" => flows(d, &w, kind?, ranks.as_deref(), fabric, &span),
        "collective" => collective(d, &w, ranks.as_ref().map(Vec::len), &span),
        "flood" => flood(d, &w, fabric, &span),
        _ => match &w.command {
            Some(c) if c.get_ref().is_empty() => {
                d.error(Some(c.span()), "`command` is empty")
                    .label("nothing to run")
                    .help("e.g. `command = [\"sh\", \"-c\", \"echo $RANK of $WORLD_SIZE\"]`");
                None
            }
            Some(c) => Some(WorkloadKind::Exec {
                command: c.get_ref().clone(),
            }),
            None => {
                missing(d, span.clone(), "command", WHAT)
                    .label("run what?")
                    .help("add e.g. `command = [\"sh\", \"-c\", \"echo $RANK of $WORLD_SIZE\"]`");
                None
            }
        },
    };
    if d.count() != before {
        return None;
    }
    let name = name?;
    Some(Workload {
        seed: crate::seed::for_name(seed, &format!("workload/{name}")),
        name,
        job: job?,
        ranks: ranks?,
        start,
        graded: false,
        kind: kind?,
    })
}

/// The keys of a `tcp` or `udp` workload.
fn flows(
    d: &mut Diags<'_>,
    w: &RawWorkload,
    kind: &str,
    ranks: Option<&[Rank]>,
    fabric: Option<&Fabric>,
    span: &Range<usize>,
) -> Option<WorkloadKind> {
    let index_of = |d: &mut Diags<'_>, name: &Spanned<String>| -> Option<usize> {
        let (ranks, fabric) = (ranks?, fabric?);
        let found = ranks
            .iter()
            .position(|r| fabric.node(r.host).name == *name.get_ref());
        if found.is_none() {
            let names: Vec<&str> = ranks
                .iter()
                .map(|r| fabric.node(r.host).name.as_str())
                .collect();
            d.error(
                Some(name.span()),
                format!("`{}` is not one of the workload's hosts", name.get_ref()),
            )
            .label("not a host of this workload")
            .help(choices_help(name.get_ref(), "hosts", &names));
        }
        found
    };
    let pattern_name = w.pattern.as_ref().map_or("permutation", |p| p.get_ref());
    let pattern_span = w.pattern.as_ref().map_or(span.clone(), Spanned::span);
    let pattern = match pattern_name {
        "permutation" => Some(Pattern::Permutation),
        "all-to-all" => Some(Pattern::AllToAll),
        "incast" => match &w.to {
            Some(to) => index_of(d, to).map(|to| Pattern::Incast { to }),
            None => {
                d.error(Some(pattern_span), "an `incast` needs its receiver: `to`")
                    .label("into which host?")
                    .help("add e.g. `to = \"h0-0\"`: every other host sends to it");
                None
            }
        },
        "random" => {
            match &w.flows {
                Some(n) if *n.get_ref() > 0 => Some(Pattern::Random {
                    count: *n.get_ref() as usize,
                }),
                _ => {
                    d.error(Some(pattern_span), "a `random` pattern needs `flows` (at least 1)")
                    .label("how many flows?")
                    .help("add e.g. `flows = 16`: that many pairs of distinct hosts, drawn from the seed");
                    None
                }
            }
        }
        "pairs" => match &w.pairs {
            Some(pairs) => {
                let mut out = Vec::new();
                for pair in pairs.get_ref() {
                    let [a, b] = pair.get_ref().as_slice() else {
                        d.error(Some(pair.span()), "a pair is two hosts, sender first")
                            .label("not a pair")
                            .help("e.g. `pairs = [[\"h0-0\", \"h1-0\"]]`");
                        continue;
                    };
                    if a.get_ref() == b.get_ref() {
                        d.error(Some(pair.span()), "a host cannot send to itself")
                            .label("same host twice")
                            .help("name two different hosts");
                        continue;
                    }
                    if let (Some(a), Some(b)) = (index_of(d, a), index_of(d, b)) {
                        out.push((a, b));
                    }
                }
                Some(Pattern::Pairs(out))
            }
            None => {
                d.error(Some(pattern_span), "a `pairs` pattern needs `pairs`")
                    .label("which pairs?")
                    .help("add e.g. `pairs = [[\"h0-0\", \"h1-0\"], [\"h1-0\", \"h0-0\"]]`");
                None
            }
        },
        other => {
            d.error(Some(pattern_span), format!("unknown pattern `{other}`"))
                .label("unknown pattern")
                .help(choices_help(other, "patterns", &Pattern::NAMES));
            None
        }
    };
    for (key, v, only) in [
        ("to", w.to.as_ref().map(Spanned::span), "incast"),
        ("pairs", w.pairs.as_ref().map(Spanned::span), "pairs"),
        ("flows", w.flows.as_ref().map(Spanned::span), "random"),
    ] {
        if let Some(at) = v
            && pattern_name != only
        {
            d.error(
                Some(at),
                format!("`{key}` is for the `{only}` pattern, this one is `{pattern_name}`"),
            )
            .label(format!("only for `{only}`"))
            .help(format!("remove `{key}`, or set `pattern = \"{only}\"`"));
        }
    }
    let arrivals = match w
        .arrivals
        .as_ref()
        .map(|a| (a.get_ref().as_str(), a.span()))
    {
        None | Some(("together", _)) => {
            if let Some(p) = &w.per_second {
                d.error(
                    Some(p.span()),
                    "`per_second` is the rate of `arrivals = \"poisson\"`",
                )
                .label("flows start together")
                .help("add `arrivals = \"poisson\"`, or remove `per_second`");
            }
            Some(Arrivals::At(Duration::ZERO))
        }
        Some(("poisson", at)) => match &w.per_second {
            Some(p) if p.get_ref().is_finite() && *p.get_ref() > 0.0 => Some(Arrivals::Poisson {
                per_second: *p.get_ref(),
            }),
            Some(p) => {
                d.error(Some(p.span()), "`per_second` must be a positive number")
                    .label("not a rate")
                    .help("e.g. `per_second = 20.0`: flows per second on average");
                None
            }
            None => {
                d.error(Some(at), "Poisson arrivals need their rate: `per_second`")
                    .label("how often?")
                    .help("add e.g. `per_second = 20.0`: flows per second on average");
                None
            }
        },
        Some((other, at)) => {
            d.error(Some(at), format!("unknown arrivals `{other}`"))
                .label("unknown arrivals")
                .help(choices_help(other, "arrivals", &["together", "poisson"]));
            None
        }
    };
    let duration = unit::<Delay>(d, &w.duration, "duration");
    let on_off = on_off(d, w);
    if kind == "tcp" {
        let bytes = unit::<Bytes>(d, &w.bytes, "bytes");
        let amount = match (bytes, duration, &w.bytes, &w.duration) {
            (_, _, Some(_), Some(t)) => {
                d.error(
                    Some(t.span()),
                    "a TCP flow sends `bytes` or for a `duration`, not both",
                )
                .label("and `bytes`")
                .help("remove one of them");
                None
            }
            (Some(b), _, _, _) => Some(Amount::Bytes(b)),
            (_, Some(t), _, _) => Some(Amount::For(t)),
            (_, _, None, None) => {
                d.error(
                    Some(span.clone()),
                    "a TCP workload needs `bytes` or `duration`",
                )
                .label("how much?")
                .help("add e.g. `bytes = \"64MiB\"` (each flow completes) or `duration = \"5s\"`");
                None
            }
            _ => None,
        };
        let congestion = match &w.congestion {
            Some(c) if !CONGESTION.contains(&c.get_ref().as_str()) => {
                d.error(
                    Some(c.span()),
                    format!("unknown congestion control `{}`", c.get_ref()),
                )
                .label("unknown algorithm")
                .help(choices_help(c.get_ref(), "algorithms", CONGESTION));
                None
            }
            c => Some(c.as_ref().map(|c| c.get_ref().clone())),
        };
        return Some(WorkloadKind::Tcp {
            pattern: pattern?,
            arrivals: arrivals?,
            amount: amount?,
            congestion: congestion?,
            on_off: on_off?,
        });
    }
    let rate = match (&w.rate, &w.load) {
        (None, None) => {
            missing(d, span.clone(), "rate", WHAT)
                .label("how fast?")
                .help("add e.g. `rate = \"100mbit\"` (each flow's payload rate) or `load = \"30%\"` (of each sender's link)");
            None
        }
        (Some(_), Some(l)) => {
            d.error(
                Some(l.span()),
                "a UDP workload sends at a `rate` or a `load`, not both",
            )
            .label("and `rate`")
            .help("remove one of them");
            None
        }
        (Some(_), None) => unit::<Rate>(d, &w.rate, "rate").map(Offered::Rate),
        (None, Some(l)) => load(d, l, ranks, fabric).map(Offered::Load),
    };
    let size = match unit::<Bytes>(d, &w.size, "size") {
        None if w.size.is_some() => None,
        None => Some(1400),
        Some(b) if (UDP_HEADER as u64..=65_000).contains(&b.0) => Some(b.0 as u32),
        Some(b) => {
            d.error(
                w.size.as_ref().map(Spanned::span),
                format!("a datagram's payload must be {UDP_HEADER} to 65000 bytes, found {b}"),
            )
            .label("out of range")
            .help(format!(
                "each datagram carries a {UDP_HEADER}-byte header (flow, sequence, send time); e.g. `size = 1400`"
            ));
            None
        }
    };
    let duration = match (&w.duration, duration) {
        (None, _) => {
            missing(d, span.clone(), "duration", WHAT)
                .label("for how long?")
                .help("add e.g. `duration = \"5s\"`");
            None
        }
        (_, t) => t,
    };
    let pacing = match w.pacing.as_ref() {
        None => Some(Pacing::Constant),
        Some(p) => {
            let kw = Keyword {
                what: "pacing",
                short: "pacing",
                plural: "pacings",
            };
            let choices = [("constant", Pacing::Constant), ("poisson", Pacing::Poisson)];
            keyword(d, p.get_ref(), p.span(), &choices, kw)
        }
    };
    Some(WorkloadKind::Udp {
        pattern: pattern?,
        arrivals: arrivals?,
        rate: rate?,
        size: size?,
        duration: duration?,
        pacing: pacing?,
        on_off: on_off?,
    })
}

/// `load`: a fraction of each sender's link rate, `0.3` or `"30%"`; every
/// host of the workload needs links with a rate.
fn load(
    d: &mut Diags<'_>,
    l: &Spanned<toml::Value>,
    ranks: Option<&[Rank]>,
    fabric: Option<&Fabric>,
) -> Option<f64> {
    const HELP: &str =
        "e.g. `load = \"30%\"` or `load = 0.3`: that share of each sender's link rate, on the wire";
    let value = match l.get_ref() {
        toml::Value::Float(f) => Some(*f),
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::String(s) => s
            .trim()
            .strip_suffix('%')
            .and_then(|n| n.trim().parse::<f64>().ok())
            .map(|p| p / 100.0),
        _ => None,
    };
    let Some(value) = value.filter(|v| v.is_finite() && *v > 0.0 && *v <= 1.0) else {
        d.error(Some(l.span()), "`load` must be above 0 and at most 100%")
            .label("not a share of a link")
            .help(HELP);
        return None;
    };
    let (ranks, fabric) = (ranks?, fabric?);
    if let Some(r) = ranks.iter().find(|r| r.capacity(fabric).is_none()) {
        d.error(
            Some(l.span()),
            format!(
                "`load` is a share of a link's rate, and host `{}` has a link without one",
                fabric.node(r.host).name
            ),
        )
        .label("a share of what?")
        .help("give its links a `rate` in `[links]`, or send at a `rate` instead");
        return None;
    }
    Some(value)
}

/// `on`, `off` and `periods`: a flow that sends in bursts.
fn on_off(d: &mut Diags<'_>, w: &RawWorkload) -> Option<Option<OnOff>> {
    let periods = match &w.periods {
        None => Some(Periods::Fixed),
        Some(p) => {
            let kw = Keyword {
                what: "periods",
                short: "periods",
                plural: "choices",
            };
            let choices = [
                ("fixed", Periods::Fixed),
                ("exponential", Periods::Exponential),
            ];
            keyword(d, p.get_ref(), p.span(), &choices, kw)
        }
    };
    let (on, off) = (
        unit::<Delay>(d, &w.on, "on"),
        unit::<Delay>(d, &w.off, "off"),
    );
    match (&w.on, &w.off) {
        (None, None) => {
            if let Some(p) = &w.periods {
                d.error(Some(p.span()), "`periods` is for on/off flows")
                    .label("no `on` and `off`")
                    .help("add e.g. `on = \"100ms\"` and `off = \"400ms\"`, or remove `periods`");
                return None;
            }
            Some(None)
        }
        (Some(v), None) | (None, Some(v)) => {
            d.error(Some(v.span()), "an on/off flow needs both `on` and `off`")
                .label("and the other?")
                .help("e.g. `on = \"100ms\"` and `off = \"400ms\"`: it sends a fifth of the time");
            None
        }
        (Some(v), Some(_)) => {
            let (on, off) = (on?, off?);
            if on == Delay::ZERO {
                d.error(Some(v.span()), "`on` must be longer than 0")
                    .label("never sends")
                    .help("e.g. `on = \"100ms\"`");
                return None;
            }
            Some(Some(OnOff {
                on,
                off,
                periods: periods?,
            }))
        }
    }
}

/// The keys of a `flood` workload.
fn flood(
    d: &mut Diags<'_>,
    w: &RawWorkload,
    fabric: Option<&Fabric>,
    span: &Range<usize>,
) -> Option<WorkloadKind> {
    let protocol = match &w.protocol {
        None => Some(FloodProtocol::Udp),
        Some(p) => keyword(
            d,
            p.get_ref(),
            p.span(),
            &[("udp", FloodProtocol::Udp), ("syn", FloodProtocol::Syn)],
            Keyword {
                what: "flood protocol",
                short: "protocol",
                plural: "protocols",
            },
        ),
    };
    let pps = match &w.pps {
        None => {
            missing(d, span.clone(), "pps", WHAT)
                .label("how fast?")
                .help("add e.g. `pps = 10000`: packets per second from each host");
            None
        }
        Some(p) => match u32::try_from(*p.get_ref()) {
            Ok(n) if (1..=2_000_000).contains(&n) => Some(n),
            _ => {
                d.error(
                    Some(p.span()),
                    format!(
                        "invalid `pps` {}: packets per second, 1 to 2000000",
                        p.get_ref()
                    ),
                )
                .label("out of range")
                .help("e.g. `pps = 10000`");
                None
            }
        },
    };
    let spoof = match &w.spoof {
        None => Some(None),
        Some(s) => match s.get_ref().trim().parse::<ipnet::Ipv4Net>() {
            Ok(net) => Some(Some(net.trunc())),
            Err(_) => {
                d.error(Some(s.span()), format!("invalid `spoof` `{}`", s.get_ref()))
                    .label("not a network")
                    .help("the source addresses to forge, as a network, e.g. `spoof = \"10.200.0.0/16\"`");
                None
            }
        },
    };
    let port = match &w.port {
        None => Some(match protocol {
            Some(FloodProtocol::Syn) => 80,
            _ => 9,
        }),
        Some(p) => match u16::try_from(*p.get_ref()) {
            Ok(n) if n > 0 => Some(n),
            _ => {
                d.error(Some(p.span()), format!("invalid `port` {}", p.get_ref()))
                    .label("not a port")
                    .help("a destination port, 1 to 65535");
                None
            }
        },
    };
    let size = match (&w.size, protocol) {
        (Some(s), Some(FloodProtocol::Syn)) => {
            d.error(
                Some(s.span()),
                "a SYN flood sends no payload: `size` is for `protocol = \"udp\"`",
            )
            .label("not for SYNs")
            .help("remove `size`");
            None
        }
        (None, _) => Some(18),
        (Some(_), _) => unit::<Bytes>(d, &w.size, "size").and_then(|b| match u32::try_from(b.0) {
            Ok(n) if (4..=1472).contains(&n) => Some(n),
            _ => {
                d.error(
                    w.size.as_ref().map(Spanned::span),
                    "a flood's datagrams carry 4 to 1472 bytes",
                )
                .label("out of range")
                .help("e.g. `size = 64` (the first 4 bytes tell the target whose it is)");
                None
            }
        }),
    };
    let duration = match &w.duration {
        None => Some(Delay(1_000_000_000)),
        Some(_) => unit::<Delay>(d, &w.duration, "duration"),
    };
    let target = match (&w.target, fabric) {
        (None, _) => {
            missing(d, span.clone(), "target", WHAT)
                .label("attacks whom?")
                .help("add e.g. `target = \"h3-1-1\"`: the host the flood is sent to");
            None
        }
        (Some(_), None) => None,
        (Some(t), Some(f)) => match f.node_by_name(t.get_ref()) {
            Some(n) if !n.role.is_switch() => Some(n.id),
            Some(n) => {
                d.error(
                    Some(t.span()),
                    format!("`{}` is a switch, not a host", n.name),
                )
                .label("a switch")
                .help("floods target hosts");
                None
            }
            None => {
                d.error(Some(t.span()), format!("no host named `{}`", t.get_ref()))
                    .label("unknown host")
                    .help(super::timeline::close_node_names(t.get_ref(), f));
                None
            }
        },
    };
    Some(WorkloadKind::Flood {
        target: target?,
        protocol: protocol?,
        pps: pps?,
        duration: duration?,
        spoof: spoof?,
        port: port?,
        size: size?,
    })
}

/// The keys of a `collective` workload over `ranks` ranks.
fn collective(
    d: &mut Diags<'_>,
    w: &RawWorkload,
    ranks: Option<usize>,
    span: &Range<usize>,
) -> Option<WorkloadKind> {
    let op = match &w.op {
        None => {
            let names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
            missing(d, span.clone(), "op", WHAT)
                .label("which operation?")
                .help(format!(
                    "add e.g. `op = \"all-reduce\"`; operations: {}",
                    names.join(", ")
                ));
            None
        }
        Some(o) => {
            let ops: Vec<(&str, Op)> = Op::ALL.iter().map(|o| (o.name(), *o)).collect();
            let kw = Keyword {
                what: "operation",
                short: "operation",
                plural: "operations",
            };
            keyword(d, o.get_ref(), o.span(), &ops, kw)
        }
    };
    let algorithm = match (&w.algorithm, op) {
        (Some(a), Some(op)) => {
            let valid: Vec<(&str, Algorithm)> =
                op.algorithms().iter().map(|a| (a.name(), *a)).collect();
            match valid.iter().find(|(n, _)| n == a.get_ref()) {
                Some((_, a)) => Some(Some(*a)),
                None => {
                    let names: Vec<&str> = valid.iter().map(|(n, _)| *n).collect();
                    d.error(
                        Some(a.span()),
                        format!("{op} has no `{}` algorithm", a.get_ref()),
                    )
                    .label("unknown algorithm")
                    .help(choices_help(
                        a.get_ref(),
                        &format!("algorithms of {op}"),
                        &names,
                    ));
                    None
                }
            }
        }
        (None, _) => Some(None),
        (Some(_), None) => None,
    };
    if let (Some(Some(Algorithm::HalvingDoubling)), Some(n)) = (algorithm, ranks)
        && !n.is_power_of_two()
    {
        d.error(
            w.algorithm.as_ref().map(Spanned::span),
            format!("halving-doubling needs a power-of-two number of ranks, this job has {n}"),
        )
        .label("not a power of two")
        .help("use `ring` or `tree`, or a job of 2, 4, 8, ... hosts (`count`)");
    }
    let sizes: Option<Vec<Bytes>> = match (&w.size, &w.sizes) {
        (Some(_), Some(s)) => {
            d.error(Some(s.span()), "`size` or `sizes`, not both")
                .label("and `size`")
                .help("one size: `size = \"16MiB\"`; several: `sizes = [\"1MiB\", \"16MiB\"]`");
            None
        }
        (Some(_), None) => unit::<Bytes>(d, &w.size, "size").map(|b| vec![b]),
        (None, Some(list)) => {
            let mut out = Vec::new();
            for v in list.get_ref() {
                out.extend(unit::<Bytes>(d, &Some(v.clone()), "sizes"));
            }
            if list.get_ref().is_empty() {
                d.error(Some(list.span()), "`sizes` is empty")
                    .label("no size")
                    .help("e.g. `sizes = [\"1MiB\", \"16MiB\"]`");
            }
            out.sort_unstable();
            out.dedup();
            Some(out)
        }
        (None, None) => {
            missing(d, span.clone(), "size", WHAT)
                .label("how large?")
                .help("add e.g. `size = \"16MiB\"` (the buffer, as nccl-tests counts it) or `sizes = [...]`");
            None
        }
    };
    let root = w.root.as_ref().map_or(0, |r| *r.get_ref() as usize);
    if let Some(r) = &w.root {
        if op != Some(Op::Broadcast) {
            d.error(Some(r.span()), "`root` is for `broadcast`")
                .label("only for broadcast")
                .help("remove `root`");
        } else if let Some(n) = ranks
            && root >= n
        {
            d.error(
                Some(r.span()),
                format!("root {root} is not a rank of this {n}-rank job"),
            )
            .label("no such rank")
            .help(format!("ranks are 0 to {}", n - 1));
        }
    }
    let skew = match &w.skew {
        Some(s) if op != Some(Op::AllToAll) => {
            d.error(Some(s.span()), "`skew` is for `all-to-all`")
                .label("only for all-to-all")
                .help("remove `skew`");
            None
        }
        Some(s) if !(s.get_ref().is_finite() && *s.get_ref() >= 0.0) => {
            d.error(Some(s.span()), "`skew` must be a non-negative number")
                .label("invalid skew")
                .help("the Zipf exponent of destinations: 0 is uniform, 1.2 is a typical MoE skew");
            None
        }
        s => Some(s.as_ref().map(|s| *s.get_ref())),
    };
    let iterations = w.iterations.as_ref().map_or(5, |i| *i.get_ref());
    if let Some(i) = &w.iterations
        && iterations == 0
    {
        d.error(Some(i.span()), "`iterations` must be at least 1")
            .label("nothing timed")
            .help("e.g. `iterations = 5`");
    }
    Some(WorkloadKind::Collective {
        op: op?,
        algorithm: algorithm?,
        sizes: sizes?,
        iterations,
        warmup: w.warmup.as_ref().map_or(1, |i| *i.get_ref()),
        gap: unit::<Delay>(d, &w.gap, "gap").unwrap_or(Delay::ZERO),
        root,
        skew: skew?,
    })
}
