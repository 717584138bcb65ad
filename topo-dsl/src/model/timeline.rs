//! The timeline: events, and the actions that change a running fabric.

use std::fmt;

use serde::Serialize;

use super::fabric::{Fabric, LinkId, NodeId};
use super::params::LinkParams;
use crate::units::Delay;

/// One entry of the scenario's `[[timeline]]`: an action at a time after
/// the fabric is ready.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Its name, for expectations to refer to (`after = "core-fails"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Time after the fabric is ready (all links up, routes installed).
    pub at: Delay,
    /// What happens then.
    #[serde(flatten)]
    pub action: Action,
}

/// What an event or a CLI verb acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventTarget {
    /// A link: both ends go down (or come back up).
    Link(LinkId),
    /// A node: every link of the node goes down (or comes back up).
    Node(NodeId),
}

/// A change to a running fabric.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Change some parameters of a link; the others keep their current
    /// values. `params` is the patch: only the keys given are set (never
    /// `mtu`), to be applied with [`LinkParams::merged`] over the link's
    /// current parameters.
    Set {
        /// The link.
        link: LinkId,
        /// The keys to change.
        params: LinkParams,
    },
    /// Put a link's parameters back to the scenario's
    /// ([`Link::params`](super::fabric::Link::params)).
    Reset {
        /// The link.
        link: LinkId,
    },
    /// Take a link or a node down.
    Fail(EventTarget),
    /// Bring a failed link or node back up.
    Restore(EventTarget),
    /// Take a link down for `period / 2`, then up for `period / 2`, `count`
    /// times.
    Flap {
        /// The link.
        link: LinkId,
        /// One down/up cycle; the link is down for the first half (rounded
        /// down to the nanosecond) and up for the rest.
        period: Delay,
        /// Number of cycles, at least 1.
        count: u32,
    },
}

impl Action {
    /// The name of the action in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Set { .. } => "set",
            Action::Reset { .. } => "reset",
            Action::Fail(_) => "fail",
            Action::Restore(_) => "restore",
            Action::Flap { .. } => "flap",
        }
    }

    /// The names of the actions, as written in scenario files.
    pub const NAMES: [&'static str; 5] = ["set", "reset", "fail", "restore", "flap"];

    /// What the action acts on.
    pub fn target(&self) -> EventTarget {
        match *self {
            Action::Set { link, .. } | Action::Reset { link } | Action::Flap { link, .. } => {
                EventTarget::Link(link)
            }
            Action::Fail(t) | Action::Restore(t) => t,
        }
    }

    /// A log line with the names of the links and nodes of `fabric`:
    /// `fail link edge0-0--agg0-0`, `set edge0-0--agg0-0 delay=10ms loss=1%`,
    /// `flap agg0-0--core0 period 2s x3`. ([`fmt::Display`] on the action
    /// alone prints ids: `fail link #3`.)
    pub fn display<'a>(&'a self, fabric: &'a Fabric) -> ActionDisplay<'a> {
        ActionDisplay {
            action: self,
            fabric: Some(fabric),
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, fabric: Option<&Fabric>) -> fmt::Result {
        let link = |id: LinkId| -> String {
            match fabric.and_then(|fb| fb.links.get(id.0 as usize)) {
                Some(l) => l.name.clone(),
                None => format!("#{}", id.0),
            }
        };
        let target = |t: EventTarget| -> String {
            match t {
                EventTarget::Link(id) => format!("link {}", link(id)),
                EventTarget::Node(id) => match fabric.and_then(|fb| fb.nodes.get(id.0 as usize)) {
                    Some(n) => format!("node {}", n.name),
                    None => format!("node #{}", id.0),
                },
            }
        };
        match self {
            Action::Set { link: l, params } => write!(f, "set {} {params}", link(*l)),
            Action::Reset { link: l } => write!(f, "reset {}", link(*l)),
            Action::Fail(t) => write!(f, "fail {}", target(*t)),
            Action::Restore(t) => write!(f, "restore {}", target(*t)),
            Action::Flap {
                link: l,
                period,
                count,
            } => write!(f, "flap {} period {period} x{count}", link(*l)),
        }
    }
}

/// Prints an action with ids for names (`fail link #3`, `set #0 delay=10ms`);
/// use [`Action::display`] for link and node names.
impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, None)
    }
}

/// An [`Action`] printed with the names of its links and nodes; see
/// [`Action::display`].
#[derive(Debug, Clone, Copy)]
pub struct ActionDisplay<'a> {
    action: &'a Action,
    fabric: Option<&'a Fabric>,
}

impl fmt::Display for ActionDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.action.write(f, self.fabric)
    }
}
