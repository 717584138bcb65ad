//! Route sources: where the routes turbonet installs come from, one per
//! routing mode ([`RouteSource`]):
//!
//! - `static`: equal-cost shortest paths computed once over the whole
//!   fabric; when ports go down a node only stops using next hops through
//!   them, as a kernel does (a pulled cable: nothing further away learns
//!   of it);
//! - `controller`: the same paths recomputed over what is left whenever
//!   something fails or comes back, pushed to every node they change;
//! - `bgp`: the agents route the fabric ([`bgp`]: the built-in speakers the
//!   lab daemon runs, and FRR or BIRD in the switches' namespaces,
//!   [`routers`]); turbonet installs only what no agent announces (host
//!   defaults, the ToRs' host routes, external networks).
//!
//! A source computes; the data plane installs what it computes by
//! difference ([`crate::dataplane::plane::DataPlane::apply`]).

use std::sync::{Arc, OnceLock};

use turbonet_routing::{Failures, Route, RouteOrigin};
use turbonet_topo::{Lab, RoutingMode};

pub mod bgp;
pub mod routers;

/// Where a routing mode's routes come from.
pub trait RouteSource: Send + Sync + std::fmt::Debug {
    /// The routing mode (`static`, `controller`, `bgp`).
    fn mode(&self) -> RoutingMode;

    /// The routes turbonet installs, by node, with `failures` down. May
    /// take long on large fabrics: the daemon calls it off its actor.
    fn routes(&self, failures: &Failures) -> Vec<Vec<Route>>;
}

/// The routes turbonet installs for `lab` with `failures` down, computed
/// afresh (what `up` installs, with nothing down): a [`RouteSource`]
/// without its cache.
pub fn compute(lab: &Lab, failures: &Failures) -> Vec<Vec<Route>> {
    match lab.routing.mode {
        RoutingMode::Static | RoutingMode::Bgp | RoutingMode::Manual => {
            let mut routes = intact(lab, lab.routing.mode != RoutingMode::Static);
            prune(lab, failures, &mut routes);
            routes
        }
        RoutingMode::Controller => turbonet_routing::routes_avoiding(&lab.fabric, failures),
    }
}

/// The static routes of the intact fabric; with `attached_only`, only
/// those outside the fabric.
fn intact(lab: &Lab, attached_only: bool) -> Vec<Vec<Route>> {
    let mut routes = turbonet_routing::static_routes(&lab.fabric);
    if attached_only {
        for node in &mut routes {
            node.retain(|r| r.origin != RouteOrigin::Fabric);
        }
    }
    routes
}

/// Each node's routes without the next hops through its ports that are
/// down.
fn prune(lab: &Lab, failures: &Failures, routes: &mut [Vec<Route>]) {
    if failures != &Failures::default() {
        for (node, mine) in lab.fabric.nodes.iter().zip(routes) {
            failures.prune(&lab.fabric, node.id, mine);
        }
    }
}

/// The route source of `lab`'s routing mode.
pub fn for_lab(lab: Arc<Lab>) -> Arc<dyn RouteSource> {
    match lab.routing.mode {
        RoutingMode::Static => Arc::new(Static::new(lab, false)),
        RoutingMode::Bgp | RoutingMode::Manual => Arc::new(Static::new(lab, true)),
        RoutingMode::Controller => Arc::new(Controller { lab }),
    }
}

/// `static` routing, and what turbonet itself installs under `bgp`: the
/// routes of the intact fabric, each node's pruned of next hops through its
/// ports that are down.
#[derive(Debug)]
pub struct Static {
    lab: Arc<Lab>,
    /// Under `bgp` and `manual`: only the routes outside the fabric (the
    /// rest are the agents' or the user's to install).
    attached_only: bool,
    /// The routes of the intact fabric, computed once (a k=16 fat-tree has
    /// 145,000 of them).
    intact: OnceLock<Vec<Vec<Route>>>,
}

impl Static {
    /// Static routes of `lab`; with `attached_only`, only those outside
    /// the fabric.
    pub fn new(lab: Arc<Lab>, attached_only: bool) -> Static {
        Static {
            lab,
            attached_only,
            intact: OnceLock::new(),
        }
    }

    fn intact(&self) -> &[Vec<Route>] {
        self.intact
            .get_or_init(|| intact(&self.lab, self.attached_only))
    }
}

impl RouteSource for Static {
    fn mode(&self) -> RoutingMode {
        self.lab.routing.mode
    }

    fn routes(&self, failures: &Failures) -> Vec<Vec<Route>> {
        let mut routes = self.intact().to_vec();
        prune(&self.lab, failures, &mut routes);
        routes
    }
}

/// `controller` routing: shortest paths over what is up.
#[derive(Debug)]
pub struct Controller {
    lab: Arc<Lab>,
}

impl RouteSource for Controller {
    fn mode(&self) -> RoutingMode {
        RoutingMode::Controller
    }

    fn routes(&self, failures: &Failures) -> Vec<Vec<Route>> {
        turbonet_routing::routes_avoiding(&self.lab.fabric, failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(mode: &str) -> Arc<Lab> {
        Arc::new(
            turbonet_topo::parse(
                "t.toml",
                &format!(
                    "[lab]\nname = \"t\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n[routing]\nmode = \"{mode}\"\n"
                ),
            )
            .unwrap(),
        )
    }

    #[test]
    fn static_routes_lose_only_the_next_hops_through_ports_that_are_down() {
        let lab = lab("static");
        let source = for_lab(lab.clone());
        let intact = source.routes(&Failures::default());
        assert_eq!(intact, turbonet_routing::static_routes(&lab.fabric));
        let link = lab.fabric.link_by_name("edge0-0--agg0-0").unwrap();
        let failures = Failures {
            links: [link.id].into_iter().collect(),
            ..Failures::default()
        };
        let after = source.routes(&failures);
        let changed: Vec<&str> = lab
            .fabric
            .nodes
            .iter()
            .filter(|n| intact[n.id.0 as usize] != after[n.id.0 as usize])
            .map(|n| n.name.as_str())
            .collect();
        // Only the link's ends change (a pulled cable).
        assert_eq!(changed, ["edge0-0", "agg0-0"]);
    }

    #[test]
    fn the_controller_routes_around_and_bgp_leaves_the_fabric_to_the_agents() {
        let lab = lab("controller");
        let link = lab.fabric.link_by_name("edge0-0--agg0-0").unwrap();
        let failures = Failures {
            links: [link.id].into_iter().collect(),
            ..Failures::default()
        };
        assert_eq!(
            for_lab(lab.clone()).routes(&failures),
            turbonet_routing::routes_avoiding(&lab.fabric, &failures)
        );
        let bgp = for_lab(self::lab("bgp")).routes(&Failures::default());
        assert!(
            bgp.iter()
                .flatten()
                .all(|r| r.origin != RouteOrigin::Fabric)
        );
        assert!(bgp.iter().any(|r| !r.is_empty()));
    }

    #[test]
    fn computing_afresh_gives_what_the_sources_give() {
        for mode in ["static", "controller", "bgp"] {
            let lab = lab(mode);
            let source = for_lab(lab.clone());
            let link = lab.fabric.link_by_name("edge0-0--agg0-0").unwrap();
            let some = Failures {
                links: [link.id].into_iter().collect(),
                ..Failures::default()
            };
            for failures in [Failures::default(), some] {
                assert_eq!(compute(&lab, &failures), source.routes(&failures), "{mode}");
            }
        }
    }
}
