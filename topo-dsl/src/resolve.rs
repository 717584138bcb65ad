//! Parse -> resolve: reads every section of a scenario, checks it, and
//! builds the validated [`Lab`]. All errors are collected; a section that
//! depends on a broken one is skipped rather than reported twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::ops::Range;
use std::str::FromStr;

use ipnet::Ipv4Net;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diag::{Diags, ScenarioErrors, choices_help, did_you_mean};
use crate::generate::{self, AsnSlot, GNode, Graph, HpnParams, MAX_LINKS, MAX_NODES};
use crate::model::*;
use crate::plan::{self, AsnBase, IFNAMSIZ, Pool, Pools};
use crate::raw::*;
use crate::timeline;
use crate::units::{Delay, LossProb, Mtu, QueueLimit, Rate, UnitError};

const TOP_KEYS: &[&str] = &[
    "lab",
    "topology",
    "routing",
    "addressing",
    "links",
    "external",
    "timeline",
    "p4rt",
];
const KINDS: &[&str] = &["fat-tree", "leaf-spine", "hpn", "custom"];
const TARGETS: &[&str] = &["netns", "p4rt", "soft"];
const MODES: &[&str] = &["static", "controller", "bgp"];
const CUSTOM_ROLES: &[&str] = &["switch", "host"];

const FAT_TREE_KEYS: &[&str] = &["kind", "k"];
const LEAF_SPINE_KEYS: &[&str] = &["kind", "spines", "leaves", "hosts_per_leaf", "uplinks"];
const HPN_KEYS: &[&str] = &[
    "kind",
    "segments",
    "hosts_per_segment",
    "backup_hosts",
    "rails",
    "planes",
    "aggs_per_plane",
    "cores",
    "core_uplinks",
];
const CUSTOM_KEYS: &[&str] = &["kind", "nodes", "links"];

/// Link classes valid for each topology kind.
pub(crate) fn classes_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "fat-tree" => &["host-edge", "edge-agg", "agg-core"],
        "leaf-spine" => &["host-leaf", "leaf-spine"],
        "hpn" => &["host-tor", "tor-agg", "agg-core"],
        "custom" => &["host-switch", "switch-switch"],
        _ => &[],
    }
}

fn role_from_str(s: &str) -> Option<Role> {
    Some(match s {
        "host" => Role::Host,
        "tor" => Role::Tor,
        "edge" => Role::Edge,
        "leaf" => Role::Leaf,
        "agg" => Role::Agg,
        "spine" => Role::Spine,
        "core" => Role::Core,
        "switch" => Role::Switch,
        _ => return None,
    })
}

fn class_from_str(s: &str) -> Option<LinkClass> {
    let (lower, upper) = s.split_once('-')?;
    Some(LinkClass {
        lower: role_from_str(lower)?,
        upper: role_from_str(upper)?,
    })
}

/// Entry point behind [`crate::parse`].
pub(crate) fn parse(origin: &str, text: &str) -> Result<Lab, ScenarioErrors> {
    let mut d = Diags::new(text);
    let (root, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        for e in &syntax {
            let span = e.span().unwrap_or(0..0);
            d.error(
                Some(span),
                format!("invalid TOML: {}", e.message().trim_end()),
            )
            .label("here")
            .help("see https://toml.io for the syntax");
        }
        return Err(d.finish(origin).expect_err("errors were recorded"));
    }
    let lab = resolve(&mut d, root.get_ref());
    match (d.finish(origin), lab) {
        (Ok(()), Some(lab)) => Ok(lab),
        (Err(e), _) => Err(e),
        (Ok(()), None) => {
            // Every path that returns None records an error first; this is a
            // safety net so a bug never turns into a panic.
            let mut d = Diags::new(text);
            d.error(None, "the scenario could not be resolved");
            Err(d.finish(origin).expect_err("an error was recorded"))
        }
    }
}

fn resolve(d: &mut Diags<'_>, root: &DeTable<'_>) -> Option<Lab> {
    let mut sections: BTreeMap<&str, &Spanned<DeValue<'_>>> = BTreeMap::new();
    for (key, value) in root {
        let name: &str = key.get_ref();
        if TOP_KEYS.contains(&name) {
            sections.insert(name, value);
        } else {
            d.error(Some(key.span()), format!("unknown section `{name}`"))
                .label("unknown section")
                .help(choices_help(name, "sections", TOP_KEYS));
        }
    }

    // [lab]
    let lab = match sections.get("lab") {
        Some(v) => read_lab(d, v),
        None => {
            d.error(Some(0..0), "missing `[lab]` section")
                .label("expected `[lab]`")
                .help("every scenario starts with `[lab]` and `name = \"mylab\"` (1-12 characters of a-z, 0-9, -)");
            None
        }
    };

    // [routing]
    let routing = match sections.get("routing") {
        Some(v) => read_routing(d, v),
        None => RoutingRead::defaults(),
    };
    let asn_base = &routing.asn_base;

    // [addressing]
    let pools = read_addressing(d, sections.get("addressing").copied());

    // [topology]
    let mut kind_name = None;
    let topo = match sections.get("topology") {
        Some(v) => read_topology(d, v, &mut kind_name),
        None => {
            d.error(Some(0..0), "missing `[topology]` section")
                .label("expected `[topology]`")
                .help(format!(
                    "add `[topology]` with `kind` = one of {}",
                    KINDS.join(", ")
                ));
            None
        }
    };

    // [links]
    let link_cfg = sections
        .get("links")
        .map(|v| read_links(d, v, kind_name))
        .unwrap_or_default();

    // Build the fabric.
    let mut inline_spans = Vec::new();
    let mut fabric = match (topo, &pools) {
        (Some(t), Some(pools)) => {
            inline_spans = t.inline_spans;
            let class_params = &link_cfg.classes;
            let default = &link_cfg.default;
            let params = |class: LinkClass| {
                let mut p = default.clone();
                if let Some(c) = class_params.get(&class) {
                    p.overlay(c);
                }
                p
            };
            plan::build(d, t.graph, t.kind, pools, asn_base, t.span, &params)
        }
        _ => None,
    };

    if let Some(fabric) = fabric.as_mut() {
        let override_spans = apply_overrides(d, fabric, &link_cfg.overrides);
        check_link_params(d, fabric, &link_cfg, &inline_spans, &override_spans);
    }

    // [routing.agents], now that the nodes are known.
    let agents = fabric
        .as_ref()
        .and_then(|f| resolve_agents(d, &routing.agents, f));

    // [[external]]
    if let Some(v) = sections.get("external") {
        read_externals(d, v, fabric.as_mut(), pools.as_ref(), &routing);
    }

    // [[timeline]]
    let timeline = match sections.get("timeline") {
        Some(v) => timeline::read_timeline(d, v, fabric.as_ref()),
        None => Vec::new(),
    };

    // [p4rt], against the target.
    let target_hint = lab.as_ref().and_then(|l| l.2);
    let p4rt = crate::p4rt::read_p4rt(
        d,
        sections.get("p4rt").copied(),
        target_hint,
        sections.get("lab").map(|v| v.span()),
    );

    let (name, seed, target, engine) = lab?;
    Some(Lab {
        name: name?,
        seed,
        target: target?,
        engine: engine?,
        routing: RoutingConfig {
            mode: routing.mode?,
            agent: routing.agent?,
            agents: agents?,
            timers: routing.timers?,
        },
        fabric: fabric?,
        timeline,
        p4rt: p4rt?,
    })
}

// ---------------------------------------------------------------------------
// [lab]

type LabParts = (Option<String>, u64, Option<Target>, Option<EngineChoice>);

fn read_lab(d: &mut Diags<'_>, v: &Spanned<DeValue<'_>>) -> Option<LabParts> {
    let keys = Keys {
        allowed: fields_of::<RawLab>(),
        extra: &[],
        foreign: &[],
        foreign_reason: "",
    };
    let s = read_table::<RawLab>(d, v, "`[lab]`", keys)?;
    let name = match &s.raw.name {
        None => {
            d.error(Some(s.span.clone()), "missing `name` in `[lab]`")
                .label("`[lab]` needs a name")
                .help("add e.g. `name = \"k4\"` (1-12 characters of a-z, 0-9, -)");
            None
        }
        Some(n) => {
            let name = n.get_ref();
            match check_lab_name(name) {
                Ok(()) => Some(name.clone()),
                Err(why) => {
                    let rule = "a lab name is 1-12 bytes of a-z, 0-9 and -, starting with a letter or digit (namespaces are named `tn-<lab>-<node>`)";
                    let help = match suggest_lab_name(name) {
                        Some(s) => format!("did you mean `{s}`? {rule}"),
                        None => rule.to_owned(),
                    };
                    d.error(Some(n.span()), format!("invalid lab name `{name}`: {why}"))
                        .label("invalid lab name")
                        .help(help);
                    None
                }
            }
        }
    };
    let seed = s.raw.seed.as_ref().map_or(1, |s| *s.get_ref());
    let target = match &s.raw.target {
        None => Some(Target::Netns),
        Some(t) => match t.get_ref().as_str() {
            "netns" => Some(Target::Netns),
            "p4rt" => Some(Target::P4rt),
            "soft" => Some(Target::Soft),
            other => {
                d.error(Some(t.span()), format!("unknown target `{other}`"))
                    .label("unknown target")
                    .help(choices_help(other, "targets", TARGETS));
                None
            }
        },
    };
    let engine = match &s.raw.engine {
        None => Some(EngineChoice::Auto),
        Some(e) => match e.get_ref().as_str() {
            "auto" => Some(EngineChoice::Auto),
            "userspace" => Some(EngineChoice::Userspace),
            "kernel" => Some(EngineChoice::Kernel),
            other => {
                d.error(Some(e.span()), format!("unknown engine `{other}`"))
                    .label("unknown engine")
                    .help(choices_help(other, "engines", EngineChoice::NAMES));
                None
            }
        },
    };
    Some((name, seed, target, engine))
}

