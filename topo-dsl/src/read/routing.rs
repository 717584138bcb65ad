//! `[routing]`: the control-plane mode, the ASN base (`[routing.asn]`),
//! the routing agent, the BGP timers, and the agents of single switches
//! (`[routing.agents]`), whose names are resolved once the fabric is built.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Keys, Keyword, fields_of, key_span, keyword, read_table};
use crate::diag::{Diags, choices_help};
use crate::model::{Agent, BGP_ONLY_KEYS, BgpTimers, Fabric, NodeId, RoutingMode};
use crate::plan::{self, AsnBase};
use crate::suggest;

/// `[routing]` (`asn` and `agents` are read separately). The timers are
/// kept as values so that a wrong type is reported by name without losing
/// the rest of the section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouting {
    mode: Option<Spanned<String>>,
    agent: Option<Spanned<String>>,
    hold_time: Option<Spanned<toml::Value>>,
    keepalive: Option<Spanned<toml::Value>>,
    connect_retry: Option<Spanned<toml::Value>>,
    nexthop_compat: Option<bool>,
}

/// `[routing.asn]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAsn {
    base: Option<Spanned<u32>>,
}

const MODES: &[(&str, RoutingMode)] = &[
    ("static", RoutingMode::Static),
    ("controller", RoutingMode::Controller),
    ("bgp", RoutingMode::Bgp),
    ("manual", RoutingMode::Manual),
];

/// `[routing]` as read, before the names of `[routing.agents]` can be
/// resolved (they name nodes of the generated fabric).
#[derive(Debug)]
pub(crate) struct RoutingRead {
    /// `None` when `mode` is invalid (or the section is broken).
    pub mode: Option<RoutingMode>,
    /// Where `mode` was written.
    mode_span: Option<Range<usize>>,
    pub asn_base: AsnBase,
    /// `None` when `agent` is invalid.
    pub agent: Option<Agent>,
    /// `None` when a timer is invalid.
    pub timers: Option<BgpTimers>,
    /// `[routing.agents]`: each node name with its span, and the agent
    /// (`None` when the value is invalid).
    agents: Vec<(String, Range<usize>, Option<Agent>)>,
    /// `nexthop_compat`, if given.
    pub nexthop_compat: Option<bool>,
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
            nexthop_compat: None,
        }
    }

    /// Reports `key` (written at `span`, in `what`) when the mode is known
    /// and is not BGP. Returns false when it reported.
    pub(crate) fn check_bgp_only(
        &self,
        d: &mut Diags<'_>,
        span: Range<usize>,
        key: &str,
        what: &str,
    ) -> bool {
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

    /// Resolves the switch names of `[routing.agents]` against the built
    /// fabric. `None` when one is wrong (reported).
    pub(crate) fn resolve_agents(
        &self,
        d: &mut Diags<'_>,
        fabric: &Fabric,
    ) -> Option<BTreeMap<NodeId, Agent>> {
        let mut ok = true;
        let mut agents = BTreeMap::new();
        for (name, span, agent) in &self.agents {
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
                        .map(|sw| {
                            format!(", e.g. `{}`, the switch `{name}` is attached to", sw.name)
                        })
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
                        suggest::closest(name, fabric.switches().map(|n| n.name.as_str()))
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
}

/// Reads `[routing]` (`v`, if present; the defaults otherwise: static
/// routing).
pub(crate) fn read(d: &mut Diags<'_>, v: Option<&Spanned<DeValue<'_>>>) -> RoutingRead {
    let mut out = RoutingRead::defaults();
    let Some(v) = v else { return out };
    let mut allowed: Vec<&str> = fields_of::<RawRouting>().to_vec();
    allowed.extend(["asn", "agents"]);
    let keys = Keys::new(&allowed).extra(&["asn", "agents"]);
    let Some(s) = read_table::<RawRouting>(d, v, "`[routing]`", keys) else {
        out.mode = None;
        return out;
    };
    out.mode_span = s.raw.mode.as_ref().map(toml::Spanned::span);
    out.mode = match &s.raw.mode {
        None => Some(RoutingMode::Static),
        Some(m) => {
            let kw = Keyword {
                what: "routing mode",
                short: "mode",
                plural: "modes",
            };
            keyword(d, m.get_ref(), m.span(), MODES, kw)
        }
    };
    if let Some(asn) = s.extra.get("asn") {
        let keys = Keys::new(fields_of::<RawAsn>());
        if let Some(a) = read_table::<RawAsn>(d, asn, "`[routing.asn]`", keys)
            && let Some(b) = a.raw.base
        {
            out.asn_base = AsnBase {
                base: *b.get_ref(),
                span: Some(b.span()),
            };
        }
    }

    out.nexthop_compat = s.raw.nexthop_compat;

    // BGP-only keys, in file order.
    let given = |key: &str| match key {
        "agent" => s.raw.agent.is_some(),
        "agents" => s.extra.contains_key("agents"),
        "hold_time" => s.raw.hold_time.is_some(),
        "keepalive" => s.raw.keepalive.is_some(),
        "connect_retry" => s.raw.connect_retry.is_some(),
        _ => unreachable!("a BGP-only key this reader does not know: {key}"),
    };
    let mut bgp_keys: Vec<(&str, Range<usize>)> = BGP_ONLY_KEYS
        .into_iter()
        .filter(|k| given(k))
        .filter_map(|k| Some((k, key_span(v, k)?)))
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
