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
use turbonet_routing::{Failures, Route};
use turbonet_topo::{Link, LinkParams};

use crate::dataplane::agent_routes::PipelineRoutes;
use crate::dataplane::taps::Sink;
use crate::error::Result;

pub use turbonet_api::counters::{Counted, LinkCounters, Shortfall};

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