/// A valid lab name close to an invalid one: lowercase, other characters
/// replaced by `-`, truncated to 12 bytes.
fn suggest_lab_name(name: &str) -> Option<String> {
    let mut s: String = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    s = s.trim_matches('-').to_owned();
    s.truncate(12);
    let s = s.trim_end_matches('-').to_owned();
    (check_lab_name(&s).is_ok() && s != name).then_some(s)
}

fn check_lab_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > 12 {
        return Err(format!("it is {} bytes long, the limit is 12", name.len()));
    }
    check_name_chars(name)
}

fn check_name_chars(name: &str) -> Result<(), String> {
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!("`{c}` is not allowed"));
    }
    if name.starts_with('-') {
        return Err("it starts with `-`".into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// [routing]

/// `[routing]` as read, before the names of `[routing.agents]` can be
/// resolved (they name nodes of the generated fabric).
struct RoutingRead {
    /// `None` when `mode` is invalid (or the section is broken).
    mode: Option<RoutingMode>,
    /// Where `mode` was written.
    mode_span: Option<Range<usize>>,
    asn_base: AsnBase,
    /// `None` when `agent` is invalid.
    agent: Option<Agent>,
    /// `None` when a timer is invalid.
    timers: Option<BgpTimers>,
    /// `[routing.agents]`: each node name with its span, and the agent
    /// (`None` when the value is invalid).
    agents: Vec<(String, Range<usize>, Option<Agent>)>,
}

impl RoutingRead {
    fn defaults() -> Self {
        RoutingRead {
            mode: Some(RoutingMode::Static),
            mode_span: None,
            asn_base: AsnBase {
                base: plan::DEFAULT_ASN_BASE,
                span: None,
            },
            agent: Some(Agent::default()),
            timers: Some(BgpTimers::default()),
            agents: Vec::new(),
        }
    }

    /// Reports `key` (written at `span`, in `what`) when the mode is known
    /// and is not BGP. Returns false when it reported.
    fn check_bgp_only(&self, d: &mut Diags<'_>, span: Range<usize>, key: &str, what: &str) -> bool {
        let Some(mode) = self.mode else {
            // The mode itself is wrong and already reported.
            return true;
        };
        if mode == RoutingMode::Bgp {
            return true;
        }
        let why = match &self.mode_span {
            Some(m) => format!(
                "the routing mode is \"{mode}\" (`mode` at line {})",
                d.line_col(m.start).0
            ),
            None => "the routing mode is \"static\" by default".to_owned(),
        };
        d.error(
            Some(span),
            format!("`{key}` in {what} is only used with mode = \"bgp\""),
        )
        .label("BGP mode only")
        .help(format!(
            "{why}; set `mode = \"bgp\"` in `[routing]`, or remove `{key}`"
        ));
        false
    }
}

/// The span of the key `name` of a table value.
fn key_span(v: &Spanned<DeValue<'_>>, name: &str) -> Option<Range<usize>> {
    v.get_ref()
        .as_table()?
        .iter()
        .find(|(k, _)| k.get_ref() == name)
        .map(|(k, _)| k.span())
}

fn read_routing(d: &mut Diags<'_>, v: &Spanned<DeValue<'_>>) -> RoutingRead {
    let mut out = RoutingRead::defaults();
    let mut allowed: Vec<&str> = fields_of::<RawRouting>().to_vec();
    allowed.extend(["asn", "agents"]);
    let keys = Keys {
        allowed: &allowed,
        extra: &["asn", "agents"],
        foreign: &[],
        foreign_reason: "",
    };
    let Some(s) = read_table::<RawRouting>(d, v, "`[routing]`", keys) else {
        out.mode = None;
        return out;
    };
    out.mode_span = s.raw.mode.as_ref().map(toml::Spanned::span);
    out.mode = match &s.raw.mode {
        None => Some(RoutingMode::Static),
        Some(m) => match m.get_ref().as_str() {
            "static" => Some(RoutingMode::Static),
            "controller" => Some(RoutingMode::Controller),
            "bgp" => Some(RoutingMode::Bgp),
            other => {
                d.error(Some(m.span()), format!("unknown routing mode `{other}`"))
                    .label("unknown mode")
                    .help(choices_help(other, "modes", MODES));
                None
            }
        },
    };
    if let Some(asn) = s.extra.get("asn") {
        let keys = Keys {
            allowed: fields_of::<RawAsn>(),
            extra: &[],
            foreign: &[],
            foreign_reason: "",
        };
        if let Some(a) = read_table::<RawAsn>(d, asn, "`[routing.asn]`", keys)
            && let Some(b) = a.raw.base
        {
            out.asn_base = AsnBase {
                base: *b.get_ref(),
                span: Some(b.span()),
            };
        }
    }

    // BGP-only keys, in file order.
    let mut bgp_keys: Vec<(&str, Range<usize>)> = [
        ("agent", s.raw.agent.is_some()),
        ("agents", s.extra.contains_key("agents")),
        ("hold_time", s.raw.hold_time.is_some()),
        ("keepalive", s.raw.keepalive.is_some()),
        ("connect_retry", s.raw.connect_retry.is_some()),
    ]
    .into_iter()
    .filter(|(_, given)| *given)
    .filter_map(|(k, _)| Some((k, key_span(v, k)?)))
    .collect();
    bgp_keys.sort_by_key(|(_, span)| span.start);
    for (key, span) in bgp_keys {
        out.check_bgp_only(d, span, key, "`[routing]`");
    }

    // agent
    if let Some(a) = &s.raw.agent {
        out.agent = read_agent(d, a.get_ref(), a.span(), None);
    }

    // Timers (RFC 4271 section 10).
    let hold = seconds(d, &s.raw.hold_time, "hold_time");
    let keepalive = seconds(d, &s.raw.keepalive, "keepalive");
    let connect_retry = seconds(d, &s.raw.connect_retry, "connect_retry");
    let defaults = BgpTimers::default();
    let hold = hold.map(|h| match h {
        None => Some(defaults.hold_time),
        Some((h, span)) => match u16::try_from(h) {
            Ok(h) if h == 0 || h >= 3 => Some(h),
            _ => {
                d.error(
                    Some(span),
                    format!("`hold_time` must be 0 or from 3 to 65535 seconds, found {h}"),
                )
                .label("invalid hold time")
                .help(
                    "RFC 4271 section 4.2: the hold time is either 0 (no KEEPALIVEs; the session \
                     never times out) or at least 3 seconds; the default is 3",
                );
                None
            }
        },
    });
    let keepalive = keepalive.map(|k| match k {
        None => Some((defaults.keepalive, None)),
        Some((k, span)) => match u16::try_from(k) {
            Ok(k) if k >= 1 => Some((k, Some(span))),
            _ => {
                d.error(
                    Some(span),
                    format!("`keepalive` must be from 1 to 65535 seconds, found {k}"),
                )
                .label("invalid keepalive")
                .help(
                    "the interval between KEEPALIVEs, at least 1 second (RFC 4271 section 4.4) \
                     and at most a third of `hold_time`; the default is 1",
                );
                None
            }
        },
    });
    let connect_retry = connect_retry.map(|c| match c {
        None => Some(defaults.connect_retry),
        Some((c, span)) => match u16::try_from(c) {
            Ok(c) if c >= 1 => Some(c),
            _ => {
                d.error(
                    Some(span),
                    format!("`connect_retry` must be from 1 to 65535 seconds, found {c}"),
                )
                .label("invalid connect retry")
                .help(
                    "the time between attempts to open a session (ConnectRetryTime, RFC 4271 \
                     section 10), at least 1 second; the default is 1",
                );
                None
            }
        },
    });
    out.timers = match (hold.flatten(), keepalive.flatten(), connect_retry.flatten()) {
        (Some(hold_time), Some((keepalive, keepalive_span)), Some(connect_retry)) => {
            if hold_time > 0 && u32::from(keepalive) * 3 > u32::from(hold_time) {
                let whence = match &s.raw.hold_time {
                    Some(h) => format!(
                        "`hold_time` = {hold_time} (line {})",
                        d.line_col(h.span().start).0
                    ),
                    None => format!("the default `hold_time` of {hold_time}"),
                };
                // A default keepalive (1) always fits a valid hold time.
                let span = keepalive_span.or(s.raw.hold_time.as_ref().map(toml::Spanned::span));
                d.error(
                    span,
                    format!(
                        "`keepalive` = {keepalive} is more than a third of the hold time {hold_time}"
                    ),
                )
                .label("keepalive too long for the hold time")
                .help(format!(
                    "RFC 4271 section 4.4: KEEPALIVEs are sent every third of the hold time, so \
                     that a peer's hold timer survives two lost ones; with {whence}, set \
                     `keepalive` to at most {}, or `hold_time` to at least {}",
                    hold_time / 3,
                    u32::from(keepalive) * 3
                ));
                None
            } else {
                Some(BgpTimers {
                    hold_time,
                    keepalive,
                    connect_retry,
                })
            }
        }
        _ => None,
    };

    // [routing.agents]: names are resolved once the fabric is built.
    if let Some(agents) = s.extra.get("agents") {
        match agents.get_ref().as_table() {
            None => {
                d.error(
                    Some(agents.span()),
                    format!(
                        "`agents` in `[routing]` must be a table of switch names to agents, found {}",
                        agents.get_ref().type_str()
                    ),
                )
                .label("expected a table")
                .help(format!(
                    "write `[routing.agents]` with lines such as `\"tor0-r0p0\" = \"frr\"`; valid agents: {}",
                    Agent::NAMES.join(", ")
                ));
            }
            Some(table) => {
                for (key, val) in table {
                    let name: &str = key.get_ref();
                    let agent = match val.get_ref().as_str() {
                        Some(text) => read_agent(d, text, val.span(), Some(name)),
                        None => {
                            d.error(
                                Some(val.span()),
                                format!(
                                    "the agent of `{name}` must be a string, found {}",
                                    val.get_ref().type_str()
                                ),
                            )
                            .label("expected an agent name")
                            .help(format!(
                                "write e.g. `\"{name}\" = \"frr\"`; valid agents: {}",
                                Agent::NAMES.join(", ")
                            ));
                            None
                        }
                    };
                    out.agents.push((name.to_owned(), key.span(), agent));
                }
            }
        }
    }
    out
}

/// An agent name; `node` is the switch of a `[routing.agents]` entry.
fn read_agent(
    d: &mut Diags<'_>,
    text: &str,
    span: Range<usize>,
    node: Option<&str>,
) -> Option<Agent> {
    let agent = Agent::from_name(text);
    if agent.is_none() {
        let message = match node {
            Some(n) => format!("unknown agent `{text}` for `{n}`"),
            None => format!("unknown agent `{text}`"),
        };
        d.error(Some(span), message)
            .label("unknown agent")
            .help(choices_help(text, "agents", Agent::NAMES));
    }
    agent
}

/// An integer number of seconds. `None`: the value is not a non-negative
/// integer (reported); `Some(None)`: the key is absent.
fn seconds(
    d: &mut Diags<'_>,
    v: &Option<Spanned<toml::Value>>,
    key: &str,
) -> Option<Option<(i64, Range<usize>)>> {
    let Some(v) = v else { return Some(None) };
    match v.get_ref() {
        toml::Value::Integer(n) if *n >= 0 => Some(Some((*n, v.span()))),
        toml::Value::Integer(n) => {
            d.error(
                Some(v.span()),
                format!("`{key}` must be a non-negative number of seconds, found {n}"),
            )
            .label("negative")
            .help(format!("write whole seconds, e.g. `{key} = 3`"));
            None
        }
        other => {
            d.error(
                Some(v.span()),
                format!(
                    "`{key}` must be an integer number of seconds, found {} {other}",
                    other.type_str()
                ),
            )
            .label("expected an integer")
            .help(format!(
                "write whole seconds as a plain integer without unit or quotes, e.g. `{key} = 3`"
            ));
            None
        }
    }
}

/// Resolves the switch names of `[routing.agents]` against the built fabric.
fn resolve_agents(
    d: &mut Diags<'_>,
    entries: &[(String, Range<usize>, Option<Agent>)],
    fabric: &Fabric,
) -> Option<BTreeMap<NodeId, Agent>> {
    let mut ok = true;
    let mut agents = BTreeMap::new();
    for (name, span, agent) in entries {
        match fabric.node_by_name(name) {
            Some(n) if n.role.is_switch() => {
                if let Some(a) = agent {
                    agents.insert(n.id, *a);
                } else {
                    ok = false;
                }
            }
            Some(host) => {
                ok = false;
                let example = fabric
                    .ports(host.id)
                    .map(|(_, _, remote)| fabric.node(remote.node))
                    .find(|n| n.role.is_switch())
                    .map(|sw| format!(", e.g. `{}`, the switch `{name}` is attached to", sw.name))
                    .unwrap_or_default();
                d.error(
                    Some(span.clone()),
                    format!("`{name}` is a host: hosts run no routing agent; only switches take an agent"),
                )
                .label("not a switch")
                .help(format!("remove this line, or name a switch{example}"));
            }
            None => {
                ok = false;
                let close: Vec<String> =
                    crate::suggest::closest(name, fabric.switches().map(|n| n.name.as_str()))
                        .into_iter()
                        .map(|n| format!("`{n}`"))
                        .collect();
                let example = fabric.switches().next().map_or_else(
                    || "this topology has no switches".to_owned(),
                    |n| format!("switch names look like `{}`", n.name),
                );
                let help = if close.is_empty() {
                    example
                } else {
                    format!("close names: {}; {example}", close.join(", "))
                };
                d.error(
                    Some(span.clone()),
                    format!("unknown node `{name}` in `[routing.agents]`"),
                )
                .label("no such switch")
                .help(help);
            }
        }
    }
    ok.then_some(agents)
}

// ---------------------------------------------------------------------------
// [addressing]

fn read_addressing(d: &mut Diags<'_>, v: Option<&Spanned<DeValue<'_>>>) -> Option<Pools> {
    let raw = match v {
        None => RawAddressing {
            loopbacks: None,
            fabric: None,
            hosts: None,
        },
        Some(v) => {
            let keys = Keys {
                allowed: fields_of::<RawAddressing>(),
                extra: &[],
                foreign: &[],
                foreign_reason: "",
            };
            read_table::<RawAddressing>(d, v, "`[addressing]`", keys)?.raw
        }
    };
    let loopbacks = read_pool(d, raw.loopbacks, "loopbacks", plan::DEFAULT_LOOPBACKS);
    let fabric = read_pool(d, raw.fabric, "fabric", plan::DEFAULT_FABRIC);
    let hosts = read_pool(d, raw.hosts, "hosts", plan::DEFAULT_HOSTS);
    let mut ok = true;
    let valid: Vec<&Pool> = [&loopbacks, &fabric, &hosts]
        .into_iter()
        .flatten()
        .collect();
    for (i, a) in valid.iter().enumerate() {
        for b in &valid[i + 1..] {
            if overlaps(&a.net, &b.net) {
                ok = false;
                let span = b.span.clone().or(a.span.clone());
                d.error(
                    span,
                    format!(
                        "address pools overlap: `{}` = {} and `{}` = {}",
                        a.key, a.net, b.key, b.net
                    ),
                )
                .label("overlaps another pool")
                .help(format!(
                    "the loopbacks, fabric and hosts pools must be disjoint; defaults: loopbacks = \"{}\", fabric = \"{}\", hosts = \"{}\"",
                    plan::DEFAULT_LOOPBACKS,
                    plan::DEFAULT_FABRIC,
                    plan::DEFAULT_HOSTS
                ));
            }
        }
    }
    let (loopbacks, fabric, hosts) = (loopbacks?, fabric?, hosts?);
    ok.then_some(Pools {
        loopbacks,
        fabric,
        hosts,
    })
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

fn read_pool(
    d: &mut Diags<'_>,
    v: Option<Spanned<String>>,
    key: &'static str,
    default: &str,
) -> Option<Pool> {
    let Some(v) = v else {
        return Some(Pool {
            net: default.parse().expect("default pools are valid"),
            key,
            span: None,
        });
    };
    let text = v.get_ref().trim();
    match parse_net(text) {
        Ok(net) => Some(Pool {
            net,
            key,
            span: Some(v.span()),
        }),
        Err((why, help)) => {
            d.error(
                Some(v.span()),
                format!("invalid `{key}` pool `{text}`: {why}"),
            )
            .label("invalid network")
            .help(help);
            None
        }
    }
}

/// Parses an IPv4 network with no host bits set.
fn parse_net(text: &str) -> Result<Ipv4Net, (String, String)> {
    let example = "write an IPv4 network in CIDR form, e.g. \"10.0.0.0/16\"".to_owned();
    if text.contains(':') {
        return Err(("IPv6 is not supported yet".into(), example));
    }
    if !text.contains('/') {
        return Err(("the prefix length is missing".into(), example));
    }
    let net: Ipv4Net = text
        .parse()
        .map_err(|_| ("not an IPv4 network".to_owned(), example.clone()))?;
    if net.addr() != net.network() {
        return Err((
            "host bits are set".into(),
            format!("did you mean \"{}\"?", net.trunc()),
        ));
    }
    Ok(net)
}

// ---------------------------------------------------------------------------
// [topology]

struct Topo {
    kind: TopologyKind,
    graph: Graph,
    span: Range<usize>,
    /// Where the inline parameters of each custom link were written,
    /// indexed like `graph.links` (empty for generated topologies).
    inline_spans: Vec<ParamSpans>,
}

/// Reads `[topology]` and generates the graph. `kind_name` is set as soon
/// as the kind is known, even if the parameters are wrong, so that
/// `[links.<class>]` can still be checked.
fn read_topology(
    d: &mut Diags<'_>,
    v: &Spanned<DeValue<'_>>,
    kind_name: &mut Option<&'static str>,
) -> Option<Topo> {
    let table_span = v.span();
    let Some(table) = v.get_ref().as_table() else {
        d.error(Some(table_span), "`[topology]` must be a table")
            .label("expected a table")
            .help(format!(
                "write `[topology]` with `kind` = one of {}",
                KINDS.join(", ")
            ));
        return None;
    };
    let kind_value = table.get("kind");
    let kind: Option<&'static str> = match kind_value {
        None => {
            d.error(Some(table_span.clone()), "missing `kind` in `[topology]`")
                .label("needs a kind")
                .help(format!("valid kinds: {}", KINDS.join(", ")));
            None
        }
        Some(k) => match k.get_ref().as_str() {
            Some(s) => match KINDS.iter().find(|c| **c == s) {
                Some(c) => Some(*c),
                None => {
                    d.error(Some(k.span()), format!("unknown topology kind `{s}`"))
                        .label("unknown kind")
                        .help(choices_help(s, "kinds", KINDS));
                    None
                }
            },
            // Not a string: reported by the typed read below.
            None => None,
        },
    };
    *kind_name = kind;
    let all: Vec<&str> = FAT_TREE_KEYS
        .iter()
        .chain(LEAF_SPINE_KEYS)
        .chain(HPN_KEYS)
        .chain(CUSTOM_KEYS)
        .copied()
        .collect();
    let (allowed, reason): (&[&str], String) = match kind {
        Some("fat-tree") => (
            FAT_TREE_KEYS,
            "is not a parameter of `fat-tree` topologies".into(),
        ),
        Some("leaf-spine") => (
            LEAF_SPINE_KEYS,
            "is not a parameter of `leaf-spine` topologies".into(),
        ),
        Some("hpn") => (HPN_KEYS, "is not a parameter of `hpn` topologies".into()),
        Some("custom") => (
            CUSTOM_KEYS,
            "is not a parameter of `custom` topologies".into(),
        ),
        _ => (&all, String::new()),
    };
    let keys = Keys {
        allowed,
        extra: &["nodes", "links"],
        foreign: &all,
        foreign_reason: &reason,
    };
    let s = read_table::<RawTopology>(d, v, "`[topology]`", keys)?;
    let kind = kind?;
    let t = &s.raw;
    let span = t
        .kind
        .as_ref()
        .map_or(table_span.clone(), toml::Spanned::span);
    let mut ok = true;
    let mut get = |d: &mut Diags<'_>,
                   v: &Option<Spanned<u32>>,
                   key: &str,
                   default: Option<u32>,
                   min: u32,
                   max: u32|
     -> u32 {
        match v {
            None => match default {
                Some(x) => x,
                None => {
                    ok = false;
                    d.error(
                        Some(span.clone()),
                        format!("missing `{key}` for a `{kind}` topology"),
                    )
                    .label(format!("`{kind}` needs `{key}`"))
                    .help(format!("`{kind}` takes: {}", allowed[1..].join(", ")));
                    0
                }
            },
            Some(x) => {
                let val = *x.get_ref();
                if val < min || val > max {
                    ok = false;
                    d.error(
                        Some(x.span()),
                        format!("`{key}` must be from {min} to {max}, found {val}"),
                    )
                    .label("out of range");
                }
                val
            }
        }
    };
    let mut inline_spans = Vec::new();
    let (tkind, graph) = match kind {
        "fat-tree" => {
            let k = get(d, &t.k, "k", None, 2, 64);
            if ok && k % 2 != 0 {
                ok = false;
                let k_span = t.k.as_ref().map(toml::Spanned::span);
                d.error(k_span, format!("`k` must be even, found {k}"))
                    .label("odd k")
                    .help(format!(
                        "a k-ary fat-tree splits each switch's k ports half down, half up; try k = {} or k = {}",
                        k - 1,
                        k + 1
                    ));
            }
            if !ok {
                return None;
            }
            (TopologyKind::FatTree { k }, generate::fat_tree(k))
        }
        "leaf-spine" => {
            let spines = get(d, &t.spines, "spines", None, 1, u32::MAX);
            let leaves = get(d, &t.leaves, "leaves", None, 1, u32::MAX);
            let hosts_per_leaf = get(d, &t.hosts_per_leaf, "hosts_per_leaf", None, 0, u32::MAX);
            let uplinks = get(d, &t.uplinks, "uplinks", Some(1), 1, u32::MAX);
            if !ok {
                return None;
            }
            let (n, l) = generate::leaf_spine_size(
                spines.into(),
                leaves.into(),
                hosts_per_leaf.into(),
                uplinks.into(),
            );
            if !check_size(d, n, l, &span) {
                return None;
            }
            (
                TopologyKind::LeafSpine {
                    spines,
                    leaves,
                    hosts_per_leaf,
                    uplinks,
                },
                generate::leaf_spine(spines, leaves, hosts_per_leaf, uplinks),
            )
        }
        "hpn" => {
            let p = HpnParams {
                segments: get(d, &t.segments, "segments", None, 1, u32::MAX),
                hosts_per_segment: get(
                    d,
                    &t.hosts_per_segment,
                    "hosts_per_segment",
                    None,
                    1,
                    u32::MAX,
                ),
                backup_hosts: get(d, &t.backup_hosts, "backup_hosts", Some(0), 0, u32::MAX),
                rails: get(d, &t.rails, "rails", None, 1, u32::MAX),
                planes: get(d, &t.planes, "planes", Some(2), 1, u32::MAX),
                aggs_per_plane: get(d, &t.aggs_per_plane, "aggs_per_plane", None, 1, u32::MAX),
                cores: get(d, &t.cores, "cores", Some(0), 0, u32::MAX),
                core_uplinks: get(d, &t.core_uplinks, "core_uplinks", Some(0), 0, u32::MAX),
            };
            if ok && p.cores > 0 && (p.core_uplinks == 0 || p.core_uplinks > p.cores) {
                ok = false;
                let s = t
                    .core_uplinks
                    .as_ref()
                    .map_or(span.clone(), toml::Spanned::span);
                d.error(
                    Some(s),
                    format!(
                        "`core_uplinks` must be from 1 to `cores` ({}) when there are cores, found {}",
                        p.cores, p.core_uplinks
                    ),
                )
                .label("invalid core_uplinks")
                .help("each aggregation switch has `core_uplinks` links, each to a different core");
            }
            if ok && p.cores == 0 && p.core_uplinks > 0 {
                ok = false;
                let s = t
                    .core_uplinks
                    .as_ref()
                    .map_or(span.clone(), toml::Spanned::span);
                d.error(Some(s), "`core_uplinks` is set but there are no cores")
                    .label("no cores to link to")
                    .help("set `cores` to the number of core switches, or remove `core_uplinks`");
            }
            if !ok {
                return None;
            }
            let (n, l) = generate::hpn_size(&p);
            if !check_size(d, n, l, &span) {
                return None;
            }
            (
                TopologyKind::Hpn {
                    segments: p.segments,
                    hosts_per_segment: p.hosts_per_segment,
                    backup_hosts: p.backup_hosts,
                    rails: p.rails,
                    planes: p.planes,
                    aggs_per_plane: p.aggs_per_plane,
                    cores: p.cores,
                    core_uplinks: p.core_uplinks,
                },
                generate::hpn(&p),
            )
        }
        "custom" => {
            let (graph, spans) = read_custom(d, &s.extra, span.clone())?;
            inline_spans = spans;
            (TopologyKind::Custom, graph)
        }
        _ => return None,
    };
    Some(Topo {
        kind: tkind,
        graph,
        span,
        inline_spans,
    })
}

fn check_size(d: &mut Diags<'_>, nodes: u64, links: u64, span: &Range<usize>) -> bool {
    if nodes > MAX_NODES || links > MAX_LINKS {
        d.error(
            Some(span.clone()),
            format!("topology too large: {nodes} nodes and {links} links"),
        )
        .label("too large")
        .help(format!(
            "turbonet handles at most {MAX_NODES} nodes and {MAX_LINKS} links per lab"
        ));
        return false;
    }
    true
}

fn read_custom(
    d: &mut Diags<'_>,
    extra: &BTreeMap<&str, &Spanned<DeValue<'_>>>,
    span: Range<usize>,
) -> Option<(Graph, Vec<ParamSpans>)> {
    let errors_before = d.count();
    let mut graph = Graph::default();
    let mut by_name: HashMap<String, (u32, Range<usize>)> = HashMap::new();
    let Some(nodes) = extra.get("nodes") else {
        d.error(Some(span), "a `custom` topology needs `[[topology.nodes]]`")
            .label("no nodes")
            .help("add nodes with `[[topology.nodes]]`, `name = \"r1\"`, `role = \"switch\"` (or \"host\")");
        return None;
    };
    let node_items = array_items(d, nodes, "`topology.nodes`", "[[topology.nodes]]")?;
    let mut switch_index = 0u64;
    for item in node_items {
        let keys = Keys {
            allowed: fields_of::<RawNode>(),
            extra: &[],
            foreign: &[],
            foreign_reason: "",
        };
        let Some(n) = read_table::<RawNode>(d, item, "`[[topology.nodes]]`", keys) else {
            continue;
        };
        let Some(name) = n.raw.name else {
            d.error(Some(n.span), "missing `name` in `[[topology.nodes]]`")
                .label("node needs a name")
                .help("add e.g. `name = \"r1\"`");
            continue;
        };
        let role = match &n.raw.role {
            None => Role::Switch,
            Some(r) => match r.get_ref().as_str() {
                "switch" => Role::Switch,
                "host" => Role::Host,
                other => {
                    d.error(Some(r.span()), format!("unknown role `{other}`"))
                        .label("unknown role")
                        .help(choices_help(other, "roles of custom nodes", CUSTOM_ROLES));
                    continue;
                }
            },
        };
        let text = name.get_ref();
        if let Err(why) = check_node_name(text) {
            d.error(Some(name.span()), format!("invalid node name `{text}`: {why}"))
                .label("invalid name")
                .help("a node name is 1-40 bytes of a-z, 0-9 and -, starting with a letter or digit, without `--`");
            continue;
        }
        if let Some((_, first)) = by_name.get(text.as_str()) {
            let (line, _) = d.line_col(first.start);
            d.error(Some(name.span()), format!("duplicate node name `{text}`"))
                .label("defined again here")
                .help(format!(
                    "node names must be unique; `{text}` is first defined at line {line}"
                ));
            continue;
        }
        let asn = match (&n.raw.asn, role) {
            (Some(a), Role::Host) => {
                d.error(Some(a.span()), "a host has no ASN")
                    .label("hosts do not run BGP")
                    .help("remove `asn`, or make the node a switch with `role = \"switch\"`");
                continue;
            }
            (Some(a), _) => AsnSlot::Explicit(*a.get_ref()),
            (None, Role::Host) => AsnSlot::None,
            (None, _) => {
                switch_index += 1;
                AsnSlot::Offset(1000 + switch_index - 1)
            }
        };
        by_name.insert(text.clone(), (graph.nodes.len() as u32, name.span()));
        graph.push_node(GNode {
            name: text.clone(),
            role,
            pod: None,
            plane: None,
            backup: false,
            asn,
        });
    }
    let names: Vec<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut links = Vec::new();
    if let Some(ls) = extra.get("links") {
        for item in array_items(d, ls, "`topology.links`", "[[topology.links]]").unwrap_or_default()
        {
            let keys = Keys {
                allowed: fields_of::<RawCustomLink>(),
                extra: &["loss"],
                foreign: &[],
                foreign_reason: "",
            };
            let Some(mut l) = read_table::<RawCustomLink>(d, item, "`[[topology.links]]`", keys)
            else {
                continue;
            };
            let (params, spans) =
                read_params(d, &l.raw.take_params(), l.extra.get("loss").copied());
            let end = |d: &mut Diags<'_>, v: &Option<Spanned<String>>, key: &str| -> Option<u32> {
                let Some(v) = v else {
                    d.error(
                        Some(l.span.clone()),
                        format!("missing `{key}` in `[[topology.links]]`"),
                    )
                    .label("link needs both ends")
                    .help("a link is `{ a = \"r1\", b = \"r2\" }` with two node names");
                    return None;
                };
                let name = v.get_ref();
                match by_name.get(name.as_str()) {
                    Some((id, _)) => Some(*id),
                    None => {
                        let declared = if names.is_empty() {
                            "no nodes are declared".to_owned()
                        } else if names.len() <= 8 {
                            format!("declared nodes: {}", names.join(", "))
                        } else {
                            format!(
                                "declared nodes: {}, ... ({} in all)",
                                names[..8].join(", "),
                                names.len()
                            )
                        };
                        let help = match did_you_mean(name, names.iter().copied()) {
                            Some(g) => format!("did you mean `{g}`? {declared}"),
                            None => {
                                format!("{declared}; nodes are declared with `[[topology.nodes]]`")
                            }
                        };
                        d.error(Some(v.span()), format!("unknown node `{name}` in link"))
                            .label("no such node")
                            .help(help);
                        None
                    }
                }
            };
            let a = end(d, &l.raw.a, "a");
            let b = end(d, &l.raw.b, "b");
            let (Some(a), Some(b)) = (a, b) else { continue };
            let (Some(a_span), Some(b_span)) = (l.raw.a.as_ref(), l.raw.b.as_ref()) else {
                continue;
            };
            if a == b {
                d.error(Some(b_span.span()), "a link cannot join a node to itself")
                    .label("same node as `a`")
                    .help("use two different node names");
                continue;
            }
            let (ra, rb) = (graph.nodes[a as usize].role, graph.nodes[b as usize].role);
            if ra == Role::Host && rb == Role::Host {
                d.error(
                    Some(a_span.span().start..b_span.span().end),
                    "a link cannot join two hosts",
                )
                .label("both ends are hosts")
                .help("hosts attach to switches; add a switch between them");
                continue;
            }
            let (lo, hi) = if rb == Role::Host { (b, a) } else { (a, b) };
            links.push((lo, hi, params, spans));
        }
    }
    if links.len() as u64 > MAX_LINKS || graph.nodes.len() as u64 > MAX_NODES {
        check_size(d, graph.nodes.len() as u64, links.len() as u64, &span);
    }
    if d.count() > errors_before {
        return None;
    }
    // One host subnet per switch that has hosts; a host attached to several
    // switches gets one address in each of their subnets.
    let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut seen: HashSet<(u32, u32)> = HashSet::new();
    let mut inline_spans = Vec::with_capacity(links.len());
    for (lo, hi, params, spans) in links {
        inline_spans.push(spans);
        if graph.nodes[lo as usize].role == Role::Host && seen.insert((hi, lo)) {
            groups.entry(hi).or_default().push(lo);
        }
        let inline = (params != LinkParams::default()).then_some(params);
        graph.push_link(lo, hi, inline);
    }
    graph.groups = groups
        .into_iter()
        .map(|(s, hosts)| generate::HostGroup {
            switches: vec![s],
            hosts,
        })
        .collect();
    Some((graph, inline_spans))
}

fn check_node_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > 40 {
        return Err(format!("it is {} bytes long, the limit is 40", name.len()));
    }
    check_name_chars(name)?;
    if name.contains("--") {
        return Err("`--` separates the ends of link names".into());
    }
    Ok(())
}

