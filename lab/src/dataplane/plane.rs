//! The daemon's hold on a running data plane: whatever carries the lab's
//! frames, told the state the fabric must be in and bringing itself there.
//!
//! The daemon owns what is down, every link's parameters and the routes
//! turbonet installs ([`Desired`]); a [`DataPlane`] turns that into its own
//! operations and remembers what it applied, so each change writes only
//! the difference: ports taken down or up, an impairment replaced, a few
//! routes or table entries rewritten. `netns` does it with netlink and the
//! link engine ([`super::netns::NetnsPlane`]); the P4 targets with
//! P4Runtime writes ([`super::p4::P4Plane`]).

use futures::future::LocalBoxFuture;
use serde::{Deserialize, Serialize};
use turbonet_injectors::Counters;
use turbonet_routing::{Failures, Route};
use turbonet_topo::{Link, LinkParams};

use crate::dataplane::agent_routes::PipelineRoutes;
use crate::dataplane::taps::Sink;
use crate::error::Result;

/// What the fabric must look like now.
#[derive(Debug, Clone, Copy)]
pub struct Desired<'a> {
    /// What is down.
    pub failures: &'a Failures,
    /// Every link's parameters, by link id.
    pub params: &'a [LinkParams],
    /// The routes turbonet installs, by node (BGP agents install theirs
    /// themselves).
    pub routes: &'a [Vec<Route>],
}

/// What bringing the fabric to a [`Desired`] state changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Links whose ports went down or up.
    pub links: usize,
    /// Links whose impairment changed.
    pub impairments: usize,
    /// Routes installed, replaced or removed.
    pub routes: usize,
    /// P4Runtime entities written.
    pub entities: usize,
}

/// A running data plane, as the lab daemon drives it.
pub trait DataPlane {
    /// What the daemon says of it when it starts ("link engine for 4
    /// impaired links").
    fn describe(&self) -> String;

    /// Checks, before anything changes, that `link` can take `params` at
    /// run time here; the error says what can.
    fn check_params(&self, link: &Link, params: &LinkParams) -> Result<()>;

    /// Brings the fabric to `desired`, writing only what differs from what
    /// it applied last.
    fn apply<'a>(&'a mut self, desired: Desired<'a>) -> LocalBoxFuture<'a, Result<Applied>>;

    /// Learns that `routes` are what the fabric holds now (the daemon's
    /// first start: what `up` installed, known once computed), so that the
    /// next [`DataPlane::apply`] writes only what differs. A plane that
    /// knew already keeps what it knew.
    fn installed(&mut self, _routes: &[Vec<Route>]) {}

    /// Per-link counters now, for the links it counts (all links, by
    /// link id order).
    fn counters(&mut self) -> LocalBoxFuture<'_, Result<Vec<LinkCounters>>>;

    /// With BGP on a P4 target, the table the built-in agents write their
    /// routes to for the pipeline; `None` where agents install into kernel
    /// tables.
    fn pipeline_routes(&self) -> Option<std::rc::Rc<PipelineRoutes>> {
        None
    }

    /// What starts captures and mirrors on its links, from any thread
    /// (`None`: this target cannot tap links).
    fn tapper(&self) -> Option<std::sync::Arc<dyn Tapping>> {
        None
    }

    /// Stops what it runs (the link engine's thread).
    fn stop(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Starts and stops taps (captures, mirrors) on a running data plane's
/// links, from any thread.
pub trait Tapping: std::fmt::Debug + Send + Sync {
    /// Starts a tap of `directions` of `link` (0: from its first end to its
    /// second) into `sink`; its id.
    fn start(&self, link: &Link, directions: [bool; 2], sink: Sink) -> Result<u64>;

    /// Stops tap `id` (one already over is fine).
    fn stop(&self, id: u64);
}

/// Counters of one link, both directions, as a data plane counts them
/// (the link engine, a switch's counters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkCounters {
    /// Link name.
    pub link: String,
    /// Per direction (0: ends[0] -> ends[1]).
    pub directions: [Counters; 2],
    /// Per direction, what this machine (not the link's model) did to its
    /// frames.
    pub shortfall: [Shortfall; 2],
}

/// Every link's counters, as read at one time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counted {
    /// When they were read, Unix seconds.
    pub at_unix: f64,
    /// The links counted.
    pub links: Vec<LinkCounters>,
}

/// What the machine running a link, rather than the link's model, did to
/// one direction's frames: where a figure measured over the link is this
/// machine's and not the fabric's. Zero where nothing stands between the
/// ends (a veth, a switch's port).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shortfall {
    /// Frames the engine could not transmit (full socket buffer, peer
    /// down).
    pub tx_errors: u64,
    /// Frames the kernel dropped at the engine's receive socket before the
    /// engine read them (it could not keep up).
    pub socket_drops: u64,
    /// Frames that left more than [`Shortfall::LATE_NS`] after their due
    /// time.
    pub late: u64,
    /// The latest any frame left after its due time, nanoseconds.
    pub max_late_ns: u64,
}

impl Shortfall {
    /// Lateness above which a frame counts as late: a millisecond, far
    /// above the engine's wake-up jitter (tens of microseconds), far below
    /// the delays a scenario's figures hang on.
    pub const LATE_NS: u64 = 1_000_000;

    /// What grew from `before` to `self`; the latest lateness is this
    /// one's (it is a maximum, not a count).
    pub fn since(&self, before: &Shortfall) -> Shortfall {
        Shortfall {
            tx_errors: self.tx_errors.saturating_sub(before.tx_errors),
            socket_drops: self.socket_drops.saturating_sub(before.socket_drops),
            late: self.late.saturating_sub(before.late),
            max_late_ns: self.max_late_ns,
        }
    }

    /// What follows [`Shortfall::describe`]'s words.
    pub const CONSEQUENCE: &'static str = "the link engine could not keep up: figures over these links are this machine's, not the fabric's";

    /// In words, when the machine fell short for a direction that passed
    /// `frames` frames (`None`: it did not, or so rarely that the figures
    /// stand: late frames count from one in a hundred).
    pub fn describe(&self, frames: u64) -> Option<String> {
        let mut parts = Vec::new();
        if self.socket_drops > 0 {
            parts.push(format!(
                "{} frames dropped at the engine's socket before it read them",
                self.socket_drops
            ));
        }
        if self.tx_errors > 0 {
            parts.push(format!(
                "{} frames the engine could not transmit",
                self.tx_errors
            ));
        }
        if self.late > 0 && self.late * 100 >= frames.max(1) {
            parts.push(format!(
                "{} of {frames} frames ({:.0}%) left more than {} ms late, the latest {:.1} ms late",
                self.late,
                self.late as f64 * 100.0 / frames.max(1) as f64,
                Self::LATE_NS / 1_000_000,
                self.max_late_ns as f64 / 1e6
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}
