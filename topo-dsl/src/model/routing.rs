//! The `[routing]` section: control-plane mode, BGP agents and timers.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::fabric::NodeId;

/// Routing configuration: the scenario's `[routing]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoutingConfig {
    /// Control-plane mode.
    pub mode: RoutingMode,
    /// Agent of every switch not listed in `agents` (BGP mode; the default,
    /// [`Agent::Builtin`], in the other modes).
    pub agent: Agent,
    /// Per-switch overrides, by node id (switches only; empty outside BGP
    /// mode).
    pub agents: BTreeMap<NodeId, Agent>,
    /// BGP timers for the fabric's sessions ([`BgpTimers::default`]
    /// outside BGP mode).
    pub timers: BgpTimers,
    /// `nexthop_compat`: whether a switch's kernel spells out the next hops
    /// of a route that points at a nexthop group, in `ip route` and in its
    /// route notifications (`None`: [`RoutingConfig::spells_out_next_hops`]
    /// decides by the fabric's size).
    pub nexthop_compat: Option<bool>,
}

impl RoutingConfig {
    /// The most switches whose kernels spell out a group's next hops in
    /// every route unless told otherwise.
    pub const SPELLED_OUT_UP_TO: usize = 256;

    /// Whether the switches' kernels spell out the next hops of routes to
    /// nexthop groups (`net.ipv4.nexthop_compat_mode`) in a fabric of
    /// `switches`: as asked, else in fabrics of at most
    /// [`RoutingConfig::SPELLED_OUT_UP_TO`] switches. Spelled out, `ip route`
    /// shows each next hop (what a lab's student reads); not, the kernel
    /// writes a route's notification without encoding its group's next hops
    /// (sixty a route on an HPN ToR), and `ip route` shows `nhid N`
    /// (`ip nexthop show id N` lists them).
    pub fn spells_out_next_hops(&self, switches: usize) -> bool {
        self.nexthop_compat
            .unwrap_or(switches <= Self::SPELLED_OUT_UP_TO)
    }

    /// The agent `node` runs: its override in `agents`, else `agent`.
    pub fn agent_of(&self, node: NodeId) -> Agent {
        self.agents.get(&node).copied().unwrap_or(self.agent)
    }
}

/// The BGP speaker a switch runs in BGP mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Agent {
    /// turbonet's own BGP speaker.
    #[default]
    Builtin,
    /// FRRouting's `bgpd`.
    Frr,
    /// BIRD.
    Bird,
}

impl Agent {
    /// Every agent, as written in scenarios.
    pub const NAMES: &'static [&'static str] = &["builtin", "frr", "bird"];

    /// Every agent, in the order of [`Agent::NAMES`].
    pub const ALL: [Agent; 3] = [Agent::Builtin, Agent::Frr, Agent::Bird];

    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Builtin => "builtin",
            Agent::Frr => "frr",
            Agent::Bird => "bird",
        }
    }

    /// The agent with this scenario name.
    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Timers of the fabric's BGP sessions, in seconds (RFC 4271 section 10).
/// The parser guarantees `hold_time` is 0 or at least 3 (section 4.2),
/// `keepalive` and `connect_retry` at least 1, and `3 * keepalive <=
/// hold_time` when `hold_time` is not 0 (section 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BgpTimers {
    /// Hold time proposed in OPEN: 0 (no keepalives, the session never
    /// times out) or at least 3.
    pub hold_time: u16,
    /// Interval between KEEPALIVEs, at least 1; at most a third of
    /// `hold_time` when `hold_time` is not 0.
    pub keepalive: u16,
    /// ConnectRetry interval between connection attempts, at least 1.
    pub connect_retry: u16,
}

/// Fast lab timers: hold 3 s, keepalive 1 s, connect retry 1 s, so that a
/// failure is noticed within seconds rather than RFC 4271's suggested 90 s.
impl Default for BgpTimers {
    fn default() -> Self {
        BgpTimers {
            hold_time: 3,
            keepalive: 1,
            connect_retry: 1,
        }
    }
}

/// The keys of `[routing]` that only BGP uses: a scenario of another mode
/// that sets one is refused.
pub const BGP_ONLY_KEYS: [&str; 5] = ["agent", "agents", "hold_time", "keepalive", "connect_retry"];

/// Control-plane modes (TurboNet vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingMode {
    /// Routes computed once, centrally, and installed.
    Static,
    /// A central controller that recomputes on failures.
    Controller,
    /// Only the routes to a node's own neighbours (hosts' default routes,
    /// routed host ports): the routes through the fabric are the user's
    /// to install (a static-routing lab).
    Manual,
    /// One BGP agent per switch.
    Bgp,
}

impl fmt::Display for RoutingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RoutingMode::Static => "static",
            RoutingMode::Controller => "controller",
            RoutingMode::Bgp => "bgp",
            RoutingMode::Manual => "manual",
        })
    }
}