/// The tables of an array of tables (`[[x]]`).
pub(crate) fn array_items<'a, 'i>(
    d: &mut Diags<'_>,
    v: &'a Spanned<DeValue<'i>>,
    what: &str,
    syntax: &str,
) -> Option<&'a [Spanned<DeValue<'i>>]> {
    match v.get_ref().as_array() {
        Some(a) => Some(a),
        None => {
            d.error(
                Some(v.span()),
                format!(
                    "{what} must be an array of tables, found {}",
                    v.get_ref().type_str()
                ),
            )
            .label("expected an array of tables")
            .help(format!("write each entry under its own `{syntax}` header"));
            None
        }
    }
}

// ---------------------------------------------------------------------------
// [links]

#[derive(Default)]
struct LinkConfig {
    default: LinkParams,
    default_spans: ParamSpans,
    classes: HashMap<LinkClass, LinkParams>,
    class_spans: HashMap<LinkClass, ParamSpans>,
    overrides: Vec<(Spanned<String>, LinkParams, ParamSpans)>,
}

fn read_links(d: &mut Diags<'_>, v: &Spanned<DeValue<'_>>, kind: Option<&str>) -> LinkConfig {
    let mut cfg = LinkConfig::default();
    let Some(table) = v.get_ref().as_table() else {
        d.error(Some(v.span()), "`links` must be a table")
            .label("expected a table")
            .help("write `[links.default]`, `[links.<class>]` and `[[links.override]]` sections");
        return cfg;
    };
    let classes: Vec<&str> = match kind {
        Some(k) => classes_of(k).to_vec(),
        None => KINDS.iter().flat_map(|k| classes_of(k)).copied().collect(),
    };
    let mut valid: Vec<&str> = vec!["default"];
    valid.extend(&classes);
    valid.push("override");
    let param_keys = Keys {
        allowed: fields_of::<RawParams>(),
        extra: &["loss"],
        foreign: &[],
        foreign_reason: "",
    };
    let mut class_entries = Vec::new();
    for (key, value) in table {
        let name: &str = key.get_ref();
        match name {
            "default" => {
                if let Some(s) = read_table::<RawParams>(d, value, "`[links.default]`", param_keys)
                {
                    (cfg.default, cfg.default_spans) =
                        read_params(d, &s.raw, s.extra.get("loss").copied());
                }
            }
            "override" => {
                let Some(items) = array_items(d, value, "`links.override`", "[[links.override]]")
                else {
                    continue;
                };
                for item in items {
                    let keys = Keys {
                        allowed: fields_of::<RawOverride>(),
                        extra: &["loss"],
                        foreign: &[],
                        foreign_reason: "",
                    };
                    let Some(s) = read_table::<RawOverride>(d, item, "`[[links.override]]`", keys)
                    else {
                        continue;
                    };
                    let span = s.span.clone();
                    let loss = s.extra.get("loss").copied();
                    let (link, raw) = s.raw.into_parts();
                    let (params, spans) = read_params(d, &raw, loss);
                    match link {
                        Some(link) => cfg.overrides.push((link, params, spans)),
                        None => {
                            d.error(Some(span), "missing `link` in `[[links.override]]`")
                                .label("which link?")
                                .help("add e.g. `link = \"edge0-0--agg0-0\"` (see `turbonet validate --links` for names)");
                        }
                    }
                }
            }
            _ if classes.contains(&name) => {
                let what = format!("`[links.{name}]`");
                if let Some(s) = read_table::<RawParams>(d, value, &what, param_keys) {
                    let (params, spans) = read_params(d, &s.raw, s.extra.get("loss").copied());
                    if let Some(class) = class_from_str(name) {
                        class_entries.push((class, params, spans));
                    }
                }
            }
            _ => {
                let what = match kind {
                    Some(k) => format!("link classes of `{k}` topologies"),
                    None => "link classes".to_owned(),
                };
                let msg = match kind {
                    Some(k) if class_from_str(name).is_some() => {
                        format!("`{name}` is not a link class of `{k}` topologies")
                    }
                    _ => format!("unknown link class `{name}` in `[links]`"),
                };
                let mut help = choices_help(name, &what, &classes);
                help.push_str("; also `default` and `override`");
                d.error(Some(key.span()), msg)
                    .label("unknown link class")
                    .help(help);
            }
        }
    }
    for (class, params, spans) in class_entries {
        cfg.classes.insert(class, params);
        cfg.class_spans.insert(class, spans);
    }
    cfg
}

