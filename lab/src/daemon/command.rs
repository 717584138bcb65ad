//! What the lab daemon's actor runs ([`Command`]), who asks for it
//! ([`Source`]), and the queue it arrives on ([`Queue`]): what the input
//! log records, and what a client's request becomes.

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use turbonet_topo::units::Delay;
use turbonet_topo::{Action, EventTarget, Lab, LinkId, LinkParams};

use crate::error::Result;
use crate::events::About;
use turbonet_api::Target;

/// Who asked for a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A client of the control API (the command line, a script).
    Api,
    /// The scenario's `[[timeline]]`.
    Timeline,
    /// A flap in progress.
    Flap,
    /// The BGP agents.
    Bgp,
    /// Another machine of a lab over several, whose workers mirror a
    /// failure or restore made there.
    Machines,
}

impl Source {
    /// As events name it.
    pub fn name(self) -> &'static str {
        match self {
            Source::Api => "api",
            Source::Timeline => "timeline",
            Source::Flap => "flap",
            Source::Bgp => "bgp",
            Source::Machines => "machines",
        }
    }
}

/// What the actor runs (and the input log records, as JSON: link
/// parameters in scenario syntax, `"delay": "5ms"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Command {
    /// Change some parameters of a link.
    SetLink {
        /// The link.
        link: String,
        /// The parameters to change (those it leaves unset keep their
        /// value).
        params: LinkParams,
    },
    /// Put a link back to the scenario's parameters.
    ResetLink {
        /// The link.
        link: String,
    },
    /// Take something down.
    Fail {
        /// What.
        target: Target,
    },
    /// Bring it back.
    Restore {
        /// What.
        target: Target,
    },
    /// Flap a link `count` times, down for half of `period_ns`, up for the
    /// other half.
    Flap {
        /// The link.
        link: String,
        /// One down/up cycle, in nanoseconds.
        period_ns: u64,
        /// Cycles.
        count: u32,
    },
    /// One step of flap `flap`: the link goes down (`down`) or up.
    FlapTick {
        /// Which flap.
        flap: u64,
        /// Its link (for the events).
        link: String,
        /// Down, or up.
        down: bool,
    },
    /// The scenario's timeline event `index` is due.
    Timeline {
        /// Its position in the timeline.
        index: usize,
    },
    /// The BGP agents changed the routes they hold for a P4 pipeline.
    AgentRoutes,
    /// Start the scenario's workload `name` again, or the workloads of
    /// `text` (`[[job]]` and `[[workload]]` tables from `origin`).
    StartWorkload {
        /// A scenario workload.
        name: Option<String>,
        /// Tables to read.
        text: String,
        /// Where they came from.
        origin: String,
    },
    /// Stop a running workload.
    StopWorkload {
        /// Its name.
        name: String,
    },
}

impl Command {
    /// The command as events name it, a line for people, and what it is
    /// about. A timeline step is the change it makes.
    pub(super) fn describe(&self, lab: &Lab) -> (&'static str, String, About) {
        let target = |t: &Target| match t {
            Target::Link(l) => About::link(l),
            Target::Node(n) => About::node(n),
        };
        match self {
            Command::SetLink { link, params } => (
                "link-set",
                format!("set {link} {params}"),
                About::link(link),
            ),
            Command::ResetLink { link } => {
                ("link-reset", format!("reset {link}"), About::link(link))
            }
            Command::Fail { target: t } => ("fail", format!("fail {t}"), target(t)),
            Command::Restore { target: t } => ("restore", format!("restore {t}"), target(t)),
            Command::Flap {
                link,
                period_ns,
                count,
            } => (
                "flap",
                format!("flap {link} period {} x{count}", Delay(*period_ns)),
                About::link(link),
            ),
            Command::FlapTick { link, down, .. } => (
                if *down { "fail" } else { "restore" },
                format!(
                    "flap: {} link {link}",
                    if *down { "fail" } else { "restore" }
                ),
                About::link(link),
            ),
            Command::Timeline { index } => match lab.timeline.get(*index) {
                Some(e) => {
                    let (kind, _, about) = timeline_command(lab, &e.action).describe(lab);
                    (kind, e.action.display(&lab.fabric).to_string(), about)
                }
                None => (
                    "timeline",
                    format!("timeline event {index}"),
                    About::default(),
                ),
            },
            Command::AgentRoutes => (
                "agent-routes",
                "write the agents' routes".to_owned(),
                About::default(),
            ),
            Command::StartWorkload { name, origin, .. } => match name {
                Some(n) => (
                    "start-workload",
                    format!("start workload {n}"),
                    About::workload(n),
                ),
                None => (
                    "start-workload",
                    format!("start the workloads of {origin}"),
                    About::default(),
                ),
            },
            Command::StopWorkload { name } => (
                "stop-workload",
                format!("stop workload {name}"),
                About::workload(name),
            ),
        }
    }
}

/// A timeline action as the command a client would send.
pub(super) fn timeline_command(lab: &Lab, action: &Action) -> Command {
    let link = |id: LinkId| lab.fabric.link(id).name.clone();
    let target = |t: &EventTarget| match t {
        EventTarget::Link(l) => Target::Link(link(*l)),
        EventTarget::Node(n) => Target::Node(lab.fabric.node(*n).name.clone()),
    };
    match action {
        Action::Set { link: l, params } => Command::SetLink {
            link: link(*l),
            params: params.clone(),
        },
        Action::Reset { link: l } => Command::ResetLink { link: link(*l) },
        Action::Fail(t) => Command::Fail { target: target(t) },
        Action::Restore(t) => Command::Restore { target: target(t) },
        Action::Flap {
            link: l,
            period,
            count,
        } => Command::Flap {
            link: link(*l),
            period_ns: period.as_nanos(),
            count: *count,
        },
    }
}

/// A command with its source and where its answer goes.
#[derive(Debug)]
pub struct Envelope {
    /// Who asked.
    pub source: Source,
    /// What.
    pub command: Command,
    /// The answer (the line for people), if someone waits for it.
    pub reply: Option<oneshot::Sender<Result<String>>>,
}

/// The queue into the actor.
pub type Queue = mpsc::UnboundedSender<Envelope>;

#[cfg(test)]
mod tests {
    use super::*;

    /// What the input log writes, it reads back: every parameter, in
    /// scenario syntax.
    #[test]
    fn commands_round_trip_through_the_input_log() {
        let params: LinkParams = serde_json::from_str(
            r#"{"rate": "10gbit", "delay": "5ms", "jitter": "1ms",
                "jitter_distribution": "pareto", "reorder": true,
                "loss": {"p": "1%", "r": "25%"}, "corrupt": "0.01%",
                "duplicate": "1e-6", "queue": "100p", "ecn": "64KiB"}"#,
        )
        .unwrap();
        assert_eq!(params.pairs().len(), 10);
        let command = Command::SetLink {
            link: "a--b".to_owned(),
            params,
        };
        let json = serde_json::to_string(&command).unwrap();
        assert!(json.contains(r#""delay":"5ms""#), "{json}");
        assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), command);
        for command in [
            Command::Fail {
                target: Target::Node("core0".to_owned()),
            },
            Command::FlapTick {
                flap: 3,
                link: "a--b".to_owned(),
                down: true,
            },
        ] {
            let json = serde_json::to_string(&command).unwrap();
            assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), command);
        }
    }
}
