//! Events as they cross the wire and sit in a lab's `events.jsonl`: what
//! happened, on the lab's clock, about what.

use serde::{Deserialize, Serialize};

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedEvent {
    /// Seconds since the fabric was ready.
    pub t: f64,
    /// Unix time, seconds.
    pub unix: f64,
    /// Who: `api`, `timeline`, `flap`, `machines`, `bgp`, `kernel`, `engine`,
    /// `workload`, `daemon`.
    pub source: String,
    /// What kind (`fail`, `link-set`, `session-down`, `route-change`, ...).
    #[serde(default)]
    pub kind: String,
    /// What happened (`fail link edge0-0--agg0-0`).
    pub event: String,
    /// `ok`, or `error: ...`.
    pub result: String,
    /// What it is about, field by field (docs/events.md).
    #[serde(flatten)]
    pub about: About,
    /// On a lab over several machines, the machine it happened on (the
    /// lab's events merged from every part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<u32>,
}

/// What an event is about: the fields a monitor matches its detections
/// against. Those that do not apply are left out of the JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct About {
    /// A node: the switch whose routes or sessions changed, a failed node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A link (`a--b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// A link's direction: frames from this node...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// ... to this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// A BGP session's peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// A workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Why: a drop's cause (`loss`, `queue`), a session's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// A count (frames dropped in a burst) or a queue's depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// The threshold a queue's depth crossed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
    /// The unit of `value` and `threshold` (`frames`, `packets`, `bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// When what this event ends began (a drop burst), on the lab's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<f64>,
    /// A switch's routes that changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteChange>,
}

impl About {
    /// About a node.
    pub fn node(name: impl Into<String>) -> About {
        About {
            node: Some(name.into()),
            ..About::default()
        }
    }

    /// About a link.
    pub fn link(name: impl Into<String>) -> About {
        About {
            link: Some(name.into()),
            ..About::default()
        }
    }

    /// About a workload.
    pub fn workload(name: impl Into<String>) -> About {
        About {
            workload: Some(name.into()),
            ..About::default()
        }
    }
}

/// Prefixes of a switch's forwarding table that changed the same way: to
/// the same next hops, by the same protocol. (A switch converging writes
/// thousands of prefixes to one set of sixty next hops: listed once, not
/// once a prefix.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteChange {
    /// The destinations, ascending.
    pub prefixes: Vec<ipnet::Ipv4Net>,
    /// What happened to them.
    pub change: Change,
    /// The next hops they have now (none when withdrawn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next_hops: Vec<NextHop>,
    /// Who installed it: `static`, `bgp`, `bird`, `kernel` (connected).
    pub protocol: String,
}

/// What happened to a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// It was not in the table.
    Added,
    /// It is no longer in the table.
    Withdrawn,
    /// Its next hops changed.
    Changed,
}

impl Change {
    /// As events and the API name it.
    pub fn name(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Withdrawn => "withdrawn",
            Change::Changed => "changed",
        }
    }
}

/// Where a route sends a packet.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NextHop {
    /// The gateway (`None`: on the link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<std::net::Ipv4Addr>,
    /// The port it leaves by.
    pub ifname: String,
    /// The node at the other end of that port, if it is the lab's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}