/// Where the keys that other keys depend on were written, so that an
/// inconsistency found on a link after the levels are merged points at the
/// line that caused it. A key is recorded when present, valid or not, so a
/// bad `rate` does not also make its `queue` "rate-less".
#[derive(Debug, Clone, Default)]
pub(crate) struct ParamSpans {
    rate: Option<Range<usize>>,
    queue: Option<Range<usize>>,
    ecn: Option<Range<usize>>,
}

impl ParamSpans {
    fn overlay(&mut self, top: &ParamSpans) {
        for (base, top) in [
            (&mut self.rate, &top.rate),
            (&mut self.queue, &top.queue),
            (&mut self.ecn, &top.ecn),
        ] {
            if top.is_some() {
                base.clone_from(top);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.rate.is_none() && self.queue.is_none() && self.ecn.is_none()
    }
}

/// Parses the values of a parameter table, reporting each bad one. `loss`
/// is the raw `loss` value (a probability or a Gilbert-Elliott table).
pub(crate) fn read_params(
    d: &mut Diags<'_>,
    raw: &RawParams,
    loss: Option<&Spanned<DeValue<'_>>>,
) -> (LinkParams, ParamSpans) {
    let span = |v: &Option<Spanned<toml::Value>>| v.as_ref().map(toml::Spanned::span);
    let params = LinkParams {
        rate: unit::<Rate>(d, &raw.rate, "rate"),
        delay: unit::<Delay>(d, &raw.delay, "delay"),
        jitter: unit::<Delay>(d, &raw.jitter, "jitter"),
        jitter_distribution: raw.jitter_distribution.as_ref().and_then(|v| {
            let Some(text) = v.get_ref().as_str() else {
                d.error(
                    Some(v.span()),
                    format!(
                        "expected a string for `jitter_distribution`, found {}",
                        v.get_ref().type_str()
                    ),
                )
                .label("expected a string")
                .help(example_for("jitter_distribution"));
                return None;
            };
            match text.parse::<JitterDistribution>() {
                Ok(x) => Some(x),
                Err(e) => {
                    d.error(Some(v.span()), e.message().to_owned())
                        .label("unknown distribution")
                        .help(e.hint().unwrap_or_default());
                    None
                }
            }
        }),
        reorder: raw.reorder.as_ref().and_then(|v| match v.get_ref() {
            toml::Value::Boolean(b) => Some(*b),
            other => {
                let help = match other.as_str() {
                    Some(t @ ("true" | "false")) => {
                        format!("write it without quotes: `reorder = {t}`")
                    }
                    _ => example_for("reorder").to_owned(),
                };
                d.error(
                    Some(v.span()),
                    format!(
                        "expected `true` or `false` for `reorder`, found {}",
                        other.type_str()
                    ),
                )
                .label("expected a boolean")
                .help(help);
                None
            }
        }),
        loss: loss.and_then(|v| read_loss(d, v)),
        corrupt: unit::<LossProb>(d, &raw.corrupt, "corrupt"),
        duplicate: unit::<LossProb>(d, &raw.duplicate, "duplicate"),
        queue: unit::<QueueLimit>(d, &raw.queue, "queue"),
        ecn: unit::<QueueLimit>(d, &raw.ecn, "ecn"),
        mtu: unit::<Mtu>(d, &raw.mtu, "mtu"),
    };
    let spans = ParamSpans {
        rate: span(&raw.rate),
        queue: span(&raw.queue),
        ecn: span(&raw.ecn),
    };
    (params, spans)
}

/// `loss = "0.1%"` (Bernoulli) or `loss = { p = "1%", r = "25%", bad =
/// "100%", good = "0%" }` (Gilbert-Elliott).
fn read_loss(d: &mut Diags<'_>, v: &Spanned<DeValue<'_>>) -> Option<Loss> {
    if v.get_ref().is_table() {
        let keys = Keys {
            allowed: GE_KEYS,
            extra: &[],
            foreign: &[],
            foreign_reason: "",
        };
        let what = "the Gilbert-Elliott `loss` table";
        let s = read_table::<RawGilbertElliott>(d, v, what, keys)?;
        let g = &s.raw;
        let missing = |d: &mut Diags<'_>, key: &str, meaning: &str| {
            d.error(Some(s.span.clone()), format!("missing `{key}` in {what}"))
                .label(format!("needs `{key}`"))
                .help(format!(
                    "`{key}` is {meaning}; e.g. `loss = {{ p = \"1%\", r = \"25%\" }}` (`bad` defaults to 100%, `good` to 0%)"
                ));
        };
        if g.p.is_none() {
            missing(d, "p", "the good->bad transition probability per packet");
        }
        if g.r.is_none() {
            missing(d, "r", "the bad->good transition probability per packet");
        }
        let p = unit::<LossProb>(d, &g.p, "p");
        let r = unit::<LossProb>(d, &g.r, "r");
        let bad = match &g.bad {
            None => Some(LossProb(1.0)),
            Some(_) => unit::<LossProb>(d, &g.bad, "bad"),
        };
        let good = match &g.good {
            None => Some(LossProb::ZERO),
            Some(_) => unit::<LossProb>(d, &g.good, "good"),
        };
        return Some(Loss::GilbertElliott {
            p: p?,
            r: r?,
            bad: bad?,
            good: good?,
        });
    }
    let text = match v.get_ref() {
        DeValue::String(s) => s.to_string(),
        DeValue::Integer(i) => i.as_str().to_owned(),
        DeValue::Float(f) => f.as_str().to_owned(),
        other => {
            d.error(
                Some(v.span()),
                format!(
                    "expected a probability or a table for `loss`, found {}",
                    other.type_str()
                ),
            )
            .label("expected a string or a table")
            .help(example_for("loss"));
            return None;
        }
    };
    match text.parse::<LossProb>() {
        Ok(p) => Some(Loss::Bernoulli(p)),
        Err(e) => {
            d.error(Some(v.span()), format!("invalid `loss`: {}", e.message()))
                .label("invalid loss")
                .help(e.hint().unwrap_or_default());
            None
        }
    }
}

pub(crate) fn unit<T: FromStr<Err = UnitError>>(
    d: &mut Diags<'_>,
    v: &Option<Spanned<toml::Value>>,
    key: &str,
) -> Option<T> {
    let v = v.as_ref()?;
    let text = match v.get_ref() {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        other => {
            d.error(
                Some(v.span()),
                format!("expected a string for `{key}`, found {}", other.type_str()),
            )
            .label("expected a string")
            .help(example_for(key));
            return None;
        }
    };
    match text.parse::<T>() {
        Ok(x) => Some(x),
        Err(e) => {
            d.error(Some(v.span()), format!("invalid `{key}`: {}", e.message()))
                .label(format!("invalid {key}"))
                .help(e.hint().unwrap_or_default());
            None
        }
    }
}

pub(crate) fn example_for(key: &str) -> &'static str {
    match key {
        "rate" => "e.g. `rate = \"10gbit\"`",
        "delay" | "jitter" => "e.g. `delay = \"5us\"`",
        "loss" => {
            "e.g. `loss = \"0.01%\"` (independent) or `loss = { p = \"1%\", r = \"25%\" }` (Gilbert-Elliott bursts)"
        }
        "corrupt" | "duplicate" => "e.g. `corrupt = \"0.01%\"`",
        "ecn" => "e.g. `ecn = \"60p\"` or `ecn = \"30KiB\"`",
        "jitter_distribution" => {
            "e.g. `jitter_distribution = \"normal\"` (uniform, normal, pareto, paretonormal)"
        }
        "reorder" => "e.g. `reorder = true`",
        "queue" => "e.g. `queue = \"1000p\"`",
        "mtu" => "e.g. `mtu = 9000`",
        "at" => "e.g. `at = \"5s\"` (time after the fabric is ready)",
        "period" => "e.g. `period = \"2s\"`",
        _ => "",
    }
}

