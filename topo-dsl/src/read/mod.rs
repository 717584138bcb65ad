//! Reading a scenario, one module per section. Each section reads its
//! tables with the helpers of [`reader`] and reports its own errors;
//! [`crate::resolve`] calls the sections in the order they depend on each
//! other and assembles the [`Lab`](crate::Lab).
//!
//! The sections use each other in one direction only (the crate's layering
//! test checks it):
//! - `lab`, `routing`, `addressing`, `params`, `p4rt` and `metrics` use
//!   only `reader`;
//! - `topology` uses `lab` (the rules of names) and `params` (the inline
//!   parameters of custom links);
//! - `links` uses `topology` (the link classes of a kind) and `params`;
//! - `mgmt` uses `addressing` (networks, overlaps);
//! - `externals` uses `addressing` (networks) and `routing` (BGP-only
//!   keys);
//! - `timeline` uses `links` (help for link names) and `params`;
//! - `taps` uses `links` and `timeline` (help for link and node names);
//!   `filters` uses `timeline` (help for node names);
//! - `jobs` uses `timeline` (help for node names); `workloads` uses `jobs`;
//! - `check` (what `[[expect]]` and `[[task.check]]` share) uses `links` (a
//!   link's rate as a reference) and `timeline` (help for node names);
//!   `expect` uses `check`;
//! - `tasks` uses `check`, `addressing` (prefixes) and `lab` (the rules of
//!   names).

pub(crate) mod addressing;
pub(crate) mod check;
pub(crate) mod expect;
pub(crate) mod externals;
pub(crate) mod filters;
pub(crate) mod jobs;
pub(crate) mod lab;
pub(crate) mod links;
pub(crate) mod metrics;
pub(crate) mod mgmt;
pub(crate) mod p4rt;
pub(crate) mod params;
pub(crate) mod reader;
pub(crate) mod routing;
pub(crate) mod taps;
pub(crate) mod tasks;
pub(crate) mod timeline;
pub(crate) mod topology;
pub(crate) mod workloads;
