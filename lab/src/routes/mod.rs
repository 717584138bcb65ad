//! Route sources: where a lab's routes come from. `static` and
//! `controller` routes are computed centrally (`turbonet-routing`);
//! `bgp` routes are the agents' ([`bgp`]: the built-in speakers the lab
//! daemon runs, and FRR or BIRD in the switches' namespaces,
//! [`routers`]).

pub mod bgp;
pub mod routers;