/// Applies `[[links.override]]`; returns, per overridden link, where its
/// overrides set the keys that [`check_link_params`] looks at.
fn apply_overrides(
    d: &mut Diags<'_>,
    fabric: &mut Fabric,
    overrides: &[(Spanned<String>, LinkParams, ParamSpans)],
) -> HashMap<usize, ParamSpans> {
    let mut spans: HashMap<usize, ParamSpans> = HashMap::new();
    if overrides.is_empty() {
        return spans;
    }
    let index: HashMap<&str, usize> = fabric
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| (l.name.as_str(), i))
        .collect();
    let mut found = Vec::new();
    for (name, params, keys) in overrides {
        match index.get(name.get_ref().as_str()) {
            Some(&i) => {
                spans.entry(i).or_default().overlay(keys);
                found.push((i, params));
            }
            None => {
                let help = close_link_names(name.get_ref(), fabric);
                d.error(
                    Some(name.span()),
                    format!("no link named `{}`", name.get_ref()),
                )
                .label("unknown link")
                .help(help);
            }
        }
    }
    for (i, params) in found {
        fabric.links[i].params.overlay(params);
    }
    spans
}

/// What can be wrong with a link's merged parameters, ordered as the
/// errors are reported at one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    QueueWithoutRate,
    EcnWithoutRate,
    EcnAboveQueue,
}

/// Checks the combinations of a link's parameters once every level
/// (default, class, inline, overrides) is merged: `rate` may come from
/// `[links.default]` and `queue` from an override. The rules are
/// [`LinkParams::check`]'s; here each problem is reported once per
/// offending key (with the first link it affects and how many others), not
/// once per link: one bad `[links.default]` would otherwise give a thousand
/// identical errors.
fn check_link_params(
    d: &mut Diags<'_>,
    fabric: &Fabric,
    cfg: &LinkConfig,
    inline: &[ParamSpans],
    overrides: &HashMap<usize, ParamSpans>,
) {
    let nothing = cfg.default_spans.is_empty()
        && cfg.class_spans.values().all(ParamSpans::is_empty)
        && inline.iter().all(ParamSpans::is_empty)
        && overrides.values().all(ParamSpans::is_empty);
    if nothing {
        return;
    }
    // (problem, span) -> (first link, number of links, queue span)
    type Key = (Problem, usize, usize);
    let mut found: BTreeMap<Key, (usize, usize, Option<Range<usize>>)> = BTreeMap::new();
    for (i, link) in fabric.links.iter().enumerate() {
        let mut spans = cfg.default_spans.clone();
        if let Some(c) = cfg.class_spans.get(&link.class) {
            spans.overlay(c);
        }
        if let Some(s) = inline.get(i) {
            spans.overlay(s);
        }
        if let Some(s) = overrides.get(&i) {
            spans.overlay(s);
        }
        let mut p = link.params.clone();
        if p.rate.is_none() && spans.rate.is_some() {
            // A `rate` was written but its value is invalid (already
            // reported): the link is not rate-less.
            p.rate = Some(Rate(1));
        }
        for problem in p.problems() {
            let (kind, span, queue) = match problem {
                ParamProblem::QueueWithoutRate => (Problem::QueueWithoutRate, &spans.queue, None),
                ParamProblem::EcnWithoutRate => (Problem::EcnWithoutRate, &spans.ecn, None),
                ParamProblem::EcnAboveQueue { .. } => {
                    (Problem::EcnAboveQueue, &spans.ecn, spans.queue.clone())
                }
            };
            // Every key set on a link was written somewhere; a key without
            // a span cannot be located and is not reported twice.
            let Some(span) = span else { continue };
            let e = found
                .entry((kind, span.start, span.end))
                .or_insert((i, 0, queue));
            e.1 += 1;
        }
    }
    for ((problem, start, end), (first, count, queue_span)) in found {
        let link = &fabric.links[first];
        let others = match count - 1 {
            0 => String::new(),
            1 => " (and 1 other link)".to_owned(),
            n => format!(" (and {n} other links)"),
        };
        let name = &link.name;
        match problem {
            Problem::QueueWithoutRate => {
                d.error(
                    Some(start..end),
                    format!("`queue` is set but link `{name}`{others} has no `rate`"),
                )
                .label("nothing drains this queue")
                .help(
                    "a queue is drained at the link's `rate`: add e.g. `rate = \"10gbit\"` \
                     next to it (or in `[links.default]`), or remove `queue`",
                );
            }
            Problem::EcnWithoutRate => {
                d.error(
                    Some(start..end),
                    format!("`ecn` is set but link `{name}`{others} has no `rate`"),
                )
                .label("no queue to mark from")
                .help(
                    "ECN marks packets when the queue drained at `rate` is at least this deep: \
                     add e.g. `rate = \"10gbit\"` next to it (or in `[links.default]`), or remove `ecn`",
                );
            }
            Problem::EcnAboveQueue => {
                let ecn = link.params.ecn.map(|e| e.to_string()).unwrap_or_default();
                let queue = link.params.queue.unwrap_or(LinkParams::DEFAULT_QUEUE);
                let whence = match &queue_span {
                    Some(q) => format!("`queue = \"{queue}\"` at line {}", d.line_col(q.start).0),
                    None => format!("the default queue of {queue}"),
                };
                d.error(
                    Some(start..end),
                    format!(
                        "`ecn` threshold {ecn} is above the queue limit {queue} of link `{name}`{others}"
                    ),
                )
                .label("the queue never gets this deep")
                .help(format!(
                    "nothing would ever be marked: the queue is limited by {whence}; set `ecn` below `queue` (e.g. a fifth of it) or raise `queue`"
                ));
            }
        }
    }
}

pub(crate) fn close_link_names(name: &str, fabric: &Fabric) -> String {
    if let Some((a, b)) = name.split_once("--") {
        let (b, n) = b.split_once(':').map_or((b, None), |(b, n)| (b, Some(n)));
        let reversed = match n {
            Some(n) => format!("{b}--{a}:{n}"),
            None => format!("{b}--{a}"),
        };
        if fabric.link_by_name(&reversed).is_some() {
            return format!("did you mean `{reversed}`? link names put the lower tier first");
        }
    }
    let close: Vec<String> =
        crate::suggest::closest(name, fabric.links.iter().map(|l| l.name.as_str()))
            .into_iter()
            .map(|n| format!("`{n}`"))
            .collect();
    let example = fabric.links.first().map_or_else(
        || "this topology has no links".to_owned(),
        |l| {
            format!(
                "link names look like `{}` (lower tier first, `:1`, `:2` for parallel links)",
                l.name
            )
        },
    );
    if close.is_empty() {
        example
    } else {
        format!("close names: {}; {example}", close.join(", "))
    }
}

// ---------------------------------------------------------------------------
// [[external]]

fn read_externals(
    d: &mut Diags<'_>,
    v: &Spanned<DeValue<'_>>,
    mut fabric: Option<&mut Fabric>,
    pools: Option<&Pools>,
    routing: &RoutingRead,
) {
    let Some(items) = array_items(d, v, "`external`", "[[external]]") else {
        return;
    };
    let mut seen_interfaces: HashMap<(Option<String>, String), Range<usize>> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        let keys = Keys {
            allowed: fields_of::<RawExternal>(),
            extra: &["bgp"],
            foreign: &[],
            foreign_reason: "",
        };
        let Some(s) = read_table::<RawExternal>(d, item, "`[[external]]`", keys) else {
            continue;
        };
        let e = s.raw;
        let mut ok = true;
        let mut missing = |d: &mut Diags<'_>, key: &str, example: &str| {
            ok = false;
            d.error(
                Some(s.span.clone()),
                format!("missing `{key}` in `[[external]]`"),
            )
            .label(format!("needs `{key}`"))
            .help(format!("add e.g. `{key} = {example}`"));
        };
        if e.node.is_none() {
            missing(d, "node", "\"edge0-0\"");
        }
        if e.interface.is_none() {
            missing(d, "interface", "\"enp3s0\"");
        }
        if e.address.is_none() {
            missing(d, "address", "\"192.0.2.1/24\"");
        }
        // Interface names.
        let check_ifname = |d: &mut Diags<'_>, v: &Spanned<String>, key: &str| -> bool {
            let name = v.get_ref();
            let why = if name.is_empty() {
                Some("it is empty".to_owned())
            } else if name.len() > IFNAMSIZ {
                Some(format!(
                    "it is {} bytes long, the limit is {IFNAMSIZ}",
                    name.len()
                ))
            } else if name == "." || name == ".." {
                Some("`.` and `..` are not interface names".to_owned())
            } else {
                name.chars()
                    .find(|c| *c == '/' || *c == ':' || c.is_whitespace() || c.is_control())
                    .map(|c| format!("{c:?} is not allowed"))
            };
            if let Some(why) = why {
                d.error(
                    Some(v.span()),
                    format!("invalid interface name `{name}` in `{key}`: {why}"),
                )
                .label("invalid interface name")
                .help("Linux interface names are 1-15 bytes without `/`, `:` or spaces");
                return false;
            }
            true
        };
        if let Some(i) = &e.interface {
            ok &= check_ifname(d, i, "interface");
        }
        if let Some(n) = &e.name {
            ok &= check_ifname(d, n, "name");
        }
        if let Some(ns) = &e.netns {
            let name = ns.get_ref();
            if name.is_empty()
                || name.contains('/')
                || name == "."
                || name == ".."
                || name.len() > 255
            {
                ok = false;
                d.error(Some(ns.span()), format!("invalid namespace name `{name}`"))
                    .label("invalid namespace")
                    .help("a named network namespace as listed by `ip netns list` (a file name under /run/netns)");
            }
        }
        if let (Some(i), true) = (&e.interface, ok) {
            let key = (
                e.netns.as_ref().map(|n| n.get_ref().clone()),
                i.get_ref().clone(),
            );
            if let Some(first) = seen_interfaces.get(&key) {
                ok = false;
                let (line, _) = d.line_col(first.start);
                d.error(
                    Some(i.span()),
                    format!("interface `{}` is attached twice", i.get_ref()),
                )
                .label("already attached")
                .help(format!(
                    "it is already used by the `[[external]]` at line {line}"
                ));
            } else {
                seen_interfaces.insert(key, i.span());
            }
        }
        // Addresses.
        let address = e.address.as_ref().and_then(|a| {
            let text = a.get_ref().trim();
            let parsed: Result<Ipv4Net, _> = text.parse();
            match parsed {
                Ok(net) if net.prefix_len() <= 31 && (net.prefix_len() == 31 || (net.addr() != net.network() && net.addr() != net.broadcast())) => Some((net, a.span())),
                Ok(net) if net.prefix_len() == 32 => {
                    d.error(Some(a.span()), format!("external address `{text}` has no subnet"))
                        .label("/32 has no on-link network")
                        .help(format!("give the node's address with the subnet's length, e.g. \"{}/24\"", net.addr()));
                    None
                }
                Ok(net) => {
                    d.error(Some(a.span()), format!("`{text}` is the network or broadcast address of {}", net.trunc()))
                        .label("not a host address")
                        .help("use a host address of the subnet, e.g. the first usable one");
                    None
                }
                Err(_) => {
                    d.error(Some(a.span()), format!("invalid external address `{text}`"))
                        .label("invalid address")
                        .help("write the node's IPv4 address with its prefix length, e.g. \"192.0.2.1/24\"");
                    None
                }
            }
        });
        if address.is_none() {
            ok = false;
        }
        let gateway = match &e.gateway {
            None => None,
            Some(g) => match g.get_ref().trim().parse::<Ipv4Addr>() {
                Ok(gw) => {
                    if let Some((net, _)) = &address
                        && (!net.contains(&gw) || gw == net.addr())
                    {
                        ok = false;
                        d.error(
                            Some(g.span()),
                            format!("gateway {gw} is not a neighbor on {}", net.trunc()),
                        )
                        .label("not on the external subnet")
                        .help(format!(
                            "the gateway must be another address in {}",
                            net.trunc()
                        ));
                    }
                    Some(gw)
                }
                Err(_) => {
                    ok = false;
                    d.error(Some(g.span()), format!("invalid gateway `{}`", g.get_ref()))
                        .label("invalid address")
                        .help("write an IPv4 address, e.g. \"192.0.2.2\"");
                    None
                }
            },
        };
        let mut routes = Vec::new();
        for r in e.routes.iter().flatten() {
            match parse_net(r.get_ref().trim()) {
                Ok(net) => {
                    if gateway.is_none() && e.gateway.is_none() {
                        ok = false;
                        d.error(Some(r.span()), "`routes` need a `gateway`")
                            .label("no next hop")
                            .help("add `gateway = \"<next hop on the external subnet>\"`");
                    }
                    routes.push((net, r.span()));
                }
                Err((why, help)) => {
                    ok = false;
                    d.error(
                        Some(r.span()),
                        format!("invalid route `{}`: {why}", r.get_ref()),
                    )
                    .label("invalid network")
                    .help(help);
                }
            }
        }
        // The eBGP neighbour; its ASN is checked once the node is known.
        let mut peer = (None, None);
        if let Some(bgp) = s.extra.get("bgp") {
            if let Some(span) = key_span(item, "bgp") {
                ok &= routing.check_bgp_only(d, span, "bgp", "`[[external]]`");
            }
            peer = read_external_peer(d, bgp, address.as_ref().map(|(net, _)| *net));
            ok &= peer.0.is_some() && peer.1.is_some();
        }
        // External networks must not collide with the fabric's pools.
        if let Some(pools) = pools {
            let nets = address
                .iter()
                .map(|(n, s)| (n.trunc(), s.clone()))
                .chain(routes.iter().cloned());
            for (net, span) in nets {
                for pool in [&pools.loopbacks, &pools.fabric, &pools.hosts] {
                    if overlaps(&net, &pool.net) {
                        ok = false;
                        d.error(Some(span.clone()), format!("{net} overlaps the `{}` pool {}", pool.key, pool.net))
                            .label("overlaps a fabric pool")
                            .help("external networks must be outside the loopbacks, fabric and hosts pools of `[addressing]`; pick another network or move the pool");
                    }
                }
            }
        }
        let Some(fabric) = fabric.as_deref_mut() else {
            continue;
        };
        let Some(node_v) = &e.node else { continue };
        let node_name = node_v.get_ref();
        let node = match fabric.node_by_name(node_name) {
            Some(n) if n.role.is_switch() => n.id,
            Some(_) => {
                d.error(
                    Some(node_v.span()),
                    format!("`{node_name}` is a host; external ports attach to switches"),
                )
                .label("not a switch")
                .help("pick a switch, e.g. the host's ToR/edge/leaf");
                continue;
            }
            None => {
                let names = fabric.switches().map(|n| n.name.as_str());
                let help = match did_you_mean(node_name, names) {
                    Some(g) => format!(
                        "did you mean `{g}`? external ports attach to any switch of the fabric"
                    ),
                    None => {
                        let first = fabric
                            .switches()
                            .next()
                            .map(|n| n.name.clone())
                            .unwrap_or_default();
                        format!("external ports attach to any switch of the fabric, e.g. `{first}`")
                    }
                };
                d.error(
                    Some(node_v.span()),
                    format!("external port on unknown node `{node_name}`"),
                )
                .label("no such switch")
                .help(help);
                continue;
            }
        };
        let ifname = e
            .name
            .as_ref()
            .map_or_else(|| format!("ext{index}"), |n| n.get_ref().clone());
        let clash = fabric
            .ports(node)
            .any(|(_, local, _)| local.ifname == ifname)
            || fabric
                .externals
                .iter()
                .any(|x| x.node == node && x.ifname == ifname);
        if clash {
            let span = e.name.as_ref().map_or(s.span.clone(), toml::Spanned::span);
            d.error(
                Some(span),
                format!("interface name `{ifname}` is already used in `{node_name}`"),
            )
            .label("name taken")
            .help("set `name` to an interface name not used by the node's links");
            continue;
        }
        if let (_, Some((asn, asn_span))) = &peer
            && fabric.node(node).asn == Some(*asn)
        {
            d.error(
                Some(asn_span.clone()),
                format!("the BGP peer's ASN {asn} is the ASN of `{node_name}`"),
            )
            .label("same ASN as the node")
            .help(format!(
                "an external neighbour is an eBGP peer: give it an ASN other than {asn} \
                     (e.g. a private ASN from 64512 to 65534)"
            ));
            continue;
        }
        if !ok {
            continue;
        }
        let Some((addr, _)) = address else { continue };
        let Some(interface) = e.interface else {
            continue;
        };
        fabric.prefixes.push(Prefix {
            net: addr.trunc(),
            attached: vec![node],
            kind: PrefixKind::External {
                gateway: None,
                ifname: ifname.clone(),
            },
        });
        for (net, _) in &routes {
            fabric.prefixes.push(Prefix {
                net: *net,
                attached: vec![node],
                kind: PrefixKind::External {
                    gateway,
                    ifname: ifname.clone(),
                },
            });
        }
        fabric.externals.push(ExternalPort {
            node,
            interface: interface.into_inner(),
            netns: e.netns.map(toml::Spanned::into_inner),
            ifname,
            addr,
            routes: routes.into_iter().map(|(n, _)| n).collect(),
            gateway,
            bgp: match peer {
                (Some(addr), Some((asn, _))) => Some(ExternalPeer { addr, asn }),
                _ => None,
            },
        });
    }
}

/// Reads `bgp = { peer, asn }` of an `[[external]]` whose address is
/// `address` (`None` when it is missing or invalid). Returns the peer's
/// address and its ASN with where it was written, each `None` when it is
/// missing or invalid (reported), so that the ASN can still be checked
/// against the node's when the address is wrong.
fn read_external_peer(
    d: &mut Diags<'_>,
    v: &Spanned<DeValue<'_>>,
    address: Option<Ipv4Net>,
) -> (Option<Ipv4Addr>, Option<(Asn, Range<usize>)>) {
    const WHAT: &str = "`bgp` of `[[external]]`";
    let keys = Keys {
        allowed: fields_of::<RawExternalPeer>(),
        extra: &[],
        foreign: &[],
        foreign_reason: "",
    };
    let Some(s) = read_table::<RawExternalPeer>(d, v, WHAT, keys) else {
        return (None, None);
    };
    // An example neighbour: the first host address of the subnet that is
    // not the node's.
    let example = address
        .and_then(|net| net.hosts().find(|h| *h != net.addr()))
        .unwrap_or(Ipv4Addr::new(192, 0, 2, 2));
    let peer = match &s.raw.peer {
        None => {
            d.error(Some(s.span.clone()), format!("missing `peer` in {WHAT}"))
                .label("needs `peer`")
                .help(format!(
                    "add the neighbour's address on the external subnet, e.g. `peer = \"{example}\"`"
                ));
            None
        }
        Some(p) => match p.get_ref().trim().parse::<Ipv4Addr>() {
            Err(_) => {
                d.error(
                    Some(p.span()),
                    format!("invalid BGP peer address `{}`", p.get_ref()),
                )
                .label("invalid address")
                .help(format!(
                    "write the neighbour's IPv4 address on the external subnet, e.g. \"{example}\""
                ));
                None
            }
            Ok(addr) => match address {
                // The port's address is wrong and already reported.
                None => None,
                Some(net) => {
                    let subnet = net.trunc();
                    let problem = if !subnet.contains(&addr) {
                        Some((
                            format!("BGP peer {addr} is not on the external subnet {subnet}"),
                            "not on the external subnet",
                        ))
                    } else if addr == net.addr() {
                        Some((
                            format!("BGP peer {addr} is the node's own address on this port"),
                            "the node's own address",
                        ))
                    } else if net.prefix_len() < 31
                        && (addr == net.network() || addr == net.broadcast())
                    {
                        Some((
                            format!(
                                "BGP peer {addr} is the network or broadcast address of {subnet}"
                            ),
                            "not a host address",
                        ))
                    } else {
                        None
                    };
                    match problem {
                        Some((message, label)) => {
                            d.error(Some(p.span()), message).label(label).help(format!(
                                "the neighbour is directly connected: give another host address \
                                 of {subnet} than the node's {}, e.g. \"{example}\"",
                                net.addr()
                            ));
                            None
                        }
                        None => Some(addr),
                    }
                }
            },
        },
    };
    let asn = match &s.raw.asn {
        None => {
            d.error(Some(s.span.clone()), format!("missing `asn` in {WHAT}"))
                .label("needs `asn`")
                .help("add the neighbour's ASN, e.g. `asn = 65010`");
            None
        }
        Some(a) => match a.get_ref() {
            toml::Value::Integer(n) => match u32::try_from(*n) {
                Ok(n) if n >= 1 => Some((Asn(n), a.span())),
                _ => {
                    let help = if *n == 0 {
                        "ASN 0 is reserved and never used by a BGP speaker (RFC 7607)"
                    } else {
                        "4-byte ASNs (RFC 6793) are from 1 to 4294967295; private ones are \
                         64512-65534 and 4200000000-4294967294"
                    };
                    d.error(
                        Some(a.span()),
                        format!("`asn` in {WHAT} must be from 1 to 4294967295, found {n}"),
                    )
                    .label("invalid ASN")
                    .help(help);
                    None
                }
            },
            other => {
                d.error(
                    Some(a.span()),
                    format!(
                        "`asn` in {WHAT} must be an integer, found {} {other}",
                        other.type_str()
                    ),
                )
                .label("expected an integer")
                .help("write the ASN as a plain integer without quotes, e.g. `asn = 65010`");
                None
            }
        },
    };
    (peer, asn)
}
